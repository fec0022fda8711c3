/* report-rec.c - usage-log line -> record, RFC 3339 times (see report-rec.h). */
#include "report-rec.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a bump allocator for one line's cJSON tree ----
 *
 * Measured on a million guard records: malloc and free were over a quarter of the time
 * of cJSON_ParseWithLength (about 90 allocations per line).  The tree of one line is
 * allocated from this arena instead (cJSON_InitHooks around the parse only, so every
 * other cJSON object of the process uses malloc), and dropped at once by resetting the
 * arena.  The first block is kept for the next line; lines are at most
 * CG_REPORT_LINE_MAX bytes, so the arena stays a few MiB at most.  Not thread-safe:
 * the report is single-threaded. */

#define CG_ARENA_BLOCK (256 * 1024)

struct cg_arena_block {
  struct cg_arena_block *next;
  size_t size, used;
  max_align_t data[];
};

static struct cg_arena_block *cg__arena;

static void *cg__arena_alloc(size_t n) {
  struct cg_arena_block *b = cg__arena;
  size_t need = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);

  if (!b || b->size - b->used < need) {
    size_t size = need > CG_ARENA_BLOCK ? need : CG_ARENA_BLOCK;
    struct cg_arena_block *nb = malloc(sizeof(*nb) + size);
    if (!nb)
      return NULL;
    nb->size = size;
    nb->used = 0;
    nb->next = b;
    cg__arena = b = nb;
  }
  b->used += need;
  return (char *) b->data + b->used - need;
}

static void cg__arena_free(void *p) {
  (void) p; /* everything goes at the next reset */
}

/* Forget every allocation; keep one block. */
static void cg__arena_reset(void) {
  struct cg_arena_block *b = cg__arena;
  if (!b)
    return;
  /* Blocks are pushed in front: keep the last (oldest, regular-size) one. */
  while (b->next) {
    struct cg_arena_block *next = b->next;
    free(b);
    b = next;
  }
  b->used = 0;
  cg__arena = b;
}

/* A `\u0000` escape at `p` (the backslash), not itself escaped: an odd run of
 * backslashes ends at p. */
static int cg__nul_escape(const char *line, const char *p) {
  size_t run = 0;
  for (const char *q = p; q >= line && *q == '\\'; q--)
    run++;
  return run % 2 == 1;
}

/* `line` with every `\u0000` escape turned into `\ufffd` (same length), in the arena;
 * `line` itself when it has none (the common case: one memmem).  cJSON would decode
 * \u0000 into a NUL that cuts the string ("a\u0000b" read as "a"). */
static const char *cg__no_nul_escapes(const char *line, size_t len) {
  const char *p = memchr(line, '\\', len), *end = line + len;
  char *copy = NULL;

  /* Bounded: each step moves past the previous backslash.  The guard's lines seldom
   * hold one, so this is mostly one memchr. */
  for (; p; p = memchr(p + 1, '\\', (size_t) (end - p - 1))) {
    if (end - p < 6 || memcmp(p, "\\u0000", 6) != 0 || !cg__nul_escape(line, p))
      continue;
    if (!copy) {
      if (!(copy = cg__arena_alloc(len)))
        return NULL;
      memcpy(copy, line, len);
    }
    memcpy(copy + (p - line) + 2, "fffd", 4);
  }
  return copy ? copy : line;
}

cJSON *cg_json_parse_whole(const char *s, size_t len) {
  const char *end = NULL;
  cJSON *o = cJSON_ParseWithLengthOpts(s, len, &end, 0);

  if (o && end)
    for (; end < s + len; end++)
      if ((unsigned char) *end > ' ') {
        cJSON_Delete(o);
        return NULL;
      }
  return o;
}

static cJSON *cg__parse(const char *line, size_t len) {
  cJSON_Hooks arena = {cg__arena_alloc, cg__arena_free}, std = {malloc, free};
  cJSON *o = NULL;

  cg__arena_reset();
  line = cg__no_nul_escapes(line, len);
  if (!line)
    return NULL;
  cJSON_InitHooks(&arena);
  o = cg_json_parse_whole(line, len);
  cJSON_InitHooks(&std);
  return o;
}

size_t cg_utf8_valid_prefix(const char *s, size_t len, size_t *bad) {
  const unsigned char *u = (const unsigned char *) s;
  size_t i = 0;

  *bad = 0;
  /* Bounded by len: every step advances i by at least 1. */
  while (i < len) {
    unsigned c = u[i];
    size_t n, k;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
      i++;
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF)
      n = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      lo = c == 0xE0 ? 0xA0 : 0x80;  /* no overlong forms */
      hi = c == 0xED ? 0x9F : 0xBF;  /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      lo = c == 0xF0 ? 0x90 : 0x80;
      hi = c == 0xF4 ? 0x8F : 0xBF;  /* nothing above U+10FFFF */
    } else {
      *bad = 1;
      return i;
    }
    for (k = 1; k <= n; k++) {
      unsigned b = i + k < len ? u[i + k] : 0;
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) {
        *bad = k; /* the lead byte and the k - 1 bytes that fit form one bad sequence */
        return i;
      }
    }
    i += n + 1;
  }
  return i;
}

size_t cg_utf8_repair(const char *s, size_t len, char *out) {
  size_t o = 0;

  /* Bounded: each round consumes at least one byte of s. */
  while (len) {
    size_t bad, ok = cg_utf8_valid_prefix(s, len, &bad);
    memcpy(out + o, s, ok);
    o += ok;
    s += ok;
    len -= ok;
    if (bad) {
      memcpy(out + o, "\xEF\xBF\xBD", 3); /* U+FFFD for each maximal bad sequence */
      o += 3;
      s += bad;
      len -= bad;
    }
  }
  out[o] = '\0';
  return o;
}

/* `s` if it is valid UTF-8, else a repaired copy in the arena (lives as the tree does);
 * NULL stays NULL. */
static const char *cg__utf8(const char *s) {
  size_t len, bad, i;
  char *out;

  if (!s)
    return NULL;
  for (i = 0; s[i] && (unsigned char) s[i] < 0x80; i++)
    ;
  if (!s[i])
    return s; /* ASCII: the guard's own strings */
  len = i + strlen(s + i);
  if (cg_utf8_valid_prefix(s, len, &bad) == len && !bad)
    return s;
  if (!(out = cg__arena_alloc(3 * len + 1)))
    return NULL;
  cg_utf8_repair(s, len, out);
  return out;
}

const char *const cg_rbad_name[CG_RBAD_COUNT] = {
    "none", "not_json", "not_object", "missing_key", "wrong_type", "bad_value", "too_long",
};

/* JSON types a key may have. */
#define T_STR 1u
#define T_NUM 2u
#define T_BOOL 4u
#define T_NULL 8u

/* What a key feeds (F_NONE: checked, not used). */
enum cg_rfield {
  F_NONE, F_TS, F_REQUEST_ID, F_TASK_ID, F_ATTEMPT, F_FINAL, F_POOL, F_OUTCOME,
  F_COUNT_MS, F_DURATION, F_MODEL, F_PROMPT, F_COMPLETION, F_TOTAL, F_CACHED, F_COST,
  F_POSSIBLY_BILLED, F_DIGEST, F_REPEAT_OF, F_REPEATS, F_METHOD
};

struct cg_rkey {
  const char *name;
  unsigned types;
  enum cg_rfield field;
  int optional;          /* beyond SPEC section 5: may be absent */
};

/* SPEC section 5 in the order the guard writes it (src/record.c), then the extras.  The
 * order makes the lookup one strcmp per key for the guard's own lines. */
static const struct cg_rkey cg__keys[] = {
    {"ts", T_STR, F_TS, 0},
    {"pid", T_NUM | T_NULL, F_NONE, 0},
    {"request_id", T_STR, F_REQUEST_ID, 0},
    {"task_id", T_STR | T_NULL, F_TASK_ID, 0},
    {"attempt", T_NUM, F_ATTEMPT, 0},
    {"final", T_BOOL, F_FINAL, 0},
    {"method", T_STR | T_NULL, F_METHOD, 0},
    {"host", T_STR | T_NULL, F_NONE, 0},
    {"path", T_STR | T_NULL, F_NONE, 0},
    {"pool", T_STR | T_NULL, F_POOL, 0},
    {"status", T_NUM | T_NULL, F_NONE, 0},
    {"curl_code", T_NUM | T_NULL, F_NONE, 0},
    {"outcome", T_STR, F_OUTCOME, 0},
    {"decision", T_STR | T_NULL, F_NONE, 0},
    {"reason", T_STR | T_NULL, F_NONE, 0},
    {"queue_ms", T_NUM | T_NULL, F_COUNT_MS, 0},
    {"backoff_ms", T_NUM | T_NULL, F_COUNT_MS, 0},
    {"connect_ms", T_NUM | T_NULL, F_COUNT_MS, 0},
    {"ttfb_ms", T_NUM | T_NULL, F_COUNT_MS, 0},
    {"duration_ms", T_NUM | T_NULL, F_DURATION, 0},
    {"bytes_sent", T_NUM | T_NULL, F_COUNT_MS, 0},
    {"bytes_received", T_NUM | T_NULL, F_COUNT_MS, 0},
    {"model", T_STR | T_NULL, F_MODEL, 0},
    {"prompt_tokens", T_NUM | T_NULL, F_PROMPT, 0},
    {"completion_tokens", T_NUM | T_NULL, F_COMPLETION, 0},
    {"total_tokens", T_NUM | T_NULL, F_TOTAL, 0},
    {"cached_tokens", T_NUM | T_NULL, F_CACHED, 0},
    {"cost_usd", T_NUM | T_NULL, F_COST, 0},
    {"possibly_billed", T_BOOL, F_POSSIBLY_BILLED, 0},
    {"body_digest", T_STR | T_NULL, F_DIGEST, 0},
    {"libcurl_resends", T_NUM | T_NULL, F_COUNT_MS, 1},
    {"repeat_of", T_STR | T_NULL, F_REPEAT_OF, 1},
    {"repeats", T_NUM | T_NULL, F_REPEATS, 1},
};
#define CG_NKEYS (sizeof(cg__keys) / sizeof(cg__keys[0]))

static unsigned cg__type(const cJSON *v) {
  switch (v->type & 0xFF) {
  case cJSON_String:
    return T_STR;
  case cJSON_Number:
    return T_NUM;
  case cJSON_True:
  case cJSON_False:
    return T_BOOL;
  case cJSON_NULL:
    return T_NULL;
  default:
    return 0;
  }
}

/* The table index of `name`, trying `hint` first; -1 if unknown. */
static int cg__key_index(const char *name, size_t hint) {
  if (hint < CG_NKEYS && strcmp(cg__keys[hint].name, name) == 0)
    return (int) hint;
  for (size_t i = 0; i < CG_NKEYS; i++)
    if (strcmp(cg__keys[i].name, name) == 0)
      return (int) i;
  return -1;
}

/* A whole number >= 0 below 2^53 (exact in a double), or CG_RNULL for null.  -1: bad. */
static int cg__count(const cJSON *v, int64_t *out) {
  double d;
  if (cJSON_IsNull(v)) {
    *out = CG_RNULL;
    return 0;
  }
  d = v->valuedouble;
  if (!(d >= 0 && d < 9007199254740992.0) || d != floor(d))
    return -1;
  *out = (int64_t) d;
  return 0;
}

/* Store the value `v` of key `k` in `r`.  CG_RBAD_NONE or CG_RBAD_VALUE. */
static enum cg_rbad cg__store(const struct cg_rkey *k, const cJSON *v, struct cg_rrec *r) {
  const char *s = cJSON_IsString(v) ? v->valuestring : NULL;
  int64_t n;

  switch (k->field) {
  case F_NONE:
    return CG_RBAD_NONE;
  case F_TS:
    return cg_rfc3339_parse(s, strlen(s), &r->ts_ms) == 0 ? CG_RBAD_NONE : CG_RBAD_VALUE;
  case F_REQUEST_ID:
    r->request_id = s;
    return CG_RBAD_NONE;
  case F_TASK_ID:
    r->task_id = s;
    return CG_RBAD_NONE;
  case F_POOL:
    r->pool = s;
    return CG_RBAD_NONE;
  case F_MODEL:
    r->model = s;
    return CG_RBAD_NONE;
  case F_OUTCOME:
    r->outcome = s;
    return *s ? CG_RBAD_NONE : CG_RBAD_VALUE; /* "" names nothing */
  case F_DIGEST:
    r->body_digest = s;
    return CG_RBAD_NONE;
  case F_METHOD:
    r->method = s;
    return CG_RBAD_NONE;
  case F_REPEAT_OF:
    r->repeat_of = s;
    return CG_RBAD_NONE;
  case F_FINAL:
    r->final = cJSON_IsTrue(v);
    return CG_RBAD_NONE;
  case F_POSSIBLY_BILLED:
    r->possibly_billed = cJSON_IsTrue(v);
    return CG_RBAD_NONE;
  case F_ATTEMPT:
    if (cg__count(v, &n) != 0 || n < 1)
      return CG_RBAD_VALUE;
    r->attempt = n;
    return CG_RBAD_NONE;
  case F_COST:
    if (cJSON_IsNull(v))
      return CG_RBAD_NONE;
    if (!(v->valuedouble >= 0) || !isfinite(v->valuedouble))
      return CG_RBAD_VALUE;
    r->cost_usd = v->valuedouble;
    return CG_RBAD_NONE;
  default:
    break;
  }
  if (cg__count(v, &n) != 0)
    return CG_RBAD_VALUE;
  switch (k->field) {
  case F_DURATION:
    r->duration_ms = n;
    break;
  case F_PROMPT:
    r->prompt_tokens = n;
    break;
  case F_COMPLETION:
    r->completion_tokens = n;
    break;
  case F_TOTAL:
    r->total_tokens = n;
    break;
  case F_CACHED:
    r->cached_tokens = n;
    break;
  case F_REPEATS:
    r->repeats = n == CG_RNULL ? 0 : n;
    break;
  default: /* F_COUNT_MS: checked only */
    break;
  }
  return CG_RBAD_NONE;
}

static void cg__rec_init(struct cg_rrec *r) {
  memset(r, 0, sizeof(*r));
  r->duration_ms = CG_RNULL;
  r->prompt_tokens = r->completion_tokens = r->total_tokens = r->cached_tokens = CG_RNULL;
  r->cost_usd = NAN;
}

enum cg_rbad cg_rrec_parse(const char *line, size_t len, struct cg_rrec *r) {
  cJSON *o, *v;
  uint64_t seen = 0;
  size_t hint = 0;
  enum cg_rbad bad = CG_RBAD_NONE;

  cg__rec_init(r);
  /* A NUL byte is not JSON; cJSON would stop there and ignore the rest of the line. */
  if (memchr(line, '\0', len))
    return CG_RBAD_JSON;
  o = cg__parse(line, len);
  if (!o)
    return CG_RBAD_JSON;
  if (!cJSON_IsObject(o))
    return CG_RBAD_OBJECT;
  /* Type errors win over value errors, value errors over missing keys: the first type
   * error stops the walk, a value error is remembered and the walk goes on. */
  for (v = o->child; v; v = v->next) {
    int i = cg__key_index(v->string, hint);
    enum cg_rbad b;
    if (i < 0)
      continue;
    hint = (size_t) i + 1;
    if (!(cg__type(v) & cg__keys[i].types)) {
      bad = CG_RBAD_TYPE;
      break;
    }
    seen |= (uint64_t) 1 << i;
    b = cg__store(&cg__keys[i], v, r);
    if (b != CG_RBAD_NONE && bad == CG_RBAD_NONE)
      bad = b;
  }
  if (bad == CG_RBAD_NONE)
    for (size_t i = 0; i < CG_NKEYS; i++)
      if (!cg__keys[i].optional && !(seen & ((uint64_t) 1 << i))) {
        bad = CG_RBAD_MISSING;
        break;
      }
  if (bad != CG_RBAD_NONE) {
    cg__rec_init(r);
    return bad;
  }
  /* Invalid UTF-8 in a string the report keeps becomes U+FFFD (the record still
   * counts: its cost matters more than a name), so no output carries it. */
  r->request_id = cg__utf8(r->request_id);
  r->task_id = cg__utf8(r->task_id);
  r->pool = cg__utf8(r->pool);
  r->model = cg__utf8(r->model);
  r->outcome = cg__utf8(r->outcome);
  r->body_digest = cg__utf8(r->body_digest);
  r->repeat_of = cg__utf8(r->repeat_of);
  if (!r->request_id || !r->outcome) { /* out of memory repairing */
    cg__rec_init(r);
    return CG_RBAD_VALUE;
  }
  r->json_ = o;
  return CG_RBAD_NONE;
}

void cg_rrec_release(struct cg_rrec *r) {
  r->json_ = NULL; /* the tree lives in the arena until the next parse */
}

/* ---- RFC 3339 ---- */

/* `n` decimal digits at `s` -> value, or -1. */
static int cg__digits(const char *s, int n) {
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; H. Hinnant's days_from_civil). */
static int64_t cg__days(int64_t y, int m, int d) {
  int64_t era, yoe, doy, doe;
  y -= m <= 2;
  era = (y >= 0 ? y : y - 399) / 400;
  yoe = y - era * 400;
  doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

static int cg__mdays(int y, int m) {
  static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : days[m - 1];
}

int cg_rfc3339_parse(const char *s, size_t len, int64_t *ms) {
  int y, mo, d, h, mi, sec, frac = 0, fdigits = 0, off = 0;
  size_t i = 19;

  /* YYYY-MM-DDTHH:MM:SS is 19 bytes, then fraction, then Z or +hh:mm. */
  if (len < 20 || s[4] != '-' || s[7] != '-' || s[13] != ':' || s[16] != ':' ||
      !(s[10] == 'T' || s[10] == 't' || s[10] == ' '))
    return -1;
  y = cg__digits(s, 4);
  mo = cg__digits(s + 5, 2);
  d = cg__digits(s + 8, 2);
  h = cg__digits(s + 11, 2);
  mi = cg__digits(s + 14, 2);
  sec = cg__digits(s + 17, 2);
  if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > cg__mdays(y, mo) || h < 0 || h > 23 ||
      mi < 0 || mi > 59 || sec < 0 || sec > 60)
    return -1;
  if (s[i] == '.') {
    for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++, fdigits++)
      if (fdigits < 3)
        frac = frac * 10 + (s[i] - '0');
    if (fdigits == 0)
      return -1;
    for (int k = fdigits; k < 3; k++)
      frac *= 10;
  }
  if (i < len && (s[i] == 'Z' || s[i] == 'z') && i + 1 == len) {
    off = 0;
  } else if (i + 6 == len && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
    int oh = cg__digits(s + i + 1, 2), om = cg__digits(s + i + 4, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59)
      return -1;
    off = (oh * 60 + om) * (s[i] == '-' ? -1 : 1);
  } else {
    return -1;
  }
  if (sec == 60) { /* a leap second: the last ms of the minute */
    sec = 59;
    frac = 999;
  }
  *ms = ((cg__days(y, mo, d) * 24 + h) * 60 + mi - off) * 60000 + (int64_t) sec * 1000 + frac;
  /* In UTC too within years 0000-9999: an offset must not carry a time out of them
   * ("0000-01-01T00:00:00+23:59" is in year -1, which no output can write). */
  if (*ms < cg__days(0, 1, 1) * 86400000 || *ms > cg__days(9999, 12, 31) * 86400000 + 86399999)
    return -1;
  return 0;
}

char *cg_rfc3339_format(int64_t ms, char *buf, size_t len) {
  int64_t days = ms >= 0 ? ms / 86400000 : -((-ms + 86399999) / 86400000);
  int64_t rem = ms - days * 86400000;
  /* civil_from_days (H. Hinnant). */
  int64_t z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int d = (int) (doy - (153 * mp + 2) / 5 + 1);
  int m = (int) (mp < 10 ? mp + 3 : mp - 9);
  int64_t y = yoe + era * 400 + (m <= 2);

  snprintf(buf, len, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ", (long long) y, m, d,
           (int) (rem / 3600000), (int) (rem / 60000 % 60), (int) (rem / 1000 % 60),
           (int) (rem % 1000));
  return buf;
}
