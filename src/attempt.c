/* attempt.c - one attempt: wrapped callbacks, hold or stream, restore (see attempt.h). */
#include "attempt.h"

#include "ascii.h"
#include "clock.h"
#include "hot.h"
#include "log.h"
#include "tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum cg_kind { CG_KIND_WRITE = 0, CG_KIND_HEADER = 1 };

/* Starts a function at a 64-byte line: for the callbacks libcurl runs many times a
 * request, whose common path is laid out from their start, so that it takes as few lines
 * as its bytes need, wherever the code before it ends (issue 16). */
#define CG__LINE_ALIGNED __attribute__((aligned(64)))

/* A held event: its header, then its bytes, in a block (cg_held_block). */
struct cg_event {
  size_t len;
  enum cg_kind kind;
  char data[];
};

/* Held events lie back to back in blocks of CG__BLOCK bytes (a larger one for a larger
 * event), in arrival order: a malloc and a free per header line cost ~250 instructions
 * (issue 16).  A block never moves, and the bytes of an event are not written over
 * until it was dropped, which is after the host's callback returned: what the host is
 * handed stays valid for the whole callback, whatever libcurl delivers meanwhile. */
struct cg_held_block {
  struct cg_held_block *next;
  size_t cap;  /* bytes in data */
  size_t used; /* bytes of data filled */
  size_t at;   /* offset of the first event not handed over yet */
  _Alignas(sizeof(size_t)) char data[];
};
#define CG__BLOCK 4096 /* a block's allocation, header included */
#define CG__BLOCK_CAP (CG__BLOCK - sizeof(struct cg_held_block))

/* ---- calling the host, as libcurl would ---- */

/* The host refused `k` bytes: the transfer ends, the host's decision (never retried). */
static void cg__host_refused(struct cg_attempt *a, enum cg_kind k) {
  a->host_aborted = 1;
  /* libcurl's own wording (lib/sendf.c), so the host sees the usual text. */
  a->refused_msg = k == CG_KIND_WRITE ? "Failure writing output to destination"
                                      : "Failed writing header";
  snprintf(a->errbuf, sizeof(a->errbuf), "%s", a->refused_msg);
}

/* Hand `n` bytes of kind `k` to the host: body bytes to its write function (fwrite to
 * WRITEDATA by default); header lines to its header function, else to the write function
 * with HEADERDATA when only HEADERDATA is set, else nowhere (they reach nobody: returns
 * `n` without marking the attempt delivered).  Returns what the host returned. */
static CG__LINE_ALIGNED size_t cg__host(struct cg_attempt *a, enum cg_kind k, char *p,
                                        size_t n) {
  const struct cg_handle *h = a->h;
  curl_write_callback fn = h->write_fn;
  void *data = h->write_data;
  size_t r;

  if (k == CG_KIND_HEADER) {
    data = h->header_data;
    if (h->header_fn)
      fn = h->header_fn;
    else if (!data)
      return n; /* headers are not delivered at all: nothing to take back */
  }
  r = fn ? fn(p, 1, n, data) : fwrite(p, 1, n, (FILE *) data);
  if (r == n)
    a->delivered = 1;
  else if (CG_RARE(r != CURL_WRITEFUNC_PAUSE))
    cg__host_refused(a, k);
  return r;
}

/* ---- the held list ---- */

/* Bytes an event of `n` bytes takes in a block: header and bytes, rounded up so that
 * the next header is aligned. */
static size_t cg__event_size(size_t n) {
  size_t need = sizeof(struct cg_event) + n;
  return (need + sizeof(size_t) - 1) & ~(sizeof(size_t) - 1);
}

/* A block of at least `need` bytes: the attempt's spare when it fits, else a new one. */
static struct cg_held_block *cg__block_get(struct cg_attempt *a, size_t need) {
  struct cg_held_block *b = a->spare;
  size_t cap = need > CG__BLOCK_CAP ? need : CG__BLOCK_CAP;

  if (b && b->cap >= need) {
    a->spare = NULL;
  } else {
    if (need > SIZE_MAX - sizeof(*b))
      return NULL;
    b = malloc(sizeof(*b) + cap);
    if (!b)
      return NULL;
    b->cap = cap;
  }
  b->next = NULL;
  b->used = b->at = 0;
  return b;
}

/* A block all of whose events were dropped: kept as the spare when it is of the usual
 * size and there is none, else freed. */
static void cg__block_put(struct cg_attempt *a, struct cg_held_block *b) {
  if (!a->spare && b->cap == CG__BLOCK_CAP) {
    a->spare = b;
    return;
  }
  free(b);
}

/* Hold `n` bytes of kind `k`.  0, or -1 when out of memory (nothing held). */
static int cg__hold(struct cg_attempt *a, enum cg_kind k, const char *p, size_t n) {
  size_t need = cg__event_size(n);
  struct cg_held_block *b = a->tail;
  struct cg_event *e;

  if (need < n)
    return -1;
  if (!b || b->cap - b->used < need) {
    struct cg_held_block *nb = cg__block_get(a, need);
    if (!nb)
      return -1;
    if (b)
      b->next = nb;
    else
      a->head = nb;
    a->tail = b = nb;
  }
  e = (struct cg_event *) (void *) (b->data + b->used);
  e->kind = k;
  e->len = n;
  memcpy(e->data, p, n);
  b->used += need;
  a->held_bytes += n;
  return 0;
}

/* The first event not handed over yet, or NULL. */
static struct cg_event *cg__first(const struct cg_attempt *a) {
  const struct cg_held_block *b = a->head;
  if (!b || b->at == b->used)
    return NULL;
  return (struct cg_event *) (void *) (b->data + b->at);
}

/* Drop the first event (there is one).  A block left empty goes (the last one stays,
 * emptied, for what comes next). */
static void cg__drop_head(struct cg_attempt *a) {
  struct cg_held_block *b = a->head;
  struct cg_event *e = (struct cg_event *) (void *) (b->data + b->at);

  a->held_bytes -= e->len;
  b->at += cg__event_size(e->len);
  if (b->at < b->used)
    return;
  if (b->next) {
    a->head = b->next;
    cg__block_put(a, b);
  } else {
    b->at = b->used = 0;
  }
}

/* Hand held events to the host.  0: all delivered (mode becomes STREAM); 1: the host
 * paused (events stay held, mode FLUSHING); -1: the host refused data. */
static int cg__flush(struct cg_attempt *a) {
  struct cg_event *e;

  a->mode = CG_MODE_FLUSHING;
  while ((e = cg__first(a))) {
    size_t len = e->len;
    size_t r = cg__host(a, e->kind, e->data, len);
    if (r == CURL_WRITEFUNC_PAUSE)
      return 1;
    if (r != len) {
      /* Refused: the transfer ends here, and nothing of it is offered again. */
      cg_attempt_discard(a);
      a->mode = CG_MODE_STREAM;
      return -1;
    }
    cg__drop_head(a);
  }
  a->mode = CG_MODE_STREAM;
  return 0;
}

/* ---- response headers the guard reads ---- */

/* A header's value [v, v + n) (its line end included) into the hint `dst` of `cap` bytes:
 * without the line end and the blanks before it, cut to cap - 1 bytes, NUL-terminated. */
static inline __attribute__((always_inline)) void cg__hint_copy(char *dst, size_t cap,
                                                               const char *v, size_t n) {
  /* The line's end, "\r\n" (or a bare "\n"), first, without the loop's jump back for
   * each of its bytes; then anything the loop cuts before it (its result either way). */
  n -= n > 0 && v[n - 1] == '\n';
  n -= n > 0 && v[n - 1] == '\r';
  while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' ' || v[n - 1] == '\t'))
    n--;
  if (n >= cap)
    n = cap - 1;
  /* memmove: a call to libc's copy (usage.c's kept values likewise), where GCC, given the
   * profile, copied inline in an 8-byte loop with 4-, 2- and 1-byte tails (4 code lines and
   * 6 taken branches a request; issue 16).  The two never overlap. */
  memmove(dst, v, n);
  dst[n] = '\0';
}

/* The header lines the guard reads: name (lower case, ascii.h: 'a'-'z' and '-'), and the
 * cg_hints field its value goes to.  Those of every response first (issue 16: the search
 * below stops at the first name that matches). */
#define CG__HINTS(X)                                                                       \
  X("content-type", content_type)                                                          \
  X("content-length", content_length)                                                      \
  X("date", date)                                                                          \
  X("retry-after", retry_after)                                                            \
  X("retry-after-ms", retry_after_ms)                                                      \
  X("x-should-retry", should_retry)                                                        \
  X("content-encoding", content_encoding)                                                  \
  X("www-authenticate", auth_challenge)                                                    \
  X("proxy-authenticate", proxy_challenge)                                                 \
  X("x-ratelimit-limit-requests", rl_limit_req)                                            \
  X("x-ratelimit-remaining-requests", rl_remaining_req)                                    \
  X("x-ratelimit-reset-requests", rl_reset_req)                                            \
  X("x-ratelimit-limit-tokens", rl_limit_tok)                                              \
  X("x-ratelimit-remaining-tokens", rl_remaining_tok)                                      \
  X("x-ratelimit-reset-tokens", rl_reset_tok)                                              \
  X("anthropic-ratelimit-requests-limit", a_limit_req)                                     \
  X("anthropic-ratelimit-requests-remaining", a_remaining_req)                             \
  X("anthropic-ratelimit-requests-reset", a_reset_req)                                     \
  X("anthropic-ratelimit-tokens-limit", a_limit_tok)                                       \
  X("anthropic-ratelimit-tokens-remaining", a_remaining_tok)                               \
  X("anthropic-ratelimit-tokens-reset", a_reset_tok)                                       \
  X("ratelimit", ietf)

/* cg_ascii_lower_eq out of line: one copy of its code for every name the guard compares
 * with a response's (the header names, the content types), not one inlined and unrolled
 * by the profile at each, nor a copy for each constant length (issue 16: fewer lines of
 * code a request). */
#if defined(__GNUC__) && !defined(__clang__)
#define CG__NOCLONE __attribute__((noclone)) /* GCC's; clang makes no such copies */
#else
#define CG__NOCLONE
#endif
static __attribute__((noinline)) CG__NOCLONE int cg__lower_eq(const char *s, const char *lower,
                                                             size_t n) {
  return cg_ascii_lower_eq(s, lower, n);
}

/* The lengths of the wanted names whose first byte has `k` (0-7) as its low 3 bits, a bit
 * each (every wanted name is shorter than 64 bytes: checked below).  The low 3 bits are
 * the same in both cases of a letter. */
#define CG__HINT_LEN_OF(name, field, k)                                                   \
  | ((name)[0] % 8 == (k) ? UINT64_C(1) << (sizeof(name) - 1) : 0)
#define CG__HINT_LENS(k) (0 CG__HINTS(CG__HINT_LEN_ ## k))
#define CG__HINT_LEN_0(n, f) CG__HINT_LEN_OF(n, f, 0)
#define CG__HINT_LEN_1(n, f) CG__HINT_LEN_OF(n, f, 1)
#define CG__HINT_LEN_2(n, f) CG__HINT_LEN_OF(n, f, 2)
#define CG__HINT_LEN_3(n, f) CG__HINT_LEN_OF(n, f, 3)
#define CG__HINT_LEN_4(n, f) CG__HINT_LEN_OF(n, f, 4)
#define CG__HINT_LEN_5(n, f) CG__HINT_LEN_OF(n, f, 5)
#define CG__HINT_LEN_6(n, f) CG__HINT_LEN_OF(n, f, 6)
#define CG__HINT_LEN_7(n, f) CG__HINT_LEN_OF(n, f, 7)
#define CG__HINT_SHORT(name, field) &&sizeof(name) - 1 < 64
_Static_assert(1 CG__HINTS(CG__HINT_SHORT), "a wanted header name of 64 bytes or more");
#undef CG__HINT_SHORT

/* Look at one header line of the current response: a wanted name's value into `hints`. */
static inline __attribute__((always_inline)) void cg__parse_header(struct cg_attempt *a,
                                                                  const char *p, size_t n) {
  /* The test most lines end at (a header the guard does not read: server, connection,
   * etag, vary, x-request-id): the length of the name against those of the wanted names
   * that share the low 3 bits of its first byte.  One 64-byte line of data (issue 16). */
  static const uint64_t lens[8] __attribute__((aligned(64))) = {
      CG__HINT_LENS(0), CG__HINT_LENS(1), CG__HINT_LENS(2), CG__HINT_LENS(3),
      CG__HINT_LENS(4), CG__HINT_LENS(5), CG__HINT_LENS(6), CG__HINT_LENS(7)};
  /* Each wanted name's length and first letter, 2 bytes a name on one cache line: the
   * search reads these, and a name's entry below only when both match (issue 16: data
   * lines a request touches). */
#define CG_HINT_KEY(name, field) (uint16_t) ((sizeof(name) - 1) | (name)[0] << 8),
  static const uint16_t keys[] = {CG__HINTS(CG_HINT_KEY)};
#undef CG_HINT_KEY
#define CG_HINT(name, field)                                                              \
  {name, offsetof(struct cg_hints, field), sizeof(((struct cg_hints *) 0)->field)},
  static const struct {
    const char *name;
    uint16_t off, cap;
  } wanted[] = {CG__HINTS(CG_HINT)};
#undef CG_HINT
  const char *colon = memchr(p, ':', n);
  size_t nl, i;
  uint16_t key;

  if (!colon)
    return;
  nl = (size_t) (colon - p);
  if (CG_RARE(nl == 8 && cg__lower_eq(p, "location", 8))) { /* a redirect or 201 */
    a->hints.has_location = a->hints_set = a->saw_location = 1;
    return;
  }
  if (nl >= 64 || !(lens[(unsigned char) p[0] % 8] >> nl & 1))
    return; /* no wanted name has this length and a first byte like this one */
  /* The first letter in lower case (| 0x20 makes a letter of nothing else): compared
   * with the length, then the whole name (ascii.h) for the names that have both. */
  key = (uint16_t) (nl | (unsigned) (unsigned char) (p[0] | 0x20) << 8);
#pragma GCC unroll 1 /* a line or two of code, not the profile's copies (issue 16) */
  for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
    if (keys[i] == key && cg__lower_eq(p, wanted[i].name, nl)) {
      char *dst = (char *) &a->hints + wanted[i].off;
      size_t cap = wanted[i].cap;
      const char *v = colon + 1;
      while (v < p + n && (*v == ' ' || *v == '\t'))
        v++;
      if (CG_RARE(wanted[i].off == offsetof(struct cg_hints, content_encoding) && dst[0])) {
        /* Content-Encoding twice: one list, in order (RFC 9110 5.3), not the last alone
         * (helper-61: "gzip" then "identity" read the gzip body as JSON).  Cut short, the
         * list names a coding no reader has, as it should. */
        size_t have = strlen(dst);
        if (have + 2 < cap) {
          memcpy(dst + have, ", ", 2);
          dst += have + 2;
          cap -= have + 2;
        }
      }
      cg__hint_copy(dst, cap, v, (size_t) (p + n - v));
      a->hints_set = 1;
      return;
    }
  }
}

/* "HTTP/1.1 503 Service Unavailable" -> 503; 0 if not a status line. */
static inline __attribute__((always_inline)) long cg__status_line(const char *p, size_t n) {
  size_t i = 5;
  long s = 0;
  int digits = 0;

  if (n < 12 || memcmp(p, "HTTP/", 5) != 0) /* n >= 12: the 5 bytes are there */
    return 0;
  while (i < n && p[i] != ' ')
    i++;
  while (i < n && p[i] == ' ')
    i++;
  while (i < n && (unsigned char) (p[i] - '0') < 10 && digits < 3) { /* isdigit, no call */
    s = s * 10 + (p[i] - '0');
    i++;
    digits++;
  }
  return digits == 3 ? s : 0;
}

/* 1 for a body held whole: its length is announced and small.  Server-Sent Events, and
 * bodies of unknown length (chunked: NDJSON, long polls, watches), stream. */
static int cg__holdable_body(const struct cg_hints *hints) {
  char *end;
  long long n;
  if (cg__lower_eq(hints->content_type, "text/event-stream", 17) ||
      !hints->content_length[0])
    return 0;
  n = strtoll(hints->content_length, &end, 10);
  return end != hints->content_length && n >= 0 && n <= CG_HOLD_MAX;
}

/* 1 for a response whose headers are all of it: an answer to HEAD, 204, 304, or an
 * announced empty body.  Nothing more can go wrong with it. */
static int cg__bodiless(const struct cg_attempt *a) {
  return a->h->nobody || a->status == 204 || a->status == 304 ||
         strcmp(a->hints.content_length, "0") == 0;
}

#define CG_READY_HOP 2 /* cg__ready_to_stream: a followed redirect's headers, see there */

/* Whether a held response can be handed over now.  Called after each header line.
 *
 * A redirect that libcurl follows (FOLLOWLOCATION, a 3xx with Location) is handed over
 * at the end of its headers, while it is still the current hop: a header callback that
 * calls curl_easy_getinfo sees that hop's code, effective URL and scheme, as without the
 * guard (curl's tool_cb_hdr.c decides from CURLINFO_SCHEME whether to show headers).
 * Holding it until the last hop would show it to the host with the next hop's details.
 * Once any of its bytes reached a host callback the call is committed to this attempt:
 * the following hops stream and are not retried (a retry would show the host the earlier
 * hops twice).  A host that takes no headers is given nothing, so the call stays
 * retryable. */
static inline __attribute__((always_inline)) int
cg__ready_to_stream(struct cg_attempt *a, int status_line, int end_of_headers) {
  long s = a->status;
  int follows = a->h->followlocation && s >= 300 && s < 400 && s != 304;

  if (status_line) /* redirects and held bodies wait for the end of the headers */
    return s >= 200 && s < 400 && !follows && !a->hold_body;
  if (!end_of_headers)
    return 0;
  if (s < 200)
    return 0; /* 1xx: the real response follows */
  if (s < 400) {
    if (follows && a->hints.has_location)
      return CG_READY_HOP;
    /* A body held whole is handed over the moment it is complete (cg__write_cb), an
     * answer without a body at once: before libcurl ends the transfer, so the host sees
     * it before the close-socket and share unlock callbacks that follow, as without the
     * guard. */
    return !a->hold_body || !cg__holdable_body(&a->hints) || cg__bodiless(a);
  }
  /* A 401 (407) with a challenge that libcurl answers itself with the host's credentials
   * (CURLOPT_HTTPAUTH, CURLOPT_PROXYAUTH beyond Basic: Digest, NTLM, "any"; lib/http.c
   * Curl_http_auth_act) is a hop like a followed redirect: the answer to the
   * authenticated request follows in the same transfer.  Taken for the final answer, a
   * 503 to that request went to a host with no header callback as the call's answer,
   * not retried (a helper's find). */
  if ((s == 401 && a->hints.auth_challenge[0] && (a->h->httpauth & ~(long) CURLAUTH_BASIC)) ||
      (s == 407 && a->hints.proxy_challenge[0] && (a->h->proxyauth & ~(long) CURLAUTH_BASIC)))
    /* Unless it would be retried: libcurl may not answer it after all (no credentials,
     * a scheme the host did not allow, a second 401 to a Digest answer).  Held, it goes
     * to the host with the next response if libcurl does answer it. */
    return a->preview && a->preview(a, a->preview_arg) ? 0 : CG_READY_HOP;
  return !(a->preview && a->preview(a, a->preview_arg));
}

/* Whether a body can carry token usage: 1 JSON or Server-Sent Events, 2 newline-delimited
 * JSON (a document a line, cg_usage_lines), 0 neither.  The type's first bytes as
 * strncasecmp compares them (ascii.h; content_type's 64 bytes are all there to read, and
 * a NUL before the end of a name makes it unequal). */
static int cg__usage_body(const struct cg_hints *hints) {
  if (cg__lower_eq(hints->content_type, "application/json", 16) ||
      cg__lower_eq(hints->content_type, "text/event-stream", 17))
    return 1;
  return cg__lower_eq(hints->content_type, "application/x-ndjson", 20) ? 2 : 0;
}

/* ---- libcurl-facing callbacks ---- */

/* Each of these four gets its attempt as its argument `arg`: it is the callback the multi
 * driver installs (with the attempt as its *DATA), and the common body the easy driver's
 * entry point of the same name with _tls (below) jumps to.  Never inlined there: one body
 * each (issue 16: code lines are the cost). */
static size_t cg__write_cb(char *p, size_t size, size_t nmemb, void *arg)
    __attribute__((noinline));
static size_t cg__header_cb(char *p, size_t size, size_t nmemb, void *arg)
    __attribute__((noinline));
static int cg__xferinfo_cb(void *arg, curl_off_t dltotal, curl_off_t dlnow,
                           curl_off_t ultotal, curl_off_t ulnow) __attribute__((noinline));
static int cg__prereq_cb(void *arg, char *ip, char *local_ip, int port, int local_port)
    __attribute__((noinline));

/* The attempt of the easy driver's perform under way on this thread (issue 16), or a
 * stale value: only the callbacks of an attempt installed by_thread read it, and libcurl
 * calls those only inside that attempt's curl_easy_perform, on the thread that runs it
 * (libcurl-thread(3): a handle is used by one thread at a time), between its install and
 * its restore, or inside curl_easy_pause() called on another thread meanwhile, which
 * lends it to that thread for the call (cg_attempt_lend: curl_easy_pause(3) says it
 * "cannot" be called from there, yet it works without the guard and hosts do it).  Set
 * only by an easy perform of the guard (and that lend), of which a thread runs one at a
 * time (shim.c cg__depth: a perform from inside a callback passes through): the multi
 * driver's callbacks never read it, so a host that switches stacks inside a callback (a
 * coroutine running another handle) cannot make one see another's attempt. */
static CG_TLS struct cg_attempt *cg_attempt_cur;

/* Bytes that are ready to stream while nothing is held (most often a status line that
 * decides at once): handed to the host directly, as holding them and flushing the held
 * list would hand them, without copying them (issue 16: that path is code a request need
 * not run).  Only when the host pauses are they held, as the flush would have left them:
 * offered again from the held list when libcurl delivers them again.  Out of line: once
 * a response. */
static __attribute__((noinline)) size_t cg__hand_over(struct cg_attempt *a, enum cg_kind k,
                                                       char *p, size_t n, int ready) {
  size_t r;

  a->mode = CG_MODE_FLUSHING;
  r = cg__host(a, k, p, n);
  if (CG_RARE(r == CURL_WRITEFUNC_PAUSE)) {
    if (cg__hold(a, k, p, n) == 0) {
      a->dup_skip[k] = n;
      return CURL_WRITEFUNC_PAUSE;
    }
    /* Out of memory: libcurl delivers them again, and they stream then. */
    cg_warn_once("hold-oom", "out of memory holding a response; handing it over");
    a->mode = CG_MODE_STREAM;
    a->dup_skip[k] = 0;
    return CURL_WRITEFUNC_PAUSE;
  }
  a->mode = CG_MODE_STREAM;
  if (r != n)
    return 0;
  /* As cg__on_data: a followed redirect's headers that went nowhere leave the next hop
   * held. */
  if (ready == CG_READY_HOP && !a->delivered)
    a->mode = CG_MODE_HOLD;
  a->dup_skip[k] = 0;
  return n;
}

/* cg__on_data while the response is held or being flushed: `skip` of the `n` bytes are
 * held already (libcurl delivers them again after a pause).  Out of line: most of a
 * response's lines and chunks stream. */
static __attribute__((noinline)) size_t cg__on_held_data(struct cg_attempt *a, enum cg_kind k,
                                                          char *p, size_t n, int ready,
                                                          size_t skip) {
  size_t r;
  int rc;

  if (a->mode == CG_MODE_HOLD) {
    if (cg__hold(a, k, p, n) == 0) {
      if (a->held_bytes > CG_HOLD_MAX)
        ready = 1;
      if (!ready)
        return n;
      skip = n; /* the bytes are in the held list now */
    } else {
      /* Out of memory: stop holding; hand over what is held, then these bytes. */
      cg_warn_once("hold-oom", "out of memory holding a response; handing it over");
    }
  }
  /* HOLD that became ready, or FLUSHING: hand over what is held, then the rest. */
  rc = cg__flush(a);
  if (rc == 1) {
    a->dup_skip[k] = skip;
    return CURL_WRITEFUNC_PAUSE;
  }
  if (rc < 0)
    return 0;
  if (ready == CG_READY_HOP) {
    /* A followed redirect's headers went to the host: committed, the rest streams.
     * If they went nowhere (no header callback), the next hop is held like any. */
    if (!a->delivered)
      a->mode = CG_MODE_HOLD;
  }
  if (skip < n) {
    r = cg__host(a, k, p + skip, n - skip);
    if (r == CURL_WRITEFUNC_PAUSE) {
      a->dup_skip[k] = skip;
      return CURL_WRITEFUNC_PAUSE;
    }
    if (r != n - skip)
      return 0;
  }
  a->dup_skip[k] = 0;
  return n;
}

/* Common tail of both data callbacks, once the bytes are accounted for. */
static CG__LINE_ALIGNED size_t cg__on_data(struct cg_attempt *a, enum cg_kind k, char *p,
                                           size_t n, int ready) {
  /* After a pause, libcurl delivers the paused bytes again: we hold them already. */
  size_t skip = a->dup_skip[k] < n ? a->dup_skip[k] : n, r;

  if (a->mode != CG_MODE_STREAM) {
    if (a->mode == CG_MODE_HOLD && ready && !cg__first(a))
      return cg__hand_over(a, k, p, n, ready);
    return cg__on_held_data(a, k, p, n, ready, skip);
  }
  r = cg__host(a, k, p + skip, n - skip);
  if (r == CURL_WRITEFUNC_PAUSE) {
    a->dup_skip[k] = skip;
    return CURL_WRITEFUNC_PAUSE;
  }
  a->dup_skip[k] = 0;
  return r == n - skip ? n : 0;
}

/* 1 when a held 2xx/3xx body has all its announced bytes: libcurl counts the body's
 * bytes as received, before decoding, before it calls the write function
 * (lib/transfer.c readwrite_data), so CURLINFO_SIZE_DOWNLOAD_T includes these.  Out of
 * line: asked only while a response is held. */
static __attribute__((noinline)) int cg__body_complete(struct cg_attempt *a) {
  curl_off_t got = 0;
  char *end;
  long long want;

  if (!a->in_body || a->status < 200 || a->status >= 400 || !a->hints.content_length[0])
    return 0;
  want = strtoll(a->hints.content_length, &end, 10);
  if (end == a->hints.content_length || want < 0)
    return 0;
  return a->h->lib->easy_getinfo(a->h->curl, CURLINFO_SIZE_DOWNLOAD_T, &got) == CURLE_OK &&
         got >= want;
}

/* A header line the write function got (the host's CURLOPT_HEADER, a->hdr_lines): a
 * status line says whether its response is an interim one; the blank line that ends a
 * final response's header ends them (the body follows).  Out of line: only for hosts
 * that ask for the header in the body. */
/* The length of the line that starts [p, p + n), its '\n' included (all of it without
 * one). */
static inline size_t cg__line_len(const char *p, size_t n) {
  const char *nl = memchr(p, '\n', n);
  return nl ? (size_t) (nl - p) + 1 : n;
}

/* Whether the line [p, p + n) is the blank one that ends a header. */
static inline int cg__blank_line(const char *p, size_t n) {
  return (n == 2 && p[0] == '\r' && p[1] == '\n') || (n == 1 && p[0] == '\n');
}

static __attribute__((noinline, cold)) size_t cg__write_header_lines(struct cg_attempt *a,
                                                                    const char *p, size_t n) {
  size_t i = 0;
  /* One line a call as a rule, but lines libcurl held while the host paused come back
   * together in one (lib/sendf.c: a paused transfer's data of one type is kept as one
   * buffer), so each line is looked at (helper-60: a pause on the status line, and the
   * blank line never came alone: the body was taken for header). */
  while (i < n && a->hdr_lines) {
    size_t len = cg__line_len(p + i, n - i);
    long s = cg__status_line(p + i, len);
    if (s != 0)
      a->hdr_1xx = s < 200;
    else if (cg__blank_line(p + i, len))
      a->hdr_lines = a->hdr_1xx; /* an interim response's: the next header follows */
    i += len;
  }
  return i; /* the header's bytes; any after them are the body's */
}

static CG__LINE_ALIGNED size_t cg__write_cb(char *p, size_t size, size_t nmemb, void *arg) {
  struct cg_attempt *a = arg;
  size_t n = size * nmemb, fed = a->usage_fed < n ? a->usage_fed : n, r, hdr = 0;
  if (CG_RARE(a->hdr_lines)) {
    /* Header lines, seen here before the header function gets them: not the body. */
    hdr = cg__write_header_lines(a, p, n);
    if (hdr == n) {
      r = cg__on_data(a, CG_KIND_WRITE, p, n, 0);
      a->h->host_paused |= r == CURL_WRITEFUNC_PAUSE;
      return r;
    }
    if (fed < hdr)
      fed = hdr; /* the body starts after them */
  }
  a->bytes_body += (int64_t) (n - hdr);
  /* Usage is read from every byte of the body once, as it arrives: the bytes of a chunk
   * libcurl delivers again after a pause (whether the guard held them or the host's
   * callback paused on them) were read already.  dup_skip cannot say so: it counts
   * only the bytes the guard holds, and a host's pause re-fed the chunk (a 500-token
   * prompt split "...prompt_tokens":5|00... read as 5500). */
  if (a->usage && a->usage_ct < 0) {
    a->usage_ct = cg__usage_body(&a->hints); /* once a response, not per chunk */
    /* Both before the first byte, the coding first (usage.h; helper-60: the other way a
     * gzip x-ndjson body was left unread). */
    if (CG_RARE(a->hints.content_encoding[0]))
      cg_usage_encoding(a->usage, cg_attempt_body_coding(a)); /* compressed past libcurl */
    if (CG_RARE(a->usage_ct == 2))
      cg_usage_lines(a->usage); /* x-ndjson: a document a line */
  }
  if (a->usage && fed < n && a->usage_ct)
    cg_usage_feed(a->usage, p + fed, n - fed);
  r = cg__on_data(a, CG_KIND_WRITE, p, n, a->mode == CG_MODE_HOLD && cg__body_complete(a));
  a->h->host_paused |= r == CURL_WRITEFUNC_PAUSE; /* header lines may come back together */
  /* Paused: all n were read (and more, if libcurl gave back a larger chunk in pieces);
   * else the pieces still to come again are what was read beyond these n. */
  if (r == CURL_WRITEFUNC_PAUSE)
    a->usage_fed = a->usage_fed > n ? a->usage_fed : n;
  else
    a->usage_fed = a->usage_fed > n ? a->usage_fed - n : 0;
  return r;
}

/* One fresh header line (not the repeat of a paused one), [p, p + n): the status, the end
 * of the header, or a hint.  Returns whether the held response is ready to stream
 * (cg__ready_to_stream), 0 when nothing is held. */
static inline __attribute__((always_inline)) int cg__header_line(struct cg_attempt *a,
                                                                const char *p, size_t n) {
  int status_line = 0, end = 0;
  long s;

  if ((s = cg__status_line(p, n)) != 0) {
    a->status = s;
    /* Zero since cg_attempt_init's memset, or cleared here: set only when a response
     * came before this one in the transfer (1xx, a followed redirect). */
    if (CG_RARE(a->hints_set))
      memset(&a->hints, 0, sizeof(a->hints));
    a->hints_set = 0;
    status_line = 1;
    a->in_body = 0;
  } else if (cg__blank_line(p, n)) {
    end = 1;
    a->in_body = a->status >= 200;
  } else {
    cg__parse_header(a, p, n);
  }
  return a->mode == CG_MODE_HOLD ? cg__ready_to_stream(a, status_line, end) : 0;
}

/* Header lines given together: after a pause, libcurl hands the lines it kept meanwhile
 * back in one call (lib/sendf.c: a paused transfer's data of one type is one buffer), to
 * the header function as to the write one.  Each is looked at as if it came alone
 * (helper-60: paused on the status line, the guard read only the first of the rest, and
 * the Content-Type after it went unseen: no usage).  Returns the last readiness.  Out of
 * line, with its own copy of cg__header_line: only after a pause, and the one-line path
 * of every request stays as it was (issue 16). */
static __attribute__((noinline, cold)) int cg__header_lines(struct cg_attempt *a,
                                                           const char *p, size_t n) {
  int ready = 0, r;
  size_t i = 0;
  while (i < n) {
    size_t len = cg__line_len(p + i, n - i);
    if ((r = cg__header_line(a, p + i, len)) != 0)
      ready = r;
    i += len;
  }
  return ready;
}

static CG__LINE_ALIGNED size_t cg__header_cb(char *p, size_t size, size_t nmemb, void *arg) {
  struct cg_attempt *a = arg;
  size_t n = size * nmemb, r;
  int ready = 0;

  a->bytes_header += (int64_t) n;
  a->usage_ct = -1; /* a header line may set or reset the content type */
  if (a->dup_skip[CG_KIND_HEADER] == 0) /* fresh (not the repeat of a paused line) */
    ready = CG_RARE(a->h->host_paused) ? cg__header_lines(a, p, n) : cg__header_line(a, p, n);
  else if (a->dup_skip[CG_KIND_HEADER] < n) /* the repeat, and lines kept after it */
    ready = cg__header_lines(a, p + a->dup_skip[CG_KIND_HEADER],
                             n - a->dup_skip[CG_KIND_HEADER]);
  if (CG_RARE(a->status >= 100 && a->status < 200 && a->status != 101))
    a->bytes_interim += (int64_t) n;
  r = cg__on_data(a, CG_KIND_HEADER, p, n, ready);
  a->h->host_paused |= r == CURL_WRITEFUNC_PAUSE;
  return r;
}

/* The part of cg__timers that runs once its quiet time has come: whether a split timeout
 * fired, else the next quiet time.  Out of line: most calls never get here. */
static __attribute__((noinline)) int cg__timers_due(struct cg_attempt *a,
                                                     curl_off_t ultotal, curl_off_t ulnow,
                                                     int64_t now) {
  /* The stamps lag the moments they stand for by up to a tick: waiting a tick longer
   * keeps a timeout from firing early. */
  int64_t last, slack = cg_coarse_tick_ms(), quiet;

  if (a->upload_paused) {
    /* The host paused its upload (a body of unknown length read as it comes: `curl -T .`
     * from a pipe, a chunked POST): the request is not sent, and the silence is the
     * host's, not the server's.  Looked at again at the next call; the clocks start over
     * with the bytes that follow (cg__timers stamps t_sent_ms). */
    a->timers_quiet_ms = 0;
    return 0;
  }
  if (a->t_last_rx_ms) {
    last = a->t_last_rx_ms > a->t_sent_ms ? a->t_last_rx_ms : a->t_sent_ms;
    if (a->read_timeout_ms > 0 && now - last >= a->read_timeout_ms + slack) {
      a->guard_stop = CG_STOP_IDLE;
      return 1;
    }
    a->timers_quiet_ms = a->read_timeout_ms > 0 ? last + a->read_timeout_ms + slack : INT64_MAX;
    return 0;
  }
  /* Waiting for the first byte: the clock runs once the request is fully sent. */
  if ((ultotal <= 0 || ulnow >= ultotal) && a->t_sent_ms && a->first_byte_timeout_ms > 0 &&
      now - a->t_sent_ms >= a->first_byte_timeout_ms + slack) {
    a->guard_stop = CG_STOP_FIRST_BYTE;
    return 1;
  }
  /* Nothing can fire before the earliest due time these stamps can still give: stamps
   * only move on, so a first-byte timeout is due at t_sent_ms + timeout + slack at the
   * soonest, and, while nothing was sent yet or once bytes come, at the stamp then
   * taken + timeout + slack.  That stamp is no earlier than now - slack (`now` may be
   * the fine clock, cg_attempt_timers_check, and the stamps the coarse one).  While
   * t_sent_ms is unknown and only the getinfo in cg__timers would find it, every call
   * looks. */
  quiet = INT64_MAX;
  if (a->first_byte_timeout_ms > 0)
    quiet = a->t_sent_ms ? a->t_sent_ms + a->first_byte_timeout_ms + slack
                         : now + a->first_byte_timeout_ms;
  if (a->read_timeout_ms > 0 && now + a->read_timeout_ms < quiet)
    quiet = now + a->read_timeout_ms;
  a->timers_quiet_ms = a->t_sent_ms || a->watch_resend ? quiet : 0;
  return 0;
}

/* The guard's own timers.  Returns 1 when the attempt must stop now.  Bytes going out
 * count as activity too: a slow upload is neither idle nor waiting for an answer.
 * t_sent_ms, t_last_rx_ms and `now` are the coarse clock (clock.h): libcurl runs the
 * progress callback for every pass of its loop, and a split timeout (seconds) does not
 * need the fine one.  A timeout fires a tick after it is due on those stamps, so never
 * early; cg_attempt_timers_next's due times include the tick, and
 * cg_attempt_timers_check, run at them, passes the fine clock.  Inline: the progress
 * callback runs it about 12 times a request (issue 16). */
static inline int cg__timers(struct cg_attempt *a, curl_off_t ultotal, curl_off_t ulnow,
                             int64_t now) {
  int64_t rx = cg_attempt_answer_bytes(a);

  /* Response bytes came since the last look: that is the last activity.  Stamped here,
   * not in the write and header callbacks (a clock read for each of a response's ten or
   * so header lines: issue 16): libcurl runs this callback in the same pass of its loop
   * that delivered them (lib/transfer.c Curl_readwrite ends with Curl_pgrsUpdate), and
   * cg_attempt_timers_next sends the multi driver here at once while they are not
   * stamped yet. */
  if (rx != a->rx_at_timers) {
    a->rx_at_timers = rx;
    a->t_last_rx_ms = now;
  }
  if (ulnow > a->last_ulnow) {
    a->last_ulnow = ulnow;
    a->t_sent_ms = now;
  } else if (!a->t_sent_ms) {
    /* libcurl started sending: the prereq callback ran (libcurl >= 7.80: no getinfo per
     * call), or, without it, the pre-transfer time is set. */
    curl_off_t pre = 0;
    if (a->watch_resend ? a->requests_sent > 0
                        : a->h->lib->easy_getinfo(a->h->curl, CURLINFO_PRETRANSFER_TIME_T,
                                                  &pre) == CURLE_OK &&
                              pre > 0)
      a->t_sent_ms = now;
  }
  /* Most calls come long before anything can be due: see cg__timers_due's end. */
  if (now < a->timers_quiet_ms)
    return 0;
  return cg__timers_due(a, ultotal, ulnow, now);
}

int64_t cg_attempt_timers_next(const struct cg_attempt *a) {
  if (a->upload_paused)
    return -1; /* nothing is due while the host's upload is paused (cg__timers_due) */
  if (cg_attempt_answer_bytes(a) != a->rx_at_timers)
    return cg_mono_ms(); /* bytes not stamped yet (cg__timers): look now */
  /* The stamps are coarse (clock.h) and cg__timers waits a tick more than the timeout:
   * due at stamp + timeout + tick, when cg_attempt_timers_check (on the fine clock) fires
   * instead of finding it a little early again and again. */
  if (a->t_last_rx_ms) {
    int64_t last = a->t_last_rx_ms > a->t_sent_ms ? a->t_last_rx_ms : a->t_sent_ms;
    return a->read_timeout_ms > 0 ? last + a->read_timeout_ms + cg_coarse_tick_ms() : -1;
  }
  if (a->first_byte_timeout_ms <= 0)
    return -1;
  if (a->t_sent_ms)
    return a->t_sent_ms + a->first_byte_timeout_ms + cg_coarse_tick_ms();
  return cg_mono_ms() + CG_TIMERS_BEAT_MS; /* not sent yet: look again then */
}

int cg_attempt_timers_check(struct cg_attempt *a) {
  curl_off_t ulnow = 0, ultotal = -1;
  CURLcode (*get)(CURL *, CURLINFO, ...) = a->h->lib->easy_getinfo;

  if (a->guard_stop != CG_STOP_NONE)
    return 1;
  get(a->h->curl, CURLINFO_SIZE_UPLOAD_T, &ulnow);
  get(a->h->curl, CURLINFO_CONTENT_LENGTH_UPLOAD_T, &ultotal);
  /* Due (multi driver): the fine clock, at or past the due time cg_attempt_timers_next
   * gave (stamp + timeout + tick), so a due timer fires now even when the kernel's tick
   * runs late under load. */
  return cg__timers(a, ultotal > 0 ? ultotal : 0, ulnow, cg_mono_ms());
}

/* The host's progress callback, for a host that asked for progress (NOPROGRESS 0).  Out
 * of line: hosts that ask for none (curl's tool with -s) do not run its code. */
static __attribute__((noinline)) int cg__host_progress(struct cg_attempt *a,
                                                        curl_off_t dltotal, curl_off_t dlnow,
                                                        curl_off_t ultotal,
                                                        curl_off_t ulnow) {
  const struct cg_handle *h = a->h;
  int r;

  if (h->xferinfo_fn)
    r = h->xferinfo_fn(h->progress_data, dltotal, dlnow, ultotal, ulnow);
  else if (h->progress_fn)
    r = h->progress_fn(h->progress_data, (double) dltotal, (double) dlnow,
                       (double) ultotal, (double) ulnow);
  else
    return CURL_PROGRESSFUNC_CONTINUE; /* libcurl draws its own meter, as without us */
  if (r != 0 && r != CURL_PROGRESSFUNC_CONTINUE)
    a->host_aborted = 1;
  return r;
}

/* libcurl's progress callback: the guard's split timers, then the host's progress
 * callback, if it asked for one. */
static CG__LINE_ALIGNED int cg__xferinfo_cb(void *arg, curl_off_t dltotal, curl_off_t dlnow,
                                            curl_off_t ultotal, curl_off_t ulnow) {
  struct cg_attempt *a = arg;

  if (cg__timers(a, ultotal, ulnow, cg_coarse_ms()))
    return 1; /* CURLE_ABORTED_BY_CALLBACK; the guard reports it as a timeout */
  if (a->h->noprogress)
    return 0;
  return cg__host_progress(a, dltotal, dlnow, ultotal, ulnow);
}

static CG__LINE_ALIGNED int cg__prereq_cb(void *arg, char *ip, char *local_ip, int port,
                                          int local_port) {
  struct cg_attempt *a = arg;
  const struct cg_handle *h = a->h;
  /* Coarse (clock.h): it only tells a re-send after a second's silence from one at once. */
  int64_t now = cg_coarse_ms(), rx = a->bytes_header + a->bytes_body;

  if (a->requests_sent > 0 && rx == a->rx_at_prereq) {
    /* Sent before, nothing came back, and libcurl sends again: its silent re-send. */
    a->libcurl_resends++;
    if (a->resend_mode == CG_RESEND_BLOCK ||
        (a->resend_mode == CG_RESEND_AUTO && now - a->t_prereq_ms >= CG_RESEND_AUTO_MS)) {
      a->guard_stop = CG_STOP_RESEND;
      return CURL_PREREQFUNC_ABORT;
    }
  }
  a->requests_sent++;
  a->rx_at_prereq = rx;
  a->hdr_lines = h->include_header != 0; /* a new response's header comes first */
  a->t_prereq_ms = now;
  if (h->prereq_fn) {
    int r = h->prereq_fn(h->prereq_data, ip, local_ip, port, local_port);
    if (r != CURL_PREREQFUNC_OK)
      a->host_aborted = 1;
    return r;
  }
  return CURL_PREREQFUNC_OK;
}

/* libcurl calls these with exactly the *DATA pointer set beside them (lib/hostip.c
 * Curl_resolv: resolver_start_client; lib/cf-socket.c socket_open: opensocket_client).
 * A refusal is the host's decision, final: not a DNS or connect failure to retry. */
static int cg__resolver_start_cb(void *resolver, void *reserved, void *arg) {
  struct cg_attempt *a = arg;
  int r = a->h->resolver_start_fn(resolver, reserved, a->h->resolver_start_data);
  if (r != 0)
    a->host_aborted = 1;
  return r;
}

static curl_socket_t cg__opensocket_cb(void *arg, curlsocktype purpose,
                                       struct curl_sockaddr *addr) {
  struct cg_attempt *a = arg;
  curl_socket_t s = a->h->opensocket_fn(a->h->opensocket_data, purpose, addr);
  if (s == CURL_SOCKET_BAD)
    a->host_aborted = 1;
  return s;
}

/* SEEKDATA is the seek function's only userdata (lib/multi.c Curl_readrewind, lib/http.c
 * and lib/ftp.c resume: conn->seek_client = data->set.seek_client).  CURL_SEEKFUNC_FAIL
 * is a refusal; CANTSEEK only says "read instead" (resume) or "cannot resend". */
static int cg__seek_cb(void *arg, curl_off_t offset, int origin) {
  struct cg_attempt *a = arg;
  int r = a->h->seek_fn(a->h->seek_data, offset, origin);
  if (r == CURL_SEEKFUNC_FAIL)
    a->host_aborted = 1;
  return r;
}

/* READDATA is not the only userdata of the read function: a form part made with
 * curl_formadd(CURLFORM_STREAM, ptr) reads through it with `ptr` (lib/formdata.c
 * Curl_getformdata: curl_mime_data_cb(..., fread_func, ..., post->userp)).  So it is
 * never wrapped for a form post (cg_attempt_init); for every other request libcurl calls
 * it with READDATA only (lib/transfer.c Curl_fillreadbuffer, lib/http.c resume). */
static size_t cg__read_cb(char *p, size_t size, size_t nmemb, void *arg) {
  struct cg_attempt *a = arg;
  const struct cg_handle *h = a->h;
  size_t r = h->read_fn(p, size, nmemb, h->read_data);

  a->upload_paused = r == CURL_READFUNC_PAUSE;
  if (r == CURL_READFUNC_ABORT) {
    a->host_aborted = 1;
  } else if (r != CURL_READFUNC_PAUSE && r > 0 && r <= size * nmemb) {
    a->read_bytes += (int64_t) r;
    if (a->digest)
      cg_digest_update(a->digest, p, r);
  }
  return r;
}

/* The easy driver's entry points (cg_attempt_install, by_thread): the attempt is this
 * thread's cg_attempt_cur; `arg` is whatever libcurl holds as the *DATA option (the
 * host's own pointer: the guard leaves it), never read.  The guard hands the host's
 * callbacks the shadow's pointers, as for the multi driver, and no *DATA option holds a
 * pointer of the guard, so no callback libcurl calls itself can get one.  What libcurl
 * passes does not matter here (for the record: the write function WRITEDATA, the header
 * function HEADERDATA, 7.88 lib/sendf.c chop_write, 8.x lib/cw-out.c cw_get_writefunc;
 * the progress functions XFERINFODATA, lib/progress.c; the prereq function PREREQDATA,
 * lib/multi.c).  libcurl calls them only inside the attempt's curl_easy_perform, which
 * runs one transfer on this thread (a multiplexed connection serves one multi handle's
 * transfers only: 7.88 lib/url.c ConnectionExists, 8.x url_match_multi), between the
 * install and the restore; a copy made meanwhile (curl_easy_duphandle) gets the host's
 * callbacks at once (shim.c).  Each is a load and a jump to the body (issue 16), 16 bytes
 * on x86-64: the four share one section, in this order (GCC's no_reorder, which LTO
 * keeps too), the first aligned to a line, so that they take one 64-byte line rather than
 * one each.  No attempt on the thread: libcurl called on a thread other than the
 * perform's other than through curl_easy_pause (which lends the attempt, shim.c), which
 * only a host breaking libcurl's rule of one thread a handle at a time could bring about
 * (libcurl-thread(3)): the body and header callbacks refuse the bytes and the others go
 * on, rather than crash the host.  (Refused bytes inside curl_easy_pause, as 7.88 runs
 * it, fail only that call, with CURLE_WRITE_ERROR: the perform still ends CURLE_OK
 * with the bytes lost, so that path must not be taken for a pause.) */
#if defined(__GNUC__) && !defined(__clang__)
#define CG__TLS_ENTRY                                                                      \
  __attribute__((section(".text.hot.cg_tls_entry"), aligned(16), no_reorder))
#else
#define CG__TLS_ENTRY __attribute__((section(".text.hot.cg_tls_entry"), aligned(16)))
#endif
static CG__TLS_ENTRY __attribute__((aligned(64))) size_t
cg__write_cb_tls(char *p, size_t size, size_t nmemb, void *arg) {
  struct cg_attempt *a = cg_attempt_cur;
  (void) arg;
  return CG_RARE(!a) ? 0 : cg__write_cb(p, size, nmemb, a);
}

static CG__TLS_ENTRY size_t cg__header_cb_tls(char *p, size_t size, size_t nmemb,
                                              void *arg) {
  struct cg_attempt *a = cg_attempt_cur;
  (void) arg;
  return CG_RARE(!a) ? 0 : cg__header_cb(p, size, nmemb, a);
}

static CG__TLS_ENTRY int cg__xferinfo_cb_tls(void *arg, curl_off_t dltotal,
                                             curl_off_t dlnow, curl_off_t ultotal,
                                             curl_off_t ulnow) {
  struct cg_attempt *a = cg_attempt_cur;
  (void) arg;
  return CG_RARE(!a) ? 0 : cg__xferinfo_cb(a, dltotal, dlnow, ultotal, ulnow);
}

static CG__TLS_ENTRY int cg__prereq_cb_tls(void *arg, char *ip, char *local_ip, int port,
                                           int local_port) {
  struct cg_attempt *a = cg_attempt_cur;
  (void) arg;
  return CG_RARE(!a) ? CURL_PREREQFUNC_OK
                     : cg__prereq_cb(a, ip, local_ip, port, local_port);
}

/* ---- install and restore ---- */

void cg_attempt_init(struct cg_attempt *a, struct cg_handle *h, cg_preview_fn preview,
                     void *preview_arg, struct cg_digest *digest) {
  memset(a, 0, sizeof(*a));
  a->h = h;
  a->preview = preview;
  a->preview_arg = preview_arg;
  a->mode = CG_MODE_HOLD;
  a->digest = digest;
  /* The read and seek callbacks are wrapped only for a body libcurl reads through them:
   * a PUT (UPLOAD), or a POST with neither POSTFIELDS nor COPYPOSTFIELDS.  libcurl never
   * calls them for the rest: a GET or HEAD sends no body, POSTFIELDS are sent from
   * memory and need no rewind (lib/transfer.c Curl_readrewind: "no need to rewind";
   * libcurl 8.7+: lib/sendf.c, a buffer reader), a mime or form post reads and rewinds
   * its parts through their own callbacks (lib/mime.c; a form's CURLFORM_STREAM part
   * through the read function with its own pointer, see cg__read_cb: never wrapped;
   * such parts cannot be rewound, so the body counts as sent once the request went out,
   * guard.c CG_BODY_MIME).  A handle that had UPLOAD set counts as reading too: libcurl
   * before 8.1.0 then still sends a PUT from the read callback after POSTFIELDS or
   * MIMEPOST (h->upload).  curl's tool sets both callbacks on every handle: four setopts
   * an attempt saved for its GETs and POSTs (issue 16).  Where the shadow's method were
   * wrong, libcurl would call the host's own callbacks with the host's own pointers, as
   * without the guard. */
  a->reads_body = h->method == CG_M_PUT || h->upload ||
                  (h->method == CG_M_POST && !h->postfields && !h->copypostfields);
  a->wrap_read = h->read_fn != NULL && a->reads_body;
  a->watch_resend = h->lib->version_num >= 0x075000; /* PREREQFUNCTION: 7.80.0 */
  a->resend_mode = CG_RESEND_ALLOW;
  a->hdr_lines = h->include_header != 0;
}

/* When an option of cg__opts is set (a group of options). */
enum {
  CG__W_ALWAYS,    /* every attempt */
  CG__W_DATA,      /* every attempt of the multi driver (not a->by_thread): the data
                      pointers of the callbacks set on every attempt */
  CG__W_READ,      /* the host's read callback is wrapped (a->wrap_read) */
  CG__W_HEADERS,   /* the attempt has its own request header list */
  CG__W_PREREQ,    /* the prereq callback is installed (a->watch_resend) */
  CG__W_PREREQ_DATA, /* its data pointer: the multi driver's (CG__W_DATA) */
  CG__W_RESOLVER,  /* the host set a resolver start callback */
  CG__W_SEEK,      /* the host set a seek callback (curl's tool always does) and libcurl
                      reads the body through the read callback (a->reads_body) */
  CG__W_SOCKET,    /* the host set an open socket callback */
  CG__W_HSTS,      /* the host's HSTS read callback is left out of this perform */
  CG__W_PROGRESS   /* put back only: the host's progress function decides libcurl's flag */
};

/* Where the attempt's value of an option of cg__opts comes from: a slot of the values
 * cg_attempt_install gathers (its callbacks among them). */
enum { CG__O_ZERO, CG__O_ATTEMPT, CG__O_ERRBUF, CG__O_TIMEOUT, CG__O_CONNECT, CG__O_HEADERS,
       CG__O_WRITE_CB, CG__O_HEADER_CB, CG__O_XFERINFO_CB, CG__O_READ_CB, CG__O_PREREQ_CB,
       CG__O_RESOLVER_CB, CG__O_SEEK_CB, CG__O_SOCKET_CB, CG__O_N };

/* An 8-byte option value: libcurl reads it as the type its option number says
 * (optval.h). */
union cg__val {
  long l;
  void *p;
  void (*f)(void);
};

/* The options an attempt sets, in the order it sets them, and cg__put_back sets back in
 * the same order: XFERINFOFUNCTION and PROGRESSFUNCTION share libcurl's progress.callback
 * flag (lib/setopt.c), which the one set last decides.  X(g, option without CURLOPT_,
 * group CG__W_*, slot CG__O_* of the attempt's value, the handle's field of the host's
 * value); `g` is passed through (CG__GROUP). */
#define CG__OPTS(X, g)                                                                     \
  X(g, WRITEFUNCTION, ALWAYS, WRITE_CB, write_fn)                                          \
  /* host NULL: libcurl's fwrite default */                                                \
  X(g, WRITEDATA, DATA, ATTEMPT, write_data)                                               \
  X(g, HEADERFUNCTION, ALWAYS, HEADER_CB, header_fn)                                       \
  X(g, HEADERDATA, DATA, ATTEMPT, header_data)                                             \
  X(g, XFERINFOFUNCTION, ALWAYS, XFERINFO_CB, xferinfo_fn)                                 \
  /* The host's xferinfo function is set back first, then its progress function if the   \
   * flag would otherwise differ from the host's. */                                       \
  X(g, PROGRESSFUNCTION, PROGRESS, ZERO, progress_fn)                                      \
  X(g, XFERINFODATA, DATA, ATTEMPT, progress_data)                                         \
  X(g, NOPROGRESS, ALWAYS, ZERO, noprogress)                                               \
  X(g, ERRORBUFFER, ALWAYS, ERRBUF, errorbuffer)                                           \
  X(g, TIMEOUT_MS, ALWAYS, TIMEOUT, timeout_ms)                                            \
  X(g, CONNECTTIMEOUT_MS, ALWAYS, CONNECT, connecttimeout_ms)                              \
  /* Host NULL puts libcurl's default back (fread for the read function). */              \
  X(g, READFUNCTION, READ, READ_CB, read_fn)                                               \
  X(g, READDATA, READ, ATTEMPT, read_data)                                                 \
  X(g, HTTPHEADER, HEADERS, HEADERS, httpheader)                                           \
  /* Refused before 7.80: never set then. */                                               \
  X(g, PREREQFUNCTION, PREREQ, PREREQ_CB, prereq_fn)                                       \
  X(g, PREREQDATA, PREREQ_DATA, ATTEMPT, prereq_data)                                      \
  X(g, RESOLVER_START_FUNCTION, RESOLVER, RESOLVER_CB, resolver_start_fn)                  \
  X(g, RESOLVER_START_DATA, RESOLVER, ATTEMPT, resolver_start_data)                        \
  X(g, SEEKFUNCTION, SEEK, SEEK_CB, seek_fn)                                               \
  X(g, SEEKDATA, SEEK, ATTEMPT, seek_data)                                                 \
  X(g, OPENSOCKETFUNCTION, SOCKET, SOCKET_CB, opensocket_fn)                               \
  X(g, OPENSOCKETDATA, SOCKET, ATTEMPT, opensocket_data)                                   \
  /* libcurl asks the HSTS read callback at the start of every perform (lib/transfer.c    \
   * Curl_pretransfer -> Curl_hsts_loadcb) and keeps what it got in the handle's cache     \
   * (data->hsts lives until curl_easy_cleanup): a retry must not ask again (a one-shot    \
   * iterator, like curl's test 1915, may not be called after it said it was done), so    \
   * the attempt sets none. */                                                             \
  X(g, HSTSREADFUNCTION, HSTS, ZERO, hstsread_fn)

/* Each option's index in cg__opts, and its bit in the sets of options cg__set_opts is
 * given (1u << index). */
enum {
#define CG__INDEX(g, o, w, ours, host) CG__I_##o,
  CG__OPTS(CG__INDEX, 0) CG__I_N
#undef CG__INDEX
};
_Static_assert(CG__I_N <= 32, "an option a bit");

/* The set of the options of group `g` (a constant). */
#define CG__IN_GROUP(g, o, w, ours, host) | (CG__W_##w == (g) ? 1u << CG__I_##o : 0u)
#define CG__GROUP(g) (0u CG__OPTS(CG__IN_GROUP, g))
#define CG__ALL ((unsigned) ((1ull << CG__I_N) - 1))

/* The option's number, which must fit in 16 bits (every CURLoption below 65536 does). */
#define CG__OPT(o) ((unsigned short) ((o) + 0 * sizeof(char[(o) < 65536 ? 1 : -1])))
/* The offset of the handle's field `f`, which must be 8 bytes (a pointer or a long). */
#define CG__HOST(f)                                                                        \
  (offsetof(struct cg_handle, f) +                                                         \
   0 * sizeof(char[sizeof(((struct cg_handle *) 0)->f) == sizeof(union cg__val) ? 1 : -1]))
/* The attempt's value is `ours`' slot `ours`, the host's is the handle's field at
 * `host`.  Six bytes an option, the table on three cache lines: it is read twice a
 * request, after libcurl's work has pushed it out of the cache (issue 16). */
static const struct cg__opt {
  unsigned short opt;
  unsigned char ours;
  unsigned short host;
} cg__opts[] = {
#define CG__ENTRY(g, o, w, ours, host) {CG__OPT(CURLOPT_##o), CG__O_##ours, CG__HOST(host)},
  CG__OPTS(CG__ENTRY, 0)
#undef CG__ENTRY
};
#undef CG__OPT
#undef CG__HOST

/* The set of cg__opts' options attempt `a` sets (without CG__W_PROGRESS's). */
static unsigned cg__opts_mask(const struct cg_attempt *a) {
  const struct cg_handle *h = a->h;

  return CG__GROUP(CG__W_ALWAYS) | (a->by_thread ? 0u : CG__GROUP(CG__W_DATA)) |
         (a->wrap_read ? CG__GROUP(CG__W_READ) : 0u) |
         (a->headers ? CG__GROUP(CG__W_HEADERS) : 0u) |
         (a->watch_resend ? CG__GROUP(CG__W_PREREQ) : 0u) |
         (a->watch_resend && !a->by_thread ? CG__GROUP(CG__W_PREREQ_DATA) : 0u) |
         (h->resolver_start_fn ? CG__GROUP(CG__W_RESOLVER) : 0u) |
         (h->seek_fn && a->reads_body ? CG__GROUP(CG__W_SEEK) : 0u) |
         (h->opensocket_fn ? CG__GROUP(CG__W_SOCKET) : 0u) |
         (a->skip_hsts_read && h->hstsread_fn ? CG__GROUP(CG__W_HSTS) : 0u);
}

/* Set the options of cg__opts in the set `set` on `c`, in order: to the attempt's values
 * `ours`, or with NULL to the host's from `h`.  One loop over the set's bits rather than
 * a call per option keeps the code an attempt runs to a few cache lines (issue 16).
 *
 * With `ours`, an option whose value is the host's is left alone, and `*same` gets the
 * set of them: libcurl holds the host's value of every option of cg__opts outside an
 * attempt (the shim passed it on when the host set it; each attempt's restore sets back
 * what its install changed, or everything when the host set one of them, or reset the
 * handle, meanwhile), and setting again the value an option holds changes nothing (its
 * case of lib/setopt.c stores what it is given), so neither the install nor the restore
 * needs to (the caller leaves them out of the restore's `set`): e.g. the timeout when
 * neither the host nor the guard sets one, NOPROGRESS for a host with a progress
 * function (issue 16: each setopt ~60 instructions and a mispredicted jump of libcurl's
 * option switch).  Returns CURLE_OK or the first error. */
static CG__LINE_ALIGNED CURLcode cg__set_opts(const struct cg_handle *h, CURL *c,
                                              unsigned set, const union cg__val *ours,
                                              unsigned *same) {
  CURLcode (*setopt)(CURL *, CURLoption, ...) = h->lib->easy_setopt;
  CURLcode rc = CURLE_OK, r;
  unsigned found = 0;

  for (; set; set &= set - 1) {
    unsigned i = (unsigned) __builtin_ctz(set);
    const struct cg__opt *o = &cg__opts[i];
    union cg__val v;

    memcpy(&v, (const char *) h + o->host, sizeof(v));
    if (ours) {
      if (memcmp(&ours[o->ours], &v, sizeof(v)) == 0) {
        found |= 1u << i;
        continue;
      }
      v = ours[o->ours];
    }
    if (o->opt < CURLOPTTYPE_OBJECTPOINT)
      r = setopt(c, (CURLoption) o->opt, v.l);
    else if (o->opt < CURLOPTTYPE_FUNCTIONPOINT)
      r = setopt(c, (CURLoption) o->opt, v.p);
    else
      r = setopt(c, (CURLoption) o->opt, v.f);
    if (r != CURLE_OK && rc == CURLE_OK)
      rc = r;
  }
  if (ours)
    *same = found;
  return rc;
}

/* The attempt's callbacks, in the order of their slots from CG__O_WRITE_CB on: the multi
 * driver's, which take the attempt as their *DATA, and the easy driver's (by_thread),
 * which find it as cg_attempt_cur (their _tls entry points).  The four set on every
 * attempt differ; the others, set only for some hosts, take the attempt as their *DATA in
 * both. */
#define CG__CB(fn) {.f = (void (*)(void)) (fn)}
static const union cg__val cg__cbs[2][CG__O_N - CG__O_WRITE_CB] = {
  {CG__CB(cg__write_cb), CG__CB(cg__header_cb), CG__CB(cg__xferinfo_cb), CG__CB(cg__read_cb),
   CG__CB(cg__prereq_cb), CG__CB(cg__resolver_start_cb), CG__CB(cg__seek_cb),
   CG__CB(cg__opensocket_cb)},
  {CG__CB(cg__write_cb_tls), CG__CB(cg__header_cb_tls), CG__CB(cg__xferinfo_cb_tls),
   CG__CB(cg__read_cb), CG__CB(cg__prereq_cb_tls), CG__CB(cg__resolver_start_cb),
   CG__CB(cg__seek_cb), CG__CB(cg__opensocket_cb)}};
#undef CG__CB
_Static_assert(CG__O_N - CG__O_WRITE_CB == 8, "a callback for each slot");

CURLcode cg_attempt_install(struct cg_attempt *a, long timeout_ms, long connect_timeout_ms,
                            int by_thread) {
  union cg__val ours[CG__O_N] = {{0}};

  ours[CG__O_ATTEMPT].p = a;
  ours[CG__O_ERRBUF].p = a->errbuf;
  ours[CG__O_TIMEOUT].l = timeout_ms;
  ours[CG__O_CONNECT].l = connect_timeout_ms;
  ours[CG__O_HEADERS].p = a->headers;
  memcpy(&ours[CG__O_WRITE_CB], cg__cbs[by_thread != 0], sizeof(cg__cbs[0]));
  a->by_thread = by_thread != 0;
  if (by_thread) {
    /* Before any option names the _tls callbacks; cg_attempt_restore puts `outer` back
     * (an easy perform from a callback of the multi driver's: nested). */
    a->outer = cg_attempt_cur;
    cg_attempt_cur = a;
    a->h->thread_attempt = a;
  }
  a->h->set_in_perform = 0;
  return cg__set_opts(a->h, a->h->curl, cg__opts_mask(a), ours, &a->same);
}

/* The host's values back on `c`: with `a`, only what cg_attempt_install changed for that
 * attempt (issue 16: the rest still holds the host's values, which libcurl was given by
 * the shim; under curl's tool 7 setopts of the 12 an attempt once set back); with NULL,
 * all of them, wrapped or not (cg_attempt_put_back). */
static void cg__put_back(const struct cg_handle *h, CURL *c, const struct cg_attempt *a) {
  unsigned set = a ? cg__opts_mask(a) & ~a->same : CG__ALL & ~CG__GROUP(CG__W_PROGRESS);

  if ((h->xferinfo_fn != NULL) != (h->progress_callback_set != 0))
    set |= CG__GROUP(CG__W_PROGRESS);
  cg__set_opts(h, c, set, NULL, NULL);
}

void cg_attempt_restore(struct cg_attempt *a) {
  /* A refusal inside the transfer: libcurl's own failf for the callback it called (the
   * write callback, when held header lines were handed over from it) came after ours. */
  if (CG_RARE(a->refused_msg != NULL))
    snprintf(a->errbuf, sizeof(a->errbuf), "%s", a->refused_msg);
  /* The host set one of the overridden options meanwhile (the shim only recorded it,
   * cg_handle_overridden), or reset the handle: all of them. */
  cg__put_back(a->h, a->h->curl, a->h->set_in_perform ? NULL : a);
  /* After the options: until they no longer name the _tls callbacks, the attempt stays
   * the thread's. */
  if (a->by_thread) {
    cg_attempt_cur = a->outer;
    a->h->thread_attempt = NULL;
  }
}

struct cg_attempt *cg_attempt_lend(struct cg_attempt *a) {
  struct cg_attempt *prev = cg_attempt_cur;

  cg_attempt_cur = a;
  return prev;
}

void cg_attempt_put_back(const struct cg_handle *h, CURL *c) {
  cg__put_back(h, c, NULL);
}

/* Drop every held event (there is one).  Out of line: an attempt's end most often finds
 * nothing held. */
static __attribute__((noinline, cold)) void cg__discard_all(struct cg_attempt *a) {
  while (cg__first(a))
    cg__drop_head(a);
}

void cg_attempt_discard(struct cg_attempt *a) {
  if (cg__first(a))
    cg__discard_all(a);
}

void *cg_attempt_keep(struct cg_attempt *a) {
  struct cg_held_block *b;

  cg_attempt_discard(a);
  b = a->spare; /* read after the discard: it may have kept an emptied block there */
  if (!b && a->head && a->head == a->tail && a->head->cap == CG__BLOCK_CAP) {
    b = a->head;
    a->head = a->tail = NULL;
  }
  a->spare = NULL;
  return b;
}

void cg_attempt_reuse(struct cg_attempt *a, void *kept) {
  if (a->spare)
    free(kept);
  else
    a->spare = kept;
}

void cg_attempt_kept_free(void *kept) {
  free(kept);
}

void cg_attempt_free(struct cg_attempt *a) {
  struct cg_held_block *b, *next;

  cg_attempt_discard(a);
  for (b = a->head; b; b = next) {
    next = b->next;
    free(b);
  }
  a->head = a->tail = NULL;
  if (a->spare) /* most often none: no call of free(NULL) */
    free(a->spare);
  a->spare = NULL;
  if (a->usage)
    cg_usage_free(a->usage);
  a->usage = NULL;
}

static CURLcode cg__deliver(struct cg_attempt *a, int64_t deadline_ms);

/* Call the host's progress callback as libcurl does while a transfer idles.
 * Returns 0 to go on, or the host's abort value. */
static int cg__host_progress_idle(struct cg_attempt *a) {
  const struct cg_handle *h = a->h;
  int r = 0;

  if (h->noprogress)
    return 0;
  if (h->xferinfo_fn)
    r = h->xferinfo_fn(h->progress_data, a->bytes_body, a->bytes_body, 0, 0);
  else if (h->progress_fn)
    r = h->progress_fn(h->progress_data, (double) a->bytes_body, (double) a->bytes_body, 0, 0);
  return r == CURL_PROGRESSFUNC_CONTINUE ? 0 : r;
}

/* The host paused the delivery of held bytes: CURLE_OK to offer them again, else the
 * call's end (the held bytes discarded): the host's progress callback aborted it in its
 * idle call, or `past_deadline`. */
static CURLcode cg__paused(struct cg_attempt *a, int past_deadline) {
  if (cg__host_progress_idle(a) != 0) {
    a->host_aborted = 1;
    snprintf(a->errbuf, sizeof(a->errbuf), "Callback aborted");
    cg_attempt_discard(a);
    return CURLE_ABORTED_BY_CALLBACK;
  }
  if (past_deadline) {
    snprintf(a->errbuf, sizeof(a->errbuf),
             "curlguard: the host kept the transfer paused past the deadline");
    cg_attempt_discard(a);
    return CURLE_OPERATION_TIMEDOUT;
  }
  return CURLE_OK;
}

CURLcode cg_attempt_deliver(struct cg_attempt *a, int64_t deadline_ms) {
  CURLcode rc;

  a->h->replaying = 1;
  rc = cg__deliver(a, deadline_ms);
  a->h->replaying = 0;
  return rc;
}

static CURLcode cg__deliver(struct cg_attempt *a, int64_t deadline_ms) {
  int64_t nap = 1;
  struct cg_event *e;

  while ((e = cg__first(a))) {
    size_t len = e->len;
    size_t r = cg__host(a, e->kind, e->data, len);

    if (r == CURL_WRITEFUNC_PAUSE) {
      /* The transfer is over, so libcurl cannot hold these bytes for us: keep offering
       * them, giving the host's progress callback its usual idle calls (that is where
       * hosts resume a paused transfer), until it takes them or the deadline passes. */
      CURLcode prc = cg__paused(a, cg_mono_ms() + nap > deadline_ms);
      if (prc != CURLE_OK)
        return prc;
      cg_sleep_ms(nap);
      nap = nap < 100 ? nap * 2 : 100;
      continue;
    }
    if (r != len) {
      cg_attempt_discard(a);
      return CURLE_WRITE_ERROR;
    }
    nap = 1;
    cg__drop_head(a);
  }
  a->mode = CG_MODE_STREAM;
  return CURLE_OK;
}

CURLcode cg_attempt_deliver_step(struct cg_attempt *a, int64_t deadline_ms, int *paused) {
  struct cg_event *e;

  *paused = 0;
  a->h->replaying = 1;
  while ((e = cg__first(a))) {
    size_t len = e->len;
    size_t r = cg__host(a, e->kind, e->data, len);

    if (r == CURL_WRITEFUNC_PAUSE) {
      /* As cg__deliver, without the nap: the caller comes back later. */
      CURLcode prc = cg__paused(a, cg_mono_ms() >= deadline_ms);
      if (prc != CURLE_OK) {
        a->h->replaying = 0;
        return prc;
      }
      *paused = 1; /* still replaying: curl_easy_pause answers as for a running transfer */
      return CURLE_OK;
    }
    if (r != len) {
      cg_attempt_discard(a);
      a->h->replaying = 0;
      return CURLE_WRITE_ERROR;
    }
    cg__drop_head(a);
  }
  a->mode = CG_MODE_STREAM;
  a->h->replaying = 0;
  return CURLE_OK;
}
