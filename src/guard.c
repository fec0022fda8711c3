/* guard.c - the attempt loop of one guarded call (see guard.h). */
#include "guard.h"

#include "engine.h"

#include "attempt.h"
#include "backoff.h"
#include "body.h"
#include "breaker.h"
#include "classify.h"
#include "clock.h"
#include "config.h"
#include "digest.h"
#include "admit.h"
#include "fallback.h"
#include "hot.h"
#include "log.h"
#include "policy.h"
#include "price.h"
#include "proc.h"
#include "record.h"
#include "repeat.h"
#include "rng.h"
#include "state.h"
#include "tls.h"
#include "url.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>

#define CG_PROGRESS_IDLE_MS 1000 /* host progress calls during waits, as libcurl idles */

/* How the request body can be sent again. */
enum cg_body {
  CG_BODY_NONE, CG_BODY_FIELDS, CG_BODY_READ_CB, CG_BODY_READ_FILE,
  CG_BODY_MIME, /* mime/form: libcurl rewinds it itself, if its parts can be */
};
#define CG_DIGEST_MAX ((size_t) 64 << 20) /* bytes: larger bodies get no digest */

/* What libcurl says about an attempt that ended (curl_easy_getinfo). */
struct cg_info {
  long status, request_size, header_size, redirects;
  curl_off_t connect_us, pretransfer_us, starttransfer_us, total_us, up, down;
};

/* One logical call: everything shared by its attempts. */
struct cg_call {
  struct cg_handle *h;
  const struct cg_config *cfg;
  const struct cg_lib *lib;
  const char *method;         /* the shadow's idea, before the first attempt */
  int idempotent;
  int64_t deadline_ms;        /* monotonic */
  int64_t cut_ms;             /* monotonic: an attempt under way ends by then (the host's
                               * CURLOPT_TIMEOUT, a configured deadline); 0: none */
  enum cg_body body;
  long file_start;            /* CG_BODY_READ_FILE: position to rewind to */
  int has_digest;             /* body_hash holds the body's digest */
  uint64_t body_hash[2];      /* XXH3-128 of the body (high, low halves): cg_digest128 */
  struct cg_digest *stream_digest; /* CG_BODY_READ_CB */
  const char *model;          /* model_buf, or NULL: none */
  int attempt;                /* 1-based number of the attempt under way */
  int64_t prev_sleep_ms;
  int64_t slept_ms;           /* the backoffs before this call's retries so far, summed */
  int64_t last_attempt_ms;    /* how long the previous attempt took */
  int64_t t_attempt_ms;       /* monotonic: the attempt under way started */
  int64_t admit_start_ns;     /* state clock: the admission of the attempt under way (or
                               * to come) began (cg__admit, cg__admit_nb) */
  struct curl_slist *headers; /* host's headers + the request id header, or NULL */
  const char *task_id;        /* task_id_header's value (task_id_buf), else the config's */
  int repeats;
  uint64_t repeat_key;
  uint64_t worker;            /* the repeat table's worker (repeat.h): 0 this thread, or
                               * the handle for the multi driver */
  int reached;                /* an attempt was made (the call reached the network) */
  int64_t hint_ms;            /* the last answer's Retry-After / retry-after-ms, ms; -1 none */
  int final_ok;               /* the final attempt's outcome was ok */
  int held;                   /* an open breaker held one of its attempts (open = wait) */
  char *curlu_url;            /* CURLOPT_CURLU's URL (curl_url_get's, freed with curl_free)
                               * or NULL */
  int probes;                 /* attempts sent as the breaker's half-open probe and not
                               * counted toward max_attempts (cg__attempt_start) */
  int hold_over;              /* the next attempt is a give-up the open breaker held over
                               * (cg__after): not counted either */
  struct cg_attempt *over;    /* the held-over give-up's attempt, its answer still held:
                               * handed to the host if the gate then refuses the call
                               * (cg_engine_admit), dropped once the next attempt goes */
  CURLcode over_rc;           /* that attempt's code */
  const char *hold_why;       /* why it would have ended without the hold-over:
                               * max_attempts or retry_budget_exhausted (the record of a
                               * refusal at the gate says it) */
  struct cg_usage usage;      /* of the attempt being recorded (its model string is used);
                                 finished right after the attempt, before it is judged */

  /* The pool and the shared limiter. */
  const struct cg_pool_cfg *pool;
  struct cg_admission admission;

  /* Diverted to the pool's fallback while its breaker is open (fallback.h). */
  const char *fallback_from;  /* the name of the pool it was diverted from, or NULL */

  /* The driver's place in the steps (engine.h). */
  int slot;                   /* the in-flight slot of the attempt under way, -2 none */
  int nb_started;             /* nb (below) is under way for call->attempt */
  int64_t nb_tick_ms;         /* nb: when the host's progress callback last ran during the
                               * attempt's admission (cg__admit_nb), 0: not yet */
  struct {                    /* an attempt judged "retry" whose retry waits for the
                               * budget (nb only): judged once, recorded once granted */
    int active;
    int final;                /* nb: the final attempt, its held bytes handed over while
                               * the host keeps it paused (cg_attempt_deliver_step) */
    /* Not zeroed (CG_CALL_ZEROED ends here): written when active or final is set. */
    struct cg_info info;
    struct cg_verdict v;
    struct cg_policy_out out;
    CURLcode rc;
    int64_t since_ms;         /* monotonic: the wait for the budget began */
    int64_t nap_ms;           /* ... asked again after this long (1, 2, 4 ... 100 ms) */
  } pend;

  /* Not zeroed when the call begins (9 KiB of the 10 a memset cost on every request,
   * issue 16): each is written before it is read, or its first byte set (cg__call_init). */
  struct cg_admit_nb nb;      /* nb admission of the attempt under way (admit.h): set up
                               * when nb_started is set */
  /* Clock readings handed on while nothing takes time (issue 16), cg_state_now() ns. */
  int64_t begin_ns;           /* easy driver: cg_engine_begin's, the first admission's
                               * start (cg__admit); 0 none.  Written by cg_engine_begin */
  int64_t go_ns;              /* easy driver: the admission's end, for cg__attempt_start;
                               * 0 none.  Written by cg_engine_begin, then cg__admit */
  int64_t end_ns;             /* the attempt's end (cg__attempt_end) when no Redis step
                               * came since, for cg__after; 0 none (or aged:
                               * cg_engine_end_aged, cg__rewind_body).  Written by
                               * cg__attempt_end, the only step before cg__after reads it */
  char request_id[128];       /* written by cg__call_init, or by cg__request_id (rid_later) */
  int rid_later;              /* request_id is still to be made (cg__request_id) */
  char body_digest[CG_DIGEST_HEX]; /* body_hash in hex, written by cg__fill_record */
  char repeat_of[64];         /* an identical earlier call's request id, or "" */
  char task_id_buf[128];      /* read only through task_id */
  char model_buf[CG_BODY_MODEL_SIZE]; /* written by cg_body_facts, read through model */
  char fallback_url[4096];    /* the URL sent instead of the host's, "" = not diverted */
  struct cg_url url;          /* written by cg_engine_begin (or kept, see memo) */
  struct cg_pool_cfg pool_scratch;     /* written by cg_config_pool_at when used */
  struct cg_pool_cfg fallback_scratch; /* likewise */
  /* What cg_engine_begin made of the URL, kept with the memory for the thread's next call
   * (cg__spare): url and pool are those of the URL whose part before its first '?' or
   * '#' is memo_key, with default protocol memo_proto, under config memo_cfg (NULL: no
   * memo).  cg_url_parse_default reads nothing after that part, and the pool and
   * whether the host is guarded follow from url and the config, so a call to the same
   * place with another query (batch hosts, ?i=N) skips the parse, the glob matching and
   * the pool's build (1.5k instructions, issue 16).  Only guarded URLs are kept. */
  const struct cg_config *memo_cfg;
  const struct cg_pool_cfg *memo_pool; /* the config's own pool, or NULL: pool_scratch */
  size_t memo_n;
  char memo_key[512];
  char memo_proto[32];
  /* An ended attempt's usage parser, kept with the memory for the next attempt or call
   * (cg_usage_reset instead of a malloc, its zeroing and a free: ~1k instructions a call,
   * issue 16); NULL none.  Freed with the call's memory (cg__call_mem_free). */
  struct cg_usage_parser *usage_keep;
  void *held_keep; /* likewise an ended attempt's block for held events (cg_attempt_keep) */
};
#define CG_CALL_ZEROED offsetof(struct cg_call, pend.info)

/* ---- before the first attempt ---- */

static void cg__prepare_body(struct cg_call *call) {
  struct cg_handle *h = call->h;
  size_t len = 0;
  const char *body = cg_handle_body(h, &len);

  if (body) {
    call->body = CG_BODY_FIELDS;
    /* Made now, while the body is surely the host's: a call can end after the host let
     * go of it (curl_multi_cleanup with the handle still added).  In hex only for a record
     * that is written (cg__fill_record). */
    if (len <= CG_DIGEST_MAX) {
      cg_digest128(body, len, call->body_hash);
      call->has_digest = 1;
    }
    call->model_buf[0] = '\0';
    cg_body_facts(body, len, call->model_buf, &call->admission.tokens);
    if (call->model_buf[0])
      call->model = call->model_buf;
    return;
  }
  if (h->method == CG_M_POST_MIME || h->method == CG_M_POST_FORM) {
    call->body = CG_BODY_MIME;
    return;
  }
  if (h->method != CG_M_POST && h->method != CG_M_PUT)
    return; /* no body */
  if (h->read_fn) {
    call->body = CG_BODY_READ_CB;
    call->stream_digest = cg_digest_new();
  } else if (h->read_data) {
    call->body = CG_BODY_READ_FILE;
    call->file_start = ftell((FILE *) h->read_data);
  }
}

/* The call's limit key (limiter.h keyed holds; admit.h key_fn): whose rate limit a 429
 * to it speaks for.  Providers limit per account and model (OpenAI, Anthropic, Gemini:
 * "rate limits are applied per model"), and a service that calls for its tenants sends
 * each tenant's API key: the key is a digest of the first credential header the request
 * carries (Authorization, x-api-key, api-key, x-goog-api-key; of a signed Authorization
 * only the identity in it, handle.h cg_auth_identity) and of the model of its body or
 * path.  0 (the pool's own hold) when it has neither, or when the pool's limit_keys is
 * off.  Out of line: made once a call at most, after a 429 or in a pool
 * some key of which is held. */
static __attribute__((noinline, cold)) uint32_t cg__limit_key(void *arg) {
  static const char *const names[] = {"Authorization", "x-api-key", "api-key",
                                      "x-goog-api-key"};
  struct cg_call *call = arg;
  char buf[512 + CG_BODY_MODEL_SIZE + 1];
  size_t n = 0, i, m;
  uint64_t h[2];

  if (!call->pool->lim.limit_keys)
    return 0; /* CURLGUARD_LIMIT_KEYS off: every 429 the pool's */
  buf[0] = '\0';
  for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (cg_handle_header(call->h, names[i], buf, 512)) /* longer: its first 511 bytes */
      break;
  if (i == 0)
    cg_auth_identity(buf);
  n = strlen(buf);
  if (call->model) {
    buf[n++] = '\n';
    m = strnlen(call->model, CG_BODY_MODEL_SIZE - 1);
    memcpy(buf + n, call->model, m);
    n += m;
  }
  if (n == 0)
    return 0;
  cg_digest128(buf, n, h);
  return (uint32_t) (h[0] ^ h[1]) | 1u;
}

/* ---- classification and decision ---- */

static int cg__should_retry_header(const struct cg_hints *hints) {
  if (!hints->should_retry[0])
    return -1;
  if (strcasecmp(hints->should_retry, "true") == 0)
    return 1;
  if (strcasecmp(hints->should_retry, "false") == 0)
    return 0;
  return -1;
}

/* Whether the body can be sent again before the next attempt, judged before any
 * rewinding: a consumed read-callback body needs the host's seek callback. */
static int cg__body_replayable(const struct cg_call *call, const struct cg_attempt *a,
                               const struct cg_verdict *v) {
  switch (call->body) {
  case CG_BODY_MIME:
    /* A part from a callback without a seek function cannot be sent again, and the
     * guard cannot see the parts: only a body never sent is safe to send again. */
    return !v->sent;
  case CG_BODY_READ_CB:
    return a->read_bytes == 0 || call->h->seek_fn != NULL;
  case CG_BODY_READ_FILE:
    return call->file_start >= 0;
  case CG_BODY_NONE:
  case CG_BODY_FIELDS:
  default:
    return 1;
  }
}

/* Rewind the body for the next attempt, as libcurl rewinds for a resend
 * (lib/transfer.c Curl_readrewind).  Returns 0 on success.  The host's seek callback, or
 * a seek of its FILE (its lock), may take time: the attempt's end read (call->end_ns) is
 * no longer now after it. */
static int cg__rewind_body(struct cg_call *call, const struct cg_attempt *a) {
  struct cg_handle *h = call->h;

  switch (call->body) {
  case CG_BODY_READ_CB:
    if (a->read_bytes == 0)
      return 0;
    call->end_ns = 0;
    return h->seek_fn && h->seek_fn(h->seek_data, 0, SEEK_SET) == CURL_SEEKFUNC_OK ? 0 : -1;
  case CG_BODY_READ_FILE:
    call->end_ns = 0;
    return fseek((FILE *) h->read_data, call->file_start, SEEK_SET) == 0 ? 0 : -1;
  case CG_BODY_NONE:
  case CG_BODY_FIELDS:
  case CG_BODY_MIME:
  default:
    return 0;
  }
}

static void cg__policy_in(struct cg_call *call, const struct cg_attempt *a,
                          const struct cg_verdict *v, struct cg_policy_in *in, int preview) {
  const struct cg_config *cfg = call->cfg;

  memset(in, 0, sizeof(*in));
  in->verdict = *v;
  in->idempotent = call->idempotent;
  in->attempt = call->attempt - call->probes; /* counted: not the breaker's probes */
  in->max_attempts = (int) cfg->max_attempts;
  in->max_retry_after_ms = cfg->max_retry_after_ms;
  in->hint_ms = -1;
  if (v->outcome == CG_OUT_OK)
    return; /* done, whatever the rest says (cg_policy_decide): no clock, no random draw */
  if (a->saw_location) { /* none followed without a Location line (cg__getinfo) */
    long redirects = 0; /* allowed inside callbacks too (the preview) */
    if (call->lib->easy_getinfo(call->h->curl, CURLINFO_REDIRECT_COUNT, &redirects) ==
        CURLE_OK)
      in->redirected = redirects > 0;
  }
  in->should_retry = v->outcome == CG_OUT_HTTP ? cg__should_retry_header(&a->hints) : -1;
  in->body_replayable = cg__body_replayable(call, a, v);
  in->backoff_ms = preview ? 0
                           : cg_backoff_ms(cfg->jitter, cfg->backoff_base_ms,
                                           cfg->backoff_cap_ms, call->attempt - call->probes,
                                           call->prev_sleep_ms, cg_rand_unit());
  if (!preview && call->attempt - call->probes == cfg->max_attempts - 1) {
    /* The retry before the last (counted) attempt: the backoffs before it add up to at
     * least those without jitter, as curl --retry's fixed delays do (1 s + 2 s with the
     * defaults), plus up to 10 % (<= 1 s) so that calls that failed together do not all
     * come back at once.  Full-jitter draws alone could spend a call's attempts in the
     * first fraction of a second of a short outage that curl --retry outlasts (2.5 s of
     * 503s, 4 POSTs: 3 of 4 done, curl --retry 2: 4 of 4).  Still cut to the deadline
     * (policy.c), as any computed backoff. */
    int64_t floor_ms = cg_backoff_schedule_ms(cfg->backoff_base_ms, cfg->backoff_cap_ms,
                                              (int) cfg->max_attempts - 1) -
                       call->slept_ms;
    if (floor_ms > in->backoff_ms) {
      int64_t spread = floor_ms / 10 < 1000 ? floor_ms / 10 : 1000;
      in->backoff_ms = floor_ms + (spread > 0 ? cg_rand_range(0, spread) : 0);
    }
  }
  in->hint_ms = v->outcome == CG_OUT_HTTP
                    ? cg_hint_ms(a->hints.retry_after_ms, a->hints.retry_after,
                                 a->hints.date[0] ? a->hints.date : NULL, cg_wall_ms(),
                                 call->lib->getdate)
                    : -1;
  /* Clients told the same hint should not all wake at once: up to 10 % (<= 1 s) more. */
  if (in->hint_ms >= 0 && !preview) {
    int64_t spread = in->hint_ms / 10 < 1000 ? in->hint_ms / 10 : 1000;
    in->hint_jitter_ms = cg_rand_range(1, spread > 1 ? spread : 1);
  }
  in->time_left_ms = call->deadline_ms - cg_mono_ms();
  _Static_assert(CG_POLICY_SPENT_MS == CG_MIN_ATTEMPT_MS, "policy.h: the same 100 ms");
  /* Attempts are planned from the deadline: the next one is only started if the wait
   * plus as long as this one took (at least CG_MIN_ATTEMPT_MS) still fits. */
  in->min_attempt_ms =
      call->last_attempt_ms > CG_MIN_ATTEMPT_MS ? call->last_attempt_ms : CG_MIN_ATTEMPT_MS;
  in->rules = call->pool->nretry_on ? call->pool->retry_on : cfg->retry_on;
  in->nrules = call->pool->nretry_on ? call->pool->nretry_on : cfg->nretry_on;
}

/* Whether a call whose attempts are used up may still be held over for the breaker's
 * probe (cg__after): retries are on, it has uncounted attempts left (at most
 * max_attempts, as the probes it carries), and the pool's breaker holds calls while open
 * (open = wait). */
static int cg__may_hold_over(const struct cg_call *call) {
  const struct cg_pool_cfg *pool = call->admission.pool;

  return call->cfg->max_attempts > 1 && call->probes < call->cfg->max_attempts &&
         call->admission.state && pool && pool->breaker.enabled && pool->breaker.open_wait;
}

/* Asked by the attempt at the end of a 4xx/5xx response's headers: 1 holds the answer
 * (it may be retried), 0 streams it to the host. */
static int cg__preview(struct cg_attempt *a, void *arg) {
  struct cg_call *call = arg;
  struct cg_verdict v = {CG_OUT_HTTP, a->status, 1};
  struct cg_policy_in in;
  struct cg_policy_out out;

  if (a->status < 400)
    return 0;
  cg__policy_in(call, a, &v, &in, 1);
  cg_policy_decide(&in, &out);
  if (out.decision == CG_RETRY)
    return 1;
  /* The last attempt's failure may open the breaker, and the call is then held over for
   * the probe (cg__after): its answer waits until that is known, as a retried one does. */
  return strcmp(out.reason, "max_attempts") == 0 && cg__may_hold_over(call);
}

/* ---- after an attempt ---- */


/* What libcurl says of attempt `a`.  CURLINFO_REDIRECT_COUNT only when a Location header
 * line came (issue 16: a getinfo fewer): libcurl counts the redirects it followed, from
 * 0 in every perform (lib/transfer.c Curl_pretransfer), and follows only a Location it
 * read (lib/http.c Curl_http_readwrite_headers, checkprefix("Location:")), a line the
 * guard's header callback sees too, a followed hop's as much as the last answer's. */
static void cg__getinfo(struct cg_call *call, const struct cg_attempt *a, struct cg_info *i) {
  CURLcode (*get)(CURL *, CURLINFO, ...) = call->lib->easy_getinfo;
  CURL *c = call->h->curl;

  memset(i, 0, sizeof(*i));
  /* What the verdict reads (cg__judge). */
  get(c, CURLINFO_RESPONSE_CODE, &i->status);
  get(c, CURLINFO_REQUEST_SIZE, &i->request_size);
  if (a->saw_location)
    get(c, CURLINFO_REDIRECT_COUNT, &i->redirects);
  get(c, CURLINFO_PRETRANSFER_TIME_T, &i->pretransfer_us);
  get(c, CURLINFO_STARTTRANSFER_TIME_T, &i->starttransfer_us);
  if (!call->cfg->log_path)
    return; /* the rest is only written in a record (issue 16: 5 getinfos a call) */
  get(c, CURLINFO_HEADER_SIZE, &i->header_size);
  get(c, CURLINFO_CONNECT_TIME_T, &i->connect_us);
  get(c, CURLINFO_TOTAL_TIME_T, &i->total_us);
  get(c, CURLINFO_SIZE_UPLOAD_T, &i->up);
  get(c, CURLINFO_SIZE_DOWNLOAD_T, &i->down);
}

/* ---- usage and cost ---- */

static struct cg_prices *cg__prices;
static pthread_once_t cg__prices_once = PTHREAD_ONCE_INIT;

/* The shipped table, found from this library's own path: PREFIX/share/curlguard/ when
 * installed (the library is PREFIX/lib/curlguard/), data/ in the build tree (build/), else
 * the copy `make` puts beside the library (a build directory outside the tree: make
 * BUILD=/tmp/b; without it such a build priced nothing and its cost_usd was null). */
static void cg__prices_init(void) {
  static const char *const rel[] = {"../../share/curlguard/prices.json", "../data/prices.json",
                                    "prices.json"};
  char path[4096], why[512];
  /* The process's one config snapshot (config.h), read here under pthread_once: no
   * shared variable is written by every call (a data race under TSan, issue 11 item 9). */
  const char *prices_path = cg_config()->prices_path;
  Dl_info info;
  size_t i;

  if (prices_path) {
    if (!(cg__prices = cg_prices_load(prices_path, why, sizeof(why))))
      cg_warn("%s; cost_usd stays null", why);
    return;
  }
  if (!dladdr((void *) cg__prices_init, &info) || !info.dli_fname)
    return;
  for (i = 0; i < sizeof(rel) / sizeof(rel[0]) && !cg__prices; i++) {
    const char *slash = strrchr(info.dli_fname, '/');
    int dir = slash ? (int) (slash - info.dli_fname) : 1;
    snprintf(path, sizeof(path), "%.*s/%s", dir, slash ? info.dli_fname : ".", rel[i]);
    if (access(path, R_OK) == 0 && !(cg__prices = cg_prices_load(path, why, sizeof(why))))
      cg_warn("%s; cost_usd stays null", why);
  }
}

/* 1 once cg__prices_init has run: cg__prices is read without the call of pthread_once
 * (a call into libc on every record, issue 16).  Stored with release after cg__prices,
 * loaded with acquire: whoever sees 1 sees the table. */
static int cg__prices_ready;

/* cg__prices_init under pthread_once, then the flag. */
static void cg__prices_init_once(void) {
  cg__prices_init();
  __atomic_store_n(&cg__prices_ready, 1, __ATOMIC_RELEASE);
}

/* The price table (CURLGUARD_PRICES or the shipped one), or NULL. */
static const struct cg_prices *cg__price_table(const struct cg_config *cfg) {
  (void) cfg; /* the same snapshot cg__prices_init reads */
  if (CG_RARE(!__atomic_load_n(&cg__prices_ready, __ATOMIC_ACQUIRE)))
    pthread_once(&cg__prices_once, cg__prices_init_once);
  return cg__prices;
}

/* Tokens and cost of the attempt into the record, from what the response body said. */
static void cg__fill_usage(struct cg_call *call, const struct cg_attempt *a,
                           struct cg_record *r, struct cg_usage *u) {
  const struct cg_prices *table;
  struct cg_price price;

  if (!a->usage)
    return; /* out of memory, or no attempt made: usage unknown */
  if (u->model[0])
    r->model = u->model; /* what served the call beats what was asked for */
  r->prompt_tokens = u->input >= 0 ? u->input : CG_NULL_INT;
  r->completion_tokens = u->output >= 0 ? u->output : CG_NULL_INT;
  r->total_tokens = u->total >= 0 ? u->total : CG_NULL_INT;
  r->cached_tokens = u->cached_input >= 0 ? u->cached_input : CG_NULL_INT;
  table = r->model ? cg__price_table(call->cfg) : NULL;
  if (table && cg_prices_lookup(table, r->model, &price))
    r->cost_usd = cg_price_cost(&price, u->input, u->cached_input, u->cache_write, u->output);
  /* The limiter charged an estimate before sending.  A request that used more is charged
   * the rest; one that used less gets nothing back, because providers charge their rate
   * limit with the estimate (OpenAI: max_tokens and the prompt's size) and a refund would
   * let the guard admit more than the provider will (bench: 345 429s at TPM = the
   * provider's with refunds, see bench/RESULTS.md). */
  if (u->total > call->admission.tokens && call->admission.tokens > 0)
    cg_admission_tokens_correct(&call->admission, u->total - call->admission.tokens);
}

/* The call's request id (a UUID v4 unless the host named the call, cg__call_init),
 * made on first use: only a written record, the request-id header and a failed call's
 * repeat chain show it (issue 16: ~150 instructions a call otherwise). */
static const char *cg__request_id(struct cg_call *call) {
  if (call->rid_later) {
    cg_uuid4(call->request_id);
    call->rid_later = 0;
  }
  return call->request_id;
}

/* An attempt's queue_ms (SPEC 5: the time it waited before it was sent): the waits the
 * admission counted (`counted_ms`: the limiter's, a breaker's hold, ...), or all of the
 * `span_ns` from the admission's start to the send when that is longer.  The admission's
 * Redis round trips are waits too: a call whose admission spent 50 ms on a stopped Redis
 * before it went by the state file said 0 (helper-66). */
static int64_t cg__queue_ms(int64_t counted_ms, int64_t span_ns) {
  int64_t span_ms = span_ns / 1000000;
  return span_ms > counted_ms ? span_ms : counted_ms;
}

/* The record of an attempt: written to the log (cg_record_emit) and counted in the
 * pool's tally (cg__emit).  With the log off it is filled for the tally alone. */
static void cg__fill_record(struct cg_call *call, const struct cg_attempt *a,
                            const struct cg_info *i, const struct cg_verdict *v,
                            int curl_code, struct cg_record *r, char *outcome_buf,
                            size_t outcome_len, char *digest_buf) {
  if (call->cfg->log_path) {
    cg_record_init(r);
  } else {
    /* The log is off: nothing but the tally (tally.c cg_tally_add) and the final
     * attempt's look at total_tokens (cg__step) reads the record, and cg_record_emit
     * returns before it reads a field.  The fields they read that are set below only at
     * times get their null or 0 here; the others are left unset, and the empty record
     * is not copied (~280 bytes: 38 instructions a request of the 163 here, issue 16).
     * A reader of the record with the log off must read only fields set here or
     * below. */
    r->final = 0;
    r->prompt_tokens = r->completion_tokens = r->total_tokens = r->cached_tokens =
        CG_NULL_INT;
    r->cost_usd = NAN;
  }
  /* First what the pool's tally reads (tally.c cg_tally_add; the caller sets `final`),
   * and the usage, whose estimate correction the limiter needs. */
  r->attempt = call->attempt;
  r->queue_ms = call->admission.queue_ms + call->admission.breaker_wait_ms;
  /* An attempt that went out after its admission began: at least all the time from that
   * start to its send (cg__queue_ms). */
  if (call->admission.attempt_start_ns > call->admit_start_ns && call->admit_start_ns > 0)
    r->queue_ms = cg__queue_ms(r->queue_ms, call->admission.attempt_start_ns -
                                                call->admit_start_ns);
  r->breaker_wait_ms = call->admission.breaker_wait_ms;
  r->outcome = cg_outcome_name(v->outcome, v->status, outcome_buf, outcome_len);
  r->model = call->model;
  r->possibly_billed = cg_policy_possibly_billed(v);
  cg__fill_usage(call, a, r, &call->usage);
  r->repeat_of = call->repeat_of[0] ? call->repeat_of : NULL;
  if (!call->cfg->log_path)
    return; /* the rest is read only from a written record (issue 16: a clock read less) */
  r->ts_ms = cg_wall_ms();
  r->pid = (long) cg_pid();
  /* The request id and the body's digest in hex are read only from a written record. */
  r->request_id = cg__request_id(call);
  r->task_id = call->task_id;
  r->method = call->method; /* the call's, not a redirect's (CURLINFO_EFFECTIVE_METHOD) */
  r->host = call->url.host;
  r->path = call->url.path;
  r->pool = call->pool->name;
  r->status = i->status > 0 ? i->status : CG_NULL_INT;
  r->curl_code = curl_code;
  r->connect_ms = i->connect_us > 0 ? i->connect_us / 1000 : CG_NULL_INT;
  r->ttfb_ms = i->starttransfer_us > 0 ? i->starttransfer_us / 1000 : CG_NULL_INT;
  r->duration_ms = i->total_us / 1000;
  r->bytes_sent = (int64_t) i->request_size + i->up;
  r->bytes_received = (int64_t) i->header_size + i->down;
  r->libcurl_resends = a->libcurl_resends;
  r->repeats = call->repeats;
  r->fallback_from = call->fallback_from;
  if (call->has_digest) {
    cg_digest128_hex(call->body_hash, call->body_digest);
    r->body_digest = call->body_digest;
  } else if (call->stream_digest && a->read_bytes > 0) {
    cg_digest_final(call->stream_digest, digest_buf);
    r->body_digest = digest_buf;
  }
}

/* Wait `ms` before the next attempt.  A host progress callback keeps being called
 * about once a second, as libcurl calls it while idle, and may abort the call.
 * Returns 0, or 1 when the host aborted. */
static int cg__wait(struct cg_call *call, int64_t ms) {
  const struct cg_handle *h = call->h;
  int64_t end = cg_mono_ms() + ms;
  int progress = !h->noprogress && (h->xferinfo_fn || h->progress_fn);

  for (;;) {
    int64_t left = end - cg_mono_ms();
    int r;
    if (left <= 0)
      return 0;
    if (!progress) {
      cg_sleep_ms(left);
      return 0;
    }
    cg_sleep_ms(left < CG_PROGRESS_IDLE_MS ? left : CG_PROGRESS_IDLE_MS);
    r = h->xferinfo_fn ? h->xferinfo_fn(h->progress_data, 0, 0, 0, 0)
                       : h->progress_fn(h->progress_data, 0, 0, 0, 0);
    if (r != 0 && r != CURL_PROGRESSFUNC_CONTINUE)
      return 1;
  }
}

static int cg__wait_fn(void *arg, int64_t ms) {
  return cg__wait(arg, ms);
}

/* One host progress call while parked on the breaker (admit.h): 1 when the host aborted. */
static int cg__tick_fn(void *arg) {
  const struct cg_handle *h = ((struct cg_call *) arg)->h;
  int r;
  if (h->noprogress || (!h->xferinfo_fn && !h->progress_fn))
    return 0;
  r = h->xferinfo_fn ? h->xferinfo_fn(h->progress_data, 0, 0, 0, 0)
                     : h->progress_fn(h->progress_data, 0, 0, 0, 0);
  return r != 0 && r != CURL_PROGRESSFUNC_CONTINUE;
}

/* As snprintf(buf, CURL_ERROR_SIZE, "%s", msg), without the format walk (every call). */
static void cg__host_errbuf(const struct cg_handle *h, const char *msg) {
  if (h->errorbuffer) {
    size_t n = strnlen(msg, CURL_ERROR_SIZE - 1);
    memmove(h->errorbuffer, msg, n);
    h->errorbuffer[n] = '\0';
  }
}

/* ---- the loop ---- */

/* `n` bytes of `s` into `dst` (of `cap` bytes) at `at`, as many as fit before a final NUL.
 * Returns the new end. */
static size_t cg__put_capped(char *dst, size_t at, size_t cap, const char *s, size_t n) {
  size_t room = cap - 1 - at;
  if (n > room)
    n = room;
  memcpy(dst + at, s, n);
  return at + n;
}

/* A copy of the host's request headers plus "name: value", built with the host
 * libcurl's own allocator (curl_slist_append), or NULL when out of memory. */
static struct curl_slist *cg__headers_with(struct cg_call *call, const char *name,
                                           const char *value) {
  const struct cg_lib *lib = call->lib;
  struct curl_slist *out = NULL, *next;
  const struct curl_slist *l;
  char line[512];

  for (l = call->h->httpheader; l; l = l->next) {
    if (!(next = lib->slist_append(out, l->data)))
      goto oom;
    out = next;
  }
  {
    /* "name: value", cut to the buffer as snprintf would (no format walk per call). */
    size_t at = cg__put_capped(line, 0, sizeof(line), name, strlen(name));
    at = cg__put_capped(line, at, sizeof(line), ": ", 2);
    at = cg__put_capped(line, at, sizeof(line), value, strlen(value));
    line[at] = '\0';
  }
  if (!(next = lib->slist_append(out, line)))
    goto oom;
  return next;
oom:
  lib->slist_free_all(out);
  cg_warn_once("headers-oom", "out of memory adding the %s header; sent without it", name);
  return NULL;
}

static void cg__call_init(struct cg_call *call, struct cg_handle *h,
                          const struct cg_config *cfg, const char *url, char *curlu_url,
                          int nb) {
  int64_t budget = cfg->deadline_ms, now_ms;
  char key[128];

  memset(call, 0, CG_CALL_ZEROED);
  call->repeat_of[0] = call->task_id_buf[0] = call->fallback_url[0] = '\0';
  call->h = h;
  call->cfg = cfg;
  call->lib = h->lib;
  call->curlu_url = curlu_url;
  call->method = cg_handle_method(h);
  call->idempotent =
      cg_method_idempotent(call->method) || cg_handle_header(h, "Idempotency-Key", NULL, 0);
  if (h->timeout_ms > 0 && h->timeout_ms < budget)
    budget = h->timeout_ms; /* the host's CURLOPT_TIMEOUT is a hard deadline */
  now_ms = cg_mono_ms(); /* also the time of the repeat check below */
  call->deadline_ms = now_ms + budget;
  {
    long cut = cg_config_cut_ms(cfg, h->timeout_ms); /* what may cut an attempt (cg__limits) */
    call->cut_ms = cut ? now_ms + cut : 0;
  }
  call->admission.span_ms = budget;
  call->file_start = -1;
  if (CG_RARE(cfg->request_id_header != NULL) &&
      cg_handle_header(h, cfg->request_id_header, key, sizeof(key))) {
    /* The host names the call itself: that is the request id. */
    snprintf(call->request_id, sizeof(call->request_id), "%s", key);
    call->rid_later = 0;
  } else if (cfg->request_id_header) {
    cg_uuid4(call->request_id);
    call->rid_later = 0;
    call->headers = cg__headers_with(call, cfg->request_id_header, call->request_id);
  } else {
    call->request_id[0] = '\0';
    call->rid_later = 1; /* cg__request_id */
  }
  call->task_id = cfg->task_id;
  if (CG_RARE(cfg->task_id_header != NULL) &&
      cg_handle_header(h, cfg->task_id_header, call->task_id_buf, sizeof(call->task_id_buf)) &&
      call->task_id_buf[0])
    call->task_id = call->task_id_buf; /* the request's own task beats the process's */
  /* The guard's own Idempotency-Key makes the request idempotent like the host's. */
  if (CG_RARE(call->headers != NULL) &&
      strcasecmp(cfg->request_id_header, "Idempotency-Key") == 0)
    call->idempotent = 1;
  cg__prepare_body(call);
  /* Made now, as the digest: at the call's end the host may have changed or freed what
   * it is made of. */
  call->repeat_key = cg_repeat_key_call(call->method, url,
                                        call->has_digest ? call->body_hash : NULL);
  call->worker = nb ? cg_repeat_worker_handle(h->serial) : 0;
  if (cfg->repeat_window_ms > 0)
    call->repeats = cg_repeat_note(call->repeat_key, call->worker, now_ms, cfg->repeat_window_ms,
                                   call->repeat_of, sizeof(call->repeat_of));
}

/* The attempt's end: its usage parser stays with the call for the next one. */
static void cg__attempt_done(struct cg_call *call, struct cg_attempt *a) {
  if (a->usage && !call->usage_keep) {
    call->usage_keep = a->usage;
    a->usage = NULL;
  }
  if (!call->held_keep)
    call->held_keep = cg_attempt_keep(a);
  cg_attempt_free(a);
}

static void cg__over_free(struct cg_call *call) {
  if (call->over) {
    cg_attempt_free(call->over);
    free(call->over);
    call->over = NULL;
  }
}

static void cg__call_free(struct cg_call *call) {
  cg__over_free(call);
  if (call->curlu_url)
    call->lib->free(call->curlu_url);
  call->curlu_url = NULL;
  if (call->headers)
    call->lib->slist_free_all(call->headers);
  cg_digest_free(call->stream_digest);
}

/* Per-attempt limits at monotonic time `now_ms`: what is left of the deadline, and the
 * connect timeout. */
static void cg__limits(const struct cg_call *call, int64_t now_ms, long *timeout_ms,
                       long *connect_ms) {
  int64_t left = call->deadline_ms - now_ms, cut = call->cut_ms - now_ms;
  long conn = call->cfg->connect_timeout_ms;

  if (left < 1)
    left = 1;
  if (cut < 1)
    cut = 1;
  if (call->h->connecttimeout_ms > 0 && call->h->connecttimeout_ms < conn)
    conn = call->h->connecttimeout_ms;
  if (conn > left)
    conn = (long) left;
  /* No cut (call->cut_ms 0): none set, as the host set none (libcurl's default). */
  *timeout_ms = call->cut_ms ? (long) (cut < LONG_MAX ? cut : LONG_MAX) : 0;
  *connect_ms = conn;
}

/* Start the attempt under way on the handle: prepare `a`, install it (engine.h), for the
 * blocking driver (`nb` 0: its callbacks find it through this thread, attempt.h
 * cg_attempt_install's by_thread) or the non-blocking one.  Returns CURLE_OK or the
 * setopt error. */
static CURLcode cg__attempt_start(struct cg_call *call, struct cg_attempt *a, int nb) {
  struct cg_handle *h = call->h;
  long timeout_ms, connect_ms;
  CURLcode rc;

  /* The admission's end when nothing took time since (cg__admit; 0: the multi driver's
   * admission, or a wait), else now. */
  call->admission.attempt_start_ns = call->go_ns > 0 ? call->go_ns : cg_state_now();
  call->go_ns = 0;
  cg_admission_sent(&call->admission); /* its reservation is spent: never given back */
  call->held |= call->admission.breaker_wait_ms > 0;
  /* An attempt sent as the breaker's half-open probe is the breaker's, not the call's: it
   * is not counted toward max_attempts (unless retries are off, max_attempts 1), up to
   * max_attempts such attempts a call.  One probe at a time goes whichever call carries
   * it, so this adds no load; counted, each failed probe of an outage ended one held
   * call with most of its deadline left (8 curls, a 20 s run of 503s: 1 of 8 done,
   * against 8 with curl --retry 5).  Unbounded, a lone call against a dead endpoint
   * probed until its deadline (curl's test 1915, connect refused with the breaker
   * open: killed by runtests after 180 s, where it failed in seconds before).  An early
   * probe (admit.c cg__sh_early: the call's last chance, its deadline past the next
   * probe) is the call's own attempt, counted, unless it was held over. */
  call->probes += ((call->admission.probe == 1) || call->hold_over) &&
                  call->cfg->max_attempts > 1 && call->probes < call->cfg->max_attempts;
  call->hold_over = 0;
  call->reached = 1;
  /* The same clock (CLOCK_MONOTONIC): one read for both. */
  call->t_attempt_ms = call->admission.attempt_start_ns / 1000000;
  cg_attempt_init(a, h, cg__preview, call, call->stream_digest);
  cg_attempt_reuse(a, call->held_keep);
  call->held_keep = NULL;
  /* GET and HEAD read what exists (polling a stored Responses object repeats its usage):
   * they are not billed for tokens, so their usage is not read.  NULL when out of memory:
   * usage stays unknown. */
  if (strcmp(call->method, "GET") == 0 || strcmp(call->method, "HEAD") == 0) {
    a->usage = NULL;
  } else if (call->usage_keep) {
    a->usage = call->usage_keep;
    call->usage_keep = NULL;
    cg_usage_reset(a->usage);
  } else {
    a->usage = cg_usage_new();
  }
  a->first_byte_timeout_ms = call->cfg->first_byte_timeout_ms;
  a->read_timeout_ms = call->cfg->read_timeout_ms;
  a->headers = call->headers;
  /* An idempotent request can be retried when its body is cut: hold the body (up to
   * CG_HOLD_MAX) so a retried attempt's partial body never reaches the host. */
  a->hold_body = call->idempotent && call->attempt - call->probes < call->cfg->max_attempts;
  a->resend_mode = call->idempotent ? CG_RESEND_ALLOW : call->cfg->silent_resend;
  /* The first attempt fed libcurl the host's HSTS entries; its cache keeps them. */
  a->skip_hsts_read = call->attempt > 1;
  if (call->stream_digest)
    cg_digest_reset(call->stream_digest);
  /* The attempt's start is "now": only bookkeeping ran since (one clock read less). */
  cg__limits(call, call->t_attempt_ms, &timeout_ms, &connect_ms);

  h->in_perform = 1;
  rc = cg_attempt_install(a, timeout_ms, connect_ms, !nb);
  if (rc == CURLE_OK && call->fallback_url[0])
    rc = call->lib->easy_setopt(h->curl, CURLOPT_URL, call->fallback_url);
  return rc;
}

/* The attempt's transfer ended with `rc`: restore, and return its CURLcode as the host
 * should see it (the guard's own stops translated). */
static CURLcode cg__attempt_end(struct cg_call *call, struct cg_attempt *a, CURLcode rc) {
  struct cg_handle *h = call->h;

  cg_attempt_restore(a);
  if (call->fallback_url[0])
    call->lib->easy_setopt(h->curl, CURLOPT_URL, h->url); /* the host's URL back */
  h->in_perform = 0;
  /* One reading for the attempt's end: its duration, the state file's check, and (the
   * easy driver, cg__after) what the limiter and breaker learn of it, unless the shared
   * state is on Redis, whose steps are round trips (issue 16: 3 clock reads a call). */
  {
    int64_t end = cg_state_now(); /* CLOCK_MONOTONIC, as cg_mono_ms() */
    call->end_ns = cg_admission_far(&call->admission) ? 0 : end;
    call->last_attempt_ms = end / 1000000 - call->t_attempt_ms;
  }
  call->admission.last_attempt_ms = call->last_attempt_ms;
  /* The in-flight slot first: its word is written in a guarded region (a page cut away
   * faults harmlessly there).  Dropping the state before it would leave the slot counted
   * while this process lives, and every process of the pool waits for it. */
  cg_admission_leave(&call->admission, call->slot);
  call->slot = -2;
  if (call->admission.state && !cg_state_intact_at(call->admission.state, call->end_ns)) {
    /* Truncated during the transfer: what it learned is not written (no SIGBUS). */
    cg_warn_once("state-truncated", "state file truncated during a request; this call "
                 "runs on without the shared limiter");
    call->admission.state = NULL;
  }

  if (rc != CURLE_ABORTED_BY_CALLBACK || a->guard_stop == CG_STOP_NONE)
    return rc;
  if (a->guard_stop == CG_STOP_RESEND) {
    snprintf(a->errbuf, sizeof(a->errbuf),
             "curlguard: connection died after the request was sent; not re-sent "
             "(it may have been processed)");
    return CURLE_SEND_ERROR; /* what libcurl says when it gives up re-sending */
  }
  /* Our own timer stopped the transfer: to the host that is a timeout. */
  snprintf(a->errbuf, sizeof(a->errbuf), "curlguard: %s after %ld ms",
           a->guard_stop == CG_STOP_FIRST_BYTE ? "no response byte (first-byte timeout)"
                                              : "no data (read timeout)",
           a->guard_stop == CG_STOP_FIRST_BYTE ? a->first_byte_timeout_ms
                                              : a->read_timeout_ms);
  return CURLE_OPERATION_TIMEDOUT;
}

/* Classify the attempt and decide what comes next. */
static void cg__judge(struct cg_call *call, const struct cg_attempt *a, CURLcode rc,
                      const struct cg_info *info, struct cg_verdict *v,
                      struct cg_policy_out *out) {
  struct cg_facts facts;
  struct cg_policy_in in;

  memset(&facts, 0, sizeof(facts));
  facts.curl_code = rc;
  facts.status = info->status;
  facts.pretransfer_us = info->pretransfer_us;
  /* libcurl 7.88 sets STARTTRANSFER when a large upload starts, and a 100 Continue is
   * no answer: a timeout with no byte of a final response is a first-byte timeout. */
  facts.starttransfer_us = cg_attempt_answer_bytes(a) > 0 ? info->starttransfer_us : 0;
  facts.request_size = info->request_size;
  facts.redirects = info->redirects;
  facts.host_aborted = a->host_aborted;
  facts.guard_stop = a->guard_stop;
  cg_classify(&facts, v);
  /* A 2xx whose stream carried an error event failed, whatever libcurl says (a 3xx
   * answer's body is no generation: an error object there is no stream error). */
  if (v->outcome == CG_OUT_OK && v->status >= 200 && v->status < 300 && a->usage &&
      call->usage.error_event) {
    v->outcome = CG_OUT_STREAM_ERROR;
    v->sent = 1;
  }
  cg__policy_in(call, a, v, &in, 0);
  call->hint_ms = in.hint_ms;
  cg_policy_decide(&in, out);

  if (out->decision == CG_RETRY && a->delivered) {
    /* Bytes already handed to the host cannot be taken back. */
    out->decision = CG_GIVE_UP;
    out->reason = "response_delivered";
  } else if (out->decision == CG_RETRY && cg__rewind_body(call, a) != 0) {
    out->decision = CG_GIVE_UP;
    out->reason = "body_not_replayable";
  }
  if (a->guard_stop == CG_STOP_RESEND && out->decision != CG_RETRY)
    out->reason = "libcurl_resend_blocked";
  if (out->decision != CG_RETRY)
    out->sleep_ms = 0;
}

/* Make curl_easy_getinfo describe "no transfer" after a call that ended before any
 * attempt of its own (circuit_open, retry_budget_exhausted, local_rate_limited, a host
 * abort while waiting), as libcurl does for every transfer it starts: otherwise the
 * handle still shows the previous transfer (its status, its byte counts) beside a
 * failed perform.
 *
 * libcurl resets that information in Curl_pretransfer (Curl_initinfo and
 * Curl_pgrsResetTransferSizes, lib/transfer.c), which runs before the URL's protocol is
 * looked up in Curl_connect (lib/url.c findprotocol, against CURLOPT_PROTOCOLS).  So the
 * real perform is run once with no protocol allowed: it fails with
 * CURLE_UNSUPPORTED_PROTOCOL after the reset and before any name lookup or socket.
 * VERBOSE and progress are off for it, so no host callback and no "* Protocol ..." line;
 * then the host's PROTOCOLS(_STR), VERBOSE and NOPROGRESS are put back as the shadow
 * recorded them (libcurl's defaults when the host never set them), and the caller
 * writes its own text over the error buffer.  When the host's protocol list cannot be
 * put back exactly (out of memory when it was recorded), the run is skipped and the
 * previous transfer's information stays (README). */
static void cg__no_transfer(struct cg_call *call) {
  struct cg_handle *h = call->h;
  const struct cg_lib *lib = call->lib;
  CURL *c = h->curl;
  CURLcode rc;

  if (h->protocols_kind == 2 && !h->protocols_str)
    return;
  if (lib->easy_setopt(c, CURLOPT_PROTOCOLS, 0L) != CURLE_OK)
    return; /* this libcurl cannot: getinfo keeps the previous transfer */
  lib->easy_setopt(c, CURLOPT_VERBOSE, 0L);
  lib->easy_setopt(c, CURLOPT_NOPROGRESS, 1L);
  /* The HSTS read callback runs in every perform, before the protocol check: after an
   * attempt of this call it was asked already (its entries are in the handle's cache). */
  if (call->reached && h->hstsread_fn)
    lib->easy_setopt(c, CURLOPT_HSTSREADFUNCTION, (curl_hstsread_callback) NULL);
  rc = lib->easy_perform(c);
  if (call->reached && h->hstsread_fn)
    lib->easy_setopt(c, CURLOPT_HSTSREADFUNCTION, h->hstsread_fn);
  if (h->protocols_kind == 2)
    lib->easy_setopt(c, CG_OPT_PROTOCOLS_STR, h->protocols_str);
  else
    lib->easy_setopt(c, CURLOPT_PROTOCOLS, h->protocols_kind == 1 ? h->protocols
                                                                  : (long) CURLPROTO_ALL);
  lib->easy_setopt(c, CURLOPT_VERBOSE, h->verbose);
  lib->easy_setopt(c, CURLOPT_NOPROGRESS, (long) h->noprogress);
  if (rc != CURLE_UNSUPPORTED_PROTOCOL && rc != CURLE_ABORTED_BY_CALLBACK /* HSTS read */)
    cg_warn_once("no-transfer", "resetting the transfer information gave curl code %d, "
                 "not %d", (int) rc, (int) CURLE_UNSUPPORTED_PROTOCOL);
}

/* Write one usage record, counted first in the pool's tally in the state file (tally.h:
 * what `curlguard stat --prometheus` exports), so the metrics follow the log record by
 * record. */
static void cg__emit(struct cg_call *call, const struct cg_record *rec) {
  cg_admission_tally(&call->admission, rec);
  cg_record_emit(call->cfg, rec);
}

/* Record an attempt that ended before reaching the network (host abort during a wait,
 * rate-limit fail-fast).  `reset`: make getinfo describe "no transfer" (cg__no_transfer);
 * 0 for a handle the host is taking away (no perform may run on it then). */
static void cg__local_record2(struct cg_call *call, enum cg_outcome o, CURLcode rc,
                              const char *reason, int reset) {
  struct cg_record rec;
  struct cg_attempt a;
  struct cg_info info;
  struct cg_verdict v = {o, 0, 0};
  char outcome[24], digest[CG_DIGEST_HEX];

  if (reset)
    cg__no_transfer(call);
  memset(&a, 0, sizeof(a));
  memset(&info, 0, sizeof(info));
  cg__fill_record(call, &a, &info, &v, (int) rc, &rec, outcome, sizeof(outcome), digest);
  rec.duration_ms = 0;
  rec.final = 1;
  rec.decision = cg_decision_name(o == CG_OUT_ABORTED_BY_HOST ? CG_DONE : CG_GIVE_UP);
  rec.reason = reason;
  cg__emit(call, &rec);
}

static void cg__local_record(struct cg_call *call, enum cg_outcome o, CURLcode rc,
                             const char *reason) {
  /* A held-over give-up refused at the gate ends as it was (cg__over_done hands over its
   * answer): getinfo keeps describing that attempt, and the record says why it would
   * have ended without the hold-over. */
  if (CG_RARE(call->over != NULL) && rc != CURLE_ABORTED_BY_CALLBACK) {
    cg__local_record2(call, o, call->over_rc, call->hold_why ? call->hold_why : reason, 0);
    return;
  }
  cg__local_record2(call, o, rc, reason, 1);
}

/* The error text of a call the limiter refused (`ms`: the wait that would not fit, or,
 * for an in-flight slot, the time waited for one). */
static void cg__limit_text(const struct cg_call *call, int64_t ms, char *msg, size_t n) {
  if (call->admission.slot_refused)
    snprintf(msg, n, "curlguard: no in-flight slot of %.160s free within the deadline "
             "(waited %.1f s)", call->pool->name, (double) ms / 1000.0);
  else
    snprintf(msg, n, "curlguard: rate limit wait %.1f s exceeds deadline",
             (double) ms / 1000.0);
}

/* The limiter's wait (or an in-flight slot's) does not fit what is left of the deadline
 * (`ms`: the wait): fail fast with a record and CURLE_OPERATION_TIMEDOUT.  With no wait
 * asked and the deadline already past when the call came to its attempt, the deadline is
 * the reason instead (SPEC 7's `deadline`): a multi host that calls back late, after a
 * backoff it slept through (its select(2) of 1 s, say), was recorded
 * `local_rate_limited`, "rate limit wait 0.0 s", with no limit set. */
static CURLcode cg__limit_refused(struct cg_call *call, int64_t ms) {
  char msg[CURL_ERROR_SIZE];

  if (ms <= 0 && !call->admission.slot_refused && cg_mono_ms() >= call->deadline_ms) {
    cg__local_record(call, CG_OUT_DEADLINE, CURLE_OPERATION_TIMEDOUT, "deadline");
    snprintf(msg, sizeof(msg), "curlguard: the deadline passed before attempt %d",
             call->attempt);
  } else {
    cg__local_record(call, CG_OUT_LOCAL_RATE_LIMITED, CURLE_OPERATION_TIMEDOUT,
                     "rate_limit_wait");
    cg__limit_text(call, ms, msg, sizeof(msg));
  }
  cg__host_errbuf(call->h, msg);
  return CURLE_OPERATION_TIMEDOUT;
}

/* The breaker or the budget refused the attempt before it reached the network: fail
 * fast with a record (breaker.h, budget.h). */
static CURLcode cg__refused(struct cg_call *call, enum cg_gate gate, int64_t next_probe_ms) {
  char msg[CURL_ERROR_SIZE];

  if (gate == CG_GATE_CIRCUIT_OPEN) {
    /* Held for the probe (open: wait), the call fails fast only when its deadline leaves
     * no room to wait: a timeout, as a wait for the rate limit is (CURLE_OPERATION_TIMEDOUT),
     * which a host's own retry loop (curl --retry) tries again after its backoff.  With
     * CURLE_COULDNT_CONNECT it did not: 8 curl --retry 3 -m 2 calls into a 6 s outage
     * finished 0 of 8 where plain curl finished 8 (helper-59).  open: fail gives the
     * configured open_code. */
    CURLcode rc = call->pool->breaker.open_wait ? CURLE_OPERATION_TIMEDOUT
                                                : (CURLcode) call->pool->breaker.open_code;
    cg__local_record(call, CG_OUT_CIRCUIT_OPEN, rc, "circuit_open");
    /* While a probe is out the breaker closes the moment it succeeds: its deadline is
     * no "next probe" time. */
    if (cg_admission_probing(&call->admission))
      snprintf(msg, sizeof(msg), "curlguard: circuit open for %.160s, probe in flight",
               call->pool->name);
    else
      snprintf(msg, sizeof(msg), "curlguard: circuit open for %.160s, next probe in %lld s",
               call->pool->name, (long long) ((next_probe_ms + 999) / 1000));
    cg__host_errbuf(call->h, msg);
    return rc;
  }
  /* A host's repeat of a failed call, over the budget and unable to wait for it within
   * its deadline: not sent (RFC 9110 9.2.2: a client should not retry a failed automatic
   * retry).  A timeout (CURLE_OPERATION_TIMEDOUT): the host's own loop may try again after
   * its backoff, and that repeat asks the budget again, so nothing more reaches the
   * provider than the budget allows.  CURLE_COULDNT_CONNECT, which `curl --retry` does
   * not retry, ended the host's loop while the outage lasted (helper-59: 0 of 8 where
   * plain curl --retry 3 finished 8). */
  cg__local_record(call, CG_OUT_RETRY_BUDGET_EXHAUSTED, CURLE_OPERATION_TIMEDOUT,
                   "retry_budget_exhausted");
  snprintf(msg, sizeof(msg),
           "curlguard: retry budget exhausted for %.160s; this repeated call was not sent",
           call->pool->name);
  cg__host_errbuf(call->h, msg);
  return CURLE_OPERATION_TIMEDOUT;
}

/* The pool's breaker is open: send the call to the pool's fallback base instead, under
 * the pool its host matches (its own limits, breaker and budget).  Once per call: a
 * fallback's own fallback is not followed.  Returns 1 when diverted. */
static int cg__divert(struct cg_call *call) {
  const struct cg_pool_cfg *from = call->pool;
  struct cg_url u;

  if (call->fallback_from || !from->fallback_url[0])
    return 0;
  if (CG_RARE(call->h->curlu != NULL)) {
    /* libcurl goes by the CURLU handle, not CURLOPT_URL: the call cannot be sent
     * elsewhere without changing the host's CURLU. */
    cg_warn_once("fallback-curlu", "a call whose URL is set with CURLOPT_CURLU is not "
                 "sent to pool %s's fallback; failing fast", from->name);
    return 0;
  }
  if (cg_fallback_url(from->fallback_url, call->h->url, call->fallback_url,
                      sizeof(call->fallback_url)) != 0 ||
      cg_url_parse(call->fallback_url, &u) != 0) {
    call->fallback_url[0] = '\0';
    cg_warn_once("fallback-url", "cannot send %.200s to the fallback %.200s; failing fast",
                 call->url.host, from->fallback_url);
    return 0;
  }
  if (strcmp(call->url.scheme, "https") == 0 && strcmp(u.scheme, "http") == 0)
    cg_warn_once("fallback-downgrade",
                 "pool %s sends https calls to its fallback %.200s in clear text (http): "
                 "headers such as API keys are readable on the way", from->name,
                 from->fallback_url);
  cg_admission_finish(&call->admission); /* the first pool's probe or retry slot */
  call->fallback_from = from->name;
  call->url = u;
  call->memo_cfg = NULL; /* url no longer what memo_key says */
  call->pool = cg_config_pool_at(call->cfg, u.host, u.port, u.scheme, &call->fallback_scratch);
  call->admission.pool = call->pool;
  call->admission.pool_index = -1;
  return 1;
}

/* Pass the breaker, the budget and the limiter before an attempt.  The breaker is asked
 * twice: before the limiter's wait, and again once the wait is over, right before the
 * attempt goes out (calls queued behind RPM pacing or MAX_INFLIGHT while it opened fail
 * fast too).  An open breaker diverts the call to its pool's fallback once.  Returns 0
 * with the in-flight `*slot` to go, or 1 with the call's final code in `*rc`. */
static int cg__admit(struct cg_call *call, int *slot, CURLcode *rc) {
  struct cg_handle *h = call->h;
  int round;

  /* One reading from the admission's start to the send while nothing takes time: the
   * first attempt's is cg_engine_begin's (the state file's check), the gate and the
   * limiter hand it on (cg_admission_gate_at, 0 once something waited), and the
   * attempt's start is its end (issue 16: 5 clock reads a call fewer). */
  int64_t now = call->begin_ns > 0 ? call->begin_ns : cg_state_now();

  call->begin_ns = 0; /* the first attempt's only: a retry's admission starts after its wait */
  call->admission.breaker_wait_ms = 0; /* this attempt's, as queue_ms */
  call->admit_start_ns = now;
  call->go_ns = 0;
  for (round = 0; round < 4; round++, now = 0) {
    int64_t wait_ms;
    enum cg_gate gate;

    call->admission.can_divert = !call->fallback_from && call->pool->fallback_url[0];
    gate = cg_admission_gate_at(&call->admission, call->attempt, call->repeats > 0,
                                call->deadline_ms, &wait_ms, &now);
    int s;

    if (gate == CG_GATE_CIRCUIT_OPEN && cg__divert(call) &&
        !(call->admission.can_divert = 0)) {
      now = 0; /* the diversion is no wait, but a record written */
      gate = cg_admission_gate_at(&call->admission, call->attempt, call->repeats > 0,
                                  call->deadline_ms, &wait_ms, &now);
    }
    if (gate == CG_GATE_BUDGET) {
      /* A host repeat over the budget waits for it while the deadline allows. */
      int64_t waited;
      int w = cg_admission_repeat_wait(&call->admission, cg__wait_fn, call, &waited);
      now = 0;
      if (w == -3)
        gate = CG_GATE_ABORTED;
      else if (w == 0)
        continue; /* granted: the breaker is asked again after the wait */
    }
    if (gate == CG_GATE_ABORTED) {
      cg__local_record(call, CG_OUT_ABORTED_BY_HOST, CURLE_ABORTED_BY_CALLBACK,
                       "aborted_by_host");
      cg__host_errbuf(h, "Callback aborted");
      *rc = CURLE_ABORTED_BY_CALLBACK;
      return 1;
    }
    if (gate != CG_GATE_GO) {
      *rc = cg__refused(call, gate, wait_ms);
      return 1;
    }
    s = cg_admission_enter_at(&call->admission, call->deadline_ms, cg__wait_fn, call, &wait_ms,
                              &now);
    if (s == -3) {
      cg__local_record(call, CG_OUT_ABORTED_BY_HOST, CURLE_ABORTED_BY_CALLBACK,
                       "aborted_by_host");
      cg__host_errbuf(h, "Callback aborted");
      *rc = CURLE_ABORTED_BY_CALLBACK;
      return 1;
    }
    if (s == -1) { /* fail fast: the limiter's wait does not fit what is left */
      *rc = cg__limit_refused(call, wait_ms);
      return 1;
    }
    /* Asked again only after a wait: with none, the breaker's answer above is as new
     * as a second one would be (issue 16: ~300 instructions a call). */
    gate = call->admission.waited
               ? cg_admission_recheck(&call->admission, call->deadline_ms, &wait_ms)
               : CG_GATE_GO;
    if (gate == CG_GATE_GO) {
      *slot = s;
      call->go_ns = call->admission.waited ? 0 : now;
      return 0;
    }
    /* The breaker opened while this call waited: it does not go out. */
    cg_admission_leave(&call->admission, s);
    if (gate == CG_GATE_ABORTED) {
      cg__local_record(call, CG_OUT_ABORTED_BY_HOST, CURLE_ABORTED_BY_CALLBACK,
                       "aborted_by_host");
      cg__host_errbuf(h, "Callback aborted");
      *rc = CURLE_ABORTED_BY_CALLBACK;
      return 1;
    }
    if (!cg__divert(call)) {
      *rc = cg__refused(call, CG_GATE_CIRCUIT_OPEN, wait_ms);
      return 1;
    }
  }
  *rc = cg__refused(call, CG_GATE_CIRCUIT_OPEN, 0); /* not reached: one diversion at most */
  return 1;
}

/* The non-blocking form of cg__admit (the multi driver): the same gates in the same
 * order, every wait handed back as CG_STEP_WAIT with `*ms` (admit.h, cg_admission_step_nb). */
static enum cg_step cg__admit_nb(struct cg_call *call, int64_t *ms, CURLcode *rc) {
  int round;

  if (!call->nb_started) {
    memset(&call->nb, 0, sizeof(call->nb));
    call->nb.slot = -2;
    call->admission.breaker_wait_ms = 0; /* this attempt's, as queue_ms */
    call->nb_started = 1;
    call->admit_start_ns = cg_state_now(); /* CLOCK_MONOTONIC, as cg_mono_ms() */
    call->nb_tick_ms = call->admit_start_ns / 1000000;
  }
  for (round = 0; round < 4; round++) {
    enum cg_gate gate;
    enum cg_nb r;
    int64_t w;
    int slot;

    call->admission.can_divert = !call->fallback_from && call->pool->fallback_url[0];
    r = cg_admission_step_nb(&call->admission, &call->nb, call->attempt, call->repeats > 0,
                             call->deadline_ms, &w, &gate, &slot);
    if (r == CG_NB_GO) {
      call->slot = slot;
      call->nb_started = 0;
      return CG_STEP_GO;
    }
    if (r == CG_NB_WAIT) {
      /* As the blocking driver's waits (admit.h `tick`): a call held for a second or more
       * runs the host's progress callback about once a second, which may abort it (libcurl
       * does not run it: the handle is not in the real multi yet).  Before, a multi host's
       * abort was seen only at its deadline. */
      int64_t now = cg_mono_ms();
      if (CG_RARE(now - call->nb_tick_ms >= 1000)) {
        call->nb_tick_ms = now;
        if (cg__tick_fn(call)) {
          if (call->nb.slot >= 0)
            cg_admission_leave(&call->admission, call->nb.slot);
          call->nb.slot = -2;
          cg_admission_nb_drop(&call->admission, &call->nb);
          call->nb_started = 0;
          cg__local_record(call, CG_OUT_ABORTED_BY_HOST, CURLE_ABORTED_BY_CALLBACK,
                           "aborted_by_host");
          cg__host_errbuf(call->h, "Callback aborted");
          *rc = CURLE_ABORTED_BY_CALLBACK;
          return CG_STEP_DONE;
        }
      }
      *ms = w > 0 ? w : 1;
      return CG_STEP_WAIT;
    }
    /* Not waiting any more: its place in turn for a slot, if any, goes. */
    cg_admission_nb_drop(&call->admission, &call->nb);
    if (r == CG_NB_GATE && gate == CG_GATE_CIRCUIT_OPEN && cg__divert(call)) {
      memset(&call->nb, 0, sizeof(call->nb)); /* the fallback's pool, from its gate */
      call->nb.slot = -2;
      continue;
    }
    call->nb_started = 0;
    if (r == CG_NB_GATE) {
      *rc = cg__refused(call, gate, w);
      return CG_STEP_DONE;
    }
    *rc = cg__limit_refused(call, w);
    return CG_STEP_DONE;
  }
  call->nb_started = 0;
  *rc = cg__refused(call, CG_GATE_CIRCUIT_OPEN, 0); /* not reached: one diversion at most */
  return CG_STEP_DONE;
}

/* Judge the ended attempt `a` and record it (engine.h cg_engine_judge). */
/* Hold the call over for the open breaker's probe (`why`: how it would end otherwise, for
 * a refusal at the gate): `out` becomes a retry with no backoff of its own, the gate
 * holds it, and its next attempt is not counted (cg__attempt_start).  0, `out` left as it
 * was, when the body cannot be rewound. */
static int cg__hold_over(struct cg_call *call, const struct cg_attempt *a,
                         struct cg_policy_out *out, const char *why) {
  if (cg__rewind_body(call, a) != 0)
    return 0;
  out->decision = CG_RETRY;
  out->reason = "breaker_hold";
  out->sleep_ms = 0;
  if (!call->hold_over) /* a give-up held over, then refused by the budget: still that */
    call->hold_why = why;
  call->hold_over = 1;
  return 1;
}

static enum cg_step cg__after(struct cg_call *call, struct cg_attempt *a, CURLcode rc, int nb,
                              int64_t *ms, CURLcode *out_rc) {
  struct cg_handle *h = call->h;
  struct cg_info info;
  struct cg_verdict v;
  struct cg_policy_out out;
  struct cg_record rec;
  char outcome[24], digest[CG_DIGEST_HEX];
  int64_t budget_waited = 0;

  *ms = 0;
  if (CG_RARE(call->pend.active)) {
    /* Judged before; its retry was waiting for the budget, or (final) its held bytes for
     * a host that paused. */
    info = call->pend.info;
    v = call->pend.v;
    out = call->pend.out;
    rc = call->pend.rc;
    if (call->pend.final)
      goto deliver;
  } else {
    int deferred;
    int64_t now;
    cg__getinfo(call, a, &info);
    if (a->usage)
      cg_usage_finish(a->usage, &call->usage);
    cg__judge(call, a, rc, &info, &v, &out);
    cg_admission_learn(&call->admission, &a->hints, a->status, out.sleep_ms,
                       call->lib->getdate);
    /* The learned rate: a throttle lowers it; any other answer, a 5xx too (the provider
     * kept up with the rate; failures are the breaker's), raises it. */
    /* The attempt's end read (cg__attempt_end) is still now: since it only bookkeeping ran,
     * on the file (0 after a host's seek callback, cg__rewind_body, or when the multi
     * driver judges on a later pass, cg_engine_end_aged). */
    now = call->end_ns;
    call->end_ns = 0;
    cg_admission_adapt_at(&call->admission,
                          v.outcome == CG_OUT_HTTP && v.status == 429 ? CG_THROTTLE_429
                          : (v.outcome == CG_OUT_HTTP &&
                             (v.status == 529 || (v.status == 503 && call->hint_ms > 0))) ||
                              v.outcome == CG_OUT_STREAM_ERROR,
                          a->status > 0, now);
    /* Issue 12 item 6: a first attempt's failure that a retry may still fix is not told
     * to the breaker yet (a retry's failure, or a host's repeat's, is): it counts only if
     * the call ends with it. */
    deferred = out.decision == CG_RETRY && call->attempt == 1 && call->repeats == 0;
    cg_admission_result_at(&call->admission, v.outcome, v.status,
                           v.outcome == CG_OUT_HTTP && v.status == 429 && call->hint_ms >= 0,
                           deferred, call->hint_ms, now);
    /* A call that used up its attempts while the breaker is open (this failure may have
     * opened it) is held over for the probe, as a call that came later is: the attempt
     * it then makes is the breaker's, not counted (cg__attempt_start), and the gate
     * holds it for the probe's result.  Without it, a call whose full-jitter draws were
     * short spent its attempts in the outage's first second and failed with most of its
     * deadline left, where the calls the breaker held succeeded (a 2.5 s outage, 4
     * POSTs: 3 of 4 done, curl --retry 2: 4 of 4). */
    if (CG_RARE(out.decision == CG_GIVE_UP) && strcmp(out.reason, "max_attempts") == 0 &&
        !a->delivered && cg__may_hold_over(call) &&
        cg_admission_breaker_holds(&call->admission, call->last_attempt_ms))
      cg__hold_over(call, a, &out, "max_attempts");
  }
  if (CG_RARE(out.decision == CG_RETRY)) {
    /* The shared breaker and budget have the last word: a refused retry ends the call
     * with the answer in hand. */
    int64_t need = call->last_attempt_ms > CG_MIN_ATTEMPT_MS ? call->last_attempt_ms
                                                              : CG_MIN_ATTEMPT_MS, waited;
    const char *refused;
    /* A 429 that said when: its retry is the provider's schedule, not the budget's. */
    call->admission.retry_scheduled =
        v.outcome == CG_OUT_HTTP && v.status == 429 && call->hint_ms >= 0;
    if (nb) {
      int64_t wait_ms, already = call->pend.active ? cg_mono_ms() - call->pend.since_ms : 0;
      refused = cg_admission_retry_nb(&call->admission, need, out.sleep_ms, already, &wait_ms);
      if (!refused && wait_ms > 0) {
        if (!call->pend.active) {
          call->pend.active = 1;
          call->pend.info = info;
          call->pend.v = v;
          call->pend.out = out;
          call->pend.rc = rc;
          call->pend.since_ms = cg_mono_ms();
        }
        *ms = wait_ms;
        return CG_STEP_WAIT;
      }
      waited = already;
      call->pend.active = 0;
    } else {
      refused =
          cg_admission_retry(&call->admission, need, out.sleep_ms, cg__wait_fn, call, &waited);
    }
    if (refused && strcmp(refused, "aborted_by_host") == 0) {
      call->attempt++;
      cg__local_record(call, CG_OUT_ABORTED_BY_HOST, CURLE_ABORTED_BY_CALLBACK,
                       "aborted_by_host");
      cg__host_errbuf(h, "Callback aborted");
      cg__attempt_done(call, a);
      *out_rc = CURLE_ABORTED_BY_CALLBACK;
      return CG_STEP_DONE;
    }
    if (refused && strcmp(refused, "breaker_hold") == 0) {
      /* The budget refused a retry that cannot wait for its window while the breaker
       * holds calls: the retry is held over for the probe instead (the breaker, not the
       * budget, gates it now), uncounted as a breaker_hold is. */
      refused = cg__may_hold_over(call) && cg__hold_over(call, a, &out, "retry_budget_exhausted")
                    ? NULL
                    : "retry_budget_exhausted";
    }
    if (refused) {
      out.decision = CG_GIVE_UP;
      /* a give-up held over ends as it was: its attempts are used up */
      out.reason = call->hold_over ? call->hold_why : refused;
      call->hold_over = 0;
      out.sleep_ms = 0;
      /* A deferred failure stays uncounted: the retry budget (or an open breaker) said
       * no, the provider did not say the retry would fail.  An outage is still seen:
       * the retries the budget grants (at least min_per_s) fail and count, and so do
       * calls that end failed without a retry (issue 12 item 6, README). */
    } else if (waited > 0) {
      /* The wait for the budget is part of the backoff: only the rest is slept, and
       * the record's backoff_ms says the whole time before the next attempt. */
      budget_waited = waited;
      out.sleep_ms = out.sleep_ms > waited ? out.sleep_ms - waited : 0;
    }
  }

  if (out.decision == CG_RETRY) {
    int keep = CG_RARE(call->hold_over), waits = cg_admission_breaker_waits(&call->admission);
    if (waits && out.sleep_ms > 0) {
      /* A backoff past the call's last chance to be the breaker's probe early is cut to
       * it: later, the gate could only refuse the retry (admit.h). */
      int64_t e = cg_admission_early_in_ms(&call->admission);
      if (e >= 0 && e < out.sleep_ms)
        out.sleep_ms = e;
    }
    if (!keep && waits && !call->over) {
      /* The breaker may hold the retry (for the probe, or for its last chance to be an
       * early one) and the gate then refuse it: the host gets this answer, not nothing
       * (a helper's find: 3 of 4 POSTs' 503s turned into exit 7). */
      keep = 1;
      call->hold_why = NULL; /* the refusal's own reason (cg__local_record) */
    }
    if (keep && !call->over && (call->over = malloc(sizeof(*call->over))) != NULL) {
      /* Keep the give-up's answer: the gate may still refuse the held-over attempt (the
       * probe another process carries fails and the next is past the deadline, or a
       * fallback the call cannot take), and the host then gets this answer, as it did
       * before the hold-over, not a circuit_open error. */
      *call->over = *a;
      call->over->usage = NULL;
      call->over->spare = NULL;
      call->over_rc = rc;
      a->head = a->tail = NULL;
    } else {
      cg_attempt_discard(a);
    }
    /* Written before the wait, so a long Retry-After is visible in the log at once. */
    cg__fill_record(call, a, &info, &v, (int) rc, &rec, outcome, sizeof(outcome), digest);
    rec.backoff_ms = out.sleep_ms + budget_waited;
    rec.decision = cg_decision_name(CG_RETRY);
    rec.reason = out.reason;
    cg__emit(call, &rec);
    cg__attempt_done(call, a);
    call->prev_sleep_ms = out.sleep_ms;
    call->slept_ms += out.sleep_ms + budget_waited;
    call->attempt++;
    *ms = out.sleep_ms;
    return CG_STEP_RETRY;
  }

  /* The final attempt: hand over what is held, then record what the host got.  The
   * multi driver never naps here: a host that pauses is asked again later. */
deliver:
  if (a->mode != CG_MODE_STREAM) {
    CURLcode drc;
    if (nb) {
      int paused;
      drc = cg_attempt_deliver_step(a, call->deadline_ms, &paused);
      if (paused) {
        if (!call->pend.final) {
          call->pend.active = call->pend.final = 1;
          call->pend.info = info;
          call->pend.v = v;
          call->pend.out = out;
          call->pend.rc = rc;
          call->pend.nap_ms = 1;
        } else if (call->pend.nap_ms < 100) {
          call->pend.nap_ms *= 2;
        }
        *ms = call->pend.nap_ms;
        return CG_STEP_WAIT;
      }
      call->pend.active = call->pend.final = 0;
    } else {
      drc = cg_attempt_deliver(a, call->deadline_ms);
    }
    if (CG_RARE(drc != CURLE_OK && rc == CURLE_OK)) {
      rc = drc;
      if (a->host_aborted || drc == CURLE_WRITE_ERROR) {
        v.outcome = CG_OUT_ABORTED_BY_HOST;
        out.decision = CG_DONE;
        out.reason = "aborted_by_host";
      }
    }
  }
  cg__fill_record(call, a, &info, &v, (int) rc, &rec, outcome, sizeof(outcome), digest);
  call->final_ok = v.outcome == CG_OUT_OK;
  rec.final = 1;
  rec.decision = cg_decision_name(out.decision);
  rec.reason = out.reason;
  /* A call that the breaker held and that then succeeded says why it took longer. */
  if (CG_RARE(call->held) && out.reason && strcmp(out.reason, "ok") == 0)
    rec.reason = "breaker_wait";
  /* The body (or one event) was over the parser's bounds: tokens are null, and say why. */
  if (a->usage && CG_RARE(call->usage.skipped) && v.outcome == CG_OUT_OK)
    rec.reason = "usage_too_large";
  /* ... or came compressed past libcurl in a coding the reader cannot inflate. */
  else if (CG_RARE(a->usage && a->hints.content_encoding[0]) && v.outcome == CG_OUT_OK &&
           rec.total_tokens < 0 && cg_attempt_body_coding(a) == CG_ATTEMPT_CODED)
    rec.reason = "usage_encoded";
  cg__emit(call, &rec);
  cg__host_errbuf(h, a->errbuf);
  cg__attempt_done(call, a);
  *out_rc = rc;
  return CG_STEP_DONE;
}

/* A thread cancelled (pthread_cancel(3)) or ended (pthread_exit(3), from a host callback)
 * inside the real curl_easy_perform: the in-flight slot goes back (a cleanup handler).
 * Its owner, this process, lives on, so no waiter takes it back as a dead holder's, and
 * every call of the pool, in every process, waited for it until its deadline (a helper's
 * find: curl -m 5 of another process, exit 28 after 4.9 s, while plain libcurl goes on). */
static void cg__attempt_abandoned(void *arg) {
  struct cg_call *call = arg;
  if (call->slot >= 0) {
    cg_admission_leave(&call->admission, call->slot);
    call->slot = -2;
  }
}

/* The real curl_easy_perform of an attempt that holds an in-flight slot, with
 * cg__attempt_abandoned as its cancellation cleanup handler.  Out of line: only
 * a slot needs the handler (without one it does nothing), and pthread_cleanup_push costs a
 * __sigsetjmp and two calls into libc (issue 16); a pool with no in-flight limit (the
 * common one) takes no slot.  A thread cancelled or ended in the perform otherwise needs
 * nothing given back. */
static __attribute__((noinline)) CURLcode cg__perform_held(struct cg_call *call) {
  CURLcode rc;
  pthread_cleanup_push(cg__attempt_abandoned, call);
  rc = call->lib->easy_perform(call->h->curl);
  pthread_cleanup_pop(0);
  return rc;
}

/* The easy driver: the steps in a loop, every wait slept (engine.h). */
static CURLcode cg__run(struct cg_call *call) {
  struct cg_handle *h = call->h;

  for (call->attempt = 1;;) {
    struct cg_attempt a;
    int64_t ms;
    CURLcode rc;

    if (cg_engine_admit(call, 0, &ms, &rc) == CG_STEP_DONE)
      return rc;
    rc = cg__attempt_start(call, &a, 0);
    if (rc == CURLE_OK)
      rc = call->slot >= 0 ? cg__perform_held(call) : call->lib->easy_perform(h->curl);
    rc = cg__attempt_end(call, &a, rc);
    if (cg__after(call, &a, rc, 0, &ms, &rc) == CG_STEP_DONE)
      return rc;
    /* CG_STEP_RETRY: the backoff. */
    if (cg__wait(call, ms) == 0)
      continue;
    /* The host's progress callback aborted the wait: the call ends here, with one more
     * record for the attempt that was never made. */
    cg__local_record(call, CG_OUT_ABORTED_BY_HOST, CURLE_ABORTED_BY_CALLBACK, "aborted_by_host");
    cg__host_errbuf(h, "Callback aborted");
    return CURLE_ABORTED_BY_CALLBACK;
  }
}

/* ---- the engine's steps, for both drivers (engine.h) ---- */

/* Each thread keeps the memory of its last ended call for its next one: a struct cg_call
 * is 14 KiB, and its malloc and free were about 1.1k instructions of every request
 * (issue 16).  Nothing of the old call is read: cg__call_init zeroes what must start
 * zeroed and the rest is written before it is read, as with fresh malloc memory.  The
 * key frees a thread's spare when the thread exits. */
static pthread_key_t cg__spare_key;
static int cg__spare_key_ok;
static CG_TLS struct cg_call *cg__spare;

/* Frees a call's memory: what it keeps for the next call, then itself. */
static void cg__call_mem_free(void *p) {
  struct cg_call *call = p;
  if (call) {
    cg_usage_free(call->usage_keep);
    cg_attempt_kept_free(call->held_keep);
  }
  free(call);
}

__attribute__((constructor)) static void cg__spare_init(void) {
  cg__spare_key_ok = pthread_key_create(&cg__spare_key, cg__call_mem_free) == 0;
}

/* The thread's spare, or NULL.  The key's value is the truth: at thread exit its
 * destructor (free) runs before the host's own later keys' destructors, which may still
 * make calls; cg__spare would then point at freed memory. */
static struct cg_call *cg__spare_get(void) {
  if (cg__spare && pthread_getspecific(cg__spare_key) != cg__spare)
    cg__spare = NULL;
  return cg__spare;
}

static struct cg_call *cg__call_alloc(void) {
  struct cg_call *call = cg__spare_get();

  if (!call) {
    call = malloc(sizeof(*call));
    if (call) { /* the rest is zeroed or written by cg__call_init */
      call->usage_keep = NULL;
      call->held_keep = NULL;
    }
    return call;
  }
  cg__spare = NULL;
  pthread_setspecific(cg__spare_key, NULL);
  return call;
}

static void cg__call_release(struct cg_call *call) {
  if (!cg__spare_get() && cg__spare_key_ok && pthread_setspecific(cg__spare_key, call) == 0) {
    cg__spare = call;
    return;
  }
  cg__call_mem_free(call);
}

/* 1 when the thread's spare call holds the memo for the handle's URL (see memo_key). */
static int cg__memo_hit(const struct cg_call *spare, const struct cg_handle *h,
                        const struct cg_config *cfg, const char *url, size_t n) {
  const char *proto = h->default_protocol ? h->default_protocol : "";
  return spare && spare->memo_cfg == cfg && spare->memo_n == n &&
         memcmp(spare->memo_key, url, n) == 0 && strcmp(spare->memo_proto, proto) == 0;
}

/* Keep the memo of the call's url and pool with its memory (see memo_key). */
static void cg__memo_keep(struct cg_call *call, const struct cg_handle *h, const char *url,
                          size_t n) {
  const char *proto = h->default_protocol ? h->default_protocol : "";
  size_t np = strlen(proto);

  call->memo_cfg = NULL;
  if (n >= sizeof(call->memo_key) || np >= sizeof(call->memo_proto))
    return; /* not kept: parsed again next time */
  memcpy(call->memo_key, url, n);
  memcpy(call->memo_proto, proto, np + 1);
  call->memo_n = n;
  call->memo_pool = call->pool == &call->pool_scratch ? NULL : call->pool;
  call->memo_cfg = call->cfg;
}

/* The URL of a handle set with CURLOPT_CURLU (libcurl goes by it, not by CURLOPT_URL),
 * from curl_url_get (to be freed with curl_free), or NULL: none, or no URL API. */
static __attribute__((noinline, cold)) char *cg__curlu_url(const struct cg_handle *h) {
  char *s = NULL;
  if (!h->lib->url_get || !h->lib->free ||
      h->lib->url_get((CURLU *) h->curlu, CURLUPART_URL, &s, 0) != CURLUE_OK) {
    if (s && h->lib->free)
      h->lib->free(s);
    return NULL;
  }
  return s;
}

struct cg_call *cg_engine_begin(struct cg_handle *h, int nb) {
  const struct cg_config *cfg = cg_config();
  struct cg_call *call;
  struct cg_url u;
  const char *url = h->url;
  char *curlu_url = NULL;
  size_t n;

  if (CG_RARE(h->curlu != NULL))
    url = curlu_url = cg__curlu_url(h);
  if (!url)
    return NULL;
  n = strcspn(url, "?#");
  if (cg__memo_hit(cg__spare_get(), h, cfg, url, n)) {
    call = cg__call_alloc(); /* the spare, its url and pool those of this URL */
    cg__call_init(call, h, cfg, url, curlu_url, nb);
    call->pool = call->memo_pool ? call->memo_pool : &call->pool_scratch;
  } else {
    int guarded = cg_url_parse_default(url, h->default_protocol, &u) == 0 &&
                  cg_url_is_http(&u) && cg_config_host_guarded(cfg, u.host);
    if (!guarded || !(call = cg__call_alloc())) {
      if (guarded)
        cg_warn_once("call-oom", "out of memory: a call runs without the guard");
      if (curlu_url)
        h->lib->free(curlu_url);
      return NULL;
    }
    cg__call_init(call, h, cfg, url, curlu_url, nb);
    call->url = u;
    call->pool = cg_config_pool_at(cfg, u.host, u.port, u.scheme, &call->pool_scratch);
    cg__memo_keep(call, h, url, n);
  }
  if (!call->model && cg_body_model_from_path(call->url.path, call->model_buf))
    call->model = call->model_buf; /* Gemini, Vertex AI: in the path */
  /* A call to a model will price its answer: the table is read now, before the first
   * transfer, not after it, when libcurl's download buffer (16 KB, still allocated when
   * the perform returns; bench/batch-host frees it with curl_easy_reset) lies below the
   * heap's top.  Read then, the table's lasting pieces sat above that buffer for the
   * process's life, and every later malloc of it sorted freed chunks instead of taking
   * the top (issue 16: that malloc 1,600 instructions, now 900; 600 without the guard).
   * Later calls: one pthread_once. */
  if (call->model)
    (void) cg__price_table(cfg);
  call->admission.pool = call->pool;
  call->admission.pool_index = -1;
  call->admission.key_fn = cg__limit_key;
  call->admission.key_arg = call;
  call->admission.max_retry_after_ms = cfg->max_retry_after_ms;
  {
    /* One reading for the state file's check and (the easy driver) the admission's start:
     * from here to cg__admit only assignments run (issue 16: a clock read less a call). */
    int64_t now = cg_state_now();
    call->admission.state = cg_state_get_at(cfg->state_path, &now);
    call->begin_ns = nb ? 0 : now;
    call->go_ns = 0;
  }
  call->admission.retry_slot = -1;
  call->admission.deadline_ms = call->deadline_ms;
  call->admission.tick = cg__tick_fn;
  call->admission.tick_arg = call;
  call->attempt = 1;
  call->slot = -2;
  return call;
}

const char *cg_engine_pool(const struct cg_call *call) {
  return call->pool->name;
}

/* The gate's answer for a held-over call: refused, the give-up's answer it kept is
 * handed to the host with that attempt's code (the host aborting the wait excepted);
 * admitted, it is dropped. */
static enum cg_step cg__over_done(struct cg_call *call, enum cg_step step, CURLcode *rc) {
  if (!call->over || step == CG_STEP_WAIT)
    return step;
  if (step == CG_STEP_DONE && *rc != CURLE_ABORTED_BY_CALLBACK) {
    CURLcode drc = cg_attempt_deliver(call->over, call->deadline_ms);
    *rc = drc != CURLE_OK && call->over_rc == CURLE_OK ? drc : call->over_rc;
    cg__host_errbuf(call->h, call->over->errbuf);
  }
  cg__over_free(call);
  return step;
}

enum cg_step cg_engine_admit(struct cg_call *call, int nb, int64_t *ms, CURLcode *rc) {
  int slot;
  *ms = 0;
  if (nb)
    return cg__over_done(call, cg__admit_nb(call, ms, rc), rc);
  if (cg__admit(call, &slot, rc) != 0)
    return cg__over_done(call, CG_STEP_DONE, rc);
  call->slot = slot;
  return cg__over_done(call, CG_STEP_GO, rc);
}

CURLcode cg_engine_attempt_start(struct cg_call *call, struct cg_attempt *a) {
  return cg__attempt_start(call, a, 1);
}

CURLcode cg_engine_attempt_end(struct cg_call *call, struct cg_attempt *a, CURLcode rc) {
  return cg__attempt_end(call, a, rc);
}

void cg_engine_end_aged(struct cg_call *call) {
  call->end_ns = 0;
}

enum cg_step cg_engine_judge(struct cg_call *call, struct cg_attempt *a, CURLcode rc, int nb,
                             int64_t *ms, CURLcode *out_rc) {
  return cg__after(call, a, rc, nb, ms, out_rc);
}

void cg_engine_cancel(struct cg_call *call, struct cg_attempt *a, const char *reason) {
  if (a) {
    struct cg_record rec;
    struct cg_info info;
    struct cg_verdict v = {CG_OUT_ABORTED_BY_HOST, 0, 0};
    char outcome[24], digest[CG_DIGEST_HEX];
    int judged = call->pend.active;

    if (judged) {
      /* Judged: its retry waited for the budget, or its held bytes for a paused host;
       * recorded as what it was. */
      info = call->pend.info;
      v = call->pend.v;
      call->pend.active = call->pend.final = 0;
      call->h->replaying = 0;
    } else {
      cg__getinfo(call, a, &info);
      if (a->usage)
        cg_usage_finish(a->usage, &call->usage);
      v.status = info.status;
      v.sent = info.request_size > 0 || info.pretransfer_us > 0;
      cg_admission_result2(&call->admission, v.outcome, v.status, 0, 0, -1);
    }
    cg_attempt_discard(a);
    cg__fill_record(call, a, &info, &v, (int) CURLE_ABORTED_BY_CALLBACK, &rec, outcome,
                    sizeof(outcome), digest);
    rec.final = 1;
    rec.decision = cg_decision_name(judged ? CG_GIVE_UP : CG_DONE);
    rec.reason = reason;
    cg__emit(call, &rec);
    cg__attempt_done(call, a);
  } else {
    if (call->nb_started && call->nb.slot >= 0)
      cg_admission_leave(&call->admission, call->nb.slot); /* held while rechecking */
    if (call->nb_started)
      cg_admission_nb_drop(&call->admission, &call->nb); /* its place in turn */
    call->nb_started = 0;
    cg__local_record2(call, CG_OUT_ABORTED_BY_HOST, CURLE_ABORTED_BY_CALLBACK, reason, 0);
  }
  cg_engine_end(call, CURLE_ABORTED_BY_CALLBACK);
}

void cg_engine_end(struct cg_call *call, CURLcode rc) {
  const struct cg_config *cfg = call->cfg;

  cg_admission_finish(&call->admission);
  if (cfg->repeat_window_ms > 0) {
    enum cg_repeat_end end = !call->reached                      ? CG_REPEAT_LOCAL
                             : rc == CURLE_OK && call->final_ok ? CG_REPEAT_OK
                                                                : CG_REPEAT_FAILED;
    /* A chain's id is read only from a failed slot (repeat.h). */
    if (cg_repeat_needs_done(end))
      cg_repeat_done(call->repeat_key, call->worker, end, cg_mono_ms(), call->repeats,
                     call->repeat_of[0]          ? call->repeat_of
                     : end == CG_REPEAT_FAILED ? cg__request_id(call)
                                               : call->request_id);
  }
  cg__call_free(call);
  cg__call_release(call);
}

/* ---- the easy driver's entry point (guard.h) ---- */

CURLcode cg_guard_perform(struct cg_handle *h) {
  struct cg_call *call = cg_engine_begin(h, 0);
  CURLcode rc;

  if (!call)
    return h->lib->easy_perform(h->curl);
  rc = cg__run(call);
  cg_engine_end(call, rc);
  return rc;
}
