/* report-svg.c - markup helpers of `curlguard report --html` (see report-svg.h). */
#include "report-svg.h"

#include "report.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void cg_axis_nice(double max, int max_ticks, int integral, struct cg_axis *a) {
  double raw, mag, f, step, top;
  int ticks;

  if (max_ticks < 1)
    max_ticks = 1;
  if (isnan(max) || max <= 0) {
    a->max = 1;
    a->ticks = integral ? 1 : (max_ticks >= 4 ? 4 : max_ticks);
    a->step = 1.0 / a->ticks;
    return;
  }
  if (isinf(max))
    max = DBL_MAX;
  raw = max / max_ticks;
  if (integral && raw < 1)
    raw = 1;
  step = NAN;
  if (raw >= DBL_MIN) { /* log10 of a subnormal or 0 is no guide */
    mag = pow(10, floor(log10(raw)));
    f = raw / mag;
    step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
  }
  ticks = isfinite(step) && step > 0 ? (int) ceil(max / step - 1e-9) : 0;
  if (ticks < 1)
    ticks = 1;
  top = ticks * step;
  if (!isfinite(step) || step <= 0 || !isfinite(top) || top < max * (1 - 1e-12)) {
    /* Nice steps would overflow (near DBL_MAX) or underflow: plain steps of the data. */
    step = max / max_ticks;
    ticks = max_ticks;
    if (!(step > 0)) {
      step = max;
      ticks = 1;
    }
    top = max;
  }
  a->max = top;
  a->step = step;
  a->ticks = ticks;
}

double cg_axis_px(const struct cg_axis *a, double v, double top, double height) {
  double frac;

  if (isnan(v) || v <= 0)
    frac = 0;
  else if (!(a->max > 0) || !isfinite(a->max))
    frac = 0;
  else if (v >= a->max)
    frac = 1;
  else
    frac = v / a->max;
  if (!isfinite(top))
    top = 0;
  if (!isfinite(height))
    height = 0;
  return top + height * (1 - frac);
}

void cg_svg_coord(char *buf, size_t cap, double v) {
  if (isnan(v))
    v = 0;
  if (v > 1e6)
    v = 1e6;
  if (v < -1e6)
    v = -1e6;
  if (fabs(v) < 0.05)
    v = 0; /* never "-0.0" */
  snprintf(buf, cap, "%.1f", v);
}

void cg_svg_label(char *buf, size_t cap, double v) {
  static const struct { double at; const char *suffix; } unit[] = {
      {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e4, "k"}};
  double m = fabs(v);

  if (!isfinite(v)) {
    snprintf(buf, cap, "?");
    return;
  }
  if (v == 0) {
    snprintf(buf, cap, "0");
    return;
  }
  if (m >= 1e15 || m < 1e-4) {
    snprintf(buf, cap, "%.2g", v);
    return;
  }
  for (size_t i = 0; i < sizeof(unit) / sizeof(unit[0]); i++)
    if (m >= unit[i].at) {
      double div = unit[i].at == 1e4 ? 1e3 : unit[i].at;
      snprintf(buf, cap, "%.4g%s", v / div, unit[i].suffix);
      return;
    }
  snprintf(buf, cap, "%.4g", v);
}

void cg_svg_exact(char *buf, size_t cap, double v) {
  if (!isfinite(v)) {
    if (cap)
      buf[0] = '\0';
    return;
  }
  for (int digits = 15; digits <= 17; digits++) {
    snprintf(buf, cap, "%.*g", digits, v);
    if (strtod(buf, NULL) == v)
      break;
  }
}

size_t cg_svg_line(FILE *out, const double *v, size_t n, const struct cg_axis *a, double x0,
                   double width, double top, double height, const char *cls) {
  size_t drawn = 0;
  int open = 0;

  if (n == 0)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char x[32], y[32], xl[32], xr[32];
    double cx = x0 + ((double) i + 0.5) * width / (double) n;
    int alone;
    if (!isfinite(v[i]) && !(isinf(v[i]) && v[i] > 0)) {
      open = 0; /* NaN (or -inf): a gap */
      continue;
    }
    if (!drawn)
      fprintf(out, "<path class=\"%s\" d=\"", cls);
    cg_svg_coord(x, sizeof(x), cx);
    cg_svg_coord(y, sizeof(y), cg_axis_px(a, v[i], top, height));
    alone = !open && (i + 1 == n || isnan(v[i + 1]) || (isinf(v[i + 1]) && v[i + 1] < 0));
    if (alone) {
      cg_svg_coord(xl, sizeof(xl), cx - 3);
      cg_svg_coord(xr, sizeof(xr), cx + 3);
      fprintf(out, "%sM%s %sL%s %s", drawn ? " " : "", xl, y, xr, y);
    } else {
      fprintf(out, "%s%s%s %s", drawn ? " " : "", open ? "L" : "M", x, y);
      open = 1;
    }
    drawn++;
  }
  if (drawn)
    fputs("\"/>", out);
  return drawn;
}

void cg_html_text(FILE *out, const char *s, size_t max_chars) {
  size_t len, chars = 0;
  char *vis;
  const unsigned char *u;

  if (!s)
    return;
  len = strlen(s);
  vis = malloc(4 * len + 16); /* one byte escapes to at most 4 ("\x01") */
  if (!vis) {
    fputs("?", out);
    return;
  }
  cg_text_escape(vis, 4 * len + 16, s);
  /* Bounded by the escaped length: every step consumes at least one byte. */
  for (u = (const unsigned char *) vis; *u; chars++) {
    size_t n = *u < 0x80 ? 1 : *u < 0xE0 ? 2 : *u < 0xF0 ? 3 : 4;
    if (chars == max_chars) {
      fputs("\xE2\x80\xA6", out);
      break;
    }
    switch (*u) {
    case '&': fputs("&amp;", out); break;
    case '<': fputs("&lt;", out); break;
    case '>': fputs("&gt;", out); break;
    case '"': fputs("&quot;", out); break;
    case '\'': fputs("&#39;", out); break;
    default:
      for (size_t k = 0; k < n; k++) {
        if (!u[k]) { /* not reached: cg_text_escape writes whole characters */
          n = k;
          break;
        }
        fputc(u[k], out);
      }
    }
    u += n ? n : 1;
  }
  free(vis);
}

void cg_svg_width_label(char *buf, size_t cap, int64_t w) {
  if (w < 60000)
    snprintf(buf, cap, "%lld s", (long long) (w / 1000));
  else if (w < 3600000)
    snprintf(buf, cap, "%lld min", (long long) (w / 60000));
  else if (w < 86400000)
    snprintf(buf, cap, "%lld h", (long long) (w / 3600000));
  else
    snprintf(buf, cap, "%lld day%s", (long long) (w / 86400000), w == 86400000 ? "" : "s");
}

void cg_svg_time_label(char *buf, size_t cap, int64_t ms, int64_t width_ms, int64_t span_ms) {
  char ts[40];

  /* "2026-11-30T13:34:19.007Z": date at 0, month-day at 5, time at 11. */
  cg_rfc3339_format(ms, ts, sizeof(ts));
  if (strlen(ts) < 19) {
    snprintf(buf, cap, "%s", ts);
    return;
  }
  if (width_ms >= 86400000)
    snprintf(buf, cap, "%.10s", ts);
  else if (width_ms < 60000 && span_ms < 86400000)
    snprintf(buf, cap, "%.8s", ts + 11);
  else if (span_ms < 86400000)
    snprintf(buf, cap, "%.5s", ts + 11);
  else
    snprintf(buf, cap, "%.5s %.5s", ts + 5, ts + 11);
}
