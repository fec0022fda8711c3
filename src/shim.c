/* shim.c - the interposed libcurl symbols, and nothing else.
 *
 * curl_easy_pause is interposed so that a host pausing while the guard replays a held
 * response gets the answer libcurl would give for a running transfer, and so that one
 * unpausing from another thread than the perform's finds the attempt's callbacks working
 * (cg_attempt_lend).
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
#include "guard.h"
#include "handle.h"
#include "hot.h"
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

/* The libcurl that serves `curl`: its creator's if the guard knows the handle, else
 * the one the caller binds to. */
static const struct cg_lib *cg__lib(CURL *curl, struct cg_handle **hp, const void *caller) {
  struct cg_handle *h = NULL;

  if (curl && cg_lib_guarding())
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
  if (curl && !internal && cg_lib_guarding() && !cg_handle_add(curl, lib))
    cg_warn_once("shadow-oom", "out of memory: a handle runs without the guard");
  return curl;
}

/* libcurl refused option `opt` of `h` with `rc`: nothing is recorded, but a refused
 * protocol list leaves the handle's unknown.  Returns `rc`. */
static __attribute__((cold, noinline)) CURLcode cg__setopt_refused(struct cg_handle *h,
                                                                   long opt, CURLcode rc) {
  if (opt == CURLOPT_PROTOCOLS || opt == CG_OPT_PROTOCOLS_STR)
    cg_handle_protocols_unknown(h); /* refused, yet libcurl may have kept part of it */
  return rc;
}

/* curl_easy_setopt for an argument of any kind, read as `v`: the portable entry point's
 * whole work, and the register entry point's for its rare cases.  `caller` is the
 * return address of curl_easy_setopt.  Not inlined: the register entry point then calls
 * it from its rare path alone, and its own code stays apart from the common one. */
static __attribute__((noinline)) CURLcode cg__setopt(CURL *curl, long opt,
                                                      const struct cg_optval *v,
                                                      const void *caller) {
  struct cg_handle *h;
  CURLcode rc;

  if (!cg_lib_guarding() || !(h = cg_handle_get(curl))) {
    /* Off, a duplicate copy, or a handle the guard does not know (NULL among them): the
     * caller's libcurl, nothing kept. */
    const struct cg_lib *lib = cg_lib_for_caller(caller);
    return lib ? cg_optval_forward(lib->easy_setopt, curl, opt, v) : CURLE_FAILED_INIT;
  }
  if (h->in_perform && cg_handle_overridden(h, opt)) {
    /* Set from a host callback while an attempt runs: the attempt has the option
     * pointed at the guard; it takes the host's new value from the shadow and puts
     * it in place when the attempt ends. */
    cg_handle_record(h, opt, v);
    h->set_in_perform = 1;
    return CURLE_OK;
  }
  /* h->lib: the creator's libcurl, never NULL (cg_handle_add's callers check it). */
  rc = cg_optval_forward(h->lib->easy_setopt, curl, opt, v);
  if (rc != CURLE_OK)
    return cg__setopt_refused(h, opt, rc);
  cg_handle_record(h, opt, v);
  return CURLE_OK;
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
 * same register, so what it gets is bit for bit what the host passed, whatever the
 * option's kind: the common path passes it on, and stores it in the shadow, without
 * asking the kind (one path for every option instead of one per kind: issue 16, the
 * lines of code a request runs).  Elsewhere the portable variadic form reads it
 * (optval.h). */
#if CG_SETOPT_ARG_IN_REG
/* The guard is off, or does not know the handle (NULL among them): the caller's libcurl
 * gets the argument as it came, and nothing is kept (what a forwarding interposer does:
 * with CURLGUARD unset this runs for every setopt of the host). */
static __attribute__((noinline)) CURLcode cg__setopt_pass(CURL *curl, CURLoption opt,
                                                          uintptr_t arg, const void *caller) {
  const struct cg_lib *lib = cg_lib_for_caller(caller);
  return lib ? lib->easy_setopt(curl, opt, arg) : CURLE_FAILED_INIT;
}

/* The host sets an option from one of its callbacks while an attempt runs. */
static __attribute__((noinline)) CURLcode cg__setopt_during(CURL *curl, long option,
                                                            uintptr_t arg,
                                                            const void *caller) {
  struct cg_optval v;

  cg_optval_of_reg(option, arg, &v);
  return cg__setopt(curl, option, &v, caller);
}

/* An option the shadow keeps (cg_handle_keep's byte `keep`, not 0): libcurl first, then
 * the shadow, with the value as it came (cg_handle_record). */
static __attribute__((noinline)) CURLcode cg__setopt_keep(struct cg_handle *h, CURL *curl,
                                                          CURLoption opt, uintptr_t arg,
                                                          unsigned keep) {
  CURLcode rc = h->lib->easy_setopt(curl, opt, arg);

  if (__builtin_expect(rc != CURLE_OK, 0))
    return cg__setopt_refused(h, (long) opt, rc);
  if (keep >= CG_KEEP_SWITCH)
    cg_handle_record_switch(h, keep, (union cg_optarg){.bits = arg});
  else
    cg_handle_store(h, keep, &arg);
  return CURLE_OK;
}

/* A known handle outside an attempt: an option the shadow does not keep goes straight on
 * to libcurl, a kept one through cg__setopt_keep.  Both tail calls (always inlined: the
 * callers keep their common paths free of a stack frame). */
static inline __attribute__((always_inline)) CURLcode
cg__setopt_known(struct cg_handle *h, CURL *curl, CURLoption opt, uintptr_t arg) {
  /* CURLoption, not long: the caller passes an int, and only the register's low 32 bits
   * are defined (System V ABI 3.2.3) */
  unsigned keep = cg_handle_keeps((long) opt);

  if (!keep)
    return h->lib->easy_setopt(curl, opt, arg);
  return cg__setopt_keep(h, curl, opt, arg, keep);
}

/* cg__easy_setopt_reg past this thread's memo (a handle other than the last one, or
 * none the guard knows) or during an attempt. */
static __attribute__((noinline)) CURLcode cg__setopt_slow(CURL *curl, CURLoption opt,
                                                          uintptr_t arg, const void *caller) {
  struct cg_handle *h = cg_handle_get(curl);

  if (!h)
    return cg__setopt_pass(curl, opt, arg, caller); /* unknown, NULL among them */
  if (h->in_perform)
    return cg__setopt_during(curl, (long) opt, arg, caller);
  return cg__setopt_known(h, curl, opt, arg);
}

/* cg__easy_setopt_reg before the guard is known to be on: off (or a duplicate copy), or
 * the process's first call into the guard (cg_lib_guarding finds out). */
static __attribute__((noinline)) CURLcode cg__setopt_unsure(CURL *curl, CURLoption opt,
                                                            uintptr_t arg, const void *caller) {
  if (!cg_lib_guarding())
    return cg__setopt_pass(curl, opt, arg, caller); /* off */
  return cg__setopt_slow(curl, opt, arg, caller);
}

CG_EXPORT CURLcode cg__easy_setopt_reg(CURL *curl, CURLoption opt, uintptr_t arg)
    __asm__("curl_easy_setopt");
/* Every path ends in a tail call, so none runs with a stack frame: the handle is this
 * thread's last (cg_handle_memo_hit), and an option the shadow does not keep (some 60 of
 * curl's tool's 85 a transfer) goes straight on to libcurl (issue 16).  The rare paths
 * are functions of their own, not CG_RARE's cold parts: a call from here to cg_rare_path
 * or cg_lib_active_first would keep `arg` in a saved register, a frame on every call.
 * CURLOPT_PROTOCOLS(_STR), whose refusal cg__setopt_refused notes, are kept. */
CURLcode cg__easy_setopt_reg(CURL *curl, CURLoption opt, uintptr_t arg) {
  struct cg_handle *h;
  int active = __atomic_load_n(&cg_lib_active, __ATOMIC_ACQUIRE);

  if (__builtin_expect(active <= 0, 0)) {
    /* Off (or a duplicate copy), known: the caller's libcurl from the call-site cache's
     * first slot, as cg_lib_for_caller finds it, without the calls of cg__setopt_pass
     * (50 instructions of the 70 a setopt cost with CURLGUARD unset, issue 16: preloaded
     * and off costs what a forwarding interposer costs).  Anything else (not yet known,
     * a site not cached or further down its chain, no libcurl): cg__setopt_unsure. */
    if (active == 0) {
      uintptr_t key = cg_lib_site_key(CG_CALLER());
      const struct cg_lib_site *s = &cg_lib_sites[cg_lib_site_slot(key)];
      const struct cg_lib *lib;
      if (__atomic_load_n(&s->key, __ATOMIC_ACQUIRE) == key && (lib = s->lib) != NULL)
        return lib->easy_setopt(curl, opt, arg);
    }
    return cg__setopt_unsure(curl, opt, arg, CG_CALLER()); /* cg_lib_guarding's rare side */
  }
  h = cg_handle_memo_hit(curl);
  if (__builtin_expect(!h || h->in_perform, 0))
    return cg__setopt_slow(curl, opt, arg, CG_CALLER());
  return cg__setopt_known(h, curl, opt, arg);
}
#else
CG_EXPORT CURLcode curl_easy_setopt(CURL *curl, CURLoption option, ...) {
  struct cg_optval v;
  va_list ap;

  va_start(ap, option);
  cg_optval_read((long) option, &ap, &v);
  va_end(ap);
  return cg__setopt(curl, (long) option, &v, CG_CALLER());
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
  /* Added to a multi: libcurl refuses it while the transfer is inside its multi, and the
   * guard for the time it holds the call outside (a backoff), where libcurl's check
   * passed and a possibly billed request went out (helper-63). */
  if (CG_RARE(cg_multi_holds(curl))) {
    if (h->errorbuffer)
      snprintf(h->errorbuffer, CURL_ERROR_SIZE, "easy handle already used in multi handle");
    return CURLE_FAILED_INIT;
  }
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
  if (h && (bitmask & CURLPAUSE_RECV))
    h->host_paused = 1; /* what libcurl kept meanwhile may come back in one piece */
  /* The guard is handing a held response to the host after the transfer ended: the
   * pause is the guard's to lift, and the transfer the host paused is, to the host,
   * still running.  The guard offers the bytes again right away. */
  if (h && h->replaying)
    return CURLE_OK;
  if (h && h->thread_attempt) {
    /* The easy driver's attempt runs on this handle: its callbacks find it through the
     * thread (attempt.c cg_attempt_cur), and libcurl may call them from inside this call,
     * which may come from another thread than the perform's (a host breaking
     * curl_easy_pause(3)'s rule, that the guard must not punish: without the lend the
     * held-back bytes were refused, the body lost, and 23 returned here).  On the
     * perform's own thread the lend changes nothing. */
    struct cg_attempt *prev = cg_attempt_lend(h->thread_attempt);
    CURLcode rc = lib->easy_pause(curl, bitmask);

    cg_attempt_lend(prev);
    return rc;
  }
  return lib->easy_pause(curl, bitmask);
}
