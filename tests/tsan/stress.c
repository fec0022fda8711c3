/* stress.c - the guard's concurrent parts hammered from many threads, for ThreadSanitizer
 * (`make check-tsan`).  Criterion's runner does not start under TSan, so this is a plain
 * program: it exits non-zero on a wrong count, and TSan aborts it on a data race.
 *
 * Covered: the handle map (add/record/get/remove), the shared limiter (GCRA reservations
 * and in-flight slots on one mapped state file), usage records appended to one log, the
 * per-thread rng, and host-retry bookkeeping. */
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
static const struct cg_limits lim = {6e9, 0, 1, 0, 4, 0}; /* 6e9 rpm: T = 10 ns */

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

    cg_uuid4(uuid);
    cg_repeat_note(cg_rand64() % 16, i, 1000, uuid, prev, sizeof(prev));
    cg_repeat_done(cg_rand64() % 16, i & 1);
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
  cg_state_close(&st);
  unlink(path);
  unlink(log);
  rmdir(dir);
  printf("tsan stress: %d threads x %d rounds: 1 passed, 0 failed\n", THREADS, ROUNDS);
  return 0;
}
