/* test-clock.c - the time sources (clock.h): the coarse clock against the fine one. */
#include "clock.h"

#include <criterion/criterion.h>
#include <time.h>

Test(clock, coarse_tick_is_the_kernels_resolution) {
  struct timespec res;
  int64_t tick = cg_coarse_tick_ms();
  cr_assert_geq(tick, 0);
  cr_assert_leq(tick, 1000, "a coarse tick of %lld ms", (long long) tick);
  if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0)
    cr_assert_eq(tick, ((int64_t) res.tv_sec * 1000000000 + res.tv_nsec + 999999) / 1000000);
  cr_assert_eq(cg_coarse_tick_ms(), tick, "cached");
}

/* The coarse clock never runs ahead of the fine one, lags it by little (a tick or two;
 * more when the kernel's tick is late under load: a generous bound), and moves. */
Test(clock, coarse_lags_the_fine_clock_by_at_most_a_tick) {
  int64_t tick = cg_coarse_tick_ms(), first = cg_coarse_ms(), c = first, i;
  for (i = 0; i < 200000 && c == first; i++) {
    int64_t before = cg_mono_ms();
    c = cg_coarse_ms();
    int64_t after = cg_mono_ms();
    cr_assert_leq(c, after, "coarse %lld ahead of fine %lld", (long long) c, (long long) after);
    cr_assert_geq(c, before - tick - 500, "coarse %lld lags fine %lld by over 0.5 s",
                  (long long) c, (long long) before);
  }
  if (tick > 0) {
    struct timespec nap = {0, (long) (tick + 1) * 1000000L};
    nanosleep(&nap, NULL);
    cr_assert_gt(cg_coarse_ms(), first, "the coarse clock did not move in a tick");
  }
}
