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
  cr_expect_eq(h->max, INT64_MAX); /* exact: only the bucket clamps */
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
  /* an offset that carries the time out of years 0000-9999 in UTC (a helper's review:
   * the period printed as "-001-12-31T00:01:00.000Z") */
  bad_ts("0000-01-01T00:00:00.000+23:59");
  bad_ts("9999-12-31T23:59:59.999-00:01");
  cr_expect_eq(ts("0000-01-01T00:00:00Z"), -62167219200000LL);
  cr_expect_eq(ts("9999-12-31T23:59:59.999Z"), 253402300799999LL);
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
  cr_expect_eq(t->dup_extra_calls, 1);
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
  /* Every window holding 10:40 fires: [10:31, 10:41) ... [10:40, 10:50). */
  cr_expect_str_eq(cJSON_GetObjectItem(a, "from")->valuestring, "2026-11-30T10:31:00.000Z");
  cr_expect_str_eq(cJSON_GetObjectItem(a, "to")->valuestring, "2026-11-30T10:50:00.000Z");
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
  cr_expect_eq(r->group[CG_REPORT_MAX_GROUPS].other, 1);
  cr_expect_null(r->group[CG_REPORT_MAX_GROUPS].model);
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

/* ---- review fixes ---- */

/* The record line of `x` with the first `from` replaced by `to`. */
static char *line_sub(const struct rec *x, const char *from, const char *to) {
  char *l = line_of(x), *at = strstr(l, from), *out;
  size_t n;
  cr_assert_not_null(at, "%s not in %s", from, l);
  n = strlen(l) + strlen(to) + 1;
  out = malloc(n);
  snprintf(out, n, "%.*s%s%s", (int) (at - l), l, to, at + strlen(from));
  free(l);
  return out;
}

static enum cg_rbad feed_sub(struct cg_report *r, const struct rec *x, const char *from,
                             const char *to) {
  char *l = line_sub(x, from, to);
  enum cg_rbad b = cg_report_line(r, l, strlen(l));
  free(l);
  return b;
}

/* The text report in a malloc'ed string. */
static char *text_of(struct cg_report *r) {
  char **buf = calloc(1, sizeof(*buf)), *text; /* on the heap: GCC's dangling-pointer
                                                * check mistakes a local's text for it */
  size_t len = 0;
  FILE *f = open_memstream(buf, &len);
  cg_report_print(r, f);
  fclose(f);
  text = *buf;
  free(buf);
  return text;
}

/* The JSON report, printed, in a malloc'ed string. */
static char *json_of(struct cg_report *r) {
  cJSON *doc = cg_report_json(r);
  char *text = cJSON_PrintUnformatted(doc);
  cJSON_Delete(doc);
  return text;
}

static int valid_utf8(const char *s) {
  size_t bad, len = strlen(s);
  return cg_utf8_valid_prefix(s, len, &bad) == len && bad == 0;
}

/* 1: a retry of one call (same request id) is not a duplicate body; other calls are,
 * once each however many of their attempts were billed. */
Test(report_review, duplicate_bodies_count_calls_not_retries) {
  struct cg_report *r = cg_report_new();
  /* Call a: keyed retry after a possibly-billed 500, same body: billed twice. */
  feed(r, &(struct rec){.rid = "a", .attempt = 1, .outcome = "http_500", .pb = 1,
                        .tokens = -1, .cost = -1, .duration = 1, .digest = "D"});
  feed(r, &(struct rec){.rid = "a", .attempt = 2, .final = 1, .tokens = 5, .cost = 0.1,
                        .duration = 1, .digest = "D"});
  cr_expect_eq(r->total.dup_digests, 0);
  cr_expect_eq(r->total.dup_extra_calls, 0);
  cr_expect_eq(r->total.billed_retries, 1);
  /* Calls b (billed twice) and c: the same body in two more calls. */
  feed(r, &(struct rec){.rid = "b", .attempt = 1, .outcome = "http_500", .pb = 1,
                        .tokens = -1, .cost = -1, .duration = 1, .digest = "D"});
  feed(r, &(struct rec){.rid = "b", .attempt = 2, .final = 1, .tokens = 5, .cost = 0.1,
                        .duration = 1, .digest = "D"});
  feed(r, &(struct rec){.rid = "c", .attempt = 1, .final = 1, .tokens = 5, .cost = 0.1,
                        .duration = 1, .digest = "D"});
  feed(r, &(struct rec){.rid = "a", .attempt = 3, .final = 1, .tokens = 5, .cost = 0.1,
                        .duration = 1, .digest = "D"}); /* the first call again */
  cg_report_finish(r);
  cr_expect_eq(r->total.dup_digests, 1);
  cr_expect_eq(r->total.dup_extra_calls, 2); /* b and c */
  cr_expect_eq(r->group[0].s.dup_extra_calls, 2);
  cr_expect_eq(r->total.billed_retries, 3);  /* a#2, b#2, a#3 */
  cg_report_free(r);
}

/* 2: the family of a dated model name. */
Test(report_review, model_family) {
  static const char *const v[][2] = {
      {"gpt-4o-2024-08-06", "gpt-4o"},
      {"gpt-4o-mini-2024-07-18", "gpt-4o-mini"},
      {"o3-2025-04-16", "o3"},
      {"claude-sonnet-4-20250514", "claude-sonnet-4"},
      {"claude-3-5-sonnet@20240620", "claude-3-5-sonnet"},
      {"gemini-2.5-flash-preview-05-20", "gemini-2.5-flash-preview"},
      {"claude-3-5-sonnet-latest", "claude-3-5-sonnet"},
      {"gpt-4-0613", "gpt-4"},
      {"mistral-large-2407", "mistral-large"},
      /* not dates: kept */
      {"gpt-4o", "gpt-4o"},
      {"gpt-4.1-nano", "gpt-4.1-nano"},
      {"gemini-2.5-flash", "gemini-2.5-flash"},
      {"text-davinci-003", "text-davinci-003"},
      {"model-2048", "model-2048"},
      {"x-2024-13-01", "x-2024-13-01"}, /* month 13 */
      {"-latest", "-latest"},            /* nothing would be left */
      {"m-20250532", "m-20250532"},      /* day 32 */
  };
  for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
    size_t n = cg_model_family(v[i][0], strlen(v[i][0]));
    cr_expect_eq(n, strlen(v[i][1]), "%s -> %.*s, want %s", v[i][0], (int) n, v[i][0],
                 v[i][1]);
  }
}

/* 2: a call asked for gpt-4o and answered by gpt-4o-2024-08-06 is one group. */
Test(report_review, dated_answer_in_the_requested_group) {
  struct cg_report *r = cg_report_new();
  cJSON *doc;
  const cJSON *g, *models;
  feed(r, &(struct rec){.rid = "a", .attempt = 1, .outcome = "http_503", .tokens = -1,
                        .cost = -1, .duration = 1, .model = "gpt-4o"});
  feed(r, &(struct rec){.rid = "a", .attempt = 2, .final = 1, .tokens = 10, .cost = 0.5,
                        .duration = 1, .model = "gpt-4o-2024-08-06"});
  cg_report_finish(r);
  cr_assert_eq(r->ngroups, 1);
  cr_expect_str_eq(r->group[0].model, "gpt-4o");
  cr_expect_eq(r->group[0].s.calls, 1);
  cr_expect_eq(r->group[0].s.attempts, 2);
  doc = cg_report_json(r);
  g = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "groups"), 0);
  cr_expect_str_eq(cJSON_GetObjectItem(g, "model")->valuestring, "gpt-4o");
  models = cJSON_GetObjectItem(g, "models");
  cr_assert_eq(cJSON_GetArraySize(models), 2);
  cr_expect_str_eq(cJSON_GetArrayItem(models, 1)->valuestring, "gpt-4o-2024-08-06");
  cJSON_Delete(doc);
  cg_report_free(r);
}

/* 3: invalid UTF-8 in a record's strings is repaired (U+FFFD) before any output. */
Test(report_review, invalid_utf8_repaired) {
  struct cg_report *r = cg_report_new();
  char *json, *text;
  cr_expect_eq(feed_sub(r, &(struct rec){.attempt = 1, .final = 1, .tokens = 1, .cost = 0.1,
                                          .duration = 1, .task = "t\xc3"},
                        "\"model\":\"m\"", "\"model\":\"bad\xff\xfe\xe2\x82\""),
               CG_RBAD_NONE);
  feed_sub(r, &(struct rec){.rid = "r2", .attempt = 1, .final = 1, .tokens = 1, .cost = 0.1,
                            .duration = 1, .task = "t\xc3"},
           "\"model\":\"m\"", "\"model\":\"ok\"");
  cg_report_finish(r);
  cr_expect_str_eq(r->group[0].model, "bad\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  json = json_of(r);
  text = text_of(r);
  cr_expect(valid_utf8(json), "%s", json);
  cr_expect(valid_utf8(text), "%s", text);
  cr_expect_not_null(strstr(json, "\"t\xef\xbf\xbd\""), "%s", json); /* task example */
  free(json);
  free(text);
  cg_report_free(r);
}

Test(report_review, utf8_repair_rules) {
  char out[64];
  cg_utf8_repair("a\xed\xa0\x80z", 5, out);           /* a surrogate: 3 bad bytes */
  cr_expect_str_eq(out, "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz");
  cg_utf8_repair("\xe2\x82", 2, out);                  /* a cut sequence: one U+FFFD */
  cr_expect_str_eq(out, "\xef\xbf\xbd");
  cg_utf8_repair("\xc0\xaf", 2, out);                  /* overlong */
  cr_expect_str_eq(out, "\xef\xbf\xbd\xef\xbf\xbd");
  cg_utf8_repair("\xe2\x82\xac\xf0\x9f\x98\x80", 7, out); /* valid: unchanged */
  cr_expect_str_eq(out, "\xe2\x82\xac\xf0\x9f\x98\x80");
}

/* 4: control characters in names do not reach the terminal. */
Test(report_review, text_escapes_controls) {
  struct cg_report *r = cg_report_new();
  char *text;
  feed_sub(r, &(struct rec){.attempt = 4, .final = 1, .tokens = 1, .cost = 0.1, .duration = 1,
                            .task = "x", .outcome = "o\\u0007k"},
           "\"model\":\"m\"", "\"model\":\"evil\\u001b[31mRED\\nALERT fake\\u009b\"");
  feed(r, &(struct rec){.rid = "r2", .attempt = 1, .final = 1, .tokens = 1, .cost = 0.1,
                        .duration = 1, .task = "x"});
  cg_report_finish(r);
  text = text_of(r);
  cr_expect_null(strchr(text, '\x1b'), "%s", text);
  cr_expect_null(strchr(text, '\x07'), "%s", text);
  cr_expect_null(strstr(text, "\xc2\x9b"), "%s", text);
  cr_expect_null(strstr(text, "\nALERT fake"), "%s", text);
  cr_expect_not_null(strstr(text, "evil\\x1b[31mRED\\nALERT"), "%s", text);
  cr_expect_not_null(strstr(text, "o\\x07k 1"), "%s", text);
  /* The per-request alert names the model escaped too. */
  cr_expect_not_null(strstr(text, "model evil\\x1b[31mRED\\nALERT fake\\u009b)"), "%s", text);
  free(text);
  {
    char buf[64];
    cg_text_escape(buf, sizeof(buf), "(none)\\\x7f\xe2\x80\xae");
    cr_expect_str_eq(buf, "\\(none)\\\\\\x7f\\u202e");
    cg_text_escape(buf, 6, "abcdefgh");                 /* cut to fit */
    cr_expect_str_eq(buf, "abcde");
  }
  cg_report_free(r);
}

/* 5: unfinished calls do not depend on the order of the records. */
Test(report_review, unfinished_calls_order_independent) {
  const struct rec v[] = {
      {.rid = "a", .attempt = 1, .outcome = "http_503", .tokens = -1, .cost = -1},
      {.rid = "a", .attempt = 2, .outcome = "http_503", .tokens = -1, .cost = -1},
      {.rid = "a", .attempt = 3, .final = 1, .tokens = 1, .cost = 0.1},
      {.rid = "b", .attempt = 1, .outcome = "http_503", .tokens = -1, .cost = -1},
      {.rid = "c", .attempt = 1, .final = 1, .tokens = 1, .cost = 0.1},
      {.rid = "d", .attempt = 1, .outcome = "http_503", .tokens = -1, .cost = -1},
      {.rid = "d", .attempt = 2, .final = 1, .tokens = 1, .cost = 0.1},
  };
  enum { N = sizeof(v) / sizeof(v[0]) };
  for (int order = 0; order < 3; order++) {
    struct cg_report *r = cg_report_new();
    for (int i = 0; i < N; i++) /* forwards, backwards, finals first */
      feed(r, &v[order == 0 ? i : order == 1 ? N - 1 - i : (i * 3) % N]);
    cg_report_finish(r);
    cr_expect_eq(r->total.unfinished, 1, "order %d: %llu", order,
                 (unsigned long long) r->total.unfinished); /* b */
    cr_expect_eq(r->total.calls, 3);
    cr_expect_eq(r->pending.count, 1, "order %d: complete calls are forgotten", order);
    cg_report_free(r);
  }
}

/* 6: a merged retry-ratio alert covers every window that fired, the worst one too. */
Test(report_review, retry_alert_span_covers_worst_window) {
  struct cg_report *r = cg_report_new();
  const cJSON *a;
  const char *from, *to, *wfrom, *wto;
  calls_at(r, 8, 5, 30, 10, 0.01);
  calls_at(r, 8, 6, 30, 3, 0.01);
  cg_report_finish(r);
  cr_assert_eq(count_alerts(r, "retry_ratio"), 1);
  a = first_alert(r, "retry_ratio");
  from = cJSON_GetObjectItem(a, "from")->valuestring;
  to = cJSON_GetObjectItem(a, "to")->valuestring;
  wfrom = cJSON_GetObjectItem(a, "worst_from")->valuestring;
  wto = cJSON_GetObjectItem(a, "worst_to")->valuestring;
  cr_expect_leq(strcmp(from, wfrom), 0, "%s > %s", from, wfrom);
  cr_expect_geq(strcmp(to, wto), 0, "%s < %s", to, wto);
  cr_expect_str_eq(from, "2026-11-30T07:56:00.000Z");
  cr_expect_str_eq(to, "2026-11-30T08:16:00.000Z");
  cg_report_free(r);
}

/* 7: latency extremes are exact whatever the value. */
Test(report_review, latency_extremes_exact_beyond_histogram) {
  struct cg_report *r = cg_report_new();
  feed(r, &(struct rec){.attempt = 1, .final = 1, .tokens = 1, .cost = 0.1,
                        .duration = 1000000000000LL});
  cg_report_finish(r);
  cr_expect_eq(r->total.latency->max, 1000000000000LL);
  cr_expect_eq(cg_hist_percentile(r->total.latency, 99), 1000000000000LL);
  cr_expect_eq(cg_hist_percentile(r->total.latency, 50), 1000000000000LL);
  cg_report_free(r);
}

/* 8: a cost sum beyond the largest double reads "overflow" in text, null + flag in JSON. */
Test(report_review, cost_overflow_agrees) {
  struct cg_report *r = cg_report_new();
  char *text, *json;
  for (int i = 0; i < 2; i++)
    feed(r, &(struct rec){.rid = i ? "b" : "a", .attempt = 1, .final = 1, .tokens = 1,
                          .cost = 1e308, .duration = 1});
  cg_report_finish(r);
  text = text_of(r);
  json = json_of(r);
  cr_expect_null(strstr(text, "inf"), "%s", text);
  cr_expect_not_null(strstr(text, "overflow"), "%s", text);
  cr_expect_not_null(strstr(json, "\"cost_usd\":null"), "%s", json);
  cr_expect_not_null(strstr(json, "\"cost_overflow\":true"), "%s", json);
  free(text);
  free(json);
  cg_report_free(r);
}

/* 9: null stays apart from every string; the overflow group is a flag. */
Test(report_review, group_keys_do_not_collide) {
  struct cg_report *r = cg_report_new();
  struct rec x = {.attempt = 1, .final = 1, .tokens = 1, .cost = 0.1, .duration = 1};
  char *text;
  feed_sub(r, &x, "\"pool\":\"p\"", "\"pool\":null");
  feed_sub(r, &x, "\"pool\":\"p\"", "\"pool\":\"-\"");
  feed_sub(r, &x, "\"pool\":\"p\"", "\"pool\":\"(none)\"");
  feed_sub(r, &x, "\"model\":\"m\"", "\"model\":\"m\\u0000x\"");
  feed(r, &x);
  cg_report_finish(r);
  cr_expect_eq(r->ngroups, 5);
  cr_expect_null(r->group[0].pool);
  cr_expect_str_eq(r->group[1].pool, "-");
  cr_expect_str_eq(r->group[3].model, "m\xef\xbf\xbdx");
  cr_expect_str_eq(r->group[4].model, "m");
  text = text_of(r);
  cr_expect_not_null(strstr(text, "\n(none)     "), "%s", text);
  cr_expect_not_null(strstr(text, "\n\\(none)    "), "%s", text);
  free(text);
  cg_report_free(r);
  {
    char model[32];
    r = cg_report_new();
    x.model = "(other)";
    feed(r, &x); /* a literal "(other)" is a group like any */
    for (int i = 0; i < CG_REPORT_MAX_GROUPS; i++) {
      snprintf(model, sizeof(model), "model-%d", i);
      x.model = model;
      feed(r, &x);
    }
    cg_report_finish(r);
    cr_expect_eq(r->group[0].other, 0);
    cr_expect_str_eq(r->group[0].model, "(other)");
    cr_expect_eq(r->group[0].s.attempts, 1);
    cr_expect_eq(r->group[CG_REPORT_MAX_GROUPS].other, 1);
    cr_expect_eq(r->group[CG_REPORT_MAX_GROUPS].s.attempts, 1);
    cg_report_free(r);
  }
}

/* 10: a tiny priced cost is not printed as zero; an unpriced group shows "-". */
Test(report_review, text_cost_significant_digits) {
  struct cg_report *r = cg_report_new();
  char *text;
  feed(r, &(struct rec){.rid = "a", .attempt = 1, .final = 1, .tokens = 1, .cost = 4e-7,
                        .duration = 1, .model = "cheap"});
  feed(r, &(struct rec){.rid = "b", .attempt = 1, .final = 1, .tokens = 1, .cost = -1,
                        .duration = 1, .model = "unpriced"});
  cg_report_finish(r);
  text = text_of(r);
  cr_expect_not_null(strstr(text, " 4e-07 "), "%s", text);
  cr_expect_null(strstr(text, "0.000000"), "%s", text);
  cr_expect(strstr(text, "\nunpriced  ") == NULL); /* pool column first */
  {
    char row[512] = "";
    const char *at = strstr(text, "unpriced      "); /* the second group's row */
    cr_assert_not_null(at, "%s", text);
    snprintf(row, sizeof(row), "%.*s", (int) strcspn(at, "\n"), at);
    cr_expect_not_null(strstr(row, "           - "), "%s", row); /* cost_usd: - */
  }
  free(text);
  cg_report_free(r);
}

/* 11: an empty outcome and a NUL byte are malformed; an empty log has no outcomes line. */
Test(report_review, empty_outcome_nul_and_empty_log) {
  struct cg_report *r = cg_report_new();
  struct rec x = {.attempt = 1, .final = 1, .tokens = 1, .cost = 0.1, .duration = 1};
  char *l = line_of(&x), *text;
  size_t n = strlen(l);
  char *withnul = malloc(n + 9);

  cr_expect_eq(feed(r, &(struct rec){.attempt = 1, .final = 1, .tokens = 1, .cost = 0.1,
                                     .duration = 1, .outcome = ""}),
               CG_RBAD_VALUE);
  memcpy(withnul, l, n);
  memcpy(withnul + n, "\0garbage", 8);
  cr_expect_eq(cg_report_line(r, withnul, n + 8), CG_RBAD_JSON);
  cr_expect_eq(r->records, 0);
  cg_report_finish(r);
  text = text_of(r);
  cr_expect_null(strstr(text, "outcomes:"), "%s", text);
  free(text);
  free(withnul);
  free(l);
  cg_report_free(r);
}

/* 12: lines up to 1 MiB are records (a long task id and path). */
Test(report_review, long_lines_up_to_a_mebibyte) {
  struct cg_report *r = cg_report_new();
  size_t big = 900 * 1024;
  char *task = malloc(big + 1);
  memset(task, 't', big);
  task[big] = '\0';
  {
    struct rec x = {.attempt = 1, .final = 1, .tokens = 1, .cost = 0.1, .duration = 1};
    char *to = malloc(big + 32), *l;
    snprintf(to, big + 32, "\"task_id\":\"%s\"", task);
    l = line_sub(&x, "\"task_id\":null", to);
    cr_expect_gt(strlen(l), 64 * 1024);
    cr_expect_eq(cg_report_line(r, l, strlen(l)), CG_RBAD_NONE);
    free(l);
    free(to);
  }
  cr_expect_eq(r->records, 1);
  free(task);
  cg_report_free(r);
}

/* 13: an OK answer without usage, possibly billed: billed, at risk at its family's mean. */
Test(report_review, ok_without_usage_is_at_risk_at_family_mean) {
  struct cg_report *r = cg_report_new();
  double usd;
  uint64_t unest;
  feed(r, &(struct rec){.rid = "a", .attempt = 1, .final = 1, .tokens = 10, .cost = 0.25,
                        .duration = 1, .model = "gpt-4o-2024-08-06"});
  feed(r, &(struct rec){.rid = "b", .attempt = 1, .final = 1, .tokens = 10, .cost = 0.75,
                        .duration = 1, .model = "gpt-4o"});
  feed(r, &(struct rec){.rid = "c", .attempt = 1, .final = 1, .tokens = -1, .cost = -1,
                        .pb = 1, .duration = 1, .model = "gpt-4o", .outcome = "ok"});
  cg_report_finish(r);
  cr_expect_eq(r->ngroups, 1);
  cr_expect_eq(r->total.billed, 3);
  cr_expect_eq(r->total.possibly_billed, 1);
  cr_expect_eq(r->total.at_risk_attempts, 1);
  cr_expect_eq(r->total.unpriced, 0);
  cg_report_risk(r, -1, &usd, &unest);
  cr_expect_eq(usd, 0.5);
  cr_expect_eq(unest, 0);
  cg_report_free(r);
}
