/* record.c - one JSON line per attempt, one write(2) (see record.h). */
#include "record.h"

#include "clock.h"
#include "log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void cg_record_init(struct cg_record *r) {
  memset(r, 0, sizeof(*r));
  r->status = CG_NULL_INT;
  r->connect_ms = r->ttfb_ms = r->duration_ms = CG_NULL_INT;
  r->prompt_tokens = r->completion_tokens = r->total_tokens = r->cached_tokens = CG_NULL_INT;
  r->cost_usd = NAN;
}

/* Copy `s` into `out` (`cap` bytes) as valid UTF-8: each byte that does not start a
 * well-formed sequence (RFC 3629) becomes U+FFFD.  Records stay valid JSON whatever
 * bytes a host puts in a URL, a model name or a task id. */
static const char *cg__utf8(const char *s, char *out, size_t cap) {
  const unsigned char *p = (const unsigned char *) s;
  size_t o = 0;

  while (*p && o + 4 < cap) {
    size_t n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3
             : (*p & 0xF8) == 0xF0 ? 4 : 0;
    size_t i;
    int ok = n > 0 && !(n == 2 && *p < 0xC2) && !(n == 4 && *p > 0xF4);
    for (i = 1; ok && i < n; i++)
      ok = (p[i] & 0xC0) == 0x80;
    if (ok && n == 3)
      ok = !(p[0] == 0xE0 && p[1] < 0xA0) && !(p[0] == 0xED && p[1] >= 0xA0);
    if (ok && n == 4)
      ok = !(p[0] == 0xF0 && p[1] < 0x90) && !(p[0] == 0xF4 && p[1] >= 0x90);
    if (ok) {
      memcpy(out + o, p, n);
      o += n;
      p += n;
    } else {
      memcpy(out + o, "\xEF\xBF\xBD", 3);
      o += 3;
      p++;
    }
  }
  out[o] = '\0';
  return out;
}

static void cg__add_str(cJSON *o, const char *k, const char *v) {
  char small[512], *buf = small;
  size_t cap;

  if (!v) {
    cJSON_AddNullToObject(o, k);
    return;
  }
  cap = strlen(v) * 3 + 5; /* every byte may become a 3-byte U+FFFD */
  if (cap > sizeof(small) && !(buf = malloc(cap)))
    return;
  cJSON_AddStringToObject(o, k, cg__utf8(v, buf, cap > sizeof(small) ? cap : sizeof(small)));
  if (buf != small)
    free(buf);
}

/* `v` in decimal into `buf` (24 bytes); returns where the digits start.  snprintf's
 * "%lld" costs about 800 instructions a call, and a record has 25 integers. */
static const char *cg__itoa(int64_t v, char buf[24]) {
  uint64_t u = v < 0 ? 0 - (uint64_t) v : (uint64_t) v;
  char *p = buf + 23;
  *p = '\0';
  do {
    *--p = (char) ('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0)
    *--p = '-';
  return p;
}

/* Integers are written as integers, every digit (cJSON's numbers are doubles, which
 * would print 9007199254740993 as 9.00719925474099e+15). */
static void cg__add_int(cJSON *o, const char *k, int64_t v) {
  char num[24];
  if (v == CG_NULL_INT) {
    cJSON_AddNullToObject(o, k);
    return;
  }
  cJSON_AddRawToObject(o, k, cg__itoa(v, num));
}

/* The shortest decimal form that reads back as exactly `v` (cJSON compares with an
 * epsilon and may drop the last digits); non-finite values are null. */
static void cg__add_double(cJSON *o, const char *k, double v) {
  char num[40], *p;
  int prec;
  if (!isfinite(v)) {
    cJSON_AddNullToObject(o, k);
    return;
  }
  for (prec = 15; prec <= 17; prec++) {
    snprintf(num, sizeof(num), "%.*g", prec, v);
    if (strtod(num, NULL) == v) /* both in the host's locale */
      break;
  }
  for (p = num; *p; p++) /* a host's LC_NUMERIC may print "0,5": JSON wants "0.5" */
    if (!((*p >= '0' && *p <= '9') || *p == '-' || *p == '+' || *p == 'e'))
      *p = '.';
  cJSON_AddRawToObject(o, k, num);
}

char *cg_record_json(const struct cg_record *r, size_t *len) {
  cJSON *o = cJSON_CreateObject();
  char ts[32], *text, *line;
  size_t n;

  if (!o)
    return NULL;
  cJSON_AddStringToObject(o, "ts", cg_rfc3339_ms(r->ts_ms, ts, sizeof(ts)));
  cg__add_int(o, "pid", r->pid);
  cg__add_str(o, "request_id", r->request_id);
  cg__add_str(o, "task_id", r->task_id);
  cg__add_int(o, "attempt", r->attempt);
  cJSON_AddBoolToObject(o, "final", r->final != 0);
  cg__add_str(o, "method", r->method);
  cg__add_str(o, "host", r->host);
  cg__add_str(o, "path", r->path);
  cg__add_str(o, "pool", r->pool);
  cg__add_int(o, "status", r->status);
  cg__add_int(o, "curl_code", r->curl_code);
  cg__add_str(o, "outcome", r->outcome);
  cg__add_str(o, "decision", r->decision);
  cg__add_str(o, "reason", r->reason);
  cg__add_int(o, "queue_ms", r->queue_ms);
  cg__add_int(o, "backoff_ms", r->backoff_ms);
  cg__add_int(o, "connect_ms", r->connect_ms);
  cg__add_int(o, "ttfb_ms", r->ttfb_ms);
  cg__add_int(o, "duration_ms", r->duration_ms);
  cg__add_int(o, "bytes_sent", r->bytes_sent);
  cg__add_int(o, "bytes_received", r->bytes_received);
  cg__add_str(o, "model", r->model);
  cg__add_int(o, "prompt_tokens", r->prompt_tokens);
  cg__add_int(o, "completion_tokens", r->completion_tokens);
  cg__add_int(o, "total_tokens", r->total_tokens);
  cg__add_int(o, "cached_tokens", r->cached_tokens);
  cg__add_double(o, "cost_usd", r->cost_usd);
  cJSON_AddBoolToObject(o, "possibly_billed", r->possibly_billed != 0);
  cg__add_str(o, "body_digest", r->body_digest);
  cg__add_int(o, "libcurl_resends", r->libcurl_resends);
  cg__add_str(o, "repeat_of", r->repeat_of);
  cg__add_int(o, "repeats", r->repeats);
  cg__add_str(o, "fallback_from", r->fallback_from);
  cg__add_int(o, "breaker_wait_ms", r->breaker_wait_ms);

  text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!text)
    return NULL;
  n = strlen(text);
  line = malloc(n + 2);
  if (line) {
    memcpy(line, text, n);
    line[n] = '\n';
    line[n + 1] = '\0';
    *len = n + 1;
  }
  cJSON_free(text);
  return line;
}

/* ---- the log sink: opened once per process ---- */

static pthread_mutex_t cg__log_mutex = PTHREAD_MUTEX_INITIALIZER;
static dev_t cg__log_dev; /* identity of the file we opened, to notice a host that */
static ino_t cg__log_ino; /* closed our descriptor and got its number reused */

/* A forked child must not inherit cg__log_mutex held by a thread it does not have: hold it
 * across fork() (pthread_atfork(3)). */
static void cg__fork_prepare(void) {
  pthread_mutex_lock(&cg__log_mutex);
}
static void cg__fork_release(void) {
  pthread_mutex_unlock(&cg__log_mutex);
}
__attribute__((constructor)) static void cg__fork_register(void) {
  pthread_atfork(cg__fork_prepare, cg__fork_release, cg__fork_release);
}
static int cg__log_fd = -2; /* -2 not tried yet, -1 unusable */

/* mkdir -p of the directory part of `path` (mode 0700 for what we create). */
static int cg__mkdirs(const char *path) {
  char buf[4096];
  char *p;
  size_t n = strlen(path);

  if (n >= sizeof(buf))
    return -1;
  memcpy(buf, path, n + 1);
  p = strrchr(buf, '/');
  if (!p || p == buf)
    return 0;
  *p = '\0';
  for (p = buf + 1; *p; p++) {
    if (*p == '/') {
      *p = '\0';
      if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return -1;
      *p = '/';
    }
  }
  if (mkdir(buf, 0700) != 0 && errno != EEXIST)
    return -1;
  return 0;
}

static int cg__log_open(const struct cg_config *c) {
  struct stat st;
  int fd;

  if (!c->log_path)
    return -1;
  if (strcmp(c->log_path, "-") == 0)
    return STDERR_FILENO;
  if (cg__mkdirs(c->log_path) != 0) {
    cg_warn("usage log %s: cannot create its directory: %s; records are not written",
            c->log_path, strerror(errno));
    return -1;
  }
  /* O_NONBLOCK: a FIFO without a reader must fail at once, never hang the host. */
  fd = open(c->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
            0600);
  if (fd < 0) {
    cg_warn("usage log %s: %s; records are not written", c->log_path, strerror(errno));
    return -1;
  }
  if (fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode))) {
    cg_warn("usage log %s: not a regular file; records are not written", c->log_path);
    close(fd);
    return -1;
  }
  cg__log_dev = st.st_dev;
  cg__log_ino = st.st_ino;
  return fd;
}

/* Whether `fd` is still the log we opened (the host may have closed it, and the number
 * may now belong to one of its own files or sockets). */
static int cg__log_still_ours(int fd) {
  struct stat st;
  if (fd == STDERR_FILENO)
    return 1;
  return fstat(fd, &st) == 0 && st.st_dev == cg__log_dev && st.st_ino == cg__log_ino;
}

int cg_record_emit(const struct cg_config *c, const struct cg_record *r) {
  char *line;
  size_t len;
  ssize_t w;
  int fd;

  pthread_mutex_lock(&cg__log_mutex);
  if (cg__log_fd >= 0 && !cg__log_still_ours(cg__log_fd))
    cg__log_fd = -2; /* not ours any more: never close it, open the log again */
  if (cg__log_fd == -2)
    cg__log_fd = cg__log_open(c);
  fd = cg__log_fd;
  pthread_mutex_unlock(&cg__log_mutex);
  if (fd < 0)
    return -1;
  line = cg_record_json(r, &len);
  if (!line) {
    cg_warn_once("record-oom", "out of memory writing a usage record; record dropped");
    return -1;
  }
  w = cg_write_quiet(fd, line, len);
  if (w != (ssize_t) len)
    cg_warn_once("record-write", "usage log write failed: %s; records may be missing",
                 w < 0 ? strerror(errno) : "short write");
  free(line);
  return w == (ssize_t) len ? 0 : -1;
}
