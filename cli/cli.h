/* cli.h - the curlguard command (SPEC section 6).
 *
 * Exit codes: 0 success, 2 usage error, 1 any other error; every error is one line
 * on stderr starting "curlguard: ". */
#ifndef CG_CLI_H
#define CG_CLI_H

#include <stddef.h>

#define CG_EXIT_OK 0
#define CG_EXIT_ERROR 1
#define CG_EXIT_USAGE 2

/* `curlguard run [--config F] -- CMD ARGS...`: exec CMD with the interposer preloaded
 * and enabled.  Returns only on failure. */
int cg_cli_run(int argc, char **argv);

/* `curlguard plan ...`: the worst-case retry timeline. */
int cg_cli_plan(int argc, char **argv);

/* `curlguard stat [--json | --prometheus]`: every pool in the shared state file; with
 * --prometheus its counters in the Prometheus text format (metrics.h). */
int cg_cli_stat(int argc, char **argv);

/* `s` as the text outputs show a name from a file (a pool, a model): control bytes as
 * \xNN (\n, \t, \r by name) and `\` as `\\`, so it cannot split a row or drive the
 * terminal.  Into `buf` (`len` bytes, cut short to fit); returns `buf`. */
const char *cg_cli_shown(const char *s, char *buf, size_t len);

/* The end of a command whose output went to stdout: `rc`, or, when stdout could not be
 * written (a full disk, a closed pipe), CG_EXIT_ERROR after one line "`cmd`: writing the
 * output: <why>" (no silent exit 0 with nothing written). */
int cg_cli_written(const char *cmd, int rc);

/* `curlguard exporter --listen ADDR [--config F]`: serve the state file's metrics at
 * GET /metrics (exporter.c).  Returns on SIGINT/SIGTERM (0) or a listen error (1; a bad
 * ADDR: 2). */
int cg_cli_exporter(int argc, char **argv);

/* The state file the guard would use (CURLGUARD_STATE, else config file `config` (NULL:
 * CURLGUARD_CONFIG) "state", else the default) into `out`.  0; or -1 when none, -2 when
 * the config file cannot be used (either said in one line starting with `cmd`). */
int cg_cli_state_path(const char *cmd, const char *config, char *out, size_t len);

/* The fleet's Redis configured for the last cg_cli_state_path (CURLGUARD_REDIS or the
 * config's "redis"): URL and key prefix into `url` and `prefix`; 0 when one is, -1 not. */
int cg_cli_redis_conf(char *url, size_t ulen, char *prefix, size_t plen);

/* `curlguard report [--json] [--html FILE] [LOG...]`: usage-log totals per pool and
 * model, latency percentiles and alerts (report.h has the definitions), as text, JSON or
 * one HTML page with charts (report-html.h).  LOG "-" or none: stdin. */
int cg_cli_report(int argc, char **argv);

/* `curlguard reset`: re-initialise the shared state file. */
int cg_cli_reset(int argc, char **argv);

/* `curlguard prices check [LOG...]`: the models in usage logs that the price table
 * (CURLGUARD_PRICES or the shipped one) cannot price, one per line with its record count.
 * 0 all priced, 1 some not (or unreadable input), 2 usage error. */
int cg_cli_prices(int argc, char **argv);

/* Print "curlguard: <msg>" on stderr. */
void cg_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
