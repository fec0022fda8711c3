#!/usr/bin/env python3
"""bench/run.py - curlguard's benchmark harness; writes bench/RESULTS.md and bench/drill.png.

    make bench          # full: about 16 minutes on 2 cores (5. and 6. add about 3)
    make bench-quick    # reduced: about 2 minutes; CI may run it; writes
                        # build/bench/RESULTS-quick.md (never assert on its numbers)
    /usr/bin/python3 bench/run.py [--quick] [--build DIR] [--out FILE] [--only a,b,c]
                                  [--drill-failfast]
    # one or more scenarios (keys below), full size or --quick; a partial run writes
    # BUILD/bench/RESULTS-only.md (or RESULTS-quick.md) unless --out says otherwise:
    /usr/bin/python3 bench/run.py --quick --only drill,flaky,unknown-limit

Scenarios (issue 7; sizes in FULL / QUICK below), each contender side by side, the same seed
and load, a fresh mock provider per contender; ground truth from its ledger (GET /__summary):
  1. overhead  sequential keep-alive POSTs to a fast local server (nginx with fixed answers:
               1 KB JSON with usage, or a 50-event SSE stream; the mock if nginx is missing)
               from `curl -K` (many URLs) and from batch-host --threads 1 --no-lines: no
               preload; bench/forward.c (a forwarding interposer, built here), and with a
               fixed loop of the guard's instruction count (calibration); libcurlguard
               with CURLGUARD off; guard on, log off / log on / every feature / SSE; and the
               peers, nginx proxy_next_upstream and haproxy retries 3 in front of the server.
               Client CPU per request (client + proxy CPU for the peers; bench/runstat.c),
               medians of interleaved rounds; the increase over no preload from pairs (each
               run beside a run of its baseline: the median of the pairs' differences), vs
               issue 16's targets; each client as the scheduler places it and with every
               process pinned to one CPU; instructions
               (callgrind) and syscalls (strace -f -c) per request as the slope between two
               counts; max RSS, and the C host's at 100,000 requests (full run). A missing
               nginx, haproxy, valgrind, strace or cc: "not measured: X missing" (--without
               X pretends so).
  2. batch     N calls (distinct bodies) from 64 workers, `xargs -P 64 bench/curl-call` and
               batch-host --threads 64, against mock-provider --limit-rpm R with lognormal
               latency: a naive fixed 1 s retry loop; curl --retry 3 (and the same policy in
               the C host); the guard with CURLGUARD_RPM=R; and (issue 13) the guard under
               build/tests/cgmulti --concurrency 64: one process, one multi handle.
  3. drill     the same kind of batch (curl, and cgmulti's one multi) against a fault
               schedule: 503s, stalls longer
               than the client's timeout, a full outage, a slow period; requests during the
               outage and time to recover; drill.png: requests per 100 ms, per contender.
  4a. limiter  the cost of one admission (build/bench/limiter-bench), 1..64 processes.
  4b. accuracy N requests by curl workers through the guard with CURLGUARD_RPM=R (and TPM)
               against the mock enforcing the same limit.
  4c. report   bench/report-bench.py (curlguard report's throughput) if that file exists.
  5. flaky     (key flaky; issue 12) batch-host --threads 16, N calls against a provider whose
               every other call's first attempt gets a 503 and every resend a 200
               (mock-provider plan per_body): no retry; curl-style retry 3; the guard with the
               library's defaults (state file and log only). Success %, requests per call.
  6. unknown limit  (key unknown-limit; issue 12) scenario 2's batch with the guard not told
               the provider's limit (no CURLGUARD_RPM), curl and C host: completed, 429 share
               of the requests, wall vs N/R.
  Scenarios 3, 5 and 6 print issue 12's targets next to the figures (met / NOT met), in the
  summary and in their sections; --drill-failfast adds a guard with CURLGUARD_BREAKER_OPEN=fail
  to the drill (when README.md documents that variable).

Python 3 standard library only (gnuplot for the picture). Everything listens on 127.0.0.1.
Every server and worker is started in its own session and stopped (by its process group id)
at the end, also on failure or Ctrl-C; every batch has a time cap. A scenario that fails
prints why; the others still run. Numbers are reported, never asserted: the exit status is
1 only when a scenario could not run.
"""

import argparse
import datetime
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = "/usr/bin/python3"
CURL = "/usr/bin/curl"
MOCK = ROOT / "scripts" / "mock-provider"
LOGS_DIR = ROOT / "build" / "bench" / "logs"   # the guard contenders' usage logs, kept
CONTENDER_KEYS = ["curl-naive", "curl-retry", "curl-guard", "c-naive", "c-retry", "c-guard",
                  "multi-guard"]

_BATCH = {"workers": 64, "timeout_s": 10, "deadline_s": 120, "guard_attempts": 5, "naive_max": 5,
          "curl_retry": 3, "lat_median_ms": 1000, "lat_p99_ms": 5000, "lat_max_ms": 9000,
          "seed": 42, "bucket_ms": 100}
_BATCH_QUICK = dict(_BATCH, timeout_s=3, deadline_s=30, lat_median_ms=300, lat_p99_ms=1500,
                    lat_max_ms=2500)
_DRILL = {"p503": 0.05, "pstall": 0.02, "slow_x": 3, "recover_frac": 0.8,
          "contenders": ["curl-naive", "curl-retry", "curl-guard", "multi-guard"],
          # issue 12: the guard with the library's defaults
          "target_outage_requests": 40, "target_first_ok_s": 2.0}
# 5. flaky provider (issue 12): every other call's first attempt a 503, any retry a 200.
_FLAKY = {"workers": 16, "seed": 42, "bucket_ms": 100, "timeout_s": 10, "naive_max": 5,
          "curl_retry": 3, "contenders": ["c-plain", "c-retry", "c-guard-defaults"],
          # c-retry sleeps 1 s before each of its N/2 retries (N/32 s on 16 threads, with next
          # to no CPU): it runs alongside the others, against its own provider.
          "alongside": ["c-retry"],
          "target_success": 0.99, "target_per_call": 2.1}
# 6. unknown limit (issue 12): scenario 2's batch, the guard without CURLGUARD_RPM.
_UNKNOWN = {"contenders": ["curl-guard-norpm", "c-guard-norpm"], "target_429_share": 0.05,
            "target_wall_x": 1.3}


def _prefixed(prefix, d):
    return {prefix + k: v for k, v in d.items()}


FULL = {
    "quick": False,
    "micro_procs": [1, 2, 8, 64], "micro_modes": ["rpm", "rpm+tpm"], "micro_ms": 1000,
    "micro_runs": 3,
    "acc_rpm": 600, "acc_n": 300, "acc_workers": 32, "acc_per_proc": 5, "acc_margin": 0.01,
    "acc_tpm": 22800, "acc_tpm_n": 200,
    # 10000 requests a run, as issue 16 measures them: the client's start-up (curl: about
    # 20 ms of CPU, 2 ms more preloaded) is 0.2 µs a request of the increase, not 0.4 as at
    # 5000.  Pairs double the timed runs: the scenario takes about 10 minutes on 2 cores.
    "ovh_n": 10000, "ovh_runs": 5, "ovh_count_par": 2,
    "ovh_callgrind_n": (20, 220), "ovh_callgrind_hosts": ["curl", "C host"],
    "ovh_callgrind_rows": None, "ovh_strace_n": (20, 520),
    "ovh_strace_hosts": ["curl", "C host"], "ovh_strace_rows": None,
    "ovh_rss_n": 100000, "ovh_rss_rows": ["none", "all", "sse"],
    **_prefixed("batch_", dict(_BATCH, rpm=600, n=300, contenders=list(CONTENDER_KEYS))),
    # The drill's limit is above what 64 workers ask for, so that it measures the faults.
    **_prefixed("drill_", dict(_BATCH, **_DRILL, rpm=6000, n=1100, lat_median_ms=2000,
                               lat_p99_ms=8000, lat_max_ms=9500, outage=(20, 50), slow=(60, 70),
                               stall_ms=15000, cap_s=110, baseline_from=5, arrive_s=80)),
    **_prefixed("flaky_", dict(_FLAKY, n=3200, cap_s=150)),
    **_prefixed("unk_", dict(_BATCH, **_UNKNOWN, rpm=600, n=300)),
    "report_timeout_s": 240,
}
QUICK = {
    "quick": True,
    "micro_procs": [1, 8, 64], "micro_modes": ["rpm", "rpm+tpm"], "micro_ms": 200,
    "micro_runs": 1,
    "acc_rpm": 600, "acc_n": 60, "acc_workers": 32, "acc_per_proc": 5, "acc_margin": 0.01,
    "acc_tpm": 22800, "acc_tpm_n": 40,
    "ovh_n": 500, "ovh_runs": 2, "ovh_count_par": 2,     # pairs: twice the runs
    "ovh_callgrind_n": (10, 60), "ovh_callgrind_hosts": ["C host"],
    "ovh_callgrind_rows": ["none", "logon", "nginx"], "ovh_strace_n": (10, 210),
    "ovh_strace_hosts": ["curl", "C host"], "ovh_strace_rows": ["none", "logon", "nginx"],
    "ovh_rss_n": 5000, "ovh_rss_rows": ["none", "all"],
    **_prefixed("batch_", dict(_BATCH_QUICK, rpm=1200, n=60, contenders=list(CONTENDER_KEYS))),
    **_prefixed("drill_", dict(_BATCH_QUICK, **_DRILL, rpm=6000, n=250, lat_median_ms=1000,
                               lat_p99_ms=3000, lat_max_ms=3500, timeout_s=4, outage=(3, 8),
                               slow=(10, 12), stall_ms=5000, cap_s=20, baseline_from=1,
                               arrive_s=12)),
    **_prefixed("flaky_", dict(_FLAKY, n=320, cap_s=40)),
    **_prefixed("unk_", dict(_BATCH_QUICK, **_UNKNOWN, rpm=1200, n=60)),
    "report_timeout_s": 60,
}
# A small chat request, as an LLM batch would send (the guard parses it for model/tokens).
CHAT_BODY = json.dumps({
    "model": "gpt-4o-mini", "max_tokens": 16,
    "messages": [{"role": "system", "content": "You are a terse assistant."},
                 {"role": "user", "content": "Summarise the benefits of rate limiting in one line."}],
})


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- processes

class Procs:
    """Every child is started in a new session; stop_all() ends each by its group id."""

    def __init__(self):
        self.live = []

    def popen(self, argv, **kw):
        p = subprocess.Popen(argv, start_new_session=True, **kw)
        self.live.append(p)
        return p

    def stop(self, p, grace=3.0):
        if p.returncode is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        else:
            # The leader is gone; its group (xargs' workers) may not be.
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if p in self.live:
            self.live.remove(p)

    def stop_all(self):
        for p in list(self.live):
            self.stop(p)


PROCS = Procs()


def wait_rusage(p, timeout):
    """Wait for p (up to timeout s) -> (returncode, user+sys CPU seconds of p itself)."""
    rc, ru = wait_full(p, timeout)
    return rc, ru.ru_utime + ru.ru_stime


def plain_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CURLGUARD") and k != "LD_PRELOAD"
           and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Mock:
    def __init__(self, tmp, *args):
        self.dir = Path(tempfile.mkdtemp(prefix="mock-", dir=tmp))
        port_file = self.dir / "port"
        self.err = open(self.dir / "stderr", "wb")
        self.proc = PROCS.popen([PYTHON, str(MOCK), "--quiet", "--port", "0", "--port-file",
                                 str(port_file), *args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=self.err, env=plain_env())
        deadline = time.monotonic() + 10
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("mock-provider exited at start: " + self._tail())
            try:
                self.port = int(port_file.read_text().strip())
                break
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("mock-provider did not start within 10 s")
            time.sleep(0.02)
        self.base = f"http://127.0.0.1:{self.port}"

    def _tail(self):
        try:
            return (self.dir / "stderr").read_text(errors="replace")[-1500:].strip()
        except OSError:
            return "(no stderr)"

    def get(self, path):
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(self.base + path, timeout=30) as r:
            return json.load(r)

    def post(self, path):
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        req = urllib.request.Request(self.base + path, data=b"", method="POST")
        with opener.open(req, timeout=30) as r:
            return json.load(r)

    def stop(self):
        PROCS.stop(self.proc)
        self.err.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def write_curl_config(path, urls):
    with open(path, "w") as f:
        for u in urls:
            f.write(f'url = "{u}"\noutput = "/dev/null"\n')


def read_log(path):
    recs = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return recs


def pct(values, q):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q / 100 * (len(v) - 1))))]


# ---------------------------------------------------------------- a. limiter

def scenario_limiter(cfg, build, tmp):
    exe = build / "bench" / "limiter-bench"
    if not os.access(exe, os.X_OK):
        raise RuntimeError("bench/limiter-bench is missing from the build directory (make bench)")
    rows = []
    for mode in cfg["micro_modes"]:
        for n in cfg["micro_procs"]:
            state = f"/dev/shm/curlguard-bench-{os.getpid()}.state"
            argv = [str(exe), "--procs", str(n), "--ms", str(cfg["micro_ms"]), "--runs",
                    str(cfg["micro_runs"]), "--mode", mode, "--state", state]
            log(f"limiter: {mode}, {n} process(es)")
            p = PROCS.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                out, err = p.communicate(timeout=60 + cfg["micro_runs"] * (cfg["micro_ms"] / 1000 + 2))
            except subprocess.TimeoutExpired:
                PROCS.stop(p)
                raise RuntimeError(f"limiter-bench {mode} x{n} timed out")
            finally:
                try:
                    os.unlink(state)
                except OSError:
                    pass
            if p in PROCS.live:
                PROCS.live.remove(p)
            if p.returncode != 0:
                raise RuntimeError(f"limiter-bench {mode} x{n} failed ({p.returncode}): {err.strip()}")
            res = json.loads(out)
            res["argv"] = argv
            rows.append(res)
    return {"rows": rows, "cfg": {k: cfg[k] for k in ("micro_ms", "micro_runs")}}


def report_limiter(r):
    out = [f"One admission = `cg_state_now()` + `cg_limiter_reserve()` on a mapped state file "
           f"(`build/bench/limiter-bench`). Each row: the processes hammer one pool for "
           f"{r['cfg']['micro_ms']} ms, all starting and stopping at the same instant; medians of "
           f"{r['cfg']['micro_runs']} runs. *ns per acquire* is what one admission takes as a "
           f"process sees it (window / its admissions, median of the processes: with more "
           f"processes than cores it includes waiting for a core); *CPU ns per acquire* is CPU "
           f"time per admission (all processes); *acquires/s* is all processes together.",
           "",
           "| limits | processes | ns per acquire | CPU ns per acquire | acquires/s (total) | runs (acquires/s) | unaccounted |",
           "|---|---:|---:|---:|---:|---|---:|"]
    for row in r["rows"]:
        m = row["median"]
        runs = ", ".join(f"{x['acq_per_s'] / 1e6:.1f}M" for x in row["runs"])
        per_run = [x["unaccounted_requests"] + x["unaccounted_tokens"] for x in row["runs"]]
        lost = f"{sum(per_run)}" + (f" ({', '.join(map(str, per_run))})" if any(per_run) else "")
        out.append(f"| {row['mode']} | {row['procs']} | {m['ns_per_acquire']:.0f} | "
                   f"{m['cpu_ns_per_acquire']:.0f} | {m['acq_per_s'] / 1e6:.2f} M | {runs} | {lost} |")
    out += ["", "`rpm`: one GCRA word (one compare-and-swap) per admission; `rpm+tpm`: two "
            "(requests, then 100 tokens). The limits (6000 rpm, 600000 tpm: a 10 ms interval "
            "each) keep the queue of reservations ahead of the clock, so every admission takes "
            "the same path, and let the run check its accounting: *unaccounted* (all runs) is "
            "admissions minus what the shared GCRA words moved by (admissions x 10 ms), per run "
            "when not 0; 0 means no reservation was lost to a race (`cg__reserve_one` lets a "
            "call go unreserved after losing `CG_CAS_TRIES` races in a row)."]
    return out


# ---------------------------------------------------------------- b. accuracy

def run_accuracy_batch(tmp, name, mock, n, workers, per_proc, guard_env, build, timeout):
    """N requests by curl processes of per_proc requests each, `workers` at a time; through
    `curlguard run` with guard_env (CURLGUARD_RPM, ...) unless it is None."""
    d = Path(tempfile.mkdtemp(prefix=name + "-", dir=tmp))
    files = []
    for w in range((n + per_proc - 1) // per_proc):
        urls = [f"{mock.base}/v1/chat/completions?b={name}&w={w}&i={i}"
                for i in range(w * per_proc, min(n, (w + 1) * per_proc))]
        f = d / f"w{w:04d}.curl"
        write_curl_config(f, urls)
        files.append(str(f))
    (d / "list").write_text("\n".join(files) + "\n")
    state = f"/dev/shm/curlguard-bench-{os.getpid()}-{name}.state"
    logf = d / "usage.jsonl"
    curl = [CURL, "-q", "-sS", "-w", "%{http_code}\\n", "-H", "Content-Type: application/json",
            "--data-binary", CHAT_BODY, "-K"]
    if guard_env is not None:
        env = plain_env(CURLGUARD_STATE=state, CURLGUARD_LOG=logf, **guard_env)
        cmd = [str(build / "curlguard"), "run", "--"] + curl
        try:
            os.unlink(state)
        except OSError:
            pass
    else:
        env = plain_env()
        cmd = curl
    argv = ["xargs", "-P", str(workers), "-n", "1", "-a", str(d / "list")] + cmd
    seq0 = mock.get("/__stats")["requests"]
    try:
        with open(d / "stdout", "wb") as out, open(d / "stderr", "wb") as err:
            t0 = time.monotonic()
            p = PROCS.popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env)
            try:
                rc, _ = wait_rusage(p, timeout)
            finally:
                PROCS.stop(p)             # anything left in its process group
            wall = time.monotonic() - t0
    finally:
        try:
            os.unlink(state)
        except OSError:
            pass
    codes = {}
    for line in (d / "stdout").read_text(errors="replace").split():
        codes[line] = codes.get(line, 0) + 1
    stats = mock.get(f"/__stats?since={seq0}")
    recs = read_log(logf) if guard_env is not None else []
    errtext = (d / "stderr").read_text(errors="replace").strip().splitlines()
    return {"name": name, "guard_env": guard_env, "n": n, "wall_s": wall, "xargs_rc": rc,
            "codes": codes, "stats": stats, "records": recs, "stderr": errtext[-5:],
            "procs": len(files), "argv": argv}


def mock_module():
    """scripts/mock-provider as a module: its token estimate is the guard's."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("mock_provider", str(MOCK))
    spec = importlib.util.spec_from_loader("mock_provider", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def scenario_accuracy(cfg, build, tmp):
    rpm, n, workers, per_proc = cfg["acc_rpm"], cfg["acc_n"], cfg["acc_workers"], cfg["acc_per_proc"]
    tpm, tn = cfg["acc_tpm"], cfg["acc_tpm_n"]
    for f in (build / "curlguard", build / "libcurlguard.so"):
        if not f.exists():
            raise RuntimeError(f"{f.name} is missing from the build directory (make)")
    cost = mock_module().guard_token_estimate(CHAT_BODY.encode(), len(CHAT_BODY))
    margin = cfg["acc_margin"]
    out = {"rpm": rpm, "n": n, "workers": workers, "per_proc": per_proc, "tpm": tpm,
           "tpm_n": tn, "cost": cost, "margin": margin, "rows": []}
    # (label, mock args, guard env or None, N, ideal s, limit kind)
    rows = [
        (f"guard, RPM {rpm:g} (= the provider's)", ["--limit-rpm", str(rpm)],
         {"CURLGUARD_RPM": rpm}, n, n / rpm * 60, "rpm"),
        (f"guard, TPM {tpm:g} (= the provider's; no RPM)", ["--limit-tpm", str(tpm)],
         {"CURLGUARD_TPM": tpm}, tn, tn * cost / tpm * 60, "tpm"),
    ]
    for i, (label, margs, genv, nn, ideal, kind) in enumerate(rows):
        log(f"accuracy: {label}: {nn} requests, {workers} curl workers (ideal {ideal:.0f} s)")
        try:
            with Mock(tmp, *margs) as mock:
                b = run_accuracy_batch(tmp, f"b{i}", mock, nn, workers, per_proc, genv, build,
                                       timeout=ideal * 4 + 60)
        except Exception as e:
            if i == 0:
                raise
            log(f"accuracy: {label}: FAILED: {e}")
            b = {"error": f"{type(e).__name__}: {e}"}
        b.update(label=label, ideal_s=ideal, kind=kind, n=nn,
                 burst=max(1.0, rpm / 60) if kind == "rpm" else max(1.0, tpm / 60) / cost)
        out["rows"].append(b)
    return out


def report_accuracy(r):
    rpm, tpm, cost = r["rpm"], r["tpm"], r["cost"]
    burst = max(1.0, rpm / 60)
    tburst = max(1.0, tpm / 60)
    lim1s, lim100 = rpm / 60 + burst, rpm / 60 * 0.1 + burst
    tlim1s = (tpm / 60 + tburst) / cost
    tlim100 = (tpm / 60 * 0.1 + tburst) / cost
    first = r["rows"][0]
    out = [f"N requests (`POST /v1/chat/completions`, the same {len(CHAT_BODY)}-byte JSON body: "
           f"{cost} tokens by the guard's estimate) by unmodified `{CURL}` processes of "
           f"{r['per_proc']} requests each (`curl -K`), {r['workers']} at a time "
           f"(`xargs -P {r['workers']}`), against `scripts/mock-provider --limit-rpm {rpm:g}`: a "
           f"token bucket of {burst:g} requests refilled at {rpm:g}/min (the guard's default "
           f"burst), refused requests count too. Every worker runs under "
           f"`curlguard run` with one shared `CURLGUARD_STATE` (defaults otherwise: 3 attempts). "
           f"Such a bucket admits at most {lim1s:g} requests in any 1 s window and {lim100:g} in "
           f"any 100 ms. The last row limits tokens instead: `--limit-tpm {tpm:g}` (bucket "
           f"{tburst:g} tokens, {tburst / cost:.1f} requests; at most {tlim1s:.1f} requests in 1 s). "
           f"The mock charges a request its estimate when it arrives (characters / 4 + "
           f"`max_tokens`, as providers do) and gives nothing back when the answer uses fewer "
           f"tokens.",
           "",
           "| batch | N | wall s | ideal N/R s | vs N/R | vs (N-burst)/R | 429s sent by the mock | final answers 200 / 429 | requests during a Retry-After | retries by the guard | busiest 1 s: admitted (all) / limit | busiest 100 ms: admitted (all) / limit |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for b in r["rows"]:
        if "error" in b:
            out.append(f"| {b['label']} | {b['n']} | failed: {b['error']} |" + " |" * 9)
            continue
        s = b["stats"]
        l1, l100 = (lim1s, lim100) if b["kind"] == "rpm" else (tlim1s, tlim100)
        retries = sum(1 for x in b["records"] if x.get("decision") == "retry") \
            if b["guard_env"] is not None else "-"
        out.append(f"| {b['label']} | {b['n']} | {b['wall_s']:.2f} | {b['ideal_s']:.2f} | "
                   f"{(b['wall_s'] / b['ideal_s'] - 1) * 100:+.1f} % | "
                   f"{(b['wall_s'] / (b['ideal_s'] * (1 - b['burst'] / b['n'])) - 1) * 100:+.1f} % | "
                   f"{s['429s']} | "
                   f"{b['codes'].get('200', 0)} / {b['codes'].get('429', 0)} | "
                   f"{s['during_retry_after']} | {retries} | "
                   f"{s['peak_admitted_per_1s']} ({s['peak_per_1s']}) / {l1:.4g} | "
                   f"{s['peak_admitted_per_100ms']} ({s['peak_per_100ms']}) / {l100:.4g} |")
    out += ["", "The same batch without the guard is in scenario 2. *N/R* is N / limit (for the TPM row, "
            "N x tokens / TPM); the first burst (10 requests) may go at once, so a perfectly "
            "paced batch takes (N - burst) / R plus one request's latency, slightly less than "
            "N / R. *requests during a Retry-After*: "
            "requests that reached the mock while a `Retry-After` it had sent (to any worker) "
            "was still running."]
    if "error" not in first:
        recs = first["records"]
        outcomes = {}
        for x in recs:
            outcomes[x.get("outcome")] = outcomes.get(x.get("outcome"), 0) + 1
        q = [x.get("queue_ms") or 0 for x in recs]
        s = first["stats"]
        span = (s["last_t"] or 0) - (s["first_t"] or 0)
        out += ["", f"First row, in detail: the mock saw {s['requests']} requests from "
                f"{first['procs']} curl processes, {span:.2f} s from the first to the last "
                f"arrival; the guard wrote {len(recs)} records: outcomes "
                f"{json.dumps(outcomes, sort_keys=True)}; queue_ms median {pct(q, 50)}, p90 "
                f"{pct(q, 90)}, max {max(q) if q else None}."]
    for b in r["rows"]:
        if "error" not in b and b["stderr"]:
            out += ["", f"stderr of `{b['label']}` (last lines): `" + " / ".join(b["stderr"]) + "`"]
    return out


# ---------------------------------------------------------------- 1. overhead

# Tools scenario 1 uses when they are there; a missing one gives "not measured: X missing".
OVH_TOOLS = {"nginx": "/usr/sbin/nginx", "haproxy": "/usr/sbin/haproxy",
             "valgrind": "/usr/bin/valgrind", "strace": "/usr/bin/strace", "cc": "cc"}
# The calibration row's loop (bench/forward.c FORWARD_LOOP): rounds before and after each
# transfer, 3 instructions a round: about as many instructions as the guard's, log off.
OVH_LOOP = 3500
# The footprint row's straight-line code (bench/forward.c FORWARD_WIDE_LINES): distinct 64-byte
# lines of code run once a request, about as many as the guard's with the log off.
OVH_WIDE = 800
# The branch row's taken jumps (bench/forward.c FORWARD_JUMPS_N): distinct jumps, each taken
# once a request, 4 to a 64-byte line (so also OVH_JUMPS / 4 code lines).
OVH_JUMPS = 1600
# (key, label, guard environment kind, answer, proxy). The increase of each row is over its
# baseline: "none-sse" for the SSE row (the same answer without the guard), "none" otherwise.
OVH_ROWS = [
    ("none", "no preload", None, "json", None),
    ("forward", "forwarding interposer (`bench/forward.c`)", "forward", "json", None),
    ("loop", f"forwarding interposer + {6 * OVH_LOOP / 1000:g}k instructions (calibration)",
     "loop", "json", None),
    ("wide", f"forwarding interposer + {OVH_WIDE} code lines (footprint calibration)",
     "wide", "json", None),
    ("jumps", f"forwarding interposer + {OVH_JUMPS} taken branches in {OVH_JUMPS // 4} code "
     "lines (branch calibration)", "jumps", "json", None),
    ("off", "libcurlguard preloaded, `CURLGUARD` off", "off", "json", None),
    ("logoff", "guard on, log off", "logoff", "json", None),
    ("logon", "guard on, log on", "logon", "json", None),
    ("all", "guard on, every feature, log on", "all", "json", None),
    ("none-sse", "no preload, SSE answer", None, "sse", None),
    ("sse", "guard on, log on, SSE answer", "logon", "sse", None),
    ("nginx", "nginx `proxy_next_upstream` (client + proxy)", None, "json", "nginx"),
    ("haproxy", "haproxy `retries 3` (client + proxy)", None, "json", "haproxy"),
]
OVH_BASE = {"sse": "none-sse"}
OVH_BASELINES = ("none", "none-sse")
# Issue 16's targets: CPU µs per request over the baseline (the paired increase); "noise" =
# at most the spread (max - min) over the rounds of the differences of the null pairs (a
# no-preload run beside another).
OVH_TARGETS = {"off": "noise", "logoff": 5.0, "logon": 10.0, "all": 15.0, "sse": 15.0}
OVH_GUARD_ROW = "logon"     # "the guard's" added CPU in the proxies' ratio
OVH_SSE_EVENTS = 50
# Each client twice: as the scheduler places it (2 CPUs: client and server on either), and with
# the client, the server and the proxy pinned to one CPU ("one CPU"): no wakeup of an idle CPU
# between a request and its answer, so the figure is nearer the work each process does (the
# fast server is pinned only when it is nginx, not the mock).
OVH_ONE_CPU = ", one CPU"
OVH_HOSTS = ["curl", "C host", "curl" + OVH_ONE_CPU, "C host" + OVH_ONE_CPU]


def ovh_host(h):
    """"C host, one CPU" -> ("C host", True): the client, and whether the row is pinned."""
    return (h[:-len(OVH_ONE_CPU)], True) if h.endswith(OVH_ONE_CPU) else (h, False)


def ovh_pin(cpu):
    """Popen's preexec_fn that pins the child to `cpu`, or None when cpu is None."""
    return None if cpu is None else lambda: os.sched_setaffinity(0, {cpu})


def ovh_tool(cfg, name):
    """Path of a tool scenario 1 uses, or None (missing, or named in --without)."""
    import shutil
    if name in cfg.get("without", ()):
        return None
    path = OVH_TOOLS[name]
    if os.path.isabs(path):
        return path if os.access(path, os.X_OK) else shutil.which(os.path.basename(path))
    return shutil.which(path)


def guard_all_env(lib, state, logf):
    """The guard with every feature on and the log on (limits far above the load)."""
    return {"LD_PRELOAD": lib, "CURLGUARD": 1, "CURLGUARD_LOG": logf, "CURLGUARD_STATE": state,
            "CURLGUARD_RPM": "100000000", "CURLGUARD_TPM": "1000000000000",
            "CURLGUARD_MAX_INFLIGHT": 64, "CURLGUARD_REQUEST_ID_HEADER": "Idempotency-Key"}


def ovh_answers():
    """The fast server's answers: an OpenAI chat completion of about 1 KB with usage, and an
    OpenAI stream of OVH_SSE_EVENTS events (role, words, finish; usage in the last) + [DONE]."""
    words = ("rate limiting keeps a shared quota fair so that one batch cannot starve the "
             "others and retries stay within what the provider accepts").split()
    usage = {"prompt_tokens": 27, "completion_tokens": 0, "total_tokens": 0,
             "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
             "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                           "accepted_prediction_tokens": 0,
                                           "rejected_prediction_tokens": 0}}

    def body(k):
        u = dict(usage, completion_tokens=k, total_tokens=27 + k)
        return json.dumps({
            "id": "chatcmpl-bench0000000000000000", "object": "chat.completion",
            "created": 1764547200, "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": " ".join(
                words[i % len(words)] for i in range(k)), "refusal": None, "annotations": []},
                "logprobs": None, "finish_reason": "stop"}],
            "usage": u, "service_tier": "default", "system_fingerprint": "fp_bench"}) + "\n"

    k = 1
    while len(body(k + 1)) <= 1024:
        k += 1
    base = {"id": "chatcmpl-bench0000000000000000", "object": "chat.completion.chunk",
            "created": 1764547200, "model": "gpt-4o-mini-2024-07-18",
            "service_tier": "default", "system_fingerprint": "fp_bench"}

    def ev(obj):
        return "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n"

    def chunk(delta, finish=None):
        return ev(dict(base, choices=[{"index": 0, "delta": delta, "logprobs": None,
                                       "finish_reason": finish}], usage=None))

    nwords = OVH_SSE_EVENTS - 3
    events = [chunk({"role": "assistant", "content": "", "refusal": None})]
    events += [chunk({"content": (" " if i else "") + words[i % len(words)]})
               for i in range(nwords)]
    events.append(chunk({}, "stop"))
    events.append(ev(dict(base, choices=[], usage=dict(usage, completion_tokens=nwords,
                                                       total_tokens=27 + nwords))))
    sse = "".join(events) + "data: [DONE]\n\n"
    return body(k), sse


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def port_open(port):
    import socket
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


class OvhServer:
    """A process listening on 127.0.0.1:port: the fast server (nginx `return 200`) or a proxy
    (nginx, haproxy), single-process, in the foreground, in its own session; optionally under
    a wrapper (valgrind, strace). stop() -> user+sys CPU seconds of the process (wait4)."""

    def __init__(self, d, kind, exe, port, upstream=None, answers=None, wrap=None, env=None,
                 cpu=None):
        self.dir = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=d))
        self.kind, self.port = kind, port
        if kind == "haproxy":
            conf = self.dir / "haproxy.cfg"
            conf.write_text(
                "global\n  nbthread 1\n  maxconn 256\n"
                f"  pidfile {self.dir}/haproxy.pid\n"
                "defaults\n  mode http\n  timeout connect 5s\n  timeout client 60s\n"
                "  timeout server 60s\n  retries 3\n"
                "  retry-on conn-failure empty-response response-timeout 502 503 504\n"
                "  option http-keep-alive\n"
                f"frontend fe\n  bind 127.0.0.1:{port}\n  default_backend be\n"
                f"backend be\n  http-reuse always\n  server s1 127.0.0.1:{upstream}\n")
            argv = [exe, "-f", str(conf), "-db"]
        else:
            for sub in ("body", "proxy", "fcgi", "uwsgi", "scgi", "logs"):
                (self.dir / sub).mkdir()
            if kind == "nginx":      # the retrying proxy
                site = (
                    # The same upstream four times: proxy_next_upstream retries go to "the
                    # next" server; with one entry there would be no retry at all.
                    "  upstream up {\n" + f"    server 127.0.0.1:{upstream} max_fails=0;\n" * 4
                    + "    keepalive 8;\n  }\n"
                    f"  server {{\n    listen 127.0.0.1:{port};\n    location / {{\n"
                    "      proxy_pass http://up;\n      proxy_http_version 1.1;\n"
                    "      proxy_set_header Connection \"\";\n"
                    "      proxy_next_upstream error timeout http_429 http_502 http_503 "
                    "http_504 non_idempotent;\n      proxy_next_upstream_tries 4;\n    }\n  }\n")
            else:                    # the fast server: port = (json port, sse port)
                # A static file per answer (`return 200 '...'` takes at most 4 KB); a POST to
                # a static file is a 405, turned into the file with a 200 by error_page.
                site = ""
                for p, ct, name, text in ((port[0], "application/json", "json", answers[0]),
                                          (port[1], "text/event-stream", "sse", answers[1])):
                    f = self.dir / "www" / name / "v1" / "chat" / "completions"
                    f.parent.mkdir(parents=True)
                    f.write_text(text)
                    site += (f"  server {{\n    listen 127.0.0.1:{p};\n"
                             f"    root {self.dir / 'www' / name};\n"
                             f"    location / {{\n      default_type {ct};\n"
                             "      error_page 405 =200 $uri;\n    }\n  }\n")
            conf = self.dir / "nginx.conf"
            conf.write_text(
                "worker_processes 1;\nmaster_process off;\ndaemon off;\n"
                f"error_log {self.dir}/error.log warn;\npid {self.dir}/nginx.pid;\n"
                "events { worker_connections 256; }\nhttp {\n  access_log off;\n"
                + "".join(f"  {t}_temp_path {self.dir}/{s};\n" for t, s in (
                    ("client_body", "body"), ("proxy", "proxy"), ("fastcgi", "fcgi"),
                    ("uwsgi", "uwsgi"), ("scgi", "scgi")))
                + "  keepalive_requests 10000000;\n  keepalive_timeout 300s;\n" + site + "}\n")
            argv = [exe, "-e", str(self.dir / "error.log"), "-p", str(self.dir), "-c", str(conf)]
        self.wrap = wrap
        if wrap and wrap[0] == "callgrind":
            argv = [wrap[1], "--tool=callgrind", "-q"] + CALLGRIND_OPTS + \
                [f"--callgrind-out-file={wrap[2]}"] + argv
        elif wrap and wrap[0] == "strace":
            argv = [wrap[1], "-f", "-c", "-o", str(wrap[2])] + argv
        self.err = open(self.dir / "stderr", "wb")
        self.proc = PROCS.popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=self.err, env=env or plain_env(),
                                preexec_fn=ovh_pin(cpu))
        deadline = time.monotonic() + (60 if wrap else 10)
        ports = port if isinstance(port, tuple) else (port,)
        while not all(port_open(p) for p in ports):
            why = f"{kind} exited at start" if self.proc.poll() is not None else \
                f"{kind} did not listen within {60 if wrap else 10} s" \
                if time.monotonic() > deadline else None
            if why:
                PROCS.stop(self.proc)
                self.err.close()
                raise RuntimeError(f"{why}: {self.tail()}")
            time.sleep(0.02)

    def tail(self):
        text = ""
        for name in ("stderr", "error.log"):
            try:
                text += (self.dir / name).read_text(errors="replace")
            except OSError:
                pass
        return " / ".join(text.strip().splitlines()[-4:]) or "(nothing on stderr)"

    def stop(self):
        """SIGTERM to the server itself (under strace: strace's child, so that strace writes
        its count) -> user+sys CPU seconds of the process started (wait4)."""
        pid = self.proc.pid
        target = pid
        if self.wrap and self.wrap[0] == "strace":
            target = child_of(pid) or pid
        try:
            os.kill(target, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            _, ru = wait_full(self.proc, 60)
        finally:
            PROCS.stop(self.proc)
            self.err.close()
        return ru.ru_utime + ru.ru_stime


def ovh_start(make, tries=3):
    """make() a server; again on a new port if it fails (a free port taken in between)."""
    for i in range(tries):
        try:
            return make()
        except RuntimeError:
            if i == tries - 1:
                raise


def child_of(pid):
    """A child process of pid, or None."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if kids:
            return int(kids[0])
    except (OSError, ValueError):
        pass
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and \
                    int(d.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                return int(d.name)
        except (OSError, ValueError, IndexError):
            pass
    return None


def wait_full(p, timeout):
    """Wait for p (up to timeout s; then its group is killed) -> (returncode, rusage)."""
    expired = []

    def kill():
        expired.append(1)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout, kill)
    timer.start()
    try:
        _, status, ru = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p in PROCS.live:
        PROCS.live.remove(p)
    if expired:
        raise TimeoutError(f"{os.path.basename(p.args[0])} did not finish within {timeout:.0f} s")
    return p.returncode, ru


def callgrind_total(path):
    try:
        for line in open(path):
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


# Scenario 1's callgrind runs: per instruction (code lines), with jumps (taken branches),
# every position absolute (callgrind_lines and callgrind_jumps read "0x..." addresses).
CALLGRIND_OPTS = ["--dump-instr=yes", "--collect-jumps=yes", "--compress-pos=no"]


def callgrind_object(line, obs, ob):
    """An "ob=" or "cob=" line of a callgrind output: remembers a name given with its number
    in `obs` ("(N) name" once, then "(N)": the format's name compression) and returns the
    object the lines after it are in (a "cob=" line, a call's callee, leaves `ob` as it is)."""
    ref, _, name = line.split("=", 1)[1].strip().partition(" ")
    if name:
        obs[ref] = name
    return obs.get(ref, ref) if line[0] == "o" else ob


def callgrind_jumps(path):
    """Taken branches per branch instruction in a callgrind output made with CALLGRIND_OPTS:
    {(object, address): times taken}, or None when it cannot be read.  A "jump=N TARGET" line
    (N: times taken) or "jcnd=T/E TARGET" line (a conditional branch taken T times of E) is
    followed by the line of the branch instruction itself (valgrind's manual, "Callgrind
    Format Specification": jump, jcnd).  Calls are not counted: a call's target is predicted
    from the return stack and the call site alike, and every row makes about as many."""
    obs, ob, pend, out = {}, None, None, {}
    try:
        for line in open(path):
            if line.startswith("jump="):
                pend = int(line[5:].split()[0])
            elif line.startswith("jcnd="):
                pend = int(line[5:].split()[0].split("/")[0])
            elif line.startswith("0x"):
                if pend is not None:
                    k = (ob, int(line.split()[0], 16))
                    out[k] = out.get(k, 0) + pend
                    pend = None
            elif line.startswith(("ob=", "cob=")):
                ob = callgrind_object(line, obs, ob)
            elif line.startswith("calls="):
                pend = None
    except (OSError, ValueError, IndexError):
        return None
    return out


def callgrind_lines(path):
    """Instructions executed per 64-byte line of code in a `callgrind --dump-instr=yes` output:
    {(object, address // 64): Ir}, or None when it cannot be read. Follows the format's name
    compression ("(N) name" once, then "(N)") and relative addresses ("+N", "-N", "*"); the
    line after "calls=" is a call's inclusive cost, not the caller's own, and is skipped
    (valgrind's manual, "Callgrind Format Specification")."""
    obs, ob, addr, skip, out = {}, None, 0, False, {}
    try:
        for line in open(path):
            c = line[:1]
            if c in "+-*0123456789":
                f = line.split()
                a = f[0]
                if a.startswith("0x"):
                    addr = int(a, 16)
                elif c == "+":
                    addr += int(a[1:])
                elif c == "-":
                    addr -= int(a[1:])
                if skip:
                    skip = False
                elif len(f) >= 3:
                    k = (ob, addr >> 6)
                    out[k] = out.get(k, 0) + int(f[-1])
            elif line.startswith(("ob=", "cob=")):
                ob = callgrind_object(line, obs, ob)
            elif line.startswith("calls="):
                skip = True
    except (OSError, ValueError):
        return None
    return out


def code_lines(a, b, n):
    """Lines of code run on every request: those whose instruction count grows by at least
    0.9 a request from the smaller run `a` to the larger `b` (`n` requests more).  With
    callgrind_jumps' counts: the branches taken on every request."""
    return sum(1 for k, v in b.items() if v - a.get(k, 0) >= 0.9 * n)


def strace_total(path):
    """Total calls of `strace -c -o FILE`: the "total" line (% time, seconds, usecs/call,
    calls, [errors,] total)."""
    try:
        for line in open(path):
            f = line.split()
            if f and f[-1] == "total":
                return int(f[3])
    except (OSError, ValueError, IndexError):
        pass
    return None


class Overhead:
    """Scenario 1's fixtures: the fast server, the clients' argv, one run of one row."""

    def __init__(self, cfg, build, tmp):
        self.cfg, self.build = cfg, build
        self.d = Path(tempfile.mkdtemp(prefix="overhead-", dir=tmp))
        self.lib = build / "libcurlguard.so"
        self.host_exe = build / "bench" / "batch-host"
        for f in (self.lib, self.host_exe):
            if not f.exists():
                raise RuntimeError(f"{f.name} is missing from the build directory (make bench)")
        self.tools = {t: ovh_tool(cfg, t) for t in OVH_TOOLS}
        self.state = f"/dev/shm/curlguard-bench-{os.getpid()}-overhead.state"
        # The CPU of the "one CPU" rows: the highest this process may use (CPU 0 usually
        # takes more of the machine's interrupts).
        self.cpus = os.sched_getaffinity(0)
        self.cpu = max(self.cpus)
        self.skip = {}          # row key -> why it is not measured
        # Built here: the forwarding interposer (a row) and runstat (the client's own CPU and
        # max RSS; without it CPU comes from this process's wait4 and RSS is not measured).
        self.forward = self.cc("forward.so", "forward.c", "-shared", "-fPIC",
                               f"-DFORWARD_WIDE_LINES={OVH_WIDE}",
                               f"-DFORWARD_JUMPS_N={OVH_JUMPS}", "-ldl")
        self.runstat = self.cc("runstat", "runstat.c")
        if not isinstance(self.forward, Path):
            self.skip["forward"] = self.skip["loop"] = self.skip["wide"] = \
                self.skip["jumps"] = self.forward
        elif platform.machine() != "x86_64":
            self.skip["wide"] = "not measured: the footprint block is x86-64 code"
            self.skip["jumps"] = "not measured: the branch block is x86-64 code"
        self.rss_missing = None if isinstance(self.runstat, Path) else self.runstat
        for proxy in ("nginx", "haproxy"):
            if not self.tools[proxy]:
                self.skip[proxy] = f"not measured: {proxy} missing"
        self.json_body = CHAT_BODY
        self.sse_body = json.dumps(dict(json.loads(CHAT_BODY), stream=True,
                                        stream_options={"include_usage": True}))
        self.answers = ovh_answers()
        self.server = self.mock = None
        self.confs = {}
        self.serial = 0
        self.lock = threading.Lock()    # runs of the counting phase share confs and serial

    def cc(self, out, src, *flags):
        """Build bench/SRC -> Path, or the reason it is not measured (a str)."""
        if not self.tools["cc"]:
            return "not measured: cc missing"
        p = subprocess.run([self.tools["cc"], "-O2", "-o", str(self.d / out),
                            str(ROOT / "bench" / src), *flags], capture_output=True, text=True)
        if p.returncode:
            return f"not measured: bench/{src} did not build: " + \
                " / ".join(p.stderr.strip().splitlines()[-2:])
        return self.d / out

    def start(self):
        if self.tools["nginx"]:
            self.server = ovh_start(lambda: OvhServer(
                self.d, "fast", self.tools["nginx"], (free_port(), free_port()),
                answers=self.answers))
            self.bases = {a: f"http://127.0.0.1:{p}" for a, p in zip(("json", "sse"),
                                                                      self.server.port)}
            self.server_text = (
                "nginx (one process) answering every `POST` with a static file "
                f"(`error_page 405 =200 $uri`): a {len(self.answers[0])}-byte OpenAI chat "
                "completion with `usage` "
                f"(`application/json`), or, for the SSE rows, an OpenAI stream of "
                f"{OVH_SSE_EVENTS} events ({len(self.answers[1])} bytes, `text/event-stream`, "
                "usage in the last event, then `data: [DONE]`)")
        else:
            self.mock = Mock(self.d)
            self.bases = {"json": self.mock.base, "sse": self.mock.base}
            self.server_text = (
                "**nginx missing**: the mock provider (Python, no limit, no latency, no "
                "faults) instead; its own time per request is in the wall column")

    def close(self):
        if self.server:
            self.server.stop()
        if self.mock:
            self.mock.stop()
        try:
            os.unlink(self.state)
        except OSError:
            pass

    def env(self, kind, logf, state=None):
        lib, state = str(self.lib), state or self.state
        return {None: {}, "forward": {"LD_PRELOAD": str(self.forward)},
                "loop": {"LD_PRELOAD": str(self.forward), "FORWARD_LOOP": OVH_LOOP},
                "wide": {"LD_PRELOAD": str(self.forward), "FORWARD_WIDE": 1},
                "jumps": {"LD_PRELOAD": str(self.forward), "FORWARD_JUMPS": 1},
                "off": {"LD_PRELOAD": lib},
                "logoff": {"LD_PRELOAD": lib, "CURLGUARD": 1, "CURLGUARD_LOG": "off",
                           "CURLGUARD_STATE": state},
                "logon": {"LD_PRELOAD": lib, "CURLGUARD": 1, "CURLGUARD_LOG": logf,
                          "CURLGUARD_STATE": state},
                "all": guard_all_env(lib, state, logf)}[kind]

    def argv(self, host, base, answer, n):
        host = ovh_host(host)[0]
        url = f"{base}/v1/chat/completions"
        body = self.sse_body if answer == "sse" else self.json_body
        if host == "curl":
            with self.lock:
                conf = self.confs.get((base, n))
                if not conf:
                    conf = self.d / f"urls-{len(self.confs)}.curl"
                    # Distinct URLs: identical calls would be marked as host retries.
                    write_curl_config(conf, [f"{url}?i={i}" for i in range(n)])
                    self.confs[(base, n)] = conf
            return [CURL, "-q", "-sS", "-w", "%{http_code}\\n", "-H",
                    "Content-Type: application/json", "--data-binary", body, "-K", str(conf)]
        bodies = self.d / f"body-{answer}.txt"
        if not bodies.exists():
            bodies.write_text(body + "\n")
        return [str(self.host_exe), "--url", url, "--bodies", str(bodies), "--calls", str(n),
                "--threads", "1", "--index-query", "--no-lines"]

    def run(self, host, row, n, wrap=None):
        """One client run of `row` (and its proxy) -> dict. wrap: None, "callgrind" or "strace"
        (the client, and the proxy, run under it; counts instead of CPU).  A counted run gets
        its own copy of the state file as the timed rounds left it: both runs of a slope
        start from the same state, none pays the file's first initialisation (a one-time
        cost of 2-4k instructions a request over 200 requests), and the two runs at a time
        never share a pool."""
        key, label, kind, answer, proxy = row
        client, pinned = ovh_host(host)
        cpu = self.cpu if pinned else None
        with self.lock:
            self.serial += 1
            rd = self.d / f"run-{self.serial}"
        rd.mkdir()
        logf = rd / "usage.jsonl"
        state = None
        if wrap and os.path.exists(self.state):
            import shutil
            state = f"{self.state}-run{self.serial}"
            shutil.copyfile(self.state, state)
        extra = self.env(kind, str(logf), state)
        px = None
        base = self.bases[answer]
        tool = self.tools["valgrind" if wrap == "callgrind" else "strace"] if wrap else None
        out = {}
        try:
            if proxy:
                pwrap = (wrap, tool, rd / f"proxy.{wrap}") if wrap else None
                px = ovh_start(lambda: OvhServer(
                    rd, proxy, self.tools[proxy], free_port(),
                    upstream=int(self.bases["json"].rsplit(":", 1)[1]), wrap=pwrap, cpu=cpu))
                base = f"http://127.0.0.1:{px.port}"
            if pinned and self.server:
                os.sched_setaffinity(self.server.proc.pid, {cpu})
            argv = self.argv(host, base, answer, n)
            env = plain_env(**extra)
            if wrap == "callgrind":
                argv = [tool, "--tool=callgrind", "-q"] + CALLGRIND_OPTS + \
                    [f"--callgrind-out-file={rd / 'client.callgrind'}"] + argv
            elif wrap == "strace":
                # -E: the preload for the traced client only, not for strace itself
                argv = [tool, "-f", "-c", "-o", str(rd / "client.strace")] + \
                    [f"-E{k}={v}" for k, v in sorted(extra.items())] + argv
                env = plain_env()
            elif not self.rss_missing:
                argv = [str(self.runstat), str(rd / "rusage")] + argv
            with open(rd / "stdout", "wb") as so, open(rd / "stderr", "wb") as se:
                t0 = time.monotonic()
                p = PROCS.popen(argv, stdin=subprocess.DEVNULL, stdout=so, stderr=se, env=env,
                                preexec_fn=ovh_pin(cpu))
                rc, ru = wait_full(p, 600)
                wall = time.monotonic() - t0
            if px:
                out["proxy_cpu_s"] = px.stop()
                px = None
        finally:
            if px:
                px.stop()
            if pinned and self.server:
                try:
                    os.sched_setaffinity(self.server.proc.pid, self.cpus)
                except OSError:
                    pass
        errtext = (rd / "stderr").read_text(errors="replace")
        if client == "curl":
            ok = (rd / "stdout").read_text().split().count("200")
        else:
            ok = sum(int(x.split("ok=")[1].split()[0]) for x in errtext.splitlines()
                     if x.startswith("batch-host: calls="))
        recs = read_log(logf) if kind in ("logon", "all") else None
        cpu, rss = ru.ru_utime + ru.ru_stime, None
        if not wrap and not self.rss_missing:
            try:
                u, s, rss = (int(v) for v in (rd / "rusage").read_text().split())
                cpu = (u + s) / 1e6
            except (OSError, ValueError):
                rc = rc or "no rusage from runstat"
        out.update({
            "wall_s": wall, "cpu_s": cpu, "maxrss_kb": rss,
            "rc": rc, "ok": ok, "n": n,
            "records": len(recs) if recs is not None else None,
            "usage_records": sum(1 for x in recs if x.get("total_tokens")) if recs else None,
            "stderr": [x for x in errtext.strip().splitlines()
                       if x and not x.startswith("batch-host:")][-3:]})
        if wrap == "callgrind":
            c = callgrind_total(rd / "client.callgrind")
            pr = callgrind_total(rd / "proxy.callgrind") if proxy else 0
            out["count"] = c + pr if c is not None and pr is not None else None
            lines = callgrind_lines(rd / "client.callgrind")
            if proxy and lines is not None:
                pl = callgrind_lines(rd / "proxy.callgrind")
                lines = None if pl is None else \
                    {**lines, **{("proxy",) + k: v for k, v in pl.items()}}
            out["lines"] = lines
            jumps = callgrind_jumps(rd / "client.callgrind")
            if proxy and jumps is not None:
                pj = callgrind_jumps(rd / "proxy.callgrind")
                jumps = None if pj is None else \
                    {**jumps, **{("proxy",) + k: v for k, v in pj.items()}}
            out["jumps"] = jumps
        elif wrap == "strace":
            c = strace_total(rd / "client.strace")
            pr = strace_total(rd / "proxy.strace") if proxy else 0
            out["count"] = c + pr if c is not None and pr is not None else None
        if state:
            try:
                os.unlink(state)
            except OSError:
                pass
        if not (os.environ.get("CURLGUARD_BENCH_KEEP")):
            import shutil
            shutil.rmtree(rd, ignore_errors=True)
        return out


def cpu_times():
    """The machine's CPU time so far from /proc/stat's "cpu" line, in ticks: (busy, steal).
    Busy is all but idle and iowait, steal included; steal is the time the hypervisor ran
    something else while a CPU of this machine had work. (0, 0) when it cannot be read."""
    try:
        f = [int(x) for x in open("/proc/stat").readline().split()[1:9]]
        return sum(f) - f[3] - f[4], f[7]
    except (OSError, ValueError, IndexError):
        return 0, 0


def scenario_overhead(cfg, build, tmp):
    import random
    from concurrent.futures import ThreadPoolExecutor
    t_start = time.monotonic()
    times0 = cpu_times()
    n, rounds = cfg["ovh_n"], cfg["ovh_runs"]
    o = Overhead(cfg, build, tmp)
    rows = [r for r in OVH_ROWS if r[0] not in o.skip]
    res = {"n": n, "rounds": rounds, "hosts": OVH_HOSTS, "cpu": o.cpu, "rows": OVH_ROWS,
           "skip": dict(o.skip), "runs": {}, "pairs": {}, "idle": {}, "counts": {},
           "rss_big": {}, "phases": {}, "failed": {},
           "tools": {k: v for k, v in o.tools.items()}, "cfg": {k: v for k, v in cfg.items()
                                                             if k.startswith("ovh_") or
                                                             k == "quick"}}
    log(f"overhead: {n} sequential requests a run, {len(rows)} rows x {len(OVH_HOSTS)} hosts, "
        f"{rounds} rounds of pairs (each row beside its baseline)"
        + (f"; {', '.join(f'{k}: {v}' for k, v in o.skip.items())}" if o.skip else ""))
    try:
        o.start()
        res["server"] = o.server_text
        res["rss_missing"] = o.rss_missing
        res["answer_bytes"] = [len(a) for a in o.answers]
        # The proxies' own start-up and shutdown CPU (no request), subtracted from their runs.
        for proxy in ("nginx", "haproxy"):
            if proxy in o.skip:
                continue
            idle = []
            try:
                for _ in range(3):
                    s = ovh_start(lambda: OvhServer(
                        o.d, proxy, o.tools[proxy], free_port(),
                        upstream=int(o.bases["json"].rsplit(":", 1)[1])))
                    time.sleep(0.05)
                    idle.append(s.stop())
            except (RuntimeError, OSError, TimeoutError) as e:
                for h in OVH_HOSTS:
                    res["failed"][(h, proxy)] = f"failed: {e}"
                log(f"overhead: {proxy}: FAILED: {e}")
                continue
            res["idle"][proxy] = statistics.median(idle)
        # Untimed warm-up (page cache, the first connection, the state file).
        for h in (x for x in OVH_HOSTS if not ovh_host(x)[1]):  # unpinned: once a client
            for r in rows:
                if r[0] in ("none", "logon"):
                    o.run(h, r, min(n, 1000))
        # Timed rounds, in pairs: the machine's speed drifts by phases of seconds to tens of
        # seconds, so a row's increase comes from runs of the row and of its baseline made
        # one right after the other. Each round, per host: every row but the baselines once,
        # paired with a run of its baseline (OVH_BASE), and one null pair (no preload beside
        # no preload: the noise). The pairs in a new shuffled order each round. Which run of
        # a pair goes first: the baseline when (index in the fixed list `units` + round) is
        # even, so within a round half the pairs have each order, and every pair's order
        # flips from one round to the next.
        t0 = time.monotonic()
        by_key = {r[0]: r for r in rows}
        units = [(h, r) for h in OVH_HOSTS for r in rows    # "none": the null pair
                 if r[0] != "none-sse"]
        res["pair_count"] = len(units)

        def timed(rnd, j, h, r, what):
            """One timed run -> CPU µs/request (client + proxy), or None when it failed."""
            if (h, r[0]) in res["failed"]:
                return None
            try:
                x = o.run(h, r, n)
            except (RuntimeError, OSError, TimeoutError) as e:
                # e.g. a proxy that does not start: that row fails, the others run
                res["failed"][(h, r[0])] = f"failed: {e}"
                log(f"overhead: {h}, {r[0]}: FAILED: {e}")
                return None
            if r[4] and "proxy_cpu_s" in x:
                x["proxy_cpu_s"] = max(0.0, x["proxy_cpu_s"] - res["idle"][r[4]])
            res["runs"].setdefault((h, r[0]), []).append(x)
            tot = (x["cpu_s"] + x.get("proxy_cpu_s", 0.0)) / n * 1e6
            log(f"overhead: round {rnd + 1}/{rounds}, pair {j + 1}/{len(units)}, {h}, {r[0]} "
                f"({what}): {tot:.1f} CPU µs/request, {x['wall_s'] / n * 1e6:.0f} µs wall"
                + ("" if x["ok"] == n else f", {x['ok']}/{n} 2xx"))
            return tot

        for rnd in range(rounds):
            order = list(enumerate(units))
            random.Random(1600 + rnd).shuffle(order)
            for j, (h, r) in order:
                b = by_key[OVH_BASE.get(r[0], "none")]
                if (h, r[0]) in res["failed"] or (h, b[0]) in res["failed"]:
                    continue
                base_first = (j + rnd) % 2 == 0
                if base_first:
                    vb = timed(rnd, j, h, b, "baseline, first")
                    vr = timed(rnd, j, h, r, "second") if vb is not None else None
                else:
                    vr = timed(rnd, j, h, r, "first")
                    vb = timed(rnd, j, h, b, "baseline, second") if vr is not None else None
                if vr is None or vb is None:
                    continue
                res["pairs"].setdefault((h, r[0]), []).append(
                    {"round": rnd, "row": vr, "base": vb, "base_first": base_first})
                log(f"overhead: round {rnd + 1}/{rounds}, pair {j + 1}/{len(units)}, {h}, "
                    f"{r[0]} - {b[0]}: {vr - vb:+.1f} CPU µs/request")
        res["phases"]["timed"] = time.monotonic() - t0
        # Then, never beside the timed runs, what does not depend on timing, two runs at a
        # time on the 2 cores: instructions (callgrind) and syscalls (strace -f -c) per
        # request, each the slope between two counts (start-up and exit cancel out), and the
        # C host's max RSS at a larger count (full run: 100,000) for the guard's rows.
        t0 = time.monotonic()
        jobs = []
        for wrap, tool in (("callgrind", "valgrind"), ("strace", "strace")):
            if not o.tools[tool]:
                res["counts"][wrap] = f"not measured: {tool} missing"
                continue
            res["counts"][wrap] = {}
            hosts, keys = cfg[f"ovh_{wrap}_hosts"], cfg[f"ovh_{wrap}_rows"]
            jobs += [(wrap, h, r, k) for h in hosts for r in rows
                     if (keys is None or r[0] in keys) and (h, r[0]) not in res["failed"]
                     for k in cfg[f"ovh_{wrap}_n"]]
        big = cfg["ovh_rss_n"]
        if not o.rss_missing:
            jobs += [(None, "C host", r, big) for r in rows if r[0] in cfg["ovh_rss_rows"]
                     and ("C host", r[0]) not in res["failed"]]
        # The longest first (the big RSS runs, then callgrind's larger counts), so that the
        # two workers end together.
        jobs.sort(key=lambda j: (j[0] is not None, j[0] != "callgrind", -j[3]))

        def one(j):
            t1 = time.monotonic()
            try:
                x = o.run(j[1], j[2], j[3], wrap=j[0])
            except (RuntimeError, OSError, TimeoutError) as e:
                log(f"overhead: {j[0] or 'max RSS'}, {j[1]}, {j[2][0]}: FAILED: {e}")
                return {"ok": 0, "n": j[3], "count": None, "maxrss_kb": None,
                        "error": str(e)[:200]}
            log(f"overhead: {j[0] or 'max RSS'}, {j[1]}, {j[2][0]}, {j[3]} requests, "
                f"{time.monotonic() - t1:.1f} s"
                + (f": {x['maxrss_kb'] / 1024:.1f} MiB" if not j[0] and x["maxrss_kb"] else "")
                + ("" if x["ok"] == j[3] else f", {x['ok']}/{j[3]} 2xx"))
            return x

        with ThreadPoolExecutor(cfg["ovh_count_par"]) as ex:
            outs = list(ex.map(one, jobs))
        got = {}
        for (wrap, h, r, k), x in zip(jobs, outs):
            if wrap:
                got.setdefault((wrap, h, r[0]), {})[k] = x
            else:
                res["rss_big"][r[0]] = x
        if isinstance(res["counts"].get("callgrind"), dict):
            res["counts"]["lines"] = {}
            res["counts"]["jumps"] = {}
        for (wrap, h, key), xs in got.items():
            n1, n2 = cfg[f"ovh_{wrap}_n"]
            if wrap == "callgrind":
                la, lb = xs[n1].get("lines"), xs[n2].get("lines")
                ok = la is not None and lb is not None and all(
                    x["ok"] == x["n"] for x in xs.values())
                res["counts"]["lines"][(h, key)] = \
                    float(code_lines(la, lb, n2 - n1)) if ok else "failed"
                ja, jb = xs[n1].get("jumps"), xs[n2].get("jumps")
                res["counts"]["jumps"][(h, key)] = \
                    float(code_lines(ja, jb, n2 - n1)) \
                    if ok and ja is not None and jb is not None else "failed"
            a, b = xs[n1]["count"], xs[n2]["count"]
            bad = [x for x in xs.values() if x["ok"] != x["n"]]
            res["counts"][wrap][(h, key)] = (b - a) / (n2 - n1) \
                if a is not None and b is not None and not bad \
                else "failed" + (f": {bad[0]['error']}" if bad and bad[0].get("error") else
                                 f" ({bad[0]['ok']}/{bad[0]['n']} 2xx)" if bad else "")
        res["phases"]["counts and RSS"] = time.monotonic() - t0
    finally:
        o.close()
    res["seconds"] = time.monotonic() - t_start
    times1 = cpu_times()
    if times1[0] > times0[0]:
        res["steal_pct"] = 100.0 * (times1[1] - times0[1]) / (times1[0] - times0[0])
    return res


def ovh_stats(r):
    """-> {(host, row): {...}}: CPU µs/request median, min, max (client + proxy), wall, etc."""
    n, st = r["n"], {}
    for (h, k), xs in r["runs"].items():
        tot = [(x["cpu_s"] + x.get("proxy_cpu_s", 0.0)) / n * 1e6 for x in xs]
        st[(h, k)] = {
            "cpu": statistics.median(tot), "min": min(tot), "max": max(tot),
            "proxy": statistics.median(x["proxy_cpu_s"] / n * 1e6 for x in xs)
            if all("proxy_cpu_s" in x for x in xs) else None,
            "wall": statistics.median(x["wall_s"] for x in xs) / n * 1e6,
            "rss": statistics.median(x["maxrss_kb"] for x in xs) / 1024
            if all(x["maxrss_kb"] for x in xs) else None,
            "ok": all(x["ok"] == n and x["rc"] == 0 for x in xs),
            "records": [x["records"] for x in xs], "usage": [x["usage_records"] for x in xs],
            "stderr": xs[-1]["stderr"]}
    # The increase over the baseline: the median of the pairs' differences (row - baseline,
    # CPU µs/request, the two runs of a pair one right after the other), with their min and
    # max; for "none", whose pairs are null pairs, the noise: their differences' spread.
    # (Tried on the same runs: (row / baseline - 1) x the baseline's median. Over two full
    # runs it was not clearly steadier: it narrowed the pairs within which the machine's
    # speed changed, but the typical deviation from the median was as large or larger in
    # half the tables; and it depends on the baseline level it is scaled to. Not kept.)
    for (h, k), s in st.items():
        d = [p["row"] - p["base"] for p in r.get("pairs", {}).get((h, k), [])]
        s["inc"] = s["inc_min"] = s["inc_max"] = s["noise"] = None
        s["pairs"] = len(d)
        if not d:
            continue
        if k == "none":
            s["noise"] = max(d) - min(d) if len(d) > 1 else None
            s["null_min"], s["null_max"] = min(d), max(d)
        elif k not in OVH_BASELINES:
            s["inc"], s["inc_min"], s["inc_max"] = statistics.median(d), min(d), max(d)
    return st


def ovh_target(r, st, h, k):
    """-> (text, met or None) for the row's target, or None if it has none."""
    t = OVH_TARGETS.get(k)
    if t is None:
        return None
    s, base = st.get((h, k)), st.get((h, "none"))
    if not s or s.get("inc") is None:
        return ("-", None)
    if t == "noise":
        # One-sided: a preloaded row faster than no preload costs nothing.
        noise = base and base.get("noise")
        if noise is None:
            return ("- (no noise: fewer than 2 null pairs)", None)
        ok = s["inc"] <= noise
        return (f"<= noise (+{noise:.1f} µs): {'met' if ok else 'NOT met'}", ok)
    ok = s["inc"] <= t
    return (f"<= +{t:g} µs: {'met' if ok else 'NOT met'}", ok)


def ovh_count_cell(r, wrap, h, k):
    h = ovh_host(h)[0]          # counted once a client: the same work on one CPU or two
    c = r["counts"].get(wrap)
    if isinstance(c, str):
        return c
    if c is None:
        return "-"
    v = c.get((h, k))
    if v is None:
        return "not measured in this run" + (" (--quick: a few rows)" if r["cfg"].get("quick")
                                              else "")
    if isinstance(v, str):
        return v
    b = c.get((h, OVH_BASE.get(k, "none")))
    d = v - b if isinstance(b, float) and k not in ("none", "none-sse") else None
    if wrap == "strace":
        return f"{v:.1f}" + (f" ({d:+.1f})" if d is not None else "")
    if wrap in ("lines", "jumps"):
        return f"{v:.0f}" + (f" ({d:+.0f})" if d is not None else "")
    return f"{v / 1000:.1f} k" + (f" ({d / 1000:+.1f} k)" if d is not None else "")


def report_overhead(r):
    n, st = r["n"], ovh_stats(r)
    cfg = r["cfg"]
    cg, sc = cfg["ovh_callgrind_n"], cfg["ovh_strace_n"]
    ph = r["phases"]
    out = [
        f"{n} sequential `POST /v1/chat/completions` requests ({len(CHAT_BODY)}-byte JSON body; "
        "for the SSE rows the same with `\"stream\": true` and `stream_options.include_usage`; "
        "distinct URLs `?i=N`) over one keep-alive connection to a fast local server: "
        f"{r['server']}. Two clients: one `curl -K urls.curl` process (a config file with {n} "
        "URLs, `output = \"/dev/null\"` each) and `build/bench/batch-host --threads 1 "
        "--no-lines` (a C host: one easy handle, `curl_easy_reset` and its options before each "
        "call). "
        f"**CPU** = user+sys of the client process (`wait4` in `bench/runstat.c`; its start-up "
        f"is included, spread over the {n} requests); for the proxies also the proxy's (its "
        "own `wait4` for the run, minus its start-up and shutdown without requests, the median "
        "of 3). The timed runs go in pairs: a run of a row and, right before or right after "
        "it, a run of the row's baseline (*no preload*; for the SSE row *no preload, SSE "
        f"answer*), the same client, pinned the same way. Each of the {r['rounds']} rounds, "
        "after an untimed warm-up, makes for each table below (client and placement) one pair "
        "per row, the two baselines excepted, and one *null pair* of two no-preload runs"
        + (f" ({r['pair_count']} pairs a round)" if r.get("pair_count") else "")
        + ", all in a new shuffled order; the baseline runs first in half of the pairs and "
        "second in the others, and each pair's order flips from one round to the next. "
        "**CPU µs/request** = the median "
        "of the row's own runs, min-max in brackets (a baseline's runs are all those of the "
        "pairs it is in: for no preload, one in the pair of each JSON row and both of the null "
        "pair, each round). **Over no preload** (the paired "
        "increase) = the median over the rounds of each pair's difference, the row's CPU per "
        "request minus that of the baseline run of the same pair, min-max of those differences "
        "in brackets. The CPU a request takes drifts with what else the machine (or a virtual "
        "machine's host) runs, in phases of seconds or more: two runs made one right after "
        "the other mostly share a phase and their difference leaves it out, which the "
        "difference of two medians does not (the row's and the baseline's runs may fall in "
        "different phases). **Wall** "
        "includes the server's (and proxy's) time on the same 2 cores. **Instructions** "
        f"(`valgrind --tool=callgrind`, client + proxy) per request = (Ir of a run of {cg[1]} "
        f"requests - Ir of a run of {cg[0]}) / {cg[1] - cg[0]}, so start-up and exit cancel "
        f"out (each counted run on its own copy of the state file the timed rounds left); "
        "**code lines/request** (the same two callgrind runs, `--dump-instr=yes`, client + "
        "proxy): the distinct 64-byte lines of machine code whose instruction count grows by "
        "at least 0.9 a request from the smaller run to the larger, i.e. the code run on every "
        "request: a host whose own code overflows the instruction cache between two requests "
        "fetches each of those lines again on every request, so on such a host (curl) CPU "
        "follows code lines more than instructions; "
        "**taken branches/request** (the same two callgrind runs, `--collect-jumps=yes`, "
        "client + proxy): the distinct branch instructions taken at least 0.9 times more a "
        "request in the larger run, i.e. the jumps taken on every request, each counted once "
        "however often it is taken (a loop's branch once; calls not counted): "
        "a host whose own code overflows the branch predictor between two requests meets each "
        "of them unannounced, and instruction fetch restarts at its target; "
        f"**syscalls** (`strace -f -c`, client + proxy) the same with {sc[1]} and "
        f"{sc[0]} requests (they vary a little with timing: a `poll` more or less); in "
        "brackets the increase over the row's baseline. **RSS** = the client's max RSS "
        "(`ru_maxrss` from `bench/runstat.c`, which forks the client: a child forked by "
        "Python would report Python's), median of the row's runs"
        + (f"; in brackets the C host's at {cfg['ovh_rss_n']:,} requests (one run): the same "
           "= no memory kept per request" if r["rss_big"] else "") + ".",
        "",
        "Rows: *forwarding interposer* = `bench/forward.c`, a preloaded .so whose "
        "`curl_easy_perform` and `curl_easy_setopt` only call libcurl's "
        "(`dlsym(RTLD_NEXT)`): the floor of the technique; *calibration* = the same with an "
        f"empty loop of {OVH_LOOP} rounds before and after each transfer (`FORWARD_LOOP`): "
        "about as many instructions as the guard runs with the log off, with no memory "
        "traffic: what those instructions cost on their own; *footprint calibration* = the "
        f"same with, instead of the loop, two straight-line blocks of {OVH_WIDE // 2} distinct "
        "code lines each (16 `lea` a line, no branch, no memory traffic) run before and after "
        "each transfer (`FORWARD_WIDE`): about as many code lines a request as the guard's, "
        "in fewer instructions than the loop's: what fetching that much code costs; "
        f"*branch calibration* = the same with two blocks of {OVH_JUMPS // 2} jumps instead, "
        "each taken to the next 16-byte boundary (`FORWARD_JUMPS`, 4 a code line, no memory "
        "traffic): what that many taken branches cost on the machine, their code lines "
        "included; "
        "*`CURLGUARD` off* = "
        "`LD_PRELOAD=libcurlguard.so` alone; *guard on* = `CURLGUARD=1` and a state file, "
        "library defaults otherwise (breaker, retry budget, adaptive limit on); *log off* = "
        "`CURLGUARD_LOG=off`; *every feature* = also `CURLGUARD_RPM` 1e8, `CURLGUARD_TPM` "
        "1e12, `CURLGUARD_MAX_INFLIGHT` 64 (never wait), `CURLGUARD_REQUEST_ID_HEADER="
        "Idempotency-Key`; the SSE rows' increase is over *no preload, SSE answer*, the others' "
        "over *no preload*. Peers (what users run instead of a preload, the client not "
        "preloaded): nginx (`master_process off`, one process) with `proxy_next_upstream error "
        "timeout http_429 http_502 http_503 http_504 non_idempotent`, `proxy_next_upstream_tries "
        "4`, the upstream listed 4 times, `keepalive 8`; haproxy (`nbthread 1`) with `retries "
        "3`, `retry-on conn-failure empty-response response-timeout 502 503 504`, `http-reuse "
        "always`; both in front of the same fast server.",
        "",
        "Targets (issue 16), the paired increase of CPU per request over the row's baseline: "
        "guard on, log on, 1 KB "
        "JSON: at most +10 µs; log off: +5 µs; every feature: +15 µs; SSE answer: +15 µs; "
        "`CURLGUARD` off: at most the *noise*, the spread (max - min) over the rounds of the "
        "null pairs' differences (one no-preload run minus the other; which of the two ran "
        "first alternates from round to round, as in every pair): how far apart paired "
        "differences fall when there is nothing to find. Instructions do not depend on the "
        "load; CPU does (other work on the machine shows in the min-max and in the noise).",
        "",
        "Each client is measured twice in the same rounds: as the scheduler places the "
        "processes on the machine's CPUs, and *one CPU*: the client, the fast server and the "
        f"proxy pinned to one CPU (`sched_setaffinity`, CPU {r.get('cpu', '-')}"
        + ("; the mock provider, standing in for nginx, is not pinned"
           if r.get("server", "").startswith("**nginx missing**") else "") + "). With two CPUs "
        "every request wakes the other CPU out of idle and back (on a virtual machine each "
        "such wakeup is also an exit to the hypervisor). What that costs varies with timing "
        "from run to run, also between the two runs of a pair: the *noise* above each table. "
        "On one CPU the processes take turns without idling: the "
        "spread is smaller and the figure nearer the work each process does. Instructions "
        "and syscalls are counted once per client, without pinning, and shown in both tables.",
        ""]
    for h in r["hosts"]:
        base = st.get((h, "none"))
        noise = f"{base['noise']:.1f} µs ({base['null_min']:+.1f} to {base['null_max']:+.1f})" \
            if base and base["noise"] is not None else "-"
        out += [f"**{h}** (noise = the spread of the null pairs' differences over the rounds: "
                f"{noise})", "",
                "| row | CPU µs/request (min-max) | over no preload, paired (min to max) | "
                "wall µs/request | "
                "instructions/request | code lines/request | taken branches/request | "
                "syscalls/request | max RSS MiB"
                + (f" (at {cfg['ovh_rss_n']:,})" if h == "C host" and r["rss_big"] else "")
                + " | target / met |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for k, label, *_ in r["rows"]:
            if k in r["skip"]:
                out.append(f"| {label} | {r['skip'][k]} | | | | | | | | |")
                continue
            s = st.get((h, k))
            if not s:
                why = r["failed"].get((h, k), "not measured").replace("|", "/")
                out.append(f"| {label} | {why} | | | | | | | | |")
                continue
            cpu = f"{s['cpu']:.1f} ({s['min']:.1f}-{s['max']:.1f})"
            if s["proxy"] is not None:
                cpu += f"; proxy {s['proxy']:.1f}"
            inc = f"{s['inc']:+.1f} ({s['inc_min']:+.1f} to {s['inc_max']:+.1f})" \
                if s["inc"] is not None else "-"
            rss = f"{s['rss']:.1f}" if s["rss"] else r.get("rss_missing") or "-"
            big = r["rss_big"].get(k) if h == "C host" else None
            if big:
                rss += f" ({big['maxrss_kb'] / 1024:.1f})" if big["ok"] == big["n"] and \
                    big["maxrss_kb"] else f" (failed: {big['ok']}/{big['n']} 2xx)"
            tg = ovh_target(r, st, h, k)
            flag = "" if s["ok"] else " (**not all 2xx**)"
            out.append(f"| {label}{flag} | {cpu} | {inc} | {s['wall']:.0f} | "
                       f"{ovh_count_cell(r, 'callgrind', h, k)} | "
                       f"{ovh_count_cell(r, 'lines', h, k)} | "
                       f"{ovh_count_cell(r, 'jumps', h, k)} | "
                       f"{ovh_count_cell(r, 'strace', h, k)} | {rss} | "
                       f"{tg[0] if tg else ''} |")
        out.append("")
        g = st.get((h, OVH_GUARD_ROW))
        ratios = []
        for px in ("nginx", "haproxy"):
            s = st.get((h, px))
            if s and g and s["inc"] is not None and g["inc"] is not None:
                ratios.append(f"{px} adds {s['inc']:.1f} µs per request (client + proxy) = "
                              + (f"x{s['inc'] / g['inc']:.1f}" if g["inc"] > 0.5 else "n/a")
                              + " the guard's (log on) +{:.1f} µs".format(g["inc"]))
        if ratios:
            out += ["Proxies vs the guard, " + h + ": " + "; ".join(ratios) + ".", ""]
    checks = [f"{h}, {k}: {v}" for (h, k), v in sorted(r["failed"].items())]
    for (h, k), s in sorted(st.items()):
        if not s["ok"]:
            checks.append(f"{h}, {k}: not every run got {n} 2xx answers with exit 0")
        if any(x is not None and x != n for x in s["records"]):
            checks.append(f"{h}, {k}: log records per run {s['records']} (expected {n})")
        if any(x is not None and x != n for x in s["usage"]):
            checks.append(f"{h}, {k}: records with usage per run {s['usage']}")
    out.append("Checks: " + ("; ".join(checks) if checks else
                             f"every run got {n} 2xx answers (exit 0); every log-on run "
                             f"wrote {n} records, each with the answer's usage") + ".")
    errs = [f"{h}, {k}: `{' / '.join(s['stderr'])}`" for (h, k), s in sorted(st.items())
            if s["stderr"]]
    if errs:
        out += ["", "stderr of the last run: " + "; ".join(errs)]
    out += ["", "Time: " + ", ".join(f"{k} {v:.0f} s" for k, v in ph.items())
            + f"; scenario {r['seconds']:.0f} s."
            + (f" Steal time (`/proc/stat`: the hypervisor ran something else while a CPU of "
               f"this machine had work) over the scenario: {r['steal_pct']:.1f} % of the "
               "machine's busy CPU time." if r.get("steal_pct") is not None else "")]
    return out



# ---------------------------------------------------------------- 2./3. batch and drill

CONTENDERS = {
    # key: (host, mode, column label)
    "curl-naive": ("curl", "naive", "curl, naive 1 s loop"),
    "curl-retry": ("curl", "retry", "curl --retry 3"),
    "curl-guard": ("curl", "guard", "curl + guard"),
    "c-naive": ("C host", "naive", "C host, naive 1 s loop"),
    "c-retry": ("C host", "retry", "C host, curl-style retry 3"),
    "c-guard": ("C host", "guard", "C host + guard"),
    "curl-guard-cd5": ("curl", "guard", "curl + guard, breaker cooldown 5 s"),
    "curl-guard-failfast": ("curl", "guard", "curl + guard, breaker fails fast"),
    "c-plain": ("C host", "plain", "C host, no retry"),
    "c-guard-defaults": ("C host", "guard", "C host + guard, defaults"),
    "curl-guard-norpm": ("curl", "guard", "curl + guard, no rpm"),
    "c-guard-norpm": ("C host", "guard", "C host + guard, no rpm"),
    # issue 13: every call a transfer of one multi handle in one process (cgmulti's epoll
    # loop over curl_multi_socket_action), `workers` transfers in it at a time.
    "multi-guard": ("multi", "guard", "C multi host + guard"),
}
# Settings a guard contender adds to its base environment (the rest are library defaults).
GUARD_EXTRA_ENV = {"curl-guard-cd5": {"CURLGUARD_BREAKER_COOLDOWN_S": 5},
                   "curl-guard-failfast": {"CURLGUARD_BREAKER_OPEN": "fail"}}
# The base environment of a guard contender: "batch" = guard_batch_env (scenarios 2 and 3),
# "defaults" = state file and log only, "norpm" = guard_batch_env without CURLGUARD_RPM.
GUARD_ENV_KIND = {"c-guard-defaults": "defaults", "curl-guard-norpm": "norpm",
                  "c-guard-norpm": "norpm"}


def batch_body(i):
    return json.dumps({"model": "gpt-4o-mini", "max_tokens": 64, "messages": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": f"Item {i} of the batch: summarise record {i} in one line."}]})


def make_bodies(d, n):
    """One distinct body per call (so duplicates show by digest), the same for every contender
    (so the mock's per-request draws give every contender the same luck)."""
    (d / "bodies").mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n):
        body = batch_body(i)
        (d / "bodies" / f"{i}.json").write_text(body)
        lines.append(body)
    (d / "bodies.txt").write_text("\n".join(lines) + "\n")
    (d / "calls").write_text("\n".join(map(str, range(n))) + "\n")


def guard_batch_env(b, state, logf):
    return {"CURLGUARD_STATE": state, "CURLGUARD_LOG": logf, "CURLGUARD_RPM": b["rpm"],
            "CURLGUARD_FIRST_BYTE_TIMEOUT_MS": b["timeout_s"] * 1000,
            "CURLGUARD_READ_TIMEOUT_MS": b["timeout_s"] * 1000,
            "CURLGUARD_DEADLINE_MS": b["deadline_s"] * 1000,
            "CURLGUARD_MAX_ATTEMPTS": b["guard_attempts"]}


def guard_defaults_env(b, state, logf):
    return {"CURLGUARD_STATE": state, "CURLGUARD_LOG": logf}


def guard_norpm_env(b, state, logf):
    env = guard_batch_env(b, state, logf)
    del env["CURLGUARD_RPM"]
    return env


def guard_env_for(key, b, state, logf):
    kind = GUARD_ENV_KIND.get(key, "batch")
    env = {"batch": guard_batch_env, "defaults": guard_defaults_env,
           "norpm": guard_norpm_env}[kind](b, state, logf)
    env.update(GUARD_EXTRA_ENV.get(key, {}))
    return env


def run_contender(key, b, build, tmp, d, mock_args, cap_s):
    """One contender's batch against a fresh mock -> metrics (ground truth: /__summary)."""
    host, mode, label = CONTENDERS[key]
    n, workers = b["n"], b["workers"]
    cd = Path(tempfile.mkdtemp(prefix=key + "-", dir=d))
    state = f"/dev/shm/curlguard-bench-{os.getpid()}-{key}.state"
    logf = cd / "usage.jsonl"
    try:
        os.unlink(state)
    except OSError:
        pass
    with Mock(tmp, *mock_args) as mock:
        url = f"{mock.base}/v1/chat/completions"
        if host == "curl":
            env = plain_env(BENCH_URL=url, BENCH_BODIES=d / "bodies", BENCH_OUT=cd,
                            BENCH_TIMEOUT_S=b["timeout_s"], BENCH_NAIVE_MAX=b["naive_max"],
                            BENCH_RETRY=b["curl_retry"])
            argv = ["xargs", "-P", str(workers), "-n", "1", "-a", str(d / "calls"),
                    str(ROOT / "bench" / "curl-call"), "plain" if mode == "guard" else mode]
        elif host == "multi":
            env = plain_env()
            argv = [str(build / "tests" / "cgmulti"), "--bodies", str(d / "bodies.txt"),
                    "--calls", str(n), "--concurrency", str(workers), "--bench-out",
                    str(cd / "calls.txt"), "--max-ms", str(int(cap_s * 1000) + 10000)]
            if b.get("arrive_s"):                # the drill's open-loop arrivals, as curl's
                argv += ["--pace-ms", str(int(b["arrive_s"] * 1000 / n))]
            argv.append(url)
        else:
            env = plain_env()
            retry = {"naive": f"naive:{b['naive_max']}", "retry": f"curl:{b['curl_retry']}",
                     "guard": "none", "plain": "none"}[mode]
            argv = [str(build / "bench" / "batch-host"), "--url", url, "--bodies",
                    str(d / "bodies.txt"), "--calls", str(n), "--threads", str(workers),
                    "--retry", retry, "--timeout-ms",
                    "0" if mode == "guard" else str(b["timeout_s"] * 1000),
                    "--out", str(cd / "calls.txt")]
        if mode == "guard":
            env.update({k: str(v) for k, v in guard_env_for(key, b, state, logf).items()})
            argv = [str(build / "curlguard"), "run", "--"] + argv
        mock.post("/__reset?clock=1")            # t = 0 of the schedule: now
        capped = False
        with open(cd / "stdout", "ab") as out, open(cd / "stderr", "wb") as err:
            t_epoch_ms = time.time() * 1000
            if b.get("arrive_s") and host == "curl":
                # An open-loop stream: call i starts at t = i * pace, whatever came before.
                env["BENCH_T0_MS"] = str(int(t_epoch_ms))
                env["BENCH_PACE_MS"] = str(int(b["arrive_s"] * 1000 / n))
            t0 = time.monotonic()
            p = PROCS.popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env)
            try:
                rc, cpu = wait_rusage(p, cap_s)
            except TimeoutError:
                capped, rc, cpu = True, None, None
            finally:
                PROCS.stop(p)
            wall = time.monotonic() - t0
        # Handlers of requests whose client went away finish within a poll interval.
        for _ in range(40):
            summ = mock.get(f"/__summary?bucket_ms={b['bucket_ms']}")
            if not summ["pending"]:
                break
            time.sleep(0.1)
    try:
        os.unlink(state)
    except OSError:
        pass
    if mode == "guard" and logf.exists():
        # The guard's records of the run outlive its temporary directory: LOGS_DIR/
        # <scenario>-<contender>.jsonl (e.g. for `scripts/report-screenshot`).
        import shutil
        LOGS_DIR.mkdir(parents=True, exist_ok=True)
        shutil.copy2(logf, LOGS_DIR / f"{d.name.split('-')[0]}-{key}.jsonl")
    calls = {}
    text = (cd / ("stdout" if host == "curl" else "calls.txt"))
    for line in (text.read_text(errors="replace").splitlines() if text.exists() else []):
        f = line.split()
        if len(f) != 6:
            continue
        i, start, end, status, code, attempts = int(f[0]), float(f[1]), float(f[2]), int(f[3]), int(f[4]), int(f[5])
        if host == "curl":
            start, end = start - t_epoch_ms, end - t_epoch_ms
        if host == "C host" and end == 0 and attempts == 0:
            continue                               # never started (the host was stopped)
        calls[i] = (start / 1000, end / 1000, status, code, attempts)
    done = [c for c in calls.values() if c[3] == 0 and 200 <= c[2] < 300]
    lat = [c[1] - c[0] for c in done]
    recs = read_log(logf) if mode == "guard" else []
    outcomes, decisions = {}, {}
    for x in recs:
        outcomes[x.get("outcome")] = outcomes.get(x.get("outcome"), 0) + 1
        decisions[x.get("decision")] = decisions.get(x.get("decision"), 0) + 1
    errtext = [x for x in (cd / "stderr").read_text(errors="replace").splitlines()
               if not x.startswith(("batch-host:", "cgmulti:")) and "does not use libcurl" not in x]
    last_end = max((c[1] for c in calls.values()), default=wall)
    return {"key": key, "label": label, "host": host, "mode": mode, "n": n, "wall_s": wall,
            "batch_s": min(wall, max(last_end, 0)), "capped": capped, "rc": rc, "cpu_s": cpu,
            "finished": len(calls), "completed": len(done),
            "p50": pct(lat, 50), "p99": pct(lat, 99), "summary": summ,
            "outcomes": outcomes, "decisions": decisions, "records": len(recs),
            "stderr": errtext[-3:], "argv": argv}


def batch_cfg(cfg, prefix):
    return {k[len(prefix):]: v for k, v in cfg.items() if k.startswith(prefix)}


def latency_args(b):
    return ["--latency-median-ms", str(b["lat_median_ms"]), "--latency-p99-ms",
            str(b["lat_p99_ms"]), "--latency-max-ms", str(b["lat_max_ms"])]


def run_batch(cfg, build, tmp, prefix, name, told):
    """Scenario 2's batch (its config keys under `prefix`) for each contender: the same
    bodies, plan and rate-limited provider; `told` says how the limit is presented in the
    log line (configured or not)."""
    b = batch_cfg(cfg, prefix)
    b["ideal_s"] = b["n"] / b["rpm"] * 60
    d = Path(tempfile.mkdtemp(prefix=name + "-", dir=tmp))
    make_bodies(d, b["n"])
    plan = d / "plan.json"
    plan.write_text(json.dumps({"seed": b["seed"], "draw": "request"}))
    mock_args = ["--limit-rpm", str(b["rpm"]), "--plan", str(plan)] + latency_args(b)
    res = []
    for key in b["contenders"]:
        log(f"{name}: {CONTENDERS[key][2]}: {b['n']} calls, {b['workers']} workers, provider "
            f"limit {b['rpm']} rpm{told} (ideal {b['ideal_s']:.0f} s)")
        r = run_contender(key, b, build, tmp, d, mock_args, b["ideal_s"] * 2 + 20)
        log(f"{name}: {r['label']}: {r['completed']}/{b['n']} completed in {r['wall_s']:.1f} s, "
            f"{r['summary']['requests']} upstream requests, {r['summary']['429s']} 429s")
        res.append(r)
    return {"cfg": b, "rows": res, "mock_args": mock_args}


def scenario_batch(cfg, build, tmp):
    return run_batch(cfg, build, tmp, "batch_", "batch", "")


def drill_plan(b):
    base = {"503": b["p503"], f"200:delay={b['stall_ms']}": b["pstall"]}
    o0, o1 = b["outage"]
    s0, s1 = b["slow"]
    return {"seed": b["seed"], "draw": "request",
            "schedule": [
                {"from_s": 0, "to_s": o0, "p": base},
                {"from_s": o0, "to_s": o1, "p": {"503": 1.0}, "comment": "full outage"},
                {"from_s": o1, "to_s": s0, "p": base},
                {"from_s": s0, "to_s": s1, "p": base, "latency_x": b["slow_x"],
                 "comment": "slow period"},
                {"from_s": s1, "p": base}]}


def recovery(r, b):
    """Requests during the outage and the two recovery times (see report_drill)."""
    ser = r["summary"].get("series") or {"requests": [], "ok": []}
    w = b["bucket_ms"] / 1000
    o0, o1 = b["outage"]
    req, ok = ser["requests"], ser["ok"]
    during = sum(c for k, c in enumerate(req) if o0 <= k * w + 1e-9 < o1)
    pre = [c for k, c in enumerate(ok) if b["baseline_from"] <= k * w + 1e-9 < o0]
    baseline = sum(pre) / (o0 - b["baseline_from"])
    first_ok = next((round((k + 1) * w - o1, 3) for k, c in enumerate(ok)
                     if c and k * w + 1e-9 >= o1), None)
    per_s = int(round(1 / w))
    rate_back = None
    k0 = int(round(o1 / w))
    sec = 0
    while k0 + (sec + 1) * per_s <= len(ok):
        got = sum(ok[k0 + sec * per_s:k0 + (sec + 1) * per_s])
        if baseline > 0 and got >= b["recover_frac"] * baseline:
            rate_back = sec + 1
            break
        sec += 1
    return {"during": during, "baseline": baseline, "first_ok": first_ok, "rate_back": rate_back,
            "ok_after": sum(c for k, c in enumerate(ok) if k * w + 1e-9 >= o1)}


def scenario_drill(cfg, build, tmp):
    b = batch_cfg(cfg, "drill_")
    if cfg.get("drill_failfast") and readme_mentions("CURLGUARD_BREAKER_OPEN"):
        # Before issue 12's breaker (fail fast is the only behaviour) it is the guard itself.
        b["contenders"] = b["contenders"] + ["curl-guard-failfast"]
    b["ideal_s"] = b["n"] / b["rpm"] * 60
    d = Path(tempfile.mkdtemp(prefix="drill-", dir=tmp))
    make_bodies(d, b["n"])
    plan = d / "plan.json"
    plan.write_text(json.dumps(drill_plan(b)))
    mock_args = ["--limit-rpm", str(b["rpm"]), "--plan", str(plan)] + latency_args(b)
    res = []
    for key in b["contenders"]:
        log(f"drill: {CONTENDERS[key][2]}: {b['n']} calls, {b['workers']} workers, outage "
            f"{b['outage'][0]}-{b['outage'][1]} s (cap {b['cap_s']} s)")
        r = run_contender(key, b, build, tmp, d, mock_args, b["cap_s"])
        r["recovery"] = recovery(r, b)
        log(f"drill: {r['label']}: {r['completed']}/{b['n']} completed in {r['wall_s']:.1f} s, "
            f"{r['recovery']['during']} requests during the outage, first success "
            f"{r['recovery']['first_ok']} s after it")
        res.append(r)
    return {"cfg": b, "rows": res, "mock_args": mock_args, "plan": drill_plan(b)}


def fmt(v, spec="{:.2f}", none="-"):
    return none if v is None else spec.format(v)


def never(x):
    return "never (stopped)" if x["capped"] else "never (batch over)"


def batch_rows(r, drill=False):
    b = r["cfg"]
    rows = [
        ("completed calls (2xx to the client)", lambda x: f"{x['completed']} / {x['n']}"),
        ("upstream requests (per call)", lambda x: f"{x['summary']['requests']} "
         f"({x['summary']['requests'] / x['n']:.2f})"),
        ("429s from the provider", lambda x: str(x["summary"]["429s"])),
        ("billed requests (per call)", lambda x: f"{x['summary']['billed_requests']} "
         f"({x['summary']['billed_requests'] / x['n']:.2f})"),
        ("billed tokens", lambda x: str(x["summary"]["billed_tokens"])),
        ("duplicate charges (bodies)", lambda x: f"{x['summary']['duplicate_charges']} "
         f"({x['summary']['duplicate_bodies']})"),
        ("billed, answer never delivered", lambda x: str(x["summary"]["billed_client_gone"])),
        ("p50 / p99 latency per completed call, s",
         lambda x: f"{fmt(x['p50'])} / {fmt(x['p99'])}"),
        (f"batch wall time, s (ideal N/R = {b['ideal_s']:.0f} s)",
         lambda x: f"{x['wall_s']:.1f} (x{x['wall_s'] / b['ideal_s']:.2f})"
         + (" stopped" if x["capped"] else "")) if not drill else
        ("batch wall time, s", lambda x: f"{x['wall_s']:.1f}" + (" stopped" if x["capped"] else "")),
        ("requests per 100 ms: peak / mean", lambda x: f"{x['summary']['peak_per_100ms']} / "
         f"{fmt(x['summary']['mean_per_100ms'])}"),
    ]
    if drill:
        rows += [
            (f"requests during the outage ({b['outage'][0]}-{b['outage'][1]} s)",
             lambda x: str(x["recovery"]["during"])),
            ("first successful answer after the outage, s",
             lambda x: fmt(x["recovery"]["first_ok"], "{:.1f}", never(x))),
            (f"success rate back to {b['recover_frac'] * 100:.0f} % of before, s",
             lambda x: fmt(x["recovery"]["rate_back"], "{:d}", never(x))),
            ("successful answers after the outage", lambda x: str(x["recovery"]["ok_after"])),
        ]
    rows.append(("guard records: outcomes", lambda x: ", ".join(
        f"{k} {v}" for k, v in sorted(x["outcomes"].items(), key=lambda kv: -kv[1])) or "-"))
    return rows


def table(r, rows):
    cols = r["rows"]
    out = ["| | " + " | ".join(x["label"] for x in cols) + " |", "|---|" + "---:|" * len(cols)]
    for name, f in rows:
        cells = []
        for x in cols:
            try:
                cells.append(f(x))
            except Exception as e:          # a contender that could not run
                cells.append(f"({type(e).__name__})")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


def contenders_text(b, ctimeout):
    return [
        f"- *naive 1 s loop*: `bench/curl-call naive` (bash around plain `curl -m {b['timeout_s']}`): "
        f"any failure (curl error, 429, 5xx, any non-2xx) -> `sleep 1`, again, at most "
        f"{b['naive_max']} attempts. The C host's `--retry naive:{b['naive_max']}` does the same.",
        f"- *curl --retry {b['curl_retry']}*: `curl -m {b['timeout_s']} --retry {b['curl_retry']}`: "
        f"curl retries timeouts, 408, 429, 500, 502, 503, 504, waiting `Retry-After` (whole "
        f"seconds) or 1 s doubling. The C host's `--retry curl:{b['curl_retry']}` does the same.",
        f"- *guard*: plain `curl` (one attempt, no `-m`) / `batch-host --retry none` under "
        f"`curlguard run` with `CURLGUARD_RPM={b['rpm']}` (the provider's limit), "
        f"`CURLGUARD_FIRST_BYTE_TIMEOUT_MS` and `CURLGUARD_READ_TIMEOUT_MS` {b['timeout_s'] * 1000} "
        f"(in place of `-m {b['timeout_s']}`), `CURLGUARD_DEADLINE_MS` {b['deadline_s'] * 1000}, "
        f"`CURLGUARD_MAX_ATTEMPTS` {b['guard_attempts']}, one shared state file, the log on; "
        f"library defaults otherwise, the circuit breaker and the retry budget included "
        f"({library_defaults_text()}).",
    ] + ([f"- *C multi host + guard*: `build/tests/cgmulti --concurrency {b['workers']}` (one "
          f"process, one multi handle, an epoll loop over `curl_multi_socket_action`, "
          f"{b['workers']} transfers in it at a time; in the drill `--pace-ms`: call i is added "
          "at t = i x pace, the arrivals of the curl contenders) under `curlguard run` with "
          "the guard's settings above."]
         if "multi-guard" in b.get("contenders", []) else []) + (["- *guard, breaker cooldown 5 s*: the same with `CURLGUARD_BREAKER_COOLDOWN_S=5`: "
          "probes the way back every 5 s instead of 30 s."]
         if "curl-guard-cd5" in b.get("contenders", []) else []) \
      + (["- *guard, breaker fails fast*: the same with `CURLGUARD_BREAKER_OPEN=fail`: while "
          "the breaker is open a call fails at once (`circuit_open`) instead of waiting for "
          "the probe: the guard's behaviour before issue 12, for comparison."]
         if "curl-guard-failfast" in b.get("contenders", []) else [])


def readme_defaults(prefixes=("CURLGUARD_BREAKER", "CURLGUARD_RETRY_BUDGET")):
    """[(variable, default)] of the README's configuration table rows whose variable starts
    with one of prefixes: the library's defaults as this tree documents them."""
    out = []
    try:
        text = (ROOT / "README.md").read_text(errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`CURLGUARD_"):
            continue
        names = [x.strip("` ") for x in cells[0].split("/")]
        if any(names[0].startswith(p) for p in prefixes):
            out.append((cells[0], cells[-1]))
    return out


def library_defaults_text():
    d = readme_defaults()
    if not d:
        return "see README.md"
    return "as README.md documents them: " + "; ".join(f"{k} {v}" for k, v in d)


def readme_mentions(name):
    try:
        return name in (ROOT / "README.md").read_text(errors="replace")
    except OSError:
        return False


def stderr_notes(rows):
    """The last stderr lines of each contender that wrote any, one paragraph each."""
    return [line for x in rows if x["stderr"] for line in
            ("", f"stderr of {x['label']} (last lines): `" + " / ".join(x["stderr"]) + "`")]


def measure_notes():
    return [
        "How each figure is measured: *completed* from the clients' own per-call lines (final "
        "answer 2xx, curl exit 0); every other count from the mock's ledger (`GET /__summary`): "
        "*upstream requests* = requests that reached the provider (refused ones too); *billed* = "
        "requests whose processing started (a 2xx, a 500/504 or a stall: billed even when the "
        "client has gone by the time the answer is ready); *duplicate charges* = billed requests "
        "whose body (sha256) had been billed before (a body billed k times counts k - 1; the "
        "number of such bodies in brackets); *billed, answer never delivered* = billed requests "
        "whose client did not get the whole answer; *latency* = from the call's start to its "
        "final answer, as the client saw it, completed calls only; *batch wall time* = from the "
        "launch of the batch to the exit of its last process; *requests per 100 ms* = arrivals "
        "at the provider, peak of any sliding 100 ms window / mean over the span from the first "
        "to the last arrival.",
    ]


def report_batch(r):
    b = r["cfg"]
    out = [f"N = {b['n']} logical calls (`POST /v1/chat/completions`, each a distinct ~230-byte "
           f"JSON body, `max_tokens` 64), {b['workers']} workers: `xargs -P {b['workers']}` "
           f"over `bench/curl-call`, and `build/bench/batch-host --threads {b['workers']}` (one "
           f"keep-alive handle per thread). The provider: `scripts/mock-provider "
           f"{' '.join(Path(x).name if x.startswith('/') else x for x in r['mock_args'])}`: a limit R = "
           f"{b['rpm']} requests/min (token bucket of {max(1, b['rpm'] / 60):g}, refused "
           f"requests count too, 429 with `Retry-After` and `x-ratelimit-*`), generation latency "
           f"lognormal (median {b['lat_median_ms']} ms, p99 {b['lat_p99_ms']} ms, at most "
           f"{b['lat_max_ms']} ms), no faults (`plan.json`: "
           f"`{json.dumps({'seed': b['seed'], 'draw': 'request'})}`). A fresh provider per "
           f"contender, same seed; each is stopped (*stopped*) after "
           f"{b['ideal_s'] * 2 + 20:.0f} s (twice N/R + 20 s).",
           "", "Contenders:"] + contenders_text(b, b["timeout_s"]) + [""]
    out += table(r, batch_rows(r))
    out += ["", f"Reading it: the provider counts refused requests against its limit too, and "
            f"its bucket goes down to minus one minute's worth ({b['rpm']} requests), so a "
            f"client that keeps arriving faster than R on average, refusals included, is "
            f"refused almost everything until it slows down: the first burst passes, then "
            f"retries that ignore the provider's pace keep the account locked out. The "
            f"guard's pace is the provider's (97 % of R), so its calls queue locally instead "
            f"(their latency includes that wait)."]
    out += [""] + measure_notes()
    return out + stderr_notes(r["rows"])


def report_drill(r):
    b = r["cfg"]
    o0, o1 = b["outage"]
    s0, s1 = b["slow"]
    out = [f"N = {b['n']} calls from {b['workers']} workers (`xargs -P {b['workers']}` over "
           f"`bench/curl-call`), arriving at a steady rate: call i starts at t = i x "
           f"{b['arrive_s'] * 1000 / b['n']:.1f} ms (t = 0 to {b['arrive_s']} s), whatever "
           f"happened to the earlier ones, like a service's traffic (a closed batch would "
           f"leave a contender that fails fast nothing to recover with), against a "
           f"provider whose limit (R = {b['rpm']} requests/min) is above what the workers ask "
           f"for, so that the faults make the difference: latency median {b['lat_median_ms']} "
           f"ms, p99 {b['lat_p99_ms']} ms, at most {b['lat_max_ms']} ms, and a fault schedule "
           f"(seed {b['seed']}, "
           f"drawn per request: the k-th arrival of a given body meets the same fate for every "
           f"contender): all the time {b['p503'] * 100:g} % `503` and {b['pstall'] * 100:g} % "
           f"stalls of {b['stall_ms'] / 1000:g} s before the first byte (longer than the "
           f"clients' {b['timeout_s']} s timeout; billed), a full outage (every request `503`) "
           f"from t = {o0} s to t = {o1} s, a slow period (latency x{b['slow_x']:g}) from "
           f"t = {s0} s to t = {s1} s; t = 0 when the batch starts. Each contender is stopped "
           f"after {b['cap_s']} s. Plan file: `{json.dumps(r['plan'], separators=(',', ':'))}`.",
           "", "Contenders as in scenario 2 (curl):"] + contenders_text(b, b["timeout_s"]) + [""]
    out += table(r, batch_rows(r, drill=True))
    for key, ts in drill_targets(r).items():
        out += ["", f"Issue 12's targets for *{CONTENDERS[key][2]}* (the library's defaults for "
                f"the breaker and the retry budget): " + "; ".join(
                    f"{t}: **{met(ok)}**" for t, ok in ts) + "."]
    out += ["", "A call of the guard that meets a stall is not sent again (a POST that may have "
            "been processed: `first_byte_timeout`, `possibly_billed`); the loops send it again "
            "and may be billed twice (*duplicate charges*)."]
    pic = f"Picture not drawn: {r['plot_error']}" if r.get("plot_error") else \
        "![requests per 100 ms over time, one line per contender](drill.png)"
    out += ["", pic, "",
            f"*Requests during the outage*: arrivals at the provider with {o0} <= t < {o1} s. "
            f"*Time to recover*, two figures, both counted from the end of the outage (t = {o1} "
            f"s) and both on answers the provider wrote whole with a 2xx (by the time the last "
            f"byte was written, to {b['bucket_ms']} ms): (1) *first successful answer*: until "
            f"the first such answer; (2) *success rate back*: until the end of the first whole "
            f"second (counted in 1 s steps from t = {o1} s) with at least "
            f"{b['recover_frac'] * 100:.0f} % as many such answers as the mean per second before "
            f"the outage (t = {b['baseline_from']} to {o0} s). *never*: not before the batch "
            f"was over (every call had its final answer) or was stopped at "
            f"{b['cap_s']} s."] + [""] + measure_notes()
    return out + stderr_notes(r["rows"])


def summary_batch(r, name="2. batch"):
    out = []
    for x in r["rows"]:
        s = x["summary"]
        out.append(f"{name}, {x['label']}: {x['completed']}/{x['n']} completed, "
                   f"{s['requests'] / x['n']:.2f} upstream requests and "
                   f"{s['billed_requests'] / x['n']:.2f} billed per call, {s['429s']} 429s, "
                   f"{s['duplicate_charges']} duplicate charges, wall {x['wall_s']:.1f} s"
                   + (" (stopped)" if x["capped"] else "")
                   + (f" (N/R {r['cfg']['ideal_s']:.0f} s)" if "recovery" not in x else "")
                   + (f", {x['recovery']['during']} requests during the outage, first success "
                      f"{fmt(x['recovery']['first_ok'], '{:.1f} s', 'never')} after it, success "
                      f"rate back after {fmt(x['recovery']['rate_back'], '{:d} s', 'never')}"
                      if "recovery" in x else ""))
    return out


def drill_targets(r):
    """Issue 12's targets for the guard with the library's defaults -> (text, met) per key."""
    b = r["cfg"]
    unguarded = [x["completed"] for x in r["rows"] if x["mode"] != "guard"]
    best = max(unguarded, default=0)
    out = {}
    for x in r["rows"]:
        if x["key"] != "curl-guard":
            continue
        rec = x["recovery"]
        first = rec["first_ok"]
        out[x["key"]] = [
            (f"completed {x['completed']} (target > {best}, the best unguarded)",
             x["completed"] > best),
            (f"{rec['during']} requests during the outage (target <= {b['target_outage_requests']})",
             rec["during"] <= b["target_outage_requests"]),
            (f"first success {fmt(first, '{:.1f} s', 'never')} after it (target <= "
             f"{b['target_first_ok_s']:g} s)", first is not None and first <= b["target_first_ok_s"]),
            (f"{x['summary']['duplicate_charges']} duplicate charges (target 0)",
             x["summary"]["duplicate_charges"] == 0)]
    return out


def met(ok):
    return "met" if ok else "NOT met"


def summary_drill(r):
    out = summary_batch(r, "3. drill")
    for key, ts in drill_targets(r).items():
        label = CONTENDERS[key][2]
        out.append(f"3. drill, {label}, issue 12 targets: " + "; ".join(
            f"{t}: {met(ok)}" for t, ok in ts))
    return out


def plot_drill(r, png, tmp):
    """Requests per 100 ms over time, one panel and line per contender (gnuplot, pngcairo or
    png); the data goes next to the picture as drill.dat (gnuplot drill.gp redraws it)."""
    import shutil
    gp = shutil.which("gnuplot")
    b = r["cfg"]
    w = b["bucket_ms"] / 1000
    series = [x["summary"].get("series", {}).get("requests", []) for x in r["rows"]]
    oks = [x["summary"].get("series", {}).get("ok", []) for x in r["rows"]]
    n = max((len(s) for s in series + oks), default=0)
    half = int(round(0.5 / w))                 # a 1 s moving mean, centred
    data = Path(png).with_name("drill.dat")
    with open(data, "w") as f:
        f.write("# t_s " + " ".join(f"req_{x['key']} mean1s_{x['key']}" for x in r["rows"])
                + " " + " ".join(f"ok_{x['key']} okmean1s_{x['key']}" for x in r["rows"])
                + "\n# requests reaching the provider per 100 ms (and their 1 s moving mean), "
                "then 2xx answers written whole per 100 ms (and their 1 s moving mean), "
                "from GET /__summary?bucket_ms=100 of each contender's run\n")
        for k in range(n):
            cells = []
            for s in series + oks:
                window = [s[j] if j < len(s) else 0 for j in range(max(0, k - half), k + half)]
                cells += [str(s[k] if k < len(s) else 0), f"{sum(window) / len(window):.2f}"]
            f.write(f"{k * w:.1f} " + " ".join(cells) + "\n")
    if not gp:
        return "gnuplot is not installed (scripts/install-deps installs gnuplot-nox): no picture"
    terms = subprocess.run([gp, "-e", "set terminal"], capture_output=True, text=True)
    rows = len(r["rows"])
    term = (f"pngcairo size 1100,{200 + 220 * rows} font ',10'"
            if "pngcairo" in terms.stdout + terms.stderr else f"png size 1100,{200 + 220 * rows}")
    o0, o1 = b["outage"]
    s0, s1 = b["slow"]
    ymax = max([max(s) for s in series if s] + [1])
    colors = ["#7b3294", "#1b9e77", "#2c7bb6", "#d95f02", "#666666", "#e7298a"]
    lines = [f"set terminal {term}", "set output 'drill.png'",
             f"set multiplot layout {rows},1 title 'Fault drill: requests reaching the provider "
             f"per 100 ms (N={b['n']}, {b['workers']} workers, limit {b['rpm']}/min; thin: per "
             f"100 ms, thick: 1 s mean; dashed black: 2xx answers, 1 s mean)'",
             "set grid ytics", "set key top right opaque box",
             f"set xrange [0:{n * w:.1f}]", f"set yrange [0:{ymax * 1.15:.0f}]",
             "set ylabel 'requests / 100 ms'",
             f"set object 1 rect from {o0},graph 0 to {o1},graph 1 fc rgb '#f4cccc' fs solid 0.5 noborder behind",
             f"set object 2 rect from {s0},graph 0 to {s1},graph 1 fc rgb '#fff2cc' fs solid 0.5 noborder behind",
             f"set label 1 'outage' at {(o0 + o1) / 2},graph 0.9 center",
             f"set label 2 'slow' at {(s0 + s1) / 2},graph 0.9 center"]
    for i, x in enumerate(r["rows"]):
        c = colors[i % len(colors)]
        if i == rows - 1:
            lines.append("set xlabel 't, s (batch start = 0)'")
        okcol = 2 * rows + 2 * i + 3
        lines.append(f"plot 'drill.dat' using 1:{2 * i + 2} with lines lw 0.8 lc rgb '{c}' "
                     f"notitle, '' using 1:{2 * i + 3} with lines lw 2.5 lc rgb '{c}' "
                     f"title '{x['label']}: requests', '' using 1:{okcol} with lines lw 1.8 "
                     f"dt 2 lc rgb '#000000' title '2xx answers'")
    lines.append("unset multiplot")
    script = Path(png).with_name("drill.gp")
    script.write_text("# gnuplot drill.gp (in this directory) redraws drill.png from drill.dat\n"
                      + "\n".join(lines) + "\n")
    p = subprocess.run([gp, script.name], capture_output=True, text=True, timeout=60,
                       cwd=str(script.parent))
    if p.returncode != 0 or not Path(png).exists():
        return f"gnuplot failed: {p.stderr.strip()[-300:]}"
    return None


# ---------------------------------------------------------------- 5. flaky provider

def flaky_plan(b):
    return {"per_body": {"first": ["200", "503"], "again": ["200"],
                         "comment": "every other call's first attempt a 503, any resend a 200"}}


def scenario_flaky(cfg, build, tmp):
    b = batch_cfg(cfg, "flaky_")
    d = Path(tempfile.mkdtemp(prefix="flaky-", dir=tmp))
    make_bodies(d, b["n"])
    plan = d / "plan.json"
    plan.write_text(json.dumps(flaky_plan(b)))
    mock_args = ["--plan", str(plan)]
    res, errors, threads = {}, {}, []

    def one(key):
        log(f"flaky: {CONTENDERS[key][2]}: {b['n']} calls, {b['workers']} threads, every other "
            f"call's first attempt a 503 (cap {b['cap_s']} s)")
        try:
            r = run_contender(key, b, build, tmp, d, mock_args, b["cap_s"])
        except Exception as e:          # reported by the main thread
            errors[key] = e
            return
        log(f"flaky: {r['label']}: {r['completed']}/{b['n']} completed in {r['wall_s']:.1f} s, "
            f"{r['summary']['requests']} upstream requests")
        res[key] = r

    for key in b["contenders"]:
        if key in b.get("alongside", []):
            t = threading.Thread(target=one, args=(key,), daemon=True)
            t.start()
            threads.append(t)
    for key in b["contenders"]:
        if key not in b.get("alongside", []):
            one(key)
    for t in threads:
        t.join(b["cap_s"] + 60)
    if errors:
        raise RuntimeError("; ".join(f"{k}: {type(e).__name__}: {e}" for k, e in errors.items()))
    return {"cfg": b, "rows": [res[k] for k in b["contenders"] if k in res],
            "mock_args": mock_args, "plan": flaky_plan(b)}


def flaky_targets(r, x):
    b = r["cfg"]
    ok = x["completed"] / x["n"]
    per_call = x["summary"]["requests"] / x["n"]
    if x["mode"] == "guard":
        return [(f"{ok * 100:.1f} % succeeded (target >= {b['target_success'] * 100:g} %)",
                 ok >= b["target_success"]),
                (f"{per_call:.2f} upstream requests per call (target <= {b['target_per_call']:g})",
                 per_call <= b["target_per_call"])]
    if x["mode"] == "plain":
        return [(f"{ok * 100:.1f} % succeeded (target about 50 %)", 0.45 <= ok <= 0.55)]
    return []


def flaky_rows(r):
    return [
        ("completed calls (2xx to the client)",
         lambda x: f"{x['completed']} / {x['n']} ({x['completed'] / x['n'] * 100:.1f} %)"),
        ("upstream requests (per call)", lambda x: f"{x['summary']['requests']} "
         f"({x['summary']['requests'] / x['n']:.2f})"),
        ("503s from the provider", lambda x: str(x["summary"]["actions"].get("503", 0))),
        ("billed requests (per call)", lambda x: f"{x['summary']['billed_requests']} "
         f"({x['summary']['billed_requests'] / x['n']:.2f})"),
        ("duplicate charges (bodies)", lambda x: f"{x['summary']['duplicate_charges']} "
         f"({x['summary']['duplicate_bodies']})"),
        ("p50 / p99 latency per completed call, s",
         lambda x: f"{fmt(x['p50'])} / {fmt(x['p99'])}"),
        ("batch wall time, s", lambda x: f"{x['wall_s']:.1f}" + (" stopped" if x["capped"] else "")),
        ("guard records: outcomes", lambda x: ", ".join(
            f"{k} {v}" for k, v in sorted(x["outcomes"].items(), key=lambda kv: -kv[1])) or "-"),
        ("guard records: decisions", lambda x: ", ".join(
            f"{k} {v}" for k, v in sorted(x["decisions"].items(), key=lambda kv: -kv[1])) or "-"),
        ("issue 12 targets", lambda x: "; ".join(
            f"{t}: **{met(ok)}**" for t, ok in flaky_targets(r, x)) or "-"),
    ]


def report_flaky(r):
    b = r["cfg"]
    out = [f"N = {b['n']} calls (`POST /v1/chat/completions`, each a distinct ~230-byte JSON "
           f"body, the bodies of scenario 2), `build/bench/batch-host --threads {b['workers']}` "
           f"(one keep-alive handle per thread, each taking the next call), against a flaky "
           f"provider: `scripts/mock-provider --plan plan.json`, plan "
           f"`{json.dumps(r['plan'], separators=(',', ':'))}`: the first arrival of each "
           f"distinct body takes the next of 200, 503, 200, 503, ... (in arrival order), every "
           f"resend of a body it has seen gets a 200. So every other request of a client that "
           f"does not retry is a `503` (no `Retry-After`, not billed), and a retry always lands "
           f"on a 200, deterministically (no draws). No rate limit, no latency. A fresh "
           f"provider per contender; each is stopped (*stopped*) after {b['cap_s']} s. "
           + (f"The {', '.join('*' + CONTENDERS[k][2] + '*' for k in b.get('alongside', []))} "
              f"contender, which spends its time sleeping before its retries, runs alongside "
              f"the others (against its own provider), to keep the run short."
              if b.get("alongside") else ""),
           "", "Contenders:",
           f"- *no retry*: `batch-host --retry none --timeout-ms {b['timeout_s'] * 1000}`, "
           f"one attempt per call.",
           f"- *curl-style retry {b['curl_retry']}*: `batch-host --retry curl:{b['curl_retry']}`: "
           f"what `curl --retry {b['curl_retry']}` does: retries timeouts, 408, 429, 500, 502, "
           f"503, 504, waiting `Retry-After` or 1 s doubling (here: 1 s before each retry).",
           f"- *guard, defaults*: `batch-host --retry none` under `curlguard run` with only "
           f"`CURLGUARD_STATE` (one shared state file) and `CURLGUARD_LOG` set: the library's "
           f"defaults for everything else (3 attempts, backoff, the circuit breaker and the "
           f"retry budget: {library_defaults_text()}).",
           ""]
    out += table(r, flaky_rows(r))
    out += ["", f"Issue 12's targets: the guard with the defaults >= "
            f"{b['target_success'] * 100:g} % of calls succeeded and <= {b['target_per_call']:g} "
            f"upstream requests per call; without retries about 50 %. The ideal for a client "
            f"that retries is {1.5:.2f} requests per call (every other call needs one retry)."]
    out += [""] + measure_notes()
    return out + stderr_notes(r["rows"])


def summary_flaky(r):
    out = []
    for x in r["rows"]:
        s = x["summary"]
        ts = flaky_targets(r, x)
        head = "; ".join(f"{t}: {met(ok)}" for t, ok in ts) if ts else \
            f"{x['completed'] / x['n'] * 100:.1f} % succeeded"
        out.append(f"5. flaky provider, {x['label']}: {x['completed']}/{x['n']} completed, "
                   f"{head}; " + (f"{s['requests'] / x['n']:.2f} upstream requests per call, "
                                  if x["mode"] != "guard" else "") +
                   f"{s['actions'].get('503', 0)} 503s, {s['duplicate_charges']} duplicate "
                   f"charges, wall {x['wall_s']:.1f} s" + (" (stopped)" if x["capped"] else ""))
    return out


# ---------------------------------------------------------------- 6. unknown limit

def scenario_unknown(cfg, build, tmp):
    return run_batch(cfg, build, tmp, "unk_", "unknown-limit", " not configured")


def unknown_targets(r, x):
    b = r["cfg"]
    s = x["summary"]
    share = s["429s"] / s["requests"] if s["requests"] else 0.0
    ratio = x["wall_s"] / b["ideal_s"]
    return [(f"{x['completed']}/{x['n']} completed (target {x['n']})", x["completed"] == x["n"]),
            (f"{s['429s']} 429s = {share * 100:.1f} % of {s['requests']} requests (target <= "
             f"{b['target_429_share'] * 100:g} %)", share <= b["target_429_share"]),
            (f"wall {x['wall_s']:.1f} s = x{ratio:.2f} N/R (target <= x{b['target_wall_x']:g} = "
             f"{b['ideal_s'] * b['target_wall_x']:.0f} s)" + (" stopped" if x["capped"] else ""),
             ratio <= b["target_wall_x"])]


def report_unknown(r):
    b = r["cfg"]
    out = [f"Scenario 2's batch (N = {b['n']} calls, {b['workers']} workers, the same bodies, "
           f"`scripts/mock-provider "
           f"{' '.join(Path(x).name if x.startswith('/') else x for x in r['mock_args'])}`: "
           f"R = {b['rpm']} requests/min, refused requests count too) with the guard told "
           f"nothing about the limit: scenario 2's guard settings without `CURLGUARD_RPM` "
           f"(`CURLGUARD_FIRST_BYTE_TIMEOUT_MS` and `CURLGUARD_READ_TIMEOUT_MS` "
           f"{b['timeout_s'] * 1000}, `CURLGUARD_DEADLINE_MS` {b['deadline_s'] * 1000}, "
           f"`CURLGUARD_MAX_ATTEMPTS` {b['guard_attempts']}, one shared state file, the log on; "
           f"library defaults otherwise: {library_defaults_text()}), so whatever pace it keeps "
           f"it has to learn from the provider's answers. *curl*: `xargs -P {b['workers']}` "
           f"over `bench/curl-call plain` ({b['n']} curl processes sharing the state file); "
           f"*C host*: `batch-host --threads {b['workers']} --retry none` (one process). A "
           f"fresh provider per contender; each is stopped (*stopped*) after "
           f"{b['ideal_s'] * 2 + 20:.0f} s (twice N/R + 20 s). The unguarded contenders and the "
           f"guard that knows R are in scenario 2.", ""]
    rows = batch_rows(r)
    rows.insert(3, ("429s, share of the upstream requests", lambda x: (
        f"{x['summary']['429s'] / x['summary']['requests'] * 100:.1f} %"
        if x["summary"]["requests"] else "-")))
    rows.append(("guard records: decisions", lambda x: ", ".join(
        f"{k} {v}" for k, v in sorted(x["decisions"].items(), key=lambda kv: -kv[1])) or "-"))
    rows.append(("issue 12 targets", lambda x: "; ".join(
        f"{t}: **{met(ok)}**" for t, ok in unknown_targets(r, x))))
    out += table(r, rows)
    out += ["", f"Issue 12's targets: every call completes, at most "
            f"{b['target_429_share'] * 100:g} % of the requests get a 429, the wall time is "
            f"within {b['target_wall_x']:g} x N/R ({b['ideal_s'] * b['target_wall_x']:.0f} s)."]
    out += [""] + measure_notes()
    return out + stderr_notes(r["rows"])


def summary_unknown(r):
    out = []
    for x in r["rows"]:
        s = x["summary"]
        out.append(f"6. unknown limit, {x['label']}: " + "; ".join(
            f"{t}: {met(ok)}" for t, ok in unknown_targets(r, x))
            + f"; {s['requests'] / x['n']:.2f} upstream requests per call, "
            f"{s['duplicate_charges']} duplicate charges")
    return out


# ---------------------------------------------------------------- 4b. report throughput

def scenario_report(cfg, build, tmp):
    script = ROOT / "bench" / "report-bench.py"
    if not os.path.exists(script):
        return {"missing": True}
    argv = [PYTHON, str(script), "--build", str(build),
            "--lines", str(100_000 if cfg["quick"] else 1_000_000),
            "--runs", "1" if cfg["quick"] else "3"]
    cfg["report_argv"] = " ".join(["bench/report-bench.py"] + argv[2:])
    p = PROCS.popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, env=plain_env(), text=True, cwd=str(ROOT))
    try:
        out, err = p.communicate(timeout=cfg["report_timeout_s"])
    except subprocess.TimeoutExpired:
        PROCS.stop(p)
        raise RuntimeError(f"bench/report-bench.py did not finish within {cfg['report_timeout_s']} s")
    finally:
        if p in PROCS.live:
            PROCS.live.remove(p)
    if p.returncode != 0:
        raise RuntimeError(f"bench/report-bench.py failed ({p.returncode}): {err.strip()[-300:]}")
    return {"missing": False, "table": out.rstrip().splitlines(), "argv": cfg["report_argv"]}


def report_report(r):
    if r["missing"]:
        return ["`bench/report-bench.py` is not in this tree yet (it comes with `curlguard "
                "report`): not run."]
    return [f"Output of `{r['argv']}` (a generated log of realistic records, timed "
            "`curlguard report --json` on it, best of the runs):", ""] + r["table"]


def summary_report(r):
    if r["missing"]:
        return []
    rows = [l for l in r["table"] if l.startswith("|") and l.strip("| ")[:1].isdigit()]
    if not rows:
        return ["4. report throughput: see its section"]
    cells = [c.strip() for c in rows[-1].strip("|").split("|")]
    return [f"4. report: {cells[0]} lines in {cells[3]} s (best), {cells[5]} lines/s, "
            f"peak RSS {cells[7]} MiB"]


# ---------------------------------------------------------------- summary

def summary_limiter(r):
    rows = {(x["mode"], x["procs"]): x for x in r["rows"]}
    out = []
    for mode in ("rpm", "rpm+tpm"):
        one = rows.get((mode, 1))
        many = max((x for x in r["rows"] if x["mode"] == mode), key=lambda x: x["procs"], default=None)
        if one and many:
            out.append(f"limiter ({mode}): one admission {one['median']['ns_per_acquire']:.0f} ns "
                       f"uncontended; {many['procs']} processes on one pool: "
                       f"{many['median']['acq_per_s'] / 1e6:.1f} M admissions/s in total, "
                       f"{many['median']['cpu_ns_per_acquire']:.0f} CPU ns each")
    lost = sum(x["unaccounted_requests"] + x["unaccounted_tokens"] for row in r["rows"] for x in row["runs"])
    out.append(f"limiter: unaccounted admissions {lost} (target 0)")
    return out


def summary_accuracy(r):
    out = []
    for b in r["rows"]:
        if "error" in b:
            out.append(f"accuracy, {b['label']}: failed: {b['error']}")
            continue
        s = b["stats"]
        target = " (target 0)" if b["guard_env"] is not None else ""
        out.append(f"accuracy, {b['label']}: {s['429s']} 429s from the mock{target}, "
                   f"{b['codes'].get('429', 0)} of {b['n']} calls ended in 429; wall "
                   f"{b['wall_s']:.1f} s vs N/R {b['ideal_s']:.1f} s "
                   f"({(b['wall_s'] / b['ideal_s'] - 1) * 100:+.1f} %); busiest 1 s "
                   f"{s['peak_admitted_per_1s']} admitted ({s['peak_per_1s']} arrived)")
    return out


def summary_overhead(r):
    st, out = ovh_stats(r), []
    for h in r["hosts"]:
        parts = []
        for k, label, *_ in r["rows"]:
            s = st.get((h, k))
            if not s:
                continue
            tg = ovh_target(r, st, h, k)
            parts.append(f"{label} {s['cpu']:.1f} µs"
                         + (f" ({s['inc']:+.1f})" if s["inc"] is not None else "")
                         + (f" [{tg[0]}]" if tg else ""))
        if parts:
            out.append(f"1. overhead, {h} (CPU per request, client + proxy; in brackets the "
                       "paired increase over no preload): " + "; ".join(parts))
    return out


# ---------------------------------------------------------------- main

def snapshot_build(build, tmp):
    """Copies of the built binaries, so a rebuild of BUILD during the run (make in another
    shell) cannot change or remove them under the workers. Missing ones stay missing: the
    scenario that needs them says so."""
    import shutil
    snap = tmp / "build"
    (snap / "bench").mkdir(parents=True)
    (snap / "tests").mkdir()
    for rel in ("curlguard", "libcurlguard.so", "bench/limiter-bench", "bench/batch-host",
                "tests/cgmulti", "bench/fleet-bench"):
        if (build / rel).exists():
            shutil.copy2(build / rel, snap / rel)
    # The library finds the shipped price table from its own path (../data/prices.json of
    # the build directory): without a copy beside the snapshot every record's cost_usd is
    # null (it was, in the runs before 2026-12-01 13:15 UTC).
    (tmp / "data").mkdir(exist_ok=True)
    shutil.copy2(ROOT / "data" / "prices.json", tmp / "data" / "prices.json")
    return snap



# ---------------------------------------------------------------- 7. fleet (issue 15)

FLEET = {"machines": 4, "workers": 16, "rpm": 600, "n": 240, "per_proc": 5,
         "bench_n": 2000}
FLEET_QUICK = dict(FLEET, n=80, bench_n=500)


def _free_port():
    import socket
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


class RedisServer:
    """A redis-server of the bench's own on a free loopback port (no persistence)."""

    def __init__(self, tmp):
        import shutil
        self.port = _free_port()
        exe = shutil.which("redis-server")
        if not exe:
            raise RuntimeError("redis-server is not installed (scripts/install-deps)")
        self.dir = Path(tempfile.mkdtemp(prefix="redis-", dir=tmp))
        self.proc = PROCS.popen([exe, "--port", str(self.port), "--bind", "127.0.0.1",
                                 "--save", "", "--appendonly", "no", "--dir", str(self.dir)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        import socket
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), 0.2) as so:
                    so.sendall(b"PING\r\n")
                    if so.recv(16):
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.02)
        self.url = f"redis://127.0.0.1:{self.port}"

    def close(self):
        PROCS.stop(self.proc)


def fleet_run(tmp, name, mock, f, build, env_for):
    """f["machines"] "machines" (a state file each) of f["workers"] curl workers, N / machines
    calls each, all at once; env_for(m) -> the guard's variables of machine m."""
    machines, n, per = f["machines"], f["n"], f["per_proc"]
    d = Path(tempfile.mkdtemp(prefix=name + "-", dir=tmp))
    curl = [CURL, "-q", "-sS", "-w", "%{http_code}\\n", "-H", "Content-Type: application/json",
            "--data-binary", CHAT_BODY, "-K"]
    seq0 = mock.get("/__stats")["requests"]
    procs, states = [], []
    t0 = time.monotonic()
    for m in range(machines):
        files = []
        mine = list(range(m, n, machines))
        for w in range(0, len(mine), per):
            urls = [f"{mock.base}/v1/chat/completions?b={name}&m={m}&i={i}" for i in mine[w:w + per]]
            fp = d / f"m{m}-w{w:04d}.curl"
            write_curl_config(fp, urls)
            files.append(str(fp))
        (d / f"list{m}").write_text("\n".join(files) + "\n")
        state = f"/dev/shm/curlguard-bench-{os.getpid()}-{name}-m{m}.state"
        states.append(state)
        try:
            os.unlink(state)
        except OSError:
            pass
        env = plain_env(CURLGUARD_STATE=state, CURLGUARD_LOG=d / f"m{m}.jsonl", **env_for(m))
        argv = ["xargs", "-P", str(f["workers"]), "-n", "1", "-a", str(d / f"list{m}"),
                str(build / "curlguard"), "run", "--"] + curl
        out = open(d / f"stdout{m}", "wb")
        err = open(d / f"stderr{m}", "wb")
        procs.append((PROCS.popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                  env=env), out, err))
    try:
        for p, out, err in procs:
            wait_rusage(p, n / f["rpm"] * 60 * 4 + 60)
            out.close()
            err.close()
    finally:
        for p, _, _ in procs:
            PROCS.stop(p)
        for st in states:
            try:
                os.unlink(st)
            except OSError:
                pass
    wall = time.monotonic() - t0
    codes = {}
    for m in range(machines):
        for line in (d / f"stdout{m}").read_text(errors="replace").split():
            codes[line] = codes.get(line, 0) + 1
    stats = mock.get(f"/__stats?since={seq0}")
    errs = []
    for m in range(machines):
        errs += (d / f"stderr{m}").read_text(errors="replace").strip().splitlines()[-2:]
    span = (stats["last_t"] - stats["first_t"]) if stats["requests"] > 1 else 0
    # The combined rate past the initial burst (one second's worth of the limit: what a
    # GCRA with the default burst lets go at once).
    burst = max(1.0, f["rpm"] / 60)
    return {"name": name, "n": n, "wall_s": wall, "codes": codes, "stats": stats,
            "rate_rpm": (stats["admitted"] - burst) / span * 60 if span > 0 else None,
            "stderr": errs[-4:]}


def fleet_bench(build, tmp, redis_url, n, inflight):
    exe = build / "bench" / "fleet-bench"
    if not exe.exists():
        return None
    env = plain_env(CURLGUARD_STATE=Path(tmp) / f"fb-{bool(redis_url)}-{inflight}.state")
    if redis_url:
        env["CURLGUARD_REDIS"] = redis_url
    argv = [str(exe), "--n", str(n)] + (["--inflight"] if inflight else [])
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    return json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr[-300:]}


def scenario_fleet(cfg, build, tmp):
    f = FLEET_QUICK if cfg["quick"] else FLEET
    rpm = f["rpm"]
    out = {"f": f, "rows": [], "bench": []}
    redis = RedisServer(tmp)
    try:
        variants = [
            (f"Redis: every machine CURLGUARD_RPM={rpm}, one limit", lambda m: {
                "CURLGUARD_RPM": rpm, "CURLGUARD_REDIS": redis.url,
                "CURLGUARD_REDIS_PREFIX": f"bench{os.getpid()}:"}),
            (f"separate local states: every machine CURLGUARD_RPM={rpm}", lambda m: {
                "CURLGUARD_RPM": rpm}),
            (f"separate local states: CURLGUARD_RPM={rpm // f['machines']} each (static split)",
             lambda m: {"CURLGUARD_RPM": rpm / f["machines"]}),
        ]
        for i, (label, env_for) in enumerate(variants):
            log(f"fleet: {label}: {f['n']} calls, {f['machines']} x {f['workers']} workers")
            with Mock(tmp, "--limit-rpm", str(rpm)) as mock:
                r = fleet_run(tmp, f"fleet{i}", mock, f, build, env_for)
            r["label"] = label
            r["ideal_s"] = f["n"] / rpm * 60
            out["rows"].append(r)
        for url in (None, redis.url):
            for inflight in (False, True):
                b = fleet_bench(build, tmp, url, f["bench_n"], inflight)
                if b:
                    out["bench"].append(b)
    finally:
        redis.close()
    return out


def report_fleet(r):
    f = r["f"]
    lines = [f"{f['machines']} machines (a state file each) x {f['workers']} curl workers, "
             f"{f['n']} calls in all, against mock-provider --limit-rpm {f['rpm']}; every "
             "machine's guard configured as below.", "",
             "| fleet | calls 200 | 429s from the mock | wall s | N/R s | wall / (N/R) | "
             "combined rate (rpm) | of the limit |", "|---|---|---|---|---|---|---|---|"]
    lines[0] += (" Combined rate: (requests admitted by the mock - one second's burst) / "
                 "(last arrival - first), per minute; the guard paces at 97 % of the limit.")
    for x in r["rows"]:
        rate = x["rate_rpm"]
        lines.append(f"| {x['label']} | {x['codes'].get('200', 0)} / {x['n']} | "
                     f"{x['stats']['429s']} | {x['wall_s']:.1f} | {x['ideal_s']:.1f} | "
                     f"{x['wall_s'] / x['ideal_s']:.2f} | {fmt(rate, '{:.0f}')} | "
                     f"{fmt(rate / f['rpm'] * 100 if rate else None, '{:.1f} %')} |")
    lines += ["", "Admission cost (build/bench/fleet-bench: gate, enter, recheck, leave, "
              "result of one call, nobody waiting; Redis on loopback):", "",
              "| back end | in-flight slot | p50 µs | p99 µs | round trips waited / admission "
              "| sent without waiting / admission |", "|---|---|---|---|---|---|"]
    for b in r["bench"]:
        if "error" in b:
            lines.append(f"| failed: {b['error']} | | | | | |")
            continue
        lines.append(f"| {b['backend']} | {'yes' if b['inflight'] else 'no'} | {b['p50_us']} | "
                     f"{b['p99_us']} | {b['round_trips_per_admission']} | "
                     f"{b['sent_per_admission']} |")
    return lines


def summary_fleet(r):
    out = []
    for x in r["rows"]:
        out.append(f"7. fleet, {x['label']}: {x['codes'].get('200', 0)}/{x['n']} ok, "
                   f"{x['stats']['429s']} 429s, wall {x['wall_s']:.1f} s vs N/R "
                   f"{x['ideal_s']:.1f} s, combined {fmt(x['rate_rpm'], '{:.0f}')} rpm")
    for b in r["bench"]:
        if "error" not in b:
            out.append(f"7. fleet admission, {b['backend']}{' + slot' if b['inflight'] else ''}: "
                       f"p50 {b['p50_us']} µs, p99 {b['p99_us']} µs, "
                       f"{b['round_trips_per_admission']} round trips")
    return out

SCENARIOS = [
    ("overhead", "1. Overhead: sequential keep-alive requests to a fast local endpoint",
     scenario_overhead, report_overhead, summary_overhead),
    ("batch", "2. Batch against a rate-limited provider", scenario_batch, report_batch,
     summary_batch),
    ("drill", "3. Fault drill: faults, a full outage and a slow period during the batch",
     scenario_drill, report_drill, summary_drill),
    ("limiter", "4a. Limiter micro-benchmark", scenario_limiter, report_limiter, summary_limiter),
    ("accuracy", "4b. Limiter accuracy: 32 curl workers against a rate-limited provider",
     scenario_accuracy, report_accuracy, summary_accuracy),
    ("report", "4c. Report throughput (`curlguard report`)", scenario_report, report_report,
     summary_report),
    ("flaky", "5. Flaky provider: every other request a 503", scenario_flaky, report_flaky,
     summary_flaky),
    ("unknown-limit", "6. Unknown limit: scenario 2's batch, no `CURLGUARD_RPM`",
     scenario_unknown, report_unknown, summary_unknown),
    ("fleet", "7. Fleet: 4 machines x 16 workers, one limit through Redis", scenario_fleet, report_fleet, summary_fleet),
]


def loadavg():
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


def git_rev():
    p = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                       capture_output=True, text=True)
    return p.stdout.strip() or "unknown"


def machine():
    model = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    curl = subprocess.run([CURL, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    try:
        load = open("/proc/loadavg").read().split()[0]
    except OSError:
        load = "?"
    # How an idle CPU waits (what a wakeup costs, scenario 1): the cpuidle driver and, for
    # the guest driver haltpoll, how long it polls before it halts.
    idle = []
    for f in ("/sys/devices/system/cpu/cpuidle/current_driver",
              "/sys/module/haltpoll/parameters/guest_halt_poll_ns"):
        try:
            idle.append(f"{Path(f).name} {open(f).read().strip()}")
        except OSError:
            pass
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(), "load": load,
            "python": platform.python_version(), "curl": curl, "idle": ", ".join(idle)}


def main():
    ap = argparse.ArgumentParser(description="curlguard benchmarks -> bench/RESULTS.md")
    ap.add_argument("--quick", action="store_true", help="the reduced run (bench-quick)")
    ap.add_argument("--build", default="build", help="build directory (default build)")
    ap.add_argument("--out", help="results file (default bench/RESULTS.md; with --quick "
                    "BUILD/bench/RESULTS-quick.md; with --only and without --quick "
                    "BUILD/bench/RESULTS-only.md, so a partial run never replaces the committed "
                    "results unless asked to); the picture drill.png goes next to it")
    ap.add_argument("--only", help="comma list of scenarios: " + ", ".join(k for k, *_ in SCENARIOS)
                    + " (e.g. --only drill,flaky,unknown-limit; with --quick: each reduced)")
    ap.add_argument("--command", help="the command to record (default: this one)")
    ap.add_argument("--drill-failfast", action="store_true",
                    help="the drill also runs the guard with CURLGUARD_BREAKER_OPEN=fail (the "
                    "fail-fast breaker of before issue 12; about 90 s more in the full run)")
    ap.add_argument("--overhead-rounds", type=int, metavar="N",
                    help="rounds of pairs of scenario 1 (overhead; default 5, with --quick 2): "
                    "each round about 100 s in the full run; more rounds narrow the medians "
                    "on a machine whose speed drifts (see the null pairs' noise)")
    ap.add_argument("--without", default="",
                    help="comma list of tools scenario 1 (overhead) is to treat as missing, to "
                    "check its 'not measured' cells: " + ", ".join(OVH_TOOLS))
    args = ap.parse_args()
    cfg = dict(QUICK if args.quick else FULL, drill_failfast=args.drill_failfast,
               without={x.strip() for x in args.without.split(",") if x.strip()})
    if args.overhead_rounds is not None:
        if not 1 <= args.overhead_rounds <= 100:
            ap.error("--overhead-rounds: 1 to 100")
        cfg["ovh_runs"] = args.overhead_rounds
    build = (ROOT / args.build).resolve()
    only = set(x.strip() for x in args.only.split(",") if x.strip()) if args.only else None
    if only and only - {k for k, *_ in SCENARIOS}:
        ap.error(f"--only: unknown scenario(s) {', '.join(sorted(only - {k for k, *_ in SCENARIOS}))}"
                 f" (known: {', '.join(k for k, *_ in SCENARIOS)})")
    out = Path(args.out) if args.out else \
        (build / "bench" / "RESULTS-quick.md" if args.quick else
         build / "bench" / "RESULTS-only.md" if only else ROOT / "bench" / "RESULTS.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    png = out.with_name("drill.png")
    command = args.command or " ".join(shlex.quote(a) for a in [PYTHON] + sys.argv)

    def on_signal(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    started = datetime.datetime.now().astimezone()
    m0 = machine()
    t_start = time.monotonic()
    sections, failed, summary = [], [], []
    with tempfile.TemporaryDirectory(prefix="curlguard-bench-") as tmp:
        build = snapshot_build(build, Path(tmp))
        try:
            for key, title, run, report, summarise in SCENARIOS:
                if only and key not in only:
                    continue
                t0 = time.monotonic()
                load0 = loadavg()
                log(f"{key}: start (load average {load0})")
                try:
                    res = run(cfg, build, tmp)
                    if key == "drill":
                        err = plot_drill(res, png, tmp)
                        res["plot_error"] = err
                        log(f"drill: picture: {err or png}")
                    body = report(res)
                    summary += summarise(res)
                    log(f"{key}: done in {time.monotonic() - t0:.1f} s")
                except KeyboardInterrupt:
                    raise
                except Exception as e:
                    failed.append(key)
                    log(f"{key}: FAILED: {e}")
                    traceback.print_exc()
                    body = [f"**Failed**: {type(e).__name__}: {e}"]
                    summary.append(f"{key}: FAILED: {type(e).__name__}: {e}")
                finally:
                    PROCS.stop_all()
                sections.append((title, time.monotonic() - t0, body, load0, loadavg()))
        finally:
            PROCS.stop_all()

    total = time.monotonic() - t_start
    m = machine()
    lines = ["# curlguard benchmarks", "",
             "Written by `bench/run.py`: `make bench` rewrites this file and `drill.png`; "
             "`make bench-quick` (the reduced run, to check the harness) writes "
             "`build/bench/RESULTS-quick.md` instead. Numbers are measurements, not assertions; "
             "every count of requests, bills and duplicates is the mock provider's ledger.", "",
             f"- mode: **{'quick' if args.quick else 'full'}**"
             + (f", **partial run**: only {', '.join(k for k, *_ in SCENARIOS if k in only)}"
                if only else ""),
             f"- command: `{command}` (tree `{git_rev()}`)",
             f"- date: {started.strftime('%Y-%m-%d %H:%M:%S %Z')}, total {total:.0f} s",
             f"- machine: `nproc` = {m['nproc']}, CPU {m['cpu']}, Linux {m['kernel']}"
             + (f" (cpuidle: {m['idle']})" if m.get("idle") else "") + "; load "
             f"average (1 min) {m0['load']} at the start, {m['load']} at the end (other work on "
             f"the machine shows in the numbers)",
             f"- {m['curl']}; Python {m['python']}",
             "", "## Summary", ""] + [f"- {x}" for x in summary] + [""]
    for title, secs, body, l0, l1 in sections:
        lines += [f"## {title}", "", f"({secs:.0f} s; load average {l0} at its start, {l1} at "
                  f"its end)", ""] + body + [""]
    tmp_out = out.with_name(out.name + ".tmp")
    tmp_out.write_text("\n".join(lines).rstrip() + "\n")
    os.replace(tmp_out, out)
    for x in summary:
        log(x)
    log(f"wrote {out} in {total:.0f} s" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        PROCS.stop_all()
        log("interrupted")
        sys.exit(130)
