/* backoff.c - backoff with jitter, and server hints (see backoff.h). */
#include "backoff.h"

#include "saturate.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int64_t cg_backoff_ms(enum cg_jitter mode, int64_t base_ms, int64_t cap_ms, int k,
                      int64_t prev_sleep_ms, double unit) {
  double ceiling, lo, hi, v;

  if (k < 1)
    k = 1;
  if (k > 63)
    k = 63; /* 2^62 times any base is past any cap */
  if (base_ms < 0)
    base_ms = 0;
  if (cap_ms < base_ms)
    cap_ms = base_ms;
  ceiling = fmin((double) cap_ms, (double) base_ms * ldexp(1.0, k - 1));
  switch (mode) {
  case CG_JITTER_FULL:
    lo = 0;
    hi = ceiling;
    break;
  case CG_JITTER_EQUAL:
    lo = floor(ceiling / 2.0);
    hi = ceiling;
    break;
  case CG_JITTER_DECORRELATED:
    lo = (double) base_ms;
    hi = fmin((double) cap_ms,
              fmax(lo, 3.0 * (double) (prev_sleep_ms > 0 ? prev_sleep_ms : base_ms)));
    break;
  case CG_JITTER_NONE:
  default:
    return (int64_t) ceiling;
  }
  /* Uniform over the whole milliseconds lo..hi; clamp for unit values just below 1. */
  v = floor(lo + unit * (hi - lo + 1.0));
  return (int64_t) fmin(fmax(v, lo), hi);
}

int64_t cg_backoff_schedule_ms(int64_t base_ms, int64_t cap_ms, int n) {
  double sum = 0;
  int k;

  if (base_ms < 0)
    base_ms = 0;
  if (cap_ms < base_ms)
    cap_ms = base_ms;
  for (k = 1; k <= n && sum < (double) CG_DURATION_MAX_MS; k++)
    sum += fmin((double) cap_ms, (double) base_ms * ldexp(1.0, k < 63 ? k - 1 : 62));
  return sum < (double) CG_DURATION_MAX_MS ? (int64_t) sum : CG_DURATION_MAX_MS;
}

/* The exponent or infinity forms of a non-negative number ("1e3", "1e309", "inf",
 * "infinity"; not hex, not nan), in units, saturated; -1 for anything else.  `s` has no
 * leading blanks. */
static int64_t cg__float_units(const char *s, double unit_ms) {
  const char *p = s;
  char *end;
  double v;

  if (strncasecmp(p, "inf", 3) != 0) {
    /* digits [. digits] (e|E) [+|-] digits */
    int digits = 0;
    for (; isdigit((unsigned char) *p); p++)
      digits++;
    if (*p == '.')
      for (p++; isdigit((unsigned char) *p); p++)
        digits++;
    if (!digits || (*p != 'e' && *p != 'E'))
      return -1;
    p++;
    if (*p == '+' || *p == '-')
      p++;
    if (!isdigit((unsigned char) *p))
      return -1;
  }
  v = strtod(s, &end);
  while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
    end++;
  if (end == s || *end)
    return -1;
  return cg_duration_from_double(v * unit_ms);
}

int64_t cg_parse_decimal_ms(const char *s, double unit_ms) {
  int64_t whole = 0, frac = 0, scale = 1, unit = (int64_t) unit_ms;
  int digits = 0, round_up = 0, huge = 0;
  const char *p;

  if (!s || unit < 1)
    return -1;
  while (*s == ' ' || *s == '\t')
    s++;
  /* Exact decimal arithmetic: "4.03" s is 4030 ms, not ceil(4.0299999...*1000). */
  for (p = s; isdigit((unsigned char) *p); p++, digits++) {
    if (whole > CG_DURATION_MAX_MS)
      huge = 1; /* keep reading: the syntax must still be right */
    else
      whole = whole * 10 + (*p - '0');
  }
  if (*p == '.') {
    for (p++; isdigit((unsigned char) *p); p++, digits++) {
      if (scale < unit) {
        frac = frac * 10 + (*p - '0');
        scale *= 10;
      } else if (*p != '0') {
        round_up = 1; /* digits below the unit's resolution: round up */
      }
    }
  }
  while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
    p++;
  if (!digits || *p)
    return cg__float_units(s, unit_ms);
  /* Too large to represent is the largest value, never "no hint" (RFC 9111 section
   * 1.2.2): 10^30 s is as "too long" as a year. */
  if (huge)
    return CG_DURATION_MAX_MS;
  /* frac / scale of a second, in units: frac * unit / scale (scale divides unit). */
  return cg_duration_clamp(
      cg_sat_add(cg_sat_add(cg_sat_mul(whole, unit), frac * (unit / scale)), round_up));
}

/* `a` - `b` seconds as ms, 0 when not positive, saturated. */
static int64_t cg__secs_after(int64_t a, int64_t b) {
  int64_t d;
  if (a <= b)
    return 0;
  if (__builtin_sub_overflow(a, b, &d))
    return CG_DURATION_MAX_MS;
  return cg_duration_clamp(cg_sat_mul(d, 1000));
}

int64_t cg_hint_ms(const char *retry_after_ms, const char *retry_after, const char *date,
                   int64_t now_wall_ms, cg_getdate_fn getdate) {
  int64_t v = cg_parse_decimal_ms(retry_after_ms, 1.0);
  time_t when, base;

  if (v >= 0)
    return v;
  v = cg_parse_decimal_ms(retry_after, 1000.0);
  if (v >= 0)
    return v;
  if (!retry_after || !getdate)
    return -1;
  /* An HTTP-date.  A leading '-' or digit can only be a bad delta-seconds. */
  while (*retry_after == ' ')
    retry_after++;
  if (*retry_after == '-' || isdigit((unsigned char) *retry_after))
    return -1;
  when = getdate(retry_after, NULL);
  if (when == (time_t) -1)
    return -1;
  base = date ? getdate(date, NULL) : (time_t) -1;
  /* curl_getdate reads years up to 2^31 ("Retry-After: ,2Oct817853964" is year
   * 817853964): every product saturates, so such a date is "too long", never a wrapped
   * product (RFC 9110 section 10.2.3: measured against Date when there is one). */
  if (base == (time_t) -1) {
    int64_t ms = cg_sat_mul((int64_t) when, 1000), d;
    if (ms <= now_wall_ms)
      return 0;
    return __builtin_sub_overflow(ms, now_wall_ms, &d) ? CG_DURATION_MAX_MS
                                                       : cg_duration_clamp(d);
  }
  return cg__secs_after((int64_t) when, (int64_t) base);
}
