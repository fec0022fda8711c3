/* fuzz-body.c - the model and token estimate of a JSON request body, and the model
 * from a Gemini / Vertex AI path (src/body.c).  Invariants: the estimate, when made, is
 * >= 0; a model, when found, is a NUL-terminated string. */
#include "body.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *model = NULL, *s, *m;
  int64_t tokens = -7;

  cg_body_facts((const char *) data, size, &model, &tokens);
  /* Left alone when the body is not a JSON object; else an estimate >= 0. */
  CG_FUZZ_CHECK(tokens == -7 || tokens >= 0, "tokens %lld", (long long) tokens);
  if (model)
    CG_FUZZ_CHECK(strlen(model) < size + 1, "model longer than the body");
  free(model);
  s = cg_fuzz_str(data, size);
  m = cg_body_model_from_path(s);
  if (m)
    CG_FUZZ_CHECK(strlen(m) <= strlen(s), "model longer than the path");
  free(m);
  free(s);
  return 0;
}
