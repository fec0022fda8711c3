/* usage.c - the token usage a provider reports in its response body (see usage.h).
 *
 * No JSON tree is built.  A JSON body streams through a push scanner as it arrives (one
 * pass over each byte, nothing buffered); an SSE event's data is held as before (read in
 * place when it is one data line whole in the buffer) and, only when its bytes could
 * matter (cg__may_matter), run through the same scanner.  The scanner accepts exactly
 * what cJSON 1.7.15's cJSON_ParseWithLength accepted (the parser this file used before
 * issue 16; fuzz/fuzz-usage-diff.c runs both side by side), and it collects only the
 * members the rules below read, with cJSON_GetObjectItemCaseSensitive's meaning: the
 * FIRST member of a name counts, later ones with the same name do not, and names compare
 * as C strings (a \u0000 in a name or value ends it).  What one object says is applied
 * when it closes, to a tentative copy of the counts that replaces the real ones only when
 * the whole document parsed. */
#include "usage.h"
#include "hot.h"

#include <locale.h>
#include <zlib.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
/* AVX2 where the CPU has it (chosen at run time; -O2 builds target plain x86-64).
 * -DCG_USAGE_NO_AVX2 builds without, to test the SSE2 code on such a CPU. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__SSE2__) && !defined(CG_USAGE_NO_AVX2)
#define CG__AVX2 1
#include <immintrin.h>
#endif

/* ---- what one top-level object says (struct cg__facts) ----
 *
 * The objects the rules read, by their place under a top-level object (or an element of
 * a top-level array): */
enum {
  CG__CX_NONE,  /* anything else: scanned only to know the document is well formed */
  CG__CX_TOP,   /* the top-level object */
  CG__CX_MSG,   /* .message (Anthropic message_start) */
  CG__CX_RESP,  /* .response (Responses events) */
  CG__CX_UM,    /* .usageMetadata (Gemini) */
  CG__CX_USAGE, /* .usage, .message.usage, .response.usage: + 0, 1, 2 */
  CG__CX_DET = CG__CX_USAGE + 3 /* the four *_details of each: + usage * 4 + detail */
};
#define CG__CX_COUNT (CG__CX_DET + 12)

/* Numbers: per usage object (u * 11 + k, u = 0 top, 1 message, 2 response) */
enum {
  CG__N_PROMPT, CG__N_INPUT, CG__N_COMPLETION, CG__N_OUTPUT, CG__N_TOTAL, CG__N_CREAD,
  CG__N_CWRITE, CG__N_PTD_CACHED, CG__N_ITD_CACHED, CG__N_CTD_REASONING, CG__N_OTD_REASONING,
  CG__N_PER_USAGE
};
/* ... and usageMetadata's, after the three usage objects' */
enum {
  CG__N_UM = 3 * CG__N_PER_USAGE,
  CG__N_UM_TOOLUSE = CG__N_UM, CG__N_UM_PROMPT, CG__N_UM_CANDIDATES, CG__N_UM_THOUGHTS,
  CG__N_UM_CACHED, CG__N_UM_TOTAL, CG__N_COUNT
};
/* Strings */
enum { CG__S_TYPE, CG__S_MODEL, CG__S_MODEL_VERSION, CG__S_MSG_MODEL, CG__S_RESP_MODEL,
       CG__S_COUNT };

struct cg__facts {
  uint64_t seen;              /* slots (below) whose first member has been seen */
  uint32_t objs;              /* contexts that were objects; bit 31: "error" was one */
  uint64_t nset;              /* numbers (below) that have been read (the rest are -1) */
  int64_t num[CG__N_COUNT];   /* -1: not a number, or not a whole count */
  unsigned char slen[CG__S_COUNT];
  char str[CG__S_COUNT][128]; /* up to 127 bytes, as far as a NUL */
};
#define CG__ERROR_OBJ (UINT32_C(1) << 31)

/* A slot: a member name the rules read in one context, and what its value feeds. */
enum { CG__K_NUM, CG__K_STR, CG__K_OBJ, CG__K_ERROR, CG__K_NONE };
struct cg__slot {
  unsigned char cx, kind, arg, len; /* arg: number, string or child context */
  const char *name;
};
#define CG__U(u, k) ((u) * CG__N_PER_USAGE + (k))
#define CG__USAGE_SLOTS(u)                                                                  \
  {CG__CX_USAGE + (u), CG__K_NUM, CG__U(u, CG__N_PROMPT), 13, "prompt_tokens"},            \
  {CG__CX_USAGE + (u), CG__K_NUM, CG__U(u, CG__N_INPUT), 12, "input_tokens"},              \
  {CG__CX_USAGE + (u), CG__K_NUM, CG__U(u, CG__N_COMPLETION), 17, "completion_tokens"},    \
  {CG__CX_USAGE + (u), CG__K_NUM, CG__U(u, CG__N_OUTPUT), 13, "output_tokens"},            \
  {CG__CX_USAGE + (u), CG__K_NUM, CG__U(u, CG__N_TOTAL), 12, "total_tokens"},              \
  {CG__CX_USAGE + (u), CG__K_NUM, CG__U(u, CG__N_CREAD), 23, "cache_read_input_tokens"},   \
  {CG__CX_USAGE + (u), CG__K_NUM, CG__U(u, CG__N_CWRITE), 27, "cache_creation_input_tokens"},\
  {CG__CX_USAGE + (u), CG__K_OBJ, CG__CX_DET + (u) * 4 + 0, 21, "prompt_tokens_details"},  \
  {CG__CX_USAGE + (u), CG__K_OBJ, CG__CX_DET + (u) * 4 + 1, 20, "input_tokens_details"},   \
  {CG__CX_USAGE + (u), CG__K_OBJ, CG__CX_DET + (u) * 4 + 2, 25, "completion_tokens_details"},\
  {CG__CX_USAGE + (u), CG__K_OBJ, CG__CX_DET + (u) * 4 + 3, 21, "output_tokens_details"},  \
  {CG__CX_DET + (u) * 4 + 0, CG__K_NUM, CG__U(u, CG__N_PTD_CACHED), 13, "cached_tokens"},  \
  {CG__CX_DET + (u) * 4 + 1, CG__K_NUM, CG__U(u, CG__N_ITD_CACHED), 13, "cached_tokens"},  \
  {CG__CX_DET + (u) * 4 + 2, CG__K_NUM, CG__U(u, CG__N_CTD_REASONING), 16, "reasoning_tokens"},\
  {CG__CX_DET + (u) * 4 + 3, CG__K_NUM, CG__U(u, CG__N_OTD_REASONING), 16, "reasoning_tokens"}

/* Every member read (usage.h lists the rules).  At most 64: one bit each in `seen`. */
static const struct cg__slot cg__slots[] = {
  {CG__CX_TOP, CG__K_STR, CG__S_TYPE, 4, "type"},
  {CG__CX_TOP, CG__K_OBJ, CG__CX_UM, 13, "usageMetadata"},
  {CG__CX_TOP, CG__K_STR, CG__S_MODEL_VERSION, 12, "modelVersion"},
  {CG__CX_TOP, CG__K_ERROR, 0, 5, "error"},
  {CG__CX_TOP, CG__K_OBJ, CG__CX_MSG, 7, "message"},
  {CG__CX_TOP, CG__K_OBJ, CG__CX_RESP, 8, "response"},
  {CG__CX_TOP, CG__K_STR, CG__S_MODEL, 5, "model"},
  {CG__CX_TOP, CG__K_OBJ, CG__CX_USAGE + 0, 5, "usage"},
  {CG__CX_MSG, CG__K_STR, CG__S_MSG_MODEL, 5, "model"},
  {CG__CX_MSG, CG__K_OBJ, CG__CX_USAGE + 1, 5, "usage"},
  {CG__CX_RESP, CG__K_STR, CG__S_RESP_MODEL, 5, "model"},
  {CG__CX_RESP, CG__K_OBJ, CG__CX_USAGE + 2, 5, "usage"},
  {CG__CX_UM, CG__K_NUM, CG__N_UM_TOOLUSE, 23, "toolUsePromptTokenCount"},
  {CG__CX_UM, CG__K_NUM, CG__N_UM_PROMPT, 16, "promptTokenCount"},
  {CG__CX_UM, CG__K_NUM, CG__N_UM_CANDIDATES, 20, "candidatesTokenCount"},
  {CG__CX_UM, CG__K_NUM, CG__N_UM_THOUGHTS, 18, "thoughtsTokenCount"},
  {CG__CX_UM, CG__K_NUM, CG__N_UM_CACHED, 23, "cachedContentTokenCount"},
  {CG__CX_UM, CG__K_NUM, CG__N_UM_TOTAL, 15, "totalTokenCount"},
  CG__USAGE_SLOTS(0),
  CG__USAGE_SLOTS(1),
  CG__USAGE_SLOTS(2),
};
#define CG__NSLOTS (sizeof(cg__slots) / sizeof(cg__slots[0]))
_Static_assert(CG__NSLOTS <= 64, "one bit per slot in cg__facts.seen");
_Static_assert(CG__CX_COUNT <= 31, "one bit per context in cg__facts.objs");
_Static_assert(CG__N_COUNT <= 64, "one bit per number in cg__facts.nset");

/* Whether the `len` bytes at `a` and `b` are the same: from 4 bytes on, a few overlapping
 * 4- or 8-byte loads; no call (slot names, 4 to 31 bytes, and cg__word_at's model, which
 * runs inside cg__may_matter's SIMD loop, whose constants a call would push out). */
static inline __attribute__((always_inline)) int cg__same(const char *a, const char *b,
                                                         size_t len) {
  uint64_t x, y;
  size_t i;
  if (len < 4) {
    for (i = 0; i < len; i++)
      if (a[i] != b[i])
        return 0;
    return 1;
  }
  if (len < 8) {
    uint32_t u, v, w, z;
    memcpy(&u, a, 4), memcpy(&v, b, 4), memcpy(&w, a + len - 4, 4), memcpy(&z, b + len - 4, 4);
    return u == v && w == z;
  }
  memcpy(&x, a, 8), memcpy(&y, b, 8);
  if (x != y)
    return 0;
  if (len > 16) { /* no loop up to 24 bytes (a slot's name: 27 at most) */
    memcpy(&x, a + 8, 8), memcpy(&y, b + 8, 8);
    if (x != y)
      return 0;
    for (i = 16; i + 8 < len; i += 8) {
      memcpy(&x, a + i, 8), memcpy(&y, b + i, 8);
      if (x != y)
        return 0;
    }
  }
  memcpy(&x, a + len - 8, 8), memcpy(&y, b + len - 8, 8);
  return x == y;
}

/* The place of a slot name in its context's row of cg__slot_tab: a hash of its length
 * and first byte that differs for every name of one context (checked by the compiler:
 * -Woverride-init, in -Wextra, fails the build when two initializers of the table meet). */
#define CG__SLOT_H(len, c) (((unsigned) (len) + (unsigned char) (c) * 3u) & 63)
#define CG__T(cx, i, len, c) [cx][CG__SLOT_H(len, c)] = (i) + 1
#define CG__USAGE_TAB(u)                                                                    \
  CG__T(CG__CX_USAGE + (u), 18 + (u) * 15 + 0, 13, 'p'),  /* prompt_tokens */               \
  CG__T(CG__CX_USAGE + (u), 18 + (u) * 15 + 1, 12, 'i'),  /* input_tokens */                \
  CG__T(CG__CX_USAGE + (u), 18 + (u) * 15 + 2, 17, 'c'),  /* completion_tokens */           \
  CG__T(CG__CX_USAGE + (u), 18 + (u) * 15 + 3, 13, 'o'),  /* output_tokens */               \
  CG__T(CG__CX_USAGE + (u), 18 + (u) * 15 + 4, 12, 't'),  /* total_tokens */                \
  CG__T(CG__CX_USAGE + (u), 18 + (u) * 15 + 5, 23, 'c'),  /* cache_read_input_tokens */     \
  CG__T(CG__CX_USAGE + (u), 18 + (u) * 15 + 6, 27, 'c'),  /* cache_creation_input_tokens */ \
  CG__T(CG__CX_USAGE + (u), 18 + (u) * 15 + 7, 21, 'p'),  /* prompt_tokens_details */       \
  CG__T(CG__CX_USAGE + (u), 18 + (u) * 15 + 8, 20, 'i'),  /* input_tokens_details */        \
  CG__T(CG__CX_USAGE + (u), 18 + (u) * 15 + 9, 25, 'c'),  /* completion_tokens_details */   \
  CG__T(CG__CX_USAGE + (u), 18 + (u) * 15 + 10, 21, 'o'), /* output_tokens_details */       \
  CG__T(CG__CX_DET + (u) * 4 + 0, 18 + (u) * 15 + 11, 13, 'c'), /* cached_tokens */         \
  CG__T(CG__CX_DET + (u) * 4 + 1, 18 + (u) * 15 + 12, 13, 'c'),                             \
  CG__T(CG__CX_DET + (u) * 4 + 2, 18 + (u) * 15 + 13, 16, 'r'), /* reasoning_tokens */      \
  CG__T(CG__CX_DET + (u) * 4 + 3, 18 + (u) * 15 + 14, 16, 'r')

/* The one candidate slot (index + 1, 0: none) of a name in each context, by CG__SLOT_H;
 * the places written are those of cg__slots. */
static const unsigned char cg__slot_tab[CG__CX_COUNT][64] = {
  CG__T(CG__CX_TOP, 0, 4, 't'),   /* type */
  CG__T(CG__CX_TOP, 1, 13, 'u'),  /* usageMetadata */
  CG__T(CG__CX_TOP, 2, 12, 'm'),  /* modelVersion */
  CG__T(CG__CX_TOP, 3, 5, 'e'),   /* error */
  CG__T(CG__CX_TOP, 4, 7, 'm'),   /* message */
  CG__T(CG__CX_TOP, 5, 8, 'r'),   /* response */
  CG__T(CG__CX_TOP, 6, 5, 'm'),   /* model */
  CG__T(CG__CX_TOP, 7, 5, 'u'),   /* usage */
  CG__T(CG__CX_MSG, 8, 5, 'm'),
  CG__T(CG__CX_MSG, 9, 5, 'u'),
  CG__T(CG__CX_RESP, 10, 5, 'm'),
  CG__T(CG__CX_RESP, 11, 5, 'u'),
  CG__T(CG__CX_UM, 12, 23, 't'),  /* toolUsePromptTokenCount */
  CG__T(CG__CX_UM, 13, 16, 'p'),  /* promptTokenCount */
  CG__T(CG__CX_UM, 14, 20, 'c'),  /* candidatesTokenCount */
  CG__T(CG__CX_UM, 15, 18, 't'),  /* thoughtsTokenCount */
  CG__T(CG__CX_UM, 16, 23, 'c'),  /* cachedContentTokenCount */
  CG__T(CG__CX_UM, 17, 15, 't'),  /* totalTokenCount */
  CG__USAGE_TAB(0),
  CG__USAGE_TAB(1),
  CG__USAGE_TAB(2),
};
#undef CG__USAGE_TAB
#undef CG__T

/* The slot of member `key` (`len` bytes, len < 32, first byte `c`: any when len is 0) in
 * context `cx`, or -1: the one candidate cg__slot_tab names, checked against
 * cg__slots (length, bytes; its context is the row's), so a wrong entry finds nothing,
 * which every table test would show.  Inlined in both callers (a call each cost about 15
 * of the 40 instructions a name took; the switches on context and length this replaced,
 * about 20 more). */
static inline __attribute__((always_inline)) int cg__slot_of(unsigned cx, const char *key,
                                                            size_t len, unsigned char c) {
  unsigned i = cg__slot_tab[cx][CG__SLOT_H(len, c)];
  if (!i--)
    return -1;
  /* len >= 4: every slot's name is that long, and cg__same's loop for shorter ones is
   * then left out of the scanner's lines */
  return cg__slots[i].len == len && len >= 4 && cg__same(cg__slots[i].name, key, len) ? (int) i
                                                                                        : -1;
}

/* ---- the counts, as the provider names them ---- */

struct cg__acc {
  /* raw values, -1 unknown; last value wins */
  int64_t prompt, cread, cwrite, completion, reasoning, thoughts, tooluse, total;
  int anthropic, gemini;
  int stale; /* an SSE event over the bound came after the last usage report */
  int error_event;
  char model[128];
};

static void cg__set(int64_t *dst, int64_t v) {
  if (v >= 0)
    *dst = v;
}

/* cg__set with number `k` of `f`, when it was read. */
static void cg__set_num(int64_t *dst, const struct cg__facts *f, unsigned k) {
  if (f->nset >> k & 1)
    cg__set(dst, f->num[k]);
}

static void cg__model(struct cg__acc *a, const struct cg__facts *f, int s) {
  if (f->slen[s]) { /* a string, not empty */
    memcpy(a->model, f->str[s], f->slen[s]);
    a->model[f->slen[s]] = '\0';
  }
}

/* Where each number of a usage object goes (CG__N_PROMPT on, in that order: where two
 * go to one count, the later one wins). */
static const unsigned char cg__usage_dst[CG__N_PER_USAGE] = {
  offsetof(struct cg__acc, prompt),    offsetof(struct cg__acc, prompt),
  offsetof(struct cg__acc, completion), offsetof(struct cg__acc, completion),
  offsetof(struct cg__acc, total),     offsetof(struct cg__acc, cread),
  offsetof(struct cg__acc, cwrite),    offsetof(struct cg__acc, cread),
  offsetof(struct cg__acc, cread),     offsetof(struct cg__acc, reasoning),
  offsetof(struct cg__acc, reasoning)};

/* An OpenAI (Chat, Completions, Embeddings, Responses) or Anthropic "usage" object:
 * usage `u` of `f` (0 top, 1 .message, 2 .response).  One loop over the numbers read, not
 * a test each (fewer code lines: see cg__string_stop). */
static void cg__usage(struct cg__acc *a, const struct cg__facts *f, unsigned u, int anthropic) {
  unsigned n = u * CG__N_PER_USAGE;
  /* the slots of cache_read_input_tokens and cache_creation_input_tokens: present at
   * all (any value) marks Anthropic */
  uint64_t cache_keys = (uint64_t) 3 << (18 + u * 15 + CG__N_CREAD);
  /* ... unless the object counts its input as OpenAI does ("prompt_tokens", cached and
   * cache-written tokens included): a gateway's OpenAI-format usage that also carries
   * Anthropic's cache keys (LiteLLM: "cache_creation_input_tokens",
   * "cache_read_input_tokens" beside "prompt_tokens_details.cached_tokens") */
  uint64_t prompt_num = (uint64_t) 1 << (n + CG__N_PROMPT); /* a number, not null */
  uint64_t m = f->nset >> n & ((UINT64_C(1) << CG__N_PER_USAGE) - 1);
  if (!(f->objs & (UINT32_C(1) << (CG__CX_USAGE + u))))
    return;
  a->stale = 0; /* a usage report after any skipped event */
  if ((f->seen & cache_keys) && !(f->nset & prompt_num))
    anthropic = 1;
  if (anthropic)
    a->anthropic = 1;
  for (; m; m &= m - 1) { /* cg__set_num of each, -1 unless the details were an object */
    unsigned k = (unsigned) __builtin_ctzll(m);
    cg__set((int64_t *) (void *) ((char *) a + cg__usage_dst[k]), f->num[n + k]);
  }
  /* Read as OpenAI's, its prompt_tokens is the input, whatever input_tokens says. */
  if (!anthropic && (f->nset & prompt_num))
    cg__set(&a->prompt, f->num[n + CG__N_PROMPT]);
}

static int cg__is(const struct cg__facts *f, int s, const char *lit, size_t len) {
  return f->slen[s] == len && memcmp(f->str[s], lit, len) == 0;
}

/* What a top-level object's "type" says (cg__object). */
enum { CG__TY_OTHER, CG__TY_ERROR, CG__TY_MESSAGE, CG__TY_MESSAGE_START, CG__TY_RESPONSE,
       CG__TY_RESPONSE_FAILED };

/* The type of an object with a "type" string (out of line: OpenAI's Chat and Gemini's
 * objects have none). */
static __attribute__((noinline)) int cg__type(const struct cg__facts *f) {
  if (cg__is(f, CG__S_TYPE, "error", 5))
    return CG__TY_ERROR;
  if (cg__is(f, CG__S_TYPE, "message", 7) || cg__is(f, CG__S_TYPE, "message_delta", 13))
    return CG__TY_MESSAGE;
  if (cg__is(f, CG__S_TYPE, "message_start", 13))
    return CG__TY_MESSAGE_START;
  if (f->slen[CG__S_TYPE] >= 9 && memcmp(f->str[CG__S_TYPE], "response.", 9) == 0)
    return cg__is(f, CG__S_TYPE, "response.failed", 15) ? CG__TY_RESPONSE_FAILED
                                                        : CG__TY_RESPONSE;
  return CG__TY_OTHER;
}

/* One object: a whole response, one SSE event's data, or one element of an array
 * (Gemini's streamGenerateContent without alt=sse answers a JSON array of chunks). */
static __attribute__((noinline, aligned(64))) void cg__object(struct cg__acc *a,
                                                               const struct cg__facts *f) {
  int t = f->slen[CG__S_TYPE] ? cg__type(f) : CG__TY_OTHER;
  /* Anthropic's "type": "error" event, a failed Responses event, or an "error" object
   * (OpenAI and Gemini chunks, a Responses object with "status": "failed"). */
  if (t == CG__TY_ERROR || t == CG__TY_RESPONSE_FAILED || (f->objs & CG__ERROR_OBJ))
    a->error_event = 1;

  if (f->objs & (UINT32_C(1) << CG__CX_UM)) { /* Gemini */
    a->gemini = 1;
    a->stale = 0;
    cg__set_num(&a->tooluse, f, CG__N_UM_TOOLUSE);
    cg__set_num(&a->prompt, f, CG__N_UM_PROMPT);
    cg__set_num(&a->completion, f, CG__N_UM_CANDIDATES);
    cg__set_num(&a->thoughts, f, CG__N_UM_THOUGHTS);
    cg__set_num(&a->cread, f, CG__N_UM_CACHED);
    cg__set_num(&a->total, f, CG__N_UM_TOTAL);
  }
  cg__model(a, f, CG__S_MODEL_VERSION);

  if (t == CG__TY_MESSAGE_START) {
    if (f->objs & (UINT32_C(1) << CG__CX_MSG)) {
      /* message_start's output_tokens is a placeholder (1): only message_delta counts */
      int64_t output = a->completion;
      cg__model(a, f, CG__S_MSG_MODEL);
      cg__usage(a, f, 1, 1);
      a->completion = output;
    }
    return;
  }
  if (t >= CG__TY_RESPONSE) {
    if (f->objs & (UINT32_C(1) << CG__CX_RESP)) { /* Responses API streaming events */
      cg__model(a, f, CG__S_RESP_MODEL);
      cg__usage(a, f, 2, 0);
    }
    return;
  }
  cg__model(a, f, CG__S_MODEL);
  cg__usage(a, f, 0, t == CG__TY_MESSAGE);
}

/* ---- the scanner: cJSON 1.7.15's grammar, pushed one buffer at a time ----
 *
 * cJSON's rules, which are not quite RFC 8259's and are kept as they were:
 * - whitespace is any byte up to 0x20 (NUL and control bytes too);
 * - at most 1000 nested arrays and objects (CJSON_NESTING_LIMIT);
 * - a string ends at the first '"' not preceded by a backslash that is itself not
 *   escaped; inside it, \b \f \n \r \t \" \\ \/ and \uXXXX are the escapes (any other
 *   fails); a \u takes the next four bytes whatever they are, and is 0 when one is not a
 *   hex digit; a high surrogate must be followed by \u and a low one, a lone low one
 *   fails; a backslash the decoder meets as the string's last byte reads its closing
 *   quote as an escaped '"';
 * - a number starts with '-' or a digit and is the run of [0-9+-eE.] after it, however
 *   long (Debian's 1.7.15 carries upstream's fix for CVE-2023-26819, which dropped the
 *   63-byte limit): valid when strtod reads all of it (what strtod leaves is not a ',',
 *   '}' or ']', so the document fails);
 * - true, false, null; anything after the top-level value is ignored. */

enum {
  CG__J_VALUE,     /* a value is next */
  CG__J_ARR_FIRST, /* after '[': a value or ']' */
  CG__J_KEY_FIRST, /* after '{': a name or '}' */
  CG__J_KEY,       /* after ',' in an object: a name */
  CG__J_COLON,
  CG__J_AFTER, /* after a value: ',' or the end of its container */
  CG__J_STRING,
  CG__J_NUMBER,
  CG__J_LITERAL,
  CG__J_DONE, /* the top-level value is complete: the rest is ignored */
  CG__J_FAIL
};
/* a number's grammar, as strtod reads it */
enum { CG__NUM_SIGN, CG__NUM_INT, CG__NUM_DOT_NOINT, CG__NUM_DOT, CG__NUM_FRAC, CG__NUM_E,
       CG__NUM_ESIGN, CG__NUM_EXP };
#define CG__DEPTH_MAX 1000 /* CJSON_NESTING_LIMIT */
#define CG__CX_DEPTH 8     /* contexts are tracked this deep (the deepest is 5) */

struct cg__js {
  unsigned char state;
  unsigned char is_key; /* the string being read is a member name */
  unsigned char sesc;   /* the string's last byte was a backslash that escapes the next */
  unsigned char dstate; /* the escape decoder: 0 plain, 1 after '\', 2 first \u's hex,
                         * 3 '\' of the low surrogate, 4 its 'u', 5 its hex */
  unsigned char hexn, hexbad, nstate;
  unsigned char lit_i, lit_n;
  unsigned char knul, rnul; /* the name or recorded value reached a NUL */
  unsigned code, hi;
  int rec;       /* the string slot being recorded, or -1 */
  int num;       /* the number slot the number being read feeds, or -1 */
  int slot;      /* the slot of the member whose value is next, or -1 */
  unsigned klen; /* of key (over sizeof(key) - 1: no slot's) */
  unsigned depth;
  unsigned char cur_arr; /* the container at `depth` is an array (its bit in arr) */
  unsigned char cur_cx;  /* the context of the object at `depth` (CG__CX_NONE past cx) */
  const char *lit;
  uint64_t arr[(CG__DEPTH_MAX + 64) / 64]; /* bit d: the container at depth d is an array */
  unsigned char cx[CG__CX_DEPTH];           /* context of the object at depth d */
  char key[32];
  size_t nlen;  /* bytes of the number being read (kept only when it feeds a slot) */
  char nbuf[64];
  char *nheap;  /* a longer one that feeds a slot, malloc'd (ncap bytes) */
  size_t ncap;
  struct cg__facts f;
};

static void cg__js_num_release(struct cg__js *j);

static void cg__js_begin(struct cg__js *j) {
  cg__js_num_release(j); /* a number the last document ended in */
  j->state = CG__J_VALUE;
  j->depth = 0;
  j->cur_arr = 0;
  j->cur_cx = CG__CX_NONE;
  j->slot = -1;
}

static int cg__js_is_arr(const struct cg__js *j, unsigned d) {
  return (int) (j->arr[d / 64] >> (d % 64) & 1);
}

/* A decoded byte of the string being read. */
static void cg__js_emit(struct cg__js *j, unsigned char c) {
  if (j->is_key) {
    if (j->knul)
      return;
    if (!c)
      j->knul = 1;
    else if (j->klen < sizeof(j->key))
      j->key[j->klen++] = (char) c;
    else
      j->klen = sizeof(j->key); /* too long for any slot */
  } else if (j->rec >= 0 && !j->rnul) {
    if (!c)
      j->rnul = 1;
    else if (j->f.slen[j->rec] < 127)
      j->f.str[j->rec][j->f.slen[j->rec]++] = (char) c;
  }
}

/* Plain bytes (no backslash, no quote) of the string being read, to keep: as
 * cg__js_emit byte by byte, without a call each. */
static void cg__js_keep(struct cg__js *j, const unsigned char *s, size_t n) {
  const unsigned char *z = memchr(s, '\0', n);
  size_t room;
  if (z) /* the C string ends there */
    n = (size_t) (z - s);
  if (j->is_key) {
    room = sizeof(j->key) - j->klen;
    if (n >= room) {
      j->klen = sizeof(j->key); /* too long for any slot */
    } else {
      memcpy(j->key + j->klen, s, n);
      j->klen += (unsigned) n;
    }
    if (z)
      j->knul = 1;
  } else {
    unsigned char *len = &j->f.slen[j->rec];
    room = 127 - *len;
    memcpy(j->f.str[j->rec] + *len, s, n < room ? n : room);
    *len = (unsigned char) (*len + (n < room ? n : room));
    if (z)
      j->rnul = 1;
  }
}

static void cg__js_emit_cp(struct cg__js *j, unsigned cp) {
  if (cp < 0x80) {
    cg__js_emit(j, (unsigned char) cp);
  } else if (cp < 0x800) {
    cg__js_emit(j, (unsigned char) (0xC0 | cp >> 6));
    cg__js_emit(j, (unsigned char) (0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    cg__js_emit(j, (unsigned char) (0xE0 | cp >> 12));
    cg__js_emit(j, (unsigned char) (0x80 | (cp >> 6 & 0x3F)));
    cg__js_emit(j, (unsigned char) (0x80 | (cp & 0x3F)));
  } else {
    cg__js_emit(j, (unsigned char) (0xF0 | cp >> 18));
    cg__js_emit(j, (unsigned char) (0x80 | (cp >> 12 & 0x3F)));
    cg__js_emit(j, (unsigned char) (0x80 | (cp >> 6 & 0x3F)));
    cg__js_emit(j, (unsigned char) (0x80 | (cp & 0x3F)));
  }
}

static int cg__hex(unsigned char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One byte of a string that is not its closing quote: the escape decoder.  0: fails. */
static int cg__js_decode(struct cg__js *j, unsigned char c) {
  int h;
  switch (j->dstate) {
  case 0:
    if (c == '\\')
      j->dstate = 1;
    else
      cg__js_emit(j, c);
    return 1;
  case 1:
    j->dstate = 0;
    switch (c) {
    case 'b': cg__js_emit(j, '\b'); return 1;
    case 'f': cg__js_emit(j, '\f'); return 1;
    case 'n': cg__js_emit(j, '\n'); return 1;
    case 'r': cg__js_emit(j, '\r'); return 1;
    case 't': cg__js_emit(j, '\t'); return 1;
    case '"': case '\\': case '/': cg__js_emit(j, c); return 1;
    case 'u': j->dstate = 2; j->code = 0; j->hexn = 0; j->hexbad = 0; return 1;
    default: return 0;
    }
  case 2:
  case 5:
    h = cg__hex(c);
    if (h < 0)
      j->hexbad = 1;
    j->code = j->code << 4 | (unsigned) (h & 15);
    if (++j->hexn < 4)
      return 1;
    if (j->hexbad)
      j->code = 0; /* cJSON's parse_hex4 */
    if (j->dstate == 2) {
      if (j->code >= 0xDC00 && j->code <= 0xDFFF)
        return 0;
      if (j->code >= 0xD800 && j->code <= 0xDBFF) {
        j->hi = j->code;
        j->dstate = 3;
        return 1;
      }
      cg__js_emit_cp(j, j->code);
    } else {
      if (j->code < 0xDC00 || j->code > 0xDFFF)
        return 0;
      cg__js_emit_cp(j, 0x10000 + ((j->hi & 0x3FF) << 10 | (j->code & 0x3FF)));
    }
    j->dstate = 0;
    return 1;
  case 3:
    j->dstate = 4;
    return c == '\\';
  default: /* 4 */
    j->dstate = 5;
    j->code = 0;
    j->hexn = 0;
    j->hexbad = 0;
    return c == 'u';
  }
}

/* The first byte after blanks (cJSON: any byte up to 0x20) at or after `s`, or `end`:
 * 16 at a time with SSE2 (indentation).  Out of line: a copy of its loops where
 * cg__js_feed reads blanks cost code lines (issue 16). */
static __attribute__((noinline)) const unsigned char *cg__blanks(const unsigned char *s,
                                                                 const unsigned char *end) {
#ifdef __SSE2__
  const __m128i sp = _mm_set1_epi8(' ');
  while (end - s >= 16) {
    __m128i x = _mm_loadu_si128((const __m128i *) (const void *) s);
    unsigned mask = ~(unsigned) _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(x, sp), sp)) & 0xffff;
    if (mask)
      return s + __builtin_ctz(mask);
    s += 16;
  }
#endif
  while (s < end && *s <= ' ')
    s++;
  return s;
}

/* A number of digits only, [s, e): cg__js_count's reading of it.  Out of line: the
 * scanner reads a count of up to 16 digits itself. */
static __attribute__((noinline)) int64_t cg__count_digits(const unsigned char *s,
                                                          const unsigned char *e) {
  uint64_t v = 0;
  while (s < e && *s == '0')
    s++;
  if (e - s > 16)
    return -1; /* at least 10^16 > 2^53 */
  for (; s < e; s++)
    v = v * 10 + (uint64_t) (*s - '0');
  return v < (UINT64_C(1) << 53) ? (int64_t) v : -1;
}

/* The number just read, for its slot: a whole count 0..2^53-1, else -1 (cJSON's double,
 * as the rules read it: >= 0, < 2^53, == its integer part). */
static int64_t cg__js_count(struct cg__js *j) {
  char *t = j->nheap ? j->nheap : j->nbuf;
  double d;
  size_t i, n = j->nlen;
  int plain = 1;
  if (n == (size_t) -1)
    return -1; /* out of memory for a long one */
  for (i = 0; i < n; i++)
    plain &= t[i] >= '0' && t[i] <= '9';
  if (plain)
    return cg__count_digits((const unsigned char *) t, (const unsigned char *) t + n);
  /* "-0", "1.0", "4e0", "1.00000000000000001": strtod decides, as for cJSON (which
   * gives strtod the host's decimal point) */
  for (i = 0; i < n; i++)
    if (t[i] == '.')
      t[i] = localeconv()->decimal_point[0];
  t[n] = '\0';
  d = strtod(t, NULL);
  if (d >= 0 && d < 9007199254740992.0 && d == (double) (int64_t) d)
    return (int64_t) d;
  return -1;
}

/* Keep byte `c` of a number that feeds a slot (room for a NUL after it). */
static void cg__js_num_keep(struct cg__js *j, char c) {
  if (j->nlen == (size_t) -1)
    return;
  if (j->nlen + 1 >= (j->nheap ? j->ncap : sizeof(j->nbuf))) {
    size_t cap = j->nheap ? j->ncap * 2 : 4 * sizeof(j->nbuf);
    char *nb = realloc(j->nheap, cap);
    if (!nb) {
      j->nlen = (size_t) -1;
      return;
    }
    if (!j->nheap)
      memcpy(nb, j->nbuf, j->nlen);
    j->nheap = nb;
    j->ncap = cap;
  }
  (j->nheap ? j->nheap : j->nbuf)[j->nlen++] = c;
}

static void cg__js_num_release(struct cg__js *j) {
  free(j->nheap);
  j->nheap = NULL;
  j->ncap = 0;
}

/* A value ended (the container closing, if any, already popped). */
static void cg__js_value_done(struct cg__js *j) {
  j->state = j->depth == 0 ? CG__J_DONE : CG__J_AFTER;
}

/* The byte `c` that ends the container at the current depth. */
static void cg__js_close(struct cg__js *j, struct cg__acc *tent, unsigned char c) {
  unsigned d;
  if (CG_RARE(c != (j->cur_arr ? ']' : '}'))) {
    j->state = CG__J_FAIL;
    return;
  }
  if (!j->cur_arr && j->cur_cx == CG__CX_TOP)
    cg__object(tent, &j->f);
  d = --j->depth;
  j->cur_arr = (unsigned char) (d && cg__js_is_arr(j, d));
  j->cur_cx = !j->cur_arr && d && d < CG__CX_DEPTH ? j->cx[d] : CG__CX_NONE;
  cg__js_value_done(j);
}

/* A value that starts with `c` and is not a container: true, false or null (then the
 * literal loop's state), or a byte no value starts with.  Out of line: cg__js_feed reads
 * a null or true whole in its buffer itself (issue 16: code lines). */
static __attribute__((noinline)) void cg__js_lit_start(struct cg__js *j, unsigned char c) {
  if (c == 't' || c == 'f' || c == 'n') {
    j->lit = c == 't' ? "true" : c == 'f' ? "false" : "null";
    j->lit_n = c == 'f' ? 5 : 4;
    j->lit_i = 1;
    j->state = CG__J_LITERAL;
  } else {
    j->state = CG__J_FAIL;
  }
}

/* A value starts with `c` (not whitespace), which is not a string's or a number's (the
 * scanner reads those itself): a container, a literal, or a byte no value starts with. */
static void cg__js_value(struct cg__js *j, unsigned char c) {
  int slot = j->slot;
  unsigned kind = slot >= 0 ? cg__slots[slot].kind : CG__K_NONE;
  j->slot = -1;
  if (c == '{' || c == '[') {
    unsigned d = j->depth + 1, cx = CG__CX_NONE;
    if (CG_RARE(j->depth >= CG__DEPTH_MAX)) {
      j->state = CG__J_FAIL;
      return;
    }
    j->depth = d;
    if (c == '[') {
      j->arr[d / 64] |= UINT64_C(1) << (d % 64);
      j->cur_arr = 1;
      j->state = CG__J_ARR_FIRST;
      return;
    }
    j->arr[d / 64] &= ~(UINT64_C(1) << (d % 64));
    if (d == 1 || (d == 2 && cg__js_is_arr(j, 1))) {
      cx = CG__CX_TOP; /* a top-level object, or an element of a top-level array */
      j->f.seen = 0;
      j->f.objs = 0;
      j->f.nset = 0; /* no number read */
      memset(j->f.slen, 0, sizeof(j->f.slen));
    } else if (kind == CG__K_OBJ) {
      cx = cg__slots[slot].arg;
      j->f.objs |= UINT32_C(1) << cx;
    } else if (kind == CG__K_ERROR) {
      j->f.objs |= CG__ERROR_OBJ;
    }
    if (d < CG__CX_DEPTH)
      j->cx[d] = (unsigned char) cx;
    j->cur_arr = 0;
    j->cur_cx = (unsigned char) (d < CG__CX_DEPTH ? cx : CG__CX_NONE);
    j->state = CG__J_KEY_FIRST;
  } else {
    cg__js_lit_start(j, c);
  }
}

/* A number's state after byte `c` of [0-9+-eE.] in state `st`: 255 when strtod would
 * stop before it. */
static inline unsigned char cg__num_next(unsigned char st, unsigned char c) {
  int digit = c >= '0' && c <= '9';
  switch (st) {
  case CG__NUM_SIGN:
    return digit ? CG__NUM_INT : c == '.' ? CG__NUM_DOT_NOINT : 255;
  case CG__NUM_INT:
    return digit ? CG__NUM_INT : c == '.' ? CG__NUM_DOT : (c == 'e' || c == 'E') ? CG__NUM_E
         : 255;
  case CG__NUM_DOT_NOINT:
    return digit ? CG__NUM_FRAC : 255;
  case CG__NUM_DOT:
  case CG__NUM_FRAC:
    return digit ? CG__NUM_FRAC : (c == 'e' || c == 'E') ? CG__NUM_E : 255;
  case CG__NUM_E:
    return digit ? CG__NUM_EXP : (c == '+' || c == '-') ? CG__NUM_ESIGN : 255;
  default: /* ESIGN, EXP */
    return digit ? CG__NUM_EXP : 255;
  }
}

/* Whether a number in state `st` is whole: strtod reads all of it. */
static inline int cg__num_done(unsigned char st) {
  return st == CG__NUM_INT || st == CG__NUM_DOT || st == CG__NUM_FRAC || st == CG__NUM_EXP;
}

/* The number loop's state for a number that starts with `c` (then `s`) and is not plain
 * digits ended in the buffer (`q`: where its digits end, when `c` is one; `num`: the
 * number slot it feeds, or -1).  Returns where the number loop goes on.  Out of line,
 * as the loop is: what a sign, a fraction or the buffer's end needs is not in the
 * lines of the plain count (issue 16). */
static __attribute__((noinline)) const unsigned char *
cg__js_num_start(struct cg__js *j, unsigned char c, const unsigned char *s,
                 const unsigned char *q, int num) {
  j->num = num;
  j->nlen = 0;
  j->nstate = c == '-' ? CG__NUM_SIGN : CG__NUM_INT;
  if (num >= 0) {
    cg__js_num_keep(j, (char) c);
    if (c != '-') /* more to come: kept, as the number loop keeps them */
      for (; s < q; s++)
        cg__js_num_keep(j, (char) *s);
  } else if (c != '-') {
    s = q; /* digits nobody keeps: the number loop would pass them too */
  }
  return s;
}

/* The string loop's state for a name (`key`) or a value whose bytes are kept (`keep`),
 * read from its start: it holds an escape or a NUL, or goes on past the buffer.  Out of
 * line (issue 16: code lines of the plain strings' path). */
static __attribute__((noinline)) void cg__js_str_start(struct cg__js *j, int key, int keep) {
  j->is_key = (unsigned char) key;
  j->sesc = j->dstate = 0;
  if (key) {
    j->slot = -1;
    j->klen = keep ? 0 : sizeof(j->key); /* not kept: too long for any slot */
    j->knul = (unsigned char) !keep;
  } else {
    j->rnul = 0;
  }
}

/* A number's next byte `c` of [0-9+-eE.]: 0 when strtod would stop before it. */
static int cg__js_num_byte(struct cg__js *j, unsigned char c) {
  j->nstate = cg__num_next(j->nstate, c);
  return j->nstate != 255;
}

/* The bytes of a number's run, [0-9+-eE.]: one load (after a count, where it is the test
 * whether the number ended). */
static const unsigned char cg__num_bytes[256] = {
  ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
  ['8'] = 1, ['9'] = 1, ['+'] = 1, ['-'] = 1, ['e'] = 1, ['E'] = 1, ['.'] = 1};

static int cg__is_num_byte(unsigned char c) {
  return cg__num_bytes[c];
}

#ifdef __SSE2__
/* The stops among 16 bytes `x`: '"', '\\' and, with `nul`, NUL (the constants quote, bs
 * and zero are the caller's). */
#define CG__STOP16(x)                                                                       \
  (nul ? _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bs)),        \
                      _mm_cmpeq_epi8(x, zero))                                              \
       : _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bs)))
#endif

/* `end` - 15, or `start` when [start, end) is shorter: s < that when 16 bytes are left
 * from s on, one compare with the pointer kept in a register (cg__string_stop's callers). */
#define CG__LIM16(start, end) ((end) - ((end) - (start) < 15 ? (end) - (start) : 15))

/* The first '"' or '\\' in [s, end), or end; with `nul`, the first NUL too (`lim16`:
 * CG__LIM16 of the buffer).  One pass, 16 bytes at a time with SSE2 (most strings are
 * short names, where a memchr call costs more than the bytes), a byte at a time without.
 * One loop, no wider or unrolled rounds for long strings (a model's text): on a host whose
 * own code overflows the instruction cache, the code lines a request runs cost more than
 * the instructions they save (half a microsecond for the 15 lines they took).  Nor does
 * the profile's build peel or unroll them (#pragma GCC unroll 1: its copies of the byte
 * loop took six lines a request); the byte loop tests `s < end` alone at its head, as
 * GCC 12 ignores the pragma on a loop whose condition is an && of tests. */
static inline __attribute__((always_inline)) const unsigned char *
cg__string_stop(const unsigned char *s, const unsigned char *end, const unsigned char *lim16,
                int nul) {
#ifdef __SSE2__
  const __m128i quote = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), zero = _mm_setzero_si128();
#pragma GCC unroll 1 /* one round a line of code (issue 16) */
  for (; s < lim16; s += 16) {
    __m128i x = _mm_loadu_si128((const __m128i *) (const void *) s);
    unsigned mask = (unsigned) _mm_movemask_epi8(CG__STOP16(x));
    if (mask)
      return s + __builtin_ctz(mask);
  }
#undef CG__STOP16
#else
  (void) lim16;
#endif
#pragma GCC unroll 1 /* up to 15 bytes */
  for (; s < end; s++)
    if (*s == '"' || *s == '\\' || (nul && !*s))
      break;
  return s;
}

/* The rest of a string (a name or a value) from `s`, in the string loop's state: what
 * cg__js_feed's own loop leaves (an escape, a NUL, a string the buffer's end cuts).  A
 * name's slot is looked up at its end (j->slot).  Returns where the bytes after its
 * closing quote start, or NULL when the buffer ended inside it or it does not parse (the
 * state stored: CG__J_STRING or CG__J_FAIL).  Out of line, as the number and literal
 * loops are: cg__js_feed's code lines are those of what every request runs (issue 16). */
static __attribute__((noinline)) const unsigned char *
cg__js_string(struct cg__js *j, const unsigned char *s, const unsigned char *end) {
  const unsigned char *lim16 = CG__LIM16(s, end), *q;
  unsigned char c;
  for (;;) {
    if (j->dstate == 0 && !j->sesc) {
      /* no escape pending: plain bytes up to a '"' or '\' are kept or skipped at once */
      q = cg__string_stop(s, end, lim16, 0);
      if (j->is_key ? !j->knul : j->rec >= 0 && !j->rnul)
        cg__js_keep(j, s, (size_t) (q - s));
      s = q;
    }
    if (s == end) {
      j->state = CG__J_STRING;
      return NULL;
    }
    c = *s;
    if (c == '"' && !j->sesc) {
      if (j->dstate == 1) { /* the decoder's backslash was the last byte: an escaped '"' */
        cg__js_emit(j, '"');
      } else if (j->dstate != 0) {
        j->state = CG__J_FAIL;
        return NULL;
      }
      if (j->is_key) {
        unsigned char c0 = j->klen ? (unsigned char) j->key[0] : 0;
        int slot = j->klen < sizeof(j->key) ? cg__slot_of(j->cur_cx, j->key, j->klen, c0) : -1;
        if (slot >= 0 && !(j->f.seen & (UINT64_C(1) << slot))) {
          j->f.seen |= UINT64_C(1) << slot; /* only a name's first member counts */
          j->slot = slot;
        } else {
          j->slot = -1;
        }
      }
      return s + 1;
    }
    {
      int esc = !j->sesc && c == '\\';
      if (!cg__js_decode(j, c)) {
        j->state = CG__J_FAIL;
        return NULL;
      }
      j->sesc = (unsigned char) esc;
    }
    s++;
  }
}

/* The rest of a number from `s`, in the number loop's state (cg__js_num_start): a sign,
 * a fraction, an exponent, or one the buffer's end cut.  Returns where the next token
 * starts, or NULL when the buffer ended inside it or it does not parse (the state stored:
 * CG__J_NUMBER or CG__J_FAIL). */
static __attribute__((noinline)) const unsigned char *
cg__js_number(struct cg__js *j, const unsigned char *s, const unsigned char *end) {
  for (;;) {
    if (j->num < 0 && (j->nstate == CG__NUM_INT || j->nstate == CG__NUM_FRAC ||
                       j->nstate == CG__NUM_EXP))
      while (s < end && *s >= '0' && *s <= '9') /* digits nobody keeps */
        s++;
    if (s == end) {
      j->state = CG__J_NUMBER;
      return NULL;
    }
    if (!cg__is_num_byte(*s))
      break;
    if (!cg__js_num_byte(j, *s)) {
      j->state = CG__J_FAIL; /* cJSON would find a stray byte after the number */
      return NULL;
    }
    if (j->num >= 0)
      cg__js_num_keep(j, (char) *s);
    s++;
  }
  if (!cg__num_done(j->nstate)) {
    j->state = CG__J_FAIL;
    return NULL;
  }
  if (j->num >= 0) {
    j->f.num[j->num] = cg__js_count(j);
    j->f.nset |= UINT64_C(1) << j->num;
    cg__js_num_release(j);
  }
  return s;
}

/* The rest of true, false or null from `s`.  Returns the byte after it, or NULL when the
 * buffer ended inside it or it does not parse (the state stored: CG__J_LITERAL or
 * CG__J_FAIL). */
static __attribute__((noinline)) const unsigned char *
cg__js_literal(struct cg__js *j, const unsigned char *s, const unsigned char *end) {
  for (; s < end; s++) {
    if (*s != (unsigned char) j->lit[j->lit_i]) {
      j->state = CG__J_FAIL;
      return NULL;
    }
    if (++j->lit_i == j->lit_n)
      return s + 1;
  }
  j->state = CG__J_LITERAL;
  return NULL;
}

/* Push `n` bytes at `s` through the scanner; each object of a document is applied to
 * `tent` when it closes.  The state is only stored when the buffer ends inside a token
 * (or between two): within a buffer each kind of token is read by its own loop, which
 * goes straight to the next token's (issue 16: half an instruction per byte of a long
 * string, about 100 per member).  Names are compared where they lie in the buffer when
 * they are whole there and plain (no escape, no NUL), and only in the contexts that hold
 * a slot; a count that is plain digits whole in the buffer is read there too.
 *
 * Its code lines count more than its instructions (a host such as curl overflows the
 * instruction cache: each 64-byte line a request runs costs about as much as 40
 * instructions), so names and values, kept or not, share one inlined cg__string_stop, and
 * values no rule reads are read by the same loops, not skipped by a second parser; the
 * function starts on a line of its own, so the lines it takes do not move with the code
 * before it. */
static __attribute__((aligned(64))) void cg__js_feed(struct cg__js *j, struct cg__acc *tent,
                                                    const unsigned char *s, size_t n) {
  const unsigned char *end = s + n, *q;
  const unsigned char *end3 = end - (n < 2 ? n : 2); /* s < end3: 3 bytes from s on */
  const unsigned char *lim16 = CG__LIM16(s, end);
  unsigned char c;
  int key, keep; /* the string being read is a name; its bytes are kept */

/* Blanks (cJSON: any byte up to 0x20) before the token state `st` reads.  None or one
 * (", ", ": ") costs a compare or two; a longer run (indentation), or the end of the
 * buffer, goes to `blanks` with the state stored, which comes back through the switch:
 * one copy of that path, not one at each place (issue 16: code lines). */
#define CG__JS_BLANKS(st)                                                                   \
  do {                                                                                      \
    if (s == end || *s <= ' ') {                                                            \
      if (s < end && ++s < end && *s > ' ')                                                 \
        break;                                                                              \
      j->state = (st);                                                                      \
      goto blanks;                                                                          \
    }                                                                                       \
  } while (0)

  if (0) {
  blanks: /* a run of blanks before the token `j->state` reads (CG__JS_BLANKS) */
    s = cg__blanks(s, end);
    if (s == end)
      return;
  }
  switch (j->state) {
  case CG__J_VALUE: goto value;
  case CG__J_ARR_FIRST: goto arr_first;
  case CG__J_KEY_FIRST: goto key_first;
  case CG__J_KEY: goto key;
  case CG__J_COLON: goto colon;
  case CG__J_AFTER: goto after;
  case CG__J_STRING: goto string;
  case CG__J_NUMBER: goto number;
  case CG__J_LITERAL: goto literal;
  default: /* CG__J_DONE, CG__J_FAIL */
    return;
  }

value:
  CG__JS_BLANKS(CG__J_VALUE);
value_tok: /* s: the value's first byte */
  c = *s++;
  if (c == '"') {
    int slot = j->slot;
    j->slot = -1;
    j->rec = slot >= 0 && cg__slots[slot].kind == CG__K_STR ? cg__slots[slot].arg : -1;
    key = 0;
    keep = j->rec >= 0;
    goto str;
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    int slot = j->slot;
    int num = slot >= 0 && cg__slots[slot].kind == CG__K_NUM ? cg__slots[slot].arg : -1;
    j->slot = -1;
    if (c != '-') { /* digits only, ended in this buffer: read (or skipped) where they lie */
      uint64_t v = (uint64_t) (c - '0');
      /* read as they are found, kept or not (one loop): up to 16 digits, v is
       * cg__count_digits' */
#pragma GCC unroll 1 /* a line of code, not the profile's four (issue 16; the test
                      * of a digit in the body: see cg__string_stop) */
      for (q = s; q < end; q++) {
        unsigned d = (unsigned) (*q - '0');
        if (d > 9)
          break;
        v = v * 10 + d;
      }
      if (q < end && !cg__is_num_byte(*q)) {
        if (num >= 0) {
          j->f.num[num] = q - s >= 16 ? cg__count_digits(s - 1, q)
                        : v < (UINT64_C(1) << 53) ? (int64_t) v : -1;
          j->f.nset |= UINT64_C(1) << num;
        }
        s = q;
        goto value_done;
      }
    }
    s = cg__js_num_start(j, c, s, c == '-' ? s : q, num);
    goto number;
  }
  if ((c == 'n' || c == 't') && end - s >= 3 && memcmp(s, c == 'n' ? "ull" : "rue", 3) == 0) {
    j->slot = -1; /* null or true, whole here: as the literal loop reads it */
    s += 3;
    goto value_done;
  }
  cg__js_value(j, c); /* a container, a literal, or a byte no value starts with */
  switch (j->state) {
  case CG__J_KEY_FIRST: goto key_first;
  case CG__J_ARR_FIRST: goto arr_first;
  case CG__J_LITERAL: goto literal;
  default: /* CG__J_FAIL */
    return;
  }

arr_first:
  CG__JS_BLANKS(CG__J_ARR_FIRST);
  if (*s == ']') {
    c = *s++;
    goto close;
  }
  goto value;

key_first:
  CG__JS_BLANKS(CG__J_KEY_FIRST);
  if (*s == '}') {
    c = *s++;
    goto close;
  }
  goto key_quote;

key:
  CG__JS_BLANKS(CG__J_KEY);
key_quote:
  if (CG_RARE(*s++ != '"')) {
    j->state = CG__J_FAIL;
    return;
  }
key_name: /* s: after the name's opening quote */
  key = 1;
  keep = j->cur_cx != CG__CX_NONE; /* a name no slot has: not even kept */
str: /* s: after the opening quote of a name (`key`) or a value; `keep`: its bytes count */
  q = cg__string_stop(s, end, lim16, 1);
  if (q < end && *q == '"') { /* whole here and plain (no escape, no NUL) */
    size_t len = (size_t) (q - s);
    if (key) { /* compared in place */
      int slot = keep && len < sizeof(j->key) ? cg__slot_of(j->cur_cx, (const char *) s, len, *s)
                                              : -1;
      if (slot >= 0 && !(j->f.seen & (UINT64_C(1) << slot))) {
        j->f.seen |= UINT64_C(1) << slot; /* only a name's first member counts */
        j->slot = slot;
      } else {
        j->slot = -1;
      }
      s = q + 1;
      goto colon;
    }
    if (keep) { /* as cg__js_keep would */
      unsigned char *sl = &j->f.slen[j->rec];
      size_t k = len < 127u - *sl ? len : 127u - *sl;
      /* memmove: a call to libc's copy (its memcpy's code, which the host's own copies
       * run), where GCC would copy inline, in a loop the profile unrolls (five code
       * lines; issue 16) */
      memmove(j->f.str[j->rec] + *sl, s, k);
      *sl = (unsigned char) (*sl + k);
    }
    s = q + 1;
    goto value_done;
  }
  /* an escape, a NUL or the buffer's end: the string loop reads it from its start */
  cg__js_str_start(j, key, keep);
  goto string;

colon:
  /* ':' and a value's first byte, or ": " and it (compact, json.dumps, pretty-printed):
   * what CG__JS_BLANKS and the colon's test read, in one test.  The rest (blanks before
   * the colon, more than one after it, the buffer's end within 3 bytes) is rare, and out
   * of the scanner's lines. */
  if (CG_RARE(s >= end3 || s[0] != ':' || (s[1] <= ' ' && (s[1] != ' ' || s[2] <= ' '))))
    goto colon_rest;
  s += s[1] == ' ' ? 2 : 1;
  goto value_tok;
colon_rest:
  CG__JS_BLANKS(CG__J_COLON);
  if (CG_RARE(*s++ != ':')) {
    j->state = CG__J_FAIL;
    return;
  }
  goto value;

string: /* the rest of a string (a name or a value) */
  if (!(s = cg__js_string(j, s, end)))
    return;
  if (!j->is_key)
    goto value_done;
  goto colon;

number: /* the rest of a number */
  if (!(s = cg__js_number(j, s, end)))
    return;
  goto value_done; /* `*s` is the next token's */

literal: /* the rest of true, false or null */
  if (!(s = cg__js_literal(j, s, end)))
    return;

value_done:
  if (j->depth == 0) {
    j->state = CG__J_DONE; /* what follows the top-level value is ignored */
    return;
  }
after:
  /* ',' and the next name's quote, ", " and it, ",\n" and blanks and it (compact,
   * json.dumps, pretty-printed): what CG__JS_BLANKS, the comma's and the quote's tests
   * read, in fewer tests */
  if (s < end3 && s[0] == ',' && !j->cur_arr) {
    if (s[1] == '"') {
      s += 2;
      goto key_name;
    }
    if (s[1] == ' ' && s[2] == '"') {
      s += 3;
      goto key_name;
    }
    if (s[1] == '\n' && (q = cg__blanks(s + 2, end)) < end && *q == '"') {
      s = q + 1;
      goto key_name;
    }
  }
  CG__JS_BLANKS(CG__J_AFTER);
  c = *s++;
  if (c == ',') {
    if (j->cur_arr)
      goto value;
    goto key;
  }
close: /* `c` should end the container at the current depth */
  cg__js_close(j, tent, c);
  if (j->state == CG__J_AFTER)
    goto after;
  return; /* CG__J_DONE or CG__J_FAIL */
#undef CG__JS_BLANKS
}

/* After the document's last byte: did it parse?  (A number at the top level ends with
 * the document; it says nothing, like any top-level value but an object or array.) */
static int cg__js_end(const struct cg__js *j) {
  return j->state == CG__J_DONE;
}

/* ---- the parser ---- */

enum { CG__MODE_START, CG__MODE_JSON, CG__MODE_SSE, CG__MODE_LINES };

/* The SSE pre-check's prefix cache (cg__may_matter): an earlier event that said nothing. */
#define CG__MM_KEEP 512 /* kept when at most this long (an OpenAI chunk: ~290) */
#define CG__MM_REGS 8   /* and its scan passed over at most this many places (OpenAI: 2) */
struct cg__mm_regs {
  unsigned n; /* places in a, b: [a[k], b[k]) from the event's start, in order */
  uint16_t a[CG__MM_REGS], b[CG__MM_REGS];
};
struct cg__mm {
  struct cg__mm_regs rg;
  char buf[CG__MM_KEEP];
};

/* An encoded body's inflater (cg_usage_encoding), made at its first byte. */
struct cg__z {
  z_stream zs;
  unsigned char head[2];  /* the body's first bytes: zlib's header, which zlib reads before
                           * anything else (a restart as raw deflate begins with them) */
  size_t head_n;
  uint64_t fed;           /* bytes given to the inflater before this chunk */
  int raw_tried; /* deflate: restarted as raw deflate (its first bytes were not zlib's) */
  int done;      /* the stream ended, failed, or passed CG_USAGE_INFLATED_MAX */
  uint64_t out;  /* bytes inflated */
};

struct cg_usage_parser {
  int mode;
  int coding;         /* CG_USAGE_GZIP, CG_USAGE_DEFLATE, 0, or -1: no inflater (out of
                       * memory), nothing read */
  struct cg__z *z;    /* its inflater, NULL until the first byte (or out of memory) */
  struct cg__acc acc;  /* what the documents read so far say (JSON: the body, as read) */
  int bom;             /* bytes of a leading UTF-8 byte order mark consumed (3: done) */
  int skipped;
  int drop;   /* JSON: body too large / SSE: this event too large */
  size_t len; /* JSON: bytes of the body so far / SSE: of the event's data */
  /* SSE: the event's data (JSON bodies are not held) */
  char *buf;
  size_t cap;
  /* SSE line state */
  char field[8];
  size_t field_len;
  int field_long;  /* the field name did not fit: not one we know */
  int in_value;    /* past the line's colon */
  int is_data;     /* this line is a data line and its value goes into buf */
  int value_start; /* next value byte is the first (an optional space is dropped) */
  int line_empty;  /* nothing but an optional '\r' on this line so far */
  int line_cr;     /* the last byte of the line was '\r' */
  int has_data;    /* the pending event has had a data line */
  int data_lf;     /* and more than one: its data holds a '\n' (no line's value does) */
  size_t mlen;     /* SSE: strlen(acc.model), 0 when it holds a '"' (no model shortcut,
                    * cg__may_matter); kept by cg__document, where the model changes */
  size_t mm_len;   /* bytes of the event in mm.buf (0: none; zeroed by a reset) */
  int mm_lf;       /* it may hold a '\n' (set with mm_len; cg__may_matter) */
  struct cg__js js;
  struct cg__acc tent; /* SSE: acc while an event is read, becomes acc if it parses (set
                        * by cg__document before it is read, so not zeroed) */
  struct cg__mm mm; /* only its first mm_len bytes of buf, with mlen and rg, mean anything */
};

/* Zeroed counts made to say nothing yet. */
static void cg__acc_unknown(struct cg__acc *a) {
  a->prompt = a->cread = a->cwrite = a->completion = a->reasoning = a->thoughts = a->tooluse =
    a->total = -1;
}

/* The fresh state, over memory whose buf/cap (an SSE buffer) is `buf`/`cap`. */
static void cg__usage_start(struct cg_usage_parser *p, char *buf, size_t cap) {
  /* Not the scanner's 1 KiB of facts: it sets what it reads before reading it. */
  memset(p, 0, offsetof(struct cg_usage_parser, js));
  p->buf = buf;
  p->cap = cap;
  p->js.nheap = NULL;
  p->js.ncap = 0;
  cg__acc_unknown(&p->acc);
  p->line_empty = 1;
}

struct cg_usage_parser *cg_usage_new(void) {
  struct cg_usage_parser *p = malloc(sizeof(*p));
  if (!p)
    return NULL;
  cg__usage_start(p, NULL, 0);
  return p;
}

/* The inflater's end (cg_usage_encoding). */
static void cg__z_free(struct cg_usage_parser *p) {
  if (CG_RARE(p->z != NULL)) {
    inflateEnd(&p->z->zs);
    free(p->z);
    p->z = NULL;
  }
}

void cg_usage_reset(struct cg_usage_parser *p) {
  char *buf = p->buf;
  size_t cap = p->cap;
  cg__z_free(p);
  if (cap > (size_t) 64 * 1024) { /* a large event's buffer is not kept */
    free(buf);
    buf = NULL;
    cap = 0;
  }
  cg__js_num_release(&p->js);
  cg__usage_start(p, buf, cap);
}

void cg_usage_free(struct cg_usage_parser *p) {
  if (!p)
    return;
  cg__z_free(p);
  free(p->buf);
  cg__js_num_release(&p->js);
  free(p);
}

/* Append to the event buffer, up to `max` bytes; 0 when that would exceed it or memory
 * ran out. */
static int cg__append(struct cg_usage_parser *p, const char *s, size_t n, size_t max) {
  if (n > max || p->len > max - n)
    return 0;
  if (p->len + n > p->cap) {
    size_t cap = p->cap ? p->cap : 4096;
    char *nb;
    while (cap < p->len + n)
      cap *= 2;
    if (cap > max)
      cap = max;
    nb = realloc(p->buf, cap);
    if (!nb)
      return 0;
    p->buf = nb;
    p->cap = cap;
  }
  memcpy(p->buf + p->len, s, n);
  p->len += n;
  return 1;
}

static void cg__release(struct cg_usage_parser *p) {
  free(p->buf);
  p->buf = NULL;
  p->len = p->cap = 0;
}

/* ---- server-sent events ---- */

/* Whether an event's data could say anything: every rule reads a member or a "type"
 * whose bytes hold "usage" (usageMetadata too), "model" (modelVersion too), "error" or
 * "failed" (response.failed); a name or value spelt with \u escapes could hide them, so
 * "\u" counts too.  Other events (text deltas, pings) are never scanned.
 *
 * Two kinds of place say nothing new, so an event with no other is not scanned either
 * (issue 16: every OpenAI chunk names its model and carries "usage":null until the last):
 * - `usage":null`: a member named ...usage whose value is null, no usage object (a name
 *   that decodes to "usage" is spelt with these bytes: any escape but \u is not valid
 *   there, and \u is caught above);
 * - `model":"M"` with M, byte for byte, the model the stream already named (`model`,
 *   `acc`'s; not empty, and without a '"' of its own: one named with an escaped quote
 *   could match bytes that hold more than the value, `a","usage":{...},"x":"b`), in an
 *   event without a backslash (so every '"' starts or ends a string): a member named
 *   ...model whose value is the same string, so a model rule that reads it sets what is
 *   set already.
 * Either with JSON's blanks (RFC 8259 section 2: space, tab, LF, CR) before and after its
 * colon, `usage" : null`, as a server that writes its JSON with Python's json.dumps
 * defaults sends them (cg__spaced_place): the same member with the same value.
 * With only these, the event's object, should it parse, sets nothing (cg__object: no
 * usage object, no error, no "type" holding one of the words, no other model) and leaves
 * the counts as they are; when it does not parse it sets nothing anyway. */
/* JSON's blanks between tokens (RFC 8259 section 2). */
static int cg__json_blank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* cg__word_at's place at `p` ("usage" or "model", the word's 5 bytes there) spelt with
 * blanks before or after its colon, `usage" : null` or `model":  "M"` (`model`/`mlen` as
 * cg__word_at's; mlen 0: no model place): the end of the place, or NULL when the bytes up
 * to `e` are not one.  It reads exactly the place's bytes when it finds one.  Out of line:
 * a compact event (OpenAI's) finds its places without it. */
static __attribute__((noinline)) const char *cg__spaced_place(const char *p, const char *e,
                                                              const char *model, size_t mlen) {
  const char *v = p + 5;
  int is_model = *p == 'm';
  if (v == e || *v++ != '"')
    return NULL;
  while (v < e && cg__json_blank(*v))
    v++;
  if (v == e || *v++ != ':')
    return NULL;
  while (v < e && cg__json_blank(*v))
    v++;
  if (!is_model)
    return e - v >= 4 && memcmp(v, "null", 4) == 0 ? v + 4 : NULL;
  if (!mlen || (size_t) (e - v) < mlen + 2 || *v != '"' || !cg__same(v + 1, model, mlen) ||
      v[1 + mlen] != '"')
    return NULL;
  return v + 2 + mlen;
}

/* Whether a word of cg__may_matter starts at s[q] (the first 'r' of "error"): 1 when it
 * may matter, 0 when there is none or it is one of the two kinds of place that say
 * nothing new (then `*skip` is set past that place). */
static inline __attribute__((always_inline)) int cg__word_at(const char *s, size_t n, size_t q,
                                                            const char *model, size_t mlen,
                                                            const char **skip) {
  const char *p = s + q, *v;
  size_t after = n - q; /* bytes from p on */
  switch (*p) {
  case 'u':
    if (after < 5 || memcmp(p, "usage", 5) != 0)
      return 0;
    if (after >= 11 && memcmp(p + 5, "\":null", 6) == 0) {
      *skip = p + 11; /* no usage object */
      return 0;
    }
    break;
  case 'm':
    if (after < 5 || memcmp(p, "model", 5) != 0)
      return 0;
    if (mlen && after >= 9 + mlen && memcmp(p + 5, "\":\"", 3) == 0 &&
        cg__same(p + 8, model, mlen) && p[8 + mlen] == '"') {
      *skip = p + 9 + mlen; /* the model known already */
      return 0;
    }
    break;
  case 'f':
    return after >= 6 && memcmp(p, "failed", 6) == 0;
  default: /* 'r' */
    return q >= 1 && after >= 4 && memcmp(p - 1, "error", 5) == 0;
  }
  /* "usage" or "model", not compact: blanks around the colon, or a place that matters
   * (a longer name, usageMetadata or modelVersion, is not asked) */
  if (after > 5 && p[5] == '"' && (v = cg__spaced_place(p, s + n, model, mlen))) {
    *skip = v;
    return 0;
  }
  return 1;
}

/* A place cg__word_at passed over (`usage":null` or the known model), [a, b), noted in
 * `rg` for the prefix cache; past CG__MM_REGS, n only counts on (the event is not kept). */
static inline __attribute__((always_inline)) void cg__mm_note(struct cg__mm_regs *rg, size_t a,
                                                             size_t b) {
  if (rg->n < CG__MM_REGS) {
    rg->a[rg->n] = (uint16_t) a;
    rg->b[rg->n] = (uint16_t) b;
  }
  if (rg->n <= CG__MM_REGS)
    rg->n++;
}

/* cg__word_at at a place the scan found (a word's first letters at s[q]), unless the
 * place is inside one passed over already (before `*skip`); a place it passes over is
 * noted in `rg` (NULL: not noted). */
static inline __attribute__((always_inline)) int cg__ask(const char *s, size_t n, size_t q,
                                                        const char *model, size_t mlen,
                                                        const char **skip,
                                                        struct cg__mm_regs *rg) {
  if (s + q < *skip)
    return 0;
  if (cg__word_at(s, n, q, model, mlen, skip))
    return 1;
  if (rg && *skip > s + q) /* it was at most s + q before: this place was passed over */
    cg__mm_note(rg, q, (size_t) (*skip - s));
  return 0;
}

/* ~(the places where the 16 or 32 bytes at a and b are the same), one bit each */
#define CG__NE16(a, b)                                                                      \
  (~(unsigned) _mm_movemask_epi8(_mm_cmpeq_epi8(                                            \
       _mm_loadu_si128((const __m128i *) (const void *) (a)),                               \
       _mm_loadu_si128((const __m128i *) (const void *) (b)))) & 0xffff)
#define CG__NE32(a, b)                                                                      \
  (~(uint32_t) _mm256_movemask_epi8(_mm256_cmpeq_epi8(                                      \
       _mm256_loadu_si256((const __m256i *) (const void *) (a)),                            \
       _mm256_loadu_si256((const __m256i *) (const void *) (b)))))

/* The bytes two events share, byte by byte (short ones): see cg__shared. */
static size_t cg__shared_bytes(const char *s, size_t n, const char *e, size_t m, size_t lim,
                               size_t *suf) {
  size_t pre = 0, k = 0;
  while (pre < lim && s[pre] == e[pre])
    pre++;
  while (k < lim - pre && s[n - 1 - k] == e[m - 1 - k])
    k++;
  *suf = k;
  return pre;
}

#ifdef CG__AVX2
/* Whether the CPU runs AVX2 (asked once; a race only asks twice).  Inlined: its first
 * call's path is cold, and GCC would otherwise keep the whole test out of line, a call
 * several times an event. */
static inline __attribute__((always_inline)) int cg__avx2(void) {
  static int known; /* 0: not asked, 1: no, 2: yes */
  int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
  if (CG_RARE(!v)) { /* once a process: out of the lines of its callers */
    __builtin_cpu_init();
    v = __builtin_cpu_supports("avx2") ? 2 : 1;
    __atomic_store_n(&known, v, __ATOMIC_RELAXED);
  }
  return v == 2;
}

#define CG__X4(c) c, c, c, c
#define CG__X32(c) CG__X4(c), CG__X4(c), CG__X4(c), CG__X4(c), CG__X4(c), CG__X4(c), CG__X4(c), \
                   CG__X4(c)
/* cg__scan_avx2's bytes, 32 of each: read from memory, where a _mm256_set1_epi8 costs
 * three instructions each call (a scan now often reads one round). */
static const unsigned char cg__scan_k[8][32] __attribute__((aligned(32))) = {
  {CG__X32('u')}, {CG__X32('s')}, {CG__X32('m')}, {CG__X32('o')}, {CG__X32('f')},
  {CG__X32('a')}, {CG__X32('r')}, {CG__X32('\\')}};
#undef CG__X32
#undef CG__X4

/* cg__scan (below) 32 places at a time, for an event of at least 33 bytes; -1 when a
 * byte it reads is a backslash (looked for in the same pass: the model shortcut holds
 * only without one; the bytes read are those from `from` up to `to` and a few either
 * side, which the caller knows hold none).  No call in it (cg__word_at inlined), so what
 * it keeps stays in registers. */
__attribute__((target("avx2"), aligned(64))) static int
cg__scan_avx2(const char *s, size_t n, size_t from, size_t to, const char *model, size_t mlen,
              const char **skip, struct cg__mm_regs *rg) {
  size_t i;
  const unsigned char(*k)[32] = cg__scan_k;
  __m256i x, y, pv, bv, bs;
  uint64_t mask;
  __asm__("" : "+r"(k)); /* what k points at is unknown here: loaded, not broadcast */
  bs = _mm256_load_si256((const __m256i *) (const void *) k[7]);
#define CG__K32(i) _mm256_load_si256((const __m256i *) (const void *) k[i])
#define CG__PAIR32(a, b) _mm256_and_si256(_mm256_cmpeq_epi8(x, CG__K32(a)), \
                                          _mm256_cmpeq_epi8(y, CG__K32(b)))
#define CG__PAIRS32                                                                         \
  _mm256_or_si256(_mm256_or_si256(CG__PAIR32(0, 1), CG__PAIR32(2, 3)),                     \
                  _mm256_or_si256(CG__PAIR32(4, 5), CG__PAIR32(6, 6)))
  for (i = from; i < to; i += 32) {
    size_t b = i;               /* the round reads places b to b + 31, bytes to b + 32 */
    uint64_t live = ~UINT64_C(0); /* the places it asks */
    if (i + 33 > n) {
      /* the last places and bytes: one round over some seen already, the last in the
       * loop (i + 32 >= n >= to); places before i were asked (1 <= i - b <= 32) */
      b = n - 33;
      live <<= i - b;
    }
    x = _mm256_loadu_si256((const __m256i *) (const void *) (s + b));
    y = _mm256_loadu_si256((const __m256i *) (const void *) (s + b + 1));
    pv = CG__PAIRS32;
    bv = _mm256_cmpeq_epi8(x, bs);
    if (b != i) /* and the event's last byte */
      bv = _mm256_or_si256(bv, _mm256_cmpeq_epi8(y, bs));
    if (!_mm256_movemask_epi8(_mm256_or_si256(pv, bv)))
      continue;
    if (_mm256_movemask_epi8(bv))
      return -1;
    mask = (uint32_t) _mm256_movemask_epi8(pv) & live;
    if (to - b < 32)
      mask &= (UINT64_C(1) << (to - b)) - 1; /* places from `to` on are not asked */
    for (; mask; mask &= mask - 1)
      if (cg__ask(s, n, b + (size_t) __builtin_ctzll(mask), model, mlen, skip, rg))
        return 1;
  }
  return 0; /* the last byte starts no word */
#undef CG__PAIRS32
#undef CG__PAIR32
#undef CG__K32
}

/* cg__shared_avx2's head: the bytes s and e share at their start, within `lim` >= 32. */
static inline __attribute__((always_inline, target("avx2"))) size_t
cg__head_avx2(const char *s, const char *e, size_t lim) {
  size_t pre = 0;
  uint32_t d;
  for (; pre + 64 <= lim; pre += 64) /* the shared head is long: 64 a round */
    if ((uint32_t) _mm256_movemask_epi8(_mm256_and_si256(
            _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *) (const void *) (s + pre)),
                              _mm256_loadu_si256((const __m256i *) (const void *) (e + pre))),
            _mm256_cmpeq_epi8(
                _mm256_loadu_si256((const __m256i *) (const void *) (s + pre + 32)),
                _mm256_loadu_si256((const __m256i *) (const void *) (e + pre + 32))))) !=
        UINT32_C(0xffffffff))
      break;
  for (;; pre += 32) {
    if (pre == lim)
      break;
    if (pre + 32 > lim) { /* the last bytes, over some seen the same */
      d = CG__NE32(s + lim - 32, e + lim - 32) & (~UINT32_C(0) << (pre - (lim - 32)));
      pre = d ? lim - 32 + (size_t) __builtin_ctz(d) : lim;
      break;
    }
    if ((d = CG__NE32(s + pre, e + pre))) {
      pre += (size_t) __builtin_ctz(d);
      break;
    }
  }
  return pre;
}

/* cg__shared_avx2's tail: the bytes s (`n`) and e (`m`, both at least 32) share at their
 * end, within their last `r` bytes (those after the head).  Fewer than 32 are compared
 * in one masked round, not byte by byte (issue 16: code lines). */
static inline __attribute__((always_inline, target("avx2"))) size_t
cg__tail_avx2(const char *s, size_t n, const char *e, size_t m, size_t r) {
  size_t k = 0;
  uint32_t d;
  if (r < 32) { /* the last 32 bytes of each (n, m >= 32), the last r of them asked */
    d = CG__NE32(s + n - 32, e + m - 32) & (uint32_t) (~UINT64_C(0) << (32 - r));
    k = d ? (size_t) __builtin_clz(d) : r;
  } else {
    for (;; k += 32) {
      if (k == r)
        break;
      if (k + 32 > r) {
        d = CG__NE32(s + n - r, e + m - r) & (~UINT32_C(0) >> (k - (r - 32)));
        k = d ? r - 32 + (size_t) __builtin_clz(d) : r;
        break;
      }
      if ((d = CG__NE32(s + n - k - 32, e + m - k - 32))) {
        k += (size_t) __builtin_clz(d); /* the highest bit: the last byte that differs */
        break;
      }
    }
  }
  return k;
}

/* cg__shared 64 and 32 bytes at a time. */
__attribute__((target("avx2"))) static size_t cg__shared_avx2(const char *s, size_t n,
                                                              const char *e, size_t m,
                                                              size_t lim, size_t *suf) {
  size_t pre;
  if (lim < 32)
    return cg__shared_bytes(s, n, e, m, lim, suf);
  pre = cg__head_avx2(s, e, lim);
  *suf = cg__tail_avx2(s, n, e, m, lim - pre); /* from the ends, not into the head */
  return pre;
}
#endif

/* How many bytes event `s` (`n`) and the kept one `e` (`m`) share at their start, and
 * (*suf) at their end, within the first `lim` bytes (min(n, m)) and without the end
 * reaching into the start in either. */
static size_t cg__shared(const char *s, size_t n, const char *e, size_t m, size_t lim,
                         size_t *suf) {
#ifdef CG__AVX2
  if (cg__avx2())
    return cg__shared_avx2(s, n, e, m, lim, suf);
#endif
#ifdef __SSE2__
  if (lim >= 16) {
    size_t pre = 0, k = 0, r;
    unsigned d;
    for (;; pre += 16) {
      if (pre + 16 > lim) {
        d = CG__NE16(s + lim - 16, e + lim - 16) & (0xffffu << (pre - (lim - 16)));
        pre = d ? lim - 16 + (size_t) __builtin_ctz(d) : lim;
        break;
      }
      if ((d = CG__NE16(s + pre, e + pre))) {
        pre += (size_t) __builtin_ctz(d);
        break;
      }
    }
    r = lim - pre;
    if (r < 16) {
      while (k < r && s[n - 1 - k] == e[m - 1 - k])
        k++;
    } else {
      for (;; k += 16) {
        if (k + 16 > r) {
          d = CG__NE16(s + n - r, e + m - r) & (0xffffu >> (k - (r - 16)));
          k = d ? r - 16 + (size_t) __builtin_clz(d) - 16 : r;
          break;
        }
        if ((d = CG__NE16(s + n - k - 16, e + m - k - 16))) {
          k += (size_t) __builtin_clz(d) - 16; /* 16 bits: the highest, the last differing */
          break;
        }
      }
    }
    *suf = k;
    return pre;
  }
#endif
  return cg__shared_bytes(s, n, e, m, lim, suf);
}

/* cg__may_matter's scan of the places from `from` up to `to` (those before are known to
 * say nothing, and `*skip`, which it moves on, is the whole scan's there), with the model
 * shortcut `model`/`mlen` (mlen 0: none); the backslashes are the caller's business.
 * Each word is found at its first letters ([us]age, [mo]del, [fa]iled, e[rr]or; memchr
 * for the 'e' in all four stopped at most names), 16 places at a time; the tail, and a
 * machine without SSE2, by the first letter alone (a place that is no word's start
 * answers 0 and passes over nothing, so the answer and the places passed over are the
 * same either way). */
static __attribute__((noinline)) int cg__scan(const char *s, size_t n, size_t from,
                                              size_t to, const char *model, size_t mlen,
                                              const char **skip, struct cg__mm_regs *rg) {
  size_t i = from;
#ifdef __SSE2__
  {
    /* Each word's first two letters ("rr" for error: its first 'r'), 16 places at a time:
     * few JSON names hold one of the pairs, so cg__word_at is rarely asked in vain. */
#define CG__PAIR(a, b) _mm_and_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8(a)), \
                                     _mm_cmpeq_epi8(y, _mm_set1_epi8(b)))
    for (; i < to && i + 17 <= n; i += 16) {
      __m128i x = _mm_loadu_si128((const __m128i *) (const void *) (s + i));
      __m128i y = _mm_loadu_si128((const __m128i *) (const void *) (s + i + 1));
      unsigned mask = (unsigned) _mm_movemask_epi8(
          _mm_or_si128(_mm_or_si128(CG__PAIR('u', 's'), CG__PAIR('m', 'o')),
                       _mm_or_si128(CG__PAIR('f', 'a'), CG__PAIR('r', 'r'))));
      if (to - i < 16)
        mask &= (1u << (to - i)) - 1; /* places from `to` on are not asked */
      for (; mask; mask &= mask - 1)
        if (cg__ask(s, n, i + (size_t) __builtin_ctz(mask), model, mlen, skip, rg))
          return 1;
    }
    if (n >= 17 && i < to && i < n - 1) { /* the last places: one more round, over bytes seen */
      size_t b = n - 17;
      __m128i x = _mm_loadu_si128((const __m128i *) (const void *) (s + b));
      __m128i y = _mm_loadu_si128((const __m128i *) (const void *) (s + b + 1));
      unsigned mask = (unsigned) _mm_movemask_epi8(
          _mm_or_si128(_mm_or_si128(CG__PAIR('u', 's'), CG__PAIR('m', 'o')),
                       _mm_or_si128(CG__PAIR('f', 'a'), CG__PAIR('r', 'r'))));
      mask &= ~0u << (i - b); /* places before i were asked already (i - b < 16) */
      if (to - b < 16)
        mask &= (1u << (to - b)) - 1;
      for (; mask; mask &= mask - 1)
        if (cg__ask(s, n, b + (size_t) __builtin_ctz(mask), model, mlen, skip, rg))
          return 1;
      return 0; /* the last byte starts no word */
    }
#undef CG__PAIR
  }
#endif
  for (; i < to && i < n; i++) {
    char c = s[i];
    if ((c == 'u' || c == 'm' || c == 'f' || c == 'r') &&
        cg__ask(s, n, i, model, mlen, skip, rg))
      return 1;
  }
  return 0;
}

/* cg__scan for an event without a backslash from `from` on (the AVX2 round, when it can
 * take the event, also reads a few bytes before `from` and after `to`, which the caller
 * knows hold none); -1 when there is one: the caller then asks cg__may_matter_all. */
static inline __attribute__((always_inline)) int
cg__scan_plain(const char *s, size_t n, size_t from, size_t to, const char *model, size_t mlen,
               const char **skip, struct cg__mm_regs *rg) {
#ifdef CG__AVX2
  if (n >= 33 && cg__avx2())
    return cg__scan_avx2(s, n, from, to, model, mlen, skip, rg);
#endif
  if (memchr(s + from, '\\', n - from))
    return -1;
  return cg__scan(s, n, from, to, model, mlen, skip, rg);
}

/* cg__may_matter's answer over the whole event, backslashes and all. */
static __attribute__((noinline)) int cg__may_matter_all(const char *s, size_t n,
                                                        const char *model, size_t mlen) {
  const char *p, *e = s + n, *skip = s;
  if (memchr(s, '\\', n)) { /* rare in what a model writes: then look closer */
    for (p = s; (p = memchr(p, '\\', (size_t) (e - p))) && p + 1 < e; p += 2)
      if (p[1] == 'u')
        return 1;
    mlen = 0; /* an escaped quote could start or end a string anywhere: no shortcut */
  }
  return cg__scan(s, n, 0, n, model, mlen, &skip, NULL);
}

/* cg__may_matter for event `s` (`n` bytes) of `p`'s stream, with the prefix cache
 * (issue 16): the events of one stream share a long first part (an OpenAI chunk's id,
 * object, created, model, service_tier, system_fingerprint, up to its delta's
 * "content":") and most of their last (its finish_reason and "usage":null), which need
 * not be scanned again.
 *
 * The answer is a pure function of the bytes and of the model, found by one scan over
 * the places in order, each one asked (cg__word_at) unless a place asked before passed
 * over it (`skip`).  The cache (p->mm, p->mm_len) keeps a whole earlier event (m =
 * mm_len bytes, at most CG__MM_KEEP) that said nothing and had no backslash, scanned
 * with the model acc.model still holds, and all the places its scan passed over ([a, b), at
 * most CG__MM_REGS).  What cg__word_at reads at place q when it answers 0 without passing
 * over anything lies in [q - 1, q + CG__MM_READ): "failed" [q, q + 6), "error"
 * [q - 1, q + 4) (only when q >= 1), "usage" and "model" that are no such word
 * [q, q + 5), the first letters [q, q + 2) ("usage" or "model" followed by anything but
 * what it passes over answers 1, which the kept event did not); when it passes over
 * [q, b) it reads exactly [q, b) (`usage":null`, `model":"M"`, blanks around the colon or
 * not: a compact place's compare of the spaced one reads no further); never a byte past the
 * event's end; and its tests of how many bytes follow q hold alike in two events
 * wherever the bytes read lie in what both share at the same distance from the start (or
 * from the end).  For the next event, let P be the length of the prefix it shares with
 * the kept one, and `from` P - CG__MM_READ + 1 (0 when P is shorter), or the start a of
 * a kept place passed over with a < that < b:
 * - by induction over the places before `from`, in order: with `skip` the same in both
 *   scans, each place is a candidate in both or neither (its first letters lie before
 *   P), passed over in both or neither, and when asked answers 0 reading the same bytes:
 *   without passing over, those lie before P; passing over [q, b), b <= `from` (the kept
 *   places are ordered and apart, and none holds `from` strictly inside it), so it
 *   passes over the same place in both.  At `from`, `skip` is at most `from` in both
 *   (the whole scan asked a, when from is a);
 * - so the scan from `from` on, started with nothing passed over, goes as the whole scan
 *   does, and answers for the whole event;
 * - when the two also end with the same S bytes (counted so that they do not reach into
 *   P in either), a place q >= to = n - S + 1 reads only bytes of that shared end, alike
 *   at the kept event's place q + m - n.  If the scan up to `to` left `skip` at most
 *   `to` and no kept place passed over holds e = to + m - n strictly inside it, both
 *   whole scans go alike from there (by the same induction): the kept one said nothing,
 *   so this one says nothing from `to` on either, and its places passed over from there
 *   are the kept one's from e on, moved by n - m.  Else the scan goes on from `to` to
 *   the end, as the whole scan would;
 * - the bytes not scanned lie in [0, P) and in the shared end, and hold no backslash, so
 *   the event has one exactly when the part scanned has one; when it has, the whole scan
 *   reads the event without the model shortcut, and cg__may_matter_all does that, from
 *   the start.
 * An event that says nothing and has no backslash replaces the kept one when it had
 * more than CG__MM_RESCAN bytes to scan (the stream changed its shape; else the kept one
 * serves as well) and fits: its places passed over are the kept event's before `from`,
 * those the scan noted, and the kept event's moved from the shared end; only its bytes
 * after P are copied.  An event that is read (cg__document) may change the model: the
 * cache is dropped there (the only place p->mlen changes) and in cg_usage_reset.
 *
 * cg__sse_line_avx2 finds P before it knows where the event ends, over the bytes its
 * buffer holds from the event's start (min(that, m) of them, at least min(n, m)): P
 * within min(n, m) is the smaller of that and n.  It takes P for bytes without a '\n',
 * so for the place to look for the line's end from, only when the kept event holds none
 * (p->mm_lf 0): it came from one data line (no line's value holds a '\n'), not from
 * an event buffer that joined several (p->data_lf).  The answer itself is as above. */
#define CG__MM_READ 6    /* see above: what a place that says nothing reads from q on */
#define CG__MM_RESCAN 64 /* a kept event that leaves more to scan is replaced */

/* cg__may_matter's scan from `from` up to `to` and, when the kept event (`c`, `m` bytes)
 * answers for the rest, no further (else on to the end); places passed over noted in
 * `note` (NULL: not noted); -1 on a backslash. */
static inline __attribute__((always_inline)) int
cg__mm_scan(const struct cg__mm *c, size_t m, const char *s, size_t n, size_t from, size_t to,
            const char *model, size_t mlen, struct cg__mm_regs *note) {
  const char *skip = s;
  size_t e, k;
  int r = cg__scan_plain(s, n, from, to, model, mlen, &skip, note);
  if (r != 0 || to >= n)
    return r;
  e = to + m - n; /* `to` in the kept event */
  for (k = 0; k < c->rg.n && c->rg.b[k] <= e; k++)
    ;
  if ((size_t) (skip - s) > to || (k < c->rg.n && c->rg.a[k] < e))
    return cg__scan_plain(s, n, to, n, model, mlen, &skip, note);
  for (; note && k < c->rg.n; k++) /* the shared end's places passed over */
    cg__mm_note(note, c->rg.a[k] + n - m, c->rg.b[k] + n - m);
  return 0;
}

/* cg__may_matter when the event may replace the kept one: its places passed over are
 * noted (the kept one's first `keep`, before `from`, and on), and it is kept when it said
 * nothing, had no backslash and fits (with `lf`, cg__may_matter's).  Out of line: most
 * events of a stream do not; on a line of its own, where its lines do not move with the
 * code before it. */
static __attribute__((noinline, aligned(64))) int
cg__may_matter_keep(struct cg_usage_parser *p, const char *s, size_t n, size_t pre, size_t from,
                    size_t to, size_t keep, int lf) {
  struct cg__mm *c = &p->mm;
  struct cg__mm_regs rg, *note = n <= CG__MM_KEEP ? &rg : NULL;
  int r;
  if (note) {
    if (keep)
      rg = c->rg;
    rg.n = (unsigned) keep;
  }
  r = cg__mm_scan(c, p->mm_len, s, n, from, to, p->acc.model, p->mlen, note);
  if (r < 0)
    return cg__may_matter_all(s, n, p->acc.model, p->mlen);
  if (r == 0 && note && rg.n <= CG__MM_REGS) { /* said nothing, no backslash: kept */
    if (n > pre)
      memcpy(c->buf + pre, s + pre, n - pre);
    p->mm_len = n;
    p->mm_lf = lf;
    c->rg = rg;
  }
  return r;
}

/* cg__may_matter with a kept event, given the bytes `s` shares with it at its start
 * (`pre`) and its end (`suf`, cg__shared's). */
static inline __attribute__((always_inline)) int
cg__may_matter_kept(struct cg_usage_parser *p, const char *s, size_t n, size_t pre, size_t suf,
                    int lf) {
  const struct cg__mm *c = &p->mm;
  size_t m = p->mm_len, from, to = n, keep = 0;
  {
    int r;
    from = pre >= CG__MM_READ ? pre - CG__MM_READ + 1 : 0;
    for (; keep < c->rg.n && c->rg.a[keep] < from; keep++)
      if (from < c->rg.b[keep]) { /* inside a place passed over: start where it starts */
        from = c->rg.a[keep];
        break;
      }
    if (suf)
      to = n - suf + 1;
    if (to - from <= CG__MM_RESCAN) { /* the kept event stays */
      r = cg__mm_scan(c, m, s, n, from, to, p->acc.model, p->mlen, NULL);
      return r >= 0 ? r : cg__may_matter_all(s, n, p->acc.model, p->mlen);
    }
  }
  return cg__may_matter_keep(p, s, n, pre, from, to, keep, lf);
}

/* `lf`: whether the event may hold a '\n' (one read from the event buffer may), kept with
 * it: cg__sse_line_avx2 takes the head an event shares with the kept one for bytes
 * without one. */
static int cg__may_matter(struct cg_usage_parser *p, const char *s, size_t n, int lf) {
  size_t m = p->mm_len, pre, suf;
  if (!m)
    return cg__may_matter_keep(p, s, n, 0, 0, n, 0, lf);
  pre = cg__shared(s, n, p->mm.buf, m, n < m ? n : m, &suf);
  return cg__may_matter_kept(p, s, n, pre, suf, lf);
}

/* One whole document (an SSE event's data), as cJSON_ParseWithLength read it: a UTF-8
 * byte order mark skipped when at least 5 bytes long, then any value. */
static __attribute__((noinline)) void cg__document(struct cg_usage_parser *p, const char *s,
                                                   size_t n) {
  if (n >= 5 && memcmp(s, "\xEF\xBB\xBF", 3) == 0)
    s += 3, n -= 3;
  p->mm_len = 0; /* the model may change: the pre-check's cache is not for it */
  p->tent = p->acc;
  cg__js_begin(&p->js);
  cg__js_feed(&p->js, &p->tent, (const unsigned char *) s, n);
  if (cg__js_end(&p->js)) {
    p->acc = p->tent;
    p->mlen = strchr(p->acc.model, '"') ? 0 : strlen(p->acc.model);
  }
}

/* An event's data, `n` bytes at `s` (within its bound): read when it may matter; `lf`
 * as cg__may_matter's. */
static void cg__sse_event(struct cg_usage_parser *p, const char *s, size_t n, int lf) {
  while (n && (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n'))
    s++, n--;
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
    n--;
  if (n && !(n == 6 && memcmp(s, "[DONE]", 6) == 0) && cg__may_matter(p, s, n, lf))
    cg__document(p, s, n);
}

static void cg__sse_dispatch(struct cg_usage_parser *p) {
  if (p->drop) {
    p->skipped = 1;
    p->acc.stale = 1; /* it may have carried usage: only a later report can be trusted */
  } else if (p->has_data) {
    cg__sse_event(p, p->buf, p->len, p->data_lf);
  }
  p->len = 0;
  p->drop = 0;
  p->has_data = p->data_lf = 0;
  if (p->cap > 65536) /* do not keep a large event's memory for the rest of the stream */
    cg__release(p);
}

static void cg__sse_data(struct cg_usage_parser *p, const char *s, size_t n) {
  if (p->drop || !n)
    return;
  /* one byte of slack for a '\r' the end of the line takes back */
  if (!cg__append(p, s, n, CG_USAGE_EVENT_MAX + 1)) {
    p->drop = 1;
    p->len = 0;
  }
}

/* The line's colon (or its end, without one): is this a data line? */
static void cg__sse_field_done(struct cg_usage_parser *p) {
  size_t fl = p->field_len;
  if (fl && p->field[fl - 1] == '\r' && !p->in_value)
    fl--;
  p->is_data = !p->field_long && fl == 4 && memcmp(p->field, "data", 4) == 0;
  if (p->is_data) {
    if (p->has_data) {
      cg__sse_data(p, "\n", 1);
      p->data_lf = 1;
    }
    p->has_data = 1;
  }
}

#ifdef CG__AVX2
/* cg__sse_feed's whole event of one data line and its blank line (the line's value from
 * `v`, the buffer's end `e`) when the kept event holds no '\n' (issue 16): the head it
 * shares with the kept one then holds none either, so the line's end is looked for after
 * it, and the head, found over all the buffer holds from `v` (min(that, m) bytes: the
 * head within min(n, m) is the smaller of it and n), is not compared again.  The rest
 * goes as cg__sse_event would: no trim (blanks at either end take the general path), not
 * "[DONE]" (too short).  Returns where the bytes after the blank line start; the end of
 * the buffer when the line goes on past it (taken as the general path takes it: a data
 * line's value so far, no '\n' in it); or NULL, having done nothing, for an event under
 * 33 bytes, blanks at its ends, a line not followed by a blank line, one over the bound.
 * Flattened: cg__scan_avx2 and the rest inlined (a call and the registers it saves cost
 * some 20 instructions an event); what is rare stays out of line, noinline (cg__document,
 * cg__may_matter_keep, cg__may_matter_all, cg__scan). */
__attribute__((target("avx2"), flatten, aligned(64))) static const char *
cg__sse_line_avx2(struct cg_usage_parser *p, const char *v, const char *e) {
  const char *k = p->mm.buf, *nl = NULL;
  size_t m = p->mm_len, l, pre, i, vn, lim;
  const __m256i lf = _mm256_set1_epi8('\n');
  uint32_t d;
  if (v < e && *v == ' ')
    v++;
  l = (size_t) (e - v);
  if (l < 35 || m < 32)
    return NULL;
  pre = cg__head_avx2(v, k, l < m ? l : m);
  for (i = pre; i + 32 <= l; i += 32)
    if ((d = (uint32_t) _mm256_movemask_epi8(_mm256_cmpeq_epi8(
             _mm256_loadu_si256((const __m256i *) (const void *) (v + i)), lf)))) {
      nl = v + i + __builtin_ctz(d);
      break;
    }
  if (!nl && i < l) { /* the last bytes, over some seen already (i - (l - 32) < 32) */
    d = (uint32_t) _mm256_movemask_epi8(_mm256_cmpeq_epi8(
            _mm256_loadu_si256((const __m256i *) (const void *) (e - 32)), lf)) &
        (~UINT32_C(0) << (i - (l - 32)));
    if (d)
      nl = e - 32 + __builtin_ctz(d);
  }
  if (!nl) { /* as cg__sse_feed's "data:", an optional space and the value */
    memcpy(p->field, "data", 4);
    p->field_len = 4;
    p->line_empty = 0;
    cg__sse_field_done(p);
    p->in_value = 1;
    cg__sse_data(p, v, l);
    p->line_cr = e[-1] == '\r';
    return e;
  }
  if (!((nl + 1 < e && nl[1] == '\n') || (nl + 2 < e && nl[1] == '\r' && nl[2] == '\n')))
    return NULL;
  vn = (size_t) (nl - v) - (nl[-1] == '\r'); /* nl[-1]: "data:" at least lies before v */
  if (vn < 33 || vn > CG_USAGE_EVENT_MAX || (unsigned char) v[0] <= ' ' ||
      (unsigned char) v[vn - 1] <= ' ') /* blanks, and other bytes below '!', declined */
    return NULL;
  if (pre > vn)
    pre = vn;
  lim = vn < m ? vn : m;
  if (cg__may_matter_kept(p, v, vn, pre, cg__tail_avx2(v, vn, k, m, lim - pre), 0))
    cg__document(p, v, vn);
  return nl + (nl[1] == '\n' ? 2 : 3);
}
#endif

static void cg__sse_eol(struct cg_usage_parser *p) {
  if (p->line_empty) {
    cg__sse_dispatch(p);
  } else {
    if (!p->in_value) { /* a line without a colon: the whole line is the field name */
      if (!(p->field_len && p->field[0] == ':'))
        cg__sse_field_done(p);
    } else if (p->is_data && p->line_cr && !p->drop && p->len) {
      p->len--; /* CRLF: the '\r' is not data */
    }
    if (p->is_data && !p->drop && p->len > CG_USAGE_EVENT_MAX) {
      p->drop = 1;
      p->len = 0;
    }
  }
  p->field_len = 0;
  p->field_long = p->in_value = p->is_data = p->value_start = p->line_cr = 0;
  p->line_empty = 1;
}

static void cg__sse_feed(struct cg_usage_parser *p, const char *s, size_t n) {
  while (n) {
    char c = *s;
    if (c == '\n') {
      cg__sse_eol(p);
      s++, n--;
      continue;
    }
    if (c == 'd' && p->line_empty && !p->line_cr && n >= 5 && memcmp(s, "data:", 5) == 0) {
      const char *v = s + 5, *e = s + n, *nl;
#ifdef CG__AVX2
      if (p->mm_len && !p->mm_lf && !p->has_data && !p->drop && !p->len && cg__avx2() &&
          (nl = cg__sse_line_avx2(p, v, e))) {
        n -= (size_t) (nl - s);
        s = nl;
        continue;
      }
#endif
      nl = memchr(v, '\n', n - 5);
      if (nl && !p->has_data && !p->drop && !p->len &&
          ((nl + 1 < e && nl[1] == '\n') || (nl + 2 < e && nl[1] == '\r' && nl[2] == '\n'))) {
        /* A whole event of one data line and its blank line, as most are: read where it
         * lies, not copied (the state after it is the state before it). */
        size_t vn;
        if (v < nl && *v == ' ')
          v++;
        vn = (size_t) (nl - v);
        if (vn && v[vn - 1] == '\r')
          vn--;
        if (vn <= CG_USAGE_EVENT_MAX) {
          cg__sse_event(p, v, vn, 0);
          nl += nl[1] == '\n' ? 2 : 3;
          n -= (size_t) (nl - s);
          s = nl;
          continue;
        }
      }
      /* a line that starts "data:", whole in this buffer: as its five bytes one by one */
      memcpy(p->field, "data", 4);
      p->field_len = 4;
      p->line_empty = 0;
      cg__sse_field_done(p);
      p->in_value = 1;
      p->value_start = 1;
      p->line_cr = 0;
      s += 5, n -= 5;
      continue;
    }
    if (p->line_empty && !p->line_cr && c != '\r' && c != 'd') {
      /* A line that cannot be a data line (its field name, up to a colon or the line's
       * end, does not start with 'd'; or a comment), whole in this buffer: it changes
       * nothing (cg__sse_eol after it leaves the state of a line's start, the state now),
       * so it is passed over, not read byte by byte (Anthropic's "event: ..." lines). */
      const char *nl = memchr(s, '\n', n);
      if (nl) {
        n -= (size_t) (nl + 1 - s);
        s = nl + 1;
        continue;
      }
    }
    if (p->line_empty && !(c == '\r' && !p->line_cr))
      p->line_empty = 0;
    if (!p->in_value) {
      if (c == ':' && p->field_len == 0 && !p->line_cr) {
        /* a comment line: ignored up to its end */
        p->in_value = 1;
        p->is_data = 0;
        p->line_empty = 0;
      } else if (c == ':') {
        cg__sse_field_done(p);
        p->in_value = 1;
        p->value_start = 1;
      } else if (p->field_len < sizeof(p->field)) {
        p->field[p->field_len++] = c;
      } else {
        p->field_long = 1;
      }
      p->line_cr = c == '\r';
      s++, n--;
      continue;
    }
    if (p->value_start) {
      p->value_start = 0;
      if (c == ' ') {
        p->line_cr = 0;
        s++, n--;
        continue;
      }
    }
    { /* the rest of the value, up to the end of the line */
      const char *nl = memchr(s, '\n', n);
      size_t k = nl ? (size_t) (nl - s) : n;
      if (p->is_data)
        cg__sse_data(p, s, k);
      p->line_cr = k && s[k - 1] == '\r';
      s += k, n -= k;
    }
  }
}

void cg_usage_lines(struct cg_usage_parser *p) {
  if (p && p->mode == CG__MODE_START && !p->bom)
    p->mode = CG__MODE_LINES;
}

/* An x-ndjson body's bytes (cg_usage_lines): each line's document read where it lies
 * when the line is whole here, else gathered as an SSE event's data is (cg__sse_data:
 * over CG_USAGE_EVENT_MAX, dropped, and a later report is then the only one trusted). */
static __attribute__((noinline)) void cg__lines_feed(struct cg_usage_parser *p, const char *s,
                                                     size_t n) {
  while (n) {
    /* A line ends at '\n' or '\r' (CRLF: an empty line between, which says nothing):
     * x-ndjson's lines end in '\n', and a body cut by bare CRs is not read as one line
     * whose first document alone counts (helper-60: an older, smaller count). */
    size_t k = 0;
    const char *nl;
    while (k < n && s[k] != '\n' && s[k] != '\r')
      k++;
    nl = k < n ? s + k : NULL;
    if (nl && !p->has_data) { /* a whole line here */
      if (k <= CG_USAGE_EVENT_MAX) {
        cg__sse_event(p, s, k, 0);
      } else {
        p->skipped = 1;
        p->acc.stale = 1;
      }
    } else {
      p->has_data = 1;
      cg__sse_data(p, s, k);
      if (nl)
        cg__sse_dispatch(p);
    }
    if (!nl)
      return;
    s = nl + 1;
    n -= k + 1;
  }
}

void cg_usage_encoding(struct cg_usage_parser *p, int coding) {
  if (p && p->mode == CG__MODE_START && !p->bom && !p->z && !p->coding &&
      (coding == CG_USAGE_GZIP || coding == CG_USAGE_DEFLATE))
    p->coding = coding;
}

static void cg__feed(struct cg_usage_parser *p, const char *buf, size_t len);

/* An encoded body's bytes (cg_usage_encoding): inflated 4 KiB at a time (a host's thread
 * may have a small stack) and read as they come out. */
static __attribute__((noinline)) void cg__z_feed(struct cg_usage_parser *p, const char *buf,
                                                 size_t len) {
  unsigned char out[4096];
  struct cg__z *z = p->z;
  const char *tail = NULL; /* a restart's input after the header bytes: the rest */
  size_t tail_n = 0;
  int r;

  if (!z) {
    if (p->coding < 0) /* out of memory at the first byte: nothing is read */
      return;
    z = p->z = calloc(1, sizeof(*z));
    /* 15 + 32: a gzip or a zlib header, told apart by zlib (gzip's "x-gzip" too) */
    if (!z || inflateInit2(&z->zs, p->coding == CG_USAGE_GZIP ? 15 + 32 : 15) != Z_OK) {
      free(z);
      p->z = NULL;
      p->coding = -1;
      return;
    }
  }
  if (z->head_n < sizeof(z->head)) { /* kept for a restart as raw deflate */
    size_t k = len < sizeof(z->head) - z->head_n ? len : sizeof(z->head) - z->head_n;
    memcpy(z->head + z->head_n, buf, k);
    z->head_n += k;
  }
  z->zs.next_in = (unsigned char *) (uintptr_t) buf;
  z->zs.avail_in = (uInt) len; /* a write callback's chunk: far below 4 GiB */
  while (!z->done) {
    size_t got;
    z->zs.next_out = out;
    z->zs.avail_out = sizeof(out);
    r = inflate(&z->zs, Z_NO_FLUSH);
    got = sizeof(out) - z->zs.avail_out;
    if (r == Z_DATA_ERROR && p->coding == CG_USAGE_DEFLATE && !z->raw_tried && !got &&
        z->zs.total_in <= sizeof(z->head) && z->fed <= z->head_n) {
      /* Its first 2 bytes are no zlib header: "deflate" sent as raw deflate, which
       * libcurl also reads (lib/content_encoding.c).  Again as that, from the body's
       * start: the header bytes kept (every byte fed before this chunk among them), then
       * the rest of this chunk.  Only here, where zlib tells it at the same byte however
       * the body was cut. */
      size_t in_head = z->head_n - (size_t) z->fed; /* this chunk's bytes in head */
      z->raw_tried = 1;
      if (inflateReset2(&z->zs, -15) != Z_OK) {
        z->done = 1;
        break;
      }
      z->zs.next_in = z->head;
      z->zs.avail_in = (uInt) z->head_n;
      tail = buf + in_head;
      tail_n = len - in_head;
      continue;
    }
    if (got) {
      if (got > CG_USAGE_INFLATED_MAX - z->out) {
        z->done = 1; /* a body that inflates past the bound: the rest is not read */
        p->skipped = 1;
        p->acc.stale = 1;
        p->drop = 1;
        break;
      }
      z->out += got;
      cg__feed(p, (const char *) out, got);
      if (p->mode == CG__MODE_JSON && p->drop) {
        z->done = 1; /* a JSON body over its bound: no more of it is read anyway */
        break;
      }
    }
    if (r == Z_STREAM_END || (r != Z_OK && r != Z_BUF_ERROR)) {
      z->done = 1; /* its end (what follows is not read), or bytes zlib cannot read */
      break;
    }
    if (tail && z->zs.avail_in == 0) { /* the header bytes are in: now the rest */
      z->zs.next_in = (unsigned char *) (uintptr_t) tail;
      z->zs.avail_in = (uInt) tail_n;
      tail = NULL;
      continue;
    }
    if (!tail &&
        ((z->zs.avail_in == 0 && z->zs.avail_out != 0) || (r == Z_BUF_ERROR && !got)))
      break; /* all of this chunk in, all it gave out (or no progress): the next chunk */
  }
  z->fed += len;
}

__attribute__((aligned(64))) void cg_usage_feed(struct cg_usage_parser *p, const char *buf,
                                                size_t len) {
  if (!p || !buf)
    return;
  if (CG_RARE(p->coding != 0)) {
    cg__z_feed(p, buf, len);
    return;
  }
  cg__feed(p, buf, len);
}

/* cg_usage_feed of the body as it is (decoded, when it came encoded). */
static void cg__feed(struct cg_usage_parser *p, const char *buf, size_t len) {
  if (CG_RARE(p->mode == CG__MODE_LINES)) {
    cg__lines_feed(p, buf, len);
    return;
  }
  if (p->mode == CG__MODE_START) {
    /* A leading UTF-8 byte order mark is not part of the body (SSE: WHATWG HTML 9.2.6),
     * even when it arrives split across writes. */
    static const char bom[3] = {'\xEF', '\xBB', '\xBF'};
    while (len && p->bom < 3 && *buf == bom[p->bom])
      buf++, len--, p->bom++;
    if (len)
      p->bom = 3; /* only at the very start */
    while (len && (*buf == ' ' || *buf == '\t' || *buf == '\r' || *buf == '\n'))
      buf++, len--;
    if (!len)
      return;
    p->mode = (*buf == '{' || *buf == '[') ? CG__MODE_JSON : CG__MODE_SSE;
    if (p->mode == CG__MODE_JSON)
      cg__js_begin(&p->js);
  }
  if (p->mode == CG__MODE_JSON) {
    if (p->drop || !len)
      return;
    if (len > CG_USAGE_BODY_MAX - p->len) {
      p->drop = 1; /* too large: never cut into wrong numbers */
      p->skipped = 1;
      return;
    }
    p->len += len;
    /* straight into acc (fresh: the body is the only document), which cg_usage_finish
     * makes fresh again unless it parsed: no copy of it, in or out */
    cg__js_feed(&p->js, &p->acc, (const unsigned char *) buf, len);
    return;
  }
  cg__sse_feed(p, buf, len);
}

__attribute__((aligned(64))) void cg_usage_finish(struct cg_usage_parser *p,
                                                  struct cg_usage *out) {
  const struct cg__acc *a;
  int64_t in, outp;
  if (CG_RARE(!out))
    return;
  if (CG_RARE(!p)) {
    memset(out, 0, sizeof(*out));
    out->input = out->cached_input = out->cache_write = out->output = out->reasoning =
      out->total = -1;
    return;
  }
  if (p->mode == CG__MODE_JSON) {
    if (CG_RARE(p->drop || !cg__js_end(&p->js))) { /* what it read does not count */
      memset(&p->acc, 0, sizeof(p->acc));
      cg__acc_unknown(&p->acc);
    }
  } else if (p->mode == CG__MODE_SSE) {
    if (!p->line_empty || p->line_cr)
      cg__sse_eol(p); /* the last line had no newline */
    cg__sse_dispatch(p); /* the last event had no blank line */
    cg__release(p);
  } else if (CG_RARE(p->mode == CG__MODE_LINES)) {
    cg__sse_dispatch(p); /* the last line had no newline */
    cg__release(p);
  }
  a = &p->acc;

  if (CG_RARE(p->mode >= CG__MODE_SSE && a->stale)) {
    /* An event over the bound came after the last usage report and may have carried a
     * newer one: every number stays unknown rather than an older, smaller count. */
    out->input = out->cached_input = out->cache_write = out->output = out->reasoning =
      out->total = -1;
    out->skipped = 1;
    out->error_event = a->error_event;
    memcpy(out->model, a->model, sizeof(out->model));
    return;
  }
  in = a->prompt;
  if (a->anthropic && in >= 0)
    in += (a->cread > 0 ? a->cread : 0) + (a->cwrite > 0 ? a->cwrite : 0);
  if (a->gemini && in >= 0 && a->tooluse > 0)
    in += a->tooluse; /* tool-use prompt tokens are input too */
  outp = a->completion;
  if (a->gemini && a->thoughts >= 0)
    outp = (outp > 0 ? outp : 0) + a->thoughts;
  if (outp < 0 && in >= 0 && a->total >= in)
    outp = a->total - in; /* embeddings report input and total only: the rest is output */
  out->input = in;
  out->cached_input = a->cread;
  out->cache_write = a->cwrite;
  out->output = outp;
  out->reasoning = a->gemini && a->thoughts >= 0 ? a->thoughts : a->reasoning;
  out->total = a->total >= 0 ? a->total : (in >= 0 && outp >= 0 ? in + outp : -1);
  memcpy(out->model, a->model, sizeof(out->model));
  out->error_event = a->error_event;
  /* A stream whose oversized events all came before a later usage report lost nothing. */
  out->skipped = p->mode >= CG__MODE_SSE ? 0 : p->skipped;
}
