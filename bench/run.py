#!/usr/bin/env python3
"""bench/run.py - curlguard's benchmark harness; writes bench/RESULTS.md.

    make bench          # full: about 3 minutes on 2 cores (limit: 15)
    make bench-quick    # reduced: about 1 minute (limit: 2); CI may run it
    /usr/bin/python3 bench/run.py [--quick] [--build DIR] [--out FILE] [--only a,b,c]

Scenarios (the limits issue):
  a. limiter   the cost of one admission (cg_state_now + cg_limiter_reserve on a mapped
               state file), by build/bench/limiter-bench, with 1, 2, 8, 64 processes
               hammering one pool; medians of several runs.
  b. accuracy  N requests by unmodified /usr/bin/curl processes (xargs -P 32, several
               requests each) through `curlguard run` with one shared CURLGUARD_STATE and
               CURLGUARD_RPM=R, against scripts/mock-provider --limit-rpm R (the same R);
               then the same batch without the guard.
  c. overhead  sequential keep-alive requests from one curl process (curl -K with many
               URLs): no preload; preloaded with CURLGUARD off; guard on (log off, log
               on, log on + limiter); wall and CPU time of the curl process (wait4).

Python 3 standard library only. Everything listens on 127.0.0.1. Every server and worker
is started in its own session and stopped (by its process group id) at the end, also on
failure or Ctrl-C. A scenario that fails prints why; the others still run. Numbers are
reported, never asserted: the exit status is 1 only when a scenario could not run.
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

FULL = {
    "micro_procs": [1, 2, 8, 64], "micro_modes": ["rpm", "rpm+tpm"], "micro_ms": 1000,
    "micro_runs": 5,
    "acc_rpm": 600, "acc_n": 600, "acc_workers": 32, "acc_per_proc": 5, "acc_margin": 0.01,
    "acc_tpm": 22800, "acc_tpm_n": 300,
    "ovh_n": 2000, "ovh_runs": 5,
}
QUICK = {
    "micro_procs": [1, 2, 8, 64], "micro_modes": ["rpm", "rpm+tpm"], "micro_ms": 200,
    "micro_runs": 3,
    "acc_rpm": 600, "acc_n": 150, "acc_workers": 32, "acc_per_proc": 5, "acc_margin": 0.01,
    "acc_tpm": 22800, "acc_tpm_n": 60,
    "ovh_n": 300, "ovh_runs": 3,
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
        raise TimeoutError(f"{p.args[0]} did not finish within {timeout:.0f} s")
    return p.returncode, ru.ru_utime + ru.ru_stime


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

def run_batch(tmp, name, mock, n, workers, per_proc, guard_env, build, timeout):
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
        (f"guard, RPM {rpm * (1 - margin):g} ({margin * 100:g} % under)", ["--limit-rpm", str(rpm)],
         {"CURLGUARD_RPM": f"{rpm * (1 - margin):g}"}, n, n / (rpm * (1 - margin)) * 60, "rpm"),
        ("no guard", ["--limit-rpm", str(rpm)], None, n, n / rpm * 60, "rpm"),
        (f"guard, TPM {tpm:g} (= the provider's; no RPM)", ["--limit-tpm", str(tpm)],
         {"CURLGUARD_TPM": tpm}, tn, tn * cost / tpm * 60, "tpm"),
    ]
    for i, (label, margs, genv, nn, ideal, kind) in enumerate(rows):
        log(f"accuracy: {label}: {nn} requests, {workers} curl workers (ideal {ideal:.0f} s)")
        try:
            with Mock(tmp, *margs) as mock:
                b = run_batch(tmp, f"b{i}", mock, nn, workers, per_proc, genv, build,
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
    rpm, n, tpm, cost = r["rpm"], r["n"], r["tpm"], r["cost"]
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
           f"burst), refused requests count too. Guarded rows run every worker under "
           f"`curlguard run` with one shared `CURLGUARD_STATE` (defaults otherwise: 3 attempts). "
           f"Such a bucket admits at most {lim1s:g} requests in any 1 s window and {lim100:g} in "
           f"any 100 ms. The last row limits tokens instead: `--limit-tpm {tpm:g}` (bucket "
           f"{tburst:g} tokens, {tburst / cost:.1f} requests; at most {tlim1s:.1f} requests in 1 s).",
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
    out += ["", "*N/R* is N / limit (for the 1 %-under row, N / its own RPM; for the TPM row, "
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


# ---------------------------------------------------------------- c. overhead

def scenario_overhead(cfg, build, tmp):
    n, runs = cfg["ovh_n"], cfg["ovh_runs"]
    lib = build / "libcurlguard.so"
    if not lib.exists():
        raise RuntimeError(f"{lib.name} is missing from the build directory (make)")
    d = Path(tempfile.mkdtemp(prefix="overhead-", dir=tmp))
    state = f"/dev/shm/curlguard-bench-{os.getpid()}-overhead.state"
    logf = d / "usage.jsonl"
    variants = [
        ("no preload", {}),
        ("preloaded, CURLGUARD off", {"LD_PRELOAD": lib}),
        ("guard on, log off", {"LD_PRELOAD": lib, "CURLGUARD": 1, "CURLGUARD_LOG": "off",
                               "CURLGUARD_STATE": state}),
        ("guard on, log on", {"LD_PRELOAD": lib, "CURLGUARD": 1, "CURLGUARD_LOG": logf,
                              "CURLGUARD_STATE": state}),
        ("guard on, log on, limiter (RPM 1e8)", {"LD_PRELOAD": lib, "CURLGUARD": 1,
                                                 "CURLGUARD_LOG": logf, "CURLGUARD_STATE": state,
                                                 "CURLGUARD_RPM": "100000000"}),
    ]
    results = {name: [] for name, _ in variants}
    log(f"overhead: {n} sequential requests x {len(variants)} variants x {runs} runs")
    try:
        with Mock(tmp) as mock:
            conf = d / "urls.curl"
            # Distinct URLs: identical calls would be marked as host retries (repeat_of).
            write_curl_config(conf, [f"{mock.base}/v1/chat/completions?i={i}" for i in range(n)])
            argv = [CURL, "-q", "-sS", "-w", "%{http_code}\\n", "-H", "Content-Type: application/json",
                    "--data-binary", CHAT_BODY, "-K", str(conf)]
            # One untimed warm-up run (page cache, the mock's first connection).
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=plain_env(),
                           timeout=300)
            for run in range(runs):
                for name, extra in variants:
                    try:
                        os.unlink(logf)
                    except OSError:
                        pass
                    seq0 = mock.get("/__stats")["requests"]
                    with open(d / "stdout", "wb") as out, open(d / "stderr", "wb") as err:
                        t0 = time.monotonic()
                        p = PROCS.popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                        env=plain_env(**extra))
                        rc, cpu = wait_rusage(p, 300)
                        wall = time.monotonic() - t0
                    codes = (d / "stdout").read_text().split()
                    entries = mock.get(f"/__ledger?since={seq0}")["entries"]
                    errtext = (d / "stderr").read_text(errors="replace").strip()
                    results[name].append({
                        "wall_s": wall, "cpu_s": cpu, "rc": rc, "ok": codes.count("200"),
                        "requests": len(entries), "conns": len({e["conn"] for e in entries}),
                        "records": len(read_log(logf)) if "log on" in name else None,
                        "stderr": errtext.splitlines()[-3:]})
    finally:
        try:
            os.unlink(state)
        except OSError:
            pass
    return {"n": n, "runs": runs, "variants": [v for v, _ in variants], "results": results,
            "argv": argv}


def report_overhead(r):
    n = r["n"]
    out = [f"{n} sequential `POST /v1/chat/completions` requests ({len(CHAT_BODY)}-byte JSON body, "
           f"distinct URLs) from one `curl -K urls.curl` process over a keep-alive connection to "
           f"the mock (no rate limit), output to /dev/null. CPU = user+sys of the curl process "
           f"(`wait4`; its start-up is included, spread over the requests); wall includes the Python mock's own time per request, so the CPU column "
           f"is the one that shows the guard. Medians of {r['runs']} interleaved runs, after one "
           f"untimed warm-up.",
           "",
           "| variant | wall ms/request | CPU µs/request | wall ratio | CPU ratio | requests seen by the mock | connections | log records | exit |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    base = None
    for name in r["variants"]:
        runs = r["results"][name]
        if not runs:
            continue
        wall = statistics.median(x["wall_s"] for x in runs) / n
        cpu = statistics.median(x["cpu_s"] for x in runs) / n
        if base is None:
            base = (wall, cpu)
        recs = runs[-1]["records"]
        out.append(f"| {name} | {wall * 1e3:.3f} | {cpu * 1e6:.1f} | {wall / base[0]:.3f} | "
                   f"{cpu / base[1]:.3f} | {runs[-1]['requests']} | {runs[-1]['conns']} | "
                   f"{'-' if recs is None else recs} | "
                   f"{', '.join(str(x['rc']) for x in runs)} |")
    out += ["", "Per-run CPU µs/request: " + "; ".join(
        f"{name}: " + ", ".join(f"{x['cpu_s'] / n * 1e6:.1f}" for x in r["results"][name])
        for name in r["variants"])]
    errs = {name: runs[-1]["stderr"] for name, runs in r["results"].items() if runs and runs[-1]["stderr"]}
    if errs:
        out += ["", "stderr of the last run: " + "; ".join(f"{k}: `{' / '.join(v)}`" for k, v in errs.items())]
    return out


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
    n, res = r["n"], r["results"]
    med = {k: statistics.median(x["cpu_s"] for x in v) / n * 1e6 for k, v in res.items() if v}
    base = med.get("no preload")
    if not base:
        return []
    return ["overhead (CPU per request of the curl process): " + "; ".join(
        f"{k} {v:.1f} µs (x{v / base:.2f})" for k, v in med.items())]


# ---------------------------------------------------------------- main

def snapshot_build(build, tmp):
    """Copies of the built binaries, so a rebuild of BUILD during the run (make in another
    shell) cannot change or remove them under the workers. Missing ones stay missing: the
    scenario that needs them says so."""
    import shutil
    snap = tmp / "build"
    (snap / "bench").mkdir(parents=True)
    for rel in ("curlguard", "libcurlguard.so", "bench/limiter-bench"):
        if (build / rel).exists():
            shutil.copy2(build / rel, snap / rel)
    return snap


SCENARIOS = [
    ("limiter", "a. Limiter micro-benchmark", scenario_limiter, report_limiter, summary_limiter),
    ("accuracy", "b. Accuracy: 32 curl workers against a rate-limited provider", scenario_accuracy,
     report_accuracy, summary_accuracy),
    ("overhead", "c. Overhead per request", scenario_overhead, report_overhead, summary_overhead),
]


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
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(), "load": load,
            "python": platform.python_version(), "curl": curl}


def main():
    ap = argparse.ArgumentParser(description="curlguard benchmarks -> bench/RESULTS.md")
    ap.add_argument("--quick", action="store_true", help="the reduced run (bench-quick)")
    ap.add_argument("--build", default="build", help="build directory (default build)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS.md"))
    ap.add_argument("--only", help="comma list of scenarios: limiter, accuracy, overhead")
    ap.add_argument("--command", help="the command to record (default: this one)")
    args = ap.parse_args()
    cfg = QUICK if args.quick else FULL
    build = (ROOT / args.build).resolve()
    only = set(args.only.split(",")) if args.only else None
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
                try:
                    res = run(cfg, build, tmp)
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
                sections.append((title, time.monotonic() - t0, body))
        finally:
            PROCS.stop_all()

    total = time.monotonic() - t_start
    m = machine()
    lines = ["# curlguard benchmarks", "",
             "Written by `bench/run.py` (`make bench`, or `make bench-quick` for the reduced "
             "run); every run rewrites this file. Numbers are measurements, not assertions.", "",
             f"- mode: **{'quick' if args.quick else 'full'}**",
             f"- command: `{command}`",
             f"- date: {started.strftime('%Y-%m-%d %H:%M:%S %Z')}, total {total:.0f} s",
             f"- machine: `nproc` = {m['nproc']}, CPU {m['cpu']}, Linux {m['kernel']}; load "
             f"average (1 min) {m0['load']} at the start, {m['load']} at the end (other work on "
             f"the machine shows in the numbers)",
             f"- {m['curl']}; Python {m['python']}",
             "", "## Summary", ""] + [f"- {x}" for x in summary] + [""]
    for title, secs, body in sections:
        lines += [f"## {title}", "", f"({secs:.0f} s)", ""] + body + [""]
    out = Path(args.out)
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
