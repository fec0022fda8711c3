/* report-map.c - bounded open-addressing hash map (see report-map.h). */
#include "report-map.h"

#include <stdlib.h>
#include <string.h>

#define CG_RMAP_MIN 1024
#define CG_RMAP_ZERO 0x9e3779b97f4a7c15ULL /* stands for key 0, which marks empty slots */

/* splitmix64's finaliser: spreads keys that are not hashes already (minutes). */
static size_t cg__mix(uint64_t k) {
  k ^= k >> 30;
  k *= 0xbf58476d1ce4e5b9ULL;
  k ^= k >> 27;
  k *= 0x94d049bb133111ebULL;
  k ^= k >> 31;
  return (size_t) k;
}

void cg_rmap_init(struct cg_rmap *m, size_t max_slots) {
  memset(m, 0, sizeof(*m));
  m->max_cap = max_slots < CG_RMAP_MIN ? CG_RMAP_MIN : max_slots;
}

static struct cg_rmap_slot *cg__find(const struct cg_rmap *m, uint64_t key) {
  size_t mask = m->cap - 1, i = cg__mix(key) & mask;
  /* Bounded: the map is never full, so an empty slot ends the probe within cap steps. */
  for (size_t n = 0; n < m->cap; n++, i = (i + 1) & mask) {
    if (m->slot[i].key == key || m->slot[i].key == 0)
      return &m->slot[i];
  }
  return NULL;
}

static int cg__grow(struct cg_rmap *m) {
  size_t cap = m->cap ? m->cap * 2 : CG_RMAP_MIN;
  struct cg_rmap old = *m;
  struct cg_rmap_slot *s = calloc(cap, sizeof(*s));

  if (!s)
    return -1;
  m->slot = s;
  m->cap = cap;
  for (size_t i = 0; i < old.cap; i++)
    if (old.slot[i].key)
      *cg__find(m, old.slot[i].key) = old.slot[i];
  free(old.slot);
  return 0;
}

uint64_t *cg_rmap_get(const struct cg_rmap *m, uint64_t key) {
  struct cg_rmap_slot *s;

  if (!m->cap)
    return NULL;
  key = key ? key : CG_RMAP_ZERO;
  s = cg__find(m, key);
  return s && s->key == key ? &s->val : NULL;
}

uint64_t *cg_rmap_put(struct cg_rmap *m, uint64_t key, int *created) {
  struct cg_rmap_slot *s;

  key = key ? key : CG_RMAP_ZERO;
  *created = 0;
  if (m->cap) {
    s = cg__find(m, key);
    if (s->key == key)
      return &s->val;
  }
  if ((m->count + 1) * 4 > m->cap * 3) {
    if (m->cap >= m->max_cap || cg__grow(m) != 0) {
      m->full = 1;
      return NULL;
    }
  }
  s = cg__find(m, key);
  s->key = key;
  s->val = 0;
  m->count++;
  *created = 1;
  return &s->val;
}

int cg_rmap_del(struct cg_rmap *m, uint64_t key) {
  size_t mask, i, j;
  struct cg_rmap_slot *s;

  if (!m->cap)
    return 0;
  key = key ? key : CG_RMAP_ZERO;
  s = cg__find(m, key);
  if (!s || s->key != key)
    return 0;
  mask = m->cap - 1;
  i = (size_t) (s - m->slot);
  /* Backward-shift deletion: move later entries of the probe run into the hole when
   * their home slot does not lie cyclically in (hole, their position]. */
  for (j = (i + 1) & mask; m->slot[j].key; j = (j + 1) & mask) {
    size_t home = cg__mix(m->slot[j].key) & mask;
    int keep = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (!keep) {
      m->slot[i] = m->slot[j];
      i = j;
    }
  }
  m->slot[i].key = 0;
  m->slot[i].val = 0;
  m->count--;
  return 1;
}

void cg_rmap_each(const struct cg_rmap *m, void (*fn)(uint64_t, uint64_t, void *), void *arg) {
  for (size_t i = 0; i < m->cap; i++)
    if (m->slot[i].key)
      fn(m->slot[i].key == CG_RMAP_ZERO ? 0 : m->slot[i].key, m->slot[i].val, arg);
}

void cg_rmap_free(struct cg_rmap *m) {
  size_t max = m->max_cap;
  free(m->slot);
  cg_rmap_init(m, max);
}

uint64_t cg_rhash(const char *s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (; *s; s++) {
    h ^= (unsigned char) *s;
    h *= 0x100000001b3ULL;
  }
  return h;
}
