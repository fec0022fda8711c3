/* config.h - one immutable configuration snapshot per process.
 *
 * Sources, strongest first: environment variables (SPEC section 3), the JSON file named
 * by CURLGUARD_CONFIG (SPEC section 4; keys are the variable names without the
 * CURLGUARD_ prefix, in lower case), built-in defaults.  A malformed value is reported
 * once on stderr ("curlguard: ...") and replaced by the default: the host always runs.
 * Only CURLGUARD itself switches the guard on; the file cannot.
 */
#ifndef CG_CONFIG_H
#define CG_CONFIG_H

#include <stddef.h>
#include <stdint.h>

enum cg_jitter { CG_JITTER_FULL, CG_JITTER_EQUAL, CG_JITTER_DECORRELATED, CG_JITTER_NONE };

/* What to do when libcurl is about to re-send a request by itself because a reused
 * keep-alive connection died before any response byte (lib/transfer.c
 * Curl_retry_request).  For idempotent requests it is always allowed. */
enum cg_resend {
  CG_RESEND_AUTO,  /* block for non-idempotent requests when the dead connection held
                    * the request for CG_RESEND_AUTO_MS or more (it may have been
                    * processed); a connection that died at once was closed idle */
  CG_RESEND_ALLOW, /* libcurl's behaviour: detected and recorded only */
  CG_RESEND_BLOCK, /* never for non-idempotent requests */
};
#define CG_RESEND_AUTO_MS 1000

/* A retry_on rule: outcome name ("http_500", "read_timeout", "http_4xx" wildcard
 * digits allowed as 'x') -> treatment. */
struct cg_retry_rule {
  char outcome[24];
  int cls; /* enum cg_retry_class of policy.h */
};
#define CG_RETRY_RULES_MAX 32

/* Configured pools are paced at 97 % of their rates: a request a few ms late (scheduling
 * on a busy machine) must not find a provider's bucket one request short, because
 * providers charge refused requests too and exact pacing never catches up again
 * (measured: bench/RESULTS.md). */
#define CG_RATE_MARGIN 0.97

/* The limits of one pool (limiter.h).  0 = no limit. */
struct cg_limits {
  double rpm;            /* requests per minute */
  double tpm;            /* tokens per minute */
  double burst_requests; /* requests allowed at once (>= 1); 0 = one second's worth */
  double burst_tokens;   /* tokens allowed at once; 0 = one second's worth */
  long max_inflight;
  double margin;         /* pace at this fraction of rpm/tpm; 0 = exactly (limiter.h) */
  int adaptive;          /* learn the request rate from throttles (limiter.h), default on */
  int limit_keys;        /* a 429 holds its limit key's calls only (limiter.h keyed holds),
                          * default on; off: the whole pool's */
};

/* The circuit breaker of one pool (breaker.h).  Issue 12: open on 5 consecutive failed
 * calls (Envoy's consecutive_5xx, Finagle's FailureAccrual) or 50 % of a short window
 * (Hystrix: 10 s); probe after ~1 s, doubling while probes fail up to 2 s; hold calls
 * for the probe's result within their deadline; release them with a slow start. */
struct cg_breaker_cfg {
  int enabled;           /* CURLGUARD_BREAKER, default on */
  double failure_rate;   /* open at this failed fraction of the window, (0, 1], default 0.5 */
  long min_requests;     /* ... once the window holds at least this many, default 10 */
  double window_s;       /* sliding window, seconds, default 10 */
  double cooldown_s;     /* open this long (+-20 % jitter) before the first probe, default 1 */
  long open_code;        /* CURLcode the host gets while open, default 7 COULDNT_CONNECT */
  int open_wait;         /* CURLGUARD_BREAKER_OPEN: 1 wait (default), 0 fail */
  long consecutive;      /* open on this many consecutive failed calls, 0 = off, default 5 */
  double cooldown_max_s; /* the doubling interval between failed probes stops here, 2 */
  double ramp_s;         /* slow start after a successful probe, seconds, 0 = none, 3 */
  double jitter;         /* the probe interval is times 1 +- this, [0, 0.5], default 0.2 */
};

#define CG_BUDGET_MAX_CONCURRENT 64 /* = CG_STATE_RETRY_SLOTS of state.h */

/* The retry budget of one pool (budget.h), after Finagle's RetryBudget (ttl,
 * minRetriesPerSec, percentCanRetry) and Envoy's retry_budget (budget_percent,
 * min_retry_concurrency). */
struct cg_budget_cfg {
  int enabled;           /* CURLGUARD_RETRY_BUDGET, default on */
  double ratio;          /* retries per first attempt in the window, default 0.2 */
  double min_per_s;      /* plus this many retries per second of window, default 1 */
  double window_s;       /* how long a first attempt or a retry counts, default 10 s */
  long max_concurrent;   /* retries waiting or in flight at once, 0 = no limit, default 16 */
};

/* One entry of the config file's "pools" (SPEC section 4). */
struct cg_pool_cfg {
  char name[48];
  uint64_t name_hash;    /* cg_limiter_name_hash(name), set with the name; 0: not set
                            (the limiter then hashes the name itself) */
  char **hosts;          /* globs, NULL-terminated */
  size_t nhosts;
  struct cg_limits lim;
  struct cg_retry_rule retry_on[CG_RETRY_RULES_MAX];
  size_t nretry_on;      /* 0: the default pool's rules */
  struct cg_breaker_cfg breaker; /* the pool's "breaker" keys over the top-level ones */
  struct cg_budget_cfg budget;   /* the pool's "retry_budget" keys over the top-level ones */
  unsigned breaker_set, budget_set; /* which fields the pool set itself (bit per key) */
  char fallback_url[512];  /* base to divert calls to while the breaker is open (fallback.h),
                            * "" = none */
};

#define CG_TASK_ID_MAX 8192 /* bytes of CURLGUARD_TASK_ID kept */

struct cg_config {
  int enabled;               /* CURLGUARD: 1/on/true/yes */
  char *log_path;            /* JSONL usage log; NULL = off; "-" = stderr */
  char *state_path;          /* shared state file */
  char *redis_url;           /* CURLGUARD_REDIS / "redis": the fleet's Redis (shared.h),
                                NULL = none */
  char *redis_prefix;        /* CURLGUARD_REDIS_PREFIX / "redis_prefix": every key's
                                prefix, default "curlguard:" */
  char **hosts;              /* host globs (fnmatch); NULL-terminated; "*" by default */
  size_t nhosts;
  char *task_id;             /* copied into every record, NULL = none; at most
                                CG_TASK_ID_MAX bytes (a longer value is cut, with a warning) */
  char *prices_path;         /* price table, NULL = the shipped one */
  char *request_id_header;   /* e.g. "Idempotency-Key", NULL = none */
  char *task_id_header;      /* request header whose value is the record's task_id (it wins
                                over task_id when the request carries it), NULL = none */
  long connect_timeout_ms;   /* DNS+TCP+TLS, default 10000 */
  long first_byte_timeout_ms;/* request sent -> first byte, default 120000 */
  long read_timeout_ms;      /* longest gap between bytes, default 120000 */
  long deadline_ms;          /* whole call incl. retries, default 600000 */
  int deadline_set;          /* deadline_ms was configured (environment or file): it cuts
                              * an attempt under way too; the default only bounds the
                              * retries and waits (guard.c cg__limits) */
  long max_attempts;         /* upper bound on attempts per call, default 3 */
  long backoff_base_ms;      /* default 1000 */
  long backoff_cap_ms;       /* default 30000 */
  long max_retry_after_ms;   /* server hints above this give up, default 60000 */
  enum cg_jitter jitter;     /* default full */
  double rpm, tpm;           /* default pool limits, 0 = unlimited */
  long max_inflight;         /* 0 = unlimited */
  int adaptive;              /* CURLGUARD_ADAPTIVE: learn the rate from throttles, default 1 */
  int limit_keys;            /* CURLGUARD_LIMIT_KEYS: 429s hold their limit key only, default 1 */
  enum cg_resend silent_resend; /* CURLGUARD_SILENT_RESEND: auto (default), allow, block */
  /* CURLGUARD_RETRY_ON / "retry_on": "outcome=any|idempotent|never,..." over the
   * default matrix of SPEC section 7. */
  struct cg_retry_rule retry_on[CG_RETRY_RULES_MAX];
  size_t nretry_on;
  long repeat_window_ms;     /* identical calls within this are host retries, default 60000 */
  /* CURLGUARD_BREAKER* / CURLGUARD_RETRY_BUDGET*: every pool's defaults; a pool's own
   * "breaker" / "retry_budget" keys win over them. */
  struct cg_breaker_cfg breaker;
  struct cg_budget_cfg budget;
  struct cg_pool_cfg *pools; /* from the config file, in order */
  size_t npools;
};

/* A getenv()-like lookup, so tests can supply their own environment. */
typedef const char *(*cg_getenv_fn)(const char *name);

/* Fill `c` from `env` (and the file it names).  Returns the number of problems that
 * were reported (each once, on stderr); `c` is always usable afterwards. */
int cg_config_load(struct cg_config *c, cg_getenv_fn env);

/* Whether the config file at `path` can be used at all (readable, a regular file under
 * 1 MiB, a JSON object): 0, or -1 with the reason in `why` (`n` bytes).  Says nothing
 * (for the CLI, which must not act on the defaults when its config cannot be read). */
int cg_config_file_usable(const char *path, char *why, size_t n);

/* Free what cg_config_load allocated. */
void cg_config_free(struct cg_config *c);

/* The process-wide snapshot, loaded on first use from the real environment (a
 * pthread_once then; every later call is one acquire load). */
const struct cg_config *cg_config(void);

/* Whether CURLGUARD is switched on in the real environment.  Reads nothing else:
 * a disabled guard touches no file at all.  Read once per process; every later call is
 * one acquire load (no lock, no pthread_once): it runs on every libcurl call. */
int cg_config_enabled(void);

/* 1 if `host` matches one of the configured globs (case-insensitive). */
int cg_config_host_guarded(const struct cg_config *c, const char *host);

/* Parse "outcome=any|idempotent|never,..." into `c->retry_on`.  Returns 0, or -1 when
 * any item is malformed, -2 when there are more than CG_RETRY_RULES_MAX rules (the rules
 * untouched either way). */
int cg_retry_on_parse(struct cg_config *c, const char *s);

/* The pool for requests to `host`: the first configured pool with a matching glob, else
 * a pool named after the host with the default limits and rules (SPEC section 4).  The
 * result points into `c` or at `scratch`. */
const struct cg_pool_cfg *cg_config_pool(const struct cg_config *c, const char *host,
                                         struct cg_pool_cfg *scratch);

/* "wait" 1, "fail" 0 (CURLGUARD_BREAKER_OPEN, a breaker object's "open"), else -1. */
int cg_breaker_open_parse(const char *s);

/* How long after a call's start an attempt under way may be cut (ms; 0: never), given the
 * host's CURLOPT_TIMEOUT(_MS) (0: none): the host's timeout, as it cuts the transfer
 * without the guard, or a deadline configured for the guard (deadline_set) when smaller.
 * The default deadline only bounds the retries and waits: a healthy transfer plain
 * libcurl finishes (a long download or stream) is never cut by a limit nobody set
 * (helper-59: the default 10 minutes cut such a transfer with exit 28). */
static inline long cg_config_cut_ms(const struct cg_config *c, long host_timeout_ms) {
  if (host_timeout_ms > 0 && (!c->deadline_set || host_timeout_ms <= c->deadline_ms))
    return host_timeout_ms;
  return c->deadline_set ? c->deadline_ms : 0;
}
/* The same for a request to `host` on `port` (-1: unknown) over `scheme`: a glob matches
 * the host or "host:port"; a host no glob matches gets the pool "host" when the port is
 * the scheme's default (http 80, https 443), else "host:port" ("[v6]:port" for IPv6), so
 * two services on one host are two pools (SPEC section 4). */
const struct cg_pool_cfg *cg_config_pool_at(const struct cg_config *c, const char *host,
                                            int port, const char *scheme,
                                            struct cg_pool_cfg *scratch);

/* Parse a jitter mode name; returns -1 if unknown. */
int cg_jitter_parse(const char *s);

#endif
