/* fuzz-price.c - the price table (src/price.c).  Input: a price table file, in curlguard's
 * format or LiteLLM's (model_prices_and_context_window.json; seeds of both in
 * fuzz/corpus/price/).  Invariants: a loaded table has a date, and every lookup (exact
 * names, provider-prefixed and dated ones, case variants, an over-long name) gives prices
 * >= 0 whose cost for non-negative counts is >= 0 (or +inf for absurd prices), never NaN
 * or negative; "sample_spec" is never a model of a LiteLLM table. */
#include "fuzz.h"
#include "price.h"

#include <cjson/cJSON.h>
#include <math.h>

static const char *const models[] = {
  "gpt-4o-mini", "gpt-4o-2024-08-06", "claude-sonnet-4-20250514", "gemini-2.5-flash", "x",
  "GPT-4O", "", "openai/gpt-4o", "gemini/gemini-2.5-pro", "models/gemini-2.5-pro",
  "a/b/c", "/", "gpt-4o/", "o3-20250416", "claude-3-5-haiku@20241022", "m-latest", "m-001",
  "-2024-08-06", "@20250514",
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
  "-2024-08-06"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char why[256];
  struct cg_prices *t = cg_prices_load(cg_fuzz_file("prices", data, size), why, sizeof(why));
  size_t i;

  if (!t)
    return 0;
  CG_FUZZ_CHECK(cg_prices_date(t) && cg_prices_date(t)[0], "no date");
  /* a table with "models" is curlguard's; any other loaded table is LiteLLM's, whose
   * sample_spec describes the format and is no model */
  {
    cJSON *root = cJSON_ParseWithLength((const char *) data, size);
    if (root && !cJSON_GetObjectItemCaseSensitive(root, "models"))
      CG_FUZZ_CHECK(!cg_prices_lookup(t, "sample_spec", NULL), "sample_spec priced");
    cJSON_Delete(root);
  }
  for (i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
    struct cg_price p;
    double cost;
    if (!cg_prices_lookup(t, models[i], &p))
      continue;
    /* cache_write -1: "as input" (price.h) */
    CG_FUZZ_CHECK(p.input >= 0 && p.cached_input >= 0 && (p.cache_write >= 0 ||
                  p.cache_write == -1) && p.output >= 0,
                  "negative price for %s", models[i]);
    cost = cg_price_cost(&p, 1000, 100, 10, 500);
    CG_FUZZ_CHECK(!isnan(cost) && cost >= 0, "cost %g for %s", cost, models[i]);
    cost = cg_price_cost(&p, 0, 0, 0, 0);
    CG_FUZZ_CHECK(cost == 0, "cost %g of nothing", cost);
  }
  cg_prices_free(t);
  return 0;
}
