/* test-usage.c - token usage from response bodies, whole and streamed (src/usage.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "usage.h"

struct usage_case {
  const char *name;
  const char *body;
  int64_t input, cached_input, cache_write, output, reasoning, total;
  const char *model;
  int error_event;
};

/* OpenAI streaming with include_usage: the CASES numbers (308/68/376). */
#define OAI_STREAM(EOL)                                                                      \
  "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\","    \
  "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}" EOL EOL       \
  ": ping" EOL                                                                               \
  "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\","    \
  "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}" EOL \
  EOL                                                                                        \
  ": a comment inside the event must not become data" EOL                                   \
  "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\","    \
  "\"choices\":[],\"usage\":{\"prompt_tokens\":308,\"completion_tokens\":68,"               \
  "\"total_tokens\":376}}" EOL EOL                                                           \
  "data: [DONE]" EOL EOL

/* Anthropic streaming: the CASES merge (start input 9, cache read 1, output 1; delta 16). */
#define ANT_STREAM(START_IN, DELTA_USAGE, TAIL)                                              \
  "event: message_start\n"                                                                   \
  "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\","   \
  "\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],"                   \
  "\"usage\":{\"input_tokens\":" START_IN ",\"cache_creation_input_tokens\":0,"             \
  "\"cache_read_input_tokens\":1,\"output_tokens\":1}}}\n\n"                                 \
  "event: ping\n"                                                                            \
  "data: {\"type\":\"ping\"}\n\n"                                                            \
  ": keep-alive\n\n"                                                                         \
  "event: content_block_delta\n"                                                             \
  "data: {\"type\":\"content_block_delta\",\"index\":0,"                                     \
  "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n"                              \
  "event: message_delta\n"                                                                   \
  "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},"              \
  "\"usage\":" DELTA_USAGE "}\n\n" TAIL                                                      \
  "event: message_stop\n"                                                                    \
  "data: {\"type\":\"message_stop\"}\n\n"

#define GEM_CHUNK1                                                                           \
  "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hel\"}]}}],"                        \
  "\"usageMetadata\":{\"promptTokenCount\":10,\"candidatesTokenCount\":2,"                  \
  "\"totalTokenCount\":12},\"modelVersion\":\"gemini-2.5-flash\"}"
#define GEM_CHUNK2                                                                           \
  "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"lo\"}]},\"finishReason\":\"STOP\"}],"\
  "\"usageMetadata\":{\"promptTokenCount\":10,\"candidatesTokenCount\":7,"                  \
  "\"thoughtsTokenCount\":3,\"cachedContentTokenCount\":4,\"totalTokenCount\":20},"          \
  "\"modelVersion\":\"gemini-2.5-flash\"}"

static const struct usage_case cases[] = {
  /* ---- non-streaming ---- */
  {"openai chat",
   "{\"id\":\"c\",\"object\":\"chat.completion\",\"model\":\"gpt-4o-2024-08-06\","
   "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"x\"}}],"
   "\"usage\":{\"prompt_tokens\":308,\"completion_tokens\":68,\"total_tokens\":376,"
   "\"prompt_tokens_details\":{\"cached_tokens\":128,\"audio_tokens\":0},"
   "\"completion_tokens_details\":{\"reasoning_tokens\":20}}}",
   308, 128, -1, 68, 20, 376, "gpt-4o-2024-08-06", 0},
  {"openai embeddings",
   "\n  {\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,"
   "\"embedding\":[0.1,0.2]}],\"model\":\"text-embedding-3-small\","
   "\"usage\":{\"prompt_tokens\":8,\"total_tokens\":8}}",
   8, -1, -1, 0, -1, 8, "text-embedding-3-small", 0},
  {"openai responses",
   "{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"error\":null,"
   "\"model\":\"o4-mini\",\"output\":[],\"usage\":{\"input_tokens\":50,"
   "\"input_tokens_details\":{\"cached_tokens\":10},\"output_tokens\":30,"
   "\"output_tokens_details\":{\"reasoning_tokens\":5},\"total_tokens\":80}}",
   50, 10, -1, 30, 5, 80, "o4-mini", 0},
  {"anthropic message",
   "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\","
   "\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],\"stop_reason\":\"end_turn\","
   "\"usage\":{\"input_tokens\":20,\"cache_creation_input_tokens\":5,"
   "\"cache_read_input_tokens\":100,\"output_tokens\":7}}",
   125, 100, 5, 7, -1, 132, "claude-x", 0},
  /* A gateway's OpenAI-format usage (LiteLLM) that also carries Anthropic's cache keys:
   * its prompt_tokens already hold the cached and cache-written tokens.  Read as
   * Anthropic's, they were added again (3926 of 2306 total; the cost x2 to x2.5). */
  {"gateway openai usage with anthropic cache keys",
   "{\"id\":\"c\",\"object\":\"chat.completion\",\"model\":\"claude-sonnet-4-20250514\","
   "\"choices\":[{\"message\":{\"content\":\"x\"}}],\"usage\":{\"prompt_tokens\":2006,"
   "\"completion_tokens\":300,\"total_tokens\":2306,"
   "\"prompt_tokens_details\":{\"cached_tokens\":1920},"
   "\"cache_creation_input_tokens\":0}}",
   2006, 1920, 0, 300, -1, 2306, "claude-sonnet-4-20250514", 0},
  {"gateway openai usage with a cache read and a cache write",
   "{\"model\":\"claude-sonnet-4-20250514\",\"usage\":{\"cache_read_input_tokens\":1000,"
   "\"cache_creation_input_tokens\":400,\"prompt_tokens\":1500,\"completion_tokens\":50,"
   "\"total_tokens\":1550,\"prompt_tokens_details\":{\"cached_tokens\":1000}}}",
   1500, 1000, 400, 50, -1, 1550, "claude-sonnet-4-20250514", 0},
  /* prompt_tokens decides only as a number, and then wins over input_tokens (a null, or
   * input_tokens beside it, read as 100 with cached 300 over it). */
  {"gateway usage with input_tokens beside prompt_tokens",
   "{\"model\":\"m\",\"usage\":{\"input_tokens\":100,\"prompt_tokens\":600,"
   "\"cache_read_input_tokens\":300,\"cache_creation_input_tokens\":200,"
   "\"output_tokens\":50}}",
   600, 300, 200, 50, -1, 650, "m", 0},
  {"anthropic usage with a null prompt_tokens",
   "{\"model\":\"m\",\"usage\":{\"prompt_tokens\":null,\"input_tokens\":100,"
   "\"cache_read_input_tokens\":300,\"cache_creation_input_tokens\":200,"
   "\"output_tokens\":50}}",
   600, 300, 200, 50, -1, 650, "m", 0},
  {"gemini generateContent",
   "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hi\"}]}}],"
   "\"usageMetadata\":{\"promptTokenCount\":10,\"candidatesTokenCount\":20,"
   "\"thoughtsTokenCount\":5,\"cachedContentTokenCount\":4,\"totalTokenCount\":35},"
   "\"modelVersion\":\"gemini-2.5-pro\"}",
   10, 4, -1, 25, 5, 35, "gemini-2.5-pro", 0},
  {"no usage in a JSON body", "{\"id\":\"c\",\"model\":\"m\",\"choices\":[]}", -1, -1, -1,
   -1, -1, -1, "m", 0},
  {"not JSON", "{\"usage\":{\"prompt_tokens\":3", -1, -1, -1, -1, -1, -1, "", 0},
  {"empty body", "", -1, -1, -1, -1, -1, -1, "", 0},
  /* error objects in a whole body are the status's business, not an error event */
  /* An "error" object marks the body as failed; it only matters for a 2xx answer (a 4xx
   * or 5xx is judged by its status). */
  {"json error body", "{\"error\":{\"message\":\"bad\",\"type\":\"invalid_request_error\"}}",
   -1, -1, -1, -1, -1, -1, "", 1},
  {"json error null is no error",
   "{\"id\":\"r\",\"object\":\"response\",\"error\":null,\"model\":\"o3\","
   "\"usage\":{\"input_tokens\":5,\"output_tokens\":6,\"total_tokens\":11}}",
   5, -1, -1, 6, -1, 11, "o3", 0},
  {"fractional and negative counts are unknown",
   "{\"model\":\"m\",\"usage\":{\"prompt_tokens\":1.5,\"completion_tokens\":-3,"
   "\"total_tokens\":4e0}}",
   -1, -1, -1, -1, -1, 4, "m", 0},
  {"gemini tool-use prompt tokens are input",
   "{\"usageMetadata\":{\"promptTokenCount\":100,\"candidatesTokenCount\":50,"
   "\"toolUsePromptTokenCount\":70,\"thoughtsTokenCount\":30,\"totalTokenCount\":250},"
   "\"modelVersion\":\"gemini-2.5-pro\"}",
   170, -1, -1, 80, 30, 250, "gemini-2.5-pro", 0},
  {"gemini JSON array stream with an error element",
   "[" GEM_CHUNK1 ",{\"error\":{\"code\":503,\"message\":\"overloaded\","
   "\"status\":\"UNAVAILABLE\"}}]",
   10, -1, -1, 2, -1, 12, "gemini-2.5-flash", 1},
  {"utf-8 byte order mark before a JSON body",
   "\xEF\xBB\xBF{\"model\":\"m\",\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":3}}",
   2, -1, -1, 3, -1, 5, "m", 0},

  /* ---- streaming ---- */
  {"openai stream (CASES)", OAI_STREAM("\n"), 308, -1, -1, 68, -1, 376, "gpt-4o-mini", 0},
  {"openai stream CRLF", OAI_STREAM("\r\n"), 308, -1, -1, 68, -1, 376, "gpt-4o-mini", 0},
  {"openai stream without usage chunk",
   "data: {\"model\":\"gpt-4o\",\"choices\":[{\"delta\":{\"content\":\"a\"}}],"
   "\"usage\":null}\n\ndata: [DONE]\n\n",
   -1, -1, -1, -1, -1, -1, "gpt-4o", 0},
  {"openai stream error event",
   "data: {\"model\":\"gpt-4o\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
   "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n",
   -1, -1, -1, -1, -1, -1, "gpt-4o", 1},
  {"openai stream data split over lines, no final blank line",
   "data: {\"model\":\"m\",\"choices\":[],\n"
   "data:\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":6}}",
   5, -1, -1, 6, -1, 11, "m", 0},
  {"responses stream completed",
   "event: response.created\n"
   "data: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"model\":\"gpt-4.1\","
   "\"status\":\"in_progress\",\"usage\":null}}\n\n"
   "event: response.output_text.delta\n"
   "data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n"
   "event: response.completed\n"
   "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"model\":\"gpt-4.1\","
   "\"status\":\"completed\",\"usage\":{\"input_tokens\":40,\"input_tokens_details\":"
   "{\"cached_tokens\":8},\"output_tokens\":12,\"output_tokens_details\":"
   "{\"reasoning_tokens\":2},\"total_tokens\":52}}}\n\n",
   40, 8, -1, 12, 2, 52, "gpt-4.1", 0},
  {"responses stream incomplete",
   "event: response.incomplete\r\n"
   "data: {\"type\":\"response.incomplete\",\"response\":{\"model\":\"o3\","
   "\"usage\":{\"input_tokens\":7,\"output_tokens\":100,\"total_tokens\":107}}}\r\n\r\n",
   7, -1, -1, 100, -1, 107, "o3", 0},
  {"responses stream failed",
   "event: response.failed\n"
   "data: {\"type\":\"response.failed\",\"response\":{\"model\":\"o3\",\"error\":"
   "{\"code\":\"server_error\"},\"usage\":{\"input_tokens\":7,\"output_tokens\":0,"
   "\"total_tokens\":7}}}\n\n",
   7, -1, -1, 0, -1, 7, "o3", 1},
  {"anthropic stream (CASES merge)",
   ANT_STREAM("9", "{\"output_tokens\":16}", ""), 10, 1, 0, 16, -1, 26,
   "claude-sonnet-4-5", 0},
  {"anthropic stream, delta repeats input fields",
   ANT_STREAM("9", "{\"input_tokens\":9,\"cache_read_input_tokens\":1,\"output_tokens\":16}",
              ""),
   10, 1, 0, 16, -1, 26, "claude-sonnet-4-5", 0},
  {"anthropic stream, start input 0 then delta 9",
   ANT_STREAM("0", "{\"input_tokens\":9,\"output_tokens\":16}", ""), 10, 1, 0, 16, -1, 26,
   "claude-sonnet-4-5", 0},
  {"anthropic stream cut after message_start: its output_tokens is a placeholder",
   "event: message_start\n"
   "data: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\","
   "\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n",
   9, -1, -1, -1, -1, -1, "claude-sonnet-4-5", 0},
  {"anthropic stream error event",
   ANT_STREAM("9", "{\"output_tokens\":16}",
              "event: error\n"
              "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
              "\"message\":\"Overloaded\"}}\n\n"),
   10, 1, 0, 16, -1, 26, "claude-sonnet-4-5", 1},
  {"gemini SSE stream (running totals)",
   "data: " GEM_CHUNK1 "\r\n\r\ndata: " GEM_CHUNK2 "\r\n\r\n", 10, 4, -1, 10, 3, 20,
   "gemini-2.5-flash", 0},
  {"gemini JSON array stream", "[" GEM_CHUNK1 ",\r\n" GEM_CHUNK2 "]", 10, 4, -1, 10, 3, 20,
   "gemini-2.5-flash", 0},
  /* ---- events the SSE pre-check passes over (usage.c cg__may_matter): only
   * "usage":null and the model already named; each case has one that must be read ---- */
  {"sse: a later chunk names another model",
   "data: {\"model\":\"m-1\",\"usage\":null}\n\n"
   "data: {\"model\":\"m-2\",\"usage\":null}\n\n"
   "data: {\"model\":\"m-1\",\"usage\":null}\n\n"
   "data: {\"model\":\"m-10\",\"usage\":null}\n\n", -1, -1, -1, -1, -1, -1, "m-10", 0},
  {"sse: the same model, then a usage object and an error object",
   "data: {\"model\":\"m\",\"usage\":null}\n\n"
   "data: {\"model\":\"m\",\"usage\":null,\"usage\":{\"prompt_tokens\":5}}\n\n"
   "data: {\"model\":\"m\",\"usage\" :{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n"
   "data: {\"model\":\"m\",\"usage\":null,\"error\":{}}\n\n", 3, -1, -1, 1, -1, 4, "m", 1},
  {"sse: blanks around the colon (json.dumps defaults), then the usage",
   "data: {\"model\": \"m\", \"usage\": null}\n\n"
   "data: {\"model\" :\t\"m\", \"usage\"\ndata: :\ndata:  null, \"choices\": []}\n\n"
   "data: {\"model\": \"m\", \"usage\": null}\n\n"
   "data: {\"model\": \"m\", \"usage\" : {\"prompt_tokens\": 3, \"completion_tokens\": 1}}\n\n",
   3, -1, -1, 1, -1, 4, "m", 0},
  {"sse: blanks around the colon, another model, a \\v (a blank to cJSON, not to RFC 8259)",
   "data: {\"model\": \"m-1\", \"usage\": null}\n\n"
   "data: {\"model\":  \"m-10\", \"usage\": null}\n\n"
   "data: {\"model\": \"m-1\", \"usage\"\v: {\"total_tokens\": 9}}\n\n"
   "data: {\"model\": \"m-1\", \"usage\": nul}\n\n",
   -1, -1, -1, -1, -1, 9, "m-1", 0},
  {"sse: the same model spelt with an escape, or in a message",
   "data: {\"model\":\"a/b\"}\n\n"
   "data: {\"model\":\"a\\/b\",\"x\":\"\\\"\",\"usage\":{\"total_tokens\":7}}\n\n"
   "data: {\"type\":\"message_start\",\"message\":{\"model\":\"c\"}}\n\n", -1, -1, -1,
   -1, -1, 7, "c", 0},
};

/* `body` through a new parser told its coding (cg_usage_encoding, 0: none) and then
 * whether it is x-ndjson (cg_usage_lines): in two buffers cut at `cut`, or, with `cut`
 * past the end, in pieces of `piece` bytes. */
static void feed_run(const char *body, size_t len, size_t cut, size_t piece, int lines,
                     int coding, struct cg_usage *u) {
  struct cg_usage_parser *p = cg_usage_new();
  size_t off = 0;
  cr_assert_not_null(p);
  if (coding)
    cg_usage_encoding(p, coding);
  if (lines)
    cg_usage_lines(p);
  if (cut <= len) {
    cg_usage_feed(p, body, cut);
    cg_usage_feed(p, body + cut, len - cut);
  } else {
    while (off < len) {
      size_t n = len - off < piece ? len - off : piece;
      cg_usage_feed(p, body + off, n);
      off += n;
    }
  }
  cg_usage_finish(p, u);
  cg_usage_free(p);
}

static void run(const char *body, size_t len, size_t piece, struct cg_usage *u) {
  feed_run(body, len, (size_t) -1, piece, 0, 0, u);
}

/* `body` in two buffers, cut at `cut`. */
static void run_cut(const char *body, size_t len, size_t cut, struct cg_usage *u) {
  feed_run(body, len, cut, 1, 0, 0, u);
}

/* The SSE data line fast path (usage.c cg__sse_line_avx2): events after a kept one
 * (KEPT, said nothing: the second of the first two), whole in a buffer or cut anywhere,
 * and the shapes next to it that it leaves to the general path. */
#define KEPT "{\"model\":\"m\",\"x\":null,\"choices\":[{\"delta\":{\"content\":\"abc\"}}]}"
#define KEPT2 "data: " KEPT "\n\ndata: " KEPT "\n\n"
static const struct {
  const char *body;
  int64_t input, output;
  const char *model;
} sse_line_cases[] = {
  {KEPT2 "data: {\"model\":\"m\",\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n\n",
   1, 2, "m"},
  /* the line ends where the head it shares with the kept one does */
  {KEPT2 "data: {\"model\":\"m\",\"x\":null,\"choices\":[{\n"
   "data: \"delta\":{}}],\"usage\":{\"prompt_tokens\":4}}\n\n", 4, -1, "m"},
  {KEPT2 "data: " KEPT "\ndata: ,\"usage\":{\"prompt_tokens\":4}}\n\n", -1, -1, "m"},
  {KEPT2 "data:" KEPT "\r\n\r\ndata: {\"model\":\"m\",\"usage\":{\"prompt_tokens\":5}}\r\n\r\n",
   5, -1, "m"},
  {KEPT2 "data: {\"model\":\"m\",\"x\":null,\"choices\":[{\"delta\":{}}]}\r\n"
   "data: {\"model\":\"m\",\"usage\":{\"prompt_tokens\":5}}\r\n\r\n", -1, -1, "m"},
  {KEPT2 "data: {\"model\":\"m\",\"x\":null,\"choices\":[],\"usage\":{\"prompt_tokens\":5}}\r",
   5, -1, "m"},
  {KEPT2 "data: {\"model\":\"m\",\"x\":null,\"choices\":[],\"usage\":{\"prompt_tokens\":5}}\r"
   "data: {\"usage\":{\"prompt_tokens\":6}}\n\n", 5, -1, "m"},
  /* a '\r' at the end of a buffer, and the line's end in the next: the '\r' is not data */
  {KEPT2 "data: {\"x\":null,\"usage\":{\"prompt_tokens\":5},\"model\":\"a\r\ndata: b\"}\n\n",
   5, -1, "a\nb"},
  /* blanks at the ends, the end of the stream without a blank line, a short event */
  {KEPT2 "data:  {\"model\":\"m\",\"x\":null,\"usage\":{\"prompt_tokens\":6}}\t\n\n", 6, -1, "m"},
  {KEPT2 "data: {\"model\":\"m\",\"x\":null,\"usage\":{\"prompt_tokens\":7}}\n", 7, -1, "m"},
  {KEPT2 "data: {\"usage\":{\"prompt_tokens\":8}}\n\n", 8, -1, "m"},
  {KEPT2 "data: [DONE]\n\ndata: " KEPT "\n\n", -1, -1, "m"},
  /* a kept event of two data lines holds a '\n': the head shared with it is no proof */
  {"data: {\"model\":\"m\"}\n\ndata: {\"model\":\"m\",\"x\":null,\ndata: \"y\":[1,2,3,4]}\n\n"
   "data: {\"model\":\"m\",\"x\":null,\ndata: \"usage\":{\"prompt_tokens\":9}}\n\n", 9, -1, "m"},
};

Test(usage, sse_line_fast_path_whole_cut_and_in_pieces) {
  static const size_t pieces[] = {1, 2, 7, 64};
  size_t i, cut;
  for (i = 0; i < sizeof(sse_line_cases) / sizeof(sse_line_cases[0]); i++) {
    const char *b = sse_line_cases[i].body;
    size_t len = strlen(b);
    for (cut = 0; cut <= len + sizeof(pieces) / sizeof(pieces[0]); cut++) {
      struct cg_usage u;
      if (cut <= len)
        run_cut(b, len, cut, &u);
      else
        run(b, len, pieces[cut - len - 1], &u);
      cr_expect(u.input == sse_line_cases[i].input && u.output == sse_line_cases[i].output &&
                    strcmp(u.model, sse_line_cases[i].model) == 0,
                "case %zu, %s %zu: input %lld output %lld model '%s'", i,
                cut <= len ? "cut at" : "pieces of", cut <= len ? cut : pieces[cut - len - 1],
                (long long) u.input, (long long) u.output, u.model);
      if (u.input != sse_line_cases[i].input)
        break; /* one report a case is enough */
    }
  }
}
#undef KEPT2
#undef KEPT

Test(usage, table_whole_and_in_pieces) {
  static const size_t pieces[] = {(size_t) -1, 1, 2, 7, 64};
  size_t i, k;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const struct usage_case *c = &cases[i];
    for (k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
      struct cg_usage u;
      run(c->body, strlen(c->body), pieces[k], &u);
#define CHECK(F)                                                                             \
  cr_expect_eq(u.F, c->F, "%s (pieces of %zd): " #F " %lld, want %lld", c->name,            \
               (ssize_t) pieces[k], (long long) u.F, (long long) c->F)
      CHECK(input);
      CHECK(cached_input);
      CHECK(cache_write);
      CHECK(output);
      CHECK(reasoning);
      CHECK(total);
      CHECK(error_event);
#undef CHECK
      cr_expect_str_eq(u.model, c->model, "%s (pieces of %zd): model", c->name,
                       (ssize_t) pieces[k]);
      cr_expect_eq(u.skipped, 0, "%s: skipped", c->name);
    }
  }
}

/* A JSON body padded with a long string to `size` bytes, usage at the end. */
static char *padded_json(size_t size) {
  static const char head[] = "{\"pad\":\"";
  static const char tail[] = "\",\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}";
  char *b = malloc(size + 1);
  cr_assert_not_null(b);
  memcpy(b, head, sizeof(head) - 1);
  memset(b + sizeof(head) - 1, 'x', size - (sizeof(head) - 1) - (sizeof(tail) - 1));
  memcpy(b + size - (sizeof(tail) - 1), tail, sizeof(tail));
  return b;
}

Test(usage, json_body_bounds) {
  struct cg_usage u;
  char *b = padded_json(CG_USAGE_BODY_MAX);
  run(b, CG_USAGE_BODY_MAX, 65536, &u);
  cr_expect_eq(u.skipped, 0);
  cr_expect_eq(u.input, 1);
  cr_expect_eq(u.output, 2);
  cr_expect_eq(u.total, 3);
  free(b);

  b = padded_json(CG_USAGE_BODY_MAX + 1);
  run(b, CG_USAGE_BODY_MAX + 1, 65536, &u);
  cr_expect_eq(u.skipped, 1);
  cr_expect_eq(u.input, -1);
  cr_expect_eq(u.output, -1);
  cr_expect_eq(u.total, -1);
  free(b);
}

/* An SSE stream: an event of `size` data bytes (a JSON object with usage 1/2), then a
 * normal final usage event 3/4 only when `final`. */
static char *sse_with_event(size_t size, int final, size_t *len) {
  static const char head[] = "data: {\"pad\":\"";
  static const char tail[] = "\",\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}";
  static const char last[] =
    "\n\ndata: {\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\n";
  size_t pad = size - (sizeof(head) - 1 - 6) - (sizeof(tail) - 1);
  char *b = malloc(size + 1024);
  char *w = b;
  cr_assert_not_null(b);
  memcpy(w, head, sizeof(head) - 1), w += sizeof(head) - 1;
  memset(w, 'x', pad), w += pad;
  memcpy(w, tail, sizeof(tail) - 1), w += sizeof(tail) - 1;
  if (final)
    memcpy(w, last, sizeof(last) - 1), w += sizeof(last) - 1;
  else
    memcpy(w, "\r\n\r\n", 4), w += 4;
  *len = (size_t) (w - b);
  return b;
}

Test(usage, sse_event_bounds) {
  struct cg_usage u;
  size_t len;
  char *b = sse_with_event(CG_USAGE_EVENT_MAX, 0, &len);
  run(b, len, 4096, &u);
  cr_expect_eq(u.skipped, 0);
  cr_expect_eq(u.input, 1);
  cr_expect_eq(u.output, 2);
  free(b);

  /* too large: that event is skipped, the stream goes on; the usage report after it is
   * the newest, so nothing was lost and nothing is reported skipped */
  b = sse_with_event(CG_USAGE_EVENT_MAX + 1, 1, &len);
  run(b, len, 4096, &u);
  cr_expect_eq(u.skipped, 0);
  cr_expect_eq(u.input, 3);
  cr_expect_eq(u.output, 4);
  free(b);

  b = sse_with_event(CG_USAGE_EVENT_MAX + 1, 0, &len);
  run(b, len, 1 << 20, &u);
  cr_expect_eq(u.skipped, 1);
  cr_expect_eq(u.input, -1);
  cr_expect_eq(u.total, -1);
  free(b);
}

/* Usage, then an oversized event that may have carried newer usage (a Gemini image chunk
 * with running totals): the older numbers are not kept as if they were final. */
Test(usage, sse_oversized_event_after_usage_makes_it_unknown) {
  static const char first[] = "data: {\"usageMetadata\":{\"promptTokenCount\":100,"
                              "\"candidatesTokenCount\":5,\"totalTokenCount\":105},"
                              "\"modelVersion\":\"gemini-2.5-flash\"}\n\n";
  size_t blen, len = sizeof(first) - 1;
  char *big = sse_with_event(CG_USAGE_EVENT_MAX + 1, 0, &blen);
  char *b = malloc(len + blen);
  struct cg_usage u;
  cr_assert_not_null(b);
  memcpy(b, first, len);
  memcpy(b + len, big, blen);
  run(b, len + blen, 65536, &u);
  cr_expect_eq(u.skipped, 1);
  cr_expect_eq(u.input, -1);
  cr_expect_eq(u.output, -1);
  cr_expect_eq(u.total, -1);
  cr_expect_str_eq(u.model, "gemini-2.5-flash");
  free(big);
  free(b);
}

/* A long stream of small events never holds more than one event. */
Test(usage, long_stream_any_split) {
  static const char ev[] = "data: {\"choices\":[{\"delta\":{\"content\":\"ab\"}}],\"usage\":null}\n\n";
  static const char fin[] =
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":308,\"completion_tokens\":68,"
    "\"total_tokens\":376}}\n\ndata: [DONE]\n\n";
  struct cg_usage_parser *p = cg_usage_new();
  struct cg_usage u;
  int i;
  for (i = 0; i < 200000; i++)
    cg_usage_feed(p, ev, sizeof(ev) - 1);
  cg_usage_feed(p, fin, sizeof(fin) - 1);
  cg_usage_finish(p, &u);
  cg_usage_free(p);
  cr_expect_eq(u.input, 308);
  cr_expect_eq(u.output, 68);
  cr_expect_eq(u.total, 376);
  cr_expect_eq(u.skipped, 0);
}

Test(usage, model_truncated_and_null_safe) {
  char body[400];
  struct cg_usage u;
  memset(&u, 0x55, sizeof(u));
  snprintf(body, sizeof(body), "{\"model\":\"%0300d\"}", 0);
  run(body, strlen(body), 5, &u);
  cr_expect_eq(strlen(u.model), sizeof(u.model) - 1);
  cr_expect_eq(u.input, -1);
  cg_usage_feed(NULL, "x", 1);
  cg_usage_finish(NULL, &u);
  cr_expect_eq(u.total, -1);
  cg_usage_free(NULL);
}

/* ---- the scanner's odd cases (issue 16: no cJSON tree; cJSON 1.7.15's meaning kept) ---- */

#define ZEROS10 "0000000000"
#define ZEROS100 ZEROS10 ZEROS10 ZEROS10 ZEROS10 ZEROS10 ZEROS10 ZEROS10 ZEROS10 ZEROS10 ZEROS10
#define U12 "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}"

static const struct usage_case scan_cases[] = {
  {"a name inside a string is text",
   "{\"model\":\"m\",\"note\":\"\\\"usage\\\":{\\\"prompt_tokens\\\":99}\"," U12 "}",
   1, -1, -1, 2, -1, 3, "m", 0},
  {"the same names nested elsewhere do not count",
   "{\"choices\":[{\"usage\":{\"prompt_tokens\":50},\"model\":\"x\"}],"
   "\"data\":{\"usage\":{\"prompt_tokens\":7},\"error\":{}}," U12 ",\"model\":\"m\"}",
   1, -1, -1, 2, -1, 3, "m", 0},
  {"escaped quotes and backslashes in a value",
   "{\"model\":\"a\\\"b\\\\\"," U12 "}", 1, -1, -1, 2, -1, 3, "a\"b\\", 0},
  {"escapes decoded: \\/ \\u00e9 and a surrogate pair",
   "{\"model\":\"g\\/\\u00e9\\ud83d\\ude00\"}", -1, -1, -1, -1, -1, -1,
   "g/\xc3\xa9\xf0\x9f\x98\x80", 0},
  {"numbers with exponents, a fraction of zero and -0",
   "{\"usage\":{\"prompt_tokens\":1e2,\"completion_tokens\":2.0E0,\"total_tokens\":-0}}",
   100, -1, -1, 2, -1, 0, "", 0},
  {"negative, fractional and 2^53 counts are unknown",
   "{\"usage\":{\"prompt_tokens\":-5,\"completion_tokens\":9007199254740992,"
   "\"total_tokens\":0.5}}",
   -1, -1, -1, -1, -1, -1, "", 0},
  {"2^53 - 1 is a count", "{\"usage\":{\"completion_tokens\":9007199254740991}}", -1, -1, -1,
   9007199254740991LL, -1, -1, "", 0},
  {"a 100-digit number is read whole",
   "{\"usage\":{\"prompt_tokens\":" ZEROS100 "5,\"completion_tokens\":1" ZEROS100 "}}",
   5, -1, -1, -1, -1, -1, "", 0},
  {"whitespace of every kind between tokens",
   "{ \"usage\" :\n\t{ \"prompt_tokens\" : 4 ,\"completion_tokens\":\r\n5 } ,\"model\" : \"m\" }",
   4, -1, -1, 5, -1, 9, "m", 0},
  {"usage null", "{\"model\":\"m\",\"usage\":null}", -1, -1, -1, -1, -1, -1, "m", 0},
  {"the first member of a name counts",
   "{\"usage\":{\"prompt_tokens\":1,\"prompt_tokens\":2,\"completion_tokens\":3},"
   "\"model\":\"a\",\"model\":\"b\",\"usage\":{\"prompt_tokens\":9}}",
   1, -1, -1, 3, -1, 4, "a", 0},
  {"a first usage that is null hides a second",
   "{\"usage\":null,\"usage\":{\"prompt_tokens\":1}}", -1, -1, -1, -1, -1, -1, "", 0},
  {"a name spelt with \\u escapes",
   "{\"\\u0075sage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}", 3, -1, -1, 4, -1, 7, "",
   0},
  {"a \\u0000 ends a name", "{\"usage\\u0000x\":{\"prompt_tokens\":3}}", 3, -1, -1, -1, -1,
   -1, "", 0},
  {"a \\u0000 ends a value", "{\"model\":\"ab\\u0000cd\"}", -1, -1, -1, -1, -1, -1, "ab", 0},
  {"a non-hex \\u is a NUL (cJSON's parse_hex4)", "{\"model\":\"ab\\uZZZZcd\"}", -1, -1, -1,
   -1, -1, -1, "ab", 0},
  {"an unknown escape fails the whole document",
   "{\"model\":\"m\",\"x\":\"\\q\"," U12 "}", -1, -1, -1, -1, -1, -1, "", 0},
  {"a lone low surrogate fails it", "{\"model\":\"m\\udc00\"," U12 "}", -1, -1, -1, -1, -1, -1,
   "", 0},
  {"a high surrogate without its pair fails it", "{\"model\":\"m\\ud800x\"," U12 "}", -1, -1,
   -1, -1, -1, -1, "", 0},
  {"a \\u cut by the closing quote fails it", "{\"model\":\"m\\u12\"," U12 "}", -1, -1, -1, -1,
   -1, -1, "", 0},
  {"a trailing comma fails it", "{" U12 ",}", -1, -1, -1, -1, -1, -1, "", 0},
  {"a number strtod does not read whole fails it",
   "{" U12 ",\"x\":1e}", -1, -1, -1, -1, -1, -1, "", 0},
  {"a '+' number fails it", "{" U12 ",\"x\":+1}", -1, -1, -1, -1, -1, -1, "", 0},
  {"bytes after the top-level object are ignored", "{" U12 "}garbage{", 1, -1, -1, 2, -1, 3,
   "", 0},
  {"an error that is not an object is no error", "{\"error\":\"x\",\"model\":\"m\"}", -1, -1,
   -1, -1, -1, -1, "m", 0},
  {"an error object inside the usage is none", "{\"usage\":{\"error\":{}}}", -1, -1, -1, -1,
   -1, -1, "", 0},
  {"type error", "{\"type\":\"error\",\"error\":\"overloaded\"}", -1, -1, -1, -1, -1, -1, "",
   1},
  {"array elements that are not objects are skipped",
   "[1,\"usage\",null,[{\"usage\":{\"prompt_tokens\":7}}],{" U12 "}]", 1, -1, -1, 2, -1, 3, "",
   0},
  {"a broken array element fails the whole array",
   "[{" U12 "},{\"model\":\"x\",}]", -1, -1, -1, -1, -1, -1, "", 0},
  /* SSE */
  {"sse: the word usage in a text delta says nothing",
   "data: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"usage model error\"}}\n\n"
   "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n\n",
   1, -1, -1, 2, -1, 3, "", 0},
  {"sse: a chunk with only a model still names it (the last wins)",
   "data: {\"model\":\"a\",\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n\n"
   "data: {\"model\":\"b\",\"choices\":[]}\n\n",
   1, -1, -1, 2, -1, 3, "b", 0},
  {"sse: a name spelt with \\u escapes",
   "data: {\"\\u0075sage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\n", 3, -1, -1, 4,
   -1, 7, "", 0},
  {"sse: a byte order mark inside an event's data",
   "data: \xEF\xBB\xBF{\"model\":\"m\"}\n\n", -1, -1, -1, -1, -1, -1, "m", 0},
  {"sse: response.failed without an error object",
   "data: {\"type\":\"response.failed\"}\n\n", -1, -1, -1, -1, -1, -1, "", 1},
  {"sse: a model named with an escaped quote is not taken for the bytes that spell it",
   "data: {\"model\":\"a\\\",\\\"usage\\\":{\\\"prompt_tokens\\\":5},\\\"x\\\":\\\"b\"}\n\n"
   "data: {\"model\":\"a\",\"usage\":{\"prompt_tokens\":5},\"x\":\"b\"}\n\n",
   5, -1, -1, -1, -1, -1, "a", 0},
  {"sse: a broken event says nothing, the next one counts",
   "data: {\"usage\":{\"prompt_tokens\":5}\n\n"
   "data: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n\n",
   1, -1, -1, 2, -1, 3, "", 0},
  /* ---- the SSE framing's fast paths (issue 16, third round): lines passed over whole,
   * data lines read where they lie, and the lines next to them that are read byte by
   * byte ---- */
  {"sse: lines that are no data lines are passed over, and only those",
   ": comment\n"
   "event: message_start\r\n"
   "xdata: {\"usage\":{\"prompt_tokens\":9}}\n"
   "data: {\"usage\":{\"prompt_tokens\":1,\n"
   "id: 7\n"
   "data: \"completion_tokens\":2}}\n"
   "retry\n"
   "\r\n"
   "event: e\n\n"
   "data: {\"model\":\"m\"}\nevent: x\n\n"
   "dat: {\"model\":\"n\"}\n\n"
   "e\rdata: {\"model\":\"o\"}\n\n",
   1, -1, -1, 2, -1, 3, "m", 0},
  {"sse: a field line named data, without a colon, is a data line",
   "event: x\ndata\r\ndata: {\"model\":\"m\"}\n\n", -1, -1, -1, -1, -1, -1, "m", 0},
  /* ---- the fast paths of issue 16's second round: each shape they take, and the ones
   * next to it that they leave to the general code ---- */
  {"separators: none, one space, two, a tab, a newline and indent, a blank before ','",
   "{\"model\":\"m\", \"x\":1,  \"y\":2,\t\"usage\":  {\"prompt_tokens\":\t1,\n  "
   "\"completion_tokens\": \n2 , \"total_tokens\" :3},\n\n\"z\" :3}",
   1, -1, -1, 2, -1, 3, "m", 0},
  {"separators in a top-level array and in its objects",
   "[{\"usage\": {\"prompt_tokens\": 1}}, \"s\", {\"model\": \"m\"},\n  {\"usage\":"
   "{\"completion_tokens\":2}},\"t\",{\"model\":\"n\"} ,\t{}]",
   1, -1, -1, 2, -1, 3, "n", 0},
  {"\", \" then a name with an escape, and \":\" then a value with one",
   "{\"usage\": {\"prompt_tokens\": 1, \"\\u0063ompletion_tokens\": 2,\"total_tokens\":3},"
   " \"mod\\u0065l\": \"a\\\"b\"}",
   1, -1, -1, 2, -1, 3, "a\"b", 0},
  {"duplicate names after \", \": the first counts",
   "{\"usage\": {\"prompt_tokens\": 1, \"prompt_tokens\": 5, \"completion_tokens\": 2}, "
   "\"model\": \"m\", \"model\": \"n\", \"usage\": {\"prompt_tokens\": 9}}",
   1, -1, -1, 2, -1, 3, "m", 0},
  {"names a byte off a slot's, or at its place in the table, or another context's",
   "{\"usagf\": {\"prompt_tokens\": 7}, \"modem\": \"x\", \"prompt_tokens\": 5, \"usage\": "
   "{\"prompt_tokenz\": 1, \"/xxxxxxxxxxxxxxx\": 3, \"model\": \"y\", \"completion_tokens\": 2,"
   " \"prompt_tokens_details\": {\"cached_tokenz\": 4, \"reasoning_tokens\": 4}}}",
   -1, -1, -1, 2, -1, -1, "", 0},
  {"every name of every context, read where it lies",
   "{\"type\": \"message_start\", \"message\": {\"model\": \"c\", \"usage\": {\"input_tokens\":"
   " 5, \"cache_read_input_tokens\": 1, \"cache_creation_input_tokens\": 2, \"output_tokens\":"
   " 9, \"input_tokens_details\": {\"cached_tokens\": 1}}}}",
   8, 1, 2, -1, -1, -1, "c", 0},
  {"every name of a Responses event, and an error object",
   "{\"type\": \"response.completed\", \"response\": {\"model\": \"o\", \"usage\": "
   "{\"input_tokens\": 5, \"output_tokens\": 3, \"output_tokens_details\": "
   "{\"reasoning_tokens\": 1}, \"total_tokens\": 8}}, \"error\": {\"code\": 1}}",
   5, -1, -1, 3, 1, 8, "o", 1},
  {"every name of usageMetadata and the top level",
   "{\"usageMetadata\": {\"toolUsePromptTokenCount\": 1, \"promptTokenCount\": 10, "
   "\"candidatesTokenCount\": 3, \"thoughtsTokenCount\": 2, \"cachedContentTokenCount\": 4, "
   "\"totalTokenCount\": 16}, \"modelVersion\": \"g\", \"error\": null, \"type\": \"x\"}",
   11, 4, -1, 5, 2, 16, "g", 0},
  {"names of 16 to 40 bytes, across the 16- and 32-byte reads",
   "{\"usage\": {\"completion_tokens_details\": {\"reasoning_tokens\": 3}, "
   "\"cache_creation_input_tokens\": 4, \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\": 1, "
   "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\": 1, \"input_tokens\": 6, \"output_tokens\": 2}}",
   10, -1, 4, 2, 3, 12, "", 0},
  {"a \\u0000 ends a long name at 13, 25 and 31 bytes",
   "{\"usage\": {\"prompt_tokens\\u0000xxxxxxxxxxxxxxxxxxxxxxx\": 4, "
   "\"completion_tokens_details\\u0000yyyyy\": {\"reasoning_tokens\": 3}, "
   "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\\u0000\": 1, \"completion_tokens\": 5}}",
   4, -1, -1, 5, 3, 9, "", 0},
  {"numbers nobody reads, ended by each byte that may follow one",
   "{\"created\": 1764547200, \"n\":12,\"o\": 0123 , \"e\": 12e3, \"f\": 1.5, \"g\": -3, "
   "\"h\": [1,2 ,3], \"i\": {\"j\": 4}, " U12 ", \"k\": 7}",
   1, -1, -1, 2, -1, 3, "", 0},
  {"a number nobody reads followed by a byte no value ends with fails the document",
   "{\"n\": 12x, " U12 "}", -1, -1, -1, -1, -1, -1, "", 0},
  {"a number strtod stops inside fails the document", "{\"n\": 12.e, " U12 "}",
   -1, -1, -1, -1, -1, -1, "", 0},
  {"a top-level array that fails after an element with usage: nothing counts",
   "[{" U12 ", \"model\": \"m\"}, {\"x\": ]", -1, -1, -1, -1, -1, -1, "", 0},
  {"an object that fails after its usage: nothing counts",
   "{" U12 ", \"model\": \"m\", \"x\": }", -1, -1, -1, -1, -1, -1, "", 0},
  {"separators of a skipped value: none, one space, two, a newline",
   "{\"choices\": [{\"a\":1, \"b\": 2, \"c\":  3, \"d\":\n4, \"e\" : 5, \"f\":\"s\","
   " \"g\": {\"h\": [true, null]}}], " U12 "}",
   1, -1, -1, 2, -1, 3, "", 0},
  {"counts of 16, 17 and 20 digits (2^64 + 5), with leading zeros, read where they lie",
   "{\"usage\": {\"prompt_tokens\": 0000000000000042, \"completion_tokens\": "
   "09007199254740991, \"total_tokens\": 10000000000000000, \"input_tokens_details\": "
   "{\"cached_tokens\": 9007199254740992}, \"prompt_tokens_details\": {\"cached_tokens\": "
   "1000000000000000}, \"input_tokens\": 18446744073709551621}}",
   42, 1000000000000000LL, -1, 9007199254740991LL, -1, 9007199254741033LL, "", 0},
  {"strings kept where they lie: \"\", a model of 127 bytes; an escaped \"type\"",
   "{\"type\": \"mess\\u0061ge\", \"message\": {\"model\": \"\"}, \"model\": \"xxxxxxxxx"
   "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
   "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\", \"modelVersion\": \"v\", " U12 "}",
   1, -1, -1, 2, -1, 3,
   "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
   "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 0},
  {"a model of 128 bytes kept where it lies is cut to 127",
   "{\"model\": \"yxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
   "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxz\"}",
   -1, -1, -1, -1, -1, -1,
   "yxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
   "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 0},
};

static void check_case(const struct usage_case *c, const struct cg_usage *u, const char *how) {
#define CHECK(F)                                                                             \
  cr_expect_eq(u->F, c->F, "%s (%s): " #F " %lld, want %lld", c->name, how,                 \
               (long long) u->F, (long long) c->F)
  CHECK(input);
  CHECK(cached_input);
  CHECK(cache_write);
  CHECK(output);
  CHECK(reasoning);
  CHECK(total);
  CHECK(error_event);
#undef CHECK
  cr_expect_str_eq(u->model, c->model, "%s (%s): model", c->name, how);
}

/* Every case whole, one byte at a time, and cut in two at every byte offset. */
Test(usage, scanner_table_at_every_split) {
  size_t i, cut;
  for (i = 0; i < sizeof(scan_cases) / sizeof(scan_cases[0]); i++) {
    const struct usage_case *c = &scan_cases[i];
    size_t len = strlen(c->body);
    struct cg_usage u;
    run(c->body, len, (size_t) -1, &u);
    check_case(c, &u, "whole");
    run(c->body, len, 1, &u);
    check_case(c, &u, "one byte at a time");
    for (cut = 1; cut < len; cut++) {
      struct cg_usage_parser *p = cg_usage_new();
      char how[32];
      cg_usage_feed(p, c->body, cut);
      cg_usage_feed(p, c->body + cut, len - cut);
      cg_usage_finish(p, &u);
      cg_usage_free(p);
      snprintf(how, sizeof(how), "cut at %zu", cut);
      check_case(c, &u, how);
    }
  }
  /* The older table too, cut at every offset. */
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const struct usage_case *c = &cases[i];
    size_t len = strlen(c->body);
    for (cut = 1; cut < len; cut++) {
      struct cg_usage_parser *p = cg_usage_new();
      struct cg_usage u;
      char how[32];
      cg_usage_feed(p, c->body, cut);
      cg_usage_feed(p, c->body + cut, len - cut);
      cg_usage_finish(p, &u);
      cg_usage_free(p);
      snprintf(how, sizeof(how), "cut at %zu", cut);
      check_case(c, &u, how);
    }
  }
}

/* cJSON's whitespace is any byte up to 0x20, NUL included. */
Test(usage, nul_and_control_bytes_are_whitespace) {
  static const char body[] = "{\0\"usage\"\x01:\x1f{\"prompt_tokens\":1,\"completion_tokens\":2}}";
  struct cg_usage u;
  run(body, sizeof(body) - 1, 3, &u);
  cr_expect_eq(u.input, 1);
  cr_expect_eq(u.total, 3);
}

/* At most 1000 nested arrays and objects (CJSON_NESTING_LIMIT). */
static void nested(size_t depth, struct cg_usage *u) {
  static const char inner[] = "{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2},\"x\":";
  size_t n = sizeof(inner) - 1 + 2 * depth + 2, i;
  char *b = malloc(n), *w = b;
  cr_assert_not_null(b);
  memcpy(w, inner, sizeof(inner) - 1), w += sizeof(inner) - 1;
  for (i = 0; i < depth; i++)
    *w++ = '[';
  for (i = 0; i < depth; i++)
    *w++ = ']';
  *w++ = '}';
  run(b, (size_t) (w - b), 4096, u);
  free(b);
}

Test(usage, nesting_limit) {
  struct cg_usage u;
  nested(999, &u); /* 1000 with the object */
  cr_expect_eq(u.total, 3);
  nested(1000, &u);
  cr_expect_eq(u.total, -1);
}

/* ---- the string fast paths (issue 16): every escape at every offset ---- */

/* The escapes and odd bytes a string may hold: as sent, and as the model reads them. */
static const struct {
  const char *raw, *decoded;
} string_bits[] = {
  {"\\\"", "\""},         {"\\\\", "\\"},     {"\\\\\\\"", "\\\""}, {"\\n", "\n"},
  {"\\/", "/"},           {"\x01", "\x01"},   {"\x1f\x7f", "\x1f\x7f"},
  {"\xc3\xa9", "\xc3\xa9"}, {"\\u00e9", "\xc3\xa9"}, {"\\ud83d\\ude00", "\xf0\x9f\x98\x80"},
  {"", ""},
};

static void expect_at_every_split(const char *body, size_t len, const char *model,
                                  int64_t input, int64_t output, const char *what) {
  size_t cut;
  struct cg_usage u;
  for (cut = 0; cut <= len; cut++) {
    struct cg_usage_parser *p = cg_usage_new();
    cr_assert_not_null(p);
    cg_usage_feed(p, body, cut);
    cg_usage_feed(p, body + cut, len - cut);
    cg_usage_finish(p, &u);
    cg_usage_free(p);
    cr_expect_str_eq(u.model, model, "%s, cut at %zu: model", what, cut);
    cr_expect_eq(u.input, input, "%s, cut at %zu: input %lld", what, cut, (long long) u.input);
    cr_expect_eq(u.output, output, "%s, cut at %zu: output %lld", what, cut,
                 (long long) u.output);
    if (u.input != input || u.output != output || strcmp(u.model, model) != 0)
      return; /* one report per body is enough */
  }
  run(body, len, 1, &u);
  cr_expect_str_eq(u.model, model, "%s, one byte at a time: model", what);
  cr_expect_eq(u.input, input, "%s, one byte at a time: input", what);
}

/* A '"' or '\' (escaped or not), a control byte, UTF-8 or a \u escape at every offset
 * from a string's start (0 to 140: both sides of every 16- and 64-byte boundary the
 * scanner reads at once), in a value nobody reads, in the model (kept) and in a name,
 * each body cut at every byte. */
/* A raw NUL ends a name compared in place and a string kept where it lies (cJSON reads
 * both as C strings), wherever it falls in the 16- and 32-byte reads of cg__string_stop:
 * a slot's name or a model, a NUL and 0 to 40 more bytes, in the top-level object and in
 * a usage object, cut at every byte. */
Test(usage, raw_nul_ends_a_name_or_a_model_at_every_length) {
  static const char x40[] = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
  size_t junk, cut;
  for (junk = 0; junk <= 40; junk++) {
    char body[256], what[48], *h;
    int n = snprintf(body, sizeof(body),
                     "{\"model#%.*s\": \"m\", \"usage\": {\"prompt_tokens#%.*s\": 4, "
                     "\"completion_tokens\":5}, \"model\": \"n\"}",
                     (int) junk, x40, (int) junk, x40);
    cr_assert_lt((size_t) n, sizeof(body));
    while ((h = memchr(body, '#', (size_t) n)))
      *h = '\0';
    snprintf(what, sizeof(what), "NUL then %zu bytes in names", junk);
    expect_at_every_split(body, (size_t) n, "m", 4, 5, what);
    n = snprintf(body, sizeof(body), "{\"model\": \"m#%.*s\", " U12 "}", (int) junk, x40);
    *strchr(body, '#') = '\0';
    snprintf(what, sizeof(what), "NUL then %zu bytes in the model", junk);
    expect_at_every_split(body, (size_t) n, "m", 1, 2, what);
    /* the "type" compared with its length: "error" only when the NUL ends it there */
    n = snprintf(body, sizeof(body), "{\"type\": \"error#%.*s\"}", (int) junk, x40);
    *strchr(body, '#') = '\0';
    for (cut = 0; cut <= (size_t) n; cut++) {
      struct cg_usage u;
      run_cut(body, (size_t) n, cut, &u);
      cr_expect_eq(u.error_event, 1, "an error type, NUL then %zu bytes, cut at %zu", junk, cut);
      if (u.error_event != 1)
        break;
    }
  }
}

/* cg_usage_finish sets every byte of its result however the body ended (it no longer
 * clears it first): the same bytes into a result filled with 0x5a as into a zeroed one. */
Test(usage, finish_sets_every_byte) {
  static const char *bodies[] = {
    "{\"model\":\"m\"," U12 "}", "{\"model\":\"m\",", "data: {\"model\":\"m\"}\n\n",
    "data: {\"model\":\"m\"," U12 "}\n\n", "", "[DONE]"};
  size_t i;
  for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
    struct cg_usage a, b;
    struct cg_usage_parser *p = cg_usage_new(), *q = cg_usage_new();
    cr_assert(p && q);
    memset(&a, 0, sizeof(a));
    memset(&b, 0x5a, sizeof(b));
    cg_usage_feed(p, bodies[i], strlen(bodies[i]));
    cg_usage_feed(q, bodies[i], strlen(bodies[i]));
    cg_usage_finish(p, &a);
    cg_usage_finish(q, &b);
    cg_usage_free(p);
    cg_usage_free(q);
    cr_expect(memcmp(&a, &b, sizeof(a)) == 0, "body %zu: bytes left as they were", i);
  }
  {
    struct cg_usage a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0x5a, sizeof(b));
    cg_usage_finish(NULL, &a);
    cg_usage_finish(NULL, &b);
    cr_expect(memcmp(&a, &b, sizeof(a)) == 0, "no parser: bytes left as they were");
  }
}

Test(usage, string_bits_at_every_offset) {
  size_t b, pad;
  for (b = 0; b < sizeof(string_bits) / sizeof(string_bits[0]); b++) {
    for (pad = 0; pad <= 140; pad += pad < 40 ? 1 : 3) {
      char body[1024], model[256], what[64];
      size_t mpad = pad % 71, n;
      memset(model, 'x', mpad);
      snprintf(model + mpad, sizeof(model) - mpad, "%sy", string_bits[b].decoded);
      n = (size_t) snprintf(body, sizeof(body), "{\"note\":\"%.*s%stail\",\"%.*s%s\":1,"
                            "\"model\":\"%.*s%sy\","
                            "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}",
                            (int) pad, ZEROS100 ZEROS100, string_bits[b].raw, (int) mpad,
                            ZEROS100, string_bits[b].raw, (int) mpad,
                            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                            string_bits[b].raw);
      cr_assert_lt(n, sizeof(body));
      snprintf(what, sizeof(what), "bit %zu at %zu", b, pad);
      expect_at_every_split(body, n, model, 1, 2, what);
    }
  }
}

/* The same bits in the names the scanner compares (those of the usage object): spelt
 * plain they count, with an escape that decodes to the same name too. */
Test(usage, names_with_escapes_at_every_split) {
  static const char *const bodies[] = {
    "{\"usage\":{\"prompt_\\u0074okens\":1,\"completion_tokens\":2}}",
    "{\"usage\":{\"prompt_tokens\\u0000x\":1,\"completion_tokens\":2}}",
    "{\"usage\":{\"prompt_tokens\":1,\"comp\\u006cetion_tokens\":2}}",
    "{\"usag\\u0065\":{\"prompt_tokens\":1,\"completion_tokens\":2}}",
    "{\"\\\"usage\":{\"prompt_tokens\":9},\"usage\":{\"prompt_tokens\":1,"
    "\"completion_tokens\":2}}",
    "{\"usage\":{\"prompt_tokens\\\\\":9,\"prompt_tokens\":1,\"completion_tokens\":2}}",
    "{\"usage\":{\"prompt_tokens_and_a_name_much_longer_than_any_slot\":9,"
    "\"prompt_tokens\":1,\"completion_tokens\":2}}",
  };
  size_t i;
  for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++)
    expect_at_every_split(bodies[i], strlen(bodies[i]), "", 1, 2, bodies[i]);
}

/* Blanks of every kind, from none to runs of 40 (indentation: read 16 at a time), between
 * every two tokens. */
Test(usage, blank_runs_at_every_split) {
  static const char blanks[] = " \n\t\r  \n    \t\t   \r\n        \n  \t  \n\n      ";
  const size_t most = sizeof(blanks) - 1; /* 40 */
  size_t w;
  cr_assert_eq(most, 40);
  for (w = 0; w <= most; w++) {
    char body[2048], what[32];
    const char *bl = blanks + (most - w);
    int n = snprintf(body, sizeof(body),
                     "%s{%s\"model\"%s:%s\"m\"%s,%s\"usage\"%s:%s{%s\"prompt_tokens\"%s:%s12"
                     "%s,%s\"completion_tokens\"%s:%s3%s}%s,%s\"x\"%s:%s[%s1%s,%strue%s,%s"
                     "null%s]%s}%s",
                     bl, bl, bl, bl, bl, bl, bl, bl, bl, bl, bl, bl, bl, bl, bl, bl, bl, bl, bl,
                     bl, bl, bl, bl, bl, bl, bl, bl, bl);
    cr_assert_lt((size_t) n, sizeof(body));
    snprintf(what, sizeof(what), "blanks of %zu", w);
    expect_at_every_split(body, (size_t) n, "m", 12, 3, what);
  }
}

/* Real answers (as the providers send them, pretty-printed or not), cut at every byte. */
Test(usage, real_answers_at_every_split) {
  static const struct {
    const char *body, *model;
    int64_t input, output;
  } answers[] = {
    {"{\n  \"id\": \"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG\",\n  \"object\": "
     "\"chat.completion\",\n  \"created\": 1741570283,\n  \"model\": \"gpt-4o-2024-08-06\",\n"
     "  \"choices\": [\n    {\n      \"index\": 0,\n      \"message\": {\n        \"role\": "
     "\"assistant\",\n        \"content\": \"The image shows a wooden boardwalk path running "
     "through a lush green field or meadow. The sky is bright blue with some scattered "
     "clouds, giving the scene a serene and peaceful atmosphere. Trees and shrubs are "
     "visible in the background.\",\n        \"refusal\": null,\n        \"annotations\": "
     "[]\n      },\n      \"logprobs\": null,\n      \"finish_reason\": \"stop\"\n    }\n  ],\n"
     "  \"usage\": {\n    \"prompt_tokens\": 1117,\n    \"completion_tokens\": 46,\n    "
     "\"total_tokens\": 1163,\n    \"prompt_tokens_details\": {\n      \"cached_tokens\": 0,\n"
     "      \"audio_tokens\": 0\n    },\n    \"completion_tokens_details\": {\n      "
     "\"reasoning_tokens\": 0,\n      \"audio_tokens\": 0,\n      "
     "\"accepted_prediction_tokens\": 0,\n      \"rejected_prediction_tokens\": 0\n    }\n  "
     "},\n  \"service_tier\": \"default\",\n  \"system_fingerprint\": \"fp_fc9f1d7035\"\n}\n",
     "gpt-4o-2024-08-06", 1117, 46},
    {"{\"id\":\"msg_01XFDUDYJgAACzvnptvVoYEL\",\"type\":\"message\",\"role\":\"assistant\","
     "\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[{\"type\":\"text\",\"text\":"
     "\"Hello! \\\"Quoted\\\" text, a backslash \\\\ and a tab\\t, caf\\u00e9 \xe2\x98\x95.\"}],"
     "\"stop_reason\":\"end_turn\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,"
     "\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":30,"
     "\"output_tokens\":6,\"service_tier\":\"standard\"}}",
     "claude-sonnet-4-5-20250929", 42, 6},
    {"{\n  \"candidates\": [\n    {\n      \"content\": {\n        \"parts\": [\n          {\n"
     "            \"text\": \"Hi there! How can I help you today?\\n\"\n          }\n        ],\n"
     "        \"role\": \"model\"\n      },\n      \"finishReason\": \"STOP\",\n      "
     "\"avgLogprobs\": -0.0345\n    }\n  ],\n  \"usageMetadata\": {\n    \"promptTokenCount\": "
     "5,\n    \"candidatesTokenCount\": 10,\n    \"totalTokenCount\": 15,\n    "
     "\"promptTokensDetails\": [\n      {\n        \"modality\": \"TEXT\",\n        "
     "\"tokenCount\": 5\n      }\n    ]\n  },\n  \"modelVersion\": \"gemini-2.5-flash\",\n  "
     "\"responseId\": \"abc\"\n}\n",
     "gemini-2.5-flash", 5, 10},
    {"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,"
     "\"model\":\"gpt-4o-mini\",\"system_fingerprint\":\"fp_1\",\"choices\":[{\"index\":0,"
     "\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,"
     "\"finish_reason\":null}],\"usage\":null}\n\n"
     "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,"
     "\"model\":\"gpt-4o-mini\",\"system_fingerprint\":\"fp_1\",\"choices\":[{\"index\":0,"
     "\"delta\":{\"content\":\"Line one\\nline \\\"two\\\"\"},\"logprobs\":null,"
     "\"finish_reason\":null}],\"usage\":null}\n\n"
     "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,"
     "\"model\":\"gpt-4o-mini\",\"system_fingerprint\":\"fp_1\",\"choices\":[{\"index\":0,"
     "\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":null}\n\n"
     "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,"
     "\"model\":\"gpt-4o-mini\",\"system_fingerprint\":\"fp_1\",\"choices\":[],"
     "\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":12,\"total_tokens\":21}}\n\n"
     "data: [DONE]\n\n",
     "gpt-4o-mini", 9, 12},
    {"event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\","
     "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],"
     "\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\r\n\r\n"
     "event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
     "\"delta\":{\"type\":\"text_delta\",\"text\":\"a \\\\ b\"}}\r\n\r\n"
     "event: message_delta\r\ndata: {\"type\":\"message_delta\",\"delta\":"
     "{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\r\n\r\n",
     "claude-x", 25, 15},
    {"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hel\"}],\"role\": "
     "\"model\"}}],\"usageMetadata\": {\"promptTokenCount\": 4,\"totalTokenCount\": 4},"
     "\"modelVersion\": \"gemini-2.5-pro\"}\r\n\r\n"
     "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"lo\"}],\"role\": "
     "\"model\"},\"finishReason\": \"STOP\"}],\"usageMetadata\": {\"promptTokenCount\": 4,"
     "\"candidatesTokenCount\": 2,\"totalTokenCount\": 6},\"modelVersion\": "
     "\"gemini-2.5-pro\"}\r\n\r\n",
     "gemini-2.5-pro", 4, 2},
  };
  size_t i;
  for (i = 0; i < sizeof(answers) / sizeof(answers[0]); i++)
    expect_at_every_split(answers[i].body, strlen(answers[i].body), answers[i].model,
                          answers[i].input, answers[i].output, answers[i].model);
}

/* The bounds again with each stream in one buffer: a one-line event is then read where it
 * lies (not copied), and must keep the same bound. */
Test(usage, sse_event_bounds_in_one_buffer) {
  struct cg_usage u;
  size_t len;
  char *b = sse_with_event(CG_USAGE_EVENT_MAX, 0, &len);
  run(b, len, (size_t) -1, &u);
  cr_expect_eq(u.skipped, 0);
  cr_expect_eq(u.input, 1);
  cr_expect_eq(u.output, 2);
  free(b);
  b = sse_with_event(CG_USAGE_EVENT_MAX + 1, 1, &len);
  run(b, len, (size_t) -1, &u);
  cr_expect_eq(u.skipped, 0);
  cr_expect_eq(u.input, 3);
  cr_expect_eq(u.output, 4);
  free(b);
  b = sse_with_event(CG_USAGE_EVENT_MAX + 1, 0, &len);
  run(b, len, (size_t) -1, &u);
  cr_expect_eq(u.skipped, 1);
  cr_expect_eq(u.input, -1);
  free(b);
}

/* The SSE pre-check (usage.c cg__may_matter, 16 or 32 places a round and one last round
 * over the tail): each word, the places that say nothing new and a backslash at every
 * offset of an event, the stream cut at every byte. */
Test(usage, sse_pre_check_at_every_offset) {
  static const struct {
    const char *tail; /* after the padding, in the second event */
    int64_t input, output;
    const char *model;
    int error_event;
  } tails[] = {
    {"\",\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}", 1, 2, "m", 0},
    {"\\n\",\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}", 1, 2, "m", 0},
    {"\",\"model\":\"m2\"}", -1, -1, "m2", 0},
    {"\\\\\",\"model\":\"m2\"}", -1, -1, "m2", 0},
    {"\",\"type\":\"error\"}", -1, -1, "m", 1},
    {"\",\"type\":\"response.failed\"}", -1, -1, "m", 1},
    {"\",\"model\":\"m\",\"usage\":null}", -1, -1, "m", 0},
    {"\\\"\",\"model\":\"m\",\"usage\":null}", -1, -1, "m", 0},
    {"\\u0041\",\"model\":\"m\"}", -1, -1, "m", 0},
    {"\",\"usage\":{\"total_tokens\":5},\"x\":\"\\/\"}", -1, -1, "m", 0},
    /* blanks around the colon (cg__spaced_place) */
    {"\", \"model\" : \"m\", \"usage\" :\tnull}", -1, -1, "m", 0},
    {"\", \"model\" : \"m2\"}", -1, -1, "m2", 0},
    {"\", \"usage\" : {\"prompt_tokens\": 1, \"completion_tokens\": 2}}", 1, 2, "m", 0},
    {"\", \"model\":\t\"m\", \"usage\" : nul}", -1, -1, "m", 0},
    {"\", \"model\":\ndata: \"m\", \"usage\"\ndata:  :\tnull}", -1, -1, "m", 0},
    {"\", \"model\" : \"mm\", \"usage\"  :  null}", -1, -1, "mm", 0},
    {"\", \"model\" :\ndata: \"n\"}", -1, -1, "n", 0},
  };
  /* the event before: compact, and with blanks around its colons */
  static const char *const firsts[] = {"{\"model\":\"m\",\"usage\":null}",
                                       "{\"model\" : \"m\", \"usage\": null}"};
  const size_t ntails = sizeof(tails) / sizeof(tails[0]);
  size_t ft, t, pad, cut, f;
  for (ft = 0; ft < 2 * ntails; ft++) {
    f = ft / ntails;
    t = ft % ntails;
    for (pad = 0; pad <= 100; pad++) {
      char body[512], how[64];
      struct cg_usage u;
      int n = snprintf(body, sizeof(body), "data: %s\n\ndata: {\"p\":\"%.*s%s\n\n", firsts[f],
                       (int) pad, ZEROS100, tails[t].tail);
      cr_assert_lt((size_t) n, sizeof(body));
      for (cut = 0; cut <= (size_t) n; cut++) {
        run_cut(body, (size_t) n, cut, &u);
        snprintf(how, sizeof(how), "first %zu, tail %zu, pad %zu, cut at %zu", f, t, pad, cut);
        cr_expect_eq(u.input, tails[t].input, "%s: input %lld", how, (long long) u.input);
        cr_expect_eq(u.output, tails[t].output, "%s: output %lld", how, (long long) u.output);
        cr_expect_eq(u.total, t == 9 ? 5 : tails[t].input < 0 ? -1 : 3, "%s: total", how);
        cr_expect_str_eq(u.model, tails[t].model, "%s: model", how);
        cr_expect_eq(u.error_event, tails[t].error_event, "%s: error_event", how);
        if (u.input != tails[t].input || strcmp(u.model, tails[t].model) != 0)
          return; /* one report is enough */
      }
    }
  }
}

/* A value no rule reads (read whole in a buffer, keeping nothing; a skip of its own,
 * cg__skip_tree, did it until it cost more code lines than it saved) says the same as when
 * the scanner reads it byte by byte: one byte at a time (never whole) is the reference,
 * whole and cut at every byte must agree; `ok` says whether the document parses (then its
 * usage counts). */
Test(usage, skipped_values_at_every_split) {
  static const struct {
    const char *v;
    int ok; /* 1 parses, 0 fails, -1 as the reference says */
  } values[] = {
    {"[]", 1}, {"{}", 1}, {"[ ]", 1}, {"{ }", 1},
    {"[1,-2,3.5,-0.25e+10,1E5,1.,-.5,0e0,01,-0,1e-7]", 1},
    {"[true,false,null,\"\",[],{}]", 1},
    {"{\"a\":{\"b\":[{\"c\":\"]}\\\"[{\"}]},\"d\":\"\\\\\"}", 1},
    {"[\"\\u00e9\\ud83d\\ude00\\n\\t\\\\\\/\\b\\f\\r\\\"\"]", 1},
    {"[ 1 ,\n[ 2 ,\t{ \"k\" : \"v\" } ] ]", 1},
    {"[{\"usage\":{\"prompt_tokens\":99},\"model\":\"x\",\"error\":{}}]", 1},
    {"[\"\\u0022\",\"\\u005C\",\"\\uD83D\\uDE00\",\"\\u0000\"]", 1},
    {"[1,]", 0}, {"{\"a\":1,}", 0}, {"[1 2]", 0}, {"{\"a\" 1}", 0}, {"{1:2}", 0},
    {"[\"\\x\"]", 0}, {"[\"\\ude00\"]", 0}, {"[\"\\ud83d\"]", 0}, {"[\"\\ud83d\\u0041\"]", 0},
    {"[1.2.3]", 0}, {"[1e]", 0}, {"[1e+]", 0}, {"[-]", 0}, {"[-.]", 0}, {"[.5]", 0},
    {"[+1]", 0}, {"[1-2]", 0}, {"[tru]", 0}, {"[nul]", 0}, {"[nullx]", 0}, {"[1}", 0},
    {"{\"a\":1]", 0}, {"[\"a]", 0}, {"[[[]]", 0}, {"[,]", 0}, {"{,}", 0}, {"[\x01]", 1},
    {"[\"\\u12\"]", -1}, {"[\"\\u12\\\"]\"]", -1}, {"[\"\\uzzzz\"]", -1},
    {"[\"\\ud83d\\uzzzz\"]", -1}, {"[\"\\", -1}, {"[\"\\u\"]", -1},
  };
  size_t i, cut;
  for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
    char body[512], how[96];
    struct cg_usage ref, u;
    int n = snprintf(body, sizeof(body), "{\"model\":\"m\",\"choices\":%s,\"x\":[%s]," U12 "}",
                     values[i].v, values[i].v);
    cr_assert_lt((size_t) n, sizeof(body));
    run(body, (size_t) n, 1, &ref);
    if (values[i].ok >= 0)
      cr_expect_eq(ref.input, values[i].ok ? 1 : -1, "%s: input %lld", values[i].v,
                   (long long) ref.input);
    for (cut = 0; cut <= (size_t) n; cut++) {
      run_cut(body, (size_t) n, cut, &u);
      snprintf(how, sizeof(how), "%s, cut at %zu", values[i].v, cut);
      cr_expect_eq(u.input, ref.input, "%s: input %lld", how, (long long) u.input);
      cr_expect_eq(u.output, ref.output, "%s: output", how);
      cr_expect_str_eq(u.model, ref.model, "%s: model", how);
      cr_expect_eq(u.error_event, ref.error_event, "%s: error_event", how);
      if (u.input != ref.input)
        break; /* one report per value is enough */
    }
  }
}

/* Arrays, objects or both nested k deep under a name no rule reads: the scanner reads 1000
 * (cJSON's limit: the object and 999 more parse, 1000 do not; cg__skip_tree, now gone, read
 * 64); cut at every byte (every 7th when deep), so a buffer starts at every depth. */
Test(usage, skipped_nesting_at_every_split) {
  static const size_t depths[] = {1, 62, 63, 64, 65, 130, 935, 936, 937, 998, 999, 1000, 1001};
  size_t i, k, cut, kind;
  for (i = 0; i < 3 * sizeof(depths) / sizeof(depths[0]); i++) {
    size_t d = depths[i / 3], n = 0;
    char *body = malloc(6 * d + 128);
    struct cg_usage u;
    kind = i % 3; /* 0 arrays, 1 objects, 2 both in turn */
    n += (size_t) sprintf(body, "{\"x\":");
    for (k = 0; k < d; k++) {
      if (kind == 0 || (kind == 2 && k % 2)) {
        body[n++] = '[';
      } else {
        memcpy(body + n, "{\"a\":", 5);
        n += 5;
      }
    }
    memcpy(body + n, "[]", 2);
    n += 2;
    for (k = d; k-- > 0;)
      body[n++] = kind == 0 || (kind == 2 && k % 2) ? ']' : '}';
    n += (size_t) sprintf(body + n, "," U12 "}");
    for (cut = 0; cut <= n; cut += d > 100 ? 7 : 1) {
      struct cg_usage_parser *p = cg_usage_new();
      cg_usage_feed(p, body, cut);
      cg_usage_feed(p, body + cut, n - cut);
      cg_usage_finish(p, &u);
      cg_usage_free(p);
      cr_expect_eq(u.input, d <= 998 ? 1 : -1, "%zu deep (%zu), cut at %zu: input %lld", d,
                   kind, cut, (long long) u.input);
      if (u.input != (d <= 998 ? 1 : -1))
        break;
    }
    run(body, n, (size_t) -1, &u);
    cr_expect_eq(u.input, d <= 998 ? 1 : -1, "%zu deep (%zu), whole", d, kind);
    free(body);
  }
}

/* The pre-check's "model known already" (usage.c cg__word_at, cg__same): a later chunk's model that
 * differs from the known one in any one byte, or is one byte longer or shorter, is read;
 * models of 1 to 30 bytes. */
Test(usage, sse_known_model_differs_at_every_byte) {
  static const char base[] = "gpt-4o-mini-2024-07-18-abcdefgh";
  size_t len, k;
  for (len = 1; len <= 30; len++) {
    for (k = 0; k <= len + 1; k++) {
      char m1[40], m2[40], body[512];
      struct cg_usage u;
      int n;
      memcpy(m1, base, len);
      m1[len] = '\0';
      memcpy(m2, m1, len + 1);
      if (k < len)
        m2[k] = m2[k] == 'Z' ? 'Y' : 'Z';
      else if (k == len)
        m2[len - 1] = '\0'; /* one byte shorter (empty when len is 1: not a model) */
      else
        m2[len] = 'Z', m2[len + 1] = '\0'; /* one byte longer */
      n = snprintf(body, sizeof(body),
                   "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\","
                   "\"model\":\"%s\",\"usage\":null}\n\n"
                   "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\","
                   "\"model\":\"%s\",\"choices\":[],\"usage\":null}\n\n",
                   m1, m2);
      cr_assert_lt((size_t) n, sizeof(body));
      run(body, (size_t) n, (size_t) -1, &u);
      cr_expect_str_eq(u.model, m2[0] ? m2 : m1, "model of %zu bytes, changed at %zu", len, k);
      run(body, (size_t) n, 7, &u);
      cr_expect_str_eq(u.model, m2[0] ? m2 : m1, "model of %zu bytes, changed at %zu, 7 at a time",
                       len, k);
    }
  }
}

/* cg_usage_reset: one parser reused for every case, after another answer cut anywhere
 * (an attempt that ended mid-body) or after a large event, reads each as a fresh one. */
Test(usage, reset_parser_reads_as_new) {
  struct cg_usage_parser *p = cg_usage_new();
  size_t i, ncases = sizeof(cases) / sizeof(cases[0]), big_len;
  char *big = sse_with_event(CG_USAGE_EVENT_MAX, 1, &big_len);
  cr_assert_not_null(p);
  for (i = 0; i < 3 * ncases; i++) {
    const struct usage_case *c = &cases[i % ncases], *o = &cases[(i * 7 + 3) % ncases];
    struct cg_usage u;
    size_t cut = strlen(o->body) * (i % 5) / 4;
    if (i % 11 == 5)
      cg_usage_feed(p, big, big_len); /* a large event's buffer: freed by the reset */
    else
      cg_usage_feed(p, o->body, cut);
    if (i % 3 == 0) {
      struct cg_usage ignored;
      cg_usage_finish(p, &ignored);
    }
    cg_usage_reset(p);
    cg_usage_feed(p, c->body, strlen(c->body));
    cg_usage_finish(p, &u);
    cr_expect_eq(u.input, c->input, "%s after a reset: input", c->name);
    cr_expect_eq(u.cached_input, c->cached_input, "%s after a reset: cached", c->name);
    cr_expect_eq(u.cache_write, c->cache_write, "%s after a reset: cache_write", c->name);
    cr_expect_eq(u.output, c->output, "%s after a reset: output", c->name);
    cr_expect_eq(u.reasoning, c->reasoning, "%s after a reset: reasoning", c->name);
    cr_expect_eq(u.total, c->total, "%s after a reset: total", c->name);
    cr_expect_eq(u.error_event, c->error_event, "%s after a reset: error_event", c->name);
    cr_expect_str_eq(u.model, c->model, "%s after a reset: model", c->name);
    cr_expect_eq(u.skipped, 0, "%s after a reset: skipped", c->name);
    cg_usage_reset(p);
  }
  cg_usage_free(p);
  free(big);
}

/* The SSE pre-check's prefix cache (usage.c cg__may_matter): an event that shares its
 * first bytes with the last one that said nothing is scanned only from near where the
 * two part.  Each pair is such a quiet event and a later one that parts from it at a
 * word: across the parting, at the closing quote of a known model, just after the shared
 * head, at the first byte (the later one in brackets), or with a backslash after it (a
 * \u-spelt name, an escape).  The head is padded so that the parting falls at every
 * place of a 32-byte round; the later event must say what it says, after the quiet one
 * once or twice, whole and in pieces; and a model that changes and changes back is
 * read both times (a read event drops the cache). */
Test(usage, sse_prefix_cache_boundaries) {
  static const struct {
    const char *quiet, *later; /* after the head; %s: the model */
    int64_t input;
    int model_changes; /* the later one names the model with "2" appended */
    const char *other;  /* or this model */
    int error_event;
  } pairs[] = {
    {"\"}}],\"usage\":null}", "\"}}]," U12 "}", 1, 0, NULL, 0},
    {"x\"}}],\"usage\":null}", "\"}}]," U12 "}", 1, 0, NULL, 0},
    {"\"}}],\"usx\":1,\"usage\":null}", "\"}}]," U12 "}", 1, 0, NULL, 0},
    {"\"}}],\"model\":\"%s\",\"usage\":null}", "\"}}],\"model\":\"%s2\",\"usage\":null}", -1,
     1, NULL, 0},
    {"\"}}],\"model\":\"%s\",\"usage\":null}", "\"}}],\"model\":\"%s\"," U12 "}", 1, 0, NULL, 0},
    {"\"}}],\"mox\":1}", "\"}}],\"model\":\"other\"}", -1, 0, "other", 0},
    {"\"}}],\"type\":\"err\"}", "\"}}],\"type\":\"error\"}", -1, 0, NULL, 1},
    {"\"}}],\"type\":\"response.fa\"}", "\"}}],\"type\":\"response.failed\"}", -1, 0, NULL, 1},
    {"\"}}],\"type\":\"response.failex\"}", "\"}}],\"type\":\"response.failed\"}", -1, 0, NULL,
     1},
    {"\"}}],\"type\":\"errox\"}", "\"}}],\"type\":\"error\"}", -1, 0, NULL, 1},
    /* they part in one byte, and share the rest: the word reaches into the shared end */
    {"\"}}],\"type\":\"xrror\"}", "\"}}],\"type\":\"error\"}", -1, 0, NULL, 1},
    {"\"}}],\"type\":\"xrror\",\"pad\":\"" ZEROS10 "\"}",
     "\"}}],\"type\":\"error\",\"pad\":\"" ZEROS10 "\"}", -1, 0, NULL, 1},
    {"\"}}],\"type\":\"response.faixed\"}", "\"}}],\"type\":\"response.failed\"}", -1, 0,
     NULL, 1},
    {"\"}}],\"usage\":null,\"x\":\"" ZEROS10 "\"}",
     "\"}}],\"usage\":{\"prompt_tokens\":1},\"x\":\"" ZEROS10 "\"}", 1, 0, NULL, 0},
    {"\"}}],\"x\":\"" ZEROS10 "\",\"pad\":\"" ZEROS10 "\"}",
     "\"}}],\"type\":\"error\",\"pad\":\"" ZEROS10 "\"}", -1, 0, NULL, 1},
    {"\"}}],\"model\":\"%s\",\"x\":1}", "\"}}],\"model\":\"%s2\",\"x\":1}", -1, 1, NULL,
     0},
    {"\"}}],\"usage\":null,\"pad\":\"" ZEROS10 ZEROS10 ZEROS10 ZEROS10 "\"}",
     "\"}}],\"\\u0075sage\":{\"prompt_tokens\":1},\"pad\":\"" ZEROS10 ZEROS10 ZEROS10 ZEROS10 "\"}",
     1, 0, NULL, 0},
    {"\"}}],\"usage\":null}", "\"}}],\"\\u0075sage\":{\"prompt_tokens\":1}}", 1, 0, NULL, 0},
    {"\"}}],\"usage\":null}", "\\n\"}}]," U12 "}", 1, 0, NULL, 0},
    {"\"}}],\"model\":\"%s\"}", "\"}}],\"model\":\"%s\\u0032\"}", -1, 1, NULL, 0},
  };
  static const char *const models[] = {"gpt-4o-mini", "m"};
  static const char head[] = "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\","
                             "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%.*s";
  size_t t, m, pad, k, w;
  for (m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
    for (t = 0; t < sizeof(pairs) / sizeof(pairs[0]); t++) {
      char want_model[64];
      if (pairs[t].other)
        snprintf(want_model, sizeof(want_model), "%s", pairs[t].other);
      else
        snprintf(want_model, sizeof(want_model), "%s%s", models[m],
                 pairs[t].model_changes ? "2" : "");
      for (pad = 0; pad <= 80; pad++) {
        char quiet[512], later[512], body[2048], how[96];
        int nq, nl, n;
        struct cg_usage u;
        nq = snprintf(quiet, sizeof(quiet), head, (int) pad, ZEROS100);
        nq += snprintf(quiet + nq, sizeof(quiet) - (size_t) nq, pairs[t].quiet, models[m]);
        nl = snprintf(later, sizeof(later), head, (int) pad, ZEROS100);
        nl += snprintf(later + nl, sizeof(later) - (size_t) nl, pairs[t].later, models[m]);
        cr_assert_lt((size_t) nq, sizeof(quiet));
        cr_assert_lt((size_t) nl, sizeof(later));
        for (k = 0; k < 3; k++) { /* the quiet one once or twice; the later one in [] */
          n = snprintf(body, sizeof(body), "data: {\"model\":\"%s\"}\n\ndata: %s\n\n%s%s%s"
                       "data: %s%s%s\n\n", models[m], quiet, k == 1 ? "data: " : "",
                       k == 1 ? quiet : "", k == 1 ? "\n\n" : "", k == 2 ? "[" : "", later,
                       k == 2 ? "]" : "");
          cr_assert_lt((size_t) n, sizeof(body));
          for (w = 0; w < 3; w++) {
            static const size_t pieces[] = {(size_t) -1, 7, 64};
            run(body, (size_t) n, pieces[w], &u);
            snprintf(how, sizeof(how), "pair %zu, model %zu, pad %zu, way %zu, pieces %zu", t, m,
                     pad, k, w);
            cr_expect_eq(u.input, pairs[t].input, "%s: input %lld", how, (long long) u.input);
            cr_expect_str_eq(u.model, want_model, "%s: model", how);
            cr_expect_eq(u.error_event, pairs[t].error_event, "%s: error_event", how);
            if (u.input != pairs[t].input || strcmp(u.model, want_model) != 0 ||
                u.error_event != pairs[t].error_event)
              return; /* one report is enough */
          }
        }
        if (pairs[t].model_changes) { /* and back: the quiet one names the first model */
          n = snprintf(body, sizeof(body), "data: {\"model\":\"%s\"}\n\ndata: %s\n\ndata: %s\n\n"
                       "data: %s\n\n", models[m], quiet, later, quiet);
          cr_assert_lt((size_t) n, sizeof(body));
          run(body, (size_t) n, (size_t) -1, &u);
          cr_expect_str_eq(u.model, models[m], "pair %zu, model %zu, pad %zu: changed back", t,
                           m, pad);
        }
        if (t == 0) { /* a \u-spelt name `mid` bytes after the parting: every place */
          size_t mid;
          for (mid = 0; mid <= 40; mid++) {
            nq = snprintf(quiet, sizeof(quiet), head, (int) pad, ZEROS100);
            snprintf(quiet + nq, sizeof(quiet) - (size_t) nq, "\"}}],\"usage\":null}");
            nl = snprintf(later, sizeof(later), head, (int) pad, ZEROS100);
            snprintf(later + nl, sizeof(later) - (size_t) nl,
                     "\"}}],\"x\":\"%.*s\",\"\\u0075sage\":{\"total_tokens\":5}}", (int) mid,
                     ZEROS100);
            n = snprintf(body, sizeof(body), "data: {\"model\":\"%s\"}\n\ndata: %s\n\ndata: %s\n\n",
                         models[m], quiet, later);
            cr_assert_lt((size_t) n, sizeof(body));
            run(body, (size_t) n, (size_t) -1, &u);
            cr_expect_eq(u.total, 5, "model %zu, pad %zu, \\u %zu after: total %lld", m, pad, mid,
                         (long long) u.total);
          }
        }
        if (t == 0) { /* a model of the same length, and back: the cache is not for it */
          char *c;
          nq = snprintf(quiet, sizeof(quiet), head, (int) pad, ZEROS100);
          snprintf(quiet + nq, sizeof(quiet) - (size_t) nq, "\"}}],\"model\":\"%s\",\"x\":\"%s\"}",
                   models[m], ZEROS10);
          memcpy(later, quiet, sizeof(quiet));
          c = strstr(later, models[m]) + strlen(models[m]) - 1;
          *c = *c == 'Z' ? 'Y' : 'Z';
          n = snprintf(body, sizeof(body), "data: {\"model\":\"%s\"}\n\ndata: %s\n\ndata: %s\n\n"
                       "data: %s\n\n", models[m], quiet, later, quiet);
          cr_assert_lt((size_t) n, sizeof(body));
          run(body, (size_t) n, (size_t) -1, &u);
          cr_expect_str_eq(u.model, models[m], "model %zu, pad %zu: same length, changed back", m,
                           pad);
        }
      }
    }
  }
}

/* application/x-ndjson (cg_usage_lines): each line one document, the last report wins, at
 * every cut into two buffers and a byte at a time.  A JSON parser reads only the first
 * line of the same body (cJSON: what follows a document is ignored), so the lines mode
 * must be asked for; once bytes were fed it is not taken. */
static void lines_run(const char *body, size_t len, size_t cut, size_t piece, int lines,
                      struct cg_usage *u) {
  feed_run(body, len, cut, piece, lines, 0, u);
}

Test(usage, ndjson_lines_last_report_wins) {
  static const struct {
    const char *body;
    int64_t in, out, total;
    const char *model;
  } nd[] = {
    {"{\"model\":\"gemini-2.5-flash\",\"usageMetadata\":{\"promptTokenCount\":7,"
     "\"candidatesTokenCount\":1,\"totalTokenCount\":8}}\n"
     "{\"model\":\"gemini-2.5-flash\",\"usageMetadata\":{\"promptTokenCount\":7,"
     "\"candidatesTokenCount\":50,\"totalTokenCount\":57}}\n", 7, 50, 57, "gemini-2.5-flash"},
    /* CRLF, blank lines, the usage on the last line only, which has no newline */
    {"{\"model\":\"gpt-4o-mini\",\"choices\":[{\"delta\":{\"content\":\"a\"}}],"
     "\"usage\":null}\r\n\r\n"
     "{\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":{\"prompt_tokens\":308,"
     "\"completion_tokens\":68,\"total_tokens\":376}}", 308, 68, 376, "gpt-4o-mini"},
    /* bare CRs end lines too (helper-60: read as one line, the first document counted) */
    {"{\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":1,\"total_tokens\":8}}\r"
     "{\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":50,\"total_tokens\":57}}\r",
     7, 50, 57, ""},
    /* a line that does not parse says nothing; the others count */
    {"{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n"
     "{\"usage\":{\"prompt_tokens\":9,\n", 1, 2, 3, ""},
  };
  size_t i, cut;
  for (i = 0; i < sizeof(nd) / sizeof(nd[0]); i++) {
    size_t len = strlen(nd[i].body);
    for (cut = 0; cut <= len + 1; cut++) { /* len + 1: a byte at a time */
      struct cg_usage u;
      lines_run(nd[i].body, len, cut, 1, 1, &u);
      cr_assert_eq(u.input, nd[i].in, "case %zu cut %zu: input %lld", i, cut,
                   (long long) u.input);
      cr_assert_eq(u.output, nd[i].out, "case %zu cut %zu", i, cut);
      cr_assert_eq(u.total, nd[i].total, "case %zu cut %zu", i, cut);
      cr_assert_str_eq(u.model, nd[i].model, "case %zu cut %zu", i, cut);
      cr_assert_eq(u.skipped, 0);
    }
  }
  { /* the same first body read as one JSON document: its first line only */
    struct cg_usage u;
    lines_run(nd[0].body, strlen(nd[0].body), 0, 1, 0, &u);
    cr_assert_eq(u.total, 8);
  }
}

Test(usage, ndjson_line_over_the_bound) {
  /* A line over CG_USAGE_EVENT_MAX is dropped: after the last report, every number is
   * unknown (it may have carried a newer one); before a later report, that one counts. */
  static const char first[] = "{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,"
                              "\"total_tokens\":3}}\n";
  size_t big = CG_USAGE_EVENT_MAX + 10, n = strlen(first), k;
  char *body = malloc(n + big + 2 + n);
  struct cg_usage u;
  cr_assert_not_null(body);
  memcpy(body, first, n);
  memcpy(body + n, "{\"x\":\"", 6);
  memset(body + n + 6, 'a', big - 8);
  memcpy(body + n + big - 2, "\"}\n", 3);
  k = n + big + 1;
  for (size_t piece = 4096; piece <= k; piece = piece == 4096 ? k : k + 1) {
    lines_run(body, k, (size_t) -1, piece, 1, &u);
    cr_assert_eq(u.total, -1, "piece %zu: %lld", piece, (long long) u.total);
    cr_assert_eq(u.skipped, 1);
  }
  memcpy(body + k, first, n); /* a report after it */
  lines_run(body, k + n, (size_t) -1, 4096, 1, &u);
  cr_assert_eq(u.total, 3);
  lines_run(body, k + n, (size_t) -1, k + n, 1, &u);
  cr_assert_eq(u.total, 3);
  free(body);
}

/* A body compressed past libcurl (cg_usage_encoding): gzip, zlib-wrapped and raw deflate
 * ("deflate" as some servers send it), JSON and SSE, cut at every byte offset and fed a
 * byte at a time, read as the plain body is. */
#include <zlib.h>

static size_t squeeze(const char *in, size_t n, unsigned char *out, size_t cap, int bits) {
  z_stream zs;
  size_t got;
  memset(&zs, 0, sizeof(zs));
  cr_assert_eq(deflateInit2(&zs, 9, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  zs.next_in = (unsigned char *) (uintptr_t) in;
  zs.avail_in = (uInt) n;
  zs.next_out = out;
  zs.avail_out = (uInt) cap;
  cr_assert_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
  got = cap - zs.avail_out;
  deflateEnd(&zs);
  return got;
}

static void coded_run(const unsigned char *body, size_t len, size_t cut, int coding,
                      struct cg_usage *u) {
  feed_run((const char *) body, len, cut, 1, 0, coding, u); /* past the end: a byte a time */
}

Test(usage, compressed_bodies_are_inflated) {
  static const char *plain[] = {
    "{\"model\":\"gpt-4o-mini\",\"choices\":[{\"message\":{\"content\":\"hi\"}}],"
    "\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":7,\"total_tokens\":18}}",
    "data: {\"model\":\"gpt-4o-mini\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
    "data: {\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":{\"prompt_tokens\":308,"
    "\"completion_tokens\":68,\"total_tokens\":376}}\n\ndata: [DONE]\n\n"};
  static const struct {
    int bits, coding;
  } forms[] = {{15 + 16, CG_USAGE_GZIP}, {15, CG_USAGE_GZIP}, {15, CG_USAGE_DEFLATE},
               {-15, CG_USAGE_DEFLATE}};
  unsigned char z[1024];
  for (size_t b = 0; b < 2; b++)
    for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
      size_t n = squeeze(plain[b], strlen(plain[b]), z, sizeof(z), forms[f].bits);
      struct cg_usage want;
      run(plain[b], strlen(plain[b]), strlen(plain[b]), &want);
      cr_assert_geq(want.total, 18);
      for (size_t cut = 0; cut <= n + 1; cut++) { /* n + 1: a byte at a time */
        struct cg_usage u;
        coded_run(z, n, cut, forms[f].coding, &u);
        cr_assert_eq(u.input, want.input, "body %zu form %zu cut %zu: %lld", b, f, cut,
                     (long long) u.input);
        cr_assert_eq(u.output, want.output, "body %zu form %zu cut %zu", b, f, cut);
        cr_assert_eq(u.total, want.total, "body %zu form %zu cut %zu", b, f, cut);
        cr_assert_str_eq(u.model, want.model);
        cr_assert_eq(u.skipped, 0);
      }
    }
}

Test(usage, compressed_ndjson) {
  /* gzip x-ndjson: the coding is told first, then the lines (attempt.c does so). */
  static const char body[] = "{\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":1,"
                             "\"total_tokens\":8}}\n{\"usage\":{\"prompt_tokens\":7,"
                             "\"completion_tokens\":50,\"total_tokens\":57}}\n";
  unsigned char z[512];
  size_t n = squeeze(body, strlen(body), z, sizeof(z), 15 + 16), cut;
  for (cut = 0; cut <= n; cut++) {
    struct cg_usage u;
    feed_run((const char *) z, n, cut, 1, 1, CG_USAGE_GZIP, &u);
    cr_assert_eq(u.total, 57, "cut %zu: %lld", cut, (long long) u.total);
  }
}

Test(usage, compressed_bodies_that_do_not_inflate) {
  static const char body[] = "{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,"
                             "\"total_tokens\":3}}";
  unsigned char z[256];
  size_t n = squeeze(body, strlen(body), z, sizeof(z), 15 + 16);
  struct cg_usage u;
  /* corrupt in the middle of the stream: what cannot be read counts for nothing */
  z[n / 2] ^= 0x55;
  coded_run(z, n, n, CG_USAGE_GZIP, &u);
  cr_assert_eq(u.total, -1);
  /* plain text announced as gzip: not read */
  coded_run((const unsigned char *) body, strlen(body), 7, CG_USAGE_GZIP, &u);
  cr_assert_eq(u.total, -1);
  /* an unknown coding number is ignored: the body is read as it is */
  coded_run((const unsigned char *) body, strlen(body), 7, 9, &u);
  cr_assert_eq(u.total, 3);
  /* asked once bytes were fed: too late, the body is read as it is */
  {
    struct cg_usage_parser *p = cg_usage_new();
    cg_usage_feed(p, body, 3);
    cg_usage_encoding(p, CG_USAGE_GZIP);
    cg_usage_feed(p, body + 3, strlen(body) - 3);
    cg_usage_finish(p, &u);
    cg_usage_free(p);
    cr_assert_eq(u.total, 3);
  }
}

Test(usage, compressed_body_inflating_past_the_bound, .timeout = 60) {
  /* Bodies that inflate far beyond what they were (a zip bomb).  JSON: over
   * CG_USAGE_BODY_MAX it is skipped, as a plain one is, and no more is inflated.  SSE:
   * read up to CG_USAGE_INFLATED_MAX, then nothing more, and a report before the bound
   * is not trusted (a later one may have been cut off). */
  size_t big = (size_t) CG_USAGE_INFLATED_MAX + (1 << 20), cap = big / 500, n;
  char *plain = malloc(big);
  unsigned char *z = malloc(cap);
  static const char ev[] = "data: {\"usage\":{\"total_tokens\":3}}\n\n";
  struct cg_usage u;
  cr_assert(plain && z);
  memset(plain, ' ', big);
  memcpy(plain, "{\"usage\":{\"total_tokens\":3}}", 28);
  n = squeeze(plain, big, z, cap, 15 + 16);
  coded_run(z, n, n / 3, CG_USAGE_GZIP, &u);
  cr_assert_eq(u.total, -1);
  cr_assert_eq(u.skipped, 1);
  memset(plain, '\n', big); /* blank lines, as many as it takes */
  memcpy(plain, ev, sizeof(ev) - 1);
  n = squeeze(plain, big, z, cap, 15 + 16);
  coded_run(z, n, n / 3, CG_USAGE_GZIP, &u);
  cr_assert_eq(u.total, -1);
  cr_assert_eq(u.skipped, 1);
  n = squeeze(plain, big - (2 << 20), z, cap, 15 + 16); /* under the bound: read */
  coded_run(z, n, n / 3, CG_USAGE_GZIP, &u);
  cr_assert_eq(u.total, 3);
  cr_assert_eq(u.skipped, 0);
  free(plain);
  free(z);
}
