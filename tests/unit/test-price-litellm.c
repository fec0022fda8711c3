/* test-price-litellm.c - the LiteLLM reader of the price table (price.h, SPEC section 8):
 * tiny hand-written files in LiteLLM's model_prices_and_context_window.json format, with
 * malformed and non-chat entries, and the committed excerpt of the real file
 * (tests/data/litellm-excerpt.json under $CG_ROOT, default the current directory). */
#include "price.h"

#include "tmpfile.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static struct cg_prices *load_text(const char *text, char **path) {
  char why[256];
  struct cg_prices *t;
  *path = cg_test_write_tmp("litellm", text);
  t = cg_prices_load(*path, why, sizeof(why));
  cr_assert_not_null(t, "load: %s", why);
  return t;
}

static void done(struct cg_prices *t, char *path) {
  cg_prices_free(t);
  unlink(path);
  free(path);
}

static void expect_price(const struct cg_prices *t, const char *model, double in,
                         double cached, double cw, double out) {
  struct cg_price p;
  cr_assert_eq(cg_prices_lookup(t, model, &p), 1, "%s unknown", model);
  cr_expect_float_eq(p.input, in, 1e-12, "%s input %.17g", model, p.input);
  cr_expect_float_eq(p.cached_input, cached, 1e-12, "%s cached %.17g", model, p.cached_input);
  cr_expect_float_eq(p.cache_write, cw, 1e-12, "%s cache_write %.17g", model, p.cache_write);
  cr_expect_float_eq(p.output, out, 1e-12, "%s output %.17g", model, p.output);
}

static void expect_unknown(const struct cg_prices *t, const char *model) {
  struct cg_price p = {1, 1, 1, 1};
  cr_expect_eq(cg_prices_lookup(t, model, &p), 0, "%s priced: %g", model, p.input);
}

static const char basic[] =
  "{\n"
  " \"sample_spec\": {\"input_cost_per_token\": 0.0, \"output_cost_per_token\": 0.0,\n"
  "   \"litellm_provider\": \"one of https://docs.litellm.ai/docs/providers\",\n"
  "   \"mode\": \"one of: chat, embedding, completion\", \"max_tokens\": \"LEGACY\"},\n"
  " \"m-chat\": {\"input_cost_per_token\": 2.5e-06, \"output_cost_per_token\": 1e-05,\n"
  "   \"cache_read_input_token_cost\": 1.25e-06, \"litellm_provider\": \"openai\",\n"
  "   \"mode\": \"chat\", \"input_cost_per_token_batches\": 1.25e-06},\n"
  " \"m-claude\": {\"input_cost_per_token\": 3e-06, \"output_cost_per_token\": 1.5e-05,\n"
  "   \"cache_read_input_token_cost\": 3e-07, \"cache_creation_input_token_cost\": 3.75e-06,\n"
  "   \"litellm_provider\": \"anthropic\", \"mode\": \"chat\"},\n"
  " \"m-nomode\": {\"input_cost_per_token\": 1e-06, \"output_cost_per_token\": 2e-06},\n"
  " \"m-resp\": {\"input_cost_per_token\": 0.00015, \"output_cost_per_token\": 0.0006,\n"
  "   \"litellm_provider\": \"openai\", \"mode\": \"responses\"},\n"
  " \"m-free\": {\"input_cost_per_token\": 0, \"output_cost_per_token\": 0,\n"
  "   \"mode\": \"completion\"},\n"
  " \"m-embed\": {\"input_cost_per_token\": 1e-07, \"output_cost_per_token\": 0.0,\n"
  "   \"mode\": \"embedding\"},\n"
  " \"m-image\": {\"mode\": \"image_generation\", \"output_cost_per_image\": 0.04},\n"
  " \"m-voice\": {\"input_cost_per_token\": 5e-06, \"output_cost_per_token\": 2e-05,\n"
  "   \"mode\": \"realtime\"}\n"
  "}\n";

Test(litellm, per_token_prices_become_per_million) {
  char *path;
  struct cg_prices *t = load_text(basic, &path);

  expect_price(t, "m-chat", 2.5, 1.25, -1, 10.0);       /* no cache-write price: as input */
  expect_price(t, "m-claude", 3.0, 0.3, 3.75, 15.0);
  expect_price(t, "m-nomode", 1.0, 1.0, -1, 2.0);       /* no cache-read price: as input */
  expect_price(t, "m-resp", 150.0, 150.0, -1, 600.0);
  expect_price(t, "m-free", 0, 0, -1, 0);
  /* exactly: 2.5e-06 * 1e6 is 2.4999999999999996 before rounding */
  {
    struct cg_price p;
    cr_assert_eq(cg_prices_lookup(t, "m-chat", &p), 1);
    cr_expect_eq(p.input, 2.5);
    cr_expect_eq(cg_price_cost(&p, 1000000, 0, 0, 1000000), 12.5);
  }
  expect_price(t, "M-CLAUDE", 3.0, 0.3, 3.75, 15.0);    /* case-insensitive */
  done(t, path);
}

Test(litellm, sample_spec_and_non_chat_modes_are_not_models) {
  char *path;
  struct cg_prices *t = load_text(basic, &path);
  expect_unknown(t, "sample_spec");
  expect_unknown(t, "m-embed");
  expect_unknown(t, "m-image");
  expect_unknown(t, "m-voice");
  expect_unknown(t, "m");
  expect_unknown(t, "");
  expect_unknown(t, NULL);
  done(t, path);
}

Test(litellm, the_date_is_the_files) {
  char *path = cg_test_write_tmp("litellm", basic), why[256];
  struct tm tm = {.tm_year = 2025 - 1900, .tm_mon = 2, .tm_mday = 4, .tm_hour = 12};
  struct timeval tv[2] = {{timegm(&tm), 0}, {timegm(&tm), 0}};
  struct cg_prices *t;

  cr_assert_eq(utimes(path, tv), 0);
  t = cg_prices_load(path, why, sizeof(why));
  cr_assert_not_null(t, "%s", why);
  cr_expect_str_eq(cg_prices_date(t), "2025-03-04");
  done(t, path);
}

static const char malformed[] =
  "{\n"
  " \"ok\": {\"input_cost_per_token\": 1e-06, \"output_cost_per_token\": 2e-06},\n"
  " \"str\": {\"input_cost_per_token\": \"1e-06\", \"output_cost_per_token\": 2e-06},\n"
  " \"neg\": {\"input_cost_per_token\": -1e-06, \"output_cost_per_token\": 2e-06},\n"
  " \"huge\": {\"input_cost_per_token\": 1e308, \"output_cost_per_token\": 2e-06},\n"
  " \"nulls\": {\"input_cost_per_token\": null, \"output_cost_per_token\": 2e-06},\n"
  " \"bool\": {\"input_cost_per_token\": true, \"output_cost_per_token\": 2e-06},\n"
  " \"no-out\": {\"input_cost_per_token\": 1e-06},\n"
  " \"no-in\": {\"output_cost_per_token\": 1e-06, \"litellm_provider\": \"openai\"},\n"
  " \"bad-cache\": {\"input_cost_per_token\": 1e-06, \"output_cost_per_token\": 2e-06,\n"
  "   \"cache_read_input_token_cost\": -5},\n"
  " \"bad-write\": {\"input_cost_per_token\": 1e-06, \"output_cost_per_token\": 2e-06,\n"
  "   \"cache_creation_input_token_cost\": [1]},\n"
  " \"bad-mode\": {\"input_cost_per_token\": 1e-06, \"output_cost_per_token\": 2e-06,\n"
  "   \"mode\": 7},\n"
  " \"number\": 12,\n"
  " \"array\": [1e-06, 2e-06],\n"
  " \"text\": \"chat\",\n"
  " \"\": {\"input_cost_per_token\": 1e-06, \"output_cost_per_token\": 2e-06},\n"
  " \"ok-too\": {\"input_cost_per_token\": 4e-06, \"output_cost_per_token\": 8e-06,\n"
  "   \"litellm_provider\": 42, \"deprecation_date\": 2026}\n"
  "}\n";

Test(litellm, malformed_entries_are_skipped_not_fatal) {
  static const char *const bad[] = {"str", "neg", "huge", "nulls", "bool", "no-out", "no-in",
                                    "bad-cache", "bad-write", "bad-mode", "number", "array",
                                    "text", NULL};
  char *path;
  struct cg_prices *t = load_text(malformed, &path);
  size_t i;

  expect_price(t, "ok", 1.0, 1.0, -1, 2.0);
  expect_price(t, "ok-too", 4.0, 4.0, -1, 8.0); /* a provider that is not a string: ignored */
  for (i = 0; bad[i]; i++)
    expect_unknown(t, bad[i]);
  done(t, path);
}

Test(litellm, a_file_with_no_usable_entry_is_refused) {
  static const char *const files[] = {
    "{\"sample_spec\": {\"input_cost_per_token\": 0.0, \"output_cost_per_token\": 0.0}}",
    "{\"e\": {\"input_cost_per_token\": 1e-07, \"output_cost_per_token\": 0,"
    " \"mode\": \"embedding\"}}",
    "{\"x\": {\"litellm_provider\": \"openai\", \"input_cost_per_token\": \"free\","
    " \"output_cost_per_token\": 1}}",
    NULL};
  for (size_t i = 0; files[i]; i++) {
    char *path = cg_test_write_tmp("litellm", files[i]), why[256] = "";
    struct cg_prices *t = cg_prices_load(path, why, sizeof(why));
    cr_expect_null(t, "loaded: %s", files[i]);
    cr_expect_neq(strstr(why, "no chat model"), NULL, "reason: %s", why);
    cg_prices_free(t);
    unlink(path);
    free(path);
  }
}

Test(litellm, neither_format_is_refused_with_a_reason) {
  char *path = cg_test_write_tmp("litellm", "{\"foo\": 1, \"bar\": {\"baz\": 2}}"), why[256] = "";
  cr_expect_null(cg_prices_load(path, why, sizeof(why)));
  cr_expect_neq(strstr(why, "date"), NULL, "reason: %s", why); /* taken for our format */
  unlink(path);
  free(path);
}

static const char prefixed[] =
  "{\n"
  " \"gemini/gem-x\": {\"input_cost_per_token\": 1e-06, \"output_cost_per_token\": 4e-06,\n"
  "   \"litellm_provider\": \"gemini\", \"mode\": \"chat\"},\n"
  " \"gem-x\": {\"input_cost_per_token\": 9e-06, \"output_cost_per_token\": 9e-06,\n"
  "   \"litellm_provider\": \"vertex_ai-language-models\", \"mode\": \"chat\"},\n"
  " \"azure/gpt-y\": {\"input_cost_per_token\": 7e-06, \"output_cost_per_token\": 7e-06,\n"
  "   \"litellm_provider\": \"azure\", \"mode\": \"chat\"},\n"
  " \"gpt-y\": {\"input_cost_per_token\": 2e-06, \"output_cost_per_token\": 8e-06,\n"
  "   \"litellm_provider\": \"openai\", \"mode\": \"chat\"},\n"
  " \"azure/only-azure\": {\"input_cost_per_token\": 3e-06, \"output_cost_per_token\": 3e-06,\n"
  "   \"litellm_provider\": \"azure\", \"mode\": \"chat\"},\n"
  " \"vertex_ai/gem-z\": {\"input_cost_per_token\": 5e-06, \"output_cost_per_token\": 5e-06,\n"
  "   \"litellm_provider\": \"vertex_ai\", \"mode\": \"chat\"},\n"
  " \"openrouter/vendor/m-r\": {\"input_cost_per_token\": 6e-06,\n"
  "   \"output_cost_per_token\": 6e-06, \"litellm_provider\": \"openrouter\"},\n"
  " \"other/m-o\": {\"input_cost_per_token\": 6e-06, \"output_cost_per_token\": 6e-06,\n"
  "   \"litellm_provider\": \"not-other\"},\n"
  " \"c-3-20250219\": {\"input_cost_per_token\": 3e-06, \"output_cost_per_token\": 1.5e-05,\n"
  "   \"litellm_provider\": \"anthropic\"}\n"
  "}\n";

Test(litellm, provider_prefixed_keys_and_who_wins) {
  char *path;
  struct cg_prices *t = load_text(prefixed, &path);

  /* the Gemini API's own entry beats Vertex's bare one for the bare name */
  expect_price(t, "gem-x", 1.0, 1.0, -1, 4.0);
  expect_price(t, "gemini/gem-x", 1.0, 1.0, -1, 4.0);
  /* OpenAI's own entry beats Azure's prefixed one; Azure's full key still answers */
  expect_price(t, "gpt-y", 2.0, 2.0, -1, 8.0);
  expect_price(t, "azure/gpt-y", 7.0, 7.0, -1, 7.0);
  /* a prefixed entry with no rival answers to its bare name */
  expect_price(t, "only-azure", 3.0, 3.0, -1, 3.0);
  expect_price(t, "gem-z", 5.0, 5.0, -1, 5.0);           /* vertex_ai for vertex_ai/ */
  expect_price(t, "vendor/m-r", 6.0, 6.0, -1, 6.0);      /* a re-seller's own route */
  /* a prefix that does not name the entry's provider is part of the name */
  expect_price(t, "other/m-o", 6.0, 6.0, -1, 6.0);
  expect_unknown(t, "m-o");
  done(t, path);
}

Test(litellm, gateway_prefixes_and_dated_snapshots_of_the_caller) {
  char *path;
  struct cg_prices *t = load_text(prefixed, &path);

  expect_price(t, "openai/gpt-y", 2.0, 2.0, -1, 8.0);    /* gateway prefix dropped */
  expect_price(t, "models/gem-x", 1.0, 1.0, -1, 4.0);
  expect_price(t, "a/b/gpt-y", 2.0, 2.0, -1, 8.0);
  expect_price(t, "gpt-y-2099-01-01", 2.0, 2.0, -1, 8.0); /* unlisted snapshots */
  expect_price(t, "gpt-y-20990101", 2.0, 2.0, -1, 8.0);
  expect_price(t, "gpt-y-latest", 2.0, 2.0, -1, 8.0);
  expect_price(t, "gem-x-001", 1.0, 1.0, -1, 4.0);
  expect_price(t, "openai/gpt-y-2099-01-01", 2.0, 2.0, -1, 8.0);
  expect_price(t, "c-3-20250219", 3.0, 3.0, -1, 15.0);
  expect_unknown(t, "gpt-y-mini");                      /* a sibling: not guessed */
  expect_unknown(t, "gpt-y-2099");
  expect_unknown(t, "c-3");                             /* no date to drop from the query */
  expect_unknown(t, "gpt-y/");
  {
    char longname[CG_PRICES_NAME_MAX + 40];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    expect_unknown(t, longname);
  }
  done(t, path);
}

Test(litellm, the_committed_excerpt_of_the_real_file) {
  const char *root = getenv("CG_ROOT");
  char path[4096], why[256];
  struct cg_prices *t;

  snprintf(path, sizeof(path), "%s/tests/data/litellm-excerpt.json",
           root && *root ? root : ".");
  t = cg_prices_load(path, why, sizeof(why));
  cr_assert_not_null(t, "load %s: %s", path, why);
  expect_price(t, "gpt-4o", 2.5, 1.25, -1, 10.0);
  expect_price(t, "gpt-4o-mini", 0.15, 0.075, -1, 0.6);
  expect_price(t, "claude-sonnet-4-20250514", 3.0, 0.3, 3.75, 15.0);
  expect_price(t, "gemini-2.5-pro", 1.25, 0.125, -1, 10.0);
  expect_price(t, "o1-pro", 150.0, 150.0, -1, 600.0);    /* mode responses */
  expect_price(t, "gpt-3.5-turbo-instruct", 1.5, 1.5, -1, 2.0); /* mode completion */
  expect_price(t, "gemini-3.1-pro-preview", 2.0, 0.2, -1, 12.0); /* only as gemini/... */
  expect_unknown(t, "gpt-4o-realtime-preview");          /* realtime */
  expect_unknown(t, "gpt-4o-transcribe");                /* audio_transcription */
  expect_unknown(t, "gemini-2.5-flash-image");           /* image_generation */
  expect_unknown(t, "cohere.embed-english-v3");          /* embedding */
  expect_unknown(t, "sample_spec");
  cg_prices_free(t);
}
