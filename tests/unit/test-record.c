/* test-record.c - one JSON line per attempt (record.h, SPEC section 5). */
#include "record.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* SPEC section 5, in its order: exactly these keys, never more, never fewer. */
static const char *const spec_keys[] = {
    "ts",           "pid",           "request_id",        "task_id",      "attempt",
    "final",        "method",        "host",              "path",         "pool",
    "status",       "curl_code",     "outcome",           "decision",     "reason",
    "queue_ms",     "backoff_ms",    "connect_ms",        "ttfb_ms",      "duration_ms",
    "bytes_sent",   "bytes_received", "model",            "prompt_tokens", "completion_tokens",
    "total_tokens", "cached_tokens", "cost_usd",          "possibly_billed", "body_digest",
};
#define NKEYS (sizeof(spec_keys) / sizeof(spec_keys[0]))

/* The extensions record.h declares "Beyond SPEC section 5" (CASES.md: silent libcurl
 * re-sends and host retries are counted in the record).  Any other key fails: a new
 * key must be added here on purpose, after checking it never carries a header value,
 * a body, a key or a query string. */
static const char *const extra_keys[] = {"libcurl_resends", "repeat_of", "repeats",
                                          "fallback_from", "breaker_wait_ms"};
#define NEXTRA (sizeof(extra_keys) / sizeof(extra_keys[0]))

/* 2026-08-13T15:36:43.123Z */
#define TS_MS 1786635403123LL

static void full_record(struct cg_record *r) {
  cg_record_init(r);
  r->ts_ms = TS_MS;
  r->pid = 4242;
  r->request_id = "0b7e4c1a-3f2d-4a9b-8c7d-6e5f4a3b2c1d";
  r->task_id = "nightly-42";
  r->attempt = 2;
  r->final = 1;
  r->method = "POST";
  r->host = "api.openai.com";
  r->path = "/v1/chat/completions";
  r->pool = "openai";
  r->status = 200;
  r->curl_code = 0;
  r->outcome = "ok";
  r->decision = "done";
  r->reason = "ok";
  r->queue_ms = 12;
  r->backoff_ms = 0;
  r->connect_ms = 35;
  r->ttfb_ms = 812;
  r->duration_ms = 1500;
  r->bytes_sent = 5000000000LL;
  r->bytes_received = 2048;
  r->model = "gpt-4o-mini";
  r->prompt_tokens = 308;
  r->completion_tokens = 68;
  r->total_tokens = 376;
  r->cached_tokens = 0;
  r->cost_usd = 0.000187;
  r->possibly_billed = 0;
  r->body_digest = "0123456789abcdef0123456789abcdef";
  r->libcurl_resends = 1;
  r->repeat_of = "11111111-2222-4333-8444-555555555555";
  r->repeats = 2;
}

/* Parse a line produced by cg_record_json: one object, ending in exactly one '\n'. */
static cJSON *parse_line(const char *line, size_t len) {
  cJSON *o;
  cr_assert_gt(len, 1);
  cr_assert_eq(strlen(line), len, "len must be the string length");
  cr_assert_eq(line[len - 1], '\n', "the line must end with '\\n'");
  cr_assert_neq(line[len - 2], '\n', "exactly one '\\n'");
  cr_assert_null(memchr(line, '\n', len - 1), "no '\\n' inside the line");
  o = cJSON_ParseWithLength(line, len);
  cr_assert(cJSON_IsObject(o), "not a JSON object: %s", line);
  return o;
}

static void assert_exact_keys(const cJSON *o) {
  const cJSON *item;
  size_t i, n = 0;
  for (i = 0; i < NKEYS; i++)
    cr_expect_not_null(cJSON_GetObjectItemCaseSensitive(o, spec_keys[i]), "key %s missing",
                       spec_keys[i]);
  for (i = 0; i < NEXTRA; i++)
    cr_expect_not_null(cJSON_GetObjectItemCaseSensitive(o, extra_keys[i]), "key %s missing",
                       extra_keys[i]);
  cJSON_ArrayForEach(item, o) {
    int known = 0;
    for (i = 0; i < NKEYS; i++)
      known |= strcmp(item->string, spec_keys[i]) == 0;
    for (i = 0; i < NEXTRA; i++)
      known |= strcmp(item->string, extra_keys[i]) == 0;
    cr_expect(known, "key %s is neither in SPEC section 5 nor a declared extension",
              item->string);
    n++;
  }
  cr_expect_eq(n, NKEYS + NEXTRA, "%zu keys, want %zu", n, NKEYS + NEXTRA);
}

static double num(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  cr_assert(cJSON_IsNumber(v), "%s is not a number", k);
  return v->valuedouble;
}

static const char *str(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  cr_assert(cJSON_IsString(v), "%s is not a string", k);
  return v->valuestring;
}

static int is_null(const cJSON *o, const char *k) {
  return cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, k));
}

Test(record, full_record_has_every_key_with_its_value) {
  struct cg_record r;
  size_t len = 0;
  char *line;
  cJSON *o;

  full_record(&r);
  line = cg_record_json(&r, &len);
  cr_assert_not_null(line);
  o = parse_line(line, len);
  assert_exact_keys(o);
  cr_expect_str_eq(str(o, "ts"), "2026-08-13T15:36:43.123Z");
  cr_expect_eq(num(o, "pid"), 4242);
  cr_expect_str_eq(str(o, "request_id"), "0b7e4c1a-3f2d-4a9b-8c7d-6e5f4a3b2c1d");
  cr_expect_str_eq(str(o, "task_id"), "nightly-42");
  cr_expect_eq(num(o, "attempt"), 2);
  cr_expect(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "final")));
  cr_expect_str_eq(str(o, "method"), "POST");
  cr_expect_str_eq(str(o, "host"), "api.openai.com");
  cr_expect_str_eq(str(o, "path"), "/v1/chat/completions");
  cr_expect_str_eq(str(o, "pool"), "openai");
  cr_expect_eq(num(o, "status"), 200);
  cr_expect_eq(num(o, "curl_code"), 0);
  cr_expect_str_eq(str(o, "outcome"), "ok");
  cr_expect_str_eq(str(o, "decision"), "done");
  cr_expect_str_eq(str(o, "reason"), "ok");
  cr_expect_eq(num(o, "queue_ms"), 12);
  cr_expect_eq(num(o, "backoff_ms"), 0);
  cr_expect_eq(num(o, "connect_ms"), 35);
  cr_expect_eq(num(o, "ttfb_ms"), 812);
  cr_expect_eq(num(o, "duration_ms"), 1500);
  cr_expect_eq(num(o, "bytes_sent"), 5000000000.0);
  cr_expect_eq(num(o, "bytes_received"), 2048);
  cr_expect_str_eq(str(o, "model"), "gpt-4o-mini");
  cr_expect_eq(num(o, "prompt_tokens"), 308);
  cr_expect_eq(num(o, "completion_tokens"), 68);
  cr_expect_eq(num(o, "total_tokens"), 376);
  cr_expect_eq(num(o, "cached_tokens"), 0, "0 is a known value, not null");
  cr_expect(fabs(num(o, "cost_usd") - 0.000187) < 1e-12);
  cr_expect(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "possibly_billed")));
  cr_expect_str_eq(str(o, "body_digest"), "0123456789abcdef0123456789abcdef");
  cr_expect_eq(num(o, "libcurl_resends"), 1);
  cr_expect_str_eq(str(o, "repeat_of"), "11111111-2222-4333-8444-555555555555");
  cr_expect_eq(num(o, "repeats"), 2);
  cJSON_Delete(o);
  free(line);
}

/* Integers keep every digit and costs read back exactly, in any LC_NUMERIC. */
Test(record, numbers_are_exact_in_the_text) {
  struct cg_record r;
  size_t len = 0;
  char *line;
  cJSON *o;

  full_record(&r);
  r.prompt_tokens = 9007199254740993LL; /* 2^53 + 1: not a double */
  r.cost_usd = 0.1 + 0.2;                /* 0.30000000000000004 */
  r.backoff_ms = -1234;                  /* never written so, but formatted right */
  r.queue_ms = 0;
  line = cg_record_json(&r, &len);
  cr_assert_not_null(line);
  cr_expect_not_null(strstr(line, "\"backoff_ms\":-1234,"), "%s", line);
  cr_expect_not_null(strstr(line, "\"queue_ms\":0,"), "%s", line);
  cr_expect_not_null(strstr(line, "\"prompt_tokens\":9007199254740993,"), "%s", line);
  cr_expect_not_null(strstr(line, "\"bytes_sent\":5000000000,"), "%s", line);
  o = parse_line(line, len);
  cr_expect_eq(num(o, "cost_usd"), 0.1 + 0.2);
  cJSON_Delete(o);
  free(line);
  if (setlocale(LC_NUMERIC, "de_DE.UTF-8") || setlocale(LC_NUMERIC, "fr_FR.UTF-8")) {
    r.cost_usd = 0.5;
    line = cg_record_json(&r, &len);
    cr_expect_not_null(strstr(line, "\"cost_usd\":0.5,"), "%s", line);
    free(line);
    setlocale(LC_NUMERIC, "C");
  }
}

Test(record, unknowns_are_null_never_omitted) {
  static const char *const null_keys[] = {
      "request_id", "task_id",           "method",       "host",          "path",
      "pool",       "status",            "outcome",      "decision",      "reason",
      "connect_ms", "ttfb_ms",           "duration_ms",  "model",         "prompt_tokens",
      "completion_tokens", "total_tokens", "cached_tokens", "cost_usd",   "body_digest",
      "repeat_of",
  };
  struct cg_record r;
  size_t len = 0, i;
  char *line;
  cJSON *o;

  cg_record_init(&r);
  r.ts_ms = TS_MS;
  line = cg_record_json(&r, &len);
  cr_assert_not_null(line);
  o = parse_line(line, len);
  assert_exact_keys(o);
  for (i = 0; i < sizeof(null_keys) / sizeof(null_keys[0]); i++)
    cr_expect(is_null(o, null_keys[i]), "%s should be null", null_keys[i]);
  /* Known-by-construction fields keep real values. */
  cr_expect(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(o, "final")));
  cr_expect(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(o, "possibly_billed")));
  cr_expect(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, "curl_code")));
  cr_expect(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, "queue_ms")));
  cr_expect(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, "backoff_ms")));
  cJSON_Delete(o);
  free(line);
}

Test(record, init_marks_unknowns) {
  struct cg_record r;
  cg_record_init(&r);
  cr_assert_eq(r.status, CG_NULL_INT);
  cr_assert_eq(r.connect_ms, CG_NULL_INT);
  cr_assert_eq(r.ttfb_ms, CG_NULL_INT);
  cr_assert_eq(r.duration_ms, CG_NULL_INT);
  cr_assert_eq(r.prompt_tokens, CG_NULL_INT);
  cr_assert_eq(r.completion_tokens, CG_NULL_INT);
  cr_assert_eq(r.total_tokens, CG_NULL_INT);
  cr_assert_eq(r.cached_tokens, CG_NULL_INT);
  cr_assert(isnan(r.cost_usd));
  cr_assert_null(r.model);
  cr_assert_null(r.body_digest);
}

Test(record, individual_nulls) {
  struct cg_record r;
  size_t len = 0;
  char *line;
  cJSON *o;

  full_record(&r);
  r.status = CG_NULL_INT;
  r.cost_usd = NAN;
  r.model = NULL;
  r.ttfb_ms = CG_NULL_INT;
  r.possibly_billed = 1;
  r.final = 0;
  line = cg_record_json(&r, &len);
  o = parse_line(line, len);
  cr_expect(is_null(o, "status"));
  cr_expect(is_null(o, "cost_usd"));
  cr_expect(is_null(o, "model"));
  cr_expect(is_null(o, "ttfb_ms"));
  cr_expect_eq(num(o, "connect_ms"), 35);
  cr_expect(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "possibly_billed")));
  cr_expect(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "final")));
  cJSON_Delete(o);
  free(line);
}

static const struct {
  long long ms;
  const char *ts;
} ts_cases[] = {
    {TS_MS, "2026-08-13T15:36:43.123Z"},
    {0, "1970-01-01T00:00:00.000Z"},
    {1786635403005LL, "2026-08-13T15:36:43.005Z"},
    {1786635403999LL, "2026-08-13T15:36:43.999Z"},
    {951782400000LL, "2000-02-29T00:00:00.000Z"},
    {4102444799999LL, "2099-12-31T23:59:59.999Z"},
};

Test(record, ts_rfc3339_utc_milliseconds) {
  size_t i;
  for (i = 0; i < sizeof(ts_cases) / sizeof(ts_cases[0]); i++) {
    struct cg_record r;
    size_t len = 0;
    char *line;
    cJSON *o;
    cg_record_init(&r);
    r.ts_ms = ts_cases[i].ms;
    line = cg_record_json(&r, &len);
    o = parse_line(line, len);
    cr_expect_str_eq(str(o, "ts"), ts_cases[i].ts, "ts for %lld ms", ts_cases[i].ms);
    cJSON_Delete(o);
    free(line);
  }
}

Test(record, strings_are_escaped) {
  struct cg_record r;
  size_t len = 0;
  char *line;
  cJSON *o;

  full_record(&r);
  r.task_id = "quote\" back\\slash\nnew line\ttab";
  r.path = "/v1/\"x\"";
  line = cg_record_json(&r, &len);
  o = parse_line(line, len);
  cr_expect_str_eq(str(o, "task_id"), "quote\" back\\slash\nnew line\ttab");
  cr_expect_str_eq(str(o, "path"), "/v1/\"x\"");
  cJSON_Delete(o);
  free(line);
}

/* ---- emitting to a file ---- */

static char *make_tmpdir(void) {
  char *dir = strdup("/tmp/cg-test-record-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  return dir;
}

static void rm_rf(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  cr_expect_eq(system(cmd), 0);
}

/* Read a whole file; returns its lines parsed, checking each. */
static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "r");
  char *buf;
  long sz;
  cr_assert_not_null(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  buf = malloc((size_t) sz + 1);
  cr_assert_eq(fread(buf, 1, (size_t) sz, f), (size_t) sz);
  buf[sz] = '\0';
  fclose(f);
  *n = (size_t) sz;
  return buf;
}

Test(record, emit_appends_one_line_per_call_and_creates_dirs) {
  char *dir = make_tmpdir();
  char path[512];
  struct cg_config c;
  struct cg_record r;
  struct stat st;
  size_t n, lines = 0;
  char *text, *p, *save = NULL;
  int i;

  memset(&c, 0, sizeof(c));
  snprintf(path, sizeof(path), "%s/a/b/c/usage.jsonl", dir);
  c.log_path = path;
  full_record(&r);
  for (i = 1; i <= 3; i++) {
    r.attempt = i;
    cr_assert_eq(cg_record_emit(&c, &r), 0, "emit %d failed", i);
  }
  cr_assert_eq(stat(path, &st), 0, "log file not created");
  cr_expect_eq(st.st_mode & 0777, 0600, "log mode %o", st.st_mode & 0777);
  text = slurp(path, &n);
  cr_assert_eq(text[n - 1], '\n');
  for (p = strtok_r(text, "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
    cJSON *o = cJSON_Parse(p);
    cr_assert(cJSON_IsObject(o), "line %zu does not parse: %s", lines + 1, p);
    lines++;
    cr_expect_eq(num(o, "attempt"), (double) lines);
    cJSON_Delete(o);
  }
  cr_assert_eq(lines, 3);
  free(text);
  rm_rf(dir);
  free(dir);
}

Test(record, emit_appends_to_existing_file) {
  char *dir = make_tmpdir();
  char path[512];
  struct cg_config c;
  struct cg_record r;
  size_t n;
  char *text;
  FILE *f;

  snprintf(path, sizeof(path), "%s/usage.jsonl", dir);
  f = fopen(path, "w");
  fputs("{\"previous\":true}\n", f);
  fclose(f);
  memset(&c, 0, sizeof(c));
  c.log_path = path;
  full_record(&r);
  cr_assert_eq(cg_record_emit(&c, &r), 0);
  text = slurp(path, &n);
  cr_assert(strncmp(text, "{\"previous\":true}\n{", 19) == 0, "existing content lost: %s",
            text);
  free(text);
  rm_rf(dir);
  free(dir);
}

Test(record, emit_off_returns_minus_one) {
  struct cg_config c;
  struct cg_record r;
  memset(&c, 0, sizeof(c));
  c.log_path = NULL;
  full_record(&r);
  cr_assert_eq(cg_record_emit(&c, &r), -1);
}

Test(record, unwritable_path_fails_cleanly) {
  char *dir = make_tmpdir();
  char file[512], path[600];
  struct cg_config c;
  struct cg_record r;
  FILE *f;

  snprintf(file, sizeof(file), "%s/regular", dir);
  f = fopen(file, "w");
  fputs("x", f);
  fclose(f);
  /* A path under a regular file: neither the directory nor the log can exist. */
  snprintf(path, sizeof(path), "%s/sub/usage.jsonl", file);
  memset(&c, 0, sizeof(c));
  c.log_path = path;
  full_record(&r);
  cr_assert_eq(cg_record_emit(&c, &r), -1);
  cr_assert_eq(cg_record_emit(&c, &r), -1, "and again, without crashing");
  rm_rf(dir);
  free(dir);
}

Test(record, log_directly_under_a_regular_file_fails_cleanly) {
  char *dir = make_tmpdir();
  char file[512], path[600];
  struct cg_config c;
  struct cg_record r;
  FILE *f;

  snprintf(file, sizeof(file), "%s/regular", dir);
  f = fopen(file, "w");
  fclose(f);
  snprintf(path, sizeof(path), "%s/usage.jsonl", file);
  memset(&c, 0, sizeof(c));
  c.log_path = path;
  full_record(&r);
  cr_assert_eq(cg_record_emit(&c, &r), -1);
  rm_rf(dir);
  free(dir);
}

/* `c` logging to `path` and `r` a full record, attempt 1 of which is written there. */
static void log_first(struct cg_config *c, struct cg_record *r, char *path) {
  memset(c, 0, sizeof(*c));
  c->log_path = path;
  full_record(r);
  r->attempt = 1;
  cr_assert_eq(cg_record_emit(c, r), 0, "the first record");
}

/* This test's stderr (each test runs in a process of its own) into a new file in `dir`;
 * returns its descriptor, for stderr_text. */
static int capture_stderr(const char *dir) {
  char path[600];
  int fd;
  snprintf(path, sizeof(path), "%s/stderr", dir);
  fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  cr_assert_geq(fd, 0);
  cr_assert_eq(dup2(fd, STDERR_FILENO), STDERR_FILENO);
  return fd;
}

/* What was written to stderr since capture_stderr gave `fd`, in `buf` of `cap` bytes. */
static const char *stderr_text(int fd, char *buf, size_t cap) {
  ssize_t got = pread(fd, buf, cap - 1, 0);
  buf[got > 0 ? got : 0] = '\0';
  return buf;
}

/* Past the guard's once-a-second look at a log's path (record.c CG__LOG_PATH_CHECK_MS,
 * CG__LOG_RETRY_MS). */
#define PAST_A_CHECK_US (1100 * 1000)

/* Records 1 and 2 both in the file at `path`. */
static void expect_both_records(const char *path) {
  size_t n;
  char *text = slurp(path, &n);
  cr_expect(strstr(text, "\"attempt\":1,") && strstr(text, "\"attempt\":2,"),
            "both records in the file the log was opened as (%s): %s", path, text);
  free(text);
}

/* A log that cannot be opened is tried again, at most once a second (record.c
 * CG__LOG_RETRY_MS): once the obstacle is gone, records are written again, and the line
 * that says so counts what was lost.  Before, one failed opening (a moment out of
 * descriptors, a directory not there yet) turned the log off for the process's life. */
Test(record, log_that_could_not_be_opened_is_tried_again) {
  char *dir = make_tmpdir();
  char file[512], path[600], *text, errtext[2048];
  struct cg_config c;
  struct cg_record r;
  struct timespec t0, t1;
  size_t n;
  int errfd, i;
  FILE *f;

  snprintf(file, sizeof(file), "%s/regular", dir);
  f = fopen(file, "w");
  fclose(f);
  /* the log's directory is a regular file: neither can be made until it is removed */
  snprintf(path, sizeof(path), "%s/usage.jsonl", file);
  errfd = capture_stderr(dir);
  memset(&c, 0, sizeof(c));
  c.log_path = path;
  full_record(&r);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (i = 1; i <= 3; i++) {
    r.attempt = i;
    cr_assert_eq(cg_record_emit(&c, &r), -1, "record %d: the log cannot exist yet", i);
  }
  cr_assert_eq(unlink(file), 0);
  r.attempt = 4;
  i = cg_record_emit(&c, &r);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  /* within the second after the failure, not tried again (unless this machine stalled) */
  if ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 900)
    cr_expect_eq(i, -1, "tried again within a second of the failure");
  usleep(PAST_A_CHECK_US);
  r.attempt = 5;
  cr_assert_eq(cg_record_emit(&c, &r), 0, "the log, possible now, is opened again");
  r.attempt = 6;
  cr_assert_eq(cg_record_emit(&c, &r), 0);
  text = slurp(path, &n);
  cr_expect(strstr(text, "\"attempt\":5") && strstr(text, "\"attempt\":6") &&
                !strstr(text, "\"attempt\":3"),
            "the records after the reopening, only: %s", text);
  free(text);
  stderr_text(errfd, errtext, sizeof(errtext));
  /* the first failure is reported once; the retries are silent; the reopening counts */
  {
    const char *first = strstr(errtext, "records are not written");
    cr_expect(first && !strstr(first + 1, "records are not written"),
              "one report of the failure: %s", errtext);
  }
  cr_expect(strstr(errtext, "opened after all; 4 record(s) before this one were not written"),
            "the reopening says what was lost: %s", errtext);
  close(errfd);
  rm_rf(dir);
  free(dir);
}

/* Descriptors open in this process (the listing's own one included, every time). */
static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  cr_assert_not_null(d);
  while (readdir(d))
    n++;
  closedir(d);
  return n;
}

/* A log renamed away (logrotate's default `create`) or removed is noticed within a second
 * of the next record (record.c CG__LOG_PATH_CHECK_MS) and made again at its path, on the
 * same descriptor number, still close-on-exec, without a descriptor more.  Before, the
 * records went on into the renamed file (and into nothing once it was deleted). */
Test(record, log_renamed_or_removed_is_opened_again_at_its_path) {
  char *dir = make_tmpdir();
  char path[512], rotated[600], *text;
  struct cg_config c;
  struct cg_record r;
  size_t n;
  int fds, round;

  snprintf(path, sizeof(path), "%s/usage.jsonl", dir);
  snprintf(rotated, sizeof(rotated), "%s/usage.jsonl.1", dir);
  log_first(&c, &r, path);
  fds = open_fds();
  for (round = 0; round < 2; round++) {
    if (round == 0)
      cr_assert_eq(rename(path, rotated), 0);
    else
      cr_assert_eq(unlink(path), 0);
    usleep(PAST_A_CHECK_US); /* past the once-a-second check */
    r.attempt = 10 + round;
    cr_assert_eq(cg_record_emit(&c, &r), 0);
    text = slurp(path, &n); /* made again at the path */
    cr_expect(strstr(text, round ? "\"attempt\":11" : "\"attempt\":10") &&
                  !strstr(text, "\"attempt\":1,"),
              "round %d: the record went to the new file: %s", round, text);
    free(text);
    cr_expect_eq(open_fds(), fds, "round %d: no descriptor more", round);
  }
  text = slurp(rotated, &n);
  cr_expect(strstr(text, "\"attempt\":1,") && !strstr(text, "\"attempt\":10"),
            "the rotated file keeps what was written before: %s", text);
  free(text);
  {
    /* the log's descriptor: the one open on usage.jsonl, close-on-exec */
    char link[64], target[600];
    int fd, found = 0;
    for (fd = 3; fd < 1024; fd++) {
      ssize_t k;
      snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
      k = readlink(link, target, sizeof(target) - 1);
      if (k <= 0)
        continue;
      target[k] = '\0';
      if (strcmp(target, path) == 0) {
        found = 1;
        cr_expect(fcntl(fd, F_GETFD) & FD_CLOEXEC, "descriptor %d is close-on-exec", fd);
      }
    }
    cr_expect(found, "the log is open on its path");
  }
  rm_rf(dir);
  free(dir);
}

/* A log whose directory is no longer the one it was opened in (here: the directory
 * renamed away and another made at its name; as for a host that chroot(2)s) is not made
 * again at the path: that path names something else for this process, and the records
 * stay in the file the log was opened as. */
Test(record, log_in_a_replaced_directory_stays_the_file_it_was_opened_as) {
  char *dir = make_tmpdir();
  char logs[512], moved[560], path[600];
  struct cg_config c;
  struct cg_record r;
  struct stat st;

  char errtext[2048];
  int errfd = capture_stderr(dir);

  snprintf(logs, sizeof(logs), "%s/logs", dir);
  snprintf(moved, sizeof(moved), "%s/logs.old", dir);
  snprintf(path, sizeof(path), "%s/usage.jsonl", logs);
  log_first(&c, &r, path);
  cr_assert_eq(rename(logs, moved), 0);
  cr_assert_eq(mkdir(logs, 0700), 0);
  usleep(PAST_A_CHECK_US);
  r.attempt = 2;
  cr_assert_eq(cg_record_emit(&c, &r), 0);
  cr_expect_neq(stat(path, &st), 0, "no log made in the other directory");
  snprintf(path, sizeof(path), "%s/usage.jsonl", moved);
  expect_both_records(path);
  cr_expect(strstr(stderr_text(errfd, errtext, sizeof(errtext)),
                   "its directory is no longer the one it was opened in"),
            "one line says why the log is not made again: %s", errtext);
  close(errfd);
  rm_rf(dir);
  free(dir);
}

/* A log named by a descriptor (/dev/fd/N, /proc/self/fd/N) is not looked at again: once
 * the host dup2(2)s another of its files onto N, that name opens the host's file, and the
 * records would go into it. */
Test(record, log_named_by_a_descriptor_is_not_followed_into_the_hosts_file) {
  char *dir = make_tmpdir();
  char a[512], b[512], path[64], *text;
  struct cg_config c;
  struct cg_record r;
  size_t n;
  int fa, fb;

  snprintf(a, sizeof(a), "%s/a", dir);
  snprintf(b, sizeof(b), "%s/hosts-own", dir);
  fa = open(a, O_WRONLY | O_CREAT | O_APPEND, 0600);
  fb = open(b, O_WRONLY | O_CREAT | O_APPEND, 0600);
  cr_assert(fa >= 0 && fb >= 0);
  snprintf(path, sizeof(path), "/dev/fd/%d", fa);
  log_first(&c, &r, path);
  cr_assert_eq(dup2(fb, fa), fa); /* the host points its descriptor at its own file */
  usleep(PAST_A_CHECK_US);
  r.attempt = 2;
  cr_assert_eq(cg_record_emit(&c, &r), 0);
  text = slurp(b, &n);
  cr_expect_eq(n, 0, "nothing in the host's own file: %s", text);
  free(text);
  expect_both_records(a);
  close(fa);
  close(fb);
  rm_rf(dir);
  free(dir);
}

/* A relative log path is not looked at again: once the host changes its working
 * directory (a daemon's chdir("/")), the same name is another file, and the records stay
 * in the one the log was opened as. */
Test(record, relative_log_path_stays_the_file_it_was_opened_as) {
  char *dir = make_tmpdir(), *other = make_tmpdir();
  char path[600];
  struct cg_config c;
  struct cg_record r;
  struct stat st;

  cr_assert_eq(chdir(dir), 0);
  log_first(&c, &r, "usage.jsonl");
  cr_assert_eq(chdir(other), 0);
  usleep(PAST_A_CHECK_US); /* past the once-a-second check an absolute path gets */
  r.attempt = 2;
  cr_assert_eq(cg_record_emit(&c, &r), 0);
  snprintf(path, sizeof(path), "%s/usage.jsonl", other);
  cr_expect_neq(stat(path, &st), 0, "no log made in the new working directory");
  snprintf(path, sizeof(path), "%s/usage.jsonl", dir);
  expect_both_records(path);
  cr_assert_eq(chdir("/"), 0);
  rm_rf(dir);
  rm_rf(other);
  free(dir);
  free(other);
}

#define NPROC 4
#define PER_PROC 500

Test(record, concurrent_processes_never_interleave) {
  char *dir = make_tmpdir();
  char path[512], long_path[3000];
  struct cg_config c;
  pid_t pids[NPROC];
  int p, status;
  size_t n, lines = 0;
  int seen[NPROC][PER_PROC];
  char *text, *line, *save = NULL;

  memset(&c, 0, sizeof(c));
  snprintf(path, sizeof(path), "%s/logs/usage.jsonl", dir);
  c.log_path = path;
  /* Long lines make torn writes likely if the line is not written in one go. */
  memset(long_path, 'p', sizeof(long_path) - 1);
  long_path[0] = '/';
  long_path[sizeof(long_path) - 1] = '\0';

  for (p = 0; p < NPROC; p++) {
    pids[p] = fork();
    cr_assert_geq(pids[p], 0);
    if (pids[p] == 0) {
      struct cg_record r;
      char rid[64];
      int i, bad = 0;
      full_record(&r);
      r.path = long_path;
      r.pid = getpid();
      for (i = 0; i < PER_PROC; i++) {
        snprintf(rid, sizeof(rid), "proc-%d-rec-%d", p, i);
        r.request_id = rid;
        r.attempt = i;
        r.queue_ms = p;
        bad += cg_record_emit(&c, &r) != 0;
      }
      _exit(bad ? 1 : 0);
    }
  }
  for (p = 0; p < NPROC; p++) {
    cr_assert_eq(waitpid(pids[p], &status, 0), pids[p]);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d failed", p);
  }

  memset(seen, 0, sizeof(seen));
  text = slurp(path, &n);
  cr_assert_eq(text[n - 1], '\n');
  for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    cJSON *o = cJSON_Parse(line);
    int wp, wi;
    cr_assert(cJSON_IsObject(o), "line %zu is torn: %.80s...", lines + 1, line);
    cr_assert_str_eq(str(o, "path"), long_path);
    cr_assert_eq(sscanf(str(o, "request_id"), "proc-%d-rec-%d", &wp, &wi), 2);
    cr_assert(wp >= 0 && wp < NPROC && wi >= 0 && wi < PER_PROC);
    seen[wp][wi]++;
    cJSON_Delete(o);
    lines++;
  }
  cr_assert_eq(lines, NPROC * PER_PROC, "%zu lines", lines);
  for (p = 0; p < NPROC; p++) {
    int i;
    for (i = 0; i < PER_PROC; i++)
      cr_assert_eq(seen[p][i], 1, "record %d of writer %d seen %d times", i, p, seen[p][i]);
  }
  free(text);
  rm_rf(dir);
  free(dir);
}
