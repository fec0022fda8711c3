/* record.c - one JSON line per attempt, one write(2) (see record.h). */
#include "record.h"

#include "clock.h"
#include "hot.h"
#include "log.h"
#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* A record of nulls and zeros: copied whole (issue 16: a copy is less code than a memset
 * and the stores of the nulls). */
static const struct cg_record cg__record_empty = {
    .status = CG_NULL_INT,
    .connect_ms = CG_NULL_INT,
    .ttfb_ms = CG_NULL_INT,
    .duration_ms = CG_NULL_INT,
    .prompt_tokens = CG_NULL_INT,
    .completion_tokens = CG_NULL_INT,
    .total_tokens = CG_NULL_INT,
    .cached_tokens = CG_NULL_INT,
    .cost_usd = NAN,
};

void cg_record_init(struct cg_record *r) {
  *r = cg__record_empty;
}

/* ---- the writer: the record straight into a buffer, no tree ----
 *
 * The bytes are those cJSON_PrintUnformatted wrote for the same record before issue 16
 * (tests/unit/test-record-writer.c keeps that builder as its oracle): keys in the order
 * below, no spaces, strings made valid UTF-8 (each byte that does not start a well-formed
 * sequence, RFC 3629, becomes U+FFFD) and escaped as cJSON escapes them (\" \\ \b \f \n
 * \r \t, any other byte below 0x20 as \u00xx in lower-case hex, everything else as is).
 *
 * Small in code rather than in instructions: under a host whose own code overflows the
 * instruction cache (curl(1) does), a record costs about 4 ns per 64-byte line of code it
 * runs, as much as some 40 instructions.  So the record is one loop over a table of its
 * keys (cg__fields), each value stored with copies of a fixed size (no call of memcpy),
 * and what a record seldom needs (an escape, a date not seen before, a cost not seen
 * before, strings too long for the buffer) is out of line. */

/* Room the writer keeps ahead of itself for all of a record but its strings: 35 keys with
 * their quotes, colons and commas (454 bytes), 18 integers of at most 20 characters, the
 * time stamp (26; at most 65 for a clock far off), the cost (at most 24), the booleans,
 * and the few bytes a fixed-size copy stores past what it writes (at most 24).  Generous:
 * the bound is checked by the tests. */
#define CG__RECORD_FIXED 1536
/* Each byte of a string becomes at most 6 ("\u001f"); U+FFFD for one byte is 3.  Its
 * quotes take 2 more, and a run stored 16 bytes at a time 16. */
#define CG__STR_GROWTH 6
#define CG__STR_EXTRA 18

/* "00" to "99": two digits at a time. */
static const char cg__pairs[] = "00010203040506070809101112131415161718192021222324252627282930"
                                "31323334353637383940414243444546474849505152535455565758596061"
                                "62636465666768697071727374757677787980818283848586878889909192"
                                "93949596979899";

/* 0: copied as is; 1: a one-letter escape; 2: \u00xx; 3: not ASCII (UTF-8 checked).
 * The NUL that ends a string is class 2. */
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

/* Where an escape left the line and the string. */
struct cg__ends {
  char *w;
  const unsigned char *p;
};

/* The byte at `p`, one not copied as it is (class 1 to 3), escaped at `w`, or with the
 * rest of its UTF-8 sequence copied, or U+FFFD for it.  Returns the ends past both.  Out
 * of line: a record's strings seldom hold such a byte. */
static __attribute__((noinline, cold)) struct cg__ends cg__put_special(char *w,
                                                                      const unsigned char *p) {
  static const char hex[] = "0123456789abcdef";
  struct cg__ends e = {w + 2, p + 1};
  size_t k;
  switch (cg__str_class[*p]) {
  case 1:
    w[0] = '\\';
    w[1] = *p == '"' ? '"' : *p == '\\' ? '\\' : *p == '\b' ? 'b' : *p == '\f' ? 'f'
         : *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
    break;
  case 2:
    memcpy(w, "\\u00", 4);
    w[4] = hex[*p >> 4];
    w[5] = hex[*p & 15];
    e.w = w + 6;
    break;
  default:
    /* reads on up to 3 bytes: the string is NUL-terminated, and no continuation byte is
     * NUL */
    if ((k = cg__utf8_len(p))) {
      memcpy(w, p, k);
      e.w = w + k;
      e.p = p + k;
    } else {
      memcpy(w, "\xEF\xBF\xBD", 3);
      e.w = w + 3;
    }
  }
  return e;
}

/* `s` (`n` bytes, then its NUL) as a JSON string at `w` (room: CG__STR_GROWTH * n +
 * CG__STR_EXTRA).  Returns the end. */
static char *cg__put_str(char *w, const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *) s, *end = p + n;
  struct cg__ends e;
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
    e = cg__put_special(w, p);
    w = e.w;
    p = e.p;
  }
  *w++ = '"';
  return w;
}

/* `v` in decimal at `w`: every digit (cJSON's numbers are doubles, which would print
 * 9007199254740993 as 9.00719925474099e+15; snprintf's "%lld" costs about 800
 * instructions a call, and a record has 25 integers).  Stores 20 bytes at `w` whatever
 * the length, in one copy of a fixed size.  Returns the end. */
static char *cg__put_int(char *w, int64_t v) {
  char buf[40], *p = buf + 20; /* the digits end at buf + 20; the copy reads 20 from p */
  uint64_t u = v < 0 ? 0 - (uint64_t) v : (uint64_t) v;
  while (u >= 100) { /* two digits a step */
    p -= 2;
    memcpy(p, cg__pairs + 2 * (u % 100), 2);
    u /= 100;
  }
  if (u >= 10) {
    p -= 2;
    memcpy(p, cg__pairs + 2 * u, 2);
  } else {
    *--p = (char) ('0' + u);
  }
  if (v < 0)
    *--p = '-';
  memcpy(w, p, 20);
  return w + (buf + 20 - p);
}

/* Each thread's last second written (since the epoch, plus 1; 0: none yet) and its time
 * stamp with the quotes, the milliseconds still to fill in: at any rate that matters a
 * thread writes many records a second (nginx keeps its time strings so, ngx_times.c). */
static CG_TLS struct {
  int64_t sec;
  char ts[32]; /* "\"2026-08-13T15:36:43.000Z\"" */
} cg__sec_memo;

/* cg__sec_memo for `sec` (seconds since the epoch, years 1970-9999): days to a civil date
 * by H. Hinnant, "chrono-Compatible Low-Level Date Algorithms", civil_from_days.  Out of
 * line: once a second at most. */
static __attribute__((noinline, cold)) void cg__sec_fill(int64_t sec) {
  int64_t z = sec / 86400 + 719468, era = z / 146097, doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
  int64_t d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
  int64_t y = yoe + era * 400 + (m <= 2), sod = sec % 86400;
  char *t = cg__sec_memo.ts;
  memcpy(t, "\"0000-00-00T00:00:00.000Z\"", 27);
  memcpy(t + 1, cg__pairs + 2 * (y / 100), 2);
  memcpy(t + 3, cg__pairs + 2 * (y % 100), 2);
  memcpy(t + 6, cg__pairs + 2 * m, 2);
  memcpy(t + 9, cg__pairs + 2 * d, 2);
  memcpy(t + 12, cg__pairs + 2 * (sod / 3600), 2);
  memcpy(t + 15, cg__pairs + 2 * (sod / 60 % 60), 2);
  memcpy(t + 18, cg__pairs + 2 * (sod % 60), 2);
  cg__sec_memo.sec = sec + 1;
}

/* A time stamp no clock gives (before 1970 or after 9999) as clock.c's cg_rfc3339_ms
 * (gmtime_r + snprintf) always wrote it.  Out of line. */
static __attribute__((noinline, cold)) char *cg__put_ts_odd(char *w, int64_t ms) {
  char ts[64];
  size_t n = strlen(cg_rfc3339_ms(ms, ts, sizeof(ts)));
  *w++ = '"';
  memcpy(w, ts, n); /* digits, '-', ':', 'T', '.', 'Z' only: nothing to escape */
  w += n;
  *w++ = '"';
  return w;
}

/* The time stamp, RFC 3339 UTC with milliseconds ("2026-08-13T15:36:43.123Z"), as a JSON
 * string: its second from cg__sec_memo, the milliseconds filled in (32 bytes stored).
 * Returns the end. */
static char *cg__put_ts(char *w, int64_t ms) {
  int64_t sec = ms / 1000;
  unsigned msec = (unsigned) (ms - sec * 1000);
  if (ms < 0 || ms > INT64_C(253402300799999))
    return cg__put_ts_odd(w, ms);
  if (cg__sec_memo.sec != sec + 1)
    cg__sec_fill(sec);
  memcpy(w, cg__sec_memo.ts, 32);
  w[21] = (char) ('0' + msec / 100);
  memcpy(w + 22, cg__pairs + 2 * (msec % 100), 2);
  return w + 26;
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

/* cg__cost_memo for `v` (finite, its bits `bits`).  Out of line: calls of one model and
 * size cost the same. */
static __attribute__((noinline, cold)) void cg__cost_fill(double v, uint64_t bits) {
  char num[40], *p;
  snprintf(num, sizeof(num), "%.15g", v);
  if (strtod(num, NULL) != v) /* both in the host's locale */
    snprintf(num, sizeof(num), "%.17g", v);
  for (p = num; *p; p++) /* a host's LC_NUMERIC may print "0,5": JSON wants "0.5" */
    if (!((*p >= '0' && *p <= '9') || *p == '-' || *p == '+' || *p == 'e'))
      *p = '.';
  memcpy(cg__cost_memo.num, num, sizeof(num));
  cg__cost_memo.bits = bits;
  cg__cost_memo.n = (size_t) (p - num);
}

/* The cost at `w` (at most 24 characters: "-2.2250738585072014e-308"; 24 bytes stored).
 * Returns the end. */
static char *cg__put_cost(char *w, double v) {
  uint64_t bits;
  if (!isfinite(v)) {
    memcpy(w, "null", 4);
    return w + 4;
  }
  memcpy(&bits, &v, sizeof(bits));
  if (!cg__cost_memo.n || cg__cost_memo.bits != bits)
    cg__cost_fill(v, bits);
  memcpy(w, cg__cost_memo.num, 24);
  return w + cg__cost_memo.n;
}

/* How a field of struct cg_record is written. */
enum { CG__T_STR, CG__T_I64, CG__T_LONG, CG__T_INT, CG__T_BOOL, CG__T_TS, CG__T_COST };

struct cg__field {
  unsigned short off;  /* offsetof(struct cg_record, the field) */
  unsigned char type;  /* CG__T_* */
  unsigned char len;   /* strlen(key) */
  char key[21];        /* "\"name\":" */
};

#define CG__FIELD_KEY(name, field, type)                                                    \
  { offsetof(struct cg_record, field), type, sizeof("\"" name "\":") - 1, "\"" name "\":" }
#define CG__FIELD(field, type) CG__FIELD_KEY(#field, field, type)

/* The record's keys in their order: SPEC section 5's, then the extensions. */
static const struct cg__field cg__fields[] = {
    CG__FIELD_KEY("ts", ts_ms, CG__T_TS),
    CG__FIELD(pid, CG__T_LONG),
    CG__FIELD(request_id, CG__T_STR),
    CG__FIELD(task_id, CG__T_STR),
    CG__FIELD(attempt, CG__T_INT),
    CG__FIELD(final, CG__T_BOOL),
    CG__FIELD(method, CG__T_STR),
    CG__FIELD(host, CG__T_STR),
    CG__FIELD(path, CG__T_STR),
    CG__FIELD(pool, CG__T_STR),
    CG__FIELD(status, CG__T_I64),
    CG__FIELD(curl_code, CG__T_INT),
    CG__FIELD(outcome, CG__T_STR),
    CG__FIELD(decision, CG__T_STR),
    CG__FIELD(reason, CG__T_STR),
    CG__FIELD(queue_ms, CG__T_I64),
    CG__FIELD(backoff_ms, CG__T_I64),
    CG__FIELD(connect_ms, CG__T_I64),
    CG__FIELD(ttfb_ms, CG__T_I64),
    CG__FIELD(duration_ms, CG__T_I64),
    CG__FIELD(bytes_sent, CG__T_I64),
    CG__FIELD(bytes_received, CG__T_I64),
    CG__FIELD(model, CG__T_STR),
    CG__FIELD(prompt_tokens, CG__T_I64),
    CG__FIELD(completion_tokens, CG__T_I64),
    CG__FIELD(total_tokens, CG__T_I64),
    CG__FIELD(cached_tokens, CG__T_I64),
    CG__FIELD(cost_usd, CG__T_COST),
    CG__FIELD(possibly_billed, CG__T_BOOL),
    CG__FIELD(body_digest, CG__T_STR),
    CG__FIELD(libcurl_resends, CG__T_INT),
    CG__FIELD(repeat_of, CG__T_STR),
    CG__FIELD(repeats, CG__T_INT),
    CG__FIELD(fallback_from, CG__T_STR),
    CG__FIELD(breaker_wait_ms, CG__T_I64),
};

/* Where the writer is: its buffer (the caller's, or malloc'd once the strings outgrew it)
 * and the end of its room. */
struct cg__out {
  char *buf, *end;
  int heap;
};

/* Room for `need` bytes past `w`: a malloc'd buffer holding the line so far (the old one
 * freed if it was malloc'd too).  Returns where to go on in it, or NULL when out of
 * memory (no buffer left to free).  Out of line: only very long strings (a 5000-byte
 * task id) need it. */
static __attribute__((noinline, cold)) char *cg__out_grow(struct cg__out *o, char *w,
                                                          size_t need) {
  size_t used = (size_t) (w - o->buf), cap = 2 * (size_t) (o->end - o->buf) + need;
  char *p = malloc(cap);
  if (p)
    memcpy(p, o->buf, used);
  if (o->heap)
    free(o->buf);
  if (!p)
    return NULL;
  o->buf = p;
  o->end = p + cap;
  o->heap = 1;
  return p + used;
}

/* The record as one line: one object, '\n', NUL, at `buf` (`cap` bytes, at least
 * CG__RECORD_FIXED) or, when its strings do not fit, in a malloc'd buffer.  Returns the
 * line (`buf` or a buffer the caller frees), its length up to and with the '\n' in
 * `*len`; NULL when out of memory. */
static char *cg__record_write(const struct cg_record *r, char *buf, size_t cap, size_t *len) {
  static const char bools[2][8] = {"false", "true"};
  struct cg__out o = {buf, buf + cap, 0};
  const struct cg__field *f;
  char *w = buf;
  *w++ = '{';
  for (f = cg__fields; f < cg__fields + sizeof(cg__fields) / sizeof(cg__fields[0]); f++) {
    const char *v = (const char *) r + f->off;
    int64_t i;
    memcpy(w, f->key, sizeof(f->key));
    w += f->len;
    switch (f->type) {
    case CG__T_STR: {
      const char *s = *(const char *const *) (const void *) v;
      size_t n, need;
      if (!s)
        goto null;
      n = strlen(s);
      need = CG__STR_GROWTH * n + CG__STR_EXTRA + CG__RECORD_FIXED;
      if ((size_t) (o.end - w) < need && !(w = cg__out_grow(&o, w, need)))
        return NULL;
      w = cg__put_str(w, s, n);
      break;
    }
    case CG__T_INT:
      i = *(const int *) (const void *) v;
      goto integer;
    case CG__T_LONG:
      i = *(const long *) (const void *) v;
      goto integer;
    case CG__T_I64:
      i = *(const int64_t *) (const void *) v;
    integer:
      if (i == CG_NULL_INT)
        goto null;
      w = cg__put_int(w, i);
      break;
    case CG__T_BOOL:
      i = *(const int *) (const void *) v != 0;
      memcpy(w, bools[i], 8);
      w += 5 - i;
      break;
    case CG__T_TS:
      w = cg__put_ts(w, *(const int64_t *) (const void *) v);
      break;
    default:
      w = cg__put_cost(w, *(const double *) (const void *) v);
      break;
    null:
      memcpy(w, "null", 4);
      w += 4;
    }
    *w++ = ',';
  }
  memcpy(w - 1, "}\n", 3); /* over the last ',' */
  *len = (size_t) (w + 1 - o.buf);
  return o.buf;
}

char *cg_record_json(const struct cg_record *r, size_t *len) {
  char small[4096], *line = cg__record_write(r, small, sizeof(small), len), *copy;
  if (line != small)
    return line; /* malloc'd, or NULL */
  if ((copy = malloc(*len + 1)))
    memcpy(copy, small, *len + 1);
  return copy;
}

/* ---- the log sink: opened once per process (again when the host closed it, or after a
 * failed opening) ---- */

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

/* Where the log's descriptor is kept, so that checking it costs no system call per
 * record: the top of the numbers the process may use (RLIMIT_NOFILE's soft limit - 1,
 * at most CG__LOG_FD_TOP; a higher number would grow the kernel's descriptor table of
 * the host).  open(2), socket(2), accept(2) and dup(2) take the lowest free number
 * (POSIX, "File Descriptor Allocation"), so a host that closes every descriptor (a
 * daemon's close loop, closefrom(3)) gets this one back only with as many open at once.
 * Until then a write fails with EBADF, which reopens the log (cg_record_emit).  fstat(2)
 * still checks the descriptor's identity when CG__LOG_CHECK_MS have passed since the
 * last check (a dup2(2) onto the number, or the number handed out again), and before
 * every record when the descriptor could not be moved there (a soft limit below
 * CG__LOG_FD_LOW, the top number taken) or once the host has closed or replaced it:
 * such a host gets the check before every record for the rest of the process. */
#define CG__LOG_FD_TOP 1023
#define CG__LOG_FD_LOW 64
#define CG__LOG_CHECK_MS 10
static int cg__log_high;           /* cg__log_fd sits at the top: checked every 10 ms */
static int cg__log_disturbed;      /* the host closed or replaced the log's descriptor */
static int cg__log_stderr;         /* CURLGUARD_LOG=-: whatever descriptor 2 is */
static int64_t cg__log_checked_ms; /* cg_coarse_ms() of the last fstat(2) check */
/* A log that could not be opened (cg__log_fd -1) is tried again, at most once every
 * CG__LOG_RETRY_MS, on the records that come meanwhile: what failed may pass later (the
 * process out of descriptors for a moment, EMFILE; a full disk or a directory not there
 * yet; a permission an operator fixes), and a long-running host would otherwise write no
 * record for the rest of its life after one bad moment.  The first failure is reported;
 * the attempts after it are silent until one succeeds, which says how many records were
 * lost in between. */
#define CG__LOG_RETRY_MS 1000
static int64_t cg__log_failed_ms; /* cg_coarse_ms() of the last failed opening */
static int cg__log_failing;        /* the last opening failed and was reported */
static uint64_t cg__log_lost;      /* records not written since that failure */
static unsigned cg__log_opened;    /* openings so far (cg__log_get's generations) */
/* A log renamed or removed at its path (logrotate's default `create` mode, a `mv` or an
 * `rm` by hand) is noticed by a stat(2) of the path, at most once every
 * CG__LOG_PATH_CHECK_MS on the records that come, and opened again there: without it, the
 * records of a long-running host went on into the renamed file, and once that was
 * compressed and deleted, into nothing.  Only an absolute path to a regular file
 * (cg__log_watchable): a relative one names another file once the host changes its
 * working directory (a daemon's chdir("/")), and a descriptor's name (/dev/fd/N) another
 * file once the host dup2(2)s onto it; for those the file it was opened as stays the
 * log. */
#define CG__LOG_PATH_CHECK_MS 1000
static int64_t cg__log_path_checked_ms; /* cg_coarse_ms() of the last stat(2) of the path */
static dev_t cg__log_dir_dev; /* identity of the directory the log was opened in: the */
static ino_t cg__log_dir_ino; /* path is looked at again only while it is the same one */
static int cg__log_watched; /* the path is looked at again (cg__log_watchable) */
static int cg__log_moved_failing; /* reopening a moved log failed, and was reported */
/* The process has a file size limit (RLIMIT_FSIZE, `ulimit -f`): records are written with
 * SIGXFSZ blocked (cg_write_quiet).  Asked when the log is opened, and again with each
 * look at its path (CG__LOG_PATH_CHECK_MS): a host that lowers its limit later is seen
 * within a second for an absolute path, and at the next opening for any other. */
static int cg__log_fsize_limited;

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

/* `fd` (just opened, ours) moved to the top of the descriptor numbers when it can be
 * (see CG__LOG_FD_TOP); sets cg__log_high and returns the descriptor to use.  Where it
 * stays low, never on 0, 1 or 2 (log.h cg_fd_off_stdio: a host run with stderr closed
 * would write its lines into the records); -1 (fd closed) when not even that can be. */
static int cg__log_move_up(int fd) {
  struct rlimit rl;
  int top, high;

  cg__log_high = 0;
  cg__log_checked_ms = cg_coarse_ms();
  if (cg__log_disturbed || getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return cg_fd_off_stdio(fd);
  top = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > CG__LOG_FD_TOP ? CG__LOG_FD_TOP
                                                                      : (int) rl.rlim_cur - 1;
  if (top < CG__LOG_FD_LOW || fd >= top)
    return cg_fd_off_stdio(fd);
  if ((high = fcntl(fd, F_DUPFD_CLOEXEC, top)) < 0)
    return cg_fd_off_stdio(fd); /* the top number is taken: stay, checked before every record */
  if (high != top) {
    close(high); /* above the top (it was taken): no better than where open(2) put it */
    return cg_fd_off_stdio(fd);
  }
  close(fd);
  cg__log_high = 1;
  return high;
}

/* Whether the log opened at `path` (as `st` says it is) is looked at again by its path:
 * an absolute path to a file, not a device (/dev/null, a terminal: never rotated) nor a
 * name of a descriptor (/dev/fd/N, /dev/stdout, /proc/self/fd/N: what such a name opens
 * changes with the host's dup2(2), into the host's own files). */
static int cg__log_watchable(const char *path, const struct stat *st) {
  return path[0] == '/' && S_ISREG(st->st_mode) && strncmp(path, "/dev/fd/", 8) != 0 &&
         strncmp(path, "/dev/std", 8) != 0 && strncmp(path, "/proc/", 6) != 0;
}

/* The identity of the directory that holds `path` (absolute) in `*st`.  Returns 0, or -1
 * (errno set). */
static int cg__dir_stat(const char *path, struct stat *st) {
  char buf[4096];
  const char *slash = strrchr(path, '/');
  size_t n = slash ? (size_t) (slash - path) : 0;

  if (!slash || n >= sizeof(buf)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(buf, path, n);
  buf[n ? n : 1] = '\0';
  if (!n)
    buf[0] = '/';
  return stat(buf, st);
}

/* The log's descriptor, -1 when unusable (reported unless `quiet`: a retry after a
 * failure already reported, CG__LOG_RETRY_MS).  Out of line: once per process, unless the
 * log cannot be opened. */
static __attribute__((noinline, cold)) int cg__log_open(const struct cg_config *c, int quiet) {
  struct stat st;
  int fd;

  if (!c->log_path)
    return -1;
  if ((cg__log_stderr = strcmp(c->log_path, "-") == 0))
    return STDERR_FILENO;
  if (cg__mkdirs(c->log_path) != 0) {
    if (!quiet)
      cg_warn("usage log %s: cannot create its directory: %s; records are not written "
              "(tried again once a second)",
              c->log_path, strerror(errno));
    return -1;
  }
  /* Something other than a file at the path (a FIFO, a directory) is refused before it is
   * opened: a FIFO's reader would see an end of file at each try (CG__LOG_RETRY_MS). */
  if (stat(c->log_path, &st) == 0 && !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode)))
    goto not_a_file;
  /* O_NONBLOCK: a FIFO without a reader must fail at once, never hang the host. */
  fd = open(c->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
            0600);
  if (fd < 0) {
    if (!quiet)
      cg_warn("usage log %s: %s; records are not written (tried again once a second)",
              c->log_path, strerror(errno));
    return -1;
  }
  if (fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode))) {
    close(fd);
    goto not_a_file;
  }
  cg__log_dev = st.st_dev;
  cg__log_ino = st.st_ino;
  cg__log_moved_failing = 0;
  cg__log_watched = cg__log_watchable(c->log_path, &st) && cg__dir_stat(c->log_path, &st) == 0;
  cg__log_dir_dev = st.st_dev;
  cg__log_dir_ino = st.st_ino;
  __atomic_store_n(&cg__log_fsize_limited, cg_fsize_limited(), __ATOMIC_RELAXED);
  fd = cg__log_move_up(fd);
  if (fd < 0 && !quiet)
    cg_warn("usage log %s: no descriptor above 2 for it (%s); records are not written "
            "(tried again once a second)", c->log_path, strerror(errno));
  return fd;

not_a_file:
  if (!quiet)
    cg_warn("usage log %s: not a regular file; records are not written (tried again once a "
            "second)",
            c->log_path);
  return -1;
}

/* Whether a check last made at `*last_ms` (cg_coarse_ms) is due again, `every_ms` on (or
 * the clock went back); if so, `*last_ms` becomes now.  The caller holds cg__log_mutex:
 * the identity check of a descriptor at the top (CG__LOG_CHECK_MS) and the stat(2) of the
 * path (CG__LOG_PATH_CHECK_MS). */
static int cg__log_due(int64_t *last_ms, int64_t every_ms) {
  int64_t now = cg_coarse_ms();
  if (now - *last_ms < every_ms && now >= *last_ms)
    return 0;
  *last_ms = now;
  return 1;
}

/* Whether `fd` is still the log we opened (the host may have closed it, and the number
 * may now belong to one of its own files or sockets). */
static int cg__log_still_ours(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && st.st_dev == cg__log_dev && st.st_ino == cg__log_ino;
}

/* The rest of a line a first write(2) did not take whole (`w`: what it returned),
 * retried on EINTR and after a short write (which a regular file gives only when the disk
 * is full).  Out of line: one write(2) takes a line. */
static __attribute__((noinline, cold)) ssize_t cg__write_rest(int fd, const char *line,
                                                              size_t len, ssize_t w) {
  size_t done = 0;
  for (;;) {
    if (w > 0) {
      if ((done += (size_t) w) >= len)
        return (ssize_t) len;
    } else if (!(w < 0 && errno == EINTR)) {
      if (w == 0)
        errno = EIO;
      return -1;
    }
    w = write(fd, line + done, len - done);
  }
}

/* A record in a process with a file size limit (cg__log_fsize_limited): a write past it
 * raises SIGXFSZ, which kills the host by default, so it runs with the signal blocked
 * (cg_write_quiet); and a line that would cross the limit is not written at all, rather
 * than the part that fits (write(2) takes what fits, then fails with EFBIG), which left
 * a torn line that the next record, after a rotation or a raised limit, was glued to.
 * Another process's append between the fstat(2) and the write can still cross it. */
static __attribute__((noinline, cold)) ssize_t cg__write_limited(int fd, const char *line,
                                                                 size_t len) {
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      !cg_fsize_fits(st.st_size + (off_t) len)) {
    errno = EFBIG;
    return -1;
  }
  return cg_write_quiet(fd, line, len);
}

/* The whole line with write(2) (cg__write_rest when one does not take it).  A regular
 * file or a character device never raises SIGPIPE, so only stderr ("-", which may be a
 * pipe) needs cg_write_quiet's signal mask, and a process with a file size limit
 * (cg__write_limited).  Inline: one call fewer per record. */
static inline __attribute__((always_inline)) ssize_t cg__write_line(int fd, const char *line,
                                                                    size_t len) {
  ssize_t w;
  if (CG_RARE(__atomic_load_n(&cg__log_fsize_limited, __ATOMIC_RELAXED)))
    return cg__write_limited(fd, line, len);
  if (fd == STDERR_FILENO)
    return cg_write_quiet(fd, line, len);
  w = write(fd, line, len);
  return w == (ssize_t) len ? w : cg__write_rest(fd, line, len, w);
}

/* Whether a log that could not be opened is due another try (the caller holds
 * cg__log_mutex). */
static int cg__log_retry_due(void) {
  int64_t now = cg_coarse_ms();
  return now - cg__log_failed_ms >= CG__LOG_RETRY_MS || now < cg__log_failed_ms;
}

/* Open the log for cg__log_get (cg__log_fd -2: not tried yet, or due again), the caller
 * holding cg__log_mutex: a failure is reported once, then retried quietly until an
 * opening succeeds, which says what was lost.  Out of line (issue 16). */
static __attribute__((noinline, cold)) void cg__log_reopen(const struct cg_config *c) {
  cg__log_fd = cg__log_open(c, cg__log_failing);
  cg__log_opened++;
  if (cg__log_fd < 0) {
    cg__log_failing = 1;
    cg__log_failed_ms = cg_coarse_ms();
  } else if (cg__log_failing) {
    cg_warn("usage log %s: opened after all; %llu record(s) before this one were not "
            "written",
            c->log_path, (unsigned long long) cg__log_lost);
    cg__log_failing = 0;
    cg__log_lost = 0;
  }
}

/* The log at the path is no longer the file `fd` writes to: it was renamed or removed
 * (ENOENT), or another file took its place, in the directory it was opened in.  When that
 * directory is gone or is another one (the host chroot(2)ed or entered another mount
 * namespace, or the directory was removed), the path names something else for this
 * process, and the file it was opened as stays the log.  Out of line: once a second at
 * most. */
static __attribute__((noinline, cold)) int cg__log_moved(const struct cg_config *c) {
  struct stat st;
  int gone = stat(c->log_path, &st) != 0;

  if (gone ? errno != ENOENT : st.st_dev == cg__log_dev && st.st_ino == cg__log_ino) {
    if (!gone)
      cg__log_moved_failing = 0; /* the log is back at its path: the episode is over */
    return 0;
  }
  if (cg__dir_stat(c->log_path, &st) == 0 && st.st_dev == cg__log_dir_dev &&
      st.st_ino == cg__log_dir_ino)
    return 1;
  cg_warn_once("log-dir", "usage log %s: its directory is no longer the one it was opened "
                          "in (replaced, removed, or a chroot); records go on into the file "
                          "it was opened as",
               c->log_path);
  return 0;
}

/* The log opened again at its path after cg__log_moved (the caller holds cg__log_mutex).
 * Our descriptor's number is kept: the new file is put on it with dup3(2), so no other
 * thread, holding that number from cg__log_get, can find it closed or handed to the host
 * meanwhile (it writes its line to the old file or the new one).  When the log cannot be
 * opened again, the records go on into the old file, and the path is tried again a second
 * later.  A number the host took over is never touched. */
static __attribute__((noinline, cold)) void cg__log_reopen_moved(const struct cg_config *c) {
  int old = cg__log_fd, high = cg__log_high, fd;
  dev_t dev = cg__log_dev;
  ino_t ino = cg__log_ino;
  struct stat st;
  int ours = fstat(old, &st) == 0 && st.st_dev == dev && st.st_ino == ino;

  if (!ours)
    cg__log_disturbed = 1; /* the number is the host's now: never touched, and the new
                              descriptor not put at the top (cg__log_move_up) */
  fd = cg__log_open(c, 1);
  if (fd < 0) {
    if (!ours) {
      /* the number is the host's: no record goes there; the log is tried again
       * (CG__LOG_RETRY_MS), and its reopening says how many were lost */
      cg_warn("usage log %s was moved or removed and cannot be made again; records are not "
              "written (tried again once a second)",
              c->log_path);
      cg__log_fd = -1;
      cg__log_failing = 1;
      cg__log_failed_ms = cg_coarse_ms();
      return;
    }
    if (!cg__log_moved_failing)
      cg_warn("usage log %s was moved or removed and cannot be made again; records go on "
              "into the file it was (tried again once a second)",
              c->log_path);
    cg__log_moved_failing = 1; /* the identity fields are still the old file's: a failed
                                  cg__log_open sets none of them */
    return;
  }
  if (ours && dup3(fd, old, O_CLOEXEC) == old) {
    /* the same number: a thread that took it before keeps its opening's generation, so
     * an EBADF it meets later (the host closed the number) still reopens the log */
    close(fd);
    cg__log_high = high;
    return;
  }
  if (ours && errno == EBADF)
    close(old); /* a number at or above the host's lowered RLIMIT_NOFILE: dup3 cannot
                   reach it, and no new descriptor can be given it */
  /* else (never seen; EBUSY: another thread's dup2 onto the number): the old descriptor is
   * left open rather than closed under a writer */
  cg__log_opened++;
  cg__log_fd = fd;
}

/* The log's descriptor for the next record (opened on first use), -1 when unusable;
 * `*gen` gets the number of the opening it belongs to.  `closed`: the opening whose
 * descriptor a write just found closed (EBADF), or 0; a second thread that found the
 * same opening closed does not open the log once more (nor leak the first reopening). */
static int cg__log_get(const struct cg_config *c, unsigned closed, unsigned *gen) {
  int fd;
  pthread_mutex_lock(&cg__log_mutex);
  /* Reopening is rare: its code is out of line (issue 16). */
  if (CG_RARE(cg__log_fd >= 0 && closed == cg__log_opened)) {
    cg__log_fd = -2; /* closed by the host: open the log again */
    if (!cg__log_stderr)
      cg__log_disturbed = 1;
  } else if (CG_RARE(cg__log_fd >= 0 && !cg__log_stderr &&
                     (!cg__log_high || cg__log_due(&cg__log_checked_ms, CG__LOG_CHECK_MS)) &&
                     !cg__log_still_ours(cg__log_fd))) {
    cg__log_fd = -2; /* not ours any more: never close it, open the log again */
    cg__log_disturbed = 1;
  }
  if (CG_RARE(cg__log_fd >= 0 && cg__log_watched &&
              cg__log_due(&cg__log_path_checked_ms, CG__LOG_PATH_CHECK_MS))) {
    __atomic_store_n(&cg__log_fsize_limited, cg_fsize_limited(), __ATOMIC_RELAXED);
    if (cg__log_moved(c))
      cg__log_reopen_moved(c);
  }
  if (CG_RARE(cg__log_fd == -1) && cg__log_retry_due())
    cg__log_fd = -2; /* unusable at the last try: once more (CG__LOG_RETRY_MS) */
  if (CG_RARE(cg__log_fd == -2))
    cg__log_reopen(c);
  if (CG_RARE(cg__log_fd == -1))
    cg__log_lost++;
  fd = cg__log_fd;
  *gen = cg__log_opened;
  pthread_mutex_unlock(&cg__log_mutex);
  return fd;
}

/* cg_record_emit with the log on.  Out of line: with the log off, a call of
 * cg_record_emit runs a test and returns (its 4 KiB frame is not set up). */
static __attribute__((noinline)) int cg__record_emit(const struct cg_config *c,
                                                     const struct cg_record *r) {
  char small[4096], *line;
  unsigned gen;
  size_t len;
  ssize_t w;
  int fd;

  if (CG_RARE((fd = cg__log_get(c, 0, &gen)) < 0))
    return -1;
  /* CURLGUARD_LOG=-: a record follows the rule of a `curlguard:` line (log.h), so that it
   * never goes into a connection of libcurl's that took descriptor 2 after the host closed
   * its stderr; it is lost then, as the host's own stderr output is. */
  if (CG_RARE(fd == STDERR_FILENO) && !cg_stderr_usable())
    return -1;
  /* On the stack; only a record with very long strings (a 5000-byte task id) needs more. */
  if (CG_RARE(!(line = cg__record_write(r, small, sizeof(small), &len)))) {
    cg_warn_once("record-oom", "out of memory writing a usage record; record dropped");
    return -1;
  }
  w = cg__write_line(fd, line, len);
  /* What follows a failed write is out of line (issue 16): one write(2) takes a line. */
  if (CG_RARE(w != (ssize_t) len)) {
    if (w < 0 && errno == EBADF) { /* the host closed it: once more, reopened */
      if ((fd = cg__log_get(c, gen, &gen)) < 0) {
        if (line != small) /* cg__log_open said why */
          free(line);
        return -1;
      }
      w = cg__write_line(fd, line, len);
    }
    if (w != (ssize_t) len)
      cg_warn_once("record-write", "usage log write failed: %s; records may be missing",
                   w < 0 ? strerror(errno) : "short write");
  }
  if (CG_RARE(line != small))
    free(line);
  return w == (ssize_t) len ? 0 : -1;
}

int cg_record_emit(const struct cg_config *c, const struct cg_record *r) {
  if (!c->log_path)
    return -1; /* the log is off: nothing to open (cg__log_open), no lock to take */
  return cg__record_emit(c, r);
}
