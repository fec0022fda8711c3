/* fallback.c - rewriting a request to a pool's fallback base (see fallback.h). */
#include "fallback.h"

#include "url.h"

#include <stdio.h>
#include <string.h>

/* Whether the authority `auth` (`len` bytes, no userinfo) has no port, or a port of 1 to
 * 65535 in decimal digits. */
static int cg__port_ok(const char *auth, size_t len) {
  const char *end = auth + len, *colon;
  long port = 0;

  if (auth < end && *auth == '[') { /* IPv6: the port follows the bracket */
    const char *close = memchr(auth, ']', len);
    if (!close)
      return 0;
    colon = close + 1 < end && close[1] == ':' ? close + 1 : NULL;
  } else {
    colon = memchr(auth, ':', len);
  }
  if (!colon)
    return 1;
  if (colon + 1 == end || end - colon - 1 > 5)
    return 0;
  for (colon++; colon < end; colon++) {
    if (*colon < '0' || *colon > '9')
      return 0;
    port = port * 10 + (*colon - '0');
  }
  return port >= 1 && port <= 65535;
}

int cg_fallback_base_ok(const char *base) {
  struct cg_url u;
  const char *auth;
  size_t alen;

  if (!base || strlen(base) >= CG_FALLBACK_MAX || strpbrk(base, "?# \t\r\n"))
    return 0;
  if (cg_url_parse(base, &u) != 0 || !cg_url_is_http(&u) || !u.host[0])
    return 0;
  if (!(auth = strstr(base, "://")))
    return 0;
  auth += 3;
  alen = strcspn(auth, "/");
  if (memchr(auth, '@', alen))
    return 0; /* credentials in a URL would be logged */
  return cg__port_ok(auth, alen);
}

int cg_fallback_url(const char *base, const char *url, char *out, size_t len) {
  const char *auth = strstr(url, "://"), *rest;
  size_t blen = strlen(base), rlen;
  int n;

  if (!auth)
    return -1;
  auth += 3;
  rest = auth + strcspn(auth, "/?#"); /* the path and query (a fragment is not sent) */
  rlen = strcspn(rest, "#");
  while (blen && base[blen - 1] == '/')
    blen--;
  n = snprintf(out, len, "%.*s%s%.*s", (int) blen, base,
               (rlen && rest[0] == '?') || !rlen ? "/" : "", (int) rlen, rest);
  return n < 0 || (size_t) n >= len ? -1 : 0;
}
