/* test-record-writer.c - the hand-written record writer (record.c, issue 16) against the
 * cJSON builder it replaced, kept below as the oracle.
 *
 * Thousands of random records (strings with quotes, backslashes, every control byte,
 * 0x7f, high bytes, invalid and truncated UTF-8, empty and long strings; integers at
 * CG_NULL_INT and both int64 extremes; NaN, infinite, negative zero, subnormal and huge
 * costs; NULL pointers) are written both ways.  The lines must be byte for byte the same,
 * except cost_usd, which the new writer may write with 17 digits where the old one found
 * 16 enough: that value must read back the same.  Both lines are also parsed with cJSON
 * and compared key by key, in order, value by value. */
#include "clock.h"
#include "record.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <float.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the oracle: record.c's cg_record_json before issue 16 ---- */

static const char *old_utf8(const char *s, char *out, size_t cap) {
  const unsigned char *p = (const unsigned char *) s;
  size_t o = 0;

  while (*p && o + 4 < cap) {
    size_t n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3
             : (*p & 0xF8) == 0xF0 ? 4 : 0;
    size_t i;
    int ok = n > 0 && !(n == 2 && *p < 0xC2) && !(n == 4 && *p > 0xF4);
    for (i = 1; ok && i < n; i++)
      ok = (p[i] & 0xC0) == 0x80;
    if (ok && n == 3)
      ok = !(p[0] == 0xE0 && p[1] < 0xA0) && !(p[0] == 0xED && p[1] >= 0xA0);
    if (ok && n == 4)
      ok = !(p[0] == 0xF0 && p[1] < 0x90) && !(p[0] == 0xF4 && p[1] >= 0x90);
    if (ok) {
      memcpy(out + o, p, n);
      o += n;
      p += n;
    } else {
      memcpy(out + o, "\xEF\xBF\xBD", 3);
      o += 3;
      p++;
    }
  }
  out[o] = '\0';
  return out;
}

static void old_add_str(cJSON *o, const char *k, const char *v) {
  char small[512], *buf = small;
  size_t cap;

  if (!v) {
    cJSON_AddNullToObject(o, k);
    return;
  }
  cap = strlen(v) * 3 + 5;
  if (cap > sizeof(small) && !(buf = malloc(cap)))
    return;
  cJSON_AddStringToObject(o, k, old_utf8(v, buf, cap > sizeof(small) ? cap : sizeof(small)));
  if (buf != small)
    free(buf);
}

static void old_add_int(cJSON *o, const char *k, int64_t v) {
  char num[24];
  if (v == CG_NULL_INT) {
    cJSON_AddNullToObject(o, k);
    return;
  }
  snprintf(num, sizeof(num), "%lld", (long long) v);
  cJSON_AddRawToObject(o, k, num);
}

static void old_add_double(cJSON *o, const char *k, double v) {
  char num[40], *p;
  int prec;
  if (!isfinite(v)) {
    cJSON_AddNullToObject(o, k);
    return;
  }
  for (prec = 15; prec <= 17; prec++) {
    snprintf(num, sizeof(num), "%.*g", prec, v);
    if (strtod(num, NULL) == v)
      break;
  }
  for (p = num; *p; p++)
    if (!((*p >= '0' && *p <= '9') || *p == '-' || *p == '+' || *p == 'e'))
      *p = '.';
  cJSON_AddRawToObject(o, k, num);
}

static char *old_record_json(const struct cg_record *r, size_t *len) {
  cJSON *o = cJSON_CreateObject();
  char ts[32], *text, *line;
  size_t n;

  cr_assert_not_null(o);
  cJSON_AddStringToObject(o, "ts", cg_rfc3339_ms(r->ts_ms, ts, sizeof(ts)));
  old_add_int(o, "pid", r->pid);
  old_add_str(o, "request_id", r->request_id);
  old_add_str(o, "task_id", r->task_id);
  old_add_int(o, "attempt", r->attempt);
  cJSON_AddBoolToObject(o, "final", r->final != 0);
  old_add_str(o, "method", r->method);
  old_add_str(o, "host", r->host);
  old_add_str(o, "path", r->path);
  old_add_str(o, "pool", r->pool);
  old_add_int(o, "status", r->status);
  old_add_int(o, "curl_code", r->curl_code);
  old_add_str(o, "outcome", r->outcome);
  old_add_str(o, "decision", r->decision);
  old_add_str(o, "reason", r->reason);
  old_add_int(o, "queue_ms", r->queue_ms);
  old_add_int(o, "backoff_ms", r->backoff_ms);
  old_add_int(o, "connect_ms", r->connect_ms);
  old_add_int(o, "ttfb_ms", r->ttfb_ms);
  old_add_int(o, "duration_ms", r->duration_ms);
  old_add_int(o, "bytes_sent", r->bytes_sent);
  old_add_int(o, "bytes_received", r->bytes_received);
  old_add_str(o, "model", r->model);
  old_add_int(o, "prompt_tokens", r->prompt_tokens);
  old_add_int(o, "completion_tokens", r->completion_tokens);
  old_add_int(o, "total_tokens", r->total_tokens);
  old_add_int(o, "cached_tokens", r->cached_tokens);
  old_add_double(o, "cost_usd", r->cost_usd);
  cJSON_AddBoolToObject(o, "possibly_billed", r->possibly_billed != 0);
  old_add_str(o, "body_digest", r->body_digest);
  old_add_int(o, "libcurl_resends", r->libcurl_resends);
  old_add_str(o, "repeat_of", r->repeat_of);
  old_add_int(o, "repeats", r->repeats);
  old_add_str(o, "fallback_from", r->fallback_from);
  old_add_int(o, "breaker_wait_ms", r->breaker_wait_ms);

  text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  cr_assert_not_null(text);
  n = strlen(text);
  line = malloc(n + 2);
  cr_assert_not_null(line);
  memcpy(line, text, n);
  line[n] = '\n';
  line[n + 1] = '\0';
  *len = n + 1;
  cJSON_free(text);
  return line;
}

/* ---- random records ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void) { /* splitmix64: reproducible, seeded per test */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

#define NSTR 13
static char strs[NSTR][7000];

/* Bytes that stress the escaping and the UTF-8 check, and pieces of UTF-8 sequences. */
static const char *const pieces[] = {
    "\"", "\\", "\b", "\f", "\n", "\r", "\t", "\x01", "\x1f", "\x0b", "\x7f", "/", "\\u0000",
    "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf", /* valid */
    "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf0\x80\x80\xaf",
    "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xf8\x88\x80\x80\x80", "\xff", "\xfe", "\x80",
    "\xbf", "\xc3", "\xe2\x82", "\xf0\x9f\x98", /* overlong, surrogate, too big, cut */
    "a", "Z", "0", " ", "{", "}", ":", ",", "gpt-4o-mini", "/v1/chat/completions"};
#define NPIECES (sizeof(pieces) / sizeof(pieces[0]))

static const char *rnd_str(int i) {
  char *s = strs[i];
  size_t len = 0, want;
  uint64_t k = rnd() % 100;
  if (k < 8)
    return NULL;
  if (k < 14)
    return "";
  want = k < 18 ? 5000 + rnd() % 1500 : rnd() % 48;
  while (len < want) {
    uint64_t c = rnd() % 4;
    if (c == 0) { /* any byte but NUL */
      s[len++] = (char) (1 + rnd() % 255);
    } else {
      const char *p = pieces[rnd() % NPIECES];
      size_t n = strlen(p);
      if (len + n >= sizeof(strs[i]))
        break;
      memcpy(s + len, p, n);
      len += n;
    }
  }
  s[len] = '\0';
  return s;
}

static int64_t rnd_i64(void) {
  static const int64_t edge[] = {CG_NULL_INT, INT64_MAX, INT64_MIN + 1, 0, -1, 1,
                                 9007199254740993LL, -9007199254740993LL, 4294967296LL};
  uint64_t k = rnd() % 10;
  if (k < 3)
    return edge[rnd() % (sizeof(edge) / sizeof(edge[0]))];
  if (k < 6)
    return (int64_t) (rnd() % 100000);
  return (int64_t) rnd();
}

static int rnd_int(void) {
  static const int edge[] = {INT_MIN, INT_MAX, 0, -1, 1, 28};
  return rnd() % 3 == 0 ? edge[rnd() % (sizeof(edge) / sizeof(edge[0]))]
                        : (int) (uint32_t) rnd();
}

static double rnd_cost(void) {
  double d;
  uint64_t bits;
  switch (rnd() % 12) {
  case 0: return NAN;
  case 1: return rnd() % 2 ? INFINITY : -INFINITY;
  case 2: return rnd() % 2 ? 0.0 : -0.0;
  case 3: return rnd() % 2 ? 4.9406564584124654e-324 : DBL_MIN;
  case 4: return rnd() % 2 ? DBL_MAX : -1e300;
  case 5: return 0.1 + 0.2;
  case 6: return (double) (rnd() % 1000000) / 1e6;             /* short decimals */
  case 7: return (double) (rnd() % 5000) * 0.15 / 1e6 + (double) (rnd() % 900) * 0.6 / 1e6;
  case 8: return (double) (rnd() % 100000000);
  default:
    bits = rnd();
    memcpy(&d, &bits, sizeof(d));
    return d; /* any bit pattern: NaNs and infinities among them */
  }
}

static int64_t rnd_ts(void) {
  static const int64_t edge[] = {0, 951782400000LL, 4102444799999LL, 253402300799999LL,
                                 253402300800000LL, -1, -999, -1000, -86400001LL,
                                 1786635403123LL};
  if (rnd() % 8 == 0)
    return edge[rnd() % (sizeof(edge) / sizeof(edge[0]))];
  return (int64_t) (rnd() % 253402300800000ULL);
}

static void rnd_record(struct cg_record *r) {
  int s = 0;
  cg_record_init(r);
  r->ts_ms = rnd_ts();
  r->pid = rnd() % 7 == 0 ? LONG_MIN : (long) rnd_i64();
  r->request_id = rnd_str(s++);
  r->task_id = rnd_str(s++);
  r->attempt = rnd_int();
  r->final = rnd_int();
  r->method = rnd_str(s++);
  r->host = rnd_str(s++);
  r->path = rnd_str(s++);
  r->pool = rnd_str(s++);
  r->status = rnd_i64();
  r->curl_code = rnd_int();
  r->outcome = rnd_str(s++);
  r->decision = rnd_str(s++);
  r->reason = rnd_str(s++);
  r->queue_ms = rnd_i64();
  r->breaker_wait_ms = rnd_i64();
  r->backoff_ms = rnd_i64();
  r->connect_ms = rnd_i64();
  r->ttfb_ms = rnd_i64();
  r->duration_ms = rnd_i64();
  r->bytes_sent = rnd_i64();
  r->bytes_received = rnd_i64();
  r->model = rnd_str(s++);
  r->prompt_tokens = rnd_i64();
  r->completion_tokens = rnd_i64();
  r->total_tokens = rnd_i64();
  r->cached_tokens = rnd_i64();
  r->cost_usd = rnd_cost();
  r->possibly_billed = rnd_int();
  r->body_digest = rnd_str(s++);
  r->libcurl_resends = rnd_int();
  r->repeat_of = rnd_str(s++);
  r->repeats = rnd_int();
  r->fallback_from = rnd_str(s++);
  cr_assert_eq(s, NSTR);
}

static size_t slen(const char *s) {
  return s ? strlen(s) : 0;
}

/* ---- the comparison ---- */

/* The same JSON, key by key in order; numbers compared as the text they were written as
 * (cJSON reads them as doubles, which would hide a wrong last digit of an int64). */
static void same_tree(const char *want, const char *got, size_t i) {
  cJSON *a = cJSON_Parse(want), *b = cJSON_Parse(got);
  const cJSON *x, *y;
  cr_assert(cJSON_IsObject(a), "record %zu: the oracle's line does not parse", i);
  cr_assert(cJSON_IsObject(b), "record %zu: the new line does not parse: %s", i, got);
  for (x = a->child, y = b->child; x && y; x = x->next, y = y->next) {
    cr_assert_str_eq(y->string, x->string, "record %zu: key order", i);
    cr_assert_eq(y->type, x->type, "record %zu: %s has another type", i, x->string);
    if (cJSON_IsString(x))
      cr_assert_str_eq(y->valuestring, x->valuestring, "record %zu: %s", i, x->string);
    if (cJSON_IsNumber(x))
      cr_assert(y->valuedouble == x->valuedouble ||
                    (isnan(y->valuedouble) && isnan(x->valuedouble)),
                "record %zu: %s %.17g, want %.17g", i, x->string, y->valuedouble,
                x->valuedouble);
  }
  cr_assert(!x && !y, "record %zu: not the same number of keys", i);
  cJSON_Delete(a);
  cJSON_Delete(b);
}

/* Byte for byte, cost_usd apart (compared by value). */
static void same_bytes(const char *want, size_t wlen, const char *got, size_t glen, size_t i) {
  static const char key[] = "\"cost_usd\":";
  const char *wc = strstr(want, key), *gc = strstr(got, key);
  const char *we, *ge;
  cr_assert(wc && gc, "record %zu: no cost_usd", i);
  cr_assert_eq(gc - got, wc - want, "record %zu: the lines differ before cost_usd:\n%s\n%s", i,
               want, got);
  cr_assert(memcmp(want, got, (size_t) (wc - want)) == 0,
            "record %zu: the lines differ before cost_usd:\n%s\n%s", i, want, got);
  we = strchr(wc + sizeof(key) - 1, ',');
  ge = strchr(gc + sizeof(key) - 1, ',');
  cr_assert(we && ge);
  cr_assert_eq(wlen - (size_t) (we - want), glen - (size_t) (ge - got),
               "record %zu: the lines differ after cost_usd:\n%s\n%s", i, want, got);
  cr_assert(strcmp(we, ge) == 0, "record %zu: the lines differ after cost_usd:\n%s\n%s", i,
            want, got);
  if (strncmp(wc + sizeof(key) - 1, "null", 4) == 0) {
    cr_assert(strncmp(gc + sizeof(key) - 1, "null", 4) == 0, "record %zu: cost not null", i);
  } else {
    static locale_t c_locale;
    char *end;
    double a, b;
    if (!c_locale)
      c_locale = newlocale(LC_ALL_MASK, "C", (locale_t) 0);
    a = strtod_l(wc + sizeof(key) - 1, NULL, c_locale);
    b = strtod_l(gc + sizeof(key) - 1, &end, c_locale);
    cr_assert(end == ge, "record %zu: cost is not one number: %.30s", i, gc);
    cr_assert(memcmp(&a, &b, sizeof(a)) == 0, "record %zu: cost %.17g, want %.17g", i, b, a);
    cr_assert_leq(ge - gc, 11 + 24, "record %zu: cost too long", i);
  }
}

static void compare_many(unsigned seed, size_t n) {
  size_t i;
  rng_state = seed;
  for (i = 0; i < n; i++) {
    struct cg_record r;
    size_t wlen = 0, glen = 0, strings;
    char *want, *got;
    rnd_record(&r);
    want = old_record_json(&r, &wlen);
    got = cg_record_json(&r, &glen);
    cr_assert_not_null(got);
    cr_assert_eq(strlen(got), glen, "record %zu: length", i);
    strings = slen(r.request_id) + slen(r.task_id) + slen(r.method) + slen(r.host) +
              slen(r.path) + slen(r.pool) + slen(r.outcome) + slen(r.decision) +
              slen(r.reason) + slen(r.model) + slen(r.body_digest) + slen(r.repeat_of) +
              slen(r.fallback_from);
    /* record.c's bound: 1536 bytes plus 6 per string byte; no line may come close. */
    cr_assert_lt(glen + 1, 1536 + 6 * strings, "record %zu: over the writer's bound", i);
    same_bytes(want, wlen, got, glen, i);
    same_tree(want, got, i);
    free(want);
    free(got);
  }
}

Test(record_writer, random_records_match_the_cjson_builder, .timeout = 120) {
  compare_many(1, 10000);
}

/* The worst string for the bound: every byte a \u00xx escape. */
Test(record_writer, control_bytes_fill_the_bound) {
  static char s[6000];
  struct cg_record r;
  size_t wlen, glen;
  char *want, *got;
  memset(s, '\x01', sizeof(s) - 1);
  cg_record_init(&r);
  r.task_id = r.path = r.model = r.host = s;
  want = old_record_json(&r, &wlen);
  got = cg_record_json(&r, &glen);
  cr_assert_eq(glen, wlen);
  cr_assert(memcmp(want, got, glen) == 0);
  free(want);
  free(got);
}

/* The writer copies plain bytes 16 at a time: each special byte at every place of runs
 * of 0 to 49 bytes, last byte of a string included, against the old builder. */
Test(record_writer, special_byte_at_every_place) {
  static const char specials[] = {'"', '\\', '\n', '\x01', '\x1f', '\x7f', (char) 0xc3,
                                  (char) 0xe2, (char) 0xff, ' '};
  char s[64];
  size_t n, at, k;
  for (n = 0; n < 50; n++)
    for (at = 0; at <= n; at++) /* at == n: no special byte */
      for (k = 0; k < sizeof(specials); k++) {
        struct cg_record r;
        size_t wlen, glen, i;
        char *want, *got;
        for (i = 0; i < n; i++)
          s[i] = (char) ('a' + i % 26);
        if (at < n)
          s[at] = specials[k];
        s[n] = '\0';
        cg_record_init(&r);
        r.path = s;
        r.model = s + (n > 0); /* another alignment of the same bytes */
        want = old_record_json(&r, &wlen);
        got = cg_record_json(&r, &glen);
        cr_assert_eq(glen, wlen, "n %zu at %zu byte %02x", n, at, (unsigned char) specials[k]);
        cr_assert(memcmp(want, got, glen) == 0, "n %zu at %zu byte %02x: %s", n, at,
                  (unsigned char) specials[k], got);
        free(want);
        free(got);
      }
}

/* A comma as the decimal point must never reach the line. */
Test(record_writer, random_records_in_a_comma_locale) {
  if (!setlocale(LC_NUMERIC, "de_DE.UTF-8") && !setlocale(LC_NUMERIC, "fr_FR.UTF-8"))
    cr_skip_test("no de_DE or fr_FR locale");
  compare_many(7, 2000);
  setlocale(LC_NUMERIC, "C");
}

/* Table: what the new writer must write for a few hand-picked values. */
Test(record_writer, table) {
  static const struct {
    const char *in, *out;
  } cases[] = {
      {"", "\"\""},
      {"a\"b\\c/d", "\"a\\\"b\\\\c/d\""},
      {"\b\f\n\r\t", "\"\\b\\f\\n\\r\\t\""},
      {"\x01\x1f\x0b\x7f", "\"\\u0001\\u001f\\u000b\x7f\""},
      {"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""},
      {"\xc0\xaf", "\"\xef\xbf\xbd\xef\xbf\xbd\""},
      {"\xed\xa0\x80x", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdx\""},
      {"\xe2\x82", "\"\xef\xbf\xbd\xef\xbf\xbd\""},
      {"\xf4\x90\x80\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},
  };
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct cg_record r;
    char want[128], *got;
    size_t len;
    cg_record_init(&r);
    r.task_id = cases[i].in;
    got = cg_record_json(&r, &len);
    snprintf(want, sizeof(want), "\"task_id\":%s,", cases[i].out);
    cr_expect_not_null(strstr(got, want), "case %zu: want %s in %s", i, want, got);
    free(got);
  }
}
