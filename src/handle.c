/* handle.c - per-handle shadow of the host's options (see handle.h). */
#include "handle.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the map: open hashing on the handle pointer ---- */

#define CG_BUCKETS 1024 /* power of two */

struct cg__node {
  struct cg__node *next;
  struct cg_handle h;
};

static pthread_mutex_t cg__map_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct cg__node *cg__buckets[CG_BUCKETS];
static size_t cg__count;

static void cg__map_lock(void) {
  pthread_mutex_lock(&cg__map_mutex);
}
static void cg__map_unlock(void) {
  pthread_mutex_unlock(&cg__map_mutex);
}
/* A forked child must not inherit the map lock held by a thread it does not have: hold
 * it across fork() (pthread_atfork(3)). */
__attribute__((constructor)) static void cg__fork_register(void) {
  pthread_atfork(cg__map_lock, cg__map_unlock, cg__map_unlock);
}

static size_t cg__bucket(const CURL *curl) {
  uint64_t k = (uint64_t) (uintptr_t) curl * 0x9E3779B97F4A7C15ull;
  return (size_t) (k >> 54) & (CG_BUCKETS - 1);
}

static void cg__defaults(struct cg_handle *h) {
  h->method = CG_M_GET;
  h->postfieldsize = -1;
  h->write_data = stdout;
  h->read_data = stdin;
  h->noprogress = 1;
}

static void cg__free_owned(struct cg_handle *h) {
  free(h->url);
  free(h->custom_request);
  free(h->default_protocol);
  free(h->copypostfields);
  free(h->protocols_str);
}

struct cg_handle *cg_handle_add(CURL *curl, const struct cg_lib *lib) {
  struct cg__node *n = calloc(1, sizeof(*n)), **pp, *stale = NULL;
  size_t b;

  if (!n)
    return NULL;
  n->h.curl = curl;
  n->h.lib = lib;
  cg__defaults(&n->h);
  b = cg__bucket(curl);
  cg__map_lock();
  /* A shadow still keyed by this address belongs to a handle freed where the guard could
   * not see it (libcurl's Curl_close): the address was reused, so it goes, and no chain
   * ever holds a key twice. */
  for (pp = &cg__buckets[b]; *pp; pp = &(*pp)->next)
    if ((*pp)->h.curl == curl) {
      stale = *pp;
      *pp = stale->next;
      cg__count--;
      break;
    }
  n->next = cg__buckets[b];
  cg__buckets[b] = n;
  cg__count++;
  cg__map_unlock();
  if (stale) {
    cg__free_owned(&stale->h);
    free(stale);
  }
  return &n->h;
}

struct cg_handle *cg_handle_get(CURL *curl) {
  struct cg__node *n;
  size_t b = cg__bucket(curl);

  cg__map_lock();
  for (n = cg__buckets[b]; n; n = n->next)
    if (n->h.curl == curl)
      break;
  cg__map_unlock();
  return n ? &n->h : NULL;
}

void cg_handle_remove(CURL *curl) {
  struct cg__node **pp, *n = NULL;
  size_t b = cg__bucket(curl);

  cg__map_lock();
  for (pp = &cg__buckets[b]; *pp; pp = &(*pp)->next) {
    if ((*pp)->h.curl == curl) {
      n = *pp;
      *pp = n->next;
      cg__count--;
      break;
    }
  }
  cg__map_unlock();
  if (n) {
    cg__free_owned(&n->h);
    free(n);
  }
}

size_t cg_handle_count(void) {
  size_t c;
  cg__map_lock();
  c = cg__count;
  cg__map_unlock();
  return c;
}

void cg_handle_reset(struct cg_handle *h) {
  CURL *curl = h->curl;
  const struct cg_lib *lib = h->lib;
  int in_perform = h->in_perform;

  cg__free_owned(h);
  memset(h, 0, sizeof(*h));
  h->curl = curl;
  h->lib = lib;
  h->in_perform = in_perform;
  cg__defaults(h);
}

static char *cg__dup_mem(const char *p, size_t n) {
  char *c = malloc(n + 1);
  if (c) {
    memcpy(c, p, n);
    c[n] = '\0';
  }
  return c;
}

struct cg_handle *cg_handle_dup(const struct cg_handle *src, CURL *dup) {
  struct cg_handle *h = cg_handle_add(dup, src->lib);
  int failed = 0;

  if (!h)
    return NULL;
  {
    CURL *curl = h->curl;
    *h = *src;
    h->curl = curl;
    h->in_perform = 0;
  }
  h->url = src->url ? strdup(src->url) : NULL;
  h->custom_request = src->custom_request ? strdup(src->custom_request) : NULL;
  h->default_protocol = src->default_protocol ? strdup(src->default_protocol) : NULL;
  h->copypostfields =
      src->copypostfields ? cg__dup_mem(src->copypostfields, (size_t) src->copypostfields_len)
                          : NULL;
  h->protocols_str = src->protocols_str ? strdup(src->protocols_str) : NULL;
  failed = (src->url && !h->url) || (src->custom_request && !h->custom_request) ||
           (src->default_protocol && !h->default_protocol) ||
           (src->copypostfields && !h->copypostfields) ||
           (src->protocols_str && !h->protocols_str);
  if (failed) {
    cg_handle_remove(dup);
    return NULL;
  }
  return h;
}

int cg_handle_overridden(const struct cg_handle *h, long opt) {
  if (!h->in_perform)
    return 0;
  switch (opt) {
  case CURLOPT_WRITEFUNCTION:
  case CURLOPT_WRITEDATA:
  case CURLOPT_HEADERFUNCTION:
  case CURLOPT_HEADERDATA:
  case CURLOPT_READFUNCTION:
  case CURLOPT_READDATA:
  case CURLOPT_XFERINFOFUNCTION:
  case CURLOPT_XFERINFODATA:
  case CURLOPT_PROGRESSFUNCTION:
  case CURLOPT_NOPROGRESS:
  case CURLOPT_ERRORBUFFER:
  case CURLOPT_TIMEOUT:
  case CURLOPT_TIMEOUT_MS:
  case CURLOPT_CONNECTTIMEOUT:
  case CURLOPT_CONNECTTIMEOUT_MS:
  case CURLOPT_HTTPHEADER:
  case CURLOPT_PREREQFUNCTION:
  case CURLOPT_PREREQDATA:
  case CURLOPT_SEEKFUNCTION:
  case CURLOPT_SEEKDATA:
  case CURLOPT_RESOLVER_START_FUNCTION:
  case CURLOPT_RESOLVER_START_DATA:
  case CURLOPT_OPENSOCKETFUNCTION:
  case CURLOPT_OPENSOCKETDATA:
  case CURLOPT_HSTSREADFUNCTION:
    return 1;
  default:
    return 0;
  }
}

static void cg__set_str(char **slot, const void *p) {
  free(*slot);
  *slot = p ? strdup((const char *) p) : NULL;
}

/* The options that decide libcurl's data->set.method, mirroring lib/setopt.c. */
static void cg__record_method(struct cg_handle *h, long opt, long v) {
  switch (opt) {
  case CURLOPT_NOBODY:
    h->nobody = v != 0;
    if (h->nobody)
      h->method = CG_M_HEAD;
    else if (h->method == CG_M_HEAD)
      h->method = CG_M_GET;
    break;
  case CURLOPT_UPLOAD:
  case CURLOPT_PUT:
    if (v) {
      h->method = CG_M_PUT;
      h->nobody = 0;
    } else {
      h->method = CG_M_GET;
    }
    break;
  case CURLOPT_POST:
    h->method = v ? CG_M_POST : CG_M_GET;
    if (v)
      h->nobody = 0;
    break;
  case CURLOPT_HTTPGET:
    if (v) {
      h->method = CG_M_GET;
      h->nobody = 0;
    }
    break;
  }
}

/* lib/setopt.c: a size larger than the copied post data invalidates the copy. */
static void cg__record_postfieldsize(struct cg_handle *h, curl_off_t size) {
  if (h->postfieldsize < size && h->copypostfields) {
    free(h->copypostfields);
    h->copypostfields = NULL;
    h->copypostfields_len = 0;
    h->postfields = NULL;
  }
  h->postfieldsize = size;
}

void cg_handle_record(struct cg_handle *h, long opt, const struct cg_optval *v) {
  switch (opt) {
  case CURLOPT_URL:
    cg__set_str(&h->url, v->u.p);
    break;
  case CURLOPT_CUSTOMREQUEST:
    cg__set_str(&h->custom_request, v->u.p);
    break;
  case CURLOPT_DEFAULT_PROTOCOL:
    cg__set_str(&h->default_protocol, v->u.p);
    break;
  case CURLOPT_NOBODY:
  case CURLOPT_UPLOAD:
  case CURLOPT_PUT:
  case CURLOPT_POST:
  case CURLOPT_HTTPGET:
    cg__record_method(h, opt, v->u.l);
    break;
  case CURLOPT_POSTFIELDS:
    h->postfields = v->u.p;
    free(h->copypostfields);
    h->copypostfields = NULL;
    h->method = CG_M_POST;
    break;
  case CURLOPT_COPYPOSTFIELDS: {
    /* libcurl copies postfieldsize bytes, or strlen() when the size is unset. */
    const char *p = v->u.p;
    size_t n = !p ? 0 : h->postfieldsize >= 0 ? (size_t) h->postfieldsize : strlen(p);
    free(h->copypostfields);
    h->copypostfields = p ? cg__dup_mem(p, n) : NULL;
    h->copypostfields_len = h->copypostfields ? (curl_off_t) n : 0;
    h->postfields = NULL;
    h->method = CG_M_POST;
    break;
  }
  case CURLOPT_POSTFIELDSIZE:
    cg__record_postfieldsize(h, v->u.l);
    break;
  case CURLOPT_POSTFIELDSIZE_LARGE:
    cg__record_postfieldsize(h, v->u.o);
    break;
  case CURLOPT_MIMEPOST:
    h->method = CG_M_POST_MIME;
    h->nobody = 0;
    break;
  case CURLOPT_HTTPPOST:
    h->method = CG_M_POST_FORM;
    h->nobody = 0;
    break;
  case CURLOPT_HTTPHEADER:
    h->httpheader = v->u.p;
    break;
  case CURLOPT_FOLLOWLOCATION:
    h->followlocation = v->u.l;
    break;
  case CURLOPT_WRITEFUNCTION:
    h->write_fn = (curl_write_callback) v->u.f;
    break;
  case CURLOPT_WRITEDATA:
    h->write_data = v->u.p;
    break;
  case CURLOPT_HEADERFUNCTION:
    h->header_fn = (curl_write_callback) v->u.f;
    break;
  case CURLOPT_HEADERDATA:
    h->header_data = v->u.p;
    break;
  case CURLOPT_READFUNCTION:
    h->read_fn = (curl_read_callback) v->u.f;
    break;
  case CURLOPT_READDATA:
    h->read_data = v->u.p;
    break;
  case CURLOPT_SEEKFUNCTION:
    h->seek_fn = (curl_seek_callback) v->u.f;
    break;
  case CURLOPT_SEEKDATA:
    h->seek_data = v->u.p;
    break;
  case CURLOPT_PREREQFUNCTION:
    h->prereq_fn = (curl_prereq_callback) v->u.f;
    break;
  case CURLOPT_PREREQDATA:
    h->prereq_data = v->u.p;
    break;
  case CURLOPT_RESOLVER_START_FUNCTION:
    h->resolver_start_fn = (curl_resolver_start_callback) v->u.f;
    break;
  case CURLOPT_RESOLVER_START_DATA:
    h->resolver_start_data = v->u.p;
    break;
  case CURLOPT_OPENSOCKETFUNCTION:
    h->opensocket_fn = (curl_opensocket_callback) v->u.f;
    break;
  case CURLOPT_OPENSOCKETDATA:
    h->opensocket_data = v->u.p;
    break;
  case CURLOPT_HSTSREADFUNCTION:
    h->hstsread_fn = (curl_hstsread_callback) v->u.f;
    break;
  case CURLOPT_XFERINFOFUNCTION:
    h->xferinfo_fn = (curl_xferinfo_callback) v->u.f;
    h->progress_callback_set = h->xferinfo_fn != NULL;
    break;
  case CURLOPT_PROGRESSFUNCTION:
    h->progress_fn = (curl_progress_callback) v->u.f;
    h->progress_callback_set = h->progress_fn != NULL;
    break;
  case CURLOPT_XFERINFODATA: /* == CURLOPT_PROGRESSDATA */
    h->progress_data = v->u.p;
    break;
  case CURLOPT_NOPROGRESS:
    h->noprogress = v->u.l != 0;
    break;
  case CURLOPT_ERRORBUFFER:
    h->errorbuffer = v->u.p;
    break;
  case CURLOPT_TIMEOUT:
    h->timeout_ms = v->u.l * 1000;
    break;
  case CURLOPT_TIMEOUT_MS:
    h->timeout_ms = v->u.l;
    break;
  case CURLOPT_CONNECTTIMEOUT:
    h->connecttimeout_ms = v->u.l * 1000;
    break;
  case CURLOPT_CONNECTTIMEOUT_MS:
    h->connecttimeout_ms = v->u.l;
    break;
  case CURLOPT_NOSIGNAL:
    h->nosignal = v->u.l;
    break;
  case CURLOPT_PROTOCOLS:
    h->protocols_kind = 1;
    h->protocols = v->u.l;
    break;
  case CG_OPT_PROTOCOLS_STR:
    /* Only a list libcurl accepted is recorded (a refused one: see
     * cg_handle_protocols_unknown). */
    cg__set_str(&h->protocols_str, v->u.p);
    h->protocols_kind = 2; /* a NULL copy (out of memory) means: cannot be put back */
    break;
  case CURLOPT_VERBOSE:
    h->verbose = v->u.l;
    break;
  default:
    break;
  }
}

const char *cg_handle_body(const struct cg_handle *h, size_t *len) {
  if (h->method != CG_M_POST)
    return NULL;
  if (h->copypostfields) {
    *len = (size_t) h->copypostfields_len;
    return h->copypostfields;
  }
  if (h->postfields) {
    *len = h->postfieldsize >= 0 ? (size_t) h->postfieldsize : strlen(h->postfields);
    return h->postfields;
  }
  return NULL;
}

const char *cg_handle_method(const struct cg_handle *h) {
  if (h->custom_request)
    return h->custom_request;
  if (h->nobody)
    return "HEAD";
  switch (h->method) {
  case CG_M_POST:
  case CG_M_POST_FORM:
  case CG_M_POST_MIME:
    return "POST";
  case CG_M_PUT:
    return "PUT";
  case CG_M_HEAD:
    return "HEAD";
  case CG_M_GET:
  default:
    return "GET";
  }
}

int cg_handle_header(const struct cg_handle *h, const char *name, char *val, size_t vlen) {
  const struct curl_slist *l;
  size_t n = strlen(name);

  for (l = h->httpheader; l; l = l->next) {
    const char *s = l->data;
    if (s && strncasecmp(s, name, n) == 0 && s[n] == ':') {
      const char *p = s + n + 1, *e;
      while (*p == ' ' || *p == '\t')
        p++;
      e = p + strlen(p);
      while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
        e--;
      if (e == p)
        continue; /* "Name:" with no value removes the header in libcurl */
      if (val && vlen) {
        size_t m = (size_t) (e - p) < vlen - 1 ? (size_t) (e - p) : vlen - 1;
        memcpy(val, p, m);
        val[m] = '\0';
      }
      return 1;
    }
  }
  return 0;
}

void cg_handle_protocols_unknown(struct cg_handle *h) {
  free(h->protocols_str);
  h->protocols_str = NULL;
  h->protocols_kind = 2; /* no copy: cannot be put back, so never touched */
}
