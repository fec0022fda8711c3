/* fuzz-exporter.c - what `curlguard exporter` reads from the network and its command
 * line (cli/exporter-http.c): the request head's end, its routing, and the listen
 * address.  Invariants: the head's end is 0 or within the buffer and ends in a blank line
 * (LF LF or CR LF CR LF); the route is one of the five; HEAD is only ever set for GET- or
 * HEAD-routed heads; a split address gives a port of 1 to 5 digits within 0..65535 and a
 * host that fits its buffer, or a reason. */
#include "fuzz.h"
#include "exporter.h"

#include <ctype.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *buf = (const char *) data;
  char *s, host[256], port[16], why[256];
  size_t end = cg_exporter_head_end(buf, size), i;
  int head_only = -1;
  enum cg_route r;

  CG_FUZZ_CHECK(end <= size, "head end %zu beyond %zu", end, size);
  if (end > 0) {
    CG_FUZZ_CHECK(end >= 2 && buf[end - 1] == '\n' &&
                      (buf[end - 2] == '\n' || (end >= 4 && buf[end - 2] == '\r' &&
                                                buf[end - 3] == '\n' && buf[end - 4] == '\r')),
                  "head end %zu is not after a blank line", end);
  }
  r = cg_exporter_route(buf, end > 0 ? end : size, &head_only);
  CG_FUZZ_CHECK(r >= CG_ROUTE_METRICS && r <= CG_ROUTE_BAD_REQUEST, "route %d", (int) r);
  if (head_only == 1)
    CG_FUZZ_CHECK(r == CG_ROUTE_METRICS || r == CG_ROUTE_INDEX || r == CG_ROUTE_NOT_FOUND,
                  "HEAD set on route %d", (int) r);

  s = cg_fuzz_str(data, size);
  if (cg_exporter_addr(s, host, sizeof(host), port, sizeof(port), why, sizeof(why)) == 0) {
    size_t n = strlen(port);
    CG_FUZZ_CHECK(n >= 1 && n <= 5, "port \"%s\"", port);
    for (i = 0; i < n; i++)
      CG_FUZZ_CHECK(isdigit((unsigned char) port[i]), "port \"%s\"", port);
    CG_FUZZ_CHECK(atol(port) <= 65535, "port %s", port);
    CG_FUZZ_CHECK(strlen(host) < sizeof(host), "host overflow");
  } else {
    CG_FUZZ_CHECK(why[0] != '\0', "no reason for a refused address");
  }
  free(s);
  return 0;
}
