/* ratelimit.h - what a provider's rate-limit headers say about the quota left.
 *
 * Read (case-insensitive names; values as the providers document them):
 *   OpenAI     x-ratelimit-{limit,remaining,reset}-{requests,tokens}; resets are Go
 *              durations ("6m0s", "20ms", "1m30.5s", "1h2m3s")
 *   Anthropic  anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}; resets are
 *              RFC 3339 times ("2026-11-30T06:17:30Z")
 *   IETF       RateLimit: limit=100, remaining=50, reset=30   (draft-ietf-httpapi-
 *              ratelimit-headers, early form) and RateLimit: "default";r=50;t=30 (later
 *              form); remaining and reset (seconds) are read.
 * A limit of 0 or -1, a negative remaining, or an unparsable value means "unknown", never
 * "nothing left".  A reset too large to represent (999999h, 1e309s, a date in 2099, 10^30
 * s) is CG_DURATION_MAX_MS (saturate.h), never a wrapped or converted-out-of-range value
 * (RFC 9111 section 1.2.2 reads an overflowing delta-seconds as the largest value); what
 * it may do to a pool is capped by the caller (admit.h).  Pure: no I/O, no globals.
 */
#ifndef CG_RATELIMIT_H
#define CG_RATELIMIT_H

#include <stdint.h>

/* Raw header values of one response (NULL or "" when absent). */
struct cg_rl_headers {
  const char *limit_requests, *remaining_requests, *reset_requests; /* OpenAI */
  const char *limit_tokens, *remaining_tokens, *reset_tokens;
  const char *a_limit_requests, *a_remaining_requests, *a_reset_requests; /* Anthropic */
  const char *a_limit_tokens, *a_remaining_tokens, *a_reset_tokens;
  const char *ietf;                                                   /* RateLimit */
};

/* What is known: -1 for unknown.  Resets in ms, in [0, CG_DURATION_MAX_MS]. */
struct cg_rl_signal {
  int64_t requests_limit, requests_remaining, requests_reset_ms;
  int64_t tokens_limit, tokens_remaining, tokens_reset_ms;
};

/* Interpret `h`; `now_wall_ms` is the local wall clock for RFC 3339 resets. */
void cg_rl_parse(const struct cg_rl_headers *h, int64_t now_wall_ms, struct cg_rl_signal *out);

/* A Go duration ("1m30.5s") in ms, rounded up, saturated at CG_DURATION_MAX_MS; -1 when
 * malformed (no unit, hex, nan, a negative number). */
int64_t cg_rl_go_duration_ms(const char *s);

/* An RFC 3339 time ("2026-11-30T06:17:30Z", "...+01:00", fractions allowed) in ms since
 * the epoch, or -1 when malformed: the offset is exactly hh:mm within 23:59 (RFC 3339
 * section 5.6), the fraction digits only, nothing may follow. */
int64_t cg_rl_rfc3339_ms(const char *s);

#endif
