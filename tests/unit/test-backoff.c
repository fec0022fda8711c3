/* test-backoff.c - backoff with jitter and server hints (backoff.h, SPEC section 7,
 * CASES.md "Retry-After and friends"). */
#include "backoff.h"
#include "saturate.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- cg_backoff_ms ---- */

Test(backoff, none_is_the_capped_exponential) {
  static const int64_t want[] = {1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000,
                                 30000};
  int k;
  for (k = 1; k <= 10; k++)
    cr_expect_eq(cg_backoff_ms(CG_JITTER_NONE, 1000, 30000, k, 0, 0.5), want[k - 1],
                 "k=%d: %lld", k,
                 (long long) cg_backoff_ms(CG_JITTER_NONE, 1000, 30000, k, 0, 0.5));
}

Test(backoff, none_other_bases) {
  cr_expect_eq(cg_backoff_ms(CG_JITTER_NONE, 250, 1000000, 5, 0, 0), 4000);
  cr_expect_eq(cg_backoff_ms(CG_JITTER_NONE, 100, 100, 3, 0, 0), 100);
  cr_expect_eq(cg_backoff_ms(CG_JITTER_NONE, 1000, 30000, 0, 0, 0), 1000, "k < 1 means k = 1");
}

/* The ceiling of retry k for base 1000, cap 30000. */
static int64_t ceiling(int k) {
  int64_t c = 1000;
  while (--k > 0 && c < 30000)
    c *= 2;
  return c < 30000 ? c : 30000;
}

static const double units[] = {0.0, 1e-9, 0.25, 0.5, 0.75, 0.999, 0.999999};

Test(backoff, full_in_zero_to_ceiling) {
  int k;
  size_t u;
  for (k = 1; k <= 10; k++) {
    for (u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
      int64_t v = cg_backoff_ms(CG_JITTER_FULL, 1000, 30000, k, 0, units[u]);
      cr_expect(v >= 0 && v <= ceiling(k), "full k=%d unit %.17g: %lld not in [0, %lld]", k,
                units[u], (long long) v, (long long) ceiling(k));
    }
    cr_expect_eq(cg_backoff_ms(CG_JITTER_FULL, 1000, 30000, k, 0, 0.0), 0, "unit 0 -> 0");
    cr_expect_geq(cg_backoff_ms(CG_JITTER_FULL, 1000, 30000, k, 0, 0.999999), ceiling(k) - 1,
                  "unit ~1 reaches the ceiling");
  }
  /* Uniform: the middle unit lands near the middle. */
  cr_expect(llabs(cg_backoff_ms(CG_JITTER_FULL, 1000, 30000, 6, 0, 0.5) - 15000) <= 1);
}

Test(backoff, equal_in_half_to_ceiling) {
  int k;
  size_t u;
  for (k = 1; k <= 10; k++) {
    for (u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
      int64_t v = cg_backoff_ms(CG_JITTER_EQUAL, 1000, 30000, k, 0, units[u]);
      cr_expect(v >= ceiling(k) / 2 && v <= ceiling(k),
                "equal k=%d unit %.17g: %lld not in [%lld, %lld]", k, units[u], (long long) v,
                (long long) ceiling(k) / 2, (long long) ceiling(k));
    }
    cr_expect_eq(cg_backoff_ms(CG_JITTER_EQUAL, 1000, 30000, k, 0, 0.0), ceiling(k) / 2);
  }
}

Test(backoff, decorrelated_in_base_to_three_times_previous) {
  static const int64_t prevs[] = {0, 1000, 1500, 4000, 9000, 10000, 20000, 30000};
  size_t p, u;
  for (p = 0; p < sizeof(prevs) / sizeof(prevs[0]); p++) {
    int64_t prev = prevs[p] ? prevs[p] : 1000; /* before the first retry: base */
    int64_t hi = 3 * prev < 30000 ? 3 * prev : 30000;
    for (u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
      int64_t v = cg_backoff_ms(CG_JITTER_DECORRELATED, 1000, 30000, 3, prevs[p], units[u]);
      cr_expect(v >= 1000 && v <= hi, "decorrelated prev %lld unit %.17g: %lld not in [1000, %lld]",
                (long long) prevs[p], units[u], (long long) v, (long long) hi);
    }
    cr_expect_eq(cg_backoff_ms(CG_JITTER_DECORRELATED, 1000, 30000, 3, prevs[p], 0.0), 1000);
  }
}

Test(backoff, decorrelated_does_not_depend_on_k) {
  cr_expect_eq(cg_backoff_ms(CG_JITTER_DECORRELATED, 1000, 30000, 1, 2000, 0.5),
               cg_backoff_ms(CG_JITTER_DECORRELATED, 1000, 30000, 9, 2000, 0.5));
}

Test(backoff, huge_k_does_not_overflow) {
  static const int ks[] = {31, 32, 63, 64, 65, 100, 1000, 1023, 1024, 1025, 5000, INT_MAX};
  static const enum cg_jitter modes[] = {CG_JITTER_NONE, CG_JITTER_FULL, CG_JITTER_EQUAL};
  size_t i, m;
  for (i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
    cr_expect_eq(cg_backoff_ms(CG_JITTER_NONE, 1000, 30000, ks[i], 0, 0), 30000, "k=%d", ks[i]);
    for (m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
      int64_t v = cg_backoff_ms(modes[m], 1000, 30000, ks[i], 0, 0.999999);
      cr_expect(v >= 0 && v <= 30000, "mode %d k=%d: %lld", (int) modes[m], ks[i], (long long) v);
    }
  }
  cr_expect_eq(cg_backoff_ms(CG_JITTER_NONE, INT64_C(1) << 50, INT64_C(1) << 52, 100, 0, 0),
               INT64_C(1) << 52);
}

/* cg_rand_unit() can return 1 - 2^-53 ((2^53 - 1) * 2^-53, rng.c); the draw must still
 * stay inside the documented interval. */
Test(backoff, largest_unit_below_one_stays_in_range) {
  double top = nextafter(1.0, 0.0);
  int k;
  for (k = 1; k <= 6; k++) {
    int64_t c = ceiling(k);
    int64_t f = cg_backoff_ms(CG_JITTER_FULL, 1000, 30000, k, 0, top);
    int64_t e = cg_backoff_ms(CG_JITTER_EQUAL, 1000, 30000, k, 0, top);
    int64_t d = cg_backoff_ms(CG_JITTER_DECORRELATED, 1000, 30000, k, c / 3 > 1000 ? c / 3 : 1000,
                              top);
    int64_t dhi = 3 * (c / 3 > 1000 ? c / 3 : 1000);
    cr_expect(f >= 0 && f <= c, "full k=%d: %lld > %lld", k, (long long) f, (long long) c);
    cr_expect(e >= c / 2 && e <= c, "equal k=%d: %lld not in [%lld, %lld]", k, (long long) e,
              (long long) c / 2, (long long) c);
    cr_expect(d >= 1000 && d <= (dhi < 30000 ? dhi : 30000),
              "decorrelated k=%d: %lld not in [1000, %lld]", k, (long long) d,
              (long long) (dhi < 30000 ? dhi : 30000));
  }
}

/* min(cap, 0 * 2^(k-1)) is 0 for every k. */
Test(backoff, zero_base_stays_zero_for_any_k) {
  static const int ks[] = {1, 2, 10, 100, 1024, 1025, 2000, INT_MAX};
  size_t i;
  for (i = 0; i < sizeof(ks) / sizeof(ks[0]); i++)
    cr_expect_eq(cg_backoff_ms(CG_JITTER_NONE, 0, 30000, ks[i], 0, 0), 0,
                 "base 0, k=%d: %lld, want 0", ks[i],
                 (long long) cg_backoff_ms(CG_JITTER_NONE, 0, 30000, ks[i], 0, 0));
}

Test(backoff, cap_below_base_and_negative_base) {
  cr_expect_eq(cg_backoff_ms(CG_JITTER_NONE, 5000, 1000, 1, 0, 0), 5000, "cap raised to base");
  cr_expect_eq(cg_backoff_ms(CG_JITTER_NONE, -5, 1000, 3, 0, 0), 0);
}

/* ---- cg_backoff_schedule_ms ---- */

Test(backoff, schedule_is_the_sum_of_the_unjittered_waits) {
  int n;
  int64_t sum = 0;
  cr_expect_eq(cg_backoff_schedule_ms(1000, 30000, 0), 0);
  cr_expect_eq(cg_backoff_schedule_ms(1000, 30000, -3), 0);
  cr_expect_eq(cg_backoff_schedule_ms(1000, 30000, 2), 3000, "curl --retry 2: 1 s + 2 s");
  for (n = 1; n <= 40; n++) {
    sum += cg_backoff_ms(CG_JITTER_NONE, 1000, 30000, n, 0, 0);
    cr_expect_eq(cg_backoff_schedule_ms(1000, 30000, n), sum, "n=%d", n);
  }
  cr_expect_eq(cg_backoff_schedule_ms(100, 300, 3), 600);
  cr_expect_eq(cg_backoff_schedule_ms(0, 30000, 99), 0);
  cr_expect_eq(cg_backoff_schedule_ms(-5, 1000, 3), 0);
  cr_expect_eq(cg_backoff_schedule_ms(5000, 1000, 2), 10000, "cap raised to base");
}

Test(backoff, schedule_saturates) {
  cr_expect_eq(cg_backoff_schedule_ms(INT64_MAX / 2, INT64_MAX, 100), CG_DURATION_MAX_MS);
  cr_expect_eq(cg_backoff_schedule_ms(3600000, 3600000, INT_MAX), CG_DURATION_MAX_MS);
}

/* ---- cg_parse_decimal_ms ---- */

static const struct {
  const char *s;
  double unit;
  int64_t ms;
} dec_cases[] = {
    {"1.5", 1000, 1500},        /* CASES.md: 1.5 s, not 1, not a year */
    {"1", 1000, 1000},
    {"0", 1000, 0},
    {"0.25", 1000, 250},
    {"30", 1000, 30000},
    {"120", 1000, 120000},
    {".5", 1000, 500},
    {"2.", 1000, 2000},
    {" 7 ", 1000, 7000},
    {"7\r\n", 1000, 7000},
    {"250", 1, 250},
    {"0", 1, 0},
    {"-3", 1000, -1},           /* CASES.md: invalid */
    {"-1", 1, -1},
    {"+3", 1000, -1},
    {"abc", 1, -1},
    {"", 1000, -1},
    {"   ", 1000, -1},
    {".", 1000, -1},
    {"1.2.3", 1000, -1},
    {"12abc", 1000, -1},
    {"1 2", 1000, -1},
    {"0x10", 1000, -1},
    {"nan", 1000, -1},
    {"-inf", 1000, -1},
    {"1e", 1000, -1},
    {"e5", 1000, -1},
    {"1e5x", 1000, -1},
    /* Issue 11: too large to represent is the largest value ("too long"), never "no
     * hint" (RFC 9111 section 1.2.2).  Before the fix these were -1 (ignored, so the
     * call retried at once) or, past the 10^12 check, a signed overflow. */
    {"99999999999999999999999", 1000, CG_DURATION_MAX_MS},
    {"1000000000000000000000000000000", 1000, CG_DURATION_MAX_MS},
    {"1000000000000000000000000000000", 1, CG_DURATION_MAX_MS},
    {"9223372036854775807", 1000, CG_DURATION_MAX_MS},
    {"9223372036854775808", 1, CG_DURATION_MAX_MS},
    {"999999999999999.5", 1000, CG_DURATION_MAX_MS},
    {"1e309", 1000, CG_DURATION_MAX_MS},
    {"1E+309", 1, CG_DURATION_MAX_MS},
    {"inf", 1000, CG_DURATION_MAX_MS},
    {"Infinity", 1, CG_DURATION_MAX_MS},
    {"1e3", 1000, 1000000},
    {"2.5e1", 1000, 25000},
    {"1e-400", 1000, 0},
    {"31536000", 1000, 31536000000},  /* a year: a value, too long for any cap */
};

Test(backoff, parse_decimal) {
  size_t i;
  for (i = 0; i < sizeof(dec_cases) / sizeof(dec_cases[0]); i++)
    cr_expect_eq(cg_parse_decimal_ms(dec_cases[i].s, dec_cases[i].unit), dec_cases[i].ms,
                 "\"%s\" x %g -> %lld, want %lld", dec_cases[i].s, dec_cases[i].unit,
                 (long long) cg_parse_decimal_ms(dec_cases[i].s, dec_cases[i].unit),
                 (long long) dec_cases[i].ms);
  cr_expect_eq(cg_parse_decimal_ms(NULL, 1000), -1);
}

/* Decimal seconds with up to three fraction digits are whole milliseconds; binary
 * floating point must not push them up by one ("4.03" is 4030 ms, not 4031). */
Test(backoff, decimal_seconds_convert_exactly) {
  static const struct {
    const char *s;
    int64_t ms;
  } c[] = {{"2.007", 2007}, {"4.03", 4030}, {"8.05", 8050}, {"16.1", 16100}, {"0.07", 70},
           {"1.001", 1001}, {"0.3", 300}};
  size_t i;
  for (i = 0; i < sizeof(c) / sizeof(c[0]); i++)
    cr_expect_eq(cg_parse_decimal_ms(c[i].s, 1000), c[i].ms, "\"%s\" s -> %lld ms, want %lld",
                 c[i].s, (long long) cg_parse_decimal_ms(c[i].s, 1000), (long long) c[i].ms);
}

/* ---- cg_hint_ms ---- */

/* A test stand-in for curl_getdate(): the three HTTP-date forms of RFC 9110 5.6.7. */
static time_t test_getdate(const char *s, const time_t *unused) {
  static const char *const formats[] = {
      "%a, %d %b %Y %H:%M:%S GMT", /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
      "%A, %d-%b-%y %H:%M:%S GMT", /* RFC 850:     Sunday, 06-Nov-94 08:49:37 GMT */
      "%a %b %e %H:%M:%S %Y",      /* asctime:     Sun Nov  6 08:49:37 1994 */
  };
  size_t i;
  (void) unused;
  for (i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
    struct tm tm;
    const char *end;
    memset(&tm, 0, sizeof(tm));
    end = strptime(s, formats[i], &tm);
    if (end && *end == '\0')
      return timegm(&tm);
  }
  return (time_t) -1;
}

static int getdate_calls;
static time_t counting_getdate(const char *s, const time_t *unused) {
  getdate_calls++;
  return test_getdate(s, unused);
}

Test(backoff, test_getdate_parses_the_three_forms) {
  cr_assert_eq(test_getdate("Sun, 06 Nov 1994 08:49:37 GMT", NULL), 784111777);
  cr_assert_eq(test_getdate("Sunday, 06-Nov-94 08:49:37 GMT", NULL), 784111777);
  cr_assert_eq(test_getdate("Sun Nov  6 08:49:37 1994", NULL), 784111777);
  cr_assert_eq(test_getdate("not a date", NULL), (time_t) -1);
}

#define NOW_MS INT64_C(1786635403000) /* Thu, 13 Aug 2026 15:36:43 GMT */

static const struct {
  const char *name;
  const char *ms, *ra, *date;
  int64_t now;
  int64_t want;
} hint_cases[] = {
    {"none", NULL, NULL, NULL, NOW_MS, -1},
    {"delta seconds", NULL, "1", NULL, NOW_MS, 1000},
    {"fractional seconds", NULL, "1.5", NULL, NOW_MS, 1500},
    {"negative seconds", NULL, "-3", NULL, NOW_MS, -1},
    {"garbage seconds", NULL, "soon", NULL, NOW_MS, -1},
    {"ms alone", "250", NULL, NULL, NOW_MS, 250},
    {"ms wins over Retry-After", "250", "1", NULL, NOW_MS, 250},
    {"bad ms falls back to Retry-After", "abc", "1", NULL, NOW_MS, 1000},
    {"negative ms ignored", "-1", NULL, NULL, NOW_MS, -1},
    {"negative ms falls back", "-1", "2", NULL, NOW_MS, 2000},
    {"both invalid", "-1", "-3", NULL, NOW_MS, -1},
    {"zero", NULL, "0", NULL, NOW_MS, 0},
    /* HTTP-dates, measured against the response's Date. */
    {"IMF-fixdate vs Date", NULL, "Thu, 13 Aug 2026 15:37:13 GMT",
     "Thu, 13 Aug 2026 15:36:43 GMT", 0, 30000},
    {"Date wins over a skewed local clock", NULL, "Thu, 13 Aug 2026 15:37:13 GMT",
     "Thu, 13 Aug 2026 15:36:43 GMT", NOW_MS + 3600000, 30000},
    {"RFC 850 vs Date", NULL, "Sunday, 06-Nov-94 08:50:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
     NOW_MS, 60000},
    {"asctime vs Date", NULL, "Sun Nov  6 08:49:47 1994", "Sun Nov  6 08:49:37 1994", NOW_MS,
     10000},
    {"mixed forms", NULL, "Sun Nov  6 08:49:47 1994", "Sun, 06 Nov 1994 08:49:37 GMT", NOW_MS,
     10000},
    {"past date is 0", NULL, "Thu, 13 Aug 2026 15:36:00 GMT", "Thu, 13 Aug 2026 15:36:43 GMT",
     NOW_MS, 0},
    {"same date is 0", NULL, "Thu, 13 Aug 2026 15:36:43 GMT", "Thu, 13 Aug 2026 15:36:43 GMT",
     NOW_MS, 0},
    /* Without a (usable) Date header: against the local wall clock. */
    {"no Date: vs now", NULL, "Thu, 13 Aug 2026 15:37:13 GMT", NULL, NOW_MS, 30000},
    {"no Date: vs now with ms", NULL, "Thu, 13 Aug 2026 15:37:13 GMT", NULL, NOW_MS + 250, 29750},
    {"no Date: past is 0", NULL, "Thu, 13 Aug 2026 15:37:13 GMT", NULL, NOW_MS + 60000, 0},
    {"bad Date: vs now", NULL, "Thu, 13 Aug 2026 15:37:13 GMT", "yesterday", NOW_MS + 10000,
     20000},
    {"ms wins over a date", "100", "Thu, 13 Aug 2026 15:37:13 GMT",
     "Thu, 13 Aug 2026 15:36:43 GMT", NOW_MS, 100},
    {"unparsable date", NULL, "Thu, 99 Foo 2026 25:61:61 GMT", NULL, NOW_MS, -1},
};

Test(backoff, hints) {
  size_t i;
  for (i = 0; i < sizeof(hint_cases) / sizeof(hint_cases[0]); i++) {
    int64_t v = cg_hint_ms(hint_cases[i].ms, hint_cases[i].ra, hint_cases[i].date,
                           hint_cases[i].now, test_getdate);
    cr_expect_eq(v, hint_cases[i].want, "%s: %lld, want %lld", hint_cases[i].name, (long long) v,
                 (long long) hint_cases[i].want);
  }
}

Test(backoff, date_hint_without_getdate_is_none) {
  cr_assert_eq(cg_hint_ms(NULL, "Thu, 13 Aug 2026 15:37:13 GMT", NULL, NOW_MS, NULL), -1);
  cr_assert_eq(cg_hint_ms(NULL, "2", NULL, NOW_MS, NULL), 2000, "delta seconds need no parser");
}

Test(backoff, numeric_hints_never_reach_the_date_parser) {
  getdate_calls = 0;
  cr_assert_eq(cg_hint_ms(NULL, "-3", "Thu, 13 Aug 2026 15:36:43 GMT", NOW_MS, counting_getdate),
               -1);
  cr_assert_eq(cg_hint_ms("250", "1", NULL, NOW_MS, counting_getdate), 250);
  cr_assert_eq(getdate_calls, 0);
}

/* ---- hostile hints (issue 11 items 3 and 4) ---- */

/* A curl_getdate() stand-in that also returns what the real one returns for the hostile
 * dates: curl's parsedate reads any year up to 2^31 ("Retry-After: ,2Oct817853964" is
 * 2 October of year 817853964, curl test 1596), and time_t extremes. */
static time_t hostile_getdate(const char *s, const time_t *unused) {
  if (strcmp(s, ",2Oct817853964") == 0)
    return (time_t) INT64_C(25808878396166400); /* 817853964-10-02T00:00:00Z */
  if (strcmp(s, "MAX") == 0)
    return (time_t) INT64_MAX;
  if (strcmp(s, "MIN") == 0)
    return (time_t) (INT64_MIN + 1);
  return test_getdate(s, unused);
}

static const struct {
  const char *name;
  const char *ms, *ra, *date;
  int64_t now;
  int64_t want;
} hostile_cases[] = {
    /* Before the fix: `when * 1000` overflowed (UBSan: signed-integer-overflow) and
     * wrapped to a 29-year hint. */
    {"year 817853964, no Date", NULL, ",2Oct817853964", NULL, NOW_MS, CG_DURATION_MAX_MS},
    {"year 817853964 vs Date", NULL, ",2Oct817853964", "Thu, 13 Aug 2026 15:36:43 GMT", NOW_MS,
     CG_DURATION_MAX_MS},
    {"time_t max vs Date", NULL, "MAX", "Thu, 13 Aug 2026 15:36:43 GMT", NOW_MS,
     CG_DURATION_MAX_MS},
    {"time_t max vs time_t min", NULL, "MAX", "MIN", NOW_MS, CG_DURATION_MAX_MS},
    {"time_t max, no Date, now min", NULL, "MAX", NULL, INT64_MIN, CG_DURATION_MAX_MS},
    {"time_t min vs time_t max", NULL, "MIN", "MAX", NOW_MS, 0},
    /* curl test 1596: an HTTP-date 5 years after the response's Date: a value, measured
     * exactly (5 * 365 + 2 leap days), too long for any cap. */
    {"5 years after Date", NULL, "Wed, 13 Aug 2031 15:36:43 GMT", "Thu, 13 Aug 2026 15:36:43 GMT",
     NOW_MS, INT64_C(1826) * 86400 * 1000},
    {"Retry-After: 31536000", NULL, "31536000", NULL, NOW_MS, INT64_C(31536000000)},
    {"Retry-After: 10^30", NULL, "1000000000000000000000000000000", NULL, NOW_MS,
     CG_DURATION_MAX_MS},
    {"Retry-After: 1e309", NULL, "1e309", NULL, NOW_MS, CG_DURATION_MAX_MS},
    {"Retry-After: inf", NULL, "inf", NULL, NOW_MS, CG_DURATION_MAX_MS},
    {"retry-after-ms: 10^30", "1000000000000000000000000000000", "1", NULL, NOW_MS,
     CG_DURATION_MAX_MS},
    {"retry-after-ms: 1e309", "1e309", "1", NULL, NOW_MS, CG_DURATION_MAX_MS},
};

Test(backoff, hostile_hints_saturate) {
  size_t i;
  for (i = 0; i < sizeof(hostile_cases) / sizeof(hostile_cases[0]); i++) {
    int64_t v = cg_hint_ms(hostile_cases[i].ms, hostile_cases[i].ra, hostile_cases[i].date,
                           hostile_cases[i].now, hostile_getdate);
    cr_expect_eq(v, hostile_cases[i].want, "%s: %lld, want %lld", hostile_cases[i].name,
                 (long long) v, (long long) hostile_cases[i].want);
    cr_expect(v <= CG_DURATION_MAX_MS, "%s: beyond the largest duration", hostile_cases[i].name);
  }
}
