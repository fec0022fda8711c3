/* report-series.h - time buckets of `curlguard report --html`: per group (pool, model
 * family) and in total, the attempts by outcome, retries, tokens and cost of each
 * stretch of time, for the charts.
 *
 * The log is read once, in any order, and its time range is not known in advance, so the
 * buckets adapt: CG_SERIES_BUCKETS buckets of one width, starting at a multiple of it
 * (UTC).  A record outside them widens the buckets to the next width of a fixed ladder
 * (1 s, 2 s, 10 s, 20 s, 1 min, 2 min, 10 min, 20 min, 1 h, 2 h, 6 h, 12 h, 1 day, then
 * doubling days) until the whole range seen fits; each width divides the next, so an old
 * bucket falls whole into one new bucket and merging loses nothing.  The range therefore
 * fills between 1/5 and all of the buckets.  Memory is fixed: 65 counters per bucket,
 * CG_SERIES_BUCKETS buckets for the total and for each of the first CG_SERIES_MAX_GROUPS
 * groups (about 64 KiB each); later groups have table rows but no charts (`capped`).
 */
#ifndef CG_REPORT_SERIES_H
#define CG_REPORT_SERIES_H

#include "report.h"

#include <stddef.h>
#include <stdint.h>

#define CG_SERIES_BUCKETS 120     /* buckets per series */
#define CG_SERIES_MAX_GROUPS 64   /* groups with their own series */

/* One bucket of one series. */
struct cg_sbucket {
  uint64_t attempts, retries;
  uint64_t total_tokens;          /* sum of the non-null total_tokens */
  uint64_t priced;                /* attempts with a cost */
  double cost_usd;                /* sum of the non-null cost_usd */
  uint64_t outcome[CG_REPORT_MAX_OUTCOMES + 1]; /* by the report's outcome id; last: other */
};

struct cg_series {
  int started;                    /* a record was added */
  int64_t origin_ms;              /* start of bucket 0, a multiple of width_ms */
  int64_t width_ms;
  int step;                       /* index into the width ladder */
  int64_t min_ms, max_ms;         /* the range of the records added */
  struct cg_sbucket *total;       /* CG_SERIES_BUCKETS */
  struct cg_sbucket *group[CG_SERIES_MAX_GROUPS]; /* NULL until the group's first record */
  int capped;                     /* a group beyond CG_SERIES_MAX_GROUPS had records */
  int oom;                        /* a group's buckets could not be allocated */
};

/* A new empty series set, or NULL when out of memory. */
struct cg_series *cg_series_new(void);

/* Free `s` (NULL is fine). */
void cg_series_free(struct cg_series *s);

/* Account record `x` of group index `group` (-1: in no group, the total only) with
 * outcome id `outcome` (the report's interned id, CG_REPORT_MAX_OUTCOMES for other). */
void cg_series_add(struct cg_series *s, long group, size_t outcome, const struct cg_rrec *x);

/* The buckets that hold records, [*first, *last] (indices); 0 when nothing was added. */
int cg_series_span(const struct cg_series *s, size_t *first, size_t *last);

/* Bucket width in ms of ladder step `step` (>= 0); saturates at a width that covers
 * any RFC 3339 time. */
int64_t cg_series_width(int step);

#endif
