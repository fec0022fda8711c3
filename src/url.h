/* url.h - the parts of a request URL that the guard records.
 *
 * A small RFC 3986 split: scheme "://" [userinfo "@"] host [":" port] [path] ["?" query]
 * ["#" fragment].  The query string and userinfo are never kept (they carry keys).
 *
 * What is a scheme, and what a URL without one means, follows libcurl 7.88 (lib/url.c
 * parseurlandfillconn passes CURLU_GUESS_SCHEME; lib/urlapi.c Curl_is_absolute_url and
 * parseurl): a scheme is ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) followed by ":" and a
 * "/" (so "file:/etc/hostname" is a file: URL, "localhost:3000" a host and port); after
 * it one to three slashes lead to the authority.  Without one, CURLOPT_DEFAULT_PROTOCOL
 * is used when set, else the host's first label guesses it: "ftp." ftp, "dict." dict,
 * "ldap." ldap, "imap." imap, "smtp." smtp, "pop3." pop3 (case-insensitive), anything
 * else http.  A file: URL has no host: `scheme` is "file", `host` is empty.
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

/* Split `url`.  Returns 0 on success, -1 when no host can be found (a file: URL is
 * split into its scheme and path, and returns -1 too: it never goes to a host). */
int cg_url_parse(const char *url, struct cg_url *out);

/* The same, with `default_scheme` (CURLOPT_DEFAULT_PROTOCOL; NULL: none) for a URL
 * without a scheme instead of libcurl's guess. */
int cg_url_parse_default(const char *url, const char *default_scheme, struct cg_url *out);

/* 1 for the schemes the guard handles (http, https). */
int cg_url_is_http(const struct cg_url *u);

#endif
