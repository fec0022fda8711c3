/* test-ratelimit.c - providers' rate-limit headers -> quota left (ratelimit.h,
 * README "What the provider says", CASES.md "Provider rate-limit headers"). */
#include "ratelimit.h"
#include "saturate.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

/* 2026-11-30T06:17:30Z in ms since the epoch. */
#define T0 1796019450000LL

/* ---- Go durations (OpenAI x-ratelimit-reset-*) ---- */

Test(go_duration, documented_examples) {
  cr_assert_eq(cg_rl_go_duration_ms("6m0s"), 360000);
  cr_assert_eq(cg_rl_go_duration_ms("20ms"), 20);
  cr_assert_eq(cg_rl_go_duration_ms("1s"), 1000);
  cr_assert_eq(cg_rl_go_duration_ms("1m30.5s"), 90500);
  cr_assert_eq(cg_rl_go_duration_ms("1h2m3s"), 3723000);
}

Test(go_duration, zero_and_fractions) {
  cr_assert_eq(cg_rl_go_duration_ms("0"), 0);
  cr_assert_eq(cg_rl_go_duration_ms("0s"), 0);
  cr_assert_eq(cg_rl_go_duration_ms("0.5s"), 500);
  cr_assert_eq(cg_rl_go_duration_ms(".5s"), 500);
  cr_assert_eq(cg_rl_go_duration_ms("1.5h"), 5400000);
  cr_assert_eq(cg_rl_go_duration_ms("2m"), 120000);
  cr_assert_eq(cg_rl_go_duration_ms("1m0.001s"), 60001);
}

Test(go_duration, sub_millisecond_rounds_up) {
  /* A wait shorter than a millisecond is still a wait: never 0. */
  cr_assert_eq(cg_rl_go_duration_ms("250us"), 1);
  cr_assert_eq(cg_rl_go_duration_ms("250\xc2\xb5s"), 1); /* micro sign */
  cr_assert_eq(cg_rl_go_duration_ms("100ns"), 1);
  cr_assert_eq(cg_rl_go_duration_ms("1500us"), 2);
  cr_assert_eq(cg_rl_go_duration_ms("20ms500us"), 21);
}

Test(go_duration, surrounding_space) {
  cr_assert_eq(cg_rl_go_duration_ms(" 6m0s"), 360000);
  cr_assert_eq(cg_rl_go_duration_ms("6m0s\r"), 360000);
}

Test(go_duration, garbage_is_unknown) {
  cr_assert_eq(cg_rl_go_duration_ms(NULL), -1);
  cr_assert_eq(cg_rl_go_duration_ms(""), -1);
  cr_assert_eq(cg_rl_go_duration_ms("garbage"), -1);
  cr_assert_eq(cg_rl_go_duration_ms("-1"), -1);
  cr_assert_eq(cg_rl_go_duration_ms("-1s"), -1);
  cr_assert_eq(cg_rl_go_duration_ms("5"), -1, "a number without a unit");
  cr_assert_eq(cg_rl_go_duration_ms("1m5"), -1, "a trailing number without a unit");
  cr_assert_eq(cg_rl_go_duration_ms("s"), -1);
  cr_assert_eq(cg_rl_go_duration_ms("5x"), -1);
  cr_assert_eq(cg_rl_go_duration_ms("1sx"), -1);
  cr_assert_eq(cg_rl_go_duration_ms("1d"), -1, "Go has no day unit");
}

/* ---- RFC 3339 (Anthropic anthropic-ratelimit-*-reset) ---- */

Test(rfc3339, utc) {
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30T06:17:30Z"), T0);
  cr_assert_eq(cg_rl_rfc3339_ms("1970-01-01T00:00:00Z"), 0);
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30T06:17:30z"), T0);
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30 06:17:30Z"), T0);
}

Test(rfc3339, offsets) {
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30T07:17:30+01:00"), T0);
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30T00:47:30-05:30"), T0);
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30T06:17:30+00:00"), T0);
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30T06:17:30-00:00"), T0);
}

Test(rfc3339, fractions) {
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30T06:17:30.250Z"), T0 + 250);
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30T06:17:30.5Z"), T0 + 500);
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30T06:17:30.123456Z"), T0 + 123);
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30T06:17:30.999Z"), T0 + 999);
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30T06:17:30.001Z"), T0 + 1);
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30T07:17:30.75+01:00"), T0 + 750);
}

Test(rfc3339, garbage_is_unknown) {
  cr_assert_eq(cg_rl_rfc3339_ms(NULL), -1);
  cr_assert_eq(cg_rl_rfc3339_ms(""), -1);
  cr_assert_eq(cg_rl_rfc3339_ms("soon"), -1);
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30"), -1);
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30T06:17:30"), -1, "no zone: ambiguous");
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30T06:17:30+1"), -1);
  cr_assert_eq(cg_rl_rfc3339_ms("2026-11-30T06:17:30+01"), -1);
  cr_assert_eq(cg_rl_rfc3339_ms("Mon, 30 Nov 2026 06:17:30 GMT"), -1);
  cr_assert_eq(cg_rl_rfc3339_ms("1796019450"), -1);
}

/* ---- cg_rl_parse ---- */

static void parse(const struct cg_rl_headers *h, int64_t now, struct cg_rl_signal *s) {
  memset(s, 0x5a, sizeof(*s)); /* every field must be written */
  cg_rl_parse(h, now, s);
}

static void assert_all_unknown(const struct cg_rl_signal *s) {
  cr_assert_eq(s->requests_limit, -1);
  cr_assert_eq(s->requests_remaining, -1);
  cr_assert_eq(s->requests_reset_ms, -1);
  cr_assert_eq(s->tokens_limit, -1);
  cr_assert_eq(s->tokens_remaining, -1);
  cr_assert_eq(s->tokens_reset_ms, -1);
}

Test(rl_parse, nothing_is_unknown) {
  struct cg_rl_headers h;
  struct cg_rl_signal s;
  memset(&h, 0, sizeof(h));
  parse(&h, T0, &s);
  assert_all_unknown(&s);
  h.limit_requests = "";
  h.remaining_requests = "";
  h.reset_requests = "";
  h.ietf = "";
  parse(&h, T0, &s);
  assert_all_unknown(&s);
}

/* What admit.c's cg__learn skips the parse for: without a "remaining" count (and the
 * IETF field) nothing is remaining, so nothing paces or holds the pool, whatever limits
 * and resets say. */
Test(rl_parse, no_remaining_count_no_remaining) {
  struct cg_rl_headers h;
  struct cg_rl_signal s;
  memset(&h, 0, sizeof(h));
  h.limit_requests = h.a_limit_requests = "100";
  h.limit_tokens = h.a_limit_tokens = "10000";
  h.reset_requests = h.reset_tokens = "1s";
  h.a_reset_requests = h.a_reset_tokens = "2026-11-30T06:17:30Z";
  h.remaining_requests = h.remaining_tokens = h.a_remaining_requests = "";
  h.a_remaining_tokens = h.ietf = "";
  parse(&h, T0, &s);
  cr_assert_lt(s.requests_remaining, 0);
  cr_assert_lt(s.tokens_remaining, 0);
}

Test(rl_parse, openai) {
  struct cg_rl_headers h;
  struct cg_rl_signal s;
  memset(&h, 0, sizeof(h));
  h.limit_requests = "60";
  h.remaining_requests = "2";
  h.reset_requests = "3s";
  h.limit_tokens = "150000";
  h.remaining_tokens = "149984";
  h.reset_tokens = "6m0s";
  parse(&h, T0, &s);
  cr_assert_eq(s.requests_limit, 60);
  cr_assert_eq(s.requests_remaining, 2);
  cr_assert_eq(s.requests_reset_ms, 3000);
  cr_assert_eq(s.tokens_limit, 150000);
  cr_assert_eq(s.tokens_remaining, 149984);
  cr_assert_eq(s.tokens_reset_ms, 360000);
}

Test(rl_parse, openai_nothing_remaining) {
  struct cg_rl_headers h;
  struct cg_rl_signal s;
  memset(&h, 0, sizeof(h));
  h.remaining_requests = "0";
  h.reset_requests = "6m0s";
  h.reset_tokens = "20ms";
  parse(&h, T0, &s);
  cr_assert_eq(s.requests_limit, -1, "no limit header: unknown");
  cr_assert_eq(s.requests_remaining, 0);
  cr_assert_eq(s.requests_reset_ms, 360000);
  cr_assert_eq(s.tokens_reset_ms, 20);
  cr_assert_eq(s.tokens_remaining, -1);
}

Test(rl_parse, anthropic_reset_relative_to_now) {
  struct cg_rl_headers h;
  struct cg_rl_signal s;
  memset(&h, 0, sizeof(h));
  h.a_limit_requests = "50";
  h.a_remaining_requests = "10";
  h.a_reset_requests = "2026-11-30T06:17:30Z";
  h.a_limit_tokens = "40000";
  h.a_remaining_tokens = "39000";
  h.a_reset_tokens = "2026-11-30T06:17:31.500Z";
  parse(&h, T0 - 5000, &s);
  cr_assert_eq(s.requests_limit, 50);
  cr_assert_eq(s.requests_remaining, 10);
  cr_assert_eq(s.requests_reset_ms, 5000);
  cr_assert_eq(s.tokens_limit, 40000);
  cr_assert_eq(s.tokens_remaining, 39000);
  cr_assert_eq(s.tokens_reset_ms, 6500);
}

Test(rl_parse, anthropic_reset_in_the_past_is_zero) {
  struct cg_rl_headers h;
  struct cg_rl_signal s;
  memset(&h, 0, sizeof(h));
  h.a_limit_requests = "50";
  h.a_remaining_requests = "0";
  h.a_reset_requests = "2026-11-30T06:17:30Z";
  parse(&h, T0 + 60000, &s);
  cr_assert_eq(s.requests_remaining, 0);
  cr_assert_eq(s.requests_reset_ms, 0);
}

Test(rl_parse, anthropic_bad_reset_is_unknown) {
  struct cg_rl_headers h;
  struct cg_rl_signal s;
  memset(&h, 0, sizeof(h));
  h.a_limit_requests = "50";
  h.a_remaining_requests = "3";
  h.a_reset_requests = "in a minute";
  parse(&h, T0, &s);
  cr_assert_eq(s.requests_remaining, 3);
  cr_assert_eq(s.requests_reset_ms, -1);
}

Test(rl_parse, ietf_early_form) {
  struct cg_rl_headers h;
  struct cg_rl_signal s;
  memset(&h, 0, sizeof(h));
  h.ietf = "limit=100, remaining=50, reset=30";
  parse(&h, T0, &s);
  cr_assert_eq(s.requests_remaining, 50);
  cr_assert_eq(s.requests_reset_ms, 30000);
  /* Its limit is read too: with nothing remaining, one request's refill is reset / limit. */
  cr_assert_eq(s.requests_limit, 100);
  h.ietf = "\"default\";r=0;t=30";
  parse(&h, T0, &s);
  cr_assert_eq(s.requests_limit, -1, "the structured form carries no limit");
}

Test(rl_parse, ietf_structured_form) {
  struct cg_rl_headers h;
  struct cg_rl_signal s;
  memset(&h, 0, sizeof(h));
  h.ietf = "\"default\";r=50;t=30";
  parse(&h, T0, &s);
  cr_assert_eq(s.requests_remaining, 50);
  cr_assert_eq(s.requests_reset_ms, 30000);
}

Test(rl_parse, ietf_incomplete_is_unknown) {
  struct cg_rl_headers h;
  struct cg_rl_signal s;
  memset(&h, 0, sizeof(h));
  h.ietf = "limit=100, remaining=50";
  parse(&h, T0, &s);
  cr_assert_eq(s.requests_remaining, -1);
  h.ietf = "\"default\";r=-5;t=30";
  parse(&h, T0, &s);
  cr_assert_eq(s.requests_remaining, -1);
  h.ietf = "nonsense";
  parse(&h, T0, &s);
  cr_assert_eq(s.requests_remaining, -1);
}

Test(rl_parse, openai_wins_over_ietf) {
  struct cg_rl_headers h;
  struct cg_rl_signal s;
  memset(&h, 0, sizeof(h));
  h.remaining_requests = "7";
  h.reset_requests = "1s";
  h.ietf = "limit=100, remaining=50, reset=30";
  parse(&h, T0, &s);
  cr_assert_eq(s.requests_remaining, 7);
  cr_assert_eq(s.requests_reset_ms, 1000);
}

Test(rl_parse, limit_zero_means_unknown) {
  struct cg_rl_headers h;
  struct cg_rl_signal s;
  memset(&h, 0, sizeof(h));
  h.limit_requests = "0";
  h.remaining_requests = "0";
  h.reset_requests = "1s";
  h.limit_tokens = "0";
  h.remaining_tokens = "0";
  h.reset_tokens = "1s";
  parse(&h, T0, &s);
  cr_assert_eq(s.requests_limit, -1);
  cr_assert_eq(s.requests_remaining, -1, "limit 0: remaining means nothing");
  cr_assert_eq(s.tokens_limit, -1);
  cr_assert_eq(s.tokens_remaining, -1);
}

Test(rl_parse, limit_minus_one_means_unknown) {
  struct cg_rl_headers h;
  struct cg_rl_signal s;
  memset(&h, 0, sizeof(h));
  h.limit_requests = "-1";
  h.remaining_requests = "0";
  h.reset_requests = "1s";
  h.a_limit_tokens = "-1";
  h.a_remaining_tokens = "0";
  h.a_reset_tokens = "2026-11-30T06:17:30Z";
  parse(&h, T0 - 1000, &s);
  cr_assert_eq(s.requests_limit, -1);
  cr_assert_eq(s.requests_remaining, -1);
  cr_assert_eq(s.tokens_limit, -1);
  cr_assert_eq(s.tokens_remaining, -1);
}

Test(rl_parse, anthropic_limit_zero_means_unknown) {
  struct cg_rl_headers h;
  struct cg_rl_signal s;
  memset(&h, 0, sizeof(h));
  h.a_limit_requests = "0";
  h.a_remaining_requests = "0";
  h.a_reset_requests = "2026-11-30T06:17:30Z";
  parse(&h, T0 - 1000, &s);
  cr_assert_eq(s.requests_limit, -1);
  cr_assert_eq(s.requests_remaining, -1);
}

Test(rl_parse, negative_or_bad_remaining_is_unknown) {
  struct cg_rl_headers h;
  struct cg_rl_signal s;
  memset(&h, 0, sizeof(h));
  h.limit_requests = "60";
  h.remaining_requests = "-3";
  h.reset_requests = "1s";
  h.limit_tokens = "1000";
  h.remaining_tokens = "lots";
  h.reset_tokens = "1s";
  parse(&h, T0, &s);
  cr_assert_eq(s.requests_limit, 60);
  cr_assert_eq(s.requests_remaining, -1);
  cr_assert_eq(s.tokens_remaining, -1);
  h.remaining_requests = "12abc";
  parse(&h, T0, &s);
  cr_assert_eq(s.requests_remaining, -1);
  h.remaining_requests = "12\r";
  parse(&h, T0, &s);
  cr_assert_eq(s.requests_remaining, 12);
}

/* ---- hostile values (issue 11 items 3 and 4): saturated, never UB ---- */

/* Before the fix: `(int64_t) ceil(total)` of inf or of 3.6e12 * ... (UBSan: "inf is
 * outside the range of representable values"), or a 114-year reset taken as is. */
Test(go_duration, too_large_is_the_largest) {
  static const struct {
    const char *s;
    int64_t ms;
  } c[] = {
      {"1e309s", CG_DURATION_MAX_MS},
      {"1e400ms", CG_DURATION_MAX_MS},
      {"999999h", CG_DURATION_MAX_MS},          /* 114 years */
      {"99999999999999999999h", CG_DURATION_MAX_MS},
      {"1e308h1e308h", CG_DURATION_MAX_MS},     /* a sum that overflows a double */
      {"infs", CG_DURATION_MAX_MS},
      {"277777h", 999997200000},                /* just under: a value */
      {"0x10s", -1},                            /* strtod's hex form is not Go's */
      {"nans", -1},
      {"-1e309s", -1},
  };
  size_t i;
  for (i = 0; i < sizeof(c) / sizeof(c[0]); i++)
    cr_expect_eq(cg_rl_go_duration_ms(c[i].s), c[i].ms, "\"%s\" -> %lld, want %lld", c[i].s,
                 (long long) cg_rl_go_duration_ms(c[i].s), (long long) c[i].ms);
}

/* Before the fix: strtod of the fraction (".5e400": inf * 1000 converted to int64) and
 * atoi of the offset hours ("+99999999999:00": hh * 3600 overflowed). */
Test(rfc3339, hostile_fractions_and_offsets) {
  static const struct {
    const char *s;
    int64_t ms;
  } c[] = {
      {"2026-11-30T06:17:30.5e400Z", -1},
      {"2026-11-30T06:17:30.Z", -1},
      {"2026-11-30T06:17:30.99999999999999999999999999Z", T0 + 999},
      {"2026-11-30T06:17:30+99999999999:00", -1},
      {"2026-11-30T06:17:30+2147483647:00", -1},
      {"2026-11-30T06:17:30+596524:00", -1},
      {"2026-11-30T06:17:30+01:35791395", -1}, /* before: 35791395 * 60 > INT_MAX */
      {"2026-11-30T06:17:30+01:99999999999", -1},
      {"2026-11-30T06:17:30+24:00", -1},
      {"2026-11-30T06:17:30+01:60", -1},
      {"2026-11-30T06:17:30+1a:00", -1},
      {"2026-11-30T06:17:30-0x:00", -1},
      {"2026-11-30T07:17:30+01:00", T0},
      {"2026-11-30T06:17:30+23:59", T0 - (23 * 3600 + 59 * 60) * 1000LL},
      {"9999-12-31T23:59:59Z", 253402300799000},
  };
  size_t i;
  for (i = 0; i < sizeof(c) / sizeof(c[0]); i++)
    cr_expect_eq(cg_rl_rfc3339_ms(c[i].s), c[i].ms, "\"%s\" -> %lld, want %lld", c[i].s,
                 (long long) cg_rl_rfc3339_ms(c[i].s), (long long) c[i].ms);
}

/* Every reset the parser returns is -1 or within [0, CG_DURATION_MAX_MS]. */
Test(rl_parse, hostile_resets_are_saturated) {
  static const struct {
    const char *name;
    const char *rem, *reset, *a_rem, *a_reset, *ietf;
    int64_t remaining, reset_ms;
  } c[] = {
      {"openai 999999h", "0", "999999h", NULL, NULL, NULL, 0, CG_DURATION_MAX_MS},
      {"openai 1e309s", "0", "1e309s", NULL, NULL, NULL, 0, CG_DURATION_MAX_MS},
      {"anthropic 2099", NULL, NULL, "0", "2099-01-01T00:00:00Z", NULL, 0, CG_DURATION_MAX_MS},
      {"anthropic 9999", NULL, NULL, "0", "9999-12-31T23:59:59Z", NULL, 0, CG_DURATION_MAX_MS},
      {"ietf a year", NULL, NULL, NULL, NULL, "remaining=0, reset=31536000", 0,
       INT64_C(31536000000)},
      /* Before the fix: `s * 1000` overflowed for s = LLONG_MAX (strtoll's saturation). */
      {"ietf 10^30", NULL, NULL, NULL, NULL, "remaining=0, reset=1000000000000000000000000000000",
       0, CG_DURATION_MAX_MS},
      {"ietf LLONG_MAX", NULL, NULL, NULL, NULL, "r=1;t=9223372036854775807", 1,
       CG_DURATION_MAX_MS},
      {"ietf 1e309", NULL, NULL, NULL, NULL, "\"default\";r=0;t=1e309", 0, CG_DURATION_MAX_MS},
      {"ietf inf", NULL, NULL, NULL, NULL, "r=0;t=inf", 0, CG_DURATION_MAX_MS},
      {"ietf junk", NULL, NULL, NULL, NULL, "r=0;t=30x", -1, -1},
      {"remaining 10^30", "1000000000000000000000000000000", "1s", NULL, NULL, NULL, INT64_MAX,
       1000},
  };
  size_t i;
  for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
    struct cg_rl_headers h;
    struct cg_rl_signal s;
    memset(&h, 0, sizeof(h));
    h.remaining_requests = c[i].rem;
    h.reset_requests = c[i].reset;
    h.a_remaining_requests = c[i].a_rem;
    h.a_reset_requests = c[i].a_reset;
    h.ietf = c[i].ietf;
    parse(&h, T0, &s);
    cr_expect_eq(s.requests_remaining, c[i].remaining, "%s: remaining %lld", c[i].name,
                 (long long) s.requests_remaining);
    cr_expect_eq(s.requests_reset_ms, c[i].reset_ms, "%s: reset %lld ms, want %lld", c[i].name,
                 (long long) s.requests_reset_ms, (long long) c[i].reset_ms);
  }
}
