/* log.c - one-line diagnostics for the host's stderr (see log.h). */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <time.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define CG_WARN_KEYS 64

static pthread_mutex_t cg__warn_mutex = PTHREAD_MUTEX_INITIALIZER;

/* A forked child must not inherit cg__warn_mutex held by a thread it does not have: hold it
 * across fork() (pthread_atfork(3)).  It is the innermost lock (cg_warn_once is called with
 * cg__state_mutex and cg__log_mutex held), so it must be taken last: prepare handlers run
 * in the reverse order of registration, hence this one is registered first (a constructor
 * priority runs before the plain constructors of the other files).  Registered after them,
 * fork() took it first and then waited for cg__state_mutex held by a thread that was
 * waiting for it: the whole process hung. */
static void cg__fork_prepare(void) {
  pthread_mutex_lock(&cg__warn_mutex);
}
static void cg__fork_release(void) {
  pthread_mutex_unlock(&cg__warn_mutex);
}
__attribute__((constructor(101))) static void cg__fork_register(void) {
  pthread_atfork(cg__fork_prepare, cg__fork_release, cg__fork_release);
}
static char cg__warn_keys[CG_WARN_KEYS][32];
static int cg__warn_nkeys;

/* What descriptor 2 was when the library was loaded (cg__err_learn): a line goes to it
 * while it is still that file (cg_stderr_usable). */
static dev_t cg__err_dev;
static ino_t cg__err_ino;
static int cg__err_known;

__attribute__((constructor)) static void cg__err_learn(void) {
  struct stat sb;
  if (fstat(STDERR_FILENO, &sb) == 0) {
    cg__err_dev = sb.st_dev;
    cg__err_ino = sb.st_ino;
    cg__err_known = 1;
  }
}

/* Whether the Unix socket `fd` is connected to journald's stream socket, which a host may
 * connect its stderr to itself (sd_journal_stream_fd(3)). */
static int cg__journal_stream(int fd) {
  static const char journal[] = "/run/systemd/journal/stdout";
  struct sockaddr_un sa;
  socklen_t sl = sizeof(sa);

  memset(&sa, 0, sizeof(sa));
  return getpeername(fd, (struct sockaddr *) &sa, &sl) == 0 &&
         sl >= offsetof(struct sockaddr_un, sun_path) + sizeof(journal) - 1 &&
         strncmp(sa.sun_path, journal, sizeof(sa.sun_path)) == 0;
}

/* Whether a line may be written to descriptor 2 now (log.h).  A file, pipe or terminal
 * the host put there itself (freopen(3) of a log) gets the lines, as it gets the host's
 * own stderr; a Unix socket put there after load is libcurl's connection as much as a TCP
 * one (CURLOPT_UNIX_SOCKET_PATH: Docker's API, a local proxy), unless it is journald's.
 * One fstat(2) per line (more for a socket): lines are rare. */
int cg_stderr_usable(void) {
  struct stat sb;
  int domain;
  socklen_t len = sizeof(domain);

  if (fstat(STDERR_FILENO, &sb) != 0)
    return 0;
  if (!S_ISSOCK(sb.st_mode) ||
      (cg__err_known && sb.st_dev == cg__err_dev && sb.st_ino == cg__err_ino))
    return 1;
  return getsockopt(STDERR_FILENO, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 &&
         domain == AF_UNIX && cg__journal_stream(STDERR_FILENO);
}

static void cg__vwarn(const char *fmt, va_list ap) {
  char line[1024];
  size_t pre = sizeof("curlguard: ") - 1;
  int n;

  memcpy(line, "curlguard: ", pre);
  n = vsnprintf(line + pre, sizeof(line) - pre - 1, fmt, ap);
  if (n < 0)
    return;
  if ((size_t) n > sizeof(line) - pre - 2)
    n = (int) (sizeof(line) - pre - 2);
  line[pre + (size_t) n] = '\n';
  /* One write(2): a line never interleaves with another process's line. */
  if (cg_stderr_usable())
    cg_write_quiet(STDERR_FILENO, line, pre + (size_t) n + 1);
}

/* write(2) all of `len` bytes, retrying short writes and EINTR.  0, or the errno. */
static int cg__write_all(int fd, const void *buf, size_t len) {
  size_t done = 0;

  while (done < len) {
    ssize_t w = write(fd, (const char *) buf + done, len - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return w < 0 ? errno : EIO;
    done += (size_t) w;
  }
  return 0;
}

ssize_t cg_write_quiet(int fd, const void *buf, size_t len) {
  sigset_t set, old, pending;
  int pipe_was = 0, xfsz_was = 0, err;

  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  sigaddset(&set, SIGXFSZ);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  /* A signal can only be pending already if the thread had it blocked: only then ask
   * (one system call saved on every other write). */
  if (sigismember(&old, SIGPIPE) == 1 || sigismember(&old, SIGXFSZ) == 1) {
    sigpending(&pending);
    pipe_was = sigismember(&pending, SIGPIPE) == 1;
    xfsz_was = sigismember(&pending, SIGXFSZ) == 1;
  }
  err = cg__write_all(fd, buf, len);
  if ((err == EPIPE && !pipe_was) || (err == EFBIG && !xfsz_was)) {
    const struct timespec zero = {0, 0};
    sigset_t ours;
    sigemptyset(&ours);
    sigaddset(&ours, err == EPIPE ? SIGPIPE : SIGXFSZ);
    sigtimedwait(&ours, NULL, &zero); /* ours: take it back */
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (err) {
    errno = err;
    return -1;
  }
  return (ssize_t) len;
}

int cg_fsize_fits(off_t size) {
  struct rlimit rl;
  return getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
         (size >= 0 && (rlim_t) size <= rl.rlim_cur);
}

int cg_fsize_limited(void) {
  struct rlimit rl;
  return getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
}

ssize_t cg_write_regular(int fd, const void *buf, size_t len) {
  int err = cg__write_all(fd, buf, len);
  if (err) {
    errno = err;
    return -1;
  }
  return (ssize_t) len;
}

void cg_warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cg__vwarn(fmt, ap);
  va_end(ap);
}

/* Returns 1 when `key` was seen before, else remembers it and returns 0. */
static int cg__warn_seen(const char *key) {
  int i, seen = 0;

  pthread_mutex_lock(&cg__warn_mutex);
  for (i = 0; i < cg__warn_nkeys; i++) {
    if (strncmp(cg__warn_keys[i], key, sizeof(cg__warn_keys[i]) - 1) == 0) {
      seen = 1;
      break;
    }
  }
  if (!seen && cg__warn_nkeys < CG_WARN_KEYS) {
    strncpy(cg__warn_keys[cg__warn_nkeys], key, sizeof(cg__warn_keys[0]) - 1);
    cg__warn_nkeys++;
  }
  pthread_mutex_unlock(&cg__warn_mutex);
  return seen;
}

void cg_warn_once(const char *key, const char *fmt, ...) {
  va_list ap;

  if (cg__warn_seen(key))
    return;
  va_start(ap, fmt);
  cg__vwarn(fmt, ap);
  va_end(ap);
}

int cg_fd_off_stdio(int fd) {
  int up, err;

  if (fd < 0 || fd > STDERR_FILENO)
    return fd;
  up = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  err = errno;
  close(fd);
  errno = err;
  return up;
}
