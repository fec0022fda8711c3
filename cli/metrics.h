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
#include "shared.h"
#include "state.h"

#include <stdio.h>

/* What one pool's metrics are made of. */
struct cg_metrics_pool {
  char name[64];              /* the pool's name; "NAME#i" for a later pool of the same
                               * name (a name cut at 47 bytes), so no two series clash */
  char key_name[64];          /* the pool's name as the state file (and Redis) has it */
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
  /* The fleet (README "Fleets"), when a Redis is configured (cg_metrics_load_fleet): */
  int redis;                  /* 1: CURLGUARD_REDIS (or the config's "redis") is set */
  int redis_reachable;        /* 1: it answered for every pool, as `stat --json` asks */
  struct cg_redis_view fleet[CG_STATE_POOLS]; /* each pool's, when reachable */
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

/* The fleet-wide figures of m's pools from the Redis at `url` (keys under `prefix`), as
 * `stat --json` shows them under "fleet", on one connection: m->redis set, and
 * m->redis_reachable with m->fleet when Redis answered for every pool (else `why` says
 * why not; a Redis that does not answer costs one 500 ms timeout).  Before, the metrics
 * had no fleet figures: a fleet breaker opened by another machine showed as
 * curlguard_breaker_state 0 (helper-64). */
void cg_metrics_load_fleet(struct cg_metrics *m, const char *url, const char *prefix,
                           char *why, size_t whylen);

#endif
