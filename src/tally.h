/* tally.h - per-pool counters of what the guard recorded, in the shared state file.
 *
 * Every usage record the guard writes (record.h, one per attempt) is also added to its
 * pool's struct cg_state_tally (state.h): calls, attempts, attempts by outcome, retries,
 * host retries, tokens, estimated cost, time waited.  The counting rules are those of
 * `curlguard report` over the usage log (cli/report.c: a retry is an attempt numbered 2
 * or more, a host retry a call with repeat_of), so the metrics of `curlguard stat
 * --prometheus` and a report over the same records agree.  Counters only grow (relaxed
 * fetch-and-add, no lock, no system call) until `curlguard reset`.
 */
#ifndef CG_TALLY_H
#define CG_TALLY_H

#include "record.h"
#include "state.h"

#include <stdint.h>

/* The outcome counters of a tally, by index: the record's outcome names (SPEC section
 * 7), with HTTP statuses beyond the named ones summed per class ("http_4xx", "http_5xx",
 * "http_other") and an unknown name counted as "other". */
#define CG_TALLY_NOUTCOMES 36
_Static_assert(CG_TALLY_NOUTCOMES <= CG_STATE_OUTCOMES, "the file has a word per outcome");

/* The index of outcome `name` (a record's outcome: "ok", "http_503", ...); never fails
 * (NULL or unknown: the index of "other").  Pure. */
int cg_tally_outcome(const char *name);

/* The label of index `i` ("ok", "http_4xx", ...), NULL past CG_TALLY_NOUTCOMES. */
const char *cg_tally_outcome_name(int i);

/* Add record `r` to pool `p`'s tally in `st`.  Relaxed atomics only: must run inside a
 * guarded region of `st` (state.h), as admit.c's entry points do. */
void cg_tally_add(struct cg_state *st, int p, const struct cg_record *r);

/* A copy of pool `p`'s tally (relaxed loads), for `stat`.  Inside a guarded region. */
void cg_tally_read(const struct cg_state *st, int p, struct cg_state_tally *out);

#endif
