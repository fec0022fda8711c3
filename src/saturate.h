/* saturate.h - durations from the network: saturating arithmetic, never overflow.
 *
 * A hint a server sends (Retry-After, retry-after-ms, rate-limit resets) may be any size.
 * A value too large to represent is not "absent": RFC 9111 section 1.2.2 says a
 * delta-seconds that overflows is to be taken as the largest value.  Here that largest
 * value is CG_DURATION_MAX_MS, about 31.7 years: longer than any configured maximum
 * (max_retry_after_ms is at most a day), so it always reads "too long", and small enough
 * that its nanoseconds (10^18) plus any monotonic clock reading still fit an int64_t.
 */
#ifndef CG_SATURATE_H
#define CG_SATURATE_H

#include <math.h>
#include <stdint.h>

#define CG_DURATION_MAX_MS INT64_C(1000000000000) /* 10^12 ms: "too long" */

/* a + b, saturated at INT64_MIN / INT64_MAX. */
static inline int64_t cg_sat_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}

/* a * b, saturated at INT64_MIN / INT64_MAX. */
static inline int64_t cg_sat_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
  return r;
}

/* A non-negative duration in ms clamped to [0, CG_DURATION_MAX_MS]; negative stays -1
 * ("none"). */
static inline int64_t cg_duration_clamp(int64_t ms) {
  return ms < 0 ? -1 : ms > CG_DURATION_MAX_MS ? CG_DURATION_MAX_MS : ms;
}

/* A non-negative double of ms, rounded up, clamped to CG_DURATION_MAX_MS (+inf too);
 * NaN or negative: -1.  Never converts an out-of-range double to an integer (UB). */
static inline int64_t cg_duration_from_double(double ms) {
  if (isnan(ms) || ms < 0)
    return -1;
  if (ms >= (double) CG_DURATION_MAX_MS)
    return CG_DURATION_MAX_MS;
  return (int64_t) ceil(ms);
}

#endif
