/* report-alert.c - the time-window alerts of `curlguard report` (see report.h).
 *
 * Both work on the per-minute sums (minute = floor(ts / 60 s), UTC), sorted by time, so
 * logs given out of order, or interleaved by concurrent writers, give the same answer.
 *
 * Retry ratio: every 10-minute window [m, m + 10 min) for every whole minute m that has
 * records in it is judged; a window with at least CG_ALERT_MIN_ATTEMPTS attempts and
 * retries / attempts > 5 % fires.  Consecutive firing windows are one alert, naming the
 * span they cover (from the start of the first to the end of the last, so the worst
 * window lies within it) and its worst window.
 *
 * Hour over hour: cost_usd summed per clock hour (UTC); an hour whose previous clock
 * hour had records with cost > 0 fires when its cost is more than 1.3 x that.  (The first
 * and last hour of a log may be partial: a log starting at 13:50 compares 14:00-15:00
 * with ten minutes.)
 */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int cg__by_minute(const void *a, const void *b) {
  const struct cg_rminute *x = a, *y = b;
  return x->minute < y->minute ? -1 : x->minute > y->minute;
}

static char *cg__minute_ts(int64_t minute, char *buf, size_t len) {
  return cg_rfc3339_format(minute * 60000, buf, len);
}

/* One alert for a run of firing windows: the first starts at minute `first`, the last
 * at minute `last`; `worst` starts the window with the highest ratio. */
static void cg__retry_window_alert(struct cg_report *r, int64_t first, int64_t last,
                                   int64_t worst, uint64_t att, uint64_t ret) {
  char from[40], to[40], wfrom[40], wto[40], msg[400];
  cJSON *a = cJSON_CreateObject();

  if (!a)
    return;
  cg__minute_ts(first, from, sizeof(from));
  cg__minute_ts(last + CG_ALERT_WINDOW_MIN, to, sizeof(to));
  cg__minute_ts(worst, wfrom, sizeof(wfrom));
  cg__minute_ts(worst + CG_ALERT_WINDOW_MIN, wto, sizeof(wto));
  cJSON_AddStringToObject(a, "kind", "retry_ratio");
  cJSON_AddStringToObject(a, "from", from);
  cJSON_AddStringToObject(a, "to", to);
  cJSON_AddStringToObject(a, "worst_from", wfrom);
  cJSON_AddStringToObject(a, "worst_to", wto);
  cg_report_json_num(a, "attempts", (double) att);
  cg_report_json_num(a, "retries", (double) ret);
  cg_report_json_num(a, "retry_ratio", (double) ret / (double) att);
  cg_report_json_num(a, "threshold", CG_ALERT_RETRY_RATIO);
  snprintf(msg, sizeof(msg), "retry ratio over %.0f %% in 10-minute windows from %s to %s: "
           "worst %.1f %% (%llu retries of %llu attempts, %s to %s)",
           CG_ALERT_RETRY_RATIO * 100, from, to, 100.0 * (double) ret / (double) att,
           (unsigned long long) ret, (unsigned long long) att, wfrom, wto);
  cJSON_AddStringToObject(a, "message", msg);
  cg_report_alert(r, a);
}

/* Windows [s, s + 10) over the sorted minutes m[0..n).  Bounded: every minute is inside
 * at most 10 windows, and empty stretches are skipped in one step. */
static void cg__retry_windows(struct cg_report *r, const struct cg_rminute *m, size_t n) {
  size_t lo = 0, hi = 0;
  uint64_t att = 0, ret = 0;
  int firing = 0;
  int64_t s, run_first = 0, run_last = 0, worst = 0; /* run_*: window starts */
  uint64_t w_att = 0, w_ret = 0;

  if (n == 0)
    return;
  s = m[0].minute - (CG_ALERT_WINDOW_MIN - 1);
  while (lo < n) {
    int fires;
    /* Window [s, s + 10): add minutes entering at the right, drop those leaving. */
    while (hi < n && m[hi].minute < s + CG_ALERT_WINDOW_MIN) {
      att += m[hi].attempts;
      ret += m[hi].retries;
      hi++;
    }
    while (lo < hi && m[lo].minute < s) {
      att -= m[lo].attempts;
      ret -= m[lo].retries;
      lo++;
    }
    if (lo == hi) { /* empty window: end any run, jump to the next minute with records */
      if (firing)
        cg__retry_window_alert(r, run_first, run_last, worst, w_att, w_ret);
      firing = 0;
      if (lo < n)
        s = m[lo].minute - (CG_ALERT_WINDOW_MIN - 1);
      continue;
    }
    fires = att >= CG_ALERT_MIN_ATTEMPTS &&
            (double) ret > CG_ALERT_RETRY_RATIO * (double) att;
    if (fires) {
      if (!firing) {
        firing = 1;
        run_first = s;
        w_att = 0;
      }
      run_last = s;
      if (w_att == 0 || (double) ret * (double) w_att > (double) w_ret * (double) att) {
        worst = s;
        w_att = att;
        w_ret = ret;
      }
    } else if (firing) {
      cg__retry_window_alert(r, run_first, run_last, worst, w_att, w_ret);
      firing = 0;
    }
    s++;
  }
  if (firing)
    cg__retry_window_alert(r, run_first, run_last, worst, w_att, w_ret);
}

/* `usd` with 6 decimals, or "overflow" when the sum is not finite. */
static const char *cg__usd(char *buf, size_t len, double usd) {
  if (isfinite(usd))
    snprintf(buf, len, "%.6f", usd);
  else
    snprintf(buf, len, "overflow");
  return buf;
}

static void cg__cost_alert(struct cg_report *r, int64_t hour, double prev, double cur) {
  char from[40], msg[300], a_usd[48], b_usd[48], up[48];
  cJSON *a = cJSON_CreateObject();

  if (!a)
    return;
  cg_rfc3339_format(hour * 3600000, from, sizeof(from));
  cJSON_AddStringToObject(a, "kind", "cost_hour_over_hour");
  cJSON_AddStringToObject(a, "hour", from);
  cg_report_json_num(a, "previous_cost_usd", prev);
  cg_report_json_num(a, "cost_usd", cur);
  cg_report_json_num(a, "increase", cur / prev - 1);
  cg_report_json_num(a, "threshold", CG_ALERT_COST_RISE - 1);
  if (isfinite(cur / prev))
    snprintf(up, sizeof(up), "%.0f %%", 100.0 * (cur / prev - 1));
  else
    snprintf(up, sizeof(up), "beyond measure");
  snprintf(msg, sizeof(msg), "cost up %s hour over hour: %s USD in the hour from %s, %s USD "
           "the hour before", up, cg__usd(a_usd, sizeof(a_usd), cur), from,
           cg__usd(b_usd, sizeof(b_usd), prev));
  cJSON_AddStringToObject(a, "message", msg);
  cg_report_alert(r, a);
}

static int64_t cg__hour(int64_t minute) {
  return minute >= 0 ? minute / 60 : -((-minute + 59) / 60);
}

static void cg__cost_hours(struct cg_report *r, const struct cg_rminute *m, size_t n) {
  size_t i = 0;
  int have_prev = 0;
  int64_t prev_hour = 0;
  double prev = 0;

  while (i < n) {
    int64_t h = cg__hour(m[i].minute);
    double cost = 0;
    for (; i < n && cg__hour(m[i].minute) == h; i++)
      cost += m[i].cost_usd;
    if (have_prev && prev_hour == h - 1 && prev > 0 && cost > CG_ALERT_COST_RISE * prev)
      cg__cost_alert(r, h, prev, cost);
    have_prev = 1;
    prev_hour = h;
    prev = cost;
  }
}

void cg_report_window_alerts(struct cg_report *r) {
  if (r->nminutes == 0)
    return;
  qsort(r->minute, r->nminutes, sizeof(*r->minute), cg__by_minute);
  cg__retry_windows(r, r->minute, r->nminutes);
  cg__cost_hours(r, r->minute, r->nminutes);
}
