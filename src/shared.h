/* shared.h - the shared state of a pool behind one interface, with two back ends (README
 * "Fleets: shared state on Redis").
 *
 * The model is curl's lib/vtls/: one interface (vtls.h, struct Curl_ssl) and pluggable
 * back ends.  Here the back ends are
 *   mmap   the machine's state file (state.h), i.e. limiter.c, breaker.c, budget.c as
 *          they are: every process of the machine shares it (shared-mmap.c);
 *   redis  one Redis (or Valkey) server for a fleet of machines (shared-redis.c): GCRA in
 *          a Lua script on the server's clock, in-flight slots as expiring leases, the
 *          breaker's window, open state and half-open probe as keys with TTLs.
 * admit.c talks to this interface only.  A Redis operation that fails (no connection, a
 * timeout, an error reply) returns CG_SHARED_DOWN; the caller then goes on with the mmap
 * back end for the rest of the call (fail open, never hang).  The mmap back end never
 * returns CG_SHARED_DOWN.
 *
 * Times are ns.  Durations passed in are relative ("for_ns", "left_ns"): each back end
 * turns them into its own clock (CLOCK_MONOTONIC for the file, the Redis server's TIME
 * for Redis), so machines never compare their clocks.
 */
#ifndef CG_SHARED_H
#define CG_SHARED_H

#include "breaker.h"
#include "budget.h"
#include "config.h"
#include "limiter.h"
#include "state.h"

#include <stdint.h>

#define CG_SHARED_DOWN (-100) /* the back end failed: use the mmap one (never from mmap) */

/* Leases of in-flight slots from the Redis back end are handed out as
 * CG_SHARED_LEASE_BASE + an index of the process's lease table, so that they never
 * collide with the state file's slot numbers (< CG_STATE_SLOTS). */
#define CG_SHARED_LEASE_BASE (1 << 20)
/* Retry budget slots from the Redis back end: CG_SHARED_BUDGET_BASE + an index. */
#define CG_SHARED_BUDGET_BASE (2 << 20)

/* One pool as one call sees it: the state file's pool (always there while the call
 * runs with a state file: it is the fallback) and the back end in use. */
struct cg_shared_pool {
  const struct cg_shared_ops *ops; /* NULL until the pool is first used */
  struct cg_state *state;          /* the state file (mmap back end, fallback) */
  int p;                           /* the pool's index in the state file */
  const struct cg_pool_cfg *cfg;
  char probe_id[64];               /* Redis: this call's probe lease id ("" none) */
  int64_t probe_out_until;         /* Redis: a refusal saw a probe out whose lease ends
                                    * then (cg_state_now() ns; 0 none): asked again past
                                    * it, that probe overran (cg__r_admit) */
  int64_t early_until;             /* mmap: an early probe's cooldown end (breaker.h
                                    * cg_breaker_early), put back when it ends */
  int64_t budget_wait_ns;          /* Redis: the last budget refusal's wait */
  int64_t budget_bucket;           /* Redis: the window bucket of the last granted retry */
  uint32_t key;                    /* Redis: the call's limit key (limiter.h keyed holds;
                                    * 0 none), asked by the admission's script */
  int learn_pre_set;               /* Redis: the last reserve also asked the learned rate: */
  int64_t learn_pre_ns;            /* ... 0 taken, else ns until it might be */
  int pre_lease_set;               /* Redis: the last reserve also took an in-flight lease */
  int64_t pre_lease_ms;            /* ... when (monotonic ms) */
  char pre_lease_id[64];           /* ... its id */
  int64_t learn_poll_ms;           /* Redis: the learned place was free but no slot: the
                                    * next ask after this (5 ms doubling to
                                    * CG_SHARED_POLL_MS; 0 after a reserve) */
  int queued;                      /* the back end may hold a place in a queue for this
                                    * call: queue_leave gives it up */
  char wait_id[64];                /* Redis: that place's id in the pool's queue for an
                                    * in-flight lease (the lease's id once taken) */
};

/* `now` in reserve, breaker_admit, budget_first and learn_take: cg_state_now() the caller
 * read just before (0: none), so that the state file's op need not read the clock again
 * (70-100 ns in a VM); Redis goes by its server's TIME and ignores it, and its fallback
 * to the file, which may come 50 ms later, passes 0. */
struct cg_shared_ops {
  const char *name; /* "mmap", "redis" */

  /* GCRA (limiter.h) for one request costing `tokens` (0: none) against the pool's rpm
   * and tpm together, after any 429 hold: 0 and the wait before it may go in `*wait_ns`;
   * 1 when that wait would exceed `max_wait_ns` (nothing reserved; `*wait_ns` says how
   * long it would have been); CG_SHARED_DOWN. */
  int (*reserve)(struct cg_shared_pool *sp, int64_t tokens, int64_t max_wait_ns,
                 int64_t *wait_ns, int64_t now);
  /* How long the calls of limit key `key` (limiter.h keyed holds; 0: none) are still
   * held by a 429, the pool's hold or the key's (ns, <= 0: not held); CG_SHARED_DOWN is
   * returned as 0 by the Redis back end (no hold known). */
  int64_t (*hold_left)(struct cg_shared_pool *sp, uint32_t key);
  /* A 429 (or a quota with nothing left): hold the pool's callers of limit key `key`
   * (0: every caller) for `for_ns`; holds only move forward. */
  void (*hold)(struct cg_shared_pool *sp, uint32_t key, int64_t for_ns);

  /* Take an in-flight slot (limit `max`), waiting up to `left_ns`: a handle >= 0, -1 on
   * timeout, -2 when the slot table is full (the call goes without one),
   * CG_SHARED_DOWN.  `*waited_ns` gets the time waited. */
  int (*acquire)(struct cg_shared_pool *sp, long max, int64_t left_ns, int64_t *waited_ns);
  /* Give a handle of acquire back. */
  void (*release)(struct cg_shared_pool *sp, int handle);
  /* The call no longer waits for a slot (it ended, or gave up): give up its place in the
   * queue for one, if `sp->queued` (then cleared).  NULL: the back end keeps no place
   * after acquire returns (mmap). */
  void (*queue_leave)(struct cg_shared_pool *sp);

  /* The breaker (breaker.h, same verdicts): may a call go now?  A caller that becomes the
   * probe holds it for `probe_ns` at most; on a reject `*next_ns` says how long until a
   * probe may go.  CG_SHARED_DOWN (as an int) from Redis. */
  int (*breaker_admit)(struct cg_shared_pool *sp, int64_t probe_ns, int64_t *next_ns,
                       int64_t now);
  /* Count a result (`failed` 1, 0, or -1 not counted; `probe`: the call held the probe;
   * `floor_ns`: a failed probe's Retry-After; `start_ns`: when the attempt was sent, in
   * state-file time).  0, or CG_SHARED_DOWN. */
  int (*breaker_report)(struct cg_shared_pool *sp, int failed, int probe, int64_t floor_ns,
                        int64_t start_ns);
  /* An early probe (breaker.h cg_breaker_early): while open and cooling down with no probe
   * out, this call becomes the probe now, for `probe_ns` at most.  1 it did, 0 not (ask
   * breaker_admit as before), CG_SHARED_DOWN from Redis.  Its result is reported with
   * probe = 2: a success closes the breaker as any probe's; a failure, an uncounted
   * result and breaker_release leave it open until the cooldown it found (a failure's
   * `floor_ns`, its Retry-After, from now when that is later). */
  int (*breaker_early)(struct cg_shared_pool *sp, int64_t probe_ns, int64_t now);
  /* Give the probe back unused (an early one: as its failure). */
  void (*breaker_release)(struct cg_shared_pool *sp);
  /* The breaker's state (CG_SHARED_DOWN as an int from Redis). */
  int (*breaker_state)(struct cg_shared_pool *sp);
  /* Whether a call with `left_ns` to go can still see a probe. */
  int (*breaker_wait_ok)(struct cg_shared_pool *sp, int64_t left_ns);
  /* Wait at most `ns` for the breaker to change (mmap: the futex word read by
   * breaker_seq before asking; Redis: a sleep of at most CG_SHARED_POLL_MS). */
  uint32_t (*breaker_seq)(struct cg_shared_pool *sp);
  void (*breaker_park)(struct cg_shared_pool *sp, uint32_t seq, int64_t ns);

  /* The retry budget (budget.h, same verdicts): count a first attempt; ask for a retry
   * (`left_ns`: the asking call's deadline, relative; `*slot`: its concurrency slot, -1
   * none; CG_SHARED_DOWN as an int from Redis); how long a refusal `why` should wait
   * before asking again; give a slot back; a granted retry (at `granted_ns`, state
   * clock) succeeded: out of the window. */
  void (*budget_first)(struct cg_shared_pool *sp, int64_t now);
  int (*budget_retry)(struct cg_shared_pool *sp, int64_t left_ns, int *slot);
  int64_t (*budget_wait_ns)(struct cg_shared_pool *sp, int why);
  void (*budget_done)(struct cg_shared_pool *sp, int slot);
  void (*budget_refund)(struct cg_shared_pool *sp, int64_t granted_ns);

  /* The learned rate (limiter.h): take its place now (0), or the ns until it might be
   * (nothing taken; CG_SHARED_DOWN from Redis).  The rate is each machine's own (CUBIC
   * from its answers); Redis makes its place one word for the fleet. */
  int64_t (*learn_take)(struct cg_shared_pool *sp, int64_t now);
  /* This machine just cut the learned rate (a throttle): tell the others, who cut theirs
   * at their next admission (once per round).  The file: nothing to do. */
  void (*learn_cut)(struct cg_shared_pool *sp);
};

#define CG_SHARED_POLL_MS 100 /* Redis: a waiter for a slot or a probe looks this often */

/* The state file's back end (shared-mmap.c). */
extern const struct cg_shared_ops cg_shared_mmap;
/* The Redis back end (shared-redis.c). */
extern const struct cg_shared_ops cg_shared_redis;

/* ---- the state file's steps of a request, inline ----
 *
 * The mmap back end's ops of the per-request path, on pool `p` of file `st` with the
 * pool's configuration `cfg` (a cg_shared_pool's state, p and cfg).  shared-mmap.c's ops
 * are these; admit.c calls them directly when the call's back end is the file, so a
 * request on the file runs no indirect call and no thunk (issue 16: the lines of code a
 * request touches).  `now` as in cg_shared_ops: the caller's instant, or 0. */

static inline int64_t cg_shared_file_now(int64_t now) {
  return now > 0 ? now : cg_state_now();
}

static inline int cg_shared_file_reserve(struct cg_state *st, int p,
                                         const struct cg_pool_cfg *cfg, int64_t tokens,
                                         int64_t max_wait_ns, int64_t *wait_ns, int64_t now) {
  return cg_limiter_reserve(st, p, &cfg->lim, tokens, cg_shared_file_now(now), max_wait_ns,
                            wait_ns);
}

static inline int cg_shared_file_acquire(struct cg_state *st, int p, long max,
                                         int64_t left_ns, int64_t *waited_ns) {
  return cg_limiter_inflight_acquire(st, p, max, cg_state_now() + left_ns, waited_ns);
}

static inline void cg_shared_file_release(struct cg_state *st, int p, int handle) {
  if (handle >= 0 && handle < CG_SHARED_LEASE_BASE)
    cg_limiter_inflight_release(st, p, handle);
}

static inline int cg_shared_file_admit(struct cg_state *st, int p,
                                       const struct cg_pool_cfg *cfg, int64_t probe_ns,
                                       int64_t *next_ns, int64_t now) {
  int r;
  now = cg_shared_file_now(now);
  r = (int) cg_breaker_admit(st, p, &cfg->breaker, now, now + probe_ns, next_ns);
  /* The interface's next_ns is relative. */
  *next_ns = *next_ns > now ? *next_ns - now : 0;
  return r;
}

static inline int cg_shared_file_report(struct cg_state *st, int p,
                                        const struct cg_pool_cfg *cfg, int failed, int probe,
                                        int64_t floor_ns, int64_t start_ns, int64_t now) {
  now = cg_shared_file_now(now);
  cg_breaker_report_at(st, p, &cfg->breaker, failed, probe, now, floor_ns,
                       start_ns > 0 ? start_ns : now);
  return 0;
}

/* cg_shared_file_report for an early probe (probe = 2; breaker.h cg_breaker_early): a
 * success closes the breaker as any probe's; else it is open again until `open_until`
 * (the cooldown it found), or, for a failure (`failed` 1) whose answer carried a
 * Retry-After, until `floor_ns` (ns, already capped by the caller) from now when that is
 * later: the hint is a floor, as for a regular probe (breaker.c). */
int cg_shared_file_report_early(struct cg_state *st, int p, const struct cg_pool_cfg *cfg,
                                int failed, int64_t floor_ns, int64_t start_ns,
                                int64_t open_until);

static inline void cg_shared_file_bfirst(struct cg_state *st, int p,
                                         const struct cg_pool_cfg *cfg, int64_t now) {
  cg_budget_first(st, p, &cfg->budget, cg_shared_file_now(now));
}

static inline int64_t cg_shared_file_learn_take(struct cg_state *st, int p,
                                                const struct cg_pool_cfg *cfg, int64_t now) {
  return cg_limiter_learn_take(st, p, &cfg->lim, cg_shared_file_now(now));
}

/* ---- the Redis back end's connection (shared-redis.c) ---- */

/* A parsed CURLGUARD_REDIS. */
struct cg_redis_url {
  int unix_socket;     /* 1: `path` is a unix socket */
  char host[256];
  int port;            /* default 6379 */
  char path[108];
  char user[128];      /* "" = the default user (AUTH password); else AUTH user password */
  char password[256];  /* "" = none (no AUTH) */
  int db;              /* SELECT db; 0 by default */
};

/* Parse `s`: redis://[[user]:password@]host[:port][/db], or unix:///path[?db=N].  A user
 * other than "default" is an ACL user of Redis 6 and later (AUTH user password, Redis's
 * AUTH command page); none, or "default", sends AUTH password, which Redis before 6 also
 * takes.  The user and the password are percent-decoded (%XX, RFC 3986 3.2.1), after
 * the split on the last '@' and the userinfo's first ':'.  0; -1 malformed (a decoded
 * user or password too long for its field too); -2 rediss:// (TLS: not in Debian's
 * hiredis 0.14, which has no hiredis_ssl); -3 a '%' in the user or password not followed
 * by two hex digits, or %00.  Pure. */
int cg_redis_url_parse(const char *s, struct cg_redis_url *u);

/* Whether the calling thread may use Redis now: configured (CURLGUARD_REDIS, parsed and
 * valid), and connected or connected within the connect timeout (a failed connect backs
 * off 100 ms doubling to 5 s before the next try, so a down server costs one timeout per
 * backoff, never a hang).  Says once per process per cause why it may not. */
int cg_shared_redis_ready(void);

/* Whether Redis is configured (a valid CURLGUARD_REDIS), so that cg_shared_redis_ready may
 * have tried a connect, which takes time.  Valid only after a cg_shared_redis_ready() of
 * the calling thread (issue 16: admit.c cg__pool, whether a clock reading still holds). */
int cg_shared_redis_configured(void);

/* The calling thread's next steps are a call's before its send, whose deadline is
 * `deadline_ms` (monotonic ms; 0: no call's, after its send): each round trip to Redis
 * (connecting, its set-up, a reply) then waits at most half of what the deadline leaves,
 * and 2 ms at least (CG_REDIS_TIMEOUT_MS otherwise).  A call with a short deadline so
 * does not spend it on a Redis that does not answer: it goes by the state file with the
 * other half (README "Fleets"). */
void cg_shared_redis_within(int64_t deadline_ms);

/* How many outage lines a process says (README "Fleets", libcurlguard(7) DIAGNOSTICS): a
 * Redis out of reach is said once per outage, the first CG_REDIS_OUTAGE_LINES of a process
 * each, then one an hour at most (CG_REDIS_OUTAGE_QUIET_MS after the last line said), so a
 * flapping Redis is not a line a second in the host's stderr and a daemon that saw ten
 * outages in its first week still says the one it meets a month later. */
#define CG_REDIS_OUTAGE_LINES 10
#define CG_REDIS_OUTAGE_QUIET_MS (3600 * INT64_C(1000))

/* The allowance of outage lines (above) of one process: outages begun, the time of the
 * last line said, the outages not said since it. */
struct cg_redis_outages {
  int begun;
  int unsaid;
  int64_t said_ms;
};

/* Outage `o->begun + 1` begins at `now_ms` (monotonic ms): 1 when its line is said, with
 * what ends the line in `suffix` (n bytes: "" for the first outage, then "; outage K of this
 * process", which the tenth follows with when later ones are said and a later one with
 * how many went unsaid since the line before it); 0 when it is not said (counted).  No
 * clock read, lock or I/O of its own: shared-redis.c calls it under a mutex. */
int cg_redis_outage_say(struct cg_redis_outages *o, int64_t now_ms, char *suffix, size_t n);

/* Key `<prefix>{<pool>}:<what>` into `buf` (one hash slot per pool: Redis Cluster's hash
 * tags).  Returns buf. */
char *cg_redis_key(char *buf, size_t n, const char *prefix, const char *pool,
                   const char *what);

/* For `curlguard stat`: the fleet-wide figures of one pool read from Redis
 * (cg_redis_view_all). */
struct cg_redis_view {
  long inflight;          /* live leases */
  int breaker;            /* CG_BREAKER_CLOSED / OPEN / HALF_OPEN */
  int64_t next_probe_ms;  /* open: ms until a probe may go */
  int64_t hold_ms;        /* 429 hold left */
  long held_keys;         /* limit keys a 429 holds now (limiter.h keyed holds) */
  int64_t key_hold_ms;    /* the longest of their holds left */
  int64_t tat_req_ahead_us, tat_tok_ahead_us; /* how far each TAT is ahead of now */
  long window_ok, window_failed; /* the breaker's window */
  long admitted;          /* admissions through Redis (all machines) */
};

/* The fleet-wide figures of the `n` pools `names` into `v[0..n-1]`, read on one
 * connection to the Redis at `url` with key prefix `prefix` (given, not the process's
 * config): `stat --json`, its text view and `--prometheus`, one connection for all the
 * pools.  0, or -1 (Redis unreachable, or it refuses what the guard's calls run) at the
 * first failure (the message in `err`; the figures of that pool and the later ones left
 * zero).  With n 0, whether Redis can be connected to (and logged in to) at all. */
int cg_redis_view_all(const char *url, const char *prefix, const char *const *names, int n,
                      struct cg_redis_view *v, char *err, size_t errn);

/* Through Redis by this process so far (bench, tests): admissions (GCRA reservations
 * made), round trips waited for (connects and their set-up included), commands sent
 * without waiting for the reply (successes for the breaker's window, leases given back). */
void cg_shared_redis_counts(uint64_t *admissions, uint64_t *round_trips, uint64_t *sent);

#endif
