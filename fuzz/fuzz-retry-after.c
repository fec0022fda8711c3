/* fuzz-retry-after.c - Retry-After and retry-after-ms (src/backoff.c), with the real
 * curl_getdate(3) for HTTP-dates (RFC 9110 section 10.2.3).  Input: three lines,
 * retry-after-ms, Retry-After, Date.  Invariants: a hint is -1 or within
 * [0, CG_DURATION_MAX_MS] (RFC 9111 section 1.2.2: an overflowing value is the largest,
 * never a wrapped one); a number read in seconds is never less than the same text read
 * in milliseconds. */
#include "backoff.h"
#include "fuzz.h"
#include "saturate.h"

#include <curl/curl.h>

static time_t getdate_fn(const char *s, const time_t *now) { return curl_getdate(s, now); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *f[3], *copy = cg_fuzz_fields(data, size, f, 3);
  int64_t v, s1000, s1;
  size_t i;

  v = cg_hint_ms(f[0], f[1], f[2], INT64_C(1786635403000), getdate_fn);
  CG_FUZZ_CHECK(v == -1 || (v >= 0 && v <= CG_DURATION_MAX_MS), "hint %lld", (long long) v);
  v = cg_hint_ms(NULL, f[1], NULL, INT64_C(1786635403000), getdate_fn);
  CG_FUZZ_CHECK(v == -1 || (v >= 0 && v <= CG_DURATION_MAX_MS), "hint %lld", (long long) v);
  for (i = 0; i < 3; i++) {
    if (!f[i])
      continue;
    s1000 = cg_parse_decimal_ms(f[i], 1000.0);
    s1 = cg_parse_decimal_ms(f[i], 1.0);
    CG_FUZZ_CHECK((s1000 < 0) == (s1 < 0), "\"%s\": %lld vs %lld", f[i], (long long) s1000,
                  (long long) s1);
    CG_FUZZ_CHECK(s1000 <= CG_DURATION_MAX_MS && s1000 >= s1, "\"%s\": %lld s-ms < %lld ms",
                  f[i], (long long) s1000, (long long) s1);
  }
  free(copy);
  return 0;
}
