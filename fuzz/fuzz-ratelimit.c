/* fuzz-ratelimit.c - provider rate-limit headers (src/ratelimit.c): OpenAI Go durations,
 * Anthropic RFC 3339 resets, IETF RateLimit.  Input: up to 13 header values, one a line,
 * in the order of struct cg_rl_headers, then the wall clock as a decimal number of ms.
 * Invariants: limits -1 or > 0, remaining >= -1, resets -1 or within
 * [0, CG_DURATION_MAX_MS]; the two leaf parsers likewise. */
#include "fuzz.h"
#include "ratelimit.h"
#include "saturate.h"

#define NF 14

static void check_reset(int64_t v, const char *what) {
  CG_FUZZ_CHECK(v == -1 || (v >= 0 && v <= CG_DURATION_MAX_MS), "%s %lld", what,
                (long long) v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *f[NF], *copy = cg_fuzz_fields(data, size, f, NF);
  struct cg_rl_headers h = {f[0], f[1], f[2], f[3], f[4], f[5], f[6],
                            f[7], f[8], f[9], f[10], f[11], f[12]};
  struct cg_rl_signal s;
  int64_t now = f[13] ? strtoll(f[13], NULL, 10) : INT64_C(1796019450000);
  size_t i;

  cg_rl_parse(&h, now, &s);
  CG_FUZZ_CHECK(s.requests_limit == -1 || s.requests_limit > 0, "limit %lld",
                (long long) s.requests_limit);
  CG_FUZZ_CHECK(s.tokens_limit == -1 || s.tokens_limit > 0, "limit %lld",
                (long long) s.tokens_limit);
  CG_FUZZ_CHECK(s.requests_remaining >= -1 && s.tokens_remaining >= -1, "remaining");
  check_reset(s.requests_reset_ms, "requests_reset_ms");
  check_reset(s.tokens_reset_ms, "tokens_reset_ms");
  for (i = 0; i < NF; i++) {
    if (!f[i])
      continue;
    check_reset(cg_rl_go_duration_ms(f[i]), "go duration");
    (void) cg_rl_rfc3339_ms(f[i]);
  }
  free(copy);
  return 0;
}
