/* hot.h - keeping the per-request path's machine code in as few cache lines as it needs.
 *
 * Under a host whose own code already fills the instruction cache (curl's tool), every
 * 64-byte line of guard code a request runs is fetched again on each request: what a
 * request costs there follows the lines it touches more than the instructions it runs
 * (bench/RESULTS-overhead.md, the footprint calibration row; issue 16).  A branch that is
 * rarely taken (an error, an option few hosts set) still costs lines when its code sits
 * between the branches that run on every request.
 *
 * CG_RARE(c) is `c` (0 or 1) and tells GCC that `c` is rarely true: the code that runs
 * only when it is goes to the function's `.cold` part in `.text.unlikely`.  Without a
 * profile GCC moves a path there only when it calls a function marked cold
 * (__builtin_expect alone reorders the blocks within the function), so the rare path
 * calls cg_rare_path, which does nothing; the common path runs the test alone. */
#ifndef CG_HOT_H
#define CG_HOT_H

/* Does nothing; its call marks the path it is on as rarely run (GCC's "cold"). */
static __attribute__((cold, noinline, unused)) void cg_rare_path(void) {
  __asm__ volatile("");
}

#define CG_RARE(c) (__builtin_expect(!!(c), 0) && (cg_rare_path(), 1))

#endif
