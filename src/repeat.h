/* repeat.h - noticing a host that retries by itself.
 *
 * A host that retries (curl --retry, an SDK's own retry loop) makes a new call for the
 * same request, multiplying the guard's attempts.  The guard remembers the last calls
 * of this process by a 64-bit key of (method, full URL, body digest) and marks a call
 * that repeats one within the window, so `report` can show the amplification.
 *
 * A repeat is a call that follows an identical call's failure on the same thread: the
 * earlier call ENDED failed (cg_repeat_done) before this one started, and the thread
 * that saw it fail is the one making this call, as `curl --retry` and an SDK's retry
 * loop do.  Identical calls of concurrent workers (a batch whose prompts are the same,
 * 16 threads posting one body) are distinct calls: another thread's failure does not
 * make a worker's next call a retry of it, so the retry budget does not take them for
 * host retries (issue 12).  Other processes' calls are never seen (the table is per
 * process).  A host that retries on another thread than the one that failed is not
 * noticed: its repeats count as first attempts.
 * A multi host runs its concurrent transfers on one thread: there the worker is the easy
 * handle (CG_REPEAT_WORKER_HANDLE), not the thread.  `curl --parallel --retry`, which
 * adds the same handle again, repeats on its worker; 16 identical POSTs in one `curl -Z`
 * are 16 handles, distinct calls (a helper's find: after an outage, the 8 that followed
 * the first 8 were taken for host retries and refused by the drained retry budget,
 * against a healthy provider; plain curl did all 16).
 * Bounded: CG_REPEAT_SLOTS most recent calls.  Thread-safe.
 */
#ifndef CG_REPEAT_H
#define CG_REPEAT_H

#include <stddef.h>
#include <stdint.h>

#define CG_REPEAT_SLOTS 128

/* How a call ended, for cg_repeat_done. */
enum cg_repeat_end {
  CG_REPEAT_OK,     /* ended ok: identical calls after it (polls) are not retries */
  CG_REPEAT_FAILED, /* reached the provider and failed: an identical call is a host retry */
  CG_REPEAT_LOCAL,  /* never reached the network (circuit_open, retry_budget_exhausted,
                     * local_rate_limited, a host abort before the first attempt): it
                     * neither starts nor refreshes a chain */
};

/* The worker of a call the multi driver runs on the handle with `serial` (struct
 * cg_handle's, never 0): for cg_repeat_note and cg_repeat_done's `worker`, where 0 means
 * the calling thread (the easy driver).  The top bit keeps it apart from thread numbers. */
static inline uint64_t cg_repeat_worker_handle(uint64_t serial) {
  return serial | (UINT64_C(1) << 63);
}

/* Look up a call with `key` of `worker` (0: the calling thread; see above) at `now_ms`
 * (monotonic); changes nothing.  When the last call with that key failed
 * (cg_repeat_done) within `window_ms`, and that worker ended it, this call is a host
 * retry:
 * copies the request id of the call that started the chain into `prev` (NUL-terminated,
 * `len` bytes) and returns how many times in a row it has now been repeated (>= 1); else
 * returns 0.  (Identical calls after a success, such as polls, are not retries.) */
int cg_repeat_note(uint64_t key, uint64_t worker, int64_t now_ms, int64_t window_ms, char *prev,
                   size_t len);

/* Say how the call with `key` of `worker` (as for cg_repeat_note) ended, at `now_ms`, in
 * that worker's chain (one a key and worker: another worker's identical call neither ends
 * nor takes it over): a failure starts a chain (`chain_id`:
 * the call's own request id) or extends it (`repeats` from cg_repeat_note, `chain_id`:
 * the id it returned); a success ends it; a call that never reached the network leaves
 * it as it was, so a refused repeat cannot keep a chain alive. */
void cg_repeat_done(uint64_t key, uint64_t worker, enum cg_repeat_end end, int64_t now_ms,
                    int repeats, const char *chain_id);

/* 0 when cg_repeat_done(.., `end`, ..) would change nothing (a local end; a success while
 * no slot holds a failure): the caller may skip it, and reading the clock for it. */
int cg_repeat_needs_done(enum cg_repeat_end end);

/* A key from `method`, `url` (NUL-terminated) and, when not NULL, `body_digest` (hex,
 * NUL-terminated): XXH3-64 of their bytes with the NULs between.  Stable across versions:
 * limiter.c keys the state file's pools with it ("pool", name, NULL). */
uint64_t cg_repeat_key(const char *method, const char *url, const char *body_digest);

/* The key of a call: `method`, `url` (NUL-terminated) and, when not NULL, its body's
 * XXH3-128 (`body_hash`: high, low halves, cg_digest128).  Kept only in this process's
 * memory (never in the state file), so free to differ from cg_repeat_key: two short
 * seeded XXH3-64 hashes, no hex and no copy (issue 16). */
uint64_t cg_repeat_key_call(const char *method, const char *url, const uint64_t body_hash[2]);

#endif
