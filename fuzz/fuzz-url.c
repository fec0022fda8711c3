/* fuzz-url.c - splitting a request URL (src/url.c).  Invariants: on success the host is
 * non-empty and lower case, the port is -1 (unknown) or 0..65535, the path starts with
 * '/' and holds no query or fragment (records never carry the query, SPEC section 5). */
#include "fuzz.h"
#include "url.h"

#include <ctype.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = cg_fuzz_str(data, size);
  struct cg_url u;
  size_t i;

  if (cg_url_parse(s, &u) == 0) {
    CG_FUZZ_CHECK(u.host[0] != '\0', "empty host");
    for (i = 0; u.host[i]; i++)
      CG_FUZZ_CHECK(!isupper((unsigned char) u.host[i]), "host not lower case: %s", u.host);
    CG_FUZZ_CHECK(u.port == -1 || (u.port >= 0 && u.port <= 65535), "port %d", u.port);
    CG_FUZZ_CHECK(u.path[0] == '/', "path %s", u.path);
    CG_FUZZ_CHECK(!strpbrk(u.path, "?#"), "query or fragment in the path: %s", u.path);
    (void) cg_url_is_http(&u);
  }
  free(s);
  return 0;
}
