/* clock.c - time sources (see clock.h). */
#include "clock.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

int64_t cg_mono_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t cg_mono_ms(void) {
  return cg_mono_us() / 1000;
}

/* -1: not looked at yet; 0: no coarse clock (the fine one is used); else the tick. */
static int64_t cg__coarse_tick = -1;

static int64_t cg__coarse_probe(void) {
  struct timespec res;
  int64_t tick = 0;
  if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0)
    tick = ((int64_t) res.tv_sec * 1000000000 + res.tv_nsec + 999999) / 1000000;
  __atomic_store_n(&cg__coarse_tick, tick, __ATOMIC_RELAXED);
  return tick;
}

int64_t cg_coarse_tick_ms(void) {
  int64_t tick = __atomic_load_n(&cg__coarse_tick, __ATOMIC_RELAXED);
  return tick >= 0 ? tick : cg__coarse_probe();
}

int64_t cg_coarse_ms(void) {
  struct timespec ts;
  if (cg_coarse_tick_ms() > 0 && clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0)
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  return cg_mono_ms();
}

int64_t cg_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cg_sleep_ms(int64_t ms) {
  struct timespec req, rem;

  if (ms <= 0)
    return;
  req.tv_sec = (time_t) (ms / 1000);
  req.tv_nsec = (long) (ms % 1000) * 1000000L;
  while (nanosleep(&req, &rem) == -1 && errno == EINTR)
    req = rem;
}

char *cg_rfc3339_ms(int64_t wall_ms, char *buf, unsigned long buflen) {
  time_t secs = (time_t) (wall_ms / 1000);
  struct tm tm;

  gmtime_r(&secs, &tm);
  snprintf(buf, buflen, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
           (int) (wall_ms % 1000));
  return buf;
}
