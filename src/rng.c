/* rng.c - per-thread xoshiro256** seeded from getrandom(2) (see rng.h). */
#include "rng.h"

#include "proc.h"
#include "tls.h"

#include <stdio.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

struct cg__rng {
  uint64_t s[4];
  pid_t pid;
};

static CG_TLS struct cg__rng cg__tls_rng;

static uint64_t cg__rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

/* splitmix64, to expand a weak fallback seed into a full state. */
static uint64_t cg__splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void cg__seed(struct cg__rng *r, pid_t pid) {
  if (getrandom(r->s, sizeof(r->s), GRND_NONBLOCK) != (ssize_t) sizeof(r->s)) {
    struct timespec ts;
    uint64_t x;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    x = (uint64_t) ts.tv_nsec ^ ((uint64_t) ts.tv_sec << 20) ^ ((uint64_t) pid << 40) ^
        (uint64_t) (uintptr_t) r;
    for (int i = 0; i < 4; i++)
      r->s[i] = cg__splitmix(&x);
  }
  if ((r->s[0] | r->s[1] | r->s[2] | r->s[3]) == 0)
    r->s[0] = 1;
  r->pid = pid;
}

uint64_t cg_rand64(void) {
  struct cg__rng *r = &cg__tls_rng;
  pid_t pid = cg_pid(); /* a child reseeds (proc.h: no system call per draw) */
  uint64_t result, t;

  if (r->pid != pid)
    cg__seed(r, pid);
  result = cg__rotl(r->s[1] * 5, 7) * 9;
  t = r->s[1] << 17;
  r->s[2] ^= r->s[0];
  r->s[3] ^= r->s[1];
  r->s[1] ^= r->s[2];
  r->s[0] ^= r->s[3];
  r->s[2] ^= t;
  r->s[3] = cg__rotl(r->s[3], 45);
  return result;
}

double cg_rand_unit(void) {
  return (double) (cg_rand64() >> 11) * 0x1.0p-53;
}

int64_t cg_rand_range(int64_t lo, int64_t hi) {
  uint64_t span;
  if (hi <= lo)
    return lo;
  span = (uint64_t) hi - (uint64_t) lo + 1; /* unsigned: no overflow for any lo <= hi */
  if (span == 0)
    return (int64_t) cg_rand64();
  return lo + (int64_t) (cg_rand64() % span);
}

/* `n` lower-case hex digits of `v` (its low 4n bits) at `out`: what "%0<n>llx" writes,
 * without a printf per request. */
static void cg__hex(char *out, uint64_t v, int n) {
  static const char digits[] = "0123456789abcdef";
  while (n-- > 0) {
    out[n] = digits[v & 15];
    v >>= 4;
  }
}

void cg_uuid4(char out[37]) {
  uint64_t a = cg_rand64(), b = cg_rand64();
  a = (a & 0xFFFFFFFFFFFF0FFFull) | 0x0000000000004000ull; /* version 4 */
  b = (b & 0x3FFFFFFFFFFFFFFFull) | 0x8000000000000000ull; /* RFC 4122 variant */
  /* %08x-%04x-%04x-%04x-%012llx */
  cg__hex(out, a >> 32, 8);
  out[8] = '-';
  cg__hex(out + 9, a >> 16, 4);
  out[13] = '-';
  cg__hex(out + 14, a, 4);
  out[18] = '-';
  cg__hex(out + 19, b >> 48, 4);
  out[23] = '-';
  cg__hex(out + 24, b, 12);
  out[36] = '\0';
}
