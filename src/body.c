/* body.c - what a JSON request body says before it is sent (see body.h). */
#include "body.h"
#include "hot.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* No JSON tree (issue 16): one pass over the body with cJSON 1.7.15's grammar (the parser
 * used before; src/usage.c describes its rules: whitespace is any byte up to 0x20, at
 * most 1000 nested containers, its string escapes and number runs, bytes after the
 * top-level value ignored) and cJSON_GetObjectItemCaseSensitive's meaning: the FIRST
 * member of a name counts, names compare as C strings.  Nothing is set unless the whole
 * body parses. */

#define CG__DEPTH_MAX 1000 /* CJSON_NESTING_LIMIT */

/* What the string being decoded feeds. */
struct cg__sink {
  int64_t chars;   /* counting: UTF-8 characters, up to a NUL */
  int count, nul;  /* count them; a NUL was met (the C string ends) */
  char *keep;      /* keeping the bytes (a name or the model), up to `cap` - 1 */
  size_t len, cap;
};

static void cg__emit(struct cg__sink *k, unsigned char c) {
  if (k->nul)
    return;
  if (!c) {
    k->nul = 1;
    return;
  }
  if (k->count)
    k->chars += (c & 0xC0) != 0x80;
  if (k->keep && k->len + 1 < k->cap)
    k->keep[k->len++] = (char) c;
}

static void cg__emit_cp(struct cg__sink *k, unsigned long cp) {
  if (cp < 0x80) {
    cg__emit(k, (unsigned char) cp);
  } else if (cp < 0x800) {
    cg__emit(k, (unsigned char) (0xC0 | cp >> 6));
    cg__emit(k, (unsigned char) (0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    cg__emit(k, (unsigned char) (0xE0 | cp >> 12));
    cg__emit(k, (unsigned char) (0x80 | (cp >> 6 & 0x3F)));
    cg__emit(k, (unsigned char) (0x80 | (cp & 0x3F)));
  } else {
    cg__emit(k, (unsigned char) (0xF0 | cp >> 18));
    cg__emit(k, (unsigned char) (0x80 | (cp >> 12 & 0x3F)));
    cg__emit(k, (unsigned char) (0x80 | (cp >> 6 & 0x3F)));
    cg__emit(k, (unsigned char) (0x80 | (cp & 0x3F)));
  }
}

/* cJSON's parse_hex4: a byte that is not a hex digit makes the whole code 0. */
static unsigned long cg__hex4(const unsigned char *p) {
  unsigned long h = 0;
  int i;
  for (i = 0; i < 4; i++) {
    unsigned char c = p[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
          : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0)
      return 0;
    h = h << 4 | (unsigned long) d;
  }
  return h;
}

/* The string whose opening quote is at `p`: decoded into `k`.  Returns the byte after its
 * closing quote, or NULL when it does not parse (cJSON's parse_string).  The cases
 * cg__string_at leaves, the way cJSON reads them: the extent first, then the decoding. */
static const unsigned char *cg__string_slow(const unsigned char *p, const unsigned char *end,
                                            struct cg__sink *k) {
  const unsigned char *q = p + 1, *e = p + 1;
  /* the extent: up to the first '"' that no backslash escapes */
  for (;;) {
    const unsigned char *x = memchr(e, '"', (size_t) (end - e)), *b;
    if (!x)
      return NULL;
    b = x;
    while (b > e && b[-1] == '\\')
      b--;
    if ((x - b) % 2 == 0) { /* an even run of backslashes before it: not escaped */
      e = x;
      break;
    }
    e = x + 1;
  }
  while (q < e) {
    const unsigned char *plain = q;
    q = memchr(q, '\\', (size_t) (e - q));
    if (!q)
      q = e;
    if ((k->count || k->keep) && !k->nul && plain < q) {
      /* a run without escapes: as cg__emit byte by byte, up to a NUL */
      const unsigned char *z = memchr(plain, '\0', (size_t) (q - plain));
      size_t n = (size_t) ((z ? z : q) - plain), i;
      if (k->count)
        for (i = 0; i < n; i++)
          k->chars += (plain[i] & 0xC0) != 0x80;
      if (k->keep && k->len + 1 < k->cap) {
        size_t room = k->cap - 1 - k->len;
        memcpy(k->keep + k->len, plain, n < room ? n : room);
        k->len += n < room ? n : room;
      }
      k->nul = z != NULL;
    }
    if (q >= e)
      break;
    /* an escape; a backslash that is the last byte reads the closing quote */
    switch (q[1]) {
    case 'b': cg__emit(k, '\b'); break;
    case 'f': cg__emit(k, '\f'); break;
    case 'n': cg__emit(k, '\n'); break;
    case 'r': cg__emit(k, '\r'); break;
    case 't': cg__emit(k, '\t'); break;
    case '"': case '\\': case '/': cg__emit(k, q[1]); break;
    case 'u': {
      unsigned long cp, lo;
      if (e - q < 6)
        return NULL;
      cp = cg__hex4(q + 2);
      if (cp >= 0xDC00 && cp <= 0xDFFF)
        return NULL;
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (e - (q + 6) < 6 || q[6] != '\\' || q[7] != 'u')
          return NULL;
        lo = cg__hex4(q + 8);
        if (lo < 0xDC00 || lo > 0xDFFF)
          return NULL;
        cg__emit_cp(k, 0x10000 + ((cp & 0x3FF) << 10 | (lo & 0x3FF)));
        q += 12;
      } else {
        cg__emit_cp(k, cp);
        q += 6;
      }
      continue;
    }
    default:
      return NULL;
    }
    q += 2;
  }
  return e + 1;
}

/* The bits set in each byte: two loads count a 16-bit mask, without a branch or the
 * dozen instructions of a bit trick in the string loop's lines. */
static const unsigned char cg__bits8[256] = {
#define CG__B2(n) n, n + 1, n + 1, n + 2
#define CG__B4(n) CG__B2(n), CG__B2(n + 1), CG__B2(n + 1), CG__B2(n + 2)
#define CG__B6(n) CG__B4(n), CG__B4(n + 1), CG__B4(n + 1), CG__B4(n + 2)
  CG__B6(0), CG__B6(1), CG__B6(1), CG__B6(2)
#undef CG__B6
#undef CG__B4
#undef CG__B2
};

/* The first '"', '\\' or NUL at or after `s`, or `end`; `*chars` gets the UTF-8
 * characters before it (bytes that are not 10xxxxxx).  16 bytes at a time with SSE2, one
 * at a time without.  Counted for names too (not needed there): one copy of the loop,
 * without a test of whether to count in it (issue 16: code lines). */
static inline const unsigned char *cg__plain(const unsigned char *s, const unsigned char *end,
                                             int64_t *chars) {
  const unsigned char *s0 = s;
  int64_t cont = 0; /* 10xxxxxx bytes passed */
#ifdef __SSE2__
  const __m128i quote = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), zero = _mm_setzero_si128();
  const __m128i lead = _mm_set1_epi8((char) 0xC0); /* signed: 10xxxxxx is below it */
#pragma GCC unroll 1 /* a loop of two lines, not the profile's copies of it (issue 16) */
  while (end - s >= 16) {
    __m128i x = _mm_loadu_si128((const __m128i *) (const void *) s);
    unsigned stop = (unsigned) _mm_movemask_epi8(_mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bs)), _mm_cmpeq_epi8(x, zero)));
    /* the bytes before the first stop (all 16 without one) */
    unsigned c = (unsigned) _mm_movemask_epi8(_mm_cmplt_epi8(x, lead)) & (stop ^ (stop - 1)) >> 1;
    if (c) /* not ASCII */
      cont += cg__bits8[c & 0xff] + cg__bits8[c >> 8];
    if (stop) {
      s += __builtin_ctz(stop);
      *chars = (s - s0) - cont;
      return s;
    }
    s += 16;
  }
#endif
#pragma GCC unroll 1 /* a test without && in the for: gcc would drop the annotation */
  for (; s < end; s++) {
    if (*s == '"' || *s == '\\' || !*s)
      break;
    cont += (*s & 0xC0) == 0x80;
  }
  *chars = (s - s0) - cont;
  return s;
}

/* Whether the four bytes at `p` are hex digits. */
static int cg__is_hex4(const unsigned char *p) {
  int i;
  for (i = 0; i < 4; i++)
    if (!((p[i] >= '0' && p[i] <= '9') || ((p[i] | 0x20) >= 'a' && (p[i] | 0x20) <= 'f')))
      return 0;
  return 1;
}

/* The string whose opening quote is at `p`, decoded into `k`, from `q` on (`k` holds what
 * came before `q`: p + 1 and a fresh sink for the whole string).  Returns the byte after
 * its closing quote, or NULL when it does not parse (cJSON's parse_string).  One pass:
 * runs of plain bytes at once (cg__plain), the escapes where they are; the odd ones (a \u
 * that is not four hex digits, a surrogate pair not whole) by cg__string_slow from the
 * start. */
static const unsigned char *cg__string_at(const unsigned char *p, const unsigned char *q,
                                          const unsigned char *end, struct cg__sink *k) {
  const unsigned char *r;
  for (;;) {
    int use = (k->count || k->keep) && !k->nul;
    int64_t chars;
    r = cg__plain(q, end, &chars);
    if (use && k->count)
      k->chars += chars;
    if (use && k->keep && k->len + 1 < k->cap && r > q) {
      size_t n = (size_t) (r - q), room = k->cap - 1 - k->len;
      memcpy(k->keep + k->len, q, n < room ? n : room);
      k->len += n < room ? n : room;
    }
    if (r >= end)
      return NULL; /* no closing quote */
    if (*r == '"')
      return r + 1;
    if (!*r) { /* a NUL ends the C string; the JSON string goes on */
      k->nul = 1;
      q = r + 1;
      continue;
    }
    if (r + 1 >= end)
      return NULL;
    switch (r[1]) { /* an escape */
    case 'b': cg__emit(k, '\b'); break;
    case 'f': cg__emit(k, '\f'); break;
    case 'n': cg__emit(k, '\n'); break;
    case 'r': cg__emit(k, '\r'); break;
    case 't': cg__emit(k, '\t'); break;
    case '"': case '\\': case '/': cg__emit(k, r[1]); break;
    case 'u': {
      unsigned long cp, lo;
      if (end - r < 6 || !cg__is_hex4(r + 2))
        goto slow;
      cp = cg__hex4(r + 2);
      if (cp >= 0xDC00 && cp <= 0xDFFF)
        return NULL; /* a lone low surrogate */
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (end - r < 12 || r[6] != '\\' || r[7] != 'u' || !cg__is_hex4(r + 8))
          goto slow;
        lo = cg__hex4(r + 8);
        if (lo < 0xDC00 || lo > 0xDFFF)
          return NULL;
        cg__emit_cp(k, 0x10000 + ((cp & 0x3FF) << 10 | (lo & 0x3FF)));
        q = r + 12;
      } else {
        cg__emit_cp(k, cp);
        q = r + 6;
      }
      continue;
    }
    default:
      return NULL;
    }
    q = r + 2;
  }
slow:
  k->chars = 0;
  k->len = 0;
  k->nul = 0;
  return cg__string_slow(p, end, k);
}

/* Members the estimate reads: the first of each name at the top ("model" and the output
 * limits) and the first maxOutputTokens of the first generationConfig. */
enum { CG__M_MODEL, CG__M_MAX_TOKENS, CG__M_MAX_COMPLETION, CG__M_MAX_OUTPUT, CG__M_GENCONF,
       CG__M_GEN_MAX, CG__M_NONE };

struct cg__body {
  int64_t chars;
  double max_out;
  char model[CG_BODY_MODEL_SIZE];
  size_t model_len;
  unsigned seen;
};

/* A value string whose opening quote is at `p` and whose plain bytes before `r` (`chars`
 * characters) cg__scan read: decoded from there, counted into `b` when `count`, kept as
 * the model when `model`.  Returns the byte after its closing quote, or NULL when it does
 * not parse.  Out of line: an escape (a "\n" in a prompt) is common enough not to be
 * rare, but its dozen lines need not sit between those every string runs. */
static __attribute__((noinline)) const unsigned char *
cg__string_value(const unsigned char *p, const unsigned char *r, const unsigned char *end,
                 struct cg__body *b, int64_t chars, int model, int count) {
  struct cg__sink k = {0, 0, 0, NULL, 0, 0};
  k.count = count;
  k.chars = count ? chars : 0;
  if (model) {
    k.keep = b->model, k.cap = sizeof(b->model);
    r = p + 1; /* kept from the start */
    k.chars = 0;
  }
  if (!(p = cg__string_at(p, r, end, &k)))
    return NULL;
  b->chars += k.chars;
  if (model)
    b->model_len = k.len;
  return p;
}

/* The number at `p` ('-' or a digit): the run of [0-9+-eE.], which strtod must read
 * whole.  Returns its end, or NULL; `*v` gets its value when `v`.  Out of line: cg__scan
 * reads a number of plain digits itself. */
static __attribute__((noinline)) const unsigned char *
cg__number(const unsigned char *p, const unsigned char *end, double *v) {
  const unsigned char *s = p;
  int st = *p == '-' ? 0 : 1; /* 0 sign, 1 int, 2 "-." 3 ".", 4 frac, 5 e, 6 e sign, 7 exp */
  for (p++; p < end; p++) {
    unsigned char c = *p;
    int digit = c >= '0' && c <= '9';
    if (!(digit || c == '+' || c == '-' || c == 'e' || c == 'E' || c == '.'))
      break;
    switch (st) {
    case 0: st = digit ? 1 : c == '.' ? 2 : -1; break;
    case 1: st = digit ? 1 : c == '.' ? 3 : (c == 'e' || c == 'E') ? 5 : -1; break;
    case 2: st = digit ? 4 : -1; break;
    case 3: case 4: st = digit ? 4 : (c == 'e' || c == 'E') ? 5 : -1; break;
    case 5: st = digit ? 7 : (c == '+' || c == '-') ? 6 : -1; break;
    default: st = digit ? 7 : -1;
    }
    if (st < 0)
      return NULL;
  }
  if (!(st == 1 || st == 3 || st == 4 || st == 7))
    return NULL;
  if (v && st == 1 && *s != '-') { /* digits only: up to 15 of them are exact in a double */
    const unsigned char *d = s;
    uint64_t x = 0;
    while (d < p && *d == '0')
      d++;
    if (p - d <= 15) {
      for (; d < p; d++)
        x = x * 10 + (uint64_t) (*d - '0');
      *v = (double) x; /* what strtod reads */
      return p;
    }
  }
  if (v) {
    size_t n = (size_t) (p - s), i;
    char small[64], *t = n < sizeof(small) ? small : malloc(n + 1);
    if (!t)
      return NULL;
    for (i = 0; i < n; i++) /* cJSON gives strtod the host's decimal point */
      t[i] = s[i] == '.' ? localeconv()->decimal_point[0] : (char) s[i];
    t[n] = '\0';
    *v = strtod(t, NULL);
    if (t != small)
      free(t);
  }
  return p;
}

/* The bytes a number's run holds besides digits: [+-eE.]. */
static const unsigned char cg__num_byte[256] = {
  ['+'] = 1, ['-'] = 1, ['e'] = 1, ['E'] = 1, ['.'] = 1};

static const unsigned char *cg__ws(const unsigned char *p, const unsigned char *end) {
#pragma GCC unroll 1 /* a blank or two: one line, not the profile's copies */
  for (; p < end; p++)
    if (*p > ' ')
      break;
  return p;
}

/* cg__ws after a ',' or a ':', where Python's json.dumps (requests, aiohttp, the bench's
 * body) writes one blank: that blank is passed without a branch, so such a body does not
 * enter the loop, which the profile (compact JSON) keeps out of line (issue 16: 4 taken
 * branches a request fewer for the bench's body). */
static const unsigned char *cg__ws_sep(const unsigned char *p, const unsigned char *end) {
  if (p < end)
    p += *p == ' ';
  return cg__ws(p, end);
}


/* The names of the members the estimate reads, by slot; each is the only one of its
 * length, so a name's length finds the one it may be (cg__name_tab: slot + 1, or 0). */
static const char *const cg__names[CG__M_NONE] = {
  "model", "max_tokens", "max_completion_tokens", "max_output_tokens", "generationConfig",
  "maxOutputTokens"};
static const unsigned char cg__name_tab[22] = {
  [5] = CG__M_MODEL + 1, [10] = CG__M_MAX_TOKENS + 1, [21] = CG__M_MAX_COMPLETION + 1,
  [17] = CG__M_MAX_OUTPUT + 1, [16] = CG__M_GENCONF + 1, [15] = CG__M_GEN_MAX + 1};

/* Whether the `len` bytes at `a` and `b` are the same, 5 <= len <= 24: two or three
 * overlapping loads, no call and no loop (issue 16: code lines). */
static inline int cg__same(const char *a, const char *b, size_t len) {
  uint64_t x, y, z, w;
  if (len < 8) {
    uint32_t u, v, t, r;
    memcpy(&u, a, 4), memcpy(&v, b, 4), memcpy(&t, a + len - 4, 4), memcpy(&r, b + len - 4, 4);
    return u == v && t == r;
  }
  memcpy(&x, a, 8), memcpy(&y, b, 8), memcpy(&z, a + len - 8, 8), memcpy(&w, b + len - 8, 8);
  if (len > 16) {
    uint64_t m, n;
    memcpy(&m, a + 8, 8), memcpy(&n, b + 8, 8);
    return x == y && z == w && m == n;
  }
  return x == y && z == w;
}

/* The member slot whose name `key` (`len` bytes, fewer than 32) is, wherever it is, or
 * CG__M_NONE. */
static int cg__name(const char *key, size_t len) {
  unsigned i = len < sizeof(cg__name_tab) ? cg__name_tab[len] : 0;
  return i && cg__same(key, cg__names[i - 1], len) ? (int) i - 1 : CG__M_NONE;
}

/* The whole body, as cJSON_ParseWithLength read it.  0 when it does not parse. */
static int cg__scan(const unsigned char *p, const unsigned char *end, struct cg__body *b) {
  uint64_t arr[(CG__DEPTH_MAX + 64) / 64]; /* a depth's bit is set when it is entered */
  unsigned depth = 0, skip = 0; /* skip: depth of a "model" member's container, or 0 */
  int in_gc = 0, slot = CG__M_NONE, is_model = 0;
  int in_arr = 0; /* the container at `depth` is an array (arr's bit, at hand) */
  int is_key;     /* the string being read is a member name */
  char key[32];

  p = cg__ws(p, end);
value:
  if (p >= end)
    return 0;
  if (*p == '{' || *p == '[') {
    int is_arr = *p == '[';
    if (depth >= CG__DEPTH_MAX)
      return 0;
    depth++;
    if (is_arr)
      arr[depth / 64] |= UINT64_C(1) << (depth % 64);
    else
      arr[depth / 64] &= ~(UINT64_C(1) << (depth % 64));
    in_arr = is_arr;
    if (depth == 2 && slot == CG__M_GENCONF && !is_arr)
      in_gc = 1;
    if (is_model && !skip)
      skip = depth; /* nothing under a "model" member is prompt text */
    p = cg__ws(p + 1, end);
    if (p < end && *p == (is_arr ? ']' : '}'))
      goto close;
    if (is_arr) {
      slot = CG__M_NONE, is_model = 0;
      goto value;
    }
    goto key;
  }
  if (*p == '"') {
    is_key = 0;
    goto string;
  } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
    double v = 0;
    int max = slot >= CG__M_MAX_TOKENS && slot <= CG__M_MAX_OUTPUT ? 1 : slot == CG__M_GEN_MAX;
    const unsigned char *q = p;
    uint64_t x = 0;
    /* Plain digits (a count, a max_tokens), up to 15 and followed by a byte no number
     * holds, are read here: exact in a double, what strtod reads.  A sign, a fraction,
     * an exponent or a long run go to cg__number, out of the loop's lines. */
#pragma GCC unroll 1 /* a few digits: a line or two, not the profile's copies */
    for (; q < end; q++) {
      if (*q < '0' || *q > '9')
        break;
      x = x * 10 + (uint64_t) (*q - '0');
    }
    if (CG_RARE(q == p || q - p > 15 || q == end || cg__num_byte[*q])) {
      if (!(p = cg__number(p, end, max ? &v : NULL)))
        return 0;
    } else {
      v = (double) x;
      p = q;
    }
    if (max && v > b->max_out)
      b->max_out = v;
  } else if (end - p >= 4 && memcmp(p, "null", 4) == 0) {
    p += 4;
  } else if (end - p >= 5 && memcmp(p, "false", 5) == 0) {
    p += 5;
  } else if (end - p >= 4 && memcmp(p, "true", 4) == 0) {
    p += 4;
  } else {
    return 0;
  }
after:
  if (depth == 0)
    return 1; /* what follows the top-level value is ignored */
  p = cg__ws(p, end);
  if (p >= end)
    return 0;
  if (*p == ',') {
    p = cg__ws_sep(p + 1, end);
    if (in_arr) {
      slot = CG__M_NONE, is_model = 0;
      goto value;
    }
    goto key;
  }
  if (*p != (in_arr ? ']' : '}'))
    return 0;
close:
  p++;
  if (depth == 2 && in_gc && !in_arr)
    in_gc = 0;
  if (skip == depth)
    skip = 0;
  depth--;
  in_arr = depth && (arr[depth / 64] >> (depth % 64) & 1);
  goto after;
key:
  if (p >= end || *p != '"')
    return 0;
  is_key = 1;
string: /* a name (is_key) or a value: one scan for both, its characters counted */
  {
    int64_t chars; /* what counts of it when it is a value that is prompt text */
    const unsigned char *r = cg__plain(p + 1, end, &chars);
    size_t len = (size_t) (r - (p + 1));
    const char *name = (const char *) p + 1;
    int m;
    if (r < end && *r == '"') { /* plain, mostly: read where it lies */
      p = r + 1;
      if (!is_key) {
        if (slot == CG__M_MODEL) {
          len = len < sizeof(b->model) - 1 ? len : sizeof(b->model) - 1;
          memcpy(b->model, name, len);
          b->model_len = len;
        } else if (!skip && !is_model) {
          b->chars += chars;
        }
        goto after;
      }
    } else if (!is_key) {
      if (!(p = cg__string_value(p, r, end, b, chars, slot == CG__M_MODEL,
                                 !skip && !is_model)))
        return 0;
      goto after;
    } else {
      struct cg__sink k = {0, 0, 0, key, 0, sizeof(key) + 1};
      if (!(p = cg__string_at(p, p + 1, end, &k)))
        return 0;
      name = key;
      len = k.len;
    }
    /* a name longer than the buffer is none of ours: len >= sizeof(key) */
    m = len < sizeof(key) ? cg__name(name, len) : CG__M_NONE;
    is_model = m == CG__M_MODEL; /* at any depth: no prompt text under it */
    /* the member slot it is in its object: the output limits and the model at the top,
     * maxOutputTokens in the first generationConfig */
    if (m == CG__M_GEN_MAX ? !(depth == 2 && in_gc) : depth != 1)
      m = CG__M_NONE;
    slot = CG__M_NONE;
    if (m != CG__M_NONE && !(b->seen & (1u << m))) {
      b->seen |= 1u << m; /* only a name's first member counts */
      slot = m;
    }
  }
  p = cg__ws(p, end);
  if (p >= end || *p != ':')
    return 0;
  p = cg__ws_sep(p + 1, end);
  goto value;
}

/* Starts on a line of its own (the whole-body scan is inlined in it), so the lines it
 * takes do not move with the code before it (issue 16). */
__attribute__((aligned(64))) void cg_body_facts(const char *body, size_t len,
                                                char model[CG_BODY_MODEL_SIZE],
                                                int64_t *tokens) {
  const char *p = body, *end = body + len;
  struct cg__body b;

  while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
    p++;
  if (p == end || *p != '{' || len > CG_BODY_PARSE_MAX)
    return;
  b.chars = 0; /* not the model's 201 bytes: model_len says what they hold */
  b.max_out = 0;
  b.model_len = 0;
  b.seen = 0;
  if (!cg__scan((const unsigned char *) body, (const unsigned char *) end, &b))
    return;
  if (b.model_len) { /* no NUL in the bytes kept; at most CG_BODY_MODEL_SIZE - 1 */
    memcpy(model, b.model, b.model_len);
    model[b.model_len] = '\0';
  }
  /* Bounded before the conversion (found by fuzzing: "max_tokens": 1e300 was a
   * float-to-integer overflow, UB): no model writes more than CG_BODY_OUTPUT_MAX. */
  *tokens = (b.chars + 3) / 4 +
            (b.max_out > (double) CG_BODY_OUTPUT_MAX ? CG_BODY_OUTPUT_MAX : (int64_t) b.max_out);
}

int cg_body_model_from_path(const char *path, char model[CG_BODY_MODEL_SIZE]) {
  const char *m = NULL, *p, *e;
  size_t n;

  for (p = path; p && (p = strstr(p, "/models/")); p += 8)
    m = p + 8;
  if (!m)
    return 0;
  for (e = m; *e && *e != ':' && *e != '/'; e++)
    if (!((*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z') || (*e >= '0' && *e <= '9') ||
          *e == '.' || *e == '-' || *e == '_' || *e == '@'))
      return 0;
  n = (size_t) (e - m);
  if (n == 0 || n > 127 || *e == '/')
    return 0;
  memcpy(model, m, n);
  model[n] = '\0';
  return 1;
}
