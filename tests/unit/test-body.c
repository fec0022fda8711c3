/* test-body.c - model and token estimate from JSON request bodies (src/body.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"

struct body_case {
  const char *body;
  const char *model; /* NULL: none */
  int64_t tokens;    /* -1: left alone */
};

static const struct body_case cases[] = {
  /* "hello there!" = 12 chars -> 3 tokens; role "user" 4 chars -> 1: (16+3)/4 = 4 */
  {"{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"hello there!\"}]}",
   "gpt-4o-mini", 4},
  /* output limits add up to the estimate: the largest one wins */
  {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"abcdefgh\"}],\"max_tokens\":100}",
   "m", (4 + 8 + 3) / 4 + 100},
  {"{\"model\":\"o3\",\"input\":\"abcd\",\"max_output_tokens\":50,\"max_tokens\":10}", "o3",
   1 + 50},
  {"{\"contents\":[{\"parts\":[{\"text\":\"abcdefgh\"}]}],"
   "\"generationConfig\":{\"maxOutputTokens\":64}}",
   NULL, 2 + 64},
  /* UTF-8: characters, not bytes ("\xc3\xa9" is one character) */
  {"{\"model\":\"m\",\"prompt\":\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}", "m", 1},
  /* Found by fuzzing: an output limit beyond int64 was a float-to-integer overflow (UB);
   * it counts as CG_BODY_OUTPUT_MAX.  Negative ones are no limit. */
  {"{\"model\":\"m\",\"max_tokens\":1e300}", "m", CG_BODY_OUTPUT_MAX},
  {"{\"max_completion_tokens\":9223372036854775808}", NULL, CG_BODY_OUTPUT_MAX},
  {"{\"generationConfig\":{\"maxOutputTokens\":1e20}}", NULL, CG_BODY_OUTPUT_MAX},
  {"{\"max_tokens\":-1e300}", NULL, 0},
  /* Python's json.dumps: a blank after each ':' and ',' (body.c cg__ws_sep), the same
   * facts as the first case; other blanks there, and a body that ends in them */
  {"{\"model\": \"gpt-4o-mini\", \"messages\": [{\"role\": \"user\", \"content\": "
   "\"hello there!\"}]}",
   "gpt-4o-mini", 4},
  {"{\"model\":  \"m\" ,\t\"max_tokens\":\n 7 , \"x\":[ 1, 2 ]}", "m", 7},
  {"{\"model\": \"m\", ", NULL, -1},
  {"{\"model\": ", NULL, -1},
  {"{\"model\":\"m\",\"max_tokens\": 5}", "m", 5},
  /* not JSON objects: nothing */
  {"model=gpt-4o&x=1", NULL, -1},
  {"[1,2,3]", NULL, -1},
  {"{\"model\":", NULL, -1},
  {"", NULL, -1},
};

/* cg_body_facts with the interface these tests were written for: `*model` gets a malloc'd
 * copy of the model it found, or is left alone. */
static void facts(const char *body, size_t len, char **model, int64_t *tokens) {
  char buf[CG_BODY_MODEL_SIZE] = "";
  cg_body_facts(body, len, buf, tokens);
  if (buf[0])
    *model = strdup(buf);
}

/* cg_body_model_from_path's model as a malloc'd copy, or NULL. */
static char *path_model(const char *path) {
  char buf[CG_BODY_MODEL_SIZE];
  return cg_body_model_from_path(path, buf) ? strdup(buf) : NULL;
}

/* The caller's buffer: written only when a model is found, and then NUL-terminated;
 * nothing is allocated, so a call that finds none leaves what the caller put there. */
Test(body, model_buffer_is_written_only_when_found) {
  char buf[CG_BODY_MODEL_SIZE];
  int64_t tokens = -1;

  memset(buf, 'z', sizeof(buf));
  cg_body_facts("{\"prompt\":\"abcd\"}", 17, buf, &tokens);
  cr_expect_eq(buf[0], 'z', "no model: the buffer is left alone");
  cr_expect_eq(buf[sizeof(buf) - 1], 'z');
  cr_expect_eq(tokens, 1);
  cg_body_facts("{\"model\":\"gpt-4o\"}", 18, buf, &tokens);
  cr_expect_str_eq(buf, "gpt-4o");
  cr_expect_eq(buf[7], 'z', "nothing written past the model's NUL");
  memset(buf, 'z', sizeof(buf));
  cr_expect_eq(cg_body_model_from_path("/v1/chat/completions", buf), 0);
  cr_expect_eq(buf[0], 'z');
  cr_expect_eq(cg_body_model_from_path("/v1beta/models/gemini-2.5-flash:x", buf), 1);
  cr_expect_str_eq(buf, "gemini-2.5-flash");
}

Test(body, facts_table) {
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char *model = NULL;
    int64_t tokens = -1;
    facts(cases[i].body, strlen(cases[i].body), &model, &tokens);
    if (cases[i].model)
      cr_expect(model && strcmp(model, cases[i].model) == 0, "case %zu: model %s", i,
                model ? model : "(null)");
    else
      cr_expect_null(model, "case %zu: model %s", i, model);
    cr_expect_eq(tokens, cases[i].tokens, "case %zu: tokens %lld, want %lld", i,
                 (long long) tokens, (long long) cases[i].tokens);
    free(model);
  }
}

Test(body, leading_whitespace_and_exact_length) {
  const char text[] = "  \n{\"model\":\"x\"}GARBAGE";
  char *model = NULL;
  int64_t tokens = -1;
  /* Only the first `len` bytes count: the body is not NUL-terminated in libcurl's hands. */
  facts(text, strlen(text) - strlen("GARBAGE"), &model, &tokens);
  cr_assert(model && strcmp(model, "x") == 0);
  cr_expect_eq(tokens, 0);
  free(model);
}

Test(body, oversized_bodies_are_not_parsed) {
  size_t len = (size_t) CG_BODY_PARSE_MAX + 1;
  char *big = malloc(len);
  char *model = NULL;
  int64_t tokens = -1;
  cr_assert_not_null(big);
  memset(big, ' ', len);
  memcpy(big, "{\"model\":\"x\"}", 13);
  facts(big, len, &model, &tokens);
  cr_expect_null(model);
  cr_expect_eq(tokens, -1);
  free(big);
}

/* Gemini and Vertex AI name the model in the path, not in the body. */
Test(body, model_from_path) {
  static const struct {
    const char *path, *want;
  } paths[] = {
    {"/v1beta/models/gemini-2.5-flash:generateContent", "gemini-2.5-flash"},
    {"/v1beta/models/gemini-2.5-pro:streamGenerateContent", "gemini-2.5-pro"},
    {"/v1/projects/p1/locations/us-central1/publishers/google/models/gemini-2.0-flash-001"
     ":generateContent", "gemini-2.0-flash-001"},
    {"/v1/projects/p/locations/l/publishers/anthropic/models/claude-3-5-sonnet@20240620"
     ":rawPredict", "claude-3-5-sonnet@20240620"},
    {"/v1beta/models/gemini-2.5-flash", "gemini-2.5-flash"},
    {"/v1/chat/completions", NULL},
    {"/v1/models", NULL},
    {"/v1/models/", NULL},
    {"/v1/models/a/b", NULL},
    {"/v1/models/bad%20name:generateContent", NULL},
  };
  size_t i;
  for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
    char *m = path_model(paths[i].path);
    if (paths[i].want)
      cr_expect(m && strcmp(m, paths[i].want) == 0, "%s -> %s", paths[i].path, m ? m : "NULL");
    else
      cr_expect_null(m, "%s -> %s", paths[i].path, m ? m : "NULL");
    free(m);
  }
}

/* The scanner's odd cases (issue 16: no cJSON tree; cJSON 1.7.15's meaning kept). */
#define BZ10 "0000000000"
#define BZ100 BZ10 BZ10 BZ10 BZ10 BZ10 BZ10 BZ10 BZ10 BZ10 BZ10
static const struct body_case odd_cases[] = {
  /* a "model" member is never prompt text, at any depth, whatever its value */
  {"{\"messages\":[{\"role\":\"user\",\"content\":\"abcd\",\"model\":\"xxxxxxxx\"}]}", NULL,
   (4 + 4 + 3) / 4},
  {"{\"model\":{\"a\":\"xxxxxxxx\"},\"p\":\"abcd\"}", NULL, 1},
  {"{\"model\":[\"xxxxxxxx\",{\"b\":\"yyyy\"}],\"p\":\"a\"}", NULL, 1},
  /* names are not text */
  {"{\"abcdefghijkl\":1,\"k\":true,\"n\":null,\"f\":false}", NULL, 0},
  /* the first member of a name counts */
  {"{\"model\":\"a\",\"model\":\"bbbbbbbb\"}", "a", 0},
  {"{\"max_tokens\":\"100\",\"max_tokens\":50}", NULL, (3 + 3) / 4},
  {"{\"generationConfig\":{\"maxOutputTokens\":10},\"generationConfig\":{\"maxOutputTokens\":99}}",
   NULL, 10},
  {"{\"generationConfig\":[{\"maxOutputTokens\":10}]}", NULL, 0},
  {"{\"x\":{\"generationConfig\":{\"maxOutputTokens\":10},\"max_tokens\":20}}", NULL, 0},
  /* escapes are decoded before counting; a \u0000 ends the string */
  {"{\"prompt\":\"\\u00e9\\n\\\"x\"}", NULL, 1},
  {"{\"prompt\":\"ab\\u0000cdefghij\"}", NULL, 1},
  {"{\"model\":\"m\\u0000xyz\"}", "m", 0},
  {"{\"model\":\"\",\"p\":\"abcd\"}", NULL, 1},
  /* numbers as strtod reads them */
  {"{\"max_tokens\":12.7}", NULL, 12},
  {"{\"max_tokens\":1e2,\"max_output_tokens\":-0}", NULL, 100},
  {"{\"max_tokens\":" BZ100 "7}", NULL, 7},
  /* bytes after the object are ignored; any byte up to 0x20 is whitespace inside */
  {"{\"model\":\"m\"}xyz", "m", 0},
  {"{\x01\"model\"\x1f:\"m\"}", "m", 0},
  /* anything cJSON refused: nothing */
  {"{\"model\":\"m\",\"x\":\"\\q\"}", NULL, -1},
  {"{\"model\":\"m\",\"x\":\"\\udc00\"}", NULL, -1},
  {"{\"model\":\"m\",\"x\":1e}", NULL, -1},
  {"{\"model\":\"m\",}", NULL, -1},
  {"{\"model\":\"m\"", NULL, -1},
  {"{\"model\":\"m\\\"}", NULL, -1},
  {"\x01{\"model\":\"m\"}", NULL, -1},
};

Test(body, odd_cases) {
  size_t i;
  for (i = 0; i < sizeof(odd_cases) / sizeof(odd_cases[0]); i++) {
    char *model = NULL;
    int64_t tokens = -1;
    facts(odd_cases[i].body, strlen(odd_cases[i].body), &model, &tokens);
    if (odd_cases[i].model)
      cr_expect(model && strcmp(model, odd_cases[i].model) == 0, "case %zu (%s): model %s", i,
                odd_cases[i].body, model ? model : "(null)");
    else
      cr_expect_null(model, "case %zu (%s): model %s", i, odd_cases[i].body, model);
    cr_expect_eq(tokens, odd_cases[i].tokens, "case %zu (%s): tokens %lld, want %lld", i,
                 odd_cases[i].body, (long long) tokens, (long long) odd_cases[i].tokens);
    free(model);
  }
}

/* A model name is kept up to 200 bytes; at most 1000 nested containers. */
Test(body, long_model_and_nesting_limit) {
  char body[5000], *model = NULL;
  int64_t tokens = -1;
  size_t i, n;
  memcpy(body, "{\"model\":\"", 10);
  memset(body + 10, 'm', 300);
  memcpy(body + 310, "\"}", 3);
  facts(body, strlen(body), &model, &tokens);
  cr_assert_not_null(model);
  cr_expect_eq(strlen(model), 200);
  free(model);
  for (n = 999; n <= 1000; n++) {
    char *w = body;
    model = NULL;
    tokens = -1;
    w += sprintf(w, "{\"model\":\"m\",\"x\":");
    for (i = 0; i < n; i++)
      *w++ = '[';
    for (i = 0; i < n; i++)
      *w++ = ']';
    *w++ = '}';
    facts(body, (size_t) (w - body), &model, &tokens);
    if (n == 999)
      cr_expect(model && tokens == 0, "999 arrays in the object: 1000 containers");
    else
      cr_expect(!model && tokens == -1, "1001 containers are refused");
    free(model);
  }
}

/* ---- the string fast paths (issue 16): every escape at every offset ---- */

/* Escapes and odd bytes in a string: as sent, and the characters they count for. */
static const struct {
  const char *raw;
  int chars;
} text_bits[] = {
  {"\\\"", 1}, {"\\\\", 1}, {"\\\\\\\"", 2}, {"\\n\\t", 2}, {"\\/", 1},
  {"\x01", 1}, {"\xc3\xa9", 1}, {"\xe2\x98\x95\xf0\x9f\x98\x80", 2}, {"\\u00e9", 1},
  {"\\ud83d\\ude00", 1}, {"\\u20ac\\u0041", 2}, {"", 0},
};

/* Each bit at every offset from a string's start, 0 to 100 (both sides of every 16-byte
 * block cg__plain reads at once), in the prompt text, in a name nobody reads and in the
 * model: the characters counted and the model kept are those of the decoded strings. */
Test(body, string_bits_at_every_offset) {
  size_t b, pad;
  for (b = 0; b < sizeof(text_bits) / sizeof(text_bits[0]); b++) {
    for (pad = 0; pad <= 100; pad++) {
      char body[1024], *model = NULL;
      int64_t tokens = -1, chars;
      size_t mpad = pad % 60;
      int n = snprintf(body, sizeof(body),
                       "{\"model\":\"%.*s%s\",\"messages\":[{\"role\":\"user\",\"content\":"
                       "\"%.*s%sz\"}],\"x%.*s%s\":true,\"max_tokens\":200}",
                       (int) mpad, "mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm",
                       text_bits[b].raw, (int) pad,
                       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                       text_bits[b].raw, (int) mpad,
                       "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk",
                       text_bits[b].raw);
      cr_assert_lt((size_t) n, sizeof(body));
      facts(body, (size_t) n, &model, &tokens);
      chars = 4 + (int64_t) pad + text_bits[b].chars + 1; /* "user" and the content */
      cr_expect_eq(tokens, (chars + 3) / 4 + 200, "bit %zu at %zu: tokens %lld, want %lld", b,
                   pad, (long long) tokens, (long long) ((chars + 3) / 4 + 200));
      cr_expect(model != NULL || (mpad == 0 && !text_bits[b].raw[0]), "bit %zu at %zu: model",
                b, pad);
      if (model)
        cr_expect_eq(strncmp(model, "mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm",
                             mpad), 0, "bit %zu at %zu: model %s", b, pad, model);
      free(model);
    }
  }
}

/* A NUL (raw or \u0000) ends a C string: the characters after it do not count, and a name
 * with one is compared up to it; a name spelt with escapes is the name. */
Test(body, nul_and_escaped_names) {
  static const struct body_case more[] = {
    {"{\"prompt\":\"ab\\u0000cdefgh\"}", NULL, 1},
    {"{\"max_tok\\u0065ns\":100,\"prompt\":\"abcd\"}", NULL, 1 + 100},
    {"{\"max_tokens\\u0000x\":100}", NULL, 100},
    {"{\"mod\\u0065l\":\"a\\\"b\",\"prompt\":\"abcd\"}", "a\"b", 1},
    {"{\"model\":\"\\u0000x\",\"prompt\":\"abcd\"}", NULL, 1},
    {"{\"model\":\"g\\u0070t\\/4\"}", "gpt/4", 0},
    {"{\"prompt\":\"\\q\"}", NULL, -1},
    {"{\"prompt\":\"\\ud800x\"}", NULL, -1},
    {"{\"prompt\":\"\\udc00\"}", NULL, -1},
    {"{\"prompt\":\"\\u12\"}", NULL, -1},
    {"{\"prompt\":\"abc\\\"}", NULL, -1},
    {"{\"prompt\":\"\\uZZZZab\"}", NULL, 0}, /* a non-hex \u is a NUL: "" */
    {"{\"max_tokens\":0000000000000000000042}", NULL, 42},
    {"{\"max_tokens\":123456789012345678}", NULL, CG_BODY_OUTPUT_MAX},
    {"{\"max_tokens\":99999999.5}", NULL, 99999999},
  };
  size_t i;
  for (i = 0; i < sizeof(more) / sizeof(more[0]); i++) {
    char *model = NULL;
    int64_t tokens = -1;
    facts(more[i].body, strlen(more[i].body), &model, &tokens);
    if (more[i].model)
      cr_expect(model && strcmp(model, more[i].model) == 0, "%s: model %s", more[i].body,
                model ? model : "(null)");
    else
      cr_expect_null(model, "%s: model %s", more[i].body, model);
    cr_expect_eq(tokens, more[i].tokens, "%s: tokens %lld, want %lld", more[i].body,
                 (long long) tokens, (long long) more[i].tokens);
    free(model);
  }
}

/* A raw NUL inside the prompt text (bodies are not NUL-terminated), at every offset. */
Test(body, raw_nul_at_every_offset) {
  size_t pad;
  for (pad = 0; pad <= 40; pad++) {
    char body[256], *model = NULL;
    int64_t tokens = -1;
    int n = snprintf(body, sizeof(body), "{\"prompt\":\"%.*s#abcdefghijklmnopqrstuvwxyz\"}",
                     (int) pad, "0123456789012345678901234567890123456789");
    body[11 + pad] = '\0'; /* the '#' */
    facts(body, (size_t) n, &model, &tokens);
    cr_expect_eq(tokens, ((int64_t) pad + 3) / 4, "NUL at %zu: tokens %lld", pad,
                 (long long) tokens);
    cr_expect_null(model);
  }
}
