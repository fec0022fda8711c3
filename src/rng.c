/* rng.c - per-thread xoshiro256** seeded from getrandom(2) (see rng.h). */
#include "rng.h"

#include "hex.h"
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

void cg_uuid4(char out[37]) {
  uint64_t a = cg_rand64(), b = cg_rand64();
  char hex[32];
  a = (a & 0xFFFFFFFFFFFF0FFFull) | 0x0000000000004000ull; /* version 4 */
  b = (b & 0x3FFFFFFFFFFFFFFFull) | 0x8000000000000000ull; /* RFC 4122 variant */
  /* %08x-%04x-%04x-%04x-%012llx of a's and b's digits, without a printf per request */
  cg_hex64(a, hex);
  cg_hex64(b, hex + 16);
  memcpy(out, hex, 8);
  out[8] = '-';
  memcpy(out + 9, hex + 8, 4);
  out[13] = '-';
  memcpy(out + 14, hex + 12, 4);
  out[18] = '-';
  memcpy(out + 19, hex + 16, 4);
  out[23] = '-';
  memcpy(out + 24, hex + 20, 12);
  out[36] = '\0';
}
