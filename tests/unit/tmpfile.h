/* tmpfile.h - a fresh temporary file holding a text, for unit tests that load files.
 *
 *   char *path = cg_test_write_tmp("price", "{...}");   -- /tmp/cg-test-price-XXXXXX
 *   ... load it ...; unlink(path); free(path);
 */
#ifndef CG_TEST_TMPFILE_H
#define CG_TEST_TMPFILE_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Write `text` to a new file /tmp/cg-test-`what`-XXXXXX; the caller unlinks and frees the
 * returned path.  Any failure fails the test. */
static inline char *cg_test_write_tmp(const char *what, const char *text) {
  char *path = malloc(64);
  size_t len = strlen(text);
  int fd;
  cr_assert_not_null(path);
  snprintf(path, 64, "/tmp/cg-test-%.20s-XXXXXX", what);
  fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, text, len), (ssize_t) len);
  close(fd);
  return path;
}

#endif
