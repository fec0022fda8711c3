/* state-fixture.h - a fresh shared state file for every test of a Criterion suite.
 *
 *   #include "state-fixture.h"
 *   CG_STATE_FIXTURE(limiter)   -- TestSuite(limiter, ...) with the file opened in .init
 *
 * Each test sees `st` (the mapped file, layout of state.h), `path` (its path) and `dir`
 * (a private directory under /tmp, removed with the file in .fini).  Criterion runs every
 * test in its own process, so nothing leaks from one test into the next. */
#ifndef CG_TEST_STATE_FIXTURE_H
#define CG_TEST_STATE_FIXTURE_H

#include "state.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define MS 1000000LL          /* nanoseconds */
#define SEC 1000000000LL

static char dir[64];
static char path[128];
static struct cg_state st;

static void cg_fixture_open(const char *suite) {
  char why[512] = "";
  snprintf(dir, sizeof(dir), "/tmp/cg-test-%.20s-XXXXXX", suite);
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/state", dir);
  cr_assert_eq(cg_state_open(path, &st, why, sizeof(why)), 0, "cg_state_open: %s", why);
}

static void cg_fixture_close(void) {
  cg_state_close(&st);
  unlink(path);
  rmdir(dir);
}

#define CG_STATE_FIXTURE(suite)                                                             \
  static void setup(void) { cg_fixture_open(#suite); }                                      \
  static void teardown(void) { cg_fixture_close(); }                                        \
  TestSuite(suite, .init = setup, .fini = teardown, .timeout = 30)

#endif
