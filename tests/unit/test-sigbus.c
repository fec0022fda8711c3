/* test-sigbus.c - the state file cut short between two accesses of one call (state.h,
 * guarded regions; issue 11 item 2), the SIGBUS of others chained as without the guard,
 * and the repairs: a truncated file grown back, garbage behind a valid header re-made. */
#include "admit.h"
#include "clock.h"
#include "limiter.h"
#include "state.h"
#include "state-fixture.h"

#include <criterion/criterion.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

static struct cg_pool_cfg pool;

static void admission(struct cg_admission *ad, struct cg_state *s) {
  memset(&pool, 0, sizeof(pool));
  snprintf(pool.name, sizeof(pool.name), "sigbus");
  pool.lim.rpm = 60; /* one a second, burst 1: the second call waits */
  pool.lim.max_inflight = 4;
  pool.breaker.enabled = 1;
  pool.breaker.failure_rate = 0.5;
  pool.breaker.min_requests = 5;
  pool.breaker.window_s = 10;
  pool.breaker.cooldown_s = 1;
  pool.budget.enabled = 1;
  pool.budget.ratio = 0.1;
  pool.budget.min_per_s = 1;
  pool.budget.window_s = 10;
  pool.budget.max_concurrent = 4;
  memset(ad, 0, sizeof(*ad));
  ad->state = s;
  ad->pool = &pool;
  ad->pool_index = -1;
  ad->retry_slot = -1;
  ad->max_retry_after_ms = 60000;
  ad->deadline_ms = cg_mono_ms() + 30000;
}

/* The wait of the limiter: the file is cut while the call sleeps, between the
 * reservation and the re-check of the pool's hold (the access that raised SIGBUS in the
 * issue: admit.c cg_admission_enter -> limiter.c cg_limiter_hold_until). */
static int cut_fd = -1;
static int cut_during_wait(void *arg, int64_t ms) {
  (void) arg;
  (void) ms;
  cr_assert_eq(ftruncate(cut_fd, 0), 0);
  return 0;
}

CG_STATE_FIXTURE(sigbus);

Test(sigbus, truncated_during_the_limiter_wait_fails_open) {
  struct cg_admission a, b;
  int64_t wait_ms;
  int s;

  admission(&a, &st);
  admission(&b, &st);
  cr_assert_eq(cg_admission_gate(&a, 1, 0, a.deadline_ms, &wait_ms), CG_GATE_GO);
  s = cg_admission_enter(&a, a.deadline_ms, cut_during_wait, NULL, &wait_ms);
  cr_assert_geq(s, 0, "the first call takes a slot without waiting");
  cut_fd = st.fd;
  /* The second call must wait for the first's pacing: the wait cuts the file. */
  s = cg_admission_enter(&b, b.deadline_ms, cut_during_wait, NULL, &wait_ms);
  cr_assert_eq(s, -2, "fails open (go, no slot) instead of dying of SIGBUS, got %d", s);
  cr_assert_null(b.state, "the call dropped the mapping");
  cr_assert_geq(b.queue_ms, 900, "the time waited before the cut is kept");
  /* The first call's record-time updates, after its transfer, on the cut file. */
  cg_admission_learn(&a, &(struct cg_hints){0}, 429, 1000, NULL);
  cr_assert_null(a.state);
  cg_admission_result(&a, CG_OUT_HTTP, 429, 0);
  cr_assert_null(cg_admission_retry(&a, 100, 0, NULL, NULL, &wait_ms));
  cr_assert_eq(cg_admission_repeat_wait(&a, NULL, NULL, &wait_ms), 0);
  cg_admission_adapt(&a, 1, 1);
  cg_admission_tokens_correct(&a, 10);
  cg_admission_leave(&a, s);
  cg_admission_finish(&a);
}

Test(sigbus, the_tally_counts_on_a_whole_file) {
  struct cg_admission a;
  struct cg_record r;
  int64_t wait_ms;

  admission(&a, &st);
  cr_assert_eq(cg_admission_gate(&a, 1, 0, a.deadline_ms, &wait_ms), CG_GATE_GO);
  cg_record_init(&r);
  r.outcome = "http_503";
  r.attempt = 2;
  cg_admission_tally(&a, &r);
  cr_assert_eq(a.state, &st);
  cr_assert_eq(st.tallies[a.pool_index].attempts, 1);
  cr_assert_eq(st.tallies[a.pool_index].retries, 1);
  cr_assert_eq(st.tallies[a.pool_index].calls, 0);
}

Test(sigbus, every_entry_point_on_a_cut_file) {
  struct cg_admission a;
  int64_t wait_ms;
  int s;

  admission(&a, &st);
  cr_assert_eq(cg_admission_gate(&a, 1, 0, a.deadline_ms, &wait_ms), CG_GATE_GO);
  s = cg_admission_enter(&a, a.deadline_ms, cut_during_wait, NULL, &wait_ms);
  cr_assert_geq(s, 0);
  cr_assert_eq(ftruncate(st.fd, 0), 0);
  cr_assert_eq(cg_admission_recheck(&a, a.deadline_ms, &wait_ms), CG_GATE_GO);
  cr_assert_null(a.state);
  a.state = &st; /* each entry point on its own */
  cr_assert_eq(cg_admission_probing(&a), 0);
  a.state = &st;
  cg_admission_leave(&a, s); /* the in-flight release and its futex wake */
  a.state = &st;
  cg_admission_result(&a, CG_OUT_HTTP, 500, 0); /* breaker window, budget slot */
  a.state = &st;
  cr_assert_null(cg_admission_retry(&a, 100, 0, NULL, NULL, &wait_ms));
  a.state = &st;
  cg_admission_adapt(&a, 1, 0); /* the learned rate's words */
  a.state = &st;
  cg_admission_learn(&a, &(struct cg_hints){0}, 429, 1000, NULL);
  a.state = &st;
  cg_admission_tokens_correct(&a, 5);
  a.state = &st;
  cg_admission_finish(&a);
  a.state = &st;
  {
    /* The tally of a record (tally.h): counted while the file is whole, dropped after. */
    struct cg_record r;
    cg_record_init(&r);
    r.outcome = "ok";
    r.final = 1;
    cg_admission_tally(&a, &r);
    cr_assert_null(a.state, "the tally touched the cut file without a fault");
  }
  a.state = &st;
  cr_assert_eq(cg_admission_gate(&a, 2, 0, a.deadline_ms, &wait_ms), CG_GATE_GO);
  a.state = &st;
  cr_assert_eq(cg_admission_enter(&a, a.deadline_ms, cut_during_wait, NULL, &wait_ms), -2);
  cr_assert_null(a.state);
}

Test(sigbus, cut_file_is_grown_back_and_reinitialised_by_the_next_call) {
  struct cg_state *s1, *s2;
  struct stat sb;

  s1 = cg_state_get(path);
  cr_assert_not_null(s1);
  cr_assert_geq(cg_limiter_pool(s1, "before", &pool.lim), 0);
  cr_assert_eq(truncate(path, 0), 0);
  s2 = cg_state_get(path);
  cr_assert_eq(s2, s1, "the same mapping, repaired in place");
  cr_assert_eq(stat(path, &sb), 0);
  cr_assert_eq(sb.st_size, (off_t) CG_STATE_SIZE);
  cr_assert_eq(s2->hdr->magic, CG_STATE_MAGIC);
  cr_assert_eq(s2->pools[0].name_hash, 0, "re-initialised: the old pools are gone");
  /* Many times over: the repair never runs out (no new mapping per repair). */
  for (int i = 0; i < 20; i++) {
    cr_assert_eq(truncate(path, i % 2 ? 0 : 300), 0);
    cr_assert_eq(cg_state_get(path), s1);
  }
}

/* The checks of every call take no system call (state.h cg_state_intact): a cut is seen
 * by a guarded read of the mapping's first and last words at once, even right after the
 * periodic fstat(2) ran, for every length down to a page short of the last; a cut
 * within the last page, which faults nowhere, by that fstat within a second. */
Test(sigbus, intact_sees_a_cut_at_once_without_fstat) {
  static const off_t cuts[] = {0, 300, 4096, CG_STATE_POOLS_OFF + 8192,
                               (CG_STATE_SIZE / 4096) * 4096 - 1};
  size_t i;

  for (i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
    cr_assert_eq(ftruncate(st.fd, (off_t) CG_STATE_SIZE), 0);
    cr_assert_eq(cg_state_intact(&st), 1);
    cr_assert_eq(cg_state_intact(&st), 1); /* the periodic fstat is done: not due */
    cr_assert_eq(ftruncate(st.fd, cuts[i]), 0);
    cr_assert_eq(cg_state_intact(&st), 0, "cut to %lld bytes", (long long) cuts[i]);
  }
}

Test(sigbus, a_cut_within_the_last_page_is_seen_within_a_second) {
  struct cg_state *s1;
  struct stat sb;
  int64_t t0;

  s1 = cg_state_get(path);
  cr_assert_not_null(s1);
  cr_assert_eq(cg_state_intact(s1), 1);
  cr_assert_eq(truncate(path, (off_t) CG_STATE_SIZE - 100), 0);
  t0 = cg_mono_ms();
  while (cg_state_intact(s1) && cg_mono_ms() - t0 < 3000)
    cg_sleep_ms(50);
  cr_assert_eq(cg_state_intact(s1), 0);
  cr_assert_leq(cg_mono_ms() - t0, 1500, "seen after %lld ms", (long long) (cg_mono_ms() - t0));
  /* The next call sees it too (its own periodic fstat, due as well) and grows the file. */
  t0 = cg_mono_ms();
  while (cg_mono_ms() - t0 < 1200)
    cg_sleep_ms(100);
  cr_assert_eq(cg_state_get(path), s1);
  cr_assert_eq(stat(path, &sb), 0);
  cr_assert_eq(sb.st_size, (off_t) CG_STATE_SIZE);
}

/* ---- garbage behind a valid header ---- */

Test(sigbus, garbage_body_is_reinitialised_on_open) {
  struct cg_state again;
  char why[512];

  memset(st.pools, 0xA5, CG_STATE_SIZE - CG_STATE_POOLS_OFF);
  cr_assert_eq(cg_state_body_ok(&st), 0);
  cr_assert_eq(cg_state_open(path, &again, why, sizeof(why)), 0, "%s", why);
  cr_assert_eq(cg_state_body_ok(&again), 1);
  cr_assert_geq(cg_limiter_pool(&again, "fresh", &pool.lim), 0);
  cg_state_close(&again);
}

Test(sigbus, garbage_body_while_mapped_is_repaired_by_the_pool_lookup) {
  struct cg_admission a;
  int64_t wait_ms;

  admission(&a, &st);
  memset(st.pools, 0xA5, CG_STATE_SIZE - CG_STATE_POOLS_OFF);
  cr_assert_eq(cg_admission_gate(&a, 1, 0, a.deadline_ms, &wait_ms), CG_GATE_GO);
  cr_assert_geq(a.pool_index, 0, "the pool was found in the re-made file");
  cr_assert_eq(cg_state_body_ok(&st), 1);
}

Test(sigbus, valid_bodies_pass) {
  struct cg_admission a;
  int64_t wait_ms;
  admission(&a, &st);
  cr_assert_eq(cg_state_body_ok(&st), 1, "a new file");
  cr_assert_eq(cg_admission_gate(&a, 1, 0, a.deadline_ms, &wait_ms), CG_GATE_GO);
  cr_assert_geq(cg_admission_enter(&a, a.deadline_ms, cut_during_wait, NULL, &wait_ms), 0);
  cr_assert_eq(cg_state_body_ok(&st), 1, "a pool, a slot, a breaker, a budget in use");
}

/* ---- other SIGBUS: exactly as without the guard ---- */

static sigjmp_buf host_jb;
static volatile sig_atomic_t host_calls;
static void host_handler(int sig) {
  (void) sig;
  host_calls++;
  siglongjmp(host_jb, 1);
}

/* A mapping of a 1-page file, then cut: touching it faults. */
static volatile char *foreign_cut(void) {
  char tmpl[] = "/tmp/cg-foreign-XXXXXX";
  int fd = mkstemp(tmpl);
  char *p;
  cr_assert_geq(fd, 0);
  unlink(tmpl);
  cr_assert_eq(ftruncate(fd, 4096), 0);
  p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  cr_assert_neq(p, MAP_FAILED);
  cr_assert_eq(ftruncate(fd, 0), 0);
  return p;
}

TestSuite(sigbus_chain, .timeout = 30);

Test(sigbus_chain, the_hosts_handler_gets_every_other_sigbus) {
  char dir2[] = "/tmp/cg-chain-XXXXXX", p2[64], why[512];
  struct cg_state s;
  volatile char *foreign;
  struct sigaction sa;

  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = host_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_NODEFER;
  cr_assert_eq(sigaction(SIGBUS, &sa, NULL), 0);
  cr_assert_not_null(mkdtemp(dir2));
  snprintf(p2, sizeof(p2), "%s/state", dir2);
  cr_assert_eq(cg_state_open(p2, &s, why, sizeof(why)), 0, "%s", why); /* installs ours */
  foreign = foreign_cut();
  if (sigsetjmp(host_jb, 0) == 0) {
    (void) foreign[0];
    cr_assert_fail("no SIGBUS");
  }
  cr_assert_eq(host_calls, 1, "a fault outside the guard's mapping is the host's");
  /* Inside the guard's mapping but outside a guarded region: the host's too. */
  cr_assert_eq(truncate(p2, 0), 0);
  if (sigsetjmp(host_jb, 0) == 0) {
    (void) *(volatile uint64_t *) &s.hdr->magic;
    cr_assert_fail("no SIGBUS");
  }
  cr_assert_eq(host_calls, 2);
  /* A SIGBUS sent by kill(2) is never taken for a fault. */
  if (sigsetjmp(host_jb, 0) == 0) {
    kill(getpid(), SIGBUS);
    cr_assert_fail("not delivered");
  }
  cr_assert_eq(host_calls, 3);
  unlink(p2);
  rmdir(dir2);
}

static void child_faults(int sent) {
  char dir2[] = "/tmp/cg-chain-XXXXXX", p2[64], why[512];
  struct cg_state s;
  if (!mkdtemp(dir2))
    _exit(3);
  snprintf(p2, sizeof(p2), "%s/state", dir2);
  if (cg_state_open(p2, &s, why, sizeof(why)) != 0)
    _exit(3);
  unlink(p2);
  rmdir(dir2);
  if (sent)
    kill(getpid(), SIGBUS);
  else
    (void) foreign_cut()[0];
  _exit(0);
}

Test(sigbus_chain, the_default_action_still_kills) {
  for (int sent = 0; sent < 2; sent++) {
    int status;
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0)
      child_faults(sent);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
#ifdef __SANITIZE_ADDRESS__
    /* ASan installed its own SIGBUS handler first: that is the previous action the guard
     * chains to, and it reports and exits non-zero instead of dying by the signal. */
    cr_assert(!(WIFEXITED(status) && WEXITSTATUS(status) == 0), "status 0x%x", status);
    continue;
#endif
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS,
              "%s SIGBUS: status 0x%x, expected death by SIGBUS", sent ? "a sent" : "a foreign",
              status);
  }
}
