/* test-prom.c - the Prometheus text writer (prom.h), the metrics of a state file
 * (metrics.h), the per-pool tallies behind them (tally.h) and the exporter's parsers
 * (exporter.h). */
#include "exporter.h"
#include "limiter.h"
#include "metrics.h"
#include "prom.h"
#include "state-fixture.h"
#include "tally.h"

#include <math.h>
#include <string.h>

CG_STATE_FIXTURE(prom);

/* What a writer puts into a FILE, as a malloc'd string. */
#define CAPTURE(out, stmt)                                                                \
  do {                                                                                    \
    size_t len_;                                                                          \
    FILE *f = open_memstream(&(out), &len_);                                              \
    cr_assert_not_null(f);                                                                \
    stmt;                                                                                 \
    cr_assert_eq(fclose(f), 0);                                                           \
  } while (0)

static void label_is(const char *in, const char *want) {
  char *out = NULL;
  CAPTURE(out, cg_prom_label_value(f, in));
  cr_assert_str_eq(out, want, "label value of \"%s\"", in);
  free(out);
}

/* ---- escaping (the exposition format: label values escape \, " and line feed) ---- */

Test(prom, label_value_escapes_backslash_quote_newline) {
  label_is("plain", "plain");
  label_is("a\\b", "a\\\\b");
  label_is("say \"hi\"", "say \\\"hi\\\"");
  label_is("two\nlines", "two\\nlines");
  label_is("\\\"\n", "\\\\\\\"\\n");
  label_is("C:\\path\\n", "C:\\\\path\\\\n"); /* a literal backslash-n stays two characters */
  label_is("", "");
  label_is(NULL, "");
  /* Nothing else is escaped: tabs, carriage returns, braces, commas, equals signs. */
  label_is("a\tb\rc{d},e=f", "a\tb\rc{d},e=f");
}

Test(prom, label_value_keeps_utf8_and_repairs_the_rest) {
  label_is("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80", "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80");
  /* A name cut inside a character (pools are 47 bytes at most): U+FFFD. */
  label_is("pool-\xE6\x97", "pool-\xEF\xBF\xBD\xEF\xBF\xBD");
  label_is("\xFF" "x", "\xEF\xBF\xBDx");
  label_is("\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD");             /* overlong '/' */
  label_is("\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); /* a surrogate */
  label_is("\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); /* > U+10FFFF */
  label_is("\xE2\x82\"", "\xEF\xBF\xBD\xEF\xBF\xBD\\\""); /* a cut sequence, then a quote */
}

Test(prom, help_text_escapes_backslash_and_newline_only) {
  char *out = NULL;
  CAPTURE(out, cg_prom_help_text(f, "a \\ b\nc \"d\""));
  cr_assert_str_eq(out, "a \\\\ b\\nc \"d\"");
  free(out);
  CAPTURE(out, cg_prom_family(f, "x_total", "counter", "Line one.\nLine two."));
  cr_assert_str_eq(out, "# HELP x_total Line one.\\nLine two.\n# TYPE x_total counter\n");
  free(out);
}

Test(prom, samples_and_values) {
  const char *labels[] = {"pool", "a\"b", "outcome", "http_503"};
  char *out = NULL, v[64];

  CAPTURE(out, cg_prom_sample_u64(f, "c_total", labels, 2, 18446744073709551615ull));
  cr_assert_str_eq(out, "c_total{pool=\"a\\\"b\",outcome=\"http_503\"} 18446744073709551615\n");
  free(out);
  CAPTURE(out, cg_prom_sample(f, "g", NULL, 0, 0.1));
  cr_assert_str_eq(out, "g 0.1\n");
  free(out);
  cg_prom_value(v, sizeof(v), 0);
  cr_assert_str_eq(v, "0");
  cg_prom_value(v, sizeof(v), 1234567);
  cr_assert_str_eq(v, "1234567");
  cg_prom_value(v, sizeof(v), 1e-9);
  cr_assert_str_eq(v, "1e-09"); /* the shortest form that reads back */
  cr_assert_eq(strtod(v, NULL), 1e-9);
  cg_prom_value(v, sizeof(v), 2.5);
  cr_assert_str_eq(v, "2.5");
  cg_prom_value(v, sizeof(v), 1.0 / 3);
  cr_assert_eq(strtod(v, NULL), 1.0 / 3);
  cg_prom_value(v, sizeof(v), NAN);
  cr_assert_str_eq(v, "NaN");
  cg_prom_value(v, sizeof(v), INFINITY);
  cr_assert_str_eq(v, "+Inf");
  cg_prom_value(v, sizeof(v), -INFINITY);
  cr_assert_str_eq(v, "-Inf");
}

Test(prom, metric_names) {
  cr_assert(cg_prom_name_ok("curlguard_calls_total"));
  cr_assert(cg_prom_name_ok("a:b_c9"));
  cr_assert(!cg_prom_name_ok("9lives"));
  cr_assert(!cg_prom_name_ok("with-dash"));
  cr_assert(!cg_prom_name_ok(""));
  cr_assert(!cg_prom_name_ok(NULL));
}

/* ---- tallies ---- */

Test(prom, outcome_indexes) {
  int i;
  cr_assert_str_eq(cg_tally_outcome_name(cg_tally_outcome("ok")), "ok");
  cr_assert_str_eq(cg_tally_outcome_name(cg_tally_outcome("http_503")), "http_503");
  cr_assert_str_eq(cg_tally_outcome_name(cg_tally_outcome("http_529")), "http_529");
  cr_assert_str_eq(cg_tally_outcome_name(cg_tally_outcome("http_418")), "http_4xx");
  cr_assert_str_eq(cg_tally_outcome_name(cg_tally_outcome("http_599")), "http_5xx");
  cr_assert_str_eq(cg_tally_outcome_name(cg_tally_outcome("http_600")), "http_other");
  cr_assert_str_eq(cg_tally_outcome_name(cg_tally_outcome("http_50x")), "other");
  cr_assert_str_eq(cg_tally_outcome_name(cg_tally_outcome("http_")), "other");
  cr_assert_str_eq(cg_tally_outcome_name(cg_tally_outcome("nonsense")), "other");
  cr_assert_str_eq(cg_tally_outcome_name(cg_tally_outcome(NULL)), "other");
  cr_assert_str_eq(cg_tally_outcome_name(cg_tally_outcome("retry_budget_exhausted")),
                   "retry_budget_exhausted");
  cr_assert_null(cg_tally_outcome_name(CG_TALLY_NOUTCOMES));
  cr_assert_null(cg_tally_outcome_name(-1));
  /* Every name maps back to itself, and every one is a valid label value. */
  for (i = 0; i < CG_TALLY_NOUTCOMES; i++)
    cr_assert_eq(cg_tally_outcome(cg_tally_outcome_name(i)), i, "%s", cg_tally_outcome_name(i));
}

static struct cg_record rec(int attempt, int final, const char *outcome) {
  struct cg_record r;
  cg_record_init(&r);
  r.attempt = attempt;
  r.final = final;
  r.outcome = outcome;
  return r;
}

static int pool_p(const char *name) {
  struct cg_limits l = {0};
  int p = cg_limiter_pool(&st, name, &l);
  cr_assert_geq(p, 0);
  return p;
}

Test(prom, tally_counts_as_report_does) {
  struct cg_state_tally t;
  struct cg_record a = rec(1, 0, "http_503"), b = rec(2, 1, "ok"), c = rec(1, 1, "http_418");
  int p = pool_p("p");

  a.queue_ms = 250;
  a.breaker_wait_ms = 50;
  a.possibly_billed = 0;
  b.prompt_tokens = 12;
  b.completion_tokens = 30;
  b.cached_tokens = 4;
  b.cost_usd = 0.000123;
  c.repeat_of = "earlier-request";
  c.possibly_billed = 1;
  c.prompt_tokens = CG_NULL_INT; /* unknown: nothing */
  c.cost_usd = NAN;
  cg_tally_add(&st, p, &a);
  cg_tally_add(&st, p, &b);
  cg_tally_add(&st, p, &c);
  cg_tally_add(&st, -1, &c);           /* no pool: nothing, no crash */
  cg_tally_add(NULL, p, &c);
  cg_tally_read(&st, p, &t);
  cr_assert_eq(t.attempts, 3);
  cr_assert_eq(t.calls, 2);
  cr_assert_eq(t.calls_ok, 1);
  cr_assert_eq(t.retries, 1);
  cr_assert_eq(t.host_retry_calls, 1);
  cr_assert_eq(t.possibly_billed, 1);
  cr_assert_eq(t.prompt_tokens, 12);
  cr_assert_eq(t.completion_tokens, 30);
  cr_assert_eq(t.cached_tokens, 4);
  cr_assert_eq(t.cost_nusd, 123000);
  cr_assert_eq(t.queue_ms, 200);
  cr_assert_eq(t.breaker_wait_ms, 50);
  cr_assert_eq(t.outcomes[cg_tally_outcome("http_503")], 1);
  cr_assert_eq(t.outcomes[cg_tally_outcome("ok")], 1);
  cr_assert_eq(t.outcomes[cg_tally_outcome("http_4xx")], 1);
}

Test(prom, tally_ok_is_exactly_ok) {
  struct cg_state_tally t;
  struct cg_record a = rec(1, 1, "ok"), b = rec(1, 1, "okay"), c = rec(1, 1, "o");
  int p = pool_p("p");
  cg_tally_add(&st, p, &a);
  cg_tally_add(&st, p, &b);
  cg_tally_add(&st, p, &c);
  cg_tally_read(&st, p, &t);
  cr_assert_eq(t.outcomes[cg_tally_outcome("ok")], 1);
  cr_assert_eq(t.outcomes[cg_tally_outcome("other")], 2);
  cr_assert_eq(t.calls_ok, 1);
}

/* ---- the metrics of a file ---- */

static char *metrics_text(void) {
  static struct cg_metrics m;
  char *out = NULL;
  cg_metrics_collect(&st, cg_state_now(), &m);
  CAPTURE(out, cg_metrics_write(f, &m));
  return out;
}

Test(prom, metrics_of_a_file) {
  struct cg_record b = rec(2, 1, "ok"), a = rec(1, 0, "http_429");
  int p = pool_p("api \"quoted\"\nname");
  char *text, *line, *save = NULL;
  int families = 0, samples = 0;

  b.cost_usd = 0.5;
  b.completion_tokens = 7;
  cg_tally_add(&st, p, &a);
  cg_tally_add(&st, p, &b);
  text = metrics_text();
  cr_assert(strstr(text, "curlguard_state_ready 1\n"), "%s", text);
  cr_assert(strstr(text, "curlguard_calls_total{pool=\"api \\\"quoted\\\"\\nname\"} 1\n"), "%s",
            text);
  cr_assert(strstr(text, "curlguard_attempts_total{pool=\"api \\\"quoted\\\"\\nname\"} 2\n"));
  cr_assert(strstr(text, "curlguard_retries_total{pool=\"api \\\"quoted\\\"\\nname\"} 1\n"));
  cr_assert(strstr(text, "curlguard_cost_usd_total{pool=\"api \\\"quoted\\\"\\nname\"} 0.5\n"));
  cr_assert(strstr(text, "curlguard_output_tokens_total{pool=\"api \\\"quoted\\\"\\nname\"} 7\n"));
  cr_assert(strstr(text, "curlguard_outcomes_total{pool=\"api \\\"quoted\\\"\\nname\","
                         "outcome=\"http_429\"} 1\n"));
  cr_assert(strstr(text, "outcome=\"ok\"} 1\n"));
  cr_assert(!strstr(text, "outcome=\"dns_error\""), "outcomes never seen are left out");
  cr_assert(strstr(text, "# HELP curlguard_breaker_state Circuit breaker state: 0 = closed, "
                         "1 = open, 2 = half-open"));
  cr_assert(strstr(text, "curlguard_breaker_state{pool=\"api \\\"quoted\\\"\\nname\"} 0\n"));
  /* The format's shape: every sample's family was typed before it, each family once. */
  for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (strncmp(line, "# TYPE ", 7) == 0) {
      families++;
      cr_assert(strstr(line, " counter") || strstr(line, " gauge"), "%s", line);
    } else if (line[0] != '#') {
      samples++;
      cr_assert(strchr(line, ' '), "%s", line);
    }
  }
  cr_assert_geq(families, 30);
  cr_assert_geq(samples, families);
  free(text);
}

Test(prom, same_name_twice_gets_two_series) {
  int p = pool_p("dup");
  char *text;
  /* A second slot with the same (cut) name, as two 60-byte names sharing 47 bytes leave. */
  memcpy(&st.pools[p + 1], &st.pools[p], sizeof(st.pools[p]));
  st.pools[p + 1].name_hash ^= 1;
  text = metrics_text();
  cr_assert(strstr(text, "curlguard_calls_total{pool=\"dup\"} 0\n"), "%s", text);
  {
    char want[64];
    snprintf(want, sizeof(want), "curlguard_calls_total{pool=\"dup#%d\"} 0\n", p + 1);
    cr_assert(strstr(text, want), "%s", text);
  }
  free(text);
}

Test(prom, no_file_is_ready_zero) {
  static struct cg_metrics m;
  char why[256], *out = NULL, missing[200];
  snprintf(missing, sizeof(missing), "%s/none", dir);
  cr_assert_eq(cg_metrics_load(missing, &m, why, sizeof(why)), 1);
  CAPTURE(out, cg_metrics_write(f, &m));
  cr_assert(strstr(out, "curlguard_state_ready 0\n"));
  cr_assert(!strstr(out, "curlguard_calls_total"));
  free(out);
  cr_assert_eq(cg_metrics_load(path, &m, why, sizeof(why)), 0, "%s", why);
  cr_assert_eq(m.ready, 1);
}

/* ---- the exporter's parsers ---- */

static void addr_ok(const char *addr, const char *host, const char *port) {
  char h[64], p[8], why[256] = "";
  cr_assert_eq(cg_exporter_addr(addr, h, sizeof(h), p, sizeof(p), why, sizeof(why)), 0,
               "%s: %s", addr, why);
  cr_assert_str_eq(h, host);
  cr_assert_str_eq(p, port);
}

static void addr_bad(const char *addr, const char *says) {
  char h[64], p[8], why[256] = "";
  cr_assert_eq(cg_exporter_addr(addr, h, sizeof(h), p, sizeof(p), why, sizeof(why)), -1,
               "%s was taken", addr);
  cr_assert(strstr(why, says), "%s: %s", addr, why);
  cr_assert(!strchr(why, '\n'));
}

Test(prom, listen_addresses) {
  addr_ok("127.0.0.1:9464", "127.0.0.1", "9464");
  addr_ok("[::1]:9464", "::1", "9464");
  addr_ok(":9464", "", "9464");
  addr_ok("localhost:0", "localhost", "0");
  addr_ok("127.0.0.1:00080", "127.0.0.1", "80");
  addr_bad("127.0.0.1", "no port");
  addr_bad("127.0.0.1:", "port must be");
  addr_bad("127.0.0.1:65536", "port must be");
  addr_bad("127.0.0.1:-1", "port must be");
  addr_bad("127.0.0.1:94a4", "port must be");
  addr_bad("::1:9464", "brackets");
  addr_bad("[::1]9464", "[IPv6]:PORT");
  addr_bad("", "empty");
}

static enum cg_route route(const char *head, int *head_only) {
  return cg_exporter_route(head, strlen(head), head_only);
}

Test(prom, request_routes) {
  int h;
  cr_assert_eq(route("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &h), CG_ROUTE_METRICS);
  cr_assert_eq(h, 0);
  cr_assert_eq(route("HEAD /metrics?name[]=x HTTP/1.0\r\n\r\n", &h), CG_ROUTE_METRICS);
  cr_assert_eq(h, 1);
  cr_assert_eq(route("GET / HTTP/1.1\n\n", &h), CG_ROUTE_INDEX);
  cr_assert_eq(route("GET /metricsx HTTP/1.1\r\n\r\n", &h), CG_ROUTE_NOT_FOUND);
  cr_assert_eq(route("POST /metrics HTTP/1.1\r\n\r\n", &h), CG_ROUTE_BAD_METHOD);
  cr_assert_eq(route("GET /metrics\r\n\r\n", &h), CG_ROUTE_BAD_REQUEST);
  cr_assert_eq(route("GET metrics HTTP/1.1\r\n\r\n", &h), CG_ROUTE_BAD_REQUEST);
  cr_assert_eq(route("GET /metrics HTTP/2.0\r\n\r\n", &h), CG_ROUTE_BAD_REQUEST);
  cr_assert_eq(route("GET /metrics HTTP/1.1 extra\r\n\r\n", &h), CG_ROUTE_BAD_REQUEST);
  cr_assert_eq(route("GET  /metrics HTTP/1.1\r\n\r\n", &h), CG_ROUTE_BAD_REQUEST);
  cr_assert_eq(route("\x16\x03\x01\x02\x00\x01", &h), CG_ROUTE_BAD_REQUEST); /* TLS hello */
  cr_assert_eq(route("", &h), CG_ROUTE_BAD_REQUEST);
  cr_assert_eq(cg_exporter_route("GET /metrics\0 HTTP/1.1\r\n\r\n", 27, &h),
               CG_ROUTE_BAD_REQUEST);
}

/* absolute-form, RFC 9112 section 3.2.2 (was a 400) */
Test(prom, request_routes_absolute_form) {
  int h;
  cr_assert_eq(route("GET http://127.0.0.1:9464/metrics HTTP/1.1\r\n\r\n", &h),
               CG_ROUTE_METRICS);
  cr_assert_eq(route("HEAD HTTP://host/metrics?x=1 HTTP/1.1\r\n\r\n", &h), CG_ROUTE_METRICS);
  cr_assert_eq(h, 1);
  cr_assert_eq(route("GET https://[::1]:9464/ HTTP/1.1\r\n\r\n", &h), CG_ROUTE_INDEX);
  cr_assert_eq(route("GET http://host:9464 HTTP/1.1\r\n\r\n", &h), CG_ROUTE_INDEX);
  cr_assert_eq(route("GET http://host?q=/metrics HTTP/1.1\r\n\r\n", &h), CG_ROUTE_INDEX);
  cr_assert_eq(route("GET http://host/nope HTTP/1.1\r\n\r\n", &h), CG_ROUTE_NOT_FOUND);
  cr_assert_eq(route("GET http:///metrics HTTP/1.1\r\n\r\n", &h), CG_ROUTE_BAD_REQUEST);
  cr_assert_eq(route("GET http:/metrics HTTP/1.1\r\n\r\n", &h), CG_ROUTE_BAD_REQUEST);
  cr_assert_eq(route("GET ftp://host/metrics HTTP/1.1\r\n\r\n", &h), CG_ROUTE_BAD_REQUEST);
}

Test(prom, request_head_end) {
  cr_assert_eq(cg_exporter_head_end("GET / HTTP/1.1\r\n\r\nrest", 22), 18);
  cr_assert_eq(cg_exporter_head_end("GET / HTTP/1.1\n\n", 16), 16);
  cr_assert_eq(cg_exporter_head_end("GET / HTTP/1.1\r\nHost: x\r\n", 25), 0);
  cr_assert_eq(cg_exporter_head_end("", 0), 0);
}
