/* rng.h - per-thread pseudo-random numbers for jitter and request ids.
 *
 * xoshiro256** (Blackman and Vigna, https://prng.di.unimi.it/), seeded from
 * getrandom(2) on first use in each thread and again whenever the process id
 * changes, so a forked child never repeats its parent's sequence.  Not for secrets.
 */
#ifndef CG_RNG_H
#define CG_RNG_H

#include <stdint.h>

/* A uniformly distributed 64-bit value. */
uint64_t cg_rand64(void);

/* A uniform double in [0, 1). */
double cg_rand_unit(void);

/* A uniform integer in [lo, hi] (lo <= hi). */
int64_t cg_rand_range(int64_t lo, int64_t hi);

/* A random (version 4) UUID in canonical text form into `out` (>= 37 bytes). */
void cg_uuid4(char out[37]);

#endif
