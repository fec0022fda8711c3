/* hex.h - lower-case hex digits of 64-bit values, for the ids and digests written on
 * every request (issue 16: a digit at a time was ~7 instructions each, 64 of them a
 * request). */
#ifndef CG_HEX_H
#define CG_HEX_H

#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* The 16 hex digits of `v`, most significant first, at `out` (no NUL): what
 * snprintf's "%016llx" writes.  SSE2: the 16 nibbles in one register, each made a
 * digit ('0' + n, 39 more for 'a'-'f'). */
static inline void cg_hex64(uint64_t v, char out[16]) {
#ifdef __SSE2__
  __m128i x = _mm_cvtsi64_si128((long long) __builtin_bswap64(v)); /* bytes, high first */
  __m128i lo = _mm_and_si128(x, _mm_set1_epi8(0x0f));
  __m128i hi = _mm_and_si128(_mm_srli_epi16(x, 4), _mm_set1_epi8(0x0f));
  __m128i n = _mm_unpacklo_epi8(hi, lo); /* each byte's high nibble, then its low one */
  __m128i letter = _mm_and_si128(_mm_cmpgt_epi8(n, _mm_set1_epi8(9)), _mm_set1_epi8(39));
  _mm_storeu_si128((__m128i *) (void *) out,
                   _mm_add_epi8(_mm_add_epi8(n, _mm_set1_epi8('0')), letter));
#else
  static const char digits[] = "0123456789abcdef";
  int i;
  for (i = 15; i >= 0; i--, v >>= 4)
    out[i] = digits[v & 15];
#endif
}

#endif
