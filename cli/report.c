/* report.c - `curlguard report` aggregation: one pass over the lines, bounded memory
 * (see report.h for the definitions and the caps). */
#include "report.h"
#include "report-series.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Twice the longest line: a line of up to CG_REPORT_LINE_MAX bytes always fits with
 * room to read more behind it. */
#define CG_READ_BUF (2 * CG_REPORT_LINE_MAX)

struct cg_report *cg_report_new(void) {
  struct cg_report *r = calloc(1, sizeof(*r));

  if (!r)
    return NULL;
  r->total.latency = malloc(sizeof(struct cg_hist));
  r->alerts = cJSON_CreateArray();
  if (!r->total.latency || !r->alerts) {
    cg_report_free(r);
    return NULL;
  }
  cg_hist_init(r->total.latency);
  cg_rmap_init(&r->digests, CG_REPORT_DIGEST_SLOTS);
  cg_rmap_init(&r->dup_calls, CG_REPORT_DUP_SLOTS);
  cg_rmap_init(&r->tasks, CG_REPORT_TASK_SLOTS);
  cg_rmap_init(&r->pending, CG_REPORT_CALL_SLOTS);
  cg_rmap_init(&r->minutes, CG_REPORT_MINUTE_SLOTS);
  r->source = "-";
  return r;
}

void cg_report_free(struct cg_report *r) {
  if (!r)
    return;
  for (size_t i = 0; i < r->ngroups; i++) {
    free(r->group[i].pool);
    free(r->group[i].model);
    free(r->group[i].s.latency);
    for (size_t k = 0; k < r->group[i].nvariants; k++)
      free(r->group[i].variant[k]);
  }
  free(r->group);
  free(r->total.latency);
  for (size_t i = 0; i < r->noutcomes; i++)
    free(r->outcome_name[i]);
  for (size_t i = 0; i < r->ntask_examples; i++)
    free(r->task_example[i]);
  cg_rmap_free(&r->digests);
  cg_rmap_free(&r->dup_calls);
  cg_rmap_free(&r->tasks);
  cg_rmap_free(&r->pending);
  cg_rmap_free(&r->minutes);
  free(r->minute);
  free(r->first_bad);
  cJSON_Delete(r->alerts);
  cg_series_free(r->series);
  free(r);
}

void cg_report_source(struct cg_report *r, const char *name) {
  r->source = name;
  r->source_line = 0;
}

void cg_report_alert(struct cg_report *r, cJSON *alert) {
  if (!alert)
    return;
  r->nalerts++;
  if (r->nalerts > CG_REPORT_MAX_ALERTS) {
    r->alerts_dropped++;
    cJSON_Delete(alert);
    return;
  }
  cJSON_AddItemToArray(r->alerts, alert);
}

double cg_report_at_risk(const struct cg_rstats *s) {
  if (s->at_risk_attempts == 0)
    return 0;
  if (s->priced == 0)
    return NAN;
  return (double) s->at_risk_attempts * (s->cost_usd / (double) s->priced);
}

void cg_report_risk(const struct cg_report *r, long group, double *usd, uint64_t *unestimated) {
  *usd = 0;
  *unestimated = 0;
  /* Bounded by the number of groups. */
  for (size_t i = 0; i < r->ngroups; i++) {
    double g;
    if (group >= 0 && (size_t) group != i)
      continue;
    g = cg_report_at_risk(&r->group[i].s);
    if (isnan(g))
      *unestimated += r->group[i].s.at_risk_attempts;
    else
      *usd += g;
  }
  if (group >= 0 && *unestimated)
    *usd = NAN;
}

/* ---- groups and outcomes ---- */

/* `n` decimal digits at `s`. */
static int cg__all_digits(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9')
      return 0;
  return 1;
}

static int cg__two(const char *s) {
  return (s[0] - '0') * 10 + (s[1] - '0');
}

/* Two-digit month at `m` and day at `d` (digits already checked). */
static int cg__month_day(const char *m, const char *d) {
  int mm = cg__two(m), dd = cg__two(d);
  return mm >= 1 && mm <= 12 && dd >= 1 && dd <= 31;
}

size_t cg_model_family(const char *m, size_t len) {
  const char *e = m + len;

  /* -YYYY-MM-DD (OpenAI: gpt-4o-2024-08-06, o3-2025-04-16) */
  if (len > 11 && e[-11] == '-' && cg__all_digits(e - 10, 4) && e[-6] == '-' &&
      cg__all_digits(e - 5, 2) && e[-3] == '-' && cg__all_digits(e - 2, 2) &&
      cg__month_day(e - 5, e - 2))
    return len - 11;
  /* -YYYYMMDD (Anthropic: claude-sonnet-4-20250514), @YYYYMMDD (Vertex AI) */
  if (len > 9 && (e[-9] == '-' || e[-9] == '@') && cg__all_digits(e - 8, 8) &&
      (e[-8] == '1' || e[-8] == '2') && cg__month_day(e - 4, e - 2))
    return len - 9;
  /* -MM-DD (Gemini previews: gemini-2.5-flash-preview-05-20) */
  if (len > 6 && e[-6] == '-' && cg__all_digits(e - 5, 2) && e[-3] == '-' &&
      cg__all_digits(e - 2, 2) && cg__month_day(e - 5, e - 2))
    return len - 6;
  /* -MMDD (gpt-4-0613, gpt-3.5-turbo-0125), -YYMM (mistral-large-2407) */
  if (len > 5 && e[-5] == '-' && cg__all_digits(e - 4, 4) &&
      (cg__month_day(e - 4, e - 2) ||
       (cg__two(e - 4) >= 20 && cg__two(e - 4) <= 39 && cg__two(e - 2) >= 1 &&
        cg__two(e - 2) <= 12)))
    return len - 5;
  if (len > 7 && memcmp(e - 7, "-latest", 7) == 0)
    return len - 7;
  return len;
}

/* 64-bit FNV-1a of `len` bytes; a NULL string (JSON null) hashes apart from any string. */
static uint64_t cg__hashn(const char *s, size_t len) {
  uint64_t h = 0xcbf29ce484222325ULL;
  if (!s)
    return 0x6e756c6c6e756c6cULL;
  for (size_t i = 0; i < len; i++) {
    h ^= (unsigned char) s[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

/* NULL-aware equality of group key `a` (NUL-terminated) and `b` (`blen` bytes). */
static int cg__key_eq(const char *a, const char *b, size_t blen) {
  if (!a || !b)
    return a == b;
  return strncmp(a, b, blen) == 0 && a[blen] == '\0';
}

static char *cg__strndup(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

/* Remember raw model name `model` under group `g` (the first CG_REPORT_MAX_VARIANTS). */
static void cg__variant(struct cg_rgroup *g, const char *model) {
  if (!model || g->other)
    return;
  /* Bounded by CG_REPORT_MAX_VARIANTS. */
  for (size_t i = 0; i < g->nvariants; i++)
    if (strcmp(g->variant[i], model) == 0)
      return;
  if (g->nvariants == CG_REPORT_MAX_VARIANTS) {
    g->variants_capped = 1;
    return;
  }
  if ((g->variant[g->nvariants] = strdup(model)))
    g->nvariants++;
}

/* The index of group (pool, family of model), created if new; the `other` group once the
 * cap is reached; -1 when out of memory. */
static long cg__group(struct cg_report *r, const char *pool, const char *model) {
  size_t plen = pool ? strlen(pool) : 0, mlen = model ? strlen(model) : 0;
  size_t flen = model ? cg_model_family(model, mlen) : 0;
  uint64_t h = cg__hashn(pool, plen) * 31 + cg__hashn(model, flen);
  struct cg_rgroup *g;
  size_t i;
  int other = 0;

  /* Bounded by CG_REPORT_MAX_GROUPS + 1; real logs have a handful of groups. */
  for (i = 0; i < r->ngroups; i++) {
    g = &r->group[i];
    if (g->hash == h && !g->other && cg__key_eq(g->pool, pool, plen) &&
        cg__key_eq(g->model, model, flen)) {
      cg__variant(g, model);
      return (long) i;
    }
  }
  if (r->ngroups >= CG_REPORT_MAX_GROUPS) {
    r->groups_capped = 1;
    if (r->ngroups > CG_REPORT_MAX_GROUPS)
      return CG_REPORT_MAX_GROUPS; /* the other group, created below the first time */
    other = 1;
  }
  if (r->ngroups % 16 == 0) {
    g = realloc(r->group, (r->ngroups + 16) * sizeof(*g));
    if (!g)
      return -1;
    r->group = g;
  }
  g = &r->group[r->ngroups];
  memset(g, 0, sizeof(*g));
  g->other = other;
  g->hash = other ? 0 : h;
  g->s.latency = malloc(sizeof(struct cg_hist));
  if (!other) {
    g->pool = pool ? cg__strndup(pool, plen) : NULL;
    g->model = model ? cg__strndup(model, flen) : NULL;
  }
  if (!g->s.latency || (pool && !other && !g->pool) || (model && !other && !g->model)) {
    free(g->pool);
    free(g->model);
    free(g->s.latency);
    return -1;
  }
  cg_hist_init(g->s.latency);
  cg__variant(g, model);
  return (long) r->ngroups++;
}

/* Interned id of `name`; CG_REPORT_MAX_OUTCOMES ("other") when the table is full. */
static size_t cg__outcome(struct cg_report *r, const char *name) {
  size_t i;
  for (i = 0; i < r->noutcomes; i++)
    if (strcmp(r->outcome_name[i], name) == 0)
      return i;
  if (r->noutcomes == CG_REPORT_MAX_OUTCOMES || !(r->outcome_name[i] = strdup(name)))
    return CG_REPORT_MAX_OUTCOMES;
  return r->noutcomes++;
}

/* ---- accounting ---- */

/* An answer the client got ("ok") to a model call that did not say what it used: a stream
 * without its usage chunk, a body over the guard's parser bounds.  The provider billed it
 * by an amount nobody knows.  GET and HEAD fetch what exists and are not billed (the guard
 * does not read their usage). */
static int cg__unmetered(const struct cg_rrec *x) {
  return !x->possibly_billed && x->model && x->total_tokens == CG_RNULL &&
         x->prompt_tokens == CG_RNULL && strcmp(x->outcome, "ok") == 0 &&
         !(x->method && (strcmp(x->method, "GET") == 0 || strcmp(x->method, "HEAD") == 0));
}

static int cg__billed(const struct cg_rrec *x) {
  return x->possibly_billed || x->total_tokens != CG_RNULL || x->prompt_tokens != CG_RNULL ||
         cg__unmetered(x);
}

/* Token sums saturate at UINT64_MAX: a log of hostile counts (each at most 2^53 - 1)
 * would otherwise wrap to a total smaller than one record's. */
static void cg__add_tokens(uint64_t *sum, int64_t v) {
  if (v != CG_RNULL && __builtin_add_overflow(*sum, (uint64_t) v, sum))
    *sum = UINT64_MAX;
}

/* Everything a record adds to one set of counters. */
static void cg__stats_add(struct cg_rstats *s, const struct cg_rrec *x, size_t outcome) {
  int usage = x->total_tokens != CG_RNULL || x->prompt_tokens != CG_RNULL;

  s->attempts++;
  s->retries += x->attempt > 1;
  if (x->final) {
    s->calls++;
    s->host_retry_calls += x->repeat_of != NULL;
  }
  s->outcome[outcome]++;
  s->billed += cg__billed(x);
  s->billed_retries += cg__billed(x) && x->attempt > 1;
  s->usage_attempts += usage;
  s->possibly_billed += x->possibly_billed != 0;
  s->unmetered += cg__unmetered(x);
  s->at_risk_attempts += (x->possibly_billed || cg__unmetered(x)) && isnan(x->cost_usd);
  cg__add_tokens(&s->prompt_tokens, x->prompt_tokens);
  cg__add_tokens(&s->completion_tokens, x->completion_tokens);
  cg__add_tokens(&s->total_tokens, x->total_tokens);
  cg__add_tokens(&s->cached_tokens, x->cached_tokens);
  if (!isnan(x->cost_usd)) {
    s->priced++;
    s->cost_usd += x->cost_usd;
  } else if (x->prompt_tokens != CG_RNULL && x->completion_tokens != CG_RNULL) {
    s->unpriced++; /* whole usage, no cost: the price table lacks the model (partial usage,
                      such as a stream cut after its input count, is not priced either) */
  }
  if (x->duration_ms == CG_RNULL)
    s->latency_missing++;
  else
    cg_hist_add(s->latency, x->duration_ms);
}

/* A body billed in more than one call is a duplicate, counted in the group of its first
 * billed attempt.  The digest map keeps the first call's request id hash (its top 53
 * bits) with the group; the request ids of other calls go into a set of (digest,
 * request) pairs, so each extra call counts once however many of its attempts were
 * billed, and the count (distinct calls - 1) does not depend on the input order. */
static void cg__digest(struct cg_report *r, const struct cg_rrec *x, long gi) {
  int created;
  uint64_t dh = cg_rhash(x->body_digest), rh = cg_rhash(x->request_id);
  uint64_t *v = cg_rmap_put(&r->digests, dh, &created), *pair;
  const uint64_t low = 0x7ff, counted = 0x400;
  size_t g;

  if (!v)
    return; /* the cap: r->digests.full says the counts are lower bounds */
  if (created) {
    *v = (rh & ~low) | (uint64_t) gi;
    return;
  }
  if ((*v & ~low) == (rh & ~low))
    return; /* the first call again: a retry (billed_retries), not a duplicate */
  pair = cg_rmap_put(&r->dup_calls, dh ^ (rh * 0x9e3779b97f4a7c15ULL), &created);
  if (!pair || !created)
    return; /* this extra call was counted already (or the pair set is full) */
  g = (size_t) (*v & 0x3ff);
  if (!(*v & counted)) {
    *v |= counted;
    r->group[g].s.dup_digests++;
    r->total.dup_digests++;
  }
  r->group[g].s.dup_extra_calls++;
  r->total.dup_extra_calls++;
}

/* A task with billed attempts of two different request ids has more than one billed
 * call.  Exact for the "more than one" question without a set of request ids: the map
 * keeps the last billed request id per task and a bit once the task was counted. */
static void cg__task(struct cg_report *r, const struct cg_rrec *x) {
  int created;
  uint64_t *v = cg_rmap_put(&r->tasks, cg_rhash(x->task_id), &created);
  uint64_t req = cg_rhash(x->request_id) & ~(uint64_t) 1;

  if (!v)
    return;
  if (created) {
    *v = req;
    return;
  }
  if ((*v & ~(uint64_t) 1) == req)
    return;
  if (!(*v & 1)) {
    r->tasks_multi++;
    if (r->ntask_examples < CG_REPORT_TASK_EXAMPLES &&
        (r->task_example[r->ntask_examples] = strdup(x->task_id)))
      r->ntask_examples++;
  }
  *v = req | 1;
}

/* Calls without a final record, whatever the order of the records: an entry per
 * request id whose records are not all seen yet, holding its group (bits 0-9), whether
 * its final record was seen (bit 10), that record's attempt n (bits 11-34) and the
 * number of other records seen (bits 35-63).  A call is complete, and forgotten, once
 * its final record and n - 1 others were seen; so the map holds the calls in flight (a
 * log in order) or waiting for their earlier attempts (a log read backwards), not every
 * call.  At the end, entries without a final record are the unfinished calls. */
#define CG_PEND_FINAL ((uint64_t) 1 << 10)
#define CG_PEND_ATTEMPT(v) (((v) >> 11) & 0xffffff)
#define CG_PEND_OTHERS(v) ((v) >> 35)

static void cg__pending(struct cg_report *r, const struct cg_rrec *x, long gi) {
  int created;
  uint64_t h = cg_rhash(x->request_id), *v, others;

  if (x->final && x->attempt == 1 && !cg_rmap_get(&r->pending, h))
    return; /* a call of one attempt (most): complete as soon as seen */
  v = cg_rmap_put(&r->pending, h, &created);
  if (!v)
    return; /* the cap: r->pending.full says unfinished_calls is approximate */
  if (created)
    *v = (uint64_t) gi;
  if (x->final) {
    uint64_t n = x->attempt < 0xffffff ? (uint64_t) x->attempt : 0xffffff;
    *v = (*v & ~((uint64_t) 0xffffff << 11)) | CG_PEND_FINAL | (n << 11);
  } else if (CG_PEND_OTHERS(*v) < ((uint64_t) 1 << 29) - 1) {
    *v += (uint64_t) 1 << 35;
  }
  others = CG_PEND_OTHERS(*v);
  if ((*v & CG_PEND_FINAL) && others + 1 >= CG_PEND_ATTEMPT(*v))
    cg_rmap_del(&r->pending, h);
}

/* The sums of minute `m`, created if new; NULL at the cap or out of memory. */
static struct cg_rminute *cg__minute_slot(struct cg_report *r, int64_t m) {
  int created;
  uint64_t *v;
  struct cg_rminute *mm;

  /* Logs are mostly in time order: the minute of the previous record is the likely one. */
  if (r->nminutes && r->minute[r->last_minute].minute == m)
    return &r->minute[r->last_minute];
  v = cg_rmap_put(&r->minutes, (uint64_t) m, &created);
  if (!v)
    return NULL;
  if (created) {
    if (r->nminutes == r->minute_cap) {
      size_t cap = r->minute_cap ? r->minute_cap * 2 : 1024;
      struct cg_rminute *p = realloc(r->minute, cap * sizeof(*p));
      if (!p) {
        cg_rmap_del(&r->minutes, (uint64_t) m);
        r->minutes.full = 1;
        return NULL;
      }
      r->minute = p;
      r->minute_cap = cap;
    }
    *v = r->nminutes++;
    mm = &r->minute[*v];
    memset(mm, 0, sizeof(*mm));
    mm->minute = m;
  }
  r->last_minute = (size_t) *v;
  return &r->minute[*v];
}

static void cg__minute(struct cg_report *r, const struct cg_rrec *x) {
  int64_t m = x->ts_ms >= 0 ? x->ts_ms / 60000 : -((-x->ts_ms + 59999) / 60000);
  struct cg_rminute *mm = cg__minute_slot(r, m);

  if (!mm)
    return;
  mm->attempts++;
  mm->retries += x->attempt > 1;
  if (!isnan(x->cost_usd))
    mm->cost_usd += x->cost_usd;
}

/* Attempt 4 of a request, or a host's third repeat of an identical call. */
/* `s` as the text output shows it, or "(none)" for null, in `buf`. */
static void cg__shown(char *buf, size_t cap, const char *s) {
  if (s)
    cg_text_escape(buf, cap, s);
  else
    snprintf(buf, cap, "(none)");
}

static void cg__retry_alert(struct cg_report *r, const struct cg_rrec *x) {
  char ts[40], msg[640], rid[104], pool[64], model[104];
  cJSON *a;
  int guard = x->attempt == CG_ALERT_MAX_RETRIES + 2;
  int host = x->attempt == 1 && x->repeats == CG_ALERT_MAX_RETRIES + 1 && x->repeat_of;

  if (!guard && !host)
    return;
  cg_rfc3339_format(x->ts_ms, ts, sizeof(ts));
  a = cJSON_CreateObject();
  if (!a)
    return;
  cJSON_AddStringToObject(a, "kind", "retried_more_than_twice");
  cJSON_AddStringToObject(a, "by", guard ? "guard" : "host");
  cJSON_AddStringToObject(a, "request_id", guard ? x->request_id : x->repeat_of);
  if (x->pool)
    cJSON_AddStringToObject(a, "pool", x->pool);
  else
    cJSON_AddNullToObject(a, "pool");
  if (x->model)
    cJSON_AddStringToObject(a, "model", x->model);
  else
    cJSON_AddNullToObject(a, "model");
  cJSON_AddStringToObject(a, "ts", ts);
  /* The message is text for people: its strings from the log are escaped as the text
   * output shows them (no control character, null as "(none)"), and cut short. */
  cg__shown(rid, sizeof(rid), x->request_id);
  cg__shown(pool, sizeof(pool), x->pool);
  if (guard) {
    cg__shown(model, sizeof(model), x->model);
    snprintf(msg, sizeof(msg), "request %s retried more than twice (attempt %d at %s, "
             "pool %s, model %s)", rid, CG_ALERT_MAX_RETRIES + 2, ts, pool, model);
  } else {
    cg__shown(model, sizeof(model), x->repeat_of); /* the request repeated */
    snprintf(msg, sizeof(msg), "request %s repeated by the host more than twice "
             "(repeat %d, request %s at %s, pool %s)", model, CG_ALERT_MAX_RETRIES + 1,
             rid, ts, pool);
  }
  cJSON_AddStringToObject(a, "message", msg);
  cg_report_alert(r, a);
}

static void cg__bad(struct cg_report *r, enum cg_rbad why) {
  r->malformed[why]++;
  if (!r->first_bad) {
    /* The file name may be any bytes: repaired to UTF-8 like the strings of records. */
    size_t len = strlen(r->source), n = 3 * len + 24;
    if ((r->first_bad = malloc(n))) {
      len = cg_utf8_repair(r->source, len, r->first_bad);
      snprintf(r->first_bad + len, n - len, ":%llu", (unsigned long long) r->source_line);
    }
  }
}

int cg_report_take(const char *line, size_t len, struct cg_rrec *x) {
  size_t i;

  if (!line)
    return CG_RBAD_LONG;
  for (i = 0; i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'); i++)
    ;
  if (i == len)
    return -1;
  if (len > CG_REPORT_LINE_MAX)
    return CG_RBAD_LONG;
  return cg_rrec_parse(line, len, x);
}

enum cg_rbad cg_report_line(struct cg_report *r, const char *line, size_t len) {
  struct cg_rrec x;
  int why;
  long gi;
  size_t oc;

  r->source_line++;
  why = cg_report_take(line, len, &x);
  if (why < 0) {
    r->blank++;
    return CG_RBAD_NONE;
  }
  r->lines++;
  if (why != CG_RBAD_NONE) {
    cg__bad(r, why);
    return why;
  }
  r->records++;
  if (r->records == 1 || x.ts_ms < r->ts_min)
    r->ts_min = x.ts_ms;
  if (r->records == 1 || x.ts_ms > r->ts_max)
    r->ts_max = x.ts_ms;
  oc = cg__outcome(r, x.outcome);
  gi = cg__group(r, x.pool, x.model);
  if (gi >= 0)
    cg__stats_add(&r->group[gi].s, &x, oc);
  cg__stats_add(&r->total, &x, oc);
  if (gi >= 0) {
    if (x.body_digest && cg__billed(&x))
      cg__digest(r, &x, gi);
    cg__pending(r, &x, gi);
  }
  if (x.task_id && cg__billed(&x))
    cg__task(r, &x);
  cg__minute(r, &x);
  if (r->series)
    cg_series_add(r->series, gi, oc, &x);
  cg__retry_alert(r, &x);
  cg_rrec_release(&x);
  return CG_RBAD_NONE;
}

/* cg_report_read_lines's callback for the report: a line, or a too-long one (NULL). */
static void cg__report_line(void *arg, const char *line, size_t len) {
  cg_report_line(arg, line, len);
}

int cg_report_read_fd(struct cg_report *r, int fd) {
  return cg_report_read_lines(fd, cg__report_line, r);
}

int cg_report_read_lines(int fd, void (*line)(void *arg, const char *s, size_t len),
                         void *arg) {
  char *buf = malloc(CG_READ_BUF);
  size_t have = 0;
  int skipping = 0, rc = 0;

  if (!buf) {
    errno = ENOMEM;
    return -1;
  }
  for (;;) {
    ssize_t n = read(fd, buf + have, CG_READ_BUF - have);
    char *p = buf, *end, *nl;
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      rc = n < 0 ? -1 : 0;
      break;
    }
    end = buf + have + n;
    while ((nl = memchr(p, '\n', (size_t) (end - p)))) {
      if (!skipping)
        line(arg, p, (size_t) (nl - p));
      skipping = 0; /* the tail of an over-long line ends here */
      p = nl + 1;
    }
    have = (size_t) (end - p);
    if (!skipping && have > CG_REPORT_LINE_MAX) {
      line(arg, NULL, 0);
      skipping = 1;
    }
    if (skipping)
      have = 0;
    else
      memmove(buf, p, have);
  }
  if (have && !skipping)
    line(arg, buf, have); /* a last line without a newline */
  free(buf);
  return rc;
}

static void cg__pending_one(uint64_t key, uint64_t val, void *arg) {
  struct cg_report *r = arg;
  size_t g = (size_t) (val & 0x3ff);
  (void) key;
  if (val & CG_PEND_FINAL)
    return; /* finished; an earlier attempt is missing from the log */
  if (g < r->ngroups)
    r->group[g].s.unfinished++;
  r->total.unfinished++;
}

void cg_report_finish(struct cg_report *r) {
  if (r->finished)
    return;
  r->finished = 1;
  cg_rmap_each(&r->pending, cg__pending_one, r);
  cg_report_window_alerts(r);
}
