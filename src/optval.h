/* optval.h - the argument of curl_easy_setopt, read exactly as libcurl reads it.
 *
 * curl_easy_setopt() is variadic; libcurl takes the argument's type from the option
 * number's range (lib/setopt.c, include/curl/curl.h CURLOPTTYPE_*):
 *     0 ..  9999  long
 * 10000 .. 19999  object pointer (string, slist, data pointer)
 * 20000 .. 29999  function pointer
 * 30000 .. 39999  curl_off_t
 * 40000 ..        struct curl_blob *
 * Reading any other type would corrupt the value on some ABIs (e.g. a curl_off_t
 * of 5000000000 read as a long on 32-bit), so the shim reads through this module.
 */
#ifndef CG_OPTVAL_H
#define CG_OPTVAL_H

#include <curl/curl.h>
#include <stdarg.h>

enum cg_optkind { CG_OPT_LONG, CG_OPT_PTR, CG_OPT_FUNC, CG_OPT_OFFT, CG_OPT_BLOB };

/* One decoded setopt argument. */
struct cg_optval {
  enum cg_optkind kind;
  union {
    long l;
    void *p;
    void (*f)(void);
    curl_off_t o;
  } u;
};

/* The argument type of option number `opt`. */
enum cg_optkind cg_opt_kind(long opt);

/* Read the next variadic argument of curl_easy_setopt(`opt`, ...) from `*ap`.  Inline:
 * every setopt of the host runs it, with the guard on or off. */
static inline void cg_optval_read(long opt, va_list *ap, struct cg_optval *out) {
  if (opt < CURLOPTTYPE_OBJECTPOINT) {
    out->kind = CG_OPT_LONG;
    out->u.l = va_arg(*ap, long);
  } else if (opt < CURLOPTTYPE_FUNCTIONPOINT) {
    out->kind = CG_OPT_PTR;
    out->u.p = va_arg(*ap, void *);
  } else if (opt < CURLOPTTYPE_OFF_T) {
    out->kind = CG_OPT_FUNC;
    out->u.f = va_arg(*ap, void (*)(void));
  } else if (opt < CURLOPTTYPE_BLOB) {
    out->kind = CG_OPT_OFFT;
    out->u.o = va_arg(*ap, curl_off_t);
  } else {
    out->kind = CG_OPT_BLOB;
    out->u.p = va_arg(*ap, void *);
  }
}

/* Pass `v` on to the real `setopt` function with the right argument type. */
static inline CURLcode cg_optval_forward(CURLcode (*setopt)(CURL *, CURLoption, ...),
                                         CURL *curl, long opt, const struct cg_optval *v) {
  switch (v->kind) {
  case CG_OPT_LONG:
    return setopt(curl, (CURLoption) opt, v->u.l);
  case CG_OPT_PTR:
  case CG_OPT_BLOB:
    return setopt(curl, (CURLoption) opt, v->u.p);
  case CG_OPT_FUNC:
    return setopt(curl, (CURLoption) opt, v->u.f);
  case CG_OPT_OFFT:
    return setopt(curl, (CURLoption) opt, v->u.o);
  }
  return CURLE_BAD_FUNCTION_ARGUMENT;
}

#endif
