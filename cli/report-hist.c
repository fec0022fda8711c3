/* report-hist.c - log-linear latency histogram (see report-hist.h). */
#include "report-hist.h"

#include <math.h>
#include <string.h>

#define CG_HIST_EXACT (1 << (CG_HIST_SUB_BITS + 1)) /* values below this have own bucket */
#define CG_HIST_LIMIT ((int64_t) 1 << CG_HIST_MAX_BITS)

void cg_hist_init(struct cg_hist *h) {
  memset(h, 0, sizeof(*h));
}

int cg_hist_index(int64_t ms) {
  int e, shift;

  if (ms < CG_HIST_EXACT)
    return (int) ms;
  e = 63 - __builtin_clzll((unsigned long long) ms); /* ms in [2^e, 2^(e+1)) */
  shift = e - CG_HIST_SUB_BITS;
  /* ms >> shift is in [128, 256): the top 8 bits; each octave adds 128 buckets. */
  return (shift << CG_HIST_SUB_BITS) + (int) (ms >> shift);
}

void cg_hist_bounds(int idx, int64_t *lo, int64_t *hi) {
  int shift;
  int64_t m;

  if (idx < CG_HIST_EXACT) {
    *lo = *hi = idx;
    return;
  }
  shift = (idx >> CG_HIST_SUB_BITS) - 1;
  m = (idx & ((1 << CG_HIST_SUB_BITS) - 1)) + (1 << CG_HIST_SUB_BITS);
  *lo = m << shift;
  *hi = *lo + ((int64_t) 1 << shift) - 1;
}

void cg_hist_add(struct cg_hist *h, int64_t ms) {
  if (ms < 0)
    ms = 0;
  /* min, max and the sum take the value as it is; only the bucket clamps. */
  if (h->count == 0 || ms < h->min)
    h->min = ms;
  if (h->count == 0 || ms > h->max)
    h->max = ms;
  h->count++;
  h->sum += (double) ms;
  h->bucket[cg_hist_index(ms < CG_HIST_LIMIT ? ms : CG_HIST_LIMIT - 1)]++;
}

int64_t cg_hist_percentile(const struct cg_hist *h, double p) {
  uint64_t rank, seen = 0;
  int i;

  if (h->count == 0)
    return -1;
  if (p <= 0)
    p = 1e-9;
  if (p > 100)
    p = 100;
  /* p * count is exact for whole p, so an exact multiple of 100 never rounds up. */
  rank = (uint64_t) ceil(p * (double) h->count / 100.0);
  if (rank < 1)
    rank = 1;
  if (rank >= h->count)
    return h->max; /* the extremes are known exactly */
  if (rank == 1)
    return h->min;
  for (i = 0; i < CG_HIST_BUCKETS; i++) {
    seen += h->bucket[i];
    if (seen >= rank) {
      int64_t lo, hi, mid;
      cg_hist_bounds(i, &lo, &hi);
      mid = lo + (hi - lo) / 2;
      return mid < h->min ? h->min : mid > h->max ? h->max : mid;
    }
  }
  return h->max; /* not reached: the buckets sum to count */
}
