/* price-int.h - what price.c and price-litellm.c share: the loaded table's layout and
 * the LiteLLM reader's entry points.  Not for other files: they use price.h. */
#ifndef CG_PRICE_INT_H
#define CG_PRICE_INT_H

#include "price.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <time.h>

/* A table entry: a glob (curlguard format) or a lower-case model name (LiteLLM format,
 * where `rank` orders entries that give the same name: lower wins). */
struct cg__price_entry {
  char *match;
  struct cg_price price;
  int rank;
  size_t seq; /* position in the file: the tie-break of equal ranks */
};

struct cg_prices {
  char *date;
  size_t n;
  struct cg__price_entry *entries;
  int litellm; /* entries sorted by name, looked up by binary search */
  unsigned long serial; /* this table's number among those loaded (never reused), the key
                         * of each thread's last lookup (price.c); 0 = never cached */
};

/* Format "prices ..." into `why` (when non-NULL), printf-style. */
void cg__price_why(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Does the parsed file `root` look like LiteLLM's table (its "sample_spec", or a member
 * with "litellm_provider" or "input_cost_per_token")? */
int cg__price_is_litellm(const cJSON *root);

/* The LiteLLM table `root` read from `path` (modified at `mtime`, the table's date).
 * NULL when no entry is usable or out of memory, with the reason in `why`. */
struct cg_prices *cg__price_load_litellm(const cJSON *root, time_t mtime, const char *path,
                                         char *why, size_t whylen);

/* cg_prices_lookup for a table cg__price_load_litellm made. */
int cg__price_lookup_litellm(const struct cg_prices *t, const char *model,
                             struct cg_price *out);

#endif
