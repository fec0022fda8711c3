/* fuzz-usage.c - token usage from response bodies, JSON and Server-Sent Events
 * (src/usage.c: the push scanner of issue 16, which keeps its state across chunks down
 * to the middle of an escape or a number).  The first byte picks how the rest is cut
 * into chunks, as a network would deliver it.  Invariants: counts are -1 (unknown) or
 * >= 0; the model is a NUL-terminated string; and the result does not depend on the
 * chunking (the same body fed whole, in uneven chunks and one byte at a time gives the
 * same usage) nor on a parser's earlier use (cg_usage_reset).  Each input is read four
 * times: as a body whose type the parser tells by its first byte, as application/x-ndjson
 * (cg_usage_lines: a document a line), and as a deflate and a gzip body compressed past
 * libcurl (cg_usage_encoding: the inflater, with its restart as raw deflate, before the
 * reader).  fuzz-usage-diff.c compares the results with the parser it replaced. */
#include "fuzz.h"
#include "usage.h"

static int round_; /* 0 as it is, 1 x-ndjson, 2 deflate, 3 gzip */

/* A new parser, in this round's mode. */
static struct cg_usage_parser *parser(void) {
  struct cg_usage_parser *p = cg_usage_new();
  if (!p)
    abort();
  if (round_ == 1)
    cg_usage_lines(p);
  if (round_ >= 2)
    cg_usage_encoding(p, round_ == 2 ? CG_USAGE_DEFLATE : CG_USAGE_GZIP);
  return p;
}

static void run(const uint8_t *data, size_t size, size_t step, struct cg_usage *out) {
  struct cg_usage_parser *p = parser();
  size_t off = 0;
  while (off < size) {
    size_t n = step && step < size - off ? step : size - off;
    cg_usage_feed(p, (const char *) data + off, n);
    off += n;
    if (step)
      step = step * 7 % 61 + 1; /* uneven chunks */
  }
  cg_usage_finish(p, out);
  cg_usage_free(p);
}

static int same(const struct cg_usage *a, const struct cg_usage *b) {
  return a->input == b->input && a->cached_input == b->cached_input &&
         a->cache_write == b->cache_write && a->output == b->output &&
         a->reasoning == b->reasoning && a->total == b->total &&
         a->error_event == b->error_event && a->skipped == b->skipped &&
         strcmp(a->model, b->model) == 0;
}

static void check(const struct cg_usage *u) {
  CG_FUZZ_CHECK(u->input >= -1 && u->cached_input >= -1 && u->cache_write >= -1 &&
                    u->output >= -1 && u->reasoning >= -1 && u->total >= -1,
                "negative count");
  CG_FUZZ_CHECK(memchr(u->model, '\0', sizeof(u->model)) != NULL, "model not terminated");
}

static void one(const uint8_t *data, size_t size) {
  struct cg_usage whole, cut, bytes;
  size_t step;
  step = data[0] % 64; /* 0: one chunk */
  run(data + 1, size - 1, 0, &whole);
  run(data + 1, size - 1, step ? step : 1, &cut);
  check(&whole);
  check(&cut);
  if (step == 1) { /* one byte at a time: the scanner resumes at every byte */
    struct cg_usage_parser *p = parser();
    size_t i;
    for (i = 1; i < size; i++)
      cg_usage_feed(p, (const char *) data + i, 1);
    cg_usage_finish(p, &bytes);
    cg_usage_free(p);
    CG_FUZZ_CHECK(same(&whole, &bytes), "one byte at a time changed the usage");
  }
  CG_FUZZ_CHECK(whole.input == cut.input && whole.cached_input == cut.cached_input &&
                    whole.cache_write == cut.cache_write && whole.output == cut.output &&
                    whole.reasoning == cut.reasoning && whole.total == cut.total &&
                    whole.error_event == cut.error_event && whole.skipped == cut.skipped &&
                    strcmp(whole.model, cut.model) == 0,
                "chunking changed the usage (step %zu): in %lld/%lld out %lld/%lld "
                "total %lld/%lld model %s/%s err %d/%d",
                step, (long long) whole.input, (long long) cut.input, (long long) whole.output,
                (long long) cut.output, (long long) whole.total, (long long) cut.total,
                whole.model, cut.model, whole.error_event, cut.error_event);
  { /* A parser reset after this input (cut short at a point the input picks) reads it
     * again as a fresh one does (cg_usage_reset: a thread's next attempt). */
    struct cg_usage_parser *p = parser();
    struct cg_usage again;
    size_t part = (size - 1) * (data[0] >> 6) / 3;
    cg_usage_feed(p, (const char *) data + 1, part);
    if (data[0] & 0x40)
      cg_usage_finish(p, &again);
    cg_usage_reset(p);
    if (round_ == 1)
      cg_usage_lines(p);
    if (round_ >= 2)
      cg_usage_encoding(p, round_ == 2 ? CG_USAGE_DEFLATE : CG_USAGE_GZIP);
    cg_usage_feed(p, (const char *) data + 1, size - 1);
    cg_usage_finish(p, &again);
    cg_usage_free(p);
    CG_FUZZ_CHECK(same(&whole, &again), "a reset parser read the input differently");
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  for (round_ = 0; round_ < 4; round_++)
    one(data, size);
  return 0;
}
