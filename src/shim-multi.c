/* shim-multi.c - the interposed curl_multi_* symbols, and nothing else (issue 13).
 *
 * Thin as shim.c: find the real function (lib.h), and hand a multi handle the guard
 * drives to multi.c.  A call passes straight through to the real libcurl when
 *   - the guard is off (CURLGUARD unset or off: no shadow, no state, nothing replaced),
 *     or this is a second copy of the library (lib.h cg_lib_is_duplicate);
 *   - the multi handle has no shadow: libcurl made it for itself (curl_easy_perform
 *     drives a private multi handle through the exported curl_multi_* functions:
 *     LIBCURL-NOTES.md), or it was made before the guard could see it;
 *   - the caller lies inside libcurl itself (cg_lib_for_caller_ex), e.g. libcurl 7.88's
 *     Curl_close calling curl_multi_remove_handle, or its multi_wait calling
 *     curl_multi_timeout.
 */
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#include "hot.h"
#include "lib.h"
#include "multi.h"
#include "optval.h"

#include <stdarg.h>
#include <stdint.h>

#undef curl_multi_setopt
#undef curl_multi_socket /* curl/multi.h maps it to curl_multi_socket_action */

#define CG_EXPORT __attribute__((visibility("default")))
#define CG_CALLER() __builtin_extract_return_addr(__builtin_return_address(0))

/* cg__cm for the shadow `cm` of a multi handle the guard drives: `cm`, unless the call
 * comes from inside libcurl itself.  Apart from cg__cm, whose common path it is not for
 * most hosts (libcurl's easy driver calls several times a request on its private multi
 * handle, which has no shadow). */
static __attribute__((noinline)) struct cg_multi *
cg__cm_guarded(struct cg_multi *cm, const void *caller, const struct cg_lib **lib) {
  int internal = 0;

  *lib = cg_multi_lib(cm);
  cg_lib_for_caller_ex(caller, &internal);
  return internal ? NULL : cm;
}

/* The shadow of `m` when the guard drives this call, else NULL; `*lib` gets the libcurl
 * that serves the call either way (NULL: none found, a "curlguard:" line was printed). */
static struct cg_multi *cg__cm(CURLM *m, const void *caller, const struct cg_lib **lib) {
  struct cg_multi *cm = NULL;

  if (m && cg_lib_guarding())
    cm = cg_multi_get(m);
  if (!cm) {
    *lib = cg_lib_for_caller(caller);
    return NULL;
  }
  return cg__cm_guarded(cm, caller, lib);
}

/* The real function `fn` of `lib`, or return `fail` (no libcurl, or it lacks it: rare,
 * so that return's code stays apart from the common path). */
#define CG_REAL(lib, fn, fail)                                                            \
  do {                                                                                    \
    if (CG_RARE(!(lib) || !(lib)->fn))                                                    \
      return fail;                                                                        \
  } while (0)

CG_EXPORT CURLM *curl_multi_init(void) {
  int internal = 0;
  const struct cg_lib *lib = cg_lib_for_caller_ex(CG_CALLER(), &internal);

  CG_REAL(lib, multi_init, NULL);
  if (internal || !lib->has_multi || !cg_lib_guarding())
    return lib->multi_init();
  return cg_multi_init(lib);
}

CG_EXPORT CURLMcode curl_multi_add_handle(CURLM *m, CURL *e) {
  const struct cg_lib *lib;
  struct cg_multi *cm = cg__cm(m, CG_CALLER(), &lib);

  if (cm)
    return cg_multi_add(cm, e);
  CG_REAL(lib, multi_add_handle, CURLM_INTERNAL_ERROR);
  return lib->multi_add_handle(m, e);
}

CG_EXPORT CURLMcode curl_multi_remove_handle(CURLM *m, CURL *e) {
  const struct cg_lib *lib;
  struct cg_multi *cm = cg__cm(m, CG_CALLER(), &lib);

  if (cm)
    return cg_multi_remove(cm, e);
  CG_REAL(lib, multi_remove_handle, CURLM_INTERNAL_ERROR);
  return lib->multi_remove_handle(m, e);
}

CG_EXPORT CURLMcode curl_multi_perform(CURLM *m, int *running) {
  const struct cg_lib *lib;
  struct cg_multi *cm = cg__cm(m, CG_CALLER(), &lib);

  if (cm)
    return cg_multi_perform(cm, running);
  CG_REAL(lib, multi_perform, CURLM_INTERNAL_ERROR);
  return lib->multi_perform(m, running);
}

CG_EXPORT CURLMsg *curl_multi_info_read(CURLM *m, int *msgs_in_queue) {
  const struct cg_lib *lib;
  struct cg_multi *cm = cg__cm(m, CG_CALLER(), &lib);

  if (cm)
    return cg_multi_info_read(cm, msgs_in_queue);
  CG_REAL(lib, multi_info_read, NULL);
  return lib->multi_info_read(m, msgs_in_queue);
}

CG_EXPORT CURLMcode curl_multi_timeout(CURLM *m, long *timeout_ms) {
  const struct cg_lib *lib;
  struct cg_multi *cm = cg__cm(m, CG_CALLER(), &lib);

  if (cm)
    return cg_multi_timeout(cm, timeout_ms);
  CG_REAL(lib, multi_timeout, CURLM_INTERNAL_ERROR);
  return lib->multi_timeout(m, timeout_ms);
}

CG_EXPORT CURLMcode curl_multi_wait(CURLM *m, struct curl_waitfd *fds, unsigned int nfds,
                                    int timeout_ms, int *numfds) {
  const struct cg_lib *lib;
  struct cg_multi *cm = cg__cm(m, CG_CALLER(), &lib);

  if (cm)
    return cg_multi_wait(cm, fds, nfds, timeout_ms, numfds, 0);
  CG_REAL(lib, multi_wait, CURLM_INTERNAL_ERROR);
  return lib->multi_wait(m, fds, nfds, timeout_ms, numfds);
}

CG_EXPORT CURLMcode curl_multi_poll(CURLM *m, struct curl_waitfd *fds, unsigned int nfds,
                                    int timeout_ms, int *numfds) {
  const struct cg_lib *lib;
  struct cg_multi *cm = cg__cm(m, CG_CALLER(), &lib);

  CG_REAL(lib, multi_poll, CURLM_INTERNAL_ERROR);
  if (cm)
    return cg_multi_wait(cm, fds, nfds, timeout_ms, numfds, 1);
  return lib->multi_poll(m, fds, nfds, timeout_ms, numfds);
}

CG_EXPORT CURLMcode curl_multi_wakeup(CURLM *m) {
  const struct cg_lib *lib;

  cg__cm(m, CG_CALLER(), &lib);
  CG_REAL(lib, multi_wakeup, CURLM_INTERNAL_ERROR);
  return lib->multi_wakeup(m);
}

CG_EXPORT CURLMcode curl_multi_fdset(CURLM *m, fd_set *r, fd_set *w, fd_set *x, int *max_fd) {
  const struct cg_lib *lib;
  struct cg_multi *cm = cg__cm(m, CG_CALLER(), &lib);

  CG_REAL(lib, multi_fdset, CURLM_INTERNAL_ERROR);
  if (cm)
    return cg_multi_fdset(cm, r, w, x, max_fd);
  return lib->multi_fdset(m, r, w, x, max_fd);
}

CG_EXPORT CURLMcode curl_multi_assign(CURLM *m, curl_socket_t s, void *p) {
  const struct cg_lib *lib;

  cg__cm(m, CG_CALLER(), &lib);
  CG_REAL(lib, multi_assign, CURLM_INTERNAL_ERROR);
  return lib->multi_assign(m, s, p);
}

CG_EXPORT CURLMcode curl_multi_socket_action(CURLM *m, curl_socket_t s, int ev, int *running) {
  const struct cg_lib *lib;
  struct cg_multi *cm = cg__cm(m, CG_CALLER(), &lib);

  if (cm)
    return cg_multi_socket_action(cm, s, ev, running);
  CG_REAL(lib, multi_socket_action, CURLM_INTERNAL_ERROR);
  return lib->multi_socket_action(m, s, ev, running);
}

/* Deprecated: libcurl runs it as curl_multi_socket_action with no event (lib/multi.c). */
CG_EXPORT CURLMcode curl_multi_socket(CURLM *m, curl_socket_t s, int *running) {
  const struct cg_lib *lib;
  struct cg_multi *cm = cg__cm(m, CG_CALLER(), &lib);

  if (cm)
    return cg_multi_socket_action(cm, s, 0, running);
  CG_REAL(lib, multi_socket_action, CURLM_INTERNAL_ERROR);
  return lib->multi_socket_action(m, s, 0, running);
}

CG_EXPORT CURLMcode curl_multi_socket_all(CURLM *m, int *running) {
  const struct cg_lib *lib;
  struct cg_multi *cm = cg__cm(m, CG_CALLER(), &lib);

  if (cm)
    return cg_multi_socket_all(cm, running);
  CG_REAL(lib, multi_socket_all, CURLM_INTERNAL_ERROR);
  return lib->multi_socket_all(m, running);
}

/* Variadic like curl_easy_setopt: the argument's type follows the option number
 * (curl/multi.h CURLMOPTTYPE_*: LONG < 10000, OBJECTPOINT, FUNCTIONPOINT, OFF_T 30000). */
#if CG_SETOPT_ARG_IN_REG
/* cg_multi_setopt with the argument's bits `arg` as the member of the option's kind. */
static CURLMcode cg__multi_setopt_bits(struct cg_multi *cm, CURLMoption option,
                                       uintptr_t arg) {
  if (option >= CURLOPTTYPE_OFF_T)
    return cg_multi_setopt(cm, option, 0, NULL, NULL, (curl_off_t) arg);
  if (option >= CURLOPTTYPE_FUNCTIONPOINT)
    return cg_multi_setopt(cm, option, 0, NULL, (void (*)(void)) arg, 0);
  if (option >= CURLOPTTYPE_OBJECTPOINT)
    return cg_multi_setopt(cm, option, 0, (void *) arg, NULL, 0);
  return cg_multi_setopt(cm, option, (long) arg, NULL, NULL, 0);
}

/* As curl_easy_setopt (shim.c): on these ABIs the variadic argument, of any kind, is in the
 * third integer argument register, so it is read as a fixed uintptr_t and passed on as it
 * came (libcurl's va_arg reads it from the same register).  libcurl's easy driver sets an
 * option of its private multi handle through here on every transfer. */
CG_EXPORT CURLMcode cg__multi_setopt_reg(CURLM *m, CURLMoption option, uintptr_t arg)
    __asm__("curl_multi_setopt");
CURLMcode cg__multi_setopt_reg(CURLM *m, CURLMoption option, uintptr_t arg) {
  const struct cg_lib *lib;
  struct cg_multi *cm = cg__cm(m, CG_CALLER(), &lib);

  if (cm)
    return cg__multi_setopt_bits(cm, option, arg);
  CG_REAL(lib, multi_setopt, CURLM_INTERNAL_ERROR);
  return lib->multi_setopt(m, option, arg);
}
#else
CG_EXPORT CURLMcode curl_multi_setopt(CURLM *m, CURLMoption option, ...) {
  const struct cg_lib *lib;
  struct cg_multi *cm = cg__cm(m, CG_CALLER(), &lib);
  void (*f)(void) = NULL;
  curl_off_t o = 0;
  void *p = NULL;
  long l = 0;
  va_list ap;

  va_start(ap, option);
  if (option >= CURLOPTTYPE_OFF_T)
    o = va_arg(ap, curl_off_t);
  else if (option >= CURLOPTTYPE_FUNCTIONPOINT)
    f = va_arg(ap, void (*)(void));
  else if (option >= CURLOPTTYPE_OBJECTPOINT)
    p = va_arg(ap, void *);
  else
    l = va_arg(ap, long);
  va_end(ap);
  if (cm)
    return cg_multi_setopt(cm, option, l, p, f, o);
  CG_REAL(lib, multi_setopt, CURLM_INTERNAL_ERROR);
  if (option >= CURLOPTTYPE_OFF_T)
    return lib->multi_setopt(m, option, o);
  if (option >= CURLOPTTYPE_FUNCTIONPOINT)
    return lib->multi_setopt(m, option, f);
  if (option >= CURLOPTTYPE_OBJECTPOINT)
    return lib->multi_setopt(m, option, p);
  return lib->multi_setopt(m, option, l);
}
#endif

CG_EXPORT CURLMcode curl_multi_cleanup(CURLM *m) {
  const struct cg_lib *lib;
  struct cg_multi *cm = cg__cm(m, CG_CALLER(), &lib);

  if (cm)
    return cg_multi_cleanup(cm);
  CG_REAL(lib, multi_cleanup, CURLM_INTERNAL_ERROR);
  return lib->multi_cleanup(m);
}
