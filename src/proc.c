/* proc.c - the cached pid and start time of this process (see proc.h). */
#include "proc.h"

#include "state.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

struct cg__self {
  pid_t pid;      /* 0: not known yet (a new process, or a child after fork) */
  uint64_t start; /* the start time of `pid`; 0: not known yet */
};

/* Used when no wipe-on-fork page can be had; then only the fork handler clears it. */
static struct cg__self cg__self_static;
static struct cg__self *cg__self_p; /* published once, with release */
static pthread_once_t cg__self_once = PTHREAD_ONCE_INIT;

static void cg__self_init(void) {
  struct cg__self *s = &cg__self_static;
  long page = sysconf(_SC_PAGESIZE);
  void *p;

  if (page <= 0)
    page = 4096;
  p = mmap(NULL, (size_t) page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p != MAP_FAILED) {
#ifdef MADV_WIPEONFORK
    if (madvise(p, (size_t) page, MADV_WIPEONFORK) == 0)
      s = p;
    else
#endif
      munmap(p, (size_t) page);
  }
  __atomic_store_n(&cg__self_p, s, __ATOMIC_RELEASE);
}

static struct cg__self *cg__self(void) {
  struct cg__self *s = __atomic_load_n(&cg__self_p, __ATOMIC_ACQUIRE);
  if (!s) {
    pthread_once(&cg__self_once, cg__self_init);
    s = __atomic_load_n(&cg__self_p, __ATOMIC_ACQUIRE);
  }
  return s;
}

/* The child of a fork(2) through glibc: forget the parent's values (the page is wiped by
 * the kernel already when it could be marked; the static fallback is not). */
static void cg__self_child(void) {
  struct cg__self *s = __atomic_load_n(&cg__self_p, __ATOMIC_RELAXED);
  if (s) {
    __atomic_store_n(&s->pid, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->start, 0, __ATOMIC_RELAXED);
  }
}

__attribute__((constructor)) static void cg__self_register(void) {
  pthread_atfork(NULL, NULL, cg__self_child);
}

pid_t cg_pid(void) {
  struct cg__self *s = cg__self();
  pid_t pid = __atomic_load_n(&s->pid, __ATOMIC_RELAXED);

  if (pid <= 0) {
    /* Racing threads store the same value. */
    pid = getpid();
    __atomic_store_n(&s->pid, pid, __ATOMIC_RELAXED);
  }
  return pid;
}

uint64_t cg_proc_self_start(void) {
  struct cg__self *s = cg__self();
  uint64_t start = __atomic_load_n(&s->start, __ATOMIC_RELAXED);

  if (start == 0) {
    start = cg_proc_start(cg_pid());
    __atomic_store_n(&s->start, start, __ATOMIC_RELAXED);
  }
  return start;
}
