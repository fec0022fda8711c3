/* test-classify.c - CURLcode + timings + status -> outcome (classify.h, SPEC section 7,
 * CASES.md "Timeouts and duplicate billing"). */
#include "classify.h"

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <string.h>

/* Timer shorthands (microseconds): not sent / sent, no first byte / first byte seen. */
#define NOT_SENT 0, 0, 0
#define SENT 1500, 0, 0            /* pretransfer > 0 */
#define SENT_BY_SIZE 0, 0, 310     /* request_size > 0 only */
#define FIRST_BYTE 1500, 90000, 310 /* starttransfer > 0 */

struct ccase {
  const char *name;
  int curl_code;
  long status;
  int64_t pretransfer_us, starttransfer_us;
  long request_size;
  int host_aborted;
  enum cg_guard_stop stop;
  enum cg_outcome outcome;
  long out_status;
  int sent;
};

static const struct ccase cases[] = {
    /* One case per row of the table in classify.c, before and after sending. */
    {"5 resolve proxy, not sent", CURLE_COULDNT_RESOLVE_PROXY, 0, NOT_SENT, 0, CG_STOP_NONE,
     CG_OUT_DNS_ERROR, 0, 0},
    {"5 resolve proxy, sent", CURLE_COULDNT_RESOLVE_PROXY, 0, SENT, 0, CG_STOP_NONE,
     CG_OUT_DNS_ERROR, 0, 1},
    {"6 resolve host, not sent", CURLE_COULDNT_RESOLVE_HOST, 0, NOT_SENT, 0, CG_STOP_NONE,
     CG_OUT_DNS_ERROR, 0, 0},
    {"6 resolve host, sent", CURLE_COULDNT_RESOLVE_HOST, 0, SENT, 0, CG_STOP_NONE,
     CG_OUT_DNS_ERROR, 0, 1},
    {"7 connect, not sent", CURLE_COULDNT_CONNECT, 0, NOT_SENT, 0, CG_STOP_NONE,
     CG_OUT_CONNECT_REFUSED, 0, 0},
    {"7 connect, sent", CURLE_COULDNT_CONNECT, 0, SENT, 0, CG_STOP_NONE, CG_OUT_CONNECT_REFUSED,
     0, 1},
    {"35 tls, not sent", CURLE_SSL_CONNECT_ERROR, 0, NOT_SENT, 0, CG_STOP_NONE,
     CG_OUT_TLS_ERROR, 0, 0},
    {"35 tls, sent", CURLE_SSL_CONNECT_ERROR, 0, SENT, 0, CG_STOP_NONE, CG_OUT_TLS_ERROR, 0, 1},
    {"52 got nothing, not sent", CURLE_GOT_NOTHING, 0, NOT_SENT, 0, CG_STOP_NONE,
     CG_OUT_CONNECT_REFUSED, 0, 0},
    {"52 got nothing, sent", CURLE_GOT_NOTHING, 0, SENT, 0, CG_STOP_NONE,
     CG_OUT_RESET_AFTER_SEND, 0, 1},
    {"52 got nothing, sent (request_size)", CURLE_GOT_NOTHING, 0, SENT_BY_SIZE, 0,
     CG_STOP_NONE, CG_OUT_RESET_AFTER_SEND, 0, 1},
    {"55 send error, not sent", CURLE_SEND_ERROR, 0, NOT_SENT, 0, CG_STOP_NONE,
     CG_OUT_CONNECT_REFUSED, 0, 0},
    {"55 send error, sent", CURLE_SEND_ERROR, 0, SENT, 0, CG_STOP_NONE,
     CG_OUT_RESET_AFTER_SEND, 0, 1},
    {"56 recv error, not sent", CURLE_RECV_ERROR, 0, NOT_SENT, 0, CG_STOP_NONE,
     CG_OUT_CONNECT_REFUSED, 0, 0},
    {"56 recv error, sent", CURLE_RECV_ERROR, 0, SENT, 0, CG_STOP_NONE,
     CG_OUT_RESET_AFTER_SEND, 0, 1},
    {"56 recv error, after first byte", CURLE_RECV_ERROR, 0, FIRST_BYTE, 0, CG_STOP_NONE,
     CG_OUT_RESET_AFTER_SEND, 0, 1},
    {"16 http2, not sent", CURLE_HTTP2, 0, NOT_SENT, 0, CG_STOP_NONE, CG_OUT_CONNECT_REFUSED, 0,
     0},
    {"16 http2, sent", CURLE_HTTP2, 0, SENT, 0, CG_STOP_NONE, CG_OUT_RESET_AFTER_SEND, 0, 1},
    {"92 http2 stream, not sent", CURLE_HTTP2_STREAM, 0, NOT_SENT, 0, CG_STOP_NONE,
     CG_OUT_CONNECT_REFUSED, 0, 0},
    {"92 http2 stream, sent", CURLE_HTTP2_STREAM, 0, SENT, 0, CG_STOP_NONE,
     CG_OUT_RESET_AFTER_SEND, 0, 1},
    {"18 partial, not sent", CURLE_PARTIAL_FILE, 0, NOT_SENT, 0, CG_STOP_NONE,
     CG_OUT_PARTIAL_RESPONSE, 0, 0},
    {"18 partial, after first byte", CURLE_PARTIAL_FILE, 200, FIRST_BYTE, 0, CG_STOP_NONE,
     CG_OUT_PARTIAL_RESPONSE, 0, 1},
    /* 28 by phase. */
    {"28 before sending", CURLE_OPERATION_TIMEDOUT, 0, NOT_SENT, 0, CG_STOP_NONE,
     CG_OUT_CONNECT_TIMEOUT, 0, 0},
    {"28 sent, no first byte", CURLE_OPERATION_TIMEDOUT, 0, SENT, 0, CG_STOP_NONE,
     CG_OUT_FIRST_BYTE_TIMEOUT, 0, 1},
    {"28 sent (request_size), no first byte", CURLE_OPERATION_TIMEDOUT, 0, SENT_BY_SIZE, 0,
     CG_STOP_NONE, CG_OUT_FIRST_BYTE_TIMEOUT, 0, 1},
    {"28 after a first byte", CURLE_OPERATION_TIMEDOUT, 200, FIRST_BYTE, 0, CG_STOP_NONE,
     CG_OUT_READ_TIMEOUT, 0, 1},
    /* CURLE_OK: the HTTP status decides. */
    {"ok 200", CURLE_OK, 200, FIRST_BYTE, 0, CG_STOP_NONE, CG_OUT_OK, 200, 1},
    {"ok 204", CURLE_OK, 204, FIRST_BYTE, 0, CG_STOP_NONE, CG_OUT_OK, 204, 1},
    {"ok 304", CURLE_OK, 304, FIRST_BYTE, 0, CG_STOP_NONE, CG_OUT_OK, 304, 1},
    {"ok 399", CURLE_OK, 399, FIRST_BYTE, 0, CG_STOP_NONE, CG_OUT_OK, 399, 1},
    {"ok 400", CURLE_OK, 400, FIRST_BYTE, 0, CG_STOP_NONE, CG_OUT_HTTP, 400, 1},
    {"ok 404", CURLE_OK, 404, FIRST_BYTE, 0, CG_STOP_NONE, CG_OUT_HTTP, 404, 1},
    {"ok 429", CURLE_OK, 429, FIRST_BYTE, 0, CG_STOP_NONE, CG_OUT_HTTP, 429, 1},
    {"ok 500", CURLE_OK, 500, FIRST_BYTE, 0, CG_STOP_NONE, CG_OUT_HTTP, 500, 1},
    {"ok 503", CURLE_OK, 503, FIRST_BYTE, 0, CG_STOP_NONE, CG_OUT_HTTP, 503, 1},
    {"ok without HTTP status", CURLE_OK, 0, NOT_SENT, 0, CG_STOP_NONE, CG_OUT_OK, 0, 0},
    /* The host's callback stopped the transfer: wins over everything. */
    {"host abort, write error", CURLE_WRITE_ERROR, 200, FIRST_BYTE, 1, CG_STOP_NONE,
     CG_OUT_ABORTED_BY_HOST, 0, 1},
    {"host abort, callback", CURLE_ABORTED_BY_CALLBACK, 0, SENT, 1, CG_STOP_NONE,
     CG_OUT_ABORTED_BY_HOST, 0, 1},
    {"host abort over a timeout", CURLE_OPERATION_TIMEDOUT, 0, NOT_SENT, 1, CG_STOP_NONE,
     CG_OUT_ABORTED_BY_HOST, 0, 0},
    {"host abort over a guard stop", CURLE_ABORTED_BY_CALLBACK, 0, SENT, 1, CG_STOP_IDLE,
     CG_OUT_ABORTED_BY_HOST, 0, 1},
    {"host abort over a 503", CURLE_OK, 503, FIRST_BYTE, 1, CG_STOP_NONE,
     CG_OUT_ABORTED_BY_HOST, 0, 1},
    /* The guard's own timers. */
    {"guard first-byte stop", CURLE_ABORTED_BY_CALLBACK, 0, SENT, 0, CG_STOP_FIRST_BYTE,
     CG_OUT_FIRST_BYTE_TIMEOUT, 0, 1},
    {"guard idle stop", CURLE_ABORTED_BY_CALLBACK, 200, FIRST_BYTE, 0, CG_STOP_IDLE,
     CG_OUT_READ_TIMEOUT, 0, 1},
    {"guard stopped a silent re-send", CURLE_ABORTED_BY_CALLBACK, 0, NOT_SENT, 0,
     CG_STOP_RESEND, CG_OUT_RESET_AFTER_SEND, 0, 1},
    /* Anything else is a final curl error. */
    {"1 unsupported protocol", CURLE_UNSUPPORTED_PROTOCOL, 0, NOT_SENT, 0, CG_STOP_NONE,
     CG_OUT_CURL_ERROR, 0, 0},
    {"3 malformed url", CURLE_URL_MALFORMAT, 0, NOT_SENT, 0, CG_STOP_NONE, CG_OUT_CURL_ERROR, 0,
     0},
    {"23 write error", CURLE_WRITE_ERROR, 200, FIRST_BYTE, 0, CG_STOP_NONE, CG_OUT_CURL_ERROR,
     0, 1},
    {"42 aborted by a host callback the guard does not wrap (sockopt, HSTS read)",
     CURLE_ABORTED_BY_CALLBACK, 0, SENT, 0, CG_STOP_NONE, CG_OUT_ABORTED_BY_HOST, 0, 1},
    {"42 before sending (HSTS read refused)", CURLE_ABORTED_BY_CALLBACK, 0, NOT_SENT, 0,
     CG_STOP_NONE, CG_OUT_ABORTED_BY_HOST, 0, 0},
    {"47 too many redirects", CURLE_TOO_MANY_REDIRECTS, 301, FIRST_BYTE, 0, CG_STOP_NONE,
     CG_OUT_CURL_ERROR, 0, 1},
    {"60 peer verification", CURLE_PEER_FAILED_VERIFICATION, 0, NOT_SENT, 0, CG_STOP_NONE,
     CG_OUT_CURL_ERROR, 0, 0},
    {"65 send fail rewind", CURLE_SEND_FAIL_REWIND, 0, SENT, 0, CG_STOP_NONE, CG_OUT_CURL_ERROR,
     0, 1},
    {"unknown code 9999", 9999, 0, NOT_SENT, 0, CG_STOP_NONE, CG_OUT_CURL_ERROR, 0, 0},
};

Test(classify, table) {
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const struct ccase *c = &cases[i];
    struct cg_facts f;
    struct cg_verdict v;

    memset(&f, 0, sizeof(f));
    f.curl_code = c->curl_code;
    f.status = c->status;
    f.pretransfer_us = c->pretransfer_us;
    f.starttransfer_us = c->starttransfer_us;
    f.request_size = c->request_size;
    f.host_aborted = c->host_aborted;
    f.guard_stop = c->stop;
    memset(&v, 0xA5, sizeof(v));
    cg_classify(&f, &v);
    cr_expect_eq(v.outcome, c->outcome, "%s: outcome %d, want %d", c->name, (int) v.outcome,
                 (int) c->outcome);
    cr_expect_eq(v.sent, c->sent, "%s: sent %d, want %d", c->name, v.sent, c->sent);
    if (c->outcome == CG_OUT_OK || c->outcome == CG_OUT_HTTP)
      cr_expect_eq(v.status, c->out_status, "%s: status %ld", c->name, v.status);
    else
      cr_expect_eq(v.status, 0, "%s: status %ld for a non-HTTP outcome", c->name, v.status);
  }
}

Test(classify, sent_flag_from_pretransfer_or_request_size) {
  static const struct {
    int64_t pretransfer_us;
    long request_size;
    int sent;
  } s[] = {{0, 0, 0}, {1, 0, 1}, {0, 1, 1}, {250000, 4096, 1}};
  size_t i;
  for (i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
    struct cg_facts f;
    struct cg_verdict v;
    memset(&f, 0, sizeof(f));
    f.curl_code = CURLE_RECV_ERROR;
    f.pretransfer_us = s[i].pretransfer_us;
    f.request_size = s[i].request_size;
    cg_classify(&f, &v);
    cr_expect_eq(v.sent, s[i].sent, "pretransfer %lld request_size %ld",
                 (long long) s[i].pretransfer_us, s[i].request_size);
    cr_expect_eq(v.outcome, s[i].sent ? CG_OUT_RESET_AFTER_SEND : CG_OUT_CONNECT_REFUSED);
  }
}

static const struct {
  enum cg_outcome o;
  long status;
  const char *name;
} names[] = {
    {CG_OUT_OK, 200, "ok"},
    {CG_OUT_HTTP, 503, "http_503"},
    {CG_OUT_HTTP, 429, "http_429"},
    {CG_OUT_HTTP, 404, "http_404"},
    {CG_OUT_DNS_ERROR, 0, "dns_error"},
    {CG_OUT_CONNECT_REFUSED, 0, "connect_refused"},
    {CG_OUT_CONNECT_TIMEOUT, 0, "connect_timeout"},
    {CG_OUT_TLS_ERROR, 0, "tls_error"},
    {CG_OUT_FIRST_BYTE_TIMEOUT, 0, "first_byte_timeout"},
    {CG_OUT_READ_TIMEOUT, 0, "read_timeout"},
    {CG_OUT_RESET_AFTER_SEND, 0, "reset_after_send"},
    {CG_OUT_PARTIAL_RESPONSE, 0, "partial_response"},
    {CG_OUT_ABORTED_BY_HOST, 0, "aborted_by_host"},
    {CG_OUT_CIRCUIT_OPEN, 0, "circuit_open"},
    {CG_OUT_LOCAL_RATE_LIMITED, 0, "local_rate_limited"},
    {CG_OUT_RETRY_BUDGET_EXHAUSTED, 0, "retry_budget_exhausted"},
    {CG_OUT_DEADLINE, 0, "deadline"},
    {CG_OUT_CURL_ERROR, 0, "curl_error"},
    {CG_OUT_STREAM_ERROR, 0, "stream_error"},
};

Test(classify, outcome_names) {
  size_t i;
  int seen[CG_OUT_COUNT] = {0};
  for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    char buf[16];
    const char *n = cg_outcome_name(names[i].o, names[i].status, buf, sizeof(buf));
    cr_expect_not_null(n);
    if (n)
      cr_expect_str_eq(n, names[i].name, "outcome %d -> %s", (int) names[i].o, n);
    seen[names[i].o] = 1;
  }
  for (i = 0; i < CG_OUT_COUNT; i++)
    cr_expect(seen[i], "outcome %zu has no name case in this test", i);
}

Test(classify, http_name_fits_its_buffer) {
  char buf[16];
  memset(buf, 'X', sizeof(buf));
  cr_assert_str_eq(cg_outcome_name(CG_OUT_HTTP, 599, buf, sizeof(buf)), "http_599");
  cr_assert_eq(buf[8], '\0');
}

Test(classify, unknown_outcome_value_is_curl_error) {
  char buf[16];
  cr_assert_str_eq(cg_outcome_name(CG_OUT_COUNT, 0, buf, sizeof(buf)), "curl_error");
  cr_assert_str_eq(cg_outcome_name((enum cg_outcome) 1000, 0, buf, sizeof(buf)), "curl_error");
}
