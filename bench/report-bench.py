#!/usr/bin/env python3
"""report-bench: how fast `curlguard report` reads a big usage log, and how much memory.

    /usr/bin/python3 bench/report-bench.py --build build [--lines N] [--runs 3] [--keep F]

Writes N (default 1,000,000) realistic usage records to a temp file, deterministically
(seed 1): calls of 1-4 attempts through three pools and six models (one unpriced; two
answered with dated names, as providers do), a
mix of ok, 429, 503, 500, read timeouts and resets, possibly-billed attempts, tokens
and costs on successes, repeated bodies and task ids, timestamps over about a day,
and one malformed line per 10,000.  Then times `BUILD/curlguard report --json FILE`
(best of --runs) and prints a small markdown table: lines, best and median seconds,
lines per second, peak RSS of the report process (getrusage of the child).
Standard library only; nothing touches the network.
"""

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

POOLS = [  # pool, host, path, models with (weight, price in/out per 1M tokens or None)
    ("openai", "api.openai.com", "/v1/chat/completions",
     [("gpt-4o-mini", 6, (0.15, 0.60)), ("gpt-4o", 2, (2.50, 10.00)),
      ("gpt-4.1-nano", 1, (0.10, 0.40))]),
    ("anthropic", "api.anthropic.com", "/v1/messages",
     [("claude-sonnet-4-20250514", 3, (3.00, 15.00)), ("claude-internal-x", 1, None)]),
    ("gemini", "generativelanguage.googleapis.com", "/v1beta/models",
     [("gemini-2.5-flash", 2, (0.30, 2.50))]),
]
# Providers answer some names with a dated variant: the successes carry it.
ANSWERED = {"gpt-4o": "gpt-4o-2024-08-06", "gpt-4o-mini": "gpt-4o-mini-2024-07-18"}
# outcome, status, curl_code, weight, possibly_billed, retryable
FAILURES = [
    ("http_429", 429, 0, 30, False, True),
    ("http_503", 503, 0, 20, False, True),
    ("http_500", 500, 0, 8, True, True),
    ("read_timeout", None, 28, 4, True, True),
    ("reset_after_send", None, 56, 3, True, True),
    ("http_400", 400, 0, 3, False, False),
]

TEMPLATE = (
    '{{"ts":"{ts}","pid":{pid},"request_id":"{rid}","task_id":{task},"attempt":{attempt},'
    '"final":{final},"method":"POST","host":"{host}","path":"{path}","pool":"{pool}",'
    '"status":{status},"curl_code":{curl_code},"outcome":"{outcome}","decision":"{decision}",'
    '"reason":"{reason}","queue_ms":{queue},"backoff_ms":{backoff},"connect_ms":{conn},'
    '"ttfb_ms":{ttfb},"duration_ms":{dur},"bytes_sent":{sent},"bytes_received":{recv},'
    '"model":"{model}","prompt_tokens":{pt},"completion_tokens":{ct},"total_tokens":{tt},'
    '"cached_tokens":{cached},"cost_usd":{cost},"possibly_billed":{pb},'
    '"body_digest":"{digest}","libcurl_resends":0,"repeat_of":null,"repeats":0}}\n')


def ts_text(ms):
    secs, milli = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{milli:03d}Z"


def generate(path, lines, seed=1):
    rnd = random.Random(seed)
    models = [(pool, host, p, m, w, price) for pool, host, p, ms in POOLS for m, w, price in ms]
    weights = [m[4] for m in models]
    fail_weights = [f[3] for f in FAILURES]
    t = 1_795_000_000_000                       # 2026-11-18, ms
    written = 0
    call = 0
    with open(path, "w") as out:
        while written < lines:
            call += 1
            pool, host, p, model, _, price = rnd.choices(models, weights)[0]
            rid = f"{rnd.getrandbits(128):032x}"
            rid = f"{rid[:8]}-{rid[8:12]}-{rid[12:16]}-{rid[16:20]}-{rid[20:]}"
            task = f'"task-{rnd.randrange(200_000)}"' if rnd.random() < 0.7 else "null"
            # 2 % of bodies repeat an earlier one (a host re-sending the same request).
            digest = (f"{rnd.randrange(2000):032x}" if rnd.random() < 0.02
                      else f"{rnd.getrandbits(128):032x}")
            pid = 1000 + rnd.randrange(64)
            attempt = 1
            while written < lines:
                t += rnd.randrange(0, 180)
                ok = attempt == 4 or rnd.random() < 0.9
                fail = None if ok else rnd.choices(FAILURES, fail_weights)[0]
                final = ok or not fail[5] or attempt == 4 or (fail[4] and rnd.random() < 0.7)
                dur = int(rnd.lognormvariate(6.5, 0.8))
                pt = ct = tt = cached = cost = "null"
                if fail is None:
                    outcome, status, curl_code, pb = "ok", 200, 0, False
                    decision, reason = "done", "ok"
                    p_tok, c_tok = rnd.randrange(50, 4000), rnd.randrange(1, 800)
                    pt, ct, tt = p_tok, c_tok, p_tok + c_tok
                    cached = rnd.choice((0, 0, 0, p_tok // 2))
                    if price is not None:
                        cost = repr(((p_tok - cached) * price[0] + cached * price[0] / 2 +
                                     c_tok * price[1]) / 1e6)
                else:
                    outcome, status, curl_code, _, pb, _ = fail
                    decision = "give_up" if final else "retry"
                    reason = "not_idempotent" if final else "retryable"
                status = "null" if status is None else status
                backoff = 0 if final else rnd.randrange(100, 4000)
                out.write(TEMPLATE.format(
                    ts=ts_text(t), pid=pid, rid=rid, task=task, attempt=attempt,
                    final="true" if final else "false", host=host, path=p, pool=pool,
                    status=status, curl_code=curl_code, outcome=outcome, decision=decision,
                    reason=reason, queue=rnd.randrange(0, 50), backoff=backoff,
                    conn=rnd.randrange(1, 30), ttfb=min(dur, rnd.randrange(50, 900)), dur=dur,
                    sent=rnd.randrange(300, 9000), recv=rnd.randrange(200, 6000),
                    model=ANSWERED.get(model, model) if fail is None else model,
                    pt=pt, ct=ct, tt=tt, cached=cached, cost=cost,
                    pb="true" if pb else "false", digest=digest))
                written += 1
                if written % 10_000 == 0 and written < lines:
                    out.write('{"ts": "not a record"\n')
                    written += 1
                if final:
                    break
                attempt += 1
    return written


def run_report(cli, path):
    before = time.perf_counter()
    proc = subprocess.run([cli, "report", "--json", path], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - before
    if proc.returncode != 0:
        sys.exit(f"report-bench: {cli} report failed ({proc.returncode}): "
                 f"{proc.stderr.decode(errors='replace').strip()}")
    return elapsed, json.loads(proc.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="build directory holding curlguard")
    ap.add_argument("--lines", type=int, default=1_000_000, help="log lines to generate")
    ap.add_argument("--runs", type=int, default=3, help="timed runs (best is reported)")
    ap.add_argument("--keep", help="also keep the generated log at this path")
    args = ap.parse_args()
    cli = os.path.join(args.build, "curlguard")
    if not os.access(cli, os.X_OK):
        sys.exit(f"report-bench: {cli} not found (run make first)")
    if args.lines < 1 or args.runs < 1:
        sys.exit("report-bench: --lines and --runs must be at least 1")

    with tempfile.TemporaryDirectory(prefix="cg-report-bench-") as tmp:
        path = args.keep or os.path.join(tmp, "usage.jsonl")
        before = time.perf_counter()
        lines = generate(path, args.lines)
        gen_s = time.perf_counter() - before
        size = os.path.getsize(path)
        times = []
        doc = None
        for _ in range(args.runs):
            elapsed, doc = run_report(cli, path)
            times.append(elapsed)
        rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if doc["lines"] != lines:
        sys.exit(f"report-bench: report counted {doc['lines']} lines, {lines} were written")
    best = min(times)
    print(f"`curlguard report --json` on {lines:,} generated lines ({size / 1e6:.0f} MB, "
          f"generated in {gen_s:.1f} s), best of {args.runs}:\n")
    print("| lines | records | malformed | best s | median s | lines/s | MB/s | peak RSS MiB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {lines:,} | {doc['records']:,} | {doc['malformed']['total']:,} | {best:.2f} | "
          f"{statistics.median(times):.2f} | {lines / best:,.0f} | {size / 1e6 / best:.0f} | "
          f"{rss_kib / 1024:.1f} |")


if __name__ == "__main__":
    main()
