/* report-cli.c - `curlguard report [--json] [--html FILE] [LOG...]`: arguments and inputs.
 *
 * LOG "-" (or no LOG) is stdin.  Every LOG is opened before anything is read: a LOG that
 * cannot be opened (or is a directory) is one "curlguard: report: ..." line and exit 1
 * with no report, so a report never silently covers less than was asked for.  A read
 * error part-way is the same.  Malformed lines never fail the command: they are counted
 * and shown.  Exit 0 with a report, 2 on usage errors.
 *
 * --html FILE writes the page (report-html.h) instead of the text (with --json, the JSON
 * still goes to stdout; FILE "-" is stdout, then without --json).  The page is written to
 * a temporary file beside FILE, created before any log is read, and renamed over FILE at
 * the end: an unwritable FILE fails at once (one line, exit 1), and a failed run never
 * leaves a truncated page behind.
 */
#include "cli.h"
#include "report-html.h"
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char cg__report_usage[] =
    "usage: curlguard report [--json] [--html FILE] [LOG...]";

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

#define CG__SKIP (-1)   /* fds[i]: a second "-" (stdin is at its end after the first), or
                         * a regular file named before (the same device and inode) */
#define CG__REOPEN (-2) /* fds[i]: a regular file, opened again when it is read */

/* Open every input before anything is read (a missing one is reported before any
 * output), into `fds`.  Anything but a regular file (stdin, a FIFO, a device) is kept open
 * and read from that descriptor: opened twice, a FIFO whose writer finished in between
 * would be waited on for ever, its data gone.  A regular file is closed again (a report
 * of thousands of rotated logs must not run out of descriptors) and opened at its turn.
 * A regular file named again (`report usage.jsonl *.jsonl`, a link to it) is read once,
 * and a line says so: its calls and costs are not counted twice.
 * 0, or -1 after the message (the descriptors opened so far closed). */
static int cg__open_inputs(char **names, int n, int *fds) {
  int stdin_seen = 0;
  struct stat sb;
  struct { dev_t dev; ino_t ino; } *ids = calloc((size_t) n + 1, sizeof(*ids));

  if (!ids) {
    cg_cli_error("report: out of memory");
    return -1;
  }
  for (int i = 0; i < n; i++) {
    if (strcmp(names[i], "-") == 0 && stdin_seen) {
      fds[i] = CG__SKIP;
      continue;
    }
    if ((fds[i] = cg__open_log(names[i])) < 0) {
      while (i-- > 0)
        if (fds[i] > STDIN_FILENO)
          close(fds[i]);
      free(ids);
      return -1;
    }
    stdin_seen |= fds[i] == STDIN_FILENO;
    if (fds[i] != STDIN_FILENO && fstat(fds[i], &sb) == 0 && S_ISREG(sb.st_mode)) {
      int j;
      close(fds[i]);
      fds[i] = CG__REOPEN;
      for (j = 0; j < i; j++)
        if (fds[j] == CG__REOPEN && ids[j].dev == sb.st_dev && ids[j].ino == sb.st_ino)
          break;
      if (j < i) {
        cg_cli_error("report: %s is %s again: read once", names[i], names[j]);
        fds[i] = CG__SKIP;
      }
      ids[i].dev = sb.st_dev;
      ids[i].ino = sb.st_ino;
    }
  }
  free(ids);
  return 0;
}

static void cg__close_inputs(const int *fds, int n) {
  for (int i = 0; i < n; i++)
    if (fds[i] > STDIN_FILENO)
      close(fds[i]);
}

static int cg__read_all(struct cg_report *r, char **names, const int *fds, int n) {
  for (int i = 0; i < n; i++) {
    int fd = fds[i], rc;
    if (fd == CG__SKIP)
      continue;
    if (fd == CG__REOPEN && (fd = cg__open_log(names[i])) < 0)
      return -1;
    cg_report_source(r, strcmp(names[i], "-") == 0 ? "(stdin)" : names[i]);
    rc = cg_report_read_fd(r, fd);
    if (rc != 0)
      cg_cli_error("report: reading %s: %s", names[i], strerror(errno));
    if (fds[i] == CG__REOPEN)
      close(fd);
    if (rc != 0)
      return -1;
  }
  return 0;
}

/* Where the page goes: FILE through a temporary file beside it, or stdout ("-"). */
struct cg__page {
  const char *path;   /* NULL: no page */
  char *target;       /* the file replaced: path, or what its symlinks lead to */
  char *tmp;          /* the temporary file, renamed to target at the end */
  FILE *f;
};

/* Create the temporary file of the page: 0, or -1 after the message. */
/* The temporary page while it exists, for cg__page_signal: a report killed while it
 * reads (SIGTERM, ^C while it waits on stdin) left FILE.tmp-XXXXXX behind (helper-62). */
static char *volatile cg__page_tmp;

/* SIGINT, SIGTERM, SIGHUP: the temporary page removed, then the signal's own end. */
static void cg__page_signal(int sig) {
  char *tmp = cg__page_tmp;
  if (tmp)
    unlink(tmp); /* async-signal-safe (signal-safety(7)) */
  signal(sig, SIG_DFL);
  raise(sig);
}

/* Whether the file at `path` looks like an HTML page (what --html may replace): its first
 * byte past a UTF-8 byte order mark and blanks is '<'.  A usage log's is '{'. */
static int cg__page_like(const char *path) {
  unsigned char buf[256];
  size_t n, i = 0;
  FILE *f = fopen(path, "rb");

  if (!f)
    return 0;
  n = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  if (n >= 3 && buf[0] == 0xEF && buf[1] == 0xBB && buf[2] == 0xBF)
    i = 3;
  while (i < n && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r'))
    i++;
  return i < n && buf[i] == '<';
}

static int cg__page_open(struct cg__page *p) {
  struct stat st;
  size_t n;
  int fd, exists;
  mode_t mask;

  if (strcmp(p->path, "-") == 0) {
    p->f = stdout;
    return 0;
  }
  exists = stat(p->path, &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) {
    cg_cli_error("report: cannot write %s: is a directory", p->path);
    return -1;
  }
  /* Only a regular file is replaced: a device (/dev/null), a FIFO or a socket would be
   * renamed over, not written to (--html - writes to stdout). */
  if (exists && !S_ISREG(st.st_mode)) {
    cg_cli_error("report: cannot write %s: not a regular file (--html - writes the page "
                 "to stdout)", p->path);
    return -1;
  }
  if (exists && access(p->path, W_OK) != 0) {
    cg_cli_error("report: cannot write %s: %s", p->path, strerror(errno));
    return -1;
  }
  /* Only a page is replaced: `--html usage.jsonl`, `--html` taken for a switch like
   * `--json` with the log as its FILE, read stdin and renamed the page over the log
   * (helper-62), and a guard still writing to it wrote on into the removed file. */
  if (exists && st.st_size > 0 && !cg__page_like(p->path)) {
    cg_cli_error("report: %s exists and is not an HTML page (a usage log?); not replaced "
                 "(usage: report --html FILE [LOG...])", p->path);
    return -1;
  }
  /* A symlink is written through: the page replaces the file it leads to. */
  p->target = exists ? realpath(p->path, NULL) : strdup(p->path);
  if (!p->target) {
    cg_cli_error("report: cannot write %s: %s", p->path, strerror(errno));
    return -1;
  }
  n = strlen(p->target) + 16;
  p->tmp = malloc(n);
  if (!p->tmp) {
    cg_cli_error("report: out of memory");
    free(p->target);
    p->target = NULL;
    return -1;
  }
  snprintf(p->tmp, n, "%s.tmp-XXXXXX", p->target);
  fd = mkstemp(p->tmp);
  if (fd < 0) {
    cg_cli_error("report: cannot write %s: %s", p->path, strerror(errno));
    free(p->tmp);
    p->tmp = NULL;
    free(p->target);
    p->target = NULL;
    return -1;
  }
  cg__page_tmp = p->tmp;
  signal(SIGINT, cg__page_signal);
  signal(SIGTERM, cg__page_signal);
  signal(SIGHUP, cg__page_signal);
  mask = umask(0);
  umask(mask);
  /* A page like any other file, not mkstemp's 0600; a replaced file keeps its mode. */
  (void) fchmod(fd, exists ? st.st_mode & 07777 : 0666 & ~mask);
  p->f = fdopen(fd, "w");
  if (!p->f) {
    cg_cli_error("report: cannot write %s: %s", p->path, strerror(errno));
    close(fd);
    unlink(p->tmp);
    cg__page_tmp = NULL;
    free(p->tmp);
    p->tmp = NULL;
    free(p->target);
    p->target = NULL;
    return -1;
  }
  return 0;
}

/* Finish the page (`ok`: rename it into place; else remove it): 0, or -1 after the
 * message. */
static int cg__page_close(struct cg__page *p, int ok) {
  int rc = 0;

  if (!p->f || p->f == stdout) {
    p->f = NULL;
    return 0;
  }
  if (fclose(p->f) != 0 && ok) {
    cg_cli_error("report: writing %s: %s", p->path, strerror(errno));
    ok = 0;
    rc = -1;
  }
  p->f = NULL;
  if (ok && rename(p->tmp, p->target) != 0) {
    cg_cli_error("report: cannot write %s: %s", p->path, strerror(errno));
    rc = -1;
    ok = 0;
  }
  if (!ok)
    unlink(p->tmp);
  cg__page_tmp = NULL; /* before the free: a signal now finds nothing to remove */
  free(p->tmp);
  p->tmp = NULL;
  free(p->target);
  p->target = NULL;
  return rc;
}

/* Write the page of `r`: 0, or -1 after the message. */
static int cg__page_write(struct cg__page *p, const struct cg_report *r) {
  if (cg_report_html(r, r->series, p->f) != 0 || fflush(p->f) != 0) {
    cg_cli_error("report: writing %s: %s", strcmp(p->path, "-") == 0 ? "the page" : p->path,
                 strerror(errno));
    return -1;
  }
  return 0;
}

int cg_cli_report(int argc, char **argv) {
  struct cg__page page = {NULL, NULL, NULL, NULL};
  static char *stdin_only[] = {"-"};
  char **names;
  int json = 0, n = 0, i, only_files = 0, rc = CG_EXIT_OK, *fds;
  struct cg_report *r;

  names = calloc((size_t) argc + 1, sizeof(*names));
  fds = calloc((size_t) argc + 1, sizeof(*fds));
  if (!names || !fds) {
    free(names);
    free(fds);
    cg_cli_error("report: out of memory");
    return CG_EXIT_ERROR;
  }
  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!only_files && strcmp(a, "--") == 0) {
      only_files = 1;
    } else if (!only_files && strcmp(a, "--json") == 0) {
      json = 1;
    } else if (!only_files && (strcmp(a, "--html") == 0 || strncmp(a, "--html=", 7) == 0)) {
      const char *v = a[6] == '=' ? a + 7 : (i + 1 < argc ? argv[++i] : NULL);
      if (!v || !*v) {
        cg_cli_error("report: --html needs a FILE (%s)", cg__report_usage);
        free(names), free(fds);
        return CG_EXIT_USAGE;
      }
      page.path = v;
    } else if (!only_files && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
      puts(cg__report_usage);
      free(names), free(fds);
      return cg_cli_written("report", CG_EXIT_OK);
    } else if (!only_files && a[0] == '-' && a[1]) {
      cg_cli_error("report: unknown option \"%s\" (%s)", a, cg__report_usage);
      free(names), free(fds);
      return CG_EXIT_USAGE;
    } else {
      names[n++] = argv[i];
    }
  }
  if (page.path && json && strcmp(page.path, "-") == 0) {
    cg_cli_error("report: --html - and --json both want stdout (%s)", cg__report_usage);
    free(names), free(fds);
    return CG_EXIT_USAGE;
  }
  if (n == 0) {
    names[0] = stdin_only[0];
    n = 1;
  }
  if (cg__open_inputs(names, n, fds) != 0) {
    free(names), free(fds);
    return CG_EXIT_ERROR;
  }
  if (page.path && strcmp(page.path, "-") != 0) {
    /* The page must not replace a log it is made from (the log would be lost), given by
     * its name or on stdin (`report --html LOG < LOG`). */
    struct stat ps, ls;
    if (stat(page.path, &ps) == 0)
      for (i = 0; i < n; i++)
        if ((fds[i] >= 0 ? fstat(fds[i], &ls) == 0
                         : fds[i] == CG__REOPEN && stat(names[i], &ls) == 0) &&
            ls.st_dev == ps.st_dev && ls.st_ino == ps.st_ino) {
          cg_cli_error("report: --html %s is one of the logs read: not overwritten (%s)",
                       page.path, cg__report_usage);
          cg__close_inputs(fds, n);
          free(names), free(fds);
          return CG_EXIT_USAGE;
        }
  }
  r = cg_report_new();
  if (r && page.path && !(r->series = cg_series_new())) {
    cg_report_free(r);
    r = NULL;
  }
  if (!r) {
    cg_cli_error("report: out of memory");
    cg__close_inputs(fds, n);
    free(names), free(fds);
    return CG_EXIT_ERROR;
  }
  if (page.path && cg__page_open(&page) != 0) {
    cg_report_free(r);
    cg__close_inputs(fds, n);
    free(names), free(fds);
    return CG_EXIT_ERROR;
  }
  if (cg__read_all(r, names, fds, n) != 0) {
    rc = CG_EXIT_ERROR;
  } else {
    cg_report_finish(r);
    if (page.path && cg__page_write(&page, r) != 0)
      rc = CG_EXIT_ERROR;
    if (page.path && !json) {
      /* the page only */
    } else if (json) {
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
  if (page.path && cg__page_close(&page, rc == CG_EXIT_OK) != 0)
    rc = CG_EXIT_ERROR;
  cg__close_inputs(fds, n);
  cg_report_free(r);
  free(names), free(fds);
  return rc;
}
