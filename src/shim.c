/* shim.c - the interposed libcurl symbols, and nothing else.
 *
 * curl_easy_pause is interposed only so that a host pausing while the guard replays a
 * held response gets the answer libcurl would give for a running transfer.
 *
 * These are the only symbols libcurlguard.so exports (everything else is built with
 * -fvisibility=hidden).  Each entry point stays thin: find the real function (lib.h),
 * keep the option shadow (handle.h), hand guarded performs to guard.c.
 *
 * With CURLGUARD unset or off, every call goes straight to the real libcurl: no
 * shadow, no file, no callback replaced.  With it on, a handle's shadow is kept from
 * curl_easy_init / curl_easy_duphandle to curl_easy_cleanup; handles libcurl makes for
 * itself through its own exported curl_easy_init (lib.h, cg_lib_for_caller_ex) get none.
 */
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#include "attempt.h"
#include "config.h"
#include "guard.h"
#include "handle.h"
#include "lib.h"
#include "log.h"
#include "multi.h"
#include "optval.h"

#include <stdarg.h>

/* curl/typecheck-gcc.h may define these as macros; we define the functions. */
#undef curl_easy_setopt
#undef curl_easy_getinfo

#define CG_EXPORT __attribute__((visibility("default")))
#define CG_CALLER() __builtin_extract_return_addr(__builtin_return_address(0))

/* Nesting depth of guarded performs in this thread: a perform started from inside a
 * host callback of a guarded perform passes straight through. */
static __thread int cg__depth;

/* Guarding is on, and this is the first copy of the library in the process. */
static int cg__enabled(void) {
  return cg_config_enabled() && !cg_lib_is_duplicate();
}

/* The libcurl that serves `curl`: its creator's if the guard knows the handle, else
 * the one the caller binds to. */
static const struct cg_lib *cg__lib(CURL *curl, struct cg_handle **hp, const void *caller) {
  struct cg_handle *h = NULL;

  if (curl && cg__enabled())
    h = cg_handle_get(curl);
  if (hp)
    *hp = h;
  return h ? h->lib : cg_lib_for_caller(caller);
}

CG_EXPORT CURL *curl_easy_init(void) {
  int internal;
  const struct cg_lib *lib = cg_lib_for_caller_ex(CG_CALLER(), &internal);
  CURL *curl;

  if (!lib)
    return NULL; /* as libcurl does when it cannot make a handle */
  curl = lib->easy_init();
  /* libcurl's own handles (the connection cache's closure handle, made through the PLT
   * and freed with Curl_close, which the guard never sees) get no shadow: it would
   * outlive them, one per performing handle (issue 11 item 8). */
  if (curl && !internal && cg__enabled() && !cg_handle_add(curl, lib))
    cg_warn_once("shadow-oom", "out of memory: a handle runs without the guard");
  return curl;
}

CG_EXPORT CURLcode curl_easy_setopt(CURL *curl, CURLoption option, ...) {
  struct cg_handle *h;
  const struct cg_lib *lib;
  struct cg_optval v;
  va_list ap;
  CURLcode rc;

  va_start(ap, option);
  cg_optval_read((long) option, &ap, &v);
  va_end(ap);
  if (__builtin_expect(!cg_config_enabled(), 0)) {
    /* Off: the caller's libcurl, nothing kept (the host's most frequent call). */
    lib = cg_lib_for_caller(CG_CALLER());
    return lib ? cg_optval_forward(lib->easy_setopt, curl, (long) option, &v)
               : CURLE_FAILED_INIT;
  }
  lib = cg__lib(curl, &h, CG_CALLER());
  if (!lib)
    return CURLE_FAILED_INIT;
  if (h && cg_handle_overridden(h, (long) option)) {
    /* Set from a host callback while an attempt runs: the attempt has the option
     * pointed at the guard; it takes the host's new value from the shadow and puts
     * it in place when the attempt ends. */
    cg_handle_record(h, (long) option, &v);
    h->set_in_perform = 1;
    return CURLE_OK;
  }
  rc = cg_optval_forward(lib->easy_setopt, curl, (long) option, &v);
  if (h && rc == CURLE_OK)
    cg_handle_record(h, (long) option, &v);
  else if (h && (option == CURLOPT_PROTOCOLS || (long) option == CG_OPT_PROTOCOLS_STR))
    cg_handle_protocols_unknown(h); /* refused, yet libcurl may have kept part of it */
  return rc;
}

CG_EXPORT CURLcode curl_easy_perform(CURL *curl) {
  struct cg_handle *h;
  const struct cg_lib *lib = cg__lib(curl, &h, CG_CALLER());
  CURLcode rc;

  if (!lib)
    return CURLE_FAILED_INIT;
  if (!h || h->in_perform || cg__depth > 0)
    return lib->easy_perform(curl);
  cg__depth++;
  rc = cg_guard_perform(h);
  cg__depth--;
  return rc;
}

CG_EXPORT void curl_easy_cleanup(CURL *curl) {
  struct cg_handle *h;
  const struct cg_lib *lib = cg__lib(curl, &h, CG_CALLER());

  if (h) {
    cg_multi_forget_easy(curl); /* a call of the multi driver still on it ends first */
    cg_handle_remove(curl);
  }
  if (lib)
    lib->easy_cleanup(curl);
}

CG_EXPORT void curl_easy_reset(CURL *curl) {
  struct cg_handle *h;
  const struct cg_lib *lib = cg__lib(curl, &h, CG_CALLER());

  if (!lib)
    return;
  lib->easy_reset(curl);
  if (h)
    cg_handle_reset(h);
}

CG_EXPORT CURL *curl_easy_duphandle(CURL *curl) {
  struct cg_handle *h;
  const struct cg_lib *lib = cg__lib(curl, &h, CG_CALLER());
  int internal = 0;
  CURL *dup;

  if (!lib)
    return NULL;
  dup = lib->easy_duphandle(curl);
  /* libcurl duplicates handles for itself too (7.88 lib/http2.c, a server push: freed
   * with Curl_close when the push is refused): no shadow for those.  A copy of a handle
   * the guard does not know stays unknown: without its options the guard could not stand
   * in for its callbacks. */
  if (dup && h)
    cg_lib_for_caller_ex(CG_CALLER(), &internal);
  if (dup && h && !internal && !cg_handle_dup(h, dup))
    cg_warn_once("shadow-oom", "out of memory: a handle runs without the guard");
  if (dup && h && h->in_perform) {
    /* Copied from inside a host callback: libcurl copied the attempt's callbacks and
     * pointers (gone once the attempt ends); the copy gets the host's. */
    cg_attempt_put_back(h, dup);
    if (h->url)
      lib->easy_setopt(dup, CURLOPT_URL, h->url); /* not a fallback's */
  }
  return dup;
}

CG_EXPORT CURLcode curl_easy_pause(CURL *curl, int bitmask) {
  struct cg_handle *h;
  const struct cg_lib *lib = cg__lib(curl, &h, CG_CALLER());

  if (!lib)
    return CURLE_FAILED_INIT;
  /* The guard is handing a held response to the host after the transfer ended: the
   * pause is the guard's to lift, and the transfer the host paused is, to the host,
   * still running.  The guard offers the bytes again right away. */
  if (h && h->replaying)
    return CURLE_OK;
  return lib->easy_pause(curl, bitmask);
}
