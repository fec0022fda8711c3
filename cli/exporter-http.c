/* exporter-http.c - the exporter's listen address and request parsing (see exporter.h).
 * Pure: no I/O, no globals (tests/unit/test-prom.c calls them directly). */
#include "exporter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int cg_exporter_addr(const char *addr, char *host, size_t hostlen, char *port,
                     size_t portlen, char *why, size_t whylen) {
  const char *colon, *h = addr, *p;
  size_t hl;
  long v = 0;

  if (!addr || !*addr) {
    snprintf(why, whylen, "an empty listen address (want HOST:PORT, e.g. 127.0.0.1:9464)");
    return -1;
  }
  if (addr[0] == '[') {
    const char *close = strchr(addr, ']');
    if (!close || close[1] != ':') {
      snprintf(why, whylen, "listen address \"%s\": want [IPv6]:PORT, e.g. [::1]:9464", addr);
      return -1;
    }
    h = addr + 1;
    hl = (size_t) (close - h);
    if (hl == 0) { /* "[]": no address (getaddrinfo would listen on every interface) */
      snprintf(why, whylen, "listen address \"%s\": want [IPv6]:PORT, e.g. [::1]:9464", addr);
      return -1;
    }
    colon = close + 1;
  } else {
    colon = strrchr(addr, ':');
    if (!colon) {
      snprintf(why, whylen, "listen address \"%s\" has no port (want HOST:PORT, e.g. "
               "127.0.0.1:9464)", addr);
      return -1;
    }
    if (memchr(addr, ':', (size_t) (colon - addr))) {
      snprintf(why, whylen, "listen address \"%s\": write an IPv6 address in brackets, "
               "e.g. [::1]:9464", addr);
      return -1;
    }
    hl = (size_t) (colon - addr);
  }
  p = colon + 1;
  if (!*p || strlen(p) > 5 || strspn(p, "0123456789") != strlen(p) ||
      (v = strtol(p, NULL, 10)) > 65535) {
    snprintf(why, whylen, "listen address \"%s\": the port must be a number from 0 to 65535",
             addr);
    return -1;
  }
  if (hl + 1 > hostlen || strlen(p) + 1 > portlen) {
    snprintf(why, whylen, "listen address \"%.200s\" is too long", addr);
    return -1;
  }
  memcpy(host, h, hl);
  host[hl] = '\0';
  snprintf(port, portlen, "%ld", v);
  return 0;
}

size_t cg_exporter_head_end(const char *buf, size_t len) {
  size_t i;
  for (i = 0; i + 1 < len; i++) {
    if (buf[i] == '\n' && buf[i + 1] == '\n')
      return i + 2;
    if (i + 3 < len && buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' &&
        buf[i + 3] == '\n')
      return i + 4;
  }
  return 0;
}

enum cg_route cg_exporter_route(const char *head, size_t len, int *head_only) {
  char line[1024];
  const char *eol = memchr(head, '\n', len);
  size_t n = eol ? (size_t) (eol - head) : len, i;
  char *method, *target, *version, *sp, *q, root[] = "/";

  *head_only = 0;
  if (n && head[n - 1] == '\r')
    n--;
  if (n == 0 || n >= sizeof(line))
    return CG_ROUTE_BAD_REQUEST;
  memcpy(line, head, n);
  line[n] = '\0';
  for (i = 0; i < n; i++)
    if ((unsigned char) line[i] < 0x20 || (unsigned char) line[i] == 0x7F)
      return CG_ROUTE_BAD_REQUEST; /* a NUL, a tab, a lone CR: not a request line */
  /* method SP request-target SP HTTP-version (RFC 9112 section 3) */
  method = line;
  if (!(sp = strchr(method, ' ')))
    return CG_ROUTE_BAD_REQUEST;
  *sp = '\0';
  target = sp + 1;
  if (!(sp = strchr(target, ' ')))
    return CG_ROUTE_BAD_REQUEST;
  *sp = '\0';
  version = sp + 1;
  /* absolute-form (RFC 9112 section 3.2.2: "a server MUST accept the absolute-form in
   * requests"), as a client sends it to a proxy, or some do anyway: its path is the
   * target ("http://host:9100" alone asks for "/") */
  if (strncasecmp(target, "http://", 7) == 0 || strncasecmp(target, "https://", 8) == 0) {
    char *auth = strstr(target, "://") + 3, *slash = auth + strcspn(auth, "/?");
    if (slash == auth)
      return CG_ROUTE_BAD_REQUEST; /* no host */
    target = *slash == '/' ? slash : root; /* "http://host", "http://host?q": "/" */
  }
  if (!*method || strspn(method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != strlen(method) ||
      target[0] != '/' || strncmp(version, "HTTP/1.", 7) != 0 || version[7] < '0' ||
      version[7] > '9' || version[8])
    return CG_ROUTE_BAD_REQUEST;
  if (strcmp(method, "HEAD") == 0)
    *head_only = 1;
  else if (strcmp(method, "GET") != 0)
    return CG_ROUTE_BAD_METHOD;
  if ((q = strchr(target, '?')))
    *q = '\0';
  if (strcmp(target, "/metrics") == 0)
    return CG_ROUTE_METRICS;
  if (strcmp(target, "/") == 0)
    return CG_ROUTE_INDEX;
  return CG_ROUTE_NOT_FOUND;
}
