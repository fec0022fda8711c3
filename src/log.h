/* log.h - one-line diagnostics for the host's stderr.
 *
 * Every line starts with "curlguard: " and is written with a single write(2) so that it
 * never interleaves with other processes' output.  These functions never fail loudly:
 * a write error is ignored (the guard must never disturb its host).
 */
#ifndef CG_LOG_H
#define CG_LOG_H

/* Print "curlguard: <fmt>\n" on stderr.  Lines longer than 1 KiB are cut. */
void cg_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Like cg_warn, but only the first time this process sees `key` (a short string,
 * e.g. "log-open").  At most 64 distinct keys are remembered; past that every call
 * prints.  Thread-safe. */
void cg_warn_once(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Whether descriptor 2 may be written to now: not when it is a socket that was not the
 * process's stderr when the library was loaded (a host that closed its stderr, a daemon
 * run with `2>&-`, hands the number to libcurl's next connection, TCP or Unix, and a line
 * would go into a request), unless it is journald's stream socket.  A file, pipe or
 * terminal the host put there gets what it writes to stderr.  One fstat(2), and for a
 * socket getsockopt(2) and getpeername(2). */
int cg_stderr_usable(void);

/* write(2) all of `len` bytes to `fd` (retrying short writes and EINTR), without the
 * host ever getting a SIGPIPE for a closed pipe or a SIGXFSZ for a file grown past the
 * process's file size limit (`ulimit -f`, systemd's LimitFSIZE=; both kill by default):
 * the two are blocked in this thread for the write and one the write raised is consumed
 * (the technique of libcurl's lib/sigpipe.h and git's).  Returns `len`, or -1 with errno
 * set (EPIPE, EFBIG: setrlimit(2), write(2)). */
#include <stddef.h>
#include <sys/types.h>
ssize_t cg_write_quiet(int fd, const void *buf, size_t len);

/* Whether a file of `size` bytes fits the process's RLIMIT_FSIZE: growing a file past it
 * (ftruncate(2), write(2)) raises SIGXFSZ.  1 when it fits or the limit is unknown. */
int cg_fsize_fits(off_t size);

/* Whether the process has a finite RLIMIT_FSIZE (one getrlimit(2)). */
int cg_fsize_limited(void);

/* The same for a descriptor the caller knows is a regular file (fstat(2) S_ISREG when it
 * opened it, and still that file): a write to a regular file never raises SIGPIPE, so
 * the signal mask is left alone and the write is the only system call.  Never for
 * stderr, pipes, sockets, FIFOs or devices: use cg_write_quiet. */
ssize_t cg_write_regular(int fd, const void *buf, size_t len);

/* `fd`, a descriptor the guard just opened and keeps (close-on-exec), moved off 0, 1 and
 * 2: a host that runs with a standard stream closed (`2>&-`, a daemon) hands that number
 * out next, and what the host, or cg_warn, then writes to "stderr" would go into the
 * guard's state file or Redis socket.  Returns `fd` when it is above 2; else a copy at 3
 * or above (fcntl(2) F_DUPFD_CLOEXEC) with `fd` closed, or -1 with errno and `fd`
 * closed when no copy can be made (out of descriptors). */
int cg_fd_off_stdio(int fd);

#endif
