/* admit.c - the guard's side of the shared limiter (see admit.h). */
#include "admit.h"

#include "breaker.h"
#include "budget.h"
#include "clock.h"
#include "hot.h"
#include "log.h"
#include "ratelimit.h"
#include "saturate.h"
#include "tally.h"

#include <setjmp.h>

/* ---- guarded regions (state.h): a file cut short under a call ----
 *
 * Every access to the mapping below runs inside a region opened by the public entry
 * points at the end of this file.  A SIGBUS there (the file was truncated) lands back in
 * the entry point, which drops the mapping for the rest of the call and goes on as if
 * there were no state file (fail open), with one "curlguard:" line per process; the next
 * call's cg_state_get repairs the file (state.h). */

/* A wait runs the host's progress callback: never inside a region. */
static int cg__wait(cg_wait_fn wait, void *arg, int64_t ms) {
  struct cg_state_guard *g = cg_state_guard_suspend();
  int r = wait(arg, ms);
  cg_state_guard_resume(g);
  return r;
}

/* cg__wait inside cg__enter for a planned wait: one the host aborted counts in queue_ms
 * as long as it lasted (a finished one counts what it was planned to take, as before). */
static int cg__enter_wait(struct cg_admission *ad, cg_wait_fn wait, void *arg, int64_t ms) {
  int64_t t0 = cg_mono_ms();
  int r = cg__wait(wait, arg, ms);
  if (r != 0)
    ad->queue_ms += cg_mono_ms() - t0;
  return r;
}

/* cg_state_check takes the file's lock, and has its own region. */
static int cg__unguarded_check(struct cg_state *st) {
  struct cg_state_guard *g = cg_state_guard_suspend();
  int r = cg_state_check(st);
  cg_state_guard_resume(g);
  return r;
}

/* Cold: a file cut short under a call is rare, and each entry point's code for it goes
 * to its `.cold` part (hot.h). */
static __attribute__((cold, noinline)) void cg__fault(struct cg_admission *ad) {
  ad->state = NULL;
  ad->probe = 0;
  ad->retry_slot = -1;
  cg_warn_once("state-truncated", "state file truncated during a request; this call "
               "runs on without the shared limiter");
}

/* Open a region on `ad`'s mapping; on a fault, run FAIL (after dropping the mapping). */
#define CG_GUARDED(ad, FAIL)                                                              \
  struct cg_state_guard g_;                                                               \
  if (sigsetjmp(g_.jb, 0) != 0) {                                                         \
    cg__fault(ad);                                                                        \
    FAIL;                                                                                 \
  }                                                                                       \
  cg_state_guard_push(&g_, (ad)->state)
#define CG_UNGUARD() cg_state_guard_pop(&g_)

/* ---- the shared-state interface (shared.h) ----
 *
 * Every step below asks the call's back end; a Redis step that fails (CG_SHARED_DOWN)
 * is done again on the state file, and the call stays on the file from then on. */

static struct cg_shared_pool *cg__sp(struct cg_admission *ad) {
  ad->sh.state = ad->state;
  ad->sh.p = ad->pool_index;
  ad->sh.cfg = ad->pool;
  if (!ad->sh.ops)
    ad->sh.ops = &cg_shared_mmap;
  return &ad->sh;
}

static void cg__sh_down(struct cg_admission *ad) {
  ad->sh.ops = &cg_shared_mmap;
}

/* The Redis steps before a send are bounded by the call's deadline (shared.h
 * cg_shared_redis_within): CG__WITHIN(ad) before one, CG__WITHIN_END after it. */
#define CG__WITHIN(ad) cg_shared_redis_within((ad)->deadline_ms)
#define CG__WITHIN_END() cg_shared_redis_within(0)

/* The call's limit key (admit.h), made on first use.  Out of line: asked only after a
 * 429 or in a pool some key of which is held. */
static __attribute__((noinline, cold)) uint32_t cg__key(struct cg_admission *ad) {
  if (!ad->key_made) {
    ad->key = ad->key_fn ? ad->key_fn(ad->key_arg) : 0;
    ad->key_made = 1;
  }
  return ad->key;
}

/* cg__sh_reserve on Redis. */
static __attribute__((noinline, cold)) int
cg__sh_reserve_far(struct cg_admission *ad, int64_t tokens, int64_t max_wait_ns,
                   int64_t *wait_ns, int64_t now) {
  struct cg_shared_pool *sp = cg__sp(ad);
  int r;
  sp->key = cg__key(ad); /* the fleet's hold of it comes with the reservation */
  CG__WITHIN(ad);
  r = sp->ops->reserve(sp, tokens, max_wait_ns, wait_ns, now);
  CG__WITHIN_END();
  if (r == CG_SHARED_DOWN) {
    cg__sh_down(ad);
    r = cg_shared_mmap.reserve(sp, tokens, max_wait_ns, wait_ns, 0);
  }
  return r;
}

/* Each step below is a test and a call, inlined at its call sites (some of them out of
 * line themselves): a call of its own would be one more function a request runs. */
#define CG__STEP inline __attribute__((always_inline))

/* The steps a request takes on the state file go straight to it (shared.h, "the state
 * file's steps"); the Redis back end's, out of line, through the interface. */
/* A reservation on the file not spent by an attempt's start: given back (limiter.h
 * cg_limiter_unreserve) when its turn is still to come.  Out of line: a call ends before
 * its attempt starts only when something stops it. */
static __attribute__((noinline, cold)) void cg__unreserve(struct cg_admission *ad) {
  ad->resv_pending = 0;
  if (ad->state && ad->pool_index >= 0)
    cg_limiter_unreserve(ad->state, ad->pool_index, &ad->resv, ad->resv_go_ns,
                         cg_state_now());
}

static CG__STEP int cg__sh_reserve(struct cg_admission *ad, int64_t tokens,
                                   int64_t max_wait_ns, int64_t *wait_ns, int64_t now) {
  int r;
  if (ad->sh.ops != &cg_shared_mmap)
    return cg__sh_reserve_far(ad, tokens, max_wait_ns, wait_ns, now);
  if (CG_RARE(ad->resv_pending))
    cg__unreserve(ad); /* one not spent (asked again for the same attempt) */
  now = cg_shared_file_now(now);
  r = cg_limiter_reserve_took(ad->state, ad->pool_index, &ad->pool->lim, tokens, now,
                              max_wait_ns, wait_ns, &ad->resv);
  if (r == 0 && *wait_ns > 0) {
    /* Only a turn still to come can be given back: one at once is spent now. */
    ad->resv_pending = 1;
    ad->resv_go_ns = now + *wait_ns;
  }
  return r;
}

/* When this call may go (the file's holds: the pool's, and its key's; ns). */
static CG__STEP int64_t cg__held_until(struct cg_admission *ad, int64_t now) {
  struct cg_state_pool *pool = &ad->state->pools[ad->pool_index];
  if (CG_RARE(__atomic_load_n(&pool->keyed_until, __ATOMIC_ACQUIRE) > now))
    return cg_limiter_held_until(ad->state, ad->pool_index, cg__key(ad), now);
  return __atomic_load_n(&pool->hold_until, __ATOMIC_ACQUIRE);
}

/* ns of 429 hold left for this call (the Redis back end's, else the file's). */
static int64_t cg__sh_hold_left(struct cg_admission *ad) {
  struct cg_shared_pool *sp = cg__sp(ad);
  int64_t now = cg_state_now(), local = cg__held_until(ad, now) - now, r;
  if (sp->ops == &cg_shared_mmap)
    return local;
  CG__WITHIN(ad);
  r = sp->ops->hold_left(sp, cg__key(ad));
  CG__WITHIN_END();
  return r > local ? r : local;
}

/* Hold the calls of this call's limit key (limiter.h keyed holds) for `for_ns`. */
static void cg__sh_hold(struct cg_admission *ad, int64_t for_ns) {
  struct cg_shared_pool *sp = cg__sp(ad);
  sp->ops->hold(sp, cg__key(ad), for_ns);
}

/* cg__sh_acquire on Redis. */
static __attribute__((noinline, cold)) int
cg__sh_acquire_far(struct cg_admission *ad, long max, int64_t left_ns, int64_t *waited_ns) {
  struct cg_shared_pool *sp = cg__sp(ad);
  int r;
  CG__WITHIN(ad);
  r = sp->ops->acquire(sp, max, left_ns, waited_ns);
  CG__WITHIN_END();
  if (r == CG_SHARED_DOWN) {
    int64_t w = *waited_ns;
    cg__sh_down(ad);
    r = cg_shared_mmap.acquire(sp, max, left_ns > w ? left_ns - w : 0, waited_ns);
    *waited_ns += w;
  }
  return r;
}

static CG__STEP int cg__sh_acquire(struct cg_admission *ad, long max, int64_t left_ns,
                                   int64_t *waited_ns) {
  if (ad->sh.ops != &cg_shared_mmap)
    return cg__sh_acquire_far(ad, max, left_ns, waited_ns);
  return cg_shared_file_acquire(ad->state, ad->pool_index, max, left_ns, waited_ns);
}

/* A Redis lease given back. */
static __attribute__((noinline, cold)) void cg__sh_release_far(struct cg_admission *ad,
                                                               int slot) {
  cg_shared_redis.release(cg__sp(ad), slot);
}

static CG__STEP void cg__sh_release(struct cg_admission *ad, int slot) {
  /* The handle says whose it is: the call may have moved to the file since. */
  if (slot >= CG_SHARED_LEASE_BASE)
    cg__sh_release_far(ad, slot);
  else
    cg_shared_file_release(ad->state, ad->pool_index, slot);
}

/* cg__sh_admit on Redis. */
static __attribute__((noinline, cold)) enum cg_breaker_verdict
cg__sh_admit_far(struct cg_admission *ad, int64_t probe_ns, int64_t *next_ns, int64_t now) {
  struct cg_shared_pool *sp = cg__sp(ad);
  int r;
  CG__WITHIN(ad);
  r = sp->ops->breaker_admit(sp, probe_ns, next_ns, now);
  CG__WITHIN_END();
  if (r == CG_SHARED_DOWN) {
    cg__sh_down(ad);
    r = cg_shared_mmap.breaker_admit(sp, probe_ns, next_ns, 0);
  } else if (r == CG_BREAKER_REJECT && sp->ops != &cg_shared_mmap && ad->state &&
             ad->pool_index >= 0) {
    /* The fleet's breaker refused: counted here as the file's own refusals are (which
     * cg_breaker_held takes back for a held call: uncounted, it wrapped to 2^64 - 1). */
    cg_breaker_count_rejected(ad->state, ad->pool_index);
  }
  return (enum cg_breaker_verdict) r;
}

static CG__STEP enum cg_breaker_verdict cg__sh_admit(struct cg_admission *ad,
                                                     int64_t probe_ns, int64_t *next_ns,
                                                     int64_t now) {
  if (ad->sh.ops != &cg_shared_mmap)
    return cg__sh_admit_far(ad, probe_ns, next_ns, now);
  return (enum cg_breaker_verdict) cg_shared_file_admit(ad->state, ad->pool_index, ad->pool,
                                                        probe_ns, next_ns, now);
}

/* cg__sh_seq on Redis. */
static __attribute__((noinline, cold)) uint32_t cg__sh_seq_far(struct cg_admission *ad) {
  return cg__sp(ad)->ops->breaker_seq(&ad->sh);
}

/* The breaker's futex word, read before asking it (cg__breaker_gate). */
static CG__STEP uint32_t cg__sh_seq(struct cg_admission *ad) {
  if (ad->sh.ops != &cg_shared_mmap)
    return cg__sh_seq_far(ad);
  return cg_breaker_seq(ad->state, ad->pool_index);
}

/* cg__sh_report on Redis. */
static __attribute__((noinline, cold)) void
cg__sh_report_far(struct cg_admission *ad, int failed, int probe, int64_t floor_ns,
                  int64_t start_ns) {
  struct cg_shared_pool *sp = cg__sp(ad);
  if (sp->ops->breaker_report(sp, failed, probe, floor_ns, start_ns) == CG_SHARED_DOWN) {
    cg__sh_down(ad);
    cg_shared_mmap.breaker_report(sp, failed, 0 /* not the file's probe */, floor_ns, start_ns);
  }
}

/* `now`: the caller's cg_state_now(), or 0 (read when needed). */
static CG__STEP void cg__sh_report(struct cg_admission *ad, int failed, int probe,
                                   int64_t floor_ns, int64_t start_ns, int64_t now) {
  if (ad->sh.ops != &cg_shared_mmap || CG_RARE(probe == 2)) /* Redis, or an early probe */
    cg__sh_report_far(ad, failed, probe, floor_ns, start_ns);
  else
    cg_shared_file_report(ad->state, ad->pool_index, ad->pool, failed, probe, floor_ns,
                          start_ns, now);
}

#define CG_EARLY_MIN_MS 300 /* an early probe leaves its attempt at least this long */

/* What an attempt of this call sent as the probe needs of its deadline, ms: as long as a
 * successful attempt of the pool took (cg_breaker_ok_ms) plus a quarter, as long as the
 * call's previous attempt, plus CG_MIN_ATTEMPT_MS each; with no success seen, a fifth of
 * the call's whole deadline; at least CG_EARLY_MIN_MS.  -1 when that is longer than the
 * whole deadline (the pool's answers take longer). */
static int64_t cg__probe_need(struct cg_admission *ad) {
  int64_t ok, need = CG_EARLY_MIN_MS;
  ok = cg_breaker_ok_ms(ad->state, ad->pool_index);
  if (ok > 0 && ok + ok / 4 + CG_MIN_ATTEMPT_MS > need)
    need = ok + ok / 4 + CG_MIN_ATTEMPT_MS;
  if (ok <= 0 && ad->span_ms / 5 > need)
    need = ad->span_ms / 5;
  if (ad->last_attempt_ms + CG_MIN_ATTEMPT_MS > need)
    need = ad->last_attempt_ms + CG_MIN_ATTEMPT_MS;
  if (ad->span_ms > 0 && need > ad->span_ms)
    return -1; /* the pool's answers take longer than the whole deadline */
  return need;
}

/* The time left, ns, that the next regular probe must start within for this call to be
 * held for it: the deadline less what the probe's answer needs (cg__probe_need).  Held
 * for a probe that starts with only CG_MIN_ATTEMPT_MS left, the call was sent as that
 * probe to be abandoned (exit 28, possibly billed) where its early probe, at its last
 * chance, would have had the time. */
static int64_t cg__probe_left_ns(struct cg_admission *ad, int64_t deadline_ms,
                                 int64_t now_ms) {
  int64_t need = cg__probe_need(ad);
  if (need < CG_MIN_ATTEMPT_MS)
    need = CG_MIN_ATTEMPT_MS;
  return (deadline_ms - now_ms - need) * 1000000;
}

/* When a held call whose deadline cannot see the next probe may be the probe early
 * (cg__sh_early): at its last chance, when the deadline leaves its attempt what it needs
 * (cg__probe_need).  Sent as soon as it is held, the probe would most often find the
 * outage the regular probe just found, and the calls held with it would spend their
 * attempts on it one after the other (a 2.5 s outage, 8 POSTs, --max-time 3.5: 3 of 8);
 * at the last chance it sees the most of the outage's end.  Left less than the pool's
 * answers take, it would be a request sent to be abandoned (possibly billed: a helper's
 * provider answering in 800 ms, --max-time 2, 300 ms left: 5 POSTs sent, none done).
 * One a call: after a failed one its retries, cut to the last chance, would follow it at
 * once (4 calls, 12 requests in 10 ms).
 * Returns the ns until then (0: now; -1: too late for one, less than half of `need` left,
 * a deadline shorter than `need`, or the call had its early probe). */
static int64_t cg__early_in(struct cg_admission *ad, int64_t deadline_ms, int64_t now) {
  int64_t need, at;
  if (ad->early_probes)
    return -1; /* one a call: failed at its last chance, the provider is still down */
  need = cg__probe_need(ad);
  if (need < 0)
    return -1; /* the pool's answers take longer than the whole deadline */
  at = (deadline_ms - need) * 1000000 - now; /* `now`: CLOCK_MONOTONIC ns, as ms * 1e6 */
  if (at > 0)
    return at;
  /* Past it by more than half of it (a probe out meanwhile, or the call came late): too
   * little is left for the attempt, as the deadline rule says (fail fast). */
  return -at > need * 1000000 / 2 ? -1 : 0;
}

/* An early probe (shared.h breaker_early): a held call whose deadline cannot see the next
 * probe takes it at its last chance (cg__early_in) when none is out, instead of failing
 * fast (principle 2: `curl --retry` would still send its retry).  `left_ns`: to the
 * call's deadline.  1 when this call became the probe (ad->probe = 2, reported as such).
 * Out of line: only a refused call asks. */
static __attribute__((noinline, cold)) int cg__sh_early(struct cg_admission *ad,
                                                        int64_t left_ns, int64_t now) {
  struct cg_shared_pool *sp = cg__sp(ad);
  int r;
  CG__WITHIN(ad);
  r = sp->ops->breaker_early(sp, left_ns, now);
  CG__WITHIN_END();
  if (r == CG_SHARED_DOWN) {
    cg__sh_down(ad);
    r = cg_shared_mmap.breaker_early(sp, left_ns, 0);
  }
  if (r != 1)
    return 0;
  ad->probe = 2;
  ad->early_probes++;
  if (ad->state && ad->pool_index >= 0) /* not failed fast: admit's count taken back */
    cg_breaker_held(ad->state, ad->pool_index, 0);
  return 1;
}

static void cg__sh_brelease(struct cg_admission *ad) {
  struct cg_shared_pool *sp = cg__sp(ad);
  sp->ops->breaker_release(sp);
}

static enum cg_breaker_state cg__sh_bstate(struct cg_admission *ad) {
  struct cg_shared_pool *sp = cg__sp(ad);
  int r = sp->ops->breaker_state(sp);
  if (r == CG_SHARED_DOWN) {
    cg__sh_down(ad);
    r = cg_shared_mmap.breaker_state(sp);
  }
  return (enum cg_breaker_state) r;
}

static int cg__sh_wait_ok(struct cg_admission *ad, int64_t left_ns) {
  struct cg_shared_pool *sp = cg__sp(ad);
  return sp->ops->breaker_wait_ok(sp, left_ns);
}

/* The learned rate's place (limiter.h): the file's, or the fleet's word on Redis. */
/* cg__sh_learn_take on Redis. */
static __attribute__((noinline, cold)) int64_t cg__sh_learn_take_far(struct cg_admission *ad,
                                                                     int64_t now) {
  struct cg_shared_pool *sp = cg__sp(ad);
  int64_t w;
  CG__WITHIN(ad);
  w = sp->ops->learn_take(sp, now);
  CG__WITHIN_END();
  if (w == CG_SHARED_DOWN) {
    cg__sh_down(ad);
    w = cg_shared_mmap.learn_take(sp, 0);
  }
  return w;
}

static CG__STEP int64_t cg__sh_learn_take(struct cg_admission *ad, int64_t now) {
  if (ad->sh.ops != &cg_shared_mmap)
    return cg__sh_learn_take_far(ad, now);
  return cg_shared_file_learn_take(ad->state, ad->pool_index, ad->pool, now);
}

/* cg__sh_bfirst on Redis. */
static __attribute__((noinline, cold)) void cg__sh_bfirst_far(struct cg_admission *ad,
                                                              int64_t now) {
  struct cg_shared_pool *sp = cg__sp(ad);
  sp->ops->budget_first(sp, now);
}

static CG__STEP void cg__sh_bfirst(struct cg_admission *ad, int64_t now) {
  if (ad->sh.ops != &cg_shared_mmap)
    cg__sh_bfirst_far(ad, now);
  else
    cg_shared_file_bfirst(ad->state, ad->pool_index, ad->pool, now);
}

static enum cg_budget_verdict cg__sh_bretry(struct cg_admission *ad, int64_t left_ns,
                                            int *slot) {
  struct cg_shared_pool *sp = cg__sp(ad);
  int r;
  CG__WITHIN(ad);
  r = sp->ops->budget_retry(sp, left_ns, slot);
  CG__WITHIN_END();
  if (r == CG_SHARED_DOWN) {
    cg__sh_down(ad);
    r = cg_shared_mmap.budget_retry(sp, left_ns, slot);
  }
  return (enum cg_budget_verdict) r;
}

static int64_t cg__sh_bwait(struct cg_admission *ad, enum cg_budget_verdict why) {
  struct cg_shared_pool *sp = cg__sp(ad);
  return sp->ops->budget_wait_ns(sp, (int) why);
}

/* Give back retry slot `slot` (>= 0).  The slot says whose it is (the call may have
 * moved to the file since). */
static __attribute__((noinline)) void cg__sh_bdone_slot(struct cg_admission *ad, int slot) {
  struct cg_shared_pool *sp = cg__sp(ad);
  if (slot >= CG_SHARED_BUDGET_BASE)
    cg_shared_redis.budget_done(sp, slot);
  else
    cg_shared_mmap.budget_done(sp, slot);
}

static CG__STEP void cg__sh_bdone(struct cg_admission *ad, int slot) {
  /* No slot held (the common call, not a retry): both back ends free nothing. */
  if (CG_RARE(slot >= 0))
    cg__sh_bdone_slot(ad, slot);
}

static void cg__sh_brefund(struct cg_admission *ad, int64_t granted_ns) {
  struct cg_shared_pool *sp = cg__sp(ad);
  sp->ops->budget_refund(sp, granted_ns);
}

/* Say once when the pool's shared windows (set by the first process to use the pool's
 * breaker and budget) differ from this process's: the shared ones are used. */
static void cg__windows(const struct cg_admission *ad, int64_t brk_ns, int64_t bud_ns) {
  const struct cg_pool_cfg *pc = ad->pool;
  if (CG_RARE(brk_ns != (int64_t) (pc->breaker.window_s * 1e9)))
    cg_warn_once("breaker-window",
                 "pool %s: the state file's breaker window is %g s (another process set it "
                 "first), not %g s; using %g s (curlguard reset clears it)",
                 pc->name, (double) brk_ns / 1e9, pc->breaker.window_s,
                 (double) brk_ns / 1e9);
  if (CG_RARE(bud_ns != (int64_t) (pc->budget.window_s * 1e9)))
    cg_warn_once("budget-window",
                 "pool %s: the state file's retry budget window is %g s (another process set "
                 "it first), not %g s; using %g s (curlguard reset clears it)",
                 pc->name, (double) bud_ns / 1e9, pc->budget.window_s, (double) bud_ns / 1e9);
}

/* The pool's index in the state file, claimed on first use (-1: no room, or no file).
 * Looked up once a call: a call that found no room (pool_index -2) does not look again
 * at each step.  `*slow` is set to 1 when the lookup may have taken time (a wait in the
 * limiter's lookup, the file re-made, Redis configured: a connect tried), so that a clock
 * reading made before it no longer holds (issue 16); else left as it is. */
static int cg__pool_at(struct cg_admission *ad, int *slow) {
  if (!ad->state)
    return -1;
  if (ad->pool_index == -1) {
    const struct cg_pool_cfg *pc = ad->pool;
    uint64_t h = pc->name_hash ? pc->name_hash : cg_limiter_name_hash(pc->name);
    ad->pool_index = cg_limiter_pool_hashed(ad->state, pc->name, h, &pc->lim, slow);
    if (CG_RARE(ad->pool_index < 0) && cg__unguarded_check(ad->state)) { /* garbage, re-made */
      *slow = 1;
      ad->pool_index = cg_limiter_pool_hashed(ad->state, pc->name, h, &pc->lim, slow);
    }
    if (CG_RARE(ad->pool_index < 0)) {
      ad->pool_index = -2;
      cg_warn_once("pools-full", "the state file has no room for pool %s (all %d pools "
                   "in use, used in the last %d minutes, or held); it runs unpaced", ad->pool->name,
                   CG_STATE_POOLS, CG_POOL_IDLE_MS / 60000);
      return -1;
    }
    cg__windows(ad, cg_breaker_configure(ad->state, ad->pool_index, &ad->pool->breaker),
                cg_budget_configure(ad->state, ad->pool_index, &ad->pool->budget));
    cg_limiter_learn_start(ad->state, ad->pool_index, &ad->pool->lim);
    CG__WITHIN(ad); /* a connect (and its set-up) fits the call's deadline */
    ad->sh.ops = cg_shared_redis_ready() ? &cg_shared_redis : &cg_shared_mmap;
    *slow |= cg_shared_redis_configured();
    CG__WITHIN_END();
  }
  return ad->pool_index < 0 ? -1 : ad->pool_index;
}

/* cg__pool_at for a caller with no clock reading to keep. */
static int cg__pool(struct cg_admission *ad) {
  int slow = 0;
  return cg__pool_at(ad, &slow);
}

/* Run the host's progress callback once, outside any region.  1: the host aborted. */
static int cg__tick(struct cg_admission *ad) {
  struct cg_state_guard *g;
  int r;
  if (!ad->tick)
    return 0;
  g = cg_state_guard_suspend();
  r = ad->tick(ad->tick_arg);
  cg_state_guard_resume(g);
  return r;
}

#define CG_PARK_MAX_NS 1000000000ll /* a parked call looks again at least once a second */

/* The rest of cg__breaker_gate once the breaker refused the call (verdict REJECT,
 * `next_ns` to the next probe, `seq` the breaker's word read before that ask): fail
 * fast, or with open = wait park for the probe's result and ask again while the deadline
 * allows (admit.h).  A refusal is rare (the breaker is open), so this is out of line:
 * its code stays off the lines the common request runs.  `*nowp`: the latest instant
 * read on return. */
static __attribute__((noinline, cold)) enum cg_gate
cg__breaker_refused(struct cg_admission *ad, int p, int64_t *nowp, int64_t deadline_ms,
                    int64_t *next_probe_ms, uint32_t seq, int64_t next_ns) {
  const struct cg_breaker_cfg *c = &ad->pool->breaker;
  int64_t now = *nowp, t0 = now, early;
  int held = 0;
  enum cg_gate r = CG_GATE_GO;

  for (;;) {
    int64_t now_ms = now / 1000000;
    int64_t left_ns = (deadline_ms - now_ms - CG_MIN_ATTEMPT_MS) * 1000000, nap;
    enum cg_breaker_verdict v;
    /* next_ns: relative (shared.h). */
    *next_probe_ms = next_ns > 0 ? (next_ns + 999999) / 1000000 : 0;
    /* Fail fast: open = fail, a fallback to divert to, no time left for an attempt; or
     * (below) the deadline cannot see the next probe and the call is past its last
     * chance to be an early one (a probe under way may answer any moment: waited for
     * while time is left). */
    if (!c->open_wait || ad->can_divert || left_ns <= 0) {
      r = CG_GATE_CIRCUIT_OPEN;
      break;
    }
    early = 0;
    if (!cg__sh_wait_ok(ad, cg__probe_left_ns(ad, deadline_ms, now_ms))) {
      /* The next probe is past the deadline: at the call's last chance it is the probe
       * if none is out (an early probe); until then it is held, as for a probe. */
      early = cg__early_in(ad, deadline_ms, now);
      if (!early && cg__sh_early(ad, (deadline_ms - now_ms) * 1000000, now))
        break;
      /* No early probe to be had now (one a call, the 1 s gap, a probe out, too late): a
       * regular probe that starts before the deadline is still better than failing fast
       * (a helper's find: with no success seen, the need is a fifth of the deadline, and
       * 3 of 4 calls held from the start of an outage failed with 2 s left and the next
       * probe, which succeeded, due in 1 s). */
      if (early <= 0 && !cg__sh_wait_ok(ad, left_ns)) {
        r = CG_GATE_CIRCUIT_OPEN;
        break;
      }
    }
    cg_breaker_held(ad->state, p, !held);
    held = 1;
    nap = next_ns > 0 ? next_ns : CG_PARK_MAX_NS;
    if (early > 0 && nap > early)
      nap = early;
    if (nap > CG_PARK_MAX_NS)
      nap = CG_PARK_MAX_NS;
    if (nap > left_ns)
      nap = left_ns;
    if (nap < 1000000)
      nap = 1000000;
    cg__sp(ad)->ops->breaker_park(&ad->sh, seq, nap);
    now = cg_state_now();
    cg_limiter_pool_touch(ad->state, p); /* a waiting call uses its pool */
    if (cg__tick(ad)) {
      r = CG_GATE_ABORTED;
      break;
    }
    /* Ask again, the breaker's word read first as in cg__breaker_gate. */
    seq = cg__sh_seq(ad);
    now_ms = now / 1000000;
    v = cg__sh_admit(ad, (deadline_ms - now_ms) * 1000000, &next_ns, now);
    if (v != CG_BREAKER_REJECT) {
      ad->probe = v == CG_BREAKER_PROBE;
      break;
    }
  }
  if (held) {
    now = cg_state_now();
    ad->breaker_wait_ms += (now - t0) / 1000000;
  }
  *nowp = now;
  return r;
}

/* The slow start's wait in cg__breaker_gate (rare: only in the ramp after a probe closed
 * the breaker): until `at`, this call's turn, never past its deadline (then it just
 * goes: the limiter still applies on top).  `*nowp`: the latest instant read. */
static __attribute__((noinline, cold)) enum cg_gate
cg__ramp_wait(struct cg_admission *ad, int64_t at, int64_t *nowp, int64_t deadline_ms) {
  int64_t now = *nowp, t1 = now;
  enum cg_gate r = CG_GATE_GO;
  for (;;) {
    /* The turn's wait ends early enough to leave the admission that follows its own
     * CG_MIN_ATTEMPT_MS besides the attempt's: ended at deadline - CG_MIN_ATTEMPT_MS, the
     * limiter then found less than that left and refused ("rate limit wait 0.0 s exceeds
     * deadline"), where the call was meant to just go. */
    int64_t left_ns = (deadline_ms - cg_mono_ms() - 2 * CG_MIN_ATTEMPT_MS) * 1000000;
    int64_t nap = at - now;
    if (nap <= 0 || left_ns <= 0)
      break;
    if (nap > CG_PARK_MAX_NS)
      nap = CG_PARK_MAX_NS;
    if (nap > left_ns)
      nap = left_ns;
    cg_sleep_ms((nap + 999999) / 1000000);
    now = cg_state_now();
    if (cg__tick(ad)) {
      r = CG_GATE_ABORTED;
      break;
    }
  }
  ad->breaker_wait_ms += (now - t1) / 1000000;
  *nowp = now;
  return r;
}

/* Ask pool `p`'s breaker (enabled, and this call not already its probe): GO, possibly
 * as the half-open probe, or CIRCUIT_OPEN with the time to the next probe.  With
 * open = wait, a refused call parks for the probe's result while its deadline allows
 * (admit.h); `ramp`: take a slow-start ticket (the first ask of an attempt only). */
/* `*nowp`: cg_state_now() read just before; the latest instant read on return (the same
 * when nothing waited). */
static enum cg_gate cg__breaker_gate(struct cg_admission *ad, int p, int64_t *nowp,
                                     int64_t deadline_ms, int64_t *next_probe_ms, int ramp) {
  const struct cg_breaker_cfg *c = &ad->pool->breaker;
  int64_t now = *nowp, next_ns;
  enum cg_gate r = CG_GATE_GO;
  uint32_t seq;
  enum cg_breaker_verdict v;

  if (!c->enabled || ad->probe)
    return CG_GATE_GO; /* the probe itself goes: it is what the breaker waits for */
  seq = cg__sh_seq(ad);
  /* `now` is CLOCK_MONOTONIC too (cg_state_now): ns -> ms without another read. */
  v = cg__sh_admit(ad, (deadline_ms - now / 1000000) * 1000000, &next_ns, now);
  if (CG_RARE(v == CG_BREAKER_REJECT))
    r = cg__breaker_refused(ad, p, &now, deadline_ms, next_probe_ms, seq, next_ns);
  else
    ad->probe = v == CG_BREAKER_PROBE;
  if (r == CG_GATE_GO && ramp && !ad->probe) {
    int64_t at = cg_breaker_ramp(ad->state, p, c, now);
    /* 0: no slow start under way (the common case), nothing waited, nothing to add. */
    if (CG_RARE(at > 0))
      r = cg__ramp_wait(ad, at, &now, deadline_ms);
  }
  *nowp = now;
  return r;
}

static enum cg_gate cg__gate_repeat(struct cg_admission *ad, int64_t deadline_ms,
                                    int64_t now);

/* The longest the limiter may make an attempt wait (ms) with the deadline at
 * `deadline_ms` and the clock at `now_ms`: what leaves the attempt CG_MIN_ATTEMPT_MS.  A
 * call's first attempt with less than that left still goes when it need not wait (0):
 * the host chose that deadline, and without the guard the request would be sent (before,
 * `curl -m 0.05` failed at once with "rate limit wait 0.0 s exceeds deadline", no limit
 * set).  A retry with less left is not started. */
static int64_t cg__wait_room_ms(const struct cg_admission *ad, int64_t deadline_ms,
                                int64_t now_ms) {
  int64_t left = deadline_ms - now_ms - CG_MIN_ATTEMPT_MS;
  return left < 0 && ad->first_attempt && now_ms < deadline_ms ? 0 : left;
}

/* `*nowp`: as cg_admission_gate_at's. */
static enum cg_gate cg__gate(struct cg_admission *ad, int attempt, int host_repeat,
                             int64_t deadline_ms, int64_t *next_probe_ms, int64_t *nowp) {
  int p, slow = 0, file;
  int64_t now, t0;
  enum cg_gate r;

  ad->first_attempt = attempt == 1;
  p = cg__pool_at(ad, &slow);

  *next_probe_ms = 0;
  if (p < 0) {
    if (slow)
      *nowp = 0;
    return CG_GATE_GO;
  }
  /* The caller's reading, unless the lookup may have taken time (issue 16: a clock read
   * less a call).  On the file, no step below takes time unless it waits, which reads
   * the clock again (cg__breaker_refused, cg__ramp_wait). */
  file = ad->sh.ops == &cg_shared_mmap;
  now = t0 = *nowp > 0 && !slow ? *nowp : cg_state_now();
  r = cg__breaker_gate(ad, p, &now, deadline_ms, next_probe_ms, 1);
  if (r == CG_GATE_GO) {
    if (attempt != 1)
      cg_limiter_pool_touch(ad->state, p); /* used until the call's last attempt; the guard's
                                            * own retry was granted when it was decided */
    else if (CG_RARE(host_repeat))
      r = cg__gate_repeat(ad, deadline_ms, now);
    else
      cg__sh_bfirst(ad, now);
  }
  /* Still the instant of the gate's end only when nothing waited (the breaker's park or
   * slow start read the clock anew, and ran the host's callback) and no step was a Redis
   * round trip. */
  *nowp = file && now == t0 ? now : 0;
  return r;
}

/* The budget's part of cg__gate for a host's repeat of a failed call (repeat.h): take a
 * retry from it.  Out of line: a repeat is not the common call. */
static __attribute__((noinline, cold)) enum cg_gate
cg__gate_repeat(struct cg_admission *ad, int64_t deadline_ms, int64_t now) {
  int slot;

  if (ad->repeat_granted)
    return CG_GATE_GO; /* granted after a wait (cg_admission_repeat_wait) */
  if (cg__sh_bretry(ad, (deadline_ms - cg_mono_ms()) * 1000000, &slot) !=
      CG_BUDGET_GRANTED) {
    if (ad->probe)
      cg__sh_brelease(ad);
    ad->probe = 0;
    return CG_GATE_BUDGET;
  }
  ad->retry_slot = slot;
  ad->retry_granted_ns = now;
  return CG_GATE_GO;
}

static enum cg_gate cg__recheck(struct cg_admission *ad, int64_t deadline_ms,
                                int64_t *next_probe_ms) {
  int p = ad->state ? ad->pool_index : -1;
  int64_t now;

  *next_probe_ms = 0;
  if (p < 0)
    return CG_GATE_GO;
  now = cg_state_now();
  return cg__breaker_gate(ad, p, &now, deadline_ms, next_probe_ms, 0);
}

static int cg__probing(const struct cg_admission *ad) {
  int p = ad->state ? ad->pool_index : -1;
  return p >= 0 && cg__sh_bstate((struct cg_admission *) ad) == CG_BREAKER_HALF_OPEN;
}

/* `now`: as cg_admission_result_at's. */
static void cg__result(struct cg_admission *ad, enum cg_outcome o, long status,
                       int hinted, int defer, int64_t hint_ms, int64_t now) {
  int p = ad->state ? ad->pool_index : -1;
  if (p < 0)
    return;
  if (ad->pool->breaker.enabled) {
    int counts = cg_breaker_counts(o, status, hinted);
    int64_t floor_ms = hint_ms < ad->max_retry_after_ms ? hint_ms : ad->max_retry_after_ms;
    if (o == CG_OUT_OK) /* the pool's answer time, for an early probe (cg__early_in) */
      cg_breaker_note_ok(ad->state, p, ad->last_attempt_ms);
    else if (CG_RARE(ad->probe == 2) && (o == CG_OUT_FIRST_BYTE_TIMEOUT ||
                                         o == CG_OUT_READ_TIMEOUT || o == CG_OUT_DEADLINE))
      /* An early probe that ran out of time: the pool's answers take longer than it was
       * left, whatever the last success took (a helper's find: a provider back at 300 ms
       * after 20 ms before the outage, early probes sent to be abandoned one after
       * another).  At least twice that, from now on. */
      cg_breaker_note_slow(ad->state, p, 2 * ad->last_attempt_ms);
    if (!(defer && counts == 1 && !ad->probe))
      cg__sh_report(ad, counts, ad->probe, floor_ms > 0 ? floor_ms * 1000000 : 0,
                    ad->attempt_start_ns > 0 ? ad->attempt_start_ns : cg_state_now(), now);
  }
  ad->probe = 0;
  /* Not a retry (granted_ns 0, the common call): both back ends refund nothing. */
  if (CG_RARE(o == CG_OUT_OK && ad->retry_granted_ns > 0))
    cg__sh_brefund(ad, ad->retry_granted_ns);
  ad->retry_granted_ns = 0;
  cg__sh_bdone(ad, ad->retry_slot);
  ad->retry_slot = -1;
}

#define CG_BUDGET_WAIT_ROUNDS 8192 /* bounded: each round waits >= 10 ms or ends */
/* A retry waiting for the budget looks at the breaker at least this often: one that
 * opened meanwhile (open = fail, or no probe within the deadline) ends the wait with the
 * answer in hand, as it would have before the wait. */
#define CG_BUDGET_RECHECK_MS 250

/* Whether the breaker refuses a retry now: it is not closed, and the pool fails fast
 * while open (open = fail), or the call's deadline cannot see the next probe and it is
 * past its last chance to be an early one (cg__early_in: the answer in hand is kept,
 * where the gate would refuse the retry with nothing).  A backoff that would end past
 * that last chance is cut to it (cg_admission_early_in_ms, guard.c). */
static int cg__retry_breaker_refuses(struct cg_admission *ad) {
  if (!ad->pool->breaker.enabled || cg__sh_bstate(ad) == CG_BREAKER_CLOSED)
    return 0;
  if (!ad->pool->breaker.open_wait)
    return 1;
  if (cg__sh_wait_ok(ad, cg__probe_left_ns(ad, ad->deadline_ms, cg_mono_ms())))
    return 0;
  /* No early probe to come: a regular probe before the deadline, as cg__breaker_refused */
  return cg__early_in(ad, ad->deadline_ms, cg_mono_ms() * 1000000) < 0 &&
         !cg__sh_wait_ok(ad, (ad->deadline_ms - cg_mono_ms() - CG_MIN_ATTEMPT_MS) * 1000000);
}

/* Take a retry from pool `p`'s budget, waiting for it while the wait leaves the call's
 * deadline `need_ms` for the attempt (budget.h), in slices of at most
 * CG_BUDGET_RECHECK_MS; with `breaker`, the breaker is asked again before each slice.
 * 0: granted (`*slot` set); 1: it cannot fit; -3: the host aborted the wait; -4: the
 * breaker opened meanwhile and refuses.  `*waited_ms` gets the time waited. */
static int cg__breaker_holds(struct cg_admission *ad, int64_t need_ms);

/* A guard retry the budget refused, whose wait for the window does not fit the deadline:
 * whether to ask again in CG_BUDGET_RECHECK_MS anyway (a refund, or the breaker opening
 * and holding calls, may let it go sooner): while the pool's breaker holds calls and an
 * attempt of `need_ms` still fits after that wait. */
static int cg__budget_reask(const struct cg_admission *ad, int64_t need_ms) {
  return ad->pool->breaker.enabled && ad->pool->breaker.open_wait &&
         cg_mono_ms() + CG_BUDGET_RECHECK_MS + need_ms + CG_MIN_ATTEMPT_MS <= ad->deadline_ms;
}

static int cg__budget_take(struct cg_admission *ad, int p, int64_t need_ms, int64_t sleep_ms,
                           int breaker, cg_wait_fn wait, void *wait_arg, int64_t *waited_ms,
                           int *slot) {
  int rounds;
  *waited_ms = 0;
  for (rounds = 0; rounds < CG_BUDGET_WAIT_ROUNDS; rounds++) {
    int64_t ns, ms, t0;
    enum cg_budget_verdict v;
    if (breaker && rounds > 0 && cg__retry_breaker_refuses(ad))
      return -4;
    v = cg__sh_bretry(ad, (ad->deadline_ms - cg_mono_ms()) * 1000000, slot);
    if (v == CG_BUDGET_GRANTED)
      return 0;
    /* Refused while the open breaker holds calls: the call is held for its probe like
     * them (-5, guard.c: breaker_hold); the breaker, not the budget, gates the pool now,
     * one probe at a time, then its slow start.  Refused, it ended with most of its
     * deadline left while the held calls completed (16 POSTs, 2.5 s of 503s, --max-time
     * 5: 7 of 16, curl --retry 2: 16). */
    if (breaker && cg__breaker_holds(ad, need_ms))
      return -5;
    ns = cg__sh_bwait(ad, v);
    ms = (ns + 999999) / 1000000;
    /* It must leave room for what follows the wait: the rest of the retry's backoff
     * (`sleep_ms` counts the wait) and an attempt. */
    if (!wait || cg_mono_ms() +
                         (sleep_ms - *waited_ms > ms ? sleep_ms - *waited_ms : ms) + need_ms +
                         CG_MIN_ATTEMPT_MS >
                     ad->deadline_ms) { /* and a margin to hand over the answer in hand */
      /* The window's expiry is not the only way in: a refund (a retry that succeeded)
       * or a breaker that opens (-5 above) may let it go sooner; ask again while an
       * attempt still fits. */
      if (!breaker || !wait || !cg__budget_reask(ad, need_ms))
        return 1;
      ms = CG_BUDGET_RECHECK_MS;
    }
    t0 = cg_mono_ms();
    if (cg__wait(wait, wait_arg, ms < CG_BUDGET_RECHECK_MS ? ms : CG_BUDGET_RECHECK_MS) != 0)
      return -3;
    *waited_ms += cg_mono_ms() - t0;
  }
  return 1;
}

static const char *cg__retry(struct cg_admission *ad, int64_t need_ms, int64_t sleep_ms,
                             cg_wait_fn wait, void *wait_arg, int64_t *waited_ms) {
  int p = ad->state ? ad->pool_index : -1;
  int64_t now;
  int slot, r;
  *waited_ms = 0;
  if (p < 0)
    return NULL;
  now = cg_state_now();
  /* open = wait: the retry's gate holds it for the probe if its deadline can see one, or
   * lets it be an early probe; refused here (the answer in hand kept) only when neither. */
  (void) now;
  if (cg__retry_breaker_refuses(ad))
    return "circuit_open";
  cg__sh_bdone(ad, ad->retry_slot); /* never two: one retry at a time */
  ad->retry_slot = -1;
  if (ad->retry_scheduled)
    return NULL; /* a 429's Retry-After: the provider's schedule (admit.h) */
  r = cg__budget_take(ad, p, need_ms, sleep_ms, 1, wait, wait_arg, waited_ms, &slot);
  if (r == -3)
    return "aborted_by_host";
  if (r == -4)
    return "circuit_open";
  if (r == -5)
    return "breaker_hold";
  if (r != 0)
    return "retry_budget_exhausted";
  ad->retry_slot = slot;
  ad->retry_granted_ns = cg_state_now();
  return NULL;
}

static int cg__repeat_wait(struct cg_admission *ad, cg_wait_fn wait, void *wait_arg,
                           int64_t *waited_ms) {
  int p = ad->state ? ad->pool_index : -1;
  int slot, r;
  *waited_ms = 0;
  if (p < 0)
    return 0;
  r = cg__budget_take(ad, p, CG_MIN_ATTEMPT_MS, 0, 0, wait, wait_arg, waited_ms, &slot);
  if (r == 0) {
    ad->retry_slot = slot;
    ad->retry_granted_ns = cg_state_now();
    ad->repeat_granted = 1;
  }
  return r;
}

static void cg__finish(struct cg_admission *ad) {
  int p = ad->state ? ad->pool_index : -1;
  if (ad->sh.queued) { /* a multi waiter's place in a Redis queue (admit.h) */
    if (ad->sh.ops && ad->sh.ops->queue_leave)
      ad->sh.ops->queue_leave(&ad->sh);
    ad->sh.queued = 0;
  }
  if (p < 0)
    return;
  if (ad->resv_pending)
    cg__unreserve(ad); /* the call ended before its attempt started */
  if (ad->probe)
    cg__sh_brelease(ad);
  ad->probe = 0;
  cg__sh_bdone(ad, ad->retry_slot);
  ad->retry_slot = -1;
}

/* cg__enter after a reservation that must wait `wait_ns` (> 0): the wait, then any 429
 * hold another process learnt of meanwhile.  0: go on; -1 (`*wait_ms` set) or -3 as
 * cg__enter returns.  Out of line: a paced call is not the common request. */
static __attribute__((noinline, cold)) int
cg__enter_reserved(struct cg_admission *ad, int64_t deadline_ms, cg_wait_fn wait,
                   void *wait_arg, int64_t wait_ns, int64_t *wait_ms) {
  int rounds;
  ad->waited = 1;
  cg_limiter_count(ad->state, ad->pool_index, CG_CNT_WAITED);
  if (cg__enter_wait(ad, wait, wait_arg, (wait_ns + 999999) / 1000000) != 0)
    return -3; /* the host aborted while waiting */
  ad->queue_ms += wait_ns / 1000000;
  /* A 429 seen by another process while we slept holds us too.  Holds only move
   * forward and each wait is checked against the deadline: a few rounds at most. */
  for (rounds = 0; rounds < 4; rounds++) {
    int64_t hold = cg__sh_hold_left(ad);
    if (hold <= 0)
      break;
    if (hold / 1000000 > deadline_ms - cg_mono_ms() - CG_MIN_ATTEMPT_MS ||
        hold / 1000000 > ad->max_retry_after_ms) {
      *wait_ms = hold / 1000000;
      return -1;
    }
    if (cg__enter_wait(ad, wait, wait_arg, (hold + 999999) / 1000000) != 0)
      return -3;
    ad->queue_ms += hold / 1000000;
  }
  return 0;
}

/* Until when (monotonic ms) a call whose admission began at `start_ms` may wait for its
 * pool's learned rate: while the rate is the slow start's guess from nothing (no
 * throttle ever cut it, cg_limiter_learn_unproven), 1/CG_GUESS_SHARE of the time it had
 * then; once a throttle backed it, as long as the deadline allows (INT64_MAX).  Without
 * this, 8 calls of 3 s started at once with curl -m 4 and no fault at all: the slow
 * start's 2 requests/s (burst 4) held calls 5 to 8 for 0.5 to 2.0 s, and 3 of them ran
 * out of time where plain curl finished all 8 (guide: "Finish the job"). */
static int64_t cg__guess_until(struct cg_admission *ad, int64_t start_ms, int64_t deadline_ms) {
  if (!cg_limiter_learn_unproven(ad->state, ad->pool_index) || deadline_ms <= start_ms)
    return INT64_MAX;
  return start_ms + (deadline_ms - start_ms) / CG_GUESS_SHARE;
}

/* cg__enter's wait for a 429 hold or the learned rate (limiter.h), once its first round
 * found one (`hold` > 0, or `w` > 0 from the learned rate).  The learned rate is a
 * ceiling nobody reserves ahead of, so waiters follow it as it changes; asked again at
 * least every CG_LEARN_POLL_MS.  It is the guard's guess, not the provider's word: it
 * delays a call, never fails one.  A wait for it that would pass the deadline ends, and
 * the call goes (the provider decides; a 429 is retried by the matrix).  A 429 hold is
 * the provider's word: past the deadline it fails fast, as in cg__enter_reserved.
 * `wait_ns`: the reservation's wait (> 0: WAITED is counted already).  0: go on; -1
 * (`*wait_ms` set) or -3 as cg__enter returns.  Out of line: rare in a steady state. */
static __attribute__((noinline, cold)) int
cg__enter_paced(struct cg_admission *ad, int64_t deadline_ms, cg_wait_fn wait,
                void *wait_arg, int64_t wait_ns, int64_t hold, int64_t w, int64_t *wait_ms) {
  struct cg_state *st = ad->state;
  /* The admission began before any wait already done (the reservation's, in queue_ms). */
  int64_t start_ms = cg_mono_ms() - ad->queue_ms;
  int rounds;
  for (rounds = 0; rounds < 100000; rounds++) {
    int64_t ms;
    if (rounds > 0) {
      int64_t now2 = cg_state_now();
      hold = cg__held_until(ad, now2) - now2;
      /* A 429 hold that began while we waited here holds us too (as above). */
      w = hold > 0 ? hold : cg__sh_learn_take(ad, now2);
      if (w <= 0)
        break;
    }
    if (hold > 0 && hold / 1000000 > ad->max_retry_after_ms) {
      *wait_ms = hold / 1000000;
      return -1;
    }
    ms = (w + 999999) / 1000000;
    if (ms > deadline_ms - cg_mono_ms() - CG_MIN_ATTEMPT_MS) {
      if (hold <= 0)
        break; /* the learned rate's wait does not fit: go now */
      cg_limiter_count(st, ad->pool_index, CG_CNT_REJECTED);
      *wait_ms = ms;
      return -1;
    }
    if (hold <= 0) {
      /* The slow start's share of the call's time is spent: go now (cg__guess_until).
       * Asked every round: a throttle that cut the rate meanwhile ends the guess (asked
       * once, every waiter went at once at its share's end, into a limit the pool had
       * learned: 32 processes, -m 30, 120 rpm: 22 requests within 20 ms, 35 429s
       * against 14). */
      int64_t share = cg__guess_until(ad, start_ms, deadline_ms) - cg_mono_ms();
      if (share <= 0)
        break;
      if (ms > share)
        ms = share;
    }
    if (rounds == 0 && wait_ns <= 0)
      cg_limiter_count(st, ad->pool_index, CG_CNT_WAITED);
    if (ms > CG_LEARN_POLL_MS)
      ms = CG_LEARN_POLL_MS;
    {
      int64_t t0 = cg_mono_ms();
      int aborted;
      ad->waited = 1;
      aborted = cg__wait(wait, wait_arg, ms) != 0;
      ad->queue_ms += cg_mono_ms() - t0; /* as long as it lasted, aborted or not */
      if (aborted)
        return -3;
    }
  }
  return 0;
}

/* `*nowp`: as cg_admission_enter_at's. */
static int cg__enter(struct cg_admission *ad, int64_t deadline_ms, cg_wait_fn wait,
                     void *wait_arg, int64_t *wait_ms, int64_t *nowp) {
  const struct cg_limits *lim = &ad->pool->lim;
  struct cg_state *st = ad->state;
  int64_t now, wait_ns = 0, left_ms, waited_ns = 0, now2, hold, w;
  int slot = -2, r, slow = 0, file;

  ad->queue_ms = 0;
  *wait_ms = 0;
  /* Looked up by the gate just before (the drivers' order): no call of cg__pool_at then. */
  if (ad->pool_index < 0 && cg__pool_at(ad, &slow) < 0) {
    if (slow)
      *nowp = 0;
    return -2;
  }
  /* The caller's reading when nothing took time since (issue 16: a clock read less). */
  now = *nowp > 0 && !slow ? *nowp : cg_state_now();
  *nowp = 0; /* until the end below: a refusal's return vouches for no instant */
  /* A Redis step takes a round trip: as good as a wait for cg_admission_recheck. */
  file = ad->sh.ops == &cg_shared_mmap;
  ad->waited = !file;
  left_ms = cg__wait_room_ms(ad, deadline_ms, now / 1000000); /* now: CLOCK_MONOTONIC too */
  /* A pool held by a server's hint waits no longer than such a hint may ask of the
   * process that got it (max_retry_after): longer means give up now. */
  if (left_ms > ad->max_retry_after_ms &&
      __atomic_load_n(&st->pools[ad->pool_index].hold_until, __ATOMIC_ACQUIRE) - now >
          ad->max_retry_after_ms * 1000000)
    left_ms = ad->max_retry_after_ms;
  if (CG_RARE(cg__sh_reserve(ad, lim->tpm > 0 ? ad->tokens : 0, left_ms * 1000000, &wait_ns,
                             now) != 0)) {
    cg_limiter_count(st, ad->pool_index, CG_CNT_REJECTED);
    *wait_ms = wait_ns / 1000000;
    return -1;
  }
  if (CG_RARE(wait_ns > 0) &&
      (r = cg__enter_reserved(ad, deadline_ms, wait, wait_arg, wait_ns, wait_ms)) != 0)
    return r;
  /* The first round of the wait for a 429 hold or the learned rate (cg__enter_paced).
   * Nothing waited yet, and the reserve was the file's (µs, not a Redis round trip):
   * `now` still is (a read of the clock saved per call). */
  now2 = wait_ns <= 0 && file ? now : cg_state_now();
  hold = cg__held_until(ad, now2) - now2;
  w = hold > 0 ? hold : cg__sh_learn_take(ad, now2);
  if (CG_RARE(w > 0) &&
      (r = cg__enter_paced(ad, deadline_ms, wait, wait_arg, wait_ns, hold, w, wait_ms)) != 0)
    return r;
  if (lim->max_inflight > 0) {
    slot = cg__sh_acquire(ad, lim->max_inflight,
                          (deadline_ms - cg_mono_ms() - CG_MIN_ATTEMPT_MS) * 1000000,
                          &waited_ns);
    ad->queue_ms += waited_ns / 1000000;
    ad->waited |= waited_ns > 0;
    if (waited_ns > 1000000 && wait_ns <= 0)
      cg_limiter_count(st, ad->pool_index, CG_CNT_WAITED);
    if (CG_RARE(slot == -1)) {
      cg_limiter_count(st, ad->pool_index, CG_CNT_REJECTED);
      ad->slot_refused = 1;
      *wait_ms = waited_ns / 1000000;
      return -1;
    }
  }
  cg_limiter_count(st, ad->pool_index, CG_CNT_ADMITTED);
  /* Nothing waited and no round trip (on the file, the reserve, the hold's look and the
   * in-flight slot taken without a wait are microseconds): the admission's end is still
   * `now` (issue 16: a clock read less a call). */
  ad->sent_ns = file && wait_ns <= 0 && w <= 0 && waited_ns <= 0 ? now : cg_state_now();
  *nowp = ad->sent_ns;
  return slot;
}

/* `now`: as cg_admission_adapt_at's. */
static void cg__adapt(struct cg_admission *ad, int throttle, int answered, int64_t now) {
  int p = ad->state ? ad->pool_index : -1;
  if (p < 0 || !ad->pool->lim.adaptive)
    return;
  if (now <= 0)
    now = cg_state_now();
  /* A 429 of one limit key among several (or a key's first) cuts nothing: the provider
   * answered, and the limit that refused was not the pool's (limiter.h
   * cg_limiter_learn_key); an answer as any other, it lets the slow start grow. */
  if (CG_RARE(throttle == CG_THROTTLE_429) &&
      !cg_limiter_learn_key(ad->state, p, cg__key(ad), now))
    throttle = 0;
  if (throttle) {
    int64_t before = __atomic_load_n(&ad->state->pools[p].learn_last, __ATOMIC_ACQUIRE);
    cg_limiter_learn_throttle(ad->state, p, &ad->pool->lim, ad->sent_ns, now);
    /* This throttle cut the rate: the fleet (Redis) cuts with it. */
    if (__atomic_load_n(&ad->state->pools[p].learn_last, __ATOMIC_ACQUIRE) != before)
      cg__sp(ad)->ops->learn_cut(&ad->sh);
  }
  else if (answered)
    cg_limiter_learn_success(ad->state, p, &ad->pool->lim,
                             ad->sent_ns > 0 && now > ad->sent_ns ? now - ad->sent_ns : 0, now);
}

/* `ms` (a hint, >= 0) as ns, at most `max_ms`: what a hint may hold or pace a pool for. */
static int64_t cg__capped_ns(int64_t ms, int64_t max_ms) {
  if (ms < 0)
    ms = 0;
  if (ms > max_ms)
    ms = max_ms;
  return cg_sat_mul(ms, 1000000);
}

static void cg__learn_headers(struct cg_admission *ad, const struct cg_hints *hh,
                              int64_t max);

static void cg__learn(struct cg_admission *ad, const struct cg_hints *hh, long status,
                      int64_t sleep_ms, cg_getdate_fn getdate) {
  struct cg_state *st = ad->state;
  int64_t max = ad->max_retry_after_ms;

  if (!st || ad->pool_index < 0 || !status)
    return;
  if (CG_RARE(status == 429)) {
    int64_t hint = cg_hint_ms(hh->retry_after_ms, hh->retry_after,
                              hh->date[0] ? hh->date : NULL, cg_wall_ms(), getdate);
    /* Capped: a hint longer than max_retry_after made this call give up (policy.h); the
     * pool is held for max_retry_after at most, so one answer never locks a host out
     * (hint <= CG_DURATION_MAX_MS: no overflow either way). */
    cg_limiter_count(st, ad->pool_index, CG_CNT_429);
    cg__sh_hold(ad, cg__capped_ns(hint >= 0 ? hint : sleep_ms, max));
  }
  /* Only a "remaining" count (or the IETF field, which holds one) can pace or hold the
   * pool below: an answer without one (most answers of most servers) skips the parse
   * and the wall clock read (issue 16). */
  if (!hh->rl_remaining_req[0] && !hh->a_remaining_req[0] && !hh->ietf[0] &&
      !hh->rl_remaining_tok[0] && !hh->a_remaining_tok[0])
    return;
  cg__learn_headers(ad, hh, max);
}

/* The rest of cg__learn for an answer with rate-limit headers: pace or hold the pool as
 * they say.  Out of line (not cold: the big providers send them on every answer), so an
 * answer without them does not build the headers' table (issue 16). */
static __attribute__((noinline)) void
cg__learn_headers(struct cg_admission *ad, const struct cg_hints *hh, int64_t max) {
  struct cg_state *st = ad->state;
  struct cg_rl_headers rh = {
    hh->rl_limit_req, hh->rl_remaining_req, hh->rl_reset_req,
    hh->rl_limit_tok, hh->rl_remaining_tok, hh->rl_reset_tok,
    hh->a_limit_req, hh->a_remaining_req, hh->a_reset_req,
    hh->a_limit_tok, hh->a_remaining_tok, hh->a_reset_tok,
    hh->ietf,
  };
  struct cg_rl_signal sig;
  int64_t now = cg_state_now();

  cg_rl_parse(&rh, cg_wall_ms(), &sig);
  if (sig.requests_remaining >= 0 && sig.requests_reset_ms > 0)
    cg_limiter_pace(st, ad->pool_index, sig.requests_limit, sig.requests_remaining,
                    cg__capped_ns(sig.requests_reset_ms, CG_DURATION_MAX_MS), now,
                    max * 1000000);
  /* Tokens: nothing left means waiting for a refill, when the size of one is known: the
   * next request's estimate out of limit tokens per reset (in double: the product may be
   * far beyond int64; capped before any conversion). */
  if (sig.tokens_remaining == 0 && sig.tokens_reset_ms > 0 && sig.tokens_limit > 0 &&
      ad->tokens > 0) {
    double ms = (double) sig.tokens_reset_ms * (double) ad->tokens / (double) sig.tokens_limit;
    cg__sh_hold(ad, cg__capped_ns(cg_duration_from_double(ms), max));
  }
}

static void cg__leave(struct cg_admission *ad, int slot) {
  if (slot >= 0)
    cg__sh_release(ad, slot);
}

/* ---- the entry points: each one a guarded region ---- */

enum cg_gate cg_admission_gate_at(struct cg_admission *ad, int attempt, int host_repeat,
                                  int64_t deadline_ms, int64_t *next_probe_ms, int64_t *nowp) {
  enum cg_gate r;
  if (!ad->state) { /* as cg__gate without a pool */
    *next_probe_ms = 0;
    return CG_GATE_GO;
  }
  {
    CG_GUARDED(ad, *next_probe_ms = 0; *nowp = 0; return CG_GATE_GO);
    r = cg__gate(ad, attempt, host_repeat, deadline_ms, next_probe_ms, nowp);
    CG_UNGUARD();
  }
  return r;
}

enum cg_gate cg_admission_gate(struct cg_admission *ad, int attempt, int host_repeat,
                               int64_t deadline_ms, int64_t *next_probe_ms) {
  int64_t now = 0;
  return cg_admission_gate_at(ad, attempt, host_repeat, deadline_ms, next_probe_ms, &now);
}

enum cg_gate cg_admission_recheck(struct cg_admission *ad, int64_t deadline_ms,
                                  int64_t *next_probe_ms) {
  enum cg_gate r;
  if (!ad->state)
    return cg__recheck(ad, deadline_ms, next_probe_ms);
  {
    CG_GUARDED(ad, *next_probe_ms = 0; return CG_GATE_GO);
    r = cg__recheck(ad, deadline_ms, next_probe_ms);
    CG_UNGUARD();
  }
  return r;
}

int cg_admission_probing(const struct cg_admission *ad) {
  struct cg_admission *m = (struct cg_admission *) ad;
  int r;
  if (!ad->state)
    return 0;
  {
    CG_GUARDED(m, return 0);
    r = cg__probing(ad);
    CG_UNGUARD();
  }
  return r;
}

/* cg_admission_early_in_ms's question, inside the region. */
static int64_t cg__early_in_ms(struct cg_admission *ad) {
  int64_t now = cg_mono_ms(), r;
  if (cg__sh_bstate(ad) == CG_BREAKER_CLOSED ||
      cg__sh_wait_ok(ad, cg__probe_left_ns(ad, ad->deadline_ms, now)))
    return -1;
  r = cg__early_in(ad, ad->deadline_ms, now * 1000000);
  return r < 0 ? -1 : r / 1000000;
}

int64_t cg_admission_early_in_ms(struct cg_admission *ad) {
  int64_t r;
  if (!ad->state || ad->pool_index < 0 || !ad->pool->breaker.enabled ||
      !ad->pool->breaker.open_wait)
    return -1;
  {
    CG_GUARDED(ad, return -1);
    r = cg__early_in_ms(ad);
    CG_UNGUARD();
  }
  return r;
}

int cg_admission_breaker_waits(const struct cg_admission *ad) {
  return ad->state && ad->pool_index >= 0 && ad->pool->breaker.enabled &&
         ad->pool->breaker.open_wait;
}

/* cg_admission_breaker_holds' question, inside the region. */
static int cg__breaker_holds(struct cg_admission *ad, int64_t need_ms) {
  int p = ad->state ? ad->pool_index : -1;
  int64_t left;
  if (need_ms < CG_MIN_ATTEMPT_MS)
    need_ms = CG_MIN_ATTEMPT_MS;
  if (!(p >= 0 && ad->pool->breaker.enabled && ad->pool->breaker.open_wait &&
        cg__sh_bstate(ad) != CG_BREAKER_CLOSED))
    return 0;
  left = ad->deadline_ms - cg_mono_ms();
  /* It sees the next probe; or not, and the gate lets it be the probe early at its last
   * chance (cg__early_in), which leaves it the attempt: once a call (at its last chance,
   * an early probe that failed is not followed by more uncounted ones). */
  return cg__sh_wait_ok(ad, (left - need_ms) * 1000000) ||
         (!ad->early_probes &&
          left >= (need_ms + CG_MIN_ATTEMPT_MS > CG_EARLY_MIN_MS ? need_ms + CG_MIN_ATTEMPT_MS
                                                                : CG_EARLY_MIN_MS));
}

int cg_admission_breaker_holds(struct cg_admission *ad, int64_t need_ms) {
  int r;
  if (!ad->state)
    return 0;
  {
    CG_GUARDED(ad, return 0);
    r = cg__breaker_holds(ad, need_ms);
    CG_UNGUARD();
  }
  return r;
}

void cg_admission_result(struct cg_admission *ad, enum cg_outcome o, long status,
                         int hinted) {
  cg_admission_result2(ad, o, status, hinted, 0, -1);
}

/* cg_admission_result_at's region, out of line as cg__finish_guarded (inline, gcc's
 * -Wclobbered took `now` for a register live across the sigsetjmp). */
static __attribute__((noinline)) void cg__result_guarded(struct cg_admission *ad,
                                                         enum cg_outcome o, long status,
                                                         int hinted, int defer,
                                                         int64_t hint_ms, int64_t now) {
  CG_GUARDED(ad, return);
  cg__result(ad, o, status, hinted, defer, hint_ms, now);
  CG_UNGUARD();
}

void cg_admission_result_at(struct cg_admission *ad, enum cg_outcome o, long status,
                            int hinted, int defer, int64_t hint_ms, int64_t now) {
  if (!ad->state)
    return;
  cg__result_guarded(ad, o, status, hinted, defer, hint_ms, now);
}

void cg_admission_result2(struct cg_admission *ad, enum cg_outcome o, long status,
                          int hinted, int defer, int64_t hint_ms) {
  cg_admission_result_at(ad, o, status, hinted, defer, hint_ms, 0);
}

const char *cg_admission_retry(struct cg_admission *ad, int64_t need_ms, int64_t sleep_ms,
                               cg_wait_fn wait, void *wait_arg, int64_t *waited_ms) {
  const char *r;
  *waited_ms = 0;
  if (!ad->state)
    return NULL;
  {
    CG_GUARDED(ad, return NULL);
    r = cg__retry(ad, need_ms, sleep_ms, wait, wait_arg, waited_ms);
    CG_UNGUARD();
  }
  return r;
}

int cg_admission_repeat_wait(struct cg_admission *ad, cg_wait_fn wait, void *wait_arg,
                             int64_t *waited_ms) {
  int r;
  *waited_ms = 0;
  if (!ad->state)
    return 0;
  {
    CG_GUARDED(ad, return 0);
    r = cg__repeat_wait(ad, wait, wait_arg, waited_ms);
    CG_UNGUARD();
  }
  return r;
}

/* cg_admission_finish's region, out of line: the common call returns before it without
 * setting up its frame (the jump buffer). */
static __attribute__((noinline)) void cg__finish_guarded(struct cg_admission *ad) {
  CG_GUARDED(ad, return);
  cg__finish(ad);
  CG_UNGUARD();
}

void cg_admission_finish(struct cg_admission *ad) {
  /* No probe, no retry slot and no reservation held (the common call): cg__finish has
   * nothing to give back, so the region is not opened. */
  if (!ad->state || (!ad->probe && ad->retry_slot < 0 && !ad->sh.queued && !ad->resv_pending))
    return;
  cg__finish_guarded(ad);
}

int cg_admission_enter_at(struct cg_admission *ad, int64_t deadline_ms, cg_wait_fn wait,
                          void *wait_arg, int64_t *wait_ms, int64_t *nowp) {
  int r;
  if (!ad->state) {
    ad->queue_ms = 0;
    *wait_ms = 0;
    return -2;
  }
  {
    /* A fault after the wait began keeps the time already waited in queue_ms. */
    CG_GUARDED(ad, *wait_ms = 0; *nowp = 0; return -2);
    r = cg__enter(ad, deadline_ms, wait, wait_arg, wait_ms, nowp);
    CG_UNGUARD();
  }
  return r;
}

int cg_admission_enter(struct cg_admission *ad, int64_t deadline_ms, cg_wait_fn wait,
                       void *wait_arg, int64_t *wait_ms) {
  int64_t now = 0;
  return cg_admission_enter_at(ad, deadline_ms, wait, wait_arg, wait_ms, &now);
}

/* cg_admission_learn's region, out of line as cg__finish_guarded. */
static __attribute__((noinline)) void cg__learn_guarded(struct cg_admission *ad,
                                                        const struct cg_hints *hints,
                                                        long status, int64_t sleep_ms,
                                                        cg_getdate_fn getdate) {
  CG_GUARDED(ad, return);
  cg__learn(ad, hints, status, sleep_ms, getdate);
  CG_UNGUARD();
}

void cg_admission_learn(struct cg_admission *ad, const struct cg_hints *hints, long status,
                        int64_t sleep_ms, cg_getdate_fn getdate) {
  if (!ad->state || !status)
    return;
  /* Not a 429 and no "remaining" count (most answers of most servers): cg__learn returns
   * before it touches the mapping, so the region is not opened (the same test as there,
   * on the answer's hints only). */
  if (status != 429 && !hints->rl_remaining_req[0] && !hints->a_remaining_req[0] &&
      !hints->ietf[0] && !hints->rl_remaining_tok[0] && !hints->a_remaining_tok[0])
    return;
  cg__learn_guarded(ad, hints, status, sleep_ms, getdate);
}

/* cg_admission_adapt_at's region, out of line as cg__result_guarded. */
static __attribute__((noinline)) void cg__adapt_guarded(struct cg_admission *ad, int throttle,
                                                        int answered, int64_t now) {
  CG_GUARDED(ad, return);
  cg__adapt(ad, throttle, answered, now);
  CG_UNGUARD();
}

void cg_admission_adapt_at(struct cg_admission *ad, int throttle, int answered,
                           int64_t now) {
  if (!ad->state)
    return;
  cg__adapt_guarded(ad, throttle, answered, now);
}

void cg_admission_adapt(struct cg_admission *ad, int throttle, int answered) {
  cg_admission_adapt_at(ad, throttle, answered, 0);
}

int cg_admission_far(const struct cg_admission *ad) {
  return ad->sh.ops == &cg_shared_redis;
}

/* cg_admission_leave's region, out of line as cg__finish_guarded. */
static __attribute__((noinline)) void cg__leave_guarded(struct cg_admission *ad, int slot) {
  CG_GUARDED(ad, return);
  cg__leave(ad, slot);
  CG_UNGUARD();
}

void cg_admission_leave(struct cg_admission *ad, int slot) {
  if (!ad->state || slot < 0)
    return; /* no slot taken (no in-flight limit): nothing to give back */
  cg__leave_guarded(ad, slot);
}

/* cg_admission_tokens_correct's region, out of line as cg__finish_guarded. */
static __attribute__((noinline)) void cg__tokens_correct_guarded(struct cg_admission *ad,
                                                                 int64_t delta) {
  CG_GUARDED(ad, return);
  cg_limiter_tokens_correct(ad->state, ad->pool_index, &ad->pool->lim, delta,
                            cg_sat_mul(ad->max_retry_after_ms, 1000000));
  CG_UNGUARD();
}

void cg_admission_tokens_correct(struct cg_admission *ad, int64_t delta) {
  /* No tpm limit: the pool has no token account to correct (cg_limiter_tokens_correct
   * does nothing), so the region is not opened. */
  if (!ad->state || ad->pool_index < 0 || delta == 0 || ad->pool->lim.tpm <= 0)
    return;
  cg__tokens_correct_guarded(ad, delta);
}

void cg_admission_tally(struct cg_admission *ad, const struct cg_record *r) {
  if (!ad->state || ad->pool_index < 0 || !r)
    return;
  {
    CG_GUARDED(ad, return);
    cg_tally_add(ad->state, ad->pool_index, r);
    CG_UNGUARD();
  }
}

/* ---- without sleeping: the multi driver's admission (admit.h, issue 13) ---- */

static int64_t cg__ceil_ms(int64_t ns) {
  return ns > 0 ? (ns + 999999) / 1000000 : 0;
}

/* The breaker's part of a non-blocking step: 0 go, 1 ask again in `*ms`, 2 refused
 * (`*ms`: to the next probe).  `ramp`: take a slow-start turn when it lets the call go
 * (the turn's wait is phase 1). */
static int cg__breaker_nb(struct cg_admission *ad, struct cg_admit_nb *nb, int p,
                          int64_t deadline_ms, int ramp, int64_t *ms) {
  const struct cg_breaker_cfg *c = &ad->pool->breaker;
  int64_t now = cg_state_now(), next_ns = 0, nap, early = 0;
  /* `now` is CLOCK_MONOTONIC too (cg_state_now): ns -> ms without another read. */
  int64_t left_ns = (deadline_ms - now / 1000000 - CG_MIN_ATTEMPT_MS) * 1000000;
  enum cg_breaker_verdict v;

  if (!c->enabled || ad->probe)
    return 0;
  /* The shared breaker (shared.h): next_ns comes back relative. */
  v = cg__sh_admit(ad, (deadline_ms - now / 1000000) * 1000000, &next_ns, now);
  if (v != CG_BREAKER_REJECT) {
    ad->probe = v == CG_BREAKER_PROBE;
    if (nb->held && nb->held_since_ns > 0) /* 0: that hold was counted already */
      ad->breaker_wait_ms += (now - nb->held_since_ns) / 1000000;
    nb->held_since_ns = 0;
    if (ramp && !ad->probe) {
      int64_t at = cg_breaker_ramp(ad->state, p, c, now);
      /* as cg__ramp_wait: the admission after the turn keeps its CG_MIN_ATTEMPT_MS */
      int64_t turn_left_ns = left_ns - CG_MIN_ATTEMPT_MS * 1000000;
      if (at > now && turn_left_ns > 0) {
        nb->ramp_at_ns = at - now > turn_left_ns ? now + turn_left_ns : at;
        nb->held_since_ns = now;
        nb->phase = 1;
        *ms = cg__ceil_ms(nb->ramp_at_ns - now);
        return 1;
      }
    }
    return 0;
  }
  *ms = cg__ceil_ms(next_ns);
  if (!c->open_wait || ad->can_divert || left_ns <= 0)
    return 2;
  if (!cg__sh_wait_ok(ad, cg__probe_left_ns(ad, deadline_ms, now / 1000000))) {
    /* as cg__breaker_refused: an early probe */
    early = cg__early_in(ad, deadline_ms, now);
    if (!early && cg__sh_early(ad, (deadline_ms - now / 1000000) * 1000000, now)) {
      if (nb->held && nb->held_since_ns > 0)
        ad->breaker_wait_ms += (now - nb->held_since_ns) / 1000000;
      nb->held_since_ns = 0;
      return 0;
    }
    if (early <= 0 && !cg__sh_wait_ok(ad, left_ns)) /* as cg__breaker_refused */
      return 2;
  }
  cg_breaker_held(ad->state, p, !nb->held);
  if (!nb->held)
    nb->held_since_ns = now;
  nb->held = 1;
  nap = next_ns > 0 ? next_ns : (int64_t) CG_NB_PARK_MAX_MS * 1000000;
  if (nap > (int64_t) CG_NB_PARK_MAX_MS * 1000000)
    nap = (int64_t) CG_NB_PARK_MAX_MS * 1000000;
  if (early > 0 && nap > early)
    nap = early;
  if (nap > left_ns)
    nap = left_ns;
  *ms = cg__ceil_ms(nap);
  if (*ms < 1)
    *ms = 1;
  return 1;
}

static enum cg_nb cg__step_nb(struct cg_admission *ad, struct cg_admit_nb *nb, int attempt,
                              int host_repeat, int64_t deadline_ms, int64_t *ms,
                              enum cg_gate *gate, int *slot) {
  const struct cg_limits *lim = &ad->pool->lim;
  struct cg_state *st = ad->state;
  int p = cg__pool(ad), b;
  int64_t now, wait_ns = 0, left_ms;

  if (p < 0)
    return CG_NB_GO;
  ad->first_attempt = attempt == 1;
  switch (nb->phase) {
  case 0:
    b = cg__breaker_nb(ad, nb, p, deadline_ms, 1, ms);
    if (b == 2) {
      *gate = CG_GATE_CIRCUIT_OPEN;
      return CG_NB_GATE;
    }
    if (b == 1 && nb->phase == 0)
      return CG_NB_WAIT;
    now = cg_state_now();
    if (attempt == 1 && !host_repeat) {
      cg__sh_bfirst(ad, now);
    } else if (attempt == 1 && !ad->repeat_granted) {
      enum cg_budget_verdict v =
          cg__sh_bretry(ad, (deadline_ms - cg_mono_ms()) * 1000000, slot);
      if (v != CG_BUDGET_GRANTED) {
        int64_t w = cg__ceil_ms(cg__sh_bwait(ad, v));
        if (ad->probe)
          cg__sh_brelease(ad);
        ad->probe = 0;
        nb->phase = 0;
        if (cg_mono_ms() + w + 2 * CG_MIN_ATTEMPT_MS > deadline_ms) {
          *gate = CG_GATE_BUDGET;
          *ms = 0;
          return CG_NB_GATE;
        }
        *ms = w > 0 ? w : 1;
        return CG_NB_WAIT; /* the breaker is asked again then, as after a blocking wait */
      }
      ad->retry_slot = *slot;
      ad->retry_granted_ns = now;
      ad->repeat_granted = 1;
    }
    if (b == 1)
      return CG_NB_WAIT; /* phase 1: the slow start's turn */
    nb->phase = 2;
    /* fall through */
  case 1:
    if (nb->phase == 1) {
      now = cg_state_now();
      if (nb->ramp_at_ns > now) {
        *ms = cg__ceil_ms(nb->ramp_at_ns - now);
        return CG_NB_WAIT;
      }
      ad->breaker_wait_ms += (now - nb->held_since_ns) / 1000000;
      nb->phase = 2;
    }
    /* fall through */
  case 2:
    ad->queue_ms = 0;
    now = cg_state_now();
    nb->queue_since_ms = now / 1000000; /* CLOCK_MONOTONIC, as cg_mono_ms() */
    nb->slot = -2;
    left_ms = cg__wait_room_ms(ad, deadline_ms, nb->queue_since_ms);
    if (left_ms > ad->max_retry_after_ms &&
        __atomic_load_n(&st->pools[p].hold_until, __ATOMIC_ACQUIRE) - now >
            ad->max_retry_after_ms * 1000000)
      left_ms = ad->max_retry_after_ms;
    nb->hold_shared = 0;
    nb->slot_poll_ms = 0;
    nb->reclaim_ms = 0;
    nb->learn_taken = 0;
    if (cg__sh_reserve(ad, lim->tpm > 0 ? ad->tokens : 0, left_ms * 1000000, &wait_ns,
                       now) != 0) {
      cg_limiter_count(st, p, CG_CNT_REJECTED);
      *ms = wait_ns / 1000000;
      return CG_NB_LIMIT;
    }
    nb->phase = 3;
    nb->go_at_ns = now + wait_ns;
    if (wait_ns > 0) {
      cg_limiter_count(st, p, CG_CNT_WAITED);
      nb->waited_counted = 1;
      nb->hold_shared = 1; /* after the wait: another machine's 429 holds us too */
      *ms = cg__ceil_ms(wait_ns);
      return CG_NB_WAIT;
    }
    /* fall through */
  case 3: {
    int64_t hold, w, waited_ns;
    now = cg_state_now();
    if (nb->go_at_ns > now) { /* asked before the reservation's turn */
      *ms = cg__ceil_ms(nb->go_at_ns - now);
      return CG_NB_WAIT;
    }
    /* As cg__enter: the shared hold after a wait (the back end's and the file's), the
     * file's otherwise. */
    hold = nb->hold_shared ? cg__sh_hold_left(ad) : cg__held_until(ad, now) - now;
    if (hold > 0) {
      if (hold / 1000000 > deadline_ms - cg_mono_ms() - CG_MIN_ATTEMPT_MS ||
          hold / 1000000 > ad->max_retry_after_ms) {
        *ms = hold / 1000000;
        return CG_NB_LIMIT;
      }
      *ms = cg__ceil_ms(hold);
      nb->hold_shared = 1;
      return CG_NB_WAIT;
    }
    /* The learned rate's place, once: a call waiting for a slot on the file asks again
     * every CG_NB_SLOT_POLL_MS, and each ask took a place (of 2 a second, before the
     * pool's first answers), so 3 such calls asked for their slot every 0.5 s at most
     * and missed their turns (limiter.h turns).  A blocking call takes one too. */
    w = nb->learn_taken ? 0 : cg__sh_learn_take(ad, now);
    nb->learn_taken = w <= 0 && ad->sh.ops == &cg_shared_mmap;
    if (w > 0 && cg__ceil_ms(w) <= deadline_ms - cg_mono_ms() - CG_MIN_ATTEMPT_MS) {
      /* As cg__enter_paced: the slow start's guess waits out its share, no more. */
      int64_t share = cg__guess_until(ad, nb->queue_since_ms, deadline_ms) - cg_mono_ms();
      if (share > 0) {
        int64_t m = cg__ceil_ms(w) < CG_LEARN_POLL_MS ? cg__ceil_ms(w) : CG_LEARN_POLL_MS;
        if (!nb->waited_counted)
          cg_limiter_count(st, p, CG_CNT_WAITED);
        nb->waited_counted = 1;
        *ms = m < share ? m : share;
        return CG_NB_WAIT;
      }
    }
    if (lim->max_inflight > 0 && nb->slot == -2) {
      /* Asked once, without waiting (left 0): the back end's slot or lease; the file's
       * in turn (limiter.h turns: a place taken when none is free, kept while it asks). */
      int file = ad->sh.ops == &cg_shared_mmap;
      int room = deadline_ms - cg_mono_ms() - CG_MIN_ATTEMPT_MS > 0;
      uint32_t seen;
      int s = file ? cg_limiter_inflight_try(st, p, lim->max_inflight, &nb->turn, room, &seen)
                   : cg__sh_acquire(ad, lim->max_inflight, 0, &waited_ns);
      if (s == -1 && file) {
        /* Slots of processes that died holding them come back as a blocking waiter
         * takes them (limiter.c, every CG_INFLIGHT_RECHECK_MS): this waiter looks as
         * often, else it would wait out its deadline behind a kill -9'd holder (and,
         * never touching the slot table, never find a file cut short there). */
        int64_t t = cg_mono_ms();
        if (!nb->reclaim_ms) {
          nb->reclaim_ms = t;
        } else if (t - nb->reclaim_ms >= CG_INFLIGHT_RECHECK_MS) {
          nb->reclaim_ms = t;
          cg_limiter_reclaim(st, p); /* and the count put back to the live slots */
          s = cg_limiter_inflight_try(st, p, lim->max_inflight, &nb->turn, room, &seen);
        }
      }
      if (s == -1) {
        if (!room) {
          cg_limiter_turn_drop(st, p, &nb->turn);
          cg_limiter_count(st, p, CG_CNT_REJECTED);
          ad->slot_refused = 1;
          *ms = cg_mono_ms() - nb->queue_since_ms;
          return CG_NB_LIMIT;
        }
        if (!nb->waited_counted)
          cg_limiter_count(st, p, CG_CNT_WAITED);
        nb->waited_counted = 1;
        *ms = CG_NB_SLOT_POLL_MS;
        if (ad->sh.ops != &cg_shared_mmap) {
          /* A round trip each: 20 ms doubling to CG_SHARED_POLL_MS, as a blocking
           * waiter on Redis polls (shared.h). */
          if (nb->slot_poll_ms > 0)
            *ms = nb->slot_poll_ms * 2 < CG_SHARED_POLL_MS ? nb->slot_poll_ms * 2
                                                           : CG_SHARED_POLL_MS;
          nb->slot_poll_ms = *ms;
        }
        return CG_NB_WAIT;
      }
      nb->slot = s;
    }
    cg_limiter_count(st, p, CG_CNT_ADMITTED);
    ad->sent_ns = cg_state_now();
    ad->queue_ms = cg_mono_ms() - nb->queue_since_ms;
    nb->phase = 4;
    nb->held = 0;
  }
    /* fall through */
  case 4:
  default:
    b = cg__breaker_nb(ad, nb, p, deadline_ms, 0, ms);
    if (b == 1)
      return CG_NB_WAIT;
    if (b == 2) {
      cg__leave(ad, nb->slot);
      nb->slot = -2;
      nb->phase = 0;
      *gate = CG_GATE_CIRCUIT_OPEN;
      return CG_NB_GATE;
    }
    *slot = nb->slot;
    nb->slot = -2;
    nb->phase = 0;
    return CG_NB_GO;
  }
}

void cg_admission_nb_drop(struct cg_admission *ad, struct cg_admit_nb *nb) {
  if (!nb->turn.ticket)
    return;
  if (ad->state) {
    CG_GUARDED(ad, nb->turn.ticket = 0; return);
    cg_limiter_turn_drop(ad->state, ad->pool_index, &nb->turn);
    CG_UNGUARD();
  }
  nb->turn.ticket = 0;
}

enum cg_nb cg_admission_step_nb(struct cg_admission *ad, struct cg_admit_nb *nb, int attempt,
                                int host_repeat, int64_t deadline_ms, int64_t *ms,
                                enum cg_gate *gate, int *slot) {
  enum cg_nb r;
  *ms = 0;
  *slot = -2;
  *gate = CG_GATE_GO;
  if (!ad->state)
    return CG_NB_GO;
  {
    CG_GUARDED(ad, *slot = -2; return CG_NB_GO);
    r = cg__step_nb(ad, nb, attempt, host_repeat, deadline_ms, ms, gate, slot);
    CG_UNGUARD();
  }
  return r;
}

static const char *cg__retry_nb(struct cg_admission *ad, int p, int64_t need_ms,
                                int64_t sleep_ms, int64_t waited_ms, int64_t *wait_ms) {
  int64_t now = cg_state_now();
  enum cg_budget_verdict v;
  int slot = -1;

  /* As cg__retry: the breaker first, then one ask of the budget. */
  (void) p;
  (void) now;
  if (cg__retry_breaker_refuses(ad))
    return "circuit_open";
  cg__sh_bdone(ad, ad->retry_slot);
  ad->retry_slot = -1;
  if (ad->retry_scheduled)
    return NULL; /* as cg__retry */
  v = cg__sh_bretry(ad, (ad->deadline_ms - cg_mono_ms()) * 1000000, &slot);
  if (v == CG_BUDGET_GRANTED) {
    ad->retry_slot = slot;
    ad->retry_granted_ns = cg_state_now();
    return NULL;
  }
  if (cg__breaker_holds(ad, need_ms))
    return "breaker_hold"; /* as cg__budget_take's -5 */
  {
    int64_t ms = cg__ceil_ms(cg__sh_bwait(ad, v));
    int64_t rest = sleep_ms - waited_ms > ms ? sleep_ms - waited_ms : ms;
    if (cg_mono_ms() + rest + need_ms + CG_MIN_ATTEMPT_MS > ad->deadline_ms) {
      /* as cg__budget_take: ask again while an attempt fits */
      if (!cg__budget_reask(ad, need_ms))
        return "retry_budget_exhausted";
      ms = CG_BUDGET_RECHECK_MS;
    }
    /* Asked again at least every CG_BUDGET_RECHECK_MS: the breaker first, as above. */
    *wait_ms = ms <= 0 ? 1 : ms < CG_BUDGET_RECHECK_MS ? ms : CG_BUDGET_RECHECK_MS;
  }
  return NULL;
}

const char *cg_admission_retry_nb(struct cg_admission *ad, int64_t need_ms, int64_t sleep_ms,
                                  int64_t waited_ms, int64_t *wait_ms) {
  int p = ad->state ? ad->pool_index : -1;
  const char *r;
  *wait_ms = 0;
  if (p < 0)
    return NULL;
  {
    CG_GUARDED(ad, *wait_ms = 0; return NULL);
    r = cg__retry_nb(ad, p, need_ms, sleep_ms, waited_ms, wait_ms);
    CG_UNGUARD();
  }
  return r;
}
