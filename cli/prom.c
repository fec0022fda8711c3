/* prom.c - the Prometheus text exposition format (see prom.h). */
#include "prom.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int cg_prom_name_ok(const char *name) {
  const char *p;
  if (!name || !*name || (*name >= '0' && *name <= '9'))
    return 0;
  for (p = name; *p; p++) {
    char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == ':'))
      return 0;
  }
  return 1;
}

/* The length of the well-formed UTF-8 sequence at `s` (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), or 0 when it is not one. */
static int cg__utf8_len(const unsigned char *s) {
  unsigned char c = s[0];
  int n, i;
  uint32_t cp;

  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4, cp = c & 0x07;
  else
    return 0;
  for (i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80) /* also stops at the NUL */
      return 0;
    cp = cp << 6 | (s[i] & 0x3F);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
      (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return 0;
  return n;
}

void cg_prom_label_value(FILE *f, const char *v) {
  const unsigned char *p = (const unsigned char *) (v ? v : "");
  while (*p) {
    int n = cg__utf8_len(p);
    if (n == 0) {
      fputs("\xEF\xBF\xBD", f); /* U+FFFD for the stray byte */
      p++;
      continue;
    }
    if (*p == '\\')
      fputs("\\\\", f);
    else if (*p == '"')
      fputs("\\\"", f);
    else if (*p == '\n')
      fputs("\\n", f);
    else
      fwrite(p, 1, (size_t) n, f);
    p += n;
  }
}

void cg_prom_help_text(FILE *f, const char *text) {
  const char *p;
  for (p = text ? text : ""; *p; p++) {
    if (*p == '\\')
      fputs("\\\\", f);
    else if (*p == '\n')
      fputs("\\n", f);
    else
      fputc(*p, f);
  }
}

void cg_prom_family(FILE *f, const char *name, const char *type, const char *help) {
  fprintf(f, "# HELP %s ", name);
  cg_prom_help_text(f, help);
  fprintf(f, "\n# TYPE %s %s\n", name, type);
}

void cg_prom_value(char *buf, size_t len, double v) {
  if (isnan(v)) {
    snprintf(buf, len, "NaN");
  } else if (isinf(v)) {
    snprintf(buf, len, v > 0 ? "+Inf" : "-Inf");
  } else if (v == floor(v) && fabs(v) < 9007199254740992.0) { /* 2^53: exact */
    snprintf(buf, len, "%.0f", v);
  } else {
    int prec;
    for (prec = 15; prec <= 17; prec++) { /* the shortest that reads back the same */
      snprintf(buf, len, "%.*g", prec, v);
      if (strtod(buf, NULL) == v)
        break;
    }
  }
}

static void cg__labels(FILE *f, const char *const *labels, int n) {
  int i;
  if (n <= 0)
    return;
  fputc('{', f);
  for (i = 0; i < n; i++) {
    fprintf(f, "%s%s=\"", i ? "," : "", labels[2 * i]);
    cg_prom_label_value(f, labels[2 * i + 1]);
    fputc('"', f);
  }
  fputc('}', f);
}

void cg_prom_sample(FILE *f, const char *name, const char *const *labels, int nlabels,
                    double value) {
  char v[64];
  cg_prom_value(v, sizeof(v), value);
  fputs(name, f);
  cg__labels(f, labels, nlabels);
  fprintf(f, " %s\n", v);
}

void cg_prom_sample_u64(FILE *f, const char *name, const char *const *labels, int nlabels,
                        uint64_t value) {
  fputs(name, f);
  cg__labels(f, labels, nlabels);
  fprintf(f, " %llu\n", (unsigned long long) value);
}
