/* test-report-html.c - the pieces of `curlguard report --html`: the SVG axis, pixel,
 * label and path helpers with odd input (one point, all zeros, NaN, infinities, huge
 * and subnormal values: never NaN or inf in the output), escaping of log strings, the
 * adaptive time buckets, and a whole page from crafted lines (cli/report-svg.h,
 * cli/report-series.h, cli/report-html.h). */
#include "report-html.h"
#include "report-svg.h"

#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

/* What `fn` wrote to a memory stream, NUL-terminated; the caller frees it. */
#define CAPTURE(buf, stmt)                                                                 \
  do {                                                                                     \
    size_t cap_len_ = 0;                                                                   \
    FILE *out = open_memstream(&(buf), &cap_len_);                                         \
    cr_assert(out);                                                                        \
    stmt;                                                                                  \
    cr_assert_eq(fclose(out), 0);                                                          \
  } while (0)

/* No printed NaN or infinity anywhere in `s` (glibc prints "nan", "-nan", "inf"). */
static void assert_no_nonfinite(const char *s) {
  cr_assert_null(strstr(s, "nan"), "NaN in output: %s", s);
  cr_assert_null(strstr(s, "inf"), "inf in output: %s", s);
  cr_assert_null(strstr(s, "NAN"), "NaN in output: %s", s);
  cr_assert_null(strstr(s, "INF"), "inf in output: %s", s);
}

static void assert_axis_sane(double max, const struct cg_axis *a) {
  cr_assert(isfinite(a->max) && a->max > 0, "max %g for input %g", a->max, max);
  cr_assert(isfinite(a->step) && a->step > 0, "step %g for input %g", a->step, max);
  cr_assert(a->ticks >= 1 && a->ticks <= 12, "ticks %d for input %g", a->ticks, max);
  if (isfinite(max) && max > 0)
    cr_assert(a->max >= max * (1 - 1e-12), "axis %g below data %g", a->max, max);
}

/* ---- axis ---- */

Test(axis, odd_maxima_give_finite_positive_axes) {
  const double in[] = {0,        -0.0,    -5,     NAN,     INFINITY, -INFINITY, DBL_MAX,
                       1e308,    1.7e308, 9e307,  1e-300,  DBL_MIN,  5e-324,    1e-310,
                       1,        7,       0.37,   1e15,    123456789, 0.000123, 2.5};
  for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
    for (int integral = 0; integral <= 1; integral++)
      for (int ticks = 0; ticks <= 6; ticks++) {
        struct cg_axis a;
        cg_axis_nice(in[i], ticks, integral, &a);
        assert_axis_sane(in[i], &a);
      }
}

Test(axis, nice_steps) {
  struct cg_axis a;

  cg_axis_nice(7, 5, 1, &a);
  cr_assert_float_eq(a.step, 2, 0);
  cr_assert_float_eq(a.max, 8, 0);
  cg_axis_nice(1, 5, 1, &a); /* one attempt: steps of 1, not 0.2 */
  cr_assert_float_eq(a.step, 1, 0);
  cr_assert_float_eq(a.max, 1, 0);
  cg_axis_nice(0.37, 5, 0, &a);
  cr_assert_float_eq(a.step, 0.1, 1e-15);
  cr_assert_eq(a.ticks, 4);
  cg_axis_nice(0, 5, 0, &a); /* all zeros: 0 to 1 */
  cr_assert_float_eq(a.max, 1, 0);
  cg_axis_nice(DBL_MAX, 5, 0, &a); /* nice 5e307 x 4 = 2e308 would overflow */
  cr_assert_eq(a.max, DBL_MAX);
  cr_assert_eq(a.ticks, 5);
}

Test(axis, pixel_rows_are_clamped_and_finite) {
  struct cg_axis a;
  const double v[] = {0, -1, 5, 10, 11, 1e308, INFINITY, -INFINITY, NAN, DBL_MAX};

  cg_axis_nice(10, 5, 0, &a);
  for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
    double y = cg_axis_px(&a, v[i], 14, 176);
    cr_assert(isfinite(y) && y >= 14 && y <= 190, "y %g for %g", y, v[i]);
  }
  cr_assert_float_eq(cg_axis_px(&a, 0, 14, 176), 190, 1e-9);
  cr_assert_float_eq(cg_axis_px(&a, 10, 14, 176), 14, 1e-9);
  cr_assert_float_eq(cg_axis_px(&a, 5, 14, 176), 102, 1e-9);
  cr_assert_float_eq(cg_axis_px(&a, NAN, 14, 176), 190, 1e-9);
  cr_assert_float_eq(cg_axis_px(&a, INFINITY, 14, 176), 14, 1e-9);
  /* A broken axis (never made by cg_axis_nice) and non-finite geometry stay finite. */
  a.max = NAN;
  cr_assert(isfinite(cg_axis_px(&a, 3, NAN, INFINITY)));
}

/* ---- labels and coordinates ---- */

Test(svg, coordinates) {
  char b[32];
  cg_svg_coord(b, sizeof(b), NAN);
  cr_assert_str_eq(b, "0.0");
  cg_svg_coord(b, sizeof(b), INFINITY);
  cr_assert_str_eq(b, "1000000.0");
  cg_svg_coord(b, sizeof(b), -INFINITY);
  cr_assert_str_eq(b, "-1000000.0");
  cg_svg_coord(b, sizeof(b), -0.0);
  cr_assert_str_eq(b, "0.0");
  cg_svg_coord(b, sizeof(b), -0.01); /* %.1f alone would print "-0.0" */
  cr_assert_str_eq(b, "0.0");
  cg_svg_coord(b, sizeof(b), 123.456);
  cr_assert_str_eq(b, "123.5");
}

Test(svg, labels) {
  static const struct { double v; const char *want; } cases[] = {
      {0, "0"},         {0.25, "0.25"},     {1, "1"},           {1234, "1234"},
      {12500, "12.5k"}, {3.2e6, "3.2M"},    {4e9, "4G"},        {2.5e12, "2.5T"},
      {1e308, "1e+308"}, {DBL_MAX, "1.8e+308"}, {0.00005, "5e-05"}, {5e-324, "4.9e-324"},
      {NAN, "?"},       {INFINITY, "?"},    {-INFINITY, "?"},   {0.000123, "0.000123"}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char b[32];
    cg_svg_label(b, sizeof(b), cases[i].v);
    cr_assert_str_eq(b, cases[i].want, "label of %g: %s", cases[i].v, b);
    cr_assert_leq(strlen(b), 11);
  }
}

Test(svg, exact_numbers_read_back) {
  const double v[] = {0.1, 1.0 / 3, 2.49e-05, 0.000340667, DBL_MAX, 5e-324, 123456789012345678.0};
  char b[40];
  for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
    cg_svg_exact(b, sizeof(b), v[i]);
    cr_assert_eq(strtod(b, NULL), v[i], "%s does not read back as %.17g", b, v[i]);
  }
  cg_svg_exact(b, sizeof(b), 0.1);
  cr_assert_str_eq(b, "0.1");
  cg_svg_exact(b, sizeof(b), NAN);
  cr_assert_str_eq(b, "");
  cg_svg_exact(b, sizeof(b), INFINITY);
  cr_assert_str_eq(b, "");
}

/* ---- line paths ---- */

Test(path, one_point_is_a_visible_stroke) {
  char *s = NULL;
  struct cg_axis a;
  double v[] = {3};
  size_t n;

  cg_axis_nice(3, 5, 0, &a);
  CAPTURE(s, n = cg_svg_line(out, v, 1, &a, 58, 528, 14, 176, "line"));
  cr_assert_eq(n, 1);
  /* Centre 58 + 264 = 322, a stroke from 319 to 325 at the top (3 is the axis max). */
  cr_assert_str_eq(s, "<path class=\"line\" d=\"M319.0 14.0L325.0 14.0\"/>");
  free(s);
}

Test(path, all_zeros_lie_on_the_base_line) {
  char *s = NULL;
  struct cg_axis a;
  double v[4] = {0, 0, 0, 0};

  cg_axis_nice(0, 5, 0, &a);
  CAPTURE(s, cg_svg_line(out, v, 4, &a, 0, 400, 10, 100, "line"));
  cr_assert_str_eq(s, "<path class=\"line\" d=\"M50.0 110.0 L150.0 110.0 L250.0 110.0 "
                      "L350.0 110.0\"/>");
  free(s);
}

Test(path, huge_and_nonfinite_values_stay_finite) {
  char *s = NULL;
  struct cg_axis a;
  double v[] = {1e308, DBL_MAX, INFINITY, NAN, 5e-324, -INFINITY, 0, 1.7e308};

  cg_axis_nice(DBL_MAX, 5, 0, &a);
  CAPTURE(s, cg_svg_line(out, v, sizeof(v) / sizeof(v[0]), &a, 0, 800, 0, 100, "line"));
  assert_no_nonfinite(s);
  /* NaN and -inf are gaps: three runs, the middle one a point (5e-324) drawn alone. */
  cr_assert_eq(strspn(s, "<"), 1);
  {
    size_t moves = 0;
    for (const char *p = strstr(s, "d=\""); p && *p; p++)
      moves += *p == 'M';
    cr_assert_eq(moves, 3, "%s", s);
  }
  free(s);
}

Test(path, nothing_to_draw_writes_nothing) {
  char *s = NULL;
  struct cg_axis a;
  double v[] = {NAN, NAN};
  size_t n;

  cg_axis_nice(1, 5, 0, &a);
  CAPTURE(s, n = cg_svg_line(out, v, 2, &a, 0, 100, 0, 100, "line"));
  cr_assert_eq(n, 0);
  cr_assert_str_eq(s, "");
  free(s);
  s = NULL;
  CAPTURE(s, n = cg_svg_line(out, v, 0, &a, 0, 100, 0, 100, "line"));
  cr_assert_eq(n, 0);
  cr_assert_str_eq(s, "");
  free(s);
}

Test(path, thousands_of_points_in_a_tiny_width) {
  char *s = NULL;
  struct cg_axis a;
  double *v = malloc(5000 * sizeof(*v));

  for (int i = 0; i < 5000; i++)
    v[i] = i % 7 ? (double) i * 1e300 : NAN;
  cg_axis_nice(5000 * 1e300, 5, 0, &a);
  CAPTURE(s, cg_svg_line(out, v, 5000, &a, 0, 1e-9, 0, 1e-9, "line"));
  assert_no_nonfinite(s);
  free(s);
  free(v);
}

/* ---- escaping ---- */

Test(escape, markup_and_quotes) {
  char *s = NULL;
  CAPTURE(s, cg_html_text(out, "gpt-x<script>alert(\"x\")</script>'&amp;", (size_t) -1));
  cr_assert_str_eq(s, "gpt-x&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39;&amp;amp;");
  free(s);
}

Test(escape, controls_bidi_and_markers_are_visible) {
  char *s = NULL;
  /* \x01, a newline, U+202E (right-to-left override), U+0085 (C1), a leading "(" */
  CAPTURE(s, cg_html_text(out, "(a\x01\nb\xE2\x80\xAE" "c\xC2\x85", (size_t) -1));
  cr_assert_str_eq(s, "\\(a\\x01\\nb\\u202ec\\u0085");
  free(s);
}

Test(escape, long_names_are_cut_at_a_character) {
  char *s = NULL;
  CAPTURE(s, cg_html_text(out, "\xC3\xA9\xC3\xA9<\xC3\xA9", 3));
  cr_assert_str_eq(s, "\xC3\xA9\xC3\xA9&lt;\xE2\x80\xA6");
  free(s);
  s = NULL;
  CAPTURE(s, cg_html_text(out, "abc", 3)); /* exactly the limit: not cut */
  cr_assert_str_eq(s, "abc");
  free(s);
  s = NULL;
  CAPTURE(s, cg_html_text(out, NULL, 3));
  cr_assert_str_eq(s, "");
  free(s);
}

Test(labels, widths_and_times) {
  char b[40];
  cg_svg_width_label(b, sizeof(b), 10000);
  cr_assert_str_eq(b, "10 s");
  cg_svg_width_label(b, sizeof(b), 120000);
  cr_assert_str_eq(b, "2 min");
  cg_svg_width_label(b, sizeof(b), 21600000);
  cr_assert_str_eq(b, "6 h");
  cg_svg_width_label(b, sizeof(b), 86400000);
  cr_assert_str_eq(b, "1 day");
  cg_svg_width_label(b, sizeof(b), 4 * 86400000LL);
  cr_assert_str_eq(b, "4 days");
  /* 2026-11-30T13:34:19.007Z */
  cg_svg_time_label(b, sizeof(b), 1796045659007LL, 1000, 120000);
  cr_assert_str_eq(b, "13:34:19");
  cg_svg_time_label(b, sizeof(b), 1796045659007LL, 600000, 3600000);
  cr_assert_str_eq(b, "13:34");
  cg_svg_time_label(b, sizeof(b), 1796045659007LL, 3600000, 3 * 86400000LL);
  cr_assert_str_eq(b, "11-30 13:34");
  cg_svg_time_label(b, sizeof(b), 1796045659007LL, 86400000, 30 * 86400000LL);
  cr_assert_str_eq(b, "2026-11-30");
}

/* ---- time buckets ---- */

static struct cg_rrec rec_at(int64_t ts, int attempt, double cost, int64_t tokens) {
  struct cg_rrec x;
  memset(&x, 0, sizeof(x));
  x.ts_ms = ts;
  x.attempt = attempt;
  x.final = 1;
  x.cost_usd = cost;
  x.total_tokens = tokens;
  x.prompt_tokens = x.completion_tokens = x.cached_tokens = CG_RNULL;
  x.duration_ms = 5;
  return x;
}

static uint64_t sum_attempts(const struct cg_sbucket *b, uint64_t *retries, double *cost,
                             uint64_t *outcome1) {
  uint64_t n = 0;
  *retries = 0;
  *cost = 0;
  *outcome1 = 0;
  for (size_t i = 0; i < CG_SERIES_BUCKETS; i++) {
    n += b[i].attempts;
    *retries += b[i].retries;
    *cost += b[i].cost_usd;
    *outcome1 += b[i].outcome[1];
  }
  return n;
}

Test(series, one_instant_is_one_bucket_of_a_second) {
  struct cg_series *s = cg_series_new();
  struct cg_rrec x = rec_at(1796045659007LL, 1, 0.5, 10);
  size_t first, last;

  cr_assert(s);
  cr_assert_eq(cg_series_span(s, &first, &last), 0);
  for (int i = 0; i < 3; i++)
    cg_series_add(s, 0, 0, &x);
  cr_assert(cg_series_span(s, &first, &last));
  cr_assert_eq(first, last);
  cr_assert_eq(s->width_ms, 1000);
  cr_assert_eq(s->total[first].attempts, 3);
  cr_assert_eq(s->group[0][first].total_tokens, 30);
  cr_assert_eq(s->origin_ms % 1000, 0);
  cg_series_free(s);
}

Test(series, widening_keeps_every_count) {
  struct cg_series *s = cg_series_new();
  const int64_t t0 = 1796045659007LL, day = 86400000;
  uint64_t retries, o1;
  double cost;
  size_t first, last;

  /* Out of order: the end first, then the start, then the middle; 3 days in all. */
  for (int i = 0; i < 3000; i++) {
    int64_t ts = t0 + (int64_t) ((i * 7919L) % 3000) * (3 * day / 3000);
    struct cg_rrec x = rec_at(ts, 1 + (i % 4 == 0), i % 5 ? 0.001 : NAN, 7);
    cg_series_add(s, i % 3, (size_t) (i % 2), &x);
  }
  cr_assert_eq(sum_attempts(s->total, &retries, &cost, &o1), 3000);
  cr_assert_eq(retries, 750);
  cr_assert_eq(o1, 1500);
  cr_assert_float_eq(cost, 2400 * 0.001, 1e-9);
  cr_assert_eq(sum_attempts(s->group[1], &retries, &cost, &o1), 1000);
  /* 3 days over 120 buckets need 36 min: the ladder's next is 1 h. */
  cr_assert_eq(s->width_ms, 3600000);
  cr_assert(cg_series_span(s, &first, &last));
  cr_assert_leq(last - first + 1, CG_SERIES_BUCKETS);
  cr_assert_geq(last - first + 1, 72);
  cg_series_free(s);
}

Test(series, an_earlier_record_moves_the_buckets_before_widening) {
  struct cg_series *s = cg_series_new();
  const int64_t t0 = 1796045659007LL;
  struct cg_rrec a = rec_at(t0, 1, 0.1, 1), b = rec_at(t0 + 100000, 1, 0.1, 1);
  struct cg_rrec c = rec_at(t0 + 150000, 1, 0.1, 1);

  cg_series_add(s, 0, 0, &b);
  cg_series_add(s, 0, 0, &a); /* 100 s before the first bucket: moved, still 1 s */
  cr_assert_eq(s->width_ms, 1000);
  cr_assert_eq(s->total[0].attempts, 1);
  cr_assert_eq(s->total[100].attempts, 1);
  cg_series_add(s, 0, 0, &c); /* 150 s > 120 buckets of 1 s: 2 s */
  cr_assert_eq(s->width_ms, 2000);
  cr_assert_eq(s->total[(t0 - s->origin_ms) / 2000].attempts, 1);
  cg_series_free(s);
}

Test(series, the_whole_calendar_fits) {
  struct cg_series *s = cg_series_new();
  /* 0000-01-01 and 9999-12-31T23:59:59.999Z, and 1969 (negative ms). */
  const int64_t ts[] = {-62167219200000LL, 253402300799999LL, -1, 0, 1796045659007LL};
  uint64_t retries, o1;
  double cost;

  for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++) {
    struct cg_rrec x = rec_at(ts[i], 2, DBL_MAX, 1);
    cg_series_add(s, 70, 64, &x); /* a group beyond the charted ones, the other outcome */
  }
  cr_assert_eq(sum_attempts(s->total, &retries, &cost, &o1), 5);
  cr_assert_eq(retries, 5);
  cr_assert(s->capped);
  cr_assert_geq(s->total[0].attempts, 1); /* year 0000 */
  cr_assert_lt(s->width_ms * CG_SERIES_BUCKETS, INT64_MAX / 2);
  cg_series_free(s);
}

/* ---- a whole page ---- */

static void feed(struct cg_report *r, const char *ts, const char *rid, int attempt, int final,
                 const char *model, const char *outcome, const char *cost, int pb) {
  char line[2048];
  snprintf(line, sizeof(line),
           "{\"ts\":\"%s\",\"pid\":1,\"request_id\":\"%s\",\"task_id\":null,\"attempt\":%d,"
           "\"final\":%s,\"method\":\"POST\",\"host\":\"h\",\"path\":\"/v1/x\",\"pool\":\"p<1>\","
           "\"status\":200,\"curl_code\":0,\"outcome\":\"%s\",\"decision\":\"done\","
           "\"reason\":\"ok\",\"queue_ms\":0,\"backoff_ms\":0,\"connect_ms\":1,\"ttfb_ms\":2,"
           "\"duration_ms\":12,\"bytes_sent\":10,\"bytes_received\":20,\"model\":\"%s\","
           "\"prompt_tokens\":5,\"completion_tokens\":5,\"total_tokens\":10,"
           "\"cached_tokens\":0,\"cost_usd\":%s,\"possibly_billed\":%s,\"body_digest\":null}",
           ts, rid, attempt, final ? "true" : "false", outcome, model, cost,
           pb ? "true" : "false");
  cr_assert_eq(cg_report_line(r, line, strlen(line)), CG_RBAD_NONE, "%s", line);
}

Test(page, crafted_log_gives_an_escaped_page_without_nonfinite_numbers) {
  struct cg_report *r = cg_report_new();
  char *s = NULL;

  cr_assert(r);
  r->series = cg_series_new();
  cr_assert(r->series);
  feed(r, "2026-11-30T10:00:00.000Z", "a", 1, 1, "gpt-4o", "ok", "1e308", 0);
  feed(r, "2026-11-30T10:00:01.000Z", "b", 1, 1, "gpt-4o", "ok", "1.7e308", 0); /* overflow */
  feed(r, "2026-11-30T10:00:02.000Z", "c", 1, 0, "x\\\"<script>'", "http_503", "null", 1);
  feed(r, "2026-11-30T10:00:03.000Z", "c", 2, 1, "x\\\"<script>'", "ok", "null", 0);
  cg_report_finish(r);
  CAPTURE(s, cr_assert_eq(cg_report_html(r, r->series, out), 0));
  assert_no_nonfinite(s);
  cr_assert_null(strstr(s, "<script"));
  cr_assert_not_null(strstr(s, "x&quot;&lt;script&gt;&#39;"));
  cr_assert_not_null(strstr(s, "p&lt;1&gt;"));
  cr_assert_not_null(strstr(s, "data-chart=\"outcomes\" data-group=\"total\""));
  cr_assert_not_null(strstr(s, "overflow"));
  cr_assert_not_null(strstr(s, "</html>"));
  free(s);
  cg_report_free(r);
}

Test(page, empty_log_gives_a_page) {
  struct cg_report *r = cg_report_new();
  char *s = NULL;

  r->series = cg_series_new();
  cg_report_finish(r);
  CAPTURE(s, cr_assert_eq(cg_report_html(r, r->series, out), 0));
  assert_no_nonfinite(s);
  cr_assert_not_null(strstr(s, "0 records from 0 lines"));
  free(s);
  cg_report_free(r);
}
