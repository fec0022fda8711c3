/* fuzz.h - helpers shared by the libFuzzer targets (fuzz/README in ../README.md,
 * "Fuzzing").  Each target is one parser that reads bytes from the network or from a
 * file; besides crashes and sanitizer findings it checks cheap invariants with
 * CG_FUZZ_CHECK, which aborts (a finding) with the reason. */
#ifndef CG_FUZZ_H
#define CG_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The descriptor of the original stderr, duplicated before libFuzzer runs: targets
 * run with -close_fd_mask=2 (the parsers' "curlguard: ..." warnings are silenced; the
 * fuzzer's own output and sanitizer reports go to its own copy), and an invariant's
 * message must still be seen. */
static int cg_fuzz_err = 2;
__attribute__((constructor)) static void cg_fuzz_keep_stderr(void) {
  int fd = dup(2);
  if (fd >= 0)
    cg_fuzz_err = fd;
}

#define CG_FUZZ_CHECK(cond, ...)                                                            \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      dprintf(cg_fuzz_err, "invariant failed: %s: ", #cond);                                \
      dprintf(cg_fuzz_err, __VA_ARGS__);                                                    \
      dprintf(cg_fuzz_err, "\n");                                                           \
      abort();                                                                              \
    }                                                                                       \
  } while (0)

/* A NUL-terminated copy of data[0..size) (free it). */
static inline char *cg_fuzz_str(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s)
    abort();
  memcpy(s, data, size);
  s[size] = '\0';
  return s;
}

/* Split a NUL-terminated copy of the input at '\n' into at most `n` fields (the last one
 * takes the rest; missing ones are NULL).  Returns the copy, which owns the fields. */
static inline char *cg_fuzz_fields(const uint8_t *data, size_t size, char **field, size_t n) {
  char *s = cg_fuzz_str(data, size), *p = s;
  size_t i;
  for (i = 0; i < n; i++) {
    char *nl;
    field[i] = p;
    if (!p)
      continue;
    nl = i + 1 < n ? strchr(p, '\n') : NULL;
    if (nl) {
      *nl = '\0';
      p = nl + 1;
    } else {
      p = NULL;
    }
  }
  return s;
}

/* The input written to a private file under /dev/shm (for parsers that read a path).
 * Returns the path (static). */
static char cg_fuzz_path[128];
static void cg_fuzz_unlink(void) { unlink(cg_fuzz_path); }

static inline const char *cg_fuzz_file(const char *tag, const uint8_t *data, size_t size) {
  char *path = cg_fuzz_path;
  FILE *f;
  if (!path[0]) {
    snprintf(path, sizeof(cg_fuzz_path), "/dev/shm/cg-fuzz-%s-%d", tag, (int) getpid());
    atexit(cg_fuzz_unlink); /* the file is gone when the run ends (not after a crash) */
  }
  f = fopen(path, "w");
  if (!f)
    abort();
  if (size && fwrite(data, 1, size, f) != size)
    abort();
  fclose(f);
  return path;
}

#endif
