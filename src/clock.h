/* clock.h - time sources.  Monotonic time for deadlines and waits (CLOCK_MONOTONIC),
 * wall time only for record timestamps. */
#ifndef CG_CLOCK_H
#define CG_CLOCK_H

#include <stdint.h>

/* Monotonic time in microseconds / milliseconds since an arbitrary origin. */
int64_t cg_mono_us(void);
int64_t cg_mono_ms(void);

/* Wall-clock time in milliseconds since the Unix epoch (CLOCK_REALTIME). */
int64_t cg_wall_ms(void);

/* Sleep `ms` milliseconds (<= 0: return at once), resuming after signals. */
void cg_sleep_ms(int64_t ms);

/* Format `wall_ms` as RFC 3339 UTC with milliseconds ("2026-11-30T06:17:01.123Z")
 * into `buf` (at least 25 bytes).  Returns `buf`. */
char *cg_rfc3339_ms(int64_t wall_ms, char *buf, unsigned long buflen);

#endif
