/* record.c - one JSON line per attempt, one write(2) (see record.h). */
#include "record.h"

#include "clock.h"
#include "log.h"
#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

void cg_record_init(struct cg_record *r) {
  memset(r, 0, sizeof(*r));
  r->status = CG_NULL_INT;
  r->connect_ms = r->ttfb_ms = r->duration_ms = CG_NULL_INT;
  r->prompt_tokens = r->completion_tokens = r->total_tokens = r->cached_tokens = CG_NULL_INT;
  r->cost_usd = NAN;
}

/* ---- the writer: the record straight into a buffer, no tree, no allocation ----
 *
 * The bytes are those cJSON_PrintUnformatted wrote for the same record before issue 16
 * (tests/unit/test-record-writer.c keeps that builder as its oracle): keys in the order
 * below, no spaces, strings made valid UTF-8 (each byte that does not start a well-formed
 * sequence, RFC 3629, becomes U+FFFD) and escaped as cJSON escapes them (\" \\ \b \f \n
 * \r \t, any other byte below 0x20 as \u00xx in lower-case hex, everything else as is). */

/* Bytes of the record apart from its strings: 35 keys with their quotes, colons and
 * commas (about 520), 25 integers of at most 20 characters, the time stamp and the cost
 * (at most 24 characters each).  Generous: the bound is checked by the tests. */
#define CG__RECORD_FIXED 1536
/* Each byte of a string becomes at most 6 ("\u001f"); U+FFFD for one byte is 3. */
#define CG__STR_GROWTH 6

/* 0: copied as is; 1: a one-letter escape; 2: \u00xx; 3: not ASCII (UTF-8 checked).
 * The NUL that ends a string is class 2 and checked for first. */
static const unsigned char cg__str_class[256] = {
    2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3};

/* The length of the well-formed UTF-8 sequence at `p` (RFC 3629, table 3-7 of Unicode:
 * no overlong forms, no surrogates, nothing above U+10FFFF), or 0.  `p` is
 * NUL-terminated, so reading on stops at the terminator (never a continuation byte). */
static size_t cg__utf8_len(const unsigned char *p) {
  size_t n = (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : (*p & 0xF8) == 0xF0 ? 4 : 0;
  size_t i;
  if (n == 0 || (n == 2 && *p < 0xC2) || (n == 4 && *p > 0xF4))
    return 0;
  for (i = 1; i < n; i++)
    if ((p[i] & 0xC0) != 0x80)
      return 0;
  if (n == 3 && ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] >= 0xA0)))
    return 0;
  if (n == 4 && ((p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] >= 0x90)))
    return 0;
  return n;
}

/* `s` (`n` bytes, then its NUL) as a JSON string at `w` (room: CG__STR_GROWTH * n + 2,
 * and 16 bytes more: a run is stored 16 bytes at a time), or null when NULL.  Returns
 * the end. */
static char *cg__put_str(char *w, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *p = (const unsigned char *) s, *end = p + n;
  if (!s) {
    memcpy(w, "null", 4);
    return w + 4;
  }
  *w++ = '"';
  for (;;) {
#ifdef __SSE2__
    /* Bytes copied as they are (0x20-0x7f but '"' and '\\'), 16 at a time, within the
     * string's `n` bytes (never read past them: sanitizers would rightly object). */
    while (end - p >= 16) {
      __m128i x = _mm_loadu_si128((const __m128i *) (const void *) p);
      __m128i bad = _mm_or_si128(_mm_cmpgt_epi8(_mm_set1_epi8(0x20), x), /* < 0x20, >= 0x80 */
                                 _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
                                              _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))));
      unsigned m = (unsigned) _mm_movemask_epi8(bad);
      _mm_storeu_si128((__m128i *) (void *) w, x); /* only the bytes before `bad` count */
      if (!m) {
        p += 16, w += 16;
        continue;
      }
      p += __builtin_ctz(m), w += __builtin_ctz(m);
      break;
    }
#endif
    while (p < end && cg__str_class[*p] == 0)
      *w++ = (char) *p++;
    if (p == end)
      break;
    switch (cg__str_class[*p]) {
    case 1:
      *w++ = '\\';
      *w++ = *p == '"' ? '"' : *p == '\\' ? '\\' : *p == '\b' ? 'b' : *p == '\f' ? 'f'
           : *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
      p++;
      break;
    case 2:
      memcpy(w, "\\u00", 4);
      w[4] = hex[*p >> 4];
      w[5] = hex[*p & 15];
      w += 6;
      p++;
      break;
    default: {
      /* reads on up to 3 bytes: `s` is NUL-terminated, and no continuation byte is NUL */
      size_t k = cg__utf8_len(p);
      if (k) {
        memcpy(w, p, k);
        w += k;
        p += k;
      } else {
        memcpy(w, "\xEF\xBF\xBD", 3);
        w += 3;
        p++;
      }
    }
    }
  }
  *w++ = '"';
  return w;
}

/* `v` in decimal at `w`, or null for CG_NULL_INT: every digit (cJSON's numbers are
 * doubles, which would print 9007199254740993 as 9.00719925474099e+15; snprintf's "%lld"
 * costs about 800 instructions a call, and a record has 25 integers).  Returns the end. */
static char *cg__put_int(char *w, int64_t v) {
  static const char pairs[] = "00010203040506070809101112131415161718192021222324252627282930"
                              "31323334353637383940414243444546474849505152535455565758596061"
                              "62636465666768697071727374757677787980818283848586878889909192"
                              "93949596979899";
  char buf[20], *p = buf + sizeof(buf);
  uint64_t u;
  size_t n;
  if (v == CG_NULL_INT) {
    memcpy(w, "null", 4);
    return w + 4;
  }
  u = v < 0 ? 0 - (uint64_t) v : (uint64_t) v;
  while (u >= 100) { /* two digits a step */
    p -= 2;
    memcpy(p, pairs + 2 * (u % 100), 2);
    u /= 100;
  }
  if (u >= 10) {
    p -= 2;
    memcpy(p, pairs + 2 * u, 2);
  } else {
    *--p = (char) ('0' + u);
  }
  if (v < 0)
    *w++ = '-';
  n = (size_t) (buf + sizeof(buf) - p);
  memcpy(w, p, n);
  return w + n;
}

static char *cg__put_bool(char *w, int b) {
  memcpy(w, b ? "true" : "false", b ? 4 : 5);
  return w + (b ? 4 : 5);
}

/* Two decimal digits of `v` (0-99). */
static char *cg__put2(char *w, unsigned v) {
  w[0] = (char) ('0' + v / 10);
  w[1] = (char) ('0' + v % 10);
  return w + 2;
}

/* The time stamp, RFC 3339 UTC with milliseconds ("2026-08-13T15:36:43.123Z"), as a JSON
 * string.  Years 1970-9999 by hand (days to a civil date: H. Hinnant, "chrono-Compatible
 * Low-Level Date Algorithms", civil_from_days); anything else, which no clock gives, as
 * clock.c's cg_rfc3339_ms (gmtime_r + snprintf) always wrote it. */
static char *cg__put_ts(char *w, int64_t ms) {
  int64_t secs, z, era, doe, yoe, doy, mp, y, d, m;
  unsigned sod;
  if (ms < 0 || ms > INT64_C(253402300799999)) {
    char ts[64];
    size_t n = strlen(cg_rfc3339_ms(ms, ts, sizeof(ts)));
    *w++ = '"';
    memcpy(w, ts, n); /* digits, '-', ':', 'T', '.', 'Z' only: nothing to escape */
    w += n;
    *w++ = '"';
    return w;
  }
  secs = ms / 1000;
  z = secs / 86400 + 719468;
  sod = (unsigned) (secs % 86400);
  era = z / 146097;
  doe = z - era * 146097;
  yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y = yoe + era * 400 + (m <= 2);
  *w++ = '"';
  w = cg__put2(w, (unsigned) (y / 100));
  w = cg__put2(w, (unsigned) (y % 100));
  *w++ = '-';
  w = cg__put2(w, (unsigned) m);
  *w++ = '-';
  w = cg__put2(w, (unsigned) d);
  *w++ = 'T';
  w = cg__put2(w, sod / 3600);
  *w++ = ':';
  w = cg__put2(w, sod / 60 % 60);
  *w++ = ':';
  w = cg__put2(w, sod % 60);
  *w++ = '.';
  *w++ = (char) ('0' + ms % 1000 / 100);
  w = cg__put2(w, (unsigned) (ms % 100));
  memcpy(w, "Z\"", 2);
  return w + 2;
}

/* A cost: a decimal form that reads back as exactly `v` (%.15g when that round-trips,
 * as short values such as 0.5 or 0.000187 do, else %.17g, which always does); null when
 * not finite.  The writer before issue 16 also tried %.16g in between: the value read
 * back is the same, only such costs are now one digit longer. */
/* Each thread's last cost written: calls of one model and size cost the same, and the two
 * printf and a strtod are most of a record's time (4.5k of 10k instructions, issue 16).
 * The text does not depend on the locale (the round trip is read in the one it was
 * written in, and the decimal mark is made '.'), so the double's bits are the key. */
static CG_TLS struct {
  uint64_t bits;
  size_t n; /* 0: empty */
  char num[40];
} cg__cost_memo;

static char *cg__put_double(char *w, double v) {
  char num[40], *p;
  size_t n;
  uint64_t bits;
  if (!isfinite(v)) {
    memcpy(w, "null", 4);
    return w + 4;
  }
  memcpy(&bits, &v, sizeof(bits));
  if (cg__cost_memo.n && cg__cost_memo.bits == bits) {
    memcpy(w, cg__cost_memo.num, cg__cost_memo.n);
    return w + cg__cost_memo.n;
  }
  snprintf(num, sizeof(num), "%.15g", v);
  if (strtod(num, NULL) != v) /* both in the host's locale */
    snprintf(num, sizeof(num), "%.17g", v);
  for (p = num; *p; p++) /* a host's LC_NUMERIC may print "0,5": JSON wants "0.5" */
    if (!((*p >= '0' && *p <= '9') || *p == '-' || *p == '+' || *p == 'e'))
      *p = '.';
  n = (size_t) (p - num);
  memcpy(w, num, n);
  memcpy(cg__cost_memo.num, num, n);
  cg__cost_memo.bits = bits;
  cg__cost_memo.n = n;
  return w + n;
}

static size_t cg__slen(const char *s) {
  return s ? strlen(s) : 0;
}

/* The record's strings, each written with its length (cg__put_str). */
#define CG__RECORD_STRINGS(X)                                                               \
  X(request_id) X(task_id) X(method) X(host) X(path) X(pool) X(outcome) X(decision)         \
  X(reason) X(model) X(body_digest) X(repeat_of) X(fallback_from)

struct cg__lens {
#define CG__LEN_FIELD(f) size_t f;
  CG__RECORD_STRINGS(CG__LEN_FIELD)
#undef CG__LEN_FIELD
};

/* Room cg__record_write needs for `r`, the final '\n' and a NUL included; the strings'
 * lengths into `l`. */
static size_t cg__record_bound(const struct cg_record *r, struct cg__lens *l) {
  size_t n = 0;
#define CG__LEN_ADD(f) n += l->f = cg__slen(r->f);
  CG__RECORD_STRINGS(CG__LEN_ADD)
#undef CG__LEN_ADD
  return CG__RECORD_FIXED + 16 + CG__STR_GROWTH * n;
}

#define CG__KEY(w, lit) (memcpy((w), (lit), sizeof(lit) - 1), (w) + sizeof(lit) - 1)

/* The record at `buf` (cg__record_bound bytes, which gave `l`): one object, '\n', NUL.
 * Returns the length up to and with the '\n'. */
static size_t cg__record_write(const struct cg_record *r, const struct cg__lens *l,
                               char *buf) {
  char *w = buf;
  w = CG__KEY(w, "{\"ts\":");
  w = cg__put_ts(w, r->ts_ms);
  w = CG__KEY(w, ",\"pid\":");
  w = cg__put_int(w, r->pid);
  w = CG__KEY(w, ",\"request_id\":");
  w = cg__put_str(w, r->request_id, l->request_id);
  w = CG__KEY(w, ",\"task_id\":");
  w = cg__put_str(w, r->task_id, l->task_id);
  w = CG__KEY(w, ",\"attempt\":");
  w = cg__put_int(w, r->attempt);
  w = CG__KEY(w, ",\"final\":");
  w = cg__put_bool(w, r->final != 0);
  w = CG__KEY(w, ",\"method\":");
  w = cg__put_str(w, r->method, l->method);
  w = CG__KEY(w, ",\"host\":");
  w = cg__put_str(w, r->host, l->host);
  w = CG__KEY(w, ",\"path\":");
  w = cg__put_str(w, r->path, l->path);
  w = CG__KEY(w, ",\"pool\":");
  w = cg__put_str(w, r->pool, l->pool);
  w = CG__KEY(w, ",\"status\":");
  w = cg__put_int(w, r->status);
  w = CG__KEY(w, ",\"curl_code\":");
  w = cg__put_int(w, r->curl_code);
  w = CG__KEY(w, ",\"outcome\":");
  w = cg__put_str(w, r->outcome, l->outcome);
  w = CG__KEY(w, ",\"decision\":");
  w = cg__put_str(w, r->decision, l->decision);
  w = CG__KEY(w, ",\"reason\":");
  w = cg__put_str(w, r->reason, l->reason);
  w = CG__KEY(w, ",\"queue_ms\":");
  w = cg__put_int(w, r->queue_ms);
  w = CG__KEY(w, ",\"backoff_ms\":");
  w = cg__put_int(w, r->backoff_ms);
  w = CG__KEY(w, ",\"connect_ms\":");
  w = cg__put_int(w, r->connect_ms);
  w = CG__KEY(w, ",\"ttfb_ms\":");
  w = cg__put_int(w, r->ttfb_ms);
  w = CG__KEY(w, ",\"duration_ms\":");
  w = cg__put_int(w, r->duration_ms);
  w = CG__KEY(w, ",\"bytes_sent\":");
  w = cg__put_int(w, r->bytes_sent);
  w = CG__KEY(w, ",\"bytes_received\":");
  w = cg__put_int(w, r->bytes_received);
  w = CG__KEY(w, ",\"model\":");
  w = cg__put_str(w, r->model, l->model);
  w = CG__KEY(w, ",\"prompt_tokens\":");
  w = cg__put_int(w, r->prompt_tokens);
  w = CG__KEY(w, ",\"completion_tokens\":");
  w = cg__put_int(w, r->completion_tokens);
  w = CG__KEY(w, ",\"total_tokens\":");
  w = cg__put_int(w, r->total_tokens);
  w = CG__KEY(w, ",\"cached_tokens\":");
  w = cg__put_int(w, r->cached_tokens);
  w = CG__KEY(w, ",\"cost_usd\":");
  w = cg__put_double(w, r->cost_usd);
  w = CG__KEY(w, ",\"possibly_billed\":");
  w = cg__put_bool(w, r->possibly_billed != 0);
  w = CG__KEY(w, ",\"body_digest\":");
  w = cg__put_str(w, r->body_digest, l->body_digest);
  w = CG__KEY(w, ",\"libcurl_resends\":");
  w = cg__put_int(w, r->libcurl_resends);
  w = CG__KEY(w, ",\"repeat_of\":");
  w = cg__put_str(w, r->repeat_of, l->repeat_of);
  w = CG__KEY(w, ",\"repeats\":");
  w = cg__put_int(w, r->repeats);
  w = CG__KEY(w, ",\"fallback_from\":");
  w = cg__put_str(w, r->fallback_from, l->fallback_from);
  w = CG__KEY(w, ",\"breaker_wait_ms\":");
  w = cg__put_int(w, r->breaker_wait_ms);
  w = CG__KEY(w, "}\n");
  *w = '\0';
  return (size_t) (w - buf);
}

char *cg_record_json(const struct cg_record *r, size_t *len) {
  struct cg__lens l;
  char *line = malloc(cg__record_bound(r, &l));
  if (!line)
    return NULL;
  *len = cg__record_write(r, &l, line);
  return line;
}

/* ---- the log sink: opened once per process ---- */

static pthread_mutex_t cg__log_mutex = PTHREAD_MUTEX_INITIALIZER;
static dev_t cg__log_dev; /* identity of the file we opened, to notice a host that */
static ino_t cg__log_ino; /* closed our descriptor and got its number reused */

/* A forked child must not inherit cg__log_mutex held by a thread it does not have: hold it
 * across fork() (pthread_atfork(3)). */
static void cg__fork_prepare(void) {
  pthread_mutex_lock(&cg__log_mutex);
}
static void cg__fork_release(void) {
  pthread_mutex_unlock(&cg__log_mutex);
}
__attribute__((constructor)) static void cg__fork_register(void) {
  pthread_atfork(cg__fork_prepare, cg__fork_release, cg__fork_release);
}
static int cg__log_fd = -2; /* -2 not tried yet, -1 unusable */

/* mkdir -p of the directory part of `path` (mode 0700 for what we create). */
static int cg__mkdirs(const char *path) {
  char buf[4096];
  char *p;
  size_t n = strlen(path);

  if (n >= sizeof(buf))
    return -1;
  memcpy(buf, path, n + 1);
  p = strrchr(buf, '/');
  if (!p || p == buf)
    return 0;
  *p = '\0';
  for (p = buf + 1; *p; p++) {
    if (*p == '/') {
      *p = '\0';
      if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return -1;
      *p = '/';
    }
  }
  if (mkdir(buf, 0700) != 0 && errno != EEXIST)
    return -1;
  return 0;
}

static int cg__log_open(const struct cg_config *c) {
  struct stat st;
  int fd;

  if (!c->log_path)
    return -1;
  if (strcmp(c->log_path, "-") == 0)
    return STDERR_FILENO;
  if (cg__mkdirs(c->log_path) != 0) {
    cg_warn("usage log %s: cannot create its directory: %s; records are not written",
            c->log_path, strerror(errno));
    return -1;
  }
  /* O_NONBLOCK: a FIFO without a reader must fail at once, never hang the host. */
  fd = open(c->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
            0600);
  if (fd < 0) {
    cg_warn("usage log %s: %s; records are not written", c->log_path, strerror(errno));
    return -1;
  }
  if (fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode))) {
    cg_warn("usage log %s: not a regular file; records are not written", c->log_path);
    close(fd);
    return -1;
  }
  cg__log_dev = st.st_dev;
  cg__log_ino = st.st_ino;
  return fd;
}

/* Whether `fd` is still the log we opened (the host may have closed it, and the number
 * may now belong to one of its own files or sockets). */
static int cg__log_still_ours(int fd) {
  struct stat st;
  if (fd == STDERR_FILENO)
    return 1;
  return fstat(fd, &st) == 0 && st.st_dev == cg__log_dev && st.st_ino == cg__log_ino;
}

/* The whole line with write(2), retried on EINTR and after a short write (which a regular
 * file gives only when the disk is full).  A regular file or a character device never
 * raises SIGPIPE, so only stderr ("-", which may be a pipe) needs cg_write_quiet's
 * signal mask. */
static ssize_t cg__write_line(int fd, const char *line, size_t len) {
  size_t done = 0;
  if (fd == STDERR_FILENO)
    return cg_write_quiet(fd, line, len);
  while (done < len) {
    ssize_t w = write(fd, line + done, len - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      if (w == 0)
        errno = EIO;
      return -1;
    }
    done += (size_t) w;
  }
  return (ssize_t) len;
}

int cg_record_emit(const struct cg_config *c, const struct cg_record *r) {
  char small[4096], *line = small;
  struct cg__lens l;
  size_t len, cap;
  ssize_t w;
  int fd;

  if (!c->log_path)
    return -1; /* the log is off: nothing to open (cg__log_open), no lock to take */
  pthread_mutex_lock(&cg__log_mutex);
  if (cg__log_fd >= 0 && !cg__log_still_ours(cg__log_fd))
    cg__log_fd = -2; /* not ours any more: never close it, open the log again */
  if (cg__log_fd == -2)
    cg__log_fd = cg__log_open(c);
  fd = cg__log_fd;
  pthread_mutex_unlock(&cg__log_mutex);
  if (fd < 0)
    return -1;
  /* On the stack; only a record with very long strings (a 5000-byte task id) needs more. */
  cap = cg__record_bound(r, &l);
  if (cap > sizeof(small) && !(line = malloc(cap))) {
    cg_warn_once("record-oom", "out of memory writing a usage record; record dropped");
    return -1;
  }
  len = cg__record_write(r, &l, line);
  w = cg__write_line(fd, line, len);
  if (w != (ssize_t) len)
    cg_warn_once("record-write", "usage log write failed: %s; records may be missing",
                 w < 0 ? strerror(errno) : "short write");
  if (line != small)
    free(line);
  return w == (ssize_t) len ? 0 : -1;
}
