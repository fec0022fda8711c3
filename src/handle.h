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

/* CURLOPT_PROTOCOLS_STR (libcurl >= 7.85), by number: older headers lack the name. */
#define CG_OPT_PROTOCOLS_STR (CURLOPTTYPE_STRINGPOINT + 318)

/* libcurl's HTTPREQ_* of lib/urldata.h: what request the options ask for. */
enum cg_method { CG_M_GET, CG_M_POST, CG_M_POST_FORM, CG_M_POST_MIME, CG_M_PUT, CG_M_HEAD };

struct cg_handle {
  CURL *curl;
  const struct cg_lib *lib; /* the libcurl that created the handle, for its whole life */

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
  const char *postfields;    /* CURLOPT_POSTFIELDS, host-owned */
  char *copypostfields;      /* copy of CURLOPT_COPYPOSTFIELDS data */
  curl_off_t copypostfields_len;
  curl_off_t postfieldsize;  /* -1 = unset (strlen) */
  struct curl_slist *httpheader; /* host-owned */
  long followlocation;

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

/* The options cg_handle_record keeps, one bit each: per argument kind (optval.h), the
 * option numbers kind * 10000 + 0 .. CG_TRACK_SPAN - 1.  Defined in handle.c. */
#define CG_TRACK_SPAN 512
extern const uint64_t cg_handle_tracked[5 * CG_TRACK_SPAN / 64]
    __attribute__((visibility("hidden")));

/* 0 when cg_handle_record would ignore option `opt` of argument kind `kind`
 * (cg_opt_kind(opt)), so the shim can skip the call; 1 otherwise (and for any option
 * outside the table).  Inline: every setopt of a guarded handle asks. */
static inline int cg_handle_tracks(long opt, enum cg_optkind kind) {
  unsigned long n = (unsigned long) (opt - (long) kind * 10000);

  if (n >= CG_TRACK_SPAN)
    return 1;
  n += (unsigned long) kind * CG_TRACK_SPAN;
  return (int) ((cg_handle_tracked[n / 64] >> (n % 64)) & 1);
}

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

/* 1 if the request carries header `name` (case-insensitive); its value (trimmed,
 * NUL-terminated) is copied into `val` of `vlen` bytes when given. */
int cg_handle_header(const struct cg_handle *h, const char *name, char *val, size_t vlen);

/* Number of shadows alive (for tests and stats). */
size_t cg_handle_count(void);

/* Number of tables the map has made so far (for tests: replaced tables are kept until
 * exit, so this bounds the map's memory). */
size_t cg_handle_tables(void);

#endif
