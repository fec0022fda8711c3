/* test-state.c - the shared state file: creation, validation, refusal, re-initialisation
 * and many processes agreeing on one file (state.h, README "The file"). */
#include "limiter.h"
#include "state.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[64];
static char path[128];

static void setup(void) {
  snprintf(dir, sizeof(dir), "/tmp/cg-test-state-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/state", dir);
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(state, .init = setup, .fini = teardown, .timeout = 30);

static void boot_id(char out[40]) {
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  memset(out, 0, 40);
  cr_assert_not_null(f);
  cr_assert_not_null(fgets(out, 40, f));
  fclose(f);
  out[strcspn(out, "\n")] = '\0';
}

static void open_ok(struct cg_state *st) {
  char why[512] = "";
  cr_assert_eq(cg_state_open(path, st, why, sizeof(why)), 0, "cg_state_open: %s", why);
  cr_assert_not_null(st->hdr);
}

static void assert_fresh_header(const struct cg_state *st) {
  char boot[40];
  boot_id(boot);
  cr_assert_eq(st->hdr->magic, CG_STATE_MAGIC);
  cr_assert_eq(st->hdr->version, CG_STATE_VERSION);
  cr_assert_eq(st->hdr->size, CG_STATE_SIZE);
  cr_assert_eq(st->hdr->npools, CG_STATE_POOLS);
  cr_assert_eq(st->hdr->nslots, CG_STATE_SLOTS);
  cr_assert_str_eq(st->hdr->boot_id, boot);
}

static void assert_no_pools(const struct cg_state *st) {
  int i;
  for (i = 0; i < CG_STATE_POOLS; i++) {
    cr_assert_eq(st->pools[i].name_hash, 0, "pool %d survived", i);
    cr_assert_eq(st->pools[i].tat_requests, 0, "pool %d survived", i);
    cr_assert_eq(st->pools[i].admitted, 0, "pool %d survived", i);
  }
  for (i = 0; i < CG_STATE_SLOTS; i++)
    cr_assert_eq(st->slots[i].owner, 0, "slot %d survived", i);
  for (i = 0; i < CG_STATE_POOLS; i++)
    cr_assert_eq(st->tallies[i].attempts, 0, "pool %d's tally survived", i);
}

/* A file with one pool "p" (TAT 12345, admitted 7) and one slot taken. */
static void make_used_file(void) {
  struct cg_state st;
  struct cg_limits l = {60, 0, 0, 0, 1, 0, 0, 0};
  int p, s;
  int64_t w;
  open_ok(&st);
  p = cg_limiter_pool(&st, "p", &l);
  cr_assert_geq(p, 0);
  st.pools[p].tat_requests = 12345;
  st.pools[p].admitted = 7;
  st.tallies[p].attempts = 9;
  s = cg_limiter_inflight_acquire(&st, p, 1, cg_state_now() + 1000000000LL, &w);
  cr_assert_geq(s, 0);
  cg_state_close(&st);
}

static void write_bytes(const char *p, const void *data, size_t n) {
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, data, n), (ssize_t) n);
  close(fd);
}

static off_t file_size(const char *p) {
  struct stat sb;
  cr_assert_eq(stat(p, &sb), 0);
  return sb.st_size;
}

/* ---- creation ---- */

Test(state, creates_new_file) {
  struct cg_state st;
  struct stat sb;
  struct timespec ts;
  int64_t now_ms;

  open_ok(&st);
  cr_assert_eq(lstat(path, &sb), 0);
  cr_assert(S_ISREG(sb.st_mode));
  cr_assert_eq(sb.st_mode & 07777, 0600, "mode %o", (unsigned) (sb.st_mode & 07777));
  cr_assert_eq(sb.st_size, (off_t) CG_STATE_SIZE);
  cr_assert_eq(sb.st_uid, getuid());
  assert_fresh_header(&st);
  assert_no_pools(&st);
  cr_assert_eq(st.size, CG_STATE_SIZE);
  cr_assert_eq((char *) st.pools - (char *) st.hdr, CG_STATE_POOLS_OFF);
  cr_assert_eq((char *) st.slots - (char *) st.hdr, (long) CG_STATE_SLOTS_OFF);
  clock_gettime(CLOCK_REALTIME, &ts);
  now_ms = (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  cr_assert(st.hdr->created_wall_ms <= now_ms && st.hdr->created_wall_ms > now_ms - 10000,
            "created_wall_ms %lld, now %lld", (long long) st.hdr->created_wall_ms,
            (long long) now_ms);
  cr_assert_geq(st.fd, 0);
  cg_state_close(&st);
  cr_assert_eq(st.fd, -1);
  cr_assert_null(st.hdr);
}

/* state.h's layout: the offsets and sizes its comment gives (version 7: the tallies of
 * issue 17, each pool's used_ms, keyed holds and turns), and every part mapped where the
 * offsets say. */
Test(state, layout_offsets_and_sizes) {
  struct cg_state st;
  cr_assert_eq(sizeof(struct cg_state_pool) * CG_STATE_POOLS + CG_STATE_POOLS_OFF,
               CG_STATE_SLOTS_OFF);
  cr_assert_eq(sizeof(struct cg_state_breaker), 320);
  cr_assert_eq(sizeof(struct cg_state_budget), 736);
  cr_assert_eq(sizeof(struct cg_state_tally), 480);
  cr_assert_eq(CG_STATE_TALLIES_OFF, CG_STATE_BUDGETS_OFF + CG_STATE_POOLS * 736);
  cr_assert_eq(sizeof(struct cg_state_pool), 640);
  cr_assert_eq(CG_STATE_SIZE, 573696);
  cr_assert_eq(CG_STATE_SIZE - CG_STATE_TALLIES_OFF, CG_STATE_POOLS * 480);
  open_ok(&st);
  cr_assert_eq((char *) st.tallies - (char *) st.hdr, (ptrdiff_t) CG_STATE_TALLIES_OFF);
  cr_assert_eq((char *) st.budgets - (char *) st.hdr, (ptrdiff_t) CG_STATE_BUDGETS_OFF);
  cr_assert_eq((char *) &st.tallies[CG_STATE_POOLS] - (char *) st.hdr, (ptrdiff_t) CG_STATE_SIZE);
  cg_state_close(&st);
}

Test(state, mode_0600_whatever_the_umask) {
  struct cg_state st;
  struct stat sb;
  mode_t old = umask(0);
  open_ok(&st);
  umask(old);
  cr_assert_eq(stat(path, &sb), 0);
  cr_assert_eq(sb.st_mode & 07777, 0600);
  cg_state_close(&st);
}

Test(state, reopen_keeps_pools) {
  struct cg_state st;
  struct cg_limits l = {60, 0, 0, 0, 0, 0, 0, 0};
  int64_t created;
  int p;

  make_used_file();
  open_ok(&st);
  created = st.hdr->created_wall_ms;
  p = cg_limiter_pool(&st, "p", &l);
  cr_assert_geq(p, 0);
  cr_assert_str_eq(st.pools[p].name, "p");
  cr_assert_eq(st.pools[p].tat_requests, 12345);
  cr_assert_eq(st.pools[p].admitted, 7);
  cr_assert_eq(st.tallies[p].attempts, 9, "the pool's tally is kept with it");
  cr_assert_eq(st.pools[p].inflight, 1);
  cg_state_close(&st);
  usleep(5000);
  open_ok(&st);
  cr_assert_eq(st.hdr->created_wall_ms, created, "a valid file is not re-initialised");
  cg_state_close(&st);
}

Test(state, two_mappings_share_words) {
  struct cg_state a, b;
  struct cg_limits l = {60, 0, 0, 0, 0, 0, 0, 0};
  int pa, pb;
  open_ok(&a);
  open_ok(&b);
  pa = cg_limiter_pool(&a, "shared", &l);
  pb = cg_limiter_pool(&b, "shared", &l);
  cr_assert_eq(pa, pb);
  cg_limiter_hold(&a, pa, 777);
  cr_assert_eq(b.pools[pb].hold_until, 777);
  cg_state_close(&a);
  cg_state_close(&b);
}

/* ---- files that are not to be trusted: re-initialised ---- */

static void assert_reinitialised(void) {
  struct cg_state st;
  open_ok(&st);
  assert_fresh_header(&st);
  assert_no_pools(&st);
  cr_assert_eq(file_size(path), (off_t) CG_STATE_SIZE);
  cg_state_close(&st);
}

/* Change the used file's header through a mapping, then reopen. */
static void corrupt_header(void (*change)(struct cg_state_header *)) {
  struct cg_state st;
  make_used_file();
  open_ok(&st);
  change(st.hdr);
  cg_state_close(&st);
}

static void wrong_version(struct cg_state_header *h) {
  h->version = CG_STATE_VERSION + 1;
}
static void wrong_magic(struct cg_state_header *h) {
  h->magic ^= 0xff;
}
static void other_boot(struct cg_state_header *h) {
  snprintf(h->boot_id, sizeof(h->boot_id), "00000000-0000-0000-0000-000000000000");
}
static void wrong_size(struct cg_state_header *h) {
  h->size = 4096;
}
static void wrong_npools(struct cg_state_header *h) {
  h->npools = 8;
}

Test(state, wrong_version_reinitialised) {
  corrupt_header(wrong_version);
  assert_reinitialised();
}

Test(state, wrong_magic_reinitialised) {
  corrupt_header(wrong_magic);
  assert_reinitialised();
}

Test(state, other_boot_reinitialised) {
  corrupt_header(other_boot);
  assert_reinitialised();
}

Test(state, wrong_layout_numbers_reinitialised) {
  corrupt_header(wrong_size);
  assert_reinitialised();
  corrupt_header(wrong_npools);
  assert_reinitialised();
}

/* A file that is not a state file (no magic where the file has bytes, not a state file's
 * size and header) is some other file named by mistake: refused, not one byte changed
 * (it was grown and overwritten: a helper's review wiped a user's notes, and /etc/passwd
 * as root). */
static void assert_refused_untouched(const void *bytes, size_t n) {
  struct cg_state st;
  char why[512] = "";
  unsigned char *back = malloc(n + 1);
  FILE *f;

  cr_assert_not_null(back);
  write_bytes(path, bytes, n);
  cr_assert_eq(cg_state_open(path, &st, why, sizeof(why)), -1, "opened a foreign file");
  cr_assert(strstr(why, "is not a curlguard state file") != NULL, "%s", why);
  cr_assert_eq(file_size(path), (off_t) n);
  f = fopen(path, "rb");
  cr_assert_not_null(f);
  cr_assert_eq(fread(back, 1, n + 1, f), n);
  fclose(f);
  cr_assert(memcmp(back, bytes, n) == 0, "the file was changed");
  free(back);
  cr_assert_eq(cg_state_reset(path, why, sizeof(why)), -1, "curlguard reset overwrote it");
  cr_assert_eq(file_size(path), (off_t) n);
}

Test(state, garbage_full_size_refused_untouched) {
  static unsigned char junk[CG_STATE_SIZE];
  size_t i;
  uint32_t x = 2463534242u;
  for (i = 0; i < sizeof(junk); i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    junk[i] = (unsigned char) x;
  }
  assert_refused_untouched(junk, sizeof(junk));
}

Test(state, other_file_refused_untouched) {
  const char text[] = "this is not a curlguard state file\n";
  assert_refused_untouched(text, sizeof(text) - 1);
  assert_refused_untouched("x", 1);
}

Test(state, truncated_one_byte_grown_not_sigbus) {
  write_bytes(path, "C", 1); /* the first byte of the magic: a state file cut short */
  assert_reinitialised();
}

Test(state, full_size_file_with_zero_magic_reinitialised) {
  /* an initialisation that did not finish: the magic is written last */
  static const unsigned char zeros[CG_STATE_SIZE];
  write_bytes(path, zeros, sizeof(zeros));
  assert_reinitialised();
}

Test(state, empty_file_grown) {
  write_bytes(path, "", 0);
  assert_reinitialised();
}

Test(state, truncated_valid_file_grown_not_sigbus) {
  /* A good file cut short after its header: every word past the end would SIGBUS. */
  struct cg_state st;
  struct cg_limits l = {60, 0, 0, 0, 0, 0, 0, 0};
  int p;
  make_used_file();
  cr_assert_eq(truncate(path, CG_STATE_POOLS_OFF + 8), 0);
  open_ok(&st);
  cr_assert_eq(file_size(path), (off_t) CG_STATE_SIZE);
  p = cg_limiter_pool(&st, "q", &l); /* touches pool and slot pages */
  cr_assert_geq(p, 0);
  cr_assert_eq(st.slots[CG_STATE_SLOTS - 1].owner, 0);
  cg_state_close(&st);
}

/* A good file whose last page was cut (an operator's truncate -s): the header and the
 * slots survived, but it is re-made when grown back, as the README says; a slot left
 * counted by a call that dropped the file on the fault must not outlive the cut. */
Test(state, tail_cut_file_is_reinitialised_slots_and_all) {
  struct cg_state st;
  make_used_file();
  cr_assert_eq(truncate(path, (off_t) CG_STATE_SIZE - 4096), 0);
  open_ok(&st);
  cr_assert_eq(file_size(path), (off_t) CG_STATE_SIZE);
  assert_fresh_header(&st);
  assert_no_pools(&st);
  cg_state_close(&st);
}

/* ---- files that are refused ---- */

static void assert_refused(const char *what, const char *needle) {
  struct cg_state st;
  char why[512] = "";
  memset(&st, 0x5a, sizeof(st));
  cr_assert_eq(cg_state_open(path, &st, why, sizeof(why)), -1, "%s was accepted", what);
  cr_assert_null(st.hdr, "%s: no mapping on refusal", what);
  cr_assert_neq(why[0], '\0', "%s: no reason given", what);
  cr_assert_not_null(strstr(why, path), "%s: the reason does not name the file: %s", what, why);
  if (needle)
    cr_assert_not_null(strstr(why, needle), "%s: the reason does not say \"%s\": %s", what,
                       needle, why);
}

Test(state, symlink_refused) {
  char target[160];
  struct stat sb;
  snprintf(target, sizeof(target), "%s/target", dir);
  write_bytes(target, "keep me", 7);
  cr_assert_eq(symlink(target, path), 0);
  assert_refused("a symlink to a file", "symbolic link");
  cr_assert_eq(file_size(target), 7, "the symlink's target was changed");
  cr_assert_eq(lstat(path, &sb), 0);
  cr_assert(S_ISLNK(sb.st_mode), "the symlink was replaced");
}

Test(state, dangling_symlink_refused_and_target_not_created) {
  char target[160];
  snprintf(target, sizeof(target), "%s/nowhere", dir);
  cr_assert_eq(symlink(target, path), 0);
  assert_refused("a dangling symlink", "symbolic link");
  cr_assert_eq(access(target, F_OK), -1, "the symlink's target was created");
}

Test(state, symlink_to_valid_state_file_refused) {
  /* Even a good state file is not used through a link. */
  char real[160];
  make_used_file();
  snprintf(real, sizeof(real), "%s/real", dir);
  cr_assert_eq(rename(path, real), 0);
  cr_assert_eq(symlink(real, path), 0);
  assert_refused("a symlink to a state file", "symbolic link");
}

Test(state, directory_refused) {
  cr_assert_eq(mkdir(path, 0700), 0);
  assert_refused("a directory", NULL);
}

Test(state, fifo_refused) {
  cr_assert_eq(mkfifo(path, 0600), 0);
  assert_refused("a FIFO", "not a regular file");
}

Test(state, missing_directory_refused) {
  snprintf(path, sizeof(path), "%s/no/such/dir/state", dir);
  assert_refused("a path in a missing directory", NULL);
}

Test(state, other_users_file_refused) {
  const char text[] = "someone else's";
  if (geteuid() != 0)
    cr_skip_test("chown needs root");
  write_bytes(path, text, sizeof(text) - 1);
  cr_assert_eq(chown(path, 65534, 65534), 0, "chown: %s", strerror(errno));
  assert_refused("a file of another user", "owned by another user");
  cr_assert_eq(file_size(path), (off_t) (sizeof(text) - 1), "another user's file was changed");
}

/* ---- reset ---- */

/* The host closes the state file's descriptor (a daemon's close loop), opens `file`
 * with `flags` onto the same number and locks it with `lock`; cg_state_check runs; the
 * host's lock must still hold (another open file description cannot take it exclusively)
 * and the number must still be the host's. */
static void check_with_a_host_lock_on_the_old_number(const char *file, int flags, int lock) {
  struct cg_state st;
  int n, fd, other;

  open_ok(&st);
  n = st.fd;
  cr_assert_eq(close(n), 0);
  fd = open(file, flags | O_CLOEXEC, 0600);
  cr_assert_geq(fd, 0);
  if (fd != n) {
    cr_assert_eq(dup2(fd, n), n);
    close(fd);
  }
  cr_assert_eq(flock(n, lock | LOCK_NB), 0, "the host locks its file");
  cr_assert_eq(cg_state_check(&st), 0);
  other = open(file, O_RDONLY | O_CLOEXEC);
  cr_assert_geq(other, 0);
  cr_assert_neq(flock(other, LOCK_EX | LOCK_NB), 0, "the host's lock was dropped");
  cr_assert_eq(errno, EWOULDBLOCK);
  close(other);
  cr_assert_neq(fcntl(n, F_GETFD), -1, "the host's number is still open");
  st.fd = -1; /* the number is the host's: only unmapped */
  cg_state_close(&st);
  close(n);
}

/* A file of the host's own, held locked, on the old number: the garbage check (run when
 * no pool has room) neither locks nor unlocks it.  Before, it took flock(2) on the number
 * and let go, which dropped the host's lock (flock locks belong to the open file
 * description). */
Test(state, check_leaves_a_host_file_on_the_old_number_alone) {
  char own[160];
  snprintf(own, sizeof(own), "%s/own", dir);
  check_with_a_host_lock_on_the_old_number(own, O_RDWR | O_CREAT, LOCK_EX);
}

/* The host's own descriptor of the state file itself on the old number (a monitoring
 * host that reads the file under a shared lock): the number names the mapped file (same
 * device and inode), and the check still never locks through it; it locks a descriptor
 * of its own, which waits for the host's lock and gives up. */
Test(state, check_leaves_the_hosts_own_lock_on_the_state_file_alone) {
  check_with_a_host_lock_on_the_old_number(path, O_RDONLY, LOCK_SH);
}

Test(state, reset_clears_pools) {
  struct cg_state st;
  char why[512] = "";
  make_used_file();
  cr_assert_eq(cg_state_reset(path, why, sizeof(why)), 0, "reset: %s", why);
  open_ok(&st);
  assert_fresh_header(&st);
  assert_no_pools(&st);
  cg_state_close(&st);
}

Test(state, reset_while_mapped_is_seen_by_the_mapping) {
  struct cg_state st;
  struct cg_limits l = {60, 0, 0, 0, 0, 0, 0, 0};
  char why[512] = "";
  int p;
  open_ok(&st);
  p = cg_limiter_pool(&st, "p", &l);
  cr_assert_geq(p, 0);
  cr_assert_eq(cg_state_reset(path, why, sizeof(why)), 0, "reset: %s", why);
  cr_assert_eq(st.pools[p].name_hash, 0, "the live mapping still shows the pool");
  cr_assert_eq(st.hdr->magic, CG_STATE_MAGIC);
  cg_state_close(&st);
}

Test(state, reset_refuses_symlink) {
  char target[160], why[512] = "";
  snprintf(target, sizeof(target), "%s/target", dir);
  write_bytes(target, "keep me", 7);
  cr_assert_eq(symlink(target, path), 0);
  cr_assert_eq(cg_state_reset(path, why, sizeof(why)), -1);
  cr_assert_eq(file_size(target), 7);
}

/* ---- many processes at once ---- */

#define NPROC 32

Test(state, many_processes_agree_on_one_new_file) {
  int go[2], status, i, ok = 0, p;
  pid_t pids[NPROC];
  struct cg_state st;
  struct cg_limits l = {0, 0, 0, 0, 0, 0, 0, 0};
  char c;

  cr_assert_eq(pipe(go), 0);
  for (i = 0; i < NPROC; i++) {
    pids[i] = fork();
    cr_assert_geq(pids[i], 0);
    if (pids[i] == 0) {
      struct cg_state cs;
      char why[512];
      int q;
      close(go[1]);
      if (read(go[0], &c, 1) != 0) /* start together: when the parent closes the pipe */
        _exit(10);
      if (cg_state_open(path, &cs, why, sizeof(why)) != 0) {
        fprintf(stderr, "child %d: %s\n", (int) getpid(), why);
        _exit(11);
      }
      q = cg_limiter_pool(&cs, "p", &l);
      if (q < 0)
        _exit(12);
      __atomic_fetch_add(&cs.pools[q].admitted, 1, __ATOMIC_ACQ_REL);
      cg_state_close(&cs);
      _exit(0);
    }
  }
  close(go[0]);
  usleep(20000);
  close(go[1]);
  for (i = 0; i < NPROC; i++) {
    cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
      ok++;
    else
      cr_log_error("child %d: status %#x", i, status);
  }
  cr_assert_eq(ok, NPROC);
  open_ok(&st);
  assert_fresh_header(&st);
  p = cg_limiter_pool(&st, "p", &l);
  cr_assert_geq(p, 0);
  cr_assert_eq(st.pools[p].admitted, NPROC,
               "admitted %llu of %d: some process re-initialised the file or used another pool",
               (unsigned long long) st.pools[p].admitted, NPROC);
  for (i = 0; i < CG_STATE_POOLS; i++)
    if (i != p)
      cr_assert_eq(st.pools[i].name_hash, 0, "a second pool %d was claimed", i);
  cg_state_close(&st);
}

/* ---- process identity ---- */

Test(state, proc_start) {
  pid_t pid;
  int status;
  uint64_t self = cg_proc_start(getpid());
  cr_assert_gt(self, 0);
  cr_assert_eq(cg_proc_start(getpid()), self, "stable for one process");
  cr_assert_gt(cg_proc_start(1), 0);
  cr_assert_leq(cg_proc_start(1), self, "init started no later than we did");
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0)
    _exit(0);
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert_eq(cg_proc_start(pid), 0, "a dead (reaped) process has no start time");
  cr_assert_eq(cg_proc_start(0x3ffffff0), 0);
}

Test(state, proc_start_with_odd_command_name) {
  /* /proc/PID/stat's field 2 is "(comm)" and comm may hold spaces and ')'. */
  int fds[2], status;
  char c;
  pid_t pid;
  uint64_t child_start;
  cr_assert_eq(pipe(fds), 0);
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    FILE *f = fopen("/proc/self/comm", "w");
    close(fds[1]);
    if (f) {
      fputs("a b) c) d", f);
      fclose(f);
    }
    if (read(fds[0], &c, 1) < 0)
      _exit(1);
    _exit(0);
  }
  close(fds[0]);
  usleep(50000);
  {
    char cpath[64], comm[64] = "";
    FILE *f;
    snprintf(cpath, sizeof(cpath), "/proc/%d/comm", (int) pid);
    f = fopen(cpath, "r");
    cr_assert_not_null(f);
    cr_assert_not_null(fgets(comm, sizeof(comm), f));
    fclose(f);
    cr_assert_str_eq(comm, "a b) c) d\n", "the child's name was not set: %s", comm);
  }
  child_start = cg_proc_start(pid);
  close(fds[1]);
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert_gt(child_start, 0);
  cr_assert_geq(child_start, cg_proc_start(getpid()));
}

Test(state, now_is_monotonic_ns) {
  int64_t a = cg_state_now(), b;
  usleep(10000);
  b = cg_state_now();
  cr_assert_gt(a, 0);
  cr_assert_geq(b - a, 10000000);
  cr_assert_lt(b - a, 5000000000LL);
}
