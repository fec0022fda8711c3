/* shared-redis.c - Redis behind the shared-state interface (shared.h; README "Fleets:
 * shared state on Redis").
 *
 * One connection per thread (no lock to wait on, no deadlock; a forked child sees the
 * parent's pid in it and connects anew), made with redisConnectWithTimeout and used with
 * redisSetTimeout: no call waits on Redis longer than CG_REDIS_TIMEOUT_MS per round trip,
 * and a reply is read within CG_REDIS_REPLY_MS in all, in at most CG_REDIS_REPLY_READS
 * reads, with at most CG_REDIS_ELEMENTS elements an array (cg__get_reply): hiredis 0.14
 * bounds neither the reads of one reply nor its size.
 * Any failure drops the connection, says so once per process per cause and makes the
 * caller fall back on the state file (CG_SHARED_DOWN); the next connect is tried on a
 * later call after a backoff (CG_REDIS_BACKOFF_MIN_MS doubling to _MAX_MS).
 *
 * hiredis (0.14, Debian's libhiredis-dev) is linked statically into libcurlguard.so with
 * its symbols hidden (Makefile: -Wl,--exclude-libs,libhiredis.a), so a host that links
 * its own hiredis keeps its own.
 */
#include "shared.h"

#include "breaker.h"
#include "clock.h"
#include "budget.h"
#include "limiter.h"
#include "log.h"
#include "proc.h"
#include "redis-lua.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define CG_REDIS_TIMEOUT_MS 50      /* connect, and each round trip */
#define CG_REDIS_REPLY_MS 100       /* one reply, all its reads */
#define CG_REDIS_REPLY_READS 64     /* reads of one reply (hiredis: 16 KiB each) */
#define CG_REDIS_ELEMENTS 65536     /* elements of one array of a reply */
#define CG_REDIS_WAIT_CAP_NS (60 * INT64_C(1000000000)) /* a budget's or learned wait, at most */
#define CG_REDIS_REFUSED_CAP_NS (86400 * INT64_C(1000000000)) /* a refused reserve's wait */
#define CG_REDIS_BACKOFF_MIN_MS 100
#define CG_REDIS_BACKOFF_MAX_MS 5000
#define CG_REDIS_LEASE_MS 3000      /* an in-flight lease lives this long unless renewed */
#define CG_REDIS_RENEW_MS 1000      /* ... and the renewer renews them this often */
#define CG_REDIS_LEASES 4096        /* leases one process may hold at once */
#define CG_REDIS_BRK_CACHE_MS 100   /* a thread trusts a "closed" breaker this long */
#define CG_REDIS_MIN_MS 2           /* a round trip bounded by a call's deadline: at least */

/* ---- the URL ---- */

static int cg__hex(int c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

/* The `n` bytes at `s` with each %XX (hex, either case) decoded into `dst` of `dn` bytes,
 * NUL-terminated, as RFC 3986 (3.2.1) has a userinfo's '@', ':', '/', '%' or '#' written
 * and as redis-cli -u and redis-py's from_url read them.  0; -1 the value does not fit;
 * -3 a '%' not followed by two hex digits, or %00 (a NUL would cut the value short). */
static int cg__pct_decode(char *dst, size_t dn, const char *s, size_t n) {
  size_t i, o = 0;

  for (i = 0; i < n; i++) {
    int c = (unsigned char) s[i];
    if (c == '%') {
      int hi = i + 2 < n ? cg__hex((unsigned char) s[i + 1]) : -1;
      int lo = hi >= 0 ? cg__hex((unsigned char) s[i + 2]) : -1;
      if (lo < 0 || (hi | lo) == 0)
        return -3;
      c = hi << 4 | lo;
      i += 2;
    }
    if (o + 1 >= dn)
      return -1;
    dst[o++] = (char) c;
  }
  dst[o] = '\0';
  return 0;
}

int cg_redis_url_parse(const char *s, struct cg_redis_url *u) {
  const char *p, *at, *slash, *colon;
  size_t n;

  memset(u, 0, sizeof(*u));
  u->port = 6379;
  if (!s || !s[0])
    return -1;
  if (strncasecmp(s, "rediss://", 9) == 0)
    return -2;
  if (strncasecmp(s, "unix://", 7) == 0) {
    const char *q;
    p = s + 7;
    if (p[0] != '/')
      return -1;
    q = strchr(p, '?');
    n = q ? (size_t) (q - p) : strlen(p);
    if (n == 0 || n >= sizeof(u->path))
      return -1;
    memcpy(u->path, p, n);
    u->unix_socket = 1;
    if (q) {
      char *end;
      long db;
      if (strncmp(q, "?db=", 4) != 0)
        return -1;
      errno = 0;
      db = strtol(q + 4, &end, 10);
      if (errno || *end || end == q + 4 || db < 0 || db > 100000)
        return -1;
      u->db = (int) db;
    }
    return 0;
  }
  if (strncasecmp(s, "redis://", 8) != 0)
    return -1;
  p = s + 8;
  /* The last '@' ends the password (which may hold '@', ':' or '/'); the path follows. */
  at = strrchr(p, '@');
  slash = strchr(at ? at + 1 : p, '/');
  if (at) {
    /* [[user]:]password@ : a user (Redis 6 ACL) before the first ':'; "default" is
     * Redis's own, which AUTH with the password alone names too (cg__auth).  Both are
     * percent-decoded after the split, so an encoded ':' (%3A) stays in the user; the
     * bounds are the decoded value's. */
    const char *c = memchr(p, ':', (size_t) (at - p));
    const char *pw = c ? c + 1 : p;
    int r = cg__pct_decode(u->password, sizeof(u->password), pw, (size_t) (at - pw));
    if (r != 0)
      return r;
    if (c && c > p) {
      r = cg__pct_decode(u->user, sizeof(u->user), p, (size_t) (c - p));
      if (r != 0)
        return r;
      if (strcmp(u->user, "default") == 0)
        u->user[0] = '\0';
    }
    p = at + 1;
  }
  n = slash ? (size_t) (slash - p) : strlen(p);
  if (p[0] == '[') { /* [v6]:port */
    const char *rb = memchr(p, ']', n);
    if (!rb || rb - p - 1 <= 0 || (size_t) (rb - p - 1) >= sizeof(u->host))
      return -1;
    memcpy(u->host, p + 1, (size_t) (rb - p - 1));
    colon = rb + 1 < p + n && rb[1] == ':' ? rb + 1 : NULL;
    if (!colon && rb + 1 != p + n)
      return -1;
  } else {
    colon = memchr(p, ':', n);
    {
      size_t hn = colon ? (size_t) (colon - p) : n;
      if (hn == 0 || hn >= sizeof(u->host))
        return -1;
      memcpy(u->host, p, hn);
    }
  }
  if (colon) {
    char buf[8], *end;
    long port;
    size_t pn = (size_t) (p + n - colon - 1);
    if (pn == 0 || pn >= sizeof(buf))
      return -1;
    memcpy(buf, colon + 1, pn);
    buf[pn] = '\0';
    port = strtol(buf, &end, 10);
    if (*end || port < 1 || port > 65535)
      return -1;
    u->port = (int) port;
  }
  if (slash && slash[1]) {
    char *end;
    long db;
    errno = 0;
    db = strtol(slash + 1, &end, 10);
    if (errno || *end || db < 0 || db > 100000)
      return -1;
    u->db = (int) db;
  }
  return 0;
}

char *cg_redis_key(char *buf, size_t n, const char *prefix, const char *pool,
                   const char *what) {
  snprintf(buf, n, "%s{%s}:%s", prefix ? prefix : "curlguard:", pool, what);
  return buf;
}

/* ---- the process's configuration ---- */

static struct cg_redis_url cg__url;
static const char *cg__prefix = "curlguard:";
static int cg__configured; /* 1: a valid URL */
static pthread_once_t cg__conf_once = PTHREAD_ONCE_INIT;
static char cg__host_id[64];
static uint64_t cg__admissions, cg__round_trips, cg__lease_seq;
static uint64_t cg__sent; /* commands sent without waiting for their reply */

static void cg__conf_init(void) {
  const struct cg_config *c = cg_config();
  int r;
  if (!c->redis_url || !c->redis_url[0])
    return;
  r = cg_redis_url_parse(c->redis_url, &cg__url);
  if (r == -2) {
    cg_warn("rediss:// not supported by this build (its hiredis has no TLS); using the "
            "local state file");
    return;
  }
  if (r == -3) {
    cg_warn("CURLGUARD_REDIS: a '%%' in the user or password that is not %%XX (two hex "
            "digits, not %%00; a '%%' itself is %%25); using the local state file");
    return;
  }
  if (r != 0) {
    cg_warn("CURLGUARD_REDIS: not a redis://[[user]:password@]host[:port][/db] or unix:///path "
            "URL; using the local state file");
    return;
  }
  if (c->redis_prefix)
    cg__prefix = c->redis_prefix;
  if (gethostname(cg__host_id, sizeof(cg__host_id) - 1) != 0)
    strcpy(cg__host_id, "host");
  cg__configured = 1;
}

/* ---- one connection per thread ---- */

enum { CG_S_RESERVE, CG_S_HOLD, CG_S_HOLD_LEFT, CG_S_ACQUIRE, CG_S_RENEW, CG_S_BRK_ADMIT,
       CG_S_BRK_STATE, CG_S_BRK_REPORT, CG_S_BRK_RELEASE, CG_S_BRK_EARLY, CG_S_BUD_FIRST,
       CG_S_BUD_RETRY, CG_S_BUD_REFUND, CG_S_LEARN_TAKE, CG_S_LEARN_CUT, CG_S_N };
static const char *const cg__scripts[CG_S_N] = {
  CG_LUA_RESERVE, CG_LUA_HOLD, CG_LUA_HOLD_LEFT, CG_LUA_ACQUIRE, CG_LUA_RENEW,
  CG_LUA_BRK_ADMIT, CG_LUA_BRK_STATE, CG_LUA_BRK_REPORT, CG_LUA_BRK_RELEASE,
  CG_LUA_BRK_EARLY, CG_LUA_BUD_FIRST, CG_LUA_BUD_RETRY, CG_LUA_BUD_REFUND, CG_LUA_LEARN_TAKE, CG_LUA_LEARN_CUT,
};

struct cg__conn {
  redisContext *c;
  pid_t pid;               /* the process that made `c` (fork: never the child's) */
  int64_t next_try_ms;     /* monotonic: no connect before */
  int64_t backoff_ms;
  char sha[CG_S_N][48];
  int pending;             /* replies of commands sent without waiting (cg__send) */
  dev_t dev;               /* the socket's identity (fstat(2) of c->fd once connected): */
  ino_t ino;               /* cg__conn_ours */
  int64_t tmo_ms;          /* the socket's timeout now (cg__arm) */
};
static __thread struct cg__conn cg__tc;

/* The deadline (monotonic ms) of the call whose step before a send the calling thread
 * runs, 0 none (cg_shared_redis_within): each of the step's round trips waits at most
 * half of what it leaves, so that the call, should Redis not answer, still has the other
 * half to go by the file. */
static __thread int64_t cg__step_deadline_ms;

void cg_shared_redis_within(int64_t deadline_ms) {
  cg__step_deadline_ms = deadline_ms;
}

/* The ms the next round trip may wait on Redis, at most `cap`: `cap` outside a bounded
 * step, else half of what the call's deadline leaves when less, and CG_REDIS_MIN_MS at
 * least (a healthy Redis answers well within it: a call near its deadline still asks,
 * and does not move to the file, whose limits are this machine's only, for lack of
 * time). */
static int64_t cg__step_ms(int64_t cap) {
  int64_t left;
  if (!cg__step_deadline_ms)
    return cap;
  left = (cg__step_deadline_ms - cg_mono_ms()) / 2;
  if (left < CG_REDIS_MIN_MS)
    left = CG_REDIS_MIN_MS;
  return left < cap ? left : cap;
}
static pthread_key_t cg__tc_key;
static pthread_once_t cg__key_once = PTHREAD_ONCE_INIT;

/* Whether the connection's descriptor is still its socket.  Not so once the host closed
 * the number (a daemon's close loop, closerange(2)) or put a descriptor of its own on it
 * (open(2) after such a loop, dup2(2)): that number is the host's now, and a command
 * would be written into the host's file, a close would close it. */
static int cg__conn_ours(const struct cg__conn *t) {
  struct stat sb;
  return t->c && t->c->fd >= 0 && fstat(t->c->fd, &sb) == 0 && sb.st_dev == t->dev &&
         sb.st_ino == t->ino;
}

/* Free the thread's connection (this process's only: a forked child leaves its parent's
 * alone), closing its socket only while the number is still the socket's
 * (cg__conn_ours; hiredis' redisFreeKeepFd leaves the host's descriptor open). */
static void cg__conn_free(struct cg__conn *t) {
  if (t->c && t->pid == cg_pid()) {
    if (cg__conn_ours(t))
      redisFree(t->c);
    else
      (void) redisFreeKeepFd(t->c);
  }
  t->c = NULL;
}

/* ---- bounded replies ----
 *
 * redisGetReply (hiredis 0.14) reads until a reply is whole: each read is bounded by the
 * socket timeout, their number and the reply's size are not.  A server that drips a reply
 * a byte every 30 ms, or announces a 1 GB bulk string or an array of 2^31 elements (which
 * hiredis callocs, and walks to free), held a host's call past its own CURLOPT_TIMEOUT or
 * took gigabytes (a helper's review, with a fake Redis).  cg__get_reply is redisGetReply
 * (hiredis.c) with a deadline and a count of reads, and every reader refuses an array
 * longer than CG_REDIS_ELEMENTS (its createArray wrapped). */

static pthread_mutex_t cg__fns_mu = PTHREAD_MUTEX_INITIALIZER;
static redisReplyObjectFunctions cg__fns;
static void *(*cg__create_array)(const redisReadTask *, int);
static __thread int cg__array_refused;

static void *cg__array(const redisReadTask *task, int elements) {
  if (elements < 0 || elements > CG_REDIS_ELEMENTS) {
    cg__array_refused = 1;
    return NULL; /* the reader fails ("Out of memory"); cg__get_reply says why */
  }
  return cg__create_array(task, elements);
}

/* Context `c`'s reader with the bounded createArray (hiredis's own functions otherwise). */
static void cg__bound_reader(redisContext *c) {
  if (!c || !c->reader || !c->reader->fn || !c->reader->fn->createArray)
    return;
  pthread_mutex_lock(&cg__fns_mu);
  if (!cg__create_array) { /* the first context: hiredis's own functions, copied */
    cg__fns = *c->reader->fn;
    cg__create_array = cg__fns.createArray;
    cg__fns.createArray = cg__array;
  }
  if (c->reader->fn->createArray == cg__create_array)
    c->reader->fn = &cg__fns;
  pthread_mutex_unlock(&cg__fns_mu);
}

static void cg__reply_error(redisContext *c, int err, const char *what) {
  c->err = err;
  snprintf(c->errstr, sizeof(c->errstr), "%s", what);
}

/* The reader's next reply into `*aux` (NULL: not whole yet).  REDIS_OK or REDIS_ERR (the
 * reader's error copied into the context, as hiredis.c redisGetReplyFromReader does). */
static int cg__reader_reply(redisContext *c, void **aux) {
  if (redisReaderGetReply(c->reader, aux) == REDIS_OK)
    return REDIS_OK;
  if (cg__array_refused)
    cg__reply_error(c, REDIS_ERR_PROTOCOL, "reply too large (an array of more than 65536)");
  else
    cg__reply_error(c, c->reader->err ? c->reader->err : REDIS_ERR_PROTOCOL,
                    c->reader->errstr[0] ? c->reader->errstr : "protocol error");
  return REDIS_ERR;
}

/* redisGetReply, bounded (above).  REDIS_OK with `*out` (never NULL), or REDIS_ERR with
 * the context's err and errstr set. */
static int cg__get_reply(redisContext *c, redisReply **out) {
  void *aux = NULL;
  int wdone = 0, reads = 0;
  int64_t end;

  *out = NULL;
  cg__array_refused = 0;
  if (cg__reader_reply(c, &aux) != REDIS_OK)
    return REDIS_ERR;
  if (!aux) {
    do {
      if (redisBufferWrite(c, &wdone) == REDIS_ERR)
        return REDIS_ERR;
    } while (!wdone);
    end = cg_mono_ms() + cg__step_ms(CG_REDIS_REPLY_MS);
    do {
      if (reads++ >= CG_REDIS_REPLY_READS) {
        cg__reply_error(c, REDIS_ERR_PROTOCOL, "reply too large (over 1 MiB)");
        return REDIS_ERR;
      }
      if (reads > 1 && cg_mono_ms() > end) {
        cg__reply_error(c, REDIS_ERR_IO, "reply not whole in time");
        return REDIS_ERR;
      }
      if (redisBufferRead(c) == REDIS_ERR || cg__reader_reply(c, &aux) != REDIS_OK)
        return REDIS_ERR;
    } while (!aux);
  }
  *out = aux;
  return REDIS_OK;
}

/* redisCommand and redisCommandArgv with cg__get_reply: the reply, or NULL (the context's
 * err set). */
static redisReply *cg__command(redisContext *c, const char *fmt, ...) {
  redisReply *r = NULL;
  va_list ap;
  int rc;

  va_start(ap, fmt);
  rc = redisvAppendCommand(c, fmt, ap);
  va_end(ap);
  return rc == REDIS_OK && cg__get_reply(c, &r) == REDIS_OK ? r : NULL;
}

/* AUTH with the password of URL `u`: as its user (a Redis 6 ACL user), or, with none,
 * as the default user (cg_redis_url_parse leaves "default" out). */
static redisReply *cg__auth(redisContext *c, const struct cg_redis_url *u) {
  return u->user[0] ? cg__command(c, "AUTH %s %s", u->user, u->password)
                    : cg__command(c, "AUTH %s", u->password);
}

static redisReply *cg__command_argv(redisContext *c, int argc, const char **argv) {
  redisReply *r = NULL;
  return redisAppendCommandArgv(c, argc, argv, NULL) == REDIS_OK &&
                 cg__get_reply(c, &r) == REDIS_OK
             ? r
             : NULL;
}

static void cg__tc_free(void *arg) {
  struct cg__conn *t = arg;
  if (t)
    cg__conn_free(t);
}

static void cg__key_init(void) {
  pthread_key_create(&cg__tc_key, cg__tc_free);
}

static struct timeval cg__tv(int64_t ms) {
  struct timeval tv = {(time_t) (ms / 1000), (suseconds_t) ((ms % 1000) * 1000)};
  return tv;
}

/* The connection's socket timeout for its next round trip: CG_REDIS_TIMEOUT_MS, or less
 * in a step bounded by a call's deadline (cg__step_ms; cg_shared_redis_within: a call
 * with a short deadline waited the whole 50 ms on a hung Redis, then failed with 28
 * where it should have gone by the file; helper-64).  0; -1 when setsockopt(2) refused
 * it: nothing is sent, the connection stays as it is, the caller falls back on the
 * file. */
static int cg__arm(struct cg__conn *t) {
  int64_t ms = cg__step_ms(CG_REDIS_TIMEOUT_MS);
  if (ms != t->tmo_ms) {
    struct timeval tv = cg__tv(ms);
    if (redisSetTimeout(t->c, tv) != REDIS_OK)
      return -1; /* setsockopt(2) refused: the file decides, the connection as it was */
    t->tmo_ms = ms;
  }
  return 0;
}

/* 1 from a failure that left Redis unreachable (cg__unreachable) until a connection of
 * any thread of the process is made and set up again (cg__connect): one outage. */
static int cg__outage;
/* The outage lines said so far (cg_redis_outage_say), by the thread that begins an outage
 * (cg__outage's exchange).  Two only meet when one outage ends and the next begins while
 * the first's line is being decided: the mutex is only tried, never waited for, so the
 * second outage then goes unsaid and uncounted, and a child forked meanwhile, which
 * inherits it held, says no more outages rather than hang on it. */
static struct cg_redis_outages cg__outages;
static pthread_mutex_t cg__outages_mu = PTHREAD_MUTEX_INITIALIZER;

int cg_redis_outage_say(struct cg_redis_outages *o, int64_t now_ms, char *suffix, size_t n) {
  int k = o->begun < INT_MAX ? ++o->begun : o->begun;
  if (n)
    suffix[0] = '\0';
  if (k > CG_REDIS_OUTAGE_LINES && now_ms - o->said_ms < CG_REDIS_OUTAGE_QUIET_MS) {
    if (o->unsaid < INT_MAX)
      o->unsaid++;
    return 0;
  }
  if (k == CG_REDIS_OUTAGE_LINES)
    snprintf(suffix, n, "; outage %d of this process; later ones are said one an hour at most",
             k);
  else if (k > CG_REDIS_OUTAGE_LINES)
    snprintf(suffix, n, "; outage %d of this process, %d not said since the last line", k,
             o->unsaid);
  else if (k > 1)
    snprintf(suffix, n, "; outage %d of this process", k);
  o->said_ms = now_ms;
  o->unsaid = 0;
  return 1;
}

/* Whether `cause` says Redis could not be reached (connect, lost, timeout, i/o), as
 * opposed to one that says what it refused (a password, a db, a script). */
static int cg__unreachable(const char *cause) {
  return strcmp(cause, "redis-connect") == 0 || strcmp(cause, "redis-lost") == 0 ||
         strcmp(cause, "redis-timeout") == 0 || strcmp(cause, "redis-io") == 0;
}

/* Drop the thread's connection, back off, and say `msg` once per process per `cause`,
 * except for the causes that say Redis is unreachable: of those, the first of each outage
 * (cg__outage), as cg_redis_outage_say allows (shared.h).  A killed Redis said
 * "connection lost", then at the first reconnect "cannot connect", two lines for one
 * event (helper-66); and once per cause, a second outage of the same cause (Redis killed
 * again, after it had come back) said nothing.  `msg` must not point into the
 * connection (it is freed first): callers format it into their own buffer (cg__fail
 * does, from the context's error). */
static void cg__drop(struct cg__conn *t, const char *cause, const char *msg) {
  char copy[400];
  snprintf(copy, sizeof(copy), "%s", msg && msg[0] ? msg : "redis failed");
  cg__conn_free(t);
  t->pending = 0;
  t->backoff_ms = t->backoff_ms ? t->backoff_ms * 2 : CG_REDIS_BACKOFF_MIN_MS;
  if (t->backoff_ms > CG_REDIS_BACKOFF_MAX_MS)
    t->backoff_ms = CG_REDIS_BACKOFF_MAX_MS;
  t->next_try_ms = cg_mono_ms() + t->backoff_ms;
  if (cg__unreachable(cause)) {
    char nth[128]; /* the first outage's line as before; the later ones numbered */
    int say;
    if (__atomic_exchange_n(&cg__outage, 1, __ATOMIC_RELAXED))
      return; /* the outage's line was said */
    if (pthread_mutex_trylock(&cg__outages_mu) != 0)
      return;
    say = cg_redis_outage_say(&cg__outages, cg_mono_ms(), nth, sizeof(nth));
    pthread_mutex_unlock(&cg__outages_mu);
    if (say)
      cg_warn("%s; using the local state file (will reconnect later%s)", copy, nth);
    return;
  }
  cg_warn_once(cause, "%s; using the local state file (will reconnect later)", copy);
}

/* The connection failed under `during` (a command's name): say what happened in words,
 * from the context's error (copied before the context is freed), and drop it.  hiredis
 * 0.14 reports a read or write past the timeout as an I/O error with EAGAIN's text. */
static void cg__fail(struct cg__conn *t, const char *during) {
  char es[160], msg[400];
  int err = t->c ? t->c->err : REDIS_ERR_OTHER;
  const char *cause;
  size_t i;
  snprintf(es, sizeof(es), "%s", t->c && t->c->errstr[0] ? t->c->errstr : "");
  for (i = 0; es[i]; i++) /* only text, whatever the library left there */
    if ((unsigned char) es[i] < 0x20 || (unsigned char) es[i] > 0x7e)
      es[i] = '?';
  if (err == REDIS_ERR_IO && strstr(es, "not whole")) { /* cg__get_reply's deadline */
    cause = "redis-timeout";
    snprintf(msg, sizeof(msg), "redis timed out (the reply to %s was not whole after %d ms)",
             during, CG_REDIS_REPLY_MS);
  } else if (err == REDIS_ERR_IO &&
             (strstr(es, "temporarily unavailable") || strstr(es, "timed out") ||
              strstr(es, "would block"))) {
    cause = "redis-timeout";
    snprintf(msg, sizeof(msg), "redis timed out after %lld ms (no answer to %s%s)",
             (long long) (t->tmo_ms ? t->tmo_ms : CG_REDIS_TIMEOUT_MS), during,
             t->tmo_ms && t->tmo_ms < CG_REDIS_TIMEOUT_MS ? ", as long as the call's deadline "
                                                            "allowed" : "");
  } else if (err == REDIS_ERR_EOF || strstr(es, "reset by peer") || strstr(es, "Broken pipe")) {
    cause = "redis-lost";
    snprintf(msg, sizeof(msg), "redis connection lost (during %s: %s)", during,
             es[0] ? es : "closed by the server");
  } else {
    cause = "redis-io";
    snprintf(msg, sizeof(msg), "redis i/o error during %s: %s", during,
             es[0] ? es : "no reply");
  }
  cg__drop(t, cause, msg);
}

/* A reply that is an error, or none: its text. */
static const char *cg__err(redisContext *c, redisReply *r) {
  if (!r)
    return c->errstr[0] ? c->errstr : "no reply";
  if (r->type == REDIS_REPLY_ERROR)
    return r->str;
  return NULL;
}

/* SCRIPT LOAD every script.  0; -1 (the connection dropped and said why); -2 its timeout
 * could not be set (cg__arm: nothing more sent, the connection kept). */
static int cg__load_scripts(struct cg__conn *t) {
  int i;
  for (i = 0; i < CG_S_N; i++) {
    redisReply *r;
    if (cg__arm(t) != 0)
      return -2; /* nothing sent (the caller decides) */
    r = cg__command(t->c, "SCRIPT LOAD %s", cg__scripts[i]);
    __atomic_add_fetch(&cg__round_trips, 1, __ATOMIC_RELAXED);
    if (!r) {
      cg__fail(t, "SCRIPT LOAD");
      return -1;
    }
    if (r->type != REDIS_REPLY_STRING || r->len >= (int) sizeof(t->sha[i])) {
      char msg[300];
      const char *cause = "redis-error";
      if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0) {
        /* The server wants a password the URL does not give. */
        cause = "redis-auth";
        snprintf(msg, sizeof(msg), "redis requires a password and the URL gives none (%.200s)",
                 r->str);
      } else {
        snprintf(msg, sizeof(msg), "redis error: SCRIPT LOAD: %.200s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
      }
      freeReplyObject(r);
      cg__drop(t, cause, msg);
      return -1;
    }
    memcpy(t->sha[i], r->str, (size_t) r->len + 1);
    freeReplyObject(r);
  }
  return 0;
}

/* Connect the thread's connection now if it may (backoff).  0 connected, -1 not. */
static int cg__connect(struct cg__conn *t) {
  struct timeval tv;
  redisReply *r;
  int64_t ms;

  if (t->c && t->pid == cg_pid()) {
    if (cg__conn_ours(t))
      return 0;
    /* The host closed or took the socket's number: forgotten, never written to or
     * closed, and a new connection made at once, quietly (not Redis's failure). */
    cg__conn_free(t);
  }
  t->c = NULL; /* a child: the parent's connection is the parent's */
  t->pending = 0;
  if (t->pid != cg_pid()) {
    t->pid = cg_pid();
    t->backoff_ms = 0;
    t->next_try_ms = 0;
  }
  if (cg_mono_ms() < t->next_try_ms)
    return -1;
  /* A step bounded by its call's deadline (cg_shared_redis_within) waits no longer for the
   * connection, nor for its set-up below (cg__arm). */
  ms = cg__step_ms(CG_REDIS_TIMEOUT_MS);
  tv = cg__tv(ms);
  pthread_once(&cg__key_once, cg__key_init);
  pthread_setspecific(cg__tc_key, t);
  t->c = cg__url.unix_socket ? redisConnectUnixWithTimeout(cg__url.path, tv)
                             : redisConnectWithTimeout(cg__url.host, cg__url.port, tv);
  __atomic_add_fetch(&cg__round_trips, 1, __ATOMIC_RELAXED);
  t->pid = cg_pid();
  if (!t->c || t->c->err) {
    char buf[512];
    snprintf(buf, sizeof(buf), "redis connect: cannot connect to %s%s%.0d: %s",
             cg__url.unix_socket ? cg__url.path : cg__url.host,
             cg__url.unix_socket ? "" : ":", cg__url.unix_socket ? 0 : cg__url.port,
             t->c ? t->c->errstr : "out of memory");
    /* Made by this call, so its socket is ours: hiredis 0.14 leaves it open after a
     * refused connect, and cg__drop's identity check (cg__conn_ours) knows only the last
     * good connection's. */
    redisFree(t->c);
    t->c = NULL;
    cg__drop(t, "redis-connect", buf);
    return -1;
  }
  {
    struct stat sb;
    /* Never on 0, 1 or 2 (log.h cg_fd_off_stdio): the host's stderr writes would go to
     * Redis.  A number the copy could not be made for is -1, which redisFree leaves.
     * Close-on-exec (hiredis 0.14 makes its socket without it): a program the host
     * runs does not inherit the connection. */
    t->c->fd = cg_fd_off_stdio(t->c->fd);
    if (t->c->fd < 0 || fcntl(t->c->fd, F_SETFD, FD_CLOEXEC) != 0 ||
        fstat(t->c->fd, &sb) != 0) {
      char buf[300];
      snprintf(buf, sizeof(buf), "redis connect: no descriptor for the socket (%s)",
               strerror(errno));
      redisFree(t->c); /* ours, made by this call (a copy that failed is -1: left) */
      t->c = NULL;
      cg__drop(t, "redis-connect", buf);
      return -1;
    }
    t->dev = sb.st_dev;
    t->ino = sb.st_ino;
  }
  redisSetTimeout(t->c, tv);
  t->tmo_ms = ms;
  cg__bound_reader(t->c);
  if (cg__url.password[0]) {
    if (cg__arm(t) != 0)
      goto set_up_failed;
    r = cg__auth(t->c, &cg__url);
    __atomic_add_fetch(&cg__round_trips, 1, __ATOMIC_RELAXED);
    if (!r) { /* no answer (a timeout, a lost connection): not the password's fault */
      cg__fail(t, "AUTH");
      return -1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      char buf[300];
      snprintf(buf, sizeof(buf), "redis refused the password (AUTH: %.200s)", r->str);
      freeReplyObject(r);
      cg__drop(t, "redis-auth", buf);
      return -1;
    }
    freeReplyObject(r);
  }
  if (cg__url.db != 0) {
    if (cg__arm(t) != 0)
      goto set_up_failed;
    r = cg__command(t->c, "SELECT %d", cg__url.db);
    __atomic_add_fetch(&cg__round_trips, 1, __ATOMIC_RELAXED);
    if (!r) {
      cg__fail(t, "SELECT");
      return -1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      char buf[300];
      snprintf(buf, sizeof(buf), "redis db: SELECT %d refused: %.200s", cg__url.db, r->str);
      freeReplyObject(r);
      cg__drop(t, "redis-db", buf);
      return -1;
    }
    freeReplyObject(r);
  }
  switch (cg__load_scripts(t)) {
  case 0:
    break;
  case -2:
    goto set_up_failed;
  default:
    return -1;
  }
  t->backoff_ms = 0;
  __atomic_store_n(&cg__outage, 0, __ATOMIC_RELAXED); /* Redis answers again */
  return 0;

set_up_failed:
  /* A timeout that could not be set (cg__arm): set up only in part, made again by a later
   * call. */
  cg__conn_free(t);
  t->c = NULL;
  return -1;
}

int cg_shared_redis_ready(void) {
  pthread_once(&cg__conf_once, cg__conf_init);
  if (!cg__configured)
    return 0;
  return cg__connect(&cg__tc) == 0;
}

int cg_shared_redis_configured(void) {
  return cg__configured; /* set before cg__conf_once completed: read after it (shared.h) */
}

/* Read the replies of commands sent without waiting (they came back meanwhile: no wait
 * in practice; at most the timeout each).  0, or -1 (connection dropped). */
static int cg__drain(struct cg__conn *t) {
  while (t->pending > 0) {
    redisReply *r = NULL;
    if (cg__arm(t) != 0)
      return -1; /* no timeout set: read by a later step */
    if (cg__get_reply(t->c, &r) != REDIS_OK) {
      cg__fail(t, "an earlier command");
      return -1;
    }
    t->pending--;
    /* NOSCRIPT (SCRIPT FLUSH): one success not counted; the next script reloads. */
    if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) != 0)
      cg_warn_once(strncmp(r->str, "WRONGTYPE", 9) == 0 ? "redis-wrongtype" : "redis-error",
                   "redis error: %s; using the local state file", r->str);
    if (r)
      freeReplyObject(r);
  }
  return 0;
}

/* Send a command without waiting for its reply (read by the next cg__drain): a result
 * nobody waits on (a success for the breaker's window, a lease given back) costs no
 * round trip of the call.  0 sent, -1 not (dropped, or not connected). */
static int cg__send(int argc, const char **argv) {
  struct cg__conn *t = &cg__tc;
  int done = 0;
  if (!cg_shared_redis_ready())
    return -1;
  if (redisAppendCommandArgv(t->c, argc, argv, NULL) != REDIS_OK)
    return -1;
  while (!done)
    if (redisBufferWrite(t->c, &done) != REDIS_OK) {
      cg__fail(t, argv[0]);
      return -1;
    }
  t->pending++;
  __atomic_add_fetch(&cg__sent, 1, __ATOMIC_RELAXED);
  return 0;
}

/* Run script `s` on the thread's connection: its reply (the caller frees it), or NULL
 * (connection dropped or error reply: said once; the caller falls back). */
static redisReply *cg__evalv(int s, int nkeys, const char **keys, int nargs,
                             const char **args) {
  struct cg__conn *t = &cg__tc;
  const char *argv[32]; /* the reserve's: 3 + 11 keys + 11 arguments */
  char nk[8];
  int argc = 0, i, tries;
  redisReply *r = NULL;

  if (nkeys < 0 || nargs < 0 || 3 + nkeys + nargs > (int) (sizeof(argv) / sizeof(argv[0])))
    return NULL; /* a caller's mistake: the file decides */
  if (!cg_shared_redis_ready() || cg__drain(t) != 0)
    return NULL;
  snprintf(nk, sizeof(nk), "%d", nkeys);
  argv[argc++] = "EVALSHA";
  argv[argc++] = t->sha[s];
  argv[argc++] = nk;
  for (i = 0; i < nkeys; i++)
    argv[argc++] = keys[i];
  for (i = 0; i < nargs; i++)
    argv[argc++] = args[i];
  for (tries = 0; tries < 2; tries++) {
    const char *why;
    if (cg__arm(t) != 0)
      return NULL; /* no timeout set: nothing sent, the file decides */
    r = cg__command_argv(t->c, argc, argv);
    __atomic_add_fetch(&cg__round_trips, 1, __ATOMIC_RELAXED);
    if (!r) {
      /* Timed out or lost: the connection is out of step (a late reply), drop it. */
      cg__fail(t, "EVALSHA");
      return NULL;
    }
    why = cg__err(t->c, r);
    if (!why)
      return r;
    if (tries == 0 && strncmp(why, "NOSCRIPT", 8) == 0) {
      /* The server lost its scripts (restart, SCRIPT FLUSH): load them again. */
      freeReplyObject(r);
      r = NULL;
      if (cg__load_scripts(t) != 0)
        return NULL; /* dropped (said why), or no timeout set */
      argv[1] = t->sha[s];
      continue;
    }
    cg_warn_once(strncmp(why, "WRONGTYPE", 9) == 0 ? "redis-wrongtype" : "redis-error",
                 "redis error: %s; using the local state file", why);
    freeReplyObject(r);
    return NULL;
  }
  return NULL;
}

static int64_t cg__int(const redisReply *r, size_t i) {
  if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements ||
      r->element[i]->type != REDIS_REPLY_INTEGER)
    return 0;
  return (int64_t) r->element[i]->integer;
}

/* A wait the server gave in µs, as ns, bounded to [0, `cap_ns`]: a value from the
 * network never reaches a sleep unbounded, nor overflows (a server that does not run the
 * guard's script as written, a proxy, a man in the middle of plain-text Redis). */
static int64_t cg__wait_ns(int64_t us, int64_t cap_ns) {
  if (us <= 0 || cap_ns <= 0)
    return 0;
  return us >= cap_ns / 1000 ? cap_ns : us * 1000;
}

static int cg__is_array(const redisReply *r, size_t n) {
  size_t i;
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < n)
    return 0;
  for (i = 0; i < n; i++)
    if (r->element[i]->type != REDIS_REPLY_INTEGER)
      return 0;
  return 1;
}

/* cg__is_array, and its first element a verdict of the guard's script, 0 to `max`: any
 * other answer is not the script as written (a proxy, a man in the middle, another
 * server), and the caller takes Redis for down. */
static int cg__is_verdict(const redisReply *r, size_t n, int64_t max) {
  return cg__is_array(r, n) && cg__int(r, 0) >= 0 && cg__int(r, 0) <= max;
}

/* ---- the breaker's "closed", cached per thread ----
 *
 * A closed breaker is the common case: a thread that saw it closed less than
 * CG_REDIS_BRK_CACHE_MS ago (from the breaker's gate, or from the flag every admission's
 * GCRA script returns) lets a call through without asking.  The cost: a breaker opened
 * by another machine stops this thread's calls at most that much later. */
struct cg__bc {
  uint64_t h;
  int64_t until_ms;
};
static __thread struct cg__bc cg__bcache[32];

static uint64_t cg__hash(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  while (*s)
    h = (h ^ (unsigned char) *s++) * 1099511628211ull;
  return h | 1;
}

static void cg__bc_set(const char *pool, int closed) {
  uint64_t h = cg__hash(pool);
  struct cg__bc *e = &cg__bcache[h % 32];
  e->h = h;
  e->until_ms = closed ? cg_mono_ms() + CG_REDIS_BRK_CACHE_MS : 0;
}

static int cg__bc_closed(const char *pool) {
  uint64_t h = cg__hash(pool);
  const struct cg__bc *e = &cg__bcache[h % 32];
  return e->h == h && e->until_ms > cg_mono_ms();
}

#define CG_KEY(buf, sp, what)                                                             \
  cg_redis_key(buf, sizeof(buf), cg__prefix, (sp)->cfg->name, what)

/* A limit key's hold (limiter.h keyed holds) in Redis: the pool's "hold:" and the key's
 * 24 bits in hex. */
static const char *cg__key_hold(char *buf, size_t n, struct cg_shared_pool *sp,
                                uint32_t key) {
  char what[16];
  snprintf(what, sizeof(what), "hold:%06x", (unsigned) cg_limiter_key24(key));
  return cg_redis_key(buf, n, cg__prefix, sp->cfg->name, what);
}

/* ---- rate ---- */

/* limiter.c's cg__gcra, in us: emission interval and burst tolerance of one limit. */
static void cg__gcra_us(double per_minute, double burst, double margin, double *t_us,
                        double *tau_us) {
  *t_us = 60e6 / (per_minute * (margin > 0 && margin <= 1 ? margin : 1.0));
  if (burst <= 0)
    burst = fmax(1.0, per_minute / 60.0);
  *tau_us = (fmax(burst, 1.0) - 1.0) * *t_us;
}

static int cg__send_eval(int s, int nkeys, const char **keys, int nargs, const char **args);
static void cg__new_id(char *buf, size_t n);
static const char *cg__wait_id(struct cg_shared_pool *sp);
static void cg__queue_taken(struct cg_shared_pool *sp);

/* The learned rate's GCRA (limiter.h cg_limiter_learn_take) in us: T and the burst
 * tolerance (a few at once before the first cut, none after); T 0 when not learning. */
static void cg__learn_t(struct cg_shared_pool *sp, double *t_us, double *tau_us) {
  const struct cg_limits *lim = &sp->cfg->lim;
  double r = lim->adaptive ? cg_limiter_learned(sp->state, sp->p, lim) : 0;
  *t_us = *tau_us = 0;
  if (r <= 0 || r >= CG_LEARN_MAX_RPS)
    return;
  *t_us = 1e6 / r;
  *tau_us = cg_limiter_learn_unproven(sp->state, sp->p) ? (CG_LEARN_START_BURST - 1) * *t_us : 0;
}

#define CG_LEARN_BUSY (-2) /* the script's "place free, but no in-flight slot" */

/* The learned place was free but every in-flight slot is taken (nothing taken): ask
 * again after 5 ms doubling to CG_SHARED_POLL_MS, as a waiter for a slot polls. */
static int64_t cg__learn_busy(struct cg_shared_pool *sp) {
  sp->learn_poll_ms = sp->learn_poll_ms > 0 ? sp->learn_poll_ms * 2 : 5;
  if (sp->learn_poll_ms > CG_SHARED_POLL_MS)
    sp->learn_poll_ms = CG_SHARED_POLL_MS;
  return sp->learn_poll_ms * 1000000;
}

static int64_t cg__r_learn_take(struct cg_shared_pool *sp, int64_t now) {
  char k1[160], k2[160], k3[160], k4[160], a[5][64];
  const char *keys[4] = {CG_KEY(k1, sp, "learn_tat"), CG_KEY(k2, sp, "inflight"),
                         CG_KEY(k3, sp, "inq"), CG_KEY(k4, sp, "inqx")};
  const char *args[5] = {a[0], a[1], a[2], a[3], a[4]};
  long mi = sp->cfg->lim.max_inflight > 0 ? sp->cfg->lim.max_inflight : 0;
  double tl, taul;
  redisReply *r;
  int64_t v = 0;
  (void) now; /* the server's TIME (shared.h) */
  if (sp->learn_pre_set) { /* the admission's own script asked already */
    sp->learn_pre_set = 0;
    if (sp->learn_pre_ns == CG_LEARN_BUSY)
      return cg__learn_busy(sp);
    return sp->learn_pre_ns;
  }
  cg__learn_t(sp, &tl, &taul);
  if (tl <= 0)
    return 0;
  snprintf(a[0], sizeof(a[0]), "%.3f", tl);
  snprintf(a[1], sizeof(a[1]), "%.3f", taul);
  snprintf(a[2], sizeof(a[2]), "%ld", mi);
  if (sp->pre_lease_set) { /* one taken earlier and not used: back (a new one below) */
    const char *rel[3] = {"ZREM", k2, sp->pre_lease_id};
    sp->pre_lease_set = 0;
    cg__send(3, rel);
  }
  if (mi > 0) /* the call's place in the queue for a lease */
    snprintf(a[3], sizeof(a[3]), "%s", cg__wait_id(sp));
  else
    cg__new_id(a[3], sizeof(a[3]));
  snprintf(a[4], sizeof(a[4]), "%d", CG_REDIS_LEASE_MS);
  r = cg__evalv(CG_S_LEARN_TAKE, 4, keys, 5, args);
  if (!r)
    return CG_SHARED_DOWN;
  if (!cg__is_array(r, 2)) {
    freeReplyObject(r);
    cg_warn_once("redis-reply", "redis: unexpected reply; using the local state file");
    return CG_SHARED_DOWN;
  }
  v = cg__int(r, 0);
  if (cg__int(r, 1) == 1) {
    sp->pre_lease_set = 1;
    sp->pre_lease_ms = cg_mono_ms();
    memcpy(sp->pre_lease_id, a[3], sizeof(sp->pre_lease_id));
    cg__queue_taken(sp);
  }
  freeReplyObject(r);
  if (v == CG_LEARN_BUSY)
    return cg__learn_busy(sp);
  return cg__wait_ns(v, CG_REDIS_WAIT_CAP_NS);
}

static void cg__r_learn_cut(struct cg_shared_pool *sp) {
  char k1[160], k2[160];
  const char *keys[2] = {CG_KEY(k1, sp, "cut"), CG_KEY(k2, sp, "learn_tat")};
  cg__send_eval(CG_S_LEARN_CUT, 2, keys, 0, NULL);
}

static int cg__r_reserve(struct cg_shared_pool *sp, int64_t tokens, int64_t max_wait_ns,
                         int64_t *wait_ns, int64_t caller_now) {
  const struct cg_limits *lim = &sp->cfg->lim;
  struct cg_state_pool *pool = &sp->state->pools[sp->p];
  double treq = 0, taureq = 0, ttok = 0, tautok = 0;
  char k1[160], k2[160], k3[160], k4[160], k5[160], k6[160], k7[160], k8[160], k9[160],
      k10[160], k11[160], a[11][64];
  const char *keys[11] = {CG_KEY(k1, sp, "tat_req"), CG_KEY(k2, sp, "tat_tok"),
                          CG_KEY(k3, sp, "hold"), CG_KEY(k4, sp, "admitted"),
                          CG_KEY(k5, sp, "brk"), CG_KEY(k6, sp, "learn_tat"),
                          CG_KEY(k7, sp, "cut"), CG_KEY(k8, sp, "inflight"),
                          CG_KEY(k9, sp, "inq"), CG_KEY(k10, sp, "inqx"),
                          sp->key ? cg__key_hold(k11, sizeof(k11), sp, sp->key) : NULL};
  const char *args[11];
  double tl = 0, taul = 0;
  int64_t now = cg_state_now();
  redisReply *r;
  int i, ret;
  (void) caller_now; /* the local pace word reads the clock after the lock-free checks;
                       * Redis goes by its server's TIME (shared.h) */

  if (lim->rpm > 0)
    cg__gcra_us(lim->rpm, lim->burst_requests, lim->margin, &treq, &taureq);
  /* The provider's pacing headers, learnt by this machine, widen the fleet's spacing
   * (as limiter.c does with the state file's). */
  if (__atomic_load_n(&pool->pace_until, __ATOMIC_ACQUIRE) > now) {
    double pace = (double) __atomic_load_n(&pool->pace_interval, __ATOMIC_ACQUIRE) / 1000.0;
    if (pace > treq) {
      treq = pace;
      taureq = 0;
    }
  }
  if (lim->tpm > 0 && tokens > 0)
    cg__gcra_us(lim->tpm, lim->burst_tokens, lim->margin, &ttok, &tautok);
  snprintf(a[0], sizeof(a[0]), "%.3f", treq);
  snprintf(a[1], sizeof(a[1]), "%.3f", taureq);
  snprintf(a[2], sizeof(a[2]), "%.6f", ttok);
  snprintf(a[3], sizeof(a[3]), "%.3f", tautok);
  snprintf(a[4], sizeof(a[4]), "%lld", (long long) (tokens > 0 ? tokens : 0));
  snprintf(a[5], sizeof(a[5]), "%lld", (long long) (max_wait_ns > 0 ? max_wait_ns / 1000 : 0));
  cg__learn_t(sp, &tl, &taul);
  snprintf(a[6], sizeof(a[6]), "%.3f", tl);
  snprintf(a[7], sizeof(a[7]), "%.3f", taul);
  snprintf(a[8], sizeof(a[8]), "%ld", lim->max_inflight > 0 ? lim->max_inflight : 0);
  if (lim->max_inflight > 0) /* the call's place in the queue for a lease */
    snprintf(a[9], sizeof(a[9]), "%s", cg__wait_id(sp));
  else
    cg__new_id(a[9], sizeof(a[9]));
  snprintf(a[10], sizeof(a[10]), "%d", CG_REDIS_LEASE_MS);
  for (i = 0; i < 11; i++)
    args[i] = a[i];
  sp->learn_pre_set = 0;
  sp->pre_lease_set = 0;
  r = cg__evalv(CG_S_RESERVE, sp->key ? 11 : 10, keys, 11, args);
  if (!r)
    return CG_SHARED_DOWN;
  if (!cg__is_verdict(r, 6, 1)) {
    freeReplyObject(r);
    cg_warn_once("redis-reply", "redis: unexpected reply; using the local state file");
    return CG_SHARED_DOWN;
  }
  ret = cg__int(r, 0) != 0;
  /* The script admits only within max_wait (it refuses past it): an admission after a
   * longer wait is not the guard's script answering (a proxy, a man in the middle of
   * plain-text Redis), and the file decides instead; a refusal's wait (for the record's
   * text) is bounded too. */
  if (!ret && cg__int(r, 1) > (max_wait_ns > 0 ? max_wait_ns / 1000 : 0) + 1000) {
    freeReplyObject(r);
    cg_warn_once("redis-reply", "redis: unexpected reply (an admission after a wait past "
                 "the call's deadline); using the local state file");
    return CG_SHARED_DOWN;
  }
  *wait_ns = cg__wait_ns(cg__int(r, 1), ret ? CG_REDIS_REFUSED_CAP_NS : max_wait_ns);
  /* The fleet holds this call's limit key (another machine's 429): the machine's file
   * holds it too, where the admission looks next (admit.c cg__held_until). */
  if (!ret && sp->key && r->elements >= 7 && r->element[6]->type == REDIS_REPLY_INTEGER &&
      r->element[6]->integer > 0)
    cg_limiter_hold_key(sp->state, sp->p, sp->key,
                        now + cg__wait_ns(r->element[6]->integer, CG_REDIS_WAIT_CAP_NS), now);
  cg__bc_set(sp->cfg->name, cg__int(r, 2) == 0);
  sp->learn_poll_ms = 0;
  if (cg__int(r, 3) >= 0 || cg__int(r, 3) == CG_LEARN_BUSY) {
    sp->learn_pre_set = 1;
    sp->learn_pre_ns = cg__int(r, 3) == CG_LEARN_BUSY
                           ? CG_LEARN_BUSY
                           : cg__wait_ns(cg__int(r, 3), CG_REDIS_WAIT_CAP_NS);
  }
  if (cg__int(r, 5) == 1) {
    sp->pre_lease_set = 1;
    sp->pre_lease_ms = cg_mono_ms();
    memcpy(sp->pre_lease_id, a[9], sizeof(sp->pre_lease_id));
    cg__queue_taken(sp);
  }
  /* Another machine cut the learned rate within the quiet period: this one cuts too
   * (limiter.h: at most once per round, so every process that sees it cuts the file's
   * rate once; the machine that cut sees its own cut as a throttle of the same round). */
  if (lim->adaptive && cg__int(r, 4) >= 0 && cg__int(r, 4) < CG_LEARN_QUIET_NS / 1000) {
    int64_t t = cg_state_now();
    cg_limiter_learn_throttle(sp->state, sp->p, lim, t, t);
  }
  freeReplyObject(r);
  if (!ret)
    __atomic_add_fetch(&cg__admissions, 1, __ATOMIC_RELAXED);
  return ret;
}

static int64_t cg__r_hold_left(struct cg_shared_pool *sp, uint32_t key) {
  char k[160], k2[160];
  const char *keys[2] = {CG_KEY(k, sp, "hold"), NULL};
  redisReply *r;
  int64_t v = 0;
  if (key)
    keys[1] = cg__key_hold(k2, sizeof(k2), sp, key);
  r = cg__evalv(CG_S_HOLD_LEFT, key ? 2 : 1, keys, 0, NULL);
  if (!r)
    return 0;
  if (r->type == REDIS_REPLY_INTEGER) /* bounded: from the network */
    v = cg__wait_ns((int64_t) r->integer, CG_REDIS_REFUSED_CAP_NS);
  freeReplyObject(r);
  return v;
}

static void cg__r_hold(struct cg_shared_pool *sp, uint32_t key, int64_t for_ns) {
  char k[160], a[32];
  const char *keys[1] = {key ? cg__key_hold(k, sizeof(k), sp, key) : CG_KEY(k, sp, "hold")};
  const char *args[1] = {a};
  redisReply *r;
  int64_t now;
  if (for_ns <= 0)
    return;
  snprintf(a, sizeof(a), "%lld", (long long) (for_ns / 1000));
  r = cg__evalv(CG_S_HOLD, 1, keys, 1, args);
  if (r)
    freeReplyObject(r);
  /* The machine's own file holds too: its next calls may fall back on it. */
  now = cg_state_now();
  cg_limiter_hold_key(sp->state, sp->p, key, now + for_ns, now);
}

/* ---- in-flight leases ---- */

/* A sorted-set member this process added and removes again (an in-flight lease, a retry
 * budget slot): its key and id, for the ZREM. */
struct cg__member {
  int used;
  char key[160];
  char id[64];
};
static struct cg__member cg__leases[CG_REDIS_LEASES];
static pthread_mutex_t cg__lease_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cg__bslot_mu = PTHREAD_MUTEX_INITIALIZER; /* retry budget slots */
static int cg__renewer_pid; /* the process whose renewer runs (fork: the child starts its own) */

/* The renewer: every CG_REDIS_RENEW_MS, renew the process's leases (its own connection,
 * one pipelined round trip).  A process killed with kill -9 stops renewing, so its
 * leases expire within CG_REDIS_LEASE_MS and their slots go back to the fleet. */
static void *cg__renewer(void *arg) {
  static char key[CG_REDIS_LEASES][160], id[CG_REDIS_LEASES][64];
  char lease_ms[16];
  (void) arg;
  snprintf(lease_ms, sizeof(lease_ms), "%d", CG_REDIS_LEASE_MS);
  for (;;) {
    int i, n = 0;
    cg_sleep_ms(CG_REDIS_RENEW_MS);
    pthread_mutex_lock(&cg__lease_mu);
    for (i = 0; i < CG_REDIS_LEASES; i++)
      if (cg__leases[i].used) {
        memcpy(key[n], cg__leases[i].key, sizeof(key[n]));
        memcpy(id[n], cg__leases[i].id, sizeof(id[n]));
        n++;
      }
    pthread_mutex_unlock(&cg__lease_mu);
    if (n == 0 || !cg_shared_redis_ready())
      continue;
    for (i = 0; i < n; i++) {
      const char *argv[6] = {"EVALSHA", cg__tc.sha[CG_S_RENEW], "1", key[i], id[i], lease_ms};
      redisAppendCommandArgv(cg__tc.c, 6, argv, NULL);
    }
    __atomic_add_fetch(&cg__round_trips, 1, __ATOMIC_RELAXED);
    for (i = 0; i < n; i++) {
      redisReply *r = NULL;
      if (cg__get_reply(cg__tc.c, &r) != REDIS_OK) {
        cg__fail(&cg__tc, "a lease's renewal");
        break;
      }
      if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
        /* Restarted server: reload on the next round (the leases are gone anyway). */
        freeReplyObject(r);
        while (++i < n && cg__get_reply(cg__tc.c, &r) == REDIS_OK)
          freeReplyObject(r);
        cg__load_scripts(&cg__tc); /* on failure it dropped the connection and said why */
        break;
      }
      if (r)
        freeReplyObject(r);
    }
  }
  return NULL;
}

/* Fork safety: the lease table's lock is never inherited held (the renewer may hold it
 * at the fork), and a child starts with no leases and no renewer of its own: its
 * parent's leases stay the parent's, renewed by the parent. */
static void cg__fork_prepare(void) {
  pthread_mutex_lock(&cg__lease_mu);
  pthread_mutex_lock(&cg__bslot_mu);
}

static void cg__fork_parent(void) {
  pthread_mutex_unlock(&cg__bslot_mu);
  pthread_mutex_unlock(&cg__lease_mu);
}

static void cg__fork_child(void) {
  pthread_mutex_init(&cg__lease_mu, NULL);
  pthread_mutex_init(&cg__bslot_mu, NULL);
  memset(cg__leases, 0, sizeof(cg__leases));
  cg__renewer_pid = 0;
}

static pthread_once_t cg__atfork_once = PTHREAD_ONCE_INIT;

static void cg__atfork_init(void) {
  pthread_atfork(cg__fork_prepare, cg__fork_parent, cg__fork_child);
}

static void cg__start_renewer(void) {
  pthread_t th;
  pthread_attr_t at;
  sigset_t all, old;
  int pid = (int) cg_pid();
  pthread_once(&cg__atfork_once, cg__atfork_init);
  if (__atomic_load_n(&cg__renewer_pid, __ATOMIC_ACQUIRE) == pid)
    return;
  pthread_mutex_lock(&cg__lease_mu);
  if (cg__renewer_pid != pid) {
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    /* The host's signals are not the renewer's. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&th, &at, cg__renewer, NULL) == 0)
      __atomic_store_n(&cg__renewer_pid, pid, __ATOMIC_RELEASE);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
  }
  pthread_mutex_unlock(&cg__lease_mu);
}

/* Remember member `id` of `key` in the first free entry of `tab` (n entries, under `mu`):
 * its index, or -1 when all are used. */
static int cg__member_add(struct cg__member *tab, int n, pthread_mutex_t *mu, const char *key,
                          const char *id) {
  int i;
  pthread_mutex_lock(mu);
  for (i = 0; i < n; i++)
    if (!tab[i].used) {
      tab[i].used = 1;
      snprintf(tab[i].key, sizeof(tab[i].key), "%s", key);
      snprintf(tab[i].id, sizeof(tab[i].id), "%s", id);
      break;
    }
  pthread_mutex_unlock(mu);
  return i < n ? i : -1;
}

/* Forget entry `i` of `tab` and ZREM its member, sent and not waited for: one not sent
 * (Redis down) expires on its own (a lease within CG_REDIS_LEASE_MS, a budget slot with
 * the call's deadline). */
static void cg__member_zrem(struct cg__member *tab, int n, pthread_mutex_t *mu, int i) {
  char key[160], id[64];
  if (i < 0 || i >= n)
    return;
  pthread_mutex_lock(mu);
  memcpy(key, tab[i].key, sizeof(key));
  memcpy(id, tab[i].id, sizeof(id));
  tab[i].used = 0;
  pthread_mutex_unlock(mu);
  {
    const char *argv[3] = {"ZREM", key, id};
    cg__send(3, argv);
  }
}

static int cg__lease_add(const char *key, const char *id) {
  return cg__member_add(cg__leases, CG_REDIS_LEASES, &cg__lease_mu, key, id);
}

static void cg__new_id(char *buf, size_t n) {
  snprintf(buf, n, "%.32s:%d:%llu", cg__host_id, (int) cg_pid(),
           (unsigned long long) __atomic_add_fetch(&cg__lease_seq, 1, __ATOMIC_RELAXED));
}

/* The call's id in its pool's queue for an in-flight lease (CG_LUA_SLOT_FN): made at its
 * first ask and kept while it waits, so that every ask keeps its first ticket; the
 * lease's id once one is taken (cg__queue_taken). */
static const char *cg__wait_id(struct cg_shared_pool *sp) {
  if (!sp->queued) {
    cg__new_id(sp->wait_id, sizeof(sp->wait_id));
    sp->queued = 1;
  }
  return sp->wait_id;
}

/* A lease was taken under the wait id: it left the queue; the next wait gets a new id. */
static void cg__queue_taken(struct cg_shared_pool *sp) {
  sp->queued = 0;
}

/* Give up the call's place in the queue (shared.h queue_leave), sent and not waited for:
 * one not sent (Redis down) is dropped by the scripts 1 s after its last ask. */
static void cg__r_queue_leave(struct cg_shared_pool *sp) {
  char k[160];
  if (!sp->queued)
    return;
  sp->queued = 0;
  {
    const char *argv[3] = {"ZREM", CG_KEY(k, sp, "inq"), sp->wait_id};
    cg__send(3, argv);
  }
  {
    const char *argv[3] = {"ZREM", CG_KEY(k, sp, "inqx"), sp->wait_id};
    cg__send(3, argv);
  }
}

static int cg__r_acquire(struct cg_shared_pool *sp, long max, int64_t left_ns,
                         int64_t *waited_ns) {
  char k[160], kq[160], kx[160], id[64], amax[24], alease[16];
  const char *keys[3] = {CG_KEY(k, sp, "inflight"), CG_KEY(kq, sp, "inq"),
                         CG_KEY(kx, sp, "inqx")};
  const char *args[3] = {id, amax, alease};
  int64_t t0 = cg_mono_ms(), nap = 5;

  *waited_ns = 0;
  cg__start_renewer();
  if (sp->pre_lease_set) {
    /* The admission's own script took it: renewed from now on.  One taken long ago (it
     * may have expired, and its place been given away) is given back instead. */
    sp->pre_lease_set = 0;
    if (cg_mono_ms() - sp->pre_lease_ms < CG_REDIS_LEASE_MS / 3) {
      int h = cg__lease_add(k, sp->pre_lease_id);
      if (h >= 0)
        return CG_SHARED_LEASE_BASE + h;
    }
    {
      const char *rel[3] = {"ZREM", k, sp->pre_lease_id};
      cg__send(3, rel);
    }
  }
  snprintf(id, sizeof(id), "%s", cg__wait_id(sp));
  snprintf(amax, sizeof(amax), "%ld", max);
  snprintf(alease, sizeof(alease), "%d", CG_REDIS_LEASE_MS);
  for (;;) {
    redisReply *r = cg__evalv(CG_S_ACQUIRE, 3, keys, 3, args);
    int64_t el;
    if (!r) {
      *waited_ns = (cg_mono_ms() - t0) * 1000000;
      return CG_SHARED_DOWN;
    }
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
      int h;
      freeReplyObject(r);
      cg__queue_taken(sp);
      *waited_ns = (cg_mono_ms() - t0) * 1000000;
      h = cg__lease_add(k, id);
      if (h < 0) { /* the process's table is full: give it back, go without one */
        const char *rel[3] = {"ZREM", k, id};
        cg__send(3, rel);
        return -2;
      }
      return CG_SHARED_LEASE_BASE + h;
    }
    freeReplyObject(r);
    el = cg_mono_ms() - t0;
    if (el * 1000000 >= left_ns) {
      /* A blocking waiter gives its place up; a multi one (asking once, left 0) keeps
       * it for its next ask, and gives it up when its call ends (queue_leave). */
      if (left_ns > 0)
        cg__r_queue_leave(sp);
      *waited_ns = el * 1000000;
      return -1;
    }
    /* Poll: 5 ms doubling to CG_SHARED_POLL_MS, never past the deadline. */
    if (nap > (left_ns / 1000000) - el)
      nap = (left_ns / 1000000) - el;
    cg_sleep_ms(nap > 0 ? nap : 1);
    nap = nap * 2 > CG_SHARED_POLL_MS ? CG_SHARED_POLL_MS : nap * 2;
  }
}

static void cg__r_release(struct cg_shared_pool *sp, int handle) {
  (void) sp;
  cg__member_zrem(cg__leases, CG_REDIS_LEASES, &cg__lease_mu, handle - CG_SHARED_LEASE_BASE);
}

/* ---- breaker ---- */

/* The pool's answer time kept in this machine's state file, ms (0: none, or no file). */
static int64_t cg__r_ok_ms(struct cg_shared_pool *sp) {
  return sp->state && sp->p >= 0 ? cg_breaker_ok_ms(sp->state, sp->p) : 0;
}

/* The probe key's value for this call (sp->probe_id, made on first use): its id, with
 * "|L" when the lease (cg__r_lease, from a kept answer time) and not the call's
 * deadline sets the key's expiry.  A waiter refused while such a probe is out, and asking
 * again after the key's expiry, raises the kept answer time (cg__r_admit); one whose
 * holder only reached its own deadline does not (a helper's find: the waiters of probes
 * with --max-time 1.5 raised 20 ms to 30 s, and every early probe shorter than that was
 * gone).  The report and the release send the same value (their ownership tests). */
static void cg__r_probe_val(struct cg_shared_pool *sp, int leased) {
  size_t n;
  if (!sp->probe_id[0])
    cg__new_id(sp->probe_id, sizeof(sp->probe_id));
  n = strlen(sp->probe_id);
  if (n >= 2 && strcmp(sp->probe_id + n - 2, "|L") == 0)
    sp->probe_id[n -= 2] = '\0';
  if (leased && n + 3 <= sizeof(sp->probe_id))
    memcpy(sp->probe_id + n, "|L", 3);
}

/* Cut `*ms` (a probe key's expiry) to this machine's lease (breaker.h
 * cg_breaker_probe_max_ms, by the kept answer time); 1 when the lease cut it and came
 * from a kept answer time (cg__r_probe_val's "|L"). */
static int cg__r_lease(struct cg_shared_pool *sp, int64_t *ms) {
  int64_t ok = cg__r_ok_ms(sp), cap = cg_breaker_probe_max_ms(ok);
  if (*ms <= cap)
    return 0;
  *ms = cap;
  return ok > 0;
}

static int cg__r_admit(struct cg_shared_pool *sp, int64_t probe_ns, int64_t *next_ns,
                       int64_t now) {
  char k1[160], k2[160], ams[24];
  const char *keys[2] = {CG_KEY(k1, sp, "brk"), CG_KEY(k2, sp, "probe")};
  const char *args[2] = {sp->probe_id, ams};
  int64_t ms = probe_ns / 1000000;
  redisReply *r;
  int v;
  (void) now; /* the server's TIME (shared.h) */

  if (sp->probe_out_until > 0 && cg_state_now() >= sp->probe_out_until) {
    /* The probe this call was held for ran past its lease with no answer (or its holder
     * died): raised here as breaker.c cg__probe_overran raises it in the file, before
     * this call's own lease is asked for. */
    if (sp->state && sp->p >= 0)
      cg_breaker_note_slow(sp->state, sp->p, cg_breaker_probe_max_ms(cg__r_ok_ms(sp)));
  }
  sp->probe_out_until = 0;
  if (ms < 1)
    ms = 1;
  cg__r_probe_val(sp, cg__r_lease(sp, &ms));
  if (cg__bc_closed(sp->cfg->name)) {
    *next_ns = 0;
    return CG_BREAKER_ALLOW;
  }
  snprintf(ams, sizeof(ams), "%lld", (long long) ms);
  r = cg__evalv(CG_S_BRK_ADMIT, 2, keys, 2, args);
  if (!r)
    return CG_SHARED_DOWN;
  if (!cg__is_array(r, 2)) {
    freeReplyObject(r);
    return CG_SHARED_DOWN;
  }
  if (!cg__is_verdict(r, 2, 2)) {
    freeReplyObject(r);
    cg_warn_once("redis-reply", "redis: unexpected reply; using the local state file");
    return CG_SHARED_DOWN;
  }
  v = (int) cg__int(r, 0);
  *next_ns = cg__wait_ns(cg__int(r, 1), CG_REDIS_REFUSED_CAP_NS);
  if (v == 2 && cg__int(r, 2) == 1 && cg__int(r, 3) == 1 && *next_ns > 0 &&
      *next_ns <= (int64_t) CG_BREAKER_PROBE_MAX_MS * 1000000) /* bounded: from the network */
    sp->probe_out_until = cg_state_now() + *next_ns; /* a leased probe out until then */
  freeReplyObject(r);
  cg__bc_set(sp->cfg->name, v == 0);
  return v == 0 ? CG_BREAKER_ALLOW : v == 1 ? CG_BREAKER_PROBE : CG_BREAKER_REJECT;
}

static int cg__r_early(struct cg_shared_pool *sp, int64_t probe_ns, int64_t now) {
  char k1[160], k2[160], k3[160], ams[24], gap[24];
  const char *keys[3] = {CG_KEY(k1, sp, "brk"), CG_KEY(k2, sp, "probe"),
                         CG_KEY(k3, sp, "early")};
  const char *args[3] = {sp->probe_id, ams, gap};
  /* held a second past the call's deadline, as the file's (breaker.c cg_breaker_early) */
  int64_t ms = probe_ns / 1000000 + 1000;
  redisReply *r;
  int v;
  (void) now; /* the server's TIME (shared.h) */

  cg__r_probe_val(sp, cg__r_lease(sp, &ms));
  snprintf(ams, sizeof(ams), "%lld", (long long) ms);
  snprintf(gap, sizeof(gap), "%d", CG_BREAKER_EARLY_GAP_MS);
  r = cg__evalv(CG_S_BRK_EARLY, 3, keys, 3, args);
  if (!r)
    return CG_SHARED_DOWN;
  if (r->type != REDIS_REPLY_INTEGER) {
    freeReplyObject(r);
    return CG_SHARED_DOWN;
  }
  v = r->integer == 1;
  freeReplyObject(r);
  return v;
}

static int cg__r_report(struct cg_shared_pool *sp, int failed, int probe, int64_t floor_ns,
                        int64_t start_ns) {
  const struct cg_breaker_cfg *c = &sp->cfg->breaker;
  char k1[160], k2[160], k3[160], k4[160], a[12][48];
  const char *keys[4] = {CG_KEY(k1, sp, "brk"), CG_KEY(k2, sp, "probe"),
                         CG_KEY(k3, sp, "win"), CG_KEY(k4, sp, "run")};
  const char *args[12];
  redisReply *r;
  int i;
  (void) start_ns;

  if (failed < 0 && !probe)
    return 0; /* nothing to count: no round trip */
  snprintf(a[0], sizeof(a[0]), "%d", failed);
  snprintf(a[1], sizeof(a[1]), "%d", probe == 2 ? 2 : probe ? 1 : 0);
  snprintf(a[3], sizeof(a[3]), "%.0f", c->window_s * 1e6);
  snprintf(a[4], sizeof(a[4]), "%ld", c->min_requests);
  snprintf(a[5], sizeof(a[5]), "%.6f", c->failure_rate);
  snprintf(a[6], sizeof(a[6]), "%ld", c->consecutive);
  snprintf(a[7], sizeof(a[7]), "%.0f", c->cooldown_s * 1e6);
  snprintf(a[8], sizeof(a[8]), "%.0f", cg_breaker_cap_s(c) * 1e6); /* as the file's */
  snprintf(a[9], sizeof(a[9]), "%.6f", c->jitter);
  snprintf(a[10], sizeof(a[10]), "%.6f", (double) (rand() & 0xffff) / 65535.0);
  snprintf(a[11], sizeof(a[11]), "%lld", (long long) (floor_ns > 0 ? floor_ns / 1000 : 0));
  for (i = 0; i < 12; i++)
    args[i] = a[i];
  args[2] = sp->probe_id;
  if (failed == 0 && !probe && cg_shared_redis_ready()) {
    /* A success outside a probe opens nothing: sent, not waited for. */
    const char *argv[3 + 4 + 12] = {"EVALSHA", cg__tc.sha[CG_S_BRK_REPORT], "4"};
    for (i = 0; i < 4; i++)
      argv[3 + i] = keys[i];
    for (i = 0; i < 12; i++)
      argv[7 + i] = args[i];
    return cg__send(19, argv) == 0 ? 0 : CG_SHARED_DOWN;
  }
  r = cg__evalv(CG_S_BRK_REPORT, 4, keys, 12, args);
  if (!r)
    return CG_SHARED_DOWN;
  if (r->type == REDIS_REPLY_INTEGER && r->integer == 1)
    cg__bc_set(sp->cfg->name, 0); /* this result opened it */
  if (probe)
    cg__bc_set(sp->cfg->name, 0);
  freeReplyObject(r);
  return 0;
}

static void cg__r_brelease(struct cg_shared_pool *sp) {
  char k[160];
  const char *keys[1] = {CG_KEY(k, sp, "probe")};
  const char *args[1] = {sp->probe_id};
  redisReply *r;
  if (!sp->probe_id[0])
    return;
  r = cg__evalv(CG_S_BRK_RELEASE, 1, keys, 1, args);
  if (r)
    freeReplyObject(r);
}

/* {state, us}: CG_SHARED_DOWN when unreachable. */
static int cg__r_state2(struct cg_shared_pool *sp, int64_t *us) {
  char k1[160], k2[160];
  const char *keys[2] = {CG_KEY(k1, sp, "brk"), CG_KEY(k2, sp, "probe")};
  redisReply *r = cg__evalv(CG_S_BRK_STATE, 2, keys, 0, NULL);
  int v;
  if (!r)
    return CG_SHARED_DOWN;
  if (!cg__is_verdict(r, 2, 2)) {
    freeReplyObject(r);
    return CG_SHARED_DOWN;
  }
  v = (int) cg__int(r, 0);
  *us = cg__wait_ns(cg__int(r, 1), CG_REDIS_REFUSED_CAP_NS) / 1000;
  freeReplyObject(r);
  return v == 0 ? CG_BREAKER_CLOSED : v == 1 ? CG_BREAKER_OPEN : CG_BREAKER_HALF_OPEN;
}

static int cg__r_bstate(struct cg_shared_pool *sp) {
  int64_t us;
  return cg__r_state2(sp, &us);
}

static int cg__r_wait_ok(struct cg_shared_pool *sp, int64_t left_ns) {
  int64_t us = 0;
  int s = cg__r_state2(sp, &us);
  if (s == CG_SHARED_DOWN || s == CG_BREAKER_CLOSED || s == CG_BREAKER_HALF_OPEN)
    return 1;
  return us * 1000 <= left_ns;
}

static uint32_t cg__r_seq(struct cg_shared_pool *sp) {
  (void) sp;
  return 0;
}

static void cg__r_park(struct cg_shared_pool *sp, uint32_t seq, int64_t ns) {
  int64_t ms = ns / 1000000;
  (void) sp;
  (void) seq;
  if (ms > CG_SHARED_POLL_MS)
    ms = CG_SHARED_POLL_MS;
  cg_sleep_ms(ms > 0 ? ms : 1);
}

/* ---- retry budget ---- */

#define CG_REDIS_BSLOTS 1024
static struct cg__member cg__bslots[CG_REDIS_BSLOTS];

/* Send script `s` without waiting (cg__send). */
static int cg__send_eval(int s, int nkeys, const char **keys, int nargs, const char **args) {
  const char *argv[24];
  char nk[8];
  int argc = 0, i;
  if (!cg_shared_redis_ready())
    return -1;
  snprintf(nk, sizeof(nk), "%d", nkeys);
  argv[argc++] = "EVALSHA";
  argv[argc++] = cg__tc.sha[s];
  argv[argc++] = nk;
  for (i = 0; i < nkeys; i++)
    argv[argc++] = keys[i];
  for (i = 0; i < nargs; i++)
    argv[argc++] = args[i];
  return cg__send(argc, argv);
}

static void cg__r_bfirst(struct cg_shared_pool *sp, int64_t now) {
  char k[160], w[32];
  const char *keys[1] = {CG_KEY(k, sp, "bud")};
  const char *args[1] = {w};
  (void) now; /* the server's TIME (shared.h) */
  if (!sp->cfg->budget.enabled)
    return;
  snprintf(w, sizeof(w), "%.0f", sp->cfg->budget.window_s * 1e6);
  /* Counted, not waited for: the admission's one round trip stays one. */
  if (cg__send_eval(CG_S_BUD_FIRST, 1, keys, 1, args) != 0)
    cg_shared_mmap.budget_first(sp, 0);
}

static int cg__r_bretry(struct cg_shared_pool *sp, int64_t left_ns, int *slot) {
  const struct cg_budget_cfg *c = &sp->cfg->budget;
  char k1[160], k2[160], a[6][64];
  const char *keys[2] = {CG_KEY(k1, sp, "bud"), CG_KEY(k2, sp, "budc")};
  const char *args[6];
  redisReply *r;
  int i, v;
  int64_t slot_ms = left_ns / 1000000 + 1000;

  *slot = -1;
  if (!c->enabled)
    return CG_BUDGET_GRANTED;
  snprintf(a[0], sizeof(a[0]), "%.0f", c->window_s * 1e6);
  snprintf(a[1], sizeof(a[1]), "%.6f", c->ratio);
  snprintf(a[2], sizeof(a[2]), "%.6f", c->min_per_s);
  snprintf(a[3], sizeof(a[3]), "%ld", c->max_concurrent);
  cg__new_id(a[4], sizeof(a[4]));
  snprintf(a[5], sizeof(a[5]), "%lld", (long long) (slot_ms > 1000 ? slot_ms : 1000));
  for (i = 0; i < 6; i++)
    args[i] = a[i];
  r = cg__evalv(CG_S_BUD_RETRY, 2, keys, 6, args);
  if (!r)
    return CG_SHARED_DOWN;
  if (!cg__is_verdict(r, 3, 2)) {
    freeReplyObject(r);
    return CG_SHARED_DOWN;
  }
  v = (int) cg__int(r, 0);
  sp->budget_wait_ns = cg__wait_ns(cg__int(r, 1), CG_REDIS_WAIT_CAP_NS);
  sp->budget_bucket = cg__int(r, 2);
  freeReplyObject(r);
  if (v == 0 && c->max_concurrent > 0) {
    i = cg__member_add(cg__bslots, CG_REDIS_BSLOTS, &cg__bslot_mu, k2, a[4]);
    if (i >= 0)
      *slot = CG_SHARED_BUDGET_BASE + i;
    /* No room to remember it: the slot expires with the call's deadline. */
  }
  return v == 0 ? CG_BUDGET_GRANTED : v == 1 ? CG_BUDGET_WINDOW : CG_BUDGET_CONCURRENCY;
}

static int64_t cg__r_bwait(struct cg_shared_pool *sp, int why) {
  int64_t ns = sp->budget_wait_ns;
  if (why == CG_BUDGET_CONCURRENCY || ns <= 0)
    ns = CG_BUDGET_POLL_NS;
  return ns < CG_BUDGET_MIN_WAIT_NS ? CG_BUDGET_MIN_WAIT_NS : ns;
}

static void cg__r_bdone(struct cg_shared_pool *sp, int slot) {
  (void) sp;
  cg__member_zrem(cg__bslots, CG_REDIS_BSLOTS, &cg__bslot_mu, slot - CG_SHARED_BUDGET_BASE);
}

static void cg__r_brefund(struct cg_shared_pool *sp, int64_t granted_ns) {
  char k[160], b[32];
  const char *keys[1] = {CG_KEY(k, sp, "bud")};
  const char *args[1] = {b};
  if (!sp->cfg->budget.enabled || granted_ns <= 0)
    return;
  snprintf(b, sizeof(b), "%lld", (long long) sp->budget_bucket);
  cg__send_eval(CG_S_BUD_REFUND, 1, keys, 1, args);
}

const struct cg_shared_ops cg_shared_redis = {
  .name = "redis",
  .reserve = cg__r_reserve,
  .hold_left = cg__r_hold_left,
  .hold = cg__r_hold,
  .acquire = cg__r_acquire,
  .release = cg__r_release,
  .queue_leave = cg__r_queue_leave,
  .breaker_admit = cg__r_admit,
  .breaker_early = cg__r_early,
  .breaker_report = cg__r_report,
  .breaker_release = cg__r_brelease,
  .breaker_state = cg__r_bstate,
  .breaker_wait_ok = cg__r_wait_ok,
  .breaker_seq = cg__r_seq,
  .breaker_park = cg__r_park,
  .budget_first = cg__r_bfirst,
  .budget_retry = cg__r_bretry,
  .budget_wait_ns = cg__r_bwait,
  .budget_done = cg__r_bdone,
  .budget_refund = cg__r_brefund,
  .learn_take = cg__r_learn_take,
  .learn_cut = cg__r_learn_cut,
};

void cg_shared_redis_counts(uint64_t *admissions, uint64_t *round_trips, uint64_t *sent) {
  *admissions = __atomic_load_n(&cg__admissions, __ATOMIC_RELAXED);
  *round_trips = __atomic_load_n(&cg__round_trips, __ATOMIC_RELAXED);
  *sent = __atomic_load_n(&cg__sent, __ATOMIC_RELAXED);
}

/* ---- stat ---- */

static long long cg__reply_ll(redisReply *r) {
  if (!r)
    return 0;
  if (r->type == REDIS_REPLY_INTEGER)
    return r->integer;
  if (r->type == REDIS_REPLY_STRING)
    return strtoll(r->str, NULL, 10);
  return 0;
}

#define CG__SCAN_ROUNDS 64 /* SCAN rounds of `stat`'s look for keyed holds, at most */

/* `s` with SCAN's glob characters (* ? [ ] \) escaped, into `out` (`n` bytes). */
static void cg__glob_escape(const char *s, char *out, size_t n) {
  size_t o = 0;
  for (; *s && o + 2 < n; s++) {
    if (strchr("*?[]\\", *s))
      out[o++] = '\\';
    out[o++] = *s;
  }
  out[o] = '\0';
}

/* Why a command of `stat`'s connection `c` failed, into `err`: the error reply `r`, or
 * the connection's error, a timeout in words (hiredis 0.14 gives EAGAIN's text). */
static void cg__view_err(const redisContext *c, const redisReply *r, char *err, size_t errn) {
  if (r)
    snprintf(err, errn, "%s", r->str);
  else if (c->err == REDIS_ERR_IO &&
           (strstr(c->errstr, "temporarily unavailable") || strstr(c->errstr, "timed out") ||
            strstr(c->errstr, "would block") || strstr(c->errstr, "not whole")))
    snprintf(err, errn, "timed out after 500 ms (no answer)");
  else
    snprintf(err, errn, "%s", c->errstr[0] ? c->errstr : "no reply");
}

/* `stat`'s connection to the Redis at `url`: connected, logged in, its database selected;
 * NULL with the reason in `err`. */
static redisContext *cg__view_connect(const char *url, char *err, size_t errn) {
  struct cg_redis_url u;
  struct timeval tv = cg__tv(500);
  redisContext *c;
  redisReply *r;
  int pr = cg_redis_url_parse(url, &u);

  if (pr != 0) {
    snprintf(err, errn, "%s",
             pr == -2   ? "rediss:// not supported by this build"
             : pr == -3 ? "bad URL: a '%' in the user or password that is not %XX"
                        : "bad URL");
    return NULL;
  }
  c = u.unix_socket ? redisConnectUnixWithTimeout(u.path, tv)
                    : redisConnectWithTimeout(u.host, u.port, tv);
  if (!c || c->err) {
    if (c)
      cg__view_err(c, NULL, err, errn);
    else
      snprintf(err, errn, "out of memory");
    if (c)
      redisFree(c);
    return NULL;
  }
  redisSetTimeout(c, tv);
  cg__bound_reader(c);
#define CG_CHECK(reply)                                                                   \
  do {                                                                                    \
    r = (reply);                                                                          \
    if (!r || r->type == REDIS_REPLY_ERROR) {                                             \
      cg__view_err(c, r, err, errn);                                                      \
      if (r)                                                                              \
        freeReplyObject(r);                                                               \
      redisFree(c);                                                                       \
      return CG__FAILED;                                                                  \
    }                                                                                     \
  } while (0)
#define CG_RUN(...) CG_CHECK(cg__command(c, __VA_ARGS__))
#define CG__FAILED NULL
  if (u.password[0]) {
    CG_CHECK(cg__auth(c, &u));
    freeReplyObject(r);
  }
  if (u.db) {
    CG_RUN("SELECT %d", u.db);
    freeReplyObject(r);
  }
#undef CG__FAILED
  return c;
}

/* Pool `name`'s figures on `stat`'s connection `c`: 0, or -1 with the reason in `err`
 * (`c` freed then: a failed command leaves a connection out of step). */
static int cg__view_pool(redisContext *c, const char *prefix, const char *name,
                         struct cg_redis_view *v, char *err, size_t errn) {
  redisReply *r;
  char k[256];
  long long now_us, now_ms;

  memset(v, 0, sizeof(*v));
#define CG__FAILED -1
  CG_RUN("TIME");
  now_us = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                   r->element[0]->type == REDIS_REPLY_STRING &&
                   r->element[1]->type == REDIS_REPLY_STRING
               ? strtoll(r->element[0]->str, NULL, 10) % 100000000000LL * 1000000 +
                     strtoll(r->element[1]->str, NULL, 10) % 1000000
               : 0;
  if (now_us < 0) /* not a Redis clock: what is "ahead" below is then from 0 */
    now_us = 0;
  freeReplyObject(r);
  /* What every guarded connection and call runs: SCRIPT LOAD of the scripts, then the
   * scripts (EVALSHA) on the pool's keys.  An ACL user without +script|load or +evalsha,
   * or whose key patterns leave the pool's keys out, gets NOPERM, which Redis checks
   * before it looks for the script (a SHA1 of zeros: NOSCRIPT otherwise); the calls of
   * such a user fall back to the file, so it is not a fleet Redis (helper-55, helper-60).
   * The script writes, as the guard's do: a server out of memory under `noeviction` (OOM)
   * or a read-only replica (READONLY, an old master after a failover) refuses it as it
   * refuses every guarded call's, which then goes by the file (helper-64: "reachable"
   * before).  It sets the pool's key `stat` for one second: nothing else is written. */
  r = cg__command(c, "SCRIPT LOAD %s", "redis.call('SET', KEYS[1], '1', 'PX', 1000) return 0");
  if (r && r->type == REDIS_REPLY_STRING && r->len < 64) {
    char sha[64];
    memcpy(sha, r->str, (size_t) r->len + 1);
    freeReplyObject(r);
    r = cg__command(c, "EVALSHA %s 1 %s", sha, cg_redis_key(k, sizeof(k), prefix, name, "stat"));
  }
  if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) != 0) {
    snprintf(err, errn, "the guard's scripts are refused: %s", r->str);
    freeReplyObject(r);
    redisFree(c);
    return -1;
  }
  if (!r)
    CG_CHECK(r); /* no answer: the connection's error */
  freeReplyObject(r);
  /* The pool's time, as the scripts reckon it after a step back of the server's clock
   * (redis-lua.h CG_LUA_NOW: "<last now>:<offset>"). */
  CG_RUN("GET %s", cg_redis_key(k, sizeof(k), prefix, name, "clock"));
  if (r->type == REDIS_REPLY_STRING) {
    char *colon = strchr(r->str, ':');
    long long last = strtoll(r->str, NULL, 10), off = colon ? strtoll(colon + 1, NULL, 10) : 0;
    if (off > 0 && off < INT64_C(1) << 50)
      now_us += off;
    if (last > 0 && now_us < last)
      now_us = last;
  }
  freeReplyObject(r);
  now_ms = now_us / 1000;
  CG_RUN("ZCOUNT %s (%lld +inf", cg_redis_key(k, sizeof(k), prefix, name, "inflight"),
         now_ms);
  v->inflight = (long) cg__reply_ll(r);
  freeReplyObject(r);
  CG_RUN("GET %s", cg_redis_key(k, sizeof(k), prefix, name, "hold"));
  {
    long long h = cg__reply_ll(r);
    v->hold_ms = h > now_us ? (h - now_us) / 1000 : 0;
  }
  freeReplyObject(r);
  {
    /* The limit keys' holds ("hold:KEY", cg__key_hold), found with SCAN (at most
     * CG__SCAN_ROUNDS rounds: a figure for `stat`, not a walk of a large database): a
     * keyed hold showed as 0 while the fleet's calls of that key were held (helper-64). */
    char pat[600], cur[32] = "0";
    int rounds = 0;
    cg__glob_escape(cg_redis_key(k, sizeof(k), prefix, name, "hold:"), pat, sizeof(pat) - 1);
    strcat(pat, "*");
    do {
      size_t i;
      CG_RUN("SCAN %s MATCH %s COUNT 1000", cur, pat);
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
          r->element[0]->type != REDIS_REPLY_STRING ||
          r->element[1]->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(r);
        break;
      }
      snprintf(cur, sizeof(cur), "%s", r->element[0]->str);
      for (i = 0; i < r->element[1]->elements; i++) {
        const redisReply *e = r->element[1]->element[i];
        redisReply *g;
        long long h;
        if (e->type != REDIS_REPLY_STRING)
          continue;
        g = cg__command(c, "GET %b", e->str, (size_t) e->len);
        if (!g) {
          freeReplyObject(r);
          CG_CHECK(g); /* no answer: the connection's error */
        }
        h = cg__reply_ll(g);
        freeReplyObject(g);
        if (h > now_us) {
          v->held_keys++;
          if ((h - now_us) / 1000 > v->key_hold_ms)
            v->key_hold_ms = (h - now_us) / 1000;
        }
      }
      freeReplyObject(r);
    } while (strcmp(cur, "0") != 0 && ++rounds < CG__SCAN_ROUNDS);
  }
  CG_RUN("GET %s", cg_redis_key(k, sizeof(k), prefix, name, "tat_req"));
  {
    long long t = cg__reply_ll(r);
    v->tat_req_ahead_us = t > now_us ? t - now_us : 0;
  }
  freeReplyObject(r);
  CG_RUN("GET %s", cg_redis_key(k, sizeof(k), prefix, name, "tat_tok"));
  {
    long long t = cg__reply_ll(r);
    v->tat_tok_ahead_us = t > now_us ? t - now_us : 0;
  }
  freeReplyObject(r);
  CG_RUN("GET %s", cg_redis_key(k, sizeof(k), prefix, name, "admitted"));
  v->admitted = (long) cg__reply_ll(r);
  freeReplyObject(r);
  CG_RUN("GET %s", cg_redis_key(k, sizeof(k), prefix, name, "brk"));
  v->breaker = CG_BREAKER_CLOSED;
  if (r->type == REDIS_REPLY_STRING) {
    long long nxt = strtoll(r->str, NULL, 10);
    v->breaker = CG_BREAKER_OPEN;
    v->next_probe_ms = nxt > now_us ? (nxt - now_us) / 1000 : 0;
  }
  freeReplyObject(r);
  CG_RUN("PTTL %s", cg_redis_key(k, sizeof(k), prefix, name, "probe"));
  if (v->breaker == CG_BREAKER_OPEN && v->next_probe_ms == 0 && cg__reply_ll(r) > 0)
    v->breaker = CG_BREAKER_HALF_OPEN;
  freeReplyObject(r);
  CG_RUN("HGETALL %s", cg_redis_key(k, sizeof(k), prefix, name, "win"));
  if (r->type == REDIS_REPLY_ARRAY) {
    size_t i;
    for (i = 0; i + 1 < r->elements; i += 2) {
      const char *f = r->element[i]->type == REDIS_REPLY_STRING ? r->element[i]->str : NULL;
      long n = r->element[i + 1]->type == REDIS_REPLY_STRING
                   ? strtol(r->element[i + 1]->str, NULL, 10)
                   : 0;
      if (f && strchr(f, ':') && strchr(f, ':')[1] == 'f')
        v->window_failed += n;
      else
        v->window_ok += n;
    }
  }
  freeReplyObject(r);
#undef CG__FAILED
#undef CG_RUN
#undef CG_CHECK
  return 0;
}

int cg_redis_view_all(const char *url, const char *prefix, const char *const *names, int n,
                      struct cg_redis_view *v, char *err, size_t errn) {
  redisContext *c;
  int i;

  memset(v, 0, (size_t) (n > 0 ? n : 0) * sizeof(*v));
  if (!(c = cg__view_connect(url, err, errn)))
    return -1;
  for (i = 0; i < n; i++)
    if (cg__view_pool(c, prefix, names[i], &v[i], err, errn) != 0)
      return -1; /* c freed; the rest left zero */
  redisFree(c);
  return 0;
}
