/* repeat.h - noticing a host that retries by itself.
 *
 * A host that retries (curl --retry, an SDK's own retry loop) makes a new call for the
 * same request, multiplying the guard's attempts.  The guard remembers the last calls
 * of this process by a 64-bit key of (method, full URL, body digest) and marks a call
 * that repeats one within the window, so `report` can show the amplification.
 * Bounded: CG_REPEAT_SLOTS most recent calls.  Thread-safe.
 */
#ifndef CG_REPEAT_H
#define CG_REPEAT_H

#include <stddef.h>
#include <stdint.h>

#define CG_REPEAT_SLOTS 128

/* Note a call with `key` and `request_id` at `now_ms` (monotonic).  When the last call
 * with that key failed (cg_repeat_done) within `window_ms`, this call is a host retry:
 * copies the request id of the call that started the chain into `prev` (NUL-terminated,
 * `len` bytes) and returns how many times in a row it has now been repeated (>= 1); else
 * returns 0.  (Identical calls after a success, such as polls, are not retries.) */
int cg_repeat_note(uint64_t key, int64_t now_ms, int64_t window_ms, const char *request_id,
                   char *prev, size_t len);

/* Say how the call with `key` ended: 1 ok, 0 failed. */
void cg_repeat_done(uint64_t key, int ok);

/* The key of a call. */
uint64_t cg_repeat_key(const char *method, const char *url, const char *body_digest);

#endif
