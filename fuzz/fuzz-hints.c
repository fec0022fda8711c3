/* fuzz-hints.c - what one answer may write into the shared state file (src/admit.c
 * cg_admission_learn over src/ratelimit.c, src/backoff.c and src/limiter.c), with the
 * real curl_getdate(3).  Input lines: status, max_retry_after_ms, Retry-After,
 * retry-after-ms, Date, then the 12 rate-limit headers in the order of struct cg_hints
 * and RateLimit.  Invariant (issue 11 item 3): no answer holds or paces the pool beyond
 * max_retry_after, and the next call could go within it. */
#include "admit.h"
#include "fuzz.h"
#include "limiter.h"
#include "state.h"

#include <curl/curl.h>

#define NF 18

static struct cg_state st;
static int pool = -1;

static time_t getdate_fn(const char *s, const time_t *now) { return curl_getdate(s, now); }

static void init(void) {
  char path[128], why[256];
  snprintf(path, sizeof(path), "/dev/shm/cg-fuzz-hints-%d.state", (int) getpid());
  unlink(path);
  if (cg_state_open(path, &st, why, sizeof(why)) != 0) {
    fprintf(stderr, "fuzz-hints: %s\n", why);
    abort();
  }
  unlink(path); /* stays mapped; nothing left behind */
}

#define CG_SET(dst, src) snprintf(h.dst, sizeof(h.dst), "%s", (src) ? (src) : "")

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static struct cg_pool_cfg pc;
  char *f[NF], *copy = cg_fuzz_fields(data, size, f, NF);
  struct cg_admission ad;
  struct cg_hints h;
  struct cg_state_pool *sp;
  long status = f[0] ? strtol(f[0], NULL, 10) : 429;
  long long max = f[1] ? strtoll(f[1], NULL, 10) : 2000;
  int64_t after, w = -1;

  if (pool < 0) {
    init();
    snprintf(pc.name, sizeof(pc.name), "fuzz");
    pool = cg_limiter_pool(&st, "fuzz", &pc.lim);
    CG_FUZZ_CHECK(pool >= 0, "no pool");
  }
  if (max < 0 || max > 86400000) /* the config's bounds for max_retry_after_ms */
    max = 2000;
  sp = &st.pools[pool];
  sp->hold_until = sp->pace_until = sp->pace_interval = sp->tat_requests = sp->tat_tokens = 0;

  memset(&h, 0, sizeof(h));
  CG_SET(retry_after, f[2]);
  CG_SET(retry_after_ms, f[3]);
  CG_SET(date, f[4]);
  CG_SET(rl_limit_req, f[5]);
  CG_SET(rl_remaining_req, f[6]);
  CG_SET(rl_reset_req, f[7]);
  CG_SET(rl_limit_tok, f[8]);
  CG_SET(rl_remaining_tok, f[9]);
  CG_SET(rl_reset_tok, f[10]);
  CG_SET(a_limit_req, f[11]);
  CG_SET(a_remaining_req, f[12]);
  CG_SET(a_reset_req, f[13]);
  CG_SET(a_limit_tok, f[14]);
  CG_SET(a_remaining_tok, f[15]);
  CG_SET(a_reset_tok, f[16]);
  CG_SET(ietf, f[17]);

  memset(&ad, 0, sizeof(ad));
  ad.state = &st;
  ad.pool = &pc;
  ad.pool_index = pool;
  ad.tokens = 1000;
  ad.max_retry_after_ms = max;
  ad.retry_slot = -1;
  cg_admission_learn(&ad, &h, status, 30000, getdate_fn);
  after = cg_state_now();
  CG_FUZZ_CHECK(sp->hold_until <= after + max * 1000000, "held %lld ms beyond now, cap %lld",
                (long long) ((sp->hold_until - after) / 1000000), max);
  CG_FUZZ_CHECK(sp->pace_until <= after + max * 1000000, "paced for %lld ms, cap %lld",
                (long long) ((sp->pace_until - after) / 1000000), max);
  CG_FUZZ_CHECK(sp->pace_interval >= 0 && sp->pace_interval <= max * 1000000,
                "pacing interval %lld ns, cap %lld ms", (long long) sp->pace_interval, max);
  CG_FUZZ_CHECK(cg_limiter_reserve(&st, pool, &pc.lim, 0, after, max * 1000000, &w) == 0,
                "the next call would wait %lld ms, cap %lld", (long long) (w / 1000000), max);
  free(copy);
  return 0;
}
