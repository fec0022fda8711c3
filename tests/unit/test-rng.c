/* test-rng.c - per-thread random numbers and request ids (rng.h). */
#include "rng.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- UUIDs ---- */

static int is_lower_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static void assert_uuid4(const char *u) {
  size_t i;
  cr_assert_eq(strlen(u), 36, "\"%s\" is not 36 characters", u);
  for (i = 0; i < 36; i++) {
    if (i == 8 || i == 13 || i == 18 || i == 23)
      cr_assert_eq(u[i], '-', "\"%s\": no '-' at %zu", u, i);
    else
      cr_assert(is_lower_hex(u[i]), "\"%s\": '%c' at %zu is not lower-case hex", u, u[i], i);
  }
  cr_assert_eq(u[14], '4', "\"%s\": version nibble %c, want 4", u, u[14]);
  cr_assert(u[19] == '8' || u[19] == '9' || u[19] == 'a' || u[19] == 'b',
            "\"%s\": variant nibble %c, want 8, 9, a or b", u, u[19]);
}

static int cmp_uuid(const void *a, const void *b) {
  return memcmp(a, b, 37);
}

#define NUUID 10000

Test(rng, uuid4_format_and_uniqueness) {
  static char ids[NUUID][37];
  int variant_seen[4] = {0};
  size_t i;

  for (i = 0; i < NUUID; i++) {
    memset(ids[i], 'Z', sizeof(ids[i]));
    cg_uuid4(ids[i]);
    cr_assert_eq(ids[i][36], '\0');
    assert_uuid4(ids[i]);
    variant_seen[ids[i][19] == '8' ? 0 : ids[i][19] == '9' ? 1 : ids[i][19] == 'a' ? 2 : 3]++;
  }
  /* All four variant nibbles occur: the other bits of that nibble are random. */
  for (i = 0; i < 4; i++)
    cr_expect_gt(variant_seen[i], NUUID / 8, "variant nibble %zu seen %d times", i,
                 variant_seen[i]);
  qsort(ids, NUUID, sizeof(ids[0]), cmp_uuid);
  for (i = 1; i < NUUID; i++)
    cr_assert_neq(memcmp(ids[i - 1], ids[i], 37), 0, "duplicate UUID %s", ids[i]);
}

/* ---- ranges ---- */

static const struct {
  int64_t lo, hi;
} ranges[] = {
    {0, 0}, {5, 5}, {0, 1}, {1, 6}, {-10, 10}, {-5, -1}, {1000, 1999},
    {0, INT64_C(1) << 40}, {INT64_MAX - 3, INT64_MAX}, {INT64_MIN, INT64_MIN + 3},
};

Test(rng, range_bounds) {
  size_t r;
  int i;
  for (r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
    for (i = 0; i < 2000; i++) {
      int64_t v = cg_rand_range(ranges[r].lo, ranges[r].hi);
      cr_assert(v >= ranges[r].lo && v <= ranges[r].hi, "cg_rand_range(%lld, %lld) = %lld",
                (long long) ranges[r].lo, (long long) ranges[r].hi, (long long) v);
    }
  }
}

Test(rng, small_range_hits_both_ends) {
  int seen[6] = {0}, i;
  for (i = 0; i < 6000; i++)
    seen[cg_rand_range(1, 6) - 1]++;
  for (i = 0; i < 6; i++)
    cr_expect(seen[i] > 700 && seen[i] < 1300, "face %d seen %d times of 6000", i + 1, seen[i]);
}

Test(rng, hi_not_above_lo_returns_lo) {
  cr_assert_eq(cg_rand_range(7, 7), 7);
  cr_assert_eq(cg_rand_range(7, 3), 7);
}

/* lo <= hi is all the header asks; the widest ranges must work too (without signed
 * overflow in hi - lo, which UBSan reports and the optimiser may exploit). */
static void check_wide(int64_t lo, int64_t hi) {
  int i;
  for (i = 0; i < 1000; i++) {
    int64_t v = cg_rand_range(lo, hi);
    cr_assert(v >= lo && v <= hi, "cg_rand_range(%lld, %lld) = %lld", (long long) lo,
              (long long) hi, (long long) v);
  }
}

Test(rng, full_int64_range) {
  check_wide(INT64_MIN, INT64_MAX);
}

Test(rng, range_wider_than_int64_max_from_negative_lo) {
  check_wide(-10, INT64_MAX);
}

Test(rng, range_wider_than_int64_max_to_positive_hi) {
  check_wide(INT64_MIN, 10);
}

Test(rng, unit_in_zero_one) {
  int i;
  double sum = 0;
  for (i = 0; i < 100000; i++) {
    double u = cg_rand_unit();
    cr_assert(u >= 0.0 && u < 1.0, "unit %.17g", u);
    sum += u;
  }
  cr_expect(sum / 100000 > 0.49 && sum / 100000 < 0.51, "mean %f", sum / 100000);
}

/* ---- fork and threads ---- */

#define NDRAW 16

Test(rng, child_after_fork_does_not_repeat_parent) {
  uint64_t child[NDRAW], parent[NDRAW];
  int fds[2], status, i, j, same = 0;
  pid_t pid;

  (void) cg_rand64(); /* seed the parent's generator before the fork */
  cr_assert_eq(pipe(fds), 0);
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    uint64_t v[NDRAW];
    for (i = 0; i < NDRAW; i++)
      v[i] = cg_rand64();
    _exit(write(fds[1], v, sizeof(v)) == (ssize_t) sizeof(v) ? 0 : 1);
  }
  close(fds[1]);
  for (i = 0; i < NDRAW; i++)
    parent[i] = cg_rand64();
  cr_assert_eq(read(fds[0], child, sizeof(child)), (ssize_t) sizeof(child));
  close(fds[0]);
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (i = 0; i < NDRAW; i++)
    for (j = 0; j < NDRAW; j++)
      same += child[i] == parent[j];
  cr_assert_eq(same, 0, "the child repeated %d of the parent's values", same);
}

Test(rng, child_uuids_differ_from_parent) {
  char child[37], parent[37];
  int fds[2], status;
  pid_t pid;

  cg_uuid4(parent);
  cr_assert_eq(pipe(fds), 0);
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    char u[37];
    cg_uuid4(u);
    _exit(write(fds[1], u, sizeof(u)) == (ssize_t) sizeof(u) ? 0 : 1);
  }
  close(fds[1]);
  cg_uuid4(parent);
  cr_assert_eq(read(fds[0], child, sizeof(child)), (ssize_t) sizeof(child));
  close(fds[0]);
  waitpid(pid, &status, 0);
  cr_assert_neq(memcmp(child, parent, 37), 0, "child and parent made the same id %s", child);
}

static void *draw(void *arg) {
  uint64_t *out = arg;
  int i;
  for (i = 0; i < NDRAW; i++)
    out[i] = cg_rand64();
  return NULL;
}

Test(rng, threads_have_their_own_sequences) {
  uint64_t a[NDRAW], b[NDRAW];
  pthread_t ta, tb;
  int i, j, same = 0;

  cr_assert_eq(pthread_create(&ta, NULL, draw, a), 0);
  cr_assert_eq(pthread_create(&tb, NULL, draw, b), 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  for (i = 0; i < NDRAW; i++)
    for (j = 0; j < NDRAW; j++)
      same += a[i] == b[j];
  cr_assert_eq(same, 0);
}
