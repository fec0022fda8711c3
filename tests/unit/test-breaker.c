/* test-breaker.c - the shared circuit breaker (breaker.h) and its sliding window
 * (window.h) over a real state file: counting rules, failure-rate math, bucket rotation,
 * state transitions, the half-open probe's compare-and-swap, dead and overdue probes.
 *
 * Time is driven with explicit `now` values far from 0 (NOW0), so nothing depends on the
 * clock, except where a real process (fork) must hold the probe. */
#include "breaker.h"
#include "state.h"
#include "window.h"

#include "state-fixture.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOW0 (100000 * SEC)

CG_STATE_FIXTURE(breaker);

static struct cg_breaker_cfg cfg(double rate, long min, double window_s, double cooldown_s) {
  /* The rate rule alone, a fixed cooldown (no doubling, no jitter), no slow start: the
   * issue-12 rules have tests of their own below (cfg12). */
  struct cg_breaker_cfg c = {1, rate, min, window_s, cooldown_s, 7, 1, 0, cooldown_s, 0, 0};
  return c;
}

/* ---- counting rules and the failure-rate math (pure) ---- */

Test(breaker, counting_rules) {
  cr_assert_eq(cg_breaker_counts(CG_OUT_OK, 200, 0), 0);
  cr_assert_eq(cg_breaker_counts(CG_OUT_HTTP, 404, 0), 0, "a client error: the provider is up");
  cr_assert_eq(cg_breaker_counts(CG_OUT_HTTP, 400, 0), 0);
  cr_assert_eq(cg_breaker_counts(CG_OUT_HTTP, 429, 0), 1, "a 429 without a hint counts");
  cr_assert_eq(cg_breaker_counts(CG_OUT_HTTP, 429, 1), -1, "a hinted 429 is the limiter's");
  cr_assert_eq(cg_breaker_counts(CG_OUT_HTTP, 503, 1), 1, "only a 429's hint is special");
  cr_assert_eq(cg_breaker_counts(CG_OUT_HTTP, 500, 0), 1);
  cr_assert_eq(cg_breaker_counts(CG_OUT_HTTP, 503, 0), 1);
  cr_assert_eq(cg_breaker_counts(CG_OUT_HTTP, 599, 0), 1);
  cr_assert_eq(cg_breaker_counts(CG_OUT_CONNECT_REFUSED, 0, 0), 1);
  cr_assert_eq(cg_breaker_counts(CG_OUT_CONNECT_TIMEOUT, 0, 0), 1);
  cr_assert_eq(cg_breaker_counts(CG_OUT_DNS_ERROR, 0, 0), 1);
  cr_assert_eq(cg_breaker_counts(CG_OUT_TLS_ERROR, 0, 0), 1);
  cr_assert_eq(cg_breaker_counts(CG_OUT_FIRST_BYTE_TIMEOUT, 0, 0), 1);
  cr_assert_eq(cg_breaker_counts(CG_OUT_READ_TIMEOUT, 0, 0), 1);
  cr_assert_eq(cg_breaker_counts(CG_OUT_RESET_AFTER_SEND, 0, 0), 1);
  cr_assert_eq(cg_breaker_counts(CG_OUT_PARTIAL_RESPONSE, 0, 0), 1);
  cr_assert_eq(cg_breaker_counts(CG_OUT_STREAM_ERROR, 200, 0), 1, "overloaded mid-stream");
  cr_assert_eq(cg_breaker_counts(CG_OUT_ABORTED_BY_HOST, 0, 0), -1);
  cr_assert_eq(cg_breaker_counts(CG_OUT_CIRCUIT_OPEN, 0, 0), -1);
  cr_assert_eq(cg_breaker_counts(CG_OUT_LOCAL_RATE_LIMITED, 0, 0), -1);
  cr_assert_eq(cg_breaker_counts(CG_OUT_RETRY_BUDGET_EXHAUSTED, 0, 0), -1);
  cr_assert_eq(cg_breaker_counts(CG_OUT_DEADLINE, 0, 0), -1);
  cr_assert_eq(cg_breaker_counts(CG_OUT_CURL_ERROR, 0, 0), -1);
  cr_assert_eq(cg_breaker_counts((enum cg_outcome) 999, 0, 0), -1);
}

Test(breaker, failure_rate_math) {
  struct cg_breaker_cfg c = cfg(0.5, 20, 60, 30);
  cr_assert(cg_breaker_tripped(10, 10, &c), "20 requests, 50 %");
  cr_assert_not(cg_breaker_tripped(11, 9, &c), "45 %");
  cr_assert_not(cg_breaker_tripped(0, 19, &c), "100 % but only 19 requests");
  cr_assert(cg_breaker_tripped(0, 20, &c));
  cr_assert_not(cg_breaker_tripped(0, 0, &c));
  c = cfg(1.0, 1, 60, 30);
  cr_assert(cg_breaker_tripped(0, 1, &c));
  cr_assert_not(cg_breaker_tripped(1, 99, &c), "99 % is below 100 %");
}

/* ---- the window ---- */

Test(breaker, window_buckets_rotate) {
  uint64_t *b = st.breakers[0].buckets;
  int64_t width = cg_window_width(20 * SEC); /* 1 s buckets */
  uint32_t a, f;

  cr_assert_eq(width, SEC);
  cg_window_add(b, NOW0, width, 1, 0);
  cg_window_add(b, NOW0 + 500 * MS, width, 0, 1);
  cg_window_add(b, NOW0 + 10 * SEC, width, 0, 2);
  cg_window_sum(b, NOW0 + 10 * SEC, width, &a, &f);
  cr_assert_eq(a, 1);
  cr_assert_eq(f, 3);
  /* 19 buckets later the first one is still inside, 20 later it is gone. */
  cg_window_sum(b, NOW0 + 19 * SEC, width, &a, &f);
  cr_assert_eq(a, 1);
  cr_assert_eq(f, 3);
  cg_window_sum(b, NOW0 + 20 * SEC, width, &a, &f);
  cr_assert_eq(a, 0);
  cr_assert_eq(f, 2);
  /* A write to a stale bucket resets it in the same CAS. */
  cg_window_add(b, NOW0 + 20 * SEC, width, 0, 1);
  cg_window_sum(b, NOW0 + 20 * SEC, width, &a, &f);
  cr_assert_eq(a, 0);
  cr_assert_eq(f, 3);
  cg_window_sum(b, NOW0 + 100 * SEC, width, &a, &f);
  cr_assert_eq(a + f, 0);
}

Test(breaker, window_counts_saturate) {
  uint64_t *b = st.breakers[0].buckets;
  int64_t width = cg_window_width(20 * SEC);
  uint32_t a, f;
  cg_window_add(b, NOW0, width, 70000, 1);
  cg_window_add(b, NOW0, width, 5, 0);
  cg_window_sum(b, NOW0, width, &a, &f);
  cr_assert_eq(a, CG_WINDOW_COUNT_MAX);
  cr_assert_eq(f, 1);
}

Test(breaker, window_width_floor) {
  cr_assert_eq(cg_window_width(20 * SEC), SEC);
  cr_assert_eq(cg_window_width(1 * MS), MS, "never below 1 ms");
}

/* ---- transitions ---- */

static void fail_n(const struct cg_breaker_cfg *c, int n, int64_t now) {
  int i;
  for (i = 0; i < n; i++)
    cg_breaker_report(&st, 0, c, 1, 0, now);
}

Test(breaker, opens_at_threshold_and_fails_fast) {
  struct cg_breaker_cfg c = cfg(0.5, 4, 60, 30);
  int64_t next;
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, NOW0, NOW0 + SEC, &next), CG_BREAKER_ALLOW);
  cg_breaker_report(&st, 0, &c, 0, 0, NOW0);
  cg_breaker_report(&st, 0, &c, 0, 0, NOW0);
  fail_n(&c, 1, NOW0);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_CLOSED, "1 of 3: below min_requests");
  cr_assert_eq(cg_breaker_report(&st, 0, &c, 1, 0, NOW0 + MS), 1, "2 of 4 failed: opens");
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_OPEN);
  cr_assert_eq(st.breakers[0].opened, 1);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, NOW0 + SEC, NOW0 + 2 * SEC, &next), CG_BREAKER_REJECT);
  /* The cooldown ends 30 s after it opened (ms resolution, rounded up). */
  cr_assert_geq(next, NOW0 + MS + 30 * SEC);
  cr_assert_leq(next, NOW0 + 2 * MS + 30 * SEC);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, NOW0 + 29 * SEC, NOW0 + 30 * SEC, &next),
               CG_BREAKER_REJECT);
  cr_assert_eq(st.breakers[0].rejected, 2);
  /* Reports of calls still in flight while open change nothing. */
  fail_n(&c, 5, NOW0 + 2 * SEC);
  cr_assert_eq(st.breakers[0].opened, 1);
}

Test(breaker, uncounted_outcomes_do_not_open) {
  struct cg_breaker_cfg c = cfg(0.5, 2, 60, 30);
  int i;
  for (i = 0; i < 10; i++)
    cg_breaker_report(&st, 0, &c, -1, 0, NOW0);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_CLOSED);
}

Test(breaker, old_failures_leave_the_window) {
  struct cg_breaker_cfg c = cfg(0.5, 4, 20, 30);
  fail_n(&c, 3, NOW0);
  fail_n(&c, 1, NOW0 + 25 * SEC); /* the first three are older than the window */
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_CLOSED);
  fail_n(&c, 3, NOW0 + 26 * SEC);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_OPEN);
}

/* Open the breaker at NOW0 with cooldown 30 s; returns the first instant a probe may go. */
static int64_t open_it(const struct cg_breaker_cfg *c) {
  int64_t next;
  fail_n(c, (int) c->min_requests, NOW0);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_OPEN);
  cr_assert_eq(cg_breaker_admit(&st, 0, c, NOW0, NOW0, &next), CG_BREAKER_REJECT);
  return next;
}

Test(breaker, half_open_probe_success_closes) {
  struct cg_breaker_cfg c = cfg(0.5, 4, 60, 30);
  int64_t t = open_it(&c), next;
  uint32_t ok, f;

  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t, t + 5 * SEC, &next), CG_BREAKER_PROBE);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_HALF_OPEN);
  cr_assert_eq(st.breakers[0].probe_owner >> 32, (uint64_t) getpid());
  /* Everybody else fails fast until the probe reports or its deadline passes. */
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t + SEC, t + 9 * SEC, &next), CG_BREAKER_REJECT);
  cr_assert_eq(next, t + 5 * SEC);
  cg_breaker_report(&st, 0, &c, 0, 1, t + 2 * SEC);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_CLOSED);
  cg_window_sum(st.breakers[0].buckets, t + 2 * SEC, cg_window_width(60 * SEC), &ok, &f);
  cr_assert_eq(ok + f, 0, "closing starts an empty window");
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t + 3 * SEC, t + 4 * SEC, &next), CG_BREAKER_ALLOW);
  cr_assert_eq(st.breakers[0].probes, 1);
}

Test(breaker, half_open_probe_failure_reopens) {
  struct cg_breaker_cfg c = cfg(0.5, 4, 60, 30);
  int64_t t = open_it(&c), next;

  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t, t + 5 * SEC, &next), CG_BREAKER_PROBE);
  cr_assert_eq(cg_breaker_report(&st, 0, &c, 1, 1, t + SEC), 1);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_OPEN);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t + 2 * SEC, t + 3 * SEC, &next), CG_BREAKER_REJECT);
  cr_assert_geq(next, t + 31 * SEC, "a new cooldown from the probe's failure");
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, next, next + SEC, &next), CG_BREAKER_PROBE);
  cr_assert_eq(st.breakers[0].opened, 2);
}

/* An early probe (cg_breaker_early): while open and cooling down, a call whose deadline
 * cannot see the next probe takes it; a failed one leaves the cooldown where it was. */
Test(breaker, early_probe_keeps_the_cooldown) {
  struct cg_breaker_cfg c = cfg(0.5, 4, 60, 30);
  int64_t t = open_it(&c), next, until = 0, until2 = 0;
  int64_t now = NOW0 + 10 * SEC; /* 20 s of the cooldown left */

  cr_assert_eq(cg_breaker_early(&st, 0, &c, now, now + 2 * SEC, &until), 1);
  cr_assert_eq(until, t, "the cooldown's end, kept by the caller");
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_HALF_OPEN);
  cr_assert_eq(st.breakers[0].probe_owner >> 32, (uint64_t) getpid());
  /* One probe at a time: the others wait for it, none takes another.  Its hold lasts a
   * second past the call's deadline: the attempt ends at that deadline and reports a
   * moment later, and a waiter must not take it over as a regular probe meanwhile. */
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, now + SEC, now + 9 * SEC, &next), CG_BREAKER_REJECT);
  cr_assert_eq(next, now + 3 * SEC);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, now + 2 * SEC + 500 * MS, now + 9 * SEC, &next),
               CG_BREAKER_REJECT);
  cr_assert_eq(cg_breaker_early(&st, 0, &c, now + SEC, now + 3 * SEC, &until2), 0);
  cr_assert_eq(cg_breaker_wait_ok(&st, 0, now + SEC, 0), 1, "a probe out may be waited for");
  /* Failed: open again until t, neither doubled nor counted as an opening. */
  cg_breaker_early_end(&st, 0, until);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_OPEN);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, now + SEC, now + 9 * SEC, &next), CG_BREAKER_REJECT);
  cr_assert_eq(next, t);
  cr_assert_eq(st.breakers[0].opened, 1);
  cr_assert_eq(st.breakers[0].probes, 1);
  cr_assert_eq(st.breakers[0].probe_fails, 0);
  /* Another early probe: not within CG_BREAKER_EARLY_GAP_MS of the last one's start. */
  cr_assert_eq(cg_breaker_early(&st, 0, &c, now + 900 * MS, now + 2 * SEC, &until2), 0);
  cr_assert_eq(cg_breaker_early(&st, 0, &c, now + 1100 * MS, now + 2 * SEC, &until2), 1);
  cr_assert_eq(until2, t);
  cg_breaker_early_end(&st, 0, until2);
  /* The regular probe goes at t, as planned. */
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t, t + SEC, &next), CG_BREAKER_PROBE);
}

Test(breaker, early_probe_success_closes) {
  struct cg_breaker_cfg c = cfg(0.5, 4, 60, 30);
  int64_t until = 0, now = NOW0 + SEC, next;

  (void) open_it(&c);
  cr_assert_eq(cg_breaker_early(&st, 0, &c, now, now + 2 * SEC, &until), 1);
  cg_breaker_report(&st, 0, &c, 0, 1, now + MS);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_CLOSED);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, now + 2 * MS, now + SEC, &next), CG_BREAKER_ALLOW);
}

Test(breaker, early_probe_only_while_cooling_down) {
  struct cg_breaker_cfg c = cfg(0.5, 4, 60, 30);
  int64_t until = 0, t, next;

  cr_assert_eq(cg_breaker_early(&st, 0, &c, NOW0, NOW0 + SEC, &until), 0, "closed");
  t = open_it(&c);
  /* The cooldown is over: the regular probe (cg_breaker_admit), not an early one. */
  cr_assert_eq(cg_breaker_early(&st, 0, &c, t, t + SEC, &until), 0);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t, t + SEC, &next), CG_BREAKER_PROBE);
  cr_assert_eq(cg_breaker_early(&st, 0, &c, t + MS, t + SEC, &until), 0, "a probe out");
  c.enabled = 0;
  cr_assert_eq(cg_breaker_early(&st, 0, &c, t + MS, t + SEC, &until), 0, "disabled");
  cr_assert_eq(until, 0);
}

Test(breaker, probe_not_made_is_given_back) {
  struct cg_breaker_cfg c = cfg(0.5, 4, 60, 30);
  int64_t t = open_it(&c), next;
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t, t + 5 * SEC, &next), CG_BREAKER_PROBE);
  cg_breaker_release(&st, 0);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_OPEN);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t + MS, t + 5 * SEC, &next), CG_BREAKER_PROBE);
  /* An uncounted result (the host aborted) gives the probe back too. */
  cg_breaker_report(&st, 0, &c, -1, 1, t + 2 * MS);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_OPEN);
}

Test(breaker, overdue_probe_is_taken_over) {
  struct cg_breaker_cfg c = cfg(0.5, 4, 60, 30);
  int64_t t = open_it(&c), next;
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t, t + 5 * SEC, &next), CG_BREAKER_PROBE);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t + 4 * SEC, t + 9 * SEC, &next), CG_BREAKER_REJECT);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t + 5 * SEC, t + 9 * SEC, &next), CG_BREAKER_PROBE);
  cr_assert_eq(st.breakers[0].probes, 2);
}

Test(breaker, probe_deadline_is_capped) {
  struct cg_breaker_cfg c = cfg(0.5, 4, 60, 30);
  int64_t t = open_it(&c), next;
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t, t + 3600 * SEC, &next), CG_BREAKER_PROBE);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t + SEC, t + SEC, &next), CG_BREAKER_REJECT);
  cr_assert_eq(next, t + (int64_t) CG_BREAKER_PROBE_MAX_MS * MS);
}

/* Once the pool's answer time is known (cg_breaker_note_ok), a probe holds half-open for
 * four times what an attempt needs plus a second, at least CG_BREAKER_STALL_MIN_MS: a
 * stalled probe is taken over then, not after its call's whole deadline. */
Test(breaker, stalled_probe_lease_follows_the_answer_time) {
  struct cg_breaker_cfg c = cfg(0.5, 4, 60, 30);
  int64_t t = open_it(&c), next;
  cr_assert_eq(cg_breaker_probe_max_ms(0), CG_BREAKER_PROBE_MAX_MS, "none seen: as before");
  cr_assert_eq(cg_breaker_probe_max_ms(20), CG_BREAKER_STALL_MIN_MS);
  cr_assert_eq(cg_breaker_probe_max_ms(800), 5000);
  cr_assert_eq(cg_breaker_probe_max_ms(10000), CG_BREAKER_PROBE_MAX_MS);
  cr_assert_eq(cg_breaker_probe_max_ms(600000), CG_BREAKER_PROBE_MAX_MS);
  cg_breaker_note_ok(&st, 0, 800);
  /* A probe whose own deadline (1 s) ends it before its lease says nothing of the answer
   * time: taken over at that deadline, the kept time stays. */
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t - 2 * SEC, t - SEC, &next), CG_BREAKER_REJECT);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t, t + SEC, &next), CG_BREAKER_PROBE);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t + SEC, t + 60 * SEC, &next), CG_BREAKER_PROBE);
  cr_assert_eq(st.breakers[0].ok_ms, 800);
  cg_breaker_report(&st, 0, &c, -1, 1, t + SEC); /* given back unused: open, probe due */
  t += SEC;
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t, t + 60 * SEC, &next), CG_BREAKER_PROBE);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t + SEC, t + 60 * SEC, &next), CG_BREAKER_REJECT);
  cr_assert_eq(next, t + 5 * SEC);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t + 5 * SEC, t + 60 * SEC, &next),
               CG_BREAKER_PROBE, "taken over");
  cr_assert_eq(st.breakers[0].probes, 4);
  /* The taker found the kept time raised to the lease that ran out, and holds longer. */
  cr_assert_eq(st.breakers[0].ok_ms, 5000);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t + 6 * SEC, t + 60 * SEC, &next), CG_BREAKER_REJECT);
  cr_assert_eq(next, t + 5 * SEC + 26 * SEC);
  /* Its answer: a success closes the breaker as any probe's. */
  cg_breaker_report(&st, 0, &c, 0, 1, t + 5 * SEC + 30 * MS);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_CLOSED);
}

Test(breaker, dead_probe_holder_is_released) {
  struct cg_breaker_cfg c = cfg(0.5, 4, 60, 30);
  int64_t t = open_it(&c), next;
  int status;
  pid_t child = fork();

  cr_assert_geq(child, 0);
  if (child == 0)
    _exit(cg_breaker_admit(&st, 0, &c, t, t + 20 * SEC, &next) == CG_BREAKER_PROBE ? 0 : 1);
  cr_assert_eq(waitpid(child, &status, 0), child);
  cr_assert_eq(WEXITSTATUS(status), 0, "the child took the probe");
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_HALF_OPEN);
  /* Long before its deadline: the holder is gone, so the next caller probes. */
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t + SEC, t + 2 * SEC, &next), CG_BREAKER_PROBE);
  cr_assert_eq(st.breakers[0].probe_owner >> 32, (uint64_t) getpid());
}

/* A parent that SIGKILLs a stalled probe holder and does not reap it: the zombie still
 * answers kill(pid, 0), yet the probe goes to the next caller (review 6, item 4). */
Test(breaker, zombie_probe_holder_is_released) {
  struct cg_breaker_cfg c = cfg(0.5, 4, 60, 30);
  int64_t t = open_it(&c), next;
  int fds[2], status;
  char ok = 0;
  pid_t child;

  cr_assert_eq(pipe(fds), 0);
  child = fork();
  cr_assert_geq(child, 0);
  if (child == 0) {
    char r = cg_breaker_admit(&st, 0, &c, t, t + 20 * SEC, &next) == CG_BREAKER_PROBE;
    if (write(fds[1], &r, 1) != 1)
      _exit(1);
    for (;;)
      pause(); /* the probe stalls */
  }
  cr_assert_eq(read(fds[0], &ok, 1), 1);
  cr_assert_eq(ok, 1, "the child took the probe");
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t + SEC, t + 2 * SEC, &next), CG_BREAKER_REJECT,
               "a live probe keeps it");
  kill(child, SIGKILL);
  for (int i = 0; i < 200 && cg_proc_gone(child, 0, 0) == 0; i++)
    usleep(10000); /* bounded: until the kernel made it a zombie */
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t + SEC, t + 2 * SEC, &next), CG_BREAKER_PROBE,
               "the zombie's probe is taken over");
  cr_assert_eq(waitpid(child, &status, 0), child);
  close(fds[0]);
  close(fds[1]);
}

Test(breaker, disabled_lets_everything_through) {
  struct cg_breaker_cfg c = cfg(0.5, 1, 60, 30);
  int64_t next;
  c.enabled = 0;
  fail_n(&c, 50, NOW0);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_CLOSED);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, NOW0, NOW0, &next), CG_BREAKER_ALLOW);
}

/* ---- exactly one probe among racing threads ---- */

static struct cg_breaker_cfg race_cfg;
static int64_t race_t;
static pthread_barrier_t race_barrier;
static int race_probes;

static void *racer(void *arg) {
  int64_t next;
  int i, mine = 0;
  (void) arg;
  pthread_barrier_wait(&race_barrier);
  for (i = 0; i < 100; i++)
    mine += cg_breaker_admit(&st, 0, &race_cfg, race_t + i, race_t + 10 * SEC, &next) ==
            CG_BREAKER_PROBE;
  __atomic_fetch_add(&race_probes, mine, __ATOMIC_RELAXED);
  return NULL;
}

Test(breaker, one_probe_among_racers) {
  pthread_t t[8];
  int i;
  race_cfg = cfg(0.5, 4, 60, 30);
  race_t = open_it(&race_cfg);
  pthread_barrier_init(&race_barrier, NULL, 8);
  for (i = 0; i < 8; i++)
    pthread_create(&t[i], NULL, racer, NULL);
  for (i = 0; i < 8; i++)
    pthread_join(t[i], NULL);
  pthread_barrier_destroy(&race_barrier);
  cr_assert_eq(race_probes, 1, "%d probes from 8 threads x 100 tries", race_probes);
}

Test(breaker, view_for_stat) {
  struct cg_breaker_cfg c = cfg(0.5, 4, 60, 30);
  struct cg_breaker_view v;
  cg_breaker_configure(&st, 0, &c);
  cg_breaker_report(&st, 0, &c, 0, 0, NOW0);
  fail_n(&c, 3, NOW0);
  cg_breaker_view(&st, 0, NOW0 + 10 * SEC, &v);
  cr_assert_eq(v.state, CG_BREAKER_OPEN);
  cr_assert_eq(v.ok, 1);
  cr_assert_eq(v.failed, 3);
  cr_assert_eq(v.min_requests, 4);
  cr_assert_eq(v.window_ns, 60 * SEC);
  cr_assert_geq(v.next_probe_ns, 20 * SEC);
  cr_assert_leq(v.next_probe_ns, 20 * SEC + MS);
  cr_assert_str_eq(cg_breaker_state_name(v.state), "open");
}

/* ---- issue 12: consecutive failures, doubling probes, Retry-After floor, slow start ---- */

static struct cg_breaker_cfg cfg12(void) {
  /* The library's defaults, without jitter so that times are exact. */
  struct cg_breaker_cfg c = {1, 0.5, 10, 10, 2, 7, 1, 5, 60, 3, 0};
  return c;
}

Test(breaker, opens_on_consecutive_failures_despite_old_successes) {
  struct cg_breaker_cfg c = cfg12();
  int i;
  for (i = 0; i < 100; i++) /* a window full of successes */
    cg_breaker_report(&st, 0, &c, 0, 0, NOW0);
  fail_n(&c, 4, NOW0 + SEC);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_CLOSED, "4 in a row: not yet");
  cr_assert_eq(cg_breaker_report(&st, 0, &c, 1, 0, NOW0 + SEC), 1, "the 5th opens");
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_OPEN);
}

Test(breaker, a_success_resets_the_run) {
  struct cg_breaker_cfg c = cfg12();
  int i;
  for (i = 0; i < 50; i++) {
    fail_n(&c, 4, NOW0 + i * SEC);
    cg_breaker_report(&st, 0, &c, 0, 0, NOW0 + i * SEC);
  }
  /* 4 of 5 failed, far over 50 %: the rate rule opens it, not the run. */
  cr_assert_eq(st.breakers[0].consecutive, 0);
  c.failure_rate = 1;
  cg_window_clear(st.breakers[0].buckets);
  st.breakers[0].word = 0;
  for (i = 0; i < 20; i++) {
    fail_n(&c, 4, NOW0 + 100 * SEC + i * SEC);
    cg_breaker_report(&st, 0, &c, 0, 0, NOW0 + 100 * SEC + i * SEC);
  }
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_CLOSED, "never 5 in a row");
}

Test(breaker, answers_sent_before_the_run_do_not_end_it) {
  struct cg_breaker_cfg c = cfg12();
  int i;
  fail_n(&c, 1, NOW0 + SEC);
  for (i = 0; i < 20; i++) /* requests sent before the outage, answered during it */
    cg_breaker_report_at(&st, 0, &c, 0, 0, NOW0 + SEC + i * MS, 0, NOW0);
  cr_assert_eq(st.breakers[0].consecutive, 1);
  fail_n(&c, 3, NOW0 + 2 * SEC);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_CLOSED);
  cr_assert_eq(cg_breaker_report(&st, 0, &c, 1, 0, NOW0 + 2 * SEC), 1, "5 in a row");
  st.breakers[0].word = 0;
  fail_n(&c, 2, NOW0 + 3 * SEC);
  cg_breaker_report_at(&st, 0, &c, 0, 0, NOW0 + 4 * SEC, 0, NOW0 + 3 * SEC + MS);
  cr_assert_eq(st.breakers[0].consecutive, 0, "sent after the run began: it ends it");
}

Test(breaker, probe_interval_doubles_to_the_cap) {
  struct cg_breaker_cfg c = cfg12();
  int64_t next, t;
  int k;
  fail_n(&c, 5, NOW0);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, NOW0, NOW0, &next), CG_BREAKER_REJECT);
  cr_assert_leq(next - NOW0, 2 * SEC + MS, "the first probe goes after 2 s");
  cr_assert_geq(next - NOW0, 2 * SEC);
  t = next;
  for (k = 1; k <= 8; k++) {
    int64_t want = (int64_t) 2 << k;
    if (want > 60)
      want = 60;
    cr_assert_eq(cg_breaker_admit(&st, 0, &c, t, t + SEC, &next), CG_BREAKER_PROBE);
    cg_breaker_report(&st, 0, &c, 1, 1, t + 10 * MS);
    cr_assert_eq(cg_breaker_admit(&st, 0, &c, t + 20 * MS, t + SEC, &next), CG_BREAKER_REJECT);
    cr_assert_geq(next - (t + 10 * MS), want * SEC, "probe %d: %lld s", k, (long long) want);
    cr_assert_leq(next - (t + 10 * MS), want * SEC + MS);
    t = next;
  }
  /* A success closes it and the next opening starts again from 2 s. */
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t, t + SEC, &next), CG_BREAKER_PROBE);
  cg_breaker_report(&st, 0, &c, 0, 1, t + 10 * MS);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_CLOSED);
  cr_assert_eq(st.breakers[0].probe_fails, 0);
  fail_n(&c, 5, t + 10 * SEC);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t + 10 * SEC, t + 10 * SEC, &next),
               CG_BREAKER_REJECT);
  cr_assert_leq(next - (t + 10 * SEC), 2 * SEC + MS);
}

Test(breaker, jitter_stays_within_twenty_percent) {
  struct cg_breaker_cfg c = cfg12();
  c.jitter = 0.2;
  cr_assert_eq(cg_breaker_interval_ns(&c, 0, 0), (int64_t) (1.6 * SEC));
  cr_assert_eq(cg_breaker_interval_ns(&c, 0, 1), (int64_t) (2.4 * SEC));
  cr_assert_eq(cg_breaker_interval_ns(&c, 1, 0.5), 4 * SEC);
  cr_assert_eq(cg_breaker_interval_ns(&c, 40, 0.5), 60 * SEC, "capped, no overflow");
  c.cooldown_max_s = 1; /* a cap below the first interval: the first interval */
  cr_assert_eq(cg_breaker_interval_ns(&c, 3, 0.5), 2 * SEC);
}

Test(breaker, retry_after_of_a_failed_probe_is_a_floor) {
  struct cg_breaker_cfg c = cfg12();
  int64_t next, t;
  fail_n(&c, 5, NOW0);
  cg_breaker_admit(&st, 0, &c, NOW0, NOW0, &t);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t, t + SEC, &next), CG_BREAKER_PROBE);
  cg_breaker_report_hint(&st, 0, &c, 1, 1, t, 20 * SEC);
  cg_breaker_admit(&st, 0, &c, t + MS, t + SEC, &next);
  cr_assert_geq(next - t, 20 * SEC, "Retry-After: 20 beats the doubled 4 s");
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, next, next + SEC, &t), CG_BREAKER_PROBE);
  cg_breaker_report_hint(&st, 0, &c, 1, 1, next, SEC);
  cg_breaker_admit(&st, 0, &c, next + MS, next + SEC, &t);
  cr_assert_geq(t - next, 8 * SEC, "a shorter hint does not shorten the doubling");
  cr_assert_leq(t - next, 8 * SEC + MS);
}

Test(breaker, slow_start_releases_doubling_batches) {
  struct cg_breaker_cfg c = cfg12();
  int64_t next, t, step = 3 * SEC / CG_BREAKER_RAMP_STEPS, at[70];
  int i;
  fail_n(&c, 5, NOW0);
  cg_breaker_admit(&st, 0, &c, NOW0, NOW0, &t);
  cr_assert_eq(cg_breaker_admit(&st, 0, &c, t, t + SEC, &next), CG_BREAKER_PROBE);
  cg_breaker_report(&st, 0, &c, 0, 1, t);
  for (i = 2; i < 70; i++)
    at[i] = cg_breaker_ramp(&st, 0, &c, t);
  cr_assert_eq(at[2], t + step, "the probe was the first: the 2nd goes one step later");
  cr_assert_eq(at[3], t + step + step / 2);
  cr_assert_eq(at[4], t + 2 * step);
  cr_assert_eq(at[8], t + 3 * step);
  cr_assert_eq(at[64], t + 3 * SEC, "64 by the end of the ramp");
  cr_assert_eq(at[69], t + 3 * SEC, "then no more holding");
  for (i = 3; i < 70; i++)
    cr_assert_geq(at[i], at[i - 1], "in ticket order");
  cr_assert_eq(cg_breaker_ramp(&st, 0, &c, t + 3 * SEC), 0, "over: calls go at once");
  c.ramp_s = 0;
  cr_assert_eq(cg_breaker_ramp(&st, 0, &c, t + SEC), 0, "ramp_s 0: no slow start");
}

Test(breaker, park_returns_on_a_probe_result) {
  struct cg_breaker_cfg c = cfg12();
  int64_t t, next, t0;
  uint32_t seq;
  pid_t kid;
  int status;
  fail_n(&c, 5, NOW0);
  cg_breaker_admit(&st, 0, &c, NOW0, NOW0, &t);
  seq = cg_breaker_seq(&st, 0);
  kid = fork();
  if (kid == 0) {
    usleep(200000);
    cr_assert_eq(cg_breaker_admit(&st, 0, &c, t, t + SEC, &next), CG_BREAKER_PROBE);
    cg_breaker_report(&st, 0, &c, 0, 1, t);
    _exit(0);
  }
  t0 = cg_state_now();
  cg_breaker_park(&st, 0, seq, 5 * SEC);
  cr_assert_lt(cg_state_now() - t0, 3 * SEC, "woken by the probe's end, not the timeout");
  waitpid(kid, &status, 0);
  cr_assert_eq(cg_breaker_state(&st, 0), CG_BREAKER_CLOSED);
  cr_assert_neq(cg_breaker_seq(&st, 0), seq);
}

Test(breaker, wait_ok_sees_the_next_probe) {
  struct cg_breaker_cfg c = cfg12();
  int64_t t;
  cr_assert(cg_breaker_wait_ok(&st, 0, NOW0, 0), "closed");
  fail_n(&c, 5, NOW0);
  cg_breaker_admit(&st, 0, &c, NOW0, NOW0, &t);
  cr_assert_not(cg_breaker_wait_ok(&st, 0, NOW0, SEC), "1 s left, probe in 2 s: fail fast");
  cr_assert(cg_breaker_wait_ok(&st, 0, NOW0, 3 * SEC));
}

/* ---- configuration: defaults, environment, pools (config.c) ---- */

static const char *cfg_env[16][2];

static const char *cfg_getenv(const char *name) {
  int i;
  for (i = 0; i < 16 && cfg_env[i][0]; i++)
    if (strcmp(cfg_env[i][0], name) == 0)
      return cfg_env[i][1];
  return NULL;
}

static void cfg_env_set(int i, const char *name, const char *value) {
  cfg_env[i][0] = name;
  cfg_env[i][1] = value;
  cfg_env[i + 1][0] = NULL;
}

static char cfg_path[64];

static void cfg_file(const char *text) {
  FILE *f;
  snprintf(cfg_path, sizeof(cfg_path), "/tmp/cg-test-brkcfg-XXXXXX");
  cr_assert_geq(close(mkstemp(cfg_path)), 0);
  cr_assert_not_null(f = fopen(cfg_path, "w"));
  fputs(text, f);
  fclose(f);
}

TestSuite(breaker_config, .timeout = 10);

Test(breaker_config, defaults_from_the_issue) {
  struct cg_config c;
  struct cg_pool_cfg scratch;
  const struct cg_pool_cfg *p;
  cfg_env[0][0] = NULL;
  cr_assert_eq(cg_config_load(&c, cfg_getenv), 0);
  p = cg_config_pool(&c, "api.example.com", &scratch);
  cr_assert_eq(p->breaker.enabled, 1);
  cr_assert_float_eq(p->breaker.failure_rate, 0.5, 1e-12);
  cr_assert_eq(p->breaker.min_requests, 10);
  cr_assert_float_eq(p->breaker.window_s, 10, 1e-12);
  cr_assert_float_eq(p->breaker.cooldown_s, 1, 1e-12);
  cr_assert_eq(p->breaker.open_code, 7);
  cr_assert_eq(p->breaker.open_wait, 1, "issue 12: hold, do not fail");
  cr_assert_eq(p->breaker.consecutive, 5);
  cr_assert_float_eq(p->breaker.cooldown_max_s, 2, 1e-12);
  cr_assert_float_eq(p->breaker.ramp_s, 3, 1e-12);
  cr_assert_eq(p->budget.enabled, 1);
  cr_assert_float_eq(p->budget.ratio, 0.2, 1e-12);
  cr_assert_float_eq(p->budget.min_per_s, 1, 1e-12);
  cr_assert_float_eq(p->budget.window_s, 10, 1e-12);
  cr_assert_eq(p->budget.max_concurrent, 16);
  cg_config_free(&c);
}

Test(breaker_config, environment_and_malformed_values) {
  struct cg_config c;
  cfg_env_set(0, "CURLGUARD_BREAKER", "off");
  cfg_env_set(1, "CURLGUARD_BREAKER_COOLDOWN_S", "2.5");
  cfg_env_set(2, "CURLGUARD_BREAKER_MIN_REQUESTS", "4.5");   /* not whole: default */
  cfg_env_set(3, "CURLGUARD_RETRY_BUDGET_RATIO", "-1");      /* out of range: default */
  cfg_env_set(4, "CURLGUARD_RETRY_BUDGET_MAX_CONCURRENT", "65"); /* over the slots */
  cfg_env_set(5, "CURLGUARD_RETRY_BUDGET", "maybe");
  cr_assert_eq(cg_config_load(&c, cfg_getenv), 4);
  cr_assert_eq(c.breaker.enabled, 0);
  cr_assert_float_eq(c.breaker.cooldown_s, 2.5, 1e-12);
  cr_assert_eq(c.breaker.min_requests, 10);
  cr_assert_float_eq(c.budget.ratio, 0.2, 1e-12);
  cr_assert_eq(c.budget.max_concurrent, 16);
  cr_assert_eq(c.budget.enabled, 1);
  cg_config_free(&c);
}

Test(breaker_config, pools_take_their_own_keys_and_inherit_the_rest) {
  struct cg_config c;
  struct cg_pool_cfg scratch;
  const struct cg_pool_cfg *a, *b, *d;
  cfg_file("{\"breaker_cooldown_s\": 9, \"retry_budget\": {\"ratio\": 0.5},"
           " \"pools\": ["
           "{\"name\": \"a\", \"hosts\": [\"a.example\"],"
           " \"breaker\": {\"min_requests\": 5, \"failure_rate\": 0.8, \"open_code\": 6},"
           " \"retry_budget\": {\"max_concurrent_retries\": 2, \"window_s\": 3}},"
           "{\"name\": \"b\", \"hosts\": [\"b.example\"], \"breaker\": false,"
           " \"retry_budget\": {\"ratio\": \"x\", \"bogus\": 1}}]}");
  cfg_env_set(0, "CURLGUARD_CONFIG", cfg_path);
  cfg_env_set(1, "CURLGUARD_BREAKER_WINDOW_S", "30");
  cr_assert_eq(cg_config_load(&c, cfg_getenv), 2, "b's bad ratio and unknown key");
  unlink(cfg_path);
  a = cg_config_pool(&c, "a.example", &scratch);
  cr_assert_eq(a->breaker.min_requests, 5);
  cr_assert_float_eq(a->breaker.failure_rate, 0.8, 1e-12);
  cr_assert_eq(a->breaker.open_code, 6);
  cr_assert_float_eq(a->breaker.cooldown_s, 9, 1e-12, "from the top level of the file");
  cr_assert_float_eq(a->breaker.window_s, 30, 1e-12, "from the environment");
  cr_assert_eq(a->breaker.enabled, 1);
  cr_assert_eq(a->budget.max_concurrent, 2);
  cr_assert_float_eq(a->budget.window_s, 3, 1e-12);
  cr_assert_float_eq(a->budget.ratio, 0.5, 1e-12, "top-level retry_budget object");
  b = cg_config_pool(&c, "b.example", &scratch);
  cr_assert_eq(b->breaker.enabled, 0, "\"breaker\": false");
  cr_assert_float_eq(b->budget.ratio, 0.5, 1e-12, "a bad value keeps the inherited one");
  d = cg_config_pool(&c, "other.example", &scratch);
  cr_assert_float_eq(d->breaker.cooldown_s, 9, 1e-12);
  cr_assert_eq(d->breaker.min_requests, 10);
  cg_config_free(&c);
}

Test(breaker_config, issue12_variables_and_keys) {
  struct cg_config c;
  struct cg_pool_cfg scratch;
  const struct cg_pool_cfg *a, *d;
  cfg_file("{\"pools\": [{\"name\": \"a\", \"hosts\": [\"a.example\"],"
           " \"breaker\": {\"open\": \"fail\", \"consecutive_failures\": 3,"
           " \"cooldown_max_s\": 30, \"ramp_s\": 0}},"
           "{\"name\": \"b\", \"hosts\": [\"b.example\"], \"breaker\": {\"open\": \"later\"}}]}");
  cfg_env_set(0, "CURLGUARD_CONFIG", cfg_path);
  cfg_env_set(1, "CURLGUARD_BREAKER_OPEN", "sometimes");            /* bad: default */
  cfg_env_set(2, "CURLGUARD_BREAKER_CONSECUTIVE_FAILURES", "-1");   /* bad: default */
  cfg_env_set(3, "CURLGUARD_BREAKER_COOLDOWN_MAX_S", "abc");        /* bad: default */
  cfg_env_set(4, "CURLGUARD_BREAKER_RAMP_S", "1.5");
  cr_assert_eq(cg_config_load(&c, cfg_getenv), 4, "three bad variables, b's bad \"open\"");
  unlink(cfg_path);
  cr_assert_eq(c.breaker.open_wait, 1);
  cr_assert_eq(c.breaker.consecutive, 5);
  cr_assert_float_eq(c.breaker.cooldown_max_s, 2, 1e-12);
  cr_assert_float_eq(c.breaker.ramp_s, 1.5, 1e-12);
  a = cg_config_pool(&c, "a.example", &scratch);
  cr_assert_eq(a->breaker.open_wait, 0);
  cr_assert_eq(a->breaker.consecutive, 3);
  cr_assert_float_eq(a->breaker.cooldown_max_s, 30, 1e-12);
  cr_assert_float_eq(a->breaker.ramp_s, 1.5, 1e-12, "the environment wins");
  d = cg_config_pool(&c, "b.example", &scratch);
  cr_assert_eq(d->breaker.open_wait, 1, "a bad value keeps the inherited one");
  cg_config_free(&c);
  cfg_env_set(0, "CURLGUARD_BREAKER_OPEN", "FAIL");
  cr_assert_eq(cg_config_load(&c, cfg_getenv), 0);
  cr_assert_eq(c.breaker.open_wait, 0);
  cg_config_free(&c);
}

Test(breaker_config, max_concurrent_has_two_names_and_env_wins_over_pools) {
  struct cg_config c;
  struct cg_pool_cfg scratch;
  const struct cg_pool_cfg *a;
  cfg_file("{\"retry_budget\": {\"max_concurrent\": 7},"
           " \"pools\": [{\"name\": \"a\", \"hosts\": [\"a.example\"],"
           " \"breaker\": {\"enabled\": true, \"min_requests\": 5},"
           " \"retry_budget\": {\"enabled\": true, \"max_concurrent\": 3}}]}");
  cfg_env_set(0, "CURLGUARD_CONFIG", cfg_path);
  cfg_env_set(1, "CURLGUARD_BREAKER", "off");
  cfg_env_set(2, "CURLGUARD_RETRY_BUDGET", "off");
  cr_assert_eq(cg_config_load(&c, cfg_getenv), 0);
  unlink(cfg_path);
  cr_assert_eq(c.budget.max_concurrent, 7, "the short name at the top level");
  a = cg_config_pool(&c, "a.example", &scratch);
  cr_assert_eq(a->budget.max_concurrent, 3, "the short name in a pool, not overwritten");
  cr_assert_eq(a->breaker.enabled, 0, "CURLGUARD_BREAKER=off wins over the pool's file key");
  cr_assert_eq(a->budget.enabled, 0, "CURLGUARD_RETRY_BUDGET=off likewise");
  cr_assert_eq(a->breaker.min_requests, 5, "the pool's other keys stay");
  cg_config_free(&c);
}

/* ---- the fallback base (fallback.h) ---- */

#include "fallback.h"

TestSuite(fallback, .timeout = 10);

Test(fallback, rewrites_keep_path_and_query) {
  static const char *const cases[][3] = {
    {"https://backup.example.com", "https://api.openai.com/v1/chat?x=1",
     "https://backup.example.com/v1/chat?x=1"},
    {"https://gw.example.com/openai/", "https://api.openai.com/v1/chat",
     "https://gw.example.com/openai/v1/chat"},
    {"http://127.0.0.1:8080", "https://u:p@api.openai.com:443/v1/x#frag",
     "http://127.0.0.1:8080/v1/x"},
    {"http://b.example", "https://a.example", "http://b.example/"},
    {"http://b.example", "https://a.example?q=1", "http://b.example/?q=1"},
  };
  char out[256];
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    cr_assert_eq(cg_fallback_url(cases[i][0], cases[i][1], out, sizeof(out)), 0);
    cr_assert_str_eq(out, cases[i][2], "case %zu", i);
  }
  cr_assert_eq(cg_fallback_url("http://b.example", "no-scheme/x", out, sizeof(out)), -1);
  cr_assert_eq(cg_fallback_url("http://b.example", "http://a.example/long", out, 20), -1);
}

Test(fallback, bases_accepted) {
  cr_assert(cg_fallback_base_ok("https://backup.example.com"));
  cr_assert(cg_fallback_base_ok("http://127.0.0.1:8080/prefix"));
  cr_assert_not(cg_fallback_base_ok("ftp://backup.example.com"));
  cr_assert_not(cg_fallback_base_ok("https://user:key@backup.example.com"));
  cr_assert_not(cg_fallback_base_ok("https://backup.example.com/?key=1"));
  cr_assert_not(cg_fallback_base_ok("https://backup.example.com/#x"));
  cr_assert_not(cg_fallback_base_ok(""));
  cr_assert_not(cg_fallback_base_ok(NULL));
}

Test(fallback, ports) {
  cr_assert(cg_fallback_base_ok("http://127.0.0.1:65535/x"));
  cr_assert(cg_fallback_base_ok("http://127.0.0.1:1"));
  cr_assert(cg_fallback_base_ok("http://[::1]:8080/x"));
  cr_assert(cg_fallback_base_ok("http://[::1]/x"));
  cr_assert_not(cg_fallback_base_ok("http://127.0.0.1:65536/x"), "past 65535");
  cr_assert_not(cg_fallback_base_ok("http://127.0.0.1:99999"));
  cr_assert_not(cg_fallback_base_ok("http://127.0.0.1:0"));
  cr_assert_not(cg_fallback_base_ok("http://127.0.0.1:/x"), "empty port");
  cr_assert_not(cg_fallback_base_ok("http://127.0.0.1:80a"));
  cr_assert_not(cg_fallback_base_ok("http://127.0.0.1:000080"), "six digits");
  cr_assert_not(cg_fallback_base_ok("http://[::1]:70000"));
}

/* A window no process of the guard writes (garbage over the state file's body behind a
 * valid header: a helper wrote random bytes over a live file and every process then used a
 * breaker window of 7 years, and reported a negative one it did not use): replaced by the
 * configured one (window.h cg_window_ns_ok). */
Test(breaker, a_garbage_window_is_replaced) {
  struct cg_breaker_cfg c = cfg(0.5, 4, 60, 30);
  const int64_t bad[] = {-5491430000000000000LL, 1, 99 * MS, 86401 * SEC,
                         232025000 * SEC};
  size_t i;
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    __atomic_store_n(&st.breakers[0].window_ns, bad[i], __ATOMIC_RELAXED);
    cr_assert_eq(cg_breaker_configure(&st, 0, &c), 60 * SEC, "window %lld",
                 (long long) bad[i]);
    cr_assert_eq(__atomic_load_n(&st.breakers[0].window_ns, __ATOMIC_RELAXED), 60 * SEC);
  }
  /* One a process stored (another process's configuration): kept. */
  __atomic_store_n(&st.breakers[0].window_ns, 10 * SEC, __ATOMIC_RELAXED);
  cr_assert_eq(cg_breaker_configure(&st, 0, &c), 10 * SEC);
}
