/* handles.c - the handle map (handle.h) under ThreadSanitizer: many threads add, look up,
 * record into and remove many handles at once, so lock-free lookups race with adds,
 * removals and table growth of other threads' handles.  (The map's part of make
 * check-tsan; stress.c covers the rest of the concurrent code.)
 *
 * Each thread owns PER handles (fake CURL* addresses in its own arena row) and, ROUNDS
 * times, keeps a random half of them alive: a lookup must always find the thread's own
 * shadow of a live handle, with its own values, and never one of a removed handle.  The
 * live total (THREADS x PER / 2 on average, up to THREADS x PER) crosses the first
 * table's half several times over, so the map grows while readers probe it.  Exits 1 on
 * any wrong answer; TSan reports any data race (halt_on_error=1). */
#include "handle.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 8
#define PER 512
#define ROUNDS 200

static _Alignas(64) char arena[THREADS][PER][16];
static int failed;

static void fail(const char *what, int t, int i) {
  fprintf(stderr, "tsan handles: thread %d handle %d: %s\n", t, i, what);
  __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
}

static void *worker(void *arg) {
  int t = (int) (intptr_t) arg, r, i;
  unsigned seed = 0x9E3779B9u * (unsigned) (t + 1);
  char live[PER] = {0};

  for (r = 0; r < ROUNDS && !__atomic_load_n(&failed, __ATOMIC_RELAXED); r++) {
    for (i = 0; i < PER; i++) {
      CURL *c = (CURL *) arena[t][i];
      struct cg_handle *h = cg_handle_get(c);
      int want = (int) (rand_r(&seed) & 1);
      if (live[i] && (!h || h->curl != c || h->timeout_ms != (long) (t * PER + i)))
        fail("live handle not found, or not its shadow", t, i);
      if (!live[i] && h)
        fail("removed handle still found", t, i);
      if (want && !live[i]) {
        struct cg_optval v = {.u.l = t * PER + i};
        if (!(h = cg_handle_add(c, NULL))) {
          fail("out of memory", t, i);
          continue;
        }
        cg_handle_record(h, CURLOPT_TIMEOUT_MS, &v);
        live[i] = 1;
      } else if (!want && live[i]) {
        cg_handle_remove(c);
        live[i] = 0;
      }
    }
  }
  for (i = 0; i < PER; i++)
    if (live[i])
      cg_handle_remove((CURL *) arena[t][i]);
  return NULL;
}

int main(void) {
  pthread_t th[THREADS];
  int i;

  for (i = 0; i < THREADS; i++)
    if (pthread_create(&th[i], NULL, worker, (void *) (intptr_t) i) != 0)
      return 2;
  for (i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  if (!failed && cg_handle_count() != 0) {
    fprintf(stderr, "tsan handles: %zu shadows left\n", cg_handle_count());
    failed = 1;
  }
  if (failed)
    return 1;
  printf("tsan handles: %d threads x %d handles x %d rounds, %zu tables: 1 passed, 0 failed\n",
         THREADS, PER, ROUNDS, cg_handle_tables());
  return 0;
}
