/* test-log.c - the guard's writes never give the host a SIGPIPE it would not have had
 * (log.h cg_write_quiet), and a regular file is written with no signal-mask calls
 * (cg_write_regular). */
#include "log.h"

#include "tmpfile.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A pipe whose reader is gone: a write gets EPIPE and raises SIGPIPE. */
static int broken_pipe(void) {
  int p[2];
  cr_assert_eq(pipe(p), 0);
  close(p[0]);
  return p[1];
}

static int pipe_pending(void) {
  sigset_t s;
  sigpending(&s);
  return sigismember(&s, SIGPIPE) == 1;
}

static void block_pipe(int how) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGPIPE);
  pthread_sigmask(how, &s, NULL);
}

Test(log, a_broken_pipe_gives_epipe_and_no_signal) {
  int fd = broken_pipe();
  sigset_t mask;

  signal(SIGPIPE, SIG_DFL); /* a SIGPIPE would kill the test */
  errno = 0;
  cr_assert_eq(cg_write_quiet(fd, "x", 1), -1);
  cr_assert_eq(errno, EPIPE);
  pthread_sigmask(SIG_SETMASK, NULL, &mask);
  cr_assert_eq(sigismember(&mask, SIGPIPE), 0, "the mask is put back");
  cr_assert_eq(pipe_pending(), 0);
  close(fd);
}

Test(log, a_blocked_sigpipe_of_the_write_is_taken_back) {
  int fd = broken_pipe();

  block_pipe(SIG_BLOCK);
  cr_assert_eq(cg_write_quiet(fd, "x", 1), -1);
  cr_assert_eq(pipe_pending(), 0, "the guard's own SIGPIPE is not left to the host");
  close(fd);
}

Test(log, the_hosts_pending_sigpipe_stays_pending) {
  int fd = broken_pipe();

  block_pipe(SIG_BLOCK);
  cr_assert_eq(pthread_kill(pthread_self(), SIGPIPE), 0);
  cr_assert_eq(pipe_pending(), 1);
  cr_assert_eq(cg_write_quiet(fd, "x", 1), -1);
  cr_assert_eq(pipe_pending(), 1, "the host's SIGPIPE is still its own");
  close(fd);
}

Test(log, regular_file_written_whole) {
  char *path = cg_test_write_tmp("log", "");
  char buf[16] = {0};
  int fd = open(path, O_RDWR | O_APPEND);

  cr_assert_geq(fd, 0);
  cr_assert_eq(cg_write_regular(fd, "hello\n", 6), 6);
  cr_assert_eq(cg_write_quiet(fd, "again\n", 6), 6);
  cr_assert_eq(pread(fd, buf, sizeof(buf) - 1, 0), 12);
  cr_assert_str_eq(buf, "hello\nagain\n");
  close(fd);
  unlink(path);
  free(path);
}
