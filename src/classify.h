/* classify.h - what happened to one attempt: CURLcode + timings + status -> outcome.
 *
 * The decisive fact is whether the request may have reached the server.  libcurl
 * zeroes its timers at the start of every transfer (getinfo.c), so
 * CURLINFO_PRETRANSFER_TIME_T > 0 or CURLINFO_REQUEST_SIZE > 0 means sending began;
 * CURLINFO_STARTTRANSFER_TIME_T > 0 means a response byte arrived.  The outcome names
 * are those of SPEC section 7.  Pure: no I/O, no globals.
 */
#ifndef CG_CLASSIFY_H
#define CG_CLASSIFY_H

#include <stdint.h>

enum cg_outcome {
  CG_OUT_OK,                 /* 2xx/3xx (and 1xx as last status) */
  CG_OUT_HTTP,               /* any other status: "http_<status>" */
  CG_OUT_DNS_ERROR,
  CG_OUT_CONNECT_REFUSED,    /* no connection (also network errors before sending) */
  CG_OUT_CONNECT_TIMEOUT,
  CG_OUT_TLS_ERROR,
  CG_OUT_FIRST_BYTE_TIMEOUT, /* sent, no response byte in time */
  CG_OUT_READ_TIMEOUT,       /* response started, then silence */
  CG_OUT_RESET_AFTER_SEND,   /* connection lost after sending: 52, 55, 56 */
  CG_OUT_PARTIAL_RESPONSE,   /* 18: body shorter than announced */
  CG_OUT_ABORTED_BY_HOST,    /* the host's callback stopped the transfer */
  CG_OUT_CIRCUIT_OPEN,
  CG_OUT_LOCAL_RATE_LIMITED,
  CG_OUT_RETRY_BUDGET_EXHAUSTED,
  CG_OUT_DEADLINE,
  CG_OUT_CURL_ERROR,         /* any other libcurl error: final */
  CG_OUT_STREAM_ERROR,       /* 2xx stream that carried an error event (overloaded_error,
                                response.failed, {"error": ...}): final, possibly billed */
  CG_OUT_COUNT
};

/* Which timer of the guard's own ended the attempt, if any. */
enum cg_guard_stop {
  CG_STOP_NONE,
  CG_STOP_FIRST_BYTE, /* first-byte timeout */
  CG_STOP_IDLE,       /* idle-read timeout */
  CG_STOP_DEADLINE,
  CG_STOP_RESEND,     /* libcurl was about to re-send the request silently; blocked */
};

/* What is known after one attempt. */
struct cg_facts {
  int curl_code;            /* CURLcode of the attempt */
  long status;              /* CURLINFO_RESPONSE_CODE, 0 = none */
  int64_t pretransfer_us;   /* CURLINFO_PRETRANSFER_TIME_T */
  int64_t starttransfer_us; /* CURLINFO_STARTTRANSFER_TIME_T */
  long request_size;        /* CURLINFO_REQUEST_SIZE */
  long redirects;           /* CURLINFO_REDIRECT_COUNT: redirects followed */
  int host_aborted;         /* a host callback refused data or returned abort */
  enum cg_guard_stop guard_stop;
};

struct cg_verdict {
  enum cg_outcome outcome;
  long status;       /* HTTP status for CG_OUT_HTTP/OK, else 0 */
  int sent;          /* the request may have reached the server */
};

/* Classify one attempt. */
void cg_classify(const struct cg_facts *f, struct cg_verdict *out);

/* The SPEC name of an outcome ("dns_error", ...); for CG_OUT_HTTP pass the status
 * and a buffer of >= 16 bytes for "http_503".  Returns a string valid while `buf` is. */
const char *cg_outcome_name(enum cg_outcome o, long status, char *buf, unsigned long len);

#endif
