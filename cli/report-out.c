/* report-out.c - `curlguard report` output: one JSON document, or text tables (see
 * README "curlguard report" for both shapes). */
#include "report.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CG_TEXT_REQUEST_ALERTS 20 /* per-request alerts listed in the text output */

void cg_report_json_num(cJSON *o, const char *k, double v) {
  char buf[40];

  if (!isfinite(v)) {
    cJSON_AddNullToObject(o, k);
    return;
  }
  /* cJSON prints doubles with 15 digits when they read back within a relative epsilon,
   * not exactly; sums must read back bit for bit.  Shortest of %.15g..%.17g that does. */
  for (int digits = 15; digits <= 17; digits++) {
    snprintf(buf, sizeof(buf), "%.*g", digits, v);
    if (strtod(buf, NULL) == v)
      break;
  }
  cJSON_AddRawToObject(o, k, buf);
}

static void cg__num(cJSON *o, const char *k, double v) {
  cg_report_json_num(o, k, v);
}

/* A string member, or null for NULL. */
static void cg__str(cJSON *o, const char *k, const char *v) {
  if (v)
    cJSON_AddStringToObject(o, k, v);
  else
    cJSON_AddNullToObject(o, k);
}

/* ---- escaping for the text output ---- */

/* Write `s` into `out` (`cap` bytes) escaped, at most `max_chars` characters: returns
 * the characters written. */
static size_t cg__escape(char *out, size_t cap, const char *s, size_t max_chars) {
  const unsigned char *u = (const unsigned char *) s;
  size_t o = 0, chars = 0;

  /* Bounded by strlen(s): every step consumes at least one byte. */
  while (*u) {
    char piece[16];
    size_t plen, pchars = 1, n = 1;
    if (*u == '\\' || (*u == '(' && u == (const unsigned char *) s)) {
      piece[0] = '\\';
      piece[1] = (char) *u;
      plen = pchars = 2;
    } else if (*u < 0x20 || *u == 0x7f) {
      if (*u == '\n')
        plen = (size_t) snprintf(piece, sizeof(piece), "\\n");
      else if (*u == '\r')
        plen = (size_t) snprintf(piece, sizeof(piece), "\\r");
      else if (*u == '\t')
        plen = (size_t) snprintf(piece, sizeof(piece), "\\t");
      else
        plen = (size_t) snprintf(piece, sizeof(piece), "\\x%02x", *u);
      pchars = plen;
    } else if (*u == 0xC2 && u[1] >= 0x80 && u[1] <= 0x9F) { /* C1 controls (CSI...) */
      plen = pchars = (size_t) snprintf(piece, sizeof(piece), "\\u%04x", u[1]);
      n = 2;
    } else if (*u == 0xE2 && ((u[1] == 0x80 && u[2] >= 0xA8 && u[2] <= 0xAE) ||
                              (u[1] == 0x81 && u[2] >= 0xA6 && u[2] <= 0xA9))) {
      /* line/paragraph separators and bidirectional overrides, which reorder a line */
      unsigned cp = 0x2000u | ((u[1] & 0x3Fu) << 6) | (u[2] & 0x3Fu);
      plen = pchars = (size_t) snprintf(piece, sizeof(piece), "\\u%04x", cp);
      n = 3;
    } else {
      n = *u < 0x80 ? 1 : *u < 0xE0 ? 2 : *u < 0xF0 ? 3 : 4;
      for (size_t k = 1; k < n; k++)
        if (!u[k]) /* not reached for valid UTF-8 */
          n = k;
      memcpy(piece, u, n);
      plen = n;
    }
    if (o + plen >= cap || chars + pchars > max_chars)
      break;
    memcpy(out + o, piece, plen);
    o += plen;
    chars += pchars;
    u += n;
  }
  if (cap)
    out[o < cap ? o : cap - 1] = '\0';
  return chars;
}

size_t cg_text_escape(char *out, size_t cap, const char *s) {
  return cg__escape(out, cap, s, (size_t) -1);
}

/* Print `s` escaped, or `marker` for NULL, in a field of `width` characters (cut or
 * padded with spaces on the right). */
static void cg__field(FILE *out, const char *s, const char *marker, size_t width) {
  char buf[512];
  size_t n;

  if (s) {
    n = cg__escape(buf, sizeof(buf), s, width);
  } else {
    snprintf(buf, sizeof(buf), "%.*s", (int) width, marker); /* ASCII */
    n = strlen(buf);
  }
  fputs(buf, out);
  for (; n < width; n++)
    fputc(' ', out);
}

static double cg__ratio(uint64_t a, uint64_t b) {
  return b ? (double) a / (double) b : 0;
}

/* Fill `o` (NULL: a new object) with the counters of `s` and the cost at risk computed by
 * the caller (see cg_report_risk); returns `o`. */
static cJSON *cg__stats_json(const struct cg_report *r, const struct cg_rstats *s, cJSON *o,
                             double at_risk, uint64_t unestimated) {
  cJSON *t, *oc, *lat, *dup;
  static const struct { const char *name; double p; } pct[] = {
      {"p50", 50}, {"p95", 95}, {"p99", 99}};

  if (!o && !(o = cJSON_CreateObject()))
    return NULL;
  cg__num(o, "calls", (double) s->calls);
  cg__num(o, "unfinished_calls", (double) s->unfinished);
  cg__num(o, "attempts", (double) s->attempts);
  cg__num(o, "retries", (double) s->retries);
  cg__num(o, "retry_ratio", cg__ratio(s->retries, s->attempts));
  cg__num(o, "host_retry_calls", (double) s->host_retry_calls);
  oc = cJSON_AddObjectToObject(o, "outcomes");
  for (size_t i = 0; oc && i < r->noutcomes; i++)
    if (s->outcome[i])
      cg__num(oc, r->outcome_name[i], (double) s->outcome[i]);
  /* Outcome names beyond the cap: a count of its own, not a name ("other" may be one). */
  cg__num(o, "outcomes_other", (double) s->outcome[CG_REPORT_MAX_OUTCOMES]);
  cg__num(o, "billed_attempts", (double) s->billed);
  cg__num(o, "billed_retries", (double) s->billed_retries);
  cg__num(o, "usage_attempts", (double) s->usage_attempts);
  cg__num(o, "possibly_billed", (double) s->possibly_billed);
  cg__num(o, "at_risk_attempts", (double) s->at_risk_attempts);
  cg__num(o, "unmetered_attempts", (double) s->unmetered);
  cg__num(o, "cost_at_risk_usd", at_risk);
  cg__num(o, "at_risk_unestimated", (double) unestimated);
  t = cJSON_AddObjectToObject(o, "tokens");
  if (t) {
    cg__num(t, "prompt", (double) s->prompt_tokens);
    cg__num(t, "completion", (double) s->completion_tokens);
    cg__num(t, "total", (double) s->total_tokens);
    cg__num(t, "cached", (double) s->cached_tokens);
  }
  cg__num(o, "cost_usd", s->cost_usd);
  /* A sum beyond the largest double (absurd costs): null above, and this flag. */
  cJSON_AddBoolToObject(o, "cost_overflow", !isfinite(s->cost_usd) || isinf(at_risk));
  cg__num(o, "priced_attempts", (double) s->priced);
  cg__num(o, "unpriced_attempts", (double) s->unpriced);
  dup = cJSON_AddObjectToObject(o, "duplicate_bodies");
  if (dup) {
    cg__num(dup, "digests", (double) s->dup_digests);
    cg__num(dup, "extra_calls", (double) s->dup_extra_calls);
  }
  lat = cJSON_AddObjectToObject(o, "latency_ms");
  if (lat) {
    const struct cg_hist *h = s->latency;
    cg__num(lat, "count", (double) h->count);
    cg__num(lat, "missing", (double) s->latency_missing);
    cg__num(lat, "min", h->count ? (double) h->min : NAN);
    cg__num(lat, "max", h->count ? (double) h->max : NAN);
    cg__num(lat, "mean", h->count ? h->sum / (double) h->count : NAN);
    for (size_t i = 0; i < sizeof(pct) / sizeof(pct[0]); i++)
      cg__num(lat, pct[i].name, h->count ? (double) cg_hist_percentile(h, pct[i].p) : NAN);
  }
  return o;
}

cJSON *cg_report_json(const struct cg_report *r) {
  cJSON *root = cJSON_CreateObject(), *o, *arr;
  char ts[40];
  double risk;
  uint64_t unest;

  if (!root)
    return NULL;
  cg__num(root, "lines", (double) r->lines);
  cg__num(root, "records", (double) r->records);
  cg__num(root, "blank_lines", (double) r->blank);
  o = cJSON_AddObjectToObject(root, "malformed");
  if (o) {
    uint64_t sum = 0;
    for (int i = 1; i < CG_RBAD_COUNT; i++)
      sum += r->malformed[i];
    cg__num(o, "total", (double) sum);
    for (int i = 1; i < CG_RBAD_COUNT; i++)
      cg__num(o, cg_rbad_name[i], (double) r->malformed[i]);
    if (r->first_bad)
      cJSON_AddStringToObject(o, "first", r->first_bad);
    else
      cJSON_AddNullToObject(o, "first");
  }
  o = cJSON_AddObjectToObject(root, "period");
  if (o && r->records) {
    cJSON_AddStringToObject(o, "first", cg_rfc3339_format(r->ts_min, ts, sizeof(ts)));
    cJSON_AddStringToObject(o, "last", cg_rfc3339_format(r->ts_max, ts, sizeof(ts)));
  } else if (o) {
    cJSON_AddNullToObject(o, "first");
    cJSON_AddNullToObject(o, "last");
  }
  arr = cJSON_AddArrayToObject(root, "groups");
  for (size_t i = 0; arr && i < r->ngroups; i++) {
    cJSON *g = cJSON_CreateObject();
    if (!g)
      continue;
    const struct cg_rgroup *gr = &r->group[i];
    cJSON *models;
    cg__str(g, "pool", gr->pool);
    cg__str(g, "model", gr->model);
    cJSON_AddBoolToObject(g, "other", gr->other);
    models = cJSON_AddArrayToObject(g, "models");
    for (size_t k = 0; models && k < gr->nvariants; k++)
      cJSON_AddItemToArray(models, cJSON_CreateString(gr->variant[k]));
    cJSON_AddBoolToObject(g, "models_capped", gr->variants_capped);
    cg_report_risk(r, (long) i, &risk, &unest);
    cJSON_AddItemToArray(arr, cg__stats_json(r, &r->group[i].s, g, risk, unest));
  }
  cg_report_risk(r, -1, &risk, &unest);
  cJSON_AddItemToObject(root, "totals", cg__stats_json(r, &r->total, NULL, risk, unest));
  arr = cJSON_AddArrayToObject(root, "unpriced_models");
  for (size_t i = 0; arr && i < r->ngroups; i++) {
    if (r->group[i].s.unpriced && r->group[i].model) {
      cJSON *u = cJSON_CreateObject();
      if (!u)
        continue;
      cg__str(u, "pool", r->group[i].pool);
      cg__str(u, "model", r->group[i].model);
      cg__num(u, "attempts", (double) r->group[i].s.unpriced);
      cJSON_AddItemToArray(arr, u);
    }
  }
  o = cJSON_AddObjectToObject(root, "tasks_billed_more_than_once");
  if (o) {
    cg__num(o, "count", (double) r->tasks_multi);
    arr = cJSON_AddArrayToObject(o, "examples");
    for (size_t i = 0; arr && i < r->ntask_examples; i++)
      cJSON_AddItemToArray(arr, cJSON_CreateString(r->task_example[i]));
  }
  o = cJSON_AddObjectToObject(root, "limits");
  if (o) {
    cJSON_AddBoolToObject(o, "groups_capped", r->groups_capped);
    cJSON_AddBoolToObject(o, "digests_capped", r->digests.full || r->dup_calls.full);
    cJSON_AddBoolToObject(o, "tasks_capped", r->tasks.full);
    cJSON_AddBoolToObject(o, "calls_capped", r->pending.full);
    cJSON_AddBoolToObject(o, "minutes_capped", r->minutes.full);
    cg__num(o, "alerts_dropped", (double) r->alerts_dropped);
  }
  cJSON_AddItemReferenceToObject(root, "alerts", r->alerts);
  return root;
}

/* ---- text ---- */

static void cg__pct(char *buf, size_t len, const struct cg_hist *h, double p) {
  if (h->count)
    snprintf(buf, len, "%lld", (long long) cg_hist_percentile(h, p));
  else
    snprintf(buf, len, "-");
}

/* A cost in USD for the table: 6 significant digits (a priced 4e-07 is not 0), "-"
 * when nothing was priced, "?" when it cannot be estimated, "overflow" past the largest
 * double. */
static void cg__cost(char *buf, size_t len, double usd, int none) {
  if (none)
    snprintf(buf, len, "-");
  else if (isnan(usd))
    snprintf(buf, len, "?");
  else if (!isfinite(usd))
    snprintf(buf, len, "overflow");
  else
    snprintf(buf, len, "%.6g", usd);
}

static void cg__row(FILE *out, const struct cg_rgroup *g, const struct cg_rstats *s,
                    double at_risk) {
  char p50[24], p95[24], p99[24], risk[32], cost[32];

  cg__pct(p50, sizeof(p50), s->latency, 50);
  cg__pct(p95, sizeof(p95), s->latency, 95);
  cg__pct(p99, sizeof(p99), s->latency, 99);
  cg__cost(risk, sizeof(risk), at_risk, 0);
  cg__cost(cost, sizeof(cost), s->cost_usd, s->priced == 0);
  if (!g)
    cg__field(out, "TOTAL", "", 20);
  else
    cg__field(out, g->other ? NULL : g->pool, g->other ? "(other)" : "(none)", 20);
  fputc(' ', out);
  cg__field(out, g ? g->model : "", g && g->other ? "(other)" : "(none)", 26);
  fprintf(out, " %8llu %5llu %8llu %6.2f %7llu %6llu %11llu %12s %12s "
          "%5llu %7s %7s %7s\n", (unsigned long long) s->calls,
          (unsigned long long) s->unfinished, (unsigned long long) s->attempts,
          100.0 * cg__ratio(s->retries, s->attempts), (unsigned long long) s->billed,
          (unsigned long long) s->possibly_billed, (unsigned long long) s->total_tokens,
          cost, risk, (unsigned long long) s->dup_digests, p50, p95, p99);
}

/* The outcome counts of a row, on a line of their own (none: no line). */
static void cg__outcomes(FILE *out, const struct cg_report *r, const struct cg_rstats *s) {
  const char *sep = "";
  char name[256];
  for (size_t i = 0; i <= CG_REPORT_MAX_OUTCOMES; i++) {
    if (!s->outcome[i])
      continue;
    if (!*sep)
      fprintf(out, "%-20s outcomes: ", "");
    if (i < r->noutcomes)
      cg_text_escape(name, sizeof(name), r->outcome_name[i]);
    else
      snprintf(name, sizeof(name), "(other)");
    fprintf(out, "%s%s %llu", sep, name, (unsigned long long) s->outcome[i]);
    sep = ", ";
  }
  if (*sep)
    fputc('\n', out);
}

/* The raw model names of a family, when they are not just the family's own name. */
static void cg__variants(FILE *out, const struct cg_rgroup *g) {
  char name[256];
  if (g->nvariants == 0 || (g->nvariants == 1 && strcmp(g->variant[0], g->model) == 0))
    return;
  fprintf(out, "%-20s models: ", "");
  for (size_t k = 0; k < g->nvariants; k++) {
    cg_text_escape(name, sizeof(name), g->variant[k]);
    fprintf(out, "%s%s", k ? ", " : "", name);
  }
  fprintf(out, "%s\n", g->variants_capped ? ", ..." : "");
}

void cg_report_print(const struct cg_report *r, FILE *out) {
  char a[40], b[40];
  uint64_t bad = 0;
  const char *sep = "";
  size_t i, nalerts, per_request = 0;
  double risk;
  uint64_t unest;

  for (i = 1; i < CG_RBAD_COUNT; i++)
    bad += r->malformed[i];
  fprintf(out, "%llu records from %llu lines", (unsigned long long) r->records,
          (unsigned long long) r->lines);
  if (r->records)
    fprintf(out, ", %s to %s", cg_rfc3339_format(r->ts_min, a, sizeof(a)),
            cg_rfc3339_format(r->ts_max, b, sizeof(b)));
  fprintf(out, "\n%llu malformed lines skipped", (unsigned long long) bad);
  if (bad) {
    fputs(" (", out);
    for (i = 1; i < CG_RBAD_COUNT; i++)
      if (r->malformed[i]) {
        fprintf(out, "%s%s %llu", sep, cg_rbad_name[i], (unsigned long long) r->malformed[i]);
        sep = ", ";
      }
    if (r->first_bad) {
      char place[512];
      if (strncmp(r->first_bad, "(stdin):", 8) == 0) /* our own name for stdin */
        snprintf(place, sizeof(place), "%s", r->first_bad);
      else
        cg_text_escape(place, sizeof(place), r->first_bad);
      fprintf(out, "; first at %s)", place);
    } else {
      fputs("; first at ?)", out);
    }
  }
  fputs("\n\n", out);
  fprintf(out, "%-20s %-26s %8s %5s %8s %6s %7s %6s %11s %12s %12s %5s %7s %7s %7s\n", "pool",
          "model", "calls", "unfin", "attempts", "retry%", "billed", "pbill", "tokens",
          "cost_usd", "at_risk", "dups", "p50_ms", "p95_ms", "p99_ms");
  for (i = 0; i < r->ngroups; i++) {
    cg_report_risk(r, (long) i, &risk, &unest);
    cg__row(out, &r->group[i], &r->group[i].s, risk);
    cg__outcomes(out, r, &r->group[i].s);
    cg__variants(out, &r->group[i]);
  }
  cg_report_risk(r, -1, &risk, &unest);
  cg__row(out, NULL, &r->total, risk);
  cg__outcomes(out, r, &r->total);
  fprintf(out, "\ntokens: prompt %llu, completion %llu, cached %llu; host retries: %llu calls; "
          "duplicate bodies: %llu digests billed in %llu extra calls; billed retries: %llu\n",
          (unsigned long long) r->total.prompt_tokens,
          (unsigned long long) r->total.completion_tokens,
          (unsigned long long) r->total.cached_tokens,
          (unsigned long long) r->total.host_retry_calls,
          (unsigned long long) r->total.dup_digests,
          (unsigned long long) r->total.dup_extra_calls,
          (unsigned long long) r->total.billed_retries);
  sep = "";
  fputs("unpriced models: ", out);
  for (i = 0; i < r->ngroups; i++)
    if (r->group[i].s.unpriced && r->group[i].model) {
      char model[256], pool[256];
      cg_text_escape(model, sizeof(model), r->group[i].model);
      if (r->group[i].pool)
        cg_text_escape(pool, sizeof(pool), r->group[i].pool);
      else
        snprintf(pool, sizeof(pool), "(none)");
      fprintf(out, "%s%s (%s, %llu attempts)", sep, model, pool,
              (unsigned long long) r->group[i].s.unpriced);
      sep = ", ";
    }
  fprintf(out, "%s\n", *sep ? "" : "none");
  fprintf(out, "tasks with more than one billed call: %llu", (unsigned long long) r->tasks_multi);
  for (i = 0; i < r->ntask_examples; i++) {
    char task[256];
    cg_text_escape(task, sizeof(task), r->task_example[i]);
    fprintf(out, "%s%s", i ? ", " : " (", task);
  }
  fprintf(out, "%s\n", r->ntask_examples ? (r->tasks_multi > r->ntask_examples ? ", ...)" : ")")
                                          : "");
  if (unest)
    fprintf(out, "cost at risk: %llu possibly-billed attempts of models without a priced "
            "attempt are not estimated (\"?\")\n", (unsigned long long) unest);
  if (r->groups_capped)
    fprintf(out, "note: more than %d pool/model pairs; the rest are under (other)\n",
            CG_REPORT_MAX_GROUPS);
  if (r->digests.full)
    fprintf(out, "note: body digest table full; duplicate-body counts are lower bounds\n");
  if (r->tasks.full)
    fprintf(out, "note: task id table full; the task count is a lower bound\n");
  if (r->pending.full)
    fprintf(out, "note: too many calls in flight at once; unfinished calls are approximate\n");
  if (r->dup_calls.full)
    fprintf(out, "note: duplicate-call table full; duplicate-body counts are lower bounds\n");
  if (!isfinite(r->total.cost_usd))
    fprintf(out, "note: a cost sum overflowed (beyond %g USD): shown as \"overflow\"\n", DBL_MAX);
  if (r->minutes.full)
    fprintf(out, "note: minute table full; window alerts cover part of the log only\n");
  nalerts = (size_t) cJSON_GetArraySize(r->alerts);
  fprintf(out, "\n%llu alerts\n", (unsigned long long) r->nalerts);
  for (cJSON *al = r->alerts->child; al; al = al->next) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(al, "message");
    const char *kind = cJSON_GetObjectItemCaseSensitive(al, "kind")->valuestring;
    /* Requests retried too often can be many: the text lists the first few (--json all). */
    if (strcmp(kind, "retried_more_than_twice") == 0 && ++per_request > CG_TEXT_REQUEST_ALERTS)
      continue;
    fprintf(out, "ALERT %s: %s\n", kind, cJSON_IsString(m) ? m->valuestring : "");
  }
  if (per_request > CG_TEXT_REQUEST_ALERTS)
    fprintf(out, "... and %zu more requests retried more than twice (--json lists them)\n",
            per_request - CG_TEXT_REQUEST_ALERTS);
  if (r->alerts_dropped)
    fprintf(out, "... %llu more alerts not listed (first %zu shown)\n",
            (unsigned long long) r->alerts_dropped, nalerts);
}
