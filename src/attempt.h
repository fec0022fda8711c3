/* attempt.h - one attempt of a guarded call: the host's callbacks wrapped, the
 * response held back or streamed, every option put back afterwards.
 *
 * Holding: a response is held (kept in memory, not shown to the host) while it may
 * still be retried.  The decision to hand it over is taken as early as possible:
 *   - at a 2xx/3xx status line (unless a redirect will be followed): stream at once,
 *     except when `hold_body` is set (idempotent requests, which can be retried if the
 *     body is cut): then a body of announced length up to CG_HOLD_MAX that is not
 *     text/event-stream is held whole, and handed over inside the transfer the moment
 *     its last byte arrived (an answer without a body: at the end of its headers), so
 *     the host sees it before libcurl's close-socket and share unlock callbacks;
 *   - at the end of a followed redirect's headers: handed over while that hop is current
 *     (getinfo inside the host's header callback describes it); if any of it reached a
 *     host callback, the attempt streams from then on and is not retried (the host would
 *     see the hop twice), else the next hop is held like the first;
 *   - at the end of a 4xx/5xx response's headers: the guard's preview says whether
 *     this response would be retried; if not, stream it;
 *   - when more than CG_HOLD_MAX bytes are held: stream (too big to be an error page);
 *   - at the end of the transfer: the guard decides; held bytes are replayed to the
 *     host's callbacks (cg_attempt_deliver) or dropped (cg_attempt_discard).
 * Streaming responses therefore still stream, and bytes of an attempt that is retried
 * never reach the host.
 *
 * Host callbacks are called as libcurl would call them (lib/sendf.c chop_write):
 * body -> write function (fwrite to WRITEDATA, stdout by default); headers -> header
 * function, or the write function with HEADERDATA when only HEADERDATA is set, or
 * nowhere.  Their return values are honoured: a short write or CURL_WRITEFUNC_ERROR
 * ends the transfer (host abort, never retried), CURL_WRITEFUNC_PAUSE pauses it.
 *
 * Other wrapped callbacks (progress, prereq, read, seek, resolver start, open socket)
 * get the host's own *DATA pointer; a refusal by any of them is the host's decision
 * (host_aborted: final).  The read function is not wrapped for a form post, whose
 * CURLFORM_STREAM parts libcurl reads through it with their own pointers.
 */
#ifndef CG_ATTEMPT_H
#define CG_ATTEMPT_H

#include "classify.h"
#include "config.h"
#include "digest.h"
#include "handle.h"
#include "usage.h"

#include <curl/curl.h>
#include <stdint.h>

#define CG_HOLD_MAX (1024 * 1024) /* bytes of a response held back at most */

enum cg_mode { CG_MODE_HOLD, CG_MODE_FLUSHING, CG_MODE_STREAM };

struct cg_event; /* one held callback invocation */
struct cg_attempt;

/* Asked at the end of a 4xx/5xx response's headers: 1 if the guard would retry this
 * response (keep holding it), 0 to hand it to the host now. */
typedef int (*cg_preview_fn)(struct cg_attempt *a, void *arg);

/* Values of the current response's headers that the guard reads (cut to fit). */
struct cg_hints {
  char retry_after[96];
  char retry_after_ms[32];
  char should_retry[16];
  char date[64];
  char content_type[64];
  char content_length[24];
  char content_encoding[24];
  int has_location;
  /* WWW-Authenticate, Proxy-Authenticate: non-empty when the response carries one (the
   * value's first byte only). */
  char auth_challenge[2], proxy_challenge[2];
  /* Provider rate-limit headers (ratelimit.h). */
  char rl_limit_req[24], rl_remaining_req[24], rl_reset_req[40];
  char rl_limit_tok[24], rl_remaining_tok[24], rl_reset_tok[40];
  char a_limit_req[24], a_remaining_req[24], a_reset_req[40];
  char a_limit_tok[24], a_remaining_tok[24], a_reset_tok[40];
  char ietf[96];
};

struct cg_attempt {
  struct cg_handle *h;
  cg_preview_fn preview;
  void *preview_arg;
  int hold_body;           /* hold a 2xx body until complete (see above) */

  enum cg_mode mode;
  struct cg_held_block *head, *tail; /* held events (attempt.c), oldest first */
  struct cg_held_block *spare;       /* an emptied block kept for reuse, or NULL */
  size_t held_bytes;
  size_t dup_skip[2];      /* bytes libcurl will deliver again after a pause, per kind */
  size_t usage_fed;        /* bytes of the body chunk a pause gives back that the usage
                            * parser read already: libcurl delivers them again */

  long status;             /* of the last status line seen */
  int saw_location;        /* a Location header line came: libcurl may have followed it */
  int hints_set;           /* a header line wrote to `hints` since they were cleared */
  int in_body;             /* the last response's headers ended: body bytes follow */
  int usage_ct;            /* hints.content_type is one usage is read from: 1, 0, or -1
                            * not looked at since the last header line (cg__write_cb) */
  struct cg_hints hints;   /* of the last response */
  int host_aborted;        /* a host callback refused data or asked to abort */
  const char *refused_msg; /* libcurl's wording of that refusal (cg__host_refused): a
                            * header line refused while held bytes are handed over from
                            * the write callback is reported by libcurl as a write error,
                            * so cg_attempt_restore puts the host's wording back */
  int upload_paused;       /* the host's read callback's last answer was CURL_READFUNC_PAUSE:
                            * the request waits for its own body, the server for nothing,
                            * so neither split timeout runs (cg__timers_due) */
  int delivered;           /* some bytes of this attempt reached a host callback */
  enum cg_guard_stop guard_stop;

  int reads_body;          /* libcurl reads the request body through the read callback
                              (a PUT, or a POST without POSTFIELDS): cg_attempt_init */
  int wrap_read;           /* the host's read callback is wrapped */
  int skip_hsts_read;      /* leave the host's HSTS read callback out of this perform:
                              an earlier perform of the call fed libcurl its entries */
  int64_t read_bytes;      /* bytes the host's read callback handed out */
  struct cg_digest *digest;/* of the body read through the callback, or NULL */

  int64_t bytes_header, bytes_body;
  int64_t bytes_interim;   /* header bytes of interim (1xx but 101) responses: a 100 Continue
                            * is no answer, so neither the first byte nor activity
                            * (cg_attempt_answer_bytes) */
  char errbuf[CURL_ERROR_SIZE];

  /* Split timeouts, checked in the progress callback (no helper thread): libcurl calls
   * it at least about once a second while a transfer idles, so they fire within about
   * a second of their value (measured: see README). 0 = off. */
  long first_byte_timeout_ms; /* request sent -> first response byte */
  long read_timeout_ms;       /* longest gap between received bytes */
  int64_t t_sent_ms;          /* last upload progress, or when sending began; 0 = not yet
                               * (this and t_last_rx_ms: cg_coarse_ms, clock.h) */
  int64_t t_last_rx_ms;       /* last response byte, as the progress callback saw it
                               * (cg__timers); 0 = none yet */
  int64_t rx_at_timers;       /* response bytes at that look */
  curl_off_t last_ulnow;
  int64_t timers_quiet_ms;    /* no split timeout can fire before this (cg__timers) */

  /* libcurl's silent re-send on a dead reused connection, seen through
   * CURLOPT_PREREQFUNCTION (called right before each request is sent, libcurl >= 7.80):
   * a second call with no response byte since the first is a re-send. */
  int watch_resend;           /* the prereq callback is installed */
  enum cg_resend resend_mode; /* what to do with a re-send (CG_RESEND_ALLOW: let it go) */
  int requests_sent;
  int libcurl_resends;        /* re-sends libcurl made (and, if blocked, tried) */
  int64_t rx_at_prereq;       /* response bytes seen at the last prereq call */
  int64_t t_prereq_ms;

  /* Token usage read from the response body as it passes (JSON and SSE bodies only),
   * or NULL. */
  struct cg_usage_parser *usage;
  /* With the host's CURLOPT_HEADER the write function gets each response's header lines
   * first: 1 while the next bytes it gets are header lines (from the attempt's start, and
   * from each request's prereq call on: a followed redirect's next response), which are
   * neither read for usage nor counted as body; 1xx: the last status line was an interim
   * response's, whose blank line another response's header follows. */
  unsigned char hdr_lines, hdr_1xx;

  /* A request header list the guard installs for the attempt (host's + its own), or
   * NULL to leave the host's. */
  struct curl_slist *headers;

  /* Installed for the easy driver (cg_attempt_install's `by_thread`): the write, header,
   * progress and prereq callbacks find the attempt as the thread's current one
   * (attempt.c cg_attempt_cur), and their *DATA options keep the host's pointers; `outer`
   * is the thread's current attempt before the install, put back by cg_attempt_restore. */
  int by_thread;
  struct cg_attempt *outer;
  /* Bits (by index in attempt.c's cg__opts) of the options cg_attempt_install left alone
   * because the attempt's value was the host's, which libcurl holds already: the restore
   * leaves them too (issue 16). */
  unsigned same;
};

/* How the body the attempt reads for usage came when compressed past libcurl (a
 * Content-Encoding other than identity, and the handle without CURLOPT_ACCEPT_ENCODING
 * or with CURLOPT_HTTP_CONTENT_DECODING 0, so libcurl handed the encoded bytes on: a host
 * that sends its own Accept-Encoding and decodes them itself): CG_USAGE_GZIP or
 * CG_USAGE_DEFLATE, which the usage reader inflates (cg_usage_encoding); CG_ATTEMPT_CODED
 * for any other coding (br, zstd, several), which it cannot read (the record says so:
 * guard.c, reason usage_encoded); 0 when the body is not compressed or libcurl decodes
 * it (lib/http.c builds its decoders only with CURLOPT_ACCEPT_ENCODING set). */
#define CG_ATTEMPT_CODED 3
static inline int cg_attempt_body_coding(const struct cg_attempt *a) {
  const char *s = a->hints.content_encoding;
  int coding = 0, n = 0;
  if (a->usage_ct <= 0 || !s[0] || (a->h->accept_encoding && a->h->content_decoding))
    return 0;
  /* A list of codings in the order applied (RFC 9110 8.4): identity changes nothing. */
  while (*s) {
    size_t k;
    while (*s == ' ' || *s == '\t' || *s == ',')
      s++;
    for (k = 0; s[k] && s[k] != ',' && s[k] != ' ' && s[k] != '\t'; k++)
      ;
    if (!k)
      break;
    if (!(k == 8 && strncasecmp(s, "identity", 8) == 0)) {
      n++;
      coding = (k == 4 && strncasecmp(s, "gzip", 4) == 0) ||
                       (k == 6 && strncasecmp(s, "x-gzip", 6) == 0)
                   ? CG_USAGE_GZIP
               : k == 7 && strncasecmp(s, "deflate", 7) == 0 ? CG_USAGE_DEFLATE
                                                              : CG_ATTEMPT_CODED;
    }
    s += k;
  }
  return n == 0 ? 0 : n == 1 ? coding : CG_ATTEMPT_CODED;
}

/* Bytes of answers the attempt received so far, headers and body: all but the interim
 * responses' (a 100 Continue), which end neither the wait for the first byte nor count
 * as activity. */
static inline int64_t cg_attempt_answer_bytes(const struct cg_attempt *a) {
  return a->bytes_header - a->bytes_interim + a->bytes_body;
}


/* Prepare `a` for an attempt on `h`.  `digest` may be NULL. */
void cg_attempt_init(struct cg_attempt *a, struct cg_handle *h, cg_preview_fn preview,
                     void *preview_arg, struct cg_digest *digest);

/* Point the handle's callbacks, error buffer and limits at the attempt.  Limits in ms;
 * 0 leaves libcurl's default.  `by_thread` (the easy driver, whose perform runs the
 * callbacks on this thread, strictly between this and cg_attempt_restore): the attempt
 * becomes this thread's current one, and the write, header, progress and prereq
 * callbacks find it there, so their *DATA options are neither set nor set back (8
 * setopts an attempt fewer, issue 16); 0 (the multi driver, which runs the callbacks of
 * many transfers on one thread): the callbacks get it as their *DATA.  Returns CURLE_OK
 * or the first setopt error (then nothing needs restoring beyond cg_attempt_restore). */
CURLcode cg_attempt_install(struct cg_attempt *a, long timeout_ms, long connect_timeout_ms,
                            int by_thread);

/* Make `a` this thread's current attempt (the one the easy driver's callbacks find, or
 * NULL for none) and return the previous one: for curl_easy_pause() called on another
 * thread than the perform's (shim.c), inside which libcurl may call the write and header
 * callbacks on the caller's thread (7.88 lib/easy.c curl_easy_pause -> Curl_client_unpause;
 * curl_easy_pause(3) says it "cannot" be called from another thread, yet hosts do, and
 * without the guard it works).  The host then runs the attempt's callbacks on two
 * threads, as it runs its own without the guard. */
struct cg_attempt *cg_attempt_lend(struct cg_attempt *a);

/* Put back every option cg_attempt_install changed, from the shadow; every option
 * cg_handle_overridden lists when the host set one during the attempt (set_in_perform).
 * An attempt installed by_thread is no longer the thread's current one. */
void cg_attempt_restore(struct cg_attempt *a);

/* The same on handle `c` from shadow `h`: also for a copy the host made with
 * curl_easy_duphandle from inside a callback, which libcurl made with the attempt's
 * callbacks (the easy driver's find the attempt through the thread that runs it, the
 * multi driver's through their data pointers: both gone after it), error buffer,
 * headers. */
void cg_attempt_put_back(const struct cg_handle *h, CURL *c);

/* Hand the held response to the host's callbacks, in order, as libcurl would have,
 * after the transfer ended.  A host that pauses (CURL_WRITEFUNC_PAUSE) is offered the
 * same bytes again, with its progress callback called in between as libcurl does while
 * idle, until it takes them or `deadline_ms` (monotonic) passes.  Returns CURLE_OK,
 * CURLE_WRITE_ERROR when a host callback refused data, CURLE_ABORTED_BY_CALLBACK when
 * its progress callback aborted, or CURLE_OPERATION_TIMEDOUT; the error text is then in
 * a->errbuf, worded as libcurl words it. */
CURLcode cg_attempt_deliver(struct cg_attempt *a, int64_t deadline_ms);

/* The same without sleeping, for the multi driver (engine.h): hand over what the host
 * takes now.  When it pauses, its progress callback is called once, `*paused` is set and
 * CURLE_OK returned with the rest still held: call again later (curl_easy_pause answers as
 * for a running transfer meanwhile).  Other returns as cg_attempt_deliver's. */
CURLcode cg_attempt_deliver_step(struct cg_attempt *a, int64_t deadline_ms, int *paused);

/* The split timeouts seen from outside libcurl's progress callback (the multi driver: an
 * event-loop host calls libcurl for a transfer only on its socket's events and timers,
 * so an idle transfer's progress callback may not run at all).  cg_attempt_timers_next:
 * the monotonic ms at which one of them could fire next, -1 none (before the request went
 * out: CG_TIMERS_BEAT_MS from now).  cg_attempt_timers_check: 1 when one fired (guard_stop
 * set: end the transfer and judge it as CURLE_ABORTED_BY_CALLBACK), else 0. */
#define CG_TIMERS_BEAT_MS 1000
int64_t cg_attempt_timers_next(const struct cg_attempt *a);
int cg_attempt_timers_check(struct cg_attempt *a);

/* Drop the held response. */
void cg_attempt_discard(struct cg_attempt *a);

/* Free what the attempt holds (held events, its spare block). */
void cg_attempt_free(struct cg_attempt *a);

/* The ended attempt's reusable memory (an emptied block for held events), detached from
 * it, or NULL; what it still held is dropped.  For cg_attempt_reuse by a later attempt
 * (one malloc and free fewer per attempt, issue 16), or cg_attempt_kept_free. */
void *cg_attempt_keep(struct cg_attempt *a);

/* Give `kept` (from cg_attempt_keep, or NULL) to the attempt, after cg_attempt_init. */
void cg_attempt_reuse(struct cg_attempt *a, void *kept);

/* Free what cg_attempt_keep gave (NULL: nothing). */
void cg_attempt_kept_free(void *kept);

#endif
