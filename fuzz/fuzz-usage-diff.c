/* fuzz-usage-diff.c - the usage scanner (src/usage.c) against the cJSON-tree parser it
 * replaced in issue 16, kept below as the oracle (renamed old_usage_*).  The first byte
 * picks how the rest is cut into chunks for the new parser (the old one gets the body
 * whole); every field of the result must be the same.  A second byte 0x01 makes the rest
 * a stream of events that share their first and last bytes (shared_events). */
#include "fuzz.h"
#include "usage.h"

#define cg_usage_parser old_usage_parser
#define cg_usage_new old_usage_new
#define cg_usage_feed old_usage_feed
#define cg_usage_finish old_usage_finish
#define cg_usage_free old_usage_free
/* ---- the oracle: src/usage.c before issue 16, unchanged ---- */
/* usage.c - the token usage a provider reports in its response body (see usage.h). */

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

enum { CG__MODE_START, CG__MODE_JSON, CG__MODE_SSE };

struct cg_usage_parser {
  int mode;
  /* raw values as the provider names them, -1 unknown; last value wins */
  int64_t prompt, cread, cwrite, completion, reasoning, thoughts, tooluse, total;
  int anthropic, gemini;
  int stale; /* an SSE event over the bound came after the last usage report */
  int bom;   /* bytes of a leading UTF-8 byte order mark consumed (3: done looking) */
  char model[128];
  int error_event, skipped;
  /* JSON document (or SSE event data) buffer */
  char *buf;
  size_t len, cap;
  int drop; /* JSON: body too large / SSE: this event too large */
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
};

static struct cg_usage_parser *cg_usage_new(void) {
  struct cg_usage_parser *p = calloc(1, sizeof(*p));
  if (!p)
    return NULL;
  p->prompt = p->cread = p->cwrite = p->completion = p->reasoning = p->thoughts = p->tooluse =
      p->total = -1;
  p->line_empty = 1;
  return p;
}

static void cg_usage_free(struct cg_usage_parser *p) {
  if (!p)
    return;
  free(p->buf);
  free(p);
}

/* Append to the buffer, up to `max` bytes; 0 when that would exceed it or memory ran out. */
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

/* Set *dst from a non-negative whole-number member `name` of `obj` (at most 2^53, which a
 * double holds exactly); absent, null, fractional or anything else: left alone. */
static void cg__num(const cJSON *obj, const char *name, int64_t *dst) {
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (cJSON_IsNumber(n) && n->valuedouble >= 0 && n->valuedouble < 9007199254740992.0 &&
      n->valuedouble == (double) (int64_t) n->valuedouble)
    *dst = (int64_t) n->valuedouble;
}

static void cg__model(struct cg_usage_parser *p, const cJSON *obj, const char *name) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (cJSON_IsString(m) && m->valuestring[0]) {
    size_t n = strlen(m->valuestring);
    if (n >= sizeof(p->model))
      n = sizeof(p->model) - 1;
    memcpy(p->model, m->valuestring, n);
    p->model[n] = '\0';
  }
}

/* An OpenAI (Chat, Completions, Embeddings, Responses) or Anthropic "usage" object. */
static void cg__usage(struct cg_usage_parser *p, const cJSON *u, int anthropic) {
  const cJSON *d;
  if (!cJSON_IsObject(u))
    return;
  p->stale = 0; /* a usage report after any skipped event */
  /* Anthropic's cache keys mark Anthropic, unless prompt_tokens is a number: a gateway's
   * OpenAI-format usage (src/usage.c cg__usage), whose prompt_tokens then win. */
  if ((cJSON_GetObjectItemCaseSensitive(u, "cache_read_input_tokens") ||
       cJSON_GetObjectItemCaseSensitive(u, "cache_creation_input_tokens")) &&
      !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens")))
    anthropic = 1;
  if (anthropic)
    p->anthropic = 1;
  /* both may be there: Anthropic's input_tokens wins, or an OpenAI-format prompt_tokens */
  cg__num(u, anthropic ? "prompt_tokens" : "input_tokens", &p->prompt);
  cg__num(u, anthropic ? "input_tokens" : "prompt_tokens", &p->prompt);
  cg__num(u, "completion_tokens", &p->completion);
  cg__num(u, "output_tokens", &p->completion);
  cg__num(u, "total_tokens", &p->total);
  cg__num(u, "cache_read_input_tokens", &p->cread);
  cg__num(u, "cache_creation_input_tokens", &p->cwrite);
  d = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens_details");
  if (cJSON_IsObject(d))
    cg__num(d, "cached_tokens", &p->cread);
  d = cJSON_GetObjectItemCaseSensitive(u, "input_tokens_details");
  if (cJSON_IsObject(d))
    cg__num(d, "cached_tokens", &p->cread);
  d = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens_details");
  if (cJSON_IsObject(d))
    cg__num(d, "reasoning_tokens", &p->reasoning);
  d = cJSON_GetObjectItemCaseSensitive(u, "output_tokens_details");
  if (cJSON_IsObject(d))
    cg__num(d, "reasoning_tokens", &p->reasoning);
}

/* One JSON object: a whole response, one SSE event's data, or one element of an array
 * (Gemini's streamGenerateContent without alt=sse answers a JSON array of chunks). */
static void cg__object(struct cg_usage_parser *p, const cJSON *o) {
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
  const char *t = cJSON_IsString(type) ? type->valuestring : "";
  const cJSON *um = cJSON_GetObjectItemCaseSensitive(o, "usageMetadata");
  const cJSON *r;

  /* Anthropic's "type": "error" event, a failed Responses event, or an "error" object
   * (OpenAI and Gemini chunks, a Responses object with "status": "failed"). */
  if (strcmp(t, "error") == 0 || strcmp(t, "response.failed") == 0 ||
      cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "error")))
    p->error_event = 1;

  if (cJSON_IsObject(um)) { /* Gemini */
    p->gemini = 1;
    p->stale = 0;
    cg__num(um, "toolUsePromptTokenCount", &p->tooluse);
    cg__num(um, "promptTokenCount", &p->prompt);
    cg__num(um, "candidatesTokenCount", &p->completion);
    cg__num(um, "thoughtsTokenCount", &p->thoughts);
    cg__num(um, "cachedContentTokenCount", &p->cread);
    cg__num(um, "totalTokenCount", &p->total);
  }
  cg__model(p, o, "modelVersion");

  if (strcmp(t, "message_start") == 0) {
    r = cJSON_GetObjectItemCaseSensitive(o, "message");
    if (cJSON_IsObject(r)) {
      /* message_start's output_tokens is a placeholder (1): only message_delta counts */
      int64_t output = p->completion;
      cg__model(p, r, "model");
      cg__usage(p, cJSON_GetObjectItemCaseSensitive(r, "usage"), 1);
      p->completion = output;
    }
    return;
  }
  if (strncmp(t, "response.", 9) == 0) { /* Responses API streaming events */
    r = cJSON_GetObjectItemCaseSensitive(o, "response");
    if (cJSON_IsObject(r)) {
      cg__model(p, r, "model");
      cg__usage(p, cJSON_GetObjectItemCaseSensitive(r, "usage"), 0);
    }
    return;
  }
  cg__model(p, o, "model");
  cg__usage(p, cJSON_GetObjectItemCaseSensitive(o, "usage"),
            strcmp(t, "message") == 0 || strcmp(t, "message_delta") == 0);
}

static void cg__document(struct cg_usage_parser *p, const char *s, size_t n) {
  cJSON *j = cJSON_ParseWithLength(s, n);
  const cJSON *e;
  if (!j)
    return;
  if (cJSON_IsObject(j))
    cg__object(p, j);
  else if (cJSON_IsArray(j)) {
    cJSON_ArrayForEach(e, j) {
      if (cJSON_IsObject(e))
        cg__object(p, e);
    }
  }
  cJSON_Delete(j);
}

/* ---- server-sent events ---- */

static void cg__sse_dispatch(struct cg_usage_parser *p) {
  if (p->drop) {
    p->skipped = 1;
    p->stale = 1; /* it may have carried usage: only a later report can be trusted */
  } else if (p->has_data) {
    const char *s = p->buf;
    size_t n = p->len;
    while (n && (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n'))
      s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
      n--;
    if (n && !(n == 6 && memcmp(s, "[DONE]", 6) == 0))
      cg__document(p, s, n);
  }
  p->len = 0;
  p->drop = 0;
  p->has_data = 0;
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
    if (p->has_data)
      cg__sse_data(p, "\n", 1);
    p->has_data = 1;
  }
}

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

static void cg_usage_feed(struct cg_usage_parser *p, const char *buf, size_t len) {
  if (!p || !buf)
    return;
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
  }
  if (p->mode == CG__MODE_JSON) {
    if (p->drop || !len)
      return;
    if (!cg__append(p, buf, len, CG_USAGE_BODY_MAX)) {
      p->drop = 1;
      p->skipped = 1;
      cg__release(p);
    }
    return;
  }
  cg__sse_feed(p, buf, len);
}

static void cg_usage_finish(struct cg_usage_parser *p, struct cg_usage *out) {
  int64_t in, outp;
  if (!out)
    return;
  memset(out, 0, sizeof(*out));
  out->input = out->cached_input = out->cache_write = out->output = out->reasoning =
    out->total = -1;
  if (!p)
    return;
  if (p->mode == CG__MODE_JSON) {
    if (!p->drop && p->len)
      cg__document(p, p->buf, p->len);
    cg__release(p);
  } else if (p->mode == CG__MODE_SSE) {
    if (!p->line_empty || p->line_cr)
      cg__sse_eol(p); /* the last line had no newline */
    cg__sse_dispatch(p); /* the last event had no blank line */
    cg__release(p);
  }

  if (p->mode == CG__MODE_SSE && p->stale) {
    /* An event over the bound came after the last usage report and may have carried a
     * newer one: every number stays unknown rather than an older, smaller count. */
    out->skipped = 1;
    out->error_event = p->error_event;
    memcpy(out->model, p->model, sizeof(out->model));
    return;
  }
  in = p->prompt;
  if (p->anthropic && in >= 0)
    in += (p->cread > 0 ? p->cread : 0) + (p->cwrite > 0 ? p->cwrite : 0);
  if (p->gemini && in >= 0 && p->tooluse > 0)
    in += p->tooluse; /* tool-use prompt tokens are input too */
  outp = p->completion;
  if (p->gemini && p->thoughts >= 0)
    outp = (outp > 0 ? outp : 0) + p->thoughts;
  if (outp < 0 && in >= 0 && p->total >= in)
    outp = p->total - in; /* embeddings report input and total only: the rest is output */
  out->input = in;
  out->cached_input = p->cread;
  out->cache_write = p->cwrite;
  out->output = outp;
  out->reasoning = p->gemini && p->thoughts >= 0 ? p->thoughts : p->reasoning;
  out->total = p->total >= 0 ? p->total : (in >= 0 && outp >= 0 ? in + outp : -1);
  memcpy(out->model, p->model, sizeof(out->model));
  out->error_event = p->error_event;
  /* A stream whose oversized events all came before a later usage report lost nothing. */
  out->skipped = p->mode == CG__MODE_SSE ? 0 : p->skipped;
}
/* ---- end of the oracle ---- */
#undef cg_usage_parser
#undef cg_usage_new
#undef cg_usage_feed
#undef cg_usage_finish
#undef cg_usage_free

static void run_new(const uint8_t *data, size_t size, size_t step, struct cg_usage *out) {
  struct cg_usage_parser *p = cg_usage_new();
  size_t off = 0;
  if (!p)
    abort();
  while (off < size) {
    size_t n = step && step < size - off ? step : size - off;
    cg_usage_feed(p, (const char *) data + off, n);
    off += n;
    if (step)
      step = step * 7 % 61 + 1; /* uneven chunks */
  }
  cg_usage_finish(p, out);
  cg_usage_free(p);
}

/* Events that share their first and last bytes, as one stream's do (usage.c's prefix
 * cache in the SSE pre-check): `r` is a head, parts and a tail, the parts after 0x01
 * bytes, the tail after the head's first 0x02; each part makes an event "data: " head
 * part tail, at most 64 of them.  The stream, after the byte `first`, is malloc'd into
 * *out; its length, `first` included. */
static size_t shared_events(uint8_t first, const uint8_t *r, size_t n, uint8_t **out) {
  const uint8_t *sep = memchr(r, 0x01, n), *e = r + n, *head = r, *tail, *part;
  size_t hl = sep ? (size_t) (sep - r) : n, tl = 0, len = 1, k = 0;
  uint8_t *b;
  if ((tail = memchr(r, 0x02, hl))) {
    tl = hl - (size_t) (tail - r) - 1;
    hl = (size_t) (tail - r);
    tail++;
  }
  b = malloc(65 * (hl + tl + 8) + n + 1);
  if (!b)
    abort();
  b[0] = first;
  for (part = sep ? sep + 1 : e; k < 64; k++) { /* no 0x01: one event, head and tail */
    const uint8_t *next = memchr(part, 0x01, (size_t) (e - part));
    size_t pl = (size_t) ((next ? next : e) - part);
    memcpy(b + len, "data: ", 6), len += 6;
    memcpy(b + len, head, hl), len += hl;
    memcpy(b + len, part, pl), len += pl;
    if (tl)
      memcpy(b + len, tail, tl), len += tl;
    memcpy(b + len, "\n\n", 2), len += 2;
    if (!next)
      break;
    part = next + 1;
  }
  *out = b;
  return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct cg_usage want, got;
  struct old_usage_parser *o;
  uint8_t *gen = NULL;
  if (size < 1)
    return 0;
  if (size >= 2 && data[1] == 0x01) { /* the rest makes events that share bytes */
    size = shared_events(data[0], data + 2, size - 2, &gen);
    data = gen;
  }
  o = old_usage_new();
  if (!o)
    abort();
  old_usage_feed(o, (const char *) data + 1, size - 1);
  old_usage_finish(o, &want);
  old_usage_free(o);
  run_new(data + 1, size - 1, data[0] % 64, &got);
  CG_FUZZ_CHECK(want.input == got.input && want.cached_input == got.cached_input &&
                    want.cache_write == got.cache_write && want.output == got.output &&
                    want.reasoning == got.reasoning && want.total == got.total &&
                    want.error_event == got.error_event && want.skipped == got.skipped &&
                    strcmp(want.model, got.model) == 0,
                "old and new differ: in %lld/%lld cached %lld/%lld write %lld/%lld "
                "out %lld/%lld reasoning %lld/%lld total %lld/%lld err %d/%d skipped %d/%d "
                "model '%s'/'%s'",
                (long long) want.input, (long long) got.input, (long long) want.cached_input,
                (long long) got.cached_input, (long long) want.cache_write,
                (long long) got.cache_write, (long long) want.output, (long long) got.output,
                (long long) want.reasoning, (long long) got.reasoning, (long long) want.total,
                (long long) got.total, want.error_event, got.error_event, want.skipped,
                got.skipped, want.model, got.model);
  free(gen);
  return 0;
}
