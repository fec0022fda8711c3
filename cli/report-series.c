/* report-series.c - adaptive time buckets for the charts of `curlguard report --html`
 * (see report-series.h). */
#include "report-series.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Each width divides the next, so widening merges whole buckets. */
static const int64_t cg__ladder[] = {
    1000,    2000,    10000,    20000,    60000,    120000,  600000,
    1200000, 3600000, 7200000, 21600000, 43200000, 86400000};
#define CG_LADDER_N ((int) (sizeof(cg__ladder) / sizeof(cg__ladder[0])))
/* 2^20 days x 120 buckets is far beyond years 0000-9999 (3.2e14 ms). */
#define CG_LADDER_MAX (CG_LADDER_N - 1 + 20)

int64_t cg_series_width(int step) {
  if (step < 0)
    step = 0;
  if (step > CG_LADDER_MAX)
    step = CG_LADDER_MAX;
  if (step < CG_LADDER_N)
    return cg__ladder[step];
  return cg__ladder[CG_LADDER_N - 1] << (step - (CG_LADDER_N - 1));
}

/* floor(a / b) for b > 0, negative a too (times before 1970). */
static int64_t cg__floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

struct cg_series *cg_series_new(void) {
  struct cg_series *s = calloc(1, sizeof(*s));

  if (!s)
    return NULL;
  s->total = calloc(CG_SERIES_BUCKETS, sizeof(*s->total));
  if (!s->total) {
    free(s);
    return NULL;
  }
  return s;
}

void cg_series_free(struct cg_series *s) {
  if (!s)
    return;
  free(s->total);
  for (size_t i = 0; i < CG_SERIES_MAX_GROUPS; i++)
    free(s->group[i]);
  free(s);
}

static void cg__merge(struct cg_sbucket *to, const struct cg_sbucket *from) {
  to->attempts += from->attempts;
  to->retries += from->retries;
  to->total_tokens += from->total_tokens;
  to->priced += from->priced;
  to->cost_usd += from->cost_usd;
  for (size_t k = 0; k <= CG_REPORT_MAX_OUTCOMES; k++)
    to->outcome[k] += from->outcome[k];
}

/* Re-bucket one series from (origin, width) to (norigin, nwidth) through `tmp`. */
static void cg__rebucket(struct cg_sbucket *b, struct cg_sbucket *tmp, int64_t origin,
                         int64_t width, int64_t norigin, int64_t nwidth) {
  memset(tmp, 0, CG_SERIES_BUCKETS * sizeof(*tmp));
  for (size_t i = 0; i < CG_SERIES_BUCKETS; i++) {
    int64_t j;
    if (b[i].attempts == 0)
      continue;
    j = cg__floordiv(origin + (int64_t) i * width - norigin, nwidth);
    if (j >= 0 && j < CG_SERIES_BUCKETS) /* always, by the choice of the new width */
      cg__merge(&tmp[j], &b[i]);
  }
  memcpy(b, tmp, CG_SERIES_BUCKETS * sizeof(*b));
}

/* Move or widen the buckets until [min_ms, max_ms] fits; 0, or -1 when out of memory (nothing changed). */
static int cg__widen(struct cg_series *s) {
  int step = s->step;
  int64_t w, norigin;
  struct cg_sbucket *tmp;

  /* The same width may do with the buckets moved; else the next wider that fits.
   * Bounded by the ladder (CG_LADDER_MAX steps). */
  w = cg_series_width(step);
  while (step < CG_LADDER_MAX &&
         cg__floordiv(s->max_ms, w) - cg__floordiv(s->min_ms, w) >= CG_SERIES_BUCKETS)
    w = cg_series_width(++step);
  norigin = cg__floordiv(s->min_ms, w) * w;
  tmp = malloc(CG_SERIES_BUCKETS * sizeof(*tmp));
  if (!tmp)
    return -1;
  cg__rebucket(s->total, tmp, s->origin_ms, s->width_ms, norigin, w);
  for (size_t g = 0; g < CG_SERIES_MAX_GROUPS; g++)
    if (s->group[g])
      cg__rebucket(s->group[g], tmp, s->origin_ms, s->width_ms, norigin, w);
  free(tmp);
  s->step = step;
  s->width_ms = w;
  s->origin_ms = norigin;
  return 0;
}

static void cg__add(struct cg_sbucket *b, size_t outcome, const struct cg_rrec *x) {
  b->attempts++;
  b->retries += x->attempt > 1;
  if (x->total_tokens != CG_RNULL &&
      __builtin_add_overflow(b->total_tokens, (uint64_t) x->total_tokens, &b->total_tokens))
    b->total_tokens = UINT64_MAX; /* saturates, as report.c's sums */
  if (!isnan(x->cost_usd)) {
    b->priced++;
    b->cost_usd += x->cost_usd;
  }
  b->outcome[outcome <= CG_REPORT_MAX_OUTCOMES ? outcome : CG_REPORT_MAX_OUTCOMES]++;
}

void cg_series_add(struct cg_series *s, long group, size_t outcome, const struct cg_rrec *x) {
  int64_t t = x->ts_ms, b;
  int64_t old_min = s->min_ms, old_max = s->max_ms;

  if (!s->started) {
    s->started = 1;
    s->step = 0;
    s->width_ms = cg_series_width(0);
    s->origin_ms = cg__floordiv(t, s->width_ms) * s->width_ms;
    s->min_ms = s->max_ms = t;
  } else {
    if (t < s->min_ms)
      s->min_ms = t;
    if (t > s->max_ms)
      s->max_ms = t;
  }
  if (t < s->origin_ms || cg__floordiv(t - s->origin_ms, s->width_ms) >= CG_SERIES_BUCKETS) {
    if (cg__widen(s) != 0) {
      s->min_ms = old_min; /* out of memory: this record stays out of the charts */
      s->max_ms = old_max;
      s->oom = 1;
      return;
    }
  }
  b = cg__floordiv(t - s->origin_ms, s->width_ms);
  cg__add(&s->total[b], outcome, x);
  if (group < 0)
    return;
  if ((size_t) group >= CG_SERIES_MAX_GROUPS) {
    s->capped = 1;
    return;
  }
  if (!s->group[group] &&
      !(s->group[group] = calloc(CG_SERIES_BUCKETS, sizeof(struct cg_sbucket)))) {
    s->oom = 1;
    return;
  }
  cg__add(&s->group[group][b], outcome, x);
}

int cg_series_span(const struct cg_series *s, size_t *first, size_t *last) {
  size_t i;

  if (!s->started)
    return 0;
  for (i = 0; i < CG_SERIES_BUCKETS && s->total[i].attempts == 0; i++)
    ;
  if (i == CG_SERIES_BUCKETS)
    return 0;
  *first = i;
  for (i = CG_SERIES_BUCKETS; i > *first && s->total[i - 1].attempts == 0; i--)
    ;
  *last = i - 1;
  return 1;
}
