/* breaker.c - the shared circuit breaker (see breaker.h). */
#include "breaker.h"

#include "hot.h"
#include "proc.h"
#include "window.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CG_CAS_TRIES 1000 /* bounded: a lost race is retried, never spun forever */
#define CG_PID_MASK 0x3FFFFFu /* 22 bits */

#define cg__load(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define cg__cas(p, expp, v)                                                               \
  __atomic_compare_exchange_n((p), (expp), (v), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)

/* Outcome -> 1 failure, 0 success, -1 not counted.  HTTP statuses are decided apart. */
static const signed char cg__counts[CG_OUT_COUNT] = {
  [CG_OUT_OK] = 0,
  [CG_OUT_HTTP] = 0, /* see cg_breaker_counts */
  [CG_OUT_DNS_ERROR] = 1,
  [CG_OUT_CONNECT_REFUSED] = 1,
  [CG_OUT_CONNECT_TIMEOUT] = 1,
  [CG_OUT_TLS_ERROR] = 1,
  [CG_OUT_FIRST_BYTE_TIMEOUT] = 1,
  [CG_OUT_READ_TIMEOUT] = 1,
  [CG_OUT_RESET_AFTER_SEND] = 1,
  [CG_OUT_PARTIAL_RESPONSE] = 1,
  [CG_OUT_ABORTED_BY_HOST] = -1,
  [CG_OUT_CIRCUIT_OPEN] = -1,
  [CG_OUT_LOCAL_RATE_LIMITED] = -1,
  [CG_OUT_RETRY_BUDGET_EXHAUSTED] = -1,
  [CG_OUT_DEADLINE] = -1,
  [CG_OUT_CURL_ERROR] = -1,
  [CG_OUT_STREAM_ERROR] = 1, /* the provider failed mid-answer (overloaded_error, ...) */
};

int cg_breaker_counts(enum cg_outcome o, long status, int hinted) {
  if ((unsigned) o >= CG_OUT_COUNT)
    return -1;
  if (o == CG_OUT_HTTP && status == 429)
    return hinted ? -1 : 1; /* a hinted 429 is the limiter's: it holds the pool */
  if (o == CG_OUT_HTTP)
    return status >= 500 ? 1 : 0;
  return cg__counts[o];
}

int cg_breaker_tripped(uint32_t ok, uint32_t failed, const struct cg_breaker_cfg *c) {
  uint64_t total = (uint64_t) ok + failed;
  if (total == 0 || total < (uint64_t) (c->min_requests > 0 ? c->min_requests : 1))
    return 0;
  return (double) failed >= c->failure_rate * (double) total;
}

/* ---- the state word ---- */

static uint64_t cg__word(enum cg_breaker_state s, uint32_t pid, int64_t t_ns) {
  uint64_t ms = t_ns > 0 ? (uint64_t) ((t_ns + 999999) / 1000000) : 0;
  return ms << 24 | (uint64_t) (pid & CG_PID_MASK) << 2 | (uint64_t) s;
}

static enum cg_breaker_state cg__state(uint64_t w) {
  return (enum cg_breaker_state) (w & 3u);
}

static uint32_t cg__pid(uint64_t w) {
  return (uint32_t) (w >> 2) & CG_PID_MASK;
}

static int64_t cg__time(uint64_t w) {
  return (int64_t) (w >> 24) * 1000000;
}

static int64_t cg__ns(double s) {
  return (int64_t) (s * 1e9);
}

/* Whether the probe held by `pid` is gone: the process is dead (or a zombie nobody has
 * reaped), or the pid now belongs to a newer process.  The owner word is written just
 * after the winning CAS; until then (or if the winner died in between) only the pid can
 * tell. */
static int cg__probe_gone(struct cg_state_breaker *b, uint32_t pid) {
  uint64_t owner = cg__load(&b->probe_owner);
  if (pid == 0)
    return 1;
  /* The start time only when the owner word is this pid's (else only the pid tells). */
  return cg_proc_gone((pid_t) pid, owner >> 32 == pid ? (uint32_t) owner : 0, 0xFFFFFFFFu);
}

/* A number in [0, 1) for the probe interval's jitter: splitmix64 of the time and the pid
 * (breaker.o is linked into the CLI too, without rng.o; nothing here needs more). */
static double cg__jitter_unit(int64_t now_ns) {
  uint64_t z = (uint64_t) now_ns ^ ((uint64_t) cg_pid() << 40) ^ 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double) (z >> 11) / 9007199254740992.0;
}

int64_t cg_breaker_interval_ns(const struct cg_breaker_cfg *c, uint32_t fails, double u) {
  double s = c->cooldown_s, cap = cg_breaker_cap_s(c);
  uint32_t i;
  for (i = 0; i < fails && s < cap; i++)
    s *= 2;
  if (s > cap)
    s = cap;
  if (u < 0)
    u = 0;
  if (u > 1)
    u = 1;
  return cg__ns(s * (1 - c->jitter + 2 * c->jitter * u));
}

static long cg__futex(uint32_t *addr, int op, uint32_t val, const struct timespec *ts) {
  /* Not FUTEX_PRIVATE: the word lives in a file mapping shared between processes.  On a
   * mapping cut short the kernel answers EFAULT (no SIGBUS): the caller just re-checks. */
  return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

/* A probe ended (or the state moved): every parked caller looks again. */
static void cg__wake(struct cg_state_breaker *b) {
  __atomic_fetch_add(&b->seq, 1, __ATOMIC_ACQ_REL);
  cg__futex(&b->seq, FUTEX_WAKE, INT_MAX, NULL);
}

uint32_t cg_breaker_seq(struct cg_state *st, int p) {
  return cg__load(&st->breakers[p].seq);
}

void cg_breaker_park(struct cg_state *st, int p, uint32_t seq, int64_t ns) {
  struct timespec ts;
  if (ns <= 0)
    return;
  ts.tv_sec = (time_t) (ns / 1000000000);
  ts.tv_nsec = (long) (ns % 1000000000);
  cg__futex(&st->breakers[p].seq, FUTEX_WAIT, seq, &ts);
}

void cg_breaker_count_rejected(struct cg_state *st, int p) {
  __atomic_fetch_add(&st->breakers[p].rejected, 1, __ATOMIC_RELAXED);
}

void cg_breaker_held(struct cg_state *st, int p, int first) {
  /* A held call was not failed fast: cg_breaker_admit's count of it is taken back. */
  __atomic_fetch_sub(&st->breakers[p].rejected, 1, __ATOMIC_RELAXED);
  if (first)
    __atomic_fetch_add(&st->breakers[p].held, 1, __ATOMIC_RELAXED);
}

/* Open from closed: the first probe after cooldown_s (+-20 %).  1 when this call did. */
static int cg__open(struct cg_state_breaker *b, const struct cg_breaker_cfg *c, uint64_t w,
                    int64_t now_ns) {
  if (!cg__cas(&b->word, &w,
               cg__word(CG_BREAKER_OPEN, 0, now_ns + cg_breaker_interval_ns(c, 0, cg__jitter_unit(now_ns)))))
    return 0; /* somebody else opened it */
  __atomic_store_n(&b->probe_fails, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&b->consecutive, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&b->run_start_ns, 0, __ATOMIC_RELEASE);
  __atomic_fetch_add(&b->opened, 1, __ATOMIC_RELAXED);
  return 1;
}

int64_t cg_breaker_ramp_at(struct cg_state *st, int p, const struct cg_breaker_cfg *c,
                           int64_t now_ns) {
  struct cg_state_breaker *b = &st->breakers[p];
  int64_t start = cg__load(&b->ramp_start_ns), ramp = cg__ns(c->ramp_s), step, t;
  uint64_t n;
  int k;

  if (!c->enabled || ramp <= 0 || start <= 0 || now_ns >= start + ramp || now_ns < start)
    return 0;
  /* Ticket n goes at start + step * log2(n): 1, 1, 2, 4, 8 ... per step, as TCP's slow
   * start doubles its window, 64 calls by the end of the ramp, then no more holding. */
  n = __atomic_add_fetch(&b->ramp_tickets, 1, __ATOMIC_ACQ_REL);
  step = ramp / CG_BREAKER_RAMP_STEPS;
  for (k = 0; k < 63 && (1ull << (k + 1)) <= n; k++)
    ;
  t = start + step * k;
  if (k < 63 && n > (1ull << k)) /* between two powers of two: spread over the step */
    t += (int64_t) ((double) step * (double) (n - (1ull << k)) / (double) (1ull << k));
  if (t > start + ramp)
    t = start + ramp;
  return t > now_ns ? t : 0;
}

/* The pool's window (ns): the shared one, or this process's until one is stored. */
static int64_t cg__window(struct cg_state_breaker *b, const struct cg_breaker_cfg *c) {
  int64_t w = cg__load(&b->window_ns);
  return cg_window_ns_ok(w, CG_BREAKER_WINDOW_MAX_S) ? w : cg__ns(c->window_s);
}

int64_t cg_breaker_configure(struct cg_state *st, int p, const struct cg_breaker_cfg *c) {
  struct cg_state_breaker *b = &st->breakers[p];
  int64_t win = cg__ns(c->window_s), cool = cg__ns(c->cooldown_s), shared = 0;
  __atomic_store_n(&b->enabled, (uint32_t) (c->enabled != 0), __ATOMIC_RELAXED);
  __atomic_store_n(&b->min_requests, (uint32_t) c->min_requests, __ATOMIC_RELAXED);
  __atomic_store(&b->failure_rate, &c->failure_rate, __ATOMIC_RELAXED);
  __atomic_store_n(&b->cooldown_ns, cool, __ATOMIC_RELAXED);
  __atomic_store_n(&b->consecutive_max, (uint32_t) (c->consecutive > 0 ? c->consecutive : 0),
                   __ATOMIC_RELAXED);
  __atomic_store_n(&b->cooldown_max_ns, cg__ns(cg_breaker_cap_s(c)), __ATOMIC_RELAXED);
  __atomic_store_n(&b->ramp_ns, cg__ns(c->ramp_s), __ATOMIC_RELAXED);
  __atomic_store_n(&b->open_wait, (uint32_t) (c->open_wait != 0), __ATOMIC_RELAXED);
  /* The first process to configure the pool sets its window for everybody.  Set already
   * (every call after the pool's first): the exchange would fail and return it, so it is
   * read without the locked write. */
  shared = cg__load(&b->window_ns);
  if (shared != 0 && cg_window_ns_ok(shared, CG_BREAKER_WINDOW_MAX_S))
    return shared;
  if (cg__cas(&b->window_ns, &shared, win)) /* unset, or garbage (window.h): ours */
    return win;
  return cg_window_ns_ok(shared, CG_BREAKER_WINDOW_MAX_S) ? shared : win;
}

/* A live probe ran past its lease (cg_breaker_probe_max_ms) without an answer: the pool's
 * answers take at least that long now, and the kept answer time is raised to it, so that
 * the probe that takes over holds half-open longer (2 s, then 11 s, then 30 s).  Without
 * it (a helper's find), a slow but healthy probe (a long completion, 8 s, where the kept
 * time said 50 ms) was taken over every 2 s: 6 requests, up to 4 at once, and the breaker
 * closed at 18.9 s instead of 9 s.  A stalled probe's taker that answers fast brings the
 * kept time back down (cg_breaker_note_ok). */
static void cg__probe_overran(struct cg_state_breaker *b) {
  /* Only a lease that ran out says so: a probe that reached its own call's deadline
   * (shorter than the lease) is ending with a timeout and says nothing of the answer
   * time beyond that deadline (it had raised 20 ms to 2 s, then 11 s, with --max-time 1.5
   * calls, and the early probes of every call shorter than that were gone). */
  uint32_t lease = __atomic_load_n(&b->probe_lease_ms, __ATOMIC_ACQUIRE);
  if (lease)
    cg__ok_ms_raise(&b->ok_ms, (int64_t) lease);
}

/* Half-open from word `w`, held by this process (`me`) until `deadline_ns` (capped at
 * now + cg_breaker_probe_max_ms: a stalled probe is taken over): 1 when this call took
 * the probe. */
static int cg__take_probe(struct cg_state_breaker *b, uint64_t *w, uint32_t me,
                          int64_t now_ns, int64_t deadline_ns) {
  int64_t ok = (int64_t) cg__load(&b->ok_ms);
  int64_t max_ns = cg_breaker_probe_max_ms(ok) * 1000000;
  uint32_t lease = 0; /* the lease, when the pool's answer time set it (not the 30 s) */
  if (deadline_ns > now_ns + max_ns) {
    deadline_ns = now_ns + max_ns;
    if (ok > 0)
      lease = (uint32_t) (max_ns / 1000000);
  }
  if (!cg__cas(&b->word, w, cg__word(CG_BREAKER_HALF_OPEN, me, deadline_ns)))
    return 0;
  __atomic_store_n(&b->probe_lease_ms, lease, __ATOMIC_RELEASE);
  __atomic_store_n(&b->probe_owner, (uint64_t) me << 32 | (uint32_t) cg_proc_self_start(),
                   __ATOMIC_RELEASE);
  __atomic_fetch_add(&b->probes, 1, __ATOMIC_RELAXED);
  return 1;
}

/* cg_breaker_admit once the breaker was found not closed (word `w`): open and cooling
 * down, half-open with a probe under way, or ready for a probe.  Out of line: a breaker
 * that is not closed is not the steady state (hot.h). */
static __attribute__((noinline, cold)) enum cg_breaker_verdict
cg__admit_not_closed(struct cg_state_breaker *b, uint64_t w, int64_t now_ns,
                     int64_t probe_deadline_ns, int64_t *next_probe_ns) {
  uint32_t me = (uint32_t) cg_pid() & CG_PID_MASK;
  int tries;

  for (tries = 0; tries < CG_CAS_TRIES; tries++) {
    enum cg_breaker_state s;
    int64_t t;

    if (tries > 0)
      w = cg__load(&b->word);
    s = cg__state(w);
    t = cg__time(w);
    if (s == CG_BREAKER_CLOSED)
      return CG_BREAKER_ALLOW;
    /* Open and cooling down, or a live probe under way: fail fast. */
    if (now_ns < t && (s == CG_BREAKER_OPEN || !cg__probe_gone(b, cg__pid(w)))) {
      *next_probe_ns = t;
      __atomic_fetch_add(&b->rejected, 1, __ATOMIC_RELAXED);
      return CG_BREAKER_REJECT;
    }
    /* The cooldown is over, or the probe's holder died or overran: be the probe. */
    if (s == CG_BREAKER_HALF_OPEN && now_ns >= t && !cg__probe_gone(b, cg__pid(w)))
      cg__probe_overran(b);
    if (cg__take_probe(b, &w, me, now_ns, probe_deadline_ns))
      return CG_BREAKER_PROBE;
  }
  /* Lost every race: somebody else moved the state; failing fast is the safe side. */
  *next_probe_ns = now_ns;
  return CG_BREAKER_REJECT;
}

enum cg_breaker_verdict cg_breaker_admit(struct cg_state *st, int p,
                                         const struct cg_breaker_cfg *c, int64_t now_ns,
                                         int64_t probe_deadline_ns, int64_t *next_probe_ns) {
  struct cg_state_breaker *b = &st->breakers[p];
  uint64_t w;

  *next_probe_ns = 0;
  if (!c->enabled)
    return CG_BREAKER_ALLOW;
  w = cg__load(&b->word);
  if (cg__state(w) == CG_BREAKER_CLOSED)
    return CG_BREAKER_ALLOW;
  return cg__admit_not_closed(b, w, now_ns, probe_deadline_ns, next_probe_ns);
}

int cg_breaker_early(struct cg_state *st, int p, const struct cg_breaker_cfg *c,
                     int64_t now_ns, int64_t probe_deadline_ns, int64_t *open_until_ns) {
  struct cg_state_breaker *b = &st->breakers[p];
  uint32_t me = (uint32_t) cg_pid() & CG_PID_MASK;
  uint64_t w = cg__load(&b->word);
  int64_t t = cg__time(w);

  if (!c->enabled || cg__state(w) != CG_BREAKER_OPEN || now_ns >= t ||
      now_ns < cg__load(&b->early_after_ns))
    return 0;
  /* The lease outlives the call's deadline by a second: the attempt ends at that
   * deadline and reports a moment later; a waiter that took the probe over meanwhile was
   * a regular probe sent with next to no time left, and its failure doubled the
   * interval.  A holder that dies is still taken over at once (cg__probe_gone). */
  if (!cg__take_probe(b, &w, me, now_ns, probe_deadline_ns + 1000000000ll))
    return 0;
  __atomic_store_n(&b->early_after_ns, now_ns + (int64_t) CG_BREAKER_EARLY_GAP_MS * 1000000,
                   __ATOMIC_RELEASE);
  *open_until_ns = t;
  return 1;
}

/* A probe's success that comes after another call took the probe over (its lease ran
 * out, cg_breaker_probe_max_ms): the provider answers, so the breaker closes, whoever
 * holds the probe now (its own report then counts as any attempt's).  Before, the
 * success only counted in the window and the breaker stayed half-open until the taker
 * answered.  1 when it closed the breaker. */
static int cg__probe_close_late(struct cg_state_breaker *b) {
  uint64_t w = cg__load(&b->word);
  if (cg__state(w) != CG_BREAKER_HALF_OPEN)
    return 0;
  return cg__cas(&b->word, &w, cg__word(CG_BREAKER_CLOSED, 0, 0));
}

/* Move half-open held by this process to `next`.  1 when it did. */
static int cg__probe_end(struct cg_state_breaker *b, uint64_t next) {
  uint64_t w = cg__load(&b->word);
  if (cg__state(w) != CG_BREAKER_HALF_OPEN ||
      cg__pid(w) != ((uint32_t) cg_pid() & CG_PID_MASK))
    return 0;
  return cg__cas(&b->word, &w, next);
}

void cg_breaker_release(struct cg_state *st, int p) {
  /* Open with a cooldown that ends now: the next caller becomes the probe. */
  if (cg__probe_end(&st->breakers[p], cg__word(CG_BREAKER_OPEN, 0, cg_state_now())))
    cg__wake(&st->breakers[p]);
}

void cg_breaker_early_end(struct cg_state *st, int p, int64_t open_until_ns) {
  if (cg__probe_end(&st->breakers[p], cg__word(CG_BREAKER_OPEN, 0, open_until_ns)))
    cg__wake(&st->breakers[p]);
}

int cg_breaker_report(struct cg_state *st, int p, const struct cg_breaker_cfg *c, int failed,
                      int probe, int64_t now_ns) {
  return cg_breaker_report_hint(st, p, c, failed, probe, now_ns, 0);
}

int cg_breaker_report_hint(struct cg_state *st, int p, const struct cg_breaker_cfg *c,
                           int failed, int probe, int64_t now_ns, int64_t floor_ns) {
  return cg_breaker_report_at(st, p, c, failed, probe, now_ns, floor_ns, now_ns);
}

/* cg_breaker_report_at for an attempt that does not count (`failed` < 0) or a probe's:
 * a probe's result closes or re-opens the breaker.  -1: a probe taken over meanwhile,
 * counted as any attempt by the caller; else what cg_breaker_report_at returns.  Out of
 * line: a probe runs only while the breaker is half-open (hot.h). */
static __attribute__((noinline, cold)) int
cg__report_probe(struct cg_state *st, int p, const struct cg_breaker_cfg *c, int failed,
                 int probe, int64_t now_ns, int64_t floor_ns) {
  struct cg_state_breaker *b = &st->breakers[p];
  uint32_t fails;
  int64_t next;

  if (failed < 0) {
    if (probe)
      cg_breaker_release(st, p);
    return 0;
  }
  fails = cg__load(&b->probe_fails);
  if (!failed) {
    /* The slow start begins before the state says closed: nobody sees closed without
     * it (a lost race below only slows a breaker that closed anyway). */
    __atomic_store_n(&b->ramp_tickets, 1, __ATOMIC_RELEASE); /* the probe was the 1st */
    __atomic_store_n(&b->ramp_start_ns, now_ns, __ATOMIC_RELEASE);
    if (cg__probe_end(b, cg__word(CG_BREAKER_CLOSED, 0, 0)) || cg__probe_close_late(b)) {
      cg_window_clear(b->buckets); /* closed again: the outage's failures are history */
      __atomic_store_n(&b->consecutive, 0, __ATOMIC_RELEASE);
      __atomic_store_n(&b->run_start_ns, 0, __ATOMIC_RELEASE);
      __atomic_store_n(&b->probe_fails, 0, __ATOMIC_RELEASE);
      cg__wake(b);
      return 0;
    }
  } else {
    /* Failed again: the interval doubles (up to cooldown_max_s); a Retry-After on the
     * answer is a floor. */
    next = cg_breaker_interval_ns(c, fails + 1, cg__jitter_unit(now_ns));
    if (floor_ns > next)
      next = floor_ns;
    if (cg__probe_end(b, cg__word(CG_BREAKER_OPEN, 0, now_ns + next))) {
      __atomic_store_n(&b->probe_fails, fails + 1, __ATOMIC_RELEASE);
      __atomic_fetch_add(&b->opened, 1, __ATOMIC_RELAXED);
      cg__wake(b);
      return 1;
    }
  }
  /* Somebody took the probe over meanwhile: count it as any attempt. */
  return -1;
}

/* cg_breaker_report_at for a failure, once counted in the window: the run of failures
 * and the failure rate may open the breaker.  Out of line: failures are not the steady
 * state (hot.h). */
static __attribute__((noinline, cold)) int
cg__report_failure(struct cg_state_breaker *b, const struct cg_breaker_cfg *c,
                   int64_t width, int64_t now_ns) {
  uint32_t run = __atomic_add_fetch(&b->consecutive, 1, __ATOMIC_ACQ_REL), ok_n, fail_n;
  uint64_t w;
  if (run == 1)
    __atomic_store_n(&b->run_start_ns, now_ns, __ATOMIC_RELEASE);
  w = cg__load(&b->word);
  if (cg__state(w) != CG_BREAKER_CLOSED)
    return 0;
  if (c->consecutive > 0 && run >= (uint32_t) c->consecutive)
    return cg__open(b, c, w, now_ns);
  cg_window_sum(b->buckets, now_ns, width, &ok_n, &fail_n);
  if (!cg_breaker_tripped(ok_n, fail_n, c))
    return 0;
  return cg__open(b, c, w, now_ns);
}

int cg_breaker_report_at(struct cg_state *st, int p, const struct cg_breaker_cfg *c,
                         int failed, int probe, int64_t now_ns, int64_t floor_ns,
                         int64_t start_ns) {
  struct cg_state_breaker *b = &st->breakers[p];
  int64_t width;

  if (!c->enabled)
    return 0;
  if (CG_RARE(failed < 0 || probe)) {
    int r = cg__report_probe(st, p, c, failed, probe, now_ns, floor_ns);
    if (r >= 0)
      return r;
  }
  width = cg_window_width(cg__window(b, c));
  cg_window_add(b->buckets, now_ns, width, failed ? 0 : 1, failed ? 1 : 0);
  if (CG_RARE(failed))
    return cg__report_failure(b, c, width, now_ns);
  {
    /* A success ends the run of failures only if it was sent after the run began: the
     * answers of requests sent before an outage keep arriving for a while (an LLM call
     * takes seconds) and say nothing of the provider now. */
    int64_t run_start = cg__load(&b->run_start_ns);
    if (cg__load(&b->consecutive) && (run_start <= 0 || start_ns >= run_start)) {
      __atomic_store_n(&b->consecutive, 0, __ATOMIC_RELEASE);
      __atomic_store_n(&b->run_start_ns, 0, __ATOMIC_RELEASE);
    }
  }
  return 0;
}

int cg_breaker_wait_ok(struct cg_state *st, int p, int64_t now_ns, int64_t left_ns) {
  uint64_t w = cg__load(&st->breakers[p].word);
  if (cg__state(w) != CG_BREAKER_OPEN)
    return 1; /* closed, or a probe out whose answer may come any moment */
  return cg__time(w) - now_ns <= left_ns;
}

enum cg_breaker_state cg_breaker_state(struct cg_state *st, int p) {
  return cg__state(cg__load(&st->breakers[p].word));
}

void cg_breaker_view(struct cg_state *st, int p, int64_t now_ns, struct cg_breaker_view *v) {
  struct cg_state_breaker *b = &st->breakers[p];
  uint64_t w = cg__load(&b->word);
  int64_t win = cg__load(&b->window_ns);

  v->state = cg__state(w);
  v->enabled = (int) cg__load(&b->enabled);
  __atomic_load(&b->failure_rate, &v->failure_rate, __ATOMIC_RELAXED);
  v->min_requests = cg__load(&b->min_requests);
  v->window_ns = win;
  v->cooldown_ns = cg__load(&b->cooldown_ns);
  v->ok = v->failed = 0;
  if (win > 0)
    cg_window_sum(b->buckets, now_ns, cg_window_width(win), &v->ok, &v->failed);
  v->next_probe_ns = v->state == CG_BREAKER_CLOSED ? 0 : cg__time(w) - now_ns;
  if (v->next_probe_ns < 0)
    v->next_probe_ns = 0;
  v->probe_pid = v->state == CG_BREAKER_HALF_OPEN ? (int) cg__pid(w) : 0;
  v->opened = cg__load(&b->opened);
  v->rejected = cg__load(&b->rejected);
  v->probes = cg__load(&b->probes);
  v->consecutive = cg__load(&b->consecutive);
  v->consecutive_max = cg__load(&b->consecutive_max);
  v->probe_fails = cg__load(&b->probe_fails);
  v->cooldown_max_ns = cg__load(&b->cooldown_max_ns);
  v->ramp_ns = cg__load(&b->ramp_ns);
  v->open_wait = (int) cg__load(&b->open_wait);
  v->held = cg__load(&b->held);
  {
    int64_t rs = cg__load(&b->ramp_start_ns);
    v->ramp_left_ns = v->state == CG_BREAKER_CLOSED && rs > 0 && now_ns >= rs &&
                              now_ns < rs + v->ramp_ns
                          ? rs + v->ramp_ns - now_ns
                          : 0;
  }
}

const char *cg_breaker_state_name(enum cg_breaker_state s) {
  switch (s) {
  case CG_BREAKER_OPEN:
    return "open";
  case CG_BREAKER_HALF_OPEN:
    return "half_open";
  case CG_BREAKER_CLOSED:
  default:
    return "closed";
  }
}
