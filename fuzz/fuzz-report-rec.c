/* fuzz-report-rec.c - one usage-log line as `curlguard report` reads it
 * (cli/report-rec.c), the RFC 3339 timestamps and the UTF-8 repair it uses.
 * Invariants: an accepted record has attempt >= 1, non-negative (or null) tokens and
 * durations, a non-empty outcome; a parsed timestamp formats and parses back to itself;
 * repaired strings are valid UTF-8. */
#include "fuzz.h"
#include "report-rec.h"

#include <math.h>

static void nonneg(int64_t v, const char *what) {
  CG_FUZZ_CHECK(v == CG_RNULL || v >= 0, "%s %lld", what, (long long) v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct cg_rrec r;
  int64_t ms, back;
  char buf[64], *rep;
  size_t bad = 9, valid, n;

  memset(&r, 0, sizeof(r));
  if (cg_rrec_parse((const char *) data, size, &r) == CG_RBAD_NONE) {
    CG_FUZZ_CHECK(r.attempt >= 1, "attempt %lld", (long long) r.attempt);
    CG_FUZZ_CHECK(r.outcome && r.outcome[0] && r.request_id, "outcome/request_id");
    nonneg(r.duration_ms, "duration_ms");
    nonneg(r.prompt_tokens, "prompt_tokens");
    nonneg(r.completion_tokens, "completion_tokens");
    nonneg(r.total_tokens, "total_tokens");
    nonneg(r.cached_tokens, "cached_tokens");
    CG_FUZZ_CHECK(isnan(r.cost_usd) || r.cost_usd >= 0, "cost %g", r.cost_usd);
    CG_FUZZ_CHECK(r.repeats >= 0, "repeats");
  }
  cg_rrec_release(&r);

  if (cg_rfc3339_parse((const char *) data, size, &ms) == 0) {
    CG_FUZZ_CHECK(cg_rfc3339_format(ms, buf, sizeof(buf)) != NULL, "format %lld",
                  (long long) ms);
    CG_FUZZ_CHECK(cg_rfc3339_parse(buf, strlen(buf), &back) == 0 && back == ms,
                  "%lld -> %s -> %lld", (long long) ms, buf, (long long) back);
  }

  rep = malloc(3 * size + 1);
  if (!rep)
    abort();
  n = cg_utf8_repair((const char *) data, size, rep);
  CG_FUZZ_CHECK(n <= 3 * size && rep[n] == '\0', "repair length");
  valid = cg_utf8_valid_prefix(rep, n, &bad);
  CG_FUZZ_CHECK(valid == n && bad == 0, "repaired text invalid at %zu of %zu", valid, n);
  free(rep);
  return 0;
}
