/* policy.c - the default retry matrix and the retry decision (see policy.h). */
#include "policy.h"

#include <stdio.h>
#include <string.h>

/* Outcome -> retry class, SPEC section 7.  HTTP statuses are looked up separately. */
static const enum cg_retry_class cg__class[CG_OUT_COUNT] = {
  [CG_OUT_OK] = CG_RC_FINAL,
  [CG_OUT_HTTP] = CG_RC_FINAL, /* see cg__status_class */
  [CG_OUT_DNS_ERROR] = CG_RC_SAFE,
  [CG_OUT_CONNECT_REFUSED] = CG_RC_SAFE,
  [CG_OUT_CONNECT_TIMEOUT] = CG_RC_SAFE,
  [CG_OUT_TLS_ERROR] = CG_RC_SAFE,
  [CG_OUT_FIRST_BYTE_TIMEOUT] = CG_RC_IDEMPOTENT,
  [CG_OUT_READ_TIMEOUT] = CG_RC_IDEMPOTENT,
  [CG_OUT_RESET_AFTER_SEND] = CG_RC_IDEMPOTENT,
  [CG_OUT_PARTIAL_RESPONSE] = CG_RC_IDEMPOTENT,
  [CG_OUT_ABORTED_BY_HOST] = CG_RC_FINAL,
  [CG_OUT_CIRCUIT_OPEN] = CG_RC_FINAL,
  [CG_OUT_LOCAL_RATE_LIMITED] = CG_RC_FINAL,
  [CG_OUT_RETRY_BUDGET_EXHAUSTED] = CG_RC_FINAL,
  [CG_OUT_DEADLINE] = CG_RC_FINAL,
  [CG_OUT_CURL_ERROR] = CG_RC_FINAL,
  [CG_OUT_STREAM_ERROR] = CG_RC_FINAL, /* its bytes already reached the host */
};

/* HTTP statuses that are not final. */
static const struct {
  long status;
  enum cg_retry_class cls;
} cg__status_class[] = {
  {408, CG_RC_SAFE},       /* Request Timeout: the server did not process it */
  {429, CG_RC_SAFE},       /* Too Many Requests */
  {502, CG_RC_SAFE},       /* Bad Gateway */
  {503, CG_RC_SAFE},       /* Service Unavailable */
  {500, CG_RC_IDEMPOTENT}, /* Internal Server Error: may have been processed */
  {504, CG_RC_IDEMPOTENT}, /* Gateway Timeout: the upstream may have processed it */
};

enum cg_retry_class cg_policy_class(enum cg_outcome o, long status) {
  size_t i;
  if ((unsigned) o >= CG_OUT_COUNT)
    return CG_RC_FINAL;
  if (o != CG_OUT_HTTP)
    return cg__class[o];
  for (i = 0; i < sizeof(cg__status_class) / sizeof(cg__status_class[0]); i++)
    if (cg__status_class[i].status == status)
      return cg__status_class[i].cls;
  return CG_RC_FINAL;
}

/* "http_5xx" matches "http_503": an 'x' in the pattern stands for one digit. */
static int cg__name_matches(const char *pattern, const char *name) {
  for (; *pattern && *name; pattern++, name++) {
    if (*pattern == 'x' && *name >= '0' && *name <= '9')
      continue;
    if (*pattern != *name)
      return 0;
  }
  return *pattern == '\0' && *name == '\0';
}

enum cg_retry_class cg_policy_class_rules(const struct cg_retry_rule *rules, size_t n,
                                          enum cg_outcome o, long status) {
  char buf[24];
  const char *name = cg_outcome_name(o, status, buf, sizeof(buf));
  size_t i;

  for (i = n; i-- > 0;) /* the last matching rule wins, as later settings do */
    if (cg__name_matches(rules[i].outcome, name))
      return (enum cg_retry_class) rules[i].cls;
  return cg_policy_class(o, status);
}

int cg_policy_possibly_billed(const struct cg_verdict *v) {
  if (v->outcome == CG_OUT_ABORTED_BY_HOST)
    return v->sent;
  if (v->outcome == CG_OUT_STREAM_ERROR)
    return 1; /* generation started, then failed: providers bill what was generated */
  return cg_policy_class(v->outcome, v->status) == CG_RC_IDEMPOTENT;
}

int cg_method_idempotent(const char *m) {
  /* GET, HEAD, PUT, DELETE, OPTIONS, TRACE: one strcmp, chosen by the first letter. */
  switch (m ? m[0] : '\0') {
  case 'G':
    return strcmp(m, "GET") == 0;
  case 'H':
    return strcmp(m, "HEAD") == 0;
  case 'P':
    return strcmp(m, "PUT") == 0;
  case 'D':
    return strcmp(m, "DELETE") == 0;
  case 'O':
    return strcmp(m, "OPTIONS") == 0;
  case 'T':
    return strcmp(m, "TRACE") == 0;
  default:
    return 0;
  }
}

const char *cg_decision_name(enum cg_decision d) {
  switch (d) {
  case CG_DONE:
    return "done";
  case CG_RETRY:
    return "retry";
  case CG_GIVE_UP:
  default:
    return "give_up";
  }
}

static void cg__set(struct cg_policy_out *out, enum cg_decision d, const char *reason) {
  out->decision = d;
  out->reason = reason;
  out->sleep_ms = 0;
}

void cg_policy_decide(const struct cg_policy_in *in, struct cg_policy_out *out) {
  const struct cg_verdict *v = &in->verdict;
  enum cg_retry_class cls;
  int64_t sleep;

  if (v->outcome == CG_OUT_OK)
    return cg__set(out, CG_DONE, "ok");
  if (v->outcome == CG_OUT_ABORTED_BY_HOST)
    return cg__set(out, CG_DONE, "aborted_by_host");
  cls = cg_policy_class_rules(in->rules, in->nrules, v->outcome, v->status);

  /* The server's word beats the status table, for HTTP answers. */
  if (v->outcome == CG_OUT_HTTP && in->should_retry == 0)
    return cg__set(out, CG_GIVE_UP, "should_retry_false");
  if (v->outcome == CG_OUT_HTTP && in->should_retry == 1)
    cls = CG_RC_SAFE;

  /* A retry starts the call over from its first request.  After a followed redirect that
   * request was already answered, so "not processed" no longer holds for the call: only
   * an idempotent or keyed request may go again (curl tests 1633-1635: a POST answered
   * 301, then a 429 on the GET it led to, was sent three times). */
  if (in->redirected && cls == CG_RC_SAFE)
    cls = CG_RC_IDEMPOTENT;
  if (cls == CG_RC_FINAL)
    return cg__set(out, CG_DONE, v->outcome == CG_OUT_HTTP ? "final_status" : "final_error");
  /* The call's deadline is spent: its timeout (the host's, or the guard's deadline, which
   * each attempt gets as libcurl's timeout) ended this attempt, a stream that was still
   * flowing among them.  Nothing can follow, whatever the method: that is the reason,
   * not the method the matrix would have asked about. */
  if (in->time_left_ms < CG_POLICY_SPENT_MS)
    return cg__set(out, CG_GIVE_UP, "deadline");
  if (cls == CG_RC_IDEMPOTENT && !in->idempotent)
    return cg__set(out, CG_GIVE_UP, "not_idempotent");
  if (!in->body_replayable)
    return cg__set(out, CG_GIVE_UP, "body_not_replayable");
  if (in->attempt >= in->max_attempts)
    return cg__set(out, CG_GIVE_UP, "max_attempts");

  sleep = in->backoff_ms;
  if (in->hint_ms >= 0) {
    if (in->hint_ms > in->max_retry_after_ms)
      return cg__set(out, CG_GIVE_UP, "retry_after_too_long");
    if (in->hint_ms + in->hint_jitter_ms > sleep)
      sleep = in->hint_ms + in->hint_jitter_ms;
  }
  if (sleep + in->min_attempt_ms > in->time_left_ms) {
    /* The jittered backoff is a spread, not a floor (a hint is): when it does not fit,
     * wait what the server asked for, or what leaves the attempt its time and the
     * admission room for a short wait of the limiter (CG_POLICY_ADMIT_ROOM_MS), rather
     * than give the deadline away. */
    int64_t fit = in->time_left_ms - in->min_attempt_ms;
    if (in->hint_ms >= 0) {
      if (in->hint_ms + in->hint_jitter_ms > fit)
        return cg__set(out, CG_GIVE_UP, "deadline");
      sleep = in->hint_ms + in->hint_jitter_ms;
    } else {
      if (fit - CG_POLICY_ADMIT_ROOM_MS <= 0)
        return cg__set(out, CG_GIVE_UP, "deadline");
      sleep = fit - CG_POLICY_ADMIT_ROOM_MS;
    }
  }
  out->decision = CG_RETRY;
  out->reason = in->should_retry == 1 && v->outcome == CG_OUT_HTTP ? "should_retry_true"
                : in->hint_ms >= 0                                ? "retry_after"
                                                                  : "retryable";
  out->sleep_ms = sleep;
}
