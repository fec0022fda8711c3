/* admit.h - the guard's side of the shared limiter.
 *
 * Before an attempt: wait for the pool's rate limits (GCRA reservations, limiter.h), for
 * any 429 hold another process learnt of meanwhile, and for an in-flight slot; fail fast
 * when the wait would not fit the call's deadline.  After it: a 429 holds every process of
 * the pool until its hint; the provider's rate-limit headers (ratelimit.h) pace the pool.
 *
 * Around that, the pool's circuit breaker (breaker.h) and retry budget (budget.h): before
 * an attempt the breaker may refuse it (fail fast, no network) and a first attempt is
 * counted in the budget (a host's repeat of a failed call asks it for a retry instead);
 * after it the outcome feeds the breaker; a retry the guard wants must find the breaker
 * closed and the budget willing.
 *
 * Every entry point below reads and writes the mapped state file inside a guarded region
 * (state.h): when the file is cut short under the call (any process of the user may
 * `truncate` it at any instant), the SIGBUS is caught, the call drops the file and goes on
 * as if there were none (gate and recheck: go; enter: -2; retry: NULL; the rest: nothing),
 * with one "curlguard:" line per process.  The next call finds the file repaired
 * (cg_state_get).  Waits run the host's callbacks outside any region.
 *
 * The rate (GCRA for rpm and tpm, the 429 hold), the in-flight slots and the breaker go
 * through the shared-state interface (shared.h): the state file, or a fleet's Redis
 * (CURLGUARD_REDIS; README "Fleets: shared state on Redis").  A Redis failure moves the
 * call to the state file (one "curlguard:" line per cause); the call never waits on
 * Redis longer than its timeout.  The retry budget, the learned rate, provider pacing,
 * the slow start and the tallies stay in the state file.
 */
#ifndef CG_ADMIT_H
#define CG_ADMIT_H

#include "attempt.h"
#include "backoff.h"
#include "classify.h"
#include "config.h"
#include "limiter.h"
#include "record.h"
#include "shared.h"

#include <stdint.h>

#define CG_MIN_ATTEMPT_MS 100 /* an attempt with less time left is not started */
/* Until a throttle cuts a pool's learned rate, the rate is a guess from nothing (the
 * slow start, limiter.h): a call waits for it at most 1/CG_GUESS_SHARE of the time it
 * had when its admission began, then goes (admit.c cg__guess_until). */
#define CG_GUESS_SHARE 10

/* One call's place in the limiter. */
struct cg_admission {
  struct cg_state *state;          /* NULL: the limiter is unusable, calls go unpaced */
  const struct cg_pool_cfg *pool;
  int pool_index;                  /* in the state file; -1 until looked up, -2: no room */
  int64_t tokens;                  /* estimated tokens charged per attempt (body.h) */
  int64_t max_retry_after_ms;      /* a hold longer than this fails fast */
  int64_t queue_ms;                /* waited before the current attempt */
  int waited;                      /* cg_admission_enter waited (the limiter, an in-flight
                                    * slot) or asked Redis: the breaker may have changed
                                    * meanwhile (cg_admission_recheck) */
  int slot_refused;                /* the last refusal (-1, CG_NB_LIMIT) was for an
                                    * in-flight slot: its wait_ms is the time waited */
  int probe;                       /* this call holds the breaker's half-open probe */
  int retry_slot;                  /* the budget's slot of a granted retry; -1 none (set
                                    * -1 before the first attempt) */
  int64_t deadline_ms;             /* the call's (monotonic): a retry slot's deadline */
  /* The limiter's reservation on the state file for the attempt not started yet (its
   * turn, state clock, and what it took: limiter.h cg_limiter_reserve_took): given back
   * when the call ends before the attempt starts (cg_admission_finish; helper-63); the
   * attempt's start spends it (cg_admission_sent). */
  int resv_pending;
  int64_t resv_go_ns;
  struct cg_limiter_resv resv;
  /* Waiting for the breaker (open = wait, issue 12): the host's progress callback, run
   * about once a second while parked (non-zero: the host aborted), and the time waited,
   * for the record (guard.c adds it to queue_ms; cg_admission_enter does not reset it). */
  int (*tick)(void *arg);
  void *tick_arg;
  int64_t breaker_wait_ms;
  int64_t attempt_start_ns;        /* when the current attempt went out (state clock) */
  int can_divert;                  /* the pool has a fallback this call may go to: an open
                                    * breaker sends it there at once, no holding */
  int repeat_granted;              /* a host repeat's retry was granted after a wait */
  int early_probes;                /* early probes this call made (admit.c cg__sh_early) */
  int64_t span_ms;                 /* the call's whole deadline, ms (cg__early_in) */
  int64_t last_attempt_ms;         /* how long the call's previous attempt took (0: none):
                                    * an early probe goes when the deadline leaves about
                                    * that much (admit.c cg__early_in) */
  int64_t retry_granted_ns;        /* when the budget granted the current attempt's retry
                                    * (state clock; 0: not a retry): one that succeeds is
                                    * given back (cg_budget_refund) */
  int64_t sent_ns;                 /* when the current attempt was admitted (state clock) */
  int first_attempt;               /* the attempt asked for is the call's first
                                    * (cg_admission_gate): it may go with less than
                                    * CG_MIN_ATTEMPT_MS left, if it need not wait */
  /* The retry asked for next (cg_admission_retry, _nb) waits out a 429's Retry-After:
   * the provider's schedule, kept by the hold of its limit key, not a retry an
   * overloaded provider multiplies: not drawn from the retry budget (README "Circuit
   * breaker and retry budget").  Set by the caller before asking. */
  int retry_scheduled;
  /* The call's limit key (limiter.h keyed holds): whose 429s hold it besides the pool's
   * own, and which calls its 429s hold.  Made when first needed (a 429, or a pool with a
   * keyed hold) by key_fn(key_arg), NULL: 0 (none); key_made: made. */
  uint32_t (*key_fn)(void *arg);
  void *key_arg;
  uint32_t key;
  int key_made;
  /* The pool behind the shared-state interface (shared.h): the back end this call uses,
   * chosen when the pool is first used (Redis when CURLGUARD_REDIS is set and reachable,
   * else the state file), and switched to the state file for the rest of the call when
   * Redis fails.  Zero-initialised by the caller, as the rest. */
  struct cg_shared_pool sh;
};

/* What cg_admission_gate decided. */
enum cg_gate {
  CG_GATE_GO,
  CG_GATE_CIRCUIT_OPEN,  /* the breaker is open (or a probe is under way): fail fast */
  CG_GATE_BUDGET,        /* a host's repeat of a failed call, refused by the budget */
  CG_GATE_ABORTED,       /* the host's progress callback aborted a wait for the breaker */
};

/* Before attempt number `attempt` (1-based), ahead of cg_admission_enter: ask the pool's
 * breaker (on CG_GATE_CIRCUIT_OPEN `*next_probe_ms` says when a probe may go).  With
 * open = wait (the default) a refused call parks on the breaker's futex word for the
 * probe's result, in waits of at most a second (the host's progress callback runs
 * between them; CG_GATE_ABORTED when it aborts), as long as its deadline reaches past
 * the next probe: CG_GATE_CIRCUIT_OPEN only when it cannot (or open = fail).  In the slow
 * start after a probe closed the breaker a call may be held for its turn.  Count a
 * first attempt in the budget, or, when `host_repeat` (repeat.h: the host repeats a call
 * that failed), take a retry from it.  `deadline_ms` (the call's, monotonic) bounds how
 * long a probe holds the breaker half-open.  No state file: always CG_GATE_GO. */
enum cg_gate cg_admission_gate(struct cg_admission *ad, int attempt, int host_repeat,
                               int64_t deadline_ms, int64_t *next_probe_ms);

/* cg_admission_gate with the caller's clock reading: `*nowp` a cg_state_now() the caller
 * made with nothing that takes time since (0: none, the gate reads the clock); on return
 * the reading of the gate's end when nothing took time in it (no wait, no Redis round
 * trip), else 0.  Issue 16: one reading from the admission's start to the send. */
enum cg_gate cg_admission_gate_at(struct cg_admission *ad, int attempt, int host_repeat,
                                  int64_t deadline_ms, int64_t *next_probe_ms, int64_t *nowp);

/* Right before the attempt goes out, after cg_admission_enter's wait (a queued call, or
 * a retry after its backoff): ask the breaker again, so calls that queued while it opened
 * fail fast instead of reaching a provider already known to be down.  Same answers as
 * cg_admission_gate's breaker part; the budget is not asked again. */
enum cg_gate cg_admission_recheck(struct cg_admission *ad, int64_t deadline_ms,
                                  int64_t *next_probe_ms);

/* Whether another call's half-open probe is under way in the pool (for the message of
 * a refused call). */
int cg_admission_probing(const struct cg_admission *ad);

/* Whether the pool's breaker would hold the call's next attempt for its half-open probe
 * now: it is not closed, the pool holds calls while open (open = wait) and the call's
 * deadline sees the next probe with `need_ms` (at least CG_MIN_ATTEMPT_MS) left for the
 * attempt after it.  0 without a state file, or when the file is cut short under the
 * call.  A snapshot: the gate may still refuse that attempt later (the probe fails and
 * the next one is past the deadline). */
int cg_admission_breaker_holds(struct cg_admission *ad, int64_t need_ms);

/* Whether the call's retries may be held by the pool's breaker (enabled, open = wait; it
 * may open during a backoff) and then refused at the gate (the next probe, or an early
 * probe, out of reach by then): the guard keeps the answer in hand for the host then.
 * Reads the configuration only. */
int cg_admission_breaker_waits(const struct cg_admission *ad);

/* While the pool's breaker is open (open = wait) and the call's deadline cannot see the
 * next probe: the ms until the call's last chance to be the probe early (admit.c
 * cg__early_in; 0: now); -1 otherwise (closed, open = fail, the next probe in sight, too
 * late, no state file).  A retry's backoff is cut to it: the gate would hold the call
 * until then, and one that came later could not be the probe. */
int64_t cg_admission_early_in_ms(struct cg_admission *ad);

/* After an attempt with outcome `o` (HTTP `status`; `hinted`: it carried a server hint,
 * so a 429 is left to the limiter, breaker.h): feed the breaker (a probe's result
 * closes or re-opens it) and give back the budget slot of the retry just made. */
void cg_admission_result(struct cg_admission *ad, enum cg_outcome o, long status,
                         int hinted);

/* As cg_admission_result, with issue 12 item 6: `defer` (a first attempt the guard is
 * about to retry) keeps a failure out of the breaker (a probe's is always counted): it
 * counts only through a later attempt of the call that fails too (a retry refused by
 * the budget leaves it uncounted: README, "The breaker").  `hint_ms`
 * (>= 0): the answer's Retry-After, a floor for the next probe after a failed probe. */
void cg_admission_result2(struct cg_admission *ad, enum cg_outcome o, long status,
                          int hinted, int defer, int64_t hint_ms);

/* cg_admission_result2 with the caller's cg_state_now() `now` (0: none, read here), made
 * with nothing that takes time since: the attempt's end (issue 16). */
void cg_admission_result_at(struct cg_admission *ad, enum cg_outcome o, long status,
                            int hinted, int defer, int64_t hint_ms, int64_t now);

/* Sleep `ms` for the limiter; non-zero when the host aborted the wait. */
typedef int (*cg_wait_fn)(void *arg, int64_t ms);

/* The guard would retry: NULL when it may (the breaker is closed and the budget granted
 * the retry, which is now counted and holds a slot), else the reason it may not,
 * "circuit_open", "retry_budget_exhausted" or "aborted_by_host".  A retry the budget
 * refuses waits for it (budget.h) with `wait` while the wait, or the retry's backoff
 * `sleep_ms` when longer, leaves `need_ms` of the deadline for the attempt; `*waited_ms` gets the time waited (to count against the
 * retry's backoff).  Only a retry that cannot fit is retry_budget_exhausted. */
const char *cg_admission_retry(struct cg_admission *ad, int64_t need_ms, int64_t sleep_ms,
                               cg_wait_fn wait, void *wait_arg, int64_t *waited_ms);

/* After cg_admission_gate said CG_GATE_BUDGET (a host repeat the budget refused): wait
 * for the budget as cg_admission_retry does.  0: granted (the next gate lets the call
 * go), 1: it cannot fit the deadline, -3: the host aborted the wait. */
int cg_admission_repeat_wait(struct cg_admission *ad, cg_wait_fn wait, void *wait_arg,
                             int64_t *waited_ms);

/* The call is over: give back a probe never made and a retry slot still held. */
void cg_admission_finish(struct cg_admission *ad);

/* Wait until the attempt may go (`deadline_ms`: the call's, monotonic).  Returns the
 * in-flight slot (>= 0) or -2 (none needed or none to be had: go); -1 when the wait would
 * not fit the deadline (`*wait_ms` says how long it would have been); -3 when the host
 * aborted while waiting.  The time waited is in `queue_ms`; `waited` says whether it
 * waited at all (or asked Redis). */
int cg_admission_enter(struct cg_admission *ad, int64_t deadline_ms, cg_wait_fn wait,
                       void *wait_arg, int64_t *wait_ms);

/* cg_admission_enter with the caller's clock reading `*nowp` (as cg_admission_gate_at's);
 * on an admission (a slot or -2 with a pool) `*nowp` is `sent_ns`, the admission's end,
 * else 0 (no state file: left as it is). */
int cg_admission_enter_at(struct cg_admission *ad, int64_t deadline_ms, cg_wait_fn wait,
                          void *wait_arg, int64_t *wait_ms, int64_t *nowp);

/* Teach the pool's learned rate (limiter.h) the attempt's answer: `throttle` (529, 503
 * with a Retry-After above 0, an overloaded_error event; CG_THROTTLE_429 for a 429, which
 * may be one limit key's among several: limiter.h cg_limiter_learn_key) lowers it once per
 * round; another answer that reached the provider (`answered`) raises it. */
#define CG_THROTTLE_429 2
void cg_admission_adapt(struct cg_admission *ad, int throttle, int answered);

/* cg_admission_adapt with the caller's cg_state_now() `now`, as cg_admission_result_at. */
void cg_admission_adapt_at(struct cg_admission *ad, int throttle, int answered,
                           int64_t now);

/* Whether the call's shared state is on Redis, where a step is a round trip (a reading
 * of the clock made before one does not hold after it). */
int cg_admission_far(const struct cg_admission *ad);

/* Give back the slot cg_admission_enter returned (no-op for -2). */
void cg_admission_leave(struct cg_admission *ad, int slot);

/* The attempt admitted last starts: its reservation is spent (never given back). */
static inline void cg_admission_sent(struct cg_admission *ad) {
  ad->resv_pending = 0;
}

/* Add the usage record `r` about to be written (one per attempt) to the pool's tally in
 * the state file (tally.h: calls, attempts by outcome, tokens, cost, waits, for `stat`
 * and Prometheus).  Never fails the call: no file, no pool, or a file cut short under it
 * (the fault is caught as in every entry point here): nothing counted. */
void cg_admission_tally(struct cg_admission *ad, const struct cg_record *r);

/* The request used `delta` tokens more than it was charged (usage known after the
 * transfer): charge them to the pool's token account (limiter.h). */
void cg_admission_tokens_correct(struct cg_admission *ad, int64_t delta);

/* Learn from an answer with HTTP `status` (0: none) and its headers `hints`; `sleep_ms`
 * is the caller's own backoff, the hold of a 429 that has no hint.  Nothing an answer
 * says holds or paces the pool beyond `max_retry_after_ms` (issue 11): a longer 429
 * hint (the call itself gave up) holds it for max_retry_after_ms, and the hold of a
 * quota with nothing remaining, the pacing interval and how long pacing lasts are each
 * capped at it, so the next call of any process goes within that maximum. */
void cg_admission_learn(struct cg_admission *ad, const struct cg_hints *hints, long status,
                        int64_t sleep_ms, cg_getdate_fn getdate);


/* ---- without sleeping: the multi driver's admission (issue 13) ----
 *
 * A multi host runs many transfers on one thread, so no wait may sleep in it: each wait
 * of cg_admission_gate/enter/recheck above becomes a due time instead.  The driver asks
 * cg_admission_step_nb, and when told CG_NB_WAIT keeps the transfer out of the real multi
 * handle and asks again `*ms` later (multi.c; or earlier, when a transfer of the pool
 * ends: an early ask only checks again, it takes nothing twice).  The same shared words, in
 * the same order, as the blocking forms: the breaker (a refused call with open = wait is
 * asked again until the next probe, at least every CG_NB_PARK_MAX_MS, where the blocking
 * form parks on the futex word), the slow-start ramp, the budget (first attempt counted,
 * a host repeat's retry taken or waited for), the limiter's reservation (made once; its
 * wait becomes the due time), 429 holds and the learned rate, an in-flight slot (tried,
 * and tried again every CG_NB_SLOT_POLL_MS), and the breaker once more right before the
 * attempt goes out. */

#define CG_NB_PARK_MAX_MS 250 /* a call held by an open breaker asks again this often */
#define CG_NB_SLOT_POLL_MS 20 /* a call waiting for an in-flight slot tries again this often */

/* Where one attempt's non-blocking admission stands; zero it (memset) before the first
 * step of each attempt. */
struct cg_admit_nb {
  int phase;              /* 0 gate, 1 ramp, 2 reserve, 3 holds/learned rate/slot, 4 recheck */
  int held;               /* the open breaker held this attempt (counted once) */
  int64_t held_since_ns;  /* state clock: since when, for breaker_wait_ms */
  int64_t ramp_at_ns;     /* the slow start's turn (state clock) */
  int64_t queue_since_ms; /* monotonic: the limiter's wait began, for queue_ms */
  int64_t go_at_ns;       /* state clock: the reservation's turn (phase 3 waits for it) */
  int waited_counted;     /* CG_CNT_WAITED counted for this attempt */
  int slot;               /* the in-flight slot taken in phase 3, -2 none */
  int hold_shared;        /* phase 3 asks the back end's 429 hold (after a wait), as
                           * cg_admission_enter does; else the state file's */
  int64_t slot_poll_ms;   /* Redis: the last wait for a lease (doubles to 100 ms) */
  int64_t reclaim_ms;     /* file: monotonic ms of the last look for dead holders' slots
                           * (every CG_INFLIGHT_RECHECK_MS, as a blocking waiter), 0 none */
  int learn_taken;        /* file: the learned rate's place was taken (phase 3 asks once) */
  struct cg_limiter_turn turn; /* file: its place in turn for a slot (limiter.h turns);
                                * zeroed: none.  cg_admission_nb_drop gives it up */
};

/* The nb admission `nb` of `ad` is given up before it went (the host removed the handle,
 * aborted it, or it turns to another pool): its place in turn for a slot goes, so the
 * next waiter need not wait until it is passed over (limiter.h turns).  Safe to call
 * again, and on a zeroed `nb`. */
void cg_admission_nb_drop(struct cg_admission *ad, struct cg_admit_nb *nb);

/* What cg_admission_step_nb decided. */
enum cg_nb {
  CG_NB_GO,    /* the attempt may go: `*slot` is its in-flight slot (cg_admission_leave) */
  CG_NB_WAIT,  /* ask again in `*ms` (ms, >= 1) */
  CG_NB_GATE,  /* refused by the breaker or the budget: `*gate` (CIRCUIT_OPEN, BUDGET),
                * `*ms` the time to the next probe */
  CG_NB_LIMIT, /* the limiter's wait does not fit the deadline (`*ms`: how long it was) */
};

/* One non-blocking step of the admission of attempt `attempt` (1-based; `host_repeat` as
 * for cg_admission_gate, `deadline_ms` the call's, monotonic).  Never sleeps.  No state
 * file, or the file cut short under the call: CG_NB_GO with slot -2. */
enum cg_nb cg_admission_step_nb(struct cg_admission *ad, struct cg_admit_nb *nb, int attempt,
                                int host_repeat, int64_t deadline_ms, int64_t *ms,
                                enum cg_gate *gate, int *slot);

/* cg_admission_retry without sleeping: NULL with `*wait_ms` 0 when the retry may go (as
 * there); NULL with `*wait_ms` > 0 when the budget may grant it later: ask again then
 * with `waited_ms` (the time already waited for it); else the reason it may not
 * ("circuit_open", "retry_budget_exhausted"). */
const char *cg_admission_retry_nb(struct cg_admission *ad, int64_t need_ms, int64_t sleep_ms,
                                  int64_t waited_ms, int64_t *wait_ms);

#endif
