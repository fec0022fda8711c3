/* optval.c - setopt argument decoding by option number range (see optval.h). */
#include "optval.h"

enum cg_optkind cg_opt_kind(long opt) {
  if (opt < CURLOPTTYPE_OBJECTPOINT)
    return CG_OPT_LONG;
  if (opt < CURLOPTTYPE_FUNCTIONPOINT)
    return CG_OPT_PTR;
  if (opt < CURLOPTTYPE_OFF_T)
    return CG_OPT_FUNC;
  if (opt < CURLOPTTYPE_BLOB)
    return CG_OPT_OFFT;
  return CG_OPT_BLOB;
}

void cg_optval_read(long opt, va_list *ap, struct cg_optval *out) {
  out->kind = cg_opt_kind(opt);
  switch (out->kind) {
  case CG_OPT_LONG:
    out->u.l = va_arg(*ap, long);
    break;
  case CG_OPT_PTR:
  case CG_OPT_BLOB:
    out->u.p = va_arg(*ap, void *);
    break;
  case CG_OPT_FUNC:
    out->u.f = va_arg(*ap, void (*)(void));
    break;
  case CG_OPT_OFFT:
    out->u.o = va_arg(*ap, curl_off_t);
    break;
  }
}

CURLcode cg_optval_forward(CURLcode (*setopt)(CURL *, CURLoption, ...), CURL *curl,
                           long opt, const struct cg_optval *v) {
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
