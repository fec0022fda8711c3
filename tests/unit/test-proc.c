/* test-proc.c - the cached pid and start time (proc.h): right in the process, and right
 * again in a child, whether made by glibc's fork() (fork handlers run) or by a raw
 * fork system call (no handler runs: only the wipe-on-fork page can tell the child). */
#include "proc.h"
#include "state.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* In a child: 0 when the cache agrees with the kernel, else a code telling what differs. */
static int child_check(void) {
  pid_t real = (pid_t) syscall(SYS_getpid);
  if (cg_pid() != real)
    return 1;
  if (cg_proc_self_start() != cg_proc_start(real))
    return 2;
  return 0;
}

static int wait_code(pid_t pid) {
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status));
  return WEXITSTATUS(status);
}

Test(proc, pid_and_start_time_of_this_process) {
  cr_assert_eq(cg_pid(), getpid());
  cr_assert_eq(cg_pid(), getpid()); /* from the cache now */
  cr_assert_neq(cg_proc_self_start(), 0);
  cr_assert_eq(cg_proc_self_start(), cg_proc_start(getpid()));
}

Test(proc, a_forked_child_gets_its_own_pid) {
  pid_t pid;
  (void) cg_pid();
  (void) cg_proc_self_start(); /* both cached in the parent before the fork */
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0)
    _exit(child_check());
  cr_assert_eq(wait_code(pid), 0);
  cr_assert_eq(cg_pid(), getpid());
}

/* A raw fork(2) runs no pthread_atfork handler: the kernel's wipe-on-fork page alone
 * must make the child read its own pid (Linux 4.14+). */
Test(proc, a_child_of_a_raw_fork_gets_its_own_pid) {
  pid_t pid;
  (void) cg_pid();
  (void) cg_proc_self_start();
  pid = (pid_t) syscall(SYS_fork);
  cr_assert_geq(pid, 0);
  if (pid == 0)
    _exit(child_check()); /* only async-signal-safe calls here, and cg_pid's reads */
  cr_assert_eq(wait_code(pid), 0);
}

static void *thread_pid(void *arg) {
  *(pid_t *) arg = cg_pid();
  return NULL;
}

Test(proc, every_thread_sees_the_process_pid) {
  pthread_t t[4];
  pid_t got[4];
  int i;
  for (i = 0; i < 4; i++)
    cr_assert_eq(pthread_create(&t[i], NULL, thread_pid, &got[i]), 0);
  for (i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    cr_assert_eq(got[i], getpid());
  }
}
