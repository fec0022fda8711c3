/* ratelimit.c - provider rate-limit headers -> quota left (see ratelimit.h). */
#include "ratelimit.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

int64_t cg_rl_go_duration_ms(const char *s) {
  static const struct {
    const char *unit;
    double ms;
  } units[] = {{"ms", 1}, {"us", 0.001}, {"µs", 0.001}, {"ns", 0.000001},
               {"h", 3600000}, {"m", 60000}, {"s", 1000}};
  double total = 0;
  int parts = 0;

  if (!s)
    return -1;
  while (*s == ' ')
    s++;
  if (strcmp(s, "0") == 0)
    return 0;
  while (*s && *s != ' ' && *s != '\r') {
    char *end;
    double v;
    size_t i;
    if (!isdigit((unsigned char) *s) && *s != '.')
      return -1;
    v = strtod(s, &end);
    if (end == s || v < 0)
      return -1;
    s = end;
    for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
      size_t n = strlen(units[i].unit);
      if (strncmp(s, units[i].unit, n) == 0) {
        total += v * units[i].ms;
        s += n;
        break;
      }
    }
    if (i == sizeof(units) / sizeof(units[0]))
      return -1; /* a number without a unit */
    parts++;
  }
  return parts ? (int64_t) ceil(total) : -1;
}

int64_t cg_rl_rfc3339_ms(const char *s) {
  struct tm tm;
  const char *p;
  double frac = 0;
  int64_t secs, off = 0;

  if (!s)
    return -1;
  memset(&tm, 0, sizeof(tm));
  p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
  if (!p)
    p = strptime(s, "%Y-%m-%d %H:%M:%S", &tm);
  if (!p)
    return -1;
  if (*p == '.') {
    char *end;
    frac = strtod(p, &end);
    p = end;
  }
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int hh, mm;
    if (!isdigit((unsigned char) p[1]) || strlen(p) < 6 || p[3] != ':')
      return -1;
    hh = atoi(p + 1);
    mm = atoi(p + 4);
    off = (int64_t) (hh * 3600 + mm * 60) * (*p == '+' ? 1 : -1);
    p += 6;
  } else {
    return -1;
  }
  secs = (int64_t) timegm(&tm) - off;
  return secs * 1000 + (int64_t) (frac * 1000);
}

/* A non-negative integer, or -1. */
static int64_t cg__count(const char *s) {
  char *end;
  long long v;
  if (!s || !*s)
    return -1;
  v = strtoll(s, &end, 10);
  while (*end == ' ' || *end == '\r')
    end++;
  return end == s || *end || v < 0 ? -1 : (int64_t) v;
}

/* remaining, unless the limit says the numbers mean nothing (0 or -1). */
static int64_t cg__remaining(const char *limit, const char *remaining) {
  if (limit && *limit) {
    char *end;
    long long l = strtoll(limit, &end, 10);
    if (end != limit && l <= 0)
      return -1;
  }
  return cg__count(remaining);
}

/* The value of parameter `key` ("remaining", "r", ...) in a RateLimit field. */
static int64_t cg__ietf_param(const char *field, const char *const *keys) {
  const char *p = field;
  while (p && *p) {
    size_t i;
    while (*p == ' ' || *p == ',' || *p == ';')
      p++;
    for (i = 0; keys[i]; i++) {
      size_t n = strlen(keys[i]);
      if (strncasecmp(p, keys[i], n) == 0 && p[n] == '=') {
        char *end;
        long long v = strtoll(p + n + 1, &end, 10);
        return end == p + n + 1 || v < 0 ? -1 : (int64_t) v;
      }
    }
    p += strcspn(p, ",;");
  }
  return -1;
}

void cg_rl_parse(const struct cg_rl_headers *h, int64_t now_wall_ms, struct cg_rl_signal *out) {
  int64_t t;

  out->requests_limit = cg__count(h->limit_requests && *h->limit_requests ? h->limit_requests
                                                                        : h->a_limit_requests);
  out->tokens_limit = cg__count(h->limit_tokens && *h->limit_tokens ? h->limit_tokens
                                                                  : h->a_limit_tokens);
  if (out->requests_limit == 0)
    out->requests_limit = -1;
  if (out->tokens_limit == 0)
    out->tokens_limit = -1;

  out->requests_remaining = cg__remaining(h->limit_requests, h->remaining_requests);
  out->requests_reset_ms = cg_rl_go_duration_ms(h->reset_requests);
  out->tokens_remaining = cg__remaining(h->limit_tokens, h->remaining_tokens);
  out->tokens_reset_ms = cg_rl_go_duration_ms(h->reset_tokens);

  if (out->requests_remaining < 0 && h->a_remaining_requests) {
    out->requests_remaining = cg__remaining(h->a_limit_requests, h->a_remaining_requests);
    t = cg_rl_rfc3339_ms(h->a_reset_requests);
    out->requests_reset_ms = t < 0 ? -1 : t > now_wall_ms ? t - now_wall_ms : 0;
  }
  if (out->tokens_remaining < 0 && h->a_remaining_tokens) {
    out->tokens_remaining = cg__remaining(h->a_limit_tokens, h->a_remaining_tokens);
    t = cg_rl_rfc3339_ms(h->a_reset_tokens);
    out->tokens_reset_ms = t < 0 ? -1 : t > now_wall_ms ? t - now_wall_ms : 0;
  }
  if (out->requests_remaining < 0 && h->ietf && *h->ietf) {
    static const char *const rem[] = {"remaining", "r", NULL};
    static const char *const rst[] = {"reset", "t", NULL};
    int64_t r = cg__ietf_param(h->ietf, rem), s = cg__ietf_param(h->ietf, rst);
    if (r >= 0 && s >= 0) {
      out->requests_remaining = r;
      out->requests_reset_ms = s * 1000;
    }
  }
}
