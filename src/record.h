/* record.h - one JSON line per attempt (SPEC section 5).
 *
 * Every required key is always present, null where unknown.  The line is written with
 * one write(2) on an O_APPEND descriptor, so lines from concurrent processes never
 * interleave (POSIX write(2) on regular files with O_APPEND; lines stay well under
 * PIPE_BUF for the "-" stderr case).  Nothing here ever sees header values, bodies,
 * query strings or keys: the caller passes only the fields below.
 */
#ifndef CG_RECORD_H
#define CG_RECORD_H

#include "config.h"

#include <stddef.h>
#include <stdint.h>

#define CG_NULL_INT INT64_MIN /* an integer field that is unknown -> null */

struct cg_record {
  int64_t ts_ms;             /* wall clock, ms since the epoch, when the attempt ended */
  long pid;
  const char *request_id;    /* same for every attempt of one call */
  const char *task_id;       /* NULL -> null */
  int attempt;               /* 1-based */
  int final;                 /* last attempt of the call */
  const char *method;
  const char *host;
  const char *path;          /* never with the query string */
  const char *pool;
  int64_t status;            /* HTTP status or CG_NULL_INT */
  int curl_code;
  const char *outcome;
  const char *decision;      /* "done", "retry", "give_up" */
  const char *reason;
  int64_t queue_ms;          /* waiting for the rate limiter (and the breaker) */
  int64_t breaker_wait_ms;   /* the part of queue_ms spent held by an open breaker */
  int64_t backoff_ms;        /* sleep before the next attempt (0 when final) */
  int64_t connect_ms, ttfb_ms, duration_ms;   /* CG_NULL_INT when unknown */
  int64_t bytes_sent, bytes_received;
  const char *model;         /* NULL -> null */
  int64_t prompt_tokens, completion_tokens, total_tokens, cached_tokens;
  double cost_usd;           /* NaN -> null */
  int possibly_billed;
  const char *body_digest;   /* hex, NULL -> null */
  /* Beyond SPEC section 5: */
  int libcurl_resends;       /* requests libcurl re-sent by itself on a dead connection */
  const char *repeat_of;     /* request_id of an identical earlier call (host retry), or NULL */
  int repeats;               /* how many identical calls in a row before this one */
  const char *fallback_from; /* the pool whose open breaker sent the call to this host
                              * (its fallback_url), or NULL */
};

/* Fill `r` with nulls / zeros. */
void cg_record_init(struct cg_record *r);

/* The record as one JSON object followed by '\n' (and a NUL not counted in `*len`),
 * malloc'd (caller frees), or NULL when out of memory.  `*len` gets its length in bytes.
 * Written by hand into one buffer (no cJSON tree): keys in the order of struct
 * cg_record's SPEC list above, then the extensions; integers in full (CG_NULL_INT ->
 * null), `ts` RFC 3339 UTC with milliseconds, `cost_usd` the %.15g form when it reads
 * back exactly, else %.17g (NaN and infinities -> null), '.' as the decimal point in any
 * locale; strings made valid UTF-8 (a byte that starts no well-formed sequence becomes
 * U+FFFD) and escaped as cJSON_PrintUnformatted escapes them (\" \\ \b \f \n \r \t,
 * other bytes below 0x20 as \u00xx), NULL -> null.  tests/unit/test-record-writer.c
 * checks all of it against the cJSON builder this replaced. */
char *cg_record_json(const struct cg_record *r, size_t *len);

/* Append `r` to the usage log configured in `c` (CURLGUARD_LOG; "-" = stderr; NULL =
 * off).  The log is opened once per process (directories created, mode 0600) and its
 * descriptor moved to the top of the numbers the process may use (at most 1023), where
 * a host that closes it gets the number back last: a write that finds it closed (EBADF)
 * reopens the log, and fstat(2) checks it is still the file we opened when 10 ms have
 * passed since the last check (before every record when it could not be moved up, and
 * once the host has closed or replaced it).  The line is built on
 * the stack (malloc'd only past 4 KiB: very long strings) and written with one write(2);
 * SIGPIPE is held off only for "-", which may be a pipe.  On any failure one
 * "curlguard:" line says why and the record is dropped; the host's request is not
 * affected.  Returns 0 when written, -1 when not (log off, unusable, out of memory, or
 * a failed or short write). */
int cg_record_emit(const struct cg_config *c, const struct cg_record *r);

#endif
