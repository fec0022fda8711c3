#!/usr/bin/env python3
"""bench/ab.py - paired runs of scenario 1's rows for one or more builds of the library.

    /usr/bin/python3 bench/ab.py [--row logoff] [--host "curl, one CPU"] [--rounds 12]
                                 [--n 5000] [--env LIB=VAR=VALUE ...] LIB [LIB ...]

Scenario 1 of bench/run.py (`make bench`) measures every row once per round, five rounds; a
change of the library worth half a microsecond a request is lost in that run's noise. This
runs only one row, for each library given (a libcurlguard.so of any build: `make
BUILD=/tmp/b`), against the same fast server and client as scenario 1 (bench/run.py's
Overhead: nginx with fixed answers, `curl -K` or batch-host, pinned to one CPU when the
host's name ends in ", one CPU"), in pairs: each round, in a new shuffled order, each
library's run of the row right before or right after a run of the row's baseline (no
preload; for the SSE row no preload with the SSE answer), which of the two first
alternating from round to round.  It prints each round's paired differences, then per
library the median of its differences (CPU µs per request over the baseline: user + system
of the client, bench/runstat.c), with their min and max.

Rows (bench/run.py OVH_ROWS): off, logoff, logon, all (every feature), sse.  --env gives a
library's runs an extra environment variable (LIB as given on the command line), e.g. to
switch a test hook on in one of two copies of the same build.  Numbers only; nothing is
written but the printout (and bench/run.py's scratch directory, removed at the end)."""
import argparse
import importlib.util
import os
import random
import shutil
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_run():
    spec = importlib.util.spec_from_file_location("run", ROOT / "bench" / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    return run


def main():
    ap = argparse.ArgumentParser(description="paired runs of one scenario-1 row per library")
    ap.add_argument("libs", nargs="+", help="libcurlguard.so files to compare")
    ap.add_argument("--row", default="logoff", choices=("off", "logoff", "logon", "all", "sse"))
    ap.add_argument("--host", default="curl, one CPU",
                    help='"curl", "C host", or either with ", one CPU" (default: curl, one CPU)')
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--n", type=int, default=5000, help="requests a run (default 5000)")
    ap.add_argument("--build", default=str(ROOT / "build"),
                    help="build directory for batch-host (default build)")
    ap.add_argument("--env", action="append", default=[], metavar="LIB=VAR=VALUE")
    a = ap.parse_args()
    run = load_run()
    if a.host not in run.OVH_HOSTS:
        sys.exit(f"ab.py: unknown host {a.host!r}; one of: " + ", ".join(run.OVH_HOSTS))
    libs = [Path(x).resolve() for x in a.libs]
    for lib in libs:
        if not lib.is_file():
            sys.exit(f"ab.py: {lib}: no such file")
    extra = {}
    for e in a.env:
        lib, _, kv = e.partition("=")
        var, _, val = kv.partition("=")
        if not var:
            sys.exit(f"ab.py: --env {e!r}: expected LIB=VAR=VALUE")
        extra.setdefault(str(Path(lib).resolve()), {})[var] = val
    rows = {r[0]: r for r in run.OVH_ROWS}
    row, base = rows[a.row], rows[run.OVH_BASE.get(a.row, "none")]
    o = run.Overhead({}, Path(a.build), ROOT / "build")
    env0 = o.env

    def env(kind, logf, state=None):
        e = dict(env0(kind, logf, state))
        if kind is not None:
            e.update(extra.get(str(o.lib), {}))
        return e

    o.env = env
    diffs = {lib: [] for lib in libs}
    o.start()
    try:
        o.lib = libs[0]
        o.run(a.host, row, 500)  # warm-up: the state file, the page cache
        for rnd in range(a.rounds):
            order = list(libs)
            random.shuffle(order)
            for lib in order:
                o.lib = lib
                cpu = {}
                pair = [base, row] if rnd % 2 == 0 else [row, base]
                for r in pair:
                    out = o.run(a.host, r, a.n)
                    if out["ok"] != a.n or out["rc"] != 0:
                        sys.exit(f"ab.py: {lib}, {r[0]}: {out['ok']} of {a.n} requests answered "
                                 f"200, exit {out['rc']}: {out['stderr']}")
                    cpu[r[0]] = out["cpu_s"] / a.n * 1e6
                diffs[lib].append(cpu[row[0]] - cpu[base[0]])
            print(f"round {rnd + 1}/{a.rounds}: " +
                  ", ".join(f"{lib}: {diffs[lib][-1]:+.2f}" for lib in libs), flush=True)
    finally:
        o.close()
        if not os.environ.get("CURLGUARD_BENCH_KEEP"):
            shutil.rmtree(o.d, ignore_errors=True)
    print(f"{a.host}, {row[1]}, over {base[1]} (CPU µs/request, median of {a.rounds} pairs):")
    for lib in libs:
        d = diffs[lib]
        print(f"  {lib}: {statistics.median(d):+.2f} (min {min(d):+.2f}, max {max(d):+.2f})")


if __name__ == "__main__":
    main()
