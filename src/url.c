/* url.c - split a request URL into the parts the guard records (see url.h). */
#include "url.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void cg__copy_lower(char *dst, size_t cap, const char *src, size_t n) {
  size_t i;
  if (n >= cap)
    n = cap - 1;
  for (i = 0; i < n; i++)
    dst[i] = (char) tolower((unsigned char) src[i]);
  dst[n] = '\0';
}

/* libcurl's guess for a URL without a scheme, from the host's first label (urlapi.c). */
static const char *cg__guess(const char *host, size_t n) {
  static const char *const guess[] = {"ftp", "dict", "ldap", "imap", "smtp", "pop3"};
  size_t i;
  for (i = 0; i < sizeof(guess) / sizeof(guess[0]); i++) {
    size_t len = strlen(guess[i]);
    if (n > len && strncasecmp(host, guess[i], len) == 0 && host[len] == '.')
      return guess[i];
  }
  return "http";
}

/* The port in [p, end): decimal digits only, 0 to 65535 (libcurl refuses others), else
 * -1 (unknown).  Not atoi: found by fuzzing, "h:99999999999" overflowed to 1215752191. */
static int cg__port(const char *p, const char *end) {
  long v = 0;
  if (p == end)
    return -1;
  for (; p < end; p++) {
    if (!isdigit((unsigned char) *p))
      return -1;
    v = v * 10 + (*p - '0');
    if (v > 65535)
      return -1;
  }
  return (int) v;
}

int cg_url_parse(const char *url, struct cg_url *out) {
  return cg_url_parse_default(url, NULL, out);
}

int cg_url_parse_default(const char *url, const char *default_scheme, struct cg_url *out) {
  const char *p = url, *sep, *auth_end, *host, *host_end, *at;
  int guessed = 0;

  memset(out, 0, sizeof(*out));
  out->port = -1;
  if (!url)
    return -1;
  while (*p == ' ' || *p == '\t')
    p++;
  /* A scheme is ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) (RFC 3986 section 3.1)
   * followed by ":/" (libcurl's Curl_is_absolute_url with guessing on); "://" anywhere
   * else (e.g. in a query) is not one. */
  sep = p;
  if (isalpha((unsigned char) *sep))
    while (isalnum((unsigned char) *sep) || *sep == '+' || *sep == '-' || *sep == '.')
      sep++;
  if (sep > p && sep[0] == ':' && sep[1] == '/') {
    /* A longer scheme than the buffer is none the guard handles: kept cut short. */
    cg__copy_lower(out->scheme, sizeof(out->scheme), p, (size_t) (sep - p));
    p = sep + 1;
    if (strcmp(out->scheme, "file") == 0) {
      /* No host: file:/path, file:///path, file://localhost/path. */
      size_t n = strcspn(p, "?#");
      if (n >= sizeof(out->path))
        n = sizeof(out->path) - 1;
      memcpy(out->path, p, n);
      out->path[n] = '\0';
      return -1;
    }
    if (p[1] == '/' && p[2] == '/' && p[3] == '/')
      return -1; /* libcurl: CURLUE_BAD_SLASHES */
    while (*p == '/')
      p++; /* libcurl takes one to three */
  } else if (default_scheme && *default_scheme) {
    cg__copy_lower(out->scheme, sizeof(out->scheme), default_scheme, strlen(default_scheme));
  } else {
    guessed = 1; /* from the host, below */
  }
  auth_end = p + strcspn(p, "/?#");
  at = memchr(p, '@', (size_t) (auth_end - p));
  /* The last '@' ends the userinfo (it may itself contain '@' in a password). */
  while (at) {
    const char *next = memchr(at + 1, '@', (size_t) (auth_end - at - 1));
    if (!next)
      break;
    at = next;
  }
  host = at ? at + 1 : p;
  if (*host == '[') {
    const char *close = memchr(host, ']', (size_t) (auth_end - host));
    if (!close)
      return -1;
    cg__copy_lower(out->host, sizeof(out->host), host + 1, (size_t) (close - host - 1));
    host_end = close + 1;
  } else {
    host_end = memchr(host, ':', (size_t) (auth_end - host));
    if (!host_end)
      host_end = auth_end;
    cg__copy_lower(out->host, sizeof(out->host), host, (size_t) (host_end - host));
  }
  if (out->host[0] == '\0')
    return -1;
  if (guessed)
    snprintf(out->scheme, sizeof(out->scheme), "%s", cg__guess(out->host, strlen(out->host)));
  if (*host_end == ':' && host_end + 1 < auth_end)
    out->port = cg__port(host_end + 1, auth_end);
  else if (strcmp(out->scheme, "http") == 0)
    out->port = 80;
  else if (strcmp(out->scheme, "https") == 0)
    out->port = 443;
  if (*auth_end == '/') {
    size_t n = strcspn(auth_end, "?#");
    if (n >= sizeof(out->path))
      n = sizeof(out->path) - 1;
    memcpy(out->path, auth_end, n);
    out->path[n] = '\0';
  } else {
    strcpy(out->path, "/");
  }
  return 0;
}

int cg_url_is_http(const struct cg_url *u) {
  return strcmp(u->scheme, "http") == 0 || strcmp(u->scheme, "https") == 0;
}
