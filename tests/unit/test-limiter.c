/* test-limiter.c - GCRA pacing, provider pacing and in-flight slots over a real state
 * file (limiter.h, README "One limiter for every process on the machine").
 *
 * Every test maps a fresh state file in its own temporary directory.  Rate tests drive
 * time with explicit `now` values (far from 0, so nothing depends on the clock); the
 * in-flight tests use the real clock with short deadlines. */
#include "clock.h"
#include "limiter.h"
#include "state.h"

#include "state-fixture.h"

#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOW0 (1000 * SEC) /* an arbitrary monotonic instant, far from 0 */
#define NO_MAX INT64_MAX

CG_STATE_FIXTURE(limiter);

static struct cg_limits limits(double rpm, double burst, double tpm, double token_burst,
                               long max_inflight) {
  struct cg_limits l;
  memset(&l, 0, sizeof(l));
  l.rpm = rpm;
  l.burst_requests = burst;
  l.tpm = tpm;
  l.burst_tokens = token_burst;
  l.max_inflight = max_inflight;
  return l;
}

static int pool(const char *name, const struct cg_limits *l) {
  int p = cg_limiter_pool(&st, name, l);
  cr_assert_geq(p, 0, "no pool for %s", name);
  return p;
}

/* Reserve at `now` with no tokens and no ceiling; the wait. */
static int64_t reserve(int p, const struct cg_limits *l, int64_t tokens, int64_t now) {
  int64_t w = -12345;
  cr_assert_eq(cg_limiter_reserve(&st, p, l, tokens, now, NO_MAX, &w), 0);
  return w;
}

/* ---- GCRA exactness ---- */

Test(limiter, rpm60_burst1_spaces_one_second) {
  struct cg_limits l = limits(60, 1, 0, 0, 0);
  int p = pool("a", &l), i;
  for (i = 0; i < 5; i++)
    cr_assert_eq(reserve(p, &l, 0, NOW0), i * SEC, "reserve %d", i);
  /* TAT moved by exactly one interval per request. */
  cr_assert_eq(st.pools[p].tat_requests, NOW0 + 5 * SEC);
}

Test(limiter, burst3_three_at_once_then_one_per_second) {
  struct cg_limits l = limits(60, 3, 0, 0, 0);
  int p = pool("a", &l), i;
  const int64_t want[] = {0, 0, 0, 1 * SEC, 2 * SEC, 3 * SEC};
  for (i = 0; i < 6; i++)
    cr_assert_eq(reserve(p, &l, 0, NOW0), want[i], "reserve %d", i);
}

Test(limiter, burst_refills_with_time) {
  struct cg_limits l = limits(60, 3, 0, 0, 0);
  int p = pool("a", &l), i;
  for (i = 0; i < 3; i++)
    cr_assert_eq(reserve(p, &l, 0, NOW0), 0);
  /* 2 s later two requests' worth came back: two go at once, the third waits 1 s. */
  cr_assert_eq(reserve(p, &l, 0, NOW0 + 2 * SEC), 0);
  cr_assert_eq(reserve(p, &l, 0, NOW0 + 2 * SEC), 0);
  cr_assert_eq(reserve(p, &l, 0, NOW0 + 2 * SEC), 1 * SEC);
  /* Long idle: never more than the burst. */
  cr_assert_eq(reserve(p, &l, 0, NOW0 + 100 * SEC), 0);
  cr_assert_eq(reserve(p, &l, 0, NOW0 + 100 * SEC), 0);
  cr_assert_eq(reserve(p, &l, 0, NOW0 + 100 * SEC), 0);
  cr_assert_eq(reserve(p, &l, 0, NOW0 + 100 * SEC), 1 * SEC);
}

Test(limiter, default_burst_is_one_seconds_worth) {
  struct cg_limits l = limits(120, 0, 0, 0, 0); /* 2 per second */
  int p = pool("a", &l);
  cr_assert_eq(reserve(p, &l, 0, NOW0), 0);
  cr_assert_eq(reserve(p, &l, 0, NOW0), 0);
  cr_assert_eq(reserve(p, &l, 0, NOW0), SEC / 2);
  cr_assert_eq(reserve(p, &l, 0, NOW0), SEC);
}

Test(limiter, default_burst_is_at_least_one) {
  struct cg_limits l = limits(6, 0, 0, 0, 0); /* one per 10 s */
  int p = pool("a", &l);
  cr_assert_eq(reserve(p, &l, 0, NOW0), 0);
  cr_assert_eq(reserve(p, &l, 0, NOW0), 10 * SEC);
}

Test(limiter, no_limits_never_wait) {
  struct cg_limits l = limits(0, 0, 0, 0, 0);
  int p = pool("a", &l), i;
  for (i = 0; i < 100; i++)
    cr_assert_eq(reserve(p, &l, 500, NOW0), 0);
  cr_assert_eq(st.pools[p].tat_requests, 0);
  cr_assert_eq(st.pools[p].tat_tokens, 0);
}

Test(limiter, tokens_wait_grows_by_cost) {
  /* 6000 tpm = 100 tokens/s, default token burst 100: a 250-token request costs 2.5 s. */
  struct cg_limits l = limits(0, 0, 6000, 0, 0);
  int p = pool("a", &l);
  int64_t w0 = reserve(p, &l, 250, NOW0);
  int64_t w1 = reserve(p, &l, 250, NOW0);
  int64_t w2 = reserve(p, &l, 250, NOW0);
  cr_assert_eq(w0, 0);
  /* A request goes when its whole cost fits the burst; a cost above the burst (250 >
   * 100) when the bucket is full again, i.e. when the previous request's cost is paid. */
  cr_assert_eq(w1, 2500 * MS, "waits until the bucket is full again");
  cr_assert_eq(w2 - w1, 2500 * MS);
  cr_assert_eq(st.pools[p].tat_tokens, NOW0 + 7500 * MS);
  /* No tokens: the token account is not touched. */
  cr_assert_eq(reserve(p, &l, 0, NOW0), 0);
  cr_assert_eq(st.pools[p].tat_tokens, NOW0 + 7500 * MS);
}

Test(limiter, tokens_wait_for_the_whole_cost) {
  /* 6000 tpm = 100 tokens/s, burst 100: a 40-token request after a full bucket was used
   * by 100 tokens waits until 40 tokens are back (0.4 s), not until 1 token is. */
  struct cg_limits l = limits(0, 0, 6000, 0, 0);
  int p = pool("a", &l);
  cr_assert_eq(reserve(p, &l, 100, NOW0), 0);
  cr_assert_eq(reserve(p, &l, 40, NOW0), 400 * MS);
  cr_assert_eq(reserve(p, &l, 40, NOW0), 800 * MS);
}

Test(limiter, tokens_burst1_exact) {
  struct cg_limits l = limits(0, 0, 6000, 1, 0);
  int p = pool("a", &l);
  cr_assert_eq(reserve(p, &l, 250, NOW0), 0);
  cr_assert_eq(reserve(p, &l, 250, NOW0), 2500 * MS);
  cr_assert_eq(reserve(p, &l, 250, NOW0), 5000 * MS);
}

Test(limiter, max_wait_exceeded_reserves_nothing) {
  struct cg_limits l = limits(60, 1, 0, 0, 0);
  int p = pool("a", &l);
  int64_t w = -1, tat;
  cr_assert_eq(reserve(p, &l, 0, NOW0), 0);
  tat = st.pools[p].tat_requests;
  cr_assert_eq(cg_limiter_reserve(&st, p, &l, 0, NOW0, 500 * MS, &w), 1);
  cr_assert_eq(w, SEC, "the wait it would have been");
  cr_assert_eq(st.pools[p].tat_requests, tat, "nothing reserved");
  w = -1;
  cr_assert_eq(cg_limiter_reserve(&st, p, &l, 0, NOW0, 500 * MS, &w), 1);
  cr_assert_eq(w, SEC, "a second try sees the same wait");
  /* Exactly the ceiling is allowed. */
  cr_assert_eq(cg_limiter_reserve(&st, p, &l, 0, NOW0, SEC, &w), 0);
  cr_assert_eq(w, SEC);
}

Test(limiter, request_reservation_given_back_when_tokens_fail) {
  struct cg_limits l = limits(60, 1, 6000, 1, 0);
  int p = pool("a", &l);
  int64_t w = -1, tat_req, tat_tok;
  cr_assert_eq(reserve(p, &l, 250, NOW0), 0); /* req TAT +1 s, tokens TAT +2.5 s */
  tat_req = st.pools[p].tat_requests;
  tat_tok = st.pools[p].tat_tokens;
  cr_assert_eq(tat_req, NOW0 + SEC);
  cr_assert_eq(tat_tok, NOW0 + 2500 * MS);
  /* The request slot (1 s) would fit 2 s, the tokens (2.5 s) would not. */
  cr_assert_eq(cg_limiter_reserve(&st, p, &l, 250, NOW0, 2 * SEC, &w), 1);
  cr_assert_eq(w, 2500 * MS);
  cr_assert_eq(st.pools[p].tat_requests, tat_req, "request reservation not given back");
  cr_assert_eq(st.pools[p].tat_tokens, tat_tok);
  /* And the next caller sees the same waits as before the failed attempt. */
  cr_assert_eq(reserve(p, &l, 0, NOW0), SEC);
}

Test(limiter, paced_request_reservation_given_back_when_tokens_fail) {
  /* Provider pacing (1 s spacing) and a token limit, no rpm of our own: a call whose token
   * wait does not fit must not leave its paced request slot behind for everybody else. */
  struct cg_limits l = limits(0, 0, 6000, 1, 0);
  int p = pool("a", &l);
  int64_t w = -1, tat_req;
  cg_limiter_pace(&st, p, 60, 9, 10 * SEC, NOW0, 3600 * SEC); /* 10 s / 10 = 1 s apart */
  cr_assert_eq(reserve(p, &l, 250, NOW0), 0);
  tat_req = st.pools[p].tat_requests;
  cr_assert_eq(tat_req, NOW0 + SEC);
  cr_assert_eq(cg_limiter_reserve(&st, p, &l, 250, NOW0, 2 * SEC, &w), 1);
  cr_assert_eq(w, 2500 * MS);
  cr_assert_eq(st.pools[p].tat_requests, tat_req,
               "paced request reservation not given back: TAT +%lld ms",
               (long long) ((st.pools[p].tat_requests - tat_req) / MS));
  cr_assert_eq(reserve(p, &l, 0, NOW0), SEC);
}

Test(limiter, paced_with_rpm_reservation_given_back_when_tokens_fail) {
  /* The same with an rpm of our own (100 ms) narrower than the provider's pacing (1 s):
   * what is given back is what was taken (1 s), not the rpm interval. */
  struct cg_limits l = limits(600, 1, 6000, 1, 0);
  int p = pool("a", &l);
  int64_t w = -1, tat_req;
  cg_limiter_pace(&st, p, 60, 9, 10 * SEC, NOW0, 3600 * SEC);
  cr_assert_eq(reserve(p, &l, 250, NOW0), 0);
  tat_req = st.pools[p].tat_requests;
  cr_assert_eq(tat_req, NOW0 + SEC);
  cr_assert_eq(cg_limiter_reserve(&st, p, &l, 250, NOW0, 2 * SEC, &w), 1);
  cr_assert_eq(st.pools[p].tat_requests, tat_req,
               "paced request reservation given back only in part: TAT +%lld ms",
               (long long) ((st.pools[p].tat_requests - tat_req) / MS));
}

Test(limiter, hold_until_floors_the_wait) {
  struct cg_limits none = limits(0, 0, 0, 0, 0), l = limits(60, 1, 0, 0, 0);
  int p = pool("a", &none), q = pool("b", &l);
  int64_t w = -1;
  cg_limiter_hold(&st, p, NOW0 + 3 * SEC);
  cr_assert_eq(reserve(p, &none, 0, NOW0), 3 * SEC);
  cr_assert_eq(reserve(p, &none, 0, NOW0 + SEC), 2 * SEC);
  cr_assert_eq(reserve(p, &none, 0, NOW0 + 4 * SEC), 0);
  /* A shorter hold never shortens a longer one. */
  cg_limiter_hold(&st, p, NOW0 + 10 * SEC);
  cg_limiter_hold(&st, p, NOW0 + 5 * SEC);
  cr_assert_eq(st.pools[p].hold_until, NOW0 + 10 * SEC);
  /* A hold past the ceiling fails fast. */
  cr_assert_eq(cg_limiter_reserve(&st, p, &none, 0, NOW0, 2 * SEC, &w), 1);
  cr_assert_eq(w, 10 * SEC);
  /* With a rate: the first request goes at the hold, the next one interval later. */
  cg_limiter_hold(&st, q, NOW0 + 3 * SEC);
  cr_assert_eq(reserve(q, &l, 0, NOW0), 3 * SEC);
  cr_assert_eq(reserve(q, &l, 0, NOW0), 4 * SEC);
  /* Holds are per pool. */
  cr_assert_eq(st.pools[pool("c", &l)].hold_until, 0);
}

/* Keyed holds (limiter.h): a 429 of one limit key holds that key's calls only; the pool's
 * own hold still holds every key; key 0 holds the pool. */
Test(limiter, keyed_hold_holds_its_key_only) {
  struct cg_limits none = limits(0, 0, 0, 0, 0);
  int p = pool("a", &none), i;
  cg_limiter_hold_key(&st, p, 0x111111, NOW0 + 2 * SEC, NOW0);
  cr_assert_eq(cg_limiter_held_until(&st, p, 0x111111, NOW0) / MS, (NOW0 + 2 * SEC) / MS + 1);
  cr_assert_leq(cg_limiter_held_until(&st, p, 0x222222, NOW0), NOW0, "another key is held");
  cr_assert_leq(cg_limiter_held_until(&st, p, 0, NOW0), NOW0, "a call without a key is held");
  cr_assert_eq(st.pools[p].hold_until, 0, "the pool is held");
  cr_assert_eq(reserve(p, &none, 0, NOW0), 0, "the pool's reservations wait");
  /* Only forward; the key's 24 bits decide (0x1111111 is 0x111111's). */
  cg_limiter_hold_key(&st, p, 0x1111111, NOW0 + 5 * SEC, NOW0);
  cg_limiter_hold_key(&st, p, 0x111111, NOW0 + 3 * SEC, NOW0);
  cr_assert_eq(cg_limiter_held_until(&st, p, 0x111111, NOW0) / MS, (NOW0 + 5 * SEC) / MS + 1);
  /* The pool's hold holds every key, a held key the later of the two. */
  cg_limiter_hold(&st, p, NOW0 + 4 * SEC);
  cr_assert_eq(cg_limiter_held_until(&st, p, 0x222222, NOW0), NOW0 + 4 * SEC);
  cr_assert_eq(cg_limiter_held_until(&st, p, 0x111111, NOW0) / MS, (NOW0 + 5 * SEC) / MS + 1);
  /* Key 0: the pool's hold. */
  cg_limiter_hold_key(&st, p, 0, NOW0 + 6 * SEC, NOW0);
  cr_assert_eq(st.pools[p].hold_until, NOW0 + 6 * SEC);
  /* A passed hold holds nobody, and its word is taken again. */
  cr_assert_leq(cg_limiter_held_until(&st, p, 0x111111, NOW0 + 7 * SEC), NOW0 + 7 * SEC);
  /* Keys 0 .. 15 held until 9 s, 10 s, ... (a full table). */
  for (i = 0; i < CG_STATE_KEYED_HOLDS; i++)
    cg_limiter_hold_key(&st, p, 0x300000 + (uint32_t) i, NOW0 + (9 + i) * SEC, NOW0 + 7 * SEC);
  for (i = 0; i < CG_STATE_KEYED_HOLDS; i++)
    cr_assert_gt(cg_limiter_held_until(&st, p, 0x300000 + (uint32_t) i, NOW0 + 7 * SEC),
                 NOW0 + (9 + i) * SEC, "key %d not held", i);
  cr_assert_eq(st.pools[p].hold_until, NOW0 + 6 * SEC, "the pool held for a table not full");
  /* A full table: the next key takes the word of the hold that ends first (key 0's), never
   * the whole pool. */
  cg_limiter_hold_key(&st, p, 0x400000, NOW0 + 20 * SEC, NOW0 + 7 * SEC);
  cr_assert_gt(cg_limiter_held_until(&st, p, 0x400000, NOW0 + 7 * SEC), NOW0 + 20 * SEC);
  cr_assert_eq(cg_limiter_held_until(&st, p, 0x300000, NOW0 + 7 * SEC), NOW0 + 6 * SEC,
               "the soonest hold kept its word");
  cr_assert_gt(cg_limiter_held_until(&st, p, 0x300001, NOW0 + 7 * SEC), NOW0 + 10 * SEC);
  cr_assert_eq(st.pools[p].hold_until, NOW0 + 6 * SEC, "a full table held the whole pool");
  cr_assert_eq(cg_limiter_held_until(&st, p, 0x222222, NOW0 + 7 * SEC), NOW0 + 6 * SEC);
  /* A hold shorter than every word's: not taken (its own call still waits its hint). */
  cg_limiter_hold_key(&st, p, 0x500000, NOW0 + 8 * SEC, NOW0 + 7 * SEC);
  cr_assert_eq(cg_limiter_held_until(&st, p, 0x500000, NOW0 + 7 * SEC), NOW0 + 6 * SEC);
  cr_assert_gt(cg_limiter_held_until(&st, p, 0x300001, NOW0 + 7 * SEC), NOW0 + 10 * SEC);
}

/* A 429 cuts the learned rate only when the pool's 429s come from one limit key
 * (limiter.h cg_limiter_learn_key). */
Test(limiter, learn_key_cuts_for_one_key_not_several) {
  struct cg_limits none = limits(0, 0, 0, 0, 0);
  int p = pool("a", &none);
  cr_assert_eq(cg_limiter_learn_key(&st, p, 0, NOW0), 1, "no key: the pool's 429");
  cr_assert_eq(cg_limiter_learn_key(&st, p, 7, NOW0), 0, "a key's first 429 cut");
  cr_assert_eq(cg_limiter_learn_key(&st, p, 7, NOW0 + SEC), 1, "the key's second 429 did not");
  cr_assert_eq(cg_limiter_learn_key(&st, p, 9, NOW0 + 2 * SEC), 0, "another key's cut");
  cr_assert_eq(cg_limiter_learn_key(&st, p, 7, NOW0 + 3 * SEC), 0, "several keys: cut");
  cr_assert_eq(cg_limiter_learn_key(&st, p, 7, NOW0 + 4 * SEC), 0, "several keys: cut");
  /* CG_LEARN_KEYS_MS with no 429: one key again. */
  cr_assert_eq(cg_limiter_learn_key(&st, p, 7, NOW0 + 4 * SEC + CG_LEARN_KEYS_MS * MS), 0);
  cr_assert_eq(cg_limiter_learn_key(&st, p, 7, NOW0 + 5 * SEC + CG_LEARN_KEYS_MS * MS), 1);
}

Test(limiter, pace_interval_widens_spacing_until_pace_until) {
  struct cg_limits l = limits(600, 0, 0, 0, 0); /* 10/s, burst 10 */
  int p = pool("a", &l), i;
  /* 2 remaining over 3 s: one request every 1 s. */
  cg_limiter_pace(&st, p, 60, 2, 3 * SEC, NOW0, 3600 * SEC);
  cr_assert_eq(st.pools[p].pace_interval, SEC);
  cr_assert_eq(st.pools[p].pace_until, NOW0 + 3 * SEC);
  cr_assert_eq(reserve(p, &l, 0, NOW0), 0);
  cr_assert_eq(reserve(p, &l, 0, NOW0), SEC, "no burst while paced");
  cr_assert_eq(reserve(p, &l, 0, NOW0), 2 * SEC);
  /* After pace_until the pool's own rate and burst are back. */
  for (i = 0; i < 10; i++)
    cr_assert_eq(reserve(p, &l, 0, NOW0 + 60 * SEC), 0, "reserve %d", i);
  cr_assert_eq(reserve(p, &l, 0, NOW0 + 60 * SEC), 100 * MS);
}

Test(limiter, pace_without_a_rate_limit) {
  struct cg_limits l = limits(0, 0, 0, 0, 0);
  int p = pool("a", &l);
  cg_limiter_pace(&st, p, -1, 4, 10 * SEC, NOW0, 3600 * SEC); /* 10 s / 5 = 2 s */
  cr_assert_eq(reserve(p, &l, 0, NOW0), 0);
  cr_assert_eq(reserve(p, &l, 0, NOW0), 2 * SEC);
  cr_assert_eq(reserve(p, &l, 0, NOW0 + 11 * SEC), 0);
  cr_assert_eq(reserve(p, &l, 0, NOW0 + 11 * SEC), 0);
}

Test(limiter, pace_narrower_than_rate_keeps_the_rate) {
  struct cg_limits l = limits(60, 1, 0, 0, 0); /* 1 s */
  int p = pool("a", &l);
  cg_limiter_pace(&st, p, 1000, 999, 10 * SEC, NOW0, 3600 * SEC); /* 10 ms */
  cr_assert_eq(reserve(p, &l, 0, NOW0), 0);
  cr_assert_eq(reserve(p, &l, 0, NOW0), SEC);
}

Test(limiter, pace_nothing_remaining_known_limit_waits_one_refill) {
  struct cg_limits l = limits(0, 0, 0, 0, 0);
  int p = pool("a", &l);
  cg_limiter_pace(&st, p, 60, 0, 6 * SEC, NOW0, 3600 * SEC); /* 6 s / 60 = 100 ms */
  cr_assert_eq(st.pools[p].hold_until, NOW0 + 100 * MS);
  cr_assert_eq(reserve(p, &l, 0, NOW0), 100 * MS);
  /* 6m0s with 10000 requests: 36 ms, not 6 minutes. */
  cg_limiter_pace(&st, p, 10000, 0, 360 * SEC, NOW0 + SEC, 3600 * SEC);
  cr_assert_eq(st.pools[p].hold_until, NOW0 + SEC + 36 * MS);
}

Test(limiter, pace_nothing_remaining_unknown_limit_does_nothing) {
  struct cg_limits l = limits(0, 0, 0, 0, 0);
  int p = pool("a", &l);
  cg_limiter_pace(&st, p, -1, 0, 360 * SEC, NOW0, 3600 * SEC);
  cg_limiter_pace(&st, p, 0, 0, 360 * SEC, NOW0, 3600 * SEC);
  cr_assert_eq(st.pools[p].hold_until, 0);
  cr_assert_eq(st.pools[p].pace_until, 0);
  cr_assert_eq(reserve(p, &l, 0, NOW0), 0);
  cr_assert_eq(reserve(p, &l, 0, NOW0), 0);
}

Test(limiter, pace_ignores_unknown_values) {
  struct cg_limits l = limits(0, 0, 0, 0, 0);
  int p = pool("a", &l);
  cg_limiter_pace(&st, p, 60, -1, 3 * SEC, NOW0, 3600 * SEC);
  cg_limiter_pace(&st, p, 60, 2, 0, NOW0, 3600 * SEC);
  cg_limiter_pace(&st, p, 60, 2, -1, NOW0, 3600 * SEC);
  cr_assert_eq(st.pools[p].hold_until, 0);
  cr_assert_eq(st.pools[p].pace_until, 0);
  cr_assert_eq(st.pools[p].pace_interval, 0);
}

Test(limiter, tokens_correct_moves_the_token_account) {
  struct cg_limits l = limits(0, 0, 6000, 1, 0), none = limits(0, 0, 0, 0, 0);
  int p = pool("a", &l);
  cr_assert_eq(reserve(p, &l, 250, NOW0), 0);
  cr_assert_eq(st.pools[p].tat_tokens, NOW0 + 2500 * MS);
  cg_limiter_tokens_correct(&st, p, &l, -100, 3600 * SEC); /* used 100 fewer than estimated */
  cr_assert_eq(st.pools[p].tat_tokens, NOW0 + 1500 * MS);
  cg_limiter_tokens_correct(&st, p, &l, 50, 3600 * SEC);
  cr_assert_eq(st.pools[p].tat_tokens, NOW0 + 2000 * MS);
  cr_assert_eq(reserve(p, &l, 1, NOW0), 2 * SEC);
  /* No token limit: nothing to correct. */
  cg_limiter_tokens_correct(&st, p, &none, 1000, 3600 * SEC);
  cr_assert_eq(st.pools[p].tat_tokens, NOW0 + 2010 * MS);
}

/* ---- pools ---- */

/* The key a pool's config carries (config.h name_hash) finds the pool its name finds: the
 * same slot, claimed once, and a different key another slot. */
Test(limiter, pool_by_its_key_is_the_pool_by_its_name) {
  struct cg_limits l = limits(120, 4, 6000, 50, 3);
  uint64_t h = cg_limiter_name_hash("openai");
  int slow = 0;
  int a = cg_limiter_pool_hashed(&st, "openai", h, &l, &slow);
  cr_assert_geq(a, 0);
  cr_assert_eq(slow, 0, "a free pool claimed at once waits for nobody");
  cr_assert_eq(st.pools[a].name_hash, h);
  cr_assert_neq(h, 0);
  cr_assert_eq(cg_limiter_pool(&st, "openai", &l), a);
  cr_assert_eq(cg_limiter_pool_hashed(&st, "openai", h, &l, &slow), a);
  cr_assert_eq(slow, 0);
  cr_assert_neq(cg_limiter_pool_hashed(&st, "anthropic", cg_limiter_name_hash("anthropic"), &l,
                                       &slow),
                a);
  cr_assert_neq(cg_limiter_name_hash("openai"), cg_limiter_name_hash("openai2"));
}

Test(limiter, pool_claims_and_finds_again) {
  struct cg_limits l = limits(120, 4, 6000, 50, 3);
  int a = cg_limiter_pool(&st, "openai", &l);
  int b = cg_limiter_pool(&st, "anthropic", &l);
  cr_assert_geq(a, 0);
  cr_assert_geq(b, 0);
  cr_assert_neq(a, b);
  cr_assert_eq(cg_limiter_pool(&st, "openai", &l), a);
  cr_assert_eq(cg_limiter_pool(&st, "anthropic", &l), b);
  cr_assert_str_eq(st.pools[a].name, "openai");
  cr_assert_eq(st.pools[a].name_ready, 1);
  cr_assert_neq(st.pools[a].name_hash, 0);
  /* The limits are recorded for `stat`. */
  cr_assert_eq(st.pools[a].rpm, 120);
  cr_assert_eq(st.pools[a].tpm, 6000);
  cr_assert_eq(st.pools[a].burst_requests, 4);
  cr_assert_eq(st.pools[a].burst_tokens, 50);
  cr_assert_eq(st.pools[a].max_inflight, 3);
}

/* Another thread looks the pool up by its name. */
static void *find_alpha(void *arg) {
  struct cg_limits l = limits(60, 0, 0, 0, 0);
  *(int *) arg = cg_limiter_pool(&st, "alpha", &l);
  return NULL;
}

Test(limiter, pool_follows_the_name_not_its_buffer) {
  struct cg_limits l = limits(60, 0, 0, 0, 0);
  char name[16] = "alpha";
  int a = pool(name, &l), b, other = -7;
  pthread_t t;
  /* The same buffer, another name: another pool. */
  memcpy(name, "beta", 5);
  b = pool(name, &l);
  cr_assert_neq(a, b);
  cr_assert_str_eq(st.pools[b].name, "beta");
  memcpy(name, "alpha", 6);
  cr_assert_eq(cg_limiter_pool(&st, name, &l), a);
  /* Another thread finds the same pool for the name. */
  cr_assert_eq(pthread_create(&t, NULL, find_alpha, &other), 0);
  pthread_join(t, NULL);
  cr_assert_eq(other, a);
}

Test(limiter, pool_table_full_returns_minus_one) {
  struct cg_limits l = limits(60, 0, 0, 0, 0);
  int idx[CG_STATE_POOLS], i, j;
  char name[32];
  for (i = 0; i < CG_STATE_POOLS; i++) {
    snprintf(name, sizeof(name), "pool-%d", i);
    idx[i] = cg_limiter_pool(&st, name, &l);
    cr_assert_geq(idx[i], 0, "pool %d", i);
    for (j = 0; j < i; j++)
      cr_assert_neq(idx[i], idx[j], "pools %d and %d share index %d", i, j, idx[i]);
  }
  cr_assert_eq(cg_limiter_pool(&st, "one-too-many", &l), -1);
  /* Existing pools are still found. */
  cr_assert_eq(cg_limiter_pool(&st, "pool-0", &l), idx[0]);
  cr_assert_eq(cg_limiter_pool(&st, "pool-63", &l), idx[63]);
}

/* ---- a full table gives an idle pool to a new name (limiter.h CG_POOL_IDLE_MS) ---- */

/* Fill the table with pools "pool-0" .. "pool-255" (their indexes in `idx`). */
static void fill_table(int *idx) {
  struct cg_limits l = limits(60, 0, 0, 0, 0);
  char name[32];
  int i;
  for (i = 0; i < CG_STATE_POOLS; i++) {
    snprintf(name, sizeof(name), "pool-%d", i);
    idx[i] = pool(name, &l);
  }
}

/* Make pool `p` look unused for `idle_ms` more than CG_POOL_IDLE_MS. */
static void age(int p, int64_t idle_ms) {
  st.pools[p].used_ms = cg_coarse_ms() - CG_POOL_IDLE_MS - idle_ms;
}

Test(limiter, full_table_gives_the_least_recently_used_idle_pool_to_a_new_name) {
  struct cg_limits l = limits(120, 2, 0, 0, 0);
  int idx[CG_STATE_POOLS], p;
  fill_table(idx);
  cr_assert_eq(cg_limiter_pool(&st, "new", &l), -1, "every pool was just used");
  age(idx[10], 5000);
  age(idx[200], 9000); /* idle longer: this one goes */
  st.pools[idx[200]].tat_requests = cg_state_now() - SEC; /* a reservation long past */
  st.breakers[idx[200]].opened = 3;
  st.budgets[idx[200]].refused = 4;
  st.tallies[idx[200]].calls = 5;
  p = cg_limiter_pool(&st, "new", &l);
  cr_assert_eq(p, idx[200]);
  cr_assert_str_eq(st.pools[p].name, "new");
  cr_assert_eq(st.pools[p].name_ready, 1);
  cr_assert_eq(st.pools[p].name_hash, cg_limiter_name_hash("new"));
  cr_assert_eq(st.pools[p].rpm, 120, "its limits are the new name's");
  cr_assert_eq(st.pools[p].tat_requests, 0, "the old pool's words are cleared");
  cr_assert_eq(st.breakers[p].opened, 0);
  cr_assert_eq(st.budgets[p].refused, 0);
  cr_assert_eq(st.tallies[p].calls, 0);
  cr_assert_geq(st.pools[p].used_ms, cg_coarse_ms() - 1000, "stamped as just used");
  cr_assert(cg_state_body_ok(&st));
  /* The new name is found where it was put; the next new name gets the other idle one;
   * the old name, now a new name itself, finds none left. */
  cr_assert_eq(cg_limiter_pool(&st, "new", &l), p);
  cr_assert_eq(cg_limiter_pool(&st, "newer", &l), idx[10]);
  cr_assert_eq(cg_limiter_pool(&st, "pool-200", &l), -1);
  cr_assert_eq(cg_limiter_pool(&st, "pool-11", &l), idx[11], "the others are untouched");
}

Test(limiter, a_pool_in_use_is_not_given_away) {
  struct cg_limits l = limits(60, 0, 0, 0, 2);
  int idx[CG_STATE_POOLS], slot;
  int64_t waited;
  fill_table(idx);
  age(idx[1], 0);
  age(idx[2], 0);
  age(idx[3], 0);
  age(idx[4], 0);
  /* In flight (a live slot), a 429's hold, a provider's pacing or a GCRA reservation
   * ahead, or stamped again by a lookup. */
  slot = cg_limiter_inflight_acquire(&st, idx[1], 2, cg_state_now() + SEC, &waited);
  cr_assert_geq(slot, 0);
  age(idx[1], 0); /* the acquire does not stamp: the lookup does */
  st.pools[idx[2]].hold_until = cg_state_now() + 60 * SEC;
  st.pools[idx[4]].pace_until = cg_state_now() + 60 * SEC;
  age(idx[5], 0);
  st.pools[idx[5]].tat_requests = cg_state_now() + 60 * SEC;
  cr_assert_eq(cg_limiter_pool(&st, "pool-3", &l), idx[3]);
  cr_assert_eq(cg_limiter_pool(&st, "new", &l), -1);
  /* A slot whose count was lost (its holder died between the two) still holds it. */
  st.pools[idx[1]].inflight = 0;
  cr_assert_eq(cg_limiter_pool(&st, "new", &l), -1);
  cg_limiter_inflight_release(&st, idx[1], slot);
  cr_assert_eq(cg_limiter_pool(&st, "new", &l), idx[1]);
}

Test(limiter, a_touched_pool_or_one_with_a_learned_rate_reservation_ahead_is_kept) {
  struct cg_limits l = limits(60, 0, 0, 0, 0);
  int idx[CG_STATE_POOLS];
  fill_table(idx);
  age(idx[40], 0);
  age(idx[41], 0);
  cg_limiter_pool_touch(&st, idx[40]); /* a call's later attempt, or its breaker wait */
  st.pools[idx[41]].learn_tat = cg_state_now() + 60 * SEC;
  cr_assert_eq(cg_limiter_pool(&st, "new", &l), -1);
  st.pools[idx[41]].learn_tat = cg_state_now() - SEC;
  cr_assert_eq(cg_limiter_pool(&st, "new", &l), idx[41]);
}

/* A used_ms that is garbage (a corrupted or hostile file): far ahead counts as long ago,
 * and INT64_MIN does not overflow the arithmetic (UBSan builds would say so). */
Test(limiter, a_garbage_last_use_counts_as_long_ago) {
  struct cg_limits l = limits(60, 0, 0, 0, 0);
  int idx[CG_STATE_POOLS];
  fill_table(idx);
  st.pools[idx[50]].used_ms = INT64_MAX / 2;
  st.pools[idx[51]].used_ms = INT64_MIN;
  cr_assert_eq(cg_limiter_pool(&st, "new", &l), idx[50]);
  cr_assert_eq(cg_limiter_pool(&st, "newer", &l), idx[51]);
  /* A lookup writes such a value over: the pool is used again. */
  st.pools[idx[52]].used_ms = INT64_MAX / 2;
  cr_assert_eq(cg_limiter_pool(&st, "pool-52", &l), idx[52]);
  cr_assert_leq(st.pools[idx[52]].used_ms, cg_coarse_ms());
  cr_assert_eq(cg_limiter_pool(&st, "newest", &l), -1);
}

Test(limiter, a_pool_left_counted_by_killed_processes_is_given_away) {
  struct cg_limits l = limits(60, 0, 0, 0, 1);
  int idx[CG_STATE_POOLS], status;
  pid_t child;
  fill_table(idx);
  /* A holder killed in its call: its slot and count stay until taken back. */
  child = fork();
  cr_assert_geq(child, 0);
  if (child == 0) {
    int64_t w;
    _exit(cg_limiter_inflight_acquire(&st, idx[20], 1, cg_state_now() + SEC, &w) >= 0 ? 0 : 1);
  }
  cr_assert_eq(waitpid(child, &status, 0), child);
  cr_assert_eq(WEXITSTATUS(status), 0);
  cr_assert_eq(st.pools[idx[20]].inflight, 1);
  /* A waiter killed in its wait: its count is never taken back. */
  st.pools[idx[21]].waiters = 1;
  age(idx[20], 10);
  age(idx[21], 0);
  /* A pool counted in flight is asked (its slots' holders looked up in /proc) only when
   * no idle pool is clean: the waiter's goes first, though used later. */
  cr_assert_eq(cg_limiter_pool(&st, "new", &l), idx[21]);
  cr_assert_eq(cg_limiter_pool(&st, "newer", &l), idx[20]);
  cr_assert_eq(st.pools[idx[20]].inflight, 0);
}

/* limiter.c: the key of a pool being given away, the give begun `ago_ms` ago. */
static uint64_t moving_key(int64_t ago_ms) {
  return 0xFFFF000000000000ull | (uint64_t) (cg_coarse_ms() - ago_ms);
}

Test(limiter, a_pool_being_given_away_is_not_used) {
  struct cg_limits l = limits(60, 0, 0, 0, 0);
  int idx[CG_STATE_POOLS];
  uint64_t h;
  fill_table(idx);
  /* Pool 5 in the middle of changing hands (another process's swap, not yet published). */
  h = st.pools[idx[5]].name_hash;
  st.pools[idx[5]].name_hash = moving_key(0);
  age(idx[5], 0);
  cr_assert_eq(cg_limiter_pool(&st, "pool-5", &l), -1, "its old name no longer finds it");
  cr_assert_eq(cg_limiter_pool(&st, "pool-6", &l), idx[6]);
  cr_assert(cg_state_body_ok(&st), "a pool changing hands is no garbage");
  st.pools[idx[5]].name_hash = h;
  cr_assert_eq(cg_limiter_pool(&st, "pool-5", &l), idx[5]);
}

Test(limiter, a_give_abandoned_half_way_is_taken_over) {
  struct cg_limits l = limits(60, 0, 0, 0, 0);
  int idx[CG_STATE_POOLS];
  struct timespec t0, t1;
  uint64_t ahead;
  double ms, least = 1e9;
  int k;
  fill_table(idx);
  /* Givers killed 11 s ago, after the swap, half-way through clearing the old pools'
   * words: no name hashes to the key.  Taken over without the 50 ms wait for a give at
   * work (the fastest of three, so that one scheduler pause does not count). */
  for (k = 2; k >= 0; k--) {
    char name[16];
    st.pools[idx[8 + k * 20]].name_hash = moving_key(11000);
    st.pools[idx[8 + k * 20]].name_ready = 0;
    st.tallies[idx[8 + k * 20]].calls = 7;
    st.breakers[idx[8 + k * 20]].opened = 2;
    snprintf(name, sizeof(name), k ? "after-%d" : "after", k);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(cg_limiter_pool(&st, name, &l), idx[8 + k * 20]);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (double) (t1.tv_sec - t0.tv_sec) * 1e3 + (double) (t1.tv_nsec - t0.tv_nsec) / 1e6;
    if (ms < least)
      least = ms;
  }
  cr_assert_lt(least, 40, "waited %.1f ms for a give nobody is doing", least);
  cr_assert_str_eq(st.pools[idx[8]].name, "after");
  cr_assert_eq(st.pools[idx[8]].name_ready, 1);
  cr_assert_eq(st.pools[idx[8]].name_hash, cg_limiter_name_hash("after"));
  cr_assert_eq(st.tallies[idx[8]].calls, 0, "cleared, as any give clears");
  cr_assert_eq(st.breakers[idx[8]].opened, 0);
  /* One begun just now is waited for (up to 50 ms), then left alone; so is one that
   * began a little after this lookup's clock reading (another process read it later),
   * however old its pool looks.  One far in the future is garbage, taken over. */
  st.pools[idx[9]].name_hash = moving_key(0);
  cr_assert_eq(cg_limiter_pool(&st, "later", &l), -1);
  cr_assert(st.pools[idx[9]].name_hash >> 48 == 0xFFFF);
  ahead = moving_key(-500);
  st.pools[idx[10]].name_hash = ahead;
  age(idx[10], 0);
  cr_assert_eq(cg_limiter_pool(&st, "later", &l), -1);
  cr_assert_eq(st.pools[idx[10]].name_hash, ahead);
  st.pools[idx[11]].name_hash = moving_key(-3600 * 1000);
  cr_assert_eq(cg_limiter_pool(&st, "later", &l), idx[11]);
}

/* Threads ask for the same new name at once, with two pools idle: one pool gets it. */
static void *find_fresh(void *arg) {
  struct cg_limits l = limits(60, 0, 0, 0, 0);
  *(int *) arg = cg_limiter_pool(&st, "fresh", &l);
  return NULL;
}

/* Two pools for one name take a giver descheduled for the 50 ms the others wait for it:
 * not seen in 60 runs of this test, 20 of them beside four CPU-bound loops on 2 CPUs
 * (without the wait: 1 run in 3 fails). */
Test(limiter, one_new_name_gets_one_pool_when_asked_at_once) {
  int idx[CG_STATE_POOLS], got[8], i, round;
  pthread_t t[8];
  for (round = 0; round < 20; round++) {
    int n = 0;
    memset(st.pools, 0, CG_STATE_POOLS * sizeof(st.pools[0]));
    fill_table(idx);
    age(idx[30], 0);
    age(idx[31], 0);
    for (i = 0; i < 8; i++)
      cr_assert_eq(pthread_create(&t[i], NULL, find_fresh, &got[i]), 0);
    for (i = 0; i < 8; i++)
      pthread_join(t[i], NULL);
    for (i = 0; i < 8; i++)
      cr_assert_eq(got[i], got[0], "round %d: thread %d got %d, thread 0 %d", round, i,
                   got[i], got[0]);
    cr_assert(got[0] == idx[30] || got[0] == idx[31]);
    for (i = 0; i < CG_STATE_POOLS; i++)
      n += st.pools[i].name_hash == cg_limiter_name_hash("fresh");
    cr_assert_eq(n, 1, "round %d: %d pools named fresh", round, n);
  }
}

Test(limiter, pool_long_name_does_not_overflow) {
  struct cg_limits l = limits(60, 0, 0, 0, 0);
  char name[200];
  int p;
  memset(name, 'x', sizeof(name) - 1);
  name[sizeof(name) - 1] = '\0';
  p = pool(name, &l);
  cr_assert_eq(strlen(st.pools[p].name), sizeof(st.pools[p].name) - 1);
  cr_assert_eq(cg_limiter_pool(&st, name, &l), p);
}

/* ---- available ---- */

Test(limiter, available) {
  cr_assert(isinf(cg_limiter_available(0, 0, 0, NOW0)), "no limit: infinite");
  cr_assert_eq(cg_limiter_available(0, 60, 3, NOW0), 3);
  cr_assert_eq(cg_limiter_available(NOW0 - 50 * SEC, 60, 3, NOW0), 3, "never above burst");
  cr_assert_eq(cg_limiter_available(NOW0 + SEC, 60, 3, NOW0), 2);
  cr_assert_eq(cg_limiter_available(NOW0 + 3 * SEC, 60, 3, NOW0), 0);
  cr_assert_eq(cg_limiter_available(NOW0 + 10 * SEC, 60, 3, NOW0), 0);
  cr_assert_eq(cg_limiter_available(0, 120, 0, NOW0), 2, "default burst");
}

Test(limiter, available_follows_reservations) {
  struct cg_limits l = limits(60, 3, 0, 0, 0);
  int p = pool("a", &l);
  cr_assert_eq(cg_limiter_available(st.pools[p].tat_requests, 60, 3, NOW0), 3);
  reserve(p, &l, 0, NOW0);
  cr_assert_eq(cg_limiter_available(st.pools[p].tat_requests, 60, 3, NOW0), 2);
  reserve(p, &l, 0, NOW0);
  reserve(p, &l, 0, NOW0);
  cr_assert_eq(cg_limiter_available(st.pools[p].tat_requests, 60, 3, NOW0), 0);
  cr_assert_eq(cg_limiter_available(st.pools[p].tat_requests, 60, 3, NOW0 + SEC), 1);
}

/* ---- counters ---- */

Test(limiter, counters) {
  struct cg_limits l = limits(0, 0, 0, 0, 0);
  int p = pool("a", &l);
  cg_limiter_count(&st, p, CG_CNT_ADMITTED);
  cg_limiter_count(&st, p, CG_CNT_ADMITTED);
  cg_limiter_count(&st, p, CG_CNT_WAITED);
  cg_limiter_count(&st, p, CG_CNT_REJECTED);
  cg_limiter_count(&st, p, CG_CNT_429);
  cr_assert_eq(st.pools[p].admitted, 2);
  cr_assert_eq(st.pools[p].waited, 1);
  cr_assert_eq(st.pools[p].rejected, 1);
  cr_assert_eq(st.pools[p].seen_429, 1);
}

/* ---- concurrency: no lost compare-and-swap ---- */

#define NTHREADS 8
#define PER_THREAD 1000

struct reserver {
  int p;
  struct cg_limits l;
  int64_t waits[PER_THREAD];
  int failed;
};

static void *reserver_run(void *arg) {
  struct reserver *r = arg;
  int i;
  for (i = 0; i < PER_THREAD; i++)
    if (cg_limiter_reserve(&st, r->p, &r->l, 0, NOW0, NO_MAX, &r->waits[i]) != 0)
      r->failed++;
  return NULL;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
  return x < y ? -1 : x > y;
}

Test(limiter, concurrent_reserves_lose_no_update) {
  static struct reserver rs[NTHREADS];
  static int64_t all[NTHREADS * PER_THREAD];
  struct cg_limits l = limits(60000, 1, 0, 0, 0); /* T = 1 ms exactly */
  pthread_t th[NTHREADS];
  int p = pool("race", &l), i, j;

  for (i = 0; i < NTHREADS; i++) {
    rs[i].p = p;
    rs[i].l = l;
    rs[i].failed = 0;
    cr_assert_eq(pthread_create(&th[i], NULL, reserver_run, &rs[i]), 0);
  }
  for (i = 0; i < NTHREADS; i++)
    pthread_join(th[i], NULL);
  cr_assert_eq(st.pools[p].tat_requests, NOW0 + (int64_t) NTHREADS * PER_THREAD * MS,
               "TAT %lld, want %lld: updates were lost",
               (long long) (st.pools[p].tat_requests - NOW0),
               (long long) NTHREADS * PER_THREAD * MS);
  /* Every caller got its own place in the queue: waits are 0, T, 2T, ... once each. */
  for (i = 0; i < NTHREADS; i++) {
    cr_assert_eq(rs[i].failed, 0);
    for (j = 0; j < PER_THREAD; j++)
      all[i * PER_THREAD + j] = rs[i].waits[j];
  }
  qsort(all, NTHREADS * PER_THREAD, sizeof(all[0]), cmp_i64);
  for (i = 0; i < NTHREADS * PER_THREAD; i++)
    cr_assert_eq(all[i], (int64_t) i * MS, "wait #%d is %lld ns", i, (long long) all[i]);
}

/* ---- in flight ---- */

Test(limiter, inflight_acquire_release_counts) {
  struct cg_limits l = limits(0, 0, 0, 0, 2);
  int p = pool("a", &l);
  int64_t waited = -1;
  int s1 = cg_limiter_inflight_acquire(&st, p, 2, cg_state_now() + SEC, &waited);
  int s2 = cg_limiter_inflight_acquire(&st, p, 2, cg_state_now() + SEC, &waited);
  cr_assert_geq(s1, 0);
  cr_assert_geq(s2, 0);
  cr_assert_neq(s1, s2);
  cr_assert_lt(waited, 100 * MS, "a free slot is taken without waiting");
  cr_assert_eq(st.pools[p].inflight, 2);
  cr_assert_eq(st.slots[s1].owner >> 32, (uint64_t) getpid());
  cr_assert_eq(st.slots[s1].owner & 0xFFFFFFFFu, (uint64_t) p + 1);
  cr_assert_eq(st.slots[s1].owner_start, cg_proc_start(getpid()));
  cg_limiter_inflight_release(&st, p, s1);
  cr_assert_eq(st.pools[p].inflight, 1);
  cr_assert_eq(st.slots[s1].owner, 0);
  /* A second release of the same slot changes nothing. */
  cg_limiter_inflight_release(&st, p, s1);
  cr_assert_eq(st.pools[p].inflight, 1);
  cg_limiter_inflight_release(&st, p, -2); /* "no slot" */
  cr_assert_eq(st.pools[p].inflight, 1);
  cg_limiter_inflight_release(&st, p, s2);
  cr_assert_eq(st.pools[p].inflight, 0);
}

Test(limiter, inflight_full_times_out_at_deadline) {
  struct cg_limits l = limits(0, 0, 0, 0, 1);
  int p = pool("a", &l);
  int64_t waited = -1, t0, t1;
  int s1 = cg_limiter_inflight_acquire(&st, p, 1, cg_state_now() + SEC, &waited);
  cr_assert_geq(s1, 0);
  t0 = cg_state_now();
  cr_assert_eq(cg_limiter_inflight_acquire(&st, p, 1, t0 + 100 * MS, &waited), -1);
  t1 = cg_state_now();
  cr_assert_geq(t1 - t0, 100 * MS, "gave up before the deadline");
  cr_assert_lt(t1 - t0, 400 * MS, "gave up long after the deadline");
  cr_assert_geq(waited, 90 * MS);
  cr_assert_eq(st.pools[p].inflight, 1, "a timed-out waiter took nothing");
  cr_assert_eq(st.pools[p].waiters, 0);
  /* A deadline already past: no wait at all. */
  t0 = cg_state_now();
  cr_assert_eq(cg_limiter_inflight_acquire(&st, p, 1, t0 - SEC, &waited), -1);
  cr_assert_lt(cg_state_now() - t0, 50 * MS);
  cg_limiter_inflight_release(&st, p, s1);
}

struct waiter {
  int p;
  int slot;
  int64_t waited;
  int64_t done_at;
};

static void *waiter_run(void *arg) {
  struct waiter *w = arg;
  w->slot = cg_limiter_inflight_acquire(&st, w->p, 1, cg_state_now() + 5 * SEC, &w->waited);
  w->done_at = cg_state_now();
  return NULL;
}

Test(limiter, release_wakes_a_waiter) {
  struct cg_limits l = limits(0, 0, 0, 0, 1);
  struct waiter w = {0, -9, 0, 0};
  pthread_t th;
  int64_t waited, released_at;
  int s1, i;

  w.p = pool("a", &l);
  s1 = cg_limiter_inflight_acquire(&st, w.p, 1, cg_state_now() + SEC, &waited);
  cr_assert_geq(s1, 0);
  cr_assert_eq(pthread_create(&th, NULL, waiter_run, &w), 0);
  /* Wait (bounded) until the thread sleeps on the futex. */
  for (i = 0; i < 200 && __atomic_load_n(&st.pools[w.p].waiters, __ATOMIC_ACQUIRE) == 0; i++)
    usleep(5000);
  cr_assert_eq(st.pools[w.p].waiters, 1, "the second caller should be waiting");
  usleep(100000);
  released_at = cg_state_now();
  cg_limiter_inflight_release(&st, w.p, s1);
  pthread_join(th, NULL);
  cr_assert_geq(w.slot, 0);
  cr_assert_geq(w.done_at, released_at);
  /* Woken by the release, not by the periodic re-check (CG_INFLIGHT_RECHECK_MS). */
  cr_assert_lt(w.done_at - released_at, 200 * MS, "woken %lld ms after the release",
               (long long) ((w.done_at - released_at) / MS));
  cr_assert_eq(st.pools[w.p].inflight, 1);
  cr_assert_eq(st.pools[w.p].waiters, 0);
  cg_limiter_inflight_release(&st, w.p, w.slot);
  cr_assert_eq(st.pools[w.p].inflight, 0);
}

/* A child takes a slot and dies without giving it back.  Returns its (reaped) pid. */
static pid_t child_dies_holding_slot(int p, long max) {
  int fds[2], status;
  char c = 0;
  pid_t pid;

  cr_assert_eq(pipe(fds), 0);
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    int64_t w;
    int s = cg_limiter_inflight_acquire(&st, p, max, cg_state_now() + SEC, &w);
    c = s >= 0 ? 'y' : 'n';
    if (write(fds[1], &c, 1) != 1)
      _exit(2);
    _exit(0); /* no release */
  }
  close(fds[1]);
  cr_assert_eq(read(fds[0], &c, 1), 1);
  close(fds[0]);
  cr_assert_eq(c, 'y', "the child got no slot");
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return pid;
}

Test(limiter, reclaim_slot_of_dead_process) {
  struct cg_limits l = limits(0, 0, 0, 0, 1);
  int p = pool("a", &l), q = pool("b", &l), s, mine;
  int64_t waited;
  pid_t dead;

  /* A live slot of ours in another pool is never taken. */
  mine = cg_limiter_inflight_acquire(&st, q, 1, cg_state_now() + SEC, &waited);
  cr_assert_geq(mine, 0);
  dead = child_dies_holding_slot(p, 1);
  cr_assert_eq(st.pools[p].inflight, 1, "the dead child's slot is still counted");
  cr_assert_eq(cg_limiter_reclaim(&st, q), 0, "other pool: nothing to take back");
  cr_assert_eq(cg_limiter_reclaim(&st, p), 1);
  cr_assert_eq(st.pools[p].inflight, 0);
  cr_assert_eq(cg_limiter_reclaim(&st, -1), 0, "our own live slot stays");
  cr_assert_eq(st.pools[q].inflight, 1);
  s = cg_limiter_inflight_acquire(&st, p, 1, cg_state_now() + SEC, &waited);
  cr_assert_geq(s, 0);
  cr_assert_lt(waited, 100 * MS);
  cr_assert_eq(st.slots[s].owner >> 32, (uint64_t) getpid(), "dead pid %d", (int) dead);
  cg_limiter_inflight_release(&st, p, s);
  cg_limiter_inflight_release(&st, q, mine);
}

Test(limiter, waiter_takes_back_slot_of_dead_process) {
  struct cg_limits l = limits(0, 0, 0, 0, 1);
  int p = pool("a", &l), s;
  int64_t waited, t0;

  child_dies_holding_slot(p, 1);
  t0 = cg_state_now();
  s = cg_limiter_inflight_acquire(&st, p, 1, t0 + 3 * SEC, &waited);
  cr_assert_geq(s, 0, "the slot of a dead holder was not taken back before the deadline");
  /* README: taken back by the next waiter within 0.5 s (allow scheduling slack). */
  cr_assert_lt(cg_state_now() - t0, (CG_INFLIGHT_RECHECK_MS + 500) * MS);
  cr_assert_eq(st.pools[p].inflight, 1);
  cr_assert_eq(cg_limiter_reclaim(&st, p), 0, "already taken back");
  cg_limiter_inflight_release(&st, p, s);
}

Test(limiter, reclaim_takes_back_slot_of_recycled_pid) {
  /* A slot whose pid is alive (ours) but whose start time differs belongs to a dead
   * process whose pid was reused: it is taken back. */
  struct cg_limits l = limits(0, 0, 0, 0, 4);
  int p = pool("a", &l), s;
  int64_t waited;
  s = cg_limiter_inflight_acquire(&st, p, 4, cg_state_now() + SEC, &waited);
  cr_assert_geq(s, 0);
  st.slots[s].owner_start += 1;
  cr_assert_eq(cg_limiter_reclaim(&st, p), 1);
  cr_assert_eq(st.pools[p].inflight, 0);
  cr_assert_eq(st.slots[s].owner, 0);
  /* Our late release does not give back a slot twice. */
  cg_limiter_inflight_release(&st, p, s);
  cr_assert_eq(st.pools[p].inflight, 0);
}

Test(limiter, slot_table_full_runs_without_a_slot) {
  struct cg_limits l = limits(0, 0, 0, 0, 5000);
  int p = pool("a", &l), i, s;
  int64_t waited;
  for (i = 0; i < CG_STATE_SLOTS; i++)
    cr_assert_geq(cg_limiter_inflight_acquire(&st, p, 5000, cg_state_now() + SEC, &waited), 0,
                  "slot %d", i);
  cr_assert_eq(st.pools[p].inflight, CG_STATE_SLOTS);
  s = cg_limiter_inflight_acquire(&st, p, 5000, cg_state_now() + SEC, &waited);
  cr_assert_eq(s, -2, "no slot left: the call runs without one");
  cr_assert_eq(st.pools[p].inflight, CG_STATE_SLOTS, "the count was not given back");
}

/* README "The file": a process killed at any instant leaves the file usable.  The two
 * windows below are a few instructions wide in cg_limiter_inflight_acquire: after the
 * in-flight count went up and before the slot records the owner's start time.  A waiter
 * must still get the pool back (README: within CG_INFLIGHT_RECHECK_MS). */

static pid_t dead_pid(void) {
  int status;
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0)
    _exit(0);
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  return pid;
}

Test(limiter, slot_of_process_killed_while_claiming_it_is_taken_back) {
  /* Killed between the slot's owner CAS and the store of owner_start. */
  struct cg_limits l = limits(0, 0, 0, 0, 1);
  int p = pool("a", &l), s;
  int64_t waited;
  pid_t dead = dead_pid();
  st.slots[7].owner = ((uint64_t) dead << 32) | (uint64_t) (p + 1);
  st.slots[7].owner_start = 0;
  st.pools[p].inflight = 1;
  s = cg_limiter_inflight_acquire(&st, p, 1, cg_state_now() + 1500 * MS, &waited);
  cr_assert_geq(s, 0,
                "pool stuck: slot 7 of dead pid %d (owner_start 0) is never taken back, "
                "inflight %u",
                (int) dead, st.pools[p].inflight);
}

Test(limiter, count_of_process_killed_before_claiming_a_slot_is_taken_back) {
  /* Killed between the in-flight count's CAS and claiming a slot: a count with no slot. */
  struct cg_limits l = limits(0, 0, 0, 0, 1);
  int p = pool("a", &l), s;
  int64_t waited;
  st.pools[p].inflight = 1;
  s = cg_limiter_inflight_acquire(&st, p, 1, cg_state_now() + 1500 * MS, &waited);
  cr_assert_geq(s, 0, "pool stuck: in-flight count 1 with no slot behind it is never repaired");
}

/* A file cut short inside a pool keeps its hash and loses its name (truncate -s 300):
 * the next process that uses the pool publishes the name again, so `stat` shows it. */
Test(limiter, claimed_pool_without_a_published_name_is_named_again) {
  struct cg_limits l = limits(60, 1, 0, 0, 0);
  int p = pool("127.0.0.1", &l);
  memset(st.pools[p].name, 0, sizeof(st.pools[p].name));
  st.pools[p].name_ready = 0;
  cr_assert_eq(pool("127.0.0.1", &l), p);
  cr_assert_eq(st.pools[p].name_ready, 1);
  cr_assert_str_eq(st.pools[p].name, "127.0.0.1");
}

/* ---- turns: waiters served in the order they came (limiter.h turns) ---- */

/* One look without waiting (cg_limiter_inflight_try), taking a turn when `wait`. */
static int look(int p, long max, struct cg_limiter_turn *t, int wait) {
  uint32_t seen = 12345;
  int s = cg_limiter_inflight_try(&st, p, max, t, wait, &seen);
  if (s == -1)
    cr_assert_lt(seen, 12345u, "a look that found no slot says what it saw");
  return s;
}

/* A turn word as a waiter `age_ms` silent would have left it. */
static uint64_t turn_word(uint32_t ticket, int64_t age_ms) {
  return (uint64_t) ticket << 32 | (uint32_t) (cg_mono_ms() - age_ms);
}

Test(limiter, turns_serve_waiters_in_order) {
  struct cg_limits l = limits(0, 0, 0, 0, 1);
  int p = pool("a", &l), s0, s;
  struct cg_limiter_turn t1 = {0, 0}, t2 = {0, 0}, none = {0, 0};
  s0 = look(p, 1, &none, 1);
  cr_assert_geq(s0, 0, "a free slot with nobody waiting is taken at once");
  cr_assert_eq(none.ticket, 0, "... without a turn");
  cr_assert_eq(st.pools[p].waiters, 0);
  cr_assert_eq(look(p, 1, &t1, 1), -1);
  cr_assert_eq(look(p, 1, &t2, 1), -1);
  cr_assert_neq(t1.ticket, 0);
  cr_assert_neq(t2.ticket, 0);
  cr_assert_neq(t1.at, t2.at);
  cr_assert_eq(st.pools[p].waiters, 2);
  cr_assert_eq(st.pools[p].turns[t1.at] >> 32, t1.ticket);
  cg_limiter_inflight_release(&st, p, s0);
  /* The slot is free, and it is the first waiter's: not a newcomer's, not the second's. */
  cr_assert_eq(look(p, 1, &none, 0), -1, "a newcomer went ahead of the waiters");
  cr_assert_eq(none.ticket, 0, "a look that may not wait takes no turn");
  cr_assert_eq(look(p, 1, &t2, 1), -1, "the second went ahead of the first");
  s = look(p, 1, &t1, 1);
  cr_assert_geq(s, 0, "the first in turn got no slot");
  cr_assert_eq(t1.ticket, 0, "served: out of turn");
  cr_assert_eq(st.pools[p].waiters, 1);
  cg_limiter_inflight_release(&st, p, s);
  cr_assert_eq(look(p, 1, &none, 0), -1);
  s = look(p, 1, &t2, 1);
  cr_assert_geq(s, 0);
  cr_assert_eq(st.pools[p].waiters, 0);
  cg_limiter_inflight_release(&st, p, s);
  s = look(p, 1, &none, 0);
  cr_assert_geq(s, 0, "nobody waits: the newcomer goes");
  cg_limiter_inflight_release(&st, p, s);
}

Test(limiter, turns_as_many_go_as_slots_are_free) {
  struct cg_limits l = limits(0, 0, 0, 0, 3);
  int p = pool("a", &l), i, held[3], s;
  struct cg_limiter_turn t[3], none = {0, 0};
  memset(t, 0, sizeof(t));
  for (i = 0; i < 3; i++)
    cr_assert_geq(held[i] = look(p, 3, &none, 1), 0);
  for (i = 0; i < 3; i++)
    cr_assert_eq(look(p, 3, &t[i], 1), -1);
  cg_limiter_inflight_release(&st, p, held[0]);
  cg_limiter_inflight_release(&st, p, held[1]);
  /* Two free, three waiting: the third may not, the second may (one ahead of it). */
  cr_assert_eq(look(p, 3, &t[2], 1), -1);
  cr_assert_geq(s = look(p, 3, &t[1], 1), 0);
  cg_limiter_inflight_release(&st, p, s);
  cr_assert_geq(s = look(p, 3, &t[0], 1), 0);
  cr_assert_geq(look(p, 3, &t[2], 1), 0);
  cr_assert_eq(st.pools[p].inflight, 3);
  cr_assert_eq(st.pools[p].waiters, 0);
}

Test(limiter, turns_of_silent_waiters_are_passed_over_then_freed) {
  struct cg_limits l = limits(0, 0, 0, 0, 1);
  int p = pool("a", &l), s0, s;
  struct cg_limiter_turn dead = {0, 0}, late = {0, 0}, none = {0, 0};
  struct cg_state_pool *q = &st.pools[p];
  s0 = look(p, 1, &none, 1);
  cr_assert_eq(look(p, 1, &dead, 1), -1);
  cr_assert_eq(look(p, 1, &late, 1), -1);
  cg_limiter_inflight_release(&st, p, s0);
  cr_assert_eq(look(p, 1, &late, 1), -1, "the first one still looks: its turn");
  cr_assert_eq(cg_limiter_waiting(q), 2);
  /* The first stops looking (killed): after CG_TURN_STALE_MS it is passed over... */
  q->turns[dead.at] = turn_word(dead.ticket, CG_TURN_STALE_MS + 20);
  cr_assert_eq(cg_limiter_waiting(q), 1, "stat counts a waiter passed over");
  s = look(p, 1, &late, 1);
  cr_assert_geq(s, 0, "a silent waiter held the next one up");
  cr_assert_eq(q->turns[dead.at] >> 32, dead.ticket, "... its place kept for a while");
  cr_assert_eq(q->waiters, 1);
  /* ... and when it looks again it is first again. */
  cr_assert_eq(look(p, 1, &dead, 1), -1);
  cr_assert_eq(dead.ticket, q->turns[dead.at] >> 32);
  cg_limiter_inflight_release(&st, p, s);
  cr_assert_eq(look(p, 1, &none, 0), -1, "its turn again: the newcomer waits");
  /* Silent for CG_TURN_DROP_MS: its word is freed by the next look, and its count. */
  q->turns[dead.at] = turn_word(dead.ticket, CG_TURN_DROP_MS + 20);
  s = look(p, 1, &none, 0);
  cr_assert_geq(s, 0);
  cr_assert_eq(q->turns[dead.at], 0);
  cr_assert_eq(q->waiters, 0);
  cr_assert_eq(cg_limiter_waiting(q), 0);
  /* Its owner, looking at last, has lost it: a new ticket, at the back. */
  cr_assert_eq(look(p, 1, &dead, 1), -1);
  cr_assert_neq(dead.ticket, 0);
  cr_assert_eq(q->waiters, 1);
  cg_limiter_turn_drop(&st, p, &dead);
  cr_assert_eq(dead.ticket, 0);
  cr_assert_eq(q->waiters, 0);
  cr_assert_eq(q->turns[dead.at < 0 ? 0 : dead.at], 0);
  cg_limiter_turn_drop(&st, p, &dead); /* again: nothing */
  cr_assert_eq(q->waiters, 0);
  cg_limiter_inflight_release(&st, p, s);
}

Test(limiter, turns_garbage_words_and_a_full_table) {
  struct cg_limits l = limits(0, 0, 0, 0, 1);
  int p = pool("a", &l), i, s;
  struct cg_state_pool *q = &st.pools[p];
  struct cg_limiter_turn t = {0, 0}, extra = {0, 0}, none = {0, 0};
  uint32_t now = (uint32_t) cg_mono_ms();
  /* Words no waiter wrote (a stamp far ahead, any ticket) and a count beyond them. */
  for (i = 0; i < CG_STATE_TURNS; i++)
    q->turns[i] = (uint64_t) (0xF0000000u + (uint32_t) i) << 32 | (now + 0x40000000u);
  q->waiters = CG_STATE_TURNS + 5;
  cr_assert_eq(cg_limiter_turns_ahead(q, &none, now, 100), 0, "garbage counted as waiters");
  for (i = 0; i < CG_STATE_TURNS; i++)
    cr_assert_eq(q->turns[i], 0, "garbage word %d kept", i);
  cr_assert_eq(q->waiters, 5, "each word freed counted off once");
  q->waiters = 0;
  /* Every word taken by live waiters: one more waits without a word, behind them. */
  for (i = 0; i < CG_STATE_TURNS; i++) {
    struct cg_limiter_turn w = {0, 0};
    cr_assert_eq(cg_limiter_turn_take(q, &w, now), 1);
  }
  cr_assert_eq(cg_limiter_turn_take(q, &extra, now), 0);
  cr_assert_eq(extra.ticket, 0);
  cr_assert_eq(q->waiters, CG_STATE_TURNS, "a waiter with no word is not counted by take");
  cr_assert_eq(look(p, 1, &t, 1), -1, "a newcomer went ahead of 32 waiters");
  cr_assert_eq(t.ticket, 0);
  /* They all go silent: passed over, the slot is the newcomer's. */
  for (i = 0; i < CG_STATE_TURNS; i++)
    q->turns[i] = turn_word((uint32_t) i + 1, CG_TURN_STALE_MS + 20);
  cr_assert_geq(s = look(p, 1, &t, 1), 0);
  cg_limiter_inflight_release(&st, p, s);
}

/* The bug: a waiter that looks every 20 ms (a multi host's) lost every slot to one that
 * sleeps on the futex and is woken at each release, though it came first. */
struct blocking {
  int p;
  int slot;
  int64_t got_at;
};

static void *blocking_waiter(void *arg) {
  struct blocking *b = arg;
  int64_t waited;
  b->slot = cg_limiter_inflight_acquire(&st, b->p, 1, cg_state_now() + 5 * SEC, &waited);
  b->got_at = cg_state_now();
  return NULL;
}

Test(limiter, turns_a_polling_waiter_first_in_turn_goes_first) {
  struct cg_limits l = limits(0, 0, 0, 0, 1);
  int p = pool("a", &l), s0, s = -1, i;
  struct cg_limiter_turn t = {0, 0}, none = {0, 0};
  struct blocking b = {p, -9, 0};
  pthread_t th;
  int64_t got_at = 0;
  s0 = look(p, 1, &none, 1);
  cr_assert_eq(look(p, 1, &t, 1), -1); /* the poller comes first */
  cr_assert_eq(pthread_create(&th, NULL, blocking_waiter, &b), 0);
  for (i = 0; i < 200 && st.pools[p].waiters < 2; i++)
    usleep(1000);
  cr_assert_eq(st.pools[p].waiters, 2, "the blocking waiter never waited");
  usleep(30000);
  cg_limiter_inflight_release(&st, p, s0);
  for (i = 0; i < 100 && s < 0; i++) { /* 20 ms apart, as admit.c CG_NB_SLOT_POLL_MS */
    usleep(20000);
    s = look(p, 1, &t, 1);
    got_at = cg_state_now();
  }
  cr_assert_geq(s, 0, "the poller never got the slot");
  usleep(50000);
  cr_assert_eq(b.slot, -9, "the blocking waiter took the poller's turn");
  cg_limiter_inflight_release(&st, p, s);
  pthread_join(th, NULL);
  cr_assert_geq(b.slot, 0);
  cr_assert_gt(b.got_at, got_at);
  cr_assert_lt(b.got_at - got_at, 2 * SEC);
  cg_limiter_inflight_release(&st, p, b.slot);
  cr_assert_eq(st.pools[p].waiters, 0);
}

/* A waiter killed with SIGKILL in its turn holds the next one up CG_TURN_STALE_MS +
 * CG_TURN_BEAT_MS at most (once the slot is free). */
Test(limiter, turns_a_killed_waiter_holds_the_next_up_briefly) {
  struct cg_limits l = limits(0, 0, 0, 0, 1);
  int p = pool("a", &l), s0, i;
  struct cg_limiter_turn none = {0, 0};
  struct blocking b = {p, -9, 0};
  pthread_t th;
  int64_t freed;
  pid_t kid;
  s0 = look(p, 1, &none, 1);
  kid = fork();
  cr_assert_geq(kid, 0);
  if (kid == 0) {
    int64_t w;
    cg_limiter_inflight_acquire(&st, p, 1, cg_state_now() + 10 * SEC, &w);
    _exit(0);
  }
  for (i = 0; i < 500 && st.pools[p].waiters < 1; i++)
    usleep(1000);
  cr_assert_eq(st.pools[p].waiters, 1, "the child never waited");
  cr_assert_eq(pthread_create(&th, NULL, blocking_waiter, &b), 0);
  for (i = 0; i < 500 && st.pools[p].waiters < 2; i++)
    usleep(1000);
  kill(kid, SIGKILL);
  waitpid(kid, NULL, 0);
  freed = cg_state_now();
  cg_limiter_inflight_release(&st, p, s0);
  pthread_join(th, NULL);
  cr_assert_geq(b.slot, 0);
  cr_assert_lt(b.got_at - freed, (CG_TURN_STALE_MS + CG_TURN_BEAT_MS + 150) * MS,
               "held up %lld ms by a dead waiter", (long long) ((b.got_at - freed) / MS));
  cg_limiter_inflight_release(&st, p, b.slot);
}

/* ---- nothing a provider says holds or paces beyond max_ns (issue 11 item 3) ---- */

Test(limiter, pace_is_capped_at_max) {
  struct cg_limits l = limits(0, 0, 0, 0, 0);
  int p = pool("a", &l), q = pool("b", &l), r = pool("c", &l);
  int64_t year = 31536000LL * SEC;
  /* Nothing left, 999999h to refill one request: held 2 s, not 114 years. */
  cg_limiter_pace(&st, p, 1, 0, 1000000000000LL * MS, NOW0, 2 * SEC);
  cr_assert_eq(st.pools[p].hold_until, NOW0 + 2 * SEC);
  cr_assert_eq(reserve(p, &l, 0, NOW0), 2 * SEC);
  /* One left over a year: spaced at most 2 s apart, for at most 2 s. */
  cg_limiter_pace(&st, q, 100, 1, year, NOW0, 2 * SEC);
  cr_assert_eq(st.pools[q].pace_interval, 2 * SEC);
  cr_assert_eq(st.pools[q].pace_until, NOW0 + 2 * SEC);
  cr_assert_eq(reserve(q, &l, 0, NOW0), 0);
  cr_assert_eq(reserve(q, &l, 0, NOW0), 2 * SEC);
  cr_assert_eq(reserve(q, &l, 0, NOW0 + 3 * SEC), 0, "pacing over after the cap");
  cr_assert_eq(reserve(q, &l, 0, NOW0 + 3 * SEC), 0);
  /* remaining = INT64_MAX (a saturated count): remaining + 1 never overflows. */
  cg_limiter_pace(&st, r, -1, INT64_MAX, year, NOW0, 2 * SEC);
  cr_assert_eq(st.pools[r].pace_interval, 0);
  cr_assert_leq(st.pools[r].pace_until, NOW0 + 2 * SEC);
}

/* A token cost times the ns per token of a tiny tpm (10^12 tokens at 0.001 per minute:
 * 6e25 ns) was a float-to-integer overflow (UB; -fsanitize=float-cast-overflow).  Such a
 * request goes when the bucket is full (limiter.h) and moves the account as far as it
 * can, 4e18 ns, never a wrapped (negative: unlimited) one; the next one cannot go. */
Test(limiter, huge_token_cost_saturates_not_ub) {
  struct cg_limits l = limits(0, 0, 0.001, 1, 0);
  int p = pool("a", &l);
  int64_t w = -1;
  cr_assert_eq(cg_limiter_reserve(&st, p, &l, INT64_C(1000000000000), NOW0, 60 * SEC, &w), 0);
  cr_assert_eq(w, 0);
  cr_assert_eq(st.pools[p].tat_tokens, INT64_C(4000000000000000000));
  cr_assert_eq(cg_limiter_reserve(&st, p, &l, 1, NOW0, 60 * SEC, &w), 1);
  cr_assert_gt(w, 60 * SEC);
}

/* The usage of a response is network data too: a body claiming 2^53 tokens moves the
 * token account by max_ns at most (issue 11: no answer holds a pool beyond the maximum;
 * before, 2^53 tokens at 6000 tpm pushed it 2.8e18 ns, 89 years). */
Test(limiter, tokens_correct_is_capped_at_max) {
  struct cg_limits l = limits(0, 0, 6000, 1, 0);
  int p = pool("a", &l);
  int64_t tat;
  cr_assert_eq(reserve(p, &l, 1, NOW0), 0);
  tat = st.pools[p].tat_tokens;
  cg_limiter_tokens_correct(&st, p, &l, INT64_C(9007199254740992), 2 * SEC);
  cr_assert_eq(st.pools[p].tat_tokens, tat + 2 * SEC);
  cr_assert_eq(reserve(p, &l, 1, NOW0 + 3 * SEC), 0, "the next call goes after the cap");
}

/* ---- the learned rate (issue 12 item 5) ---- */

static struct cg_limits adaptive(double rpm) {
  struct cg_limits l = limits(rpm, 0, 0, 0, 0);
  l.adaptive = 1;
  l.margin = CG_RATE_MARGIN;
  return l;
}

Test(limiter, learn_math_cut_cubic_floor_cap) {
  struct cg_limits none = adaptive(0), capped = adaptive(600);
  double k = cbrt(10 * 0.3 / 0.4);
  /* A cut: 0.7 of the rate, or of the measured goodput when lower. */
  cr_assert_float_eq(cg_learn_cut(10, 0), 7, 1e-9);
  cr_assert_float_eq(cg_learn_cut(10, 5), 3.5, 1e-9);
  cr_assert_float_eq(cg_learn_cut(10, 20), 7, 1e-9);
  /* CUBIC: 0.7 W_max right after the cut, W_max at K, above it later. */
  cr_assert_float_eq(cg_learn_cubic(10, 0), 7, 1e-9);
  cr_assert_float_eq(cg_learn_cubic(10, k), 10, 1e-9);
  cr_assert_float_eq(cg_learn_cubic(10, k + 1), 10.4, 1e-9);
  cr_assert(isfinite(cg_learn_cubic(10, 1e30)));
  /* Slow start: + 1 / latency, latencies under 10 ms count as 10 ms. */
  cr_assert_float_eq(cg_learn_slow_start(2, 0.5), 4, 1e-9);
  cr_assert_float_eq(cg_learn_slow_start(2, 0), 102, 1e-9);
  /* Bounds: the floor, the configured rpm (times the margin), garbage. */
  cr_assert_float_eq(cg_learn_ceiling(&none), CG_LEARN_MAX_RPS, 1e-9);
  cr_assert_float_eq(cg_learn_ceiling(&capped), 600 * 0.97 / 60, 1e-9);
  cr_assert_float_eq(cg_learn_clamp(0, 100), CG_LEARN_FLOOR_RPS, 1e-12);
  cr_assert_float_eq(cg_learn_clamp(NAN, 100), CG_LEARN_FLOOR_RPS, 1e-12);
  cr_assert_float_eq(cg_learn_clamp(-5, 100), CG_LEARN_FLOOR_RPS, 1e-12);
  cr_assert_float_eq(cg_learn_clamp(INFINITY, 100), 100, 1e-12);
  cr_assert_float_eq(cg_learn_clamp(50, 9.7), 9.7, 1e-12);
}

Test(limiter, learn_one_cut_per_round_then_recovery) {
  struct cg_limits l = adaptive(0);
  int p = cg_limiter_pool(&st, "learn", &l), i;
  int64_t now = 1000 * SEC;
  double r0, r1;

  cg_limiter_learn_start(&st, p, &l);
  cr_assert_float_eq(cg_limiter_learned(&st, p, &l), CG_LEARN_START_RPS, 1e-9);
  st.pools[p].learn_rate = 20;
  /* 60 throttles of requests sent before the first cut's quiet period ends: one cut. */
  for (i = 0; i < 60; i++)
    cg_limiter_learn_throttle(&st, p, &l, now - SEC, now + i * MS);
  r0 = cg_limiter_learned(&st, p, &l);
  cr_assert_float_eq(r0, 14, 1e-9, "%g", r0);
  cg_limiter_learn_throttle(&st, p, &l, now + 100 * MS, now + 200 * MS);
  cr_assert_float_eq(cg_limiter_learned(&st, p, &l), 14, 1e-9);
  /* A request sent after the quiet period cuts again. */
  cg_limiter_learn_throttle(&st, p, &l, now + CG_LEARN_QUIET_NS + MS, now + 2 * SEC);
  cr_assert_float_eq(cg_limiter_learned(&st, p, &l), 14 * 0.7, 1e-9);
  /* Successes: CUBIC from W_max = 14, capped at twice the goodput (about 10/s here). */
  now += 2 * SEC;
  for (i = 0; i < 400; i++)
    cg_limiter_learn_success(&st, p, &l, 100 * MS, now + i * 25 * MS);
  r1 = cg_limiter_learned(&st, p, &l);
  cr_assert(r1 > 14 * 0.7 && r1 <= 2 * 40 + 1e-9, "%g", r1);
}

Test(limiter, learn_never_below_the_floor_nor_above_rpm) {
  struct cg_limits l = adaptive(120);
  int p = cg_limiter_pool(&st, "bounded", &l), i;
  int64_t now = 1000 * SEC;
  cg_limiter_learn_start(&st, p, &l);
  cr_assert_float_eq(cg_limiter_learned(&st, p, &l), 120 * 0.97 / 60, 1e-9);
  for (i = 0; i < 200; i++)
    cg_limiter_learn_throttle(&st, p, &l, now + i * SEC, now + i * SEC + 1);
  cr_assert_float_eq(cg_limiter_learned(&st, p, &l), CG_LEARN_FLOOR_RPS, 1e-12);
  for (i = 0; i < 20000; i++)
    cg_limiter_learn_success(&st, p, &l, MS, now + 300 * SEC + i * MS);
  cr_assert(cg_limiter_learned(&st, p, &l) <= 120 * 0.97 / 60 + 1e-9);
  /* Garbage in the file is clamped, never trusted. */
  st.pools[p].learn_rate = NAN;
  cr_assert_float_eq(cg_limiter_learned(&st, p, &l), CG_LEARN_FLOOR_RPS, 1e-12);
  st.pools[p].learn_rate = 1e300;
  cr_assert_float_eq(cg_limiter_learned(&st, p, &l), 120 * 0.97 / 60, 1e-9);
  /* Switched off: not applied. */
  l.adaptive = 0;
  cr_assert_float_eq(cg_limiter_learned(&st, p, &l), 0, 1e-12);
  cr_assert_eq(cg_limiter_learn_take(&st, p, &l, now), 0);
}

Test(limiter, learn_take_spaces_requests_without_reserving) {
  struct cg_limits l = adaptive(0);
  int p = cg_limiter_pool(&st, "take", &l);
  int64_t now = 1000 * SEC;
  cg_limiter_learn_start(&st, p, &l);
  st.pools[p].learn_wmax = 5; /* after a cut: no burst */
  st.pools[p].learn_rate = 4; /* 250 ms apart */
  cr_assert_eq(cg_limiter_learn_take(&st, p, &l, now), 0);
  cr_assert_eq(cg_limiter_learn_take(&st, p, &l, now), 250 * MS);
  cr_assert_eq(cg_limiter_learn_take(&st, p, &l, now + 100 * MS), 150 * MS); /* nothing taken */
  st.pools[p].learn_rate = 10; /* the rate rose: the next place is still 250 ms */
  cr_assert_eq(cg_limiter_learn_take(&st, p, &l, now + 250 * MS), 0);
  cr_assert_eq(cg_limiter_learn_take(&st, p, &l, now + 300 * MS), 50 * MS);
}

/* ---- giving back a reservation never sent (cg_limiter_unreserve; helper-63) ---- */

/* Reserve as reserve() does, keeping what it took. */
static int64_t reserve_took(int p, const struct cg_limits *l, int64_t tokens, int64_t now,
                            struct cg_limiter_resv *r) {
  int64_t w = -12345;
  cr_assert_eq(cg_limiter_reserve_took(&st, p, l, tokens, now, NO_MAX, &w, r), 0);
  return w;
}

/* A process cancels the calls it reserved for, last first or first first: every turn
 * comes back (a turn given back before the ones after it waits for them). */
Test(limiter, reservations_never_sent_are_given_back_in_any_order) {
  struct cg_limits l = limits(60, 1, 600, 10, 0);
  int order, i;
  for (order = 0; order < 2; order++) {
    int p = pool(order ? "b" : "a", &l);
    struct cg_limiter_resv r[4];
    for (i = 0; i < 4; i++)
      cr_assert_eq(reserve_took(p, &l, 10, NOW0, &r[i]), i * SEC);
    cr_assert_eq(r[3].took_req, SEC);
    cr_assert_eq(r[3].took_tok, SEC);
    /* Three cancelled before their turns (1, 2 and 3 s): the next call goes at 1 s. */
    for (i = 1; i < 4; i++) {
      int k = order ? 4 - i : i;
      cg_limiter_unreserve(&st, p, &r[k], NOW0 + k * SEC, NOW0 + SEC / 10);
    }
    cr_assert_eq(reserve(p, &l, 10, NOW0 + SEC / 10), SEC - SEC / 10, "order %d", order);
  }
}

/* A turn from the middle is not taken back while a later call sleeps until its own: a new
 * call would go beside that one (helper-65: two requests 1 ms apart, a provider 429). */
Test(limiter, a_turn_before_a_sleeping_call_is_not_taken_back) {
  struct cg_limits l = limits(60, 1, 0, 0, 0);
  int p = pool("a", &l);
  struct cg_limiter_resv a, b, c;
  cr_assert_eq(reserve_took(p, &l, 0, NOW0, &a), 0);
  cr_assert_eq(reserve_took(p, &l, 0, NOW0, &b), SEC);
  cr_assert_eq(reserve_took(p, &l, 0, NOW0, &c), 2 * SEC); /* another process's, asleep */
  cg_limiter_unreserve(&st, p, &b, NOW0 + SEC, NOW0 + SEC / 10);
  cr_assert_eq(reserve_took(p, &l, 0, NOW0 + SEC / 10, &a), 3 * SEC - SEC / 10);
}

Test(limiter, a_turn_that_came_is_spent) {
  struct cg_limits l = limits(60, 1, 0, 0, 0);
  int p = pool("a", &l);
  struct cg_limiter_resv r;
  cr_assert_eq(reserve_took(p, &l, 0, NOW0, &r), 0);
  cr_assert_eq(reserve_took(p, &l, 0, NOW0, &r), SEC);
  cr_assert_eq(r.took_tok, 0); /* no token limit: nothing taken there */
  /* Its turn (1 s) came: given back at 1.5 s it is not, the next waits to 2 s. */
  cg_limiter_unreserve(&st, p, &r, NOW0 + SEC, NOW0 + SEC + SEC / 2);
  cr_assert_eq(reserve(p, &l, 0, NOW0 + SEC + SEC / 2), SEC / 2);
}
