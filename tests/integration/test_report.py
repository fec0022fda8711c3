"""`curlguard report` (SPEC section 6; README "curlguard report").

1. A log from real guarded runs against the mock provider with faults (503, 429 with
   Retry-After, 500 with and without Idempotency-Key, a stall cut by the read timeout, a
   dropped connection, streams, an unpriced model), plus crafted malformed lines: every
   number of `report --json` equals the same quantity computed here, independently, from
   the log lines (latency percentiles: within the histogram's stated 0.4 %).
2. The same run against the provider's own ledger: attempts = requests that arrived,
   billed attempts = requests the provider started processing, tokens = tokens the
   provider billed on answers that reached the client.
3. stdin, several files, the JSON shape, exit codes, and alerts on crafted logs.

The guarded programs are /usr/bin/curl, or python3 + pycurl under `make check-asan` (the
curl tool deadlocks with a preloaded ASan runtime, see harness.py).
"""

import hashlib
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import textwrap
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
LINE_MAX = 1024 * 1024       # CG_REPORT_LINE_MAX
MAX_VARIANTS = 8             # CG_REPORT_MAX_VARIANTS

# A guarded host under ASan: python3 + pycurl.  argv: URL BODY [HEADER...]
PYCURL_HOST = textwrap.dedent(r'''
    import sys, pycurl
    c = pycurl.Curl()
    c.setopt(pycurl.URL, sys.argv[1])
    c.setopt(pycurl.POSTFIELDS, sys.argv[2])
    c.setopt(pycurl.HTTPHEADER, ["Content-Type: application/json"] + sys.argv[3:])
    c.setopt(pycurl.WRITEFUNCTION, lambda b: None)
    try:
        c.perform()
    except pycurl.error:
        pass
''')


def chat(model="gpt-4o-mini", text="Say hello.", stream=False, include_usage=True):
    body = {"model": model, "messages": [{"role": "user", "content": text}]}
    if stream:
        body.update(stream=True)
        if include_usage:
            body.update(stream_options={"include_usage": True})
    return json.dumps(body)


def anthropic(text="Hello, Claude."):
    return json.dumps({"model": "claude-sonnet-4-20250514", "max_tokens": 64,
                       "messages": [{"role": "user", "content": text}]})


NO_USAGE_BODY = chat(model="gpt-4o", text="No usage.", stream=True, include_usage=False)

# The fault run: (path, plan, body, task id, Idempotency-Key?).  A success either carries
# usage or is an "unmetered" ok (a stream without its usage chunk), which the report counts
# as billed too, so "billed" in the report and "processing started" in the ledger mean the
# same.
FAULT_CALLS = [
    (CHAT, "200", chat(), "task-a", False),
    (CHAT, "503:ra=0,200", chat(), "task-a", False),            # task-a: two billed calls
    (CHAT, "429:ra=0.2,200", chat(text="Rate limited."), "task-b", False),
    (CHAT, "500,200", chat(text="Server error."), "task-c", False),   # possibly billed, given up
    (CHAT, "500,200", chat(text="Keyed error."), "task-d", True),     # retried with its key
    (CHAT, "stall:ms=4000:after=30,200", chat(text="Stalled."), "task-e", True),  # read timeout
    (CHAT, "close:billed=1,200", chat(text="Dropped."), "task-f", True),
    (CHAT, "200:chunk_ms=2", chat(model="gpt-4o", stream=True), None, False),
    (CHAT, "200:chunk_ms=2", NO_USAGE_BODY, None, False),   # unmetered: no usage chunk
    (CHAT, "503:ra=0,503:ra=0,503:ra=0,200", chat(text="Busy."), "task-g", False),
    (CHAT, "200", chat(model="my-private-model-7"), None, False),     # unpriced
    (CHAT, "400", chat(text="Bad request."), None, False),
    (MESSAGES, "200", anthropic(), "task-h", False),
    (MESSAGES, "529,200", anthropic("Overloaded."), "task-h", False),
]
FAULT_ENV = {"CURLGUARD_BACKOFF_BASE_MS": "50", "CURLGUARD_BACKOFF_CAP_MS": "200",
             "CURLGUARD_MAX_ATTEMPTS": "5", "CURLGUARD_READ_TIMEOUT_MS": "1500",
             "CURLGUARD_FIRST_BYTE_TIMEOUT_MS": "5000"}

# Malformed lines appended to the real log, by the reason the report must give.
MALFORMED = [
    ("not_json", "this is not json"),
    ("not_json", '{"ts": "2026-11-30T10:00:00.000Z", "pid": 1'),   # a line cut mid-write
    ("not_object", "[1, 2, 3]"),
    ("missing_key", '{"ts": "2026-11-30T10:00:00.000Z"}'),
    ("too_long", "{" + "x" * (LINE_MAX + 10) + "}"),
]


def report(args, input=None):
    """curlguard report ARGS -> CompletedProcess (stdout/stderr bytes)."""
    return harness.run([harness.CLI, "report"] + list(args), None, timeout=60, input=input)


def report_json(testcase, args, input=None):
    p = report(["--json"] + list(args), input=input)
    testcase.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
    return json.loads(p.stdout)


# ---------------------------------------------------------------- the reference

def _month_day(mm, dd):
    return 1 <= int(mm) <= 12 and 1 <= int(dd) <= 31


# README "curlguard report": one trailing date or alias suffix, tried in this order.
FAMILY_SUFFIXES = [
    (re.compile(r"-[0-9]{4}-([0-9]{2})-([0-9]{2})\Z"), _month_day),
    (re.compile(r"[-@][12][0-9]{3}([0-9]{2})([0-9]{2})\Z"), _month_day),
    (re.compile(r"-([0-9]{2})-([0-9]{2})\Z"), _month_day),
    (re.compile(r"-([0-9]{2})([0-9]{2})\Z"),
     lambda a, b: _month_day(a, b) or (20 <= int(a) <= 39 and 1 <= int(b) <= 12)),
    (re.compile(r"-latest\Z"), lambda: True),
]


def family(model):
    """The model family of a raw model name (None for null)."""
    if model is None:
        return None
    for pattern, ok in FAMILY_SUFFIXES:
        m = pattern.search(model)
        if m and m.start() > 0 and ok(*m.groups()):
            return model[:m.start()]
    return model


def nearest_rank(sorted_values, p):
    return sorted_values[max(1, math.ceil(p * len(sorted_values) / 100)) - 1]


def expected_report(records):
    """The report's numbers from the parsed records, by the README definitions."""
    def usage(r):
        return r["total_tokens"] is not None or r["prompt_tokens"] is not None

    def unmetered(r):                    # an ok model answer that did not say what it used
        return (not r["possibly_billed"] and r["model"] is not None and not usage(r)
                and r["outcome"] == "ok" and r["method"] not in ("GET", "HEAD"))

    def billed(r):
        return bool(r["possibly_billed"] or usage(r) or unmetered(r))

    groups, order = {}, []
    variants = {}
    total = new_stats()
    first_group = {}             # request id -> group of its first record
    finished = set()
    digests = {}                 # digest -> [group of the first billed attempt, request ids]
    task_calls = {}
    for r in records:
        key = (r["pool"], family(r["model"]))
        if key not in groups:
            groups[key] = new_stats()
            variants[key] = []
            order.append(key)
        if r["model"] is not None and r["model"] not in variants[key]:
            variants[key].append(r["model"])
        for s in (groups[key], total):
            s["attempts"] += 1
            s["retries"] += r["attempt"] > 1
            if r["final"]:
                s["calls"] += 1
                s["host_retry_calls"] += r.get("repeat_of") is not None
            s["outcomes"][r["outcome"]] = s["outcomes"].get(r["outcome"], 0) + 1
            s["billed_attempts"] += billed(r)
            s["billed_retries"] += billed(r) and r["attempt"] > 1
            s["usage_attempts"] += usage(r)
            s["possibly_billed"] += bool(r["possibly_billed"])
            s["unmetered_attempts"] += unmetered(r)
            s["at_risk_attempts"] += bool((r["possibly_billed"] or unmetered(r))
                                          and r["cost_usd"] is None)
            for name, field in (("prompt", "prompt_tokens"), ("completion", "completion_tokens"),
                                ("total", "total_tokens"), ("cached", "cached_tokens")):
                s["tokens"][name] += r[field] or 0
            if r["cost_usd"] is not None:
                s["priced_attempts"] += 1
                s["cost_usd"] += r["cost_usd"]
            elif r["prompt_tokens"] is not None and r["completion_tokens"] is not None:
                s["unpriced_attempts"] += 1
            if r["duration_ms"] is None:
                s["_missing"] += 1
            else:
                s["_lat"].append(r["duration_ms"])
        first_group.setdefault(r["request_id"], key)
        if r["final"]:
            finished.add(r["request_id"])
        if billed(r) and r["body_digest"] is not None:
            digests.setdefault(r["body_digest"], [key, set()])[1].add(r["request_id"])
        if billed(r) and r["task_id"] is not None:
            task_calls.setdefault(r["task_id"], set()).add(r["request_id"])
    for rid, key in first_group.items():
        if rid not in finished:
            groups[key]["unfinished_calls"] += 1
            total["unfinished_calls"] += 1
    for key, calls in digests.values():
        if len(calls) > 1:
            for s in (groups[key], total):
                s["duplicate_bodies"]["digests"] += 1
                s["duplicate_bodies"]["extra_calls"] += len(calls) - 1
    for s in list(groups.values()) + [total]:
        finish_stats(s)
    # The total's cost at risk: the sum of the groups' estimates, in group order.
    total["cost_at_risk_usd"] = 0
    total["at_risk_unestimated"] = 0
    for k in order:
        if groups[k]["cost_at_risk_usd"] is None:
            total["at_risk_unestimated"] += groups[k]["at_risk_attempts"]
        else:
            total["cost_at_risk_usd"] += groups[k]["cost_at_risk_usd"]
    return {
        "groups": [dict(pool=k[0], model=k[1], other=False, models=variants[k][:MAX_VARIANTS],
                        models_capped=len(variants[k]) > MAX_VARIANTS, **groups[k])
                   for k in order],
        "totals": total,
        "tasks_multi": sorted(t for t, calls in task_calls.items() if len(calls) > 1),
        "unpriced": [{"pool": k[0], "model": k[1], "attempts": groups[k]["unpriced_attempts"]}
                     for k in order if groups[k]["unpriced_attempts"] and k[1] is not None],
    }


def new_stats():
    return {"calls": 0, "unfinished_calls": 0, "attempts": 0, "retries": 0,
            "host_retry_calls": 0, "outcomes": {}, "outcomes_other": 0, "billed_attempts": 0,
            "billed_retries": 0, "usage_attempts": 0,
            "possibly_billed": 0, "at_risk_attempts": 0, "unmetered_attempts": 0,
            "tokens": {"prompt": 0, "completion": 0, "total": 0, "cached": 0},
            "cost_usd": 0.0, "cost_overflow": False, "priced_attempts": 0, "unpriced_attempts": 0,
            "duplicate_bodies": {"digests": 0, "extra_calls": 0},
            "_lat": [], "_missing": 0}


def finish_stats(s):
    s["retry_ratio"] = s["retries"] / s["attempts"] if s["attempts"] else 0
    s["at_risk_unestimated"] = 0
    if s["at_risk_attempts"] == 0:
        s["cost_at_risk_usd"] = 0
    elif s["priced_attempts"] == 0:
        s["cost_at_risk_usd"] = None
        s["at_risk_unestimated"] = s["at_risk_attempts"]
    else:
        s["cost_at_risk_usd"] = s["at_risk_attempts"] * (s["cost_usd"] / s["priced_attempts"])
    lat = sorted(s.pop("_lat"))
    s["_latency"] = {"count": len(lat), "missing": s.pop("_missing"),
                     "min": lat[0] if lat else None, "max": lat[-1] if lat else None,
                     "mean": sum(lat) / len(lat) if lat else None,
                     "p50": nearest_rank(lat, 50) if lat else None,
                     "p95": nearest_rank(lat, 95) if lat else None,
                     "p99": nearest_rank(lat, 99) if lat else None}


# ---------------------------------------------------------------- 1 and 2: a real fault run

class ReportFaultRunTest(harness.GuardTestCase):
    """One fault run (about 10 s), shared by the tests of this class."""

    run_dir = None
    log = None
    ledger = None
    keys = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.run_dir = tempfile.mkdtemp(prefix="cg-report-run-")
        cls.run_log = os.path.join(cls.run_dir, "usage.jsonl")
        mock = harness.provider()
        cls.keys = []
        for i, (path, plan, body, task, keyed) in enumerate(FAULT_CALLS):
            url = mock.url(path, plan=plan)
            cls.keys.append(mock.last_key)
            env = harness.guard_env(cls.run_log, FAULT_ENV,
                                    CURLGUARD_STATE=os.path.join(cls.run_dir, "state"),
                                    CURLGUARD_TASK_ID=task)
            headers = [f"Idempotency-Key: report-{os.getpid()}-{i}"] if keyed else []
            if path == MESSAGES:
                headers += ["x-api-key: test", "anthropic-version: 2023-06-01"]
            if harness.SAN_PRELOAD:
                argv = [harness.PYTHON, "-c", PYCURL_HOST, url, body] + headers
            else:
                argv = [harness.CURL, "-sS", "-o", "/dev/null", "-H",
                        "Content-Type: application/json", "--data-binary", body, url]
                for h in headers:
                    argv += ["-H", h]
            harness.run(argv, env, timeout=60)
        time_limit = 10
        entries = []
        for key in cls.keys:
            entries += mock.wait_entries(key=key, timeout=time_limit)
        cls.ledger = entries

    @classmethod
    def tearDownClass(cls):
        if cls.run_dir and not harness.KEEP_TMP:
            shutil.rmtree(cls.run_dir, ignore_errors=True)
        super().tearDownClass()

    def log_with_malformed(self):
        """The run's log plus the malformed lines, a blank line and an unfinished call."""
        with open(self.run_log) as f:
            lines = f.read().splitlines()
        self.assertGreaterEqual(len(lines), len(FAULT_CALLS) + 8, "the fault run wrote too "
                                "few records")
        # A call cut by the end of the log: a copy of a first attempt with a new request id,
        # not final.
        cut = json.loads(lines[0])
        cut.update(request_id="cut-off-call", final=False, decision="retry")
        out = list(lines)
        out.insert(3, MALFORMED[0][1])
        out.insert(6, "")
        out += [m[1] for m in MALFORMED[1:]]
        out.append(json.dumps(cut))
        path = self.tmp / "mixed.jsonl"
        with open(path, "w") as f:
            f.write("\n".join(out) + "\n")
        return path, lines + [json.dumps(cut)]

    def test_report_equals_independent_sums(self):
        path, record_lines = self.log_with_malformed()
        records = [json.loads(l) for l in record_lines]
        want = expected_report(records)
        got = report_json(self, [str(path)])

        self.assertEqual(got["records"], len(records))
        self.assertEqual(got["lines"], len(records) + len(MALFORMED))
        self.assertEqual(got["blank_lines"], 1)
        kinds = {}
        for kind, _ in MALFORMED:
            kinds[kind] = kinds.get(kind, 0) + 1
        self.assertEqual(got["malformed"]["total"], len(MALFORMED))
        for kind, n in kinds.items():
            self.assertEqual(got["malformed"][kind], n, kind)
        self.assertEqual(got["malformed"]["first"], f"{path}:4")

        self.assertEqual([(g["pool"], g["model"]) for g in got["groups"]],
                         [(g["pool"], g["model"]) for g in want["groups"]])
        for g_got, g_want in zip(got["groups"] + [got["totals"]],
                                 want["groups"] + [want["totals"]]):
            name = f"{g_want.get('pool', 'TOTAL')}/{g_want.get('model', '')}"
            for k, v in g_want.items():
                if k.startswith("_"):
                    continue
                self.assertEqual(g_got[k], v, f"{name}: {k}")
            self.assert_latency(g_got["latency_ms"], g_want["_latency"], name)
        self.assertEqual(got["tasks_billed_more_than_once"]["count"], len(want["tasks_multi"]))
        self.assertEqual(sorted(got["tasks_billed_more_than_once"]["examples"]),
                         want["tasks_multi"])
        self.assertEqual(got["unpriced_models"], want["unpriced"])

        # What the fault plan must have produced, so the comparison above is not vacuous.
        t = got["totals"]
        self.assertIn("task-a", want["tasks_multi"])
        self.assertEqual(t["unfinished_calls"], 1)
        self.assertGreaterEqual(t["possibly_billed"], 3)      # 500 x2, stall, close
        self.assertGreater(t["retries"], 5)
        self.assertGreater(t["duplicate_bodies"]["digests"], 0)
        self.assertIsNotNone(t["cost_at_risk_usd"])
        self.assertGreater(t["cost_at_risk_usd"], 0)
        self.assertEqual(got["unpriced_models"][0]["model"], "my-private-model-7")
        for outcome in ("ok", "http_503", "http_429", "http_500", "read_timeout", "http_400"):
            self.assertIn(outcome, t["outcomes"])
        # Attempt 4 of the "Busy." call: one request retried more than twice.
        retried = [a for a in got["alerts"] if a["kind"] == "retried_more_than_twice"]
        busy = [r for r in records if r["attempt"] == 4]
        self.assertEqual([a["request_id"] for a in retried], [r["request_id"] for r in busy])
        self.assertEqual(len(busy), 1)

    def assert_latency(self, got, want, name):
        for k in ("count", "missing", "min", "max"):
            self.assertEqual(got[k], want[k], f"{name}: latency {k}")
        if want["count"]:
            self.assertAlmostEqual(got["mean"], want["mean"], places=9, msg=f"{name}: mean")
        for k in ("p50", "p95", "p99"):
            if want[k] is None:
                self.assertIsNone(got[k])
                continue
            # Exact below 256 ms; above, within the bucket's half width (1/256).
            self.assertLessEqual(abs(got[k] - want[k]), want[k] / 256 + 0.5,
                                 f"{name}: latency {k} {got[k]} vs {want[k]}")

    def test_report_matches_provider_ledger(self):
        got = report_json(self, [self.run_log])["totals"]
        recs = harness.read_records(self.run_log)
        ledger = self.ledger
        # Every attempt the guard made reached the provider: no attempt of this run was
        # refused locally (no limiter, breaker or budget is configured), and one process
        # per call leaves libcurl no dead keep-alive connection to re-send on.
        self.assertEqual(sum(r.get("libcurl_resends") or 0 for r in recs), 0)
        self.assertEqual(got["attempts"], len(ledger),
                         [(e["key"], e["action"], e["status"]) for e in ledger])
        # Billed: every success carries usage or is counted unmetered, and every attempt the
        # provider may have processed without answering is possibly_billed: the two sides
        # count the same.
        started = [e for e in ledger if e["processing_started"]]
        self.assertEqual(got["billed_attempts"], len(started))
        # Possibly billed: processed, then a 500/504 or no complete answer to the client.
        maybe = [e for e in started if e["status"] in (500, 504) or not e["completed"]]
        self.assertEqual(got["possibly_billed"], len(maybe))
        # Tokens: the report can only count tokens whose usage reached the client; the
        # provider also billed the stalled and dropped attempts (their usage never came
        # back: the guard's "at risk").  So: report tokens = tokens billed on complete
        # answers, and the difference is exactly the tokens of the incomplete ones.
        answered = sum(e["billed_tokens"] for e in started if e["completed"])
        unanswered = sum(e["billed_tokens"] for e in started if not e["completed"])
        self.assertEqual(got["unmetered_attempts"], 1)   # the stream without usage
        no_usage = hashlib.sha256(NO_USAGE_BODY.encode()).hexdigest()
        unmetered = sum(e["billed_tokens"] for e in started if e["body_digest"] == no_usage)
        self.assertGreater(unmetered, 0)
        self.assertEqual(got["tokens"]["total"], answered - unmetered)
        self.assertEqual(got["tokens"]["total"] + unmetered + unanswered,
                         sum(e["billed_tokens"] for e in ledger))
        self.assertGreater(unanswered, 0)
        self.assertEqual(got["calls"], len(FAULT_CALLS))


# ---------------------------------------------------------------- 3: inputs, shape, alerts

def record(ts, rid, attempt=1, final=True, pool="p", model="gpt-4o-mini", outcome="ok",
           tokens=10, cost=0.001, duration=5, pb=False, digest=None, task=None):
    return {"ts": ts, "pid": 1, "request_id": rid, "task_id": task, "attempt": attempt,
            "final": final, "method": "POST", "host": "h", "path": "/v1/chat/completions",
            "pool": pool, "status": 200 if outcome == "ok" else 503, "curl_code": 0,
            "outcome": outcome, "decision": "done" if final else "retry", "reason": "ok",
            "queue_ms": 0, "backoff_ms": 0, "connect_ms": 1, "ttfb_ms": 2,
            "duration_ms": duration, "bytes_sent": 100, "bytes_received": 200, "model": model,
            "prompt_tokens": tokens, "completion_tokens": 0 if tokens is not None else None,
            "total_tokens": tokens, "cached_tokens": 0 if tokens is not None else None,
            "cost_usd": cost, "possibly_billed": pb, "body_digest": digest,
            "libcurl_resends": 0, "repeat_of": None, "repeats": 0}


def quiet_hour(hour, calls_per_minute=5, cost=0.001, day="2026-11-30"):
    """An hour of successful single-attempt calls."""
    out = []
    for m in range(60):
        for i in range(calls_per_minute):
            out.append(record(f"{day}T{hour:02d}:{m:02d}:{i:02d}.000Z", f"q{hour}-{m}-{i}",
                              cost=cost))
    return out


def write_jsonl(path, recs):
    with open(path, "w") as f:
        for r in recs:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    return str(path)


class ReportCliTest(harness.GuardTestCase):

    def test_stdin_and_several_files(self):
        a = quiet_hour(9, calls_per_minute=1)
        b = quiet_hour(10, calls_per_minute=2, cost=0.0005)   # the same cost per hour
        fa, fb = write_jsonl(self.tmp / "a.jsonl", a), write_jsonl(self.tmp / "b.jsonl", b)
        both = report_json(self, [fa, fb])
        self.assertEqual(both["records"], len(a) + len(b))
        self.assertEqual(both["totals"]["calls"], len(a) + len(b))
        self.assertEqual(both["totals"]["cost_usd"], sum(r["cost_usd"] for r in a + b))
        with open(fa, "rb") as f1, open(fb, "rb") as f2:
            data = f1.read() + f2.read()
        self.assertEqual(report_json(self, [], input=data), both)       # no LOG: stdin
        self.assertEqual(report_json(self, ["-"], input=data), both)    # "-": stdin
        with open(fb, "rb") as f:
            mixed = report_json(self, [fa, "-"], input=f.read())
        self.assertEqual(mixed["totals"], both["totals"])
        # The text form shows the same totals.
        p = report([fa, fb])
        self.assertEqual(p.returncode, 0, p.stderr)
        text = p.stdout.decode()
        self.assertIn(f"{len(a) + len(b)} records from {len(a) + len(b)} lines", text)
        self.assertRegex(text, r"\nTOTAL +%d " % (len(a) + len(b)))
        self.assertIn("0 alerts", text)

    def test_a_file_named_twice_is_read_once(self):
        """`report a.jsonl *.jsonl`, or a link to a log beside it, counted each call (and
        its cost) twice; the same file is now read once and a line says so."""
        a = quiet_hour(9, calls_per_minute=1)
        b = quiet_hour(10, calls_per_minute=2, cost=0.0005)
        fa, fb = write_jsonl(self.tmp / "a.jsonl", a), write_jsonl(self.tmp / "b.jsonl", b)
        link = self.tmp / "latest.jsonl"
        os.symlink(fa, link)
        both = report_json(self, [fa, fb])
        for args in ([fa, fb, fa], [fa, fb, link], [link, fa, fb, fb]):
            self.assertEqual(report_json(self, args), both, args)
            p = report(args)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertRegex(p.stderr, rb"^curlguard: report: \S+ is \S+ again: read once\n")
            self.assertIn(f"{len(a) + len(b)} records from {len(a) + len(b)} lines",
                          p.stdout.decode())

    def test_json_shape(self):
        f = write_jsonl(self.tmp / "x.jsonl", quiet_hour(9, calls_per_minute=1) + ["oops"])
        doc = report_json(self, [f])
        self.assertEqual(set(doc), {"lines", "records", "blank_lines", "malformed", "period",
                                    "groups", "totals", "unpriced_models",
                                    "tasks_billed_more_than_once", "limits", "alerts"})
        self.assertEqual(doc["period"], {"first": "2026-11-30T09:00:00.000Z",
                                         "last": "2026-11-30T09:59:00.000Z"})
        self.assertEqual(doc["malformed"]["not_json"], 1)
        g = doc["groups"][0]
        for k in ("pool", "model", "other", "models", "models_capped", "calls",
                  "unfinished_calls", "attempts", "retries",
                  "retry_ratio", "host_retry_calls", "outcomes", "outcomes_other",
                  "billed_attempts", "billed_retries", "cost_overflow",
                  "usage_attempts", "possibly_billed", "at_risk_attempts", "cost_at_risk_usd",
                  "at_risk_unestimated",
                  "tokens", "cost_usd", "priced_attempts", "unpriced_attempts",
                  "duplicate_bodies", "latency_ms"):
            self.assertIn(k, g)
        self.assertEqual(set(g["latency_ms"]),
                         {"count", "missing", "min", "max", "mean", "p50", "p95", "p99"})
        self.assertEqual(doc["limits"], {"groups_capped": False, "digests_capped": False,
                                         "tasks_capped": False, "calls_capped": False,
                                         "minutes_capped": False, "alerts_dropped": 0})

    def test_exit_codes(self):
        f = write_jsonl(self.tmp / "ok.jsonl", quiet_hour(9, calls_per_minute=1))
        missing = str(self.tmp / "missing.jsonl")
        p = report([f, missing])
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stdout, b"")                     # all or nothing
        err = p.stderr.decode()
        self.assertTrue(err.startswith("curlguard: report: ") and missing in err, err)
        self.assertEqual(err.count("\n"), 1, err)
        p = report([str(self.tmp)])
        self.assertEqual(p.returncode, 1)
        self.assertIn("is a directory", p.stderr.decode())
        p = report(["--bogus", f])
        self.assertEqual(p.returncode, 2)
        self.assertTrue(p.stderr.decode().startswith("curlguard: report: unknown option"))
        # Malformed input never fails the command.
        bad = write_jsonl(self.tmp / "bad.jsonl", ["nope", "[]", "{}"])
        doc = report_json(self, [bad])
        self.assertEqual((doc["records"], doc["malformed"]["total"]), (0, 3))

    def test_alerts_fire_on_crafted_log(self):
        recs = quiet_hour(9) + quiet_hour(10)            # steady: 0.3 USD per hour
        # 11:00-11:59 costs 0.6 USD: +100 % hour over hour.
        recs += quiet_hour(11, cost=0.002)
        # A retry burst at 12:20: 10 calls with a 503 first, among 10 quiet calls.
        for i in range(20):
            ts = f"2026-11-30T12:20:{i:02d}.000Z"
            if i < 10:
                recs.append(record(ts, f"burst-{i}", final=False, outcome="http_503",
                                   tokens=None, cost=None))
            recs.append(record(ts, f"burst-{i}", attempt=2 if i < 10 else 1))
        # One request with four attempts.
        for k in range(1, 5):
            recs.append(record(f"2026-11-30T12:40:0{k}.000Z", "stubborn", attempt=k,
                               final=k == 4, outcome="ok" if k == 4 else "http_503",
                               tokens=10 if k == 4 else None, cost=0.001 if k == 4 else None))
        doc = report_json(self, [write_jsonl(self.tmp / "alerts.jsonl", recs)])
        kinds = [a["kind"] for a in doc["alerts"]]
        self.assertEqual(sorted(kinds), ["cost_hour_over_hour", "retried_more_than_twice",
                                         "retry_ratio"], doc["alerts"])
        by = {a["kind"]: a for a in doc["alerts"]}
        self.assertEqual(by["cost_hour_over_hour"]["hour"], "2026-11-30T11:00:00.000Z")
        self.assertEqual(by["retried_more_than_twice"]["request_id"], "stubborn")
        # Every window holding 12:20 fires: [12:11, 12:21) to [12:20, 12:30).
        self.assertEqual((by["retry_ratio"]["from"], by["retry_ratio"]["to"]),
                         ("2026-11-30T12:11:00.000Z", "2026-11-30T12:30:00.000Z"))
        self.assertEqual((by["retry_ratio"]["retries"], by["retry_ratio"]["attempts"]), (10, 30))
        p = report([self.tmp / "alerts.jsonl"])
        text = p.stdout.decode()
        self.assertIn("ALERT retry_ratio:", text)
        self.assertIn("ALERT cost_hour_over_hour:", text)
        self.assertIn("ALERT retried_more_than_twice: request stubborn", text)

        # The same hours without the faults: no alert at all.
        calm = quiet_hour(9) + quiet_hour(10) + quiet_hour(11, cost=0.00125)   # +25 %
        doc = report_json(self, [write_jsonl(self.tmp / "calm.jsonl", calm)])
        self.assertEqual(doc["alerts"], [])


class ReportInputTest(harness.GuardTestCase):
    """Inputs a helper's review found mishandled: each log is read from the descriptor
    opened when inputs are checked; the page never replaces a log given on stdin; a line
    is a record only when nothing but blanks follows the JSON value."""

    T = "2026-11-30T08:00:00.000Z"

    def test_a_fifo_is_read_once_and_never_waited_on_for_ever(self):
        """A FIFO whose writer is done before the report reads it: its records are read
        (it was opened twice: the second open waited for a writer that never came, and
        the data was gone; it hung in 8 of 10 runs)."""
        recs = quiet_hour(9, calls_per_minute=1)
        data = "".join(json.dumps(r) + "\n" for r in recs).encode()
        fifo = self.tmp / "log.fifo"
        for k in range(5):
            with self.subTest(run=k):
                os.mkfifo(fifo)
                writer = subprocess.Popen(["/bin/sh", "-c", 'printf "%s" "$1" >"$0"', str(fifo),
                                           data.decode()])
                p = report(["--json", fifo])
                writer.wait(timeout=10)
                os.unlink(fifo)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(json.loads(p.stdout)["records"], len(recs))

    def test_html_page_never_replaces_a_log_read_on_stdin(self):
        log = pathlib.Path(write_jsonl(self.tmp / "usage.jsonl", quiet_hour(9, calls_per_minute=1)))
        before = log.read_bytes()
        for extra in ([], ["-"]):
            with self.subTest(extra=extra):
                p = harness.run(["/bin/sh", "-c", 'exec "$0" report --html "$@" < "$1"',
                                 harness.CLI, log, *extra], None, timeout=60)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(b"is one of the logs read: not overwritten", p.stderr)
                self.assertEqual(log.read_bytes(), before)

    def test_a_line_with_more_than_one_value_is_not_a_record(self):
        """Two records on one line, or a record and then text: not_json, as Python's
        json.loads says ("Extra data"); before, the first record counted and the rest of
        the line (a second record's cost) was dropped without a word."""
        a = json.dumps(record(self.T, "a", cost=1.0))
        b = json.dumps(record(self.T, "b", cost=2.0))
        c = json.dumps(record(self.T, "c", cost=4.0))
        log = self.tmp / "concat.jsonl"
        log.write_text(a + b + "\n" + a + " garbage here\n" + c + " \t\r\n")
        got = report_json(self, [log])
        self.assertEqual(got["records"], 1, got)
        self.assertEqual(got["malformed"]["not_json"], 2, got)
        self.assertEqual(got["totals"]["cost_usd"], 4.0, got)


class ReportReviewTest(harness.GuardTestCase):
    """The review's findings, each on a crafted log through the command line."""

    T = "2026-11-30T08:00:00.000Z"

    def jsonl(self, name, recs):
        return write_jsonl(self.tmp / name, recs)

    def test_retry_of_one_call_is_not_a_duplicate_body(self):
        recs = [record(self.T, "a", final=False, outcome="http_500", tokens=None, cost=None,
                       pb=True, digest="D"),
                record(self.T, "a", attempt=2, digest="D"),          # keyed retry, billed
                record(self.T, "b", digest="D"),                     # another call
                record(self.T, "c", final=False, outcome="http_500", tokens=None, cost=None,
                       pb=True, digest="D"),
                record(self.T, "c", attempt=2, digest="D")]
        t = report_json(self, [self.jsonl("dup.jsonl", recs)])["totals"]
        self.assertEqual(t["duplicate_bodies"], {"digests": 1, "extra_calls": 2})
        self.assertEqual(t["billed_retries"], 2)
        only_retry = report_json(self, [self.jsonl("retry.jsonl", recs[:2])])["totals"]
        self.assertEqual(only_retry["duplicate_bodies"], {"digests": 0, "extra_calls": 0})
        self.assertEqual(only_retry["billed_retries"], 1)
        text = report([self.tmp / "dup.jsonl"]).stdout.decode()
        self.assertIn("duplicate bodies: 1 digests billed in 2 extra calls; billed retries: 2",
                      text)

    def test_dated_answer_groups_with_the_request(self):
        recs = [record(self.T, "a", final=False, model="gpt-4o", outcome="http_503",
                       tokens=None, cost=None),
                record(self.T, "a", attempt=2, model="gpt-4o-2024-08-06", cost=0.5),
                record(self.T, "b", model="claude-3-5-sonnet@20240620"),
                record(self.T, "c", model="claude-3-5-sonnet-latest")]
        doc = report_json(self, [self.jsonl("fam.jsonl", recs)])
        self.assertEqual([(g["model"], g["models"], g["calls"], g["attempts"])
                          for g in doc["groups"]],
                         [("gpt-4o", ["gpt-4o", "gpt-4o-2024-08-06"], 1, 2),
                          ("claude-3-5-sonnet",
                           ["claude-3-5-sonnet@20240620", "claude-3-5-sonnet-latest"], 2, 2)])
        self.assertEqual(doc["groups"][0]["retry_ratio"], 0.5)

    def test_invalid_utf8_never_reaches_the_output(self):
        line = json.dumps(record(self.T, "a", model="MODEL", task="TASK")).encode()
        line = line.replace(b"MODEL", b"bad\xff\xfe").replace(b"TASK", b"t\xc3")
        path = self.tmp / "utf8.jsonl"
        path.write_bytes(line + b"\n" + line.replace(b'"a"', b'"b"') + b"\n")
        for args in (["--json", str(path)], [str(path)]):
            p = report(args)
            self.assertEqual(p.returncode, 0)
            out = p.stdout.decode("utf-8")          # raises on invalid UTF-8
            self.assertIn("bad\ufffd\ufffd", out if args[0] != "--json"
                          else json.loads(out)["groups"][0]["model"])

    def test_control_characters_are_escaped_in_text(self):
        evil = "evil\u001b[31mRED\nALERT fake"
        recs = [record(self.T, "a", model=evil, attempt=4), record(self.T, "b", model=evil)]
        text = report([self.jsonl("evil.jsonl", recs)]).stdout.decode()
        self.assertNotIn("\x1b", text)
        self.assertNotIn("\nALERT fake", text)
        self.assertIn("evil\\x1b[31mRED\\nALERT fake", text)
        self.assertEqual(text.count("\nALERT "), 1, text)   # the real one only

    def test_unfinished_calls_do_not_depend_on_order(self):
        recs = []
        for i in range(5):
            recs += [record(self.T, f"r{i}", final=False, outcome="http_503", tokens=None,
                            cost=None),
                     record(self.T, f"r{i}", attempt=2)]
        recs.append(record(self.T, "cut", final=False, outcome="http_503", tokens=None,
                           cost=None))
        fwd = self.jsonl("fwd.jsonl", recs)
        with open(fwd, "rb") as f:
            lines = f.read().splitlines(keepends=True)
        back = report_json(self, [], input=b"".join(reversed(lines)))["totals"]
        self.assertEqual(report_json(self, [fwd])["totals"]["unfinished_calls"], 1)
        self.assertEqual(back["unfinished_calls"], 1)
        self.assertEqual(back["calls"], 5)

    def test_retry_alert_span_holds_its_worst_window(self):
        recs = []
        for minute, retried in ((5, 10), (6, 3)):
            for i in range(30):
                ts = f"2026-11-30T08:{minute:02d}:{i:02d}.000Z"
                if i < retried:
                    recs.append(record(ts, f"m{minute}-{i}", final=False, outcome="http_503",
                                       tokens=None, cost=None))
                recs.append(record(ts, f"m{minute}-{i}", attempt=2 if i < retried else 1))
        alerts = report_json(self, [self.jsonl("span.jsonl", recs)])["alerts"]
        [a] = [a for a in alerts if a["kind"] == "retry_ratio"]
        self.assertLessEqual(a["from"], a["worst_from"])
        self.assertGreaterEqual(a["to"], a["worst_to"])
        self.assertEqual((a["from"], a["to"]),
                         ("2026-11-30T07:56:00.000Z", "2026-11-30T08:16:00.000Z"))

    def test_huge_latency_extremes_are_exact(self):
        lat = report_json(self, [self.jsonl("lat.jsonl", [
            record(self.T, "a", duration=10 ** 12)])])["totals"]["latency_ms"]
        self.assertEqual((lat["min"], lat["max"], lat["p50"], lat["p99"]), (10 ** 12,) * 4)

    def test_cost_overflow_agrees_in_text_and_json(self):
        path = self.jsonl("inf.jsonl", [record(self.T, "a", cost=1e308),
                                      record(self.T, "b", cost=1e308)])
        t = report_json(self, [path])["totals"]
        self.assertIsNone(t["cost_usd"])
        self.assertTrue(t["cost_overflow"])
        text = report([path]).stdout.decode()
        self.assertNotIn("inf", text)
        self.assertRegex(text, r"\nTOTAL +.* overflow ")

    def test_null_and_overflow_groups_are_apart_from_strings(self):
        recs = [record(self.T, "a", pool=None), record(self.T, "b", pool="-"),
                record(self.T, "c", pool="(none)"), record(self.T, "d", model="m\u0000x"),
                record(self.T, "e", model="m")]
        doc = report_json(self, [self.jsonl("keys.jsonl", recs)])
        self.assertEqual([(g["pool"], g["model"], g["other"]) for g in doc["groups"]],
                         [(None, "gpt-4o-mini", False), ("-", "gpt-4o-mini", False),
                          ("(none)", "gpt-4o-mini", False), ("p", "m\ufffdx", False),
                          ("p", "m", False)])
        text = report([self.tmp / "keys.jsonl"]).stdout.decode()
        self.assertRegex(text, r"\n\(none\) +gpt-4o-mini ")
        self.assertRegex(text, r"\n\\\(none\) +gpt-4o-mini ")
        # A literal "(other)" is a group like any; the overflow group is a flag.
        recs = [record(self.T, "o", pool="(other)")]
        recs += [record(self.T, f"g{i}", model=f"model-{i}") for i in range(512 + 3)]
        doc = report_json(self, [self.jsonl("other.jsonl", recs)])
        self.assertEqual((doc["groups"][0]["pool"], doc["groups"][0]["other"]),
                         ("(other)", False))
        last = doc["groups"][-1]
        self.assertEqual((last["pool"], last["model"], last["other"], last["attempts"]),
                         (None, None, True, 4))
        self.assertTrue(doc["limits"]["groups_capped"])

    def test_small_costs_keep_significant_digits(self):
        path = self.jsonl("cents.jsonl", [record(self.T, "a", model="cheap", cost=4e-7),
                                        record(self.T, "b", model="unpriced-x", cost=None)])
        text = report([path]).stdout.decode()
        self.assertRegex(text, r"\np +cheap +.* 4e-07 ")
        self.assertRegex(text, r"\np +unpriced-x +(\S+ +){7}- ")
        self.assertNotIn("0.000000", text)

    def test_empty_outcome_nul_byte_and_empty_log(self):
        good = json.dumps(record(self.T, "a")).encode()
        path = self.tmp / "odd.jsonl"
        path.write_bytes(json.dumps(record(self.T, "b", outcome="")).encode() + b"\n" +
                         good + b"\x00garbage\n")
        doc = report_json(self, [str(path)])
        self.assertEqual((doc["records"], doc["malformed"]["bad_value"],
                          doc["malformed"]["not_json"]), (0, 1, 1))
        empty = self.tmp / "empty.jsonl"
        empty.write_bytes(b"")
        text = report([str(empty)]).stdout.decode()
        self.assertIn("0 records from 0 lines", text)
        self.assertNotIn("outcomes:", text)

    def test_lines_up_to_a_mebibyte_are_records(self):
        long_task = "t" * (8 * 1024)
        r = record(self.T, "a", task=long_task)
        r["path"] = "/v1/" + "p" * (200 * 1024)
        doc = report_json(self, [self.jsonl("long.jsonl", [r])])
        self.assertEqual((doc["records"], doc["malformed"]["too_long"]), (1, 0))
        r["path"] = "/v1/" + "p" * LINE_MAX
        doc = report_json(self, [self.jsonl("too-long.jsonl", [r, record(self.T, "b")])])
        self.assertEqual((doc["records"], doc["malformed"]["too_long"]), (1, 1))

    def test_ok_answer_without_usage_is_billed_and_at_risk(self):
        recs = [record(self.T, "a", model="gpt-4o-2024-08-06", cost=0.25),
                record(self.T, "b", model="gpt-4o", cost=0.75),
                # What the guard now writes for a 2xx answer with a model but no usage.
                record(self.T, "c", model="gpt-4o", outcome="ok", tokens=None, cost=None,
                       pb=True)]
        self.assertEqual(recs[2]["status"], 200)
        t = report_json(self, [self.jsonl("nousage.jsonl", recs)])["totals"]
        self.assertEqual((t["billed_attempts"], t["possibly_billed"], t["at_risk_attempts"],
                          t["unpriced_attempts"]), (3, 1, 1, 0))
        self.assertEqual(t["cost_at_risk_usd"], 0.5)         # the gpt-4o family's mean
        self.assertEqual(t["at_risk_unestimated"], 0)


if __name__ == "__main__":
    unittest.main()
