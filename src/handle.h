/* handle.h - the per-handle shadow of the host's options.
 *
 * libcurl options are write-only, so the guard remembers the ones it needs: to know
 * the request (URL, method, headers, body), to wrap the host's callbacks, and to put
 * every option it changes for an attempt back afterwards.  The defaults below are
 * libcurl's own (lib/url.c Curl_init_userdefined), so a restored handle behaves as
 * if the guard had never touched it.
 *
 * Map: CURL* -> struct cg_handle, an open-addressing table read without any lock (every
 * curl_easy_setopt of the host looks its handle up, most often answered by the thread's
 * memo of its last lookup); add and remove take one mutex (fork-safe through
 * pthread_atfork) and void every memo.  A shadow itself is only touched by the thread
 * using its handle, as libcurl requires of the handle (libcurl-thread(3)), and it is
 * freed only by that handle's cleanup, which libcurl forbids while the handle is in use.
 */
#ifndef CG_HANDLE_H
#define CG_HANDLE_H

#include "lib.h"
#include "optval.h"
#include "tls.h"

#include <curl/curl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* CURLOPT_PROTOCOLS_STR (libcurl >= 7.85), by number: older headers lack the name. */
#define CG_OPT_PROTOCOLS_STR (CURLOPTTYPE_STRINGPOINT + 318)

/* libcurl's HTTPREQ_* of lib/urldata.h: what request the options ask for. */
enum cg_method { CG_M_GET, CG_M_POST, CG_M_POST_FORM, CG_M_POST_MIME, CG_M_PUT, CG_M_HEAD };

struct cg_attempt; /* attempt.h */

struct cg_handle {
  CURL *curl;
  const struct cg_lib *lib; /* the libcurl that created the handle, for its whole life */
  uint64_t serial;          /* unique for the process's life, never 0 (cg_handle_add):
                             * a handle freed and another made at its address differ
                             * (the multi driver's repeat worker, repeat.h) */

  /* The request. */
  char *url;                 /* copy (in url_buf), NULL = none */
  char *url_buf;             /* owned, url_cap bytes: kept by curl_easy_reset, so a host
                              * that sets its URL before every call reuses it instead of a
                              * malloc and a free each call (issue 16) */
  size_t url_cap;
  char *custom_request;      /* copy, NULL = none */
  char *default_protocol;    /* CURLOPT_DEFAULT_PROTOCOL copy: the scheme of a URL
                              * without one (libcurl's guess otherwise); NULL = none */
  enum cg_method method;     /* as libcurl tracks data->set.method */
  int nobody;                /* CURLOPT_NOBODY */
  int upload;                /* CURLOPT_UPLOAD (or PUT) last set to 1, not undone by UPLOAD 0
                              * or HTTPGET 1: libcurl before 8.1.0 keeps such a flag apart
                              * from the method and then sends a PUT from the read callback
                              * even after POSTFIELDS or MIMEPOST (CVE-2023-28322) */
  const char *postfields;    /* CURLOPT_POSTFIELDS, host-owned */
  char *copypostfields;      /* copy of CURLOPT_COPYPOSTFIELDS data */
  curl_off_t copypostfields_len;
  curl_off_t postfieldsize;  /* -1 = unset (strlen) */
  struct curl_slist *httpheader; /* host-owned */
  void *curlu;               /* CURLOPT_CURLU (host-owned CURLU *): libcurl goes by it, not
                              * by CURLOPT_URL, while it is set (lib/url.c parseurlandfillconn) */
  long followlocation;
  long httpauth;             /* CURLOPT_HTTPAUTH: the schemes libcurl may answer a 401 with
                              * (0, unset: Basic only) */
  long proxyauth;            /* CURLOPT_PROXYAUTH, for a 407 */

  /* Callbacks and their data, as the host set them (NULL function = libcurl default). */
  curl_write_callback write_fn;
  void *write_data;          /* default stdout */
  curl_write_callback header_fn;
  void *header_data;         /* default NULL */
  curl_read_callback read_fn;
  void *read_data;           /* default stdin */
  curl_seek_callback seek_fn;
  void *seek_data;
  curl_prereq_callback prereq_fn;  /* CURLOPT_PREREQFUNCTION (libcurl >= 7.80) */
  void *prereq_data;
  /* Callbacks whose refusal is the host's decision (attempt.c wraps them to tell it from
   * a network fault), and the HSTS read callback a retry must not ask again. */
  curl_resolver_start_callback resolver_start_fn;
  void *resolver_start_data;
  curl_opensocket_callback opensocket_fn;
  void *opensocket_data;
  curl_hstsread_callback hstsread_fn;
  curl_xferinfo_callback xferinfo_fn;
  curl_progress_callback progress_fn;
  void *progress_data;
  long noprogress;           /* default 1 */
  int progress_callback_set; /* libcurl's data->progress.callback */
  char *errorbuffer;

  /* Limits. */
  long timeout_ms;           /* CURLOPT_TIMEOUT(_MS), 0 = none */
  long connecttimeout_ms;    /* 0 = libcurl default */
  long nosignal;             /* no longer recorded (nothing reads it): always 0 */

  /* Put back after the guard's "no transfer" run (guard.c cg__no_transfer). */
  int protocols_kind;        /* 0: libcurl's default (all), 1: CURLOPT_PROTOCOLS, 2: _STR */
  long protocols;            /* CURLOPT_PROTOCOLS */
  char *protocols_str;       /* copy of CURLOPT_PROTOCOLS_STR */
  long verbose;              /* CURLOPT_VERBOSE */
  void *accept_encoding;     /* CURLOPT_ACCEPT_ENCODING as the host gave it, never read
                              * through: NULL, libcurl decodes no Content-Encoding */
  long content_decoding;     /* CURLOPT_HTTP_CONTENT_DECODING, default 1 */
  long include_header;       /* CURLOPT_HEADER: libcurl hands the header lines to the write
                              * function too, before the body (lib/http.c: the header's
                              * CLIENTWRITE_BODY bit), each whole, before the header
                              * function gets it */

  /* Non-zero while a guarded perform runs: options the guard overrides are then only
   * recorded here, and the attempt picks the new value up from the shadow. */
  int in_perform;
  /* Set when the host, while in_perform, set an option cg_handle_overridden lists or reset
   * the handle: the attempt's restore then puts every option back (cg_attempt_put_back),
   * not only those it installed.  Cleared when an attempt is installed. */
  int set_in_perform;
  /* Non-zero while the guard hands a held response to the host after its transfer
   * ended: curl_easy_pause() then answers for libcurl (see shim.c). */
  int replaying;
  /* The host paused receiving on this handle, by curl_easy_pause() (shim.c) or by a
   * callback's CURL_WRITEFUNC_PAUSE the guard passed on (attempt.c): header lines may then
   * come back several in one call (cg__header_lines).  Kept until curl_easy_reset. */
  int host_paused;
  /* The attempt of the easy driver installed on this handle (attempt.c, by_thread) while
   * it runs, else NULL: curl_easy_pause() called on another thread than the perform's
   * lends it to that thread for the call (shim.c), since libcurl may run the write and
   * header callbacks from inside it there. */
  struct cg_attempt *thread_attempt;
};

/* Create the shadow of a new handle (all defaults) and add it to the map, replacing a
 * stale shadow of the same address (a handle freed where the guard could not see it).
 * Returns NULL when out of memory (the handle then passes through). */
struct cg_handle *cg_handle_add(CURL *curl, const struct cg_lib *lib);

/* This thread's last answer of the map (cg_handle_get): `curl` -> `h` (NULL: unknown),
 * true while the map's generation is still `gen`.  Every add and remove bumps the
 * generation, so a handle freed and another made at its address never get the old
 * shadow; a thread that is handed a handle by another was ordered after that thread's
 * adds and removes by the hand-over itself, and sees their generation.  CG_TLS (tls.h):
 * one %fs access. */
struct cg_handle_memo {
  CURL *curl;
  struct cg_handle *h;
  uint64_t gen;
};
extern CG_TLS struct cg_handle_memo cg_handle_memo __attribute__((visibility("hidden")));
/* The map's generation: starts at 1 (a memo's 0 never matches), bumped (release) under
 * the map's mutex by every add and remove, before the shadow goes away. */
extern uint64_t cg_handle_gen __attribute__((visibility("hidden")));

/* cg_handle_get past this thread's memo: looks `curl` up in the map and remembers the
 * answer. */
struct cg_handle *cg_handle_lookup(CURL *curl);

/* The shadow of `curl`, or NULL if the guard does not know it.  Takes no lock and makes
 * no system call; safe while other threads add and remove other handles.  Inline: the
 * same handle as this thread's last lookup, with no add or remove since, costs two
 * compares (every setopt of the host asks). */
static inline struct cg_handle *cg_handle_get(CURL *curl) {
  struct cg_handle_memo *m = &cg_handle_memo;

  if (__builtin_expect(m->curl == curl &&
                           m->gen == __atomic_load_n(&cg_handle_gen, __ATOMIC_ACQUIRE),
                       1))
    return m->h;
  return cg_handle_lookup(curl);
}

/* The shadow of `curl` when it is this thread's memo (cg_handle_get's first test), else
 * NULL (unknown, or not the memo's: cg_handle_get then looks).  No call: a caller whose
 * every path is a tail call keeps its common one free of a stack frame (shim.c). */
static inline struct cg_handle *cg_handle_memo_hit(CURL *curl) {
  struct cg_handle_memo *m = &cg_handle_memo;

  return m->curl == curl && m->gen == __atomic_load_n(&cg_handle_gen, __ATOMIC_ACQUIRE)
             ? m->h
             : NULL;
}

/* Remove and free the shadow of `curl` (no-op if unknown). */
void cg_handle_remove(CURL *curl);

/* Return the shadow to libcurl's defaults, as curl_easy_reset does (the lib stays). */
void cg_handle_reset(struct cg_handle *h);

/* Shadow a copy of `src` for the handle `dup`, as curl_easy_duphandle copies every
 * option.  Returns NULL when out of memory. */
struct cg_handle *cg_handle_dup(const struct cg_handle *src, CURL *dup);

/* 1 when the guard has option `opt` overridden while an attempt runs: a host that sets
 * it from inside a callback then only changes the shadow, and the attempt picks the
 * new value up from there.  The shim must not pass such an option to libcurl. */
int cg_handle_overridden(const struct cg_handle *h, long opt);

/* Record option `opt` with value `v`, which libcurl accepted, in the shadow.  Only the
 * options some field above keeps are recorded (the ones guard.c and attempt.c read, put
 * back after an attempt, or hand to a duplicate); any other option returns at once. */
void cg_handle_record(struct cg_handle *h, long opt, const struct cg_optval *v);

/* How cg_handle_record keeps each option, one byte each (cg_handle_keeps): per argument
 * kind (optval.h), the option numbers kind * 10000 + 0 .. CG_TRACK_SPAN - 1.  0: not kept;
 * 1 .. CG_KEEP_SWITCH - 1: the argument itself is stored, as it is, in the field that
 * starts that many pointer sizes into struct cg_handle (cg_handle_store); CG_KEEP_SWITCH
 * and up: the option's own case of cg_handle_record_switch (more than a store: a copy,
 * the method, a unit).  A table rather than a switch on the option: every option the host
 * sets asks, most kept ones are plain stores that then share one path instead of a case
 * each, and the others' cases are numbered densely (issue 16: the lines of code a request
 * runs).  Defined in handle.c. */
#define CG_TRACK_SPAN 512
#define CG_KEEP_SWITCH 128
/* 5 * CG_TRACK_SPAN bytes (left unsized here: GCC cannot see that cg_handle_keeps' index
 * stays within them, and would warn of paths that never run). */
extern const uint8_t cg_handle_keep[] __attribute__((visibility("hidden")));

/* cg_handle_keep's byte for option `opt` (0 for any option outside the table).  Inline:
 * every setopt of a guarded handle asks.
 *
 * The kind is found without a division or a range check.  With o = opt as an unsigned
 * long, k = o >> 13 and r = o % 8192, n = o - k * 10000 is r - k * 1808 modulo 2^N (k *
 * 1808 < 2^(N - 2): no wrap): for k >= 5 it is negative (r < 8192 <= 5 * 1808), so
 * wraps past CG_TRACK_SPAN, and for k <= 4 it is o's place in kind k's numbers when that
 * is below CG_TRACK_SPAN (kind k's first CG_TRACK_SPAN options lie within [k * 8192,
 * (k + 1) * 8192): checked in handle.c).  So an option is found under its own kind, and
 * any other number finds nothing. */
static inline unsigned cg_handle_keeps(long opt) {
  unsigned long o = (unsigned long) opt, k = o >> 13, n = o - k * 10000;

  return n < CG_TRACK_SPAN ? cg_handle_keep[k * CG_TRACK_SPAN + n] : 0;
}

/* Store the argument at `arg` (its bits as the option's own type) in the field of
 * cg_handle_keep's byte `keep` (1 .. CG_KEEP_SWITCH - 1).  Every such field has the size of a
 * pointer (handle.c checks), as a long, a data pointer and a function pointer have on
 * every ABI the guard runs on. */
static inline void cg_handle_store(struct cg_handle *h, unsigned keep, const void *arg) {
  memcpy((char *) h + keep * sizeof(void *), arg, sizeof(void *));
}

/* Record value `u` of the option whose cg_handle_keep byte `keep` is CG_KEEP_SWITCH or
 * more (cg_handle_record's part for those options).  `u` by value: in a register. */
void cg_handle_record_switch(struct cg_handle *h, unsigned keep, union cg_optarg u);

/* libcurl refused the host's CURLOPT_PROTOCOLS(_STR): what the handle allows is then
 * unknown (libcurl 7.88 stores part of a refused list), so the guard must never set it
 * again; marks the protocol list as "cannot be put back". */
void cg_handle_protocols_unknown(struct cg_handle *h);

/* The request body as libcurl will send it from POSTFIELDS/COPYPOSTFIELDS, or NULL
 * when the body comes from a read callback, mime, or there is none.  `*len` gets its
 * length in bytes. */
const char *cg_handle_body(const struct cg_handle *h, size_t *len);

/* The request method the options ask for ("GET", "POST", ..., or the custom one). */
const char *cg_handle_method(const struct cg_handle *h);

/* 1 if the request carries header `name` (ASCII case-insensitive, as libcurl compares
 * header names: ascii.h); its value (trimmed, NUL-terminated) is copied into `val` of
 * `vlen` bytes when given.  `n` is strlen(name). */
int cg_handle_header_n(const struct cg_handle *h, const char *name, size_t n, char *val,
                       size_t vlen);

/* cg_handle_header_n with strlen(name): inline, so that a name written in the code
 * ("Idempotency-Key") has its length counted by the compiler, not by a call of strlen on
 * every request (issue 16). */
static inline int cg_handle_header(const struct cg_handle *h, const char *name, char *val,
                                   size_t vlen) {
  return cg_handle_header_n(h, name, strlen(name), val, vlen);
}

/* An Authorization value signed per request names its account only by the identity in
 * it: AWS SigV4 (Bedrock; curl --aws-sigv4) by the access key id of `Credential=` (before
 * the scope's first '/'), HTTP Digest (RFC 7616 section 3.4) by `username`, a draft-cavage
 * HTTP signature by `keyId`.  Their whole value differs on every request, and every call
 * would be a limit key of its own (an account's 429 holding no other call, cutting no
 * rate: a helper's repro, 16 SigV4 processes into a 60 rpm limit, 2 of 16 where the whole
 * pool's hold made 10).  `v` (NUL-terminated) is cut to that identity, "" when such a
 * value has none; any other value is kept whole. */
void cg_auth_identity(char *v);

/* Number of shadows alive (for tests and stats). */
size_t cg_handle_count(void);

/* Number of tables the map has made so far (for tests: replaced tables are kept until
 * exit, so this bounds the map's memory). */
size_t cg_handle_tables(void);

#endif
