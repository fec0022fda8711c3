/* body.c - what a JSON request body says before it is sent (see body.h). */
#include "body.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* Characters of every string value under `j` (cJSON bounds the depth), except "model". */
static int64_t cg__text_chars(const cJSON *j) {
  const cJSON *c;
  int64_t n = 0;
  if (cJSON_IsString(j)) {
    const unsigned char *p;
    for (p = (const unsigned char *) j->valuestring; *p; p++)
      n += (*p & 0xC0) != 0x80; /* UTF-8: count characters, not bytes */
    return n;
  }
  cJSON_ArrayForEach(c, j) {
    if (!(c->string && strcmp(c->string, "model") == 0))
      n += cg__text_chars(c);
  }
  return n;
}

/* The largest output limit the request asks for (OpenAI, Anthropic, Gemini names). */
static int64_t cg__max_output(const cJSON *root) {
  static const char *const names[] = {"max_tokens", "max_completion_tokens",
                                      "max_output_tokens"};
  const cJSON *gc = cJSON_GetObjectItemCaseSensitive(root, "generationConfig");
  const cJSON *m;
  int64_t best = 0;
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
  /* Bounded before the conversion (found by fuzzing: "max_tokens": 1e300 was a
   * float-to-integer overflow, UB): no model writes more than CG_BODY_OUTPUT_MAX. */
  best = v > (double) CG_BODY_OUTPUT_MAX ? CG_BODY_OUTPUT_MAX : (int64_t) v;
  return best;
}

void cg_body_facts(const char *body, size_t len, char **model, int64_t *tokens) {
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
  *tokens = (cg__text_chars(root) + 3) / 4 + cg__max_output(root);
  cJSON_Delete(root);
}


char *cg_body_model_from_path(const char *path) {
  const char *m = NULL, *p, *e;
  size_t n;

  for (p = path; p && (p = strstr(p, "/models/")); p += 8)
    m = p + 8;
  if (!m)
    return NULL;
  for (e = m; *e && *e != ':' && *e != '/'; e++)
    if (!((*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z') || (*e >= '0' && *e <= '9') ||
          *e == '.' || *e == '-' || *e == '_' || *e == '@'))
      return NULL;
  n = (size_t) (e - m);
  if (n == 0 || n > 127 || *e == '/')
    return NULL;
  return strndup(m, n);
}
