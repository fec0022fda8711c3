/* cli.h - the curlguard command (SPEC section 6).
 *
 * Exit codes: 0 success, 2 usage error, 1 any other error; every error is one line
 * on stderr starting "curlguard: ". */
#ifndef CG_CLI_H
#define CG_CLI_H

#define CG_EXIT_OK 0
#define CG_EXIT_ERROR 1
#define CG_EXIT_USAGE 2

/* `curlguard run [--config F] -- CMD ARGS...`: exec CMD with the interposer preloaded
 * and enabled.  Returns only on failure. */
int cg_cli_run(int argc, char **argv);

/* `curlguard plan ...`: the worst-case retry timeline. */
int cg_cli_plan(int argc, char **argv);

/* `curlguard stat [--json]`: every pool in the shared state file. */
int cg_cli_stat(int argc, char **argv);

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
