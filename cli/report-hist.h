/* report-hist.h - a fixed-size log-linear latency histogram for `curlguard report`.
 *
 * HDR-style: values below 256 ms have a bucket each (exact); above, every power of two
 * is split into 128 equal buckets, so a bucket is at most 1/128 of its lower bound wide
 * and a percentile, reported as its bucket's midpoint, is within 0.4 % (1/256) of the
 * true value.  Values are milliseconds; the buckets cover [0, 2^36) (about 795 days): a
 * larger value is counted in the last bucket, but min, max and the sum (the mean) keep
 * it exactly, and every percentile is clamped to [min, max], so the first and last rank
 * are exact whatever the value.  The histogram is CG_HIST_BUCKETS counters (30 KiB)
 * whatever the number of samples: memory does not grow with the log.
 */
#ifndef CG_REPORT_HIST_H
#define CG_REPORT_HIST_H

#include <stdint.h>

#define CG_HIST_SUB_BITS 7                      /* 2^7 = 128 buckets per power of two */
#define CG_HIST_MAX_BITS 36                     /* buckets end at 2^36 ms */
#define CG_HIST_BUCKETS (((CG_HIST_MAX_BITS - CG_HIST_SUB_BITS) << CG_HIST_SUB_BITS) + \
                         (1 << CG_HIST_SUB_BITS))

struct cg_hist {
  uint64_t count;                    /* samples added */
  int64_t min, max;                  /* exact (negative -> 0), ms; valid when count > 0 */
  double sum;                        /* for the mean, ms */
  uint64_t bucket[CG_HIST_BUCKETS];
};

/* Empty the histogram. */
void cg_hist_init(struct cg_hist *h);

/* Add one sample of `ms` milliseconds (negative -> 0; >= 2^36 in the last bucket). */
void cg_hist_add(struct cg_hist *h, int64_t ms);

/* The nearest-rank `p`-th percentile (0 < p <= 100) in ms: the smallest recorded value v
 * such that at least ceil(p/100 * count) samples are <= v, as its bucket's midpoint
 * clamped to [min, max] (exact below 256 ms and for the first and last rank, else
 * within 0.4 % up to 2^36 ms).  -1 when empty. */
int64_t cg_hist_percentile(const struct cg_hist *h, double p);

/* Bucket index of `ms` (exposed for tests); `ms` must be in [0, 2^36). */
int cg_hist_index(int64_t ms);

/* Lowest and highest value of bucket `idx` (inclusive), ms. */
void cg_hist_bounds(int idx, int64_t *lo, int64_t *hi);

#endif
