/* price.h - the shipped price table (data/prices.json) and what a call cost.
 *
 * The table is a dated JSON file: {"date", "currency": "USD", "unit": "per 1M tokens",
 * "source", "models": [{"match": glob, "input", "cached_input", "cache_write"?, "output"}]}.
 * A model name is looked up by the first entry whose glob matches it (fnmatch, case
 * insensitive), so dated variants ("claude-sonnet-4-20250514") need no entry of their own
 * and specific patterns go before general ones.  A model no entry matches is unknown: its
 * cost is NAN (recorded as null).  Loading reads one file; lookups and costs are pure.
 */
#ifndef CG_PRICE_H
#define CG_PRICE_H

#include <stddef.h>
#include <stdint.h>

#define CG_PRICES_FILE_MAX (1 << 20) /* bytes; larger price tables are refused */

/* USD per 1M tokens.  cache_write < 0 = the same as input. */
struct cg_price {
  double input, cached_input, cache_write, output;
};

struct cg_prices; /* a loaded table */

/* Load the table at `path`.  NULL on error, with the reason in `why` (when non-NULL). */
struct cg_prices *cg_prices_load(const char *path, char *why, size_t whylen);
void cg_prices_free(struct cg_prices *t);

/* The prices of `model` in `*out`: 1 found, 0 unknown (or no table / no model). */
int cg_prices_lookup(const struct cg_prices *t, const char *model, struct cg_price *out);

/* Cost in USD of normalised token counts: `input` includes cached reads and cache
 * writes; -1 = unknown.  NAN when `p` is NULL (the model is unknown) or input or output
 * is unknown; unknown cached_input / cache_write count as 0. */
double cg_price_cost(const struct cg_price *p, int64_t input, int64_t cached_input,
                     int64_t cache_write, int64_t output);

/* The table's "date" (YYYY-MM-DD). */
const char *cg_prices_date(const struct cg_prices *t);

#endif
