/* budget.h - the shared retry budget of a pool: retries stay a bounded fraction of real
 * calls, across every process, even when the host retries on top of the guard.
 *
 * The rule is Finagle's RetryBudget (ttl, minRetriesPerSec, percentCanRetry; tower's
 * retry::budget is the same), kept in the shared file instead of one process:
 *   a retry may go while  retries + 1 <= ratio * first_attempts + min_per_s * window_s
 * counting first attempts and retries of the last `window_s` seconds (window.h).  The
 * check and the count are one CAS, so concurrent processes cannot overdraw it.  On top,
 * at most `max_concurrent` retries may be outstanding at once (Envoy's retry budget
 * bounds concurrent retries the same way, min_retry_concurrency being its floor): a
 * retry holds a slot from the moment it is granted, through its backoff and its
 * attempt.  Slots record the owner's pid, start time and call deadline, so those of a
 * process killed with kill -9 (reaped or not: a zombie counts as gone) or past its
 * call's deadline are taken back by the next retry that finds them full.
 *
 * Defaults (config.c): ratio 0.2 (Envoy's budget_percent 20 %, Finagle's 20 %),
 * min_per_s 1 (Finagle's 10 per second is the whole load of an LLM batch: providers
 * serve a few calls per second per account), window_s 10 (Finagle's ttl), 16 concurrent.
 *
 * What counts: the first attempt of each call is a first attempt; each further attempt
 * of the guard is a retry, and so is the first attempt of a call the host repeats
 * (repeat.h: `curl --retry`, an SDK's retry loop), because RFC 9110 section 9.2.2 warns
 * that a client should not retry a failed automatic retry: retries on top of retries
 * multiply.
 *
 * A refusal is a wait, not an end (issue 12): a retry the budget refuses, of the guard
 * or a host repeat, waits until the window would grant it (cg_budget_wait_ns: the start
 * of the first bucket whose expiry leaves room, computed from the buckets) and asks
 * again, as long as the wait still leaves the call's deadline room for an attempt
 * (admit.c).  The budget still bounds how many retries reach the provider per window;
 * it no longer drops work.  Only a retry that cannot fit its deadline ends the call with
 * what it has (reason retry_budget_exhausted).
 */
#ifndef CG_BUDGET_H
#define CG_BUDGET_H

#include "config.h"
#include "state.h"

#include <stdint.h>

enum cg_budget_verdict {
  CG_BUDGET_GRANTED,
  CG_BUDGET_WINDOW,      /* refused: retries would exceed the ratio + floor of the window */
  CG_BUDGET_CONCURRENCY, /* refused: max_concurrent retries are outstanding */
};

/* Retries the window allows for `first` first attempts: ratio * first + min_per_s *
 * window_s (not rounded: a retry goes while retries <= this).  Pure. */
double cg_budget_allowed(uint32_t first, const struct cg_budget_cfg *c);

/* Record pool `p`'s configuration in the file, for `stat`.  The window is shared as the
 * breaker's is (breaker.h cg_breaker_configure): the first process's `window_s` is every
 * process's, for the counts and for min_per_s * window_s.  Returns it in ns. */
int64_t cg_budget_configure(struct cg_state *st, int p, const struct cg_budget_cfg *c);

/* Count a first attempt of pool `p` at `now_ns`. */
void cg_budget_first(struct cg_state *st, int p, const struct cg_budget_cfg *c, int64_t now_ns);

/* Ask for one retry at `now_ns`.  When granted it is counted and `*slot` holds its
 * concurrency slot (-1 when there is no concurrency limit), to give back with
 * cg_budget_done when the retry's attempt is over; the slot is anybody's after
 * `deadline_ns` (the asking call's deadline, monotonic; rounded up to whole seconds) or
 * once its holder is gone.  A disabled budget grants everything and counts nothing. */
enum cg_budget_verdict cg_budget_retry(struct cg_state *st, int p,
                                       const struct cg_budget_cfg *c, int64_t now_ns,
                                       int64_t deadline_ns, int *slot);

#define CG_BUDGET_POLL_NS 100000000LL   /* a concurrency refusal asks again this often */
#define CG_BUDGET_MIN_WAIT_NS 10000000LL /* no wait for the window is shorter */

/* How long from `now_ns` until the window of `buckets` (bucket width `width_ns`, bucket
 * words as window.h packs them: first attempts in a, retries in b) would grant one more
 * retry under `c`, counting nothing new meanwhile: 0 now, else the ns to the start of
 * the first bucket whose rotation leaves room; -1 when no rotation does (min_per_s 0
 * and no first attempts).  Pure apart from atomic loads. */
int64_t cg_budget_grant_in(const uint64_t *buckets, int64_t now_ns, int64_t width_ns,
                           const struct cg_budget_cfg *c);

/* How long a retry refused with `why` at `now_ns` should wait before asking again:
 * window: cg_budget_grant_in (at least CG_BUDGET_MIN_WAIT_NS; one bucket when no rotation
 * helps); concurrency: CG_BUDGET_POLL_NS. */
int64_t cg_budget_wait_ns(struct cg_state *st, int p, const struct cg_budget_cfg *c,
                          enum cg_budget_verdict why, int64_t now_ns);

/* Give back a concurrency slot from cg_budget_retry (no-op for -1). */
void cg_budget_done(struct cg_state *st, int p, int slot);

/* The retry granted at `granted_ns` succeeded: take it back out of the window (while
 * its bucket is still in it) and count it in `rescued`.  A retry that fixed the call
 * was work, not amplification: the budget bounds the retries that fail, which are what
 * an overloaded or broken provider multiplies (issue 12 item 6's rule for the breaker,
 * applied to the budget).  Without it a provider that fails every other first attempt,
 * and answers every retry, would have half of its calls refused a retry by a 20 %
 * budget.  No-op when the budget is off. */
void cg_budget_refund(struct cg_state *st, int p, const struct cg_budget_cfg *c,
                      int64_t granted_ns, int64_t now_ns);

/* What `stat` shows of pool `p`'s budget. */
struct cg_budget_view {
  int enabled;
  uint32_t first, retries;   /* in the window */
  double allowed;            /* retries the window allows now */
  uint32_t concurrent;       /* retries outstanding */
  uint32_t max_concurrent;   /* configured, 0 = no limit */
  double ratio, min_per_s;   /* configured */
  int64_t window_ns;         /* shared: set by the first process (cg_budget_configure) */
  uint64_t refused;
  uint64_t rescued;          /* retries given back: they succeeded (cg_budget_refund) */
};
void cg_budget_view(struct cg_state *st, int p, int64_t now_ns, struct cg_budget_view *v);

#endif
