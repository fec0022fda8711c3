/* backoff.h - how long to wait before a retry.
 *
 * Exponential backoff: before retry k (k = 1 before the second attempt) the ceiling is
 * min(cap, base * 2^(k-1)); jitter modes (SPEC section 7, after "Exponential Backoff
 * And Jitter", AWS Architecture Blog, 2015):
 *   full          uniform [0, ceiling]
 *   equal         uniform [ceiling/2, ceiling]
 *   decorrelated  min(cap, uniform [base, 3 * previous sleep])
 *   none          the ceiling itself
 * Server hints: retry-after-ms (milliseconds, wins when it parses), else Retry-After
 * as delta-seconds (fractions accepted, as several LLM providers send them) or an
 * HTTP-date in any of the three forms of RFC 9110 section 5.6.7, parsed by libcurl's
 * curl_getdate(3) and measured against the response's Date header when present
 * (RFC 9110 section 10.2.3).  Negative or malformed hints are ignored.
 */
#ifndef CG_BACKOFF_H
#define CG_BACKOFF_H

#include "config.h"

#include <stdint.h>
#include <time.h>

/* The sleep in ms before retry `k` (>= 1).  `prev_sleep_ms` is the previous sleep
 * (decorrelated mode; pass 0 before the first retry).  `unit` is a uniform random
 * number in [0, 1). */
int64_t cg_backoff_ms(enum cg_jitter mode, int64_t base_ms, int64_t cap_ms, int k,
                      int64_t prev_sleep_ms, double unit);

/* The sum of the sleeps before retries 1 .. `n` without jitter (mode none): how long
 * the backoffs of a call whose attempts all fail add up to, as curl --retry's fixed
 * doubling delays do (1 s, 2 s, 4 s ... with base 1000).  0 for n < 1; saturated at
 * CG_DURATION_MAX_MS. */
int64_t cg_backoff_schedule_ms(int64_t base_ms, int64_t cap_ms, int n);

/* A curl_getdate()-shaped parser for HTTP-dates: returns seconds since the epoch or -1. */
typedef time_t (*cg_getdate_fn)(const char *, const time_t *);

/* The server's hint in ms, or -1 when there is none that parses.
 *   retry_after_ms  value of "retry-after-ms" or NULL
 *   retry_after     value of "Retry-After" or NULL (RFC 9110 section 10.2.3:
 *                   delta-seconds or an HTTP-date)
 *   date            value of the response's "Date" or NULL
 *   now_wall_ms     the local wall clock, used when `date` is absent or unparsable
 *   getdate         HTTP-date parser (the host libcurl's curl_getdate) or NULL
 * Saturated: a hint too large to represent (10^30 s, 1e309, inf, an HTTP-date in year
 * 817853964) is CG_DURATION_MAX_MS (saturate.h), the largest value, never "none" and
 * never a wrapped product (RFC 9111 section 1.2.2); callers compare it with
 * max_retry_after and give up.  The result is always -1 or in [0, CG_DURATION_MAX_MS]. */
int64_t cg_hint_ms(const char *retry_after_ms, const char *retry_after, const char *date,
                   int64_t now_wall_ms, cg_getdate_fn getdate);

/* Parse a non-negative number of `unit_ms` units ("1.5" s -> 1500 ms, exactly, rounded
 * up below the unit) into ms.  Also the exponent forms ("1e3", "2.5E+1") and "inf" /
 * "infinity".  Too large (more digits than fit, 1e309, inf) is CG_DURATION_MAX_MS.
 * Returns -1 for anything else: negative, empty, hex, nan, trailing junk. */
int64_t cg_parse_decimal_ms(const char *s, double unit_ms);

#endif
