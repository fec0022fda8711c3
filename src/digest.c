/* digest.c - XXH3-128 body digests (see digest.h). */
/* xxHash's code as gcc -O2 compiles it without a profile: its loops neither unrolled nor
 * peeled.  The profile's copies made XXH3-128 of the bench's 202-byte chat request 19
 * code lines a request, of its 261-byte streamed one 17; as loops, 10 and 8, for 1 and 4
 * more taken branches (issue 16).  Options, not code: the digests are the same.  (clang,
 * the fuzz build, knows no such pragma, and has no profile.) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-unroll-loops", "no-peel-loops")
#endif
#define XXH_INLINE_ALL
#include <xxhash.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#include "digest.h"
#include "hex.h"

#include <stdio.h>

struct cg_digest {
  XXH3_state_t *st;
};

/* "%016llx%016llx" of the high and low halves, without a printf per request. */
static void cg__hex(XXH128_hash_t h, char out[CG_DIGEST_HEX]) {
  cg_hex64(h.high64, out);
  cg_hex64(h.low64, out + 16);
  out[32] = '\0';
}

void cg_digest_hex(const void *p, size_t n, char out[CG_DIGEST_HEX]) {
  cg__hex(XXH3_128bits(p, n), out);
}

void cg_digest128(const void *p, size_t n, uint64_t out[2]) {
  XXH128_hash_t h = XXH3_128bits(p, n);
  out[0] = h.high64;
  out[1] = h.low64;
}

void cg_digest128_hex(const uint64_t h[2], char out[CG_DIGEST_HEX]) {
  XXH128_hash_t x;
  x.high64 = h[0];
  x.low64 = h[1];
  cg__hex(x, out);
}

struct cg_digest *cg_digest_new(void) {
  struct cg_digest *d = malloc(sizeof(*d));
  if (!d)
    return NULL;
  d->st = XXH3_createState();
  if (!d->st) {
    free(d);
    return NULL;
  }
  XXH3_128bits_reset(d->st);
  return d;
}

void cg_digest_update(struct cg_digest *d, const void *p, size_t n) {
  XXH3_128bits_update(d->st, p, n);
}

void cg_digest_final(struct cg_digest *d, char out[CG_DIGEST_HEX]) {
  cg__hex(XXH3_128bits_digest(d->st), out);
}

void cg_digest_reset(struct cg_digest *d) {
  XXH3_128bits_reset(d->st);
}

void cg_digest_free(struct cg_digest *d) {
  if (d) {
    XXH3_freeState(d->st);
    free(d);
  }
}
