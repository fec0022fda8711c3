/* report.h - `curlguard report`: usage-log aggregation in one streaming pass.
 *
 * Feed lines (cg_report_line) or whole descriptors (cg_report_read_fd), then
 * cg_report_finish, then print (cg_report_print) or take the JSON (cg_report_json).
 *
 * Definitions (also in README "curlguard report"):
 *   group          one (pool, model family) pair (cg_model_family: "gpt-4o-2024-08-06"
 *                  is in "gpt-4o"); a null pool or model is its own key, apart from
 *                  every string.  At most CG_REPORT_MAX_GROUPS; later pairs are folded
 *                  into one group flagged `other` (pool and model NULL).
 *   attempt        one record.  retry: a record with attempt > 1.
 *   retry ratio    retries / attempts: the share of attempts that were retries.
 *   call           a record with final: true, counted in its group.  unfinished: a
 *                  request id with records but no final one (a log cut mid-call), in
 *                  any input order.
 *   host retry     a final record with repeat_of set (the host repeated an identical call).
 *   billed         an attempt with prompt or total tokens, or possibly_billed true.
 *   at risk        cost_usd null on a possibly_billed attempt (a failure after sending,
 *                  or an OK answer without usage): estimated as the number of such
 *                  attempts x the group's (model family's) mean cost per priced attempt
 *                  (null when the group has no priced attempt); the total is the sum of
 *                  the groups'.
 *   unpriced       an attempt with tokens but cost_usd null (a model the table lacks).
 *   duplicate body a body_digest billed in more than one call (request id): counted
 *                  once per digest, in the group of its first billed attempt, with the
 *                  extra calls (distinct request ids beyond the first).  Retries of one
 *                  call are not duplicates: they are `billed_retries` (billed attempts
 *                  with attempt > 1).
 *   latency        per attempt duration_ms (not per call), from a histogram (report-hist.h).
 *   alerts         retry ratio > 5 % in a 10-minute window with >= 20 attempts; cost of a
 *                  clock hour > 1.3 x the previous hour's when that was > 0; attempt 4 of a
 *                  request (retried more than twice), or a host's third repeat of a call.
 */
#ifndef CG_REPORT_H
#define CG_REPORT_H

#include "report-hist.h"
#include "report-map.h"
#include "report-rec.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CG_REPORT_LINE_MAX (1024 * 1024) /* longer lines are malformed (too_long), bytes */
#define CG_REPORT_MAX_GROUPS 512         /* (pool, model) pairs kept apart */
#define CG_REPORT_MAX_OUTCOMES 64        /* distinct outcome names kept apart, then "other" */
#define CG_REPORT_DIGEST_SLOTS (1u << 22) /* 3.1 M digests, 64 MiB at most */
#define CG_REPORT_TASK_SLOTS (1u << 21)   /* 1.5 M task ids, 32 MiB at most */
#define CG_REPORT_CALL_SLOTS (1u << 20)   /* 786 k calls incomplete at once, 16 MiB */
#define CG_REPORT_DUP_SLOTS (1u << 21)    /* 1.5 M (digest, extra call) pairs, 32 MiB */
#define CG_REPORT_MAX_VARIANTS 8         /* raw model names listed per group */
#define CG_REPORT_MINUTE_SLOTS (1u << 20) /* 786 k distinct minutes (1.5 years) */
#define CG_REPORT_MAX_ALERTS 1000        /* alerts kept; more are counted, not listed */
#define CG_REPORT_TASK_EXAMPLES 10       /* task ids named in the output */

/* Alert thresholds (the seeds' values). */
#define CG_ALERT_WINDOW_MIN 10           /* sliding window, minutes */
#define CG_ALERT_RETRY_RATIO 0.05        /* retries / attempts above this */
#define CG_ALERT_MIN_ATTEMPTS 20         /* windows with fewer attempts are not judged */
#define CG_ALERT_COST_RISE 1.30          /* hour cost above this x the previous hour */
#define CG_ALERT_MAX_RETRIES 2           /* attempt > 1 + this, or repeats > this */

struct cg_series;

/* Counters of one group (or of all records: the totals). */
struct cg_rstats {
  uint64_t attempts, retries, calls, unfinished, host_retry_calls;
  uint64_t billed, billed_retries, usage_attempts, possibly_billed, at_risk_attempts;
  uint64_t unmetered;        /* ok answers to a model call without usage (billed, amount
                                unknown; in at_risk_attempts too) */
  uint64_t priced, unpriced;
  uint64_t prompt_tokens, completion_tokens, total_tokens, cached_tokens;
  double cost_usd;                              /* summed in record order */
  uint64_t dup_digests, dup_extra_calls;      /* digests billed in > 1 call; calls - 1 */
  uint64_t outcome[CG_REPORT_MAX_OUTCOMES + 1]; /* by interned id; last: other */
  uint64_t latency_missing;                     /* attempts with duration_ms null */
  struct cg_hist *latency;                      /* allocated with the group */
};

struct cg_rgroup {
  char *pool, *model;           /* NULL when null (and in the `other` group) */
  int other;                    /* the group of the pairs beyond CG_REPORT_MAX_GROUPS */
  uint64_t hash;
  char *variant[CG_REPORT_MAX_VARIANTS]; /* distinct raw model names seen, first ones */
  size_t nvariants;
  int variants_capped;          /* more raw names than listed */
  struct cg_rstats s;
};

/* Per-minute sums for the window alerts. */
struct cg_rminute {
  int64_t minute;        /* floor(ts_ms / 60000) */
  uint64_t attempts, retries;
  double cost_usd;
};

struct cg_report {
  uint64_t lines, records, blank;
  uint64_t malformed[CG_RBAD_COUNT];            /* [0] unused */
  char *first_bad;                              /* "FILE:LINE" of the first malformed line */
  const char *source;                           /* current input name, for first_bad */
  uint64_t source_line;
  int64_t ts_min, ts_max;

  struct cg_rgroup *group;
  size_t ngroups;
  int groups_capped;
  struct cg_rstats total;

  char *outcome_name[CG_REPORT_MAX_OUTCOMES];
  size_t noutcomes;

  struct cg_rmap digests;   /* digest hash -> first request hash << 11 | counted << 10 | group */
  struct cg_rmap dup_calls; /* (digest, request) pair hash of the extra calls: a set */
  struct cg_rmap tasks;     /* task hash -> last billed request hash | 1 if counted */
  struct cg_rmap pending;   /* request hash of incomplete calls -> see cg__pending */
  struct cg_rmap minutes;   /* minute -> index into minute[] */
  struct cg_rminute *minute;
  size_t nminutes, minute_cap;
  size_t last_minute;                           /* index of the previous record's minute */

  uint64_t tasks_multi;                         /* task ids with > 1 billed call */
  char *task_example[CG_REPORT_TASK_EXAMPLES];
  size_t ntask_examples;

  struct cg_series *series;                     /* time buckets for --html, or NULL
                                                   (report-series.h; freed with the report) */
  cJSON *alerts;                                /* array of alert objects */
  uint64_t nalerts, alerts_dropped;
  int finished;
};

/* A new empty report, or NULL when out of memory. */
struct cg_report *cg_report_new(void);

/* Name the input the following lines come from (for the first malformed line's place);
 * resets the line number.  `name` must outlive the report. */
void cg_report_source(struct cg_report *r, const char *name);

/* How the report takes one line of `len` bytes (without its newline; `line` NULL: one
 * over CG_REPORT_LINE_MAX that the reader skipped): -1 for a blank line (spaces, tabs and
 * CRs only: not counted), else CG_RBAD_NONE with `*x` a whole record (the caller
 * releases it, cg_rrec_release), or why the line is not one (CG_RBAD_LONG, or
 * cg_rrec_parse's reason).  The one rule of what a record is, for every counter of usage
 * lines (report, prices check). */
int cg_report_take(const char *line, size_t len, struct cg_rrec *x);

/* Account one line of `len` bytes (without its newline; NULL: a line over
 * CG_REPORT_LINE_MAX the reader skipped, counted as too_long).  Blank lines are ignored.
 * Returns CG_RBAD_NONE for a record (or a blank line), else why the line was skipped.
 * A record whose new group cannot be allocated still counts in the totals. */
enum cg_rbad cg_report_line(struct cg_report *r, const char *line, size_t len);

/* Read `fd` to its end, line by line through a 2 MiB buffer (memory does not depend on
 * the input); a line over CG_REPORT_LINE_MAX bytes is counted as too_long and skipped;
 * a last line without a newline counts.  0 at end of input, -1 on a read error (errno
 * set; what was read is accounted). */
int cg_report_read_fd(struct cg_report *r, int fd);

/* cg_report_read_fd's reader, for any counter of the same lines (prices check): calls
 * `line(arg, s, len)` for each line of `fd` without its newline (the last one also when
 * none ends it) and `line(arg, NULL, 0)` once for a line over CG_REPORT_LINE_MAX bytes,
 * whose bytes are skipped; memory is 2 MiB whatever the input.  0 at end of input, -1
 * on a read error (errno set). */
int cg_report_read_lines(int fd, void (*line)(void *arg, const char *s, size_t len),
                         void *arg);

/* After the last line: unfinished calls and the window alerts (sorts minute[]; no
 * line may be added afterwards).  Idempotent. */
void cg_report_finish(struct cg_report *r);

/* The report as one JSON document (README "curlguard report" has its shape); the caller
 * deletes it.  NULL when out of memory.  Requires cg_report_finish. */
cJSON *cg_report_json(const struct cg_report *r);

/* The report as text: a table per group, totals, notes and alert lines. */
void cg_report_print(const struct cg_report *r, FILE *out);

/* Free everything. */
void cg_report_free(struct cg_report *r);

/* Estimated cost at risk of `s` (at_risk_attempts x mean cost per priced attempt); NaN
 * when there is nothing to estimate from; 0 when nothing is at risk. */
double cg_report_at_risk(const struct cg_rstats *s);

/* Add number `v` to object `o` as `k`, printed so that it reads back exactly (cJSON's
 * own printing may be an ulp off); NaN and infinities become null. */
void cg_report_json_num(cJSON *o, const char *k, double v);

/* Internal (report-alert.c): the retry-ratio and hour-over-hour alerts from the minute
 * sums, appended to the alerts in time order. */
void cg_report_window_alerts(struct cg_report *r);

/* Cost at risk of group `group` (index), or of the whole report for -1: the sum of the
 * groups' estimates (each from its own mean cost, so a cheap model's failures are not
 * priced like an expensive one's).  `*unestimated` gets the at-risk attempts of groups
 * without any priced attempt, which cannot be estimated; a group's `*usd` is then NaN. */
void cg_report_risk(const struct cg_report *r, long group, double *usd, uint64_t *unestimated);

/* The length of the family prefix of model name `model` (`len` bytes): the name without
 * one trailing date or alias suffix, "-YYYY-MM-DD", "-YYYYMMDD", "@YYYYMMDD", "-MM-DD",
 * "-MMDD" or "-YYMM" (valid month and day), or "-latest"; `len` when it has none.
 * "gpt-4o-2024-08-06" -> "gpt-4o", "claude-3-5-sonnet@20240620" -> "claude-3-5-sonnet",
 * "gemini-2.5-flash-preview-05-20" -> "gemini-2.5-flash-preview", "gpt-4-0613" ->
 * "gpt-4", "claude-3-5-sonnet-latest" -> "claude-3-5-sonnet". */
size_t cg_model_family(const char *model, size_t len);

/* Write `s` into `out` (`cap` >= 1 bytes, NUL-terminated, truncated at a character
 * boundary) as text output shows strings from the input: controls, DEL and C1 controls as
 * visible escapes (\n, \r, \t, \xNN, \u0080...), `\` as `\\`, and a leading `(` as
 * `\(` so that no string reads like a marker ("(none)" for null, "(other)").  `s` is
 * valid UTF-8.  Returns the characters (code points) written. */
size_t cg_text_escape(char *out, size_t cap, const char *s);

/* Internal: add an alert object (kept unless CG_REPORT_MAX_ALERTS were kept). */
void cg_report_alert(struct cg_report *r, cJSON *alert);

#endif
