/* lib.h - finding the real libcurl that a caller uses.
 *
 * The interposer never links libcurl.  Each call is served by the libcurl that the
 * calling object itself would have bound to:
 *   - the object containing the caller's address is found with dladdr1();
 *   - if it is a shared object other than the main program, its own dependency
 *     scope is searched (dlopen(path, RTLD_NOLOAD) + dlsym on that handle), which
 *     finds a libcurl loaded with RTLD_LOCAL (pycurl and most language bindings);
 *   - otherwise (main program, or nothing found) dlsym(RTLD_NEXT, ...).
 * The answer is cached per call site.  A process may hold both flavours
 * (libcurl.so.4 and libcurl-gnutls.so.4); each gets its own struct cg_lib.
 */
#ifndef CG_LIB_H
#define CG_LIB_H

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The real functions of one loaded libcurl.  Every pointer the guard needs is
 * non-NULL in a struct returned by cg_lib_for_caller(); optional ones say so. */
struct cg_lib {
  const char *path; /* file name of the libcurl object, for messages */
  const void *base; /* its load address (dladdr dli_fbase): tells libcurl's own calls */
  CURL *(*easy_init)(void);
  CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
  CURLcode (*easy_perform)(CURL *);
  void (*easy_cleanup)(CURL *);
  void (*easy_reset)(CURL *);
  CURL *(*easy_duphandle)(CURL *);
  CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
  CURLcode (*easy_pause)(CURL *, int);
  const char *(*easy_strerror)(CURLcode);
  struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
  void (*slist_free_all)(struct curl_slist *);
  time_t (*getdate)(const char *, const time_t *);
  /* The multi API (multi.c).  Looked up with the rest but not required: a libcurl
   * without one of them (curl_multi_poll: 7.66, curl_multi_wakeup: 7.68) leaves it NULL,
   * and a multi handle of that libcurl passes through unguarded. */
  CURLM *(*multi_init)(void);
  CURLMcode (*multi_add_handle)(CURLM *, CURL *);
  CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
  CURLMcode (*multi_perform)(CURLM *, int *);
  CURLMsg *(*multi_info_read)(CURLM *, int *);
  CURLMcode (*multi_timeout)(CURLM *, long *);
  CURLMcode (*multi_wait)(CURLM *, struct curl_waitfd *, unsigned int, int, int *);
  CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd *, unsigned int, int, int *);
  CURLMcode (*multi_wakeup)(CURLM *);
  CURLMcode (*multi_fdset)(CURLM *, fd_set *, fd_set *, fd_set *, int *);
  CURLMcode (*multi_cleanup)(CURLM *);
  CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
  CURLMcode (*multi_socket_all)(CURLM *, int *);
  CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
  CURLMcode (*multi_assign)(CURLM *, curl_socket_t, void *);
  /* The URL API (7.62): the URL of a handle set with CURLOPT_CURLU.  Optional (NULL:
   * such a handle runs without the guard). */
  CURLUcode (*url_get)(CURLU *, CURLUPart, char **, unsigned int);
  void (*free)(void *);
  /* 1 when every multi function the driver needs was found (poll and wakeup apart). */
  int has_multi;
  /* libcurl version as 0xXXYYZZ (curl_version_info()->version_num). */
  unsigned int version_num;
};

/* The DT_SONAME of the loaded object `lm` (dlinfo RTLD_DI_LINKMAP, dladdr1), or NULL
 * when it has none (glibc relocates the d_ptr entries of l_ld: <link.h>). */
struct link_map;
const char *cg_lib_soname(const struct link_map *lm);

/* 1 when another copy of libcurlguard.so was loaded before this one (two copies in
 * LD_PRELOAD, e.g. an installed one and `build/curlguard run`).  This copy then passes
 * every call straight on to the next object, so calls are guarded once, by the first. */
int cg_lib_is_duplicate(void);

/* The call-site cache of cg_lib_for_caller(_ex): open addressing on the return address,
 * keys published with release stores after the value, read with acquire loads; inserts
 * happen under lib.c's mutex.  Defined in lib.c. */
#define CG_LIB_SITES 1024 /* power of two */
struct cg_lib_site {
  uintptr_t key; /* cg_lib_site_key(caller); 0: empty */
  const struct cg_lib *lib;
  int internal; /* the call site lies inside `lib` itself */
};
extern struct cg_lib_site cg_lib_sites[CG_LIB_SITES] __attribute__((visibility("hidden")));

/* The call-site cache's key of `caller` (0 is the empty slot's). */
static inline uintptr_t cg_lib_site_key(const void *caller) {
  return caller ? (uintptr_t) caller : 1;
}

/* The first slot of `key`'s probe chain in cg_lib_sites. */
static inline size_t cg_lib_site_slot(uintptr_t key) {
  uint64_t h = (uint64_t) key * 0x9E3779B97F4A7C15ull;
  return (size_t) (h >> 54) & (CG_LIB_SITES - 1);
}

/* The libcurl that serves `caller`, as cg_lib_for_caller (below), and in `*internal` (when
 * not NULL) 1 when `caller` lies inside that libcurl itself: libcurl calls its own
 * exported API through the PLT (7.88's Curl_conncache_init makes the connection cache's
 * closure handle with curl_easy_init() and frees it with Curl_close, never
 * curl_easy_cleanup), so such a call is libcurl's business, not the host's.  Cached per
 * call site, and inline (curl_easy_init asks twice a request under curl's tool). */
const struct cg_lib *cg_lib_for_caller_ex_rest(const void *caller, int *internal);
static inline const struct cg_lib *cg_lib_for_caller_ex(const void *caller, int *internal) {
  uintptr_t key = cg_lib_site_key(caller);
  const struct cg_lib_site *s = &cg_lib_sites[cg_lib_site_slot(key)];

  if (__builtin_expect(__atomic_load_n(&s->key, __ATOMIC_ACQUIRE) == key, 1)) {
    if (internal)
      *internal = s->internal;
    return s->lib;
  }
  return cg_lib_for_caller_ex_rest(caller, internal);
}

/* The libcurl that code at address `caller` (a return address) binds to, or NULL
 * when no complete libcurl can be found (then a "curlguard:" line was printed once).
 * Thread-safe; the result lives as long as the process.  Inline: libcurl's own calls of
 * the multi API go through the shim several times a request, and a call site's answer
 * is most often in the first slot of its chain, so the common path is one compare. */
static inline const struct cg_lib *cg_lib_for_caller(const void *caller) {
  return cg_lib_for_caller_ex(caller, NULL);
}

/* Guarding is on (CURLGUARD: cg_config_enabled) and this is the first copy of the
 * library in the process (cg_lib_is_duplicate): both are fixed once known, so after the
 * first call the answer is one load (every call of the host into the shims asks). */
extern int cg_lib_active __attribute__((visibility("hidden")));
/* cg_lib_guarding's first call: finds the answer and keeps it. */
__attribute__((cold)) int cg_lib_active_first(void);
static inline int cg_lib_guarding(void) {
  int v = __atomic_load_n(&cg_lib_active, __ATOMIC_ACQUIRE);
  if (__builtin_expect(v > 0, 1))
    return 1;
  return v == 0 ? 0 : cg_lib_active_first();
}

#endif
