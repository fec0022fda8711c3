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

/* Parse `len` bytes at `body` if they are a JSON object.  On success `*model` gets a
 * malloc'd copy of "model" (left alone when absent) and `*tokens` the estimate (left
 * alone when the body is not JSON). */
void cg_body_facts(const char *body, size_t len, char **model, int64_t *tokens);

/* The model named in a request path, or NULL: Gemini and Vertex AI put it there and not
 * in the body ("/v1beta/models/gemini-2.5-flash:generateContent",
 * ".../publishers/google/models/gemini-2.5-pro:streamGenerateContent").  The segment after
 * the last "/models/" up to ':' (or the end), when it is a plausible model name (1-127
 * bytes of letters, digits, '.', '-', '_', '@').  Returns a malloc'd string. */
char *cg_body_model_from_path(const char *path);

#endif
