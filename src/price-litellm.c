/* price-litellm.c - the price table in LiteLLM's community format
 * (model_prices_and_context_window.json, BerriAI/litellm): per-token prices by model name,
 * read into a sorted name table (price.h says what is kept and how names are looked up). */
#include "price-int.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Modes LiteLLM gives text-generation models; the others (embedding, image_generation,
 * audio_*, realtime, rerank, moderation, ...) are not priced per chat token. */
static int cg__litellm_mode_ok(const cJSON *entry) {
  const cJSON *mode = cJSON_GetObjectItemCaseSensitive(entry, "mode");
  if (!mode)
    return 1;
  return cJSON_IsString(mode) && (strcmp(mode->valuestring, "chat") == 0 ||
                                  strcmp(mode->valuestring, "responses") == 0 ||
                                  strcmp(mode->valuestring, "completion") == 0);
}

/* A per-token price `key` of `entry` as USD per million tokens in `*v`: 1 set, 0 absent,
 * -1 malformed (not a finite number >= 0, or one whose per-million value overflows). */
static int cg__litellm_price(const cJSON *entry, const char *key, double *v) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(entry, key);
  char buf[64];
  double m;

  if (!x)
    return 0;
  if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < 0)
    return -1;
  m = x->valuedouble * 1e6;
  if (!isfinite(m))
    return -1;
  /* 2.5e-06 * 1e6 is 2.4999999999999996: round to 12 significant digits, the precision
   * LiteLLM's decimal prices have, so the table says 2.5 like the provider does. */
  snprintf(buf, sizeof(buf), "%.12g", m);
  *v = strtod(buf, NULL);
  return 1;
}

/* The providers whose own entries win over re-sellers' for the same bare name. */
static int cg__litellm_first_party(const char *provider) {
  return provider && (strcmp(provider, "openai") == 0 || strcmp(provider, "anthropic") == 0 ||
                      strcmp(provider, "gemini") == 0);
}

/* The length of a provider prefix of `key` naming `provider` ("gemini/" of
 * "gemini/gemini-2.5-pro" when provider is gemini; "vertex_ai/" for vertex_ai-...), or 0. */
static size_t cg__litellm_prefix(const char *key, const char *provider) {
  const char *slash = strchr(key, '/');
  size_t head;
  if (!slash || !provider || !slash[1])
    return 0;
  head = (size_t) (slash - key);
  if (strncmp(key, provider, head) != 0)
    return 0;
  if (provider[head] == '\0' || provider[head] == '-' || provider[head] == '_')
    return head + 1;
  return 0;
}

static int cg__entry_cmp(const void *a, const void *b) {
  const struct cg__price_entry *x = a, *y = b;
  int c = strcmp(x->match, y->match);
  if (c)
    return c;
  if (x->rank != y->rank)
    return x->rank < y->rank ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Add `name` (lower-cased, at most CG_PRICES_NAME_MAX bytes) with `price`: 0, or -1 when
 * out of memory. */
static int cg__litellm_add(struct cg_prices *t, const char *name, size_t len,
                           const struct cg_price *price, int rank) {
  struct cg__price_entry *e = &t->entries[t->n];
  size_t i;
  if (!(e->match = malloc(len + 1)))
    return -1;
  for (i = 0; i < len; i++)
    e->match[i] = (char) ((name[i] >= 'A' && name[i] <= 'Z') ? name[i] - 'A' + 'a' : name[i]);
  e->match[len] = '\0';
  e->price = *price;
  e->rank = rank;
  e->seq = t->n;
  t->n++;
  return 0;
}

/* Does `root` look like LiteLLM's table: its "sample_spec", or a member that is an object
 * with a "litellm_provider" or an "input_cost_per_token"? */
int cg__price_is_litellm(const cJSON *root) {
  const cJSON *m;
  if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "sample_spec")))
    return 1;
  cJSON_ArrayForEach(m, root) {
    if (cJSON_IsObject(m) && (cJSON_GetObjectItemCaseSensitive(m, "litellm_provider") ||
                              cJSON_GetObjectItemCaseSensitive(m, "input_cost_per_token")))
      return 1;
  }
  return 0;
}

/* A LiteLLM table: {"model name": {"input_cost_per_token", "output_cost_per_token",
 * "cache_read_input_token_cost", "cache_creation_input_token_cost", "litellm_provider",
 * "mode", ...}, ...}.  Entries that are not usable are skipped, not fatal: the file is a
 * community one with thousands of models, and one odd entry must not cost all the others
 * their price.  Refused only when no entry is usable. */
struct cg_prices *cg__price_load_litellm(const cJSON *root, time_t mtime, const char *path,
                                         char *why, size_t whylen) {
  struct cg_prices *t = calloc(1, sizeof(*t));
  size_t count = (size_t) cJSON_GetArraySize(root), skipped = 0, w, i;
  const cJSON *m;
  char date[32];
  struct tm tm;

  if (t)
    t->entries = calloc(count * 2 + 1, sizeof(*t->entries)); /* a name and its alias */
  if (!t || !t->entries)
    goto oom;
  t->litellm = 1;
  cJSON_ArrayForEach(m, root) {
    const cJSON *prov = cJSON_GetObjectItemCaseSensitive(m, "litellm_provider");
    const char *key = m->string, *provider = cJSON_IsString(prov) ? prov->valuestring : NULL;
    struct cg_price p;
    size_t len = key ? strlen(key) : 0, pre;
    int rank;

    if (!key || strcasecmp(key, "sample_spec") == 0)
      continue; /* LiteLLM's description of its own format */
    if (!cJSON_IsObject(m) || len == 0 || len > CG_PRICES_NAME_MAX || !cg__litellm_mode_ok(m) ||
        cg__litellm_price(m, "input_cost_per_token", &p.input) != 1 ||
        cg__litellm_price(m, "output_cost_per_token", &p.output) != 1) {
      skipped++;
      continue;
    }
    switch (cg__litellm_price(m, "cache_read_input_token_cost", &p.cached_input)) {
    case 0: p.cached_input = p.input; break;
    case -1: skipped++; continue;
    }
    switch (cg__litellm_price(m, "cache_creation_input_token_cost", &p.cache_write)) {
    case 0: p.cache_write = -1; break; /* as input */
    case -1: skipped++; continue;
    }
    rank = cg__litellm_first_party(provider) ? 0 : 2;
    if (cg__litellm_add(t, key, len, &p, rank) != 0)
      goto oom;
    pre = cg__litellm_prefix(key, provider);
    if (pre && strcasecmp(key + pre, "sample_spec") != 0 &&
        cg__litellm_add(t, key + pre, len - pre, &p, rank + 1) != 0)
      goto oom;
  }
  if (t->n == 0) {
    cg__price_why(why, whylen, "prices %s: LiteLLM format, but no chat model with per-token prices "
            "(%zu entries skipped)", path, skipped);
    cg_prices_free(t);
    return NULL;
  }
  qsort(t->entries, t->n, sizeof(*t->entries), cg__entry_cmp);
  for (i = 1, w = 1; i < t->n; i++) { /* one entry per name: the best-ranked */
    if (strcmp(t->entries[i].match, t->entries[w - 1].match) == 0)
      free(t->entries[i].match);
    else
      t->entries[w++] = t->entries[i];
  }
  t->n = w;
  /* LiteLLM's file has no date: the table is as old as the copy. */
  if (!gmtime_r(&mtime, &tm) || strftime(date, sizeof(date), "%Y-%m-%d", &tm) == 0)
    snprintf(date, sizeof(date), "unknown");
  if (!(t->date = strdup(date)))
    goto oom;
  return t;

oom:
  cg__price_why(why, whylen, "prices %s: out of memory", path);
  cg_prices_free(t);
  return NULL;
}

/* Strip one date-like suffix from `s` in place ("-2024-08-06", "-20250514", "@20250514",
 * "-latest", "-001"): 1 if one was stripped. */
static int cg__strip_date(char *s) {
  size_t n = strlen(s), k;
  static const struct {
    const char *shape; /* 'd' a digit, else itself */
  } shapes[] = {{"-dddd-dd-dd"}, {"-dddddddd"}, {"@dddddddd"}, {"-latest"}, {"-ddd"}};
  for (k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
    const char *sh = shapes[k].shape;
    size_t m = strlen(sh), i;
    if (n <= m)
      continue;
    for (i = 0; i < m; i++) {
      char c = s[n - m + i];
      if (sh[i] == 'd' ? !(c >= '0' && c <= '9') : c != sh[i])
        break;
    }
    if (i == m) {
      s[n - m] = '\0';
      return 1;
    }
  }
  return 0;
}

static const struct cg__price_entry *cg__litellm_find(const struct cg_prices *t,
                                                      const char *name) {
  size_t lo = 0, hi = t->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(name, t->entries[mid].match);
    if (c == 0)
      return &t->entries[mid];
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

/* LiteLLM lookup: the exact name (case-insensitive), else without a provider prefix the
 * caller's gateway added ("openai/gpt-4o", "models/gemini-2.5-pro"), then each of those
 * without a date suffix LiteLLM does not list ("gpt-4o-2099-01-01" as "gpt-4o"). */
static const struct cg__price_entry *cg__litellm_lookup(const struct cg_prices *t,
                                                        const char *model) {
  char buf[CG_PRICES_NAME_MAX + 1];
  const char *cand[3];
  size_t n = strlen(model), i, nc = 0;
  const struct cg__price_entry *e;

  if (n > CG_PRICES_NAME_MAX)
    return NULL;
  for (i = 0; i <= n; i++)
    buf[i] = (char) ((model[i] >= 'A' && model[i] <= 'Z') ? model[i] - 'A' + 'a' : model[i]);
  cand[nc++] = buf;
  if (strchr(buf, '/') && strchr(buf, '/')[1])
    cand[nc++] = strchr(buf, '/') + 1;
  if (strrchr(buf, '/') && strrchr(buf, '/') != strchr(buf, '/') && strrchr(buf, '/')[1])
    cand[nc++] = strrchr(buf, '/') + 1;
  for (i = 0; i < nc; i++)
    if ((e = cg__litellm_find(t, cand[i])))
      return e;
  for (i = 0; i < nc; i++) {
    char undated[CG_PRICES_NAME_MAX + 1];
    snprintf(undated, sizeof(undated), "%s", cand[i]);
    if (cg__strip_date(undated) && (e = cg__litellm_find(t, undated)))
      return e;
  }
  return NULL;
}

int cg__price_lookup_litellm(const struct cg_prices *t, const char *model,
                             struct cg_price *out) {
  const struct cg__price_entry *e = cg__litellm_lookup(t, model);
  if (e && out)
    *out = e->price;
  return e != NULL;
}
