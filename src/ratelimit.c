/* ratelimit.c - provider rate-limit headers -> quota left (see ratelimit.h). */
#include "ratelimit.h"

#include "backoff.h"
#include "saturate.h"

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
    /* Digits, a fraction, an exponent ("1e309s": too long, not unknown) or "inf"; not
     * strtod's hex or nan forms. */
    if (!isdigit((unsigned char) *s) && *s != '.' && strncasecmp(s, "inf", 3) != 0)
      return -1;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
      return -1;
    v = strtod(s, &end);
    if (end == s || !(v >= 0))
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
  /* Saturated: an overflowing duration is the largest one (RFC 9111 section 1.2.2). */
  return parts ? cg_duration_from_double(total) : -1;
}

int64_t cg_rl_rfc3339_ms(const char *s) {
  struct tm tm;
  const char *p;
  int64_t secs, off = 0, frac_ms = 0, scale = 100;

  if (!s || !*s)
    return -1; /* as both strptime would say (every call without such a header) */
  memset(&tm, 0, sizeof(tm));
  p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
  if (!p)
    p = strptime(s, "%Y-%m-%d %H:%M:%S", &tm);
  if (!p)
    return -1;
  if (*p == '.') {
    /* time-secfrac = "." 1*DIGIT: digits only (strtod would read ".5e400"); the first
     * three are the ms, the rest are dropped. */
    if (!isdigit((unsigned char) p[1]))
      return -1;
    for (p++; isdigit((unsigned char) *p); p++, scale /= 10)
      frac_ms += (*p - '0') * scale;
  }
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    /* time-numoffset = ("+" / "-") time-hour ":" time-minute: exactly 2 + 2 digits,
     * 00-23 and 00-59 (RFC 3339 section 5.6), never atoi of an arbitrary number. */
    int hh, mm;
    if (!isdigit((unsigned char) p[1]) || !isdigit((unsigned char) p[2]) || p[3] != ':' ||
        !isdigit((unsigned char) p[4]) || !isdigit((unsigned char) p[5]))
      return -1;
    hh = (p[1] - '0') * 10 + (p[2] - '0');
    mm = (p[4] - '0') * 10 + (p[5] - '0');
    if (hh > 23 || mm > 59)
      return -1;
    off = (int64_t) (hh * 3600 + mm * 60) * (*p == '+' ? 1 : -1);
    p += 6;
  } else {
    return -1;
  }
  while (*p == ' ' || *p == '\t' || *p == '\r')
    p++;
  if (*p)
    return -1; /* "+01:35791395": not an offset */
  secs = cg_sat_add((int64_t) timegm(&tm), -off);
  return cg_sat_add(cg_sat_mul(secs, 1000), frac_ms);
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

/* The value of parameter `key` ("remaining", "r", ...) in a RateLimit field, copied
 * into `buf` (NUL-terminated; a value that does not fit is cut, and then does not parse).
 * Returns buf, or NULL when the field has no such parameter. */
static const char *cg__ietf_param(const char *field, const char *const *keys, char *buf,
                                  size_t len) {
  const char *p = field;
  while (p && *p) {
    size_t i;
    while (*p == ' ' || *p == ',' || *p == ';')
      p++;
    for (i = 0; keys[i]; i++) {
      size_t n = strlen(keys[i]);
      if (strncasecmp(p, keys[i], n) == 0 && p[n] == '=') {
        size_t v = strcspn(p + n + 1, ",;");
        if (v >= len)
          v = len - 1;
        memcpy(buf, p + n + 1, v);
        buf[v] = '\0';
        return buf;
      }
    }
    p += strcspn(p, ",;");
  }
  return NULL;
}

/* From `now` to the time `t` (ms since the epoch; -1 unknown): 0 when past, saturated. */
static int64_t cg__until(int64_t t, int64_t now) {
  int64_t d;
  if (t < 0)
    return -1;
  if (t <= now)
    return 0;
  return __builtin_sub_overflow(t, now, &d) ? CG_DURATION_MAX_MS : cg_duration_clamp(d);
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
    out->requests_reset_ms = cg__until(t, now_wall_ms);
  }
  if (out->tokens_remaining < 0 && h->a_remaining_tokens) {
    out->tokens_remaining = cg__remaining(h->a_limit_tokens, h->a_remaining_tokens);
    t = cg_rl_rfc3339_ms(h->a_reset_tokens);
    out->tokens_reset_ms = cg__until(t, now_wall_ms);
  }
  if (out->requests_remaining < 0 && h->ietf && *h->ietf) {
    static const char *const rem[] = {"remaining", "r", NULL};
    static const char *const rst[] = {"reset", "t", NULL};
    char rbuf[48], sbuf[48];
    const char *rv = cg__ietf_param(h->ietf, rem, rbuf, sizeof(rbuf));
    const char *sv = cg__ietf_param(h->ietf, rst, sbuf, sizeof(sbuf));
    /* reset: seconds, saturated like Retry-After's delta-seconds (backoff.h). */
    int64_t r = rv ? cg__count(rv) : -1, s = sv ? cg_parse_decimal_ms(sv, 1000.0) : -1;
    if (r >= 0 && s >= 0) {
      out->requests_remaining = r;
      out->requests_reset_ms = s;
      /* The draft's own limit (`limit=100, remaining=0, reset=30`): without it, nothing
       * remaining could not be paced (one request's refill is reset / limit). */
      if (out->requests_limit < 0) {
        static const char *const lim[] = {"limit", NULL};
        char lbuf[48];
        const char *lv = cg__ietf_param(h->ietf, lim, lbuf, sizeof(lbuf));
        int64_t l = lv ? cg__count(lv) : -1;
        out->requests_limit = l > 0 ? l : -1;
      }
    }
  }
}
