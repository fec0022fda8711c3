/* lib.c - finding the real libcurl that a caller uses (see lib.h). */
#include "lib.h"

#include "config.h"
#include "hot.h"
#include "log.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define CG_MAX_LIBS 8

static pthread_mutex_t cg__lib_mutex = PTHREAD_MUTEX_INITIALIZER;

/* A forked child must not inherit cg__lib_mutex held by a thread it does not have: hold it
 * across fork() (pthread_atfork(3)). */
static void cg__fork_prepare(void) {
  pthread_mutex_lock(&cg__lib_mutex);
}
static void cg__fork_release(void) {
  pthread_mutex_unlock(&cg__lib_mutex);
}
__attribute__((constructor)) static void cg__fork_register(void) {
  pthread_atfork(cg__fork_prepare, cg__fork_release, cg__fork_release);
}
static struct cg_lib cg__libs[CG_MAX_LIBS];
static void *cg__lib_keys[CG_MAX_LIBS]; /* address of the real curl_easy_perform */
static int cg__nlibs;
struct cg_lib_site cg_lib_sites[CG_LIB_SITES]; /* the call-site cache (lib.h) */

/* An address inside this very library, to recognise our own symbols. */
static int cg__self_marker;

static int cg__is_self(const void *addr) {
  Dl_info a, b;
  if (!addr)
    return 0;
  if (!dladdr(addr, &a) || !dladdr(&cg__self_marker, &b))
    return 0;
  return a.dli_fbase == b.dli_fbase;
}

/* Look `name` up in `scope` (a dlopen handle or RTLD_NEXT); NULL if absent or ours. */
static void *cg__sym(void *scope, const char *name) {
  void *p = dlsym(scope, name);
  return cg__is_self(p) ? NULL : p;
}

/* Fill `out` from `scope`.  Returns 0 when every required symbol was found. */
static int cg__load(void *scope, struct cg_lib *out) {
  curl_version_info_data *(*version_info)(CURLversion);

  memset(out, 0, sizeof(*out));
#define CG_LOAD(field, name)                                                              \
  do {                                                                                    \
    *(void **) &out->field = cg__sym(scope, name);                                        \
    if (!out->field)                                                                      \
      return -1;                                                                          \
  } while (0)
  CG_LOAD(easy_init, "curl_easy_init");
  CG_LOAD(easy_setopt, "curl_easy_setopt");
  CG_LOAD(easy_perform, "curl_easy_perform");
  CG_LOAD(easy_cleanup, "curl_easy_cleanup");
  CG_LOAD(easy_reset, "curl_easy_reset");
  CG_LOAD(easy_duphandle, "curl_easy_duphandle");
  CG_LOAD(easy_getinfo, "curl_easy_getinfo");
  CG_LOAD(easy_pause, "curl_easy_pause");
  CG_LOAD(easy_strerror, "curl_easy_strerror");
  CG_LOAD(slist_append, "curl_slist_append");
  CG_LOAD(slist_free_all, "curl_slist_free_all");
  CG_LOAD(getdate, "curl_getdate");
#undef CG_LOAD
#define CG_OPT(field, name) (*(void **) &out->field = cg__sym(scope, name))
  CG_OPT(multi_init, "curl_multi_init");
  CG_OPT(multi_add_handle, "curl_multi_add_handle");
  CG_OPT(multi_remove_handle, "curl_multi_remove_handle");
  CG_OPT(multi_perform, "curl_multi_perform");
  CG_OPT(multi_info_read, "curl_multi_info_read");
  CG_OPT(multi_timeout, "curl_multi_timeout");
  CG_OPT(multi_wait, "curl_multi_wait");
  CG_OPT(multi_poll, "curl_multi_poll");
  CG_OPT(multi_wakeup, "curl_multi_wakeup");
  CG_OPT(multi_fdset, "curl_multi_fdset");
  CG_OPT(multi_cleanup, "curl_multi_cleanup");
  CG_OPT(multi_socket_action, "curl_multi_socket_action");
  CG_OPT(multi_socket_all, "curl_multi_socket_all");
  CG_OPT(multi_setopt, "curl_multi_setopt");
  CG_OPT(multi_assign, "curl_multi_assign");
  CG_OPT(url_get, "curl_url_get");
  CG_OPT(free, "curl_free");
#undef CG_OPT
  out->has_multi = out->multi_init && out->multi_add_handle && out->multi_remove_handle &&
                   out->multi_perform && out->multi_info_read && out->multi_timeout &&
                   out->multi_wait && out->multi_fdset && out->multi_cleanup &&
                   out->multi_socket_action && out->multi_socket_all && out->multi_setopt &&
                   out->multi_assign;
  *(void **) &version_info = cg__sym(scope, "curl_version_info");
  if (version_info) {
    curl_version_info_data *vi = version_info(CURLVERSION_NOW);
    if (vi)
      out->version_num = vi->version_num;
  }
  {
    Dl_info info;
    int found = dladdr((void *) out->easy_perform, &info) != 0;
    out->path = found && info.dli_fname ? info.dli_fname : "libcurl";
    out->base = found ? info.dli_fbase : NULL;
  }
  return 0;
}

/* -1 until cg__duplicate_init ran (under pthread_once), then 0 or 1: every libcurl call
 * of a guarded process asks, so the answer is one acquire load once known. */
static int cg__duplicate = -1;
static pthread_once_t cg__duplicate_once = PTHREAD_ONCE_INIT;

const char *cg_lib_soname(const struct link_map *lm) {
  const ElfW(Dyn) *d;
  const char *strtab = NULL;
  ElfW(Xword) off = (ElfW(Xword)) -1;

  if (!lm || !lm->l_ld)
    return NULL;
  for (d = lm->l_ld; d->d_tag != DT_NULL; d++) {
    if (d->d_tag == DT_STRTAB)
      strtab = (const char *) d->d_un.d_ptr;
    else if (d->d_tag == DT_SONAME)
      off = d->d_un.d_val;
  }
  return strtab && off != (ElfW(Xword)) -1 ? strtab + off : NULL;
}

/* Another copy of the guard comes first when the first curl_easy_perform in the global
 * scope is not ours and its object is a curlguard: by its SONAME (kept by a copy under any
 * file name: a copy named cgcopy.so was guarding every call a second time) or its file
 * name. */
static int cg__duplicate_find(void) {
  void *first = dlsym(RTLD_DEFAULT, "curl_easy_perform");
  struct link_map *lm = NULL;
  Dl_info info;
  const char *base, *soname;

  if (!first || cg__is_self(first) || !dladdr1(first, &info, (void **) &lm, RTLD_DL_LINKMAP))
    return 0;
  soname = cg_lib_soname(lm);
  if (soname && strcmp(soname, "libcurlguard.so") == 0)
    return 1;
  if (!info.dli_fname)
    return 0;
  base = strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  return strncmp(base, "libcurlguard", 12) == 0;
}

static void cg__duplicate_init(void) {
  __atomic_store_n(&cg__duplicate, cg__duplicate_find(), __ATOMIC_RELEASE);
}

int cg_lib_is_duplicate(void) {
  int v = __atomic_load_n(&cg__duplicate, __ATOMIC_ACQUIRE);
  if (v >= 0)
    return v;
  pthread_once(&cg__duplicate_once, cg__duplicate_init);
  return __atomic_load_n(&cg__duplicate, __ATOMIC_ACQUIRE);
}

/* Whether `caller` lies in the object loaded at `base` (a libcurl). */
static int cg__inside(const void *caller, const void *base) {
  Dl_info info;
  return caller && base && dladdr(caller, &info) && info.dli_fbase == base;
}

/* Resolve the libcurl for `caller`; called with cg__lib_mutex held. */
static const struct cg_lib *cg__resolve_locked(const void *caller) {
  struct cg_lib tmp;
  struct link_map *lm = NULL;
  Dl_info info;
  void *scope = RTLD_NEXT;
  void *handle = NULL;
  int i;

  /* A duplicate copy only forwards: the first copy calls it through RTLD_NEXT, and a
   * look into the first copy's scope would find the first copy again. */
  if (!cg_lib_is_duplicate() && caller &&
      dladdr1(caller, &info, (void **) &lm, RTLD_DL_LINKMAP) && lm &&
      lm->l_name && lm->l_name[0] != '\0' && !cg__is_self(caller)) {
    /* A shared object: search its own dependency scope first. */
    handle = dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD);
    if (handle)
      scope = handle;
  }
  if (cg__load(scope, &tmp) != 0) {
    if (scope == RTLD_NEXT || cg__load(RTLD_NEXT, &tmp) != 0) {
      if (handle)
        dlclose(handle);
      return NULL;
    }
  }
  /* The handle stays open on purpose: it pins that libcurl for as long as we may
   * call into it. */
  for (i = 0; i < cg__nlibs; i++)
    if (cg__lib_keys[i] == (void *) tmp.easy_perform)
      return &cg__libs[i];
  if (cg__nlibs == CG_MAX_LIBS)
    return NULL;
  cg__libs[cg__nlibs] = tmp;
  cg__lib_keys[cg__nlibs] = (void *) tmp.easy_perform;
  return &cg__libs[cg__nlibs++];
}

/* The call-site cache's entry of `key`, or NULL when it has none yet.  Lock-free. */
static inline const struct cg_lib_site *cg__site_find(uintptr_t key) {
  size_t i, probe;

  for (probe = 0, i = cg_lib_site_slot(key); probe < 16;
       probe++, i = (i + 1) & (CG_LIB_SITES - 1)) {
    uintptr_t k = __atomic_load_n(&cg_lib_sites[i].key, __ATOMIC_ACQUIRE);
    if (k == key)
      return &cg_lib_sites[i];
    if (k == 0)
      break;
  }
  return NULL;
}

/* cg_lib_for_caller_ex past the call-site cache (once per call site): resolve the libcurl
 * of `caller`, tell whether `caller` lies inside it, and cache both.  Not inlined, and
 * cold: the callers' common path is the cache's answer alone. */
static __attribute__((noinline, cold)) const struct cg_lib *
cg__lib_resolve(const void *caller, int *internal) {
  uintptr_t key = cg_lib_site_key(caller);
  const struct cg_lib *lib;
  size_t i, probe;
  int inside = 0;

  if (internal)
    *internal = 0;
  pthread_mutex_lock(&cg__lib_mutex);
  lib = cg__resolve_locked(caller);
  if (lib) {
    inside = cg__inside(caller, lib->base);
    if (internal)
      *internal = inside;
    for (probe = 0, i = cg_lib_site_slot(key); probe < 16;
         probe++, i = (i + 1) & (CG_LIB_SITES - 1)) {
      uintptr_t k = __atomic_load_n(&cg_lib_sites[i].key, __ATOMIC_RELAXED);
      if (k == key)
        break;
      if (k == 0) {
        cg_lib_sites[i].lib = lib;
        cg_lib_sites[i].internal = inside;
        __atomic_store_n(&cg_lib_sites[i].key, key, __ATOMIC_RELEASE);
        break;
      }
    }
  }
  pthread_mutex_unlock(&cg__lib_mutex);
  if (!lib)
    cg_warn_once("no-libcurl", "no usable libcurl found for this call; failing it");
  return lib;
}

const struct cg_lib *cg_lib_for_caller_ex_rest(const void *caller, int *internal) {
  const struct cg_lib_site *s = cg__site_find(cg_lib_site_key(caller));

  if (CG_RARE(!s))
    return cg__lib_resolve(caller, internal);
  if (internal)
    *internal = s->internal;
  return s->lib;
}

/* cg_lib_guarding's answer: -1 until cg_lib_active_first ran, then 0 or 1 for the life
 * of the process. */
int cg_lib_active = -1;

int cg_lib_active_first(void) {
  int v = cg_config_enabled() && !cg_lib_is_duplicate();
  /* Threads racing on the first call store the same value: both parts are fixed once
   * known. */
  __atomic_store_n(&cg_lib_active, v, __ATOMIC_RELEASE);
  return v;
}
