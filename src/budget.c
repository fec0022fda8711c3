/* budget.c - the shared retry budget (see budget.h). */
#include "budget.h"

#include "proc.h"
#include "window.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

_Static_assert(CG_BUDGET_MAX_CONCURRENT == CG_STATE_RETRY_SLOTS,
               "config's limit must match the slots in the file");

#define cg__load(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define cg__cas(p, expp, v)                                                               \
  __atomic_compare_exchange_n((p), (expp), (v), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)

static int64_t cg__ns(double s) {
  return (int64_t) (s * 1e9);
}

double cg_budget_allowed(uint32_t first, const struct cg_budget_cfg *c) {
  return c->ratio * (double) first + c->min_per_s * c->window_s;
}

int64_t cg_budget_configure(struct cg_state *st, int p, const struct cg_budget_cfg *c) {
  struct cg_state_budget *b = &st->budgets[p];
  int64_t win = cg__ns(c->window_s), shared = 0;
  __atomic_store_n(&b->enabled, (uint32_t) (c->enabled != 0), __ATOMIC_RELAXED);
  __atomic_store_n(&b->max_concurrent, (uint32_t) c->max_concurrent, __ATOMIC_RELAXED);
  __atomic_store(&b->ratio, &c->ratio, __ATOMIC_RELAXED);
  __atomic_store(&b->min_per_s, &c->min_per_s, __ATOMIC_RELAXED);
  /* The first process to configure the pool sets its window for everybody.  Set already
   * (every call after the pool's first): read without the locked write, as in
   * cg_breaker_configure. */
  shared = cg__load(&b->window_ns);
  if (shared != 0 && cg_window_ns_ok(shared, CG_BUDGET_WINDOW_MAX_S))
    return shared;
  if (cg__cas(&b->window_ns, &shared, win)) /* unset, or garbage (window.h): ours */
    return win;
  return cg_window_ns_ok(shared, CG_BUDGET_WINDOW_MAX_S) ? shared : win;
}

/* The pool's window (ns): the shared one, or this process's until one is stored. */
static int64_t cg__window(struct cg_state_budget *b, const struct cg_budget_cfg *c) {
  int64_t w = cg__load(&b->window_ns);
  return cg_window_ns_ok(w, CG_BUDGET_WINDOW_MAX_S) ? w : cg__ns(c->window_s);
}

void cg_budget_first(struct cg_state *st, int p, const struct cg_budget_cfg *c, int64_t now_ns) {
  if (c->enabled)
    cg_window_add(st->budgets[p].buckets, now_ns,
                  cg_window_width(cg__window(&st->budgets[p], c)), 1, 0);
}

/* ---- concurrency slots ----
 *
 * A slot's owner word:  pid (22 bits, 63-42) | deadline (20 bits, 41-22) | start (22 bits,
 * 21-0).  The deadline is the holder call's own, in CLOCK_MONOTONIC seconds modulo 2^20
 * (compared within half of that: 6 days; deadlines are capped at CG_SLOT_MAX_S ahead),
 * so a holder that is never reaped, or hangs, cannot pin a slot past its call's end.
 * The start time (low 22 bits of /proc/PID/stat field 22, in clock ticks) tells a reused
 * pid apart. */

#define CG_PID_BITS 22
#define CG_DL_BITS 20
#define CG_START_BITS 22
#define CG_DL_MASK ((1u << CG_DL_BITS) - 1)
#define CG_START_MASK ((1u << CG_START_BITS) - 1)
#define CG_SLOT_MAX_S (1 << 18) /* about 3 days: longer deadlines are cut to this */

static pid_t cg__owner_pid(uint64_t o) {
  return (pid_t) (o >> (CG_DL_BITS + CG_START_BITS));
}

static uint32_t cg__owner_dl(uint64_t o) {
  return (uint32_t) (o >> CG_START_BITS) & CG_DL_MASK;
}

static uint64_t cg__me(int64_t now_ns, int64_t deadline_ns) {
  pid_t pid = cg_pid();
  int64_t s = deadline_ns - now_ns;
  uint32_t dl;

  if (s < 0)
    s = 0;
  if (s > (int64_t) CG_SLOT_MAX_S * 1000000000)
    s = (int64_t) CG_SLOT_MAX_S * 1000000000;
  /* Rounded up, plus one second of grace: a slot is never taken back early. */
  dl = (uint32_t) ((now_ns + s) / 1000000000 + 2) & CG_DL_MASK;
  return (uint64_t) pid << (CG_DL_BITS + CG_START_BITS) | (uint64_t) dl << CG_START_BITS |
         (cg_proc_self_start() & CG_START_MASK);
}

/* Whether the holder of `owner` is gone (dead, a zombie, or its pid reused by a newer
 * process) or past its call's deadline at `now_ns`. */
static int cg__gone(uint64_t owner, int64_t now_ns) {
  uint32_t now_s = (uint32_t) (now_ns / 1000000000) & CG_DL_MASK;
  uint32_t past = (now_s - cg__owner_dl(owner)) & CG_DL_MASK;
  if (past < (1u << (CG_DL_BITS - 1)))
    return 1; /* the deadline (mod 2^20) is behind us */
  return cg_proc_gone(cg__owner_pid(owner), owner & CG_START_MASK, CG_START_MASK);
}

/* Free the slots of dead or overdue holders; the number of live ones left. */
static uint32_t cg__reclaim(struct cg_state_budget *b, int64_t now_ns) {
  uint32_t live = 0;
  int i;
  for (i = 0; i < CG_STATE_RETRY_SLOTS; i++) {
    uint64_t o = cg__load(&b->retry_owner[i]);
    if (!o)
      continue;
    if (cg__gone(o, now_ns) && cg__cas(&b->retry_owner[i], &o, 0))
      continue;
    live++;
  }
  return live;
}

static uint32_t cg__count(struct cg_state_budget *b) {
  uint32_t n = 0;
  int i;
  for (i = 0; i < CG_STATE_RETRY_SLOTS; i++)
    n += cg__load(&b->retry_owner[i]) != 0;
  return n;
}

static int cg__claim(struct cg_state_budget *b, uint64_t me) {
  int i;
  for (i = 0; i < CG_STATE_RETRY_SLOTS; i++) {
    uint64_t zero = 0;
    if (cg__load(&b->retry_owner[i]) == 0 && cg__cas(&b->retry_owner[i], &zero, me))
      return i;
  }
  return -1;
}

/* Take a slot when fewer than `max` are held.  Claim first, then count: two callers
 * racing for the last slot may both be refused, never both let through. */
static int cg__acquire(struct cg_state_budget *b, uint32_t max, int64_t now_ns,
                       int64_t deadline_ns) {
  uint64_t me = cg__me(now_ns, deadline_ns);
  int slot = cg__claim(b, me);

  if (slot < 0) {
    cg__reclaim(b, now_ns);
    slot = cg__claim(b, me);
  }
  if (slot < 0)
    return -1;
  if (cg__count(b) > max && cg__reclaim(b, now_ns) > max) {
    __atomic_store_n(&b->retry_owner[slot], 0, __ATOMIC_RELEASE);
    return -1;
  }
  return slot;
}

void cg_budget_done(struct cg_state *st, int p, int slot) {
  uint64_t *w;
  uint64_t o;
  if (slot < 0 || slot >= CG_STATE_RETRY_SLOTS)
    return;
  w = &st->budgets[p].retry_owner[slot];
  o = cg__load(w);
  /* Only ours: a slot taken back from us (we were thought dead) is not freed twice. */
  if (o && cg__owner_pid(o) == cg_pid())
    cg__cas(w, &o, 0);
}

void cg_budget_refund(struct cg_state *st, int p, const struct cg_budget_cfg *c,
                      int64_t granted_ns, int64_t now_ns) {
  struct cg_state_budget *b = &st->budgets[p];
  if (!c->enabled || granted_ns <= 0)
    return;
  if (cg_window_take_b(b->buckets, granted_ns, now_ns, cg_window_width(cg__window(b, c)), 1))
    __atomic_fetch_add(&b->rescued, 1, __ATOMIC_RELAXED);
}

/* ---- the window ---- */

static int cg__fits(uint32_t first, uint32_t retries, void *arg) {
  return (double) retries <= cg_budget_allowed(first, arg);
}

enum cg_budget_verdict cg_budget_retry(struct cg_state *st, int p,
                                       const struct cg_budget_cfg *c, int64_t now_ns,
                                       int64_t deadline_ns, int *slot) {
  struct cg_state_budget *b = &st->budgets[p];
  struct cg_budget_cfg eff = *c;
  int64_t win;

  *slot = -1;
  if (!c->enabled)
    return CG_BUDGET_GRANTED;
  win = cg__window(b, c);
  eff.window_s = (double) win / 1e9; /* for min_per_s * window_s */
  if (c->max_concurrent > 0 &&
      (*slot = cg__acquire(b, (uint32_t) c->max_concurrent, now_ns, deadline_ns)) < 0) {
    __atomic_fetch_add(&b->refused, 1, __ATOMIC_RELAXED);
    return CG_BUDGET_CONCURRENCY;
  }
  if (!cg_window_add_if(b->buckets, now_ns, cg_window_width(win), 0, 1, cg__fits, &eff)) {
    cg_budget_done(st, p, *slot);
    *slot = -1;
    __atomic_fetch_add(&b->refused, 1, __ATOMIC_RELAXED);
    return CG_BUDGET_WINDOW;
  }
  return CG_BUDGET_GRANTED;
}

int64_t cg_budget_grant_in(const uint64_t *buckets, int64_t now_ns, int64_t width_ns,
                           const struct cg_budget_cfg *c) {
  uint32_t cur = (uint32_t) ((uint64_t) (now_ns > 0 ? now_ns : 0) / (uint64_t) width_ns);
  int k;

  /* A bucket word is epoch << 32 | first attempts << 16 | retries (window.h).  At the
   * start of epoch cur + k the buckets older than cur + k - (CG_STATE_BUCKETS - 1) have
   * left the window: the first k with room for one more retry is the earliest grant
   * (new first attempts meanwhile only bring it closer; the caller asks again). */
  for (k = 0; k <= CG_STATE_BUCKETS; k++) {
    uint32_t first = 0, retries = 0, ep = cur + (uint32_t) k;
    int i;
    for (i = 0; i < CG_STATE_BUCKETS; i++) {
      uint64_t w = __atomic_load_n(&buckets[i], __ATOMIC_ACQUIRE);
      uint32_t e = (uint32_t) (w >> 32);
      if (!w || (uint32_t) (ep - e) >= CG_STATE_BUCKETS)
        continue;
      first += (uint32_t) (w >> 16) & 0xFFFFu;
      retries += (uint32_t) w & 0xFFFFu;
    }
    if ((double) retries + 1 <= cg_budget_allowed(first, c))
      return k == 0 ? 0 : (int64_t) ep * width_ns - now_ns;
  }
  return -1; /* no floor and no first attempts: only new calls make room */
}

int64_t cg_budget_wait_ns(struct cg_state *st, int p, const struct cg_budget_cfg *c,
                          enum cg_budget_verdict why, int64_t now_ns) {
  struct cg_state_budget *b = &st->budgets[p];
  struct cg_budget_cfg eff = *c;
  int64_t win = cg__window(b, c), ns;

  if (why == CG_BUDGET_CONCURRENCY)
    return CG_BUDGET_POLL_NS; /* a slot is given back when a retry's attempt ends */
  eff.window_s = (double) win / 1e9;
  ns = cg_budget_grant_in(b->buckets, now_ns, cg_window_width(win), &eff);
  if (ns < 0)
    return cg_window_width(win);
  return ns < CG_BUDGET_MIN_WAIT_NS ? CG_BUDGET_MIN_WAIT_NS : ns;
}

void cg_budget_view(struct cg_state *st, int p, int64_t now_ns, struct cg_budget_view *v) {
  struct cg_state_budget *b = &st->budgets[p];
  struct cg_budget_cfg c = {0, 0, 0, 0, 0};

  v->enabled = (int) cg__load(&b->enabled);
  v->max_concurrent = cg__load(&b->max_concurrent);
  __atomic_load(&b->ratio, &v->ratio, __ATOMIC_RELAXED);
  __atomic_load(&b->min_per_s, &v->min_per_s, __ATOMIC_RELAXED);
  v->window_ns = cg__load(&b->window_ns);
  v->first = v->retries = 0;
  if (v->window_ns > 0)
    cg_window_sum(b->buckets, now_ns, cg_window_width(v->window_ns), &v->first, &v->retries);
  c.ratio = v->ratio;
  c.min_per_s = v->min_per_s;
  c.window_s = (double) v->window_ns / 1e9;
  v->allowed = cg_budget_allowed(v->first, &c);
  v->concurrent = cg__count(b);
  v->refused = cg__load(&b->refused);
  v->rescued = cg__load(&b->rescued);
}
