/* test-hex.c - hex digits of ids and digests (hex.h, digest.h, rng.h) against printf. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "digest.h"
#include "hex.h"
#include "rng.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

static void same_as_printf(uint64_t v) {
  char want[17], got[17];
  snprintf(want, sizeof(want), "%016llx", (unsigned long long) v);
  memset(got, 'X', sizeof(got));
  cg_hex64(v, got);
  cr_assert_eq(got[16], 'X', "wrote past its 16 digits for %016llx", (unsigned long long) v);
  got[16] = '\0';
  cr_assert_str_eq(got, want);
}

Test(hex, every_nibble_at_every_place) {
  int place, nib;
  same_as_printf(0);
  same_as_printf(UINT64_MAX);
  for (place = 0; place < 16; place++)
    for (nib = 1; nib < 16; nib++)
      same_as_printf((uint64_t) nib << (4 * place));
}

Test(hex, random_values) {
  int i;
  for (i = 0; i < 100000; i++)
    same_as_printf(cg_rand64());
}

Test(hex, digest_is_both_halves) {
  static const char body[] = "{\"model\":\"gpt-4o-mini\",\"messages\":[]}";
  XXH128_hash_t h = XXH3_128bits(body, sizeof(body) - 1);
  char want[CG_DIGEST_HEX], got[CG_DIGEST_HEX];
  snprintf(want, sizeof(want), "%016llx%016llx", (unsigned long long) h.high64,
           (unsigned long long) h.low64);
  cg_digest_hex(body, sizeof(body) - 1, got);
  cr_assert_str_eq(got, want);
}

/* The two-number form (guard.c keeps it, and writes the hex only for a logged record)
 * is the same digest: cg_digest128_hex(cg_digest128(x)) == cg_digest_hex(x). */
Test(hex, digest128_hex_is_digest_hex) {
  static const char *const bodies[] = {"", "x", "{\"model\":\"gpt-4o-mini\",\"messages\":[]}",
                                       "0123456789abcdef0123456789abcdef0123456789abcdef"
                                       "0123456789abcdef0123456789abcdef0123456789abcdef"};
  size_t i;
  for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
    uint64_t h[2];
    char want[CG_DIGEST_HEX], got[CG_DIGEST_HEX];
    cg_digest_hex(bodies[i], strlen(bodies[i]), want);
    cg_digest128(bodies[i], strlen(bodies[i]), h);
    cg_digest128_hex(h, got);
    cr_assert_str_eq(got, want, "body %zu", i);
  }
}
