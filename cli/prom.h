/* prom.h - writing the Prometheus text exposition format, version 0.0.4.
 *
 * The rules are those of the format's description (prometheus.io, "Exposition formats";
 * the reference parser is prometheus/common expfmt): one "# HELP" and one "# TYPE" line
 * per metric family before its samples, samples as  name{label="value",...} value  with
 * a label value's backslash, double quote and line feed written \\, \" and \n, and a
 * HELP text's backslash and line feed written \\ and \n.  Text must be UTF-8: a byte of
 * a label value that is not part of a well-formed UTF-8 sequence (a pool name cut at 47
 * bytes inside a character) is written as U+FFFD.  Values are floats: integers print
 * exactly, other numbers in the shortest form that reads back to the same double, and
 * +Inf, -Inf, NaN as the format spells them.
 */
#ifndef CG_PROM_H
#define CG_PROM_H

#include <stdint.h>
#include <stdio.h>

/* 1 when `name` is a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), else 0. */
int cg_prom_name_ok(const char *name);

/* Write `v` as a label value (without the quotes) to `f`: escaped, UTF-8 repaired. */
void cg_prom_label_value(FILE *f, const char *v);

/* Write `text` as a HELP text to `f`: backslash and line feed escaped. */
void cg_prom_help_text(FILE *f, const char *text);

/* "# HELP name help\n# TYPE name type\n"; `type` "counter", "gauge" or "untyped". */
void cg_prom_family(FILE *f, const char *name, const char *type, const char *help);

/* One sample: `name`, then `nlabels` label pairs from `labels` (name, value, name,
 * value, ...; label names must be valid: [a-zA-Z_][a-zA-Z0-9_]*), then the value. */
void cg_prom_sample(FILE *f, const char *name, const char *const *labels, int nlabels,
                    double value);
void cg_prom_sample_u64(FILE *f, const char *name, const char *const *labels, int nlabels,
                        uint64_t value);

/* `v` as the format writes a value, into `buf` (at least 32 bytes). */
void cg_prom_value(char *buf, size_t len, double v);

#endif
