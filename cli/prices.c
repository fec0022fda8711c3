/* prices.c - `curlguard prices check [LOG...]`: which models in usage logs the price table
 * cannot price (SPEC section 8).
 *
 * The table is CURLGUARD_PRICES when set (either format, price.h), else the shipped one
 * beside this program (PREFIX/share/curlguard/prices.json when installed, data/prices.json
 * from the build tree, else the copy `make` puts beside the program in a build directory
 * outside the tree).  The records are those `curlguard report` counts (cg_rrec_parse:
 * a line cut mid-write or a JSON object that is not a whole usage record is malformed,
 * not a record), so a model's count here is its attempts there; a file named twice is
 * read once, as there.  Every record with a "model" is looked up; each model the table
 * does not know is one line on stdout, "MODEL<TAB>RECORDS", most records first.  A summary
 * line goes to stderr with the records and malformed lines read (helper-67: a tester saw
 * 89 records here against the report's 86 when every JSON line with a model counted).
 * Exit 0: every model is priced; 1: some are not, or a LOG or the table cannot be read;
 * 2: usage error.
 */
#include "cli.h"
#include "price.h"
#include "report-rec.h"
#include "report.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char shown[1024]; /* a model name as the list shows it (cut short to fit) */
static char shown_path[1024], shown_date[256]; /* the table's path and date, shown */

static const char cg__prices_usage[] =
    "usage: curlguard prices check [LOG...]\n"
    "\n"
    "Lists the models seen in usage logs (LOG \"-\" or none: stdin) that the price table\n"
    "cannot price, one per line with its record count (MODEL<TAB>RECORDS).\n"
    "Records are counted as curlguard report counts them: lines that are not whole\n"
    "usage records (cut mid-write, keys missing) are malformed and not counted.\n"
    "The table is CURLGUARD_PRICES when set (curlguard's format or LiteLLM's\n"
    "model_prices_and_context_window.json), else the shipped one.\n"
    "Exit status: 0 every model is priced, 1 some are not (or a LOG or the table\n"
    "cannot be read), 2 usage error.\n";

struct cg__model_count {
  char *name;
  size_t records;
};

/* Models seen, in an open-addressing hash table (a log may name many models). */
struct cg__models {
  struct cg__model_count *slot;
  size_t cap, n;
};

static uint64_t cg__hash(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++)
    h = (h ^ (unsigned char) *s) * 1099511628211ULL;
  return h;
}

static int cg__models_grow(struct cg__models *m) {
  size_t cap = m->cap ? m->cap * 2 : 64, i;
  struct cg__model_count *slot = calloc(cap, sizeof(*slot));
  if (!slot)
    return -1;
  for (i = 0; i < m->cap; i++) {
    size_t j;
    if (!m->slot[i].name)
      continue;
    for (j = cg__hash(m->slot[i].name) & (cap - 1); slot[j].name; j = (j + 1) & (cap - 1)) {
    }
    slot[j] = m->slot[i];
  }
  free(m->slot);
  m->slot = slot;
  m->cap = cap;
  return 0;
}

/* Count one record of `name`: 0, or -1 when out of memory. */
static int cg__models_add(struct cg__models *m, const char *name) {
  size_t j;
  if ((m->n + 1) * 2 > m->cap && cg__models_grow(m) != 0)
    return -1;
  for (j = cg__hash(name) & (m->cap - 1); m->slot[j].name; j = (j + 1) & (m->cap - 1)) {
    if (strcmp(m->slot[j].name, name) == 0) {
      m->slot[j].records++;
      return 0;
    }
  }
  if (!(m->slot[j].name = strdup(name)))
    return -1;
  m->slot[j].records = 1;
  m->n++;
  return 0;
}

static void cg__models_free(struct cg__models *m) {
  for (size_t i = 0; i < m->cap; i++)
    free(m->slot[i].name);
  free(m->slot);
}

static int cg__count_cmp(const void *a, const void *b) {
  const struct cg__model_count *x = a, *y = b;
  if (x->records != y->records)
    return x->records > y->records ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* What the logs held, counted as `curlguard report` counts it, so the two agree. */
struct cg__tally {
  size_t lines;     /* lines that are not blank */
  size_t records;   /* whole records (cg_rrec_parse: the report's "records") */
  size_t malformed; /* lines that are not whole records, too long ones included */
  size_t modelled;  /* records whose "model" is a non-empty string */
};

struct cg__count_ctx {
  struct cg__models *m;
  struct cg__tally *t;
  int oom;
};

/* cg_report_read_lines's callback: one line as the report takes it (cg_report_take):
 * blank lines are skipped, a line that is not a whole record (cut mid-write, a key
 * missing or of the wrong type, over CG_REPORT_LINE_MAX bytes: `line` NULL, not a usage
 * record at all) is malformed and its "model" is not counted, however readable. */
static void cg__count_line(void *arg, const char *line, size_t len) {
  struct cg__count_ctx *c = arg;
  struct cg_rrec x;
  int why = cg_report_take(line, len, &x);

  if (why < 0)
    return;
  c->t->lines++;
  if (why != CG_RBAD_NONE) {
    c->t->malformed++;
    return;
  }
  c->t->records++;
  if (x.model && x.model[0]) {
    if (!c->oom && cg__models_add(c->m, x.model) != 0)
      c->oom = 1;
    c->t->modelled++;
  }
  cg_rrec_release(&x);
}

/* Count the models of the records in `f`, read as the report reads a log (its reader:
 * memory does not grow with a line's length): 0, or -1 after the message. */
static int cg__read_log(FILE *f, const char *name, struct cg__models *m, struct cg__tally *t) {
  struct cg__count_ctx c = {m, t, 0};

  if (cg_report_read_lines(fileno(f), cg__count_line, &c) != 0) {
    cg_cli_error("prices: %s: %s", name, strerror(errno));
    return -1;
  }
  if (c.oom) {
    cg_cli_error("prices: out of memory");
    return -1;
  }
  return 0;
}

/* The shipped table beside this program, or NULL. */
static char *cg__shipped_table(void) {
  static const char *const rel[] = {"../share/curlguard/prices.json", "../data/prices.json",
                                    "prices.json"};
  char exe[4096], path[4200];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  char *slash;

  if (n <= 0)
    return NULL;
  exe[n] = '\0';
  if (!(slash = strrchr(exe, '/')))
    return NULL;
  *slash = '\0';
  for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
    snprintf(path, sizeof(path), "%s/%s", exe, rel[i]);
    if (access(path, R_OK) == 0) {
      char *real = realpath(path, NULL); /* named in messages: no "bin/../" in them */
      return real ? real : strdup(path);
    }
  }
  return NULL;
}

static int cg__prices_check(int argc, char **argv) {
  static char *const stdin_only[] = {"-", NULL};
  const char *env = getenv("CURLGUARD_PRICES");
  char **logs = argc > 0 ? argv : (char **) stdin_only;
  int nlogs = argc > 0 ? argc : 1, rc = CG_EXIT_OK, stdin_done = 0;
  struct cg__models m = {0};
  struct cg__model_count *unknown = NULL;
  struct cg_prices *table;
  struct cg__tally t = {0};
  struct { dev_t dev; ino_t ino; int set; } *seen;
  size_t unknown_records = 0, nunknown = 0;
  char why[512], *path;

  for (int i = 0; i < nlogs; i++) {
    if (logs[i][0] == '-' && logs[i][1]) {
      cg_cli_error("prices check: unknown option \"%s\" (try: curlguard prices --help)",
                   logs[i]);
      return CG_EXIT_USAGE;
    }
  }
  path = env && *env ? strdup(env) : cg__shipped_table();
  if (!path) {
    cg_cli_error("prices: no price table: CURLGUARD_PRICES is not set and the shipped "
                 "table is not beside this program");
    return CG_EXIT_ERROR;
  }
  if (!(table = cg_prices_load(path, why, sizeof(why)))) {
    cg_cli_error("%s", why);
    free(path);
    return CG_EXIT_ERROR;
  }
  if (!(seen = calloc((size_t) nlogs, sizeof(*seen)))) {
    cg_cli_error("prices: out of memory");
    cg_prices_free(table);
    free(path);
    return CG_EXIT_ERROR;
  }
  for (int i = 0; i < nlogs && rc == CG_EXIT_OK; i++) {
    int is_stdin = strcmp(logs[i], "-") == 0;
    struct stat st;
    FILE *f;
    if (is_stdin && stdin_done)
      continue;
    f = is_stdin ? stdin : fopen(logs[i], "re");
    if (!f) {
      cg_cli_error("prices: %s: %s", logs[i], strerror(errno));
      rc = CG_EXIT_ERROR;
      break;
    }
    if (fstat(fileno(f), &st) != 0) {
      cg_cli_error("prices: %s: %s", logs[i], strerror(errno));
      rc = CG_EXIT_ERROR;
    } else if (S_ISDIR(st.st_mode)) {
      cg_cli_error("prices: %s: is a directory", logs[i]);
      rc = CG_EXIT_ERROR;
    } else {
      /* A regular file named again (a link to it) is read once, as the report does
       * (stdin is not compared, as there). */
      int named = !is_stdin && S_ISREG(st.st_mode), j = 0;
      if (named)
        for (; j < i; j++)
          if (seen[j].set && seen[j].dev == st.st_dev && seen[j].ino == st.st_ino)
            break;
      if (named && j < i) {
        cg_cli_error("prices check: %s is %s again: read once", logs[i], logs[j]);
      } else {
        if (named) {
          seen[i].dev = st.st_dev;
          seen[i].ino = st.st_ino;
          seen[i].set = 1;
        }
        if (cg__read_log(f, logs[i], &m, &t) != 0)
          rc = CG_EXIT_ERROR;
      }
    }
    if (is_stdin)
      stdin_done = 1;
    else
      fclose(f);
  }
  if (rc == CG_EXIT_OK && m.n && !(unknown = calloc(m.n, sizeof(*unknown)))) {
    cg_cli_error("prices: out of memory");
    rc = CG_EXIT_ERROR;
  }
  if (rc == CG_EXIT_OK) {
    for (size_t i = 0; i < m.cap; i++) {
      if (m.slot[i].name && !cg_prices_lookup(table, m.slot[i].name, NULL)) {
        unknown[nunknown++] = m.slot[i];
        unknown_records += m.slot[i].records;
      }
    }
    qsort(unknown, nunknown, sizeof(*unknown), cg__count_cmp);
    for (size_t i = 0; i < nunknown; i++)
      printf("%s\t%zu\n", cg_cli_shown(unknown[i].name, shown, sizeof(shown)),
             unknown[i].records);
    /* the path and the table's date as names are shown: one line, no terminal control */
    cg_cli_shown(path, shown_path, sizeof(shown_path));
    cg_cli_shown(cg_prices_date(table), shown_date, sizeof(shown_date));
    /* The counts are the report's: its records and malformed lines, then the records
     * that name a model (a record with a null model, a GET, is a record too). */
    if (nunknown)
      fprintf(stderr, "curlguard: prices check: %zu of %zu models (%zu of %zu records with "
              "a model) have no price in %s (dated %s); read %zu records from %zu lines, "
              "%zu malformed lines skipped (as curlguard report counts them)\n", nunknown,
              m.n, unknown_records, t.modelled, shown_path, shown_date, t.records, t.lines,
              t.malformed);
    else
      fprintf(stderr, "curlguard: prices check: all %zu models (%zu records with a model) "
              "are priced by %s (dated %s); read %zu records from %zu lines, %zu malformed "
              "lines skipped (as curlguard report counts them)\n", m.n, t.modelled,
              shown_path, shown_date, t.records, t.lines, t.malformed);
    rc = cg_cli_written("prices check", nunknown ? CG_EXIT_ERROR : CG_EXIT_OK);
  }
  free(unknown);
  free(seen);
  cg__models_free(&m);
  cg_prices_free(table);
  free(path);
  return rc;
}

int cg_cli_prices(int argc, char **argv) {
  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
                    strcmp(argv[1], "help") == 0)) {
    fputs(cg__prices_usage, stdout);
    return cg_cli_written("prices", CG_EXIT_OK);
  }
  if (argc < 2 || strcmp(argv[1], "check") != 0) {
    if (argc < 2)
      cg_cli_error("prices: missing subcommand (usage: curlguard prices check [LOG...])");
    else
      cg_cli_error("prices: unknown subcommand \"%s\" (usage: curlguard prices check "
                   "[LOG...])", argv[1]);
    return CG_EXIT_USAGE;
  }
  if (argc >= 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
    fputs(cg__prices_usage, stdout);
    return cg_cli_written("prices", CG_EXIT_OK);
  }
  return cg__prices_check(argc - 2, argv + 2);
}
