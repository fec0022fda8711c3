/* config.c - environment + JSON config file -> one snapshot per process (see config.h). */
#include "config.h"
#include "hot.h"

#include "fallback.h"
#include "limiter.h"
#include "log.h"
#include "window.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define CG_CONFIG_FILE_MAX (1 << 20) /* bytes; larger config files are refused */

enum cg__type {
  CG_T_LONG, CG_T_DOUBLE, CG_T_STRING, CG_T_JITTER, CG_T_HOSTS, CG_T_RESEND, CG_T_RETRY_ON,
  CG_T_SWITCH, /* int: on/off (1/0, true/false, yes/no) */
  CG_T_OPENMODE /* int: "wait" 1, "fail" 0 (CURLGUARD_BREAKER_OPEN) */
};

/* One tunable: its variable, its config-file key, where it lives, its range. */
struct cg__key {
  const char *env;
  const char *json;
  enum cg__type type;
  size_t offset;
  double min, max;
};

#define CG_OFF(f) offsetof(struct cg_config, f)
static const struct cg__key cg__keys[] = {
  {"CURLGUARD_LOG", "log", CG_T_STRING, CG_OFF(log_path), 0, 0},
  {"CURLGUARD_STATE", "state", CG_T_STRING, CG_OFF(state_path), 0, 0},
  {"CURLGUARD_REDIS", "redis", CG_T_STRING, CG_OFF(redis_url), 0, 0},
  {"CURLGUARD_REDIS_PREFIX", "redis_prefix", CG_T_STRING, CG_OFF(redis_prefix), 0, 0},
  {"CURLGUARD_HOSTS", "hosts", CG_T_HOSTS, CG_OFF(hosts), 0, 0},
  {"CURLGUARD_TASK_ID", "task_id", CG_T_STRING, CG_OFF(task_id), 0, 0},
  {"CURLGUARD_PRICES", "prices", CG_T_STRING, CG_OFF(prices_path), 0, 0},
  {"CURLGUARD_REQUEST_ID_HEADER", "request_id_header", CG_T_STRING,
   CG_OFF(request_id_header), 0, 0},
  {"CURLGUARD_TASK_ID_HEADER", "task_id_header", CG_T_STRING, CG_OFF(task_id_header), 0, 0},
  {"CURLGUARD_CONNECT_TIMEOUT_MS", "connect_timeout_ms", CG_T_LONG,
   CG_OFF(connect_timeout_ms), 1, 86400000},
  {"CURLGUARD_FIRST_BYTE_TIMEOUT_MS", "first_byte_timeout_ms", CG_T_LONG,
   CG_OFF(first_byte_timeout_ms), 1, 86400000},
  {"CURLGUARD_READ_TIMEOUT_MS", "read_timeout_ms", CG_T_LONG, CG_OFF(read_timeout_ms), 1,
   86400000},
  {"CURLGUARD_DEADLINE_MS", "deadline_ms", CG_T_LONG, CG_OFF(deadline_ms), 1, 86400000},
  {"CURLGUARD_MAX_ATTEMPTS", "max_attempts", CG_T_LONG, CG_OFF(max_attempts), 1, 100},
  {"CURLGUARD_BACKOFF_BASE_MS", "backoff_base_ms", CG_T_LONG, CG_OFF(backoff_base_ms), 0,
   3600000},
  {"CURLGUARD_BACKOFF_CAP_MS", "backoff_cap_ms", CG_T_LONG, CG_OFF(backoff_cap_ms), 0,
   3600000},
  {"CURLGUARD_MAX_RETRY_AFTER_MS", "max_retry_after_ms", CG_T_LONG,
   CG_OFF(max_retry_after_ms), 0, 86400000},
  {"CURLGUARD_JITTER", "jitter", CG_T_JITTER, CG_OFF(jitter), 0, 0},
  {"CURLGUARD_RPM", "rpm", CG_T_DOUBLE, CG_OFF(rpm), 0, 1e9},
  {"CURLGUARD_TPM", "tpm", CG_T_DOUBLE, CG_OFF(tpm), 0, 1e12},
  {"CURLGUARD_MAX_INFLIGHT", "max_inflight", CG_T_LONG, CG_OFF(max_inflight), 0, 1000000},
  {"CURLGUARD_ADAPTIVE", "adaptive", CG_T_SWITCH, CG_OFF(adaptive), 0, 0},
  {"CURLGUARD_LIMIT_KEYS", "limit_keys", CG_T_SWITCH, CG_OFF(limit_keys), 0, 0},
  {"CURLGUARD_SILENT_RESEND", "silent_resend", CG_T_RESEND, CG_OFF(silent_resend), 0, 0},
  {"CURLGUARD_RETRY_ON", "retry_on", CG_T_RETRY_ON, CG_OFF(retry_on), 0, 0},
  {"CURLGUARD_REPEAT_WINDOW_MS", "repeat_window_ms", CG_T_LONG, CG_OFF(repeat_window_ms), 0,
   86400000},
  /* Every pool's breaker and budget (a pool's own keys win): ranges as in cg__brk_keys
   * and cg__bud_keys below. */
  {"CURLGUARD_BREAKER", "breaker", CG_T_SWITCH, CG_OFF(breaker.enabled), 0, 0},
  {"CURLGUARD_BREAKER_FAILURE_RATE", "breaker_failure_rate", CG_T_DOUBLE,
   CG_OFF(breaker.failure_rate), 0.01, 1},
  {"CURLGUARD_BREAKER_MIN_REQUESTS", "breaker_min_requests", CG_T_LONG,
   CG_OFF(breaker.min_requests), 1, 1000000},
  {"CURLGUARD_BREAKER_WINDOW_S", "breaker_window_s", CG_T_DOUBLE, CG_OFF(breaker.window_s),
   CG_WINDOW_MIN_S, CG_BREAKER_WINDOW_MAX_S},
  {"CURLGUARD_BREAKER_COOLDOWN_S", "breaker_cooldown_s", CG_T_DOUBLE,
   CG_OFF(breaker.cooldown_s), 0.01, 86400},
  {"CURLGUARD_BREAKER_OPEN_CODE", "breaker_open_code", CG_T_LONG, CG_OFF(breaker.open_code),
   1, 99},
  {"CURLGUARD_BREAKER_OPEN", "breaker_open", CG_T_OPENMODE, CG_OFF(breaker.open_wait), 0, 0},
  {"CURLGUARD_BREAKER_CONSECUTIVE_FAILURES", "breaker_consecutive_failures", CG_T_LONG,
   CG_OFF(breaker.consecutive), 0, 1000000},
  {"CURLGUARD_BREAKER_COOLDOWN_MAX_S", "breaker_cooldown_max_s", CG_T_DOUBLE,
   CG_OFF(breaker.cooldown_max_s), 0.01, 86400},
  {"CURLGUARD_BREAKER_RAMP_S", "breaker_ramp_s", CG_T_DOUBLE, CG_OFF(breaker.ramp_s), 0,
   3600},
  {"CURLGUARD_BREAKER_JITTER", "breaker_jitter", CG_T_DOUBLE, CG_OFF(breaker.jitter), 0, 0.5},
  {"CURLGUARD_RETRY_BUDGET", "retry_budget", CG_T_SWITCH, CG_OFF(budget.enabled), 0, 0},
  {"CURLGUARD_RETRY_BUDGET_RATIO", "retry_budget_ratio", CG_T_DOUBLE, CG_OFF(budget.ratio), 0,
   100},
  {"CURLGUARD_RETRY_BUDGET_MIN_PER_S", "retry_budget_min_per_s", CG_T_DOUBLE,
   CG_OFF(budget.min_per_s), 0, 1000000},
  {"CURLGUARD_RETRY_BUDGET_WINDOW_S", "retry_budget_window_s", CG_T_DOUBLE,
   CG_OFF(budget.window_s), CG_WINDOW_MIN_S, CG_BUDGET_WINDOW_MAX_S},
  {"CURLGUARD_RETRY_BUDGET_MAX_CONCURRENT", "retry_budget_max_concurrent", CG_T_LONG,
   CG_OFF(budget.max_concurrent), 0, CG_BUDGET_MAX_CONCURRENT},
};
#define CG_NKEYS (sizeof(cg__keys) / sizeof(cg__keys[0]))

/* Keys a config file may carry that are read elsewhere. */
static const char *const cg__known_other[] = {"pools", NULL};

/* Pool keys read by later parts of the product (none at the moment). */
static const char *const cg__pool_later[] = {NULL};

/* The keys of a "breaker" / "retry_budget" object (a pool's, or the top level's): name,
 * where in its struct, type, range.  Bit i of cg_pool_cfg.breaker_set / budget_set says
 * the pool set key i itself. */
enum cg__sub_type { CG_SUB_BOOL, CG_SUB_LONG, CG_SUB_DOUBLE, CG_SUB_OPENMODE /* int */ };
struct cg__sub {
  const char *name;
  size_t offset;
  enum cg__sub_type type;
  double min, max;
};
#define CG_BRK(f) offsetof(struct cg_breaker_cfg, f)
#define CG_BUD(f) offsetof(struct cg_budget_cfg, f)
static const struct cg__sub cg__brk_keys[] = {
  {"enabled", CG_BRK(enabled), CG_SUB_BOOL, 0, 1},
  {"failure_rate", CG_BRK(failure_rate), CG_SUB_DOUBLE, 0.01, 1},
  {"min_requests", CG_BRK(min_requests), CG_SUB_LONG, 1, 1000000},
  {"window_s", CG_BRK(window_s), CG_SUB_DOUBLE, CG_WINDOW_MIN_S, CG_BREAKER_WINDOW_MAX_S},
  {"cooldown_s", CG_BRK(cooldown_s), CG_SUB_DOUBLE, 0.01, 86400},
  {"open_code", CG_BRK(open_code), CG_SUB_LONG, 1, 99},
  {"open", CG_BRK(open_wait), CG_SUB_OPENMODE, 0, 1},
  {"consecutive_failures", CG_BRK(consecutive), CG_SUB_LONG, 0, 1000000},
  {"cooldown_max_s", CG_BRK(cooldown_max_s), CG_SUB_DOUBLE, 0.01, 86400},
  {"ramp_s", CG_BRK(ramp_s), CG_SUB_DOUBLE, 0, 3600},
  {"jitter", CG_BRK(jitter), CG_SUB_DOUBLE, 0, 0.5},
  {NULL, 0, CG_SUB_BOOL, 0, 0},
};
static const struct cg__sub cg__bud_keys[] = {
  {"enabled", CG_BUD(enabled), CG_SUB_BOOL, 0, 1},
  {"ratio", CG_BUD(ratio), CG_SUB_DOUBLE, 0, 100},
  {"min_per_s", CG_BUD(min_per_s), CG_SUB_DOUBLE, 0, 1000000},
  {"window_s", CG_BUD(window_s), CG_SUB_DOUBLE, CG_WINDOW_MIN_S, CG_BUDGET_WINDOW_MAX_S},
  {"max_concurrent", CG_BUD(max_concurrent), CG_SUB_LONG, 0, CG_BUDGET_MAX_CONCURRENT},
  /* The older name, kept: both set the same value (the variable is
   * CURLGUARD_RETRY_BUDGET_MAX_CONCURRENT, stat says max_concurrent). */
  {"max_concurrent_retries", CG_BUD(max_concurrent), CG_SUB_LONG, 0, CG_BUDGET_MAX_CONCURRENT},
  {NULL, 0, CG_SUB_BOOL, 0, 0},
};

/* Append ", <fmt>" (or "<fmt>" first) to the problems of one object in `buf`. */
static void cg__note(char *buf, size_t len, const char *fmt, ...) {
  size_t used = strlen(buf);
  va_list ap;
  if (used + 3 >= len)
    return;
  if (used) {
    memcpy(buf + used, "; ", 3);
    used += 2;
  }
  va_start(ap, fmt);
  vsnprintf(buf + used, len - used, fmt, ap);
  va_end(ap);
}

/* A "breaker" or "retry_budget" value into `base` (a struct cg_breaker_cfg or
 * cg_budget_cfg): an object of the keys in `keys`, or a bare true/false for "enabled".
 * Bad keys and values are left as they were and reported on one line for the whole
 * object.  `*set` gets a bit per key taken.  Returns the number of problems. */
static int cg__parse_sub(const cJSON *v, const struct cg__sub *keys, void *base,
                         unsigned *set, const char *what, const char *where) {
  const cJSON *item;
  int problems = 0;
  char why[512] = "";

  if (cJSON_IsBool(v)) {
    *(int *) ((char *) base + keys[0].offset) = cJSON_IsTrue(v);
    *set |= 1u;
    return 0;
  }
  if (!cJSON_IsObject(v)) {
    cg_warn("config: %s \"%s\" must be an object or true/false; ignored", where, what);
    return 1;
  }
  cJSON_ArrayForEach(item, v) {
    size_t i, j;
    for (i = 0; keys[i].name && strcmp(keys[i].name, item->string) != 0; i++)
      ;
    if (!keys[i].name) {
      cg__note(why, sizeof(why), "unknown key \"%.40s\"", item->string);
      problems++;
      continue;
    }
    if (keys[i].type == CG_SUB_BOOL && cJSON_IsBool(item)) {
      *(int *) ((char *) base + keys[i].offset) = cJSON_IsTrue(item);
    } else if (keys[i].type == CG_SUB_OPENMODE && cJSON_IsString(item) &&
               cg_breaker_open_parse(item->valuestring) >= 0) {
      *(int *) ((char *) base + keys[i].offset) = cg_breaker_open_parse(item->valuestring);
    } else if (keys[i].type != CG_SUB_BOOL && keys[i].type != CG_SUB_OPENMODE &&
               cJSON_IsNumber(item) &&
               isfinite(item->valuedouble) && item->valuedouble >= keys[i].min &&
               item->valuedouble <= keys[i].max &&
               (keys[i].type == CG_SUB_DOUBLE || item->valuedouble == floor(item->valuedouble))) {
      if (keys[i].type == CG_SUB_LONG)
        *(long *) ((char *) base + keys[i].offset) = (long) item->valuedouble;
      else
        *(double *) ((char *) base + keys[i].offset) = item->valuedouble;
    } else {
      if (keys[i].type == CG_SUB_BOOL)
        cg__note(why, sizeof(why), "\"%s\" must be true or false", keys[i].name);
      else if (keys[i].type == CG_SUB_OPENMODE)
        cg__note(why, sizeof(why), "\"%s\" must be \"wait\" or \"fail\"", keys[i].name);
      else
        cg__note(why, sizeof(why), "\"%s\" must be a%s number from %g to %g", keys[i].name,
                 keys[i].type == CG_SUB_LONG ? " whole" : "", keys[i].min, keys[i].max);
      problems++;
      continue;
    }
    for (j = 0; keys[j].name; j++) /* and its other name, if it has one */
      if (keys[j].offset == keys[i].offset)
        *set |= 1u << j;
  }
  if (problems)
    cg_warn("config: %s \"%s\": %s; %s ignored", where, what, why,
            problems == 1 ? "that key" : "those keys");
  return problems;
}

/* Copy into `dst` every key of `keys` whose bit is not in `set`, from `src`. */
static void cg__inherit_sub(const struct cg__sub *keys, void *dst, const void *src,
                            unsigned set) {
  size_t i;
  for (i = 0; keys[i].name; i++) {
    size_t n = keys[i].type == CG_SUB_BOOL || keys[i].type == CG_SUB_OPENMODE ? sizeof(int)
               : keys[i].type == CG_SUB_LONG ? sizeof(long)
                                             : sizeof(double);
    if (!(set & (1u << i)))
      memcpy((char *) dst + keys[i].offset, (const char *) src + keys[i].offset, n);
  }
}

int cg_breaker_open_parse(const char *s) {
  if (strcasecmp(s, "wait") == 0)
    return 1;
  if (strcasecmp(s, "fail") == 0)
    return 0;
  return -1;
}

int cg_jitter_parse(const char *s) {
  static const char *const names[] = {"full", "equal", "decorrelated", "none"};
  size_t i;
  for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strcasecmp(s, names[i]) == 0)
      return (int) i;
  return -1;
}

/* An outcome name retry_on may use: one of SPEC section 7's, or http_NNN with digits or
 * 'x' wildcards ("http_5xx"). */
static int cg__outcome_name_ok(const char *name) {
  static const char *const names[] = {
    "ok", "dns_error", "connect_refused", "connect_timeout", "tls_error",
    "first_byte_timeout", "read_timeout", "reset_after_send", "partial_response",
    "aborted_by_host", "curl_error", NULL};
  size_t i;
  if (strncmp(name, "http_", 5) == 0 && strlen(name) == 8) {
    for (i = 5; i < 8; i++)
      if (!isdigit((unsigned char) name[i]) && name[i] != 'x')
        return 0;
    return name[5] >= '1' && name[5] <= '5';
  }
  for (i = 0; names[i]; i++)
    if (strcmp(name, names[i]) == 0)
      return 1;
  return 0;
}

int cg_retry_on_parse(struct cg_config *c, const char *s) {
  static const char *const classes[] = {"never", "any", "idempotent"}; /* = cg_retry_class */
  struct cg_retry_rule rules[CG_RETRY_RULES_MAX];
  size_t n = 0;
  const char *p = s;

  while (*p) {
    size_t len = strcspn(p, ","), name_len, i;
    const char *eq = memchr(p, '=', len);
    int cls = -1;

    while (len && (*p == ' ' || *p == '\t'))
      p++, len--;
    if (len == 0) {
      p += *p == ',';
      continue;
    }
    if (!eq)
      return -1;
    if (n == CG_RETRY_RULES_MAX)
      return -2;
    name_len = (size_t) (eq - p);
    while (name_len && p[name_len - 1] == ' ')
      name_len--;
    if (name_len == 0 || name_len >= sizeof(rules[0].outcome))
      return -1;
    for (i = 0; i < 3; i++) {
      size_t vl = strlen(classes[i]);
      const char *v = eq + 1;
      while (*v == ' ')
        v++;
      if (strncasecmp(v, classes[i], vl) == 0 &&
          (v[vl] == ',' || v[vl] == '\0' || v[vl] == ' '))
        cls = (int) i;
    }
    if (cls < 0)
      return -1;
    memcpy(rules[n].outcome, p, name_len);
    rules[n].outcome[name_len] = '\0';
    if (!cg__outcome_name_ok(rules[n].outcome))
      return -1;
    rules[n].cls = cls;
    n++;
    p += len;
    p += *p == ',';
  }
  memcpy(c->retry_on, rules, n * sizeof(rules[0]));
  c->nretry_on = n;
  return 0;
}

static void cg__free_hosts(struct cg_config *c) {
  size_t i;
  if (!c->hosts)
    return;
  for (i = 0; i < c->nhosts; i++)
    free(c->hosts[i]);
  free(c->hosts);
  c->hosts = NULL;
  c->nhosts = 0;
}

/* Replace the host list with the comma-separated globs in `s`.  0 on success. */
static int cg__set_hosts(struct cg_config *c, const char *s) {
  char *copy = strdup(s), *save = NULL, *tok;
  char **list;
  size_t n = 0, cap = 4;

  list = calloc(cap + 1, sizeof(*list));
  if (!copy || !list) {
    free(copy);
    free(list);
    return -1;
  }
  for (tok = strtok_r(copy, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
    if (n == cap) {
      char **bigger = realloc(list, (cap * 2 + 1) * sizeof(*list));
      if (!bigger)
        break;
      list = bigger;
      cap *= 2;
    }
    list[n] = strdup(tok);
    if (list[n])
      n++;
  }
  list[n] = NULL;
  free(copy);
  if (n == 0) {
    free(list);
    return -1;
  }
  cg__free_hosts(c);
  c->hosts = list;
  c->nhosts = n;
  return 0;
}

/* A header name the guard may send and log: an RFC 9110 token (section 5.1), and not one
 * that carries credentials or frames the message. */
static int cg__header_name_ok(const char *s) {
  static const char *const refused[] = {
    "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key",
    "x-goog-api-key", "host", "content-length", "content-type", "content-encoding",
    "transfer-encoding", "connection", "te", "upgrade", "expect", "trailer", NULL};
  const char *p;
  size_t i;

  if (!*s || strlen(s) > 64)
    return 0;
  for (p = s; *p; p++)
    if (!(isalnum((unsigned char) *p) || strchr("!#$%&'*+-.^_`|~", *p)))
      return 0;
  for (i = 0; refused[i]; i++)
    if (strcasecmp(s, refused[i]) == 0)
      return 0;
  return 1;
}

/* Whether `s` is a decimal number and nothing else: [+-]digits[.digits][e[+-]digits], a
 * digit on one side of the point at least.  strtod(3) also takes leading white space,
 * hexadecimal ("0x10": 16), "inf" and "nan", which no setting means. */
static int cg__decimal(const char *s) {
  const char *p = s + (*s == '+' || *s == '-');
  size_t digits = 0;

  for (; isdigit((unsigned char) *p); p++)
    digits++;
  if (*p == '.')
    for (p++; isdigit((unsigned char) *p); p++)
      digits++;
  if (!digits)
    return 0;
  if (*p == 'e' || *p == 'E') {
    p += 1 + (p[1] == '+' || p[1] == '-');
    if (!isdigit((unsigned char) *p))
      return 0;
    while (isdigit((unsigned char) *p))
      p++;
  }
  return *p == '\0';
}

/* Parse a decimal number filling the whole string, within [min, max]. */
static int cg__parse_number(const char *s, double min, double max, double *out) {
  char *end;
  double v;

  if (!cg__decimal(s))
    return -1;
  errno = 0;
  v = strtod(s, &end);
  if (errno || end == s || *end != '\0' || !isfinite(v) || v < min || v > max)
    return -1;
  *out = v;
  return 0;
}

static int cg__switch(const char *v);

/* A relative state path (CURLGUARD_STATE, a config file's "state") as an absolute one,
 * against the working directory of now, the process's first guarded call: the path is
 * opened again later (a repair, a host that closed the descriptor, state.c), after a
 * host's chdir(2) that would name another file, made anew in the host's directory.  A
 * working directory that cannot be read (removed, too long), or a joined path of
 * PATH_MAX bytes or more, keeps the path as given.
 * NULL when out of memory. */
static char *cg__absolute(const char *path) {
  char cwd[PATH_MAX];
  char *out;

  if (!getcwd(cwd, sizeof(cwd)) || cwd[0] != '/' ||
      strlen(cwd) + 1 + strlen(path) >= sizeof(cwd))
    return strdup(path); /* a joined path that long open(2) would refuse */
  return asprintf(&out, "%s/%s", cwd, path) < 0 ? NULL : out;
}

/* Apply one textual value (from the environment or a JSON string) to key `k`. */
static int cg__apply_text(struct cg_config *c, const struct cg__key *k, const char *s,
                          const char *origin) {
  char *base = (char *) c + k->offset;
  double v;
  int j;

  if ((k->offset == CG_OFF(request_id_header) || k->offset == CG_OFF(task_id_header)) && s[0] &&
      !cg__header_name_ok(s))
    goto bad_value;
  switch (k->type) {
  case CG_T_STRING: {
    char *copy;
    if (s[0] == '\0' || (k->offset == CG_OFF(log_path) && strcasecmp(s, "off") == 0)) {
      copy = NULL; /* empty or "off": none */
    } else if (k->offset == CG_OFF(task_id) && strlen(s) > CG_TASK_ID_MAX) {
      /* Copied into every record: a runaway value would make every line huge. */
      cg_warn("%s: %s is longer than %d bytes; cut there", origin,
              origin[0] == 'e' ? k->env : k->json, CG_TASK_ID_MAX);
      if (!(copy = strndup(s, CG_TASK_ID_MAX)))
        return -1;
    } else if (k->offset == CG_OFF(state_path) && s[0] != '/') {
      if (!(copy = cg__absolute(s)))
        return -1;
    } else if (!(copy = strdup(s))) {
      return -1;
    }
    free(*(char **) base);
    *(char **) base = copy;
    return 0;
  }
  case CG_T_HOSTS:
    if (cg__set_hosts(c, s) == 0)
      return 0;
    break;
  case CG_T_RESEND:
    j = strcasecmp(s, "auto") == 0    ? CG_RESEND_AUTO
        : strcasecmp(s, "allow") == 0 ? CG_RESEND_ALLOW
        : strcasecmp(s, "block") == 0 ? CG_RESEND_BLOCK
                                      : -1;
    if (j >= 0) {
      *(enum cg_resend *) base = (enum cg_resend) j;
      return 0;
    }
    break;
  case CG_T_RETRY_ON:
    j = cg_retry_on_parse(c, s);
    if (j == 0)
      return 0;
    if (j == -2) {
      cg_warn("%s: %s has more than %d rules; using the default", origin,
              origin[0] == 'e' ? k->env : k->json, CG_RETRY_RULES_MAX);
      return 1;
    }
    break;
  case CG_T_SWITCH:
    j = cg__switch(s);
    if (j >= 0 && s[0]) {
      *(int *) base = j;
      return 0;
    }
    break;
  case CG_T_OPENMODE:
    j = cg_breaker_open_parse(s);
    if (j >= 0) {
      *(int *) base = j;
      return 0;
    }
    break;
  case CG_T_JITTER:
    j = cg_jitter_parse(s);
    if (j >= 0) {
      *(enum cg_jitter *) base = (enum cg_jitter) j;
      return 0;
    }
    break;
  case CG_T_LONG:
    if (cg__parse_number(s, k->min, k->max, &v) == 0 && v == floor(v)) {
      *(long *) base = (long) v;
      c->deadline_set |= k->offset == CG_OFF(deadline_ms);
      return 0;
    }
    break;
  case CG_T_DOUBLE:
    if (cg__parse_number(s, k->min, k->max, &v) == 0) {
      *(double *) base = v;
      return 0;
    }
    break;
  }
bad_value:
  cg_warn("%s: malformed value for %s: \"%.60s\"; using the default", origin,
          origin[0] == 'e' ? k->env : k->json, s);
  return 1;
}

/* The members of JSON array or object `v` joined into one malloc'd text, as the
 * environment variable would spell it: "a,b,c" for an array of strings, "k=v,k2=v2" for an
 * object of strings (`pairs`).  The length is bounded only by the file's
 * (CG_CONFIG_FILE_MAX): a fixed buffer cut a long list without a word, which could widen
 * what is guarded (a host pattern cut to "1*") or narrow it (the last host dropped;
 * helper-62).  Returns NULL with `*why` set: "wrong type" (a member that is not a string)
 * or "out of memory". */
static char *cg__json_join(const cJSON *v, int pairs, const char **why) {
  const cJSON *e;
  size_t len = 1, at = 0;
  char *out;

  cJSON_ArrayForEach(e, v) {
    if (!cJSON_IsString(e)) {
      *why = "a member that is not a string";
      return NULL;
    }
    len += strlen(e->valuestring) + 1 + (pairs ? strlen(e->string) + 1 : 0);
  }
  if (!(out = malloc(len))) {
    *why = "out of memory";
    return NULL;
  }
  cJSON_ArrayForEach(e, v) {
    size_t n;
    if (at)
      out[at++] = ',';
    if (pairs) {
      n = strlen(e->string);
      memcpy(out + at, e->string, n);
      at += n;
      out[at++] = '=';
    }
    n = strlen(e->valuestring);
    memcpy(out + at, e->valuestring, n);
    at += n;
  }
  out[at] = '\0';
  return out;
}

/* Apply one JSON value to key `k`. */
static int cg__apply_json(struct cg_config *c, const struct cg__key *k, const cJSON *v,
                          const char *origin) {
  char buf[64];

  if (cJSON_IsString(v))
    return cg__apply_text(c, k, v->valuestring, origin);
  if (cJSON_IsNumber(v) && (k->type == CG_T_LONG || k->type == CG_T_DOUBLE)) {
    snprintf(buf, sizeof(buf), "%.17g", v->valuedouble);
    return cg__apply_text(c, k, buf, origin);
  }
  if ((cJSON_IsArray(v) && k->type == CG_T_HOSTS) ||
      (cJSON_IsObject(v) && k->type == CG_T_RETRY_ON)) {
    const char *why = NULL;
    char *joined = cg__json_join(v, k->type == CG_T_RETRY_ON, &why);
    int r;
    if (!joined) {
      cg_warn("%s: \"%s\": %s; using the default", origin, k->json, why);
      return 1;
    }
    r = cg__apply_text(c, k, joined, origin);
    free(joined);
    return r;
  }
  if (cJSON_IsBool(v) && k->type == CG_T_SWITCH)
    return cg__apply_text(c, k, cJSON_IsTrue(v) ? "on" : "off", origin);
  if (cJSON_IsNull(v))
    return 0;
  cg_warn("%s: wrong type for \"%s\"; using the default", origin, k->json);
  return 1;
}

static const struct cg__key *cg__key_by_json(const char *json) {
  size_t i;
  for (i = 0; i < CG_NKEYS; i++)
    if (strcmp(cg__keys[i].json, json) == 0)
      return &cg__keys[i];
  return NULL;
}

static int cg__pool_number(const cJSON *v, double min, double max, double *out) {
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < min ||
      v->valuedouble > max)
    return -1;
  *out = v->valuedouble;
  return 0;
}

/* A numeric pool limit `k` (rpm, tpm, burst, token_burst, max_inflight).  Returns 1 when
 * `k` is one (taken, or reported with what happens instead), 0 when it is not. */
static int cg__pool_limit(struct cg_pool_cfg *pc, const char *k, const cJSON *item,
                          int *problems) {
  static const struct {
    const char *name;
    double max;
  } limits[] = {{"rpm", 1e9}, {"tpm", 1e12}, {"burst", 1e9}, {"token_burst", 1e12},
                {"max_inflight", 1e6}};
  size_t i;
  double d;

  for (i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
    if (strcmp(k, limits[i].name) != 0)
      continue;
    if (cg__pool_number(item, 0, limits[i].max, &d) != 0) {
      cg_warn("config: pool \"%.40s\": \"%s\" must be a number from 0 to %g; ignored (no "
              "such limit for this pool)", pc->name, k, limits[i].max);
      (*problems)++;
      return 1;
    }
    if (i == 0)
      pc->lim.rpm = d;
    else if (i == 1)
      pc->lim.tpm = d;
    else if (i == 2)
      pc->lim.burst_requests = d;
    else if (i == 3)
      pc->lim.burst_tokens = d;
    else
      pc->lim.max_inflight = (long) d;
    return 1;
  }
  return 0;
}

/* Free a pool's host list (a pool that is ignored, or a "hosts" given again). */
static void cg__free_pool_hosts(struct cg_pool_cfg *pc) {
  size_t j;
  for (j = 0; j < pc->nhosts; j++)
    free(pc->hosts[j]);
  free(pc->hosts);
  pc->hosts = NULL;
  pc->nhosts = 0;
}

/* One pool object -> `pc`.  Returns the number of problems (the pool is still used
 * with defaults for what was wrong, unless it has no name). */
static int cg__parse_pool(struct cg_config *c, const cJSON *o, struct cg_pool_cfg *pc) {
  const cJSON *item;
  int problems = 0;
  struct cg_config tmp;

  memset(pc, 0, sizeof(*pc));
  pc->lim.margin = CG_RATE_MARGIN;
  pc->lim.adaptive = -1; /* not set by the pool: the top level's (cg_config_load) */
  pc->lim.limit_keys = -1; /* likewise */
  cJSON_ArrayForEach(item, o) {
    const char *k = item->string;
    if (strcmp(k, "name") == 0 && cJSON_IsString(item)) {
      if (strlen(item->valuestring) >= sizeof(pc->name)) {
        cg_warn("config: pool name \"%.40s...\" is longer than %zu bytes; pool ignored",
                item->valuestring, sizeof(pc->name) - 1);
        problems++;
        continue;
      }
      snprintf(pc->name, sizeof(pc->name), "%s", item->valuestring);
    } else if (strcmp(k, "hosts") == 0 && (cJSON_IsArray(item) || cJSON_IsString(item))) {
      memset(&tmp, 0, sizeof(tmp));
      if (cJSON_IsString(item)) {
        problems += cg__set_hosts(&tmp, item->valuestring) != 0;
      } else {
        const char *why = NULL;
        char *joined = cg__json_join(item, 0, &why);
        if (!joined) {
          /* as a malformed list (cg__set_hosts' failure): the pool has no hosts, and is
           * ignored (cg__load_pools says so) */
          cg_warn("config: pool \"%.40s\": \"hosts\": %s", pc->name, why);
          problems++;
        } else {
          problems += cg__set_hosts(&tmp, joined) != 0;
          free(joined);
        }
      }
      cg__free_pool_hosts(pc); /* "hosts" given twice: the last one wins */
      pc->hosts = tmp.hosts;
      pc->nhosts = tmp.nhosts;
    } else if (cg__pool_limit(pc, k, item, &problems)) {
      /* one of the numeric limits, taken or reported */
    } else if (strcmp(k, "adaptive") == 0 || strcmp(k, "limit_keys") == 0) {
      if (cJSON_IsBool(item)) {
        *(k[0] == 'a' ? &pc->lim.adaptive : &pc->lim.limit_keys) = cJSON_IsTrue(item);
      } else {
        cg_warn("config: pool \"%.40s\": \"%s\" must be true or false; ignored", pc->name,
                k);
        problems++;
      }
    } else if (strcmp(k, "retry_on") == 0) {
      memset(&tmp, 0, sizeof(tmp));
      if (cg__apply_json(&tmp, cg__key_by_json("retry_on"), item, "config") == 0) {
        memcpy(pc->retry_on, tmp.retry_on, sizeof(pc->retry_on));
        pc->nretry_on = tmp.nretry_on;
      } else {
        problems++;
      }
    } else if (strcmp(k, "fallback_url") == 0) {
      if (cJSON_IsString(item) && cg_fallback_base_ok(item->valuestring)) {
        snprintf(pc->fallback_url, sizeof(pc->fallback_url), "%s", item->valuestring);
      } else {
        cg_warn("config: pool \"%.40s\": \"fallback_url\" must be an http(s) URL without "
                "credentials, query or fragment, with a port from 1 to 65535 if any; "
                "no fallback", pc->name);
        problems++;
      }
    } else if (strcmp(k, "breaker") == 0 || strcmp(k, "retry_budget") == 0) {
      char where[64];
      int brk = k[0] == 'b';
      snprintf(where, sizeof(where), "pool \"%.40s\"", pc->name);
      problems += cg__parse_sub(item, brk ? cg__brk_keys : cg__bud_keys,
                                brk ? (void *) &pc->breaker : (void *) &pc->budget,
                                brk ? &pc->breaker_set : &pc->budget_set, k, where);
    } else {
      size_t i;
      int later = 0;
      for (i = 0; cg__pool_later[i]; i++)
        later |= strcmp(k, cg__pool_later[i]) == 0;
      if (!later) {
        cg_warn("config: pool \"%.40s\": bad or unknown key \"%.40s\" ignored", pc->name,
                k);
        problems++;
      }
    }
  }
  (void) c;
  return problems;
}

static void cg__free_pools(struct cg_config *c) {
  size_t i;
  for (i = 0; i < c->npools; i++)
    cg__free_pool_hosts(&c->pools[i]);
  free(c->pools);
  c->pools = NULL;
  c->npools = 0;
}

/* The pool names kept so far, as an open-addressing set of indexes into c->pools
 * (index + 1; 0: empty), keyed by their name hashes: a duplicate is found in O(1)
 * instead of by comparing with every earlier pool (helper-67: 20,000 pools cost 0.77 s
 * of every guarded process).  `cap` is a power of two above twice the pools. */
struct cg__name_set {
  size_t *slot;
  size_t cap;
};

/* Whether a pool kept before `pc` has its name; if not, `pc` (index `at`) is added.
 * Without a set (out of memory) every kept pool is compared, as before. */
static int cg__name_seen(const struct cg_config *c, struct cg__name_set *set,
                         const struct cg_pool_cfg *pc, size_t at) {
  size_t j;

  if (!set->slot) {
    for (j = 0; j < c->npools; j++)
      if (strcmp(c->pools[j].name, pc->name) == 0)
        return 1;
    return 0;
  }
  for (j = (size_t) pc->name_hash & (set->cap - 1); set->slot[j]; j = (j + 1) & (set->cap - 1)) {
    const struct cg_pool_cfg *q = &c->pools[set->slot[j] - 1];
    if (q->name_hash == pc->name_hash && strcmp(q->name, pc->name) == 0)
      return 1;
  }
  set->slot[j] = at + 1;
  return 0;
}

static int cg__load_pools(struct cg_config *c, const cJSON *arr) {
  const cJSON *o;
  int problems = 0, n = cJSON_GetArraySize(arr);
  struct cg__name_set names = {NULL, 16};

  if (!cJSON_IsArray(arr)) {
    cg_warn("config: \"pools\" must be a list of objects; ignored");
    return 1;
  }
  cg__free_pools(c);
  c->pools = calloc((size_t) (n > 0 ? n : 1), sizeof(*c->pools));
  if (!c->pools)
    return 1;
  while (names.cap < 2 * (size_t) (n > 0 ? n : 1))
    names.cap *= 2;
  names.slot = calloc(names.cap, sizeof(*names.slot)); /* NULL: the slow way */
  cJSON_ArrayForEach(o, arr) {
    struct cg_pool_cfg *pc = &c->pools[c->npools];
    if (!cJSON_IsObject(o)) {
      problems++;
      continue;
    }
    problems += cg__parse_pool(c, o, pc);
    if (!pc->name[0] || !pc->nhosts) {
      cg_warn("config: a pool needs a \"name\" and \"hosts\"; pool ignored");
      cg__free_pool_hosts(pc);
      problems++;
      continue;
    }
    pc->name_hash = cg_limiter_name_hash(pc->name);
    if (cg__name_seen(c, &names, pc, c->npools)) {
      /* Pools are shared by name in the state file: two would share one bucket. */
      cg_warn("config: two pools are named \"%s\"; the second is ignored", pc->name);
      cg__free_pool_hosts(pc);
      pc->name_hash = 0;
      problems++;
      continue;
    }
    c->npools++;
  }
  free(names.slot);
  return problems;
}

/* `host:port` as pools see it: an IPv6 host in brackets, "[::1]:8080". */
/* Append `s` (`n` bytes) at `*at` of `out` (`len` bytes), cut as snprintf cuts. */
static void cg__put(char *out, size_t len, size_t *at, const char *s, size_t n) {
  size_t room = *at < len ? len - 1 - *at : 0;
  memcpy(out + *at, s, n < room ? n : room);
  *at += n < room ? n : room;
}

/* "host:port", "[v6]:port" for an IPv6 literal: what snprintf "%s:%d" / "[%s]:%d" writes,
 * cut the same way, without a printf per request (`port` >= 0). */
static void cg__host_port(const char *host, int port, char *out, size_t len) {
  char digits[12];
  size_t at = 0, nd = 0;
  int v6 = strchr(host, ':') != NULL;
  unsigned p = (unsigned) port;

  if (len == 0)
    return;
  do {
    digits[sizeof(digits) - 1 - nd++] = (char) ('0' + p % 10);
    p /= 10;
  } while (p && nd < sizeof(digits));
  if (v6)
    cg__put(out, len, &at, "[", 1);
  cg__put(out, len, &at, host, strlen(host));
  cg__put(out, len, &at, v6 ? "]:" : ":", v6 ? 2 : 1);
  cg__put(out, len, &at, digits + sizeof(digits) - nd, nd);
  out[at] = '\0';
}

/* A name of `n` bytes at `s` cut at the end of `len` - 1 bytes may end inside a UTF-8
 * character (a host of non-ASCII letters): that character's bytes are dropped, so the
 * name (records, `stat`) stays valid UTF-8. */
static void cg__whole_char_end(char *s, size_t n) {
  size_t i = n;
  unsigned char c;

  while (i > 0 && n - i < 3 && ((unsigned char) s[i - 1] & 0xC0) == 0x80)
    i--; /* continuation bytes at the end */
  if (i == 0 || (c = (unsigned char) s[i - 1]) < 0xC0)
    return; /* ASCII, or stray continuation bytes: left as they are */
  if ((size_t) (c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2) > n - (i - 1))
    s[i - 1] = '\0';
}

/* Whether `port` is the default of `scheme` (http 80, https 443). */
static int cg__default_port(const char *scheme, int port) {
  return port < 0 || (scheme && ((strcmp(scheme, "http") == 0 && port == 80) ||
                                 (strcmp(scheme, "https") == 0 && port == 443)));
}

const struct cg_pool_cfg *cg_config_pool_at(const struct cg_config *c, const char *host,
                                            int port, const char *scheme,
                                            struct cg_pool_cfg *scratch) {
  char hp[300];
  size_t i, j;
  if (port >= 0 && c->npools > 0)
    cg__host_port(host, port, hp, sizeof(hp));
  /* A glob matches the host name, or "host:port" (the port always written, even the
   * scheme's default): "127.0.0.1:8080" is one service, "127.0.0.1" all of them. */
  for (i = 0; i < c->npools; i++)
    for (j = 0; j < c->pools[i].nhosts; j++)
      if (fnmatch(c->pools[i].hosts[j], host, FNM_CASEFOLD) == 0 ||
          (port >= 0 && fnmatch(c->pools[i].hosts[j], hp, FNM_CASEFOLD) == 0))
        return &c->pools[i];
  memset(scratch, 0, sizeof(*scratch));
  /* A host no glob matches is a pool of its own per host and port (SPEC section 4):
   * "api.openai.com" for https on 443, "127.0.0.1:8080" for a service on 8080. */
  if (cg__default_port(scheme, port)) {
    size_t at = 0;
    cg__put(scratch->name, sizeof(scratch->name), &at, host, strlen(host));
    scratch->name[at] = '\0';
  } else
    cg__host_port(host, port, scratch->name, sizeof(scratch->name));
  if (CG_RARE(strnlen(scratch->name, sizeof(scratch->name)) == sizeof(scratch->name) - 1))
    cg__whole_char_end(scratch->name, sizeof(scratch->name) - 1); /* perhaps cut */
  /* Hashed once here: a call whose URL the spare call memoises keeps this pool (guard.c),
   * and the limiter finds the pool's place by the hash (issue 16). */
  scratch->name_hash = cg_limiter_name_hash(scratch->name);
  scratch->lim.rpm = c->rpm;
  scratch->lim.tpm = c->tpm;
  scratch->lim.max_inflight = c->max_inflight;
  scratch->lim.margin = CG_RATE_MARGIN;
  scratch->lim.adaptive = c->adaptive;
  scratch->lim.limit_keys = c->limit_keys;
  scratch->breaker = c->breaker;
  scratch->budget = c->budget;
  return scratch;
}

const struct cg_pool_cfg *cg_config_pool(const struct cg_config *c, const char *host,
                                         struct cg_pool_cfg *scratch) {
  return cg_config_pool_at(c, host, -1, NULL, scratch);
}

/* The JSON object of the config file at `path`, or NULL with the reason in `why` (`n`
 * bytes): unreadable, not a regular file under CG_CONFIG_FILE_MAX bytes, out of memory,
 * or not a JSON object.  The caller frees it with cJSON_Delete. */
static cJSON *cg__read_file(const char *path, char *why, size_t n) {
  /* O_NONBLOCK: a FIFO without a writer must fail the check below, not hang the host. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
  struct stat st;
  char *text;
  cJSON *root;
  const char *end = NULL;
  size_t got;

  if (!f) {
    snprintf(why, n, "%s", strerror(errno));
    if (fd >= 0)
      close(fd);
    return NULL;
  }
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > CG_CONFIG_FILE_MAX) {
    snprintf(why, n, "not a regular file under 1 MiB");
    fclose(f);
    return NULL;
  }
  if (!(text = malloc((size_t) st.st_size + 1))) {
    snprintf(why, n, "out of memory");
    fclose(f);
    return NULL;
  }
  got = fread(text, 1, (size_t) st.st_size, f);
  text[got] = '\0';
  fclose(f);
  root = cJSON_ParseWithLengthOpts(text, got, &end, 0);
  if (cJSON_IsObject(root)) {
    /* cJSON stops at the object's end: what follows it, blanks aside, makes the file
     * malformed as a whole ("{...} trailing text" was applied without a word) */
    while (end < text + got && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
      end++;
    if (end < text + got) {
      snprintf(why, n, "text after the JSON object (at byte %zu)", (size_t) (end - text));
      cJSON_Delete(root);
      free(text);
      return NULL;
    }
  }
  free(text);
  if (!cJSON_IsObject(root)) {
    snprintf(why, n, "not a JSON object");
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}

int cg_config_file_usable(const char *path, char *why, size_t n) {
  cJSON *root = cg__read_file(path, why, n);
  cJSON_Delete(root);
  return root ? 0 : -1;
}

/* Read the JSON config file at `path` into `c`.  Returns the number of problems. */
static int cg__load_file(struct cg_config *c, const char *path) {
  char why[128];
  cJSON *root = cg__read_file(path, why, sizeof(why)), *item;
  int problems = 0;

  if (!root) {
    cg_warn("config %s: %s; using defaults", path, why);
    return 1;
  }
  cJSON_ArrayForEach(item, root) {
    size_t i;
    int found = 0;
    unsigned ignored = 0;
    /* "breaker" / "retry_budget" may also be objects, like a pool's: every pool's defaults. */
    if (cJSON_IsObject(item) && strcmp(item->string, "breaker") == 0) {
      problems += cg__parse_sub(item, cg__brk_keys, &c->breaker, &ignored, "breaker", "top level");
      continue;
    }
    if (cJSON_IsObject(item) && strcmp(item->string, "retry_budget") == 0) {
      problems += cg__parse_sub(item, cg__bud_keys, &c->budget, &ignored, "retry_budget",
                                "top level");
      continue;
    }
    for (i = 0; i < CG_NKEYS; i++) {
      if (strcmp(item->string, cg__keys[i].json) == 0) {
        problems += cg__apply_json(c, &cg__keys[i], item, "config");
        found = 1;
        break;
      }
    }
    if (!found && strcmp(item->string, "pools") == 0) {
      problems += cg__load_pools(c, item);
      found = 1;
    }
    for (i = 0; !found && cg__known_other[i]; i++)
      found = strcmp(item->string, cg__known_other[i]) == 0;
    if (!found) {
      cg_warn("config %s: unknown key \"%.60s\" ignored", path, item->string);
      problems++;
    }
  }
  cJSON_Delete(root);
  return problems;
}

static void cg__defaults(struct cg_config *c, cg_getenv_fn env) {
  const char *state_home = env("XDG_STATE_HOME");
  const char *home = env("HOME");
  char buf[4096];

  memset(c, 0, sizeof(*c));
  c->connect_timeout_ms = 10000;
  c->first_byte_timeout_ms = 120000;
  c->read_timeout_ms = 120000;
  c->deadline_ms = 600000;
  c->max_attempts = 3;
  c->backoff_base_ms = 1000;
  c->backoff_cap_ms = 30000;
  c->max_retry_after_ms = 60000;
  c->jitter = CG_JITTER_FULL;
  c->silent_resend = CG_RESEND_AUTO;
  c->repeat_window_ms = 60000;
  c->adaptive = 1;
  c->limit_keys = 1;
  c->breaker.enabled = 1;
  c->breaker.failure_rate = 0.5;
  c->breaker.min_requests = 10;
  c->breaker.window_s = 10;
  c->breaker.cooldown_s = 1;
  c->breaker.open_wait = 1;
  c->breaker.consecutive = 5;
  c->breaker.cooldown_max_s = 2;
  c->breaker.ramp_s = 3;
  c->breaker.jitter = 0.2;
  c->breaker.open_code = 7; /* CURLE_COULDNT_CONNECT: what an unreachable host gives */
  c->budget.enabled = 1;
  c->budget.ratio = 0.2;
  c->budget.min_per_s = 1;
  c->budget.window_s = 10;
  c->budget.max_concurrent = 16;
  if (state_home && state_home[0] == '/')
    snprintf(buf, sizeof(buf), "%s/curlguard/usage.jsonl", state_home);
  else if (home && home[0] == '/')
    snprintf(buf, sizeof(buf), "%s/.local/state/curlguard/usage.jsonl", home);
  else
    buf[0] = '\0';
  c->log_path = buf[0] ? strdup(buf) : NULL;
  snprintf(buf, sizeof(buf), "/dev/shm/curlguard-%u.state", (unsigned) getuid());
  c->state_path = strdup(buf);
  c->redis_prefix = strdup("curlguard:");
  cg__set_hosts(c, "*");
}

static int cg__truthy(const char *v) {
  return v && (strcmp(v, "1") == 0 || strcasecmp(v, "on") == 0 ||
               strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0);
}

/* 1 for on, 0 for off or unset, -1 for a value that is neither. */
static int cg__switch(const char *v) {
  if (!v || v[0] == '\0' || strcmp(v, "0") == 0 || strcasecmp(v, "off") == 0 ||
      strcasecmp(v, "false") == 0 || strcasecmp(v, "no") == 0)
    return 0;
  return cg__truthy(v) ? 1 : -1;
}

/* The bits (as in cg_pool_cfg.breaker_set) of the sub-object keys `keys` whose variable
 * (a cg__keys entry inside [base, base + size) of struct cg_config) the environment set:
 * `taken[i]` says cg__keys[i] was taken from it. */
static unsigned cg__env_sub_bits(const unsigned char *taken, const struct cg__sub *keys,
                                 size_t base, size_t size) {
  unsigned bits = 0;
  size_t i, k;

  for (i = 0; i < CG_NKEYS; i++) {
    if (!taken[i] || cg__keys[i].offset < base || cg__keys[i].offset >= base + size)
      continue;
    for (k = 0; keys[k].name; k++)
      if (keys[k].offset == cg__keys[i].offset - base)
        bits |= 1u << k;
  }
  return bits;
}

int cg_config_load(struct cg_config *c, cg_getenv_fn env) {
  const char *v;
  int problems = 0;
  unsigned env_brk, env_bud;
  unsigned char taken[CG_NKEYS] = {0};
  size_t i;

  cg__defaults(c, env);
  c->enabled = cg__switch(env("CURLGUARD")) == 1;
  if (cg__switch(env("CURLGUARD")) < 0)
    problems++;
  v = env("CURLGUARD_CONFIG");
  if (v && v[0])
    problems += cg__load_file(c, v);
  for (i = 0; i < CG_NKEYS; i++) {
    v = env(cg__keys[i].env);
    if (v) {
      int bad = cg__apply_text(c, &cg__keys[i], v, "environment") != 0;
      problems += bad;
      taken[i] = !bad;
    }
  }
  if (c->backoff_cap_ms < c->backoff_base_ms) {
    cg_warn("backoff cap %ld ms is below the base %ld ms; using the base as the cap",
            c->backoff_cap_ms, c->backoff_base_ms);
    c->backoff_cap_ms = c->backoff_base_ms;
    problems++;
  }
  /* Pools take what they did not set themselves from the top level; a variable set in
   * the environment wins over a pool's own key too (environment over config file). */
  env_brk = cg__env_sub_bits(taken, cg__brk_keys, CG_OFF(breaker), sizeof(c->breaker));
  env_bud = cg__env_sub_bits(taken, cg__bud_keys, CG_OFF(budget), sizeof(c->budget));
  for (i = 0; i < c->npools; i++) {
    cg__inherit_sub(cg__brk_keys, &c->pools[i].breaker, &c->breaker,
                    c->pools[i].breaker_set & ~env_brk);
    cg__inherit_sub(cg__bud_keys, &c->pools[i].budget, &c->budget,
                    c->pools[i].budget_set & ~env_bud);
    if (c->pools[i].lim.adaptive < 0)
      c->pools[i].lim.adaptive = c->adaptive;
    if (c->pools[i].lim.limit_keys < 0)
      c->pools[i].lim.limit_keys = c->limit_keys;
  }
  return problems;
}

void cg_config_free(struct cg_config *c) {
  free(c->log_path);
  free(c->state_path);
  free(c->redis_url);
  free(c->redis_prefix);
  free(c->task_id);
  free(c->prices_path);
  free(c->request_id_header);
  free(c->task_id_header);
  cg__free_hosts(c);
  cg__free_pools(c);
  memset(c, 0, sizeof(*c));
}

static struct cg_config cg__config;
static pthread_once_t cg__config_once = PTHREAD_ONCE_INIT;
/* 1 once cg__config is loaded: read with acquire, so after the first call a snapshot
 * costs one load, not a pthread_once. */
static int cg__config_ready;

static const char *cg__real_getenv(const char *name) {
  return getenv(name);
}

static void cg__config_init(void) {
  cg_config_load(&cg__config, cg__real_getenv);
  __atomic_store_n(&cg__config_ready, 1, __ATOMIC_RELEASE);
}

const struct cg_config *cg_config(void) {
  if (!__atomic_load_n(&cg__config_ready, __ATOMIC_ACQUIRE))
    pthread_once(&cg__config_once, cg__config_init);
  return &cg__config;
}

/* -1 until the first call has read CURLGUARD; then 0 or 1 for the life of the process.
 * Threads racing on the first call all read the same variable and store the same value
 * (and cg_warn_once says it once). */
static int cg__enabled = -1;

int cg_config_enabled(void) {
  int v = __atomic_load_n(&cg__enabled, __ATOMIC_ACQUIRE);
  if (v < 0) {
    const char *s = getenv("CURLGUARD");
    v = cg__switch(s);
    if (v < 0) {
      cg_warn_once("switch", "CURLGUARD=\"%.40s\" is neither on (1, on, true, yes) nor off (0, off, "
                             "false, no); "
                             "the guard stays off", s);
      v = 0;
    }
    __atomic_store_n(&cg__enabled, v, __ATOMIC_RELEASE);
  }
  return v;
}

int cg_config_host_guarded(const struct cg_config *c, const char *host) {
  size_t i;
  if (!host)
    return 0;
  for (i = 0; i < c->nhosts; i++)
    if (fnmatch(c->hosts[i], host, FNM_CASEFOLD) == 0)
      return 1;
  return 0;
}
