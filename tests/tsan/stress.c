/* stress.c - the guard's concurrent parts hammered from many threads, for ThreadSanitizer
 * (`make check-tsan`).  Criterion's runner does not start under TSan, so this is a plain
 * program: it exits non-zero on a wrong count, and TSan aborts it on a data race.
 *
 * Covered: the handle map (add/record/get/remove), the shared limiter (GCRA reservations
 * and in-flight slots on one mapped state file), usage records appended to one log (and
 * the log rotated under them), the
 * per-thread rng, host-retry bookkeeping, and the shared circuit breaker (window buckets,
 * open/half-open/closed transitions, early probes racing regular ones, never two probes at
 * once) and retry budget (window CAS, concurrency slots, never overdrawn), and a full pool
 * table whose idle pools are given to new names while threads look up, reserve in and age
 * the same pools; and keyed 429 holds (limiter.h) of 8 keys racing for a pool's 16 words,
 * short holds running out and their words taken again: with twice the words (a race may
 * give one key two), a hold, once set, holds its key at least as long as asked. */
#include "breaker.h"
#include "clock.h"
#include "budget.h"
#include "config.h"
#include "handle.h"
#include "limiter.h"
#include "record.h"
#include "repeat.h"
#include "rng.h"
#include "state.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 8
#define ROUNDS 2000

static struct cg_state st;
static struct cg_config cfg;
static int pool;
static const struct cg_limits lim = {.rpm = 6e9, .burst_requests = 1, .max_inflight = 4,
                                     .adaptive = 0}; /* 6e9 rpm: T = 10 ns */
/* A breaker that opens and closes often: 10 requests, 50 %, a 10 ms cooldown. */
static const struct cg_breaker_cfg bcfg = {.enabled = 1, .failure_rate = 0.5,
                                           .min_requests = 10, .window_s = 60,
                                           .cooldown_s = 0.01, .open_code = 7,
                                           .open_wait = 0, .consecutive = 0,
                                           .cooldown_max_s = 0.01, .ramp_s = 0,
                                           .jitter = 0};
/* A budget with no floor and a window longer than the run: grants <= 20 % of firsts. */
static const struct cg_budget_cfg ucfg = {1, 0.2, 0, 3600, 4};
static int probes_now, probes_max, probes_total, early_total, retries_granted;
static int keyed_pool;

/* One more probe out (regular or early): the most ever out at once is kept. */
static void probe_begin(void) {
  int n = __atomic_add_fetch(&probes_now, 1, __ATOMIC_ACQ_REL);
  int m = __atomic_load_n(&probes_max, __ATOMIC_ACQUIRE);
  while (n > m && !__atomic_compare_exchange_n(&probes_max, &m, n, 0, __ATOMIC_ACQ_REL,
                                               __ATOMIC_ACQUIRE))
    ;
  __atomic_fetch_add(&probes_total, 1, __ATOMIC_RELAXED);
}

static void breaker_round(int i) {
  int64_t now = cg_state_now(), next, until;
  enum cg_breaker_verdict v = cg_breaker_admit(&st, pool, &bcfg, now, now + 10000000000LL, &next);
  int failed = (int) (cg_rand64() % 3 != 0); /* mostly failures: it keeps opening */

  if (v == CG_BREAKER_PROBE) {
    probe_begin();
    __atomic_sub_fetch(&probes_now, 1, __ATOMIC_ACQ_REL);
    cg_breaker_report(&st, pool, &bcfg, (i & 7) ? failed : -1, 1, cg_state_now());
  } else if (v == CG_BREAKER_ALLOW) {
    cg_breaker_report(&st, pool, &bcfg, failed, 0, now);
  } else if ((now / 20000000) % 2 == 0 && i % 2 == 1) {
    /* Refused while open, in every other 20 ms (in the others the regular probe comes at
     * the cooldown's end): an early probe (a held call at its last chance, admit.c
     * cg__sh_early), racing the regular probe and the other threads' early ones.  The gap
     * between two early probes (CG_BREAKER_EARLY_GAP_MS) is cleared first, as if a second
     * had passed, so that they race here at all. */
    __atomic_store_n(&st.breakers[pool].early_after_ns, 0, __ATOMIC_RELEASE);
    now = cg_state_now();
    if (cg_breaker_early(&st, pool, &bcfg, now, now + 10000000000LL, &until)) {
      probe_begin();
      __atomic_fetch_add(&early_total, 1, __ATOMIC_RELAXED);
      __atomic_sub_fetch(&probes_now, 1, __ATOMIC_ACQ_REL);
      if (failed) /* as shared-mmap.c cg_shared_file_report_early */
        cg_breaker_early_end(&st, pool, until);
      else
        cg_breaker_report(&st, pool, &bcfg, 0, 1, cg_state_now());
    }
  }
}

static void budget_round(void) {
  int slot;
  cg_budget_first(&st, pool, &ucfg, cg_state_now());
  if (cg_budget_retry(&st, pool, &ucfg, cg_state_now(), cg_state_now() + 60000000000LL, &slot) == CG_BUDGET_GRANTED) {
    __atomic_fetch_add(&retries_granted, 1, __ATOMIC_RELAXED);
    cg_budget_done(&st, pool, slot);
  }
}

static void *worker(void *arg) {
  uintptr_t id = (uintptr_t) arg;
  int i;

  for (i = 0; i < ROUNDS; i++) {
    CURL *fake = (CURL *) (uintptr_t) ((id << 32) | (uintptr_t) (i + 1));
    struct cg_optval v = {CG_OPT_LONG, {.l = 1}};
    struct cg_handle *h = cg_handle_add(fake, NULL);
    int64_t wait;
    int slot;
    char prev[64], uuid[37];

    if (!h)
      abort();
    cg_handle_record(h, CURLOPT_POST, &v);
    if (cg_handle_get(fake) != h)
      abort();
    cg_handle_remove(fake);

    if (cg_limiter_pool(&st, "stress", &lim) != pool)
      abort();
    cg_limiter_reserve(&st, pool, &lim, 0, 1000000, INT64_MAX, &wait);
    slot = cg_limiter_inflight_acquire(&st, pool, lim.max_inflight, cg_state_now() + 1000000000,
                                       &wait);
    if (slot >= 0)
      cg_limiter_inflight_release(&st, pool, slot);

    breaker_round(i);
    budget_round();
    {
      /* One hold in four lasts a second, the others 1 ms (their words soon free again). */
      uint32_t key = (uint32_t) ((id * 7 + (uintptr_t) i) % 8 + 1) * 0x10101u;
      int64_t now = cg_state_now(), until = now + (i % 4 == 0 ? 1000000000 : 1000000);
      cg_limiter_hold_key(&st, keyed_pool, key, until, now);
      if (i % 4 == 0 && cg_limiter_held_until(&st, keyed_pool, key, now) < until) {
        fprintf(stderr, "stress: key %x held until %lld, asked %lld\n", key,
                (long long) cg_limiter_held_until(&st, keyed_pool, key, now), (long long) until);
        abort();
      }
    }

    cg_uuid4(uuid);
    cg_repeat_note(cg_rand64() % 16, 0, i, 1000, prev, sizeof(prev));
    cg_repeat_done(cg_rand64() % 16, 0, (enum cg_repeat_end) (i % 3), i, 1, uuid);
    if (i % 100 == 0) {
      struct cg_record r;
      cg_record_init(&r);
      r.request_id = uuid;
      r.attempt = i;
      cg_record_emit(&cfg, &r);
    }
  }
  return NULL;
}

/* Phase 2: records from every thread while the log is rotated twice under them
 * (logrotate's `create` mode: renamed away, made again at its path).  The guard opens it
 * again on the same descriptor number while other threads write on it (record.c
 * cg__log_reopen_moved): across the three files, every record written is there, whole. */
static int rot_stop;
static void *rot_worker(void *arg) {
  uintptr_t n = 0;
  struct cg_record r;
  (void) arg;
  while (!__atomic_load_n(&rot_stop, __ATOMIC_ACQUIRE)) {
    cg_record_init(&r);
    r.request_id = "rotation";
    r.attempt = (int) n;
    if (cg_record_emit(&cfg, &r) == 0)
      n++;
    usleep(500);
  }
  return (void *) n;
}

/* Lines in `path` (0 when it is not there); -1 when one is not a whole record. */
static int whole_lines(const char *path) {
  char line[4096];
  int n = 0;
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  while (fgets(line, sizeof(line), f)) {
    size_t k = strlen(line);
    if (k < 3 || line[0] != '{' || line[k - 1] != '\n' || line[k - 2] != '}') {
      fclose(f);
      return -1;
    }
    n++;
  }
  fclose(f);
  return n;
}

static int rotation_phase(const char *log, int before) {
  char log1[160], log2[160];
  pthread_t t[THREADS];
  uintptr_t written = 0;
  void *n;
  int i, a, b, c;

  snprintf(log1, sizeof(log1), "%s.1", log);
  snprintf(log2, sizeof(log2), "%s.2", log);
  for (i = 0; i < THREADS; i++)
    pthread_create(&t[i], NULL, rot_worker, NULL);
  usleep(300 * 1000);
  rename(log, log1);
  usleep(1300 * 1000); /* past the guard's once-a-second look at the path */
  rename(log1, log2);
  rename(log, log1);
  usleep(1300 * 1000);
  __atomic_store_n(&rot_stop, 1, __ATOMIC_RELEASE);
  for (i = 0; i < THREADS; i++) {
    pthread_join(t[i], &n);
    written += (uintptr_t) n;
  }
  a = whole_lines(log);
  b = whole_lines(log1);
  c = whole_lines(log2);
  unlink(log1);
  unlink(log2);
  /* the first file holds the records of before too */
  if (a <= 0 || b <= 0 || c <= before || (uintptr_t) (a + b + c - before) != written) {
    fprintf(stderr, "stress: rotation: %d + %d + %d records in the three files, %lu written "
                    "and %d before\n",
            a, b, c, (unsigned long) written, before);
    return 1;
  }
  return 0;
}

/* ---- a full table: idle pools given to new names (limiter.c cg__pool_reuse) ---- */

#define REUSE_NAMES 40 /* new names, shared by the threads: several ask for one at once */
#define REUSE_ROUNDS 300

static void *reuse_worker(void *arg) {
  int id = (int) (uintptr_t) arg, k;
  char name[32];

  for (k = 0; k < REUSE_ROUNDS; k++) {
    int64_t w;
    int p;
    snprintf(name, sizeof(name), "new-%d", (id * 7 + k) % REUSE_NAMES);
    p = cg_limiter_pool(&st, name, &lim);
    if (p < 0)
      continue;
    /* A call in the pool (it may be given away under it: the rare long call), then the
     * pool made idle again so that another name can take it. */
    cg_limiter_reserve(&st, p, &lim, 0, 1000000, INT64_MAX, &w);
    __atomic_store_n(&st.pools[p].used_ms, cg_coarse_ms() - CG_POOL_IDLE_MS - 1 - k,
                     __ATOMIC_RELAXED);
  }
  return NULL;
}

/* Every published pool's name hashes to its key, none is left half given; one name in two
 * pools (a giver descheduled past the 50 ms others wait for it) is counted, not failed. */
static int reuse_phase(void) {
  pthread_t t[THREADS];
  char name[32];
  int i, j, twice = 0, fresh = 0;

  for (i = 0; i < CG_STATE_POOLS; i++) {
    int p;
    snprintf(name, sizeof(name), "fill-%d", i);
    if ((p = cg_limiter_pool(&st, name, &lim)) >= 0)
      __atomic_store_n(&st.pools[p].used_ms, cg_coarse_ms() - CG_POOL_IDLE_MS - 1,
                       __ATOMIC_RELAXED);
  }
  for (i = 0; i < THREADS; i++)
    pthread_create(&t[i], NULL, reuse_worker, (void *) (uintptr_t) i);
  for (i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  for (i = 0; i < CG_STATE_POOLS; i++) {
    const struct cg_state_pool *p = &st.pools[i];
    if (p->name_hash >> 48 == 0xFFFF || !p->name_ready ||
        p->name_hash != cg_limiter_name_hash(p->name)) {
      fprintf(stderr, "stress: pool %d: key %llx, ready %u, name %.48s\n", i,
              (unsigned long long) p->name_hash, p->name_ready, p->name);
      return 1;
    }
    for (j = 0; j < i; j++)
      twice += st.pools[j].name_hash == p->name_hash;
    fresh += strncmp(p->name, "new-", 4) == 0;
  }
  if (fresh == 0) {
    fprintf(stderr, "stress: no new name got a pool\n");
    return 1;
  }
  printf("tsan stress: %d of %d new names hold a pool at the end, %d in two pools\n", fresh,
         REUSE_NAMES, twice);
  return 0;
}

int main(void) {
  char dir[] = "/tmp/cg-tsan-XXXXXX", path[128], log[128], why[256], line[4096];
  pthread_t t[THREADS];
  FILE *f;
  int64_t tat;
  int i, lines = 0;

  if (!mkdtemp(dir))
    return 1;
  snprintf(path, sizeof(path), "%s/state", dir);
  snprintf(log, sizeof(log), "%s/usage.jsonl", dir);
  if (cg_state_open(path, &st, why, sizeof(why)) != 0) {
    fprintf(stderr, "%s\n", why);
    return 1;
  }
  pool = cg_limiter_pool(&st, "stress", &lim);
  keyed_pool = cg_limiter_pool(&st, "keyed", &lim);
  cfg.log_path = log;
  for (i = 0; i < THREADS; i++)
    pthread_create(&t[i], NULL, worker, (void *) (uintptr_t) (i + 1));
  for (i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);

  /* Every reservation moved the account by exactly one interval: no lost update. */
  tat = __atomic_load_n(&st.pools[pool].tat_requests, __ATOMIC_ACQUIRE);
  if (tat != 1000000 + (int64_t) THREADS * ROUNDS * 10) {
    fprintf(stderr, "stress: TAT %lld, want %lld\n", (long long) tat,
            (long long) (1000000 + (int64_t) THREADS * ROUNDS * 10));
    return 1;
  }
  /* Never two probes at once; the breaker did open and probe; the budget never overdrew
   * and gave every slot back. */
  if (probes_max != 1 || early_total < 1 || probes_total - early_total < 1 ||
      st.breakers[pool].opened < 1) {
    fprintf(stderr, "stress: %d probes at once (want 1), %d in all (%d early), opened %llu "
            "times\n", probes_max, probes_total, early_total,
            (unsigned long long) st.breakers[pool].opened);
    return 1;
  }
  if (retries_granted > THREADS * ROUNDS / 5 || retries_granted < THREADS * ROUNDS / 5 - THREADS) {
    fprintf(stderr, "stress: %d retries granted for %d first attempts (20 %%)\n",
            retries_granted, THREADS * ROUNDS);
    return 1;
  }
  {
    struct cg_budget_view bv;
    cg_budget_view(&st, pool, cg_state_now(), &bv);
    if (bv.concurrent != 0) {
      fprintf(stderr, "stress: %u retry slots left held\n", bv.concurrent);
      return 1;
    }
  }
  if (st.pools[pool].inflight != 0 || cg_handle_count() != 0) {
    fprintf(stderr, "stress: %u in flight, %zu handles left\n", st.pools[pool].inflight,
            cg_handle_count());
    return 1;
  }
  if ((f = fopen(log, "r"))) {
    while (fgets(line, sizeof(line), f))
      lines++;
    fclose(f);
  }
  if (lines != THREADS * (ROUNDS / 100)) {
    fprintf(stderr, "stress: %d records, want %d\n", lines, THREADS * (ROUNDS / 100));
    return 1;
  }
  printf("tsan stress: breaker: %d probes (%d early), never two out at once, opened %llu "
         "times\n",
         probes_total, early_total, (unsigned long long) st.breakers[pool].opened);
  if (rotation_phase(log, lines) != 0 || reuse_phase() != 0)
    return 1;
  cg_state_close(&st);
  unlink(path);
  unlink(log);
  rmdir(dir);
  printf("tsan stress: %d threads x %d rounds, then a log rotated twice under them, then "
         "a full pool table given to new names: 1 passed, 0 failed\n",
         THREADS, ROUNDS);
  return 0;
}
