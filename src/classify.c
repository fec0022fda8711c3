/* classify.c - CURLcode + timings + status -> outcome, as a table (see classify.h).
 *
 * Each row reads: libcurl error code, outcome when the request cannot have reached the
 * server, outcome when it may have.  Codes are from include/curl/curl.h; the error
 * meanings from libcurl-errors(3).  Code 0 (CURLE_OK) is decided by the HTTP status,
 * code 28 by the timers (connect phase, waiting for the first byte, or reading).
 */
#include "classify.h"

#include <curl/curl.h>
#include <stdio.h>

struct cg__row {
  int code;
  enum cg_outcome before_send;
  enum cg_outcome after_send;
};

static const struct cg__row cg__rows[] = {
  /* code                              not sent                  maybe sent */
  {CURLE_COULDNT_RESOLVE_PROXY,        CG_OUT_DNS_ERROR,         CG_OUT_DNS_ERROR},
  {CURLE_COULDNT_RESOLVE_HOST,         CG_OUT_DNS_ERROR,         CG_OUT_DNS_ERROR},
  {CURLE_COULDNT_CONNECT,              CG_OUT_CONNECT_REFUSED,   CG_OUT_CONNECT_REFUSED},
  {CURLE_SSL_CONNECT_ERROR,            CG_OUT_TLS_ERROR,         CG_OUT_TLS_ERROR},
  {CURLE_GOT_NOTHING,                  CG_OUT_CONNECT_REFUSED,   CG_OUT_RESET_AFTER_SEND},
  {CURLE_SEND_ERROR,                   CG_OUT_CONNECT_REFUSED,   CG_OUT_RESET_AFTER_SEND},
  {CURLE_RECV_ERROR,                   CG_OUT_CONNECT_REFUSED,   CG_OUT_RESET_AFTER_SEND},
  {CURLE_HTTP2,                        CG_OUT_CONNECT_REFUSED,   CG_OUT_RESET_AFTER_SEND},
  {CURLE_HTTP2_STREAM,                 CG_OUT_CONNECT_REFUSED,   CG_OUT_RESET_AFTER_SEND},
  {CURLE_PARTIAL_FILE,                 CG_OUT_PARTIAL_RESPONSE,  CG_OUT_PARTIAL_RESPONSE},
  {CURLE_OPERATION_TIMEDOUT,           CG_OUT_CONNECT_TIMEOUT,   CG_OUT_FIRST_BYTE_TIMEOUT},
};

void cg_classify(const struct cg_facts *f, struct cg_verdict *out) {
  size_t i;

  out->status = 0;
  out->sent = f->pretransfer_us > 0 || f->request_size > 0;

  if (f->host_aborted) {
    out->outcome = CG_OUT_ABORTED_BY_HOST;
    return;
  }
  /* CURLOPT_FAILONERROR (curl -f) turns a >= 400 answer into error 22: still an answer. */
  if (f->curl_code == CURLE_OK ||
      (f->curl_code == CURLE_HTTP_RETURNED_ERROR && f->status >= 400)) {
    out->status = f->status;
    out->outcome = f->status >= 400 ? CG_OUT_HTTP : CG_OUT_OK;
    return;
  }
  switch (f->guard_stop) {
  case CG_STOP_FIRST_BYTE:
    out->outcome = CG_OUT_FIRST_BYTE_TIMEOUT;
    return;
  case CG_STOP_IDLE:
    out->outcome = CG_OUT_READ_TIMEOUT;
    return;
  case CG_STOP_RESEND:
    /* The request went out on a connection that then died without a byte back. */
    out->sent = 1;
    out->outcome = CG_OUT_RESET_AFTER_SEND;
    return;
  case CG_STOP_DEADLINE:
  case CG_STOP_NONE:
    break;
  }
  /* Only callbacks return 42, and the guard's own stops are handled above: a host
   * callback refused (sockopt, HSTS read, chunk, fnmatch, ssh key, ...). Its decision. */
  if (f->curl_code == CURLE_ABORTED_BY_CALLBACK) {
    out->outcome = CG_OUT_ABORTED_BY_HOST;
    return;
  }
  out->outcome = CG_OUT_CURL_ERROR;
  for (i = 0; i < sizeof(cg__rows) / sizeof(cg__rows[0]); i++) {
    if (cg__rows[i].code == f->curl_code) {
      out->outcome = out->sent ? cg__rows[i].after_send : cg__rows[i].before_send;
      break;
    }
  }
  /* Failing after a followed redirect: an earlier server answered, so it processed
   * the request; a "never reached the server" outcome would retry it for any method. */
  if (f->redirects > 0 && !out->sent) {
    out->outcome = CG_OUT_CURL_ERROR;
    out->sent = 1;
    return;
  }
  /* A timeout after the first response byte is a read timeout. */
  if (out->outcome == CG_OUT_FIRST_BYTE_TIMEOUT && f->starttransfer_us > 0)
    out->outcome = CG_OUT_READ_TIMEOUT;
}

const char *cg_outcome_name(enum cg_outcome o, long status, char *buf, unsigned long len) {
  static const char *const names[CG_OUT_COUNT] = {
    [CG_OUT_OK] = "ok",
    [CG_OUT_HTTP] = "http",
    [CG_OUT_DNS_ERROR] = "dns_error",
    [CG_OUT_CONNECT_REFUSED] = "connect_refused",
    [CG_OUT_CONNECT_TIMEOUT] = "connect_timeout",
    [CG_OUT_TLS_ERROR] = "tls_error",
    [CG_OUT_FIRST_BYTE_TIMEOUT] = "first_byte_timeout",
    [CG_OUT_READ_TIMEOUT] = "read_timeout",
    [CG_OUT_RESET_AFTER_SEND] = "reset_after_send",
    [CG_OUT_PARTIAL_RESPONSE] = "partial_response",
    [CG_OUT_ABORTED_BY_HOST] = "aborted_by_host",
    [CG_OUT_CIRCUIT_OPEN] = "circuit_open",
    [CG_OUT_LOCAL_RATE_LIMITED] = "local_rate_limited",
    [CG_OUT_RETRY_BUDGET_EXHAUSTED] = "retry_budget_exhausted",
    [CG_OUT_DEADLINE] = "deadline",
    [CG_OUT_CURL_ERROR] = "curl_error",
    [CG_OUT_STREAM_ERROR] = "stream_error",
  };
  if (o == CG_OUT_HTTP) {
    snprintf(buf, len, "http_%ld", status);
    return buf;
  }
  return (unsigned) o < CG_OUT_COUNT ? names[o] : "curl_error";
}
