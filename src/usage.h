/* usage.h - the token usage a provider reports in its response body.
 *
 * An incremental parser fed the response body as it arrives.  The kind of body is told by
 * its first non-blank byte: `{` or `[` is one JSON document (scanned as it arrives, never
 * held; read when at most CG_USAGE_BODY_MAX bytes; a Gemini streamGenerateContent body
 * without alt=sse is a JSON array of chunks), anything else is a server-sent-event stream,
 * parsed line by line and event by event (an event ends at a blank line, its `data:` lines
 * are joined with "\n", `:` comment lines and `[DONE]` are ignored) so the stream itself
 * is never buffered; one event's data is held up to CG_USAGE_EVENT_MAX bytes (an event of
 * one data line that arrives whole with its blank line is read where it lies), and scanned
 * only when its bytes hold "usage", "model", "error", "failed" or a \u escape (no other
 * event can change the result).
 *
 * No JSON tree is built (issue 16): a purpose-built scanner reads each byte once and
 * keeps only the members below.  It accepts exactly the documents cJSON 1.7.15 (Debian
 * 12) accepts and reads them with cJSON_GetObjectItemCaseSensitive's meaning (the first
 * member of a name counts; a \u0000 ends a name or a string), so results are those of the
 * cJSON-tree parser it replaced: tests/unit/test-usage.c (tables, every split point) and
 * fuzz/fuzz-usage-diff.c (that parser kept as the oracle) check it.  LF and CRLF line endings (a bare
 * CR, which the SSE grammar also allows, is not taken as a line end); a leading UTF-8 BOM
 * is skipped.
 *
 * Normalised numbers (every field -1 when the provider did not say, never 0):
 *   input         all input tokens, INCLUDING cache reads and cache writes
 *                 OpenAI Chat/Completions/Embeddings: usage.prompt_tokens
 *                 OpenAI Responses: usage.input_tokens
 *                 Anthropic: usage.input_tokens + cache_read_input_tokens
 *                            + cache_creation_input_tokens
 *                 Gemini: usageMetadata.promptTokenCount + toolUsePromptTokenCount
 *   cached_input  cache reads: prompt_tokens_details.cached_tokens,
 *                 input_tokens_details.cached_tokens, cache_read_input_tokens,
 *                 cachedContentTokenCount
 *   cache_write   cache writes: Anthropic cache_creation_input_tokens (others: -1)
 *   output        all output tokens, INCLUDING reasoning: completion_tokens, output_tokens,
 *                 Gemini candidatesTokenCount + thoughtsTokenCount; when none is given,
 *                 total - input (embeddings: 0)
 *   reasoning     completion_tokens_details.reasoning_tokens,
 *                 output_tokens_details.reasoning_tokens, thoughtsTokenCount
 *   total         total_tokens / totalTokenCount when given, else input + output when
 *                 both are known
 *   model         "model" (OpenAI, Anthropic non-streaming), message.model (Anthropic
 *                 message_start), response.model (Responses events), "modelVersion"
 *                 (Gemini); the last one seen wins
 *
 * Numbers must be whole and non-negative (at most 2^53); anything else is unknown.
 *
 * Streams: every usage report is merged FIELD BY FIELD, the last value wins, nothing is
 * ever added up across events (Anthropic message_start then the cumulative message_delta,
 * where message_start's output_tokens is a placeholder and is ignored;
 * Gemini running totals; OpenAI's final chunk with a non-null "usage"; Responses
 * response.completed / response.incomplete / response.failed).  A stream that never
 * reports usage leaves everything at -1.  error_event is set by an SSE event or a JSON
 * object (or array element) whose "type" is "error" or "response.failed", or which
 * carries an "error" object (OpenAI, Gemini, a failed Responses object).  skipped is set
 * when the JSON body exceeded its bound, or when an SSE event over its bound came after
 * the last usage report (it may have carried a newer one): then every number is unknown,
 * never an older, smaller count.  An oversized event followed by a usage report loses
 * nothing and is not reported.  Pure: no I/O, no globals.
 */
#ifndef CG_USAGE_H
#define CG_USAGE_H

#include <stddef.h>
#include <stdint.h>

#define CG_USAGE_BODY_MAX ((size_t) 4 << 20)  /* bytes of a JSON (non-SSE) body */
#define CG_USAGE_EVENT_MAX ((size_t) 1 << 20) /* bytes of one SSE event's data */

struct cg_usage {            /* -1 = unknown (null in records), never 0 for unknown */
  int64_t input, cached_input, cache_write, output, reasoning, total;
  char model[128];           /* "" = unknown */
  int error_event;           /* an error event arrived inside a 200 stream */
  int skipped;               /* a body or event exceeded the bounds: numbers left unknown */
};

struct cg_usage_parser;      /* incremental; bounded memory */

/* A new parser (about 2.5 KiB), or NULL when out of memory. */
struct cg_usage_parser *cg_usage_new(void);
/* Response body bytes as they arrive (any split, down to one byte at a time; `buf` need
 * not be NUL-terminated).  NULL `p` or `buf`: nothing. */
void cg_usage_feed(struct cg_usage_parser *p, const char *buf, size_t len);
/* The body's Content-Encoding as libcurl hands it on undecoded (the host sent its own
 * Accept-Encoding, or set CURLOPT_HTTP_CONTENT_DECODING 0): CG_USAGE_GZIP (gzip, x-gzip)
 * or CG_USAGE_DEFLATE (deflate: zlib's format, or raw deflate as some servers send it,
 * as libcurl's lib/content_encoding.c reads both).  Called before the first byte; the
 * bytes fed are then inflated (zlib) before they are read, at most CG_USAGE_INFLATED_MAX
 * of them (past it, or on a stream zlib cannot read, the rest is not read: the numbers
 * stay what was read, `skipped` set past the bound).  Out of memory: nothing is read.
 * Nothing once bytes were fed or cg_usage_lines was called, or for NULL `p`. */
#define CG_USAGE_GZIP 1
#define CG_USAGE_DEFLATE 2
#define CG_USAGE_INFLATED_MAX ((uint64_t) 64 << 20) /* a 100k-token SSE answer: ~25 MiB */
void cg_usage_encoding(struct cg_usage_parser *p, int coding);
/* Before the first byte of an `application/x-ndjson` body (after cg_usage_encoding, when
 * it came compressed): each line is one document,
 * read as an SSE event's data is (bounded alike; the last report wins), where a JSON
 * body is one document, whatever follows it ignored as cJSON ignores it.  Nothing once
 * bytes were fed, or for NULL `p`. */
void cg_usage_lines(struct cg_usage_parser *p);
/* After the last byte: fills `out` (an unterminated last event still counts; a JSON body
 * counts only when it parsed whole).  Call once.  NULL `p`: every field unknown. */
void cg_usage_finish(struct cg_usage_parser *p, struct cg_usage *out);
/* Frees `p` (NULL: nothing). */
void cg_usage_free(struct cg_usage_parser *p);

/* `p` as cg_usage_new() makes one, for the next answer, keeping its memory (the struct,
 * and an SSE event buffer of up to 64 KiB): a thread's next call reuses its last
 * parser instead of a malloc, its zeroing and a free (issue 16). */
void cg_usage_reset(struct cg_usage_parser *p);

#endif
