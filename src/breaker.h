/* breaker.h - the shared circuit breaker of a pool: every process on the machine stops
 * sending together while a provider is down, exactly one of them probes it back, and the
 * others wait for that probe's result (issue 12).
 *
 * States (the standard circuit breaker of Nygard's "Release It!", as in resilience4j, with
 * Envoy's and Finagle's consecutive-failure rule, doubling probe interval and slow start):
 *   closed     calls go; each counted result goes into a sliding time window (window.h,
 *              `window_s` long) and a shared run of failures in a row.  It opens when the
 *              run reaches `consecutive` (5), or when the window holds at least
 *              `min_requests` and the failed fraction reaches `failure_rate`.  A success
 *              ends the run only if its attempt was sent after the run began
 *              (cg_breaker_report_at): answers to requests sent before an outage say
 *              nothing of the provider now.
 *   open       no call goes before the next probe.  With open_wait (the default) a call
 *              whose deadline reaches past the next probe is held: admit.c parks it on
 *              `seq` (a futex word, woken at every probe's end) and asks again; the rest fail
 *              at once, before any DNS or connect: the host gets `open_code`
 *              (CURLE_COULDNT_CONNECT by default) and "curlguard: circuit open for HOST,
 *              next probe in N s" (while a probe is out: "..., probe in flight"); the record
 *              says outcome circuit_open.  The first probe may go `cooldown_s` after it
 *              opened (times 1 +- jitter); each failed probe doubles the interval, up to
 *              `cooldown_max_s`, and a Retry-After on its answer is a floor for the next.
 *   half-open  exactly one call, across all processes, is the probe: it wins one
 *              compare-and-swap on the state word.  Its success closes the breaker (the
 *              window starts empty, the doubling starts over) and starts the slow start:
 *              for `ramp_s` calls go in doubling batches (cg_breaker_ramp).  Its failure
 *              opens it again.  A probe whose process died (kill -9) is taken over by the
 *              next caller at once (its pid is gone, or belongs to a newer process), or by a
 *              held caller within a second; a probe that overruns its deadline (the probe
 *              call's own deadline, at most CG_BREAKER_PROBE_MAX_MS, or, once the pool's
 *              answer time is known, cg_breaker_probe_max_ms: a stalled probe) likewise.
 *
 * Which results reach the breaker (issue 12 item 6, admit.c): every attempt's success; the
 * failure of a retry, of a host's repeat, of a probe, and of a call that ends without a
 * retry; not the failure of a first attempt the guard is about to retry.
 *
 * Counted as failures (issue 6): connect failures (dns_error, connect_refused,
 * connect_timeout, tls_error), timeouts (first_byte_timeout, read_timeout), the
 * connection lost during the answer (reset_after_send, partial_response), a 2xx stream
 * that carried an error event (stream_error: overloaded_error and the like), any 5xx,
 * and a 429 without a hint.  Successes: 2xx/3xx and the other 4xx (the provider
 * answered; the client erred).  Not counted: outcomes decided locally or by the host
 * (aborted_by_host, circuit_open, local_rate_limited, retry_budget_exhausted, deadline,
 * curl_error), and a 429 that carries a hint (Retry-After or retry-after-ms).
 *
 * That last one deviates on purpose from issue 6 ("429 counts"): a 429 with a hint is a
 * provider that is up and metering us, and says for how long.  The limiter already holds
 * the whole pool, in every process, until the hint (admit.h); counting it as well would
 * let a startup burst against a rate limit (32 workers, 120 RPM) open the breaker and
 * black out every call for the cooldown when the server asked for 1 s.  A 429
 * without a hint says nothing of when to come back: it counts, as the issue says.
 *
 * The state is one 64-bit word in the shared file (state.h struct cg_state_breaker):
 *   bits 0-1 state, bits 2-23 the probe's pid (pids are < 2^22 on Linux, PID_MAX_LIMIT),
 *   bits 24-63 a CLOCK_MONOTONIC time in ms: when open, the end of the cooldown; when
 *   half-open, the probe's deadline.
 * Every transition is one CAS on it, so a process killed at any instant leaves a valid
 * state.  Thread-safe; no lock, no syscall on the closed path.
 */
#ifndef CG_BREAKER_H
#define CG_BREAKER_H

#include "classify.h"
#include "config.h"
#include "state.h"

#include <stdint.h>

#define CG_BREAKER_PROBE_MAX_MS 30000 /* a live probe holds half-open this long at most */
#define CG_BREAKER_RAMP_STEPS 6 /* the slow start doubles its release this many times */
/* Early probes (cg_breaker_early) of a pool start at most this often, machine-wide (the
 * fleet's on Redis): a service whose calls all have short deadlines sends a provider that
 * stays down about one request a second, not one a call. */
#define CG_BREAKER_EARLY_GAP_MS 1000

enum cg_breaker_state { CG_BREAKER_CLOSED, CG_BREAKER_OPEN, CG_BREAKER_HALF_OPEN };

/* The cap of the probe interval, seconds: cooldown_max_s, never below cooldown_s (both
 * back ends: breaker.c, shared-redis.c's report script). */
static inline double cg_breaker_cap_s(const struct cg_breaker_cfg *c) {
  return c->cooldown_max_s > c->cooldown_s ? c->cooldown_max_s : c->cooldown_s;
}

enum cg_breaker_verdict {
  CG_BREAKER_ALLOW,  /* closed (or disabled): go */
  CG_BREAKER_PROBE,  /* go, as the one half-open probe: report its result with probe = 1 */
  CG_BREAKER_REJECT, /* fail fast */
};

/* How an attempt's outcome counts: 1 failure, 0 success, -1 not at all (see above);
 * `hinted`: the answer carried a usable Retry-After or retry-after-ms.  Pure. */
int cg_breaker_counts(enum cg_outcome o, long status, int hinted);

/* Whether `ok` successes and `failed` failures in the window open the breaker: at least
 * min_requests of them, and failed / (ok + failed) >= failure_rate.  Pure. */
int cg_breaker_tripped(uint32_t ok, uint32_t failed, const struct cg_breaker_cfg *c);

/* Record pool `p`'s configuration in the file, for `stat`.  The window is shared: the
 * first process to configure the pool (since the file was made or reset) stores its
 * `window_s`, and every process counts in that one, so that processes configured
 * differently do not read each other's buckets with another width.  Returns the shared
 * window in ns (the caller says so when it differs from its own). */
int64_t cg_breaker_configure(struct cg_state *st, int p, const struct cg_breaker_cfg *c);

/* May a call go now (`now_ns`, monotonic)?  A caller that becomes the probe holds
 * half-open until `probe_deadline_ns` (capped at now + cg_breaker_probe_max_ms) or until
 * it reports.  On CG_BREAKER_REJECT, `*next_probe_ns` says when a probe may go next (the
 * end of the cooldown, or of the running probe's deadline). */
enum cg_breaker_verdict cg_breaker_admit(struct cg_state *st, int p,
                                         const struct cg_breaker_cfg *c, int64_t now_ns,
                                         int64_t probe_deadline_ns, int64_t *next_probe_ns);

/* An early probe (README "Half-open"): while the breaker is open and cooling down, a call
 * whose deadline cannot see the next probe takes the probe now instead of failing fast,
 * when no probe is out.  Open and cooling (word OPEN, `now_ns` before its time) -> half-open
 * held by this process until a second after `probe_deadline_ns` (the call's deadline: its
 * result comes a moment after it; capped as cg_breaker_admit caps it);
 * the cooldown's end is kept in `*open_until_ns` for cg_breaker_early_end.  Returns 1
 * when this call became the probe, 0 otherwise (closed, ready for a regular probe, a
 * probe out, an early probe begun less than CG_BREAKER_EARLY_GAP_MS ago, or a lost race):
 * the caller asks cg_breaker_admit as before.  Its success is
 * reported as any probe's (cg_breaker_report with probe = 1: it closes the breaker). */
int cg_breaker_early(struct cg_state *st, int p, const struct cg_breaker_cfg *c,
                     int64_t now_ns, int64_t probe_deadline_ns, int64_t *open_until_ns);

/* An early probe that failed, did not count, or went unused: the breaker is open again
 * until `open_until_ns`, the cooldown cg_breaker_early found, as if the probe had not
 * been (no doubled interval: the regular probe keeps its time).  Nothing when the probe
 * was taken over meanwhile. */
void cg_breaker_early_end(struct cg_state *st, int p, int64_t open_until_ns);

/* An answer time as kept: 1 ms to ten minutes. */
static inline uint64_t cg__ok_ms_bound(int64_t ms) {
  return ms < 1 ? 1 : ms > 600000 ? 600000 : (uint64_t) ms;
}

/* The kept answer time at `w` raised to `ms` (bounded) when lower. */
static inline void cg__ok_ms_raise(uint64_t *w, int64_t ms) {
  uint64_t v = cg__ok_ms_bound(ms);
  if (v > __atomic_load_n(w, __ATOMIC_RELAXED))
    __atomic_store_n(w, v, __ATOMIC_RELAXED);
}

/* A successful attempt of pool `p` took `ms`: kept for an early probe's timing (admit.c
 * cg__early_in), machine-wide.  Stored only when it moved by a quarter or more from the
 * kept value (steady answers write nothing: the line stays shared); a relaxed word, a
 * torn read impossible. */
static inline void cg_breaker_note_ok(struct cg_state *st, int p, int64_t ms) {
  uint64_t *w = &st->breakers[p].ok_ms, old = __atomic_load_n(w, __ATOMIC_RELAXED);
  uint64_t v = cg__ok_ms_bound(ms);
  if (v < old - old / 4 || v > old + old / 4)
    __atomic_store_n(w, v, __ATOMIC_RELAXED);
}

/* An attempt of pool `p` ran out of time after `ms`: the kept time is raised to `ms` when
 * lower (a lower bound for the pool's answers). */
static inline void cg_breaker_note_slow(struct cg_state *st, int p, int64_t ms) {
  cg__ok_ms_raise(&st->breakers[p].ok_ms, ms);
}

/* The kept time of pool `p`'s successful attempts, ms (0: none seen). */
static inline int64_t cg_breaker_ok_ms(struct cg_state *st, int p) {
  return (int64_t) __atomic_load_n(&st->breakers[p].ok_ms, __ATOMIC_RELAXED);
}

/* How long a probe holds half-open at most, ms, given its pool's kept answer time `ok_ms`
 * (cg_breaker_ok_ms; 0 none seen): CG_BREAKER_PROBE_MAX_MS, or, once the pool's answers
 * are known, four times what an attempt needs (`ok_ms` and a quarter) plus a second, at
 * least CG_BREAKER_STALL_MIN_MS.  A probe still out after that is stalled (a request that
 * hangs on a provider coming back, or on one bad backend): a held call takes it over as
 * the next probe (cg_breaker_admit), where before every call held with it waited for it
 * until its deadline (8 POSTs, --max-time 6, the outage over and the probe's request hung
 * for 20 s: 0 of 8 done; `curl --retry`: 8 of 8).  A probe that is only slow costs one
 * more request: its taker raises the kept time to the lease that ran out first (breaker.c
 * cg__probe_overran; not when the probe's own deadline, shorter, ended it), and the first
 * probe's success closes the breaker. */
#define CG_BREAKER_STALL_MIN_MS 2000
static inline int64_t cg_breaker_probe_max_ms(int64_t ok_ms) {
  int64_t ms;
  if (ok_ms <= 0 || ok_ms >= CG_BREAKER_PROBE_MAX_MS)
    return CG_BREAKER_PROBE_MAX_MS;
  ms = 4 * (ok_ms + ok_ms / 4) + 1000;
  return ms < CG_BREAKER_STALL_MIN_MS ? CG_BREAKER_STALL_MIN_MS
       : ms > CG_BREAKER_PROBE_MAX_MS ? CG_BREAKER_PROBE_MAX_MS
                                      : ms;
}

/* Count one attempt's result, `failed` as cg_breaker_counts says (-1: not counted).
 * `probe`: the call held the probe (cg_breaker_admit said CG_BREAKER_PROBE): its success
 * closes the breaker, its failure re-opens it, an uncounted result gives the probe back.
 * Returns 1 when this report opened the breaker. */
int cg_breaker_report(struct cg_state *st, int p, const struct cg_breaker_cfg *c, int failed,
                      int probe, int64_t now_ns);

/* As cg_breaker_report, with `floor_ns` (> 0): a failed probe's answer carried a
 * Retry-After of that long (already bounded by max_retry_after): the next probe goes no
 * sooner. */
int cg_breaker_report_hint(struct cg_state *st, int p, const struct cg_breaker_cfg *c,
                           int failed, int probe, int64_t now_ns, int64_t floor_ns);

/* As cg_breaker_report_hint, with `start_ns`: when the attempt was sent.  A success
 * sent before the current run of failures began does not end it (issue 12 item 2: the
 * answers of requests sent before an outage must not delay opening). */
int cg_breaker_report_at(struct cg_state *st, int p, const struct cg_breaker_cfg *c,
                         int failed, int probe, int64_t now_ns, int64_t floor_ns,
                         int64_t start_ns);

/* The interval before the next probe after `fails` failed probes: cooldown_s doubled
 * `fails` times, at most cooldown_max_s, times 1 - j + 2 j u (j = c->jitter, 0.2 by
 * default; u in [0, 1]).  Pure. */
int64_t cg_breaker_interval_ns(const struct cg_breaker_cfg *c, uint32_t fails, double u);

/* The slow start (issue 12 item 3): within ramp_s after a probe closed the breaker, calls
 * are released 1, 1, 2, 4, 8 ... per ramp_s / CG_BREAKER_RAMP_STEPS, each taking a ticket.
 * Returns the monotonic ns at which this call may go, or 0 for now. */
int64_t cg_breaker_ramp_at(struct cg_state *st, int p, const struct cg_breaker_cfg *c,
                           int64_t now_ns);
/* cg_breaker_ramp_at after an inline look at the pool's ramp_start_ns: 0 without a call
 * when no probe has closed the breaker yet, or not before `now_ns` (issue 16: the common
 * pool's request makes no call for it).  The word is read again inside: an instant later,
 * as if this look had not been made. */
static inline int64_t cg_breaker_ramp(struct cg_state *st, int p,
                                      const struct cg_breaker_cfg *c, int64_t now_ns) {
  int64_t start = __atomic_load_n(&st->breakers[p].ramp_start_ns, __ATOMIC_ACQUIRE);
  if (start <= 0 || now_ns < start)
    return 0;
  return cg_breaker_ramp_at(st, p, c, now_ns);
}

/* Parking while the breaker is open (open = wait): read the futex word, ask
 * cg_breaker_admit, and if refused, park on the word for at most `ns` (a probe's end wakes
 * every parked process at once; a timeout lets a waiter take over a dead probe). */
uint32_t cg_breaker_seq(struct cg_state *st, int p);
void cg_breaker_park(struct cg_state *st, int p, uint32_t seq, int64_t ns);
/* A refusal by a shared back end other than the state file (Redis, shared.h), counted in
 * the state file as cg_breaker_admit counts its own: for stat, and for cg_breaker_held to
 * take back. */
void cg_breaker_count_rejected(struct cg_state *st, int p);
/* A refusal of cg_breaker_admit that holds the call instead of failing it: not counted as
 * rejected; `first`: the call's first, counted as held (for stat). */
void cg_breaker_held(struct cg_state *st, int p, int first);
/* Whether a call with `left_ns` to go can still see a probe: not open, or open with the
 * next probe within `left_ns`. */
int cg_breaker_wait_ok(struct cg_state *st, int p, int64_t now_ns, int64_t left_ns);

/* Give the probe back unused (the call stopped before its attempt): the next caller may
 * probe at once. */
void cg_breaker_release(struct cg_state *st, int p);

/* The state of pool `p`'s breaker in the file. */
enum cg_breaker_state cg_breaker_state(struct cg_state *st, int p);

/* What `stat` shows of pool `p`'s breaker. */
struct cg_breaker_view {
  enum cg_breaker_state state;
  int enabled;
  uint32_t ok, failed;       /* counted in the window */
  double failure_rate;       /* configured */
  uint32_t min_requests;     /* configured */
  int64_t window_ns;         /* shared: set by the first process (cg_breaker_configure) */
  int64_t cooldown_ns;       /* configured */
  int64_t next_probe_ns;     /* open: until the cooldown ends; half-open: the probe's
                              * deadline; closed: 0 */
  int probe_pid;             /* half-open: the probe's process */
  uint64_t opened, rejected, probes;
  uint32_t consecutive;      /* failed calls in a row now */
  uint32_t consecutive_max;  /* configured */
  uint32_t probe_fails;      /* failed probes since it opened */
  int64_t cooldown_max_ns;   /* configured */
  int64_t ramp_ns;           /* configured */
  int64_t ramp_left_ns;      /* closed and in the slow start: how long it still runs */
  int open_wait;             /* configured: 1 wait, 0 fail */
  uint64_t held;             /* calls that waited for a probe */
};
void cg_breaker_view(struct cg_state *st, int p, int64_t now_ns, struct cg_breaker_view *v);

/* "closed", "open", "half_open". */
const char *cg_breaker_state_name(enum cg_breaker_state s);

#endif
