/* state.h - the shared state file: one limiter for every process on the machine.
 *
 * A small file (default /dev/shm/curlguard-$UID.state) mapped MAP_SHARED by every guarded
 * process of one user.  All fields below the header are updated with lock-free atomics
 * (compare-and-swap on 64-bit words): no lock is ever held across a network call, and a
 * process killed with SIGKILL at any instant leaves the file usable.  A lock (flock(2)) is
 * taken only while the file is created or re-initialised.
 *
 * Times are CLOCK_MONOTONIC nanoseconds, which all processes of one boot share; a file
 * from another boot (/proc/sys/kernel/random/boot_id) or of another layout version is
 * re-initialised, never trusted.
 *
 * Layout (version CG_STATE_VERSION), every offset fixed:
 *   struct cg_state_header                       at 0
 *   struct cg_state_pool   pools[CG_STATE_POOLS] at CG_STATE_POOLS_OFF
 *   struct cg_state_slot   slots[CG_STATE_SLOTS] at CG_STATE_SLOTS_OFF
 *   struct cg_state_breaker breakers[CG_STATE_POOLS] at CG_STATE_BREAKERS_OFF (pool i's)
 *   struct cg_state_budget budgets[CG_STATE_POOLS] at CG_STATE_BUDGETS_OFF (pool i's)
 *   struct cg_state_tally tallies[CG_STATE_POOLS] at CG_STATE_TALLIES_OFF (pool i's)
 * Version 2 added the breakers and budgets: 63488 bytes more, 94464 bytes in all.
 * Version 3 grew each breaker by 64 bytes (issue 12: the futex word calls held while it
 * is open park on, consecutive failures, failed probes, the slow start): 98560 bytes.
 * Version 4 (same size) uses the pools' reserved words for the learned rate (issue 12
 * item 5); a version 3 file is re-initialised.  Still version 4 (unreleased), issue 17
 * appended the tallies (per pool: calls, attempts by outcome, tokens, cost, waits, for
 * `stat` and Prometheus, tally.h): 480 bytes each, 30720 bytes more, 129280 bytes in all;
 * a version-4 file of the old size fails the header's size check and is re-initialised.
 * Still version 4: 256 pools instead of 64 (pools are per host and port since issue 12,
 * and curl's own test suite alone names more than 64: 1760 bytes a pool), 467200 bytes.
 * Version 5: each pool says when it was last used (`used_ms`), so that a full table can
 * give a pool idle for CG_POOL_IDLE_MS to a new name (limiter.c): 1768 bytes a pool,
 * 469248 bytes in all.
 * Version 6: each pool keeps the 429 holds of its limit keys (`keyed`, limiter.h "keyed
 * holds": a provider's limit per API key or model behind one host and port holds only
 * the calls of that key and model): 1912 bytes a pool, 506112 bytes in all.
 * Version 7: each pool keeps its waiters for an in-flight slot in turn (`turns`,
 * limiter.h "turns": the first to wait is the first served, easy and multi API alike):
 * 2176 bytes a pool, 573696 bytes in all.
 */
#ifndef CG_STATE_H
#define CG_STATE_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CG_STATE_MAGIC 0x3144524747434743ull /* "CGCGGRD1" little-endian */
#define CG_STATE_VERSION 7u
#define CG_STATE_POOLS 256  /* pools per file: a host per port, for a test suite of many servers */
#define CG_STATE_SLOTS 1024 /* in-flight slots per file, shared by all pools */
#define CG_STATE_BUCKETS 20 /* time buckets of a sliding window (window.h) */
#define CG_STATE_RETRY_SLOTS 64 /* retries outstanding at once per pool, at most */
#define CG_STATE_OUTCOMES 40 /* outcome counters per pool (tally.h has the names) */
#define CG_STATE_KEYED_HOLDS 16 /* limit keys a pool holds at once (limiter.h keyed holds) */
#define CG_STATE_TURNS 32 /* waiters for an in-flight slot a pool keeps in turn (limiter.h turns) */

struct cg_state_header {
  uint64_t magic;            /* CG_STATE_MAGIC, written last when the file is ready */
  uint32_t version;          /* CG_STATE_VERSION */
  uint32_t size;             /* total bytes of the file */
  uint32_t npools, nslots;   /* CG_STATE_POOLS, CG_STATE_SLOTS */
  int64_t created_wall_ms;   /* when it was (re-)initialised, for `stat` */
  char boot_id[40];          /* /proc/sys/kernel/random/boot_id of that boot */
  uint64_t reserved[8];
};

/* One pool: requests, tokens and in-flight calls shared by every process. */
struct cg_state_pool {
  uint64_t name_hash;        /* 0 = free; claimed by compare-and-swap; top 16 bits all set:
                              * being given to another name (limiter.c cg__pool_reuse) */
  char name[48];             /* pool name, written before name_ready is set */
  uint32_t name_ready;       /* 1 when `name` is complete */
  uint32_t max_inflight;     /* last configured in-flight limit, 0 = none (for stat) */
  double rpm, tpm;           /* last configured limits, 0 = none (for stat) */
  double burst_requests, burst_tokens; /* last configured bursts (for stat) */
  /* When a call last found the pool, began a later attempt in it or woke from a wait for
   * its breaker (CLOCK_MONOTONIC_COARSE ms, stamped at most once a
   * second; limiter.c): a pool unused for CG_POOL_IDLE_MS may be given to another name
   * when the table is full.  Beside the limits above, whose line every call writes. */
  int64_t used_ms;
  int64_t tat_requests;      /* GCRA theoretical arrival time of the next request (ns) */
  int64_t tat_tokens;        /* GCRA theoretical arrival time for tokens (ns) */
  int64_t hold_until;        /* no request before this (a 429's hint), ns */
  int64_t pace_until;        /* provider headers asked for spacing until this, ns */
  int64_t pace_interval;     /* that spacing: ns between requests */
  uint32_t inflight;         /* calls in flight now (futex word) */
  uint32_t waiters;          /* calls waiting for an in-flight slot in turn: the words of
                              * `turns` taken (version 7; those that found none are not
                              * counted: nothing would count a killed one off) */
  uint64_t admitted;         /* calls let through */
  uint64_t waited;           /* calls that had to wait */
  uint64_t rejected;         /* calls failed fast (wait past their deadline) */
  uint64_t seen_429;         /* 429 answers seen */
  /* The learned request rate (limiter.h "learning"), version 4, in the space that was
   * reserved: same size. */
  double learn_rate;         /* requests/s the pool may send at; 0 = not started */
  double learn_wmax;         /* CUBIC's W_max: the rate at the last cut; 0 = never cut */
  int64_t learn_last;        /* when the last cut happened (ns); 0 = never */
  uint64_t learn_clock;      /* measurement: half-second epoch << 32 | answers in it */
  double learn_measured;     /* answers/s, smoothed (0.8 new, 0.2 old) */
  int64_t learn_tat;         /* GCRA time of the next request at the learned rate (ns) */
  /* 429 holds of one limit key each (version 6; limiter.h "keyed holds"): the end in ms
   * << 24 | the key's 24 bits (never 0), one compare-and-swap word each; 0 or an end
   * passed = free.  keyed_until: the latest end of them all (ns), so that a call of a
   * pool without one reads one word. */
  int64_t keyed_until;
  uint64_t keyed[CG_STATE_KEYED_HOLDS];
  /* The limit key of the pool's last 429 and when (ms << 24 | key, as a keyed word; the
   * key's bits all set: 429s of several keys), limiter.h cg_limiter_learn_key. */
  uint64_t throttle_key;
  /* Waiters for an in-flight slot in turn (version 7; limiter.h "turns"): the next
   * waiter's ticket (never 0), and one compare-and-swap word per waiter, its ticket << 32
   * | when it last looked (coarse ms, low 32 bits); 0 = free. */
  uint32_t turn_next;
  uint32_t turn_pad;
  uint64_t turns[CG_STATE_TURNS];
};

/* One in-flight call: who holds it, so a dead holder's slot can be taken back. */
struct cg_state_slot {
  uint64_t owner;            /* pid << 32 | pool index + 1; 0 = free */
  uint64_t owner_start;      /* the owner's start time (/proc/PID/stat field 22) */
};

/* The circuit breaker of one pool (breaker.h): 320 bytes. */
struct cg_state_breaker {
  uint64_t word;             /* state | probe pid | time, one CAS word (breaker.h) */
  uint64_t probe_owner;      /* pid << 32 | low 32 bits of its start time, of the probe */
  uint64_t buckets[CG_STATE_BUCKETS]; /* window: epoch | successes | failures (window.h) */
  uint32_t enabled;          /* last configured (for stat) */
  uint32_t min_requests;     /* last configured (for stat) */
  double failure_rate;       /* last configured (for stat) */
  int64_t window_ns;         /* last configured (for stat) */
  int64_t cooldown_ns;       /* last configured (for stat) */
  uint64_t opened;           /* times it opened (closed or half-open -> open) */
  uint64_t rejected;         /* calls failed fast while open */
  uint64_t probes;           /* half-open probes let through */
  uint32_t seq;              /* futex word: bumped (and woken) at every probe's end */
  uint32_t consecutive;      /* failed calls in a row (closed), reset by a success */
  uint32_t probe_fails;      /* failed probes since it opened: the interval doubles */
  uint32_t consecutive_max;  /* last configured (for stat) */
  int64_t ramp_start_ns;     /* when a probe last closed it: the slow start runs from here */
  uint64_t ramp_tickets;     /* calls admitted since ramp_start_ns (the slow start) */
  int64_t ramp_ns;           /* last configured (for stat) */
  int64_t cooldown_max_ns;   /* last configured (for stat) */
  uint64_t held;             /* calls that waited for a probe's result (open = wait) */
  uint32_t open_wait;        /* last configured (for stat) */
  uint32_t probe_lease_ms;   /* the running probe's lease, ms, when the lease and not its
                              * call's deadline set its end (breaker.c cg__take_probe); 0
                              * otherwise.  Was padding: files of earlier versions read 0 */
  int64_t run_start_ns;      /* when the current run of failures began (0: none) */
  /* How long a successful attempt in the pool took, ms (0: none seen; breaker.h
   * cg_breaker_note_ok): an early probe leaves its attempt about that much.  In the space
   * that was reserved: files of earlier versions read 0. */
  uint64_t ok_ms;
  int64_t early_after_ns;    /* no early probe before this (breaker.h CG_BREAKER_EARLY_GAP_MS);
                              * also in the space that was reserved */
};

/* The retry budget of one pool (budget.h): 736 bytes. */
struct cg_state_budget {
  uint64_t buckets[CG_STATE_BUCKETS]; /* window: epoch | first attempts | retries */
  uint64_t retry_owner[CG_STATE_RETRY_SLOTS]; /* pid << 32 | start time low bits; 0 free */
  uint32_t enabled;          /* last configured (for stat) */
  uint32_t max_concurrent;   /* last configured (for stat) */
  double ratio, min_per_s;   /* last configured (for stat) */
  int64_t window_ns;         /* last configured (for stat) */
  uint64_t refused;          /* retries refused (window or concurrency) */
  uint64_t rescued;          /* retries given back to the window: they succeeded (v4) */
  uint64_t reserved[2];
};

/* What the guard recorded in one pool (tally.h), one usage record at a time: 480 bytes.
 * Every word only grows (relaxed fetch-and-add), so a reader sees each counter exact
 * and the set a few records apart at most, until the pool is given to another name
 * (limiter.c cg__pool_reuse), which clears them all. */
struct cg_state_tally {
  uint64_t calls;            /* final records: calls that ended */
  uint64_t attempts;         /* records: attempts, including those refused locally */
  uint64_t retries;          /* records of attempt 2 or later (as `curlguard report`) */
  uint64_t host_retry_calls; /* calls that repeated an identical failed call (repeat_of) */
  uint64_t possibly_billed;  /* records with possibly_billed */
  uint64_t prompt_tokens;    /* input tokens the provider reported */
  uint64_t completion_tokens; /* output tokens the provider reported */
  uint64_t cached_tokens;    /* cached input tokens the provider reported */
  uint64_t cost_nusd;        /* estimated cost, nano-US-dollars (1e-9 USD) */
  uint64_t queue_ms;         /* waited for the limiter (queue_ms minus the breaker's part) */
  uint64_t breaker_wait_ms;  /* held by an open breaker (open = wait) */
  uint64_t calls_ok;         /* final records with outcome ok */
  uint64_t outcomes[CG_STATE_OUTCOMES]; /* records by outcome (tally.h cg_tally_outcome) */
  uint64_t reserved[8];
};

#define CG_STATE_POOLS_OFF 256
#define CG_STATE_SLOTS_OFF (CG_STATE_POOLS_OFF + CG_STATE_POOLS * sizeof(struct cg_state_pool))
#define CG_STATE_BREAKERS_OFF                                                             \
  (CG_STATE_SLOTS_OFF + CG_STATE_SLOTS * sizeof(struct cg_state_slot))
#define CG_STATE_BUDGETS_OFF                                                              \
  (CG_STATE_BREAKERS_OFF + CG_STATE_POOLS * sizeof(struct cg_state_breaker))
#define CG_STATE_TALLIES_OFF                                                              \
  (CG_STATE_BUDGETS_OFF + CG_STATE_POOLS * sizeof(struct cg_state_budget))
#define CG_STATE_SIZE (CG_STATE_TALLIES_OFF + CG_STATE_POOLS * sizeof(struct cg_state_tally))

/* A mapped state file.  `fd`: a descriptor of it, only ever given to fstat(2), read and
 * written atomically: a host may close the number or put a file of its own on it (a
 * daemon's close loop, dup2), and cg_state_get then opens the file again at its path.
 * `dev` and `ino`: the mapped file's identity, which tells whether `fd`, or the path,
 * still names it.  `path`: a copy of the path it was opened at (cg_state_open; NULL
 * for cg_state_open_readonly, or when the copy could not be made), where cg_state_check
 * opens its own descriptor to lock. */
struct cg_state {
  struct cg_state_header *hdr;
  struct cg_state_pool *pools;
  struct cg_state_slot *slots;
  struct cg_state_breaker *breakers;
  struct cg_state_budget *budgets;
  struct cg_state_tally *tallies;
  size_t size;
  int fd;
  dev_t dev;
  ino_t ino;
  char *path;
};

/* Open (creating or re-initialising when needed) and map the state file at `path`.
 * Refuses, with a one-line reason in `why` (`whylen` bytes), a file that is not a
 * regular file, is a symlink, belongs to another user, or cannot be sized or mapped.
 * Returns 0 on success, -1 otherwise (the caller then runs without the limiter). */
int cg_state_open(const char *path, struct cg_state *st, char *why, size_t whylen);

/* Map the file at `path` read-only, for `curlguard stat`: nothing is created, grown or
 * re-initialised.  Refuses (-1, `why`) what cg_state_open refuses, and a file shorter
 * than the layout or not a ready file of this layout and boot.  Only reads through the
 * mapping are allowed.  Returns 0 on success. */
int cg_state_open_readonly(const char *path, struct cg_state *st, char *why, size_t whylen);

/* Whether the body of a mapped file whose header is valid holds only values its writers
 * can produce (state.h's layout): every claimed pool's name is NUL-terminated and
 * published, slot owners point at a pool that exists, and counters and flags stay within
 * their bounds (a pool's inflight and waiters below 2^24, its breaker's state one of breaker.h's
 * three, a slot owner's pid below 2^22, PID_MAX_LIMIT, and its pool index + 1 within
 * 1..CG_STATE_POOLS).  0: garbage behind a good header, re-initialised by
 * cg_state_open.  To be called inside a guarded region (it reads the mapping). */
int cg_state_body_ok(const struct cg_state *st);

/* cg_state_body_ok without the names: only words written atomically are read, so it may
 * run while another thread or process writes a pool's name (limiter.c, before a pool is
 * given away). */
int cg_state_words_ok(const struct cg_state *st);

/* Re-initialise the file: every pool and slot is cleared.  Returns 0 or -1 with `why`. */
int cg_state_reset(const char *path, char *why, size_t whylen);

/* Unmap and close. */
void cg_state_close(struct cg_state *st);

/* The process-wide mapping of the configured file, opened on first use; NULL when it
 * cannot be used (one "curlguard:" line then said why).  A file found cut short, or not
 * a valid file of this layout and boot any more (emptied, overwritten, see cg_state_body_ok),
 * is repaired first: grown back to the layout's size and re-initialised under its lock,
 * as a new process would (one "curlguard:" line says so, once per process).  After the
 * first call, a call on a usable file takes no lock and makes no system call (the check
 * of cg_state_intact). */
struct cg_state *cg_state_get(const char *path);

/* cg_state_get with the caller's cg_state_now() `*nowp` (0: none), made with nothing that
 * takes time since, for the usual call's check (issue 16: a clock read less a call).  On
 * return `*nowp` is 0 when the call took the lock (the first opening, a repair: time may
 * have passed), else as it was. */
struct cg_state *cg_state_get_at(const char *path, int64_t *nowp);

/* A pool could not be found or claimed in `st` (limiter.h cg_limiter_pool: -1): check
 * the body under the file's lock and re-initialise it when it is garbage behind a valid
 * header (cg_state_body_ok), with one "curlguard:" line.  Returns 1 when it did (the
 * caller looks again), 0 otherwise.  Must not be called inside a guarded region. */
int cg_state_check(struct cg_state *st);

/* 1 while the mapped file still backs the whole mapping; 0 once it was truncated under
 * us, when touching the mapping would raise SIGBUS.  A call checks it again after its
 * transfer, before it writes what it learned.  No system call: a guarded read of the
 * mapping's first and last words (a page past the file's end faults, and the SIGBUS
 * guard answers 0), plus one fstat(2) of the length at most once a second per process
 * (a cut within the last page faults nowhere).  The SIGBUS guard of every access stays
 * what keeps a cut between two checks harmless. */
int cg_state_intact(const struct cg_state *st);

/* cg_state_intact with the caller's cg_state_now() `now` (0: none, read when the fstat's
 * time is looked at), made with nothing that takes time since (issue 16). */
int cg_state_intact_at(const struct cg_state *st, int64_t now);

/* ---- SIGBUS: a file cut short under the mapping ----
 *
 * Any process of the user may truncate the file at any instant (`truncate -s 0`, `: >`),
 * and the next access past the new end raises SIGBUS: no check before an access can
 * close that window.  So every access to a mapping runs inside a guarded region: a
 * SIGBUS handler, installed once when the first mapping is made (the previous action is
 * saved), takes a fault only when its address lies inside the mapping of the innermost
 * region of the faulting thread, and jumps back (siglongjmp) to where the region began,
 * which then goes on without the file.  Every other SIGBUS goes to the host's previous
 * handler, or to the default action, as if the guard were not there.
 *
 * A region costs no system call: sigsetjmp(buf, 0) saves no signal mask, and the handler
 * runs with SA_NODEFER, so jumping out of it leaves the mask as it was.  The accesses in a
 * region are lock-free atomics on shared words and take no process-local lock and no
 * malloc while they touch the mapping, so abandoning one midway leaves nothing held.
 *
 *   struct cg_state_guard g;
 *   if (sigsetjmp(g.jb, 0) != 0)
 *     return what-to-do-without-the-file;    (the fault; g is already off the stack)
 *   cg_state_guard_push(&g, st);
 *   ... accesses ...
 *   cg_state_guard_pop(&g);
 */
struct cg_state_guard {
  sigjmp_buf jb;
  const char *lo, *hi;             /* the mapping's bytes: [lo, hi) */
  struct cg_state_guard *prev;     /* the thread's enclosing region, or NULL */
};

/* Install the SIGBUS handler once per process (thread-safe; later calls do nothing).  A
 * host handler put in front of it later is noticed within a second (state.c
 * cg__bus_recheck); the state file's probe then asks fstat(2) for the length first. */
void cg_state_sigbus_install(void);

/* Enter a region guarding `st`'s mapping (`g->jb` set by the caller's sigsetjmp just
 * before; the handler must be installed).  Regions nest; pop them in reverse order. */
void cg_state_guard_push(struct cg_state_guard *g, const struct cg_state *st);
void cg_state_guard_pop(struct cg_state_guard *g);

/* Leave the thread's regions for a while (a wait that runs host callbacks): a SIGBUS
 * meanwhile is never taken for ours.  Returns what cg_state_guard_resume puts back. */
struct cg_state_guard *cg_state_guard_suspend(void);
void cg_state_guard_resume(struct cg_state_guard *g);

/* The start time of process `pid` in clock ticks since boot (/proc/PID/stat field 22),
 * or 0 if it does not exist. */
uint64_t cg_proc_start(pid_t pid);

/* Whether the holder `pid` of something in the file is gone: no such process, a zombie
 * (killed but not yet reaped: state Z or X in /proc/PID/stat), or a newer process whose
 * start time differs from `start` in the bits of `mask` (`start` 0: not known, only the
 * pid can tell). */
int cg_proc_gone(pid_t pid, uint64_t start, uint64_t mask);

/* Monotonic nanoseconds, the time base of the file. */
int64_t cg_state_now(void);

/* The key of pool `p` when it is named and its name published (for readers such as
 * `stat`: read the pool, then call cg_state_pool_same to know that it was not given to
 * another name meanwhile); 0 for a free pool or one changing hands. */
static inline uint64_t cg_state_pool_key(const struct cg_state_pool *p) {
  uint64_t k = __atomic_load_n(&p->name_hash, __ATOMIC_ACQUIRE);
  if (!k || (k >> 48) == 0xFFFF || !__atomic_load_n(&p->name_ready, __ATOMIC_ACQUIRE))
    return 0;
  return k;
}

/* Whether pool `p` still has key `k` (cg_state_pool_key) after it was read. */
static inline int cg_state_pool_same(const struct cg_state_pool *p, uint64_t k) {
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return __atomic_load_n(&p->name_hash, __ATOMIC_ACQUIRE) == k &&
         __atomic_load_n(&p->name_ready, __ATOMIC_ACQUIRE);
}

#endif
