/* price.c - the price table: load (curlguard's own format here, LiteLLM's in
 * price-litellm.c), look up, cost (see price.h). */
#include "price.h"
#include "price-int.h"
#include "tls.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void cg__price_why(char *why, size_t whylen, const char *fmt, ...) {
  va_list ap;
  if (!why || whylen == 0)
    return;
  va_start(ap, fmt);
  vsnprintf(why, whylen, fmt, ap);
  va_end(ap);
}

void cg_prices_free(struct cg_prices *t) {
  size_t i;
  if (!t)
    return;
  for (i = 0; i < t->n; i++)
    free(t->entries[i].match);
  free(t->entries);
  free(t->date);
  free(t);
}

/* The whole file at `path`, NUL-terminated, or NULL with the reason in `why`; its
 * modification time in `*mtime`. */
static char *cg__read_file(const char *path, size_t *len, time_t *mtime, char *why,
                           size_t whylen) {
  /* O_NONBLOCK: a FIFO without a writer must fail the check below, not hang. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
  struct stat st;
  char *text;
  size_t n;

  if (!f) {
    cg__price_why(why, whylen, "prices %s: %s", path, strerror(errno));
    if (fd >= 0)
      close(fd);
    return NULL;
  }
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > CG_PRICES_FILE_MAX) {
    cg__price_why(why, whylen, "prices %s: not a regular file under %d MiB", path,
            CG_PRICES_FILE_MAX >> 20);
    fclose(f);
    return NULL;
  }
  text = malloc((size_t) st.st_size + 1);
  if (!text) {
    cg__price_why(why, whylen, "prices %s: out of memory", path);
    fclose(f);
    return NULL;
  }
  n = fread(text, 1, (size_t) st.st_size, f);
  text[n] = '\0';
  fclose(f);
  *len = n;
  *mtime = st.st_mtime;
  return text;
}

/* Read price `key` of model entry `i` into `*v`: required when `def` is NAN, else
 * optional with `def` as its default.  0 on success, -1 with the reason in `why`. */
static int cg__price_field(const cJSON *m, const char *key, double def, double *v,
                           const char *path, size_t i, char *why, size_t whylen) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(m, key);
  if (!x) {
    if (isnan(def)) {
      cg__price_why(why, whylen, "prices %s: models[%zu]: \"%s\" missing", path, i, key);
      return -1;
    }
    *v = def;
    return 0;
  }
  if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < 0) {
    cg__price_why(why, whylen, "prices %s: models[%zu]: \"%s\" is not a price >= 0", path, i,
            key);
    return -1;
  }
  *v = x->valuedouble;
  return 0;
}

/* A table in curlguard's own format (price.h): any error refuses the whole file. */
static struct cg_prices *cg__load_own(const cJSON *root, const char *path, char *why,
                                      size_t whylen) {
  struct cg_prices *t = NULL;
  const cJSON *date, *models, *m;
  size_t i, count;

  date = cJSON_GetObjectItemCaseSensitive(root, "date");
  if (!cJSON_IsString(date) || !date->valuestring[0]) {
    cg__price_why(why, whylen, "prices %s: \"date\" missing or not a string", path);
    goto fail;
  }
  models = cJSON_GetObjectItemCaseSensitive(root, "models");
  count = cJSON_IsArray(models) ? (size_t) cJSON_GetArraySize(models) : 0;
  if (count == 0) {
    cg__price_why(why, whylen, "prices %s: \"models\" missing, not an array or empty", path);
    goto fail;
  }
  t = calloc(1, sizeof(*t));
  if (t)
    t->entries = calloc(count, sizeof(*t->entries));
  if (t)
    t->date = strdup(date->valuestring);
  if (!t || !t->entries || !t->date) {
    cg__price_why(why, whylen, "prices %s: out of memory", path);
    goto fail;
  }
  i = 0;
  cJSON_ArrayForEach(m, models) {
    const cJSON *match = cJSON_GetObjectItemCaseSensitive(m, "match");
    struct cg__price_entry *e = &t->entries[i];

    if (!cJSON_IsObject(m) || !cJSON_IsString(match) || !match->valuestring[0]) {
      cg__price_why(why, whylen, "prices %s: models[%zu]: not an object with a \"match\" glob",
              path, i);
      goto fail;
    }
    if (cg__price_field(m, "input", NAN, &e->price.input, path, i, why, whylen) != 0 ||
        cg__price_field(m, "output", NAN, &e->price.output, path, i, why, whylen) != 0 ||
        cg__price_field(m, "cached_input", e->price.input, &e->price.cached_input, path, i,
                        why, whylen) != 0)
      goto fail;
    if (cg__price_field(m, "cache_write", -1, &e->price.cache_write, path, i, why,
                        whylen) != 0)
      goto fail;
    e->match = strdup(match->valuestring);
    if (!e->match) {
      cg__price_why(why, whylen, "prices %s: out of memory", path);
      goto fail;
    }
    e->seq = i;
    t->n = ++i;
  }
  return t;

fail:
  cg_prices_free(t);
  return NULL;
}

/* Tables loaded so far: each gets the next number (cg_prices.serial). */
static unsigned long cg__price_serial;

struct cg_prices *cg_prices_load(const char *path, char *why, size_t whylen) {
  struct cg_prices *t;
  cJSON *root;
  char *text;
  size_t len = 0;
  time_t mtime = 0;

  cg__price_why(why, whylen, "%s", "");
  if (!path || !*path) {
    cg__price_why(why, whylen, "prices: no path");
    return NULL;
  }
  text = cg__read_file(path, &len, &mtime, why, whylen);
  if (!text)
    return NULL;
  root = cJSON_ParseWithLength(text, len);
  free(text);
  if (!cJSON_IsObject(root)) {
    cg__price_why(why, whylen, "prices %s: not a JSON object", path);
    cJSON_Delete(root);
    return NULL;
  }
  if (!cJSON_GetObjectItemCaseSensitive(root, "models") && cg__price_is_litellm(root))
    t = cg__price_load_litellm(root, mtime, path, why, whylen);
  else
    t = cg__load_own(root, path, why, whylen);
  cJSON_Delete(root);
  if (t)
    t->serial = __atomic_add_fetch(&cg__price_serial, 1, __ATOMIC_RELAXED);
  return t;
}

/* The first entry whose glob matches `model`, or NULL. */
static const struct cg__price_entry *cg__glob_lookup(const struct cg_prices *t,
                                                     const char *model) {
  for (size_t i = 0; i < t->n; i++)
    if (fnmatch(t->entries[i].match, model, FNM_CASEFOLD) == 0)
      return &t->entries[i];
  return NULL;
}

/* Each thread's last lookup: a guarded process asks for the same model call after call,
 * and a glob table costs one fnmatch per entry (about 50, 90k instructions per record,
 * issue 16).  A table never changes once loaded and its serial is never reused, so the
 * answer for (serial, model) stays right for the table's life; a model longer than the
 * key is looked up every time. */
#define CG_PRICE_MEMO_MAX 128
static CG_TLS struct {
  unsigned long serial; /* 0: empty */
  int found;
  struct cg_price price;
  size_t len;
  char model[CG_PRICE_MEMO_MAX];
} cg__price_memo;

static int cg__lookup(const struct cg_prices *t, const char *model, struct cg_price *out) {
  const struct cg__price_entry *e;
  const char *slash;
  if (t->litellm)
    return cg__price_lookup_litellm(t, model, out);
  e = cg__glob_lookup(t, model);
  /* a gateway's name for the model ("openai/gpt-4o"): the model's own name */
  if (!e && (slash = strrchr(model, '/')) && slash[1])
    e = cg__glob_lookup(t, slash + 1);
  if (e && out)
    *out = e->price;
  return e != NULL;
}

int cg_prices_lookup(const struct cg_prices *t, const char *model, struct cg_price *out) {
  struct cg_price p = {0, 0, 0, 0};
  size_t len;
  int found;
  if (!t || !model || !*model)
    return 0;
  len = strnlen(model, CG_PRICE_MEMO_MAX);
  if (t->serial == 0 || len == CG_PRICE_MEMO_MAX)
    return cg__lookup(t, model, out);
  if (cg__price_memo.serial == t->serial && cg__price_memo.len == len &&
      memcmp(cg__price_memo.model, model, len) == 0) {
    if (cg__price_memo.found && out)
      *out = cg__price_memo.price;
    return cg__price_memo.found;
  }
  found = cg__lookup(t, model, &p);
  cg__price_memo.serial = t->serial;
  cg__price_memo.found = found;
  cg__price_memo.price = p;
  cg__price_memo.len = len;
  memcpy(cg__price_memo.model, model, len);
  if (found && out)
    *out = p;
  return found;
}

double cg_price_cost(const struct cg_price *p, int64_t input, int64_t cached_input,
                     int64_t cache_write, int64_t output) {
  double cw, plain;
  if (!p || input < 0 || output < 0)
    return NAN;
  if (cached_input < 0)
    cached_input = 0;
  if (cache_write < 0)
    cache_write = 0;
  cw = p->cache_write < 0 ? p->input : p->cache_write;
  plain = (double) input - (double) cached_input - (double) cache_write;
  if (plain < 0)
    plain = 0; /* inconsistent counts: never charge negative tokens */
  return (plain * p->input + (double) cached_input * p->cached_input +
          (double) cache_write * cw + (double) output * p->output) / 1e6;
}

const char *cg_prices_date(const struct cg_prices *t) {
  return t ? t->date : NULL;
}
