/* fastpaths.c - the lock-free fast paths of issue 16 under ThreadSanitizer (make
 * check-tsan runs it; stress.c covers the rest of the concurrent code).
 *
 * 1. The handle map (handle.h): many threads add, look up, record into and remove many
 * handles at once, so lock-free lookups race with adds, removals and table growth of
 * other threads' handles.
 * Each thread owns PER handles (fake CURL* addresses in its own arena row) and, ROUNDS
 * times, keeps a random half of them alive: a lookup must always find the thread's own
 * shadow of a live handle, with its own values, and never one of a removed handle.  The
 * live total (THREADS x PER / 2 on average, up to THREADS x PER) crosses the first
 * table's half several times over, so the map grows while readers probe it.
 *
 * 2. The state file's cg_state_get / cg_state_intact (state.h) from every thread at once,
 * the first calls racing with the open, and the cached pid and start time (proc.h) read
 * first by many threads at once.
 *
 * Exits 1 on any wrong answer; TSan reports any data race (halt_on_error=1). */
#include "handle.h"
#include "proc.h"
#include "state.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define THREADS 8
#define PER 512
#define ROUNDS 200

static _Alignas(64) char arena[THREADS][PER][16];
static int failed;

static void fail(const char *what, int t, int i) {
  fprintf(stderr, "tsan fastpaths: thread %d handle %d: %s\n", t, i, what);
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

static char state_path[64];
static struct cg_state *first_state;

static void *state_worker(void *arg) {
  int t = (int) (intptr_t) arg, i;

  if (cg_pid() != getpid() || cg_proc_self_start() != cg_proc_start(getpid()))
    fail("cached pid or start time", t, 0);
  for (i = 0; i < 20000; i++) {
    struct cg_state *s = cg_state_get(state_path);
    struct cg_state *first = __atomic_load_n(&first_state, __ATOMIC_ACQUIRE);
    if (!s) {
      fail("state file not usable", t, i);
      break;
    }
    if (!first)
      __atomic_compare_exchange_n(&first_state, &first, s, 0, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE);
    else if (first != s)
      fail("another mapping of one whole file", t, i);
    if (!cg_state_intact(s) || s->hdr->size != CG_STATE_SIZE)
      fail("state file not intact", t, i);
  }
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
    fprintf(stderr, "tsan fastpaths: %zu shadows left\n", cg_handle_count());
    failed = 1;
  }
  snprintf(state_path, sizeof(state_path), "/tmp/cg-tsan-fastpaths-%d.state", (int) getpid());
  unlink(state_path);
  for (i = 0; i < THREADS; i++)
    if (pthread_create(&th[i], NULL, state_worker, (void *) (intptr_t) i) != 0)
      return 2;
  for (i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  unlink(state_path);
  if (failed)
    return 1;
  printf("tsan fastpaths: handles %d threads x %d x %d rounds (%zu tables), state file and "
         "pid from %d threads: 1 passed, 0 failed\n",
         THREADS, PER, ROUNDS, cg_handle_tables(), THREADS);
  return 0;
}
