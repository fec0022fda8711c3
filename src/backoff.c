/* backoff.c - backoff with jitter, and server hints (see backoff.h). */
#include "backoff.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t cg_backoff_ms(enum cg_jitter mode, int64_t base_ms, int64_t cap_ms, int k,
                      int64_t prev_sleep_ms, double unit) {
  double ceiling;
  double lo, hi;

  if (k < 1)
    k = 1;
  if (base_ms < 0)
    base_ms = 0;
  if (cap_ms < base_ms)
    cap_ms = base_ms;
  /* 2^(k-1) overflows nothing in double; cap before converting back. */
  ceiling = fmin((double) cap_ms, (double) base_ms * ldexp(1.0, k - 1));
  switch (mode) {
  case CG_JITTER_FULL:
    return (int64_t) floor(unit * (ceiling + 1.0));
  case CG_JITTER_EQUAL:
    lo = ceiling / 2.0;
    return (int64_t) floor(lo + unit * (ceiling - lo + 1.0));
  case CG_JITTER_DECORRELATED:
    lo = (double) base_ms;
    hi = fmax(lo, 3.0 * (double) (prev_sleep_ms > 0 ? prev_sleep_ms : base_ms));
    return (int64_t) fmin((double) cap_ms, floor(lo + unit * (hi - lo + 1.0)));
  case CG_JITTER_NONE:
  default:
    return (int64_t) ceiling;
  }
}

int64_t cg_parse_decimal_ms(const char *s, double unit_ms) {
  const char *p;
  double v;
  int digits = 0, dot = 0;

  if (!s)
    return -1;
  while (*s == ' ' || *s == '\t')
    s++;
  for (p = s; *p && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\n'; p++) {
    if (isdigit((unsigned char) *p))
      digits++;
    else if (*p == '.' && !dot)
      dot = 1;
    else
      return -1;
  }
  while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
    p++;
  if (!digits || *p)
    return -1;
  v = strtod(s, NULL) * unit_ms;
  if (!isfinite(v) || v < 0 || v > 1e15)
    return -1;
  return (int64_t) ceil(v);
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
  if (base == (time_t) -1)
    return when * 1000 > now_wall_ms ? when * 1000 - now_wall_ms : 0;
  return when > base ? (int64_t) (when - base) * 1000 : 0;
}
