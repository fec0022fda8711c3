/* metrics.c - the shared state file as Prometheus metrics (see metrics.h). */
#include "metrics.h"

#include "limiter.h"
#include "prom.h"
#include "tally.h"

#include <setjmp.h>
#include <string.h>
#include <sys/stat.h>

void cg_metrics_collect(struct cg_state *st, int64_t now, struct cg_metrics *m) {
  int i, j;

  m->ready = 1;
  m->created_ms = st->hdr->created_wall_ms;
  m->npools = 0;
  for (i = 0; i < CG_STATE_POOLS; i++) {
    const struct cg_state_pool *p = &st->pools[i];
    struct cg_metrics_pool *o = &m->pools[m->npools];
    double rate;
    size_t n;
    uint64_t key = cg_state_pool_key(p);

    if (!key)
      continue;
    n = strnlen(p->name, sizeof(p->name));
    memcpy(o->name, p->name, n < sizeof(o->name) ? n : sizeof(o->name) - 1);
    o->name[n < sizeof(o->name) ? n : sizeof(o->name) - 1] = '\0';
    memcpy(o->key_name, o->name, sizeof(o->key_name));
    for (j = 0; j < m->npools; j++)
      if (strcmp(m->pools[j].name, o->name) == 0) {
        char *hash = o->name + strlen(o->name);
        snprintf(hash, sizeof(o->name) - (size_t) (hash - o->name), "#%d", i);
        break;
      }
    o->admitted = __atomic_load_n(&p->admitted, __ATOMIC_RELAXED);
    o->waited = __atomic_load_n(&p->waited, __ATOMIC_RELAXED);
    o->rejected = __atomic_load_n(&p->rejected, __ATOMIC_RELAXED);
    o->seen_429 = __atomic_load_n(&p->seen_429, __ATOMIC_RELAXED);
    o->inflight = __atomic_load_n(&p->inflight, __ATOMIC_RELAXED);
    o->max_inflight = p->max_inflight;
    o->rpm = p->rpm > 0 ? p->rpm : 0;
    o->tpm = p->tpm > 0 ? p->tpm : 0;
    __atomic_load(&p->learn_rate, &rate, __ATOMIC_ACQUIRE);
    /* As `stat --json` shows it (cli/stat.c): clamped, 0 when not learning. */
    o->learned_rps = rate > 0 ? cg_learn_clamp(rate, CG_LEARN_MAX_RPS) : 0;
    cg_breaker_view(st, i, now, &o->breaker);
    cg_budget_view(st, i, now, &o->budget);
    cg_tally_read(st, i, &o->tally);
    if (cg_state_pool_same(p, key)) /* else given to another name while read: left out */
      m->npools++;
  }
}

/* One family with one sample per pool, a counter from each pool's copy. */
typedef double (*cg__get_fn)(const struct cg_metrics_pool *p);

struct cg__family {
  const char *name, *type, *help;
  cg__get_fn get;
};

#define CG__GET(fn, expr)                                                                 \
  static double fn(const struct cg_metrics_pool *p) {                                     \
    return (double) (expr);                                                               \
  }
CG__GET(cg__calls, p->tally.calls)
CG__GET(cg__calls_ok, p->tally.calls_ok)
CG__GET(cg__attempts, p->tally.attempts)
CG__GET(cg__retries, p->tally.retries)
CG__GET(cg__host_retries, p->tally.host_retry_calls)
CG__GET(cg__billed, p->tally.possibly_billed)
CG__GET(cg__429, p->seen_429)
CG__GET(cg__in_tokens, p->tally.prompt_tokens)
CG__GET(cg__out_tokens, p->tally.completion_tokens)
CG__GET(cg__cached_tokens, p->tally.cached_tokens)
CG__GET(cg__cost, (double) p->tally.cost_nusd / 1e9)
CG__GET(cg__queue, (double) p->tally.queue_ms / 1e3)
CG__GET(cg__brk_wait, (double) p->tally.breaker_wait_ms / 1e3)
CG__GET(cg__admitted, p->admitted)
CG__GET(cg__waited, p->waited)
CG__GET(cg__lim_rejected, p->rejected)
CG__GET(cg__brk_state, p->breaker.state)
CG__GET(cg__brk_opens, p->breaker.opened)
CG__GET(cg__brk_rejected, p->breaker.rejected)
CG__GET(cg__brk_probes, p->breaker.probes)
CG__GET(cg__brk_held, p->breaker.held)
CG__GET(cg__bud_refused, p->budget.refused)
CG__GET(cg__bud_rescued, p->budget.rescued)
CG__GET(cg__learned, p->learned_rps)
CG__GET(cg__inflight, p->inflight)
CG__GET(cg__inflight_limit, p->max_inflight)
CG__GET(cg__rpm, p->rpm / 60)
CG__GET(cg__tpm, p->tpm / 60)

static const struct cg__family cg__families[] = {
  {"curlguard_calls_total", "counter", "Guarded calls that ended (final usage records).",
   cg__calls},
  {"curlguard_calls_ok_total", "counter", "Guarded calls whose final outcome was ok.",
   cg__calls_ok},
  {"curlguard_attempts_total", "counter",
   "Attempts recorded (one usage record each), including those refused before the "
   "network.", cg__attempts},
  {"curlguard_retries_total", "counter",
   "Attempts numbered 2 or more: the guard's retries.", cg__retries},
  {"curlguard_host_retries_total", "counter",
   "Calls that repeated an identical call that had failed (the host's own retries).",
   cg__host_retries},
  {"curlguard_possibly_billed_attempts_total", "counter",
   "Attempts that may have been processed and billed although they failed.", cg__billed},
  {"curlguard_http_429_total", "counter", "HTTP 429 answers seen by the limiter.", cg__429},
  {"curlguard_input_tokens_total", "counter",
   "Input (prompt) tokens the provider reported.", cg__in_tokens},
  {"curlguard_output_tokens_total", "counter",
   "Output (completion) tokens the provider reported.", cg__out_tokens},
  {"curlguard_cached_input_tokens_total", "counter",
   "Cached input tokens the provider reported (part of the input tokens).",
   cg__cached_tokens},
  {"curlguard_cost_usd_total", "counter",
   "Estimated cost in US dollars from the price table (attempts of unknown models add "
   "nothing).", cg__cost},
  {"curlguard_limiter_wait_seconds_total", "counter",
   "Time attempts waited for the rate limiter (queue_ms less the breaker's part).",
   cg__queue},
  {"curlguard_breaker_wait_seconds_total", "counter",
   "Time attempts were held by an open breaker for its probe (open = wait).", cg__brk_wait},
  {"curlguard_limiter_admitted_total", "counter", "Attempts the limiter let through.",
   cg__admitted},
  {"curlguard_limiter_waited_total", "counter", "Attempts that had to wait for the limiter.",
   cg__waited},
  {"curlguard_limiter_rejected_total", "counter",
   "Attempts failed fast: the limiter's wait would pass their deadline.", cg__lim_rejected},
  {"curlguard_breaker_state", "gauge",
   "Circuit breaker state: 0 = closed, 1 = open, 2 = half-open (a probe is out).",
   cg__brk_state},
  {"curlguard_breaker_opens_total", "counter", "Times the breaker opened.", cg__brk_opens},
  {"curlguard_breaker_rejected_total", "counter", "Calls failed fast while the breaker was open.",
   cg__brk_rejected},
  {"curlguard_breaker_probes_total", "counter", "Half-open probes let through.",
   cg__brk_probes},
  {"curlguard_breaker_held_total", "counter",
   "Calls that waited for a probe's result while the breaker was open.", cg__brk_held},
  {"curlguard_budget_refusals_total", "counter",
   "Retries the retry budget refused (window or concurrency).", cg__bud_refused},
  {"curlguard_budget_rescued_total", "counter",
   "Retries given back to the retry budget because they succeeded.", cg__bud_rescued},
  {"curlguard_learned_rate_requests_per_second", "gauge",
   "The pool's learned request rate (requests per second); 0 = not learning.", cg__learned},
  {"curlguard_inflight", "gauge", "Calls in flight now.", cg__inflight},
  {"curlguard_inflight_limit", "gauge", "Configured in-flight limit; 0 = none.",
   cg__inflight_limit},
  {"curlguard_limit_requests_per_second", "gauge",
   "Configured request limit (rpm / 60); 0 = none.", cg__rpm},
  {"curlguard_limit_tokens_per_second", "gauge", "Configured token limit (tpm / 60); 0 = none.",
   cg__tpm},
};

/* The fleet's figures (`stat --json` "redis" and each pool's "fleet"), when a Redis is
 * configured: whether it is reachable, then, when it is, one family per figure. */
/* The fleet's families (cg__fleet_write), as cg__families: a figure of each pool's view. */
#define CG__FGET(fn, expr)                                                                \
  static double fn(const struct cg_redis_view *v) {                                       \
    return (double) (expr);                                                               \
  }
CG__FGET(cg__f_breaker, v->breaker)
CG__FGET(cg__f_inflight, v->inflight)
CG__FGET(cg__f_admitted, v->admitted)
CG__FGET(cg__f_hold, v->hold_ms / 1e3)
CG__FGET(cg__f_probe, v->next_probe_ms / 1e3)
CG__FGET(cg__f_win_req, v->window_ok + v->window_failed)
CG__FGET(cg__f_win_fail, v->window_failed)
CG__FGET(cg__f_held_keys, v->held_keys)
CG__FGET(cg__f_key_hold, v->key_hold_ms / 1e3)
#undef CG__FGET

static const struct {
  const char *name, *type, *help;
  double (*get)(const struct cg_redis_view *v);
} cg__fleet_families[] = {
  {"curlguard_fleet_breaker_state", "gauge",
   "The fleet's breaker on Redis: 0 closed, 1 open, 2 half-open.", cg__f_breaker},
  {"curlguard_fleet_inflight", "gauge", "Calls in flight on every machine (Redis leases).",
   cg__f_inflight},
  {"curlguard_fleet_admitted_total", "counter",
   "Attempts admitted through Redis by every machine.", cg__f_admitted},
  {"curlguard_fleet_hold_seconds", "gauge", "The fleet's 429 hold left, seconds.", cg__f_hold},
  {"curlguard_fleet_next_probe_seconds", "gauge",
   "Open fleet breaker: seconds until a probe may go.", cg__f_probe},
  {"curlguard_fleet_window_requests", "gauge", "Results in the fleet breaker's window.",
   cg__f_win_req},
  {"curlguard_fleet_window_failures", "gauge", "Failures in the fleet breaker's window.",
   cg__f_win_fail},
  {"curlguard_fleet_held_keys", "gauge", "Limit keys a 429 holds now, fleet-wide.",
   cg__f_held_keys},
  {"curlguard_fleet_key_hold_seconds", "gauge",
   "The longest hold of those limit keys left, seconds.", cg__f_key_hold},
};

static void cg__fleet_write(FILE *f, const struct cg_metrics *m) {
  size_t k;
  int i;

  if (!m->redis)
    return;
  cg_prom_family(f, "curlguard_redis_reachable", "gauge",
                 "1 when the fleet's Redis answered for every pool as the guard's calls use "
                 "it; 0 when they fall back to their state files.");
  cg_prom_sample(f, "curlguard_redis_reachable", NULL, 0, m->redis_reachable);
  if (!m->redis_reachable || !m->npools)
    return;
  for (k = 0; k < sizeof(cg__fleet_families) / sizeof(cg__fleet_families[0]); k++) {
    cg_prom_family(f, cg__fleet_families[k].name, cg__fleet_families[k].type,
                   cg__fleet_families[k].help);
    for (i = 0; i < m->npools; i++) {
      const char *labels[] = {"pool", m->pools[i].name};
      cg_prom_sample(f, cg__fleet_families[k].name, labels, 1,
                     cg__fleet_families[k].get(&m->fleet[i]));
    }
  }
}

void cg_metrics_load_fleet(struct cg_metrics *m, const char *url, const char *prefix,
                           char *why, size_t whylen) {
  const char *names[CG_STATE_POOLS];
  int i;

  m->redis = 1;
  m->redis_reachable = 0;
  for (i = 0; i < m->npools; i++)
    names[i] = m->pools[i].key_name;
  if (!m->npools) {
    /* No pool yet: whether the scripts run, as `stat --json` asks (a pool named ""). */
    names[0] = "";
    m->redis_reachable = cg_redis_view_all(url, prefix, names, 1, m->fleet, why, whylen) == 0;
    return;
  }
  m->redis_reachable =
      cg_redis_view_all(url, prefix, names, m->npools, m->fleet, why, whylen) == 0;
}

void cg_metrics_write(FILE *f, const struct cg_metrics *m) {
  size_t k;
  int i, o;

  cg_prom_family(f, "curlguard_state_ready", "gauge",
                 "1 when the shared state file was read; 0 when there is none yet or it "
                 "could not be read.");
  cg_prom_sample(f, "curlguard_state_ready", NULL, 0, m->ready);
  if (!m->ready)
    return;
  cg_prom_family(f, "curlguard_state_created_timestamp_seconds", "gauge",
                 "When the state file was (re-)initialised: its counters start there.");
  cg_prom_sample(f, "curlguard_state_created_timestamp_seconds", NULL, 0,
                 (double) m->created_ms / 1e3);
  cg_prom_family(f, "curlguard_pools", "gauge", "Pools in the state file.");
  cg_prom_sample(f, "curlguard_pools", NULL, 0, m->npools);
  for (k = 0; k < sizeof(cg__families) / sizeof(cg__families[0]); k++) {
    const struct cg__family *fam = &cg__families[k];
    if (!m->npools)
      break;
    cg_prom_family(f, fam->name, fam->type, fam->help);
    for (i = 0; i < m->npools; i++) {
      const char *labels[] = {"pool", m->pools[i].name};
      const struct cg_metrics_pool *p = &m->pools[i];
      /* Counters of integers print exactly, whatever their size. */
      if (fam->get == cg__cost || fam->get == cg__queue || fam->get == cg__brk_wait ||
          strcmp(fam->type, "gauge") == 0)
        cg_prom_sample(f, fam->name, labels, 1, fam->get(p));
      else
        cg_prom_sample_u64(f, fam->name, labels, 1, (uint64_t) fam->get(p));
    }
  }
  cg__fleet_write(f, m);
  if (!m->npools)
    return;
  /* Attempts by outcome: ok always (so a rate() has a start), the others once seen. */
  cg_prom_family(f, "curlguard_outcomes_total", "counter",
                 "Attempts by outcome (the usage record's outcome; HTTP statuses beyond "
                 "the named ones summed as http_4xx, http_5xx, http_other).");
  for (i = 0; i < m->npools; i++)
    for (o = 0; o < CG_TALLY_NOUTCOMES; o++) {
      const char *labels[] = {"pool", m->pools[i].name, "outcome", cg_tally_outcome_name(o)};
      if (o == 0 || m->pools[i].tally.outcomes[o])
        cg_prom_sample_u64(f, "curlguard_outcomes_total", labels, 2,
                           m->pools[i].tally.outcomes[o]);
    }
}

int cg_metrics_load(const char *path, struct cg_metrics *m, char *why, size_t whylen) {
  static struct cg_state_guard g; /* static: it must survive the siglongjmp */
  struct cg_state st;
  struct stat sb;

  memset(m, 0, sizeof(*m));
  if (lstat(path, &sb) != 0)
    return 1;
  if (cg_state_open_readonly(path, &st, why, whylen) != 0)
    return -1;
  if (sigsetjmp(g.jb, 0) != 0) {
    snprintf(why, whylen, "state file %s was truncated while it was read (the next "
             "guarded call, or curlguard reset, re-makes it)", path);
    memset(m, 0, sizeof(*m));
    cg_state_close(&st);
    return -1;
  }
  cg_state_guard_push(&g, &st);
  cg_metrics_collect(&st, cg_state_now(), m);
  cg_state_guard_pop(&g);
  cg_state_close(&st);
  return 0;
}
