/* limiter.c - GCRA over shared words; in-flight slots (see limiter.h). */
#include "limiter.h"

#include "clock.h"
#include "hot.h"
#include "proc.h"
#include "repeat.h"
#include "tls.h"

#include <errno.h>
#include <pthread.h>
#include <linux/futex.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CG_CAS_TRIES 1000 /* bounded: a lost race is retried, never spun forever */
#define CG_NS_PER_MIN 60000000000.0

#define cg__load(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define cg__cas(p, expp, v)                                                               \
  __atomic_compare_exchange_n((p), (expp), (v), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)

/* A pool's name_hash while cg__pool_reuse gives it to another name: these 16 bits all
 * set, then the give's start (cg_coarse_ms, 48 bits).  No name hashes to such a key. */
#define CG__POOL_MOVING 0xFFFF000000000000ull
#define CG__POOL_MOVING_MS(k) ((int64_t) ((k) & 0xFFFFFFFFFFFFull))
#define CG__POOL_IS_MOVING(k) (((k) & CG__POOL_MOVING) == CG__POOL_MOVING)
/* A give takes microseconds: one older than this was abandoned (its process killed or
 * stopped half-way), and the next give takes its pool over. */
#define CG__POOL_GIVE_STALE_MS 10000
/* A new name waits for another process's give (maybe of a pool to this very name) only
 * while that give is younger than this: a giver descheduled longer is not waited for. */
#define CG__POOL_GIVE_WAIT_MS 50
#define CG__POOL_NAPS 100 /* of 0.5 ms: bounds the waits of one lookup */

/* Milliseconds from `then` to `now` (cg_coarse_ms times; `then` read from the file, so
 * possibly garbage): wrapping, never overflowing.  A time up to CG__POOL_GIVE_STALE_MS
 * ahead is another process's later clock reading (negative: just now); further ahead is
 * garbage and counts as long ago. */
static int64_t cg__since(int64_t now, int64_t then) {
  int64_t d = (int64_t) ((uint64_t) now - (uint64_t) then);
  return d > -CG__POOL_GIVE_STALE_MS ? d : INT64_MAX;
}

uint64_t cg_limiter_name_hash(const char *name) {
  uint64_t h = cg_repeat_key("pool", name, NULL);
  if (CG__POOL_IS_MOVING(h))
    h &= ~(1ull << 63);
  return h ? h : 1;
}

/* Whether the pool's name is published, or gets published within about a millisecond
 * (a claimer between its claim and its name takes nanoseconds unless descheduled).
 * Bounded: a claimer that died never publishes. */
static __attribute__((noinline, cold)) int cg__name_ready_soon(struct cg_state_pool *p) {
  int i;
  for (i = 0; i < 100; i++) {
    struct timespec nap = {0, 10000};
    if (__atomic_load_n(&p->name_ready, __ATOMIC_ACQUIRE))
      return 1;
    if (i < 10)
      sched_yield();
    else
      nanosleep(&nap, NULL);
  }
  return __atomic_load_n(&p->name_ready, __ATOMIC_ACQUIRE) != 0;
}

int cg_limiter_pool(struct cg_state *st, const char *name, const struct cg_limits *lim) {
  int slow = 0;
  return cg_limiter_pool_hashed(st, name, cg_limiter_name_hash(name), lim, &slow);
}

/* Whether an in-flight slot names pool `p` once the slots of dead holders are taken
 * back (cg_limiter_reclaim). */
static uint32_t cg__live_slots(const struct cg_state *st, int p);

static int cg__pool_holds_slot(struct cg_state *st, int p) {
  cg_limiter_reclaim(st, p);
  return cg__live_slots(st, p) != 0;
}

/* Whether idle pool `p` still holds something for later, without its in-flight count: a
 * reservation ahead (a call waiting in its GCRA or at its learned rate), a 429's hold or
 * a provider's pacing that has not run out.  Its waiters count is not asked: a live
 * waiter in a pool with nothing in flight gets a slot within CG_INFLIGHT_RECHECK_MS, so a
 * count left after 10 minutes is one a killed waiter never took back. */
static int cg__pool_ahead(const struct cg_state *st, int p, int64_t now_ns) {
  const struct cg_state_pool *q = &st->pools[p];
  return cg__load(&q->hold_until) > now_ns || cg__load(&q->keyed_until) > now_ns ||
         cg__load(&q->pace_until) > now_ns ||
         cg__load(&q->tat_requests) > now_ns || cg__load(&q->tat_tokens) > now_ns ||
         cg__load(&q->learn_tat) > now_ns;
}

/* Whether pool `p` has a call in flight once the slots of its dead holders are taken
 * back (which also corrects the count).  The taking back reads /proc for each slot: a
 * process asks it about each pool at most every CG_INFLIGHT_RECHECK_MS, and
 * cg__pool_reuse about one pool a scan. */
static int64_t cg__inflight_next_ms[CG_STATE_POOLS]; /* per process: pool p asked again */

static int cg__pool_in_flight(struct cg_state *st, int p, int64_t now_ms) {
  if (!cg__load(&st->pools[p].inflight))
    return 0;
  if (now_ms < __atomic_load_n(&cg__inflight_next_ms[p], __ATOMIC_RELAXED))
    return 1;
  __atomic_store_n(&cg__inflight_next_ms[p], now_ms + CG_INFLIGHT_RECHECK_MS,
                   __ATOMIC_RELAXED);
  cg_limiter_reclaim(st, p);
  return cg__load(&st->pools[p].inflight) != 0;
}

/* Clear `n` bytes (a multiple of 8, 8-aligned) of the file a word at a time, with atomic
 * stores: other processes (a scan, `stat`, a call that began in the old pool) read and
 * write those words with atomics meanwhile. */
_Static_assert(offsetof(struct cg_state_pool, name) % 8 == 0, "the words after name_hash");
static void cg__zero_words(void *at, size_t n) {
  uint64_t *w = at;
  size_t i;
  for (i = 0; i < n / 8; i++)
    __atomic_store_n(&w[i], 0, __ATOMIC_RELAXED);
}

/* Every pool is taken: give the least recently used one that is idle (no call found it
 * for CG_POOL_IDLE_MS, nothing ahead: cg__pool_ahead) and has nothing in flight to the
 * name hashed `h`: a pool with nothing counted first, else the least recently used one
 * whose count turns out to be killed holders' (cg__pool_in_flight: one a scan).
 *
 * The pool is taken by one compare-and-swap of its name_hash to a CG__POOL_MOVING key; a
 * process that finds it at that instant stamps `used_ms` and then reads name_hash again
 * (cg_limiter_pool_hashed), while this reads `used_ms` again after its swap and backs
 * off if it changed since the scan, both sequentially consistent: at least one of the
 * two sees the other, so either the pool is put back untouched or that process looks
 * again and does not use it.  Then the pool's words, breaker, budget and tally are
 * cleared, the name written and published, the hash last.  A give stopped for CG__POOL_GIVE_STALE_MS is taken over by another; the
 * stopped one checks the key before it writes the name and publishes by
 * compare-and-swap, and unpublishes a name it may have written over the new owner's
 * (only a stop between that check and the swap gets there).  A call still running in the
 * old pool (an attempt longer than CG_POOL_IDLE_MS) ends in the new pool: README.
 *
 * Returns 1 when the caller should look again (a pool was given or claimed, or a race
 * lost), 2 when it should after waiting for another giver (`patient`), 0 when no pool is
 * idle. */
static __attribute__((noinline, cold)) int cg__pool_reuse(struct cg_state *st,
                                                          const char *name, uint64_t h,
                                                          int patient) {
  int64_t now = cg_coarse_ms(), now_ns = cg_state_now(), best_idle = 0, busy_idle = 0;
  int64_t best_used = 0, busy_used = 0;
  uint64_t best_hash = 0, busy_hash = 0, gone_hash = 0, mark;
  struct cg_state_pool *p;
  int i, best = -1, busy = -1, gone = -1, moving = 0, abandoned = 0;

  for (i = 0; i < CG_STATE_POOLS; i++) {
    uint64_t cur = cg__load(&st->pools[i].name_hash);
    int64_t used, idle;
    if (cur == 0 || cur == h)
      return 1; /* claimed, or published by another process meanwhile */
    if (CG_RARE(CG__POOL_IS_MOVING(cur))) {
      /* Negative: a give that began after this scan did (its process read the clock
       * later); far from now either way: abandoned, or garbage. */
      if (cg__since(now, CG__POOL_MOVING_MS(cur)) < CG__POOL_GIVE_STALE_MS) {
        moving |= cg__since(now, CG__POOL_MOVING_MS(cur)) < CG__POOL_GIVE_WAIT_MS;
        continue;
      }
      /* Abandoned by its giver (killed or stopped half-way, its words maybe half
       * cleared): taken over before any idle pool, with no idleness to check.  The scan
       * goes on: the name may be published, or a give at work, further on. */
      if (gone < 0) {
        gone = i;
        gone_hash = cur;
      }
      continue;
    }
    used = __atomic_load_n(&st->pools[i].used_ms, __ATOMIC_RELAXED);
    idle = cg__since(now, used);
    if (idle < CG_POOL_IDLE_MS || cg__pool_ahead(st, i, now_ns))
      continue;
    if (cg__load(&st->pools[i].inflight)) {
      /* Idle, but counted in flight: maybe by killed holders.  Only the least recently
       * used such pool not asked lately is asked, below, and only without a clean one. */
      if (now >= __atomic_load_n(&cg__inflight_next_ms[i], __ATOMIC_RELAXED) &&
          (busy < 0 || idle > busy_idle)) {
        busy = i;
        busy_idle = idle;
        busy_used = used;
        busy_hash = cur;
      }
      continue;
    }
    if (best < 0 || idle > best_idle) {
      best = i;
      best_idle = idle;
      best_used = used;
      best_hash = cur;
    }
  }
  if (moving && patient) {
    /* Another process is giving a pool away, maybe to this very name: a give takes
     * microseconds, so wait a little and look again rather than give a second pool to
     * the same name. */
    struct timespec nap = {0, 500000};
    nanosleep(&nap, NULL);
    return 2;
  }
  if (gone >= 0) {
    best = gone;
    best_hash = gone_hash;
    abandoned = 1;
  } else if (best < 0 && busy >= 0 && !cg__pool_in_flight(st, busy, now)) {
    best = busy;
    best_used = busy_used;
    best_hash = busy_hash;
  }
  if (best < 0)
    return 0;
  p = &st->pools[best];
  /* The mark's start is read now, after the scan: another giver judges it against its
   * own clock reading. */
  mark = CG__POOL_MOVING | ((uint64_t) cg_coarse_ms() & 0xFFFFFFFFFFFFull);
  if (!__atomic_compare_exchange_n(&p->name_hash, &best_hash, mark, 0, __ATOMIC_SEQ_CST,
                                   __ATOMIC_ACQUIRE))
    return 1; /* another process took it first */
  /* Stamped since the scan read it: a lookup found the pool (the pairing above). */
  if (!abandoned && (__atomic_load_n(&p->used_ms, __ATOMIC_SEQ_CST) != best_used ||
                     cg__pool_ahead(st, best, cg_state_now()) ||
                     cg__pool_holds_slot(st, best))) {
    /* In use after all: put back (unless taken over meanwhile: a give stopped for
     * CG__POOL_GIVE_STALE_MS). */
    __atomic_compare_exchange_n(&p->name_hash, &mark, best_hash, 0, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
    return 1;
  }
  /* Still ours?  A give stopped (not killed) for CG__POOL_GIVE_STALE_MS was taken over by
   * another; from here on it must not touch the new owner's pool.  (Only a stop between
   * a check and the writes after it gets past them: README.) */
  if (cg__load(&p->name_hash) != mark)
    return 1;
  __atomic_store_n(&p->name_ready, 0, __ATOMIC_RELEASE);
  cg__zero_words((char *) p + offsetof(struct cg_state_pool, name),
                 sizeof(*p) - offsetof(struct cg_state_pool, name));
  cg__zero_words(&st->breakers[best], sizeof(st->breakers[best]));
  cg__zero_words(&st->budgets[best], sizeof(st->budgets[best]));
  cg__zero_words(&st->tallies[best], sizeof(st->tallies[best]));
  if (cg__load(&p->name_hash) != mark)
    return 1;
  snprintf(p->name, sizeof(p->name), "%s", name);
  __atomic_store_n(&p->used_ms, now, __ATOMIC_RELAXED);
  __atomic_store_n(&p->name_ready, 1, __ATOMIC_RELEASE);
  if (!__atomic_compare_exchange_n(&p->name_hash, &mark, h, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    /* Taken over between the check and here: the name written may be over the new
     * owner's.  Unpublished, it is written again by the owner's next lookup
     * (cg__pool_found's repair of a name never published). */
    __atomic_store_n(&p->name_ready, 0, __ATOMIC_RELEASE);
  return 1;
}

/* Pool `p`'s `used_ms` set to now, at most once a second.  Sequentially consistent, the
 * load too: on a weakly ordered CPU a relaxed load could be satisfied after
 * cg__pool_stamp's load of the key, pairing an old key with a giver's fresh stamp. */
static void cg__pool_mark_used(struct cg_state_pool *p) {
  int64_t now = cg_coarse_ms();
  if (CG_RARE(cg__since(now, __atomic_load_n(&p->used_ms, __ATOMIC_SEQ_CST)) >= 1000))
    __atomic_store_n(&p->used_ms, now, __ATOMIC_SEQ_CST);
}

/* Stamp pool `p`'s `used_ms` (at most once a second).  0 when the pool no longer has key
 * `h`: given to another name since the caller read the key (a stamp that skips its
 * store may be the giver's own), or being given at this instant (cg__pool_reuse).  The
 * caller must not use it then. */
static int cg__pool_stamp(struct cg_state_pool *p, uint64_t h) {
  cg__pool_mark_used(p);
  return __atomic_load_n(&p->name_hash, __ATOMIC_SEQ_CST) == h;
}

void cg_limiter_pool_touch(struct cg_state *st, int p) {
  cg__pool_mark_used(&st->pools[p]);
}

/* Pool `i` of the scan in cg_limiter_pool_hashed, whose name_hash was `cur`: 0 (free)
 * or `h`.  Claimed when free, stamped, its limits recorded.  Its index, or -1 when it
 * turned out to be another name's (claimed first by another) or is being given away. */
static inline __attribute__((always_inline)) int
cg__pool_found(struct cg_state *st, int i, uint64_t cur, const char *name, uint64_t h,
               const struct cg_limits *lim, int *slow) {
  struct cg_state_pool *p = &st->pools[i];
  uint32_t mi;

  if (CG_RARE(cur == 0)) { /* a free pool: only a pool's first call claims one */
    uint64_t zero = 0;
    if (!cg__cas(&p->name_hash, &zero, h)) {
      if (zero != h)
        return -1; /* somebody claimed it for another name */
    } else {
      snprintf(p->name, sizeof(p->name), "%s", name);
      __atomic_store_n(&p->name_ready, 1, __ATOMIC_RELEASE);
    }
  }
  if (CG_RARE(!cg__pool_stamp(p, h)))
    return -1;
  /* Published long ago (the common call): cg__name_ready_soon's first look, inline. */
  if (CG_RARE(!__atomic_load_n(&p->name_ready, __ATOMIC_ACQUIRE)) &&
      (*slow = 1, !cg__name_ready_soon(p))) {
    /* Claimed, but the name never published: a claimer that died between the two
     * steps, or a file cut short inside this pool (its hash kept, its name zeroed).
     * The same hash is the same name: writing it again changes no byte a reader of
     * a complete name could see, and `stat` shows the pool again.  A claimer still
     * at work (another thread's first call at the same moment) is waited for first:
     * two writers of one name would be a data race (TSan saw it). */
    snprintf(p->name, sizeof(p->name), "%s", name);
    __atomic_store_n(&p->name_ready, 1, __ATOMIC_RELEASE);
  }
  /* Limits are per process configuration; the last one is shown by `stat`.  Atomic
   * stores: many threads and processes write them at once. */
  mi = (uint32_t) (lim->max_inflight > 0 ? lim->max_inflight : 0);
  __atomic_store(&p->rpm, &lim->rpm, __ATOMIC_RELAXED);
  __atomic_store(&p->tpm, &lim->tpm, __ATOMIC_RELAXED);
  __atomic_store(&p->burst_requests, &lim->burst_requests, __ATOMIC_RELAXED);
  __atomic_store(&p->burst_tokens, &lim->burst_tokens, __ATOMIC_RELAXED);
  __atomic_store_n(&p->max_inflight, mi, __ATOMIC_RELAXED);
  return i;
}

int cg_limiter_pool_hashed(struct cg_state *st, const char *name, uint64_t h,
                           const struct cg_limits *lim, int *slow) {
  int i, round = 0, naps = 0, r;

  /* Bounded: a round follows a pool given to a name, claimed, or a race lost, a nap
   * another giver at work; at most CG__POOL_NAPS naps (50 ms) wait for givers, which
   * take microseconds unless descheduled (cg__pool_reuse). */
  while (round < 4) {
    for (i = 0; i < CG_STATE_POOLS; i++) {
      uint64_t cur = cg__load(&st->pools[i].name_hash);
      if (cur == h || CG_RARE(cur == 0)) {
        int found = cg__pool_found(st, i, cur, name, h, lim, slow);
        if (found >= 0)
          return found;
      }
    }
    /* A table with no room may be garbage (state.c cg_state_words_ok): then no pool is
     * given away; the caller re-makes the file (admit.c cg__pool). */
    if (round == 0 && naps == 0 && !cg_state_words_ok(st))
      return -1;
    *slow = 1; /* the fast path's one scan found no pool: what follows may wait */
    r = cg__pool_reuse(st, name, h, naps < CG__POOL_NAPS);
    if (r == 0)
      return -1;
    if (r == 2)
      naps++;
    else
      round++;
  }
  return -1;
}

/* Emission interval (ns per unit) and burst tolerance (ns) of one limit. */
static void cg__gcra(double per_minute, double burst, double margin, double *t_ns,
                     double *tau_ns) {
  /* `margin` < 1 paces under the limit (config.h CG_RATE_MARGIN). */
  *t_ns = CG_NS_PER_MIN / (per_minute * (margin > 0 && margin <= 1 ? margin : 1.0));
  if (burst <= 0)
    burst = fmax(1.0, per_minute / 60.0); /* default: one second's worth */
  *tau_ns = (fmax(burst, 1.0) - 1.0) * *t_ns;
}

/* A time or duration computed in double, as ns: clamped to +-4e18 (about 127 years from
 * the clock's origin) before the conversion, so a huge cost (a token estimate times the
 * ns per token of a tiny tpm) is a wait too long for any deadline, never a
 * float-to-integer overflow (UB). */
static int64_t cg__ns(double v) {
  if (!(v < 4e18))
    return INT64_C(4000000000000000000);
  if (v < -4e18)
    return -INT64_C(4000000000000000000);
  return (int64_t) v;
}

/* Reserve `cost` units on `tat`.  Returns 0 and the wait, or 1 when too long.
 * `*took` gets what the reservation added to the account (ns), to give it back.
 * A request goes when its whole cost fits in the burst (a cost above the burst: when the
 * bucket is full), not when one unit does. */
static int cg__reserve_one(int64_t *tat, double t_ns, double tau_ns, double cost,
                           int64_t floor_ns, int64_t now, int64_t max_wait, int64_t *wait,
                           int64_t *took, int64_t *after) {
  double burst = tau_ns / t_ns + 1.0;
  double need_ns = (fmin(cost, burst) - 1.0) * t_ns; /* beyond the first unit */
  int tries;
  int64_t old, base, go;

  *took = cg__ns(cost * t_ns);
  for (tries = 0; tries < CG_CAS_TRIES; tries++) {
    int64_t next;
    old = cg__load(tat);
    base = old > now ? old : now;
    go = cg__ns((double) base - tau_ns + need_ns);
    if (go < now)
      go = now;
    if (go < floor_ns)
      go = floor_ns;
    *wait = go - now;
    if (*wait > max_wait) {
      *took = 0;
      return 1;
    }
    /* The request goes at `go`: the account moves from there. */
    next = cg__ns((double) (base > go ? base : go) + cost * t_ns);
    if (cg__cas(tat, &old, next)) {
      *after = next;
      return 0;
    }
  }
  /* Lost every race (a storm of processes): take the place with one atomic add rather
   * than let the request through unaccounted. */
  old = __atomic_fetch_add(tat, *took, __ATOMIC_ACQ_REL);
  *after = old + *took;
  base = old > now ? old : now;
  go = cg__ns((double) base - tau_ns + need_ns);
  *wait = go > now ? go - now : 0;
  return 0;
}

int cg_limiter_reserve(struct cg_state *st, int p, const struct cg_limits *lim,
                       int64_t tokens, int64_t now, int64_t max_wait_ns, int64_t *wait_ns) {
  struct cg_limiter_resv r;
  return cg_limiter_reserve_took(st, p, lim, tokens, now, max_wait_ns, wait_ns, &r);
}

/* Reservations given back (cg_limiter_unreserve) that were not the last of their pool
 * then: each is taken off once every reservation after it is given back too, so a
 * process that cancels many calls gets all their turns back whatever the order.  Per
 * process; an entry whose turn came, or of another mapping or process, is dropped. */
#define CG__GIVEN_MAX 64
static struct cg__given {
  struct cg_state *st;
  int p;
  pid_t pid;
  int64_t go_ns;
  struct cg_limiter_resv r;
} cg__given[CG__GIVEN_MAX];
static int cg__ngiven;
static pthread_mutex_t cg__given_mu = PTHREAD_MUTEX_INITIALIZER;

/* Give back what a reservation moved TAT `*tat` by (`*after`, `*took`), when it is still
 * the last one: the account then is as it was before it, and both are zeroed.  2 given
 * now, 1 nothing (left) to give, 0 not the last now. */
static int cg__give(int64_t *tat, int64_t *after, int64_t *took) {
  int64_t want = *after;
  if (*took <= 0 || !want)
    return 1;
  if (!__atomic_compare_exchange_n(tat, &want, *after - *took, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    return 0;
  *after = *took = 0;
  return 2;
}

void cg_limiter_unreserve(struct cg_state *st, int p, const struct cg_limiter_resv *r,
                          int64_t go_ns, int64_t now) {
  int i, progress;
  pid_t me = cg_pid();

  if (go_ns <= now)
    return; /* its turn came: spent */
  /* Never waits: this may run inside a state-file region that a SIGBUS leaves by
   * siglongjmp, which would leave a waited-for mutex locked for good (then nothing is
   * given back any more, as before). */
  if (pthread_mutex_trylock(&cg__given_mu) != 0)
    return;
  if (cg__ngiven == CG__GIVEN_MAX) { /* full: the oldest goes */
    memmove(&cg__given[0], &cg__given[1], sizeof(cg__given[0]) * (CG__GIVEN_MAX - 1));
    cg__ngiven--;
  }
  cg__given[cg__ngiven].st = st;
  cg__given[cg__ngiven].p = p;
  cg__given[cg__ngiven].pid = me;
  cg__given[cg__ngiven].go_ns = go_ns;
  cg__given[cg__ngiven].r = *r;
  cg__ngiven++;
  do {
    progress = 0;
    for (i = 0; i < cg__ngiven; i++) {
      struct cg__given *g = &cg__given[i];
      int done = g->pid != me || g->st != st || g->go_ns <= now;
      if (!done) {
        struct cg_state_pool *pool = &st->pools[g->p];
        int a = cg__give(&pool->tat_requests, &g->r.after_req, &g->r.took_req);
        int b = cg__give(&pool->tat_tokens, &g->r.after_tok, &g->r.took_tok);
        progress |= a == 2 || b == 2; /* a TAT moved back: another entry may be last now */
        done = a && b;
      }
      if (done) {
        cg__given[i] = cg__given[--cg__ngiven];
        i--;
        progress = 1;
      }
    }
  } while (progress);
  pthread_mutex_unlock(&cg__given_mu);
}

int cg_limiter_reserve_took(struct cg_state *st, int p, const struct cg_limits *lim,
                            int64_t tokens, int64_t now, int64_t max_wait_ns, int64_t *wait_ns,
                            struct cg_limiter_resv *resv) {
  struct cg_state_pool *pool = &st->pools[p];
  int64_t hold = cg__load(&pool->hold_until);
  int64_t pace_until = cg__load(&pool->pace_until);
  int64_t floor_ns = hold > now ? hold : now;
  int64_t w_req = floor_ns - now, w_tok = 0, took_req = 0, took_tok = 0;
  int64_t after_req = 0, after_tok = 0;
  double t_ns = 0, tau_ns = 0;
  int pacing = pace_until > now;

  memset(resv, 0, sizeof(*resv));
  *wait_ns = w_req;
  if (w_req > max_wait_ns)
    return 1;
  if (lim->rpm > 0 || pacing) {
    if (lim->rpm > 0)
      cg__gcra(lim->rpm, lim->burst_requests, lim->margin, &t_ns, &tau_ns);
    if (pacing) {
      double pace = (double) cg__load(&pool->pace_interval);
      if (pace > t_ns) {
        t_ns = pace; /* the provider asked for wider spacing: no burst meanwhile */
        tau_ns = 0;
      }
    }
    if (cg__reserve_one(&pool->tat_requests, t_ns, tau_ns, 1.0, floor_ns, now, max_wait_ns,
                        &w_req, &took_req, &after_req))
      return *wait_ns = w_req, 1;
  }
  if (lim->tpm > 0 && tokens > 0) {
    cg__gcra(lim->tpm, lim->burst_tokens, lim->margin, &t_ns, &tau_ns);
    if (cg__reserve_one(&pool->tat_tokens, t_ns, tau_ns, (double) tokens, floor_ns, now,
                        max_wait_ns, &w_tok, &took_tok, &after_tok)) {
      /* Nothing is reserved for a call that does not go: give the request's back. */
      if (took_req)
        __atomic_fetch_sub(&pool->tat_requests, took_req, __ATOMIC_ACQ_REL);
      *wait_ns = w_tok > w_req ? w_tok : w_req;
      return 1;
    }
  }
  *wait_ns = w_tok > w_req ? w_tok : w_req;
  resv->took_req = took_req;
  resv->after_req = took_req ? after_req : 0;
  if (lim->tpm > 0 && tokens > 0) {
    resv->took_tok = took_tok;
    resv->after_tok = took_tok ? after_tok : 0;
  }
  return 0;
}

void cg_limiter_tokens_correct(struct cg_state *st, int p, const struct cg_limits *lim,
                               int64_t delta, int64_t max_ns) {
  double t_ns, tau_ns;
  int64_t add;
  if (lim->tpm <= 0 || delta == 0)
    return;
  cg__gcra(lim->tpm, lim->burst_tokens, lim->margin, &t_ns, &tau_ns);
  add = cg__ns((double) delta * t_ns);
  if (add > max_ns)
    add = max_ns > 0 ? max_ns : 0;
  __atomic_fetch_add(&st->pools[p].tat_tokens, add, __ATOMIC_ACQ_REL);
}

/* ---- in-flight ---- */

/* Lower an in-flight count by one, never below zero (a recount may have lowered it
 * already: see cg__recount). */
static void cg__count_down(uint32_t *count) {
  uint32_t cur = cg__load(count);
  while (cur > 0 && !cg__cas(count, &cur, cur - 1))
    ;
}

static long cg__futex(uint32_t *addr, int op, uint32_t val, const struct timespec *ts) {
  /* Not FUTEX_PRIVATE: the word lives in a file mapping shared between processes. */
  return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

static int cg__claim_slot(struct cg_state *st, int p) {
  uint64_t me = ((uint64_t) cg_pid() << 32) | (uint64_t) (p + 1);
  uint64_t start = cg_proc_self_start();
  int i;

  for (i = 0; i < CG_STATE_SLOTS; i++) {
    uint64_t zero = 0;
    if (cg__load(&st->slots[i].owner) == 0 && cg__cas(&st->slots[i].owner, &zero, me)) {
      __atomic_store_n(&st->slots[i].owner_start, start, __ATOMIC_RELEASE);
      return i;
    }
  }
  return -1;
}

/* Whether the holder of a slot is gone.  `start` 0: the holder was killed (or is)
 * between claiming the slot and writing its start time: only its pid can tell. */
static int cg__holder_gone(pid_t pid, uint64_t start) {
  return cg_proc_gone(pid, start, UINT64_MAX);
}

/* Make pool `p`'s in-flight count agree with its live slots.  A process killed between
 * raising the count and claiming its slot (or between freeing the slot and lowering the
 * count) leaves the count off; a claim under way at this instant may be counted one
 * short, which admits at most one call too many, once. */
/* The in-flight slots whose owner word names pool `p`. */
static uint32_t cg__live_slots(const struct cg_state *st, int p) {
  uint32_t live = 0;
  int i;
  for (i = 0; i < CG_STATE_SLOTS; i++) {
    uint64_t owner = cg__load(&st->slots[i].owner);
    if (owner && (int) (owner & 0xFFFFFFFFu) - 1 == p)
      live++;
  }
  return live;
}

static void cg__recount(struct cg_state *st, int p) {
  uint32_t live = cg__live_slots(st, p), cur;

  cur = cg__load(&st->pools[p].inflight);
  while (cur > live && !cg__cas(&st->pools[p].inflight, &cur, live))
    ;
}

int cg_limiter_reclaim(struct cg_state *st, int p) {
  int i, n = 0;
  for (i = 0; i < CG_STATE_SLOTS; i++) {
    struct cg_state_slot *s = &st->slots[i];
    uint64_t owner = cg__load(&s->owner);
    int pool;
    if (!owner)
      continue;
    pool = (int) (owner & 0xFFFFFFFFu) - 1;
    if (p >= 0 && pool != p)
      continue;
    if (!cg__holder_gone((pid_t) (owner >> 32), cg__load(&s->owner_start)))
      continue;
    if (cg__cas(&s->owner, &owner, 0)) {
      __atomic_store_n(&s->owner_start, 0, __ATOMIC_RELEASE);
      if (pool >= 0 && pool < CG_STATE_POOLS) {
        cg__count_down(&st->pools[pool].inflight);
        if (cg__load(&st->pools[pool].waiters))
          cg__futex(&st->pools[pool].inflight, FUTEX_WAKE, INT32_MAX, NULL);
      }
      n++;
    }
  }
  if (p >= 0)
    cg__recount(st, p);
  else
    for (i = 0; i < CG_STATE_POOLS; i++)
      cg__recount(st, i);
  return n;
}

/* ---- turns (limiter.h) ---- */

/* The turns' clock: CLOCK_MONOTONIC ms, low 32 bits (every process of the boot reads the
 * same).  Read only by a call that waits, or finds others waiting. */
static uint32_t cg__turn_ms(void) {
  return (uint32_t) cg_mono_ms();
}

/* ms since turn word `w` last looked, at `now` (wrapping).  A look a little ahead of
 * `now` is another process's later clock reading (0); one further ahead than
 * CG_TURN_DROP_MS is garbage, as old as can be. */
static uint32_t cg__turn_age(uint64_t w, uint32_t now) {
  int32_t d = (int32_t) (now - (uint32_t) w);
  if (d < 0)
    return d > -CG_TURN_DROP_MS ? 0 : UINT32_MAX;
  return (uint32_t) d;
}

/* Free turn word `i` of `pool` if it still holds `w`; whoever frees it counts its waiter
 * off (once: one compare-and-swap wins).  1 when this call did. */
static int cg__turn_clear(struct cg_state_pool *pool, int i, uint64_t w) {
  if (!cg__cas(&pool->turns[i], &w, 0))
    return 0;
  cg__count_down(&pool->waiters);
  return 1;
}

/* Whether turn `t`'s word of `pool` is still its own (not dropped as stale, nor garbage). */
static int cg__turn_mine(const struct cg_state_pool *pool, const struct cg_limiter_turn *t,
                         uint64_t *w) {
  if (!t->ticket || t->at < 0 || t->at >= CG_STATE_TURNS)
    return 0;
  *w = cg__load(&pool->turns[t->at]);
  return (uint32_t) (*w >> 32) == t->ticket;
}

uint32_t cg_limiter_turns_ahead(struct cg_state_pool *pool, const struct cg_limiter_turn *t,
                                uint32_t now, uint32_t enough) {
  uint32_t n = 0;
  int i;
  for (i = 0; i < CG_STATE_TURNS && n < enough; i++) {
    uint64_t w = cg__load(&pool->turns[i]);
    uint32_t age;
    if (!w || (t->ticket && i == t->at))
      continue;
    age = cg__turn_age(w, now);
    if (age > CG_TURN_DROP_MS) {
      cg__turn_clear(pool, i, w); /* a waiter gone for good: its word and count freed */
      continue;
    }
    if (age > CG_TURN_STALE_MS)
      continue; /* not looking (killed, or its host busy): passed over, its place kept */
    if (t->ticket && (int32_t) ((uint32_t) (w >> 32) - t->ticket) >= 0)
      continue; /* came after `t` */
    n++;
  }
  return n;
}

int cg_limiter_turn_take(struct cg_state_pool *pool, struct cg_limiter_turn *t, uint32_t now) {
  uint32_t ticket;
  int i;

  t->ticket = 0;
  t->at = -1;
  /* Counted first: a newcomer that reads 0 here came before this waiter anyway. */
  __atomic_fetch_add(&pool->waiters, 1, __ATOMIC_ACQ_REL);
  ticket = __atomic_fetch_add(&pool->turn_next, 1, __ATOMIC_ACQ_REL);
  if (!ticket)
    ticket = __atomic_fetch_add(&pool->turn_next, 1, __ATOMIC_ACQ_REL);
  for (i = 0; i < CG_STATE_TURNS; i++) {
    uint64_t w = cg__load(&pool->turns[i]), zero = 0;
    if (w && (cg__turn_age(w, now) <= CG_TURN_DROP_MS || !cg__turn_clear(pool, i, w)))
      continue;
    if (cg__cas(&pool->turns[i], &zero, (uint64_t) ticket << 32 | now)) {
      t->ticket = ticket;
      t->at = i;
      return 1;
    }
  }
  cg__count_down(&pool->waiters); /* every word taken: the caller waits behind them */
  return 0;
}

/* Stamp turn `t` as looking at `now`; 0 (and `t` emptied) when it was lost: not looked at
 * for CG_TURN_DROP_MS, it was freed by another (who counted it off).  Only the owner
 * stamps a word and others only free it: two rounds at most. */
static int cg__turn_stamp(struct cg_state_pool *pool, struct cg_limiter_turn *t, uint32_t now) {
  uint64_t w;
  while (cg__turn_mine(pool, t, &w))
    if ((uint32_t) w == now ||
        cg__cas(&pool->turns[t->at], &w, (uint64_t) t->ticket << 32 | now))
      return 1;
  t->ticket = 0;
  t->at = -1;
  return 0;
}

/* Give up turn `t` (its word and count).  `wake`: the waiters asleep on the pool are
 * woken when some remain (one of them may go now: the first in turn left). */
static void cg__turn_leave(struct cg_state_pool *pool, struct cg_limiter_turn *t, int wake) {
  uint64_t w;
  if (cg__turn_mine(pool, t, &w))
    cg__turn_clear(pool, t->at, w);
  t->ticket = 0;
  t->at = -1;
  if (wake && cg__load(&pool->waiters))
    cg__futex(&pool->inflight, FUTEX_WAKE, INT32_MAX, NULL);
}

uint32_t cg_limiter_waiting(const struct cg_state_pool *pool) {
  uint32_t n = cg__load(&pool->waiters), now = cg__turn_ms();
  int i;
  for (i = 0; i < CG_STATE_TURNS && n > 0; i++) {
    uint64_t w = cg__load(&pool->turns[i]);
    if (w && cg__turn_age(w, now) > CG_TURN_STALE_MS)
      n--;
  }
  return n;
}

void cg_limiter_turn_drop(struct cg_state *st, int p, struct cg_limiter_turn *t) {
  if (t->ticket)
    cg__turn_leave(&st->pools[p], t, 1);
}

int cg_limiter_inflight_try(struct cg_state *st, int p, long max, struct cg_limiter_turn *t,
                            int wait, uint32_t *seen) {
  struct cg_state_pool *pool = &st->pools[p];
  uint32_t now = 0, cur = 0;
  int tries, slot;

  if (CG_RARE(t->ticket)) {
    now = cg__turn_ms();
    cg__turn_stamp(pool, t, now);
  }
  for (tries = 0; tries < CG_CAS_TRIES; tries++) {
    cur = cg__load(&pool->inflight);
    if ((long) cur >= max)
      break;
    /* Calls waiting: a free slot is theirs first (the first `free` of them in turn). */
    if (CG_RARE(cg__load(&pool->waiters) != 0)) {
      long room = max - (long) cur; /* > 0; more than CG_STATE_TURNS: room for all */
      uint32_t free = room > CG_STATE_TURNS ? CG_STATE_TURNS + 1 : (uint32_t) room;
      if (!now)
        now = cg__turn_ms();
      if (cg_limiter_turns_ahead(pool, t, now, free) >= free)
        break;
    }
    if (!cg__cas(&pool->inflight, &cur, cur + 1))
      continue;
    slot = cg__claim_slot(st, p);
    if (slot < 0) {
      cg__count_down(&pool->inflight);
      slot = -2;
    }
    if (CG_RARE(t->ticket))
      /* Served: the next in turn may go too when a slot is still free. */
      cg__turn_leave(pool, t, (long) cg__load(&pool->inflight) < max);
    return slot;
  }
  *seen = cur;
  if (wait && !t->ticket)
    cg_limiter_turn_take(pool, t, now ? now : cg__turn_ms());
  return -1;
}

/* A blocking waiter's state, for a thread cancelled in its wait (pthread_cleanup_push):
 * its turn. */
struct cg__waiting {
  struct cg_state_pool *pool;
  struct cg_limiter_turn *turn;
};

static void cg__waiter_gone(void *arg) {
  struct cg__waiting *w = arg;
  if (w->turn->ticket)
    cg__turn_leave(w->pool, w->turn, 1);
}

int cg_limiter_inflight_acquire(struct cg_state *st, int p, long max, int64_t deadline_ns,
                                int64_t *waited_ns) {
  struct cg_state_pool *pool = &st->pools[p];
  struct cg_limiter_turn turn = {0, -1};
  int64_t t0 = cg_state_now(), now = t0;
  int64_t reclaim_at = t0 + (int64_t) CG_INFLIGHT_RECHECK_MS * 1000000;
  int slot;

  *waited_ns = 0;
  for (;;) {
    uint32_t cur = 0;
    slot = cg_limiter_inflight_try(st, p, max, &turn, now < deadline_ns, &cur);
    if (slot != -1) {
      *waited_ns = now - t0;
      return slot;
    }
    if (now >= deadline_ns) {
      cg_limiter_turn_drop(st, p, &turn);
      *waited_ns = now - t0;
      return -1;
    }
    {
      int64_t left = deadline_ns - now, nap = (int64_t) CG_TURN_BEAT_MS * 1000000;
      struct cg__waiting w = {pool, &turn};
      struct timespec ts;
      if (left < nap)
        nap = left;
      ts.tv_sec = (time_t) (nap / 1000000000);
      ts.tv_nsec = (long) (nap % 1000000000);
      /* Without a turn (every word taken) the waiter is not counted in `waiters`, as a
       * multi-API one is not: a count with no word behind it is never taken off when its
       * process is killed in the wait (helper-69: 40 waiters killed, `waiters` stayed 8
       * for good).  It looks every CG_TURN_BEAT_MS all the same, and asks for a word.
       * A thread cancelled in the wait gives its turn back (a cleanup handler). */
      pthread_cleanup_push(cg__waiter_gone, &w);
      /* Woken at a release (or a turn given up), else after CG_TURN_BEAT_MS to stamp
       * its turn: a waiter that stops looking is passed over. */
      cg__futex(&pool->inflight, FUTEX_WAIT, cur, &ts);
      pthread_cleanup_pop(0);
    }
    now = cg_state_now();
    if (now >= reclaim_at) {
      reclaim_at = now + (int64_t) CG_INFLIGHT_RECHECK_MS * 1000000;
      cg_limiter_reclaim(st, p); /* a holder may have died without releasing */
    }
  }
}

void cg_limiter_inflight_release(struct cg_state *st, int p, int slot) {
  struct cg_state_pool *pool = &st->pools[p];
  uint64_t owner;

  if (slot < 0)
    return;
  owner = cg__load(&st->slots[slot].owner);
  /* Only ours: a slot reclaimed from us (we were thought dead) is not released twice. */
  if (owner >> 32 != (uint64_t) cg_pid() || !cg__cas(&st->slots[slot].owner, &owner, 0))
    return;
  __atomic_store_n(&st->slots[slot].owner_start, 0, __ATOMIC_RELEASE);
  cg__count_down(&pool->inflight);
  /* Every sleeper: the first in turn is among them, not the one the kernel would pick. */
  if (cg__load(&pool->waiters))
    cg__futex(&pool->inflight, FUTEX_WAKE, INT32_MAX, NULL);
}

/* ---- provider signals ---- */

static void cg__store_max(int64_t *word, int64_t v) {
  int64_t old = cg__load(word);
  while (old < v && !cg__cas(word, &old, v))
    ;
}

void cg_limiter_hold(struct cg_state *st, int p, int64_t until_ns) {
  cg__store_max(&st->pools[p].hold_until, until_ns);
  /* New reservations line up behind the hold, paced, instead of all waking at its end. */
  cg__store_max(&st->pools[p].tat_requests, until_ns);
}

void cg_limiter_hold_key(struct cg_state *st, int p, uint32_t key, int64_t until_ns,
                         int64_t now) {
  struct cg_state_pool *pool = &st->pools[p];
  uint64_t k, end, want;
  int round, i;

  if (!key) {
    cg_limiter_hold(st, p, until_ns);
    return;
  }
  if (until_ns <= now)
    return;
  k = cg_limiter_key24(key);
  end = (uint64_t) (until_ns / 1000000 + 1);
  want = end << CG_KEYED_BITS | k;
  /* Raised first: a reader that finds it passed reads no word (cg_limiter_held_until). */
  cg__store_max(&pool->keyed_until, until_ns);
  /* A few rounds at most: each lost compare-and-swap is another process's hold taking a
   * word.  A table full of live keys gives the word of the hold that ends first: that
   * key's calls may go early and meet a 429 of their own, as plain curl's do (holding the
   * whole pool instead, as before keyed holds, made 12 tenants' 429s hold each other: 9
   * of 12 calls where curl --retry 3 made 12, a helper's repro).  Lost rounds, unresolved:
   * no hold (the call that got the 429 still waits out its hint). */
  for (round = 0; round < 4; round++) {
    int free_at = -1, soonest = 0;
    uint64_t free_w = 0, soonest_w = UINT64_MAX;
    for (i = 0; i < CG_STATE_KEYED_HOLDS; i++) {
      uint64_t w = cg__load(&pool->keyed[i]);
      int live = cg_limiter_keyed_end(w) > now;
      if (live && (w & CG_KEYED_MASK) == k) {
        /* This key's live hold: moved forward (holds only move forward). */
        while ((w >> CG_KEYED_BITS) < end && (w & CG_KEYED_MASK) == k &&
               !cg__cas(&pool->keyed[i], &w, want))
          ;
        if ((w & CG_KEYED_MASK) != k)
          break; /* the word went to another key meanwhile: look again */
        return;
      }
      if (!live && free_at < 0) {
        free_at = i;
        free_w = w;
      }
      if (live && w >> CG_KEYED_BITS < soonest_w >> CG_KEYED_BITS) {
        soonest = i;
        soonest_w = w;
      }
    }
    if (i < CG_STATE_KEYED_HOLDS)
      continue;
    if (free_at < 0) {
      if (soonest_w >> CG_KEYED_BITS >= end)
        return; /* every word holds longer than this hold would */
      free_at = soonest;
      free_w = soonest_w;
    }
    if (cg__cas(&pool->keyed[free_at], &free_w, want))
      return;
  }
}

int64_t cg_limiter_key_until_far(struct cg_state *st, int p, uint32_t key) {
  const struct cg_state_pool *pool = &st->pools[p];
  uint64_t k = cg_limiter_key24(key);
  int64_t until = 0;
  int i;
  for (i = 0; i < CG_STATE_KEYED_HOLDS; i++) {
    uint64_t w = cg__load(&pool->keyed[i]);
    if ((w & CG_KEYED_MASK) == k && cg_limiter_keyed_end(w) > until)
      until = cg_limiter_keyed_end(w);
  }
  return until;
}

int cg_limiter_learn_key(struct cg_state *st, int p, uint32_t key, int64_t now) {
  struct cg_state_pool *pool = &st->pools[p];
  int64_t now_ms = now / 1000000;
  uint64_t k, w;
  int tries;
  if (!key)
    return 1;
  k = cg_limiter_key24(key);
  for (tries = 0; tries < CG_CAS_TRIES; tries++) {
    uint64_t was, is;
    int recent;
    w = cg__load(&pool->throttle_key);
    was = w & CG_KEYED_MASK;
    recent = w && (int64_t) (w >> CG_KEYED_BITS) + CG_LEARN_KEYS_MS > now_ms;
    /* Another key's 429 within CG_LEARN_KEYS_MS: several keys (kept while they last). */
    is = recent && was != k ? CG_KEYED_MASK : k;
    if (cg__cas(&pool->throttle_key, &w, (uint64_t) now_ms << CG_KEYED_BITS | is))
      return recent && was == k; /* the key's second 429 in a row: its limit, the pool's */
  }
  return 0;
}

void cg_limiter_pace(struct cg_state *st, int p, int64_t limit, int64_t remaining,
                     int64_t reset_ns, int64_t now, int64_t max_ns) {
  struct cg_state_pool *pool = &st->pools[p];
  int64_t interval, window;
  if (remaining < 0 || reset_ns <= 0)
    return;
  if (max_ns < 0)
    max_ns = 0;
  if (remaining == 0) {
    if (limit > 0)
      cg_limiter_hold(st, p, now + (reset_ns / limit < max_ns ? reset_ns / limit : max_ns));
    return;
  }
  /* `remaining` requests over `reset_ns`: one every reset / (remaining + 1) (0 when
   * remaining >= reset_ns: no overflow of remaining + 1).  Neither the spacing nor how
   * long it lasts goes beyond max_ns. */
  interval = remaining >= reset_ns ? 0 : reset_ns / (remaining + 1);
  window = reset_ns < max_ns ? reset_ns : max_ns;
  __atomic_store_n(&pool->pace_interval, interval < max_ns ? interval : max_ns,
                   __ATOMIC_RELEASE);
  __atomic_store_n(&pool->pace_until, now + window, __ATOMIC_RELEASE);
}

double cg_limiter_available(int64_t tat, double per_minute, double burst, int64_t now) {
  double t_ns, tau_ns, room;
  if (per_minute <= 0)
    return INFINITY;
  cg__gcra(per_minute, burst, 1.0, &t_ns, &tau_ns);
  /* Units that fit before the account's TAT passes now + tau. */
  room = ((double) now + tau_ns + t_ns - (double) (tat > now ? tat : now)) / t_ns;
  return room > 0 ? floor(room) : 0;
}

/* ---- learning the rate (see limiter.h) ---- */

static double cg__loadd(const double *p) {
  double v;
  __atomic_load(p, &v, __ATOMIC_ACQUIRE);
  return v;
}

static void cg__stored(double *p, double v) {
  __atomic_store(p, &v, __ATOMIC_RELEASE);
}

double cg_learn_ceiling(const struct cg_limits *lim) {
  double c = lim->rpm > 0 ? lim->rpm * (lim->margin > 0 && lim->margin <= 1 ? lim->margin : 1.0)
                                / 60.0
                          : CG_LEARN_MAX_RPS;
  return c < CG_LEARN_FLOOR_RPS ? CG_LEARN_FLOOR_RPS : c;
}

double cg_learn_clamp(double rate, double ceiling) {
  if (!(rate >= CG_LEARN_FLOOR_RPS)) /* NaN too: a file's garbage is the floor */
    rate = CG_LEARN_FLOOR_RPS;
  if (!(ceiling >= CG_LEARN_FLOOR_RPS) || ceiling > CG_LEARN_MAX_RPS)
    ceiling = CG_LEARN_MAX_RPS;
  return rate > ceiling ? ceiling : rate;
}

double cg_learn_cut(double rate, double measured) {
  /* botocore: the rate at the throttle is the measured one when lower (the pool may not
   * have been sending at its allowance), times beta. */
  double at = measured > 0 && measured < rate ? measured : rate;
  return at * CG_LEARN_BETA;
}

double cg_learn_cubic(double wmax, double t_s) {
  double k = cbrt(wmax * (1.0 - CG_LEARN_BETA) / CG_LEARN_C), d = t_s - k;
  if (t_s > 3600)
    d = 3600; /* beyond an hour it is far above any ceiling anyway: no overflow */
  return CG_LEARN_C * d * d * d + wmax;
}

double cg_learn_slow_start(double rate, double latency_s) {
  /* TCP's slow start: the window grows by one request per answer, so the rate (window /
   * round trip) grows by 1 / latency per answer: doubling every round trip. */
  if (!(latency_s > CG_LEARN_MIN_RTT_S))
    latency_s = CG_LEARN_MIN_RTT_S;
  return rate + 1.0 / latency_s;
}

/* cg__measure's step into a new half-second: its first answer closes the last one (`w`,
 * as read) into the smoothed measure.  0: lost the race for the word (try again).  Out
 * of line: once per half-second, not per answer (hot.h). */
static __attribute__((noinline, cold)) int cg__measure_roll(struct cg_state_pool *pool,
                                                            uint64_t w, uint32_t ep) {
  uint32_t old_ep = (uint32_t) (w >> 32), n = (uint32_t) w;
  if (!cg__cas(&pool->learn_clock, &w, (uint64_t) ep << 32 | 1))
    return 0;
  if (w && (uint32_t) (ep - old_ep) < 1u << 30) {
    double dt = (double) (uint32_t) (ep - old_ep) * (double) CG_LEARN_BUCKET_NS / 1e9;
    double cur = (double) n / dt, m = cg__loadd(&pool->learn_measured);
    if (!(m >= 0 && m <= CG_LEARN_MAX_RPS))
      m = 0;
    cg__stored(&pool->learn_measured, cur * 0.8 + m * 0.2);
  }
  return 1;
}

/* Count one answer that was not a throttle in the pool's measurement (the provider's
 * goodput); returns the smoothed answers/s. */
static double cg__measure(struct cg_state_pool *pool, int64_t now) {
  uint32_t ep = (uint32_t) ((uint64_t) (now > 0 ? now : 0) / CG_LEARN_BUCKET_NS);
  int tries;
  for (tries = 0; tries < CG_CAS_TRIES; tries++) {
    uint64_t w = cg__load(&pool->learn_clock);
    uint32_t n = (uint32_t) w;
    if (w && (uint32_t) (w >> 32) == ep) {
      if (cg__cas(&pool->learn_clock, &w, w + (n < UINT32_MAX ? 1 : 0)))
        break;
      continue;
    }
    /* A new half-second: its first answer closes the last one. */
    if (cg__measure_roll(pool, w, ep))
      break;
  }
  return cg__loadd(&pool->learn_measured);
}

double cg_limiter_learned(struct cg_state *st, int p, const struct cg_limits *lim) {
  double r;
  if (!lim->adaptive)
    return 0;
  r = cg__loadd(&st->pools[p].learn_rate);
  if (r == 0)
    return 0; /* not started */
  return cg_learn_clamp(r, cg_learn_ceiling(lim));
}

void cg_limiter_learn_throttle(struct cg_state *st, int p, const struct cg_limits *lim,
                               int64_t sent_ns, int64_t now) {
  struct cg_state_pool *pool = &st->pools[p];
  int64_t last = cg__load(&pool->learn_last);
  double rate, measured, ceil = cg_learn_ceiling(lim), next;

  if (!lim->adaptive)
    return;
  measured = cg__loadd(&pool->learn_measured);
  /* One cut per round: a throttle of a request sent before the last cut says nothing the
   * cut did not already answer (TCP's one reduction per window), so 60 processes that
   * all get a 429 from one burst lower the rate once, not 0.7^60. */
  if (sent_ns <= last + CG_LEARN_QUIET_NS || !cg__cas(&pool->learn_last, &last, now))
    return;
  rate = cg__loadd(&pool->learn_rate);
  rate = rate == 0 ? ceil : cg_learn_clamp(rate, ceil);
  if (!(measured > 0 && measured <= CG_LEARN_MAX_RPS))
    measured = 0;
  next = cg_learn_clamp(cg_learn_cut(rate, measured), ceil);
  cg__stored(&pool->learn_wmax, cg_learn_clamp(next / CG_LEARN_BETA, CG_LEARN_MAX_RPS));
  cg__stored(&pool->learn_rate, next);
  /* Requests spaced for the old rate start again from now at the new one. */
  __atomic_store_n(&pool->learn_tat, now, __ATOMIC_RELEASE);
}

void cg_limiter_learn_success(struct cg_state *st, int p, const struct cg_limits *lim,
                              int64_t latency_ns, int64_t now) {
  struct cg_state_pool *pool = &st->pools[p];
  double rate, wmax, measured, ceil = cg_learn_ceiling(lim), next;
  int64_t last;

  if (!lim->adaptive)
    return;
  measured = cg__measure(pool, now);
  rate = cg__loadd(&pool->learn_rate);
  wmax = cg__loadd(&pool->learn_wmax);
  last = cg__load(&pool->learn_last);
  if (rate == 0)
    return; /* not started (cg_limiter_learn_start) */
  rate = cg_learn_clamp(rate, ceil);
  if (!(wmax > 0) || last <= 0) {
    next = cg_learn_slow_start(rate, (double) latency_ns / 1e9);
  } else {
    double t = now > last ? (double) (now - last) / 1e9 : 0;
    next = cg_learn_cubic(cg_learn_clamp(wmax, CG_LEARN_MAX_RPS), t);
    /* botocore's cap: no growth beyond twice what the pool is measured to send (a rate
     * nobody uses is not known to be safe).  It stops growth, never lowers the rate:
     * only throttles do. */
    if (measured >= 0 && measured <= CG_LEARN_MAX_RPS && next > 2 * measured)
      next = 2 * measured > rate ? 2 * measured : rate;
  }
  next = cg_learn_clamp(next, ceil);
  cg__stored(&pool->learn_rate, next);
  if (next > rate) {
    /* A higher rate shortens the spacing at once: the next place was reckoned at the
     * old rate (bounded: a lost race leaves it as it was). */
    int64_t tat = cg__load(&pool->learn_tat), soon = cg__ns((double) now + 1e9 / next);
    int tries;
    for (tries = 0; tries < 8 && tat > soon; tries++)
      if (cg__cas(&pool->learn_tat, &tat, soon))
        break;
  }
}

void cg_limiter_learn_start(struct cg_state *st, int p, const struct cg_limits *lim) {
  double zero = 0, start;
  if (!lim->adaptive)
    return;
  /* Started already (every call after the pool's first): the exchange below would find
   * the word not 0 and leave it; a plain load says so without the locked write. */
  if (cg__loadd(&st->pools[p].learn_rate) != 0)
    return;
  start = lim->rpm > 0 ? cg_learn_ceiling(lim) : CG_LEARN_START_RPS;
  __atomic_compare_exchange(&st->pools[p].learn_rate, &zero, &start, 0, __ATOMIC_ACQ_REL,
                            __ATOMIC_ACQUIRE);
}

int64_t cg_limiter_learn_take(struct cg_state *st, int p, const struct cg_limits *lim,
                              int64_t now) {
  struct cg_state_pool *pool = &st->pools[p];
  double r = cg_limiter_learned(st, p, lim), t_ns, tau;
  int tries;

  if (r <= 0 || r >= CG_LEARN_MAX_RPS)
    return 0;
  t_ns = 1e9 / r;
  /* Before the first cut (slow start) a few requests may go at once: a fresh pool's
   * first calls are not spaced; after it, no burst. */
  tau = cg_limiter_learn_unproven(st, p) ? (CG_LEARN_START_BURST - 1) * t_ns : 0;
  for (tries = 0; tries < CG_CAS_TRIES; tries++) {
    int64_t tat = cg__load(&pool->learn_tat), next, go;
    if (tat > now + (int64_t) 4e18 / 2)
      tat = now; /* garbage */
    go = cg__ns((double) tat - tau);
    if (go > now)
      return go - now; /* not yet: the caller sleeps and asks again (no reservation) */
    next = cg__ns((double) (tat > now ? tat : now) + t_ns);
    if (cg__cas(&pool->learn_tat, &tat, next))
      return 0;
  }
  return 0;
}
