/* report-html.c - `curlguard report --html`: one self-contained page with inline SVG
 * charts (see report-html.h). */
#include "report-html.h"

#include "report-svg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CG_NAME_CHARS 120   /* pool and model names shown, characters */
#define CG_MSG_CHARS 600    /* alert messages shown, characters */
#define CG_HTML_ALERTS 200  /* alerts listed on the page */

/* Chart geometry (SVG user units = CSS pixels). */
#define CW 580.0            /* chart width */
#define CH 230.0            /* chart height */
#define PL 58.0             /* plot left */
#define PR 14.0             /* right margin */
#define PT 14.0             /* plot top */
#define PB 40.0             /* below the plot: time labels */
#define PW (CW - PL - PR)   /* plot width */
#define PH (CH - PT - PB)   /* plot height */

static const char cg__css[] =
    "body{font-family:'DejaVu Sans',Verdana,sans-serif;margin:24px;color:#1d2430;"
    "background:#f6f7f9;font-size:14px}"
    "h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px}"
    "h3{font-size:14px;margin:0 0 6px;color:#44506a}"
    ".sub{color:#5b6577;margin:2px 0}"
    ".cards{display:flex;flex-wrap:wrap;gap:10px;margin:16px 0}"
    ".card{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:10px 14px;"
    "min-width:120px}.card b{display:block;font-size:20px;margin-top:2px}"
    ".card.warn b{color:#b3261e}.card span{color:#5b6577;font-size:12px}"
    ".grid{display:flex;flex-wrap:wrap;gap:14px}"
    ".panel{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:10px}"
    "table{border-collapse:collapse;background:#fff;border:1px solid #dde1e8}"
    "th,td{padding:4px 8px;border-bottom:1px solid #e8ebf0;text-align:right;"
    "white-space:nowrap}th{background:#eef1f5;font-size:12px}"
    "td.name,th.name{text-align:left;white-space:normal;word-break:break-all;max-width:260px}"
    "tr.total td{font-weight:bold;background:#f3f5f8}"
    ".null{color:#8a93a3;font-style:italic}"
    "ul.legend{list-style:none;padding:0;margin:4px 0 0;font-size:12px;max-width:580px}"
    "ul.legend li{display:inline-block;margin-right:12px;word-break:break-all}"
    ".sw{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}"
    "ul.alerts li{margin:4px 0}.kind{font-family:'DejaVu Sans Mono',monospace;"
    "background:#fde7e4;color:#8c1d18;padding:1px 5px;border-radius:3px;margin-right:6px}"
    "svg text{font-family:'DejaVu Sans',Verdana,sans-serif;font-size:11px;fill:#5b6577}"
    "svg .grid{stroke:#e6e9ee;stroke-width:1}svg .axis{stroke:#9aa3b2;stroke-width:1}"
    "svg .line{fill:none;stroke:#d1495b;stroke-width:2}svg .pt{fill:#d1495b}"
    "svg .bar{fill:#3f72af}svg .tok{fill:#7a5195}svg .lat{fill:#2a9d8f}"
    "svg .empty{font-size:13px}"
    "footer{margin-top:32px;color:#8a93a3;font-size:12px}";

/* Outcome colours: fixed for the common names, then a palette by id. */
static const char *cg__colour(const char *name, size_t id) {
  static const struct { const char *name, *colour; } known[] = {
      {"ok", "#2e9d5b"},          {"http_429", "#f0a202"},     {"http_503", "#d1495b"},
      {"http_500", "#7b2d8e"},    {"http_502", "#e76f51"},     {"http_504", "#9c6644"},
      {"http_408", "#f4a261"},    {"connect_refused", "#264653"},
      {"connect_timeout", "#3d5a80"}, {"first_byte_timeout", "#5e548e"},
      {"read_timeout", "#9f86c0"}, {"reset_after_send", "#b5838d"},
      {"partial_response", "#6d597a"}, {"circuit_open", "#22223b"},
      {"local_rate_limited", "#e9c46a"}, {"retry_budget_exhausted", "#ff7b00"},
      {"deadline", "#540b0e"}};
  static const char *const palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1",
                                        "#76b7b2", "#edc948", "#ff9da7", "#9c755f",
                                        "#bab0ac", "#e15759", "#8cd17d", "#499894"};
  for (size_t i = 0; name && i < sizeof(known) / sizeof(known[0]); i++)
    if (strcmp(name, known[i].name) == 0)
      return known[i].colour;
  return palette[id % (sizeof(palette) / sizeof(palette[0]))];
}

static const char *cg__outcome_name(const struct cg_report *r, size_t id) {
  return id < r->noutcomes ? r->outcome_name[id] : NULL; /* NULL: the "other" slot */
}

/* ---- figures ---- */

static void cg__cost_text(char *buf, size_t cap, double usd, int none) {
  if (none)
    snprintf(buf, cap, "-");
  else if (isnan(usd))
    snprintf(buf, cap, "?");
  else if (!isfinite(usd))
    snprintf(buf, cap, "overflow");
  else
    snprintf(buf, cap, "%.6g", usd);
}

/* <td data-k="key" data-v="exact">text</td> */
static void cg__cell(FILE *out, const char *key, double v, const char *text) {
  char exact[40];
  cg_svg_exact(exact, sizeof(exact), v);
  fprintf(out, "<td data-k=\"%s\" data-v=\"%s\">%s</td>", key, exact, text);
}

static void cg__count(FILE *out, const char *key, uint64_t n) {
  char text[32];
  snprintf(text, sizeof(text), "%llu", (unsigned long long) n);
  cg__cell(out, key, (double) n, text);
}

static void cg__cost_cell(FILE *out, const char *key, double usd, int none) {
  char text[40];
  cg__cost_text(text, sizeof(text), usd, none);
  cg__cell(out, key, usd, text); /* the sum (0 when nothing was priced), as --json has it */
}

static double cg__ratio(uint64_t a, uint64_t b) {
  return b ? (double) a / (double) b : 0;
}

/* A log string, or the marker for null, escaped. */
static void cg__name(FILE *out, const char *s, const char *marker) {
  if (s)
    cg_html_text(out, s, CG_NAME_CHARS);
  else
    fprintf(out, "<span class=\"null\">%s</span>", marker);
}

static void cg__group_name(FILE *out, const struct cg_rgroup *g) {
  if (g->other) {
    fputs("<span class=\"null\">(other pools and models)</span>", out);
    return;
  }
  cg__name(out, g->pool, "(no pool)");
  fputs(" &middot; ", out);
  cg__name(out, g->model, "(no model)");
}

static int64_t cg__pct(const struct cg_hist *h, double p) {
  return h->count ? cg_hist_percentile(h, p) : -1;
}

static void cg__ms_cell(FILE *out, const char *key, int64_t ms) {
  char text[32];
  if (ms < 0) {
    cg__cell(out, key, NAN, "-");
    return;
  }
  snprintf(text, sizeof(text), "%lld", (long long) ms);
  cg__cell(out, key, (double) ms, text);
}

/* ---- charts ---- */

struct cg__chart {
  const struct cg_report *r;
  const struct cg_series *s;
  const struct cg_sbucket *b;   /* the series drawn */
  size_t first, n;              /* the buckets shown */
  const char *group;            /* "total" or the group index, for data-group */
};

static int64_t cg__bucket_ms(const struct cg__chart *c, size_t i) {
  return c->s->origin_ms + (int64_t) (c->first + i) * c->s->width_ms;
}

static void cg__svg_open(FILE *out, const struct cg__chart *c, const char *kind,
                         const char *label, double height) {
  fprintf(out, "<svg class=\"chart\" data-chart=\"%s\" data-group=\"%s\" ", kind, c->group);
  if (c->s) /* a chart over time: the width of its bars */
    fprintf(out, "data-width=\"%lld\" ", (long long) c->s->width_ms);
  fprintf(out, "xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"%s\"><title>%s</title>",
          CW, height, CW, height, label, label);
}

/* Grid lines and labels of the value axis; `percent`: values are ratios. */
static void cg__yaxis(FILE *out, const struct cg_axis *a, int percent) {
  for (int k = 0; k <= a->ticks; k++) {
    double v = k == a->ticks ? a->max : k * a->step;
    char y[32], ty[32], label[48];
    cg_svg_coord(y, sizeof(y), cg_axis_px(a, v, PT, PH));
    cg_svg_coord(ty, sizeof(ty), cg_axis_px(a, v, PT, PH) + 4);
    cg_svg_label(label, sizeof(label), percent ? v * 100 : v);
    fprintf(out, "<line class=\"%s\" x1=\"%.0f\" x2=\"%.0f\" y1=\"%s\" y2=\"%s\"/>"
            "<text x=\"%.0f\" y=\"%s\" text-anchor=\"end\">%s%s</text>",
            k ? "grid" : "axis", PL, PL + PW, y, y, PL - 6, ty, label, percent ? "%" : "");
  }
}

/* One time label: the start of bucket `at` (`c->n`: the end of the last), at `x`. */
static void cg__xlabel(FILE *out, const struct cg__chart *c, size_t at, double x,
                       const char *anchor) {
  char label[40], px[32];
  cg_svg_time_label(label, sizeof(label), cg__bucket_ms(c, at), c->s->width_ms,
                    (int64_t) c->n * c->s->width_ms);
  cg_svg_coord(px, sizeof(px), x);
  fprintf(out, "<text x=\"%s\" y=\"%.0f\" text-anchor=\"%s\">%s</text>", px, PT + PH + 16,
          anchor, label);
}

/* Time labels of the first, middle and last bucket: the first starts at the plot's left
 * edge and the last ends at its right edge, so neither runs out of the chart; one bucket
 * has one label, centred. */
static void cg__xaxis(FILE *out, const struct cg__chart *c) {
  char w[32];

  if (c->n == 1) {
    cg__xlabel(out, c, 0, PL + PW / 2, "middle");
  } else {
    cg__xlabel(out, c, 0, PL, "start");
    if (c->n >= 5) /* else the three would overlap */
      cg__xlabel(out, c, c->n / 2, PL + ((double) (c->n / 2) + 0.5) * PW / (double) c->n,
                 "middle");
    cg__xlabel(out, c, c->n, PL + PW, "end"); /* the end of the last bucket */
  }
  cg_svg_width_label(w, sizeof(w), c->s->width_ms);
  fprintf(out, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">UTC, %s per bar</text>",
          PL + PW, PT + PH + 32, w);
}

/* One bar: bucket i from value `lo` to `hi` on axis `a`. */
static void cg__bar(FILE *out, const struct cg__chart *c, size_t i, const struct cg_axis *a,
                    double lo, double hi, const char *cls, const char *fill) {
  char x[32], y[32], w[32], h[32];
  double slot = PW / (double) c->n;
  double ylo = cg_axis_px(a, lo, PT, PH), yhi = cg_axis_px(a, hi, PT, PH);
  double bw = slot * 0.8 < 0.5 ? 0.5 : slot * 0.8;

  cg_svg_coord(x, sizeof(x), PL + (double) i * slot + (slot - bw) / 2);
  cg_svg_coord(y, sizeof(y), yhi);
  cg_svg_coord(w, sizeof(w), bw);
  cg_svg_coord(h, sizeof(h), ylo - yhi < 0.5 ? 0.5 : ylo - yhi); /* a non-zero value shows */
  fprintf(out, "<rect class=\"%s\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"", cls, x, y, w, h);
  if (fill)
    fprintf(out, " fill=\"%s\"", fill);
}

static void cg__bar_title(FILE *out, const struct cg__chart *c, size_t i) {
  char ts[40];
  cg_rfc3339_format(cg__bucket_ms(c, i), ts, sizeof(ts));
  fprintf(out, "<title>%s", ts);
}

static void cg__chart_outcomes(FILE *out, const struct cg__chart *c, const struct cg_rstats *st) {
  double top = 0;
  struct cg_axis a;

  for (size_t i = 0; i < c->n; i++)
    if ((double) c->b[c->first + i].attempts > top)
      top = (double) c->b[c->first + i].attempts;
  cg_axis_nice(top, 5, 1, &a);
  fputs("<div class=\"panel\"><h3>Attempts by outcome</h3>", out);
  cg__svg_open(out, c, "outcomes", "attempts by outcome over time", CH);
  cg__yaxis(out, &a, 0);
  for (size_t i = 0; i < c->n; i++) {
    const struct cg_sbucket *b = &c->b[c->first + i];
    double cum = 0;
    for (size_t k = 0; k <= CG_REPORT_MAX_OUTCOMES; k++) {
      const char *name = cg__outcome_name(c->r, k);
      char t[40];
      if (!b->outcome[k])
        continue;
      cg__bar(out, c, i, &a, cum, cum + (double) b->outcome[k], "o", cg__colour(name, k));
      snprintf(t, sizeof(t), "%lld", (long long) cg__bucket_ms(c, i));
      fprintf(out, " data-t=\"%s\" data-outcome=\"", t);
      if (name)
        cg_html_text(out, name, (size_t) -1);
      fprintf(out, "\" data-other=\"%d\" data-v=\"%llu\">", name == NULL,
              (unsigned long long) b->outcome[k]);
      cg__bar_title(out, c, i);
      fputs(" ", out);
      if (name)
        cg_html_text(out, name, CG_NAME_CHARS);
      else
        fputs("(other outcomes)", out);
      fprintf(out, ": %llu</title></rect>", (unsigned long long) b->outcome[k]);
      cum += (double) b->outcome[k];
    }
  }
  cg__xaxis(out, c);
  fputs("</svg><ul class=\"legend\">", out);
  for (size_t k = 0; k <= CG_REPORT_MAX_OUTCOMES; k++) {
    const char *name = cg__outcome_name(c->r, k);
    if (!st->outcome[k])
      continue;
    fprintf(out, "<li><span class=\"sw\" style=\"background:%s\"></span>", cg__colour(name, k));
    if (name)
      cg_html_text(out, name, CG_NAME_CHARS);
    else
      fputs("(other outcomes)", out);
    fprintf(out, " %llu</li>", (unsigned long long) st->outcome[k]);
  }
  fputs("</ul></div>", out);
}

/* Bars of one quantity per bucket: cost ("cost") or total tokens ("tokens"). */
static void cg__chart_amount(FILE *out, const struct cg__chart *c, int cost) {
  double top = 0;
  struct cg_axis a;

  for (size_t i = 0; i < c->n; i++) {
    const struct cg_sbucket *b = &c->b[c->first + i];
    double v = cost ? b->cost_usd : (double) b->total_tokens;
    if (v > top)
      top = v;
  }
  cg_axis_nice(top, 5, !cost, &a);
  fprintf(out, "<div class=\"panel\"><h3>%s</h3>", cost ? "Cost (USD)" : "Tokens");
  cg__svg_open(out, c, cost ? "cost" : "tokens", cost ? "cost over time" : "tokens over time",
               CH);
  cg__yaxis(out, &a, 0);
  for (size_t i = 0; i < c->n; i++) {
    const struct cg_sbucket *b = &c->b[c->first + i];
    double v = cost ? b->cost_usd : (double) b->total_tokens;
    char exact[40], label[48];
    if (cost ? b->priced == 0 : v == 0)
      continue;
    cg__bar(out, c, i, &a, 0, v, cost ? "bar" : "tok", NULL);
    cg_svg_exact(exact, sizeof(exact), v);
    cg_svg_label(label, sizeof(label), v);
    fprintf(out, " data-t=\"%lld\" data-v=\"%s\">", (long long) cg__bucket_ms(c, i), exact);
    cg__bar_title(out, c, i);
    fprintf(out, " %s%s</title></rect>", label, cost ? " USD" : " tokens");
  }
  cg__xaxis(out, c);
  fputs("</svg></div>", out);
}

static void cg__chart_retry(FILE *out, const struct cg__chart *c) {
  double *v = malloc(c->n * sizeof(*v)), top = 0;
  struct cg_axis a;

  if (!v)
    return;
  for (size_t i = 0; i < c->n; i++) {
    const struct cg_sbucket *b = &c->b[c->first + i];
    v[i] = b->attempts ? (double) b->retries / (double) b->attempts : NAN;
    if (b->attempts && v[i] > top)
      top = v[i];
  }
  cg_axis_nice(top > 0 ? top : 0.1, 5, 0, &a);
  fputs("<div class=\"panel\"><h3>Retry ratio (retries / attempts)</h3>", out);
  cg__svg_open(out, c, "retry", "retry ratio over time", CH);
  cg__yaxis(out, &a, 1);
  cg_svg_line(out, v, c->n, &a, PL, PW, PT, PH, "line");
  for (size_t i = 0; i < c->n; i++) {
    const struct cg_sbucket *b = &c->b[c->first + i];
    char x[32], y[32], exact[40];
    if (!b->attempts)
      continue;
    cg_svg_coord(x, sizeof(x), PL + ((double) i + 0.5) * PW / (double) c->n);
    cg_svg_coord(y, sizeof(y), cg_axis_px(&a, v[i], PT, PH));
    cg_svg_exact(exact, sizeof(exact), v[i]);
    fprintf(out, "<circle class=\"pt\" cx=\"%s\" cy=\"%s\" r=\"2.5\" data-t=\"%lld\" "
            "data-v=\"%s\" data-retries=\"%llu\" data-attempts=\"%llu\">", x, y,
            (long long) cg__bucket_ms(c, i), exact, (unsigned long long) b->retries,
            (unsigned long long) b->attempts);
    cg__bar_title(out, c, i);
    fprintf(out, " %.1f %% (%llu of %llu attempts)</title></circle>", 100 * v[i],
            (unsigned long long) b->retries, (unsigned long long) b->attempts);
  }
  cg__xaxis(out, c);
  fputs("</svg></div>", out);
  free(v);
}

/* Horizontal bars of the latency percentiles of `st` (from its histogram). */
static void cg__chart_latency(FILE *out, const struct cg_report *r, const struct cg_rstats *st,
                              const char *group) {
  static const struct { const char *name; double p; } pct[] = {
      {"p50", 50}, {"p90", 90}, {"p95", 95}, {"p99", 99}};
  const double h = 40 + 30 * 4;
  struct cg_axis a;
  struct cg__chart c = {r, NULL, NULL, 0, 0, group};
  int64_t top = cg__pct(st->latency, 99);

  fputs("<div class=\"panel\"><h3>Latency per attempt (ms)</h3>", out);
  cg__svg_open(out, &c, "latency", "latency percentiles in milliseconds", h);
  if (st->latency->count == 0) {
    fprintf(out, "<text class=\"empty\" x=\"%.0f\" y=\"80\" text-anchor=\"middle\">no durations "
          "in the log</text></svg></div>", CW / 2);
    return;
  }
  cg_axis_nice((double) top, 5, 1, &a);
  for (int k = 0; k <= a.ticks; k++) {
    double v = k == a.ticks ? a.max : k * a.step;
    char x[32], label[48];
    /* The value axis runs left to right: the pixel row function on a flipped range. */
    cg_svg_coord(x, sizeof(x), PL + PW - cg_axis_px(&a, v, 0, PW));
    cg_svg_label(label, sizeof(label), v);
    fprintf(out, "<line class=\"%s\" x1=\"%s\" x2=\"%s\" y1=\"10\" y2=\"%.0f\"/>"
            "<text x=\"%s\" y=\"%.0f\" text-anchor=\"middle\">%s</text>", k ? "grid" : "axis",
            x, x, h - 24, x, h - 8, label);
  }
  for (size_t i = 0; i < sizeof(pct) / sizeof(pct[0]); i++) {
    int64_t ms = cg__pct(st->latency, pct[i].p);
    char w[32], lx[32];
    double px = PW - cg_axis_px(&a, (double) ms, 0, PW);
    cg_svg_coord(w, sizeof(w), px < 1 ? 1 : px);
    cg_svg_coord(lx, sizeof(lx), PL + (px < 1 ? 1 : px) + 4);
    fprintf(out, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%s</text>"
            "<rect class=\"lat\" x=\"%.0f\" y=\"%.0f\" width=\"%s\" height=\"18\" "
            "data-p=\"%s\" data-v=\"%lld\"><title>%s %lld ms</title></rect>"
            "<text x=\"%s\" y=\"%.0f\">%lld ms</text>", PL - 6, 24.0 + 30 * (double) i,
            pct[i].name, PL, 10.0 + 30 * (double) i, w, pct[i].name, (long long) ms,
            pct[i].name, (long long) ms, lx, 24.0 + 30 * (double) i, (long long) ms);
  }
  fputs("</svg></div>", out);
}

/* The four charts over time of one series (or a note when there is none). */
static void cg__charts(FILE *out, const struct cg_report *r, const struct cg_series *s,
                       const struct cg_sbucket *b, const struct cg_rstats *st, const char *group) {
  size_t first, last;
  struct cg__chart c;

  fputs("<div class=\"grid\">", out);
  if (s && b && cg_series_span(s, &first, &last)) {
    c.r = r;
    c.s = s;
    c.b = b;
    c.first = first;
    c.n = last - first + 1;
    c.group = group;
    cg__chart_outcomes(out, &c, st);
    cg__chart_retry(out, &c);
    cg__chart_amount(out, &c, 1);
    cg__chart_amount(out, &c, 0);
  } else if (st->attempts) {
    fprintf(out, "<p class=\"sub\">No charts over time for this group: the page charts the "
            "first %d groups only.</p>", CG_SERIES_MAX_GROUPS);
  }
  cg__chart_latency(out, r, st, group);
  fputs("</div>", out);
}

/* ---- sections ---- */

static void cg__card(FILE *out, const char *title, const char *value, int warn) {
  fprintf(out, "<div class=\"card%s\"><span>%s</span><b>%s</b></div>", warn ? " warn" : "",
          title, value);
}

static void cg__cards(FILE *out, const struct cg_report *r) {
  const struct cg_rstats *t = &r->total;
  char buf[64];
  double risk;
  uint64_t unest;

  cg_report_risk(r, -1, &risk, &unest);
  fputs("<section class=\"cards\">", out);
  snprintf(buf, sizeof(buf), "%llu", (unsigned long long) t->calls);
  cg__card(out, "calls", buf, 0);
  snprintf(buf, sizeof(buf), "%llu", (unsigned long long) t->attempts);
  cg__card(out, "attempts", buf, 0);
  snprintf(buf, sizeof(buf), "%.2f %%", 100 * cg__ratio(t->retries, t->attempts));
  cg__card(out, "retry ratio", buf, t->retries * 20 > t->attempts);
  cg__cost_text(buf, sizeof(buf), t->cost_usd, t->priced == 0);
  cg__card(out, "cost (USD)", buf, 0);
  snprintf(buf, sizeof(buf), "%llu", (unsigned long long) t->total_tokens);
  cg__card(out, "tokens", buf, 0);
  cg__cost_text(buf, sizeof(buf), risk, 0);
  cg__card(out, "cost at risk (USD)", buf, t->at_risk_attempts > 0);
  snprintf(buf, sizeof(buf), "%llu", (unsigned long long) t->possibly_billed);
  cg__card(out, "possibly billed attempts", buf, t->possibly_billed > 0);
  snprintf(buf, sizeof(buf), "%llu", (unsigned long long) t->dup_extra_calls);
  cg__card(out, "duplicate charges (extra calls)", buf, t->dup_extra_calls > 0);
  snprintf(buf, sizeof(buf), "%llu", (unsigned long long) r->nalerts);
  cg__card(out, "alerts", buf, r->nalerts > 0);
  fputs("</section>", out);
}

static void cg__group_row(FILE *out, const struct cg_report *r, long gi) {
  const struct cg_rstats *s = gi >= 0 ? &r->group[gi].s : &r->total;
  char text[48];
  double risk;
  uint64_t unest;

  cg_report_risk(r, gi, &risk, &unest);
  if (gi >= 0) {
    const struct cg_rgroup *g = &r->group[gi];
    fprintf(out, "<tr data-group=\"%ld\"><td class=\"name\"><a href=\"#g%ld\">", gi, gi);
    if (g->other)
      fputs("<span class=\"null\">(other)</span></a></td><td class=\"name\">"
            "<span class=\"null\">(other)</span>", out);
    else {
      cg__name(out, g->pool, "(none)");
      fputs("</a></td><td class=\"name\">", out);
      cg__name(out, g->model, "(none)");
    }
    fputs("</td>", out);
  } else {
    fputs("<tr class=\"total\" data-group=\"total\"><td class=\"name\">TOTAL</td>"
          "<td class=\"name\"></td>", out);
  }
  cg__count(out, "calls", s->calls);
  cg__count(out, "unfinished_calls", s->unfinished);
  cg__count(out, "attempts", s->attempts);
  cg__count(out, "retries", s->retries);
  snprintf(text, sizeof(text), "%.2f %%", 100 * cg__ratio(s->retries, s->attempts));
  cg__cell(out, "retry_ratio", cg__ratio(s->retries, s->attempts), text);
  cg__count(out, "tokens.total", s->total_tokens);
  cg__cost_cell(out, "cost_usd", s->cost_usd, s->priced == 0);
  cg__count(out, "possibly_billed", s->possibly_billed);
  cg__cost_cell(out, "cost_at_risk_usd", risk, 0);
  cg__ms_cell(out, "latency_ms.p50", cg__pct(s->latency, 50));
  cg__ms_cell(out, "latency_ms.p90", cg__pct(s->latency, 90));
  cg__ms_cell(out, "latency_ms.p95", cg__pct(s->latency, 95));
  cg__ms_cell(out, "latency_ms.p99", cg__pct(s->latency, 99));
  fputs("</tr>", out);
}

static void cg__groups_table(FILE *out, const struct cg_report *r) {
  fputs("<h2>Pools and models</h2><table class=\"groups\"><tr><th class=\"name\">pool</th>"
        "<th class=\"name\">model</th><th>calls</th><th>unfinished</th><th>attempts</th>"
        "<th>retries</th><th>retry ratio</th><th>tokens</th><th>cost USD</th>"
        "<th>possibly billed</th><th>at risk USD</th><th>p50 ms</th><th>p90 ms</th>"
        "<th>p95 ms</th><th>p99 ms</th></tr>", out);
  for (size_t i = 0; i < r->ngroups; i++)
    cg__group_row(out, r, (long) i);
  cg__group_row(out, r, -1);
  fputs("</table>", out);
}

static void cg__risk_row(FILE *out, const struct cg_report *r, long gi) {
  const struct cg_rstats *s = gi >= 0 ? &r->group[gi].s : &r->total;
  double risk;
  uint64_t unest;

  cg_report_risk(r, gi, &risk, &unest);
  if (gi >= 0) {
    fprintf(out, "<tr data-group=\"%ld\"><td class=\"name\">", gi);
    cg__group_name(out, &r->group[gi]);
    fputs("</td>", out);
  } else {
    fputs("<tr class=\"total\" data-group=\"total\"><td class=\"name\">TOTAL</td>", out);
  }
  cg__count(out, "billed_attempts", s->billed);
  cg__count(out, "possibly_billed", s->possibly_billed);
  cg__count(out, "unmetered_attempts", s->unmetered);
  cg__count(out, "at_risk_attempts", s->at_risk_attempts);
  cg__cost_cell(out, "cost_at_risk_usd", risk, 0);
  cg__count(out, "at_risk_unestimated", unest);
  cg__count(out, "billed_retries", s->billed_retries);
  cg__count(out, "duplicate_bodies.digests", s->dup_digests);
  cg__count(out, "duplicate_bodies.extra_calls", s->dup_extra_calls);
  fputs("</tr>", out);
}

static void cg__risk_section(FILE *out, const struct cg_report *r) {
  fputs("<h2>Money at risk</h2><p class=\"sub\">Possibly billed: failures after the request "
        "was sent (the provider may have charged). At risk: possibly billed or unmetered "
        "attempts without a cost, estimated from the group's mean cost per priced attempt "
        "(&quot;?&quot;: no priced attempt to estimate from). Duplicate charges: the same "
        "request body billed in more than one call.</p>"
        "<table class=\"risk\"><tr><th class=\"name\">pool &middot; model</th>"
        "<th>billed</th><th>possibly billed</th><th>unmetered</th><th>at risk</th>"
        "<th>at risk USD</th><th>not estimated</th><th>billed retries</th>"
        "<th>duplicate bodies</th><th>extra calls</th></tr>", out);
  for (size_t i = 0; i < r->ngroups; i++)
    cg__risk_row(out, r, (long) i);
  cg__risk_row(out, r, -1);
  fputs("</table>", out);
  fputs("<p class=\"sub\">Unpriced models: ", out);
  {
    const char *sep = "";
    for (size_t i = 0; i < r->ngroups; i++)
      if (r->group[i].s.unpriced && r->group[i].model) {
        fputs(sep, out);
        cg__group_name(out, &r->group[i]);
        fprintf(out, " (%llu attempts)", (unsigned long long) r->group[i].s.unpriced);
        sep = ", ";
      }
    fputs(*sep ? "" : "none", out);
  }
  fprintf(out, ". Tasks with more than one billed call: %llu",
          (unsigned long long) r->tasks_multi);
  for (size_t i = 0; i < r->ntask_examples; i++) {
    fputs(i ? ", " : " (", out);
    cg_html_text(out, r->task_example[i], CG_NAME_CHARS);
  }
  fputs(r->ntask_examples ? (r->tasks_multi > r->ntask_examples ? ", ...)." : ").") : ".", out);
  fputs("</p>", out);
}

static void cg__alerts(FILE *out, const struct cg_report *r) {
  size_t shown = 0;

  fprintf(out, "<h2>Alerts (%llu)</h2>", (unsigned long long) r->nalerts);
  if (!r->nalerts) {
    fputs("<p class=\"sub\">None.</p>", out);
    return;
  }
  fputs("<ul class=\"alerts\">", out);
  for (cJSON *al = r->alerts->child; al && shown < CG_HTML_ALERTS; al = al->next, shown++) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(al, "message");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(al, "kind");
    const char *kind = cJSON_IsString(k) ? k->valuestring : "alert";
    fputs("<li data-kind=\"", out);
    cg_html_text(out, kind, CG_NAME_CHARS);
    fputs("\"><span class=\"kind\">", out);
    cg_html_text(out, kind, CG_NAME_CHARS);
    fputs("</span>", out);
    if (cJSON_IsString(m))
      cg_html_text(out, m->valuestring, CG_MSG_CHARS);
    fputs("</li>", out);
  }
  fputs("</ul>", out);
  if (r->nalerts > shown)
    fprintf(out, "<p class=\"sub\">... and %llu more (curlguard report --json lists %llu).</p>",
            (unsigned long long) (r->nalerts - shown),
            (unsigned long long) (r->nalerts - r->alerts_dropped));
}

static void cg__header(FILE *out, const struct cg_report *r, const struct cg_series *s) {
  char a[40], b[40], w[32];
  uint64_t bad = 0;

  for (int i = 1; i < CG_RBAD_COUNT; i++)
    bad += r->malformed[i];
  fputs("<header><h1>curlguard report</h1><p class=\"sub\">", out);
  fprintf(out, "%llu records from %llu lines", (unsigned long long) r->records,
          (unsigned long long) r->lines);
  if (r->records)
    fprintf(out, ", %s to %s", cg_rfc3339_format(r->ts_min, a, sizeof(a)),
            cg_rfc3339_format(r->ts_max, b, sizeof(b)));
  fprintf(out, "; %llu malformed lines skipped", (unsigned long long) bad);
  if (bad && r->first_bad) {
    fputs(" (first at ", out);
    cg_html_text(out, r->first_bad, CG_NAME_CHARS);
    fputs(")", out);
  }
  fputs(".</p>", out);
  if (s && s->started) {
    cg_svg_width_label(w, sizeof(w), s->width_ms);
    fprintf(out, "<p class=\"sub\">Charts: one bar per %s (UTC). One attempt is one record; a "
            "retry is an attempt after the first of its call.</p>", w);
  }
  if (s && s->oom)
    fputs("<p class=\"sub\">Note: out of memory while charting; some records are missing "
          "from the charts (not from the tables).</p>", out);
  if (r->groups_capped)
    fprintf(out, "<p class=\"sub\">Note: more than %d pool/model pairs; the rest are under "
            "(other).</p>", CG_REPORT_MAX_GROUPS);
  fputs("</header>", out);
}

int cg_report_html(const struct cg_report *r, const struct cg_series *s, FILE *out) {
  fprintf(out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
          "<title>curlguard report</title><style>%s</style></head><body>\n", cg__css);
  cg__header(out, r, s);
  cg__cards(out, r);
  if (r->records) {
    fputs("<section><h2>All pools and models</h2>", out);
    cg__charts(out, r, s, s ? s->total : NULL, &r->total, "total");
    fputs("</section>\n", out);
  }
  fputs("<section>", out);
  cg__groups_table(out, r);
  fputs("</section>\n<section>", out);
  cg__risk_section(out, r);
  fputs("</section>\n<section>", out);
  cg__alerts(out, r);
  fputs("</section>\n", out);
  for (size_t i = 0; i < r->ngroups; i++) {
    char group[24];
    snprintf(group, sizeof(group), "%zu", i);
    fprintf(out, "<section id=\"g%zu\" data-group=\"%zu\"><h2>", i, i);
    cg__group_name(out, &r->group[i]);
    fputs("</h2>", out);
    if (r->group[i].nvariants > 1 ||
        (r->group[i].nvariants == 1 && strcmp(r->group[i].variant[0], r->group[i].model))) {
      fputs("<p class=\"sub\">models: ", out);
      for (size_t k = 0; k < r->group[i].nvariants; k++) {
        fputs(k ? ", " : "", out);
        cg_html_text(out, r->group[i].variant[k], CG_NAME_CHARS);
      }
      fputs(r->group[i].variants_capped ? ", ...</p>" : "</p>", out);
    }
    cg__charts(out, r, s, s && i < CG_SERIES_MAX_GROUPS ? s->group[i] : NULL, &r->group[i].s,
               group);
    fputs("</section>\n", out);
  }
  fputs("<footer>Written by curlguard report --html. Self-contained: no script, no network."
        "</footer></body></html>\n", out);
  return ferror(out) ? -1 : 0;
}
