/* stat.c - `curlguard stat [--json]` and `curlguard reset`: the shared state file.
 *
 * The file is the one the guard would use: CURLGUARD_STATE, else the config file's
 * "state", else /dev/shm/curlguard-$UID.state (SPEC section 3).
 */
#include "breaker.h"
#include "budget.h"
#include "cli.h"
#include "config.h"
#include "limiter.h"
#include "metrics.h"
#include "report-rec.h"
#include "shared.h"
#include "state.h"
#include "tally.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <setjmp.h>
#include <string.h>
#include <sys/stat.h>

static char shown[4 * 48 + 8]; /* a pool name as the text tables show it */

static const char *cg__getenv(const char *n) {
  return getenv(n);
}

/* --config F for stat and reset: the same file `curlguard run --config F` gives the guard. */
static const char *cg__config_flag;

static const char *cg__getenv_with_config(const char *n) {
  if (cg__config_flag && strcmp(n, "CURLGUARD_CONFIG") == 0)
    return cg__config_flag;
  return cg__getenv(n);
}

/* Consume "--config F" from argv[*i]; 1 if it was that option. */
static int cg__config_option(int argc, char **argv, int *i) {
  if (strcmp(argv[*i], "--config") == 0 && *i + 1 < argc) {
    cg__config_flag = argv[++*i];
    return 1;
  }
  if (strncmp(argv[*i], "--config=", 9) == 0) {
    cg__config_flag = argv[*i] + 9;
    return 1;
  }
  return 0;
}

/* The configured Redis (CURLGUARD_REDIS, README "Fleets") as cg__state_path read it with
 * the rest of the configuration: loaded once, so its warnings are said once. */
static char cg__conf_redis_url[4096], cg__conf_redis_prefix[256];

/* The configured state path into `out` for command `cmd`: 0; -1 when none is configured
 * (said in one line); -2 when the config file named cannot be used (said in one line):
 * the defaults' state file is never the one acted on then (before, `reset --config
 * typo.json` re-initialised the default file, exit 0).  Keeps the configured Redis for
 * cg__redis_conf. */
static int cg__state_path(const char *cmd, char *out, size_t len) {
  const char *cfg = cg__getenv_with_config("CURLGUARD_CONFIG");
  struct cg_config c;
  char why[128];

  if (cfg && cfg[0] && cg_config_file_usable(cfg, why, sizeof(why)) != 0) {
    cg_cli_error("%s: config file %s: %s", cmd, cfg, why);
    return -2;
  }
  cg_config_load(&c, cg__getenv_with_config);
  if (!c.state_path) {
    cg_config_free(&c);
    cg_cli_error("%s: no state file configured", cmd);
    return -1;
  }
  snprintf(out, len, "%s", c.state_path);
  cg__conf_redis_url[0] = '\0';
  if (c.redis_url && c.redis_url[0]) {
    snprintf(cg__conf_redis_url, sizeof(cg__conf_redis_url), "%s", c.redis_url);
    snprintf(cg__conf_redis_prefix, sizeof(cg__conf_redis_prefix), "%s",
             c.redis_prefix ? c.redis_prefix : "curlguard:");
  }
  cg_config_free(&c);
  return 0;
}

/* The configured Redis (CURLGUARD_REDIS, README "Fleets") of the last cg__state_path: URL
 * and prefix into `url` and `prefix`; 0 when one is configured. */
static int cg__redis_conf(char *url, size_t ulen, char *prefix, size_t plen) {
  if (!cg__conf_redis_url[0])
    return -1;
  snprintf(url, ulen, "%s", cg__conf_redis_url);
  snprintf(prefix, plen, "%s", cg__conf_redis_prefix);
  return 0;
}

/* `url` as shown: a password replaced by "***". */
static void cg__redis_shown(const char *url, char *out, size_t len) {
  const char *at = strchr(url, '@'), *scheme = strstr(url, "://");
  if (at && scheme && at > scheme)
    snprintf(out, len, "%.*s***%s", (int) (scheme + 3 - url), url, at);
  else
    snprintf(out, len, "%s", url);
}

/* Whether the Redis at `url` is reachable, as the guard's calls use it, and the
 * fleet-wide figures of the `n` pools `names` into `v[0..n-1]`, all on one connection
 * (shared.h cg_redis_view_all, as `stat --prometheus` asks: one connection a pool cost
 * each pool a connect and its set-up; helper-66).  With no pool, whether it answers at
 * all (a pool named "", as cg_metrics_load_fleet asks).  1 reachable; 0 not, the reason
 * in `err`. */
static int cg__redis_ask(const char *url, const char *prefix, const char *const *names,
                         int n, struct cg_redis_view *v, char *err, size_t errn) {
  static const char *const none[] = {""};
  if (n <= 0)
    return cg_redis_view_all(url, prefix, none, 1, v, err, errn) == 0;
  return cg_redis_view_all(url, prefix, names, n, v, err, errn) == 0;
}

/* The "redis" object of `stat --json` into `root`: the URL shown (password masked), the
 * prefix, whether it is reachable (`ok`) and why not (`err`). */
static void cg__redis_json(cJSON *root, const char *url, const char *prefix, int ok,
                           const char *err) {
  static char shown_url[4200];
  cJSON *ro = cJSON_AddObjectToObject(root, "redis");
  cg__redis_shown(url, shown_url, sizeof(shown_url));
  cJSON_AddStringToObject(ro, "url", shown_url);
  cJSON_AddStringToObject(ro, "prefix", prefix);
  cJSON_AddBoolToObject(ro, "reachable", ok);
  if (!ok)
    cJSON_AddStringToObject(ro, "error", err);
  else
    cJSON_AddNullToObject(ro, "error");
}

/* The text view's line on the configured Redis: the same words whether or not a pool
 * has been used (before, with none, nothing was said of Redis; helper-66). */
static void cg__redis_text(const char *url, const char *prefix, int ok, const char *err) {
  static char shown_url[4200];
  cg__redis_shown(url, shown_url, sizeof(shown_url));
  printf("\npools shared through redis %s (prefix %s)%s%s\n", shown_url, prefix,
         ok ? "" : ": unreachable: ", ok ? "" : err);
}

/* Pool `p`'s fleet-wide figures `v`, read from Redis (cg__redis_ask). */
static cJSON *cg__fleet_json(const struct cg_redis_view *v, const struct cg_state_pool *p) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "admitted", (double) v->admitted);
  cJSON_AddNumberToObject(o, "inflight", (double) v->inflight);
  cJSON_AddStringToObject(o, "breaker", cg_breaker_state_name(v->breaker));
  cJSON_AddNumberToObject(o, "next_probe_ms", (double) v->next_probe_ms);
  cJSON_AddNumberToObject(o, "window_requests", (double) (v->window_ok + v->window_failed));
  cJSON_AddNumberToObject(o, "window_failures", (double) v->window_failed);
  cJSON_AddNumberToObject(o, "hold_ms", (double) v->hold_ms);
  cJSON_AddNumberToObject(o, "held_keys", (double) v->held_keys);
  cJSON_AddNumberToObject(o, "key_hold_ms", (double) v->key_hold_ms);
  /* Requests that could go now, fleet-wide, from the TAT's lead (limiter.h's rule). */
  if (p->rpm > 0) {
    double t_us = 60e6 / (p->rpm * CG_RATE_MARGIN);
    double burst = p->burst_requests > 0 ? p->burst_requests : fmax(1.0, p->rpm / 60.0);
    double avail = burst - (double) v->tat_req_ahead_us / t_us;
    cJSON_AddNumberToObject(o, "requests_available", avail > 0 ? floor(avail * 10) / 10 : 0);
  } else {
    cJSON_AddNullToObject(o, "requests_available");
  }
  return o;
}

static double cg__ms(int64_t ns) {
  return ns > 0 ? (double) ns / 1e6 : 0;
}

/* The breaker of pool `i` (breaker.h): its state, the failure rate over its window, the
 * time to the next probe. */
static cJSON *cg__breaker_json(struct cg_state *st, int i, int64_t now) {
  cJSON *o = cJSON_CreateObject();
  struct cg_breaker_view v;
  uint32_t n;

  cg_breaker_view(st, i, now, &v);
  n = v.ok + v.failed;
  cJSON_AddBoolToObject(o, "enabled", v.enabled);
  cJSON_AddStringToObject(o, "state", cg_breaker_state_name(v.state));
  if (n)
    cJSON_AddNumberToObject(o, "failure_rate", (double) v.failed / n);
  else
    cJSON_AddNullToObject(o, "failure_rate");
  cJSON_AddNumberToObject(o, "requests", n);
  cJSON_AddNumberToObject(o, "failures", v.failed);
  cJSON_AddNumberToObject(o, "next_probe_s", (double) v.next_probe_ns / 1e9);
  if (v.probe_pid)
    cJSON_AddNumberToObject(o, "probe_pid", v.probe_pid);
  else
    cJSON_AddNullToObject(o, "probe_pid");
  cJSON_AddNumberToObject(o, "threshold", v.failure_rate);
  cJSON_AddNumberToObject(o, "min_requests", v.min_requests);
  cJSON_AddNumberToObject(o, "window_s", (double) v.window_ns / 1e9);
  cJSON_AddNumberToObject(o, "cooldown_s", (double) v.cooldown_ns / 1e9);
  cJSON_AddNumberToObject(o, "opened", (double) v.opened);
  cJSON_AddNumberToObject(o, "rejected", (double) v.rejected);
  cJSON_AddNumberToObject(o, "probes", (double) v.probes);
  /* Issue 12: holding, consecutive failures, the doubling probe interval, the slow start. */
  cJSON_AddStringToObject(o, "open", v.open_wait ? "wait" : "fail");
  cJSON_AddNumberToObject(o, "consecutive_failures", v.consecutive);
  cJSON_AddNumberToObject(o, "consecutive_max", v.consecutive_max);
  cJSON_AddNumberToObject(o, "failed_probes", v.probe_fails);
  cJSON_AddNumberToObject(o, "cooldown_max_s", (double) v.cooldown_max_ns / 1e9);
  cJSON_AddNumberToObject(o, "ramp_s", (double) v.ramp_ns / 1e9);
  cJSON_AddNumberToObject(o, "ramp_left_s", (double) v.ramp_left_ns / 1e9);
  cJSON_AddNumberToObject(o, "held", (double) v.held);
  return o;
}

/* The retry budget of pool `i` (budget.h): retries and first attempts in its window, the
 * retries it allows now, those outstanding. */
static cJSON *cg__budget_json(struct cg_state *st, int i, int64_t now) {
  cJSON *o = cJSON_CreateObject();
  struct cg_budget_view v;
  double left;

  cg_budget_view(st, i, now, &v);
  left = floor(v.allowed) - v.retries;
  cJSON_AddBoolToObject(o, "enabled", v.enabled);
  cJSON_AddNumberToObject(o, "first_attempts", v.first);
  cJSON_AddNumberToObject(o, "retries", v.retries);
  cJSON_AddNumberToObject(o, "allowed", floor(v.allowed));
  cJSON_AddNumberToObject(o, "retries_left", left > 0 ? left : 0);
  cJSON_AddNumberToObject(o, "concurrent", v.concurrent);
  cJSON_AddNumberToObject(o, "max_concurrent", v.max_concurrent);
  cJSON_AddNumberToObject(o, "ratio", v.ratio);
  cJSON_AddNumberToObject(o, "min_per_s", v.min_per_s);
  cJSON_AddNumberToObject(o, "window_s", (double) v.window_ns / 1e9);
  cJSON_AddNumberToObject(o, "refused", (double) v.refused);
  cJSON_AddNumberToObject(o, "rescued", (double) v.rescued);
  return o;
}

/* The breaker column: its shared state, or "off" when it is closed and the last process
 * that configured the pool had it off.  An open or half-open breaker is shown as it is,
 * whatever any one process's switch says: other processes still fail fast on it. */
static const char *cg__breaker_word(const cJSON *b) {
  const char *state = cJSON_GetObjectItem(b, "state")->valuestring;
  if (!cJSON_IsTrue(cJSON_GetObjectItem(b, "enabled")) && strcmp(state, "closed") == 0)
    return "off";
  return state;
}

/* A rate in requests/s from the file as requests per minute, or null when unset or not
 * a value curlguard writes. */
static void cg__add_rpm(cJSON *o, const char *k, double rps) {
  if (rps > 0 && rps <= CG_LEARN_MAX_RPS)
    cJSON_AddNumberToObject(o, k, round(rps * 60 * 10) / 10);
  else
    cJSON_AddNullToObject(o, k);
}

/* The learned rate (limiter.h): rpm null = not learning (switched off, or no call yet). */
static cJSON *cg__learned_json(const struct cg_state_pool *p, int64_t now) {
  cJSON *o = cJSON_CreateObject();
  double rate, wmax, meas;
  int64_t last = __atomic_load_n(&p->learn_last, __ATOMIC_ACQUIRE);
  __atomic_load(&p->learn_rate, &rate, __ATOMIC_ACQUIRE);
  __atomic_load(&p->learn_wmax, &wmax, __ATOMIC_ACQUIRE);
  __atomic_load(&p->learn_measured, &meas, __ATOMIC_ACQUIRE);
  cg__add_rpm(o, "rpm", rate > 0 ? cg_learn_clamp(rate, CG_LEARN_MAX_RPS) : 0);
  cg__add_rpm(o, "w_max_rpm", wmax);
  cg__add_rpm(o, "measured_rpm", meas);
  if (last > 0 && now >= last)
    cJSON_AddNumberToObject(o, "last_cut_s", round((double) (now - last) / 1e8) / 10);
  else
    cJSON_AddNullToObject(o, "last_cut_s");
  return o;
}

/* What the guard recorded in pool `i` (tally.h): the numbers `stat --prometheus`
 * exports, under the same rules as `curlguard report`. */
static cJSON *cg__tally_json(const struct cg_state *st, int i) {
  cJSON *o = cJSON_CreateObject(), *outs;
  struct cg_state_tally t;
  int k;

  cg_tally_read(st, i, &t);
  cJSON_AddNumberToObject(o, "calls", (double) t.calls);
  cJSON_AddNumberToObject(o, "calls_ok", (double) t.calls_ok);
  cJSON_AddNumberToObject(o, "attempts", (double) t.attempts);
  cJSON_AddNumberToObject(o, "retries", (double) t.retries);
  cJSON_AddNumberToObject(o, "host_retry_calls", (double) t.host_retry_calls);
  cJSON_AddNumberToObject(o, "possibly_billed", (double) t.possibly_billed);
  cJSON_AddNumberToObject(o, "prompt_tokens", (double) t.prompt_tokens);
  cJSON_AddNumberToObject(o, "completion_tokens", (double) t.completion_tokens);
  cJSON_AddNumberToObject(o, "cached_tokens", (double) t.cached_tokens);
  cJSON_AddNumberToObject(o, "cost_usd", (double) t.cost_nusd / 1e9);
  cJSON_AddNumberToObject(o, "queue_s", (double) t.queue_ms / 1e3);
  cJSON_AddNumberToObject(o, "breaker_wait_s", (double) t.breaker_wait_ms / 1e3);
  outs = cJSON_AddObjectToObject(o, "outcomes");
  for (k = 0; k < CG_TALLY_NOUTCOMES; k++)
    if (t.outcomes[k])
      cJSON_AddNumberToObject(outs, cg_tally_outcome_name(k), (double) t.outcomes[k]);
  return o;
}

/* `stat --prometheus`: the file in the text exposition format (metrics.h).  No file yet:
 * curlguard_state_ready 0, exit 0, as `stat --json` says "exists": false. */
static int cg__stat_prometheus(const char *path) {
  struct cg_metrics *m = malloc(sizeof(*m));
  char why[512];
  int r;

  if (!m) {
    cg_cli_error("stat: out of memory");
    return CG_EXIT_ERROR;
  }
  r = cg_metrics_load(path, m, why, sizeof(why));
  if (r < 0) {
    cg_cli_error("stat: %s", why);
    free(m);
    return CG_EXIT_ERROR;
  }
  if (m->ready) {
    static char url[4096], prefix[256];
    if (cg__redis_conf(url, sizeof(url), prefix, sizeof(prefix)) == 0)
      cg_metrics_load_fleet(m, url, prefix, why, sizeof(why)); /* why: in --json only */
  }
  cg_metrics_write(stdout, m);
  free(m);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    cg_cli_error("stat: cannot write the metrics to standard output");
    return CG_EXIT_ERROR;
  }
  return CG_EXIT_OK;
}

static cJSON *cg__pool_json(const struct cg_state_pool *p, int64_t now) {
  cJSON *o = cJSON_CreateObject();
  double req = cg_limiter_available(__atomic_load_n(&p->tat_requests, __ATOMIC_ACQUIRE),
                                    p->rpm, p->burst_requests, now);
  double tok = cg_limiter_available(__atomic_load_n(&p->tat_tokens, __ATOMIC_ACQUIRE),
                                    p->tpm, p->burst_tokens, now);
  int64_t hold = __atomic_load_n(&p->hold_until, __ATOMIC_ACQUIRE) - now;
  int64_t pace = __atomic_load_n(&p->pace_until, __ATOMIC_ACQUIRE) - now;

  /* as the usage record and the metrics show it: valid UTF-8, U+FFFD for a stray byte */
  char name[3 * sizeof(p->name) + 1];
  cg_utf8_repair(p->name, strnlen(p->name, sizeof(p->name)), name);
  cJSON_AddStringToObject(o, "name", name);
  cJSON_AddNumberToObject(o, "rpm", p->rpm);
  cJSON_AddNumberToObject(o, "tpm", p->tpm);
  cJSON_AddNumberToObject(o, "burst", p->burst_requests);
  cJSON_AddNumberToObject(o, "token_burst", p->burst_tokens);
  cJSON_AddNumberToObject(o, "max_inflight", p->max_inflight);
  if (isinf(req))
    cJSON_AddNullToObject(o, "requests_available");
  else
    cJSON_AddNumberToObject(o, "requests_available", req);
  if (isinf(tok))
    cJSON_AddNullToObject(o, "tokens_available");
  else
    cJSON_AddNumberToObject(o, "tokens_available", tok);
  cJSON_AddNumberToObject(o, "inflight", __atomic_load_n(&p->inflight, __ATOMIC_ACQUIRE));
  cJSON_AddNumberToObject(o, "waiters", cg_limiter_waiting(p));
  cJSON_AddNumberToObject(o, "hold_ms", cg__ms(hold));
  {
    /* Limit keys held on their own (limiter.h keyed holds): how many, and the longest. */
    int64_t key_hold = 0;
    int i, keys = 0;
    for (i = 0; i < CG_STATE_KEYED_HOLDS; i++) {
      int64_t end = cg_limiter_keyed_end(__atomic_load_n(&p->keyed[i], __ATOMIC_ACQUIRE));
      if (end > now) {
        keys++;
        if (end - now > key_hold)
          key_hold = end - now;
      }
    }
    cJSON_AddNumberToObject(o, "held_keys", keys);
    cJSON_AddNumberToObject(o, "key_hold_ms", cg__ms(key_hold));
  }
  cJSON_AddNumberToObject(o, "pace_ms", pace > 0 ? cg__ms(p->pace_interval) : 0);
  cJSON_AddNumberToObject(o, "admitted", (double) p->admitted);
  cJSON_AddNumberToObject(o, "waited", (double) p->waited);
  cJSON_AddNumberToObject(o, "rejected", (double) p->rejected);
  cJSON_AddNumberToObject(o, "seen_429", (double) p->seen_429);
  cJSON_AddItemToObject(o, "learned", cg__learned_json(p, now));
  return o;
}

static void cg__limit(char *buf, size_t len, double v) {
  if (v > 0)
    snprintf(buf, len, "%g", v);
  else
    snprintf(buf, len, "-");
}

int cg_cli_stat(int argc, char **argv) {
  static struct cg_state_guard g;
  char path[4096], why[512];
  struct cg_state st;
  struct stat sb;
  volatile int json = 0;
  int prometheus = 0;
  int i;
  cJSON *root, *pools;
  int64_t now;
  static char rurl[4096], rprefix[256], rerr[256];
  /* The pools in use (index, key, name as Redis has it) and their fleet figures. */
  static int used[CG_STATE_POOLS];
  static uint64_t used_key[CG_STATE_POOLS];
  static char used_name[CG_STATE_POOLS][sizeof(((struct cg_state_pool *) 0)->name) + 1];
  static const char *names[CG_STATE_POOLS];
  static struct cg_redis_view views[CG_STATE_POOLS];
  volatile int redis_ok = 0, nused = 0;

  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else if (strcmp(argv[i], "--prometheus") == 0) {
      prometheus = 1;
    } else if (!cg__config_option(argc, argv, &i)) {
      cg_cli_error("stat: unknown option \"%s\" (usage: curlguard stat [--config F] "
                   "[--json | --prometheus])", argv[i]);
      return CG_EXIT_USAGE;
    }
  }
  if (json && prometheus) {
    cg_cli_error("stat: --json and --prometheus exclude each other (usage: curlguard stat "
                 "[--config F] [--json | --prometheus])");
    return CG_EXIT_USAGE;
  }
  if (cg__state_path("stat", path, sizeof(path)) != 0)
    return CG_EXIT_ERROR;
  if (prometheus)
    return cg__stat_prometheus(path);
  if (lstat(path, &sb) != 0) {
    /* Nothing has used the guard yet: report an empty state without creating a file, and
     * with a Redis configured, whether it answers (as with a file and no pool). */
    int redis = cg__redis_conf(rurl, sizeof(rurl), rprefix, sizeof(rprefix)) == 0;
    if (redis)
      redis_ok = cg__redis_ask(rurl, rprefix, NULL, 0, views, rerr, sizeof(rerr));
    if (json) {
      /* {"path": ..., "exists": false, "pools": []} (and "redis" with one configured): the
       * path escaped by cJSON */
      cJSON *o = cJSON_CreateObject();
      char *text = NULL;
      if (o && cJSON_AddStringToObject(o, "path", path) && cJSON_AddFalseToObject(o, "exists") &&
          cJSON_AddArrayToObject(o, "pools")) {
        if (redis)
          cg__redis_json(o, rurl, rprefix, redis_ok, rerr);
        text = cJSON_PrintUnformatted(o);
      }
      cJSON_Delete(o);
      if (!text) {
        cg_cli_error("stat: out of memory");
        return CG_EXIT_ERROR;
      }
      puts(text);
      cJSON_free(text);
    } else {
      char shown_path[1024];
      printf("state file %s: not created yet (no guarded call so far)\n",
             cg_cli_shown(path, shown_path, sizeof(shown_path)));
      if (redis)
        cg__redis_text(rurl, rprefix, redis_ok, rerr);
    }
    return cg_cli_written("stat", CG_EXIT_OK);
  }
  /* Read-only: looking must not re-make a file that a process of another layout, or a
   * moment of truncation, left as it is. */
  if (cg_state_open_readonly(path, &st, why, sizeof(why)) != 0) {
    cg_cli_error("stat: %s", why);
    return CG_EXIT_ERROR;
  }
  /* Any process of the user may cut the file short while we read it (state.h): a clear
   * line instead of SIGBUS. */
  if (sigsetjmp(g.jb, 0) != 0) {
    cg_cli_error("stat: state file %s was truncated while it was read (the next guarded "
                 "call, or curlguard reset, re-makes it)", path);
    return CG_EXIT_ERROR;
  }
  cg_state_guard_push(&g, &st);
  now = cg_state_now();
  root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "path", path);
  cJSON_AddBoolToObject(root, "exists", 1);
  cJSON_AddNumberToObject(root, "layout_version", st.hdr->version);
  cJSON_AddNumberToObject(root, "size", (double) st.hdr->size);
  cJSON_AddNumberToObject(root, "created_ms", (double) st.hdr->created_wall_ms);
  for (i = 0; i < CG_STATE_POOLS; i++) {
    const struct cg_state_pool *p = &st.pools[i];
    uint64_t key = cg_state_pool_key(p);
    if (key) {
      size_t n = strnlen(p->name, sizeof(p->name));
      used[nused] = i;
      used_key[nused] = key;
      memcpy(used_name[nused], p->name, n);
      used_name[nused][n] = '\0';
      names[nused] = used_name[nused];
      nused++;
    }
  }
  /* Redis is asked once for all the pools: one connection, and a Redis that does not
   * answer costs its timeout once (it cost each pool the 500 ms: 64 pools, half a
   * minute; helper-64).  Its figures stand for none of the pools then. */
  if (cg__redis_conf(rurl, sizeof(rurl), rprefix, sizeof(rprefix)) == 0) {
    redis_ok = cg__redis_ask(rurl, rprefix, names, nused, views, rerr, sizeof(rerr));
    cg__redis_json(root, rurl, rprefix, redis_ok, rerr);
  } else {
    cJSON_AddNullToObject(root, "redis");
    rurl[0] = '\0';
  }
  pools = cJSON_AddArrayToObject(root, "pools");
  for (i = 0; i < nused; i++) {
    const struct cg_state_pool *p = &st.pools[used[i]];
    cJSON *o = cg__pool_json(p, now);
    cJSON_AddItemToObject(o, "breaker", cg__breaker_json(&st, used[i], now));
    cJSON_AddItemToObject(o, "retry_budget", cg__budget_json(&st, used[i], now));
    cJSON_AddItemToObject(o, "tally", cg__tally_json(&st, used[i]));
    if (rurl[0] && redis_ok)
      cJSON_AddItemToObject(o, "fleet", cg__fleet_json(&views[i], p));
    else
      cJSON_AddNullToObject(o, "fleet");
    if (!cg_state_pool_same(p, used_key[i])) { /* given to another name since */
      cJSON_Delete(o);
      continue;
    }
    cJSON_AddItemToArray(pools, o);
  }
  if (json) {
    char *text = cJSON_PrintUnformatted(root);
    printf("%s\n", text ? text : "{}");
    cJSON_free(text);
  } else {
    const cJSON *p;
    printf("state file %s (layout %u, %u bytes)\n", path, st.hdr->version, st.hdr->size);
    printf("%-24s %8s %10s %6s %9s %10s %8s %7s %7s %4s %9s %7s %8s %8s %5s\n", "pool",
           "rpm", "tpm", "maxinf", "req_avail", "tok_avail", "inflight", "waiters", "hold_ms",
           "keys", "admitted", "waited", "rejected", "pace_ms", "429s");
    cJSON_ArrayForEach(p, pools) {
      char rpm[32], tpm[32], mi[32], ra[32], ta[32];
      const cJSON *rav = cJSON_GetObjectItem(p, "requests_available");
      const cJSON *tav = cJSON_GetObjectItem(p, "tokens_available");
      cg__limit(rpm, sizeof(rpm), cJSON_GetObjectItem(p, "rpm")->valuedouble);
      cg__limit(tpm, sizeof(tpm), cJSON_GetObjectItem(p, "tpm")->valuedouble);
      cg__limit(mi, sizeof(mi), cJSON_GetObjectItem(p, "max_inflight")->valuedouble);
      snprintf(ra, sizeof(ra), cJSON_IsNull(rav) ? "-" : "%g", rav->valuedouble);
      snprintf(ta, sizeof(ta), cJSON_IsNull(tav) ? "-" : "%g", tav->valuedouble);
      printf("%-24s %8s %10s %6s %9s %10s %8g %7g %7.0f %4g %9g %7g %8g %8.1f %5g\n",
             cg_cli_shown(cJSON_GetObjectItem(p, "name")->valuestring, shown, sizeof(shown)),
             rpm, tpm, mi, ra, ta,
             cJSON_GetObjectItem(p, "inflight")->valuedouble,
             cJSON_GetObjectItem(p, "waiters")->valuedouble,
             cJSON_GetObjectItem(p, "hold_ms")->valuedouble,
             cJSON_GetObjectItem(p, "held_keys")->valuedouble,
             cJSON_GetObjectItem(p, "admitted")->valuedouble,
             cJSON_GetObjectItem(p, "waited")->valuedouble,
             cJSON_GetObjectItem(p, "rejected")->valuedouble,
             cJSON_GetObjectItem(p, "pace_ms")->valuedouble,
             cJSON_GetObjectItem(p, "seen_429")->valuedouble);
    }
    if (!cJSON_GetArraySize(pools)) {
      printf("(no pools yet)\n");
    } else {
      /* The learned rates (limiter.h). */
      printf("\n%-24s %11s %9s %12s %10s\n", "pool", "learned_rpm", "wmax_rpm",
             "measured_rpm", "last_cut_s");
      cJSON_ArrayForEach(p, pools) {
        const cJSON *l = cJSON_GetObjectItem(p, "learned");
        const char *keys[] = {"rpm", "w_max_rpm", "measured_rpm", "last_cut_s"};
        char v[4][32];
        int k;
        for (k = 0; k < 4; k++) {
          const cJSON *x = cJSON_GetObjectItem(l, keys[k]);
          snprintf(v[k], sizeof(v[k]), cJSON_IsNull(x) ? "-" : "%g", x->valuedouble);
        }
        printf("%-24s %11s %9s %12s %10s\n",
               cg_cli_shown(cJSON_GetObjectItem(p, "name")->valuestring, shown, sizeof(shown)),
               v[0], v[1], v[2], v[3]);
      }
      /* The breaker and the budget of the same pools, on lines of their own. */
      printf("\n%-24s %9s %6s %6s %8s %7s %8s %8s %7s %7s %7s %6s %7s\n", "pool", "breaker",
             "fail%", "reqs", "probe_s", "opened", "rejected", "retries", "first", "allowed",
             "left", "conc", "refused");
      cJSON_ArrayForEach(p, pools) {
        const cJSON *b = cJSON_GetObjectItem(p, "breaker");
        const cJSON *r = cJSON_GetObjectItem(p, "retry_budget");
        const cJSON *rate = cJSON_GetObjectItem(b, "failure_rate");
        char fr[16];
        snprintf(fr, sizeof(fr), cJSON_IsNull(rate) ? "-" : "%.0f", rate->valuedouble * 100);
        printf("%-24s %9s %6s %6g %8.1f %7g %8g %8g %7g %7g %7g %6g %7g\n",
               cg_cli_shown(cJSON_GetObjectItem(p, "name")->valuestring, shown, sizeof(shown)),
               cg__breaker_word(b),
               fr, cJSON_GetObjectItem(b, "requests")->valuedouble,
               cJSON_GetObjectItem(b, "next_probe_s")->valuedouble,
               cJSON_GetObjectItem(b, "opened")->valuedouble,
               cJSON_GetObjectItem(b, "rejected")->valuedouble,
               cJSON_GetObjectItem(r, "retries")->valuedouble,
               cJSON_GetObjectItem(r, "first_attempts")->valuedouble,
               cJSON_GetObjectItem(r, "allowed")->valuedouble,
               cJSON_GetObjectItem(r, "retries_left")->valuedouble,
               cJSON_GetObjectItem(r, "concurrent")->valuedouble,
               cJSON_GetObjectItem(r, "refused")->valuedouble);
      }
      /* The breaker's issue-12 side: holding, consecutive failures, probes, slow start. */
      printf("\n%-24s %5s %7s %7s %8s %7s %7s\n", "pool", "open", "consec", "max",
             "probes_f", "held", "ramp_s");
      cJSON_ArrayForEach(p, pools) {
        const cJSON *b = cJSON_GetObjectItem(p, "breaker");
        printf("%-24s %5s %7g %7g %8g %7g %7.1f\n",
               cg_cli_shown(cJSON_GetObjectItem(p, "name")->valuestring, shown, sizeof(shown)),
               cJSON_GetObjectItem(b, "open")->valuestring,
               cJSON_GetObjectItem(b, "consecutive_failures")->valuedouble,
               cJSON_GetObjectItem(b, "consecutive_max")->valuedouble,
               cJSON_GetObjectItem(b, "failed_probes")->valuedouble,
               cJSON_GetObjectItem(b, "held")->valuedouble,
               cJSON_GetObjectItem(b, "ramp_left_s")->valuedouble);
      }
    }
    /* Fleets (README "Fleets: shared state on Redis"): the figures of every machine. */
    if (rurl[0]) {
      cg__redis_text(rurl, rprefix, redis_ok, rerr);
      if (redis_ok && cJSON_GetArraySize(pools)) {
        printf("%-24s %9s %9s %9s %8s %6s %6s %8s\n", "pool", "fleet_adm", "fleet_inf",
               "breaker", "probe_ms", "reqs", "fails", "hold_ms");
        cJSON_ArrayForEach(p, pools) {
          const cJSON *f = cJSON_GetObjectItem(p, "fleet");
          printf("%-24s %9g %9g %9s %8g %6g %6g %8g\n",
                 cg_cli_shown(cJSON_GetObjectItem(p, "name")->valuestring, shown,
                              sizeof(shown)),
                 cJSON_GetObjectItem(f, "admitted")->valuedouble,
                 cJSON_GetObjectItem(f, "inflight")->valuedouble,
                 cJSON_GetObjectItem(f, "breaker")->valuestring,
                 cJSON_GetObjectItem(f, "next_probe_ms")->valuedouble,
                 cJSON_GetObjectItem(f, "window_requests")->valuedouble,
                 cJSON_GetObjectItem(f, "window_failures")->valuedouble,
                 cJSON_GetObjectItem(f, "hold_ms")->valuedouble);
        }
      }
    }
  }
  cg_state_guard_pop(&g);
  cJSON_Delete(root);
  cg_state_close(&st);
  return cg_cli_written("stat", CG_EXIT_OK);
}

int cg_cli_reset(int argc, char **argv) {
  char path[4096], why[512];
  int i;

  for (i = 1; i < argc; i++) {
    if (!cg__config_option(argc, argv, &i)) {
      cg_cli_error("reset: unknown option \"%s\" (usage: curlguard reset [--config F])",
                   argv[i]);
      return CG_EXIT_USAGE;
    }
  }
  if (cg__state_path("reset", path, sizeof(path)) != 0)
    return CG_EXIT_ERROR;
  if (cg_state_reset(path, why, sizeof(why)) != 0) {
    cg_cli_error("reset: %s", why);
    return CG_EXIT_ERROR;
  }
  printf("state file %s re-initialised\n", path);
  return CG_EXIT_OK;
}

int cg_cli_redis_conf(char *url, size_t ulen, char *prefix, size_t plen) {
  return cg__redis_conf(url, ulen, prefix, plen);
}

int cg_cli_state_path(const char *cmd, const char *config, char *out, size_t len) {
  cg__config_flag = config;
  return cg__state_path(cmd, out, len);
}
