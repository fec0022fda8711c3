/* admit.h - the guard's side of the shared limiter.
 *
 * Before an attempt: wait for the pool's rate limits (GCRA reservations, limiter.h), for
 * any 429 hold another process learnt of meanwhile, and for an in-flight slot; fail fast
 * when the wait would not fit the call's deadline.  After it: a 429 holds every process of
 * the pool until its hint; the provider's rate-limit headers (ratelimit.h) pace the pool.
 */
#ifndef CG_ADMIT_H
#define CG_ADMIT_H

#include "attempt.h"
#include "backoff.h"
#include "config.h"
#include "limiter.h"

#include <stdint.h>

#define CG_MIN_ATTEMPT_MS 100 /* an attempt with less time left is not started */

/* One call's place in the limiter. */
struct cg_admission {
  struct cg_state *state;          /* NULL: the limiter is unusable, calls go unpaced */
  const struct cg_pool_cfg *pool;
  int pool_index;                  /* in the state file; -1 until first used */
  int64_t tokens;                  /* estimated tokens charged per attempt (body.h) */
  int64_t max_retry_after_ms;      /* a hold longer than this fails fast */
  int64_t queue_ms;                /* waited before the current attempt */
};

/* Sleep `ms` for the limiter; non-zero when the host aborted the wait. */
typedef int (*cg_wait_fn)(void *arg, int64_t ms);

/* Wait until the attempt may go (`deadline_ms`: the call's, monotonic).  Returns the
 * in-flight slot (>= 0) or -2 (none needed or none to be had: go); -1 when the wait would
 * not fit the deadline (`*wait_ms` says how long it would have been); -3 when the host
 * aborted while waiting.  The time waited is in `queue_ms`. */
int cg_admission_enter(struct cg_admission *ad, int64_t deadline_ms, cg_wait_fn wait,
                       void *wait_arg, int64_t *wait_ms);

/* Give back the slot cg_admission_enter returned (no-op for -2). */
void cg_admission_leave(struct cg_admission *ad, int slot);

/* Learn from an answer with HTTP `status` (0: none) and its headers `hints`; `sleep_ms`
 * is the caller's own backoff, the hold of a 429 that has no hint. */
void cg_admission_learn(struct cg_admission *ad, const struct cg_hints *hints, long status,
                        int64_t sleep_ms, cg_getdate_fn getdate);

#endif
