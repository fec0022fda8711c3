/* handle.c - per-handle shadow of the host's options (see handle.h). */
#include "handle.h"

#include "ascii.h"
#include "hot.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the map: open addressing on the handle pointer, lock-free for readers ----
 *
 * Every libcurl call of the host looks its handle up (curl_easy_setopt most of all), so
 * the lookup takes no lock: a table of slots, each a key (the CURL* as an integer) and
 * the shadow's node, probed linearly from the key's hash.  A reader compares keys only,
 * and follows a node only when the key is its own handle: libcurl forbids using a
 * handle while it is being cleaned up, so that node cannot go away under the reader,
 * while the nodes of other keys, removed and freed at any time by other threads, are
 * never touched.  Writers (add, remove, growth) take one mutex.
 *
 * A removed key leaves a tombstone, so that the probe chains of other keys stay whole for
 * readers in them; a tombstone whose next slot is empty can become empty itself (no
 * present key's chain runs through it), and so can the tombstones before it, and an add
 * reuses the first tombstone on its way.  Once half the slots are used, a new table is
 * made (cg__reserve) and published with a release store; the old one stays allocated,
 * and unchanged, until the process exits, since a reader may still be probing it: it
 * still maps every handle it held to that handle's node (nodes never move), and a handle
 * added or removed later is looked up through the new table by its own thread, which
 * saw the new table published before (the mutex, or the host's own hand-over of the
 * handle, orders them).  Growth at least doubles, so the tables kept add up to less than
 * the largest one, but for tables made again at the same size (cg__reserve: only after
 * about as many removals inside runs of live keys as the table has slots; counted by
 * cg_handle_tables).  A lookup probes at most the whole table, so it always ends. */

#define CG_TABLE_MIN 1024 /* slots of the first table, a power of two (16 KiB) */
#define CG_TOMB ((uintptr_t) 1) /* a removed key: never a CURL* (they are aligned) */

struct cg__node {
  struct cg_handle h;
};

struct cg__slot {
  uintptr_t key;         /* 0 empty, CG_TOMB removed, else the CURL* */
  struct cg__node *node; /* the shadow of `key`, set before `key` is published */
};

struct cg__table {
  size_t mask;              /* slots - 1 */
  struct cg__table *older;  /* the table this one replaced, kept until exit */
  struct cg__slot slots[];
};

static pthread_mutex_t cg__map_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct cg__table *cg__table;     /* the current table: acquire / release */
static size_t cg__count;                /* shadows alive (atomic, relaxed) */
static size_t cg__used;                 /* slots not empty: live + tombstones (mutex) */
static size_t cg__ntables;              /* tables made so far (mutex) */

CG_TLS struct cg_handle_memo cg_handle_memo;
uint64_t cg_handle_gen = 1;
static uint64_t cg__serial; /* the last struct cg_handle serial given */

/* A change of the map: every memo taken before it is void (mutex held). */
static void cg__gen_bump(void) {
  __atomic_store_n(&cg_handle_gen, __atomic_load_n(&cg_handle_gen, __ATOMIC_RELAXED) + 1,
                   __ATOMIC_RELEASE);
}

static void cg__map_lock(void) {
  pthread_mutex_lock(&cg__map_mutex);
}
static void cg__map_unlock(void) {
  pthread_mutex_unlock(&cg__map_mutex);
}
/* A forked child must not inherit the map lock held by a thread it does not have: hold
 * it across fork() (pthread_atfork(3)).  Readers hold nothing. */
__attribute__((constructor)) static void cg__fork_register(void) {
  pthread_atfork(cg__map_lock, cg__map_unlock, cg__map_unlock);
}

static size_t cg__home(const struct cg__table *t, uintptr_t key) {
  uint64_t k = (uint64_t) key * 0x9E3779B97F4A7C15ull;
  return (size_t) (k ^ (k >> 29)) & t->mask;
}

static uintptr_t cg__key_at(const struct cg__table *t, size_t i) {
  return __atomic_load_n(&t->slots[i].key, __ATOMIC_ACQUIRE);
}

/* The slot of `key` in `t`, or -1.  Lock-free; follows no node. */
static long cg__find(const struct cg__table *t, uintptr_t key) {
  size_t i = cg__home(t, key), n;

  for (n = 0; n <= t->mask; n++, i = (i + 1) & t->mask) {
    uintptr_t k = cg__key_at(t, i);
    if (k == key)
      return (long) i;
    if (k == 0)
      return -1;
  }
  return -1;
}

static struct cg__table *cg__table_new(size_t slots) {
  struct cg__table *t = calloc(1, sizeof(*t) + slots * sizeof(struct cg__slot));
  if (t)
    t->mask = slots - 1;
  return t;
}

/* Place `node` under `key` in a table nobody reads yet. */
static void cg__place(struct cg__table *t, uintptr_t key, struct cg__node *node) {
  size_t i = cg__home(t, key);
  while (t->slots[i].key != 0)
    i = (i + 1) & t->mask;
  t->slots[i].node = node;
  t->slots[i].key = key;
}

/* cg__reserve's new table (mutex held): the first table, or, once half the slots are
 * used (live keys and tombstones), a new table with room for four times the live keys,
 * never smaller than the current one.  Only tombstones that sit inside runs of live keys
 * outlive their removal (see cg_handle_remove), so with the few handles hosts keep a
 * table of the same size is only made again after about as many removals as it has
 * slots, each inside such a run.  0, or -1 when out of memory.  Not inlined, and cold: an
 * add rarely needs it, and its code stays apart from the add's. */
static __attribute__((noinline, cold)) int cg__grow(void) {
  struct cg__table *t = cg__table, *n;
  size_t i, live = 0, slots = CG_TABLE_MIN;

  if (t) {
    for (i = 0; i <= t->mask; i++)
      live += t->slots[i].key > CG_TOMB;
    slots = t->mask + 1;
  }
  while (slots < (live + 1) * 4)
    slots *= 2;
  if (!(n = cg__table_new(slots)))
    return -1;
  if (t)
    for (i = 0; i <= t->mask; i++)
      if (t->slots[i].key > CG_TOMB)
        cg__place(n, t->slots[i].key, t->slots[i].node);
  n->older = t;
  cg__used = live;
  cg__ntables++;
  __atomic_store_n(&cg__table, n, __ATOMIC_RELEASE);
  return 0;
}

/* Make room for one more key (mutex held): nothing to do while under half the slots are
 * used, else cg__grow.  0, or -1 when out of memory. */
static int cg__reserve(void) {
  struct cg__table *t = cg__table;

  if (t && (cg__used + 1) * 2 <= t->mask + 1)
    return 0;
  return cg__grow();
}

static void cg__defaults(struct cg_handle *h) {
  h->method = CG_M_GET;
  h->postfieldsize = -1;
  h->write_data = stdout;
  h->read_data = stdin;
  h->noprogress = 1;
  h->content_decoding = 1;
}

/* Free the strings the shadow owns, but its URL buffer (kept by a reset and a spare). */
static void cg__free_owned_but_url(struct cg_handle *h) {
  free(h->custom_request);
  free(h->default_protocol);
  free(h->copypostfields);
  free(h->protocols_str);
}

/* Every field zero but the URL buffer (url_buf, url_cap; url is NULL). */
static void cg__zero_but_url(struct cg_handle *h) {
  char *url_buf = h->url_buf;
  size_t url_cap = h->url_cap;

  memset(h, 0, sizeof(*h));
  h->url_buf = url_buf;
  h->url_cap = url_cap;
}

/* The node of the handle removed last, kept with its URL buffer (at most
 * CG_SPARE_URL_MAX bytes) for the next cg_handle_add: a host that makes a handle per
 * request (the curl tool, one per URL) reuses it instead of a calloc, a malloc for its
 * URL and two frees per request (issue 16).  Taken and put back with atomic swaps: a node
 * belongs to one thread at a time. */
#define CG_SPARE_URL_MAX 4096
static struct cg__node *cg__spare;

/* A node with every field zero but the URL buffer it may keep; NULL when out of memory. */
static struct cg__node *cg__node_new(void) {
  struct cg__node *n = __atomic_exchange_n(&cg__spare, NULL, __ATOMIC_ACQ_REL);

  if (!n)
    return calloc(1, sizeof(*n));
  cg__zero_but_url(&n->h);
  return n;
}

/* Free what node `n` owns and keep it as the spare, or free it when there is one. */
static void cg__node_free(struct cg__node *n) {
  struct cg__node *none = NULL;

  cg__free_owned_but_url(&n->h);
  if (n->h.url_cap > CG_SPARE_URL_MAX) {
    free(n->h.url_buf);
    n->h.url_buf = NULL;
    n->h.url_cap = 0;
  }
  if (!__atomic_compare_exchange_n(&cg__spare, &none, n, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_RELAXED)) {
    free(n->h.url_buf);
    free(n);
  }
}

struct cg_handle *cg_handle_add(CURL *curl, const struct cg_lib *lib) {
  struct cg__node *n = cg__node_new(), *stale = NULL;
  uintptr_t key = (uintptr_t) curl;
  struct cg__table *t;
  long at;
  size_t i, free_at = SIZE_MAX, probes;

  if (CG_RARE(!n))
    return NULL;
  if (CG_RARE(key <= CG_TOMB)) { /* not a handle libcurl makes; never kept */
    cg__node_free(n);
    return NULL;
  }
  n->h.curl = curl;
  n->h.lib = lib;
  n->h.serial = __atomic_add_fetch(&cg__serial, 1, __ATOMIC_RELAXED);
  cg__defaults(&n->h);
  cg__map_lock();
  t = cg__table;
  /* A shadow still keyed by this address belongs to a handle freed where the guard could
   * not see it (libcurl's Curl_close): the address was reused, so its node is replaced
   * in place (only this handle's user reads it), and no table ever holds a key twice. */
  if (CG_RARE(t && (at = cg__find(t, key)) >= 0)) {
    stale = t->slots[at].node;
    cg__gen_bump();
    __atomic_store_n(&t->slots[at].node, n, __ATOMIC_RELEASE);
    cg__map_unlock();
    cg__node_free(stale);
    return &n->h;
  }
  if (CG_RARE(cg__reserve() != 0)) {
    cg__map_unlock();
    cg__node_free(n);
    return NULL;
  }
  t = cg__table;
  /* The first tombstone or empty slot from the key's home: no empty slot lies between
   * them, so the key's chain stays whole. */
  i = cg__home(t, key);
  for (probes = 0; probes <= t->mask; probes++, i = (i + 1) & t->mask) {
    uintptr_t k = t->slots[i].key;
    if (k == CG_TOMB || k == 0) {
      free_at = i;
      break;
    }
  }
  /* cg__reserve left at least half the slots empty, so one was found; should it ever
   * not be, the handle runs without the guard rather than past the table. */
  if (CG_RARE(free_at == SIZE_MAX)) {
    cg__map_unlock();
    cg__node_free(n);
    return NULL;
  }
  if (t->slots[free_at].key == 0)
    cg__used++;
  cg__gen_bump();
  __atomic_store_n(&t->slots[free_at].node, n, __ATOMIC_RELEASE);
  __atomic_store_n(&t->slots[free_at].key, key, __ATOMIC_RELEASE);
  __atomic_fetch_add(&cg__count, 1, __ATOMIC_RELAXED);
  cg__map_unlock();
  return &n->h;
}

struct cg_handle *cg_handle_lookup(CURL *curl) {
  /* The generation before the table: a change made meanwhile voids this memo too. */
  uint64_t gen = __atomic_load_n(&cg_handle_gen, __ATOMIC_ACQUIRE);
  const struct cg__table *t = __atomic_load_n(&cg__table, __ATOMIC_ACQUIRE);
  struct cg_handle *h = NULL;
  long at;

  if (t && (uintptr_t) curl > CG_TOMB && (at = cg__find(t, (uintptr_t) curl)) >= 0)
    h = &__atomic_load_n(&t->slots[at].node, __ATOMIC_ACQUIRE)->h;
  cg_handle_memo.curl = curl;
  cg_handle_memo.h = h;
  cg_handle_memo.gen = gen;
  return h;
}

void cg_handle_remove(CURL *curl) {
  uintptr_t key = (uintptr_t) curl;
  struct cg__node *n = NULL;
  struct cg__table *t;
  long at;

  cg__map_lock();
  t = cg__table;
  if (t && key > CG_TOMB && (at = cg__find(t, key)) >= 0) {
    size_t i = (size_t) at;
    n = t->slots[i].node;
    cg__gen_bump();
    __atomic_store_n(&t->slots[i].key, CG_TOMB, __ATOMIC_RELEASE);
    __atomic_store_n(&t->slots[i].node, NULL, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&cg__count, 1, __ATOMIC_RELAXED);
    /* Followed by an empty slot, the tombstone ends no present key's chain: it becomes
     * empty, and so do the tombstones right before it (every chain through them ended
     * here too). */
    if (t->slots[(i + 1) & t->mask].key == 0) {
      size_t left = t->mask + 1;
      while (left-- > 0 && t->slots[i].key == CG_TOMB) {
        __atomic_store_n(&t->slots[i].key, 0, __ATOMIC_RELEASE);
        cg__used--;
        i = (i - 1) & t->mask;
      }
    }
  }
  cg__map_unlock();
  if (n)
    cg__node_free(n);
}

size_t cg_handle_count(void) {
  return __atomic_load_n(&cg__count, __ATOMIC_RELAXED);
}

size_t cg_handle_tables(void) {
  size_t n;
  cg__map_lock();
  n = cg__ntables;
  cg__map_unlock();
  return n;
}

void cg_handle_reset(struct cg_handle *h) {
  CURL *curl = h->curl;
  const struct cg_lib *lib = h->lib;
  uint64_t serial = h->serial; /* the same handle */
  int in_perform = h->in_perform;
  struct cg_attempt *thread_attempt = h->thread_attempt; /* reset from a callback */

  cg__free_owned_but_url(h); /* the URL buffer is kept for the next URL */
  cg__zero_but_url(h);
  h->curl = curl;
  h->lib = lib;
  h->serial = serial;
  h->in_perform = in_perform;
  h->set_in_perform = in_perform; /* libcurl's options are all its defaults now */
  h->thread_attempt = thread_attempt;
  cg__defaults(h);
}

/* h->url = a copy of `p` (NULL: none) in h->url_buf, grown when it is too small; NULL
 * when it cannot grow (as a failed strdup left it). */
static void cg__set_url(struct cg_handle *h, const char *p) {
  size_t n;
  if (!p) {
    h->url = NULL;
    return;
  }
  n = strlen(p);
  if (n >= h->url_cap) {
    size_t cap = n + 1 < 128 ? 128 : n + 1;
    char *b = malloc(cap);
    if (!b) {
      h->url = NULL;
      return;
    }
    free(h->url_buf);
    h->url_buf = b;
    h->url_cap = cap;
  }
  memcpy(h->url_buf, p, n + 1);
  h->url = h->url_buf;
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
    char *url_buf = h->url_buf; /* its own (a spare node's, or none) */
    size_t url_cap = h->url_cap;
    uint64_t serial = h->serial; /* its own */
    *h = *src;
    h->curl = curl;
    h->serial = serial;
    h->in_perform = 0;
    h->set_in_perform = 0;
    h->thread_attempt = NULL; /* the original's attempt, not the copy's */
    h->url_buf = url_buf;
    h->url_cap = url_cap;
  }
  cg__set_url(h, src->url);
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

/* The options whose argument is stored as it is, with their field (cg_handle_keep). */
#define CG__STORED(X)                                                                      \
  X(CURLOPT_HTTPHEADER, httpheader) X(CURLOPT_FOLLOWLOCATION, followlocation)              \
  X(CURLOPT_HTTPAUTH, httpauth) X(CURLOPT_PROXYAUTH, proxyauth)                            \
  X(CURLOPT_CURLU, curlu)                                                                  \
  X(CURLOPT_WRITEFUNCTION, write_fn) X(CURLOPT_WRITEDATA, write_data)                      \
  X(CURLOPT_HEADERFUNCTION, header_fn) X(CURLOPT_HEADERDATA, header_data)                  \
  X(CURLOPT_READFUNCTION, read_fn) X(CURLOPT_READDATA, read_data)                          \
  X(CURLOPT_SEEKFUNCTION, seek_fn) X(CURLOPT_SEEKDATA, seek_data)                          \
  X(CURLOPT_PREREQFUNCTION, prereq_fn) X(CURLOPT_PREREQDATA, prereq_data)                  \
  X(CURLOPT_RESOLVER_START_FUNCTION, resolver_start_fn)                                    \
  X(CURLOPT_RESOLVER_START_DATA, resolver_start_data)                                      \
  X(CURLOPT_OPENSOCKETFUNCTION, opensocket_fn) X(CURLOPT_OPENSOCKETDATA, opensocket_data)  \
  X(CURLOPT_HSTSREADFUNCTION, hstsread_fn)                                                 \
  X(CURLOPT_XFERINFODATA, progress_data) /* == CURLOPT_PROGRESSDATA */                     \
  X(CURLOPT_ERRORBUFFER, errorbuffer) X(CURLOPT_TIMEOUT_MS, timeout_ms)                    \
  X(CURLOPT_CONNECTTIMEOUT_MS, connecttimeout_ms) X(CURLOPT_VERBOSE, verbose)           \
  X(CURLOPT_HEADER, include_header) X(CURLOPT_ACCEPT_ENCODING, accept_encoding)            \
  X(CURLOPT_HTTP_CONTENT_DECODING, content_decoding)

/* The options cg_handle_record_switch has a case for, with the case's name (CG__K_...).
 * The cases host tools set on every transfer come first (curl's: NOPROGRESS, URL,
 * CUSTOMREQUEST, UPLOAD, POSTFIELDS, POSTFIELDSIZE_LARGE), so that their code sits
 * together. */
#define CG__SWITCHED(X)                                                                    \
  X(CURLOPT_NOPROGRESS, NOPROGRESS) X(CURLOPT_URL, URL)                                    \
  X(CURLOPT_CUSTOMREQUEST, CUSTOMREQUEST) X(CURLOPT_UPLOAD, UPLOAD) X(CURLOPT_PUT, PUT)    \
  X(CURLOPT_POSTFIELDS, POSTFIELDS) X(CURLOPT_POSTFIELDSIZE_LARGE, POSTFIELDSIZE_LARGE)    \
  X(CURLOPT_NOBODY, NOBODY) X(CURLOPT_POST, POST) X(CURLOPT_HTTPGET, HTTPGET)              \
  X(CURLOPT_POSTFIELDSIZE, POSTFIELDSIZE) X(CURLOPT_COPYPOSTFIELDS, COPYPOSTFIELDS)        \
  X(CURLOPT_MIMEPOST, MIMEPOST) X(CURLOPT_HTTPPOST, HTTPPOST)                              \
  X(CURLOPT_DEFAULT_PROTOCOL, DEFAULT_PROTOCOL) X(CURLOPT_XFERINFOFUNCTION, XFERINFOFUNCTION) \
  X(CURLOPT_PROGRESSFUNCTION, PROGRESSFUNCTION) X(CURLOPT_TIMEOUT, TIMEOUT)                \
  X(CURLOPT_CONNECTTIMEOUT, CONNECTTIMEOUT) X(CURLOPT_PROTOCOLS, PROTOCOLS)                \
  X(CG_OPT_PROTOCOLS_STR, PROTOCOLS_STR)

/* cg_handle_keep's bytes of the switched options: CG_KEEP_SWITCH and up, one each. */
#define CG__KCASE(o, name) CG__K_##name,
enum { CG__K_FIRST = CG_KEEP_SWITCH - 1, CG__SWITCHED(CG__KCASE) CG__K_END };
_Static_assert(CG__K_END - 1 <= 255, "a case within a byte");

/* Index of option `o` in cg_handle_keep (o / 10000 is its kind, optval.h). */
#define CG__KIDX(o) (((long) (o) / 10000) * CG_TRACK_SPAN + (long) (o) % 10000)
#define CG__KSLOT(f) (offsetof(struct cg_handle, f) / sizeof(void *))
#define CG__KSTORE(o, f) [CG__KIDX(o)] = CG__KSLOT(f),
#define CG__KSWITCH(o, name) [CG__KIDX(o)] = CG__K_##name,
/* Each option within the table; each stored field a pointer wide, aligned, and its slot
 * between 1 and CG_KEEP_SWITCH - 1.  (A second entry for one option does not compile:
 * -Woverride-init.) */
#define CG__KCHECK(o, a)                                                                   \
  _Static_assert((long) (o) % 10000 < CG_TRACK_SPAN && (long) (o) / 10000 < 5,             \
                 "CG_TRACK_SPAN");
#define CG__KCHECK_STORE(o, f)                                                             \
  CG__KCHECK(o, f)                                                                         \
  _Static_assert(sizeof(((struct cg_handle *) 0)->f) == sizeof(void *) &&                  \
                     offsetof(struct cg_handle, f) % sizeof(void *) == 0 &&                \
                     CG__KSLOT(f) >= 1 && CG__KSLOT(f) < CG_KEEP_SWITCH,                   \
                 "a stored field is a pointer wide");
/* cg_handle_keeps finds an option's kind as opt >> 13 (see there): kind k's first
 * CG_TRACK_SPAN numbers lie below (k + 1) * 8192 (k = 4 the tightest), and no number of a
 * kind past 4 is found (8192 <= 5 * 1808). */
_Static_assert(4 * 10000 + CG_TRACK_SPAN <= 5 * 8192 && 8192 <= 5 * 1808,
               "opt >> 13 is the kind");
CG__STORED(CG__KCHECK_STORE)
CG__SWITCHED(CG__KCHECK)

const uint8_t cg_handle_keep[5 * CG_TRACK_SPAN] = {CG__STORED(CG__KSTORE)
                                                       CG__SWITCHED(CG__KSWITCH)};

static void cg__set_str(char **slot, const void *p) {
  free(*slot);
  *slot = p ? strdup((const char *) p) : NULL;
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
  unsigned keep = cg_handle_keeps(opt);

  if (keep >= CG_KEEP_SWITCH)
    cg_handle_record_switch(h, keep, v->u);
  else if (keep)
    cg_handle_store(h, keep, &v->u); /* the union's members all start at its start */
}

void cg_handle_record_switch(struct cg_handle *h, unsigned keep, union cg_optarg u) {
  switch (keep) {
  case CG__K_NOPROGRESS:
    h->noprogress = u.l != 0;
    break;
  case CG__K_URL:
    cg__set_url(h, u.p);
    break;
  case CG__K_CUSTOMREQUEST:
    cg__set_str(&h->custom_request, u.p);
    break;
  /* The options that decide libcurl's data->set.method, mirroring lib/setopt.c. */
  case CG__K_UPLOAD:
  case CG__K_PUT:
    if (u.l) {
      h->method = CG_M_PUT;
      h->nobody = 0;
    } else {
      h->method = CG_M_GET;
    }
    h->upload = u.l != 0;
    break;
  case CG__K_NOBODY:
    h->nobody = u.l != 0;
    if (h->nobody)
      h->method = CG_M_HEAD;
    else if (h->method == CG_M_HEAD)
      h->method = CG_M_GET;
    break;
  case CG__K_POST:
    h->method = u.l ? CG_M_POST : CG_M_GET;
    if (u.l)
      h->nobody = 0;
    break;
  case CG__K_HTTPGET:
    if (u.l) {
      h->method = CG_M_GET;
      h->nobody = 0;
      h->upload = 0;
    }
    break;
  case CG__K_POSTFIELDS:
    h->postfields = u.p;
    free(h->copypostfields);
    h->copypostfields = NULL;
    h->method = CG_M_POST;
    break;
  case CG__K_POSTFIELDSIZE_LARGE:
    cg__record_postfieldsize(h, u.o);
    break;
  case CG__K_POSTFIELDSIZE:
    cg__record_postfieldsize(h, u.l);
    break;
  case CG__K_COPYPOSTFIELDS: {
    /* libcurl copies postfieldsize bytes, or strlen() when the size is unset. */
    const char *p = u.p;
    size_t n = !p ? 0 : h->postfieldsize >= 0 ? (size_t) h->postfieldsize : strlen(p);
    free(h->copypostfields);
    h->copypostfields = p ? cg__dup_mem(p, n) : NULL;
    h->copypostfields_len = h->copypostfields ? (curl_off_t) n : 0;
    h->postfields = NULL;
    h->method = CG_M_POST;
    break;
  }
  case CG__K_MIMEPOST:
    h->method = CG_M_POST_MIME;
    h->nobody = 0;
    break;
  case CG__K_HTTPPOST:
    h->method = CG_M_POST_FORM;
    h->nobody = 0;
    break;
  case CG__K_DEFAULT_PROTOCOL:
    cg__set_str(&h->default_protocol, u.p);
    break;
  case CG__K_XFERINFOFUNCTION:
    h->xferinfo_fn = (curl_xferinfo_callback) u.f;
    h->progress_callback_set = h->xferinfo_fn != NULL;
    break;
  case CG__K_PROGRESSFUNCTION:
    h->progress_fn = (curl_progress_callback) u.f;
    h->progress_callback_set = h->progress_fn != NULL;
    break;
  case CG__K_TIMEOUT:
    h->timeout_ms = u.l * 1000;
    break;
  case CG__K_CONNECTTIMEOUT:
    h->connecttimeout_ms = u.l * 1000;
    break;
  case CG__K_PROTOCOLS:
    h->protocols_kind = 1;
    h->protocols = u.l;
    break;
  case CG__K_PROTOCOLS_STR:
    /* Only a list libcurl accepted is recorded (a refused one: see
     * cg_handle_protocols_unknown). */
    cg__set_str(&h->protocols_str, u.p);
    h->protocols_kind = 2; /* a NULL copy (out of memory) means: cannot be put back */
    break;
  default:
    break;
  }
}

const char *cg_handle_body(const struct cg_handle *h, size_t *len) {
  if (h->method != CG_M_POST)
    return NULL;
  if (h->copypostfields) {
    /* What libcurl sends of its copy: POSTFIELDSIZE bytes when set (a size set after the
     * copy may be smaller; a larger one dropped it, cg__record_postfieldsize), else up to
     * its first NUL (lib/http.c: strlen of the post data). */
    size_t n = (size_t) h->copypostfields_len;
    *len = h->postfieldsize < 0           ? strnlen(h->copypostfields, n)
           : (size_t) h->postfieldsize < n ? (size_t) h->postfieldsize
                                           : n;
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

/* handle.h.  Each of the host's lines is compared with `name` a byte at a time, ASCII
 * case-insensitively as libcurl compares header names (ascii.h): most of them differ in
 * their first byte, and cost that one test, not a call of strncasecmp (issue 16: on every
 * request, "Idempotency-Key" against the host's Content-Type). */
int cg_handle_header_n(const struct cg_handle *h, const char *name, size_t n, char *val,
                       size_t vlen) {
  const struct curl_slist *l;

  for (l = h->httpheader; l; l = l->next) {
    const char *s = l->data;
    if (s && cg_ascii_case_eq(s, name, n) && s[n] == ':') {
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

/* handle.h.  Parameters as RFC 7235 section 2.1 auth-params (a token or a quoted string,
 * comma-separated); a quoted value's escapes are kept as they are. */
void cg_auth_identity(char *v) {
  static const struct {
    const char *scheme, *param;
  } signed_[] = {{"AWS4-", "Credential"}, {"Digest ", "username"}, {"Signature ", "keyId"}};
  size_t i, sl, pl;
  char *p, *name, *val, *end;

  for (i = 0; i < sizeof(signed_) / sizeof(signed_[0]); i++)
    if (strncasecmp(v, signed_[i].scheme, strlen(signed_[i].scheme)) == 0)
      break;
  if (i == sizeof(signed_) / sizeof(signed_[0]))
    return;
  sl = strlen(signed_[i].scheme);
  pl = strlen(signed_[i].param);
  p = v + sl;
  if (signed_[i].scheme[sl - 1] != ' ') /* "AWS4-HMAC-SHA256 ": the algorithm's name */
    p += strcspn(p, " ");
  for (;;) {
    p += strspn(p, " ,\t");
    if (!*p)
      break;
    name = p;
    p += strcspn(p, "=, \t");
    if (*p != '=')
      continue; /* a parameter without a value */
    val = ++p;
    if (*val == '"') {
      val++;
      end = strchr(val, '"');
      if (!end)
        end = val + strlen(val);
      p = *end ? end + 1 : end;
    } else {
      end = val + strcspn(val, ", \t");
      p = end;
    }
    if ((size_t) (val - name) >= pl + 1 && strncasecmp(name, signed_[i].param, pl) == 0 &&
        (name[pl] == '=')) {
      if (i == 0) { /* SigV4: the access key id, not the date, region and service */
        char *slash = memchr(val, '/', (size_t) (end - val));
        if (slash)
          end = slash;
      }
      memmove(v, val, (size_t) (end - val));
      v[end - val] = '\0';
      return;
    }
  }
  v[0] = '\0';
}
