/* limiter.h - GCRA pacing of requests and tokens, and in-flight slots, over the shared
 * state file (state.h).
 *
 * GCRA, the generic cell rate algorithm (ITU-T I.371; equivalent to a token bucket):
 * each pool keeps one 64-bit "theoretical arrival time" (TAT) per limit.  A request of
 * cost c (1 request, or n tokens) with emission interval T (60 s / limit) and burst b
 * may go at  max(now, TAT - (b - 1) * T)  and moves TAT to  max(TAT, now) + c * T.
 * The update is one compare-and-swap, so a caller learns its exact wait at once and
 * sleeps once: no polling.  Waits are reservations, so waiters are served in order.
 *
 * In-flight: a counter per pool (a futex word: waiters sleep in the kernel and are woken
 * on release) and a slot per call recording the owner's pid and start time, so a slot
 * held by a dead process is taken back by the next waiter within CG_INFLIGHT_RECHECK_MS.
 */
#ifndef CG_LIMITER_H
#define CG_LIMITER_H

#include "config.h"
#include "state.h"

#include <stdint.h>

#define CG_INFLIGHT_RECHECK_MS 500 /* a waiter looks for dead holders this often */

/* The index of pool `name` in the file, claiming a free one if needed; -1 when the
 * file has no room (the caller then runs unpaced).  Also records `lim` for `stat`. */
int cg_limiter_pool(struct cg_state *st, const char *name, const struct cg_limits *lim);

/* Reserve one request costing `tokens` (0 = none) in pool `p`.  On success returns 0 and
 * the wait in ns before the request may go in `*wait_ns`.  When that wait would exceed
 * `max_wait_ns`, nothing is reserved and it returns 1 (`*wait_ns` still says how long
 * it would have been). */
int cg_limiter_reserve(struct cg_state *st, int p, const struct cg_limits *lim,
                       int64_t tokens, int64_t now, int64_t max_wait_ns, int64_t *wait_ns);

/* Add `delta` tokens (negative: give back) to pool `p`'s token account, once the real
 * usage of a request is known.  The usage comes from the response: one answer moves the
 * account by at most `max_ns` (max_retry_after), so a body claiming 2^53 tokens delays
 * the pool's next requests by that much at most, not for years. */
void cg_limiter_tokens_correct(struct cg_state *st, int p, const struct cg_limits *lim,
                               int64_t delta, int64_t max_ns);

/* Take an in-flight slot of pool `p` (limit `max`), waiting until `deadline_ns` at most.
 * Returns the slot index (>= 0), -1 on timeout, -2 when the slot table is full (the call
 * then runs without one).  `*waited_ns` gets the time spent waiting. */
int cg_limiter_inflight_acquire(struct cg_state *st, int p, long max, int64_t deadline_ns,
                                int64_t *waited_ns);

/* Give back slot `slot` of pool `p` and wake one waiter. */
void cg_limiter_inflight_release(struct cg_state *st, int p, int slot);

/* Take back the slots of pool `p` (all pools when p < 0) held by processes that are
 * gone.  Returns how many. */
int cg_limiter_reclaim(struct cg_state *st, int p);

/* Hold every process's requests in pool `p` until `until_ns` (a 429's hint): new
 * reservations are placed after it, and callers already waiting check it again
 * (cg_limiter_hold_until) before they send. */
void cg_limiter_hold(struct cg_state *st, int p, int64_t until_ns);
int64_t cg_limiter_hold_until(struct cg_state *st, int p);

/* Spread the next requests of pool `p` so the `remaining` of them last the `reset_ns`
 * until the provider's window refills (its rate-limit headers).  The reset is when the
 * window is full again, not a wait (CASES.md): with nothing remaining the next request
 * waits for one request's refill, reset / limit, and only when the `limit` is known
 * (> 0).  Nothing a provider says holds or paces the pool beyond `max_ns` (the
 * configured max_retry_after): the hold, the spacing and how long the spacing lasts are
 * each capped at it.  Caller's `now + reset_ns` must not overflow (reset <= 10^18 ns). */
void cg_limiter_pace(struct cg_state *st, int p, int64_t limit, int64_t remaining,
                     int64_t reset_ns, int64_t now, int64_t max_ns);

/* Count events for `stat`. */
enum cg_counter { CG_CNT_ADMITTED, CG_CNT_WAITED, CG_CNT_REJECTED, CG_CNT_429 };
void cg_limiter_count(struct cg_state *st, int p, enum cg_counter c);

/* Requests (or tokens) that could go right now without waiting, for `stat`. */
double cg_limiter_available(int64_t tat, double per_minute, double burst, int64_t now);

#endif
