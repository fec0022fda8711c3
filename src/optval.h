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
#include <stdint.h>

/* 1 where a setopt's variadic argument of every kind (long, pointer, function pointer,
 * curl_off_t, blob pointer) travels in the same 64-bit integer register as a fixed
 * argument in its place: x86-64 (System V ABI 3.5.7) and Linux AArch64 (AAPCS64 6.4.2).
 * There the shims read it as a fixed uintptr_t (shim.c, shim-multi.c); elsewhere with
 * va_arg (cg_optval_read). */
#if defined(__x86_64__) || (defined(__aarch64__) && defined(__linux__))
#define CG_SETOPT_ARG_IN_REG 1
#else
#define CG_SETOPT_ARG_IN_REG 0
#endif

enum cg_optkind { CG_OPT_LONG, CG_OPT_PTR, CG_OPT_FUNC, CG_OPT_OFFT, CG_OPT_BLOB };

/* A setopt argument's value, as the member of its kind.  `bits`: the value as the
 * register ABIs pass an argument of every kind (shim.c), one 64-bit integer register. */
union cg_optarg {
  long l;
  void *p;
  void (*f)(void);
  curl_off_t o;
  uintptr_t bits;
};

/* One decoded setopt argument. */
struct cg_optval {
  enum cg_optkind kind;
  union cg_optarg u;
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

/* The argument of option `opt` as it arrived in a register (`arg`): on the ABIs whose
 * variadic argument of every kind travels in one 64-bit integer register (shim.c), its
 * bits are the value itself.  Inline: setopts of options the shadow keeps by a switch
 * (handle.h cg_handle_record_switch) run it. */
static inline void cg_optval_of_reg(long opt, uintptr_t arg, struct cg_optval *out) {
  if (opt < CURLOPTTYPE_OBJECTPOINT) {
    out->kind = CG_OPT_LONG;
    out->u.l = (long) arg;
  } else if (opt < CURLOPTTYPE_FUNCTIONPOINT) {
    out->kind = CG_OPT_PTR;
    out->u.p = (void *) arg;
  } else if (opt < CURLOPTTYPE_OFF_T) {
    out->kind = CG_OPT_FUNC;
    out->u.f = (void (*)(void)) arg;
  } else if (opt < CURLOPTTYPE_BLOB) {
    out->kind = CG_OPT_OFFT;
    out->u.o = (curl_off_t) arg;
  } else {
    out->kind = CG_OPT_BLOB;
    out->u.p = (void *) arg;
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
