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
 * held by a dead process is taken back by the next waiter within CG_INFLIGHT_RECHECK_MS;
 * waiters are served in turn ("turns" below).
 */
#ifndef CG_LIMITER_H
#define CG_LIMITER_H

#include "config.h"
#include "state.h"

#include <stdint.h>

#define CG_INFLIGHT_RECHECK_MS 500 /* a waiter looks for dead holders this often */
/* A pool no call has found for this long, with nothing in flight or waiting, may be given
 * to a new name when every pool of the file is taken (state.h `used_ms`). */
#define CG_POOL_IDLE_MS (10 * 60 * 1000)

/* The index of pool `name` in the file, claiming a free one if needed, else the least
 * recently used pool idle for CG_POOL_IDLE_MS (its limiter, breaker, budget and tally
 * start again from zero under the new name); -1 when there is none (the caller then runs
 * unpaced).  Also records `lim` for `stat` and stamps the pool's `used_ms`. */
int cg_limiter_pool(struct cg_state *st, const char *name, const struct cg_limits *lim);

/* cg_limiter_pool with the name's hash `hash` (cg_limiter_name_hash(name)) made
 * beforehand: a pool's config keeps it (config.h), so a call does not hash the name.
 * `*slow` is set to 1 when the lookup may have taken time (it waited for another claimer
 * or giver, or gave a pool away), else left as it is: a clock reading made before it
 * still holds after it only when it stays 0 (issue 16, admit.c cg__gate). */
int cg_limiter_pool_hashed(struct cg_state *st, const char *name, uint64_t hash,
                           const struct cg_limits *lim, int *slow);

/* Mark pool `p` as used now (its `used_ms`, at most once a second): a call's later
 * attempts and its waits for an open breaker, so that a pool is not given away under a
 * running call. */
void cg_limiter_pool_touch(struct cg_state *st, int p);

/* The key of pool `name` in the state file (XXH3 of "pool" and the name, never 0 nor
 * with its top 16 bits all set, which marks a pool being given to another name): the
 * file's format, shared by every process and version that opens it. */
uint64_t cg_limiter_name_hash(const char *name);

/* Reserve one request costing `tokens` (0 = none) in pool `p`.  On success returns 0 and
 * the wait in ns before the request may go in `*wait_ns`.  When that wait would exceed
 * `max_wait_ns`, nothing is reserved and it returns 1 (`*wait_ns` still says how long
 * it would have been). */
int cg_limiter_reserve(struct cg_state *st, int p, const struct cg_limits *lim,
                       int64_t tokens, int64_t now, int64_t max_wait_ns, int64_t *wait_ns);

/* What one reservation moved a pool's TATs by (cg_limiter_reserve_took), for
 * cg_limiter_unreserve: for requests and for tokens, the ns it took (0: none) and the
 * TAT's value right after it. */
struct cg_limiter_resv {
  int64_t took_req, after_req;
  int64_t took_tok, after_tok;
};

/* cg_limiter_reserve that also says what the reservation took from the pool (`*resv`,
 * all 0 when it reserved nothing or did not wait). */
int cg_limiter_reserve_took(struct cg_state *st, int p, const struct cg_limits *lim,
                            int64_t tokens, int64_t now, int64_t max_wait_ns, int64_t *wait_ns,
                            struct cg_limiter_resv *resv);

/* Give back a reservation `*r` whose request was never sent: its call ended first (the
 * host removed the handle or aborted the wait, a hold or the deadline refused it), while
 * its turn `go_ns` (state clock) is still to come at `now` (a turn that came is spent).
 * Only the pool's last reservation can be: the calls after it sleep until their own
 * turns, and a turn taken back from under them would let a new call go beside one of
 * them (helper-65: two requests 1 ms apart, a provider 429).  So what it took comes off
 * a TAT when the TAT is still where it left it, and one that is not the last is kept (per
 * process, 64 at most) and comes off once every reservation after it was given back
 * too: a process cancelling many calls gets all their turns back, in any order.  Never
 * waits for a lock (it may run inside a state-file region).  Before, the calls a host
 * cancelled held every process of the pool back for their turns (10 handles removed at
 * 60 rpm: the next process's call waited 10 s; helper-63). */
void cg_limiter_unreserve(struct cg_state *st, int p, const struct cg_limiter_resv *r,
                          int64_t go_ns, int64_t now);

/* Add `delta` tokens (negative: give back) to pool `p`'s token account, once the real
 * usage of a request is known.  The usage comes from the response: one answer moves the
 * account by at most `max_ns` (max_retry_after), so a body claiming 2^53 tokens delays
 * the pool's next requests by that much at most, not for years. */
void cg_limiter_tokens_correct(struct cg_state *st, int p, const struct cg_limits *lim,
                               int64_t delta, int64_t max_ns);

/* Take an in-flight slot of pool `p` (limit `max`), waiting until `deadline_ns` at most,
 * in turn (below).  Returns the slot index (>= 0), -1 on timeout, -2 when the slot table
 * is full (the call then runs without one).  `*waited_ns` gets the time spent waiting. */
int cg_limiter_inflight_acquire(struct cg_state *st, int p, long max, int64_t deadline_ns,
                                int64_t *waited_ns);

/* ---- turns ----
 *
 * Waiters for an in-flight slot are served in the order they came, whichever API they
 * use and whichever process they are in.  A call that finds no slot free takes a ticket
 * (the pool's turn_next) and a word of the pool's `turns` (state.h) holding its ticket and
 * when it last looked, and counts itself in `waiters`.  A slot that is free while calls
 * wait is theirs: a call may take one only when fewer live waiters came before it than
 * slots are free (a newcomer: fewer than there are free slots at all).  A waiter looks at
 * least every CG_TURN_BEAT_MS (an easy-API call sleeps on the count's futex that long at
 * most, and is woken at every release; a multi-API call looks every CG_NB_SLOT_POLL_MS,
 * admit.h); one that has not looked for CG_TURN_STALE_MS (killed, or its host's loop
 * busy) is passed over, keeping its place for when it looks again, and after
 * CG_TURN_DROP_MS its word is freed (and its count taken off) by whoever finds it.  So a
 * killed or abandoned waiter holds the others up CG_TURN_STALE_MS + CG_TURN_BEAT_MS at
 * most, all at once, not one after another.  With every word taken, a waiter waits
 * behind them all without one, uncounted (a count with no word to find it by stayed
 * for good when its process was killed), and asks for a word each time it looks.  With nobody
 * waiting (`waiters` 0: the word beside the count, one load) a free slot is taken as
 * before: no more clock reads, no system call.  Before, an easy-API waiter woken at once by
 * every release took each slot ahead of a multi-API call that looks every 20 ms, which
 * waited out its deadline under a steady load (README: a `curl -Z` went after all 40
 * calls of 4 serial curls, at 8.1 s).  Redis keeps its own queue (redis-lua.h). */
#define CG_TURN_BEAT_MS 40   /* a sleeping waiter looks (and stamps its turn) this often */
#define CG_TURN_STALE_MS 150 /* a waiter not looking for this long is passed over */
#define CG_TURN_DROP_MS 2000 /* ... and its word freed after this */

/* A caller's place in turn: its ticket (0: none; zeroed memory is none) and its word. */
struct cg_limiter_turn {
  uint32_t ticket;
  int at;
};

/* One look for an in-flight slot of pool `p` (limit `max`), without waiting: the slot
 * (>= 0; -2 when the slot table is full: the call runs without one) when one is free and
 * it is the caller's turn; -1 otherwise.  A caller in turn (`t`) is stamped as looking
 * and leaves the turn when it gets a slot; one with none takes a place in turn when it
 * gets no slot and `wait` is set (it must then look again within CG_TURN_STALE_MS, and
 * cg_limiter_turn_drop its turn when it gives up).  `*seen`: the in-flight count its last
 * look saw (for a futex wait), set when -1.  Never waits, no lock. */
int cg_limiter_inflight_try(struct cg_state *st, int p, long max, struct cg_limiter_turn *t,
                            int wait, uint32_t *seen);

/* Give up turn `t` of pool `p` (nothing when it has none), waking the pool's sleeping
 * waiters: the next in turn may go now. */
void cg_limiter_turn_drop(struct cg_state *st, int p, struct cg_limiter_turn *t);

/* The calls waiting for a slot of `pool` now, for `stat`: its `waiters` without those
 * passed over (not looking for CG_TURN_STALE_MS: killed, or gave up unsaid).  Only
 * reads. */
uint32_t cg_limiter_waiting(const struct cg_state_pool *pool);

/* The parts, for unit tests.  A place in turn for `t` at `now` (cg_limiter_inflight_try's
 * clock: CLOCK_MONOTONIC ms, low 32 bits): 1, or 0 when every word is taken (`t` then has
 * none).  The live waiters of `pool` that came before `t` (all of them when it has none),
 * counting up to `enough` at most, freeing words not looked at for CG_TURN_DROP_MS. */
int cg_limiter_turn_take(struct cg_state_pool *pool, struct cg_limiter_turn *t, uint32_t now);
uint32_t cg_limiter_turns_ahead(struct cg_state_pool *pool, const struct cg_limiter_turn *t,
                                uint32_t now, uint32_t enough);

/* Give back slot `slot` of pool `p` and wake the pool's sleeping waiters. */
void cg_limiter_inflight_release(struct cg_state *st, int p, int slot);

/* Take back the slots of pool `p` (all pools when p < 0) held by processes that are
 * gone.  Returns how many. */
int cg_limiter_reclaim(struct cg_state *st, int p);

/* Hold every process's requests in pool `p` until `until_ns` (a 429's hint): new
 * reservations are placed after it, and callers already waiting check it again
 * (cg_limiter_hold_until) before they send. */
void cg_limiter_hold(struct cg_state *st, int p, int64_t until_ns);
/* Inline, as cg_limiter_count: one load on the per-request path (issue 16). */
static inline int64_t cg_limiter_hold_until(struct cg_state *st, int p) {
  return __atomic_load_n(&st->pools[p].hold_until, __ATOMIC_ACQUIRE);
}

/* Keyed holds (version 6 of the state file).  A provider may limit each API key, or each
 * model, on its own behind one host and port (OpenAI, Anthropic and Gemini limit per
 * model; a service calling for its tenants uses a key each).  A 429 of one such limit
 * says nothing of the others: holding the whole pool for it, every other key's call waits
 * out a hint that was not meant for it, and while the 429s of several keys keep re-arming
 * one hold, the pool sends one request a hint (a helper's oracle: 4 calls of 4 keys, each
 * answered 429 with Retry-After: 2 twice, -m 10: `curl --retry 3` 4 of 4, the guard 0
 * to 1).  So a call's 429 holds the calls of its own limit key (`key`, guard.c
 * cg__limit_key: a hash of its credential header and its model; 0: it has neither) until
 * `until_ns`: up to CG_STATE_KEYED_HOLDS keys a pool at once, each in a compare-and-swap
 * word; with no word free, the word of the hold that ends first (its key's other calls
 * may then go early and meet their own 429); `key` 0: the whole pool (cg_limiter_hold),
 * as before.  Two keys whose 24 bits meet share their holds.
 * `now`: cg_state_now(). */
void cg_limiter_hold_key(struct cg_state *st, int p, uint32_t key, int64_t until_ns,
                         int64_t now);
/* A keyed hold's word (state.h `keyed`): its end in ms << CG_KEYED_BITS | the key's low
 * CG_KEYED_BITS bits.  Its end in ns (0: a free word); at most 2^40 ms: no overflow. */
#define CG_KEYED_BITS 24
#define CG_KEYED_MASK ((1ull << CG_KEYED_BITS) - 1)
static inline int64_t cg_limiter_keyed_end(uint64_t w) {
  return (int64_t) (w >> CG_KEYED_BITS) * 1000000;
}
/* The bits of `key` a keyed word (and Redis's {pool}:hold:XXXXXX) holds: never 0 (a free
 * word) nor all set (cg_limiter_learn_key's "several keys"). */
static inline uint32_t cg_limiter_key24(uint32_t key) {
  uint32_t k = key & (uint32_t) CG_KEYED_MASK;
  return k == 0 ? 1 : k == (uint32_t) CG_KEYED_MASK ? k - 1 : k;
}
/* The end of `key`'s hold in pool `p` (ns; 0 or passed: none).  Out of line. */
int64_t cg_limiter_key_until_far(struct cg_state *st, int p, uint32_t key);
/* When the calls of `key` may go in pool `p`: the later of the pool's hold and the key's
 * (ns; <= now: not held).  Inline: with no keyed hold in the pool, two loads (issue 16). */
static inline int64_t cg_limiter_held_until(struct cg_state *st, int p, uint32_t key,
                                            int64_t now) {
  int64_t pool = __atomic_load_n(&st->pools[p].hold_until, __ATOMIC_ACQUIRE), k;
  if (__builtin_expect(__atomic_load_n(&st->pools[p].keyed_until, __ATOMIC_ACQUIRE) <= now, 1) ||
      !key)
    return pool;
  k = cg_limiter_key_until_far(st, p, key);
  return k > pool ? k : pool;
}

/* Whether a 429 of limit key `key` (0: none) may cut pool `p`'s learned rate (limiter.h
 * "learning"): 1 for key 0; for a key, 1 when the pool's last 429, within
 * CG_LEARN_KEYS_MS, was the same key's (the pool's 429s come from one limit, which may
 * be the pool's); 0 for a key's first 429 (which key's limit it was is not known yet),
 * and once another key's came within that time, until CG_LEARN_KEYS_MS pass with no 429
 * (several limits).  One rate for the pool is right when one limit is behind it; with a
 * limit per key (keyed holds, above) a rate cut for every key's 429 starves all keys.
 * Such 429s still hold their key; a 529 or a 503 (the provider's own overload, every
 * key's) still cuts. */
int cg_limiter_learn_key(struct cg_state *st, int p, uint32_t key, int64_t now);

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
/* Inline: one atomic add on the per-request path, no call of its own (issue 16). */
static inline void cg_limiter_count(struct cg_state *st, int p, enum cg_counter c) {
  struct cg_state_pool *pool = &st->pools[p];
  uint64_t *w = c == CG_CNT_ADMITTED  ? &pool->admitted
                : c == CG_CNT_WAITED  ? &pool->waited
                : c == CG_CNT_REJECTED ? &pool->rejected
                                       : &pool->seen_429;
  __atomic_fetch_add(w, 1, __ATOMIC_RELAXED);
}

/* Requests (or tokens) that could go right now without waiting, for `stat`. */
double cg_limiter_available(int64_t tat, double per_minute, double burst, int64_t now);

/* ---- learning the rate ----
 *
 * With no limit known, the pool learns one from the provider's throttles, as the AWS
 * SDKs' adaptive retry mode does (botocore retries/adaptive.py, throttling.py): CUBIC
 * (β 0.7, C 0.4) over a rate in requests/s shared by every process of the pool in the
 * state file (struct cg_state_pool learn_*).
 *   - start: a fresh pool starts at CG_LEARN_START_RPS (a configured rpm: at it) and,
 *     until its first throttle, grows as TCP's slow start does: each answer adds
 *     1 / its latency, doubling the rate every round trip;
 *   - a throttle (429, 529, 503 with a Retry-After above 0, an overloaded_error event) of a request sent
 *     more than CG_LEARN_QUIET_NS after the last cut: W_max = the rate (the measured
 *     goodput when lower: answers that were not throttles, per half second, smoothed 0.8
 *     / 0.2 as botocore's RateClocker), rate = 0.7 * W_max; throttles of requests sent before do not cut
 *     again (one cut per round, so a burst of 429s to 60 processes is one cut, not
 *     0.7^60, and the answers of a provider still refilling its bucket after the cut do
 *     not cut it to the floor);
 *   - an answer that is not a throttle: rate = C (t - K)^3 + W_max, K = cbrt(W_max (1 -
 *     β) / C), t since the last cut; it grows no further than twice the measured
 *     goodput, and only throttles lower it;
 *   - bounded: never under CG_LEARN_FLOOR_RPS, never above the configured rpm (times the
 *     margin) nor CG_LEARN_MAX_RPS; a value read from the file is clamped the same way.
 * The learned rate is a ceiling applied on top of the configured limits
 * (cg_limiter_learn_take): a GCRA word (burst CG_LEARN_START_BURST before the first cut,
 * none after) that is only moved by a request
 * that goes (no reservation), so waiters follow the rate as it changes.  A 429 with
 * Retry-After still holds the pool (cg_limiter_hold) for its hint; the cut is the only
 * extra penalty, and only one per round.  lim->adaptive 0 switches all of it off. */
#define CG_LEARN_BETA 0.7
#define CG_LEARN_C 0.4
#define CG_LEARN_START_RPS 2.0     /* a fresh pool's first rate */
#define CG_LEARN_START_BURST 4.0   /* ... and the requests it lets go at once until a cut */
#define CG_LEARN_FLOOR_RPS 0.25    /* one request every 4 s at least */
#define CG_LEARN_MAX_RPS 1e6
#define CG_LEARN_MIN_RTT_S 0.01    /* slow start: latencies below count as 10 ms */
#define CG_LEARN_BUCKET_NS 500000000ull /* measurement buckets, as botocore's */
#define CG_LEARN_QUIET_NS 500000000LL  /* after a cut, throttles of requests sent
                                         * within this do not cut again */
#define CG_LEARN_POLL_MS 100       /* a waiter for the learned rate asks again this often */
#define CG_LEARN_KEYS_MS 10000     /* 429s of two keys this close: several limits (cg_limiter_learn_key) */

/* Pure parts (unit-tested): the ceiling of `lim` in requests/s; a rate clamped to
 * [floor, ceiling]; the rate after a cut; CUBIC's rate t_s after a cut from W_max; the
 * rate after one slow-start answer of latency_s. */
double cg_learn_ceiling(const struct cg_limits *lim);
double cg_learn_clamp(double rate, double ceiling);
double cg_learn_cut(double rate, double measured);
double cg_learn_cubic(double wmax, double t_s);
double cg_learn_slow_start(double rate, double latency_s);

/* Start pool `p`'s learning if it has not started (idempotent, any process). */
void cg_limiter_learn_start(struct cg_state *st, int p, const struct cg_limits *lim);

/* The learned rate of pool `p` in requests/s, clamped; 0 when not learning. */
double cg_limiter_learned(struct cg_state *st, int p, const struct cg_limits *lim);

/* A throttle of a request admitted at `sent_ns`, or any other answer (success) of one
 * that took `latency_ns`, seen at `now`. */
void cg_limiter_learn_throttle(struct cg_state *st, int p, const struct cg_limits *lim,
                               int64_t sent_ns, int64_t now);
void cg_limiter_learn_success(struct cg_state *st, int p, const struct cg_limits *lim,
                              int64_t latency_ns, int64_t now);

/* Whether pool `p`'s learned rate is still its slow start from nothing (never cut by a
 * throttle: CUBIC's W_max is 0), a guess no answer of the provider has backed yet. */
static inline int cg_limiter_learn_unproven(struct cg_state *st, int p) {
  double wmax;
  __atomic_load(&st->pools[p].learn_wmax, &wmax, __ATOMIC_ACQUIRE);
  return !(wmax > 0);
}

/* Take the learned rate's next place: 0 when the request may go now (it is counted),
 * else the ns until it might (nothing taken: ask again after waiting). */
int64_t cg_limiter_learn_take(struct cg_state *st, int p, const struct cg_limits *lim,
                              int64_t now);

#endif
