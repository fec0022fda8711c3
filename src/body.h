/* body.h - what a JSON request body says before it is sent.
 *
 * The model name, for the record, and the tokens a provider charges against its rate
 * limit before it answers: the characters of the request's text (every string value but
 * "model") / 4, rounded up, plus the output limit the request asks for (max_tokens,
 * max_completion_tokens, max_output_tokens, Gemini's generationConfig.maxOutputTokens),
 * the way OpenAI describes its own estimate.  Pure: no I/O, no globals.
 */
#ifndef CG_BODY_H
#define CG_BODY_H

#include <stddef.h>
#include <stdint.h>

#define CG_BODY_PARSE_MAX (8 << 20) /* bytes: larger bodies are not parsed */
#define CG_BODY_OUTPUT_MAX INT64_C(100000000) /* tokens: a larger output limit counts as this */

#define CG_BODY_MODEL_SIZE 201 /* bytes of a model name kept, its NUL included */

/* Read `len` bytes at `body` (not NUL-terminated; at most CG_BODY_PARSE_MAX, else
 * nothing is read) if, after blanks, they are a JSON object.  On success `model` (a
 * buffer of CG_BODY_MODEL_SIZE bytes) gets the top-level "model" string, NUL-terminated
 * (its first 200 bytes; left alone when absent, empty or not a string: a caller that
 * starts it as "" tells), and `*tokens` the estimate in tokens (left alone when the body
 * is not a JSON object cJSON would parse).  One pass, no tree, no allocation (issue 16):
 * the body is read with cJSON 1.7.15's grammar and lookups (the first member of a name
 * counts; every "model" member, at any depth, is left out of the text), so results are
 * those of the cJSON reader it replaced (tests/unit/test-body.c; fuzz/fuzz-body.c keeps
 * that reader as its oracle). */
void cg_body_facts(const char *body, size_t len, char model[CG_BODY_MODEL_SIZE],
                   int64_t *tokens);

/* The model named in a request path: Gemini and Vertex AI put it there and not in the
 * body ("/v1beta/models/gemini-2.5-flash:generateContent",
 * ".../publishers/google/models/gemini-2.5-pro:streamGenerateContent").  The segment after
 * the last "/models/" up to ':' (or the end), when it is a plausible model name (1-127
 * bytes of letters, digits, '.', '-', '_', '@'), is copied to `model` (a buffer of
 * CG_BODY_MODEL_SIZE bytes), NUL-terminated.  Returns 1 when it was, 0 (`model` left
 * alone) when the path names none. */
int cg_body_model_from_path(const char *path, char model[CG_BODY_MODEL_SIZE]);

#endif
