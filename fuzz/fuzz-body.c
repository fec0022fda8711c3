/* fuzz-body.c - the model and token estimate of a JSON request body, and the model
 * from a Gemini / Vertex AI path (src/body.c).  Invariants: the estimate, when made, is
 * >= 0; a model, when found, is a NUL-terminated string; and both are what the cJSON-tree
 * reader that body.c replaced in issue 16 (kept below as the oracle) says. */
#include "body.h"
#include "fuzz.h"

#include <cjson/cJSON.h>

/* ---- the oracle: src/body.c's cg_body_facts before issue 16 ---- */

static int64_t old_text_chars(const cJSON *j) {
  const cJSON *c;
  int64_t n = 0;
  if (cJSON_IsString(j)) {
    const unsigned char *p;
    for (p = (const unsigned char *) j->valuestring; *p; p++)
      n += (*p & 0xC0) != 0x80;
    return n;
  }
  cJSON_ArrayForEach(c, j) {
    if (!(c->string && strcmp(c->string, "model") == 0))
      n += old_text_chars(c);
  }
  return n;
}

static int64_t old_max_output(const cJSON *root) {
  static const char *const names[] = {"max_tokens", "max_completion_tokens",
                                      "max_output_tokens"};
  const cJSON *gc = cJSON_GetObjectItemCaseSensitive(root, "generationConfig");
  const cJSON *m;
  size_t i;
  double v = 0;
  for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    m = cJSON_GetObjectItemCaseSensitive(root, names[i]);
    if (cJSON_IsNumber(m) && m->valuedouble > v)
      v = m->valuedouble;
  }
  m = cJSON_GetObjectItemCaseSensitive(gc, "maxOutputTokens");
  if (cJSON_IsNumber(m) && m->valuedouble > v)
    v = m->valuedouble;
  return v > (double) CG_BODY_OUTPUT_MAX ? CG_BODY_OUTPUT_MAX : (int64_t) v;
}

static void old_body_facts(const char *body, size_t len, char **model, int64_t *tokens) {
  const char *p = body, *end = body + len;
  cJSON *root, *m;

  while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
    p++;
  if (p == end || *p != '{' || len > CG_BODY_PARSE_MAX)
    return;
  root = cJSON_ParseWithLength(body, len);
  if (!root)
    return;
  m = cJSON_GetObjectItemCaseSensitive(root, "model");
  if (cJSON_IsString(m) && m->valuestring[0])
    *model = strndup(m->valuestring, 200);
  *tokens = (old_text_chars(root) + 3) / 4 + old_max_output(root);
  cJSON_Delete(root);
}

/* ---- end of the oracle ---- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char buf[CG_BODY_MODEL_SIZE] = "", pbuf[CG_BODY_MODEL_SIZE], *model, *want_model = NULL,
       *s, *m;
  int64_t tokens = -7, want_tokens = -7;

  cg_body_facts((const char *) data, size, buf, &tokens);
  model = buf[0] ? buf : NULL;
  /* Left alone when the body is not a JSON object; else an estimate >= 0. */
  CG_FUZZ_CHECK(tokens == -7 || tokens >= 0, "tokens %lld", (long long) tokens);
  if (model)
    CG_FUZZ_CHECK(strlen(model) < size + 1, "model longer than the body");
  old_body_facts((const char *) data, size, &want_model, &want_tokens);
  CG_FUZZ_CHECK(tokens == want_tokens, "tokens %lld, the old reader %lld", (long long) tokens,
                (long long) want_tokens);
  CG_FUZZ_CHECK((!model && !want_model) || (model && want_model && !strcmp(model, want_model)),
                "model '%s', the old reader '%s'", model ? model : "(none)",
                want_model ? want_model : "(none)");
  free(want_model);
  s = cg_fuzz_str(data, size);
  m = cg_body_model_from_path(s, pbuf) ? pbuf : NULL;
  if (m)
    CG_FUZZ_CHECK(strlen(m) <= strlen(s), "model longer than the path");
  free(s);
  return 0;
}
