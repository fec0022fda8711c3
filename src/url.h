/* url.h - the parts of a request URL that the guard records.
 *
 * A small RFC 3986 split: scheme "://" [userinfo "@"] host [":" port] [path] ["?" query]
 * ["#" fragment].  The query string and userinfo are never kept (they carry keys).
 * libcurl's own default of "http" for a URL without a scheme is followed.
 */
#ifndef CG_URL_H
#define CG_URL_H

#include <stddef.h>

struct cg_url {
  char scheme[16]; /* lower case, e.g. "https" */
  char host[256];  /* lower case, without brackets for IPv6 */
  int port;        /* explicit port or the scheme's default, -1 unknown */
  char path[1024]; /* "/" when empty; no query, no fragment; cut at 1023 bytes */
};

/* Split `url`.  Returns 0 on success, -1 when no host can be found. */
int cg_url_parse(const char *url, struct cg_url *out);

/* 1 for the schemes the guard handles (http, https). */
int cg_url_is_http(const struct cg_url *u);

#endif
