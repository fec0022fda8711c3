/* report-rec.h - one usage-log line -> the fields `curlguard report` needs.
 *
 * A line is a record when it is a JSON object (parsed with cJSON) that has every SPEC
 * section 5 key with the type the guard writes (table in report-rec.c: strings, numbers,
 * booleans, null where the guard may write null), a `ts` in RFC 3339, an integral
 * `attempt` >= 1, and token counts, timings and `cost_usd` that are finite and >= 0.
 * The extras `libcurl_resends`, `repeat_of` and `repeats` may be absent (older logs) but
 * must have the right type when present.  Unknown keys are ignored.  `outcome` must
 * not be empty; a line holding a NUL byte is not JSON.  Anything else is malformed, with
 * one of the reasons below.
 */
#ifndef CG_REPORT_REC_H
#define CG_REPORT_REC_H

#include <stddef.h>
#include <stdint.h>

#define CG_RNULL INT64_MIN /* an integer field that was null */

/* Why a line is not a record (index into the malformed counters). */
enum cg_rbad {
  CG_RBAD_NONE = 0,
  CG_RBAD_JSON,       /* not valid JSON */
  CG_RBAD_OBJECT,     /* valid JSON, not an object */
  CG_RBAD_MISSING,    /* a required key is missing */
  CG_RBAD_TYPE,       /* a key has the wrong JSON type */
  CG_RBAD_VALUE,      /* right type, impossible value (bad ts, attempt 0, tokens < 0, "") */
  CG_RBAD_LONG,       /* longer than CG_REPORT_LINE_MAX (found by the reader) */
  CG_RBAD_COUNT
};

/* The names of the reasons, for output ("not_json", ...); CG_RBAD_COUNT entries. */
extern const char *const cg_rbad_name[CG_RBAD_COUNT];

/* One record.  Strings point into the parsed JSON and live until cg_rrec_release (or
 * the next parse); they are valid UTF-8 without NUL: invalid sequences were replaced by
 * U+FFFD, and a \u0000 escape reads as U+FFFD too (cJSON would cut the string there). */
struct cg_rrec {
  int64_t ts_ms;            /* ms since the epoch, UTC */
  const char *request_id;
  const char *task_id;      /* NULL when null */
  const char *pool;         /* NULL when null */
  const char *model;        /* NULL when null */
  const char *outcome;
  const char *method;       /* NULL when null (only compared, never printed) */
  const char *body_digest;  /* NULL when null */
  const char *repeat_of;    /* NULL when null or absent */
  int64_t attempt;          /* >= 1 */
  int final;
  int possibly_billed;
  int64_t duration_ms;      /* CG_RNULL when null */
  int64_t prompt_tokens, completion_tokens, total_tokens, cached_tokens; /* or CG_RNULL */
  double cost_usd;          /* NaN when null */
  int64_t repeats;          /* 0 when null or absent */
  void *json_;              /* the parsed tree (private) */
};

/* Parse `len` bytes of `line` (no newline needed, no NUL needed).  On success fills `r`
 * and returns CG_RBAD_NONE; the caller must then call cg_rrec_release(r).  Otherwise
 * returns the reason and `r` holds nothing to release. */
enum cg_rbad cg_rrec_parse(const char *line, size_t len, struct cg_rrec *r);

/* Free what cg_rrec_parse kept. */
void cg_rrec_release(struct cg_rrec *r);

/* The length of the longest valid UTF-8 prefix of `s` (`len` bytes); `*bad` gets the
 * length of the invalid sequence that follows it (a maximal subpart, Unicode 3.9: 1 to 3
 * bytes), 0 when all of `s` is valid. */
size_t cg_utf8_valid_prefix(const char *s, size_t len, size_t *bad);

/* `len` bytes of `s` into `out` (at least 3 * len + 1 bytes) with every invalid sequence
 * replaced by U+FFFD, NUL-terminated; returns the bytes written before the NUL. */
size_t cg_utf8_repair(const char *s, size_t len, char *out);

/* RFC 3339 date-time ("2026-11-30T06:29:25.483Z", "...+02:00", "t"/space separator,
 * any number of fraction digits, truncated to ms; second 60 counts as 59.999) of `len`
 * bytes -> ms since the epoch in `*ms`.  0 on success, -1 when malformed or out of
 * range (years 0000-9999, as written and in UTC; real calendar days). */
int cg_rfc3339_parse(const char *s, size_t len, int64_t *ms);

/* Format `ms` since the epoch as RFC 3339 UTC with ms into `buf` (>= 32 bytes). */
char *cg_rfc3339_format(int64_t ms, char *buf, size_t len);

/* cJSON_ParseWithLength of the `len` bytes at `s` that also refuses anything but blanks
 * (bytes up to 0x20, as cJSON skips) after the value: cJSON stops at the value's end, so
 * a line holding two records, or a record and then text, would read as its first record.
 * Uses the cJSON hooks in force.  NULL when it does not parse. */
struct cJSON;
struct cJSON *cg_json_parse_whole(const char *s, size_t len);

#endif
