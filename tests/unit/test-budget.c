/* test-budget.c - the shared retry budget (budget.h) over a real state file: the ratio +
 * floor math, the window, concurrency slots, dead slot holders, and no overdraw when many
 * threads ask at once.  Time is driven with explicit `now` values (NOW0). */
#include "budget.h"
#include "state.h"

#include "state-fixture.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOW0 (100000 * SEC)

CG_STATE_FIXTURE(budget);

static struct cg_budget_cfg cfg(double ratio, double min_per_s, double window_s, long conc) {
  struct cg_budget_cfg c = {1, ratio, min_per_s, window_s, conc};
  return c;
}

/* Ask for retries at `now` until refused (at most 1000); how many were granted.  Slots
 * are given back at once. */
static int drain(const struct cg_budget_cfg *c, int64_t now) {
  int n = 0, slot;
  while (n < 1000 &&
         cg_budget_retry(&st, 0, c, now, now + 60 * SEC, &slot) == CG_BUDGET_GRANTED) {
    cg_budget_done(&st, 0, slot);
    n++;
  }
  return n;
}

static void firsts(const struct cg_budget_cfg *c, int n, int64_t now) {
  int i;
  for (i = 0; i < n; i++)
    cg_budget_first(&st, 0, c, now);
}

Test(budget, allowed_math) {
  struct cg_budget_cfg c = cfg(0.2, 1, 10, 0);
  cr_assert_float_eq(cg_budget_allowed(100, &c), 30.0, 1e-9);
  cr_assert_float_eq(cg_budget_allowed(0, &c), 10.0, 1e-9, "the floor alone");
  c = cfg(0.2, 0, 10, 0);
  cr_assert_float_eq(cg_budget_allowed(16, &c), 3.2, 1e-9);
}

Test(budget, floor_only) {
  struct cg_budget_cfg c = cfg(0.2, 0.5, 10, 0);
  cr_assert_eq(drain(&c, NOW0), 5, "0.5/s over 10 s");
}

Test(budget, ratio_of_first_attempts) {
  struct cg_budget_cfg c = cfg(0.2, 0, 10, 0);
  int slot;
  cr_assert_eq(cg_budget_retry(&st, 0, &c, NOW0, NOW0 + 60 * SEC, &slot), CG_BUDGET_WINDOW, "nothing yet");
  firsts(&c, 16, NOW0);
  cr_assert_eq(drain(&c, NOW0), 3, "20 %% of 16 is 3.2: 3 retries");
  firsts(&c, 4, NOW0 + MS);
  cr_assert_eq(drain(&c, NOW0 + MS), 1, "20 %% of 20 is 4: one more");
  cr_assert_eq(st.budgets[0].refused, 3);
}

Test(budget, window_expiry_restores) {
  struct cg_budget_cfg c = cfg(0.2, 0, 10, 0);
  firsts(&c, 10, NOW0);
  cr_assert_eq(drain(&c, NOW0), 2);
  /* 10 s later the first attempts and retries have both left the window. */
  cr_assert_eq(drain(&c, NOW0 + 10 * SEC), 0);
  firsts(&c, 10, NOW0 + 10 * SEC);
  cr_assert_eq(drain(&c, NOW0 + 10 * SEC), 2);
}

Test(budget, concurrency_slots) {
  struct cg_budget_cfg c = cfg(0, 100, 10, 2);
  int a, b, x;
  cr_assert_eq(cg_budget_retry(&st, 0, &c, NOW0, NOW0 + 60 * SEC, &a), CG_BUDGET_GRANTED);
  cr_assert_eq(cg_budget_retry(&st, 0, &c, NOW0, NOW0 + 60 * SEC, &b), CG_BUDGET_GRANTED);
  cr_assert_geq(a, 0);
  cr_assert_geq(b, 0);
  cr_assert_neq(a, b);
  cr_assert_eq(cg_budget_retry(&st, 0, &c, NOW0, NOW0 + 60 * SEC, &x), CG_BUDGET_CONCURRENCY);
  cr_assert_eq(x, -1);
  cg_budget_done(&st, 0, a);
  cr_assert_eq(cg_budget_retry(&st, 0, &c, NOW0, NOW0 + 60 * SEC, &x), CG_BUDGET_GRANTED);
  cg_budget_done(&st, 0, b);
  cg_budget_done(&st, 0, x);
  cg_budget_done(&st, 0, x); /* twice: harmless */
}

Test(budget, refused_by_window_keeps_no_slot) {
  struct cg_budget_cfg c = cfg(0, 0, 10, 4);
  struct cg_budget_view v;
  int slot;
  cr_assert_eq(cg_budget_retry(&st, 0, &c, NOW0, NOW0 + 60 * SEC, &slot), CG_BUDGET_WINDOW);
  cr_assert_eq(slot, -1);
  cg_budget_view(&st, 0, NOW0, &v);
  cr_assert_eq(v.concurrent, 0);
}

Test(budget, dead_slot_holder_is_reclaimed) {
  struct cg_budget_cfg c = cfg(0, 100, 10, 1);
  int status, slot;
  pid_t child = fork();
  cr_assert_geq(child, 0);
  if (child == 0) {
    int s;
    _exit(cg_budget_retry(&st, 0, &c, NOW0, NOW0 + 60 * SEC, &s) == CG_BUDGET_GRANTED && s >= 0 ? 0 : 1);
  }
  cr_assert_eq(waitpid(child, &status, 0), child);
  cr_assert_eq(WEXITSTATUS(status), 0);
  /* The child died holding the only slot: it is taken back. */
  cr_assert_eq(cg_budget_retry(&st, 0, &c, NOW0, NOW0 + 60 * SEC, &slot), CG_BUDGET_GRANTED);
  cg_budget_done(&st, 0, slot);
}

/* A parent that SIGKILLs a stalled child and does not reap it: the zombie still answers
 * kill(pid, 0), yet its slot is taken back (review 6, item 4). */
Test(budget, zombie_slot_holder_is_reclaimed) {
  struct cg_budget_cfg c = cfg(0, 100, 10, 1);
  int fds[2], status, slot;
  char ok = 0;
  pid_t child;

  cr_assert_eq(pipe(fds), 0);
  child = fork();
  cr_assert_geq(child, 0);
  if (child == 0) {
    int s;
    char r = cg_budget_retry(&st, 0, &c, NOW0, NOW0 + 60 * SEC, &s) == CG_BUDGET_GRANTED;
    if (write(fds[1], &r, 1) != 1)
      _exit(1);
    for (;;)
      pause(); /* stalled, holding the slot */
  }
  cr_assert_eq(read(fds[0], &ok, 1), 1);
  cr_assert_eq(ok, 1, "the child took the only slot");
  cr_assert_eq(cg_budget_retry(&st, 0, &c, NOW0, NOW0 + 60 * SEC, &slot),
               CG_BUDGET_CONCURRENCY, "a live holder keeps it");
  kill(child, SIGKILL);
  /* Not reaped: wait (bounded) until the kernel has made it a zombie. */
  for (int i = 0; i < 200 && cg_proc_gone(child, 0, 0) == 0; i++)
    usleep(10000);
  cr_assert_eq(cg_budget_retry(&st, 0, &c, NOW0, NOW0 + 60 * SEC, &slot), CG_BUDGET_GRANTED,
               "the zombie's slot is taken back");
  cg_budget_done(&st, 0, slot);
  cr_assert_eq(waitpid(child, &status, 0), child);
  close(fds[0]);
  close(fds[1]);
}

/* A live holder past its call's deadline (hung, or its slot never given back) does not
 * pin the slot. */
Test(budget, overdue_slot_is_reclaimed) {
  struct cg_budget_cfg c = cfg(0, 100, 10, 1);
  int a, b;
  cr_assert_eq(cg_budget_retry(&st, 0, &c, NOW0, NOW0 + 5 * SEC, &a), CG_BUDGET_GRANTED);
  cr_assert_eq(cg_budget_retry(&st, 0, &c, NOW0 + 5 * SEC, NOW0 + 60 * SEC, &b),
               CG_BUDGET_CONCURRENCY, "not before its deadline (and a second of grace)");
  cr_assert_eq(cg_budget_retry(&st, 0, &c, NOW0 + 8 * SEC, NOW0 + 60 * SEC, &b),
               CG_BUDGET_GRANTED, "taken back after it");
  cr_assert_neq(a, b);
  cg_budget_done(&st, 0, a); /* already taken back: nothing to free */
  cr_assert_eq(cg_budget_retry(&st, 0, &c, NOW0 + 9 * SEC, NOW0 + 60 * SEC, &a),
               CG_BUDGET_CONCURRENCY, "b still holds the one slot");
  cg_budget_done(&st, 0, b);
  cr_assert_eq(cg_budget_retry(&st, 0, &c, NOW0 + 9 * SEC, NOW0 + 60 * SEC, &a),
               CG_BUDGET_GRANTED);
  cg_budget_done(&st, 0, a);
}

Test(budget, disabled_grants_and_counts_nothing) {
  struct cg_budget_cfg c = cfg(0, 0, 10, 1);
  struct cg_budget_view v;
  int slot, i;
  c.enabled = 0;
  for (i = 0; i < 10; i++) {
    cr_assert_eq(cg_budget_retry(&st, 0, &c, NOW0, NOW0 + 60 * SEC, &slot), CG_BUDGET_GRANTED);
    cr_assert_eq(slot, -1);
  }
  cg_budget_first(&st, 0, &c, NOW0);
  cg_budget_configure(&st, 0, &c);
  cg_budget_view(&st, 0, NOW0, &v);
  cr_assert_eq(v.first + v.retries, 0);
  cr_assert_eq(v.enabled, 0);
}

Test(budget, view_for_stat) {
  struct cg_budget_cfg c = cfg(0.2, 1, 10, 16);
  struct cg_budget_view v;
  int slot;
  cg_budget_configure(&st, 0, &c);
  firsts(&c, 50, NOW0);
  cr_assert_eq(cg_budget_retry(&st, 0, &c, NOW0, NOW0 + 60 * SEC, &slot), CG_BUDGET_GRANTED);
  cg_budget_view(&st, 0, NOW0 + SEC, &v);
  cr_assert_eq(v.first, 50);
  cr_assert_eq(v.retries, 1);
  cr_assert_float_eq(v.allowed, 20.0, 1e-9);
  cr_assert_eq(v.concurrent, 1);
  cr_assert_eq(v.max_concurrent, 16);
  cg_budget_done(&st, 0, slot);
}

/* ---- no overdraw from racing threads ---- */

static struct cg_budget_cfg race_cfg;
static pthread_barrier_t race_barrier;
static int race_granted;

static void *racer(void *arg) {
  int i, mine = 0, slot;
  (void) arg;
  pthread_barrier_wait(&race_barrier);
  for (i = 0; i < 200; i++)
    if (cg_budget_retry(&st, 0, &race_cfg, NOW0 + i * MS, NOW0 + i * MS + 60 * SEC, &slot) == CG_BUDGET_GRANTED) {
      mine++;
      cg_budget_done(&st, 0, slot);
    }
  __atomic_fetch_add(&race_granted, mine, __ATOMIC_RELAXED);
  return NULL;
}

Test(budget, racing_threads_never_overdraw) {
  pthread_t t[8];
  int i;
  race_cfg = cfg(0.2, 0, 10, 0);
  firsts(&race_cfg, 500, NOW0);
  pthread_barrier_init(&race_barrier, NULL, 8);
  for (i = 0; i < 8; i++)
    pthread_create(&t[i], NULL, racer, NULL);
  for (i = 0; i < 8; i++)
    pthread_join(t[i], NULL);
  pthread_barrier_destroy(&race_barrier);
  cr_assert_eq(race_granted, 100, "20 %% of 500 first attempts, got %d", race_granted);
}

/* ---- waiting for the budget (issue 12 item 4) ---- */

Test(budget, grant_in_is_zero_when_a_retry_fits) {
  struct cg_budget_cfg c = cfg(0.2, 1, 10, 0);
  cr_assert_eq(cg_budget_grant_in(st.budgets[0].buckets, NOW0, SEC / 2, &c), 0);
}

Test(budget, grant_in_is_when_the_oldest_retries_leave_the_window) {
  /* 10 s window of 20 buckets of 0.5 s; floor 1/s: 10 retries.  All 10 taken in the
   * bucket of NOW0: the next fits when that bucket leaves, 10 s later (to the bucket's
   * boundary). */
  struct cg_budget_cfg c = cfg(0, 1, 10, 0);
  int64_t width = 10 * SEC / CG_STATE_BUCKETS, got, bucket_start = NOW0 / width * width;
  cg_budget_configure(&st, 0, &c);
  cr_assert_eq(drain(&c, NOW0), 10);
  got = cg_budget_wait_ns(&st, 0, &c, CG_BUDGET_WINDOW, NOW0);
  cr_assert_eq(got, bucket_start + 20 * width - NOW0, "got %lld", (long long) got);
  /* Asked again at that instant, the retry is granted. */
  cr_assert_eq(drain(&c, NOW0 + got), 10);
}

Test(budget, grant_in_counts_first_attempts_that_stay) {
  /* ratio 0.5, floor 0.1/s (1 per window): 4 first attempts now allow 3 retries; 2
   * more first attempts 5 s later allow 4.  When NOW0's bucket leaves (4 first, 3
   * retries), 2 first attempts and 1 retry stay: 1 + 1 <= 0.5 * 2 + 1, a retry fits. */
  struct cg_budget_cfg c = cfg(0.5, 0.1, 10, 0);
  int64_t width = 10 * SEC / CG_STATE_BUCKETS, got, t1 = NOW0 + 5 * SEC;
  int64_t leaves = NOW0 / width * width + 20 * width;
  cg_budget_configure(&st, 0, &c);
  firsts(&c, 4, NOW0);
  cr_assert_eq(drain(&c, NOW0), 3);
  firsts(&c, 2, t1);
  cr_assert_eq(cg_budget_grant_in(st.budgets[0].buckets, t1, width, &c), 0);
  cr_assert_eq(drain(&c, t1), 1);
  got = cg_budget_grant_in(st.budgets[0].buckets, t1, width, &c);
  cr_assert_eq(got, leaves - t1, "got %lld", (long long) got);
}

Test(budget, grant_in_never_without_floor_or_first_attempts) {
  struct cg_budget_cfg c = cfg(0.5, 0, 10, 0);
  int64_t width = 10 * SEC / CG_STATE_BUCKETS;
  cr_assert_eq(cg_budget_grant_in(st.budgets[0].buckets, NOW0, width, &c), -1);
  /* The caller then polls every bucket. */
  cr_assert_eq(cg_budget_wait_ns(&st, 0, &c, CG_BUDGET_WINDOW, NOW0), width);
  cr_assert_eq(cg_budget_wait_ns(&st, 0, &c, CG_BUDGET_CONCURRENCY, NOW0), CG_BUDGET_POLL_NS);
}

/* As breaker's a_garbage_window_is_replaced: a shared window no process writes is not used. */
Test(budget, a_garbage_window_is_replaced) {
  struct cg_budget_cfg c = cfg(0.2, 1, 10, 16);
  const int64_t bad[] = {-5491430000000000000LL, 1, 3601 * SEC};
  size_t i;
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    __atomic_store_n(&st.budgets[0].window_ns, bad[i], __ATOMIC_RELAXED);
    cr_assert_eq(cg_budget_configure(&st, 0, &c), 10 * SEC, "window %lld",
                 (long long) bad[i]);
  }
  __atomic_store_n(&st.budgets[0].window_ns, 20 * SEC, __ATOMIC_RELAXED);
  cr_assert_eq(cg_budget_configure(&st, 0, &c), 20 * SEC);
}
