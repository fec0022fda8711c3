/* main.c - `curlguard` command dispatch. */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* `s` as the text tables show a name: control bytes as \xNN (\n, \t, \r by name) and `\`
 * as `\\`, so a name from a config file or the state file cannot split a row or drive
 * the terminal (`--json` and `--prometheus` have their own escapes).  Into `buf`. */
const char *cg_cli_shown(const char *s, char *buf, size_t len) {
  size_t o = 0;
  for (; s && *s && o + 5 < len; s++) {
    unsigned char c = (unsigned char) *s;
    if (c == '\\' || c == '\n' || c == '\t' || c == '\r') {
      buf[o++] = '\\';
      buf[o++] = c == '\\' ? '\\' : c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
    } else if (c < 0x20 || c == 0x7F) {
      o += (size_t) snprintf(buf + o, len - o, "\\x%02X", c);
    } else {
      buf[o++] = (char) c;
    }
  }
  buf[o] = '\0';
  return buf;
}

#ifndef CG_VERSION
#define CG_VERSION "0.1.0"
#endif

static const char cg__usage[] =
    "usage: curlguard COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  run [--config F] -- CMD ARGS...   run CMD with the guard preloaded and enabled\n"
    "  plan --budget S --attempt-timeout S --base S --cap S [--max-attempts N] [--json]\n"
    "                                    worst-case retry timeline for a deadline\n"
    "  stat [--config F] [--json | --prometheus]\n"
    "                                    every pool in the shared state: limits, levels,\n"
    "                                    in-flight, counters (--prometheus: text format)\n"
    "  exporter --listen ADDR [--config F]\n"
    "                                    serve those metrics at http://ADDR/metrics\n"
    "  report [--json] [LOG...]          usage-log totals per pool and model: calls,\n"
    "                                    retries, tokens, cost, latency, alerts (- = stdin)\n"
    "  report --html FILE [LOG...]       the same as one self-contained page with charts\n"
    "  reset [--config F]                re-initialise the shared state file\n"
    "  prices check [LOG...]             models in usage logs the price table cannot\n"
    "                                    price (exit 1 if any; CURLGUARD_PRICES honoured)\n"
    "  help                              this text\n"
    "  version                           print the version\n";

int cg_cli_written(const char *cmd, int rc) {
  if (fflush(stdout) != 0 || ferror(stdout)) {
    cg_cli_error("%s: writing the output: %s", cmd, errno ? strerror(errno) : "failed");
    return CG_EXIT_ERROR;
  }
  return rc;
}

void cg_cli_error(const char *fmt, ...) {
  va_list ap;
  fputs("curlguard: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(cg__usage, stderr);
    return CG_EXIT_USAGE;
  }
  /* `curlguard CMD --help` for the commands without a help of their own (report and
   * prices have theirs): the usage of all, on stdout, exit 0. */
  if (argc == 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0) &&
      (strcmp(argv[1], "run") == 0 || strcmp(argv[1], "plan") == 0 ||
       strcmp(argv[1], "stat") == 0 || strcmp(argv[1], "reset") == 0 ||
       strcmp(argv[1], "exporter") == 0)) {
    fputs(cg__usage, stdout);
    return cg_cli_written(argv[1], CG_EXIT_OK);
  }
  if (strcmp(argv[1], "run") == 0)
    return cg_cli_run(argc - 1, argv + 1);
  /* Not for run (an ignored signal stays ignored across execve(2)): under a file size
   * limit (ulimit -f) a write past it fails with EFBIG, which the commands report in one
   * line (exit 1; report --html removes its temporary page), instead of SIGXFSZ killing
   * the CLI (exit 153, no reason, FILE.tmp-XXXXXX left behind). */
  signal(SIGXFSZ, SIG_IGN);
  if (strcmp(argv[1], "plan") == 0)
    return cg_cli_plan(argc - 1, argv + 1);
  if (strcmp(argv[1], "stat") == 0)
    return cg_cli_stat(argc - 1, argv + 1);
  if (strcmp(argv[1], "exporter") == 0)
    return cg_cli_exporter(argc - 1, argv + 1);
  if (strcmp(argv[1], "report") == 0)
    return cg_cli_report(argc - 1, argv + 1);
  if (strcmp(argv[1], "reset") == 0)
    return cg_cli_reset(argc - 1, argv + 1);
  if (strcmp(argv[1], "prices") == 0)
    return cg_cli_prices(argc - 1, argv + 1);
  if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
      strcmp(argv[1], "-h") == 0) {
    fputs(cg__usage, stdout);
    return cg_cli_written("help", CG_EXIT_OK); /* > /dev/full: exit 1, as every command */
  }
  if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
    printf("curlguard %s\n", CG_VERSION);
    return cg_cli_written("version", CG_EXIT_OK);
  }
  cg_cli_error("unknown command \"%s\" (try: curlguard help)", argv[1]);
  return CG_EXIT_USAGE;
}
