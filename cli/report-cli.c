/* report-cli.c - `curlguard report [--json] [LOG...]`: arguments and inputs.
 *
 * LOG "-" (or no LOG) is stdin.  Every LOG is opened before anything is read: a LOG that
 * cannot be opened (or is a directory) is one "curlguard: report: ..." line and exit 1
 * with no report, so a report never silently covers less than was asked for.  A read
 * error part-way is the same.  Malformed lines never fail the command: they are counted
 * and shown.  Exit 0 with a report, 2 on usage errors.
 */
#include "cli.h"
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char cg__report_usage[] = "usage: curlguard report [--json] [LOG...]";

/* Open `name` for reading ("-" is stdin); -1 with a message on failure. */
static int cg__open_log(const char *name) {
  struct stat st;
  int fd;

  if (strcmp(name, "-") == 0)
    return STDIN_FILENO;
  fd = open(name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    cg_cli_error("report: %s: %s", name, strerror(errno));
    return -1;
  }
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    cg_cli_error("report: %s: is a directory", name);
    close(fd);
    return -1;
  }
  return fd;
}

/* Check that every input opens (without reading it): 0, or -1 after the message. */
static int cg__check_inputs(char **names, int n) {
  for (int i = 0; i < n; i++) {
    int fd = cg__open_log(names[i]);
    if (fd < 0)
      return -1;
    if (fd != STDIN_FILENO)
      close(fd);
  }
  return 0;
}

static int cg__read_all(struct cg_report *r, char **names, int n) {
  int stdin_done = 0;

  for (int i = 0; i < n; i++) {
    int fd, rc;
    if (strcmp(names[i], "-") == 0 && stdin_done)
      continue; /* stdin twice: it is at its end after the first time */
    fd = cg__open_log(names[i]);
    if (fd < 0)
      return -1;
    stdin_done |= fd == STDIN_FILENO;
    cg_report_source(r, strcmp(names[i], "-") == 0 ? "(stdin)" : names[i]);
    rc = cg_report_read_fd(r, fd);
    if (rc != 0)
      cg_cli_error("report: reading %s: %s", names[i], strerror(errno));
    if (fd != STDIN_FILENO)
      close(fd);
    if (rc != 0)
      return -1;
  }
  return 0;
}

int cg_cli_report(int argc, char **argv) {
  static char *stdin_only[] = {"-"};
  char **names;
  int json = 0, n = 0, i, only_files = 0, rc = CG_EXIT_OK;
  struct cg_report *r;

  names = calloc((size_t) argc + 1, sizeof(*names));
  if (!names) {
    cg_cli_error("report: out of memory");
    return CG_EXIT_ERROR;
  }
  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!only_files && strcmp(a, "--") == 0) {
      only_files = 1;
    } else if (!only_files && strcmp(a, "--json") == 0) {
      json = 1;
    } else if (!only_files && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
      puts(cg__report_usage);
      free(names);
      return CG_EXIT_OK;
    } else if (!only_files && a[0] == '-' && a[1]) {
      cg_cli_error("report: unknown option \"%s\" (%s)", a, cg__report_usage);
      free(names);
      return CG_EXIT_USAGE;
    } else {
      names[n++] = argv[i];
    }
  }
  if (n == 0) {
    free(names);
    names = NULL;
  }
  if (cg__check_inputs(names ? names : stdin_only, names ? n : 1) != 0) {
    free(names);
    return CG_EXIT_ERROR;
  }
  r = cg_report_new();
  if (!r) {
    cg_cli_error("report: out of memory");
    free(names);
    return CG_EXIT_ERROR;
  }
  if (cg__read_all(r, names ? names : stdin_only, names ? n : 1) != 0) {
    rc = CG_EXIT_ERROR;
  } else {
    cg_report_finish(r);
    if (json) {
      cJSON *doc = cg_report_json(r);
      char *text = doc ? cJSON_PrintUnformatted(doc) : NULL;
      if (!text) {
        cg_cli_error("report: out of memory");
        rc = CG_EXIT_ERROR;
      } else {
        puts(text);
      }
      cJSON_free(text);
      cJSON_Delete(doc);
    } else {
      cg_report_print(r, stdout);
    }
    if (fflush(stdout) != 0) {
      cg_cli_error("report: writing the report: %s", strerror(errno));
      rc = CG_EXIT_ERROR;
    }
  }
  cg_report_free(r);
  free(names);
  return rc;
}
