/* ascii.h - case-insensitive comparison of header names, without strncasecmp.
 *
 * HTTP field names are ASCII tokens compared case-insensitively (RFC 9110 section 5.1),
 * as libcurl compares them itself (lib/strcase.c, curl_strnequal: ASCII only, whatever
 * the locale).  The guard compared them with glibc's strncasecmp: a call into libc for
 * each candidate name, ~45 instructions and lines of libc's code on every request, a few
 * times a request (issue 16).  These compare as strncasecmp(a, b, n) == 0 does in the C
 * locale: ASCII letters equal to their other case, every other byte only to itself, and
 * the comparison ends (unequal) where `a` ends before `n` bytes.
 * tests/unit/test-ascii.c checks them against strncasecmp for every pair of bytes. */
#ifndef CG_ASCII_H
#define CG_ASCII_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* 1 when the bytes `x` and `y` are equal but for the case of an ASCII letter. */
static inline int cg_ascii_byte_eq(unsigned char x, unsigned char y) {
  return x == y || ((x ^ y) == 0x20 && (unsigned char) ((x | 0x20) - 'a') < 26);
}

/* strncasecmp(a, b, n) == 0 in the C locale: a byte at a time, ending at the first
 * difference (so never past the end of either string: a NUL equals only a NUL).  For
 * names neither of which is known in advance (the host's request headers, handle.c). */
static inline int cg_ascii_case_eq(const char *a, const char *b, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    if (!cg_ascii_byte_eq((unsigned char) a[i], (unsigned char) b[i]))
      return 0;
    if (!a[i])
      return 1; /* both ended together, as strncasecmp stops */
  }
  return 1;
}

/* The bits of the 8 bytes `w` that differ from the bytes `l` beyond what case allows:
 * 0 when they are equal but for the case of letters.  Each byte of `l` is 'a'-'z' or
 * below 0x40 (digits, '-', '/', ...: what header names and media types the guard knows
 * are made of): bit 6 (0x40) is set in its letters alone, and moved down to bit 5 it is
 * the case bit that `w`'s byte may have either way there ('A' | 0x20 is 'a', and no
 * other byte | 0x20 is); every other byte is compared whole. */
static inline uint64_t cg__ascii_word_miss(uint64_t w, uint64_t l) {
  return (w | (l >> 1 & UINT64_C(0x2020202020202020))) ^ l;
}

/* strncasecmp(s, lower, n) == 0 in the C locale, for a name the guard knows in lower
 * case: `lower` has at least `n` bytes, each 'a'-'z' or 0x01-0x3f (cg__ascii_word_miss);
 * `s` has at least `n` bytes to read (a NUL among them makes it unequal, as with
 * strncasecmp).  Eight bytes at a time, the last eight overlapping the ones before, and
 * one test at the end: ~7 instructions a word, no call and no branch a byte (issue 16:
 * the header names of every response). */
static inline int cg_ascii_lower_eq(const char *s, const char *lower, size_t n) {
  uint64_t w, l, miss = 0;
  size_t i;

  if (n >= 8) {
#pragma GCC unroll 1 /* names are short: a loop of few lines (issue 16), not unrolled */
    for (i = 0; i + 8 < n; i += 8) {
      memcpy(&w, s + i, 8);
      memcpy(&l, lower + i, 8);
      miss |= cg__ascii_word_miss(w, l);
    }
    memcpy(&w, s + n - 8, 8);
    memcpy(&l, lower + n - 8, 8);
  } else if (__builtin_expect(n >= 4, 1)) { /* two 4-byte halves, overlapping when n < 8 */
    uint32_t w0, w1, l0, l1;
    memcpy(&w0, s, 4);
    memcpy(&w1, s + n - 4, 4);
    memcpy(&l0, lower, 4);
    memcpy(&l1, lower + n - 4, 4);
    w = w0 | (uint64_t) w1 << 32;
    l = l0 | (uint64_t) l1 << 32;
  } else {
    w = l = 0;
    for (i = 0; i < n; i++) {
      w |= (uint64_t) (unsigned char) s[i] << 8 * i;
      l |= (uint64_t) (unsigned char) lower[i] << 8 * i;
    }
  }
  return (miss | cg__ascii_word_miss(w, l)) == 0; /* the last word's test, for every n */
}

#endif
