/* policy.h - outcome x idempotency x server hints -> retry decision (SPEC section 7).
 *
 * The default matrix, as a table in policy.c:
 *   never reached the server (dns, refused, connect timeout, tls)   retry, any method
 *   reached, not processed (429, 503, 502, 408)                     retry, any method
 *   reached, maybe processed (500, 504, timeouts after sending,
 *     reset after send, partial response): possibly billed         retry only idempotent
 *   anything else (2xx/3xx, other 4xx, 501, 505, host abort, ...)   final
 * Idempotent: GET HEAD PUT DELETE OPTIONS TRACE (RFC 9110 section 9.2.2), or any request
 * carrying an Idempotency-Key header.  "x-should-retry: true|false" from the server
 * overrides the status verdict.  Pure: no I/O, no globals.
 */
#ifndef CG_POLICY_H
#define CG_POLICY_H

#include "classify.h"
#include "config.h"

#include <stdint.h>

/* How an outcome is treated by default. */
enum cg_retry_class {
  CG_RC_FINAL,       /* never retried */
  CG_RC_SAFE,        /* did not reach the server, or was refused unprocessed: any method */
  CG_RC_IDEMPOTENT,  /* may have been processed: only idempotent requests */
};

/* The retry class of an outcome (with its HTTP status for CG_OUT_HTTP). */
enum cg_retry_class cg_policy_class(enum cg_outcome o, long status);

/* The retry class after the `n` retry_on rules (config.h): the last rule whose outcome
 * name matches ("http_5xx": 'x' matches any digit) wins; else cg_policy_class. */
enum cg_retry_class cg_policy_class_rules(const struct cg_retry_rule *rules, size_t n,
                                          enum cg_outcome o, long status);

/* 1 when an attempt with this outcome may have been processed (and billed) by the
 * server without the client getting its answer. */
int cg_policy_possibly_billed(const struct cg_verdict *v);

/* 1 for the idempotent methods of RFC 9110 section 9.2.2 (case-sensitive, as methods are). */
int cg_method_idempotent(const char *method);

enum cg_decision { CG_DONE, CG_RETRY, CG_GIVE_UP };

/* Everything the decision depends on. */
struct cg_policy_in {
  struct cg_verdict verdict;
  int idempotent;          /* method is idempotent or an Idempotency-Key is present */
  int redirected;          /* this attempt followed a redirect: a server already answered
                              (processed) the request, so a retry sends it again */
  int should_retry;        /* x-should-retry: -1 absent, 0 false, 1 true */
  int body_replayable;     /* the request body can be sent again */
  int attempt;             /* 1-based number of the attempt just made, counting only
                              those max_attempts counts (not the breaker's probes) */
  int max_attempts;
  int64_t backoff_ms;      /* computed backoff (jitter applied) before the next attempt */
  int64_t hint_ms;         /* server hint (Retry-After / retry-after-ms), -1 none */
  int64_t hint_jitter_ms;  /* small positive jitter added to a hint */
  int64_t max_retry_after_ms;
  int64_t time_left_ms;    /* until the call's deadline */
  int64_t min_attempt_ms;  /* least time an attempt needs to be worth starting */
  const struct cg_retry_rule *rules; /* retry_on overrides, may be NULL */
  size_t nrules;
};

struct cg_policy_out {
  enum cg_decision decision;
  const char *reason;      /* short machine word, e.g. "retryable_status", "deadline" */
  int64_t sleep_ms;        /* before the next attempt, when decision == CG_RETRY */
};

/* A backoff cut to fit the deadline leaves this much more than the attempt's time, so
 * that the retry's admission may still wait a little for the limiter: it refuses a
 * wait that leaves less than CG_MIN_ATTEMPT_MS (admit.h, the same 100 ms). */
#define CG_POLICY_ADMIT_ROOM_MS 100

/* Less than this left of the deadline after an attempt: no attempt can follow (admit.h
 * CG_MIN_ATTEMPT_MS, the same 100 ms: a retry with less left is not started), so the
 * deadline is what ends the call, whatever the method.  A timeout set from the deadline
 * can end the attempt a little before the deadline by the guard's clock (libcurl counts
 * whole ms from its own start, lib/timeval.c Curl_timediff); asked "is the deadline
 * past?", such an attempt was put down to its method under load (`curl -m 2` cutting a
 * POST stream: "not_idempotent", 2 runs of 12 with both CPUs busy). */
#define CG_POLICY_SPENT_MS 100

/* Decide what to do after one attempt. */
void cg_policy_decide(const struct cg_policy_in *in, struct cg_policy_out *out);

/* Names for records: "done", "retry", "give_up". */
const char *cg_decision_name(enum cg_decision d);

#endif
