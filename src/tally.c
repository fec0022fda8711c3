/* tally.c - per-pool counters of recorded attempts (see tally.h). */
#include "tally.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const cg__names[CG_TALLY_NOUTCOMES] = {
  "ok", "dns_error", "connect_refused", "connect_timeout", "tls_error",
  "first_byte_timeout", "read_timeout", "reset_after_send", "partial_response",
  "aborted_by_host", "circuit_open", "local_rate_limited", "retry_budget_exhausted",
  "deadline", "curl_error", "stream_error",
  /* 16: the statuses SPEC section 7 names, the common 4xx, Anthropic's 529 */
  "http_400", "http_401", "http_403", "http_404", "http_408", "http_409", "http_413",
  "http_422", "http_429", "http_500", "http_501", "http_502", "http_503", "http_504",
  "http_505", "http_529",
  /* 32: the rest, by class */
  "http_4xx", "http_5xx", "http_other", "other",
};
#define CG__HTTP_FIRST 16
#define CG__HTTP_4XX 32
#define CG__HTTP_5XX 33
#define CG__HTTP_OTHER 34
#define CG__OTHER 35

int cg_tally_outcome(const char *name) {
  int i;
  if (!name)
    return CG__OTHER;
  for (i = 0; i < CG_TALLY_NOUTCOMES; i++) /* the class names too: each maps to itself */
    if (strcmp(name, cg__names[i]) == 0)
      return i;
  if (strncmp(name, "http_", 5) == 0 && name[5] >= '0' && name[5] <= '9') {
    char *end;
    long s = strtol(name + 5, &end, 10);
    if (*end)
      return CG__OTHER;
    return s >= 400 && s <= 499 ? CG__HTTP_4XX : s >= 500 && s <= 599 ? CG__HTTP_5XX
                                                                       : CG__HTTP_OTHER;
  }
  return CG__OTHER;
}

const char *cg_tally_outcome_name(int i) {
  return i >= 0 && i < CG_TALLY_NOUTCOMES ? cg__names[i] : NULL;
}

static void cg__add(uint64_t *w, uint64_t n) {
  if (n)
    __atomic_fetch_add(w, n, __ATOMIC_RELAXED);
}

/* cg__add of a count that is usually not 0 in a steady state (a final attempt, a
 * success, its tokens and cost): the add is laid out on the straight path, not jumped
 * to and back (issue 16: fewer lines of code per record). */
static void cg__add_usual(uint64_t *w, uint64_t n) {
  if (__builtin_expect(n != 0, 1))
    __atomic_fetch_add(w, n, __ATOMIC_RELAXED);
}

/* cg__add of a count that is usually 0 (a retry, a host's repeat, a wait). */
static void cg__add_rare(uint64_t *w, uint64_t n) {
  if (__builtin_expect(n != 0, 0))
    __atomic_fetch_add(w, n, __ATOMIC_RELAXED);
}

/* A token count from a record: CG_NULL_INT (unknown) and negatives add nothing. */
static uint64_t cg__count(int64_t v) {
  return v > 0 && v != CG_NULL_INT ? (uint64_t) v : 0;
}

/* tally.h.  With the log off the guard fills only the fields read here (guard.c
 * cg__fill_record): a field read here that it leaves unset there must be set there too. */
void cg_tally_add(struct cg_state *st, int p, const struct cg_record *r) {
  struct cg_state_tally *t;
  int o;

  if (!st || p < 0 || p >= CG_STATE_POOLS || !r)
    return;
  t = &st->tallies[p];
  /* "ok" (index 0, the common attempt) without the search of cg_tally_outcome. */
  o = r->outcome && r->outcome[0] == 'o' && r->outcome[1] == 'k' && !r->outcome[2]
          ? 0
          : cg_tally_outcome(r->outcome);
  cg__add(&t->attempts, 1);
  cg__add(&t->outcomes[o], 1);
  cg__add_rare(&t->retries, r->attempt > 1);
  cg__add_usual(&t->possibly_billed, r->possibly_billed != 0);
  if (__builtin_expect(r->final != 0, 1)) {
    cg__add(&t->calls, 1);
    cg__add_usual(&t->calls_ok, o == 0);
    cg__add_rare(&t->host_retry_calls, r->repeat_of != NULL);
  }
  cg__add_usual(&t->prompt_tokens, cg__count(r->prompt_tokens));
  cg__add_usual(&t->completion_tokens, cg__count(r->completion_tokens));
  cg__add_rare(&t->cached_tokens, cg__count(r->cached_tokens));
  /* A cost is a few dollars at most per attempt; anything not finite or out of
   * [0, 10^6 USD] is not a cost the price table gives, and is left out. */
  if (isfinite(r->cost_usd) && r->cost_usd > 0 && r->cost_usd < 1e6)
    cg__add(&t->cost_nusd, (uint64_t) llround(r->cost_usd * 1e9));
  {
    int64_t brk = r->breaker_wait_ms > 0 ? r->breaker_wait_ms : 0;
    int64_t q = r->queue_ms - brk;
    cg__add_rare(&t->queue_ms, q > 0 ? (uint64_t) q : 0);
    cg__add_rare(&t->breaker_wait_ms, (uint64_t) brk);
  }
}

void cg_tally_read(const struct cg_state *st, int p, struct cg_state_tally *out) {
  const uint64_t *in = (const uint64_t *) &st->tallies[p];
  uint64_t *w = (uint64_t *) out;
  size_t i;
  for (i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
    w[i] = __atomic_load_n(&in[i], __ATOMIC_RELAXED);
}
