/* price.h - the shipped price table (data/prices.json) and what a call cost.
 *
 * The table is a dated JSON file: {"date", "currency": "USD", "unit": "per 1M tokens",
 * "source", "models": [{"match": glob, "input", "cached_input", "cache_write"?, "output"}]}.
 * A model name is looked up by the first entry whose glob matches it (fnmatch, case
 * insensitive), so dated variants ("claude-sonnet-4-20250514") need no entry of their own
 * and specific patterns go before general ones.  A name no entry matches is tried again
 * without a gateway prefix ("openai/gpt-4o" as "gpt-4o").  A model still unmatched is
 * unknown: its cost is NAN (recorded as null).  Loading reads one file; lookups and costs
 * are pure.
 *
 * The file may instead be LiteLLM's community table (model_prices_and_context_window.json,
 * per-token prices), recognised by its shape: an object of model entries without "models"
 * (its "sample_spec", or entries with "litellm_provider" / "input_cost_per_token").  Its
 * chat, responses and completion entries are kept (input_cost_per_token,
 * cache_read_input_token_cost, cache_creation_input_token_cost, output_cost_per_token,
 * times 1e6); other modes and entries with malformed prices are skipped, not fatal.  A key
 * whose prefix names its provider ("gemini/gemini-2.5-pro") also answers to the bare name;
 * where names collide, OpenAI's, Anthropic's and Google's (gemini) own entries win over
 * prefixed and re-sold ones.  Lookups are by exact name (case-insensitive; binary search),
 * then without a gateway prefix ("openai/gpt-4o"), then without a date suffix
 * ("-2024-08-06", "-20250514", "-latest", "-001").  The table's date is the file's
 * modification date (LiteLLM's file has none).
 */
#ifndef CG_PRICE_H
#define CG_PRICE_H

#include <stddef.h>
#include <stdint.h>

#define CG_PRICES_FILE_MAX (8 << 20) /* bytes; larger price tables are refused (LiteLLM's
                                       * whole file is about 1.6 MB) */
#define CG_PRICES_NAME_MAX 255      /* longest LiteLLM model name kept and looked up */

/* USD per 1M tokens.  cache_write < 0 = the same as input. */
struct cg_price {
  double input, cached_input, cache_write, output;
};

struct cg_prices; /* a loaded table */

/* Load the table at `path` (either format, told apart by its content).  NULL on error,
 * with the reason in `why` (when non-NULL). */
struct cg_prices *cg_prices_load(const char *path, char *why, size_t whylen);
void cg_prices_free(struct cg_prices *t);

/* The prices of `model` in `*out`: 1 found, 0 unknown (or no table / no model). */
int cg_prices_lookup(const struct cg_prices *t, const char *model, struct cg_price *out);

/* Cost in USD of normalised token counts: `input` includes cached reads and cache
 * writes; -1 = unknown.  NAN when `p` is NULL (the model is unknown) or input or output
 * is unknown; unknown cached_input / cache_write count as 0. */
double cg_price_cost(const struct cg_price *p, int64_t input, int64_t cached_input,
                     int64_t cache_write, int64_t output);

/* The table's "date" (YYYY-MM-DD; a LiteLLM file's modification date). */
const char *cg_prices_date(const struct cg_prices *t);

#endif
