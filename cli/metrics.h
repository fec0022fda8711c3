/* metrics.h - the shared state file as Prometheus metrics (`curlguard stat
 * --prometheus`, `curlguard exporter`; README "Prometheus metrics" lists them).
 *
 * Two steps, so that nothing allocates while the mapping is touched: cg_metrics_collect
 * copies every pool's counters out of a mapped file (inside a guarded region, state.h),
 * cg_metrics_write prints the copy in the text exposition format (prom.h).
 */
#ifndef CG_METRICS_H
#define CG_METRICS_H

#include "breaker.h"
#include "budget.h"
#include "state.h"

#include <stdio.h>

/* What one pool's metrics are made of. */
struct cg_metrics_pool {
  char name[64];              /* the pool's name; "NAME#i" for a later pool of the same
                               * name (a name cut at 47 bytes), so no two series clash */
  uint64_t admitted, waited, rejected, seen_429;
  uint32_t inflight, max_inflight;
  double rpm, tpm;            /* configured, 0 = none */
  double learned_rps;         /* the learned rate (limiter.h), 0 = not learning */
  struct cg_breaker_view breaker;
  struct cg_budget_view budget;
  struct cg_state_tally tally;
};

struct cg_metrics {
  int ready;                  /* 1: read from a valid file; 0: no file (or unreadable) */
  int64_t created_ms;         /* when the file was (re-)initialised, wall clock */
  int npools;
  struct cg_metrics_pool pools[CG_STATE_POOLS];
};

/* Copy the claimed pools of `st` into `m` at `now` (state clock).  No allocation: call
 * it inside a guarded region of `st`. */
void cg_metrics_collect(struct cg_state *st, int64_t now, struct cg_metrics *m);

/* Write `m` to `f` in the text exposition format, version 0.0.4. */
void cg_metrics_write(FILE *f, const struct cg_metrics *m);

/* Read the state file at `path` (read-only, never created) into `m`: 0 when read, 1
 * when there is no file yet (m->ready 0, no pools), -1 with a one-line reason in `why`
 * when it cannot be read (not ours, other layout, cut short while read). */
int cg_metrics_load(const char *path, struct cg_metrics *m, char *why, size_t whylen);

#endif
