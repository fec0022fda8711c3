/* test-price.c - the price table and cost arithmetic (price.h, SPEC section 8).
 * The shipped table is data/prices.json under $CG_ROOT (default: the current directory,
 * the project root when run by make). */
#include "price.h"

#include "tmpfile.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct cg_prices *load_shipped(void) {
  const char *root = getenv("CG_ROOT");
  char path[4096], why[256];
  struct cg_prices *t;

  snprintf(path, sizeof(path), "%s/data/prices.json", root && *root ? root : ".");
  t = cg_prices_load(path, why, sizeof(why));
  cr_assert_not_null(t, "load %s: %s", path, why);
  return t;
}

/* Load `text` as a table: NULL expected, with a reason containing `want`. */
static void expect_bad(const char *text, const char *want) {
  char *path = cg_test_write_tmp("price", text);
  char why[256] = "untouched";
  struct cg_prices *t = cg_prices_load(path, why, sizeof(why));
  cr_expect_null(t, "table loaded: %s", text);
  cr_expect_neq(strstr(why, want), NULL, "reason \"%s\" lacks \"%s\"", why, want);
  cg_prices_free(t);
  unlink(path);
  free(path);
}

static void expect_price(const struct cg_prices *t, const char *model, double in,
                         double cached, double out) {
  struct cg_price p;
  cr_assert_eq(cg_prices_lookup(t, model, &p), 1, "%s unknown", model);
  cr_expect_float_eq(p.input, in, 1e-12, "%s input %g", model, p.input);
  cr_expect_float_eq(p.cached_input, cached, 1e-12, "%s cached %g", model, p.cached_input);
  cr_expect_float_eq(p.output, out, 1e-12, "%s output %g", model, p.output);
}

Test(price, shipped_table_is_dated) {
  struct cg_prices *t = load_shipped();
  const char *d = cg_prices_date(t);
  int y, m, day;
  cr_assert_not_null(d);
  cr_expect_eq(strlen(d), 10);
  cr_expect_eq(sscanf(d, "%4d-%2d-%2d", &y, &m, &day), 3, "date %s", d);
  cr_expect_geq(y, 2025);
  cg_prices_free(t);
}

Test(price, shipped_table_covers_mainstream_models) {
  static const char *const models[] = {
    "gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "o1", "o3",
    "o3-mini", "o4-mini", "o3-pro", "o1-pro", "claude-opus-4-20250514",
    "claude-sonnet-4-20250514", "claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5",
    "claude-3-7-sonnet-20250219", "gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite",
    "gemini-2.0-flash", NULL};
  struct cg_prices *t = load_shipped();
  size_t i;
  for (i = 0; models[i]; i++) {
    struct cg_price p;
    cr_expect_eq(cg_prices_lookup(t, models[i], &p), 1, "%s unknown", models[i]);
    cr_expect_gt(p.input, 0, "%s", models[i]);
    cr_expect_gt(p.output, 0, "%s", models[i]);
    cr_expect_leq(p.cached_input, p.input, "%s", models[i]);
  }
  cg_prices_free(t);
}

Test(price, dated_variants_match_their_family) {
  struct cg_prices *t = load_shipped();
  struct cg_price p;

  expect_price(t, "gpt-4o-2024-08-06", 2.50, 1.25, 10.00);
  expect_price(t, "gpt-4o-2024-11-20", 2.50, 1.25, 10.00);
  expect_price(t, "gpt-4.1-2025-04-14", 2.00, 0.50, 8.00);
  expect_price(t, "gpt-4.1-mini-2025-04-14", 0.40, 0.10, 1.60);
  expect_price(t, "o3-2025-04-16", 2.00, 0.50, 8.00);
  expect_price(t, "o4-mini-2025-04-16", 1.10, 0.275, 4.40);
  expect_price(t, "claude-sonnet-4-20250514", 3.00, 0.30, 15.00);
  expect_price(t, "claude-opus-4-20250514", 15.00, 1.50, 75.00);
  /* snapshots LiteLLM does not list yet: priced as their family by its dated glob */
  expect_price(t, "gpt-4o-2099-01-01", 2.50, 1.25, 10.00);
  expect_price(t, "claude-sonnet-4-5-20991231", 3.00, 0.30, 15.00);
  /* a snapshot LiteLLM prices apart is priced as listed, not as its family */
  expect_price(t, "gemini-2.0-flash-001", 0.15, 0.0375, 0.60);
  expect_price(t, "gemini-2.0-flash", 0.10, 0.025, 0.40);

  /* Anthropic's cache writes are priced apart; the others' are not. */
  cr_assert_eq(cg_prices_lookup(t, "claude-sonnet-4-20250514", &p), 1);
  cr_expect_float_eq(p.cache_write, 3.75, 1e-12);
  cr_assert_eq(cg_prices_lookup(t, "gpt-4o", &p), 1);
  cr_expect_lt(p.cache_write, 0);
  cg_prices_free(t);
}

Test(price, specific_patterns_win_over_general_ones) {
  struct cg_prices *t = load_shipped();
  expect_price(t, "gpt-4o-mini-2024-07-18", 0.15, 0.075, 0.60);
  expect_price(t, "gpt-4o-mini", 0.15, 0.075, 0.60);
  expect_price(t, "gpt-4.1-nano-2025-04-14", 0.10, 0.025, 0.40);
  expect_price(t, "o3-mini-2025-01-31", 1.10, 0.55, 4.40);
  expect_price(t, "o1-2024-12-17", 15.00, 7.50, 60.00);
  expect_price(t, "gemini-2.5-flash-lite", 0.10, 0.01, 0.40);
  expect_price(t, "gpt-4o-2024-05-13", 5.00, 5.00, 15.00);
  /* Opus 4.5 and later cost a third of Opus 4 and 4.1: no family glob may mix them */
  expect_price(t, "claude-opus-4-5", 5.00, 0.50, 25.00);
  expect_price(t, "claude-opus-4-1-20250805", 15.00, 1.50, 75.00);
  cg_prices_free(t);
}

Test(price, siblings_of_a_family_are_not_guessed) {
  struct cg_prices *t = load_shipped();
  /* not in the table (LiteLLM no longer lists them): unknown, not priced as o1 / Claude */
  cr_expect_eq(cg_prices_lookup(t, "o1-mini", NULL), 0);
  cr_expect_eq(cg_prices_lookup(t, "claude-3-5-sonnet-20241022", NULL), 0);
  cr_expect_eq(cg_prices_lookup(t, "gpt-4o-realtime-preview", NULL), 0);
  cr_expect_eq(cg_prices_lookup(t, "mock-model", NULL), 0);
  cg_prices_free(t);
}

Test(price, lookup_ignores_case) {
  struct cg_prices *t = load_shipped();
  expect_price(t, "GPT-4o-Mini", 0.15, 0.075, 0.60);
  expect_price(t, "Claude-Sonnet-4-20250514", 3.00, 0.30, 15.00);
  cg_prices_free(t);
}

Test(price, gateway_prefixes_are_dropped) {
  struct cg_prices *t = load_shipped();
  expect_price(t, "openai/gpt-4o-mini", 0.15, 0.075, 0.60);
  expect_price(t, "openrouter/anthropic/claude-sonnet-4-20250514", 3.00, 0.30, 15.00);
  cr_expect_eq(cg_prices_lookup(t, "openai/", NULL), 0);
  cr_expect_eq(cg_prices_lookup(t, "gpt-4o-mini/x", NULL), 0);
  cg_prices_free(t);
}

Test(price, unknown_model_has_no_price_and_nan_cost) {
  struct cg_prices *t = load_shipped();
  struct cg_price p = {1, 1, 1, 1};
  cr_expect_eq(cg_prices_lookup(t, "llama-3-70b", &p), 0);
  cr_expect_eq(cg_prices_lookup(t, "gpt-3.5-turbo", &p), 0);
  cr_expect_eq(cg_prices_lookup(t, "", &p), 0);
  cr_expect_eq(cg_prices_lookup(t, NULL, &p), 0);
  cr_expect_eq(cg_prices_lookup(NULL, "gpt-4o", &p), 0);
  cr_expect(isnan(cg_price_cost(NULL, 1000, 0, 0, 1000)));
  cg_prices_free(t);
}

static const char small_table[] =
  "{\"date\": \"2025-01-02\", \"currency\": \"USD\", \"unit\": \"per 1M tokens\",\n"
  " \"models\": [\n"
  "  {\"match\": \"m-mini*\", \"input\": 1, \"cached_input\": 0.25, \"output\": 4},\n"
  "  {\"match\": \"m*\", \"input\": 2, \"cached_input\": 0.5, \"cache_write\": 2.5,"
  " \"output\": 8},\n"
  "  {\"match\": \"plain\", \"input\": 3, \"output\": 6}\n"
  " ]}\n";

Test(price, cost_arithmetic_is_exact) {
  char *path = cg_test_write_tmp("price", small_table);
  char why[256];
  struct cg_prices *t = cg_prices_load(path, why, sizeof(why));
  struct cg_price p;

  cr_assert_not_null(t, "%s", why);
  cr_expect_str_eq(cg_prices_date(t), "2025-01-02");

  cr_assert_eq(cg_prices_lookup(t, "m-large", &p), 1);
  /* (700000 * 2 + 200000 * 0.5 + 100000 * 2.5 + 500000 * 8) / 1e6 */
  cr_expect_eq(cg_price_cost(&p, 1000000, 200000, 100000, 500000), 5.75);
  /* unknown cached / cache-write counts as 0: all input at the plain rate */
  cr_expect_eq(cg_price_cost(&p, 1000000, -1, -1, 0), 2.0);
  cr_expect_eq(cg_price_cost(&p, 0, 0, 0, 0), 0.0);
  /* unknown input or output: no cost */
  cr_expect(isnan(cg_price_cost(&p, -1, 0, 0, 10)));
  cr_expect(isnan(cg_price_cost(&p, 10, 0, 0, -1)));

  cr_assert_eq(cg_prices_lookup(t, "m-mini-1", &p), 1);
  cr_expect_eq(cg_price_cost(&p, 1000000, 0, 0, 1000000), 5.0);
  cr_expect_eq(cg_price_cost(&p, 2000000, 1000000, 0, 0), 1.25);

  /* no cache_write price: writes at the input rate; no cached_input: reads too */
  cr_assert_eq(cg_prices_lookup(t, "plain", &p), 1);
  cr_expect_lt(p.cache_write, 0);
  cr_expect_eq(p.cached_input, 3.0);
  cr_expect_eq(cg_price_cost(&p, 1000000, 0, 500000, 1000000), 9.0);
  cr_expect_eq(cg_prices_lookup(t, "plainer", &p), 0);

  cg_prices_free(t);
  unlink(path);
  free(path);
}

Test(price, malformed_tables_are_refused_with_a_reason) {
  char why[256] = "";
  expect_bad("this is not json", "not a JSON object");
  expect_bad("[1, 2]", "not a JSON object");
  expect_bad("{\"date\": \"2025-01-01\"}", "\"models\"");
  expect_bad("{\"date\": \"2025-01-01\", \"models\": []}", "\"models\"");
  expect_bad("{\"date\": \"2025-01-01\", \"models\": {}}", "\"models\"");
  expect_bad("{\"models\": [{\"match\": \"a*\", \"input\": 1, \"output\": 1}]}", "\"date\"");
  expect_bad("{\"date\": \"2025-01-01\", \"models\": [{\"match\": \"a*\", \"input\": -1,"
             " \"output\": 1}]}", "\"input\"");
  expect_bad("{\"date\": \"2025-01-01\", \"models\": [{\"match\": \"a*\", \"input\": 1,"
             " \"cached_input\": -0.5, \"output\": 1}]}", "\"cached_input\"");
  expect_bad("{\"date\": \"2025-01-01\", \"models\": [{\"match\": \"a*\", \"input\": 1,"
             " \"output\": \"cheap\"}]}", "\"output\"");
  expect_bad("{\"date\": \"2025-01-01\", \"models\": [{\"match\": \"a*\", \"input\": 1}]}",
             "\"output\" missing");
  expect_bad("{\"date\": \"2025-01-01\", \"models\": [{\"input\": 1, \"output\": 1}]}",
             "\"match\"");
  expect_bad("{\"date\": \"2025-01-01\", \"models\": [{\"match\": \"a\", \"input\": 1,"
             " \"output\": 1}, 7]}", "models[1]");

  cr_expect_null(cg_prices_load("/nonexistent/prices.json", why, sizeof(why)));
  cr_expect_neq(strstr(why, "No such file"), NULL, "%s", why);
  cr_expect_null(cg_prices_load("/tmp", why, sizeof(why)));
  cr_expect_neq(strstr(why, "regular file"), NULL, "%s", why);
  cr_expect_null(cg_prices_load(NULL, NULL, 0));
}
