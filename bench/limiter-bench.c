/* limiter-bench - the cost of one admission by the shared limiter.
 *
 *   build/bench/limiter-bench [--procs N] [--ms D] [--runs K] [--mode rpm|rpm+tpm]
 *                             [--state PATH]
 *
 * One admission is what the guard does before every attempt (src/guard.c cg__admit):
 * cg_state_now() and cg_limiter_reserve() on the mapped state file (src/state.h,
 * src/limiter.h).  N processes (fork; each opens and maps the file itself, as guarded
 * processes do) hammer one pool for D ms, all starting at the same CLOCK_MONOTONIC
 * instant and stopping at the same one.  Per run:
 *   acq_per_s        admissions per second, all processes together (ops / D)
 *   ns_per_acquire   what one admission takes as a process sees it (D / its ops; median
 *                    over the processes): with more processes than cores this includes
 *                    the time the process waits for a core
 *   cpu_ns_per_acquire  CPU time spent per admission (sum of CPU / sum of ops): the cost
 *                    of the compare-and-swap, lost races and cache-line transfers
 * K runs; one JSON object on stdout with every run and the medians.
 *
 *   unaccounted      admissions the shared words do not account for (should be 0): the
 *                    limits are 6000 rpm (and 600000 tpm, 100 tokens a request, in mode
 *                    rpm+tpm), a 10 ms emission interval each, so the queue of
 *                    reservations runs far ahead of the clock and every admission takes
 *                    the same path (one CAS per limit, a wait that nobody sleeps); at the
 *                    end the GCRA word must have moved exactly admissions x 10 ms from the
 *                    start.  A reservation given up after losing CG_CAS_TRIES races in a
 *                    row would show here.
 * The file is re-initialised before every run and removed at the end.
 */
#include "config.h"
#include "limiter.h"
#include "state.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct result {
  uint64_t ops;
  int64_t elapsed_ns; /* from its first admission to the end of the window */
  int64_t cpu_ns;     /* CPU time in that interval */
  int ok;
};

#define T_NS 10000000LL /* the emission interval of both limits: 10 ms */

static int64_t cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t t) {
  struct timespec ts = {(time_t) (t / 1000000000), (long) (t % 1000000000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t) n, sizeof(*v), cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void child(const char *path, const struct cg_limits *lim, int64_t tokens, int64_t t0,
                  int64_t t1, struct result *out) {
  struct cg_state st;
  char why[256];
  int64_t now, wait, c0, start;
  uint64_t ops = 0;
  int p;

  if (cg_state_open(path, &st, why, sizeof(why)) != 0) {
    fprintf(stderr, "limiter-bench: %s\n", why);
    _exit(1);
  }
  p = cg_limiter_pool(&st, "bench", lim);
  if (p < 0) {
    fprintf(stderr, "limiter-bench: no pool\n");
    _exit(1);
  }
  sleep_until(t0);
  c0 = cpu_now();
  start = cg_state_now();
  /* The clock read is part of an admission: the guard reads it for every one. */
  while ((now = cg_state_now()) < t1) {
    cg_limiter_reserve(&st, p, lim, tokens, now, INT64_MAX, &wait);
    ops++;
  }
  out->cpu_ns = cpu_now() - c0;
  out->elapsed_ns = now - start;
  out->ops = ops;
  out->ok = 1;
  cg_state_close(&st);
  _exit(0);
}

int main(int argc, char **argv) {
  int procs = 1, runs = 5, ms = 1000, i, r, tpm = 0, unaccounted_any = 0;
  char path[256];
  const char *state = NULL;
  struct cg_limits lim;
  struct result *res;
  double *acq, *nsop, *cpuop, *per;

  for (i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--procs") && i + 1 < argc)
      procs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ms") && i + 1 < argc)
      ms = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mode") && i + 1 < argc) {
      i++;
      if (!strcmp(argv[i], "rpm+tpm"))
        tpm = 1;
      else if (strcmp(argv[i], "rpm") != 0) {
        fprintf(stderr, "limiter-bench: --mode rpm|rpm+tpm\n");
        return 2;
      }
    } else if (!strcmp(argv[i], "--state") && i + 1 < argc)
      state = argv[++i];
    else {
      fprintf(stderr, "usage: limiter-bench [--procs N] [--ms D] [--runs K] "
                      "[--mode rpm|rpm+tpm] [--state PATH]\n");
      return 2;
    }
  }
  if (procs < 1 || procs > 1024 || runs < 1 || runs > 100 || ms < 1) {
    fprintf(stderr, "limiter-bench: bad arguments\n");
    return 2;
  }
  if (state)
    snprintf(path, sizeof(path), "%s", state);
  else
    snprintf(path, sizeof(path), "/dev/shm/curlguard-bench-%d.state", (int) getpid());

  memset(&lim, 0, sizeof(lim));
  lim.rpm = 60e9 / T_NS;              /* 6000 requests per minute */
  lim.tpm = tpm ? 100 * 60e9 / T_NS : 0; /* 100 tokens a request: the same interval */

  res = mmap(NULL, sizeof(*res) * (size_t) procs, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  acq = calloc((size_t) runs, sizeof(double));
  nsop = calloc((size_t) runs, sizeof(double));
  cpuop = calloc((size_t) runs, sizeof(double));
  per = calloc((size_t) procs, sizeof(double));
  if (res == MAP_FAILED || !acq || !nsop || !cpuop || !per) {
    perror("limiter-bench");
    return 1;
  }

  printf("{\"procs\": %d, \"mode\": \"%s\", \"ms\": %d, \"runs\": [", procs,
         tpm ? "rpm+tpm" : "rpm", ms);
  for (r = 0; r < runs; r++) {
    char why[256];
    int64_t t0, t1, cpu = 0, unacc_req = 0, unacc_tok = 0;
    uint64_t ops = 0;
    int failed = 0, n = 0;

    if (cg_state_reset(path, why, sizeof(why)) != 0) {
      fprintf(stderr, "limiter-bench: %s\n", why);
      return 1;
    }
    memset(res, 0, sizeof(*res) * (size_t) procs);
    /* Time for every child to fork and map the file before the common start. */
    t0 = cg_state_now() + 100000000 + (int64_t) procs * 5000000;
    t1 = t0 + (int64_t) ms * 1000000;
    for (i = 0; i < procs; i++) {
      pid_t pid = fork();
      if (pid < 0) {
        perror("limiter-bench: fork");
        return 1;
      }
      if (pid == 0)
        child(path, &lim, tpm ? 100 : 0, t0, t1, &res[i]);
    }
    for (i = 0; i < procs; i++) {
      int status;
      if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        failed = 1;
    }
    for (i = 0; i < procs; i++) {
      if (!res[i].ok) {
        failed = 1;
        continue;
      }
      ops += res[i].ops;
      cpu += res[i].cpu_ns;
      if (res[i].ops)
        per[n++] = (double) res[i].elapsed_ns / (double) res[i].ops;
    }
    if (failed || !ops) {
      fprintf(stderr, "limiter-bench: a worker failed\n");
      unlink(path);
      return 1;
    }
    {
      struct cg_state st;
      int p;
      if (cg_state_open(path, &st, why, sizeof(why)) != 0 ||
          (p = cg_limiter_pool(&st, "bench", &lim)) < 0) {
        fprintf(stderr, "limiter-bench: reopen: %s\n", why);
        return 1;
      }
      /* The first admission came at t0 or a little later (< T_NS): floor() is exact. */
      unacc_req = (int64_t) ops - (st.pools[p].tat_requests - t0) / T_NS;
      unacc_tok = tpm ? (int64_t) ops - (st.pools[p].tat_tokens - t0) / T_NS : 0;
      cg_state_close(&st);
    }
    if (unacc_req != 0 || unacc_tok != 0)
      unaccounted_any = 1;
    acq[r] = (double) ops / ((double) ms / 1000.0);
    nsop[r] = median(per, n);
    cpuop[r] = (double) cpu / (double) ops;
    printf("%s{\"ops\": %llu, \"acq_per_s\": %.0f, \"ns_per_acquire\": %.1f, "
           "\"cpu_ns_per_acquire\": %.1f, \"unaccounted_requests\": %lld, "
           "\"unaccounted_tokens\": %lld}",
           r ? ", " : "", (unsigned long long) ops, acq[r], nsop[r], cpuop[r],
           (long long) unacc_req, (long long) unacc_tok);
    fflush(stdout);
  }
  printf("], \"median\": {\"acq_per_s\": %.0f, \"ns_per_acquire\": %.1f, "
         "\"cpu_ns_per_acquire\": %.1f}, \"all_accounted\": %s}\n",
         median(acq, runs), median(nsop, runs), median(cpuop, runs),
         unaccounted_any ? "false" : "true");
  if (!state)
    unlink(path);
  return 0;
}
