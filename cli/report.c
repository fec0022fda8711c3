/* report.c - `curlguard report` aggregation: one pass over the lines, bounded memory
 * (see report.h for the definitions and the caps). */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CG_READ_BUF (1024 * 1024)

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
  }
  free(r->group);
  free(r->total.latency);
  for (size_t i = 0; i < r->noutcomes; i++)
    free(r->outcome_name[i]);
  for (size_t i = 0; i < r->ntask_examples; i++)
    free(r->task_example[i]);
  cg_rmap_free(&r->digests);
  cg_rmap_free(&r->tasks);
  cg_rmap_free(&r->pending);
  cg_rmap_free(&r->minutes);
  free(r->minute);
  free(r->first_bad);
  cJSON_Delete(r->alerts);
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

static uint64_t cg__group_hash(const char *pool, const char *model) {
  return cg_rhash(pool) * 31 + cg_rhash(model);
}

/* The index of group (pool, model), created if new; the "(other)" group once the cap is
 * reached; -1 when out of memory. */
static long cg__group(struct cg_report *r, const char *pool, const char *model) {
  uint64_t h;
  struct cg_rgroup *g;
  size_t i;

  pool = pool ? pool : "-";
  model = model ? model : "-";
  h = cg__group_hash(pool, model);
  /* Bounded by CG_REPORT_MAX_GROUPS + 1; real logs have a handful of groups. */
  for (i = 0; i < r->ngroups; i++)
    if (r->group[i].hash == h && strcmp(r->group[i].pool, pool) == 0 &&
        strcmp(r->group[i].model, model) == 0)
      return (long) i;
  if (r->ngroups >= CG_REPORT_MAX_GROUPS) {
    r->groups_capped = 1;
    pool = model = "(other)";
    h = cg__group_hash(pool, model);
    for (i = CG_REPORT_MAX_GROUPS; i < r->ngroups; i++)
      if (r->group[i].hash == h)
        return (long) i;
  }
  if (r->ngroups % 16 == 0) {
    g = realloc(r->group, (r->ngroups + 16) * sizeof(*g));
    if (!g)
      return -1;
    r->group = g;
  }
  g = &r->group[r->ngroups];
  memset(g, 0, sizeof(*g));
  g->hash = h;
  g->pool = strdup(pool);
  g->model = strdup(model);
  g->s.latency = malloc(sizeof(struct cg_hist));
  if (!g->pool || !g->model || !g->s.latency) {
    free(g->pool);
    free(g->model);
    free(g->s.latency);
    return -1;
  }
  cg_hist_init(g->s.latency);
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

static int cg__billed(const struct cg_rrec *x) {
  return x->possibly_billed || x->total_tokens != CG_RNULL || x->prompt_tokens != CG_RNULL;
}

static void cg__add_tokens(uint64_t *sum, int64_t v) {
  if (v != CG_RNULL)
    *sum += (uint64_t) v;
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
  s->usage_attempts += usage;
  s->possibly_billed += x->possibly_billed != 0;
  s->at_risk_attempts += x->possibly_billed && isnan(x->cost_usd);
  cg__add_tokens(&s->prompt_tokens, x->prompt_tokens);
  cg__add_tokens(&s->completion_tokens, x->completion_tokens);
  cg__add_tokens(&s->total_tokens, x->total_tokens);
  cg__add_tokens(&s->cached_tokens, x->cached_tokens);
  if (!isnan(x->cost_usd)) {
    s->priced++;
    s->cost_usd += x->cost_usd;
  } else if (usage) {
    s->unpriced++;
  }
  if (x->duration_ms == CG_RNULL)
    s->latency_missing++;
  else
    cg_hist_add(s->latency, x->duration_ms);
}

/* A billed body seen before is a duplicate, counted in its first group. */
static void cg__digest(struct cg_report *r, const struct cg_rrec *x, long gi) {
  int created;
  uint64_t *v = cg_rmap_put(&r->digests, cg_rhash(x->body_digest), &created);
  uint64_t n;
  size_t g;

  if (!v)
    return; /* the cap: r->digests.full says the counts are lower bounds */
  if (created) {
    *v = ((uint64_t) 1 << 32) | (uint64_t) gi;
    return;
  }
  n = (*v >> 32) + 1;
  g = (size_t) (*v & 0xffffffffu);
  if (n == 2) {
    r->group[g].s.dup_digests++;
    r->total.dup_digests++;
  }
  r->group[g].s.dup_extra_billed++;
  r->total.dup_extra_billed++;
  if (n > 0xffffffffu)
    n = 0xffffffffu;
  *v = (n << 32) | g;
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

/* Calls whose last record was not final: a set of request ids in flight. */
static void cg__pending(struct cg_report *r, const struct cg_rrec *x, long gi) {
  uint64_t h = cg_rhash(x->request_id);
  int created;
  uint64_t *v;

  if (x->final) {
    cg_rmap_del(&r->pending, h);
    return;
  }
  v = cg_rmap_put(&r->pending, h, &created);
  if (v)
    *v = (uint64_t) gi;
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
static void cg__retry_alert(struct cg_report *r, const struct cg_rrec *x) {
  char ts[40], msg[512];
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
  cJSON_AddStringToObject(a, "pool", x->pool ? x->pool : "-");
  cJSON_AddStringToObject(a, "model", x->model ? x->model : "-");
  cJSON_AddStringToObject(a, "ts", ts);
  if (guard)
    snprintf(msg, sizeof(msg), "request %.100s retried more than twice (attempt %d at %s, "
             "pool %.60s, model %.60s)", x->request_id, CG_ALERT_MAX_RETRIES + 2, ts,
             x->pool ? x->pool : "-", x->model ? x->model : "-");
  else
    snprintf(msg, sizeof(msg), "request %.100s repeated by the host more than twice "
             "(repeat %d, request %.100s at %s, pool %.60s)", x->repeat_of,
             CG_ALERT_MAX_RETRIES + 1, x->request_id, ts, x->pool ? x->pool : "-");
  cJSON_AddStringToObject(a, "message", msg);
  cg_report_alert(r, a);
}

static void cg__bad(struct cg_report *r, enum cg_rbad why) {
  r->malformed[why]++;
  if (!r->first_bad) {
    size_t n = strlen(r->source) + 24;
    if ((r->first_bad = malloc(n)))
      snprintf(r->first_bad, n, "%s:%llu", r->source, (unsigned long long) r->source_line);
  }
}

static int cg__blank(const char *s, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
      return 0;
  return 1;
}

enum cg_rbad cg_report_line(struct cg_report *r, const char *line, size_t len) {
  struct cg_rrec x;
  enum cg_rbad why;
  long gi;
  size_t oc;

  r->source_line++;
  if (cg__blank(line, len)) {
    r->blank++;
    return CG_RBAD_NONE;
  }
  r->lines++;
  if (len > CG_REPORT_LINE_MAX) {
    cg__bad(r, CG_RBAD_LONG);
    return CG_RBAD_LONG;
  }
  why = cg_rrec_parse(line, len, &x);
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
  cg__retry_alert(r, &x);
  cg_rrec_release(&x);
  return CG_RBAD_NONE;
}

/* A line longer than the limit, found by the reader before it is whole. */
static void cg__too_long(struct cg_report *r) {
  r->source_line++;
  r->lines++;
  cg__bad(r, CG_RBAD_LONG);
}

int cg_report_read_fd(struct cg_report *r, int fd) {
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
        cg_report_line(r, p, (size_t) (nl - p));
      skipping = 0; /* the tail of an over-long line ends here */
      p = nl + 1;
    }
    have = (size_t) (end - p);
    if (!skipping && have > CG_REPORT_LINE_MAX) {
      cg__too_long(r);
      skipping = 1;
    }
    if (skipping)
      have = 0;
    else
      memmove(buf, p, have);
  }
  if (have && !skipping)
    cg_report_line(r, buf, have); /* a last line without a newline */
  free(buf);
  return rc;
}

static void cg__pending_one(uint64_t key, uint64_t val, void *arg) {
  struct cg_report *r = arg;
  (void) key;
  if (val < r->ngroups)
    r->group[val].s.unfinished++;
  r->total.unfinished++;
}

void cg_report_finish(struct cg_report *r) {
  if (r->finished)
    return;
  r->finished = 1;
  cg_rmap_each(&r->pending, cg__pending_one, r);
  cg_report_window_alerts(r);
}
