/* repeat.c - remembering recent calls to notice host retries (see repeat.h). */
#include "repeat.h"
#include "tls.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct cg__seen {
  uint64_t key;
  int64_t t_ms;
  int repeats;
  int failed; /* the last call with this key did not end ok */
  uint64_t thread; /* the worker that ended it: a thread (cg__thread_id) or a handle */
  char request_id[64];
};

static pthread_mutex_t cg__repeat_mutex = PTHREAD_MUTEX_INITIALIZER;

/* A forked child must not inherit cg__repeat_mutex held by a thread it does not have: hold it
 * across fork() (pthread_atfork(3)). */
static void cg__fork_prepare(void) {
  pthread_mutex_lock(&cg__repeat_mutex);
}
static void cg__fork_release(void) {
  pthread_mutex_unlock(&cg__repeat_mutex);
}
__attribute__((constructor)) static void cg__fork_register(void) {
  pthread_atfork(cg__fork_prepare, cg__fork_release, cg__fork_release);
}
static struct cg__seen cg__seen[CG_REPEAT_SLOTS];

/* A number of the calling thread, unique for the process's life (pthread_t values are
 * reused once a thread is joined). */
static uint64_t cg__thread_id(void) {
  static uint64_t next;
  static CG_TLS uint64_t mine;
  if (!mine)
    mine = __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
  return mine;
}
static size_t cg__next;
/* How many slots hold failed=1, written under cg__repeat_mutex.  Only a failed slot is
 * ever read (cg_repeat_note) or needs ending (cg_repeat_done with CG_REPEAT_OK): with none,
 * both return at once without the lock or the scan of CG_REPEAT_SLOTS (issue 16: most
 * calls end ok, so this is the common case).  A thread's own failed slot keeps it >= 1
 * until that slot is ended or evicted, so its next cg_repeat_note cannot miss it. */
static size_t cg__nfailed;

uint64_t cg_repeat_key(const char *method, const char *url, const char *body_digest) {
  XXH3_state_t st;
  size_t nm = strlen(method) + 1, nu = strlen(url) + 1, nd = body_digest ? strlen(body_digest) : 0;
  char buf[1024];

  /* The same bytes hashed at once: XXH3 of a concatenation is the streamed hash of its
   * parts (the value must not change: limiter.c keys the state file's pools with it), and
   * one call costs a quarter of the reset, updates and digest (issue 16). */
  if (nm + nu + nd <= sizeof(buf)) {
    memcpy(buf, method, nm);
    memcpy(buf + nm, url, nu);
    if (nd)
      memcpy(buf + nm + nu, body_digest, nd);
    return XXH3_64bits(buf, nm + nu + nd);
  }
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, method, strlen(method) + 1);
  XXH3_64bits_update(&st, url, strlen(url) + 1);
  if (body_digest)
    XXH3_64bits_update(&st, body_digest, strlen(body_digest));
  return XXH3_64bits_digest(&st);
}

uint64_t cg_repeat_key_call(const char *method, const char *url, const uint64_t body_hash[2]) {
  /* The body's hash seeds the method's, which seeds the URL's: each part changes the key
   * as a whole (a seed changes every XXH3 output bit), the NULs need not be hashed. */
  uint64_t seed = body_hash ? body_hash[0] ^ (body_hash[1] * UINT64_C(0x9E3779B97F4A7C15)) : 0;
  size_t nm = strlen(method);
  if (nm < 8) { /* GET, POST, DELETE...: its bytes and length folded in, no hash */
    uint64_t m = 0;
    memcpy(&m, method, nm); /* nm < 8: the top byte is free for the length */
    seed ^= (m | (uint64_t) nm << 56) * UINT64_C(0xC2B2AE3D27D4EB4F);
  } else {
    seed = XXH3_64bits_withSeed(method, nm, seed);
  }
  return XXH3_64bits_withSeed(url, strlen(url), seed);
}

int cg_repeat_note(uint64_t key, uint64_t worker, int64_t now_ms, int64_t window_ms, char *prev,
                   size_t len) {
  int repeats = 0;
  uint64_t me;
  size_t i;

  if (!__atomic_load_n(&cg__nfailed, __ATOMIC_ACQUIRE))
    return 0; /* no failed call to repeat */
  me = worker ? worker : cg__thread_id();
  pthread_mutex_lock(&cg__repeat_mutex);
  for (i = 0; i < CG_REPEAT_SLOTS; i++) {
    const struct cg__seen *s = &cg__seen[i];
    if (s->key == key && s->t_ms && s->failed && s->thread == me &&
        now_ms - s->t_ms <= window_ms) {
      repeats = s->repeats + 1;
      snprintf(prev, len, "%s", s->request_id);
      break;
    }
  }
  pthread_mutex_unlock(&cg__repeat_mutex);
  return repeats;
}

int cg_repeat_needs_done(enum cg_repeat_end end) {
  return end == CG_REPEAT_FAILED ||
         (end == CG_REPEAT_OK && __atomic_load_n(&cg__nfailed, __ATOMIC_ACQUIRE));
}

void cg_repeat_done(uint64_t key, uint64_t worker, enum cg_repeat_end end, int64_t now_ms,
                    int repeats, const char *chain_id) {
  struct cg__seen *hit = NULL;
  uint64_t me;
  size_t i;

  if (end == CG_REPEAT_LOCAL)
    return; /* never reached the network: neither a failure nor a refresh of a chain */
  if (end == CG_REPEAT_OK && !__atomic_load_n(&cg__nfailed, __ATOMIC_ACQUIRE))
    return; /* what it would write is read only in a failed slot (cg__nfailed) */
  me = worker ? worker : cg__thread_id();
  pthread_mutex_lock(&cg__repeat_mutex);
  /* One chain per key and worker: another worker's end of an identical call (a handle of
   * the same multi host, another thread) neither takes over nor ends this one's (a
   * helper's find: 8 identical transfers of one `curl -Z --retry 3`, each overwriting the
   * others' failure, were seen as repeats 3 times in 24, and the budget bounded nothing). */
  for (i = 0; i < CG_REPEAT_SLOTS && !hit; i++)
    if (cg__seen[i].key == key && cg__seen[i].thread == me)
      hit = &cg__seen[i];
  if (!hit && end == CG_REPEAT_FAILED) {
    hit = &cg__seen[cg__next]; /* a free slot, or the oldest */
    cg__next = (cg__next + 1) % CG_REPEAT_SLOTS;
  }
  if (hit) {
    size_t nfailed = cg__nfailed - (size_t) (hit->failed != 0);
    hit->key = key;
    hit->t_ms = now_ms;
    hit->failed = end == CG_REPEAT_FAILED;
    __atomic_store_n(&cg__nfailed, nfailed + (size_t) (hit->failed != 0), __ATOMIC_RELEASE);
    hit->thread = me;
    hit->repeats = hit->failed ? repeats : 0;
    /* A chain of repeats keeps pointing at the call that started it. */
    snprintf(hit->request_id, sizeof(hit->request_id), "%s", chain_id ? chain_id : "");
  }
  pthread_mutex_unlock(&cg__repeat_mutex);
}
