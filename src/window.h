/* window.h - a sliding window of counts in shared memory: CG_STATE_BUCKETS time buckets,
 * each one 64-bit word updated by compare-and-swap, so a process killed at any instant
 * leaves it consistent and no lock is ever taken.
 *
 * A bucket word is  epoch << 32 | a << 16 | b : the bucket's time (now / width, low 32
 * bits) and two counts of 16 bits each (they saturate at CG_WINDOW_COUNT_MAX).  A bucket
 * whose epoch is not one of the last CG_STATE_BUCKETS is stale: it counts as empty and
 * the first writer of the new epoch resets it in the same CAS.  The window is therefore
 * between window - width and window long (width = window / CG_STATE_BUCKETS), the way
 * resilience4j's time-based sliding window aggregates per-second buckets.
 */
#ifndef CG_WINDOW_H
#define CG_WINDOW_H

#include "state.h"

#include <stdint.h>

#define CG_WINDOW_COUNT_MAX 0xFFFFu

/* The bounds of a configured window, s (config.c: breaker_window_s, retry_budget_window_s).
 * A pool's shared window_ns outside them was written by no process of the guard (garbage
 * over the state file's body behind a valid header): it is not used, and the first process
 * to configure the pool stores its own (breaker.c, budget.c). */
#define CG_WINDOW_MIN_S 0.1
#define CG_BREAKER_WINDOW_MAX_S 86400
#define CG_BUDGET_WINDOW_MAX_S 3600

/* Whether `ns` is a window a process of the guard may have stored (at most `max_s`). */
static inline int cg_window_ns_ok(int64_t ns, double max_s) {
  return ns >= (int64_t) (CG_WINDOW_MIN_S * 1e9) && ns <= (int64_t) (max_s * 1e9);
}

/* The bucket width (ns) of a window of `window_ns`: window / CG_STATE_BUCKETS, >= 1 ms. */
int64_t cg_window_width(int64_t window_ns);

/* Add `da` and `db` to the bucket of `now_ns` (saturating). */
void cg_window_add(uint64_t *buckets, int64_t now_ns, int64_t width_ns, uint32_t da,
                   uint32_t db);

/* The totals of the window ending at `now_ns`. */
void cg_window_sum(const uint64_t *buckets, int64_t now_ns, int64_t width_ns, uint32_t *a,
                   uint32_t *b);

/* Add `da`/`db` only if `allow(a + da, b + db, arg)` holds for the window's totals
 * after the addition; the check and the addition are one CAS on the current bucket, so
 * concurrent callers cannot both pass on the last unit.  Returns 1 when added. */
int cg_window_add_if(uint64_t *buckets, int64_t now_ns, int64_t width_ns, uint32_t da,
                     uint32_t db, int (*allow)(uint32_t a, uint32_t b, void *arg), void *arg);

/* Take `db` back from the b count of the bucket of `at_ns` (saturating at 0), if that
 * bucket is still inside the window ending at `now_ns` and has not been reused since:
 * an addition that turned out not to count (budget.h: a retry that succeeded).
 * Returns 1 when taken. */
int cg_window_take_b(uint64_t *buckets, int64_t at_ns, int64_t now_ns, int64_t width_ns,
                     uint32_t db);

/* Empty every bucket. */
void cg_window_clear(uint64_t *buckets);

#endif
