/* report-svg.h - markup helpers of `curlguard report --html`: escaped text, number
 * labels, axis scales, coordinates and line paths of inline SVG.
 *
 * Pure: they write into a buffer or a FILE and read nothing else.  Whatever the input
 * (NaN, infinities, zeros, 1e308, one point), what they write holds finite numbers only
 * (never "nan" or "inf"), and a string from the log is always escaped for every place it
 * may go in the page: HTML text, a quoted attribute value, SVG <text> and <title>.
 */
#ifndef CG_REPORT_SVG_H
#define CG_REPORT_SVG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A value axis from 0 to `max` in `ticks` steps of `step` (max = ticks x step, except
 * when rounding to nice steps would overflow: then max is the data's maximum).  Always
 * finite with max > 0, step > 0, ticks >= 1. */
struct cg_axis {
  double max;
  double step;
  int ticks;
};

/* A "nice" axis (steps of 1, 2 or 5 x 10^k) covering [0, `max`] with at most about
 * `max_ticks` steps (>= 1).  `integral`: counts, so a step is at least 1.  NaN, zero
 * and negative `max` give the axis of nothing (0 to 1); +inf is the largest double. */
void cg_axis_nice(double max, int max_ticks, int integral, struct cg_axis *a);

/* The pixel row of value `v` on axis `a` drawn from `top` (max) down to `top + height`
 * (0): clamped to that range; NaN counts as 0, +inf as max. */
double cg_axis_px(const struct cg_axis *a, double v, double top, double height);

/* A coordinate as SVG reads it ("%.1f"): NaN -> 0, clamped to +-1e6. */
void cg_svg_coord(char *buf, size_t cap, double v);

/* A compact axis or figure label: "0", "0.25", "1234", "12.5k", "3.2M", "1.8e+308";
 * "?" for NaN and the infinities.  At most 11 characters. */
void cg_svg_label(char *buf, size_t cap, double v);

/* `v` as the shortest decimal that reads back as the same double (%.15g to %.17g), for
 * data-v attributes that tests compare with `report --json`; "" for NaN and the
 * infinities (JSON null). */
void cg_svg_exact(char *buf, size_t cap, double v);

/* A line through the `n` values `v` as one <path class="`cls`" d="..."/>: value i at
 * x = x0 + (i + 0.5) x width / n, y from cg_axis_px.  A NaN value is a gap; a point
 * with no neighbour is drawn as a short horizontal stroke so it stays visible.  Writes
 * nothing when no value is finite (or n is 0).  `cls` is a literal of the page, never
 * a string from the log.  Returns the points drawn. */
size_t cg_svg_line(FILE *out, const double *v, size_t n, const struct cg_axis *a, double x0,
                   double width, double top, double height, const char *cls);

/* Write the log string `s` (valid UTF-8) as page text: the report's text escapes first
 * (controls, C1 controls and bidirectional overrides made visible, cg_text_escape), then
 * & < > " ' as character references, so that the same output is safe in HTML text, in a
 * quoted attribute and in SVG.  At most `max_chars` characters of the escaped text, then
 * "..." (U+2026).  NULL writes nothing. */
void cg_html_text(FILE *out, const char *s, size_t max_chars);

/* A bucket width for people: "1 s", "20 s", "2 min", "6 h", "1 day", "64 days". */
void cg_svg_width_label(char *buf, size_t cap, int64_t width_ms);

/* A time axis label of `ms` (UTC) for buckets `width_ms` wide over a span of `span_ms`:
 * "13:34:20" (widths under a minute), "13:34" or "11-30 13:34" (under a day; the date
 * when the span crosses days), "2026-11-30" (a day or more). */
void cg_svg_time_label(char *buf, size_t cap, int64_t ms, int64_t width_ms, int64_t span_ms);

#endif
