/* shared-mmap.c - the state file behind the shared-state interface (shared.h): the
 * functions of limiter.c and breaker.c as they are, on the pool's words of the file. */
#include "shared.h"

#include "breaker.h"
#include "budget.h"
#include "limiter.h"

static int cg__m_reserve(struct cg_shared_pool *sp, int64_t tokens, int64_t max_wait_ns,
                         int64_t *wait_ns, int64_t now) {
  return cg_shared_file_reserve(sp->state, sp->p, sp->cfg, tokens, max_wait_ns, wait_ns, now);
}

static int64_t cg__m_hold_left(struct cg_shared_pool *sp, uint32_t key) {
  int64_t now = cg_state_now();
  return cg_limiter_held_until(sp->state, sp->p, key, now) - now;
}

static void cg__m_hold(struct cg_shared_pool *sp, uint32_t key, int64_t for_ns) {
  int64_t now = cg_state_now();
  cg_limiter_hold_key(sp->state, sp->p, key, now + for_ns, now);
}

static int cg__m_acquire(struct cg_shared_pool *sp, long max, int64_t left_ns,
                         int64_t *waited_ns) {
  return cg_shared_file_acquire(sp->state, sp->p, max, left_ns, waited_ns);
}

static void cg__m_release(struct cg_shared_pool *sp, int handle) {
  cg_shared_file_release(sp->state, sp->p, handle);
}

static int cg__m_admit(struct cg_shared_pool *sp, int64_t probe_ns, int64_t *next_ns,
                       int64_t now) {
  return cg_shared_file_admit(sp->state, sp->p, sp->cfg, probe_ns, next_ns, now);
}

int cg_shared_file_report_early(struct cg_state *st, int p, const struct cg_pool_cfg *cfg,
                                int failed, int64_t floor_ns, int64_t start_ns,
                                int64_t open_until) {
  if (failed == 0)
    return cg_shared_file_report(st, p, cfg, 0, 1, 0, start_ns, 0);
  if (failed > 0 && floor_ns > 0) {
    /* The provider said when to come back: no probe before that (as a regular probe's
     * failure, breaker.c cg__report_probe), however early the cooldown it found ends. */
    int64_t floor_until = cg_state_now() + floor_ns;
    if (floor_until > open_until)
      open_until = floor_until;
  }
  cg_breaker_early_end(st, p, open_until);
  return 0;
}

static int cg__m_report(struct cg_shared_pool *sp, int failed, int probe, int64_t floor_ns,
                        int64_t start_ns) {
  if (probe == 2) {
    int64_t until = sp->early_until;
    sp->early_until = 0;
    return cg_shared_file_report_early(sp->state, sp->p, sp->cfg, failed, floor_ns, start_ns,
                                       until);
  }
  return cg_shared_file_report(sp->state, sp->p, sp->cfg, failed, probe, floor_ns, start_ns,
                               0);
}

static int cg__m_early(struct cg_shared_pool *sp, int64_t probe_ns, int64_t now) {
  now = cg_shared_file_now(now);
  return cg_breaker_early(sp->state, sp->p, &sp->cfg->breaker, now, now + probe_ns,
                          &sp->early_until);
}

static void cg__m_brelease(struct cg_shared_pool *sp) {
  if (sp->early_until > 0) { /* an early probe, unused: open as before it */
    cg_breaker_early_end(sp->state, sp->p, sp->early_until);
    sp->early_until = 0;
    return;
  }
  cg_breaker_release(sp->state, sp->p);
}

static int cg__m_bstate(struct cg_shared_pool *sp) {
  return (int) cg_breaker_state(sp->state, sp->p);
}

static int cg__m_wait_ok(struct cg_shared_pool *sp, int64_t left_ns) {
  return cg_breaker_wait_ok(sp->state, sp->p, cg_state_now(), left_ns);
}

static uint32_t cg__m_seq(struct cg_shared_pool *sp) {
  return cg_breaker_seq(sp->state, sp->p);
}

static void cg__m_park(struct cg_shared_pool *sp, uint32_t seq, int64_t ns) {
  cg_breaker_park(sp->state, sp->p, seq, ns);
}

static void cg__m_bfirst(struct cg_shared_pool *sp, int64_t now) {
  cg_shared_file_bfirst(sp->state, sp->p, sp->cfg, now);
}

static int cg__m_bretry(struct cg_shared_pool *sp, int64_t left_ns, int *slot) {
  int64_t now = cg_state_now();
  return (int) cg_budget_retry(sp->state, sp->p, &sp->cfg->budget, now, now + left_ns, slot);
}

static int64_t cg__m_bwait(struct cg_shared_pool *sp, int why) {
  return cg_budget_wait_ns(sp->state, sp->p, &sp->cfg->budget, (enum cg_budget_verdict) why,
                           cg_state_now());
}

static void cg__m_bdone(struct cg_shared_pool *sp, int slot) {
  if (slot < CG_SHARED_LEASE_BASE)
    cg_budget_done(sp->state, sp->p, slot);
}

static void cg__m_brefund(struct cg_shared_pool *sp, int64_t granted_ns) {
  cg_budget_refund(sp->state, sp->p, &sp->cfg->budget, granted_ns, cg_state_now());
}

static int64_t cg__m_learn_take(struct cg_shared_pool *sp, int64_t now) {
  return cg_shared_file_learn_take(sp->state, sp->p, sp->cfg, now);
}

static void cg__m_learn_cut(struct cg_shared_pool *sp) {
  (void) sp; /* every process of the machine shares the file's rate already */
}

const struct cg_shared_ops cg_shared_mmap = {
  .name = "mmap",
  .reserve = cg__m_reserve,
  .hold_left = cg__m_hold_left,
  .hold = cg__m_hold,
  .acquire = cg__m_acquire,
  .release = cg__m_release,
  .breaker_admit = cg__m_admit,
  .breaker_report = cg__m_report,
  .breaker_early = cg__m_early,
  .breaker_release = cg__m_brelease,
  .breaker_state = cg__m_bstate,
  .breaker_wait_ok = cg__m_wait_ok,
  .breaker_seq = cg__m_seq,
  .breaker_park = cg__m_park,
  .budget_first = cg__m_bfirst,
  .budget_retry = cg__m_bretry,
  .budget_wait_ns = cg__m_bwait,
  .budget_done = cg__m_bdone,
  .budget_refund = cg__m_brefund,
  .learn_take = cg__m_learn_take,
  .learn_cut = cg__m_learn_cut,
};
