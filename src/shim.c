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
#include "tls.h"

#include <stdarg.h>

/* curl/typecheck-gcc.h may define these as macros; we define the functions. */
#undef curl_easy_setopt
#undef curl_easy_getinfo

#define CG_EXPORT __attribute__((visibility("default")))
#define CG_CALLER() __builtin_extract_return_addr(__builtin_return_address(0))

/* Nesting depth of guarded performs in this thread: a perform started from inside a
 * host callback of a guarded perform passes straight through. */
static CG_TLS int cg__depth;

/* cg__enabled's answer: -1 until the first call, then 0 or 1 for the life of the
 * process (both of its parts are fixed once known).  Threads racing on the first call
 * store the same value. */
static int cg__active = -1;

static __attribute__((noinline)) int cg__enabled_first(void) {
  int v = cg_config_enabled() && !cg_lib_is_duplicate();
  __atomic_store_n(&cg__active, v, __ATOMIC_RELEASE);
  return v;
}

/* Guarding is on, and this is the first copy of the library in the process.  One load
 * after the first call (every setopt of the host asks). */
static inline int cg__enabled(void) {
  int v = __atomic_load_n(&cg__active, __ATOMIC_ACQUIRE);
  if (__builtin_expect(v > 0, 1))
    return 1;
  return v == 0 ? 0 : cg__enabled_first();
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

/* The rest of curl_easy_setopt, inlined once per argument kind: `kind` (v->kind) is
 * then a constant, and the forwards and cg_handle_tracks fold to it. */
static inline __attribute__((always_inline)) CURLcode
cg__setopt(CURL *curl, long opt, const struct cg_optval *v, enum cg_optkind kind) {
  struct cg_optval fwd = {kind, v->u}; /* never escapes: its kind stays a constant */
  struct cg_handle *h;
  CURLcode rc;

  if (__builtin_expect(!cg__enabled() || !(h = cg_handle_get(curl)), 0)) {
    /* Off, a duplicate copy, or a handle the guard does not know (NULL among them): the
     * caller's libcurl (curl_easy_setopt's caller: this is inlined), nothing kept. */
    const struct cg_lib *lib = cg_lib_for_caller(CG_CALLER());
    return lib ? cg_optval_forward(lib->easy_setopt, curl, opt, &fwd) : CURLE_FAILED_INIT;
  }
  if (__builtin_expect(h->in_perform, 0) && cg_handle_overridden(h, opt)) {
    /* Set from a host callback while an attempt runs: the attempt has the option
     * pointed at the guard; it takes the host's new value from the shadow and puts
     * it in place when the attempt ends. */
    cg_handle_record(h, opt, v);
    h->set_in_perform = 1;
    return CURLE_OK;
  }
  /* h->lib: the creator's libcurl, never NULL (cg_handle_add's callers check it). */
  rc = cg_optval_forward(h->lib->easy_setopt, curl, opt, &fwd);
  if (__builtin_expect(rc == CURLE_OK, 1)) {
    if (cg_handle_tracks(opt, kind))
      cg_handle_record(h, opt, v);
  } else if (opt == CURLOPT_PROTOCOLS || opt == CG_OPT_PROTOCOLS_STR) {
    cg_handle_protocols_unknown(h); /* refused, yet libcurl may have kept part of it */
  }
  return rc;
}

/* The host's most frequent call: with the guard off, straight to the caller's libcurl;
 * on, a known handle's shadow is found through this thread's memo (handle.h) and only
 * the options it keeps are recorded.
 *
 * On x86-64 (System V ABI, section 3.5.7) and on Linux AArch64 (AAPCS64, section 6.4.2
 * and its variadic rules as Linux follows them) a variadic argument of integer or
 * pointer class travels in the same register as a fixed one in its place: the third
 * general-purpose argument register (rdx, x2), whatever its C type (long, a pointer, a
 * function pointer, curl_off_t, a struct curl_blob pointer: every curl_easy_setopt
 * argument is 64 bits wide there).  So the entry point reads it as a fixed uintptr_t,
 * without the variadic prologue that saves every argument register and the va_list
 * walk (issue 16: ~25 instructions of the ~70 the shim adds to each setopt; curl's tool
 * sets ~86 options a transfer).  libcurl reads the value it is given with va_arg from the
 * same register, so what it gets is bit for bit what the host passed.  Elsewhere the
 * portable variadic form reads it (optval.h). */
#if defined(__x86_64__) || (defined(__aarch64__) && defined(__linux__))
CG_EXPORT CURLcode cg__easy_setopt_reg(CURL *curl, CURLoption opt, uintptr_t arg)
    __asm__("curl_easy_setopt");
CURLcode cg__easy_setopt_reg(CURL *curl, CURLoption opt, uintptr_t arg) {
  /* CURLoption, not long: the caller passes an int, and only the register's low 32 bits
   * are defined (System V ABI 3.2.3) */
  long option = (long) opt;
  struct cg_optval v;

  if (option < CURLOPTTYPE_OBJECTPOINT) {
    v.kind = CG_OPT_LONG, v.u.l = (long) arg;
    return cg__setopt(curl, option, &v, CG_OPT_LONG);
  }
  if (option < CURLOPTTYPE_FUNCTIONPOINT) {
    v.kind = CG_OPT_PTR, v.u.p = (void *) arg;
    return cg__setopt(curl, option, &v, CG_OPT_PTR);
  }
  if (option < CURLOPTTYPE_OFF_T) {
    v.kind = CG_OPT_FUNC, v.u.f = (void (*)(void)) arg;
    return cg__setopt(curl, option, &v, CG_OPT_FUNC);
  }
  if (option < CURLOPTTYPE_BLOB) {
    v.kind = CG_OPT_OFFT, v.u.o = (curl_off_t) arg;
    return cg__setopt(curl, option, &v, CG_OPT_OFFT);
  }
  v.kind = CG_OPT_BLOB, v.u.p = (void *) arg;
  return cg__setopt(curl, option, &v, CG_OPT_BLOB);
}
#else
CG_EXPORT CURLcode curl_easy_setopt(CURL *curl, CURLoption option, ...) {
  struct cg_optval v;
  va_list ap;

  va_start(ap, option);
  cg_optval_read((long) option, &ap, &v);
  va_end(ap);
  switch (v.kind) {
  case CG_OPT_LONG:
    return cg__setopt(curl, (long) option, &v, CG_OPT_LONG);
  case CG_OPT_PTR:
    return cg__setopt(curl, (long) option, &v, CG_OPT_PTR);
  case CG_OPT_FUNC:
    return cg__setopt(curl, (long) option, &v, CG_OPT_FUNC);
  case CG_OPT_OFFT:
    return cg__setopt(curl, (long) option, &v, CG_OPT_OFFT);
  case CG_OPT_BLOB:
    return cg__setopt(curl, (long) option, &v, CG_OPT_BLOB);
  }
  return CURLE_BAD_FUNCTION_ARGUMENT; /* not reached: cg_optval_read sets a kind */
}
#endif

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
