/* fallback.h - a pool's fallback base URL (README "Circuit breaker and retry budget"):
 * while the pool's breaker is open, a call is sent to an API-compatible second provider
 * instead, whose own pool (limits, breaker, budget) is the one its host matches.
 *
 * The rewrite keeps the request's path and query and replaces what comes before them:
 *   base "https://backup.example.com/openai" + "https://api.openai.com/v1/x?y=1"
 *     -> "https://backup.example.com/openai/v1/x?y=1"
 * Pure: no I/O, no globals.
 */
#ifndef CG_FALLBACK_H
#define CG_FALLBACK_H

#include <stddef.h>

#define CG_FALLBACK_MAX 512 /* bytes of a fallback base, NUL included */

/* Whether `base` can be a fallback base: an http or https URL with a host, no userinfo,
 * query or fragment, a port (if any) from 1 to 65535, shorter than CG_FALLBACK_MAX.
 * 1 or 0. */
int cg_fallback_base_ok(const char *base);

/* The URL of request `url` sent to `base` instead, into `out` (`len` bytes).  Returns 0,
 * or -1 when `url` has no "scheme://authority" or the result does not fit. */
int cg_fallback_url(const char *base, const char *url, char *out, size_t len);

#endif
