/* report-html.h - `curlguard report --html FILE`: the report as one self-contained page.
 *
 * One HTML document with inline CSS and inline SVG charts: no script, no external font,
 * image, style sheet or link (the only href values are "#g<N>" anchors within the page),
 * so it opens offline in any browser and can be mailed as it is.  It shows what
 * `curlguard report --json` computes (report.h): the totals, a row per group, the money
 * at risk, the alerts, and per group (and in total) charts over time from the series of
 * report-series.h: attempts by outcome (stacked), cost, tokens, the retry ratio, and the
 * latency percentiles p50/p90/p95/p99.
 *
 * Figures carry their exact value for machines: table cells have data-k (the key path in
 * `report --json`, such as "tokens.total" or "latency_ms.p50"; p90 is the page's own,
 * "latency_ms.p90") and data-v (the shortest decimal that reads back as the same double,
 * "" for null); chart marks have data-v (outcome bars also data-outcome, the bucket's
 * start in data-t, ms since the epoch).  Every string from the log is escaped with
 * cg_html_text.
 */
#ifndef CG_REPORT_HTML_H
#define CG_REPORT_HTML_H

#include "report-series.h"
#include "report.h"

#include <stdio.h>

/* Write the page of finished report `r` with its series `s` (may be NULL: no charts
 * over time) to `out`.  0, or -1 when writing failed (ferror on `out`). */
int cg_report_html(const struct cg_report *r, const struct cg_series *s, FILE *out);

#endif
