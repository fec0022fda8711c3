/* test-ascii.c - the header-name comparisons (ascii.h) against strncasecmp in the C
 * locale: every pair of bytes, every byte at every place of names of 1 to 40 bytes, and
 * random names in random case. */
#include "ascii.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A copy of `n` bytes in a block of exactly `n` bytes: a read past them is one past the
 * allocation (reported under check-asan). */
static char *exact(const char *s, size_t n) {
  char *p = malloc(n ? n : 1);
  cr_assert(p);
  memcpy(p, s, n);
  return p;
}

/* cg_ascii_lower_eq(s, lower, n) and strncasecmp agree, reading only n bytes of each. */
static void lower_agrees(const char *s, const char *lower, size_t n) {
  char *a = exact(s, n), *b = exact(lower, n);
  int want = strncasecmp(s, lower, n) == 0;
  int got = cg_ascii_lower_eq(a, b, n);
  if (got != want) {
    size_t i;
    fprintf(stderr, "n=%zu:", n);
    for (i = 0; i < n; i++)
      fprintf(stderr, " %02x/%02x", (unsigned char) s[i], (unsigned char) lower[i]);
    fprintf(stderr, "\n");
  }
  cr_assert_eq(got, want, "cg_ascii_lower_eq %d, strncasecmp %d (n %zu)", got, want, n);
  free(a);
  free(b);
}

/* A byte `lower` may hold: 'a'-'z' or 0x01-0x3f (ascii.h cg__ascii_word_miss). */
static int lower_byte(int c) {
  return (c > 0 && c < 0x40) || (c >= 'a' && c <= 'z');
}

Test(ascii, every_pair_of_bytes) {
  int x, y;
  for (x = 0; x < 256; x++)
    for (y = 0; y < 256; y++) {
      char a[2] = {(char) x, 0}, b[2] = {(char) y, 0};
      int want = strncasecmp(a, b, 1) == 0;
      cr_assert_eq(cg_ascii_byte_eq((unsigned char) x, (unsigned char) y), want,
                   "bytes %02x %02x", x, y);
      cr_assert_eq(cg_ascii_case_eq(a, b, 1), want, "bytes %02x %02x", x, y);
      if (lower_byte(y))
        lower_agrees(a, b, 1);
    }
}

/* Every byte in `s` at every place of an n-byte name, against every byte a lower-case
 * name may hold there, the other places equal in some case: each lane of each word of
 * cg_ascii_lower_eq, and the 4-byte and byte-wise ends. */
Test(ascii, every_byte_at_every_place) {
  static const char base[] = "x-ratelimit-remaining-requests-and-more-0123";
  size_t n, i;
  int b, c;
  for (n = 1; n <= 40; n++)
    for (i = 0; i < n; i++)
      for (c = 1; c < 0x80; c++) {
        char s[48], lower[48];
        if (!lower_byte(c))
          continue;
        memcpy(lower, base, n);
        lower[i] = (char) c;
        memcpy(s, lower, n);
        for (b = 0; b < 256; b++) {
          size_t k;
          s[i] = (char) b;
          /* The other places in upper case at odd places, so that case is ignored in
           * every lane at once. */
          for (k = 0; k < n; k++)
            if (k != i)
              s[k] = (char) (k % 2 && lower[k] >= 'a' && lower[k] <= 'z' ? lower[k] - 32
                                                                          : lower[k]);
          lower_agrees(s, lower, n);
        }
      }
}

Test(ascii, random_names) {
  static const char pool[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_:\r\n\t 09"
                             "@[`{\x7f\x80\xc1\xe1\xff";
  unsigned seed = 16;
  int round;
  for (round = 0; round < 200000; round++) {
    char s[41], lower[41], t[41];
    size_t n = (size_t) (rand_r(&seed) % 40) + 1, k;
    for (k = 0; k < n; k++) {
      int c;
      do
        c = (unsigned char) pool[rand_r(&seed) % (sizeof(pool) - 1)];
      while (!lower_byte(c));
      lower[k] = (char) c;
      /* Mostly the same name in some case, at times one byte else. */
      s[k] = (char) (rand_r(&seed) % 2 && c >= 'a' && c <= 'z' ? c - 32 : c);
      if (rand_r(&seed) % 50 == 0)
        s[k] = pool[rand_r(&seed) % (sizeof(pool) - 1)];
    }
    s[n] = lower[n] = '\0';
    lower_agrees(s, lower, n);
    /* cg_ascii_case_eq: any two strings, the first at times shorter than n. */
    memcpy(t, s, n + 1);
    if (rand_r(&seed) % 8 == 0)
      t[rand_r(&seed) % n] = '\0';
    cr_assert_eq(cg_ascii_case_eq(t, lower, n), strncasecmp(t, lower, n) == 0);
    cr_assert_eq(cg_ascii_case_eq(lower, t, n), strncasecmp(lower, t, n) == 0);
  }
}

/* A string that ends before n bytes is unequal, and nothing past its NUL is read
 * (cg_ascii_case_eq stops at the first difference). */
Test(ascii, case_eq_stops_at_the_end) {
  char *s = exact("Idem", 5); /* "Idem" and its NUL, nothing after */
  cr_assert_eq(cg_ascii_case_eq(s, "idempotency-key", 15), 0);
  cr_assert_eq(cg_ascii_case_eq(s, "IDEM", 4), 1);
  cr_assert_eq(cg_ascii_case_eq(s, "idem", 5), 1); /* both end: as strncasecmp */
  free(s);
  cr_assert_eq(cg_ascii_case_eq("Content-Type: x", "Idempotency-Key", 15), 0);
  cr_assert_eq(cg_ascii_case_eq("IDEMPOTENCY-KEY: x", "Idempotency-Key", 15), 1);
}

/* The header names the guard reads, as servers send them. */
Test(ascii, header_names) {
  cr_assert(cg_ascii_lower_eq("Content-Type", "content-type", 12));
  cr_assert(cg_ascii_lower_eq("CONTENT-LENGTH", "content-length", 14));
  cr_assert(cg_ascii_lower_eq("Date", "date", 4));
  cr_assert(cg_ascii_lower_eq("Location", "location", 8));
  cr_assert(cg_ascii_lower_eq("RateLimit", "ratelimit", 9));
  cr_assert(cg_ascii_lower_eq("anthropic-ratelimit-requests-remaining",
                              "anthropic-ratelimit-requests-remaining", 38));
  cr_assert(!cg_ascii_lower_eq("Content_Type", "content-type", 12));
  cr_assert(!cg_ascii_lower_eq("Content-Typ\x05", "content-type", 12));
  cr_assert(!cg_ascii_lower_eq("Dat\x05", "date", 4)); /* 'e' ^ 0x60 */
  cr_assert(!cg_ascii_lower_eq("\rate", "-ate", 4)); /* '\r' | 0x20 is '-' */
  cr_assert(
      !cg_ascii_lower_eq("x\0ratelimit-limit-requests", "x-ratelimit-limit-requests", 26));
  cr_assert(cg_ascii_lower_eq("text/event-stream; charset=utf-8", "text/event-stream", 17));
  cr_assert(cg_ascii_lower_eq("Application/JSON", "application/json", 16));
  cr_assert(!cg_ascii_lower_eq("application/jso", "application/json", 16));
}
