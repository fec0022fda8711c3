/* report-map.h - a bounded open-addressing hash map from 64-bit keys to 64-bit values,
 * for `curlguard report` (digests, task ids, unfinished calls, minutes).
 *
 * Linear probing, at most 3/4 full, doubling from 1024 slots up to a fixed maximum
 * number of slots given at init (16 bytes each).  When the maximum is reached, new keys
 * are refused (cg_rmap_put returns NULL and sets `full`): the caller reports that its
 * counts are lower bounds rather than letting memory grow.  Deletion shifts entries back
 * (no tombstones), so a map used as a set of calls in flight never fills up with dead
 * slots.  String keys are hashed with 64-bit FNV-1a: two distinct strings collide with
 * probability about n^2 / 2^65 (1e-7 for 3 million strings).
 */
#ifndef CG_REPORT_MAP_H
#define CG_REPORT_MAP_H

#include <stddef.h>
#include <stdint.h>

struct cg_rmap_slot {
  uint64_t key;    /* 0 = empty (a real key 0 is stored as a fixed non-zero value) */
  uint64_t val;
};

struct cg_rmap {
  struct cg_rmap_slot *slot;
  size_t cap;       /* slots, a power of two */
  size_t count;     /* keys stored */
  size_t max_cap;   /* slots never grow beyond this */
  int full;         /* a new key was refused: the cap was hit (or memory ran out) */
};

/* An empty map that may grow to `max_slots` (a power of two >= 1024); it holds at most
 * 3/4 of that many keys.  Allocates nothing until the first put. */
void cg_rmap_init(struct cg_rmap *m, size_t max_slots);

/* The value of `key`, or NULL. */
uint64_t *cg_rmap_get(const struct cg_rmap *m, uint64_t key);

/* The value of `key`, inserted as 0 if absent (`*created` = 1 then).  NULL when the key
 * is new and the map is at its cap or out of memory (`full` is set). */
uint64_t *cg_rmap_put(struct cg_rmap *m, uint64_t key, int *created);

/* Remove `key`; 1 if it was there. */
int cg_rmap_del(struct cg_rmap *m, uint64_t key);

/* Visit every entry: `fn(key, val, arg)` (order unspecified). */
void cg_rmap_each(const struct cg_rmap *m, void (*fn)(uint64_t, uint64_t, void *), void *arg);

/* Free the slots (the map is empty and usable again). */
void cg_rmap_free(struct cg_rmap *m);

/* 64-bit FNV-1a of the NUL-terminated `s`. */
uint64_t cg_rhash(const char *s);

#endif
