/* window.c - sliding-window counts in shared CAS words (see window.h). */
#include "window.h"

#define CG_CAS_TRIES 1000 /* bounded: a lost race is retried, never spun forever */

#define cg__load(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define cg__cas(p, expp, v)                                                               \
  __atomic_compare_exchange_n((p), (expp), (v), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)

static uint64_t cg__pack(uint32_t epoch, uint32_t a, uint32_t b) {
  if (a > CG_WINDOW_COUNT_MAX)
    a = CG_WINDOW_COUNT_MAX;
  if (b > CG_WINDOW_COUNT_MAX)
    b = CG_WINDOW_COUNT_MAX;
  return (uint64_t) epoch << 32 | (uint64_t) a << 16 | b;
}

static uint32_t cg__epoch(uint64_t w) {
  return (uint32_t) (w >> 32);
}

static uint32_t cg__a(uint64_t w) {
  return (uint32_t) (w >> 16) & CG_WINDOW_COUNT_MAX;
}

static uint32_t cg__b(uint64_t w) {
  return (uint32_t) w & CG_WINDOW_COUNT_MAX;
}

int64_t cg_window_width(int64_t window_ns) {
  int64_t w = window_ns / CG_STATE_BUCKETS;
  return w < 1000000 ? 1000000 : w;
}

static uint32_t cg__now_epoch(int64_t now_ns, int64_t width_ns) {
  return (uint32_t) ((uint64_t) (now_ns > 0 ? now_ns : 0) / (uint64_t) width_ns);
}

/* Whether a bucket of epoch `e` is inside the window ending in epoch `cur`. */
static int cg__live(uint32_t e, uint32_t cur) {
  return (uint32_t) (cur - e) < CG_STATE_BUCKETS;
}

/* The totals of every live bucket except index `skip` (-1: none). */
static void cg__sum_except(const uint64_t *buckets, uint32_t cur, int skip, uint32_t *a,
                           uint32_t *b) {
  int i;
  *a = *b = 0;
  for (i = 0; i < CG_STATE_BUCKETS; i++) {
    uint64_t w = cg__load(&buckets[i]);
    if (i == skip || !w || !cg__live(cg__epoch(w), cur))
      continue;
    *a += cg__a(w);
    *b += cg__b(w);
  }
}

void cg_window_sum(const uint64_t *buckets, int64_t now_ns, int64_t width_ns, uint32_t *a,
                   uint32_t *b) {
  cg__sum_except(buckets, cg__now_epoch(now_ns, width_ns), -1, a, b);
}

int cg_window_add_if(uint64_t *buckets, int64_t now_ns, int64_t width_ns, uint32_t da,
                     uint32_t db, int (*allow)(uint32_t a, uint32_t b, void *arg), void *arg) {
  uint32_t cur = cg__now_epoch(now_ns, width_ns);
  int idx = (int) (cur % CG_STATE_BUCKETS), tries;
  uint64_t *slot = &buckets[idx];

  for (tries = 0; tries < CG_CAS_TRIES; tries++) {
    uint64_t w = cg__load(slot), next;
    uint32_t a = 0, b = 0, oa, ob;
    if (w && cg__epoch(w) == cur) {
      a = cg__a(w);
      b = cg__b(w);
    }
    if (allow) {
      /* The other buckets are summed again on every try: one may have rotated. */
      cg__sum_except(buckets, cur, idx, &oa, &ob);
      if (!allow(oa + a + da, ob + b + db, arg))
        return 0;
    }
    next = cg__pack(cur, a + da, b + db);
    if (cg__cas(slot, &w, next))
      return 1;
  }
  return 0; /* lost every race: counted as refused, never as an unchecked addition */
}

void cg_window_add(uint64_t *buckets, int64_t now_ns, int64_t width_ns, uint32_t da,
                   uint32_t db) {
  cg_window_add_if(buckets, now_ns, width_ns, da, db, NULL, NULL);
}

int cg_window_take_b(uint64_t *buckets, int64_t at_ns, int64_t now_ns, int64_t width_ns,
                     uint32_t db) {
  uint32_t at = cg__now_epoch(at_ns, width_ns), cur = cg__now_epoch(now_ns, width_ns);
  uint64_t *slot = &buckets[at % CG_STATE_BUCKETS];
  int tries;

  if (!cg__live(at, cur))
    return 0;
  for (tries = 0; tries < CG_CAS_TRIES; tries++) {
    uint64_t w = cg__load(slot);
    uint32_t b;
    if (!w || cg__epoch(w) != at)
      return 0; /* rotated out meanwhile: nothing of ours left in it */
    b = cg__b(w);
    if (cg__cas(slot, &w, cg__pack(at, cg__a(w), b > db ? b - db : 0)))
      return 1;
  }
  return 0;
}

void cg_window_clear(uint64_t *buckets) {
  int i;
  for (i = 0; i < CG_STATE_BUCKETS; i++)
    __atomic_store_n(&buckets[i], 0, __ATOMIC_RELEASE);
}
