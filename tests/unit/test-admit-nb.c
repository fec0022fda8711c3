/* test-admit-nb.c - the multi driver's admission without sleeping (admit.h
 * cg_admission_step_nb, cg_admission_retry_nb; issue 13): each wait of the blocking forms
 * comes back as a due time, at once, and the shared words move as the blocking forms
 * move them (one reservation per attempt, a slot taken and given back). */
#include "admit.h"
#include "breaker.h"
#include "clock.h"
#include "limiter.h"
#include "state.h"

#include "state-fixture.h"

#include <criterion/criterion.h>
#include <string.h>

CG_STATE_FIXTURE(admitnb);

static void pool(struct cg_pool_cfg *pc, struct cg_admission *ad, const char *name) {
  memset(pc, 0, sizeof(*pc));
  snprintf(pc->name, sizeof(pc->name), "%s", name);
  memset(ad, 0, sizeof(*ad));
  ad->state = &st;
  ad->pool = pc;
  ad->pool_index = -1;
  ad->retry_slot = -1;
  ad->max_retry_after_ms = 60000;
  ad->deadline_ms = cg_mono_ms() + 30000;
}

/* One step, timed: it must never sleep. */
static enum cg_nb step(struct cg_admission *ad, struct cg_admit_nb *nb, int attempt,
                       int64_t *ms, int *slot) {
  enum cg_gate gate;
  int64_t t0 = cg_mono_ms();
  enum cg_nb r = cg_admission_step_nb(ad, nb, attempt, 0, ad->deadline_ms, ms, &gate, slot);
  cr_assert_lt(cg_mono_ms() - t0, 50, "a non-blocking step took %lld ms",
               (long long) (cg_mono_ms() - t0));
  return r;
}

Test(admitnb, rpm_wait_is_a_due_time_and_one_reservation) {
  struct cg_pool_cfg pc;
  struct cg_admission ad;
  struct cg_admit_nb nb;
  int64_t ms;
  int slot;

  pool(&pc, &ad, "rpm");
  pc.lim.rpm = 60; /* one a second */
  pc.lim.burst_requests = 1;
  memset(&nb, 0, sizeof(nb));
  cr_assert_eq(step(&ad, &nb, 1, &ms, &slot), CG_NB_GO);
  cr_assert_eq(slot, -2);
  memset(&nb, 0, sizeof(nb));
  cr_assert_eq(step(&ad, &nb, 1, &ms, &slot), CG_NB_WAIT);
  cr_assert(ms >= 900 && ms <= 1100, "waits %lld ms", (long long) ms);
  /* Asked again early: still waiting for the same turn, no second reservation. */
  cr_assert_eq(step(&ad, &nb, 1, &ms, &slot), CG_NB_WAIT);
  cr_assert(ms >= 800 && ms <= 1100, "then %lld ms", (long long) ms);
  {
    /* Another call: its own admission (this one's reservation is pending, and a call
     * that reserves again gives its unspent one back first). */
    struct cg_admit_nb other;
    struct cg_admission ad2 = ad;
    ad2.resv_pending = 0;
    memset(&other, 0, sizeof(other));
    cr_assert_eq(step(&ad2, &other, 1, &ms, &slot), CG_NB_WAIT);
    cr_assert(ms >= 1800 && ms <= 2100, "a third call's turn: %lld ms", (long long) ms);
  }
}

Test(admitnb, inflight_slot_is_polled_not_waited_for) {
  struct cg_pool_cfg pc;
  struct cg_admission ad;
  struct cg_admit_nb nb;
  int64_t ms;
  int s1, s2;

  pool(&pc, &ad, "slots");
  pc.lim.max_inflight = 1;
  memset(&nb, 0, sizeof(nb));
  cr_assert_eq(step(&ad, &nb, 1, &ms, &s1), CG_NB_GO);
  cr_assert_geq(s1, 0);
  memset(&nb, 0, sizeof(nb));
  cr_assert_eq(step(&ad, &nb, 1, &ms, &s2), CG_NB_WAIT);
  cr_assert_eq(ms, CG_NB_SLOT_POLL_MS);
  cg_admission_leave(&ad, s1);
  cr_assert_eq(step(&ad, &nb, 1, &ms, &s2), CG_NB_GO);
  cr_assert_geq(s2, 0);
  cg_admission_leave(&ad, s2);
}

static void open_breaker(struct cg_pool_cfg *pc, struct cg_admission *ad) {
  int i, p;
  int64_t ms;
  struct cg_admit_nb nb;
  int slot;
  pc->breaker = (struct cg_breaker_cfg){1, 0.5, 4, 60, 30, 7, 1, 0, 30, 0, 0};
  memset(&nb, 0, sizeof(nb));
  cr_assert_eq(step(ad, &nb, 1, &ms, &slot), CG_NB_GO); /* claims the pool */
  p = ad->pool_index;
  for (i = 0; i < 4; i++)
    cg_breaker_report(&st, p, &pc->breaker, 1, 0, cg_state_now());
  cr_assert_eq(cg_breaker_state(&st, p), CG_BREAKER_OPEN);
}

Test(admitnb, open_breaker_wait_is_a_due_time) {
  struct cg_pool_cfg pc;
  struct cg_admission ad;
  struct cg_admit_nb nb;
  int64_t ms;
  int slot;

  pool(&pc, &ad, "brk-wait");
  ad.deadline_ms = cg_mono_ms() + 120000; /* sees the next probe, 30 s away */
  open_breaker(&pc, &ad);
  memset(&nb, 0, sizeof(nb));
  cr_assert_eq(step(&ad, &nb, 1, &ms, &slot), CG_NB_WAIT);
  cr_assert(ms >= 1 && ms <= CG_NB_PARK_MAX_MS, "asks again in %lld ms", (long long) ms);
  cr_assert_eq(step(&ad, &nb, 1, &ms, &slot), CG_NB_WAIT);
}

Test(admitnb, open_breaker_fail_refuses_at_once) {
  struct cg_pool_cfg pc;
  struct cg_admission ad;
  struct cg_admit_nb nb;
  enum cg_gate gate;
  int64_t ms;
  int slot;

  pool(&pc, &ad, "brk-fail");
  open_breaker(&pc, &ad);
  pc.breaker.open_wait = 0;
  memset(&nb, 0, sizeof(nb));
  cr_assert_eq(cg_admission_step_nb(&ad, &nb, 1, 0, ad.deadline_ms, &ms, &gate, &slot),
               CG_NB_GATE);
  cr_assert_eq(gate, CG_GATE_CIRCUIT_OPEN);
  cr_assert_gt(ms, 20000, "the next probe is about 30 s away: %lld ms", (long long) ms);
}

Test(admitnb, retry_budget_wait_or_refusal) {
  struct cg_pool_cfg pc;
  struct cg_admission ad;
  struct cg_admit_nb nb;
  int64_t ms, w;
  int slot;
  const char *r;

  pool(&pc, &ad, "budget");
  pc.budget = (struct cg_budget_cfg){1, 0, 0.1, 10, 16}; /* one retry per 10 s window */
  memset(&nb, 0, sizeof(nb));
  cr_assert_eq(step(&ad, &nb, 1, &ms, &slot), CG_NB_GO);
  cr_assert_null(cg_admission_retry_nb(&ad, 100, 0, 0, &w));
  cr_assert_eq(w, 0, "the first retry is granted");
  /* The second must wait for the window: 10 s, within a 30 s deadline; it is asked
   * again every 250 ms (the breaker may open meanwhile: admit.c CG_BUDGET_RECHECK_MS). */
  r = cg_admission_retry_nb(&ad, 100, 0, 0, &w);
  cr_assert_null(r, "%s", r ? r : "");
  cr_assert_eq(w, 250, "waits %lld ms", (long long) w);
  /* A breaker that opened meanwhile (open = fail) ends the wait: circuit_open. */
  open_breaker(&pc, &ad);
  pc.breaker.open_wait = 0;
  r = cg_admission_retry_nb(&ad, 100, 0, 250, &w);
  cr_assert_str_eq(r ? r : "", "circuit_open");
  /* Closed again (another pool config, the same budget): still waiting. */
  pc.breaker.enabled = 0;
  r = cg_admission_retry_nb(&ad, 100, 0, 250, &w);
  cr_assert_null(r, "%s", r ? r : "");
  cr_assert_eq(w, 250, "waits %lld ms", (long long) w);
  /* With 2 s left it cannot fit: refused, not waited for. */
  ad.deadline_ms = cg_mono_ms() + 2000;
  r = cg_admission_retry_nb(&ad, 100, 0, 0, &w);
  cr_assert_str_eq(r ? r : "", "retry_budget_exhausted");
  cg_admission_finish(&ad);
}
