/* state.c - create, validate and map the shared state file (see state.h). */
#include "state.h"

#include "log.h"
#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CG_LOCK_WAIT_MS 2000 /* longest wait for another process initialising the file */

_Static_assert(sizeof(struct cg_state_header) <= CG_STATE_POOLS_OFF, "header too big");
_Static_assert(sizeof(struct cg_state_pool) % 8 == 0, "pool words must stay aligned");
_Static_assert(sizeof(struct cg_state_slot) % 8 == 0, "slot words must stay aligned");
_Static_assert(sizeof(struct cg_state_breaker) % 8 == 0, "breaker words must stay aligned");
_Static_assert(sizeof(struct cg_state_budget) % 8 == 0, "budget words must stay aligned");
_Static_assert(sizeof(struct cg_state_breaker) == 320 && sizeof(struct cg_state_budget) == 736,
               "the sizes documented in state.h");
_Static_assert(sizeof(struct cg_state_tally) == 480 && CG_STATE_SIZE == 573696,
               "the tally's size and the file's, as documented in state.h");

int64_t cg_state_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void cg__boot_id(char out[40]) {
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
  memset(out, 0, 40);
  if (f) {
    if (!fgets(out, 40, f))
      out[0] = '\0';
    fclose(f);
  }
  out[strcspn(out, "\n")] = '\0';
}

/* Fields 3 (state) and 22 (start time) of /proc/PID/stat.  0 on success. */
static int cg__proc_stat(pid_t pid, char *state, uint64_t *start) {
  char path[64], buf[1024];
  unsigned long long st = 0;
  const char *p;
  FILE *f;
  size_t n;
  int field;

  snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
  if (!(f = fopen(path, "re")))
    return -1;
  n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* The command name (field 2) may hold spaces and ')': skip to the last ')'. */
  if (!(p = strrchr(buf, ')')) || p[1] != ' ' || !p[2])
    return -1;
  *state = p[2];
  for (field = 2; *p && field < 22; p++)
    if (*p == ' ')
      field++;
  if (sscanf(p, "%llu", &st) != 1)
    return -1;
  *start = st;
  return 0;
}

uint64_t cg_proc_start(pid_t pid) {
  uint64_t start;
  char state;
  return cg__proc_stat(pid, &state, &start) == 0 ? start : 0;
}

int cg_proc_gone(pid_t pid, uint64_t start, uint64_t mask) {
  uint64_t now_start;
  char state;

  if (pid <= 0)
    return 1;
  if (kill(pid, 0) != 0 && errno == ESRCH)
    return 1;
  if (cg__proc_stat(pid, &state, &now_start) != 0)
    return start != 0; /* it died just now (or /proc is not there: trust the pid) */
  /* A killed process nobody has reaped yet (a zombie) still answers kill(pid, 0), but it
   * will never give anything back. */
  if (state == 'Z' || state == 'X' || state == 'x')
    return 1;
  return start != 0 && (now_start & mask) != (start & mask);
}

/* ---- SIGBUS (state.h) ---- */

/* The innermost guarded region of this thread.  CG_TLS (tls.h): the handler reads it
 * without the dynamic TLS machinery (which may allocate). */
static CG_TLS struct cg_state_guard *cg__guard_top;
static struct sigaction cg__old_bus; /* the action before ours, to chain to */
static pthread_once_t cg__bus_once = PTHREAD_ONCE_INIT;
static int cg__bus_installed; /* ours was installed (cg__bus_install) */
/* Set while the SIGBUS action in force is not ours (cg__bus_recheck): the host installed
 * a handler of its own after the guard's first call (Python's faulthandler.enable() or
 * signal.signal, a runtime started late).  Ours is not put back in front of it (a
 * handler that restores the action it replaced and raises again, as crash reporters do,
 * would then be called in a loop): instead nothing touches the mapping past the end of
 * the file any more, which a fault there would take to the host's handler.  The probe
 * asks fstat(2) for the file's length first, on every call while this is set. */
static int cg__bus_foreign;
/* Set when the last probe faulted (a file cut short and not repaired yet): until one
 * succeeds, the probe asks fstat(2) first too, so the same cut is not touched again
 * (whatever handler a host put in front meanwhile: cg__bus_recheck only runs once the
 * file is whole). */
static int cg__probe_faulted;

/* What would have happened without the guard: the previous handler runs (with its own
 * mask and flags as far as they matter here), or the default action kills the process
 * with SIGBUS (a fault re-runs the faulting instruction once the default is back; a sent
 * signal is raised again). */
static void cg__bus_chain(int sig, siginfo_t *si, void *uc) {
  struct sigaction old = cg__old_bus, dfl;
  int fault = si && si->si_code > 0; /* raised by the kernel, not sent */

  if (old.sa_handler == SIG_IGN && !fault)
    return;
  if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
    sigset_t mask, prev;
    mask = old.sa_mask;
    if (!(old.sa_flags & SA_NODEFER))
      sigaddset(&mask, sig);
    if (old.sa_flags & SA_RESETHAND) {
      memset(&dfl, 0, sizeof(dfl));
      dfl.sa_handler = SIG_DFL;
      sigaction(sig, &dfl, NULL);
    }
    pthread_sigmask(SIG_BLOCK, &mask, &prev);
    if (old.sa_flags & SA_SIGINFO)
      old.sa_sigaction(sig, si, uc);
    else
      old.sa_handler(sig);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    return;
  }
  /* SIG_DFL, or SIG_IGN for a fault (which the kernel would not ignore either). */
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, NULL);
  if (!fault)
    raise(sig);
}

static void cg__on_sigbus(int sig, siginfo_t *si, void *uc) {
  struct cg_state_guard *g = cg__guard_top;
  const char *a = si ? (const char *) si->si_addr : NULL;

  if (g && si && si->si_code > 0 && a >= g->lo && a < g->hi) {
    cg__guard_top = g->prev;
    siglongjmp(g->jb, 1); /* SA_NODEFER: the mask needs no restore */
  }
  cg__bus_chain(sig, si, uc);
}

static void cg__bus_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = cg__on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGBUS, &sa, &cg__old_bus) != 0)
    memset(&cg__old_bus, 0, sizeof(cg__old_bus)); /* SIG_DFL */
  __atomic_store_n(&cg__bus_installed, 1, __ATOMIC_RELEASE);
}

/* Whether the SIGBUS action in force is still ours, asked once a second with the length
 * check (cg__long_enough_now: one sigaction(2) that changes nothing); sets or clears
 * cg__bus_foreign.  A host's handler put in place between two checks (at most a second
 * and a call) still gets a fault of the probe of a file cut short meanwhile. */
static void cg__bus_recheck(void) {
  struct sigaction cur;
  int foreign;

  if (!__atomic_load_n(&cg__bus_installed, __ATOMIC_ACQUIRE) ||
      sigaction(SIGBUS, NULL, &cur) != 0)
    return;
  foreign = !((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == cg__on_sigbus);
  if (foreign != __atomic_load_n(&cg__bus_foreign, __ATOMIC_RELAXED))
    __atomic_store_n(&cg__bus_foreign, foreign, __ATOMIC_RELAXED);
}

void cg_state_sigbus_install(void) {
  pthread_once(&cg__bus_once, cg__bus_install);
}

void cg_state_guard_push(struct cg_state_guard *g, const struct cg_state *st) {
  g->lo = (const char *) st->hdr;
  g->hi = g->lo + st->size;
  g->prev = cg__guard_top;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  cg__guard_top = g;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

void cg_state_guard_pop(struct cg_state_guard *g) {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  cg__guard_top = g->prev;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

struct cg_state_guard *cg_state_guard_suspend(void) {
  struct cg_state_guard *g = cg__guard_top;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  cg__guard_top = NULL;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  return g;
}

void cg_state_guard_resume(struct cg_state_guard *g) {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  cg__guard_top = g;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* Take the file's lock, waiting at most CG_LOCK_WAIT_MS.  0 on success. */
static int cg__lock(int fd) {
  int waited = 0;
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR)
      return -1;
    if (waited >= CG_LOCK_WAIT_MS)
      return -1;
    usleep(5000);
    waited += 5;
  }
  return 0;
}

static void cg__map_parts(struct cg_state *st, void *base) {
  st->hdr = base;
  st->pools = (struct cg_state_pool *) ((char *) base + CG_STATE_POOLS_OFF);
  st->slots = (struct cg_state_slot *) ((char *) base + CG_STATE_SLOTS_OFF);
  st->breakers = (struct cg_state_breaker *) ((char *) base + CG_STATE_BREAKERS_OFF);
  st->budgets = (struct cg_state_budget *) ((char *) base + CG_STATE_BUDGETS_OFF);
  st->tallies = (struct cg_state_tally *) ((char *) base + CG_STATE_TALLIES_OFF);
  st->size = CG_STATE_SIZE;
}

/* Whether the mapped file is a ready file of this layout from this boot. */
static int cg__valid(const struct cg_state *st, const char *boot) {
  const struct cg_state_header *h = st->hdr;
  return __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == CG_STATE_MAGIC &&
         h->version == CG_STATE_VERSION && h->size == CG_STATE_SIZE &&
         h->npools == CG_STATE_POOLS && h->nslots == CG_STATE_SLOTS &&
         strncmp(h->boot_id, boot, sizeof(h->boot_id)) == 0;
}

#define CG_PID_LIMIT (1u << 22)  /* PID_MAX_LIMIT: no pid is larger */
#define CG_COUNT_LIMIT (1u << 24) /* no count of processes or calls gets near this */

static int cg__body_ok(const struct cg_state *st, int names);

int cg_state_body_ok(const struct cg_state *st) {
  return cg__body_ok(st, 1);
}

int cg_state_words_ok(const struct cg_state *st) {
  return cg__body_ok(st, 0);
}

static int cg__body_ok(const struct cg_state *st, int names) {
  int i;

  for (i = 0; i < CG_STATE_POOLS; i++) {
    const struct cg_state_pool *p = &st->pools[i];
    uint64_t hash = __atomic_load_n(&p->name_hash, __ATOMIC_ACQUIRE);
    uint32_t ready = __atomic_load_n(&p->name_ready, __ATOMIC_ACQUIRE);
    uint64_t bw = __atomic_load_n(&st->breakers[i].word, __ATOMIC_ACQUIRE);
    if (ready > 1 || (ready && !hash) ||
        (names && ready && !memchr(p->name, '\0', sizeof(p->name))) ||
        __atomic_load_n(&p->inflight, __ATOMIC_RELAXED) >= CG_COUNT_LIMIT ||
        __atomic_load_n(&p->waiters, __ATOMIC_RELAXED) >= CG_COUNT_LIMIT ||
        (bw & 3u) == 3u) /* breaker.h: states 0-2 */
      return 0;
  }
  for (i = 0; i < CG_STATE_SLOTS; i++) {
    uint64_t o = __atomic_load_n(&st->slots[i].owner, __ATOMIC_RELAXED);
    /* limiter.c: pid << 32 | pool index + 1 */
    if (o && ((o >> 32) == 0 || (o >> 32) >= CG_PID_LIMIT || (o & 0xFFFFFFFFu) == 0 ||
              (o & 0xFFFFFFFFu) > CG_STATE_POOLS))
      return 0;
  }
  return 1;
}

/* Clear everything and publish the header, magic last.  Called with the lock held. */
static void cg__init(struct cg_state *st, const char *boot) {
  struct cg_state_header *h = st->hdr;
  struct timespec ts;

  __atomic_store_n(&h->magic, 0, __ATOMIC_RELEASE);
  memset((char *) h + sizeof(h->magic), 0, CG_STATE_SIZE - sizeof(h->magic));
  h->version = CG_STATE_VERSION;
  h->size = CG_STATE_SIZE;
  h->npools = CG_STATE_POOLS;
  h->nslots = CG_STATE_SLOTS;
  clock_gettime(CLOCK_REALTIME, &ts);
  h->created_wall_ms = (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  snprintf(h->boot_id, sizeof(h->boot_id), "%s", boot);
  __atomic_store_n(&h->magic, CG_STATE_MAGIC, __ATOMIC_RELEASE);
}

/* Grow the file `fd` (its stat in `*sb`) to the layout's size when it is shorter.  Not
 * past the process's file size limit: ftruncate(2) would raise SIGXFSZ, which kills the
 * host; -1 with errno EFBIG then.  0, or -1 with errno. */
static int cg__grow(int fd, const struct stat *sb) {
  if (sb->st_size >= (off_t) CG_STATE_SIZE)
    return 0;
  if (!cg_fsize_fits((off_t) CG_STATE_SIZE)) {
    errno = EFBIG;
    return -1;
  }
  return ftruncate(fd, (off_t) CG_STATE_SIZE);
}

static int cg__fail(char *why, size_t len, int fd, const char *fmt, const char *path) {
  snprintf(why, len, fmt, path, strerror(errno));
  if (fd >= 0)
    close(fd);
  return -1;
}

/* Open `path` with `flags` (plus O_NOFOLLOW, O_CLOEXEC; mode 0600 when created) and
 * refuse a symbolic link, anything but a regular file, and another user's file.  Returns
 * the descriptor with its stat in `*sb`, or -1 with the reason in `why`. */
static int cg__open_own(const char *path, int flags, struct stat *sb, char *why, size_t len) {
  /* Never on 0, 1 or 2 (cg_fd_off_stdio): the host's stderr writes would land in the file. */
  /* O_NONBLOCK: a FIFO at the path must be refused at once, not waited on for a writer
   * (it changes nothing for a regular file). */
  int fd = cg_fd_off_stdio(
      open(path, flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0600));
  if (fd < 0 && errno == ELOOP) {
    snprintf(why, len, "state file %s is a symbolic link: refused", path);
    return -1;
  }
  if (fd < 0)
    return cg__fail(why, len, -1, "state file %s: %s", path);
  if (fstat(fd, sb) != 0)
    return cg__fail(why, len, fd, "state file %s: %s", path);
  if (!S_ISREG(sb->st_mode) || sb->st_uid != getuid()) {
    snprintf(why, len, "state file %s is %s: refused", path,
             !S_ISREG(sb->st_mode) ? "not a regular file" : "owned by another user");
    close(fd);
    return -1;
  }
  return fd;
}

/* Whether the file open at `fd` (`size` bytes) may be made a state file: it is empty, or
 * starts with the magic as far as its bytes go (a state file of any layout or boot, or one
 * cut short), or has the layout's size and either a zero magic (an initialisation that did
 * not finish: cg__init clears the magic first and writes it last) or this layout's size
 * and counts in its header (a state file whose magic a stray write changed).  Anything
 * else is some other file that CURLGUARD_STATE names by mistake (~/.bashrc, a file of
 * root's): it is never grown or overwritten. */
static int cg__ours(int fd, off_t size) {
  struct cg_state_header h;
  size_t n = size < (off_t) sizeof(h) ? (size_t) size : sizeof(h);
  uint64_t magic = CG_STATE_MAGIC;

  if (size == 0)
    return 1;
  if (pread(fd, &h, n, 0) != (ssize_t) n)
    return 0;
  if (memcmp(&h, &magic, n < sizeof(magic) ? n : sizeof(magic)) == 0)
    return 1;
  return size == (off_t) CG_STATE_SIZE &&
         (h.magic == 0 || (h.size == CG_STATE_SIZE && h.npools == CG_STATE_POOLS &&
                           h.nslots == CG_STATE_SLOTS));
}

static int cg__open(const char *path, struct cg_state *st, int force_init, char *why,
                    size_t len) {
  struct cg_state_guard g;
  struct stat sb;
  char boot[40];
  void *base;
  int fd, grown;

  memset(st, 0, sizeof(*st));
  st->fd = -1;
  cg__boot_id(boot);
  fd = cg__open_own(path, O_RDWR | O_CREAT, &sb, why, len);
  if (fd < 0)
    return -1;
  if (cg__lock(fd) != 0) {
    errno = ETIMEDOUT;
    return cg__fail(why, len, fd, "state file %s: cannot lock it (%s)", path);
  }
  if (fstat(fd, &sb) == 0 && !cg__ours(fd, sb.st_size)) {
    flock(fd, LOCK_UN);
    close(fd);
    snprintf(why, len, "state file %s is not a curlguard state file (it does not start with "
             "CGCGGRD1): not overwritten; name another file, or remove it", path);
    return -1;
  }
  /* Never map past the end: a short (new, or truncated) file is grown first, and then
   * re-made even when its header survived (as cg__repair does). */
  if (fstat(fd, &sb) != 0 || cg__grow(fd, &sb) != 0) {
    flock(fd, LOCK_UN);
    if (errno == EFBIG) {
      snprintf(why, len, "state file %s: cannot size it: the process's file size limit "
               "(ulimit -f) is below its %zu bytes", path, (size_t) CG_STATE_SIZE);
      close(fd);
      return -1;
    }
    return cg__fail(why, len, fd, "state file %s: cannot size it: %s", path);
  }
  grown = sb.st_size < (off_t) CG_STATE_SIZE;
  base = mmap(NULL, CG_STATE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    flock(fd, LOCK_UN);
    return cg__fail(why, len, fd, "state file %s: cannot map it: %s", path);
  }
  cg__map_parts(st, base);
  cg_state_sigbus_install();
  if (sigsetjmp(g.jb, 0) != 0) {
    /* Cut short again while we looked at it or cleared it, or no room for its pages (a
     * full file system: the file is sparse, and a page with no block to go to raises
     * SIGBUS as a cut does). */
    flock(fd, LOCK_UN);
    munmap(base, CG_STATE_SIZE);
    memset(st, 0, sizeof(*st));
    st->fd = -1;
    errno = EIO;
    return cg__fail(why, len, fd, "state file %s: cut short, or out of space on its file "
                    "system, while it was initialised (%s)", path);
  }
  cg_state_guard_push(&g, st);
  /* Garbage behind a good header (a stray write, a file of another program) would make
   * every call run unpaced: it is re-made like a file of another layout. */
  if (force_init || grown || !cg__valid(st, boot) || !cg_state_body_ok(st))
    cg__init(st, boot);
  cg_state_guard_pop(&g);
  flock(fd, LOCK_UN);
  st->fd = fd;
  st->dev = sb.st_dev;
  st->ino = sb.st_ino;
  st->path = strdup(path); /* NULL (out of memory): cg_state_check then does nothing */
  return 0;
}

int cg_state_open(const char *path, struct cg_state *st, char *why, size_t whylen) {
  return cg__open(path, st, 0, why, whylen);
}

int cg_state_open_readonly(const char *path, struct cg_state *st, char *why, size_t len) {
  struct cg_state_guard g;
  uint32_t version;
  int valid;
  struct stat sb;
  char boot[40];
  void *base;
  int fd;

  memset(st, 0, sizeof(*st));
  st->fd = -1;
  cg__boot_id(boot);
  fd = cg__open_own(path, O_RDONLY, &sb, why, len);
  if (fd < 0)
    return -1;
  /* Another program's file is never re-made (cg__open refuses it): no such advice. */
  if (!cg__ours(fd, sb.st_size)) {
    snprintf(why, len, "state file %s is not a curlguard state file (it does not start with "
             "CGCGGRD1): not read; name another file, or remove it", path);
    close(fd);
    return -1;
  }
  if (sb.st_size < (off_t) CG_STATE_SIZE) {
    snprintf(why, len, "state file %s is %lld bytes, shorter than layout %u (%u bytes): not "
             "read (the next guarded call, or curlguard reset, re-makes it)", path,
             (long long) sb.st_size, CG_STATE_VERSION, (unsigned) CG_STATE_SIZE);
    close(fd);
    return -1;
  }
  base = mmap(NULL, CG_STATE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED)
    return cg__fail(why, len, fd, "state file %s: cannot map it: %s", path);
  cg__map_parts(st, base);
  st->fd = fd;
  st->dev = sb.st_dev;
  st->ino = sb.st_ino;
  cg_state_sigbus_install();
  if (sigsetjmp(g.jb, 0) != 0) {
    snprintf(why, len, "state file %s was truncated while it was read (the next guarded "
             "call, or curlguard reset, re-makes it)", path);
    cg_state_close(st);
    return -1;
  }
  cg_state_guard_push(&g, st);
  valid = cg__valid(st, boot);
  version = st->hdr->version;
  cg_state_guard_pop(&g);
  if (!valid && version != CG_STATE_VERSION) {
    snprintf(why, len, "state file %s has layout %u in its header, not %u: not read (the "
             "next guarded call, or curlguard reset, re-makes it)", path, version,
             CG_STATE_VERSION);
    cg_state_close(st);
    return -1;
  }
  if (!valid) {
    snprintf(why, len, "state file %s is a layout-%u file not made ready since this boot: "
             "not read (the next guarded call, or curlguard reset, re-makes it)", path,
             CG_STATE_VERSION);
    cg_state_close(st);
    return -1;
  }
  return 0;
}

int cg_state_reset(const char *path, char *why, size_t whylen) {
  struct cg_state st;
  if (cg__open(path, &st, 1, why, whylen) != 0)
    return -1;
  cg_state_close(&st);
  return 0;
}

void cg_state_close(struct cg_state *st) {
  free(st->path);
  if (st->hdr)
    munmap(st->hdr, st->size);
  if (st->fd >= 0)
    close(st->fd);
  memset(st, 0, sizeof(*st));
  st->fd = -1;
}

#define CG_STATE_REMAPS 4 /* fresh mappings of a file found re-made under us, at most */

static pthread_mutex_t cg__state_mutex = PTHREAD_MUTEX_INITIALIZER;
/* The mappings made so far; the current one is cg__state_cur.  An older one is never
 * unmapped: another thread may still be in a call that uses it.  cg__state_cur and
 * cg__state_tried are written under cg__state_mutex and read without it (atomics: the
 * fast path of cg_state_get); cg__state_bad only decides whether a line is said. */
static struct cg_state cg__states[1 + CG_STATE_REMAPS];
static int cg__nstates;
static struct cg_state *cg__state_cur;
static int cg__state_tried;
static int cg__state_bad; /* the last check found the file unusable (said once) */
/* A file that could not be opened (cg__state_cur NULL once tried) is tried again, at most
 * once every CG__STATE_RETRY_MS, on the calls that come meanwhile, as the usage log is
 * (record.c CG__LOG_RETRY_MS): what failed may pass later (a full disk freed, a directory
 * made, a permission fixed), and a long-running host ran without the limiter for the rest
 * of its life after one bad moment (helper-55: a full tmpfs freed 0.5 s after the start,
 * 30 calls in 3 s at RPM 60).  The first failure is said; the tries after it are silent
 * until one succeeds, which says so. */
#define CG__STATE_RETRY_MS 1000
static int64_t cg__state_failed_ns; /* cg_state_now() of the last failed opening */

/* A forked child must not inherit cg__state_mutex held by a thread it does not have. */
static void cg__fork_prepare(void) {
  pthread_mutex_lock(&cg__state_mutex);
}
static void cg__fork_release(void) {
  pthread_mutex_unlock(&cg__state_mutex);
}
__attribute__((constructor)) static void cg__fork_register(void) {
  pthread_atfork(cg__fork_prepare, cg__fork_release, cg__fork_release);
}

/* How often a process checks the file's length with fstat(2) besides the probe below,
 * which costs no system call: truncation can only be seen by a probe down to the page
 * that holds the last word, so a file cut to within its last page (the final bytes of
 * the last pool's tally) is only seen by this fstat, at most this long after. */
#define CG_STATE_FSTAT_NS 1000000000LL

static int64_t cg__state_fstat_at; /* when a fast path last did its fstat (atomic) */

static int cg__long_enough(const struct cg_state *st);

/* Whether the file still backs the whole mapping, as far as pages tell: a guarded read
 * of its first and last words.  A file cut short under the mapping faults on the read
 * of a page past its new end; the SIGBUS guard turns the fault into 0.  Sets `*magic_ok`
 * to whether the header still carries the magic.  No system call, unless the host's
 * SIGBUS handler is in force (cg__bus_foreign): then fstat(2) first, and a file found
 * short is not read. */
static int cg__probe(const struct cg_state *st, int *magic_ok) {
  struct cg_state_guard g;
  const uint64_t *last = (const uint64_t *) ((const char *) st->hdr + CG_STATE_SIZE) - 1;
  uint64_t magic;

  *magic_ok = 0;
  /* Not read unless fstat says it is whole: a descriptor the host took (-1) tells
   * nothing, and cg_state_get opens the file again. */
  if (__builtin_expect(__atomic_load_n(&cg__bus_foreign, __ATOMIC_RELAXED) |
                           __atomic_load_n(&cg__probe_faulted, __ATOMIC_RELAXED),
                       0) &&
      cg__long_enough(st) != 1)
    return 0;
  if (sigsetjmp(g.jb, 0) != 0) {
    __atomic_store_n(&cg__probe_faulted, 1, __ATOMIC_RELAXED);
    return 0;
  }
  cg_state_guard_push(&g, st);
  magic = __atomic_load_n(&st->hdr->magic, __ATOMIC_ACQUIRE);
  (void) __atomic_load_n(last, __ATOMIC_RELAXED);
  cg_state_guard_pop(&g);
  if (__builtin_expect(__atomic_load_n(&cg__probe_faulted, __ATOMIC_RELAXED), 0))
    __atomic_store_n(&cg__probe_faulted, 0, __ATOMIC_RELAXED);
  *magic_ok = magic == CG_STATE_MAGIC;
  return 1;
}

/* Whether descriptor `fd` still names the mapped file, with its stat(2) in `*sb`.  Not so
 * once the host closed the number (a daemon's close loop, closerange(2)) or put a file of
 * its own on it (open(2) after such a loop, dup2(2)): that number is the host's now, and
 * is never locked, closed or written by us again. */
static int cg__fd_ours(const struct cg_state *st, int fd, struct stat *sb) {
  return fd >= 0 && fstat(fd, sb) == 0 && sb->st_dev == st->dev && sb->st_ino == st->ino;
}

/* Set when a check found st->fd no longer the file's (cg__fd_ours): cg_state_get opens it
 * again at its path, and clears this. */
static int cg__state_fd_lost;
/* Set when the mapped file could neither be opened again nor replaced by a new mapping
 * (another file at the path, CG_STATE_REMAPS used up): the process keeps its mapping,
 * checked by the probe alone (no descriptor to ask for the length). */
static int cg__state_kept;

/* One fstat(2) of the file: 1 as long as the layout, 0 shorter, -1 when the descriptor
 * is not the file's any more (cg__fd_ours; then cg__state_fd_lost is set). */
static int cg__long_enough(const struct cg_state *st) {
  struct stat sb;
  if (!cg__fd_ours(st, __atomic_load_n(&st->fd, __ATOMIC_ACQUIRE), &sb)) {
    __atomic_store_n(&cg__state_fd_lost, 1, __ATOMIC_RELAXED);
    return -1;
  }
  return sb.st_size >= (off_t) CG_STATE_SIZE;
}

/* The fast paths' length check: fstat(2) at most once per CG_STATE_FSTAT_NS per process
 * (racing threads may both do it, harmlessly), and on every call while the last one
 * found the file short, until a check finds it whole again.  A descriptor the host took
 * (cg__fd_ours) tells nothing of the length: the mapping counts as whole as far as the
 * probe tells, and cg_state_get opens the file again. */
static int cg__state_fstat_short;

/* `now`: the caller's cg_state_now() (0: none, read here). */
static int cg__long_enough_now(const struct cg_state *st, int64_t now) {
  int64_t at;
  int ok;

  if (!__atomic_load_n(&cg__state_fstat_short, __ATOMIC_RELAXED)) {
    if (now <= 0)
      now = cg_state_now();
    at = __atomic_load_n(&cg__state_fstat_at, __ATOMIC_RELAXED);
    if (at != 0 && now >= at && now - at < CG_STATE_FSTAT_NS)
      return 1;
    __atomic_store_n(&cg__state_fstat_at, now, __ATOMIC_RELAXED);
    cg__bus_recheck();
  }
  if (__atomic_load_n(&cg__state_kept, __ATOMIC_RELAXED))
    return 1;
  ok = cg__long_enough(st) != 0;
  __atomic_store_n(&cg__state_fstat_short, !ok, __ATOMIC_RELAXED);
  return ok;
}

/* Whether the mapping can be touched now: its file still backs every page of it
 * (truncating a mapped file turns every access past the new end into SIGBUS), it still
 * carries the magic, and fstat(2) says it is as long as the layout: on every call when
 * `full`, else as cg__long_enough_now does (at `now`, as there). */
static int cg__usable(const struct cg_state *st, int full, int *short_file, int64_t now) {
  int magic_ok;

  *short_file = !cg__probe(st, &magic_ok);
  if (!*short_file) {
    if (full && !__atomic_load_n(&cg__state_kept, __ATOMIC_RELAXED)) {
      /* A descriptor not the file's any more, which cg_state_get could not replace (the
       * path now names another file, or none): its length is unknown, so the mapping is
       * not usable as it is, without being short (cg__repair then finds another file at
       * the path). */
      int le = cg__long_enough(st);
      *short_file = le == 0;
      __atomic_store_n(&cg__state_fstat_short, *short_file, __ATOMIC_RELAXED);
      return le == 1 && magic_ok;
    } else if (!full) {
      *short_file = !cg__long_enough_now(st, now);
    }
  }
  return !*short_file && magic_ok;
}

int cg_state_intact_at(const struct cg_state *st, int64_t now) {
  int magic_ok;
  if (!st || !cg__probe(st, &magic_ok))
    return 0;
  return cg__long_enough_now(st, now);
}

int cg_state_intact(const struct cg_state *st) {
  return cg_state_intact_at(st, 0);
}

/* A descriptor of `path` (cg__open_own, read and write) when the path still names the
 * file `st` maps (same device and inode).  -1 when it names another file or none, or is
 * refused; -2 when it cannot be opened now (out of descriptors or memory, interrupted:
 * worth asking again). */
static int cg__open_same(const struct cg_state *st, const char *path) {
  struct stat sb;
  char why[256];
  int fd;

  errno = 0; /* cg__open_own's refusals (not a regular file, another user's) set none */
  fd = cg__open_own(path, O_RDWR, &sb, why, sizeof(why));
  if (fd < 0)
    return errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == EINTR ? -2 : -1;
  if (sb.st_dev != st->dev || sb.st_ino != st->ino) {
    close(fd);
    return -1;
  }
  return fd;
}

/* The file at `path` is still the one `st` maps (same device and inode): repair it in
 * place, as cg_state_open would (grow it to the layout, re-initialise it under its lock
 * unless another process already did), keeping the mapping.  0 when this call re-made
 * it; 2 when another process had repaired it already (valid under the lock); 1 when
 * `path` is now another file (or none), -1 when the repair failed. */
static int cg__repair(struct cg_state *st, const char *path) {
  struct cg_state_guard g;
  struct stat sb;
  char boot[40];
  int fd;
  volatile int rc = 0;

  if ((fd = cg__open_same(st, path)) < 0)
    return 1;
  cg__boot_id(boot);
  if (cg__lock(fd) != 0) {
    close(fd);
    return -1;
  }
  if (fstat(fd, &sb) != 0 || cg__grow(fd, &sb) != 0) {
    rc = -1;
  } else if (sigsetjmp(g.jb, 0) != 0) {
    rc = -1; /* cut again meanwhile: the next call tries again */
  } else {
    cg_state_guard_push(&g, st);
    /* Grown back by this call: re-made even when the header survived the cut.  What
     * was cut away came back as zeros, and what was not (in-flight slots of calls that
     * dropped the state on the fault, counted for ever while their processes live)
     * must not outlive it. */
    if (sb.st_size < (off_t) CG_STATE_SIZE || !cg__valid(st, boot) || !cg_state_body_ok(st))
      cg__init(st, boot);
    else
      rc = 2;
    cg_state_guard_pop(&g);
  }
  flock(fd, LOCK_UN);
  close(fd);
  return rc;
}

int cg_state_check(struct cg_state *st) {
  struct cg_state_guard g;
  struct stat sb;
  char boot[40];
  volatile int rc = 0;
  int fd;

  /* The lock is taken on a descriptor of its own, opened at the path, never on st->fd:
   * that number may be the host's now, even one of the host's own onto this very file
   * (same device and inode), whose lock ours would take over and drop (flock(2) locks
   * belong to the open file description). */
  if (!st || !st->path || (fd = cg__open_same(st, st->path)) < 0)
    return 0; /* another file at the path now (cg_state_get maps it), or none */
  cg__boot_id(boot);
  if (cg__lock(fd) != 0) {
    close(fd);
    return 0;
  }
  if (fstat(fd, &sb) == 0 && sb.st_size >= (off_t) CG_STATE_SIZE) {
    if (sigsetjmp(g.jb, 0) == 0) {
      cg_state_guard_push(&g, st);
      if (cg__valid(st, boot) && !cg_state_body_ok(st)) {
        cg__init(st, boot);
        rc = 1;
      }
      cg_state_guard_pop(&g);
    }
  }
  flock(fd, LOCK_UN);
  close(fd);
  if (rc)
    cg_warn_once("state-garbage", "state file held values no curlguard writes (garbage behind "
                 "a valid header); re-initialised it");
  return rc;
}

/* The file's descriptor again, after the host closed or took st->fd's number
 * (cg__state_fd_lost): the path opened anew, and kept when it still names the mapped
 * file.  1 then; 0 when the path names another file or none (cg__repair then finds
 * that); -1 when it cannot be opened now (out of descriptors, say): asked again on the
 * next call.  Under cg__state_mutex.  The host's number is left to the host. */
static int cg__reopen(struct cg_state *st, const char *path) {
  struct stat sb;
  int fd;

  if (cg__fd_ours(st, __atomic_load_n(&st->fd, __ATOMIC_ACQUIRE), &sb))
    return 1; /* another thread's check raced a reopen */
  if (!path)
    return 0;
  fd = cg__open_same(st, path);
  if (fd < 0)
    return fd == -2 ? -1 : 0; /* -1: out of descriptors for now, again on the next call */
  __atomic_store_n(&st->fd, fd, __ATOMIC_RELEASE);
  return 1;
}

struct cg_state *cg_state_get_at(const char *path, int64_t *nowp) {
  struct cg_state *st;
  char why[512];
  int short_file, fast_short = 0, lost = 0, magic_ok;

  /* The usual call: the file was opened before and is still whole.  No lock and no
   * system call (cg__usable: a guarded probe, an fstat at most once a second). */
  if (__atomic_load_n(&cg__state_tried, __ATOMIC_ACQUIRE)) {
    st = __atomic_load_n(&cg__state_cur, __ATOMIC_ACQUIRE);
    if (!st) {
      /* never opened: said once, when it was tried; tried again once a second */
      if (!path || cg_state_now() - __atomic_load_n(&cg__state_failed_ns, __ATOMIC_RELAXED) <
                       (int64_t) CG__STATE_RETRY_MS * 1000000)
        return NULL;
    } else if (cg__usable(st, 0, &short_file, *nowp) &&
        !__atomic_load_n(&cg__state_fd_lost, __ATOMIC_RELAXED)) {
      if (__atomic_load_n(&cg__state_bad, __ATOMIC_RELAXED))
        __atomic_store_n(&cg__state_bad, 0, __ATOMIC_RELAXED);
      return st;
    } else {
      fast_short = short_file;
    }
  }
  *nowp = 0; /* the lock, and what is done under it, may take time */
  pthread_mutex_lock(&cg__state_mutex);
  /* The first opening, or a try again of a file never opened (CG__STATE_RETRY_MS). */
  if (!cg__state_tried ||
      (!cg__state_cur && path &&
       cg_state_now() - cg__state_failed_ns >= (int64_t) CG__STATE_RETRY_MS * 1000000)) {
    int first = !cg__state_tried;
    if (!path || cg_state_open(path, &cg__states[0], why, sizeof(why)) != 0) {
      if (first)
        cg_warn("%s; requests run without the shared limiter%s",
                path ? why : "no state file configured",
                path ? " (tried again once a second)" : "");
      __atomic_store_n(&cg__state_failed_ns, cg_state_now(), __ATOMIC_RELAXED);
    } else {
      cg__nstates = 1;
      __atomic_store_n(&cg__state_cur, &cg__states[0], __ATOMIC_RELEASE);
      if (!first)
        cg_warn("state file %s opened now; requests are paced by the shared limiter again",
                path);
    }
    __atomic_store_n(&cg__state_tried, 1, __ATOMIC_RELEASE);
  }
  st = cg__state_cur;
  if (st && __atomic_load_n(&cg__state_fd_lost, __ATOMIC_RELAXED)) {
    /* The host closed or took the descriptor's number: the same file opened again (the
     * mapping stays), quietly.  Not a cut: nothing is re-made or said. */
    int r = cg__reopen(st, path);
    if (r < 0 && cg__probe(st, &magic_ok) && magic_ok) {
      pthread_mutex_unlock(&cg__state_mutex);
      return st; /* cannot open it now: the mapping as the probe found it; again next call */
    }
    lost = r == 0;
    __atomic_store_n(&cg__state_fd_lost, 0, __ATOMIC_RELAXED);
  }
  if (st && !cg__usable(st, 1, &short_file, 0)) {
    /* Seen cut short a moment ago, and now grown back by another process's repair still
     * under way (not valid yet): the cut is the reason, as it was when there was only
     * this one check. */
    short_file |= fast_short;
    /* Cut short, emptied or re-made under us: the same file is repaired in place (grown
     * and re-initialised under its lock, as a new process would); a file that is now
     * another one at the path gets a fresh mapping. */
    int r = path ? cg__repair(st, path) : -1;
    if (r == 2 && !short_file) {
      /* Another process grew it back and re-made it while this one looked (the header
       * not written yet when the probe read it): usable again, and that process said
       * so.  Not "not valid" here: nothing this process saw was. */
      __atomic_store_n(&cg__state_bad, 0, __ATOMIC_RELAXED);
    } else if (r == 0 || r == 2) {
      if (!__atomic_load_n(&cg__state_bad, __ATOMIC_RELAXED))
        cg_warn_once("state-repaired", "state file %s was %s; re-initialised it (its pools, "
                     "breakers and budgets start over)", path,
                     short_file ? "cut short under this process (truncated?)" : "not valid");
      __atomic_store_n(&cg__state_bad, 0, __ATOMIC_RELAXED);
    } else if (r == 1 && cg__nstates <= CG_STATE_REMAPS &&
               cg_state_open(path, &cg__states[cg__nstates], why, sizeof(why)) == 0) {
      st = &cg__states[cg__nstates++];
      __atomic_store_n(&cg__state_cur, st, __ATOMIC_RELEASE);
      __atomic_store_n(&cg__state_bad, 0, __ATOMIC_RELAXED);
    } else if (lost && cg__probe(st, &magic_ok) && magic_ok) {
      /* The host took the descriptor and the path names another file (or none) that no
       * new mapping can be made of: the file this process has is whole and valid as far
       * as the probe tells, and it goes on with it rather than without a limiter. */
      __atomic_store_n(&cg__state_kept, 1, __ATOMIC_RELAXED);
      cg_warn_once("state-kept", "state file %s no longer opens as the file this process "
                   "maps (removed, replaced or refused while the host had closed this "
                   "process's descriptor of it) and no new mapping of it can be made; this "
                   "process goes on with the file it has",
                   path ? path : "(none)");
    } else {
      if (!__atomic_load_n(&cg__state_bad, __ATOMIC_RELAXED))
        cg_warn("state file %s is %s; requests run without the shared limiter until it is "
                "valid again",
                path ? path : "(none)",
                short_file ? "shorter than its layout (truncated?)" : "not valid");
      __atomic_store_n(&cg__state_bad, 1, __ATOMIC_RELAXED);
      st = NULL;
    }
  } else if (st) {
    __atomic_store_n(&cg__state_bad, 0, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&cg__state_mutex);
  return st;
}

struct cg_state *cg_state_get(const char *path) {
  int64_t now = 0;
  return cg_state_get_at(path, &now);
}
