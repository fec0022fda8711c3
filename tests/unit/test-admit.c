/* test-admit.c - what one answer may write into the shared state (admit.h): hostile
 * server hints (issue 11 items 3 and 4, CASES.md "Turn 2": "nothing longer than the cap
 * is ever stored in shared state").  Each case is one answer learnt by a fresh pool; the
 * pool's hold, pacing interval and pacing window must all stay within max_retry_after. */
#include "admit.h"
#include "budget.h"
#include "clock.h"
#include "limiter.h"
#include "state.h"

#include "state-fixture.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

CG_STATE_FIXTURE(admit);

#define CAP_MS 2000

/* curl_getdate() for the forms used here: IMF-fixdate, and year 817853964 as the real one
 * returns it for ",2Oct817853964" (curl's parsedate reads years up to 2^31). */
static time_t fake_getdate(const char *s, const time_t *unused) {
  struct tm tm;
  const char *end;
  (void) unused;
  if (strcmp(s, ",2Oct817853964") == 0)
    return (time_t) INT64_C(25808878396166400);
  memset(&tm, 0, sizeof(tm));
  end = strptime(s, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return end && !*end ? timegm(&tm) : (time_t) -1;
}

/* The IMF-fixdate of now + `secs` (wall clock). */
static void imf(char *buf, size_t len, int64_t secs) {
  time_t t = time(NULL) + (time_t) secs;
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, len, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

struct hostile {
  const char *name;
  long status;
  const char *ra, *ram;           /* Retry-After, retry-after-ms */
  int64_t ra_date_s, date_s;      /* != 0: Retry-After / Date as an HTTP-date, now + s */
  const char *rem, *reset, *limit; /* OpenAI x-ratelimit-*-requests */
  const char *a_rem, *a_reset;    /* Anthropic */
  const char *ietf;               /* RateLimit */
  const char *tok_rem, *tok_reset, *tok_limit;
};

static const struct hostile cases[] = {
    {"openai 200 remaining 0 reset 999999h", 200, .rem = "0", .reset = "999999h", .limit = "1"},
    {"openai 200 remaining 1 reset 999999h", 200, .rem = "1", .reset = "999999h", .limit = "100"},
    {"openai 200 reset 1e309s", 200, .rem = "0", .reset = "1e309s", .limit = "1"},
    {"ietf remaining=0 reset=31536000", 200, .ietf = "remaining=0, reset=31536000"},
    {"ietf remaining=1 reset=31536000", 200, .ietf = "remaining=1, reset=31536000"},
    {"ietf reset=10^30", 200, .ietf = "remaining=5, reset=1000000000000000000000000000000"},
    {"anthropic reset in 2099", 200, .a_rem = "0", .a_reset = "2099-01-01T00:00:00Z",
     .limit = "50"},
    {"anthropic remaining 3 reset in 2099", 200, .a_rem = "3", .a_reset = "2099-01-01T00:00:00Z"},
    {"429 Retry-After 31536000", 429, .ra = "31536000"},
    {"429 Retry-After 10^30", 429, .ra = "1000000000000000000000000000000"},
    {"429 retry-after-ms 1e309", 429, .ram = "1e309"},
    {"429 Retry-After inf", 429, .ra = "inf"},
    {"429 Retry-After ,2Oct817853964", 429, .ra = ",2Oct817853964"},
    {"429 HTTP-date 5 years after Date", 429, .ra_date_s = 5 * 31536000 + 86400, .date_s = 1},
    {"429 tokens 0 reset 999999h", 429, .ra = "1", .tok_rem = "0", .tok_reset = "999999h",
     .tok_limit = "1"},
    {"200 tokens 0 reset 1e309s", 200, .tok_rem = "0", .tok_reset = "1e309s", .tok_limit = "1"},
};

static void fill(struct cg_hints *h, const struct hostile *c) {
  memset(h, 0, sizeof(*h));
#define CG_SET(dst, src) snprintf(h->dst, sizeof(h->dst), "%s", (src) ? (src) : "")
  CG_SET(retry_after, c->ra);
  CG_SET(retry_after_ms, c->ram);
  CG_SET(rl_remaining_req, c->rem);
  CG_SET(rl_reset_req, c->reset);
  CG_SET(rl_limit_req, c->limit);
  CG_SET(a_remaining_req, c->a_rem);
  CG_SET(a_reset_req, c->a_reset);
  CG_SET(ietf, c->ietf);
  CG_SET(rl_remaining_tok, c->tok_rem);
  CG_SET(rl_reset_tok, c->tok_reset);
  CG_SET(rl_limit_tok, c->tok_limit);
#undef CG_SET
  if (c->ra_date_s)
    imf(h->retry_after, sizeof(h->retry_after), c->ra_date_s);
  if (c->date_s)
    imf(h->date, sizeof(h->date), 0);
}

Test(admit, hostile_hints_never_hold_or_pace_beyond_the_cap) {
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const struct hostile *c = &cases[i];
    struct cg_pool_cfg pc;
    struct cg_admission ad;
    struct cg_hints h;
    int64_t before, after, hold, pace_until, interval, w = -1;
    char name[32];

    memset(&pc, 0, sizeof(pc));
    snprintf(name, sizeof(name), "p%zu", i);
    snprintf(pc.name, sizeof(pc.name), "%s", name);
    memset(&ad, 0, sizeof(ad));
    ad.state = &st;
    ad.pool = &pc;
    ad.pool_index = cg_limiter_pool(&st, name, &pc.lim);
    cr_assert_geq(ad.pool_index, 0);
    ad.tokens = 100;
    ad.max_retry_after_ms = CAP_MS;
    ad.retry_slot = -1;
    fill(&h, c);

    before = cg_state_now();
    cg_admission_learn(&ad, &h, c->status, 0, fake_getdate);
    after = cg_state_now();
    hold = st.pools[ad.pool_index].hold_until;
    pace_until = st.pools[ad.pool_index].pace_until;
    interval = st.pools[ad.pool_index].pace_interval;
    cr_expect_leq(hold, after + CAP_MS * MS, "%s: held %lld ms beyond now", c->name,
                  (long long) ((hold - before) / MS));
    cr_expect_leq(pace_until, after + CAP_MS * MS, "%s: paced for %lld ms", c->name,
                  (long long) ((pace_until - before) / MS));
    cr_expect_leq(interval, CAP_MS * MS, "%s: pacing interval %lld ms", c->name,
                  (long long) (interval / MS));
    cr_expect_geq(hold, 0, "%s: negative hold (wrapped)", c->name);
    /* The next call of the pool goes within the cap. */
    cr_expect_eq(cg_limiter_reserve(&st, ad.pool_index, &pc.lim, 0, after, CAP_MS * MS, &w), 0,
                 "%s: the next call would wait %lld ms", c->name, (long long) (w / MS));
  }
}

/* An ordinary hint below the cap is still honoured whole. */
Test(admit, hint_below_the_cap_holds_the_pool) {
  struct cg_pool_cfg pc;
  struct cg_admission ad;
  struct cg_hints h;
  int64_t before;
  memset(&pc, 0, sizeof(pc));
  snprintf(pc.name, sizeof(pc.name), "ok");
  memset(&ad, 0, sizeof(ad));
  ad.state = &st;
  ad.pool = &pc;
  ad.pool_index = cg_limiter_pool(&st, "ok", &pc.lim);
  ad.max_retry_after_ms = CAP_MS;
  memset(&h, 0, sizeof(h));
  snprintf(h.retry_after, sizeof(h.retry_after), "1.5");
  before = cg_state_now();
  cg_admission_learn(&ad, &h, 429, 0, fake_getdate);
  cr_assert_geq(st.pools[ad.pool_index].hold_until, before + 1500 * MS);
  cr_assert_leq(st.pools[ad.pool_index].hold_until, cg_state_now() + 1500 * MS);
}

/* A pool's admission for the issue 12 cases below: learned rate on, budget on. */
static void learned_pool(struct cg_pool_cfg *pc, struct cg_admission *ad, const char *name) {
  memset(pc, 0, sizeof(*pc));
  snprintf(pc->name, sizeof(pc->name), "%s", name);
  pc->lim.adaptive = 1;
  pc->budget.enabled = 1;
  pc->budget.ratio = 0;
  pc->budget.min_per_s = 0.1; /* one retry per 10 s window */
  pc->budget.window_s = 10;
  memset(ad, 0, sizeof(*ad));
  ad->state = &st;
  ad->pool = pc;
  ad->pool_index = -1;
  ad->retry_slot = -1;
  ad->max_retry_after_ms = 60000;
  ad->deadline_ms = cg_mono_ms() + 30000;
}

static int no_sleep_count;
static int no_sleep(void *arg, int64_t ms) {
  (void) arg;
  (void) ms;
  no_sleep_count++;
  return 0;
}

/* The learned rate is the guard's guess: a wait for it that would pass the deadline ends
 * and the call goes (issue 12; before, such calls failed as local_rate_limited without a
 * word from the provider).  A 429 hold is still fail fast past the deadline. */
Test(admit, learned_rate_wait_never_fails_a_call) {
  struct cg_pool_cfg pc;
  struct cg_admission ad;
  int64_t wait_ms, t0;
  int s, p;

  learned_pool(&pc, &ad, "learned");
  cr_assert_eq(cg_admission_gate(&ad, 1, 0, ad.deadline_ms, &wait_ms), CG_GATE_GO);
  p = ad.pool_index;
  cr_assert_geq(p, 0);
  /* A cut rate of one request per 4 s, the next place 10 s away. */
  st.pools[p].learn_rate = CG_LEARN_FLOOR_RPS;
  st.pools[p].learn_wmax = 1;
  st.pools[p].learn_tat = cg_state_now() + 10 * SEC;
  t0 = cg_mono_ms();
  no_sleep_count = 0;
  s = cg_admission_enter(&ad, cg_mono_ms() + 1000, no_sleep, NULL, &wait_ms);
  cr_assert_neq(s, -1, "the call failed on the learned rate's wait");
  cr_assert_lt(cg_mono_ms() - t0, 1000);
  cr_assert_eq(no_sleep_count, 0, "a wait that cannot fit is not begun");
  cg_admission_leave(&ad, s);
  /* A 429 hold of 10 s against a 1 s deadline: fail fast, as before. */
  st.pools[p].hold_until = cg_state_now() + 10 * SEC;
  s = cg_admission_enter(&ad, cg_mono_ms() + 1000, no_sleep, NULL, &wait_ms);
  cr_assert_eq(s, -1);
}

/* A wait that sleeps for real; the first one can stand for a throttle that another
 * process saw meanwhile (it cuts the pool's rate: W_max set, the next place 1 s away). */
static int real_sleeps;
static int cut_on_first_sleep;
static int real_sleep(void *arg, int64_t ms) {
  struct timespec ts = {(time_t) (ms / 1000), (long) (ms % 1000) * 1000000L};
  int p = *(int *) arg;
  if (real_sleeps++ == 0 && cut_on_first_sleep) {
    st.pools[p].learn_wmax = 1;
    st.pools[p].learn_tat = cg_state_now() + SEC;
  }
  nanosleep(&ts, NULL);
  return 0;
}

/* The slow start (never cut: W_max 0) is a guess from nothing: a call waits for it at
 * most 1/CG_GUESS_SHARE of its time, then goes (8 calls of 3 s with curl -m 4 and no
 * fault: 3 ran out of time).  A cut during the wait ends the guess: the call then waits
 * for the learned rate's place (a helper's find: with the share kept, every waiter went
 * at once at its end, into the limit just learned). */
Test(admit, slow_start_guess_waits_a_share_until_a_cut) {
  struct cg_pool_cfg pc;
  struct cg_admission ad;
  int64_t wait_ms, t0, took;
  int s, p, cut;

  for (cut = 0; cut <= 1; cut++) {
    learned_pool(&pc, &ad, cut ? "guess-cut" : "guess");
    cr_assert_eq(cg_admission_gate(&ad, 1, 0, ad.deadline_ms, &wait_ms), CG_GATE_GO);
    p = ad.pool_index;
    cr_assert_geq(p, 0);
    /* 2 requests/s, burst 4 (slow start): the next place 2 s away. */
    st.pools[p].learn_rate = 2;
    st.pools[p].learn_wmax = 0;
    st.pools[p].learn_tat = cg_state_now() + 3500 * (SEC / 1000);
    real_sleeps = 0;
    cut_on_first_sleep = cut;
    t0 = cg_mono_ms();
    s = cg_admission_enter(&ad, t0 + 4000, real_sleep, &p, &wait_ms);
    took = cg_mono_ms() - t0;
    cr_assert_neq(s, -1);
    cg_admission_leave(&ad, s);
    if (!cut) {
      /* The share of a 4 s deadline: 400 ms, not the 2 s to the place. */
      cr_assert_geq(took, 380, "went after %lld ms", (long long) took);
      cr_assert_lt(took, 1500, "waited %lld ms for a guess", (long long) took);
    } else {
      cr_assert_geq(took, 950, "went after %lld ms, before the cut rate's place",
                    (long long) took);
    }
  }
}

/* The admission hands the caller's clock reading on (issue 16: one reading from the
 * admission's start to the send) only while nothing took time: with no wait the gate and
 * the limiter keep it, and it is the admission's end (sent_ns); after the limiter's wait
 * the end is read anew, later by the wait. */
Test(admit, reading_handed_on_only_when_nothing_waited) {
  struct cg_pool_cfg pc;
  struct cg_admission ad;
  int64_t wait_ms, t0 = cg_state_now(), now = t0;
  int s, p;

  learned_pool(&pc, &ad, "reading");
  cr_assert_eq(cg_admission_gate_at(&ad, 1, 0, ad.deadline_ms, &wait_ms, &now), CG_GATE_GO);
  cr_assert_eq(now, t0, "the gate waited for nothing: the reading still holds");
  p = ad.pool_index;
  cr_assert_geq(p, 0);
  s = cg_admission_enter_at(&ad, ad.deadline_ms, no_sleep, NULL, &wait_ms, &now);
  cr_assert_neq(s, -1);
  cr_assert_eq(now, t0);
  cr_assert_eq(ad.sent_ns, t0);
  cg_admission_leave(&ad, s);
  /* The slow start's next place 200 ms away (2 requests/s, burst 4: 1.5 s of the 1.7 s
   * are the burst's): the limiter waits for it. */
  st.pools[p].learn_rate = 2;
  st.pools[p].learn_wmax = 0;
  st.pools[p].learn_tat = cg_state_now() + 1700 * (SEC / 1000);
  real_sleeps = 0;
  cut_on_first_sleep = 0;
  t0 = now = cg_state_now();
  s = cg_admission_enter_at(&ad, cg_mono_ms() + 4000, real_sleep, &p, &wait_ms, &now);
  cr_assert_neq(s, -1);
  cr_assert_gt(real_sleeps, 0);
  cr_assert_eq(now, ad.sent_ns);
  cr_assert_geq(now - t0, 150 * (SEC / 1000), "sent %lld ns after the reading",
                (long long) (now - t0));
  cg_admission_leave(&ad, s);
  /* A reading of 0 (none): the gate reads the clock itself, and hands that on. */
  now = 0;
  t0 = cg_state_now();
  cr_assert_eq(cg_admission_gate_at(&ad, 2, 0, ad.deadline_ms, &wait_ms, &now), CG_GATE_GO);
  cr_assert_geq(now, t0);
}

/* A retry that succeeds is given back to the budget; one that fails stays counted. */
Test(admit, successful_retry_is_given_back_to_the_budget) {
  struct cg_pool_cfg pc;
  struct cg_admission ad;
  struct cg_budget_view v;
  int64_t wait_ms, waited;
  int p, i;

  learned_pool(&pc, &ad, "refund");
  cr_assert_eq(cg_admission_gate(&ad, 1, 0, ad.deadline_ms, &wait_ms), CG_GATE_GO);
  p = ad.pool_index;
  /* Three calls in a row whose one retry succeeds: the floor (1 per window) is enough. */
  for (i = 0; i < 3; i++) {
    cr_assert_null(cg_admission_retry(&ad, 100, 0, NULL, NULL, &waited), "retry %d", i);
    cg_admission_result(&ad, CG_OUT_OK, 200, 0);
  }
  cg_budget_view(&st, p, cg_state_now(), &v);
  cr_assert_eq(v.retries, 0);
  cr_assert_eq(v.rescued, 3);
  /* A retry that fails uses the floor up: the next is refused (no wait function). */
  cr_assert_null(cg_admission_retry(&ad, 100, 0, NULL, NULL, &waited));
  cg_admission_result(&ad, CG_OUT_HTTP, 503, 0);
  cg_budget_view(&st, p, cg_state_now(), &v);
  cr_assert_eq((int) v.retries, 1);
  cr_assert_str_eq(cg_admission_retry(&ad, 100, 0, NULL, NULL, &waited),
                   "retry_budget_exhausted");
}
