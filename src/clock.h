/* clock.h - time sources.  Monotonic time for deadlines and waits (CLOCK_MONOTONIC),
 * wall time only for record timestamps. */
#ifndef CG_CLOCK_H
#define CG_CLOCK_H

#include <stdint.h>

/* Monotonic time in microseconds / milliseconds since an arbitrary origin. */
int64_t cg_mono_us(void);
int64_t cg_mono_ms(void);

/* Coarse monotonic time in milliseconds (CLOCK_MONOTONIC_COARSE: the kernel's last tick,
 * no clock read; CLOCK_MONOTONIC when the kernel lacks it).  It lags cg_mono_ms() by up
 * to cg_coarse_tick_ms().  For timers polled many times a request (the split timeouts),
 * where a read of CLOCK_MONOTONIC (70-100 ns in a VM) would cost more than the check;
 * never for a record's timings. */
int64_t cg_coarse_ms(void);

/* The coarse clock's resolution in ms (clock_getres(2)), rounded up; 0 when the coarse
 * clock is the fine one. */
int64_t cg_coarse_tick_ms(void);

/* Wall-clock time in milliseconds since the Unix epoch (CLOCK_REALTIME). */
int64_t cg_wall_ms(void);

/* Sleep `ms` milliseconds (<= 0: return at once), resuming after signals. */
void cg_sleep_ms(int64_t ms);

/* Format `wall_ms` as RFC 3339 UTC with milliseconds ("2026-11-30T06:17:01.123Z")
 * into `buf` (at least 25 bytes).  Returns `buf`. */
char *cg_rfc3339_ms(int64_t wall_ms, char *buf, unsigned long buflen);

#endif
