/* test-report.c - `curlguard report` pieces: the latency histogram, RFC 3339 times, the
 * bounded hash map, record validation, aggregation and the alerts (cli/report*.h). */
#include "report.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers ---- */

struct rec {
  const char *ts, *rid, *task, *pool, *model, *outcome, *digest, *repeat_of;
  int attempt, final, pb, repeats;
  long long tokens, duration; /* -1: null */
  double cost;                /* < 0: null */
};

/* One record line as the guard writes it (every SPEC section 5 key). */
static char *line_of(const struct rec *x) {
  char tok[32], cost[48], dur[32], task[80], digest[80], rep[80];
  char *out = malloc(2048);

  snprintf(tok, sizeof(tok), x->tokens < 0 ? "null" : "%lld", x->tokens);
  if (x->cost < 0)
    snprintf(cost, sizeof(cost), "null");
  else
    snprintf(cost, sizeof(cost), "%.17g", x->cost);
  snprintf(dur, sizeof(dur), x->duration < 0 ? "null" : "%lld", x->duration);
  snprintf(task, sizeof(task), x->task ? "\"%s\"" : "null", x->task);
  snprintf(digest, sizeof(digest), x->digest ? "\"%s\"" : "null", x->digest);
  snprintf(rep, sizeof(rep), x->repeat_of ? "\"%s\"" : "null", x->repeat_of);
  snprintf(out, 2048,
           "{\"ts\":\"%s\",\"pid\":1,\"request_id\":\"%s\",\"task_id\":%s,\"attempt\":%d,"
           "\"final\":%s,\"method\":\"POST\",\"host\":\"h\",\"path\":\"/v1/x\",\"pool\":\"%s\","
           "\"status\":200,\"curl_code\":0,\"outcome\":\"%s\",\"decision\":\"done\","
           "\"reason\":\"ok\",\"queue_ms\":0,\"backoff_ms\":0,\"connect_ms\":1,\"ttfb_ms\":2,"
           "\"duration_ms\":%s,\"bytes_sent\":10,\"bytes_received\":20,\"model\":\"%s\","
           "\"prompt_tokens\":%s,\"completion_tokens\":%s,\"total_tokens\":%s,"
           "\"cached_tokens\":%s,\"cost_usd\":%s,\"possibly_billed\":%s,\"body_digest\":%s,"
           "\"libcurl_resends\":0,\"repeat_of\":%s,\"repeats\":%d}",
           x->ts ? x->ts : "2026-11-30T10:00:00.000Z", x->rid ? x->rid : "r1", task, x->attempt,
           x->final ? "true" : "false", x->pool ? x->pool : "p", x->outcome ? x->outcome : "ok",
           dur, x->model ? x->model : "m", tok, tok, tok, x->tokens < 0 ? "null" : "0", cost,
           x->pb ? "true" : "false", digest, rep, x->repeats);
  return out;
}

static enum cg_rbad feed(struct cg_report *r, const struct rec *x) {
  char *l = line_of(x);
  enum cg_rbad b = cg_report_line(r, l, strlen(l));
  free(l);
  return b;
}

static enum cg_rbad feed_text(struct cg_report *r, const char *text) {
  return cg_report_line(r, text, strlen(text));
}

/* Alerts of `kind` in the finished report. */
static int count_alerts(const struct cg_report *r, const char *kind) {
  int n = 0;
  for (cJSON *a = r->alerts->child; a; a = a->next)
    n += strcmp(cJSON_GetObjectItem(a, "kind")->valuestring, kind) == 0;
  return n;
}

static const cJSON *first_alert(const struct cg_report *r, const char *kind) {
  for (cJSON *a = r->alerts->child; a; a = a->next)
    if (strcmp(cJSON_GetObjectItem(a, "kind")->valuestring, kind) == 0)
      return a;
  return NULL;
}

/* A number member of a report object (printed raw by cg_report_json_num). */
static double num(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItem(o, k);
  cr_assert_not_null(v, "no member %s", k);
  return cJSON_IsRaw(v) ? strtod(v->valuestring, NULL) : v->valuedouble;
}

/* ---- histogram ---- */

Test(report_hist, exact_below_256_and_empty) {
  struct cg_hist *h = malloc(sizeof(*h));
  cg_hist_init(h);
  cr_expect_eq(cg_hist_percentile(h, 50), -1);
  for (int v = 1; v <= 200; v++)
    cg_hist_add(h, v);
  cr_expect_eq(cg_hist_percentile(h, 50), 100);
  cr_expect_eq(cg_hist_percentile(h, 95), 190);
  cr_expect_eq(cg_hist_percentile(h, 99), 198);
  cr_expect_eq(cg_hist_percentile(h, 100), 200);
  cr_expect_eq(h->min, 1);
  cr_expect_eq(h->max, 200);
  free(h);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
  return x < y ? -1 : x > y;
}

Test(report_hist, nearest_rank_within_relative_error) {
  enum { N = 20000 };
  struct cg_hist *h = malloc(sizeof(*h));
  int64_t *v = malloc(N * sizeof(*v));
  static const double ps[] = {1, 25, 50, 90, 95, 99, 99.9, 100};
  uint64_t x = 12345;

  cg_hist_init(h);
  /* A skewed set from 1 ms to about 60 s, against an independent nearest-rank reference
   * computed from the sorted samples. */
  for (int i = 0; i < N; i++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    v[i] = 1 + (int64_t) ((x >> 33) % 1000) * (int64_t) ((x >> 13) % 60) + (int64_t) (x % 7);
    cg_hist_add(h, v[i]);
  }
  qsort(v, N, sizeof(*v), cmp_i64);
  for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
    size_t rank = (size_t) ceil(ps[k] * N / 100.0);
    int64_t want = v[rank - 1], got = cg_hist_percentile(h, ps[k]);
    cr_expect_leq(llabs(got - want), want / 256 + 1, "p%g: got %lld, exact %lld", ps[k],
                  (long long) got, (long long) want);
  }
  cr_expect_eq(h->count, N);
  cr_expect_eq(cg_hist_percentile(h, 100), v[N - 1]);
  free(v);
  free(h);
}

Test(report_hist, buckets_tile_the_range) {
  int64_t prev_hi = -1, lo, hi;
  for (int i = 0; i < CG_HIST_BUCKETS; i++) {
    cg_hist_bounds(i, &lo, &hi);
    cr_assert_eq(lo, prev_hi + 1, "bucket %d starts at %lld, previous ended %lld", i,
                 (long long) lo, (long long) prev_hi);
    cr_assert_geq(hi, lo);
    cr_assert_eq(cg_hist_index(lo), i);
    cr_assert_eq(cg_hist_index(hi), i);
    /* Width at most 1/128 of the lower bound: midpoint within 1/256. */
    if (lo >= 256)
      cr_assert_leq((hi - lo + 1) * 128, lo, "bucket %d [%lld, %lld] too wide", i,
                  (long long) lo, (long long) hi);
    prev_hi = hi;
  }
  cr_expect_eq(prev_hi, ((int64_t) 1 << CG_HIST_MAX_BITS) - 1);
}

Test(report_hist, clamps_out_of_range) {
  struct cg_hist *h = malloc(sizeof(*h));
  cg_hist_init(h);
  cg_hist_add(h, -5);
  cg_hist_add(h, INT64_MAX);
  cr_expect_eq(h->min, 0);
  cr_expect_eq(h->max, ((int64_t) 1 << CG_HIST_MAX_BITS) - 1);
  cr_expect_eq(cg_hist_percentile(h, 50), 0);
  cr_expect_eq(cg_hist_percentile(h, 100), h->max);
  free(h);
}

/* ---- RFC 3339 ---- */

static int64_t ts(const char *s) {
  int64_t ms = 0;
  cr_assert_eq(cg_rfc3339_parse(s, strlen(s), &ms), 0, "rejected %s", s);
  return ms;
}

static void bad_ts(const char *s) {
  int64_t ms = 42;
  cr_expect_eq(cg_rfc3339_parse(s, strlen(s), &ms), -1, "accepted %s", s);
}

Test(report_time, parses_rfc3339) {
  cr_expect_eq(ts("1970-01-01T00:00:00Z"), 0);
  cr_expect_eq(ts("1970-01-01T00:00:00.001Z"), 1);
  cr_expect_eq(ts("2026-11-30T06:29:25.483Z"), 1796020165483LL);
  cr_expect_eq(ts("2026-11-30t06:29:25.483z"), 1796020165483LL);
  cr_expect_eq(ts("2026-11-30 06:29:25.483Z"), 1796020165483LL);
  cr_expect_eq(ts("2026-11-30T08:29:25.483+02:00"), 1796020165483LL);
  cr_expect_eq(ts("2026-11-30T01:59:25.483-04:30"), 1796020165483LL);
  cr_expect_eq(ts("2026-11-30T06:29:25.4839999Z"), 1796020165483LL); /* truncated */
  cr_expect_eq(ts("2026-11-30T06:29:25.4Z"), 1796020165400LL);
  cr_expect_eq(ts("2024-02-29T00:00:00Z"), 1709164800000LL);         /* leap day */
  cr_expect_eq(ts("2016-12-31T23:59:60Z"), 1483228799999LL);         /* leap second */
  cr_expect_eq(ts("1969-12-31T23:59:59.999Z"), -1);
}

Test(report_time, rejects_malformed) {
  bad_ts("");
  bad_ts("2026-11-30");
  bad_ts("2026-11-30T06:29:25");         /* no zone */
  bad_ts("2026-11-30T06:29:25.Z");       /* empty fraction */
  bad_ts("2026-13-01T00:00:00Z");
  bad_ts("2025-02-29T00:00:00Z");        /* not a leap year */
  bad_ts("2026-04-31T00:00:00Z");
  bad_ts("2026-11-30T24:00:00Z");
  bad_ts("2026-11-30T06:60:00Z");
  bad_ts("2026-11-30T06:29:61Z");
  bad_ts("2026-11-30T06:29:25ZZ");
  bad_ts("2026-11-30T06:29:25+0200");
  bad_ts("2026-11-30X06:29:25Z");
  bad_ts("20a6-11-30T06:29:25Z");
}

Test(report_time, format_round_trips) {
  static const int64_t v[] = {0, 1, 1796020165483LL, 1709164800000LL, -1, -86400001LL,
                              253402300799999LL};
  char buf[40];
  for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
    cg_rfc3339_format(v[i], buf, sizeof(buf));
    cr_expect_eq(ts(buf), v[i], "%lld -> %s", (long long) v[i], buf);
  }
  cr_expect_str_eq(cg_rfc3339_format(1796020165483LL, buf, sizeof(buf)),
                   "2026-11-30T06:29:25.483Z");
}

/* ---- the bounded map ---- */

Test(report_map, put_get_delete_many) {
  struct cg_rmap m;
  int created;
  enum { N = 5000 };

  cg_rmap_init(&m, 1 << 16);
  for (uint64_t k = 0; k < N; k++) {
    uint64_t *v = cg_rmap_put(&m, k * 7, &created);
    cr_assert_not_null(v);
    cr_assert_eq(created, 1);
    *v = k + 100;
  }
  cr_expect_eq(m.count, N);
  /* Delete every third key: the others must stay reachable (backward-shift deletion). */
  for (uint64_t k = 0; k < N; k += 3)
    cr_assert_eq(cg_rmap_del(&m, k * 7), 1);
  for (uint64_t k = 0; k < N; k++) {
    uint64_t *v = cg_rmap_get(&m, k * 7);
    if (k % 3 == 0) {
      cr_assert_null(v, "deleted key %llu still there", (unsigned long long) k);
    } else {
      cr_assert_not_null(v, "key %llu lost", (unsigned long long) k);
      cr_assert_eq(*v, k + 100);
    }
  }
  cr_expect_eq(cg_rmap_del(&m, 3), 0);
  cr_expect_eq(m.full, 0);
  cg_rmap_free(&m);
}

Test(report_map, cap_refuses_new_keys) {
  struct cg_rmap m;
  int created, refused = 0;
  cg_rmap_init(&m, 1024); /* at most 768 keys */
  for (uint64_t k = 1; k <= 1000; k++)
    refused += cg_rmap_put(&m, k, &created) == NULL;
  cr_expect_eq(m.count, 768);
  cr_expect_eq(refused, 1000 - 768);
  cr_expect_eq(m.full, 1);
  cr_expect_not_null(cg_rmap_put(&m, 5, &created)); /* known keys still update */
  cr_expect_eq(created, 0);
  cg_rmap_free(&m);
}

/* ---- record validation ---- */

Test(report_rec, guard_record_parses) {
  struct rec x = {.attempt = 2, .final = 1, .tokens = 30, .cost = 0.25, .duration = 120,
                  .digest = "ab", .task = "t", .repeat_of = "r0", .repeats = 1};
  struct cg_rrec r;
  char *l = line_of(&x);
  cr_assert_eq(cg_rrec_parse(l, strlen(l), &r), CG_RBAD_NONE, "%s", l);
  cr_expect_eq(r.attempt, 2);
  cr_expect_eq(r.final, 1);
  cr_expect_eq(r.total_tokens, 30);
  cr_expect_eq(r.cost_usd, 0.25);
  cr_expect_eq(r.duration_ms, 120);
  cr_expect_str_eq(r.body_digest, "ab");
  cr_expect_str_eq(r.task_id, "t");
  cr_expect_str_eq(r.repeat_of, "r0");
  cr_expect_eq(r.repeats, 1);
  cr_expect_eq(r.ts_ms, 1796032800000LL);
  cg_rrec_release(&r);
  free(l);
}

/* Replace the first occurrence of `from` in the record line by `to`; expect `want`. */
static void mutated(const char *from, const char *to, enum cg_rbad want) {
  struct rec x = {.attempt = 1, .final = 1, .tokens = 5, .cost = 0.5, .duration = 3};
  char *l = line_of(&x), buf[4096], *at = strstr(l, from);
  struct cg_rrec r;
  enum cg_rbad got;

  cr_assert_not_null(at, "%s not in %s", from, l);
  snprintf(buf, sizeof(buf), "%.*s%s%s", (int) (at - l), l, to, at + strlen(from));
  got = cg_rrec_parse(buf, strlen(buf), &r);
  cr_expect_eq(got, want, "%s -> %s: got %s, want %s", from, to, cg_rbad_name[got],
               cg_rbad_name[want]);
  if (got == CG_RBAD_NONE)
    cg_rrec_release(&r);
  free(l);
}

Test(report_rec, malformed_lines_are_classified) {
  struct cg_rrec r;
  cr_expect_eq(cg_rrec_parse("not json", 8, &r), CG_RBAD_JSON);
  cr_expect_eq(cg_rrec_parse("{\"ts\":", 6, &r), CG_RBAD_JSON);    /* cut mid-write */
  cr_expect_eq(cg_rrec_parse("[1,2]", 5, &r), CG_RBAD_OBJECT);
  cr_expect_eq(cg_rrec_parse("\"s\"", 3, &r), CG_RBAD_OBJECT);
  cr_expect_eq(cg_rrec_parse("{}", 2, &r), CG_RBAD_MISSING);
  mutated("\"outcome\":\"ok\",", "", CG_RBAD_MISSING);
  mutated("\"body_digest\":null,", "", CG_RBAD_MISSING);
  mutated("\"attempt\":1", "\"attempt\":\"1\"", CG_RBAD_TYPE);
  mutated("\"final\":true", "\"final\":1", CG_RBAD_TYPE);
  mutated("\"request_id\":\"r1\"", "\"request_id\":null", CG_RBAD_TYPE);
  mutated("\"pool\":\"p\"", "\"pool\":{}", CG_RBAD_TYPE);
  mutated("\"repeats\":0", "\"repeats\":\"0\"", CG_RBAD_TYPE);
  mutated("\"attempt\":1", "\"attempt\":0", CG_RBAD_VALUE);
  mutated("\"attempt\":1", "\"attempt\":1.5", CG_RBAD_VALUE);
  mutated("\"total_tokens\":5", "\"total_tokens\":-5", CG_RBAD_VALUE);
  mutated("\"cost_usd\":0.5", "\"cost_usd\":-0.5", CG_RBAD_VALUE);
  mutated("\"duration_ms\":3", "\"duration_ms\":1e300", CG_RBAD_VALUE);
  mutated("2026-11-30T10:00:00.000Z", "2026-11-31T10:00:00.000Z", CG_RBAD_VALUE);
  /* Extras may be absent; unknown keys are ignored. */
  mutated(",\"libcurl_resends\":0,\"repeat_of\":null,\"repeats\":0", "", CG_RBAD_NONE);
  mutated("\"pid\":1,", "\"pid\":1,\"future_key\":[1,{}],", CG_RBAD_NONE);
}

/* ---- aggregation ---- */

Test(report_agg, totals_and_definitions) {
  struct cg_report *r = cg_report_new();
  const struct cg_rstats *t;

  /* Call a: 503 then ok.  Call b: 500 (possibly billed, no cost) final.  Call c: ok,
   * same body as a's success (billed twice).  Call d: unfinished (one retry record). */
  feed(r, &(struct rec){.rid = "a", .attempt = 1, .outcome = "http_503", .tokens = -1,
                        .cost = -1, .duration = 10, .digest = "D1", .task = "T1"});
  feed(r, &(struct rec){.rid = "a", .attempt = 2, .final = 1, .tokens = 100, .cost = 0.5,
                        .duration = 20, .digest = "D1", .task = "T1"});
  feed(r, &(struct rec){.rid = "b", .attempt = 1, .final = 1, .outcome = "http_500",
                        .pb = 1, .tokens = -1, .cost = -1, .duration = 30, .digest = "D2",
                        .task = "T1"});
  feed(r, &(struct rec){.rid = "c", .attempt = 1, .final = 1, .tokens = 50, .cost = 0.25,
                        .duration = -1, .digest = "D1", .task = "T2", .model = "m2"});
  feed(r, &(struct rec){.rid = "d", .attempt = 1, .outcome = "http_429", .tokens = -1,
                        .cost = -1, .duration = 5, .model = "unpriced"});
  feed(r, &(struct rec){.rid = "e", .attempt = 1, .final = 1, .tokens = 7, .cost = -1,
                        .duration = 5, .model = "unpriced"});
  cg_report_finish(r);
  t = &r->total;
  cr_expect_eq(r->records, 6);
  cr_expect_eq(t->attempts, 6);
  cr_expect_eq(t->retries, 1);
  cr_expect_eq(t->calls, 4);
  cr_expect_eq(t->unfinished, 1);
  cr_expect_eq(t->billed, 4);                /* a#2, b (possibly), c, e */
  cr_expect_eq(t->possibly_billed, 1);
  cr_expect_eq(t->at_risk_attempts, 1);
  cr_expect_eq(t->total_tokens, 157);
  cr_expect_eq(t->cost_usd, 0.75);
  cr_expect_eq(t->priced, 2);
  cr_expect_eq(t->unpriced, 1);
  cr_expect_eq(t->dup_digests, 1);           /* D1 billed on a#2 and c */
  cr_expect_eq(t->dup_extra_billed, 1);
  cr_expect_eq(r->tasks_multi, 1);           /* T1: calls a and b billed */
  cr_expect_str_eq(r->task_example[0], "T1");
  cr_expect_eq(t->latency->count, 5);
  cr_expect_eq(t->latency_missing, 1);
  cr_expect_eq(r->ngroups, 3);
  /* Group (p, m): a, b.  At risk: 1 attempt x mean cost 0.5 of its one priced attempt. */
  cr_expect_str_eq(r->group[0].model, "m");
  cr_expect_eq(r->group[0].s.calls, 2);
  cr_expect_eq(cg_report_at_risk(&r->group[0].s), 0.5);
  cr_expect_eq(r->group[0].s.dup_digests, 1); /* counted where D1 was first billed */
  cr_expect_eq(r->group[2].s.unfinished, 1);
  cr_expect(isnan(cg_report_at_risk(&r->group[2].s)) == 0); /* nothing at risk there */
  {
    /* A cheap model's failure is priced at its own mean, not the mix's. */
    double usd;
    uint64_t unest;
    feed(r, &(struct rec){.rid = "f", .attempt = 1, .final = 1, .pb = 1, .tokens = -1,
                          .cost = -1, .duration = 1, .model = "m2"});
    cg_report_risk(r, -1, &usd, &unest);
    cr_expect_eq(usd, 0.5 + 0.25);
    cr_expect_eq(unest, 0);
  }
  cg_report_free(r);
}

Test(report_agg, at_risk_without_prices_is_unknown) {
  struct cg_report *r = cg_report_new();
  feed(r, &(struct rec){.rid = "a", .attempt = 1, .final = 1, .pb = 1, .tokens = -1,
                        .cost = -1, .duration = 1});
  cg_report_finish(r);
  cr_expect(isnan(cg_report_at_risk(&r->total)));
  {
    double usd;
    uint64_t unest;
    cg_report_risk(r, -1, &usd, &unest);
    cr_expect_eq(usd, 0);
    cr_expect_eq(unest, 1);
    cg_report_risk(r, 0, &usd, &unest);
    cr_expect(isnan(usd));
  }
  cg_report_free(r);
}

Test(report_agg, malformed_counted_blank_ignored) {
  struct cg_report *r = cg_report_new();
  cg_report_source(r, "log");
  feed(r, &(struct rec){.attempt = 1, .final = 1, .tokens = 1, .cost = 0.1, .duration = 1});
  cr_expect_eq(feed_text(r, "   "), CG_RBAD_NONE);
  cr_expect_eq(feed_text(r, "oops"), CG_RBAD_JSON);
  cr_expect_eq(feed_text(r, "[]"), CG_RBAD_OBJECT);
  cr_expect_eq(feed_text(r, "{\"ts\":1}"), CG_RBAD_TYPE);
  cg_report_finish(r);
  cr_expect_eq(r->lines, 4);
  cr_expect_eq(r->blank, 1);
  cr_expect_eq(r->records, 1);
  cr_expect_eq(r->malformed[CG_RBAD_JSON], 1);
  cr_expect_eq(r->malformed[CG_RBAD_OBJECT], 1);
  cr_expect_eq(r->malformed[CG_RBAD_TYPE], 1);
  cr_expect_str_eq(r->first_bad, "log:3");
  cg_report_free(r);
}

Test(report_agg, reader_bounds_lines) {
  struct cg_report *r = cg_report_new();
  int fds[2];
  char *good = line_of(&(struct rec){.attempt = 1, .final = 1, .tokens = 2, .cost = 0.5,
                                      .duration = 1});
  size_t big = 3 * CG_REPORT_LINE_MAX;
  char *huge = malloc(big + 1);
  FILE *w;
  pid_t pid;
  int status;

  memset(huge, 'x', big);
  huge[big] = '\0';
  cr_assert_eq(pipe(fds), 0);
  pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) { /* the writer: good, huge, good, blank, good without newline */
    close(fds[0]);
    w = fdopen(fds[1], "w");
    fprintf(w, "%s\n%s\n%s\n\n%s", good, huge, good, good);
    fclose(w);
    _exit(0);
  }
  close(fds[1]);
  cr_assert_eq(cg_report_read_fd(r, fds[0]), 0);
  close(fds[0]);
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  cg_report_finish(r);
  cr_expect_eq(r->records, 3);
  cr_expect_eq(r->malformed[CG_RBAD_LONG], 1);
  cr_expect_eq(r->lines, 4);
  cr_expect_eq(r->blank, 1);
  cr_expect_eq(r->total.cost_usd, 1.5);
  free(huge);
  free(good);
  cg_report_free(r);
}

/* ---- alerts ---- */

/* `n` calls at minute `min` past 10:00 on 2026-11-30, `retried` of them with a retry. */
static void calls_at(struct cg_report *r, int hour, int min, int n, int retried, double cost) {
  char ts[40], rid[40];
  for (int i = 0; i < n; i++) {
    snprintf(ts, sizeof(ts), "2026-11-30T%02d:%02d:%02d.000Z", hour, min, i % 60);
    snprintf(rid, sizeof(rid), "r-%d-%d-%d", hour, min, i);
    if (i < retried)
      feed(r, &(struct rec){.ts = ts, .rid = rid, .attempt = 1, .outcome = "http_503",
                            .tokens = -1, .cost = -1, .duration = 1});
    feed(r, &(struct rec){.ts = ts, .rid = rid, .attempt = i < retried ? 2 : 1, .final = 1,
                          .tokens = 10, .cost = cost, .duration = 1});
  }
}

Test(report_alert, retry_ratio_window) {
  struct cg_report *r = cg_report_new();
  const cJSON *a;
  /* 10:00-10:29 quiet (1 retry in 100 calls per 10 minutes), a burst at 10:40. */
  for (int m = 0; m < 30; m++)
    calls_at(r, 10, m, 10, m % 10 == 0, 0.01);
  calls_at(r, 10, 40, 40, 8, 0.01);           /* 8 retries of 48 attempts: 16.7 % */
  calls_at(r, 10, 58, 10, 0, 0.01);
  cg_report_finish(r);
  cr_expect_eq(count_alerts(r, "retry_ratio"), 1);
  a = first_alert(r, "retry_ratio");
  cr_assert_not_null(a);
  cr_expect_str_eq(cJSON_GetObjectItem(a, "from")->valuestring, "2026-11-30T10:40:00.000Z");
  cr_expect_str_eq(cJSON_GetObjectItem(a, "to")->valuestring, "2026-11-30T10:41:00.000Z");
  cr_expect_eq(num(a, "retries"), 8);
  cr_expect_eq(num(a, "attempts"), 48);
  cg_report_free(r);
}

Test(report_alert, retry_ratio_needs_volume_and_threshold) {
  struct cg_report *r = cg_report_new();
  calls_at(r, 10, 0, 5, 5, 0.01);     /* 100 % but only 10 attempts */
  calls_at(r, 12, 0, 100, 5, 0.01);   /* 5 of 105 attempts: 4.8 %, not over 5 % */
  cg_report_finish(r);
  cr_expect_eq(count_alerts(r, "retry_ratio"), 0);
  cg_report_free(r);
}

Test(report_alert, cost_hour_over_hour) {
  struct cg_report *r = cg_report_new();
  const cJSON *a;
  calls_at(r, 10, 5, 10, 0, 1.0);     /* 10 USD */
  calls_at(r, 11, 5, 13, 0, 1.0);     /* 13 USD: +30 %, not more */
  calls_at(r, 12, 5, 20, 0, 1.0);     /* 20 USD: +54 % -> alert */
  calls_at(r, 14, 5, 40, 0, 1.0);     /* 13:00 had nothing: no comparison */
  cg_report_finish(r);
  cr_expect_eq(count_alerts(r, "cost_hour_over_hour"), 1);
  a = first_alert(r, "cost_hour_over_hour");
  cr_assert_not_null(a);
  cr_expect_str_eq(cJSON_GetObjectItem(a, "hour")->valuestring, "2026-11-30T12:00:00.000Z");
  cr_expect_eq(num(a, "previous_cost_usd"), 13);
  cr_expect_eq(num(a, "cost_usd"), 20);
  cg_report_free(r);
}

Test(report_alert, request_retried_more_than_twice) {
  struct cg_report *r = cg_report_new();
  const cJSON *a;
  for (int k = 1; k <= 5; k++)
    feed(r, &(struct rec){.rid = "many", .attempt = k, .final = k == 5, .tokens = -1,
                          .cost = -1, .duration = 1});
  for (int k = 1; k <= 3; k++) /* three attempts: retried twice, no alert */
    feed(r, &(struct rec){.rid = "three", .attempt = k, .final = k == 3, .tokens = -1,
                          .cost = -1, .duration = 1});
  /* The host repeated call h0 three times. */
  feed(r, &(struct rec){.rid = "h3", .attempt = 1, .final = 1, .repeat_of = "h0",
                        .repeats = 3, .tokens = -1, .cost = -1, .duration = 1});
  cg_report_finish(r);
  cr_expect_eq(count_alerts(r, "retried_more_than_twice"), 2);
  a = first_alert(r, "retried_more_than_twice");
  cr_expect_str_eq(cJSON_GetObjectItem(a, "request_id")->valuestring, "many");
  cr_expect_str_eq(cJSON_GetObjectItem(a->next, "request_id")->valuestring, "h0");
  cr_expect_str_eq(cJSON_GetObjectItem(a->next, "by")->valuestring, "host");
  cr_expect_eq(r->total.host_retry_calls, 1);
  cg_report_free(r);
}

Test(report_agg, groups_capped_into_other) {
  struct cg_report *r = cg_report_new();
  char model[32];
  for (int i = 0; i < CG_REPORT_MAX_GROUPS + 88; i++) {
    snprintf(model, sizeof(model), "model-%d", i);
    feed(r, &(struct rec){.attempt = 1, .final = 1, .model = model, .tokens = 1, .cost = 0.5,
                          .duration = 1});
  }
  cg_report_finish(r);
  cr_expect_eq(r->ngroups, CG_REPORT_MAX_GROUPS + 1);
  cr_expect_eq(r->groups_capped, 1);
  cr_expect_str_eq(r->group[CG_REPORT_MAX_GROUPS].model, "(other)");
  cr_expect_eq(r->group[CG_REPORT_MAX_GROUPS].s.attempts, 88);
  cr_expect_eq(r->total.attempts, CG_REPORT_MAX_GROUPS + 88);
  cg_report_free(r);
}

Test(report_out, json_numbers_read_back_exactly) {
  static const double v[] = {0.1 + 0.2, 5.6099999999999995e-05, 1.0 / 3, 1e-300, 123456789.0,
                             9007199254740991.0, 0};
  cJSON *o = cJSON_CreateObject();
  char key[8];
  for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
    snprintf(key, sizeof(key), "k%zu", i);
    cg_report_json_num(o, key, v[i]);
  }
  cg_report_json_num(o, "nan", NAN);
  {
    char *text = cJSON_PrintUnformatted(o);
    cJSON *back = cJSON_Parse(text);
    cr_assert_not_null(back, "%s", text);
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
      snprintf(key, sizeof(key), "k%zu", i);
      /* strtod of the printed text, not cJSON's reading, is the reference. */
      cr_expect_eq(strtod(cJSON_GetObjectItem(o, key)->valuestring, NULL), v[i], "%s", text);
    }
    cr_expect(cJSON_IsNull(cJSON_GetObjectItem(back, "nan")));
    cr_expect_neq(strstr(text, "\"k0\":0.30000000000000004"), NULL, "%s", text);
    cr_expect_neq(strstr(text, "\"k4\":123456789,"), NULL, "%s", text);
    cJSON_Delete(back);
    free(text);
  }
  cJSON_Delete(o);
}

Test(report_agg, outcomes_capped_into_other) {
  struct cg_report *r = cg_report_new();
  char outcome[32];
  for (int i = 0; i < CG_REPORT_MAX_OUTCOMES + 6; i++) {
    snprintf(outcome, sizeof(outcome), "http_%d", 200 + i);
    feed(r, &(struct rec){.attempt = 1, .final = 1, .outcome = outcome, .tokens = -1,
                          .cost = -1, .duration = 1});
  }
  cg_report_finish(r);
  cr_expect_eq(r->noutcomes, CG_REPORT_MAX_OUTCOMES);
  cr_expect_eq(r->total.outcome[CG_REPORT_MAX_OUTCOMES], 6);
  cr_expect_eq(r->total.outcome[0], 1);
  cg_report_free(r);
}
