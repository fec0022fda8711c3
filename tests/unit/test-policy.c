/* test-policy.c - outcome x idempotency x hints -> decision (policy.h, SPEC section 7,
 * CASES.md "Retry-After and friends", "Timeouts and duplicate billing"). */
#include "policy.h"

#include <criterion/criterion.h>
#include <string.h>

/* A retryable situation with room to spare: attempt 1 of 3, 1 s backoff, no hint,
 * 10 min left. */
static struct cg_policy_in base(enum cg_outcome o, long status, int sent, int idempotent) {
  struct cg_policy_in in;
  memset(&in, 0, sizeof(in));
  in.verdict.outcome = o;
  in.verdict.status = status;
  in.verdict.sent = sent;
  in.idempotent = idempotent;
  in.should_retry = -1;
  in.body_replayable = 1;
  in.attempt = 1;
  in.max_attempts = 3;
  in.backoff_ms = 1000;
  in.hint_ms = -1;
  in.hint_jitter_ms = 0;
  in.max_retry_after_ms = 60000;
  in.time_left_ms = 600000;
  in.min_attempt_ms = 1000;
  in.rules = NULL;
  in.nrules = 0;
  return in;
}

static struct cg_policy_out decide(const struct cg_policy_in *in) {
  struct cg_policy_out out;
  memset(&out, 0xA5, sizeof(out));
  out.reason = NULL;
  cg_policy_decide(in, &out);
  return out;
}

/* ---- the matrix of SPEC section 7 ---- */

enum want { R, G, D }; /* retry, give up (not idempotent), done (final) */

static const struct mrow {
  const char *name;
  enum cg_outcome o;
  long status;
  int sent;
  enum want post, get, post_key; /* POST, GET, POST with Idempotency-Key */
  int billed;
} matrix[] = {
    /* Never reached the server: retry, any method. */
    {"dns_error", CG_OUT_DNS_ERROR, 0, 0, R, R, R, 0},
    {"connect_refused", CG_OUT_CONNECT_REFUSED, 0, 0, R, R, R, 0},
    {"connect_timeout", CG_OUT_CONNECT_TIMEOUT, 0, 0, R, R, R, 0},
    {"tls_error", CG_OUT_TLS_ERROR, 0, 0, R, R, R, 0},
    /* Reached, not processed: retry, any method. */
    {"http_429", CG_OUT_HTTP, 429, 1, R, R, R, 0},
    {"http_503", CG_OUT_HTTP, 503, 1, R, R, R, 0},
    {"http_502", CG_OUT_HTTP, 502, 1, R, R, R, 0},
    {"http_408", CG_OUT_HTTP, 408, 1, R, R, R, 0},
    /* Reached, maybe processed: only idempotent requests; possibly billed. */
    {"http_500", CG_OUT_HTTP, 500, 1, G, R, R, 1},
    {"http_504", CG_OUT_HTTP, 504, 1, G, R, R, 1},
    {"first_byte_timeout", CG_OUT_FIRST_BYTE_TIMEOUT, 0, 1, G, R, R, 1},
    {"read_timeout", CG_OUT_READ_TIMEOUT, 0, 1, G, R, R, 1},
    {"reset_after_send", CG_OUT_RESET_AFTER_SEND, 0, 1, G, R, R, 1},
    {"partial_response", CG_OUT_PARTIAL_RESPONSE, 0, 1, G, R, R, 1},
    /* Final. */
    {"http_400", CG_OUT_HTTP, 400, 1, D, D, D, 0},
    {"http_401", CG_OUT_HTTP, 401, 1, D, D, D, 0},
    {"http_403", CG_OUT_HTTP, 403, 1, D, D, D, 0},
    {"http_404", CG_OUT_HTTP, 404, 1, D, D, D, 0},
    {"http_409", CG_OUT_HTTP, 409, 1, D, D, D, 0},
    {"http_413", CG_OUT_HTTP, 413, 1, D, D, D, 0},
    {"http_422", CG_OUT_HTTP, 422, 1, D, D, D, 0},
    {"http_501", CG_OUT_HTTP, 501, 1, D, D, D, 0},
    {"http_505", CG_OUT_HTTP, 505, 1, D, D, D, 0},
    {"ok 200", CG_OUT_OK, 200, 1, D, D, D, 0},
    {"ok 304", CG_OUT_OK, 304, 1, D, D, D, 0},
    {"aborted_by_host (not sent)", CG_OUT_ABORTED_BY_HOST, 0, 0, D, D, D, 0},
    {"aborted_by_host (sent)", CG_OUT_ABORTED_BY_HOST, 0, 1, D, D, D, 1},
    /* Fail fast. */
    {"circuit_open", CG_OUT_CIRCUIT_OPEN, 0, 0, D, D, D, 0},
    {"local_rate_limited", CG_OUT_LOCAL_RATE_LIMITED, 0, 0, D, D, D, 0},
    {"retry_budget_exhausted", CG_OUT_RETRY_BUDGET_EXHAUSTED, 0, 0, D, D, D, 0},
    {"deadline", CG_OUT_DEADLINE, 0, 0, D, D, D, 0},
    {"curl_error", CG_OUT_CURL_ERROR, 0, 0, D, D, D, 0},
    {"curl_error after sending", CG_OUT_CURL_ERROR, 0, 1, D, D, D, 0},
    {"stream_error (error event in a 200 stream)", CG_OUT_STREAM_ERROR, 200, 1, D, D, D, 1},
};

static void check_cell(const struct mrow *m, const char *label, int idempotent, enum want w) {
  struct cg_policy_in in = base(m->o, m->status, m->sent, idempotent);
  struct cg_policy_out out = decide(&in);

  switch (w) {
  case R:
    cr_expect_eq(out.decision, CG_RETRY, "%s %s: decision %s (%s), want retry", m->name,
                 label, cg_decision_name(out.decision), out.reason);
    cr_expect_eq(out.sleep_ms, 1000, "%s %s: sleep %lld", m->name, label,
                 (long long) out.sleep_ms);
    break;
  case G:
    cr_expect_eq(out.decision, CG_GIVE_UP, "%s %s: decision %s (%s), want give_up", m->name,
                 label, cg_decision_name(out.decision), out.reason);
    cr_expect(out.reason && strcmp(out.reason, "not_idempotent") == 0, "%s %s: reason %s",
              m->name, label, out.reason);
    break;
  case D:
    cr_expect_eq(out.decision, CG_DONE, "%s %s: decision %s (%s), want done", m->name, label,
                 cg_decision_name(out.decision), out.reason);
    break;
  }
  cr_expect_not_null(out.reason, "%s %s: no reason", m->name, label);
  if (out.decision != CG_RETRY)
    cr_expect_eq(out.sleep_ms, 0, "%s %s: sleep %lld without a retry", m->name, label,
                 (long long) out.sleep_ms);
}

Test(policy, matrix) {
  size_t i;
  for (i = 0; i < sizeof(matrix) / sizeof(matrix[0]); i++) {
    const struct mrow *m = &matrix[i];
    check_cell(m, "POST", cg_method_idempotent("POST"), m->post);
    check_cell(m, "GET", cg_method_idempotent("GET"), m->get);
    /* POST carrying an Idempotency-Key header counts as idempotent. */
    check_cell(m, "POST+Idempotency-Key", cg_method_idempotent("POST") || 1, m->post_key);
  }
}

Test(policy, possibly_billed_per_row) {
  size_t i;
  for (i = 0; i < sizeof(matrix) / sizeof(matrix[0]); i++) {
    struct cg_verdict v;
    v.outcome = matrix[i].o;
    v.status = matrix[i].status;
    v.sent = matrix[i].sent;
    cr_expect_eq(cg_policy_possibly_billed(&v), matrix[i].billed, "%s: possibly_billed %d",
                 matrix[i].name, cg_policy_possibly_billed(&v));
  }
}

Test(policy, retry_class) {
  cr_expect_eq(cg_policy_class(CG_OUT_DNS_ERROR, 0), CG_RC_SAFE);
  cr_expect_eq(cg_policy_class(CG_OUT_HTTP, 429), CG_RC_SAFE);
  cr_expect_eq(cg_policy_class(CG_OUT_HTTP, 500), CG_RC_IDEMPOTENT);
  cr_expect_eq(cg_policy_class(CG_OUT_READ_TIMEOUT, 0), CG_RC_IDEMPOTENT);
  cr_expect_eq(cg_policy_class(CG_OUT_HTTP, 418), CG_RC_FINAL);
  cr_expect_eq(cg_policy_class(CG_OUT_OK, 200), CG_RC_FINAL);
  cr_expect_eq(cg_policy_class(CG_OUT_COUNT, 0), CG_RC_FINAL);
}

/* ---- idempotent methods, RFC 9110 section 9.2.2 ---- */

static const struct {
  const char *method;
  int idempotent;
} methods[] = {
    {"GET", 1},   {"HEAD", 1},    {"PUT", 1},   {"DELETE", 1}, {"OPTIONS", 1},
    {"TRACE", 1}, {"POST", 0},    {"PATCH", 0}, {"CONNECT", 0}, {"PROPFIND", 0},
    {"get", 0} /* methods are case-sensitive */, {"", 0}, {"GETX", 0}, {"GE", 0},
};

Test(policy, idempotent_methods) {
  size_t i;
  for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
    cr_expect_eq(cg_method_idempotent(methods[i].method), methods[i].idempotent, "%s",
                 methods[i].method);
  cr_expect_eq(cg_method_idempotent(NULL), 0);
}

/* ---- x-should-retry ---- */

Test(policy, should_retry_false_on_503_gives_up) {
  struct cg_policy_in in = base(CG_OUT_HTTP, 503, 1, 1);
  struct cg_policy_out out;
  in.should_retry = 0;
  out = decide(&in);
  cr_assert_eq(out.decision, CG_GIVE_UP);
  cr_assert_str_eq(out.reason, "should_retry_false");
  in.verdict.status = 429;
  cr_assert_eq(decide(&in).decision, CG_GIVE_UP);
}

/* After a followed redirect the first request was answered: a 429 or 503 on a later hop
 * retries only what may be sent again (curl tests 1633-1635). */
Test(policy, redirected_call_retries_only_idempotent_requests) {
  struct cg_policy_in in = base(CG_OUT_HTTP, 429, 1, 0);
  struct cg_policy_out out;
  in.redirected = 1;
  out = decide(&in);
  cr_assert_eq(out.decision, CG_GIVE_UP);
  cr_assert_str_eq(out.reason, "not_idempotent");
  in.should_retry = 1; /* the last hop's server cannot speak for the first one */
  cr_assert_eq(decide(&in).decision, CG_GIVE_UP);
  in.should_retry = -1;
  in.idempotent = 1;
  cr_assert_eq(decide(&in).decision, CG_RETRY);
  in.idempotent = 0;
  in.redirected = 0;
  cr_assert_eq(decide(&in).decision, CG_RETRY);
}

Test(policy, should_retry_true_on_409_retries) {
  struct cg_policy_in in = base(CG_OUT_HTTP, 409, 1, 0); /* a POST */
  struct cg_policy_out out = decide(&in);
  cr_assert_eq(out.decision, CG_DONE, "409 alone is final");
  in.should_retry = 1;
  out = decide(&in);
  cr_assert_eq(out.decision, CG_RETRY);
  cr_assert_str_eq(out.reason, "should_retry_true");
  cr_assert_eq(out.sleep_ms, 1000);
}

Test(policy, should_retry_true_on_500_post_retries) {
  struct cg_policy_in in = base(CG_OUT_HTTP, 500, 1, 0);
  cr_assert_eq(decide(&in).decision, CG_GIVE_UP);
  in.should_retry = 1;
  cr_assert_eq(decide(&in).decision, CG_RETRY, "the server's word beats the status table");
}

Test(policy, should_retry_does_not_override_limits_or_success) {
  struct cg_policy_in in = base(CG_OUT_HTTP, 409, 1, 0);
  in.should_retry = 1;
  in.attempt = 3;
  cr_assert_eq(decide(&in).decision, CG_GIVE_UP);
  cr_assert_str_eq(decide(&in).reason, "max_attempts");
  in = base(CG_OUT_OK, 200, 1, 1);
  in.should_retry = 1;
  cr_assert_eq(decide(&in).decision, CG_DONE);
  in = base(CG_OUT_HTTP, 409, 1, 1);
  in.should_retry = 1;
  in.body_replayable = 0;
  cr_assert_eq(decide(&in).decision, CG_GIVE_UP);
}

/* ---- limits ---- */

static const struct {
  int attempt, max_attempts;
  enum cg_decision d;
} attempt_cases[] = {
    {1, 1, CG_GIVE_UP}, {1, 2, CG_RETRY}, {2, 3, CG_RETRY},
    {3, 3, CG_GIVE_UP}, {4, 3, CG_GIVE_UP}, {9, 10, CG_RETRY},
};

Test(policy, max_attempts) {
  size_t i;
  for (i = 0; i < sizeof(attempt_cases) / sizeof(attempt_cases[0]); i++) {
    struct cg_policy_in in = base(CG_OUT_HTTP, 503, 1, 0);
    struct cg_policy_out out;
    in.attempt = attempt_cases[i].attempt;
    in.max_attempts = attempt_cases[i].max_attempts;
    out = decide(&in);
    cr_expect_eq(out.decision, attempt_cases[i].d, "attempt %d of %d: %s",
                 attempt_cases[i].attempt, attempt_cases[i].max_attempts,
                 cg_decision_name(out.decision));
    if (out.decision == CG_GIVE_UP)
      cr_expect_str_eq(out.reason, "max_attempts");
  }
}

Test(policy, hint_above_max_retry_after_gives_up) {
  struct cg_policy_in in = base(CG_OUT_HTTP, 429, 1, 0);
  struct cg_policy_out out;
  in.hint_ms = 60001;
  out = decide(&in);
  cr_assert_eq(out.decision, CG_GIVE_UP);
  cr_assert_str_eq(out.reason, "retry_after_too_long");
  in.hint_ms = 60000;
  out = decide(&in);
  cr_assert_eq(out.decision, CG_RETRY, "exactly max_retry_after is allowed");
  cr_assert_eq(out.sleep_ms, 60000);
  cr_assert_str_eq(out.reason, "retry_after");
  in.max_retry_after_ms = 5000;
  in.hint_ms = 6000;
  cr_assert_str_eq(decide(&in).reason, "retry_after_too_long");
}

static const struct {
  int64_t backoff, hint, jitter, min_attempt, time_left;
  enum cg_decision d;
  int64_t sleep;
} deadline_cases[] = {
    {1000, -1, 0, 2000, 3000, CG_RETRY, 1000},
    {1000, -1, 0, 2000, 2999, CG_RETRY, 899}, /* a computed backoff is cut to fit, */
    {1000, -1, 0, 2000, 2100, CG_GIVE_UP, 0}, /* with room for the admission */
    {1000, -1, 0, 0, 1000, CG_RETRY, 1000},
    {1000, -1, 0, 0, 999, CG_RETRY, 899},
    {5000, 1000, 0, 1000, 3000, CG_RETRY, 1000}, /* the hint, not a draw that does not fit */
    {100, 5000, 0, 1000, 6000, CG_RETRY, 5000},
    {100, 5000, 0, 1000, 5999, CG_GIVE_UP, 0}, /* the hint is beyond the deadline */
    {100, 5000, 300, 1000, 6299, CG_GIVE_UP, 0},
    {100, 5000, 300, 1000, 6300, CG_RETRY, 5300},
    {0, -1, 0, 1000, 0, CG_GIVE_UP, 0},
    {0, -1, 0, 1000, -50, CG_GIVE_UP, 0},
};

Test(policy, deadline) {
  size_t i;
  for (i = 0; i < sizeof(deadline_cases) / sizeof(deadline_cases[0]); i++) {
    struct cg_policy_in in = base(CG_OUT_CONNECT_TIMEOUT, 0, 0, 0);
    struct cg_policy_out out;
    in.backoff_ms = deadline_cases[i].backoff;
    in.hint_ms = deadline_cases[i].hint;
    in.hint_jitter_ms = deadline_cases[i].jitter;
    in.min_attempt_ms = deadline_cases[i].min_attempt;
    in.time_left_ms = deadline_cases[i].time_left;
    out = decide(&in);
    cr_expect_eq(out.decision, deadline_cases[i].d, "case %zu: %s (%s)", i,
                 cg_decision_name(out.decision), out.reason);
    if (deadline_cases[i].d == CG_GIVE_UP)
      cr_expect(out.reason && strcmp(out.reason, "deadline") == 0, "case %zu: reason %s", i,
                out.reason);
    else
      cr_expect_eq(out.sleep_ms, deadline_cases[i].sleep, "case %zu: sleep %lld", i,
                   (long long) out.sleep_ms);
  }
}

/* A deadline that ended the attempt (its timeout was the time left: a stream still
 * flowing among them) is the reason, whatever the method; a final answer stays final. */
Test(policy, a_spent_deadline_is_the_reason) {
  static const enum cg_outcome outs[] = {CG_OUT_READ_TIMEOUT, CG_OUT_FIRST_BYTE_TIMEOUT,
                                         CG_OUT_CONNECT_TIMEOUT, CG_OUT_PARTIAL_RESPONSE};
  size_t i;
  for (i = 0; i < sizeof(outs) / sizeof(outs[0]); i++) {
    struct cg_policy_in in = base(outs[i], 0, 1, 0);
    struct cg_policy_out out;
    in.time_left_ms = 0;
    out = decide(&in);
    cr_expect(out.decision == CG_GIVE_UP && strcmp(out.reason, "deadline") == 0,
              "outcome %d: %s", (int) outs[i], out.reason);
    in.time_left_ms = 5000;
    out = decide(&in);
    cr_expect(strcmp(out.reason, outs[i] == CG_OUT_CONNECT_TIMEOUT ? "retryable"
                                                                   : "not_idempotent") == 0,
              "outcome %d with time left: %s", (int) outs[i], out.reason);
  }
  {
    struct cg_policy_in in = base(CG_OUT_HTTP, 404, 1, 0);
    struct cg_policy_out out;
    in.time_left_ms = 0;
    out = decide(&in);
    cr_expect(out.decision == CG_DONE && strcmp(out.reason, "final_status") == 0, "%s",
              out.reason);
  }
}

/* The server hint is a floor: sleep = max(backoff, hint + jitter). */
static const struct {
  int64_t backoff, hint, jitter, sleep;
} floor_cases[] = {
    {1000, -1, 0, 1000},   {1000, 3000, 250, 3250}, {5000, 3000, 250, 5000},
    {3100, 3000, 250, 3250}, {3250, 3000, 250, 3250}, {0, 0, 17, 17},
    {1000, 800, 100, 1000}, {250, 250, 0, 250},     {0, 1500, 40, 1540},
};

Test(policy, hint_is_a_floor) {
  size_t i;
  for (i = 0; i < sizeof(floor_cases) / sizeof(floor_cases[0]); i++) {
    struct cg_policy_in in = base(CG_OUT_HTTP, 429, 1, 0);
    struct cg_policy_out out;
    in.backoff_ms = floor_cases[i].backoff;
    in.hint_ms = floor_cases[i].hint;
    in.hint_jitter_ms = floor_cases[i].jitter;
    out = decide(&in);
    cr_expect_eq(out.decision, CG_RETRY, "case %zu", i);
    cr_expect_eq(out.sleep_ms, floor_cases[i].sleep, "case %zu: backoff %lld hint %lld+%lld -> "
                 "sleep %lld, want %lld", i, (long long) floor_cases[i].backoff,
                 (long long) floor_cases[i].hint, (long long) floor_cases[i].jitter,
                 (long long) out.sleep_ms, (long long) floor_cases[i].sleep);
  }
}

Test(policy, body_not_replayable) {
  static const struct {
    enum cg_outcome o;
    long status;
    enum cg_decision d;
  } c[] = {
      {CG_OUT_HTTP, 503, CG_GIVE_UP},
      {CG_OUT_CONNECT_REFUSED, 0, CG_GIVE_UP},
      {CG_OUT_READ_TIMEOUT, 0, CG_GIVE_UP},
      {CG_OUT_HTTP, 404, CG_DONE}, /* final anyway */
      {CG_OUT_OK, 200, CG_DONE},
  };
  size_t i;
  for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
    struct cg_policy_in in = base(c[i].o, c[i].status, 1, 1);
    struct cg_policy_out out;
    in.body_replayable = 0;
    out = decide(&in);
    cr_expect_eq(out.decision, c[i].d, "case %zu: %s (%s)", i, cg_decision_name(out.decision),
                 out.reason);
    if (c[i].d == CG_GIVE_UP)
      cr_expect(out.reason && strcmp(out.reason, "body_not_replayable") == 0, "case %zu: %s",
                i, out.reason);
  }
}

Test(policy, reasons) {
  struct cg_policy_in in = base(CG_OUT_OK, 200, 1, 1);
  cr_expect_str_eq(decide(&in).reason, "ok");
  in = base(CG_OUT_ABORTED_BY_HOST, 0, 1, 1);
  cr_expect_str_eq(decide(&in).reason, "aborted_by_host");
  in = base(CG_OUT_HTTP, 404, 1, 1);
  cr_expect_str_eq(decide(&in).reason, "final_status");
  in = base(CG_OUT_CURL_ERROR, 0, 0, 1);
  cr_expect_str_eq(decide(&in).reason, "final_error");
  in = base(CG_OUT_DNS_ERROR, 0, 0, 0);
  cr_expect_str_eq(decide(&in).reason, "retryable");
}

Test(policy, decision_names) {
  cr_assert_str_eq(cg_decision_name(CG_DONE), "done");
  cr_assert_str_eq(cg_decision_name(CG_RETRY), "retry");
  cr_assert_str_eq(cg_decision_name(CG_GIVE_UP), "give_up");
}

/* ---- retry_on rules (SPEC section 7: "Every number above can be changed per pool") ---- */

Test(policy, retry_on_rules_override_the_matrix) {
  static const struct cg_retry_rule rules[] = {
      {"http_409", CG_RC_SAFE},
      {"http_5xx", CG_RC_FINAL},
      {"http_503", CG_RC_SAFE}, /* later and matching: the last match wins */
      {"read_timeout", CG_RC_SAFE},
  };
  struct cg_policy_in in;

  cr_expect_eq(cg_policy_class_rules(rules, 4, CG_OUT_HTTP, 409), CG_RC_SAFE);
  cr_expect_eq(cg_policy_class_rules(rules, 4, CG_OUT_HTTP, 503), CG_RC_SAFE);
  cr_expect_eq(cg_policy_class_rules(rules, 4, CG_OUT_HTTP, 500), CG_RC_FINAL);
  cr_expect_eq(cg_policy_class_rules(rules, 2, CG_OUT_HTTP, 503), CG_RC_FINAL,
               "without the later rule the wildcard decides");
  cr_expect_eq(cg_policy_class_rules(rules, 4, CG_OUT_HTTP, 429), CG_RC_SAFE, "no rule: default");
  cr_expect_eq(cg_policy_class_rules(rules, 4, CG_OUT_READ_TIMEOUT, 0), CG_RC_SAFE);
  cr_expect_eq(cg_policy_class_rules(NULL, 0, CG_OUT_HTTP, 500), CG_RC_IDEMPOTENT);

  in = base(CG_OUT_HTTP, 409, 1, 0);
  in.rules = rules;
  in.nrules = 4;
  cr_expect_eq(decide(&in).decision, CG_RETRY);
  in.verdict.status = 502;
  cr_expect_eq(decide(&in).decision, CG_DONE);
  in = base(CG_OUT_READ_TIMEOUT, 0, 1, 0);
  in.rules = rules;
  in.nrules = 4;
  cr_expect_eq(decide(&in).decision, CG_RETRY, "read_timeout=any retries a POST");
}

/* A timeout set from the deadline ended the attempt within a few ms of it by the guard's
 * clock: with less than an attempt's minimum left nothing can follow, so the deadline is
 * the reason, not the method (a POST stream cut by `curl -m 2` said "not_idempotent"
 * under load); with more left the matrix's reason stands. */
Test(policy, deadline_all_but_spent_is_the_reason) {
  struct cg_policy_in in = base(CG_OUT_READ_TIMEOUT, 0, 1, 0);
  struct cg_policy_out out;
  static const int64_t spent[] = {-5, 0, 1, CG_POLICY_SPENT_MS - 1};
  size_t i;
  for (i = 0; i < sizeof(spent) / sizeof(spent[0]); i++) {
    in.time_left_ms = spent[i];
    out = decide(&in);
    cr_assert_eq(out.decision, CG_GIVE_UP);
    cr_assert_str_eq(out.reason, "deadline", "left %lld", (long long) spent[i]);
  }
  in.time_left_ms = CG_POLICY_SPENT_MS;
  cr_assert_str_eq(decide(&in).reason, "not_idempotent");
}
