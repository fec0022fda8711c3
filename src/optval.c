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
