/* engine.h - the per-call engine that both drivers drive (issue 13).
 *
 * One guarded call is admit -> attempt -> classify -> decide -> (wait ->) record, until
 * the call is done.  guard.c holds that engine as a handful of steps, and two drivers run
 * them:
 *   - the easy driver (guard.c cg_guard_perform, blocking): inside curl_easy_perform it
 *     runs the steps in a loop, lets the admission wait, performs each attempt with the
 *     real curl_easy_perform and sleeps the backoff (the host's progress callback still
 *     called about once a second);
 *   - the multi driver (multi.c, non-blocking): it runs the same steps from the host's
 *     curl_multi_* calls, with every wait turned into a due time: the easy handle stays out
 *     of the real multi handle until then, each attempt is the real multi's transfer, and
 *     the judge step runs when the real multi reports CURLMSG_DONE.
 * The steps are the same code for both; `nb` (non-blocking) only says whether a wait may
 * sleep (0) or must be handed back to the driver as a due time (1).
 *
 * Step order for one call:
 *   cg_engine_begin                      once (NULL: not guarded, pass the handle through)
 *   { cg_engine_admit                    until GO (nb: WAIT means ask again at the due time)
 *     cg_engine_attempt_start            callbacks and limits pointed at the attempt
 *     ... the transfer (easy_perform, or the real multi until CURLMSG_DONE) ...
 *     cg_engine_attempt_end              options put back, the guard's stops translated
 *     cg_engine_judge } while RETRY      classify, decide, learn, one record
 *   cg_engine_end                        once (admission finished, call freed)
 * cg_engine_cancel ends a call the host took away (curl_multi_remove_handle, cleanup).
 */
#ifndef CG_ENGINE_H
#define CG_ENGINE_H

#include "attempt.h"
#include "handle.h"

#include <curl/curl.h>
#include <stdint.h>

struct cg_call; /* one guarded call (guard.c) */

/* What a step says comes next. */
enum cg_step {
  CG_STEP_GO,    /* admit: start the attempt now */
  CG_STEP_WAIT,  /* nb only: nothing to do before `*ms` from now; run the same step again */
  CG_STEP_RETRY, /* judge: the attempt was recorded and will be retried after `*ms` */
  CG_STEP_DONE,  /* the call is over: `*rc` is the host's CURLcode (its record written) */
};

/* Begin a call on the handle of shadow `h`, for the blocking driver (`nb` 0) or the
 * non-blocking one (1: the call's worker, for noticing a host's own retries, is the
 * handle, not the thread: repeat.h): NULL when the guard does not cover the request (not
 * http/https, host outside CURLGUARD_HOSTS) or is out of memory (one "curlguard:" line):
 * then the transfer runs as without the guard. */
struct cg_call *cg_engine_begin(struct cg_handle *h, int nb);

/* Before the attempt under way: the breaker, the budget and the limiter (admit.h).
 * Blocking (`nb` 0): waits, returns GO or DONE.  Non-blocking: never sleeps; WAIT with
 * `*ms` (>= 1) to be asked again then.  DONE: the call was refused before reaching the
 * network (circuit open, rate limit wait past the deadline, budget), its final record
 * written and the host's error buffer set; `*rc` is its code. */
enum cg_step cg_engine_admit(struct cg_call *call, int nb, int64_t *ms, CURLcode *rc);

/* The name of the pool `call` is admitted to (its fallback's while diverted): at most 47
 * bytes, owned by the call (copy it to keep it past cg_engine_end). */
const char *cg_engine_pool(const struct cg_call *call);

/* Point the handle's callbacks, error buffer and limits at the attempt `a` (caller's
 * storage, which must stay put until cg_engine_judge returned).  Returns CURLE_OK, or
 * the setopt error: then the attempt ends at once with it (cg_engine_attempt_end). */
CURLcode cg_engine_attempt_start(struct cg_call *call, struct cg_attempt *a);

/* The transfer of `a` ended with `rc`: put the host's options back and translate the
 * guard's own stops (first-byte and read timeouts, a blocked re-send).  Returns the
 * CURLcode as the host should see it. */
CURLcode cg_engine_attempt_end(struct cg_call *call, struct cg_attempt *a, CURLcode rc);

/* Judge the ended attempt `a` (code `rc` from cg_engine_attempt_end): classify, decide,
 * teach the limiter and breaker, write its record.  RETRY: held bytes dropped, `a` freed,
 * the next attempt's admission may start in `*ms`.  DONE: held bytes handed to the host
 * (for the multi driver: inside the host's curl_multi_* call), `a` freed, `*rc` final.
 * WAIT (nb only): the retry waits for the retry budget, or the final attempt's held bytes
 * wait for a host that paused (attempt.h cg_attempt_deliver_step); call again with the
 * same `a` in `*ms`. */
enum cg_step cg_engine_judge(struct cg_call *call, struct cg_attempt *a, CURLcode rc, int nb,
                             int64_t *ms, CURLcode *out_rc);

/* The driver judges the attempt later than right after cg_engine_attempt_end (the multi
 * driver's JUDGE state, a call it ended and judges on a later pass): the clock reading
 * cg_engine_attempt_end made is not the judge's "now" (issue 16: cg_engine_judge reuses it
 * otherwise). */
void cg_engine_end_aged(struct cg_call *call);

/* The host took the call away (curl_multi_remove_handle, curl_multi_cleanup,
 * curl_easy_cleanup of a handle inside a multi).  `a`: the attempt under way, already
 * ended with cg_engine_attempt_end (its transfer info is recorded), or NULL when none was
 * (waiting for admission or a backoff).  Writes the final record (outcome
 * aborted_by_host, reason `reason`) and ends the call as cg_engine_end does. */
void cg_engine_cancel(struct cg_call *call, struct cg_attempt *a, const char *reason);

/* The call is over (after DONE): give back what the admission holds, note the repeat
 * window, free the call.  `rc`: the host's final code. */
void cg_engine_end(struct cg_call *call, CURLcode rc);

#endif
