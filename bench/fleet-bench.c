/* fleet-bench - the cost of one admission through the shared-state interface (src/shared.h):
 * the state file alone, or a fleet's Redis (README "Fleets: shared state on Redis").
 *
 *   build/bench/fleet-bench --n N [--inflight]      (CURLGUARD_STATE, CURLGUARD_REDIS from
 *                                                    the environment, as the guard reads them)
 *
 * One admission is what src/guard.c does around every attempt: cg_admission_gate,
 * cg_admission_enter, cg_admission_recheck, then cg_admission_leave and
 * cg_admission_result2 (a success).  The pool is the default one with CURLGUARD_RPM
 * 10^9 (so nobody waits: the cost is the bookkeeping, not the pacing); --inflight also
 * takes and gives back an in-flight slot (CURLGUARD_MAX_INFLIGHT 1000000).  One JSON
 * object on stdout: p50/p99/mean µs per admission, and through Redis the round trips
 * waited for and the commands sent without waiting, per admission.
 */
#include "admit.h"
#include "clock.h"
#include "config.h"
#include "shared.h"
#include "state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
  return x < y ? -1 : x > y;
}

static int no_wait(void *arg, int64_t ms) {
  (void) arg;
  (void) ms;
  return 0;
}

int main(int argc, char **argv) {
  long n = 2000, i;
  int inflight = 0;
  const struct cg_config *cfg;
  struct cg_pool_cfg scratch;
  const struct cg_pool_cfg *pool;
  struct cg_state *st;
  int64_t *lat, sum = 0;
  uint64_t a0, r0, s0, a1, r1, s1;

  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--n") == 0 && i + 1 < argc)
      n = atol(argv[++i]);
    else if (strcmp(argv[i], "--inflight") == 0)
      inflight = 1;
  }
  setenv("CURLGUARD", "1", 1);
  setenv("CURLGUARD_RPM", "1000000000", 1);
  if (inflight)
    setenv("CURLGUARD_MAX_INFLIGHT", "1000000", 1);
  cfg = cg_config();
  pool = cg_config_pool_at(cfg, "fleet-bench.invalid", 443, "https", &scratch);
  st = cg_state_get(cfg->state_path);
  if (!st) {
    fprintf(stderr, "fleet-bench: no state file\n");
    return 1;
  }
  lat = calloc((size_t) n, sizeof(*lat));
  if (!lat)
    return 1;
  cg_shared_redis_counts(&a0, &r0, &s0);
  for (i = -50; i < n; i++) { /* 50 warm-up rounds (the connection, the scripts) */
    struct cg_admission ad;
    int64_t t0 = now_ns(), next, w;
    int slot;
    memset(&ad, 0, sizeof(ad));
    ad.state = st;
    ad.pool = pool;
    ad.pool_index = -1;
    ad.retry_slot = -1;
    ad.max_retry_after_ms = cfg->max_retry_after_ms;
    ad.deadline_ms = cg_mono_ms() + 60000;
    if (i == 0)
      cg_shared_redis_counts(&a0, &r0, &s0);
    cg_admission_gate(&ad, 1, 0, ad.deadline_ms, &next);
    slot = cg_admission_enter(&ad, ad.deadline_ms, no_wait, NULL, &w);
    cg_admission_recheck(&ad, ad.deadline_ms, &next);
    cg_admission_leave(&ad, slot);
    cg_admission_result2(&ad, CG_OUT_OK, 200, 0, 0, -1);
    cg_admission_finish(&ad);
    if (i >= 0) {
      lat[i] = now_ns() - t0;
      sum += lat[i];
    }
    if (i == n - 1)
      printf("{\"backend\": \"%s\", ", ad.sh.ops ? ad.sh.ops->name : "none");
  }
  cg_shared_redis_counts(&a1, &r1, &s1);
  qsort(lat, (size_t) n, sizeof(*lat), cmp64);
  printf("\"n\": %ld, \"inflight\": %s, \"p50_us\": %.1f, \"p99_us\": %.1f, \"mean_us\": %.1f, "
         "\"redis_admissions\": %llu, \"round_trips_per_admission\": %.3f, "
         "\"sent_per_admission\": %.3f}\n",
         n, inflight ? "true" : "false", lat[n / 2] / 1e3, lat[n * 99 / 100] / 1e3,
         (double) sum / n / 1e3, (unsigned long long) (a1 - a0), (double) (r1 - r0) / n,
         (double) (s1 - s0) / n);
  free(lat);
  return 0;
}
