/* plan.c - `curlguard plan`: the worst-case (no jitter) retry timeline.
 *
 * Attempt 1 starts at 0 and ends at T (the attempt timeout).  Before attempt k+1 the
 * guard waits min(cap, base * 2^(k-1)) (SPEC section 7, jitter "none", the longest
 * wait full jitter can draw), then the attempt takes T again.  An attempt "fits" when
 * it ends within the budget; the guard would not start one that does not.
 */
#include "backoff.h"
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CG_PLAN_MAX_ATTEMPTS 100

static int cg__seconds(const char *flag, const char *s, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end || !isfinite(v) || v < 0 || v > 1e7 || s[0] == '-' ||
      strpbrk(s, "xX")) { /* not "-0", not hex */
    cg_cli_error("plan: %s wants a number of seconds >= 0, not \"%s\"", flag, s);
    return -1;
  }
  *out = v;
  return 0;
}

int cg_cli_plan(int argc, char **argv) {
  double budget = -1, t = -1, base = -1, cap = -1;
  double wait[CG_PLAN_MAX_ATTEMPTS], end[CG_PLAN_MAX_ATTEMPTS];
  long max_attempts = 3;
  int json = 0, i, fit = 0;

  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    double *slot = strcmp(a, "--budget") == 0            ? &budget
                   : strcmp(a, "--attempt-timeout") == 0 ? &t
                   : strcmp(a, "--base") == 0            ? &base
                   : strcmp(a, "--cap") == 0             ? &cap
                                                         : NULL;
    if (strcmp(a, "--json") == 0) {
      json = 1;
    } else if (slot) {
      if (!v) {
        cg_cli_error("plan: %s needs a value", a);
        return CG_EXIT_USAGE;
      }
      if (cg__seconds(a, v, slot) != 0)
        return CG_EXIT_USAGE;
      i++;
    } else if (strcmp(a, "--max-attempts") == 0) {
      char *e;
      if (!v || (max_attempts = strtol(v, &e, 10), *e) || max_attempts < 1 ||
          max_attempts > CG_PLAN_MAX_ATTEMPTS) {
        cg_cli_error("plan: --max-attempts wants a whole number from 1 to %d",
                     CG_PLAN_MAX_ATTEMPTS);
        return CG_EXIT_USAGE;
      }
      i++;
    } else {
      cg_cli_error("plan: unknown option \"%s\"", a);
      return CG_EXIT_USAGE;
    }
  }
  if (budget < 0 || t < 0 || base < 0 || cap < 0) {
    cg_cli_error("plan: --budget, --attempt-timeout, --base and --cap are all required");
    return CG_EXIT_USAGE;
  }

  if (cap < base)
    cg_cli_error("plan: note: --cap %g is below --base %g; the guard uses the base as the "
                 "cap, and so does this plan", cap, base);
  for (i = 0; i < max_attempts; i++) {
    /* Work in milliseconds with the guard's own backoff function. */
    wait[i] = i == 0 ? 0
                     : (double) cg_backoff_ms(CG_JITTER_NONE, llround(base * 1000),
                                              llround(cap * 1000), i, 0, 0.0) / 1000.0;
    end[i] = (i == 0 ? 0 : end[i - 1]) + wait[i] + t;
    if (end[i] <= budget + 1e-9)
      fit = i + 1;
  }

  if (json) {
    printf("{\"attempts_fit\": %d, \"needed_s\": %.15g, \"budget_s\": %.15g, \"timeline\": [", fit,
           end[max_attempts - 1], budget);
    for (i = 0; i < max_attempts; i++)
      printf("%s{\"attempt\": %d, \"wait_s\": %.15g, \"end_s\": %.15g, \"fits\": %s}",
             i ? ", " : "", i + 1, wait[i], end[i], end[i] <= budget + 1e-9 ? "true" : "false");
    printf("]}\n");
    return cg_cli_written("plan", CG_EXIT_OK);
  }
  printf("attempt  wait_s    end_s  fits\n");
  for (i = 0; i < max_attempts; i++)
    printf("%7d %7.15g %8.15g  %s\n", i + 1, wait[i], end[i],
           end[i] <= budget + 1e-9 ? "yes" : "no");
  printf("%d of %ld attempts fit a budget of %.15g s; all %ld need %.15g s\n", fit, max_attempts,
         budget, max_attempts, end[max_attempts - 1]);
  return cg_cli_written("plan", CG_EXIT_OK);
}
