"""Real multi-API hosts under the guard (issue 13, "Must show"): curl --parallel, pycurl's
CurlMulti (perform + select and socket_action), git clone over smart HTTP (git http-backend),
Ruby curb (Curl::Easy#perform and Curl::Multi), R curl (curl_fetch_memory, multi_run) and
cgmulti (tests/hosts/cgmulti.c: an epoll loop over CURLMOPT_SOCKETFUNCTION/TIMERFUNCTION, or
curl_multi_perform + curl_multi_poll).

For each host: (a) without faults its output is byte-identical to an unguarded run and the
log holds one record set per call; (b) a 503 then a 200 is retried invisibly (the host sees
the 200, the mock saw 2 requests, the call has 2 records, one final); (c) one record set per
call (request id, attempts 1..k, only the last final). Then, with cgmulti in both loops: a
stream in the same multi keeps flowing while another transfer waits out a backoff, waits for
the limiter or is held by the open breaker (measured); 64 transfers in one multi under
CURLGUARD_RPM are paced as 64 processes would be; a backoff frees the connection for a
transfer libcurl queued (CURLMOPT_MAX_TOTAL_CONNECTIONS=1); the split first-byte and read
timeouts cut an attempt and retry it; usage, cost and the request-id header per call; a
transfer removed (curl_multi_remove_handle, or curl_easy_cleanup while still added) in the
middle of its backoff ends with one final record `aborted_by_host` and no hang; and
curl_multi_cleanup with handles inside, then re-adding them to a new multi.

Every guarded assertion fails while the multi API passes through unguarded (no records, no
retry, no pacing); the unguarded runs are the plain parts. Timing: tight lower bounds,
generous upper bounds.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import textwrap
import time
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

CGMULTI = harness.CGMULTI
RUBY = shutil.which("ruby", path="/usr/bin:/bin")
RSCRIPT = shutil.which("Rscript", path="/usr/bin:/bin")
FAST = {"CURLGUARD_BACKOFF_BASE_MS": "50", "CURLGUARD_BACKOFF_CAP_MS": "200"}
SLACK = 0.3                  # seconds of scheduling slack allowed on lower bounds


def fixed(i):
    """The fixed 200 of transfer i: the same bytes guarded (after a 503) and plain."""
    body = json.dumps({"id": f"fixed-multi-{i}", "object": "chat.completion",
                       "choices": [{"text": f"same bytes {i}"}]}) + "\n"
    return {"action": 200, "body": body}


def sse(events=8, chunk_ms=50):
    """A hand-made SSE stream (chunked, one chunk per event, chunk_ms apart): fixed bytes."""
    body = "".join('data: {"choices": [{"delta": {"content": "w%d "}}]}\n\n' % k
                   for k in range(events)) + "data: [DONE]\n\n"
    return {"action": 200, "body": body, "chunked": True, "chunk_ms": chunk_ms}


def have_module(argv):
    try:
        return subprocess.run(argv, capture_output=True, env=harness.plain_env(),
                              timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class MultiTestCase(harness.GuardTestCase):
    """Helpers shared by the hosts: URL sets, record sets, byte comparisons.

    NEEDS = (argv, reason): the class is skipped unless argv runs and exits 0.
    MODES = {label: mode}: the class gets test_LABEL_no_faults_byte_identical and
    test_LABEL_503_then_200 for each, calling self.check(mode, False / True)."""

    NEEDS = None
    MODES = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for label, mode in cls.__dict__.get("MODES", {}).items():
            for faults, what in ((False, "no_faults_byte_identical"), (True, "503_then_200")):
                def test(self, mode=mode, faults=faults):
                    self.check(mode, faults)
                test.__name__ = test.__qualname__ = f"test_{label}_{what}"
                setattr(cls, test.__name__, test)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if cls.NEEDS is not None:
            argv, reason = cls.NEEDS
            if not argv[0] or not have_module(argv):
                raise unittest.SkipTest(reason)

    def genv(self, **extra):
        return self.guard_env(extra=FAST, **extra)

    def urls(self, plans, prefix):
        """One URL per plan, paths PREFIX/i (so each call's records are told apart by path)."""
        return [self.mock.url(f"{prefix}/{i}", plan=p) for i, p in enumerate(plans)]

    def record_sets(self, recs=None):
        """The log grouped by request id: [[records by attempt], ...] in log order, each a
        well formed set (attempts 1..k, only the last final, every SPEC key, one path)."""
        recs = self.records() if recs is None else recs
        sets = {}
        for r in recs:
            self.assertRecordKeys(r)
            sets.setdefault(r["request_id"], []).append(r)
        for rid, rs in sets.items():
            self.assertTrue(rid, f"record without a request id: {rs}")
            rs.sort(key=lambda r: r["attempt"])
            self.assertEqual([r["attempt"] for r in rs], list(range(1, len(rs) + 1)), rs)
            self.assertEqual([r["final"] for r in rs], [False] * (len(rs) - 1) + [True], rs)
            self.assertEqual(len({r["path"] for r in rs}), 1, rs)
        return list(sets.values())

    def call_sets(self, recs=None):
        """record_sets() by path, {path: [records by attempt]}: one call per path."""
        recs = self.records() if recs is None else recs
        by_path = {}
        for rs in self.record_sets(recs):
            self.assertNotIn(rs[0]["path"], by_path, f"two calls of one path: {recs}")
            by_path[rs[0]["path"]] = rs
        return by_path

    def assertCalls(self, expect, recs=None):
        """expect: {path: [outcome of attempt 1, ...]}: exactly these calls, one set each."""
        by_path = self.call_sets(recs)
        got = {p: [r["outcome"] for r in rs] for p, rs in by_path.items()}
        self.assertEqual(got, expect, f"records: {self.records() if recs is None else recs}")
        for rs in by_path.values():
            self.assertEqual([r["decision"] for r in rs],
                             ["retry"] * (len(rs) - 1) + ["done"], rs)
        return by_path

    def assertServerSaw(self, urls, counts):
        for u, c in zip(urls, counts):
            self.exact_entries(u, c)

    def assertSameFiles(self, gdir, pdir):
        gnames, pnames = sorted(os.listdir(gdir)), sorted(os.listdir(pdir))
        self.assertEqual(gnames, pnames)
        for name in gnames:
            g, p = (pathlib.Path(d, name).read_bytes() for d in (gdir, pdir))
            self.assertEqual(g, p, f"{name} differs guarded vs plain")

    def assertSameRun(self, g, p):
        self.assertEqual(p.returncode, 0, f"plain run failed: {p.stderr!r}")
        self.assertEqual(g.returncode, p.returncode, f"guarded stderr: {g.stderr!r}")
        self.assertEqual(g.stdout, p.stdout)
        self.assertEqual(g.stderr, p.stderr)

    def check_three_calls(self, argv, prefix, faults, timeout):
        """`argv URL URL URL` (a script host printing "I STATUS HEADERS BODY" a transfer)
        guarded and plain: three calls PREFIX/0..2 (fixed bytes, fixed bytes, an SSE stream;
        with faults the first gets a 503 first), retried invisibly: byte-identical runs,
        three 200s and no 503 seen by the host, one record set per call."""
        self.log.unlink(missing_ok=True)
        first = ["503:ra=0"] if faults else []
        gplans = [first + [fixed(0)], [fixed(1)], [sse(5, 30)]]
        pplans = [[fixed(0)], [fixed(1)], [sse(5, 30)]]
        gurls, purls = self.urls(gplans, prefix), self.urls(pplans, prefix)
        g = harness.run([*argv, *gurls], self.genv(), timeout=timeout)
        p = harness.run([*argv, *purls], harness.plain_env(), timeout=timeout)
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertSameRun(g, p)
        self.assertEqual(len(re.findall(rb"^\d+ 200 ", g.stdout, re.M)), 3, g.stdout)
        self.assertNotIn(b"503", g.stdout)
        self.assertServerSaw(gurls, [2 if faults else 1, 1, 1])
        self.assertCalls({f"{prefix}/0": ["http_503", "ok"] if faults else ["ok"],
                          f"{prefix}/1": ["ok"], f"{prefix}/2": ["ok"]})

    def dirs(self, name):
        g, p = self.tmp / f"{name}-g", self.tmp / f"{name}-p"
        g.mkdir()
        p.mkdir()
        return g, p


# ================================================================ cgmulti (C, epoll)

class CgmultiTests:
    """Mixed into one test class per loop (below): MODE [] = socket_action + epoll,
    ["--perform"] = curl_multi_perform + curl_multi_poll."""
    MODE = []

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not CGMULTI.exists():
            raise unittest.SkipTest(f"{CGMULTI} is not built (make build/tests/cgmulti)")

    def host(self, args, urls, env, timeout=60):
        return harness.run([CGMULTI, *self.MODE, *args, *urls], env, timeout=timeout)

    def expected_stdout(self, plans_bytes):
        return "".join(f"{i} 0 200 {n}\n" for i, n in enumerate(plans_bytes)).encode()

    def test_no_faults_byte_identical(self):
        plans = [[fixed(0)], [fixed(1)], [sse(6, 30)], [fixed(3)]]
        gdir, pdir = self.dirs("out")
        gurls, purls = self.urls(plans, "/v1/cgm-ok"), self.urls(plans, "/v1/cgm-ok")
        g = self.host(["--out-dir", gdir], gurls, self.genv())
        p = self.host(["--out-dir", pdir], purls, harness.plain_env())
        self.assertSameRun(g, p)
        self.assertSameFiles(gdir, pdir)
        self.assertEqual(g.stdout.count(b" 0 200 "), 4, g.stdout)
        self.assertServerSaw(gurls, [1, 1, 1, 1])
        self.assertCalls({f"/v1/cgm-ok/{i}": ["ok"] for i in range(4)})

    def test_503_then_200_retried_invisibly(self):
        gplans = [["503:ra=0", fixed(0)], [fixed(1)], ["503:ra=0", fixed(2)], [sse(6, 30)]]
        pplans = [[fixed(0)], [fixed(1)], [fixed(2)], [sse(6, 30)]]
        gdir, pdir = self.dirs("out")
        gurls, purls = self.urls(gplans, "/v1/cgm-r"), self.urls(pplans, "/v1/cgm-r")
        g = self.host(["--out-dir", gdir], gurls, self.genv())
        p = self.host(["--out-dir", pdir], purls, harness.plain_env())
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertSameRun(g, p)
        self.assertSameFiles(gdir, pdir)
        self.assertNotIn(b"503", b"".join((gdir / f"{i}.headers").read_bytes() for i in range(4)))
        self.assertServerSaw(gurls, [2, 1, 2, 1])
        calls = self.assertCalls({"/v1/cgm-r/0": ["http_503", "ok"], "/v1/cgm-r/1": ["ok"],
                                  "/v1/cgm-r/2": ["http_503", "ok"], "/v1/cgm-r/3": ["ok"]})
        self.assertEqual(calls["/v1/cgm-r/0"][1]["status"], 200)

    def test_post_with_idempotency_key_500_retried(self):
        body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
        gplans = [["500", fixed(0)], ["503:ra=0", fixed(1)]]
        pplans = [[fixed(0)], [fixed(1)]]
        gdir, pdir = self.dirs("out")
        gurls, purls = self.urls(gplans, "/v1/cgm-post"), self.urls(pplans, "/v1/cgm-post")
        args = ["--post", body, "--idempotency-key", "idem"]
        g = self.host(args + ["--out-dir", gdir], gurls, self.genv())
        p = self.host(args + ["--out-dir", pdir], purls, harness.plain_env())
        self.assertSameRun(g, p)
        self.assertSameFiles(gdir, pdir)
        for u in gurls:
            seen = self.exact_entries(u, 2)
            self.assertEqual(seen[0]["body_digest"], seen[1]["body_digest"])
            self.assertEqual(seen[0]["idempotency_key"], seen[1]["idempotency_key"])
        calls = self.assertCalls({"/v1/cgm-post/0": ["http_500", "ok"],
                                  "/v1/cgm-post/1": ["http_503", "ok"]})
        for rs in calls.values():
            self.assertEqual({r["method"] for r in rs}, {"POST"})
            self.assertEqual(rs[0]["model"], "gpt-4o-mini")

    def test_stream_flows_while_another_transfer_backs_off(self):
        """Transfer 0 waits >= 3 s (Retry-After: 3) before its retry; transfer 1, an SSE
        stream of 16 events 100 ms apart in the same multi, flows on meanwhile: its longest
        gap between two writes stays far below the backoff, and it takes about as long as
        unguarded. A guard that slept inside the host's loop would stall it for 3 s."""
        stream = sse(16, 100)
        gplans = [["503:ra=3", fixed(0)], [stream]]
        pplans = [[fixed(0)], [stream]]
        gurls, purls = self.urls(gplans, "/v1/cgm-flow"), self.urls(pplans, "/v1/cgm-flow")
        gt, pt = self.tmp / "g.timing", self.tmp / "p.timing"
        g = self.host(["--timing", gt], gurls, self.genv())
        p = self.host(["--timing", pt], purls, harness.plain_env())
        self.assertSameRun(g, p)
        timing = {}
        for name, path in (("g", gt), ("p", pt)):
            rows = [line.split() for line in path.read_text().splitlines()]
            timing[name] = {int(r[0]): [float(x) for x in r[1:]] for r in rows}
        # i start_ms first_ms last_ms done_ms max_gap_ms writes
        g0, g1, p1 = timing["g"][0], timing["g"][1], timing["p"][1]
        g_stream = g1[2] - g1[0]
        p_stream = p1[2] - p1[0]
        self.assertGreaterEqual(p_stream, 1500 - 50, f"the plain stream was not a stream: {p1}")
        self.assertGreaterEqual(g0[3], 3000 - 50, f"transfer 0 did not wait out its backoff: {g0}")
        self.assertLess(g1[4], 1000, f"the stream stalled {g1[4]:.0f} ms during the backoff")
        self.assertLess(g_stream, p_stream + 1000,
                        f"stream took {g_stream:.0f} ms guarded vs {p_stream:.0f} ms plain")
        self.assertLess(g1[2], g0[3], "the stream ended after the backed-off transfer")
        self.assertGreaterEqual(g1[5], 8, f"the stream came in {g1[5]:.0f} writes: {g1}")
        self.assertServerSaw(gurls, [2, 1])
        calls = self.assertCalls({"/v1/cgm-flow/0": ["http_503", "ok"], "/v1/cgm-flow/1": ["ok"]})
        self.assertGreaterEqual(calls["/v1/cgm-flow/0"][0]["backoff_ms"], 3000 - 5,
                                calls["/v1/cgm-flow/0"])

    def timings(self, path):
        """cgmulti --timing: {i: [start_ms, first_ms, last_ms, done_ms, max_gap_ms, writes]}."""
        rows = [line.split() for line in path.read_text().splitlines()]
        return {int(r[0]): [float(x) for x in r[1:]] for r in rows}

    def test_stream_flows_while_another_transfer_waits_for_the_limiter(self):
        """CURLGUARD_RPM=60 (1/s, burst 1): the stream (added first) takes the one slot and
        transfer 1, added 50 ms later, waits about 1 s for the limiter; meanwhile the
        stream's 15 events, 100 ms apart, keep arriving."""
        stream = sse(15, 100)
        plans = [[stream], [fixed(1)]]
        gurls, purls = self.urls(plans, "/v1/cgm-lim"), self.urls(plans, "/v1/cgm-lim")
        gt, pt = self.tmp / "g.timing", self.tmp / "p.timing"
        env = self.genv(CURLGUARD_RPM="60", CURLGUARD_ADAPTIVE="off")
        g = self.host(["--pace-ms", "50", "--timing", gt], gurls, env)
        p = self.host(["--pace-ms", "50", "--timing", pt], purls, harness.plain_env())
        self.assertSameRun(g, p)
        gtm, ptm = self.timings(gt), self.timings(pt)
        g0, g1, p0 = gtm[0], gtm[1], ptm[0]
        self.assertGreaterEqual(g1[3], 1000 - 100, f"transfer 1 did not wait for the limiter: {g1}")
        self.assertLess(g0[4], 700, f"the stream stalled {g0[4]:.0f} ms while the other waited")
        self.assertLess(g0[2] - g0[0], (p0[2] - p0[0]) + 1000, (g0, p0))
        self.assertGreaterEqual(g0[5], 8, g0)
        calls = self.assertCalls({"/v1/cgm-lim/0": ["ok"], "/v1/cgm-lim/1": ["ok"]})
        self.assertLess(calls["/v1/cgm-lim/0"][0]["queue_ms"], 200, calls)
        self.assertGreaterEqual(calls["/v1/cgm-lim/1"][0]["queue_ms"], 1000 - 50 - 150, calls)

    def test_stream_flows_while_another_call_is_held_by_the_breaker(self):
        """Five 503s in a row (CURLGUARD_MAX_ATTEMPTS=1) open the pool's breaker
        (consecutive_failures 5, cooldown 1 s, `wait`): transfer 5, to the same pool, is held
        for the probe and succeeds as it; transfer 6, an SSE stream from a second server (a
        pool of its own), flows meanwhile in the same multi."""
        other = harness.MockProvider().start()
        self.addCleanup(other.stop)
        stream = sse(15, 100)
        gurls = self.urls([["503"]] * 5 + [[fixed(5)]], "/v1/cgm-br")
        purls = self.urls([["503"]] * 5 + [[fixed(5)]], "/v1/cgm-br")
        gurls.append(other.url("/v1/cgm-br/6", plan=[stream]))
        purls.append(other.url("/v1/cgm-br/6", plan=[stream]))
        gt, pt = self.tmp / "g.timing", self.tmp / "p.timing"
        env = self.genv(CURLGUARD_MAX_ATTEMPTS="1", CURLGUARD_BREAKER_COOLDOWN_S="1",
                        CURLGUARD_BREAKER_JITTER="0", CURLGUARD_ADAPTIVE="off")
        g = self.host(["--pace-ms", "60", "--timing", gt], gurls, env)
        p = self.host(["--pace-ms", "60", "--timing", pt], purls, harness.plain_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(g.stdout, p.stdout)
        gtm, ptm = self.timings(gt), self.timings(pt)
        held, g6, p6 = gtm[5], gtm[6], ptm[6]
        self.assertGreaterEqual(held[3], 1000 - 100, f"transfer 5 was not held: {held}")
        self.assertLess(g6[4], 700, f"the stream stalled {g6[4]:.0f} ms while 5 was held")
        self.assertLess(g6[2] - g6[0], (p6[2] - p6[0]) + 1000, (g6, p6))
        calls = self.call_sets()
        self.assertEqual([r["outcome"] for r in calls["/v1/cgm-br/5"]], ["ok"], calls)
        self.assertGreaterEqual(calls["/v1/cgm-br/5"][0]["breaker_wait_ms"], 500, calls)
        self.assertEqual([r["outcome"] for r in calls["/v1/cgm-br/6"]], ["ok"], calls)
        self.assertEqual(calls["/v1/cgm-br/6"][0]["breaker_wait_ms"], 0, calls)

    def test_backoff_frees_the_connection_for_a_queued_transfer(self):
        """CURLMOPT_MAX_TOTAL_CONNECTIONS=1: transfer 1 is queued by libcurl behind
        transfer 0. Transfer 0's backoff (Retry-After: 2) happens outside the real multi,
        so transfer 1 gets the connection and finishes long before transfer 0's retry."""
        gurls = self.urls([["503:ra=2", fixed(0)], [fixed(1)]], "/v1/cgm-mc")
        purls = self.urls([[fixed(0)], [fixed(1)]], "/v1/cgm-mc")
        gt = self.tmp / "g.timing"
        g = self.host(["--max-connections", "1", "--timing", gt], gurls, self.genv())
        p = self.host(["--max-connections", "1"], purls, harness.plain_env())
        self.assertSameRun(g, p)
        t = self.timings(gt)
        self.assertGreaterEqual(t[0][3], 2000 - 50, t)
        self.assertLess(t[1][3], 1000, f"transfer 1 waited for transfer 0's backoff: {t}")
        self.assertServerSaw(gurls, [2, 1])
        self.assertCalls({"/v1/cgm-mc/0": ["http_503", "ok"], "/v1/cgm-mc/1": ["ok"]})

    def test_first_byte_timeout_split_and_retried(self):
        """CURLGUARD_FIRST_BYTE_TIMEOUT_MS=400: a GET whose answer would take 3 s is cut
        after 0.4 s (on libcurl's progress beat: about 1.2 s, README "Split timeouts,
        without threads") and retried; the host sees the retry's 200 long before 3 s."""
        self.check_cut_and_retried(dict(fixed(0), delay_ms=3000), "/v1/cgm-fbt",
                                   self.genv(CURLGUARD_FIRST_BYTE_TIMEOUT_MS="400"),
                                   "first_byte_timeout", at_least=0.4 - 0.05,
                                   msg="the first-byte timeout did not cut the slow attempt")

    def test_read_timeout_split_and_retried(self):
        """CURLGUARD_READ_TIMEOUT_MS=400: a GET whose body stops half-way for 3 s is cut
        (the host saw none of it: a held body) and retried; the host gets the retry's 200.
        The split timeouts fire on libcurl's progress beat, about 1.2 s for an idle
        transfer (README "Split timeouts, without threads"): the bound is generous."""
        self.check_cut_and_retried({"action": "stall", "body": fixed(0)["body"], "ms": 3000},
                                   "/v1/cgm-rt", self.genv(CURLGUARD_READ_TIMEOUT_MS="400"),
                                   "read_timeout",
                                   msg="the read timeout did not cut the stalled attempt")

    def check_cut_and_retried(self, bad, prefix, env, outcome, msg, at_least=None):
        """Transfer 0's first answer is `bad` (cut by a split timeout under `env`, its
        record `outcome`), its retry and transfer 1 get fixed bytes: byte-identical to a
        plain run, within 2.5 s (and at least `at_least` s), one record set per call."""
        gurls = self.urls([[bad, fixed(0)], [fixed(1)]], prefix)
        purls = self.urls([[fixed(0)], [fixed(1)]], prefix)
        gdir, pdir = self.dirs("out")
        t0 = time.monotonic()
        g = self.host(["--out-dir", gdir], gurls, env)
        took = time.monotonic() - t0
        p = self.host(["--out-dir", pdir], purls, harness.plain_env())
        self.assertSameRun(g, p)
        self.assertSameFiles(gdir, pdir)
        if at_least is not None:
            self.assertGreaterEqual(took, at_least)
        self.assertLess(took, 2.5, msg)
        self.assertServerSaw(gurls, [2, 1])
        self.assertCalls({f"{prefix}/0": [outcome, "ok"], f"{prefix}/1": ["ok"]})

    def test_usage_cost_and_request_id_header(self):
        """Three chat completions in one multi with CURLGUARD_REQUEST_ID_HEADER=
        Idempotency-Key: every attempt carries its call's request id (which also makes the
        POST that got a 500 retryable), and each call's final record has the tokens the
        provider billed and their price (gpt-4o-mini: 0.15 / 0.60 USD per million)."""
        chat = "/v1/chat/completions"
        plans = ["503:ra=0,200", "200", "500,200"]
        urls = [self.mock.url(chat, plan=p) for p in plans]
        env = self.genv(CURLGUARD_REQUEST_ID_HEADER="Idempotency-Key")
        for stream in (False, True):
            with self.subTest(stream=stream):
                self.log.unlink(missing_ok=True)
                body = {"model": "gpt-4o-mini",
                        "messages": [{"role": "user", "content": "Say hello to the multi API."}]}
                if stream:
                    body.update(stream=True, stream_options={"include_usage": True})
                    urls = [self.mock.url(chat, plan=p.replace("200", "200:chunk_ms=5"))
                            for p in plans]
                g = self.host(["--post", json.dumps(body)], urls, env)
                self.assertEqual(g.returncode, 0, g.stderr)
                sets = {rs[0]["request_id"]: rs for rs in self.record_sets()}
                self.assertEqual(len(sets), 3, self.records())
                for u, n in zip(urls, (2, 1, 2)):
                    entries = self.exact_entries(u, n)
                    keys = {e["idempotency_key"] for e in entries}
                    self.assertEqual(len(keys), 1, entries)
                    rs = sets.get(keys.pop())
                    self.assertIsNotNone(rs, f"no call's request id in {entries}")
                    self.assertEqual(len(rs), n, rs)
                    last, usage = rs[-1], entries[-1]["usage"]
                    self.assertEqual((last["outcome"], last["model"]), ("ok", "gpt-4o-mini"))
                    self.assertEqual(last["prompt_tokens"], usage["prompt_tokens"], rs)
                    self.assertEqual(last["completion_tokens"], usage["completion_tokens"], rs)
                    self.assertEqual(last["total_tokens"], entries[-1]["billed_tokens"], rs)
                    want = (usage["prompt_tokens"] * 0.15 + usage["completion_tokens"] * 0.60) / 1e6
                    self.assertAlmostEqual(last["cost_usd"], want, places=12)

    def test_cleanup_with_handles_inside_then_readd(self):
        """At 0.6 s the host calls curl_multi_cleanup with transfer 0 in its backoff
        (Retry-After: 3) and transfer 2 waiting for its answer, then adds both handles to a
        new multi (libcurl documents both). Each old call ends with a final record
        aborted_by_host; the handles start over as new calls and succeed, at once."""
        late = dict(fixed(2), delay_ms=2000)
        gplans = [["503:ra=3", fixed(0)], [fixed(1)], [late, fixed(2)]]
        pplans = [[fixed(0)], [fixed(1)], [late, fixed(2)]]
        gurls, purls = self.urls(gplans, "/v1/cgm-cu"), self.urls(pplans, "/v1/cgm-cu")
        gdir, pdir = self.dirs("out")
        t0 = time.monotonic()
        g = self.host(["--cleanup-after-ms", "600", "--out-dir", gdir], gurls, self.genv(),
                      timeout=40)
        took = time.monotonic() - t0
        p = self.host(["--cleanup-after-ms", "600", "--out-dir", pdir], purls, harness.plain_env())
        self.assertSameRun(g, p)
        self.assertSameFiles(gdir, pdir)
        self.assertLess(took, 2.5, "the re-added handles waited for the old multi's backoff")
        self.assertServerSaw(gurls, [2, 1, 2])
        sets = self.record_sets()
        by_path = {}
        for rs in sets:
            by_path.setdefault(rs[0]["path"], []).append([r["outcome"] for r in rs])
        self.assertEqual(by_path, {"/v1/cgm-cu/0": [["http_503", "aborted_by_host"], ["ok"]],
                                   "/v1/cgm-cu/1": [["ok"]],
                                   "/v1/cgm-cu/2": [["aborted_by_host"], ["ok"]]},
                         self.records())

    def test_cleanup_digests_the_body_each_call_sent(self):
        """As above with a POST body, which the host writes over right before
        curl_multi_cleanup (--rewrite-post-at-cleanup: a host that frees or reuses the
        buffers of the transfers it abandons).  The calls that cleanup ends must record
        the digest of the body they sent, not of what the buffer holds when they end: the
        guard hashes a body when its call starts (a digest made at the call's end read a
        4 MiB body its host had freed: SIGSEGV, 0b02f06).  The re-added transfers send,
        and record, the new bytes."""
        body = json.dumps({"model": "gpt-4o-mini",
                           "messages": [{"role": "user", "content": "digest me"}]})
        late = dict(fixed(2), delay_ms=2000)
        plans = [["503:ra=3", fixed(0)], [fixed(1)], [late, fixed(2)]]
        urls = self.urls(plans, "/v1/cgm-rw")
        g = self.host(["--cleanup-after-ms", "600", "--post", body,
                       "--rewrite-post-at-cleanup"], urls, self.genv(), timeout=40)
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(g.stdout.count(b" 0 200 "), 3, g.stdout)
        by_path = {}
        for rs in self.record_sets():
            self.assertEqual(len({r["body_digest"] for r in rs}), 1, rs)
            by_path.setdefault(rs[0]["path"], []).append(
                ([r["outcome"] for r in rs], rs[0]["body_digest"]))
        sent = by_path["/v1/cgm-rw/1"][0][1]  # ended before the cleanup: the first bytes
        self.assertRegex(sent or "", r"^[0-9a-f]{16,}$", by_path)
        new = by_path["/v1/cgm-rw/0"][1][1]
        self.assertNotEqual(new, sent, by_path)
        self.assertEqual(by_path, {
            "/v1/cgm-rw/0": [(["http_503", "aborted_by_host"], sent), (["ok"], new)],
            "/v1/cgm-rw/1": [(["ok"], sent)],
            "/v1/cgm-rw/2": [(["aborted_by_host"], sent), (["ok"], new)]})

    def test_64_transfers_paced_like_64_processes(self):
        """CURLGUARD_RPM=960 (16/s, burst 16, README "One limiter"): 64 transfers added at
        once to one multi reach the server no faster than 64 processes would."""
        n, rate, burst = 64, 16.0, 16
        key = harness.unique_key("multi64")
        urls = [self.mock.url(f"/v1/cgm64/{i}", plan="200", key=key) for i in range(n)]
        env = self.genv(CURLGUARD_RPM="960", CURLGUARD_ADAPTIVE="off")
        t0 = time.monotonic()
        g = self.host([], urls, env, timeout=90)
        elapsed = time.monotonic() - t0
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(g.stdout.count(b" 0 200 "), n)
        times = self.paced_arrivals(key, n, rate, burst)
        spread = times[-1] - times[0]
        ideal = (n - burst) / rate
        self.assertGreaterEqual(spread, ideal - SLACK,
                                f"64 transfers at 16/s after a burst of 16 took {spread:.3f} s")
        self.assertLess(spread, ideal + 10, f"pacing far too slow: {times}")
        self.assertLess(elapsed, ideal + 30)
        calls = self.assertCalls({f"/v1/cgm64/{i}": ["ok"] for i in range(n)})
        q = sorted(rs[0]["queue_ms"] for rs in calls.values())
        self.assertGreaterEqual(q[-1], ideal * 1000 - 400, f"queue_ms {q}")
        self.assertLess(q[0], 200, f"the first transfer should not wait: {q}")

    def test_remove_mid_backoff_is_aborted_by_host(self):
        """Transfer 0 gets a 503 with Retry-After: 5; the host removes it 1 s later, in the
        middle of the backoff: its call ends with a final record aborted_by_host, its retry
        is never sent, the other transfer is untouched and the host does not hang."""
        self.check_gone_mid_backoff("--remove-after-ms")

    def test_easy_cleanup_mid_backoff_is_aborted_by_host(self):
        """The same with curl_easy_cleanup of the handle still in the multi (libcurl
        removes it from its multi first): no dangling handle, one final record."""
        self.check_gone_mid_backoff("--easy-cleanup-after-ms")

    def check_gone_mid_backoff(self, option):
        gurls = self.urls([["503:ra=5", fixed(0)], [fixed(1)]], "/v1/cgm-rm")
        t0 = time.monotonic()
        g = self.host([option, "1000", "0", "--max-ms", "30000"], gurls,
                      self.genv(), timeout=40)
        elapsed = time.monotonic() - t0
        n1 = len(fixed(1)["body"])
        self.assertEqual(g.stdout, f"0 removed\n1 0 200 {n1}\n".encode(), g.stderr)
        self.assertEqual(g.returncode, 1, g.stderr)          # cgmulti: not every transfer ok
        self.assertLess(elapsed, 4.0, "the host hung after removing a transfer in backoff")
        time.sleep(0.3)
        self.assertServerSaw(gurls, [1, 1])
        calls = self.call_sets()
        self.assertEqual(sorted(calls), ["/v1/cgm-rm/0", "/v1/cgm-rm/1"], self.records())
        rs = calls["/v1/cgm-rm/0"]
        self.assertEqual(rs[0]["outcome"], "http_503", rs)
        self.assertEqual(rs[-1]["outcome"], "aborted_by_host", rs)
        self.assertEqual((rs[-1]["final"], rs[-1]["decision"]), (True, "done"), rs)
        self.assertEqual([r["outcome"] for r in calls["/v1/cgm-rm/1"]], ["ok"])


class CgmultiSocketActionTest(CgmultiTests, MultiTestCase):
    MODE = []


class CgmultiPerformTest(CgmultiTests, MultiTestCase):
    MODE = ["--perform"]


class CgmultiWaitTest(MultiTestCase):
    """Loops over curl_multi_wait (cgmulti --wait: perform, wait up to 1 s, read), which
    returns at once when libcurl has no descriptor to wait on: while a guarded transfer
    waits outside the real multi (a backoff), the guard sleeps the host's wait instead
    (README "Limitations"), and that must not depend on what else the multi holds."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not CGMULTI.exists():
            raise unittest.SkipTest(f"{CGMULTI} is not built (make build/tests/cgmulti)")

    def run_both(self, args, gplans, pplans, prefix):
        """cgmulti ARGS --timing over the plans guarded and plain -> (guarded run, plain
        run, guarded turns, plain turns, {i: guarded done_ms}, {i: plain done_ms})."""
        out = []
        for env, plans, tag in ((self.genv(), gplans, "g"), (harness.plain_env(), pplans, "p")):
            timing = self.tmp / f"timing-{tag}"
            run = harness.run([CGMULTI, *args, "--turns", "--timing", timing,
                               *self.urls(plans, f"{prefix}-{tag}")], env, timeout=40)
            self.assertEqual(run.returncode, 0, run.stderr)
            turns = re.search(rb"cgmulti: turns=(\d+)", run.stderr)
            self.assertIsNotNone(turns, run.stderr)
            done = {int(f[0]): float(f[4]) for f in
                    (line.split() for line in timing.read_text().splitlines())}
            out.append((run, int(turns.group(1)), done))
        (g, gt, gd), (p, pt, pd) = out
        return g, p, gt, pt, gd, pd

    def test_a_finished_transfer_left_in_the_multi_does_not_make_the_host_spin(self):
        """Transfer 0 gets a 503 with Retry-After: 2; transfer 1 ends at once and stays in
        the multi until the end (--keep-done: PHP's manual loop removes handles after it).
        The guarded loop turns a few times during the 2 s backoff (it spun ~2.3 million
        times when the guard counted the ended transfer as one libcurl waits on), and
        transfer 1 still ends at once."""
        g, p, gt, pt, gd, pd = self.run_both(
            ["--wait", "--keep-done"], [["503:ra=2", fixed(0)], [fixed(1)]],
            [[fixed(0)], [fixed(1)]], "/v1/cgm-keep")
        self.assertEqual(g.stdout, p.stdout)
        self.assertGreaterEqual(gd[0], 2000 - SLACK * 1000, gd)
        self.assertLess(gt, 50, f"the guarded loop turned {gt} times (plain: {pt})")
        self.assertLess(gd[1], 500, gd)

    def test_an_ended_transfer_is_read_at_once_when_the_host_reads_after_its_wait(self):
        """The same with the messages read after the wait (perform, wait, read: the loop of
        PHP's manual and of libcurl's multi-app.c): transfer 1's end, queued by the
        perform before the wait, reaches the host at once, not after the wait's full
        second, and the loop still does not spin."""
        g, p, gt, pt, gd, pd = self.run_both(
            ["--wait", "--keep-done", "--read-after-wait"],
            [["503:ra=2", fixed(0)], [fixed(1)]], [[fixed(0)], [fixed(1)]], "/v1/cgm-rdw")
        self.assertEqual(g.stdout, p.stdout)
        self.assertLess(gd[1], 500, gd)
        self.assertLess(gt, 50, f"the guarded loop turned {gt} times (plain: {pt})")

    def test_a_second_remove_does_not_leave_a_live_transfer_unwaited(self):
        """Transfer 0 ends and is removed twice (libcurl 7.88 answers CURLM_OK to the second
        remove), transfer 1 waits out a 503 with Retry-After: 3, transfer 2 is answered
        after 200 ms: transfer 2 ends at about 200 ms as without the guard (when the second
        remove was counted, the guard slept the host's whole wait over its socket: about
        1.2 s)."""
        late = dict(fixed(2), delay_ms=200)
        g, p, gt, pt, gd, pd = self.run_both(
            ["--wait", "--read-after-wait", "--remove-twice"],
            [[fixed(0)], ["503:ra=3", fixed(1)], [late]], [[fixed(0)], [fixed(1)], [late]],
            "/v1/cgm-rm2")
        self.assertEqual(g.stdout, p.stdout)
        self.assertGreaterEqual(pd[2], 200 - SLACK * 1000, pd)
        self.assertLess(gd[2], pd[2] + 400, f"guarded {gd}, plain {pd}")
        self.assertGreaterEqual(gd[1], 3000 - SLACK * 1000, gd)

    def test_a_timer_callback_that_fails_ends_the_host_loop_as_without_the_guard(self):
        """The host's timer callback returns -1 on its N-th call (socket_action loop).
        libcurl's call that set the timer then returns CURLM_ABORTED_BY_CALLBACK and never
        calls the callback again (lib/multi.c Curl_update_timer), and the host ends (cgmulti
        exits 1).  Under the guard the same, also when the failing call is the guard's own:
        with CURLGUARD_RPM=60 two of the three transfers wait outside for the limiter and
        the guard sets the host's timer for them.  (Before, the guard ignored the -1: the
        callback was called again, the host hung without a timer, or libcurl crashed in
        curl_multi_socket_action.)"""
        cases = [(3, [["503:ra=1", fixed(0)], [fixed(1)]], {})]
        cases += [(n, [[fixed(0)], [fixed(1)], [fixed(2)]], {"CURLGUARD_RPM": "60"})
                  for n in (3, 4, 5)]
        for k, (n, plans, extra) in enumerate(cases):
            with self.subTest(fail=n, **extra):
                env = self.genv(CURLGUARD_STATE=str(self.tmp / f"{k}.state"), **extra)
                urls = self.urls(plans, f"/v1/cgm-tf-{k}")
                p = harness.run([CGMULTI, "--timer-fail", str(n), *urls], harness.plain_env(),
                                timeout=20)
                g = harness.run([CGMULTI, "--timer-fail", str(n), *urls], env, timeout=20)
                for run in (p, g):
                    self.assertEqual(run.returncode, 1, run.stderr)
                    self.assertIn(b"aborted by an application callback", run.stderr)
                    self.assertNotIn(b"called after it returned -1", run.stderr)


# ================================================================ curl --parallel

class CurlParallelTest(MultiTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_curl()

    def curl(self, urls, outdir, env):
        args = [harness.CURL, "-sS", "--noproxy", "*", "--no-progress-meter", "--parallel",
                "--parallel-max", "10"]
        for i, u in enumerate(urls):
            args += ["-o", str(outdir / f"{i}.out"), u]
        return harness.run(args, env, timeout=60)

    def test_no_faults_byte_identical(self):
        plans = [[fixed(0)], [fixed(1)], [sse(8, 30)], [fixed(3)]]
        gdir, pdir = self.dirs("out")
        gurls, purls = self.urls(plans, "/v1/par-ok"), self.urls(plans, "/v1/par-ok")
        g = self.curl(gurls, gdir, self.genv())
        p = self.curl(purls, pdir, harness.plain_env())
        self.assertSameRun(g, p)
        self.assertSameFiles(gdir, pdir)
        self.assertServerSaw(gurls, [1, 1, 1, 1])
        self.assertCalls({f"/v1/par-ok/{i}": ["ok"] for i in range(4)})

    def test_503_then_200_and_a_stream(self):
        gplans = [["503:ra=0", fixed(0)], [fixed(1)], ["503:ra=0", fixed(2)], [sse(8, 50)],
                  ["503:ra=0", fixed(4)]]
        pplans = [[fixed(0)], [fixed(1)], [fixed(2)], [sse(8, 50)], [fixed(4)]]
        gdir, pdir = self.dirs("out")
        gurls, purls = self.urls(gplans, "/v1/par-r"), self.urls(pplans, "/v1/par-r")
        g = self.curl(gurls, gdir, self.genv())
        p = self.curl(purls, pdir, harness.plain_env())
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertSameRun(g, p)
        self.assertSameFiles(gdir, pdir)
        self.assertEqual((gdir / "0.out").read_bytes(), fixed(0)["body"].encode())
        self.assertServerSaw(gurls, [2, 1, 2, 1, 2])
        self.assertCalls({"/v1/par-r/0": ["http_503", "ok"], "/v1/par-r/1": ["ok"],
                          "/v1/par-r/2": ["http_503", "ok"], "/v1/par-r/3": ["ok"],
                          "/v1/par-r/4": ["http_503", "ok"]})


# ================================================================ pycurl CurlMulti

PYCURL_MULTI = textwrap.dedent(r'''
    import select, sys, time, pycurl

    mode, urls = sys.argv[1], sys.argv[2:]
    m = pycurl.CurlMulti()
    handles, bodies, heads = [], [], []
    for i, u in enumerate(urls):
        c = pycurl.Curl()
        b, h = [], []
        c.setopt(pycurl.URL, u)
        c.setopt(pycurl.WRITEFUNCTION, b.append)
        c.setopt(pycurl.HEADERFUNCTION, h.append)
        c.index = i
        handles.append(c); bodies.append(b); heads.append(h)
    result = {}

    def drain():
        while True:
            queued, ok, err = m.info_read()
            for c in ok:
                result[c.index] = (0, c.getinfo(pycurl.RESPONSE_CODE))
                m.remove_handle(c)
            for c, code, msg in err:
                result[c.index] = (code, c.getinfo(pycurl.RESPONSE_CODE))
                m.remove_handle(c)
            if not queued:
                break

    deadline = time.monotonic() + 45

    def left():
        return max(0.0, deadline - time.monotonic())

    def perform():
        while True:
            ret, running = m.perform()
            if ret != pycurl.E_CALL_MULTI_PERFORM:
                break
        drain()

    if mode == "perform":                      # perform + select (pycurl's docs)
        for c in handles:
            m.add_handle(c)
        while len(result) < len(handles) and time.monotonic() < deadline:
            perform()
            if len(result) < len(handles):
                m.select(1.0)
    elif mode == "fdset":                      # fdset + select for timeout(), as git's http.c
        for c in handles:
            m.add_handle(c)
        while len(result) < len(handles) and time.monotonic() < deadline:
            perform()
            if len(result) >= len(handles):
                break
            r, w, x = m.fdset()
            t = m.timeout()
            wait = 0.05 if t < 0 else min(left(), t / 1000.0)
            if r or w or x:
                select.select(r, w, x, wait)
            else:
                time.sleep(wait)
    else:                                      # socket_action + M_SOCKETFUNCTION/TIMERFUNCTION
        socks, timer, fresh = {}, [None], set()
        def on_socket(what, fd, multi, data):
            if data is not None and data != ("fd", fd):
                sys.exit("socket callback: foreign socketp %r for fd %d" % (data, fd))
            if what == pycurl.POLL_REMOVE:
                socks.pop(fd, None)
                fresh.discard(fd)
            else:
                if fd not in socks:
                    fresh.add(fd)              # assigned once socket_action returned
                socks[fd] = what
        def assign_fresh():
            while fresh:
                fd = fresh.pop()
                m.assign(fd, ("fd", fd))
        def on_timer(ms):
            timer[0] = None if ms < 0 else time.monotonic() + ms / 1000.0
        m.setopt(pycurl.M_SOCKETFUNCTION, on_socket)
        m.setopt(pycurl.M_TIMERFUNCTION, on_timer)
        for c in handles:
            m.add_handle(c)
        m.socket_all()
        assign_fresh()
        drain()
        while len(result) < len(handles) and time.monotonic() < deadline:
            # Only the timer libcurl asked for, or socket activity, wakes the loop.
            wait = left() if timer[0] is None else min(left(), timer[0] - time.monotonic())
            wait = max(0.0, wait)
            rl = [fd for fd, w in socks.items() if w & pycurl.POLL_IN]
            wl = [fd for fd, w in socks.items() if w & pycurl.POLL_OUT]
            r, w, _ = select.select(rl, wl, [], wait)
            if not r and not w:
                if timer[0] is not None and time.monotonic() >= timer[0]:
                    timer[0] = None
                    m.socket_action(pycurl.SOCKET_TIMEOUT, 0)
                    assign_fresh()
            for fd in set(r) | set(w):
                ev = (pycurl.CSELECT_IN if fd in r else 0) | (pycurl.CSELECT_OUT if fd in w else 0)
                m.socket_action(fd, ev)
            assign_fresh()
            drain()
    out = sys.stdout.buffer
    for c in handles:
        code, status = result.get(c.index, (None, None))
        out.write(b"%d code=%r status=%r\n  headers=%r\n  body=%r\n"
                  % (c.index, code, status, b"".join(heads[c.index]), b"".join(bodies[c.index])))
    sys.exit(0 if len(result) == len(handles) else 3)
''')


PHP = shutil.which("php", path="/usr/bin:/bin")

# The curl_multi_exec example of PHP's manual: curl_multi_select (curl_multi_wait, 1 s)
# until nothing runs, the handles removed after the loop.  Prints the loop's turns on
# stderr and each transfer's status on stdout.
PHP_MANUAL_LOOP = r'''<?php
$hs = [];
$mh = curl_multi_init();
foreach (array_slice($argv, 1) as $url) {
    $ch = curl_init($url);
    curl_setopt($ch, CURLOPT_RETURNTRANSFER, true);
    curl_multi_add_handle($mh, $ch);
    $hs[] = $ch;
}
$turns = 0;
do {
    $status = curl_multi_exec($mh, $active);
    if ($active) {
        curl_multi_select($mh);
    }
    $turns++;
} while ($active && $status == CURLM_OK);
fprintf(STDERR, "turns=%d\n", $turns);
foreach ($hs as $i => $ch) {
    echo $i, " ", curl_getinfo($ch, CURLINFO_RESPONSE_CODE), " ", strlen(curl_multi_getcontent($ch)), "\n";
    curl_multi_remove_handle($mh, $ch);
}
curl_multi_close($mh);
'''


class PhpMultiLoopTest(MultiTestCase):
    NEEDS = ([PHP, "-r", "exit(extension_loaded('curl') ? 0 : 1);"],
             "php with php-curl is not installed (scripts/install-deps)")

    def test_manual_loop_waits_out_a_backoff_without_spinning(self):
        """PHP's manual loop while transfer 0 waits out a 503's Retry-After: 2 and transfer
        1, ended, is still in the multi: the loop turns a few times, not ~3 million (100% of
        a CPU for the whole backoff, as it did), and both transfers end with a 200."""
        if harness.SAN_PRELOAD:
            self.skipTest("PHP loads extensions with RTLD_DEEPBIND, which ASan refuses")
        script = self.tmp / "loop.php"
        script.write_text(PHP_MANUAL_LOOP)
        urls = self.urls([["503:ra=2", fixed(0)], [fixed(1)]], "/v1/php-loop")
        t0 = time.monotonic()
        g = harness.run([PHP, script, *urls], self.genv(), timeout=40)
        took = time.monotonic() - t0
        self.assertEqual(g.returncode, 0, g.stderr)
        n0, n1 = len(fixed(0)["body"]), len(fixed(1)["body"])
        self.assertEqual(g.stdout, f"0 200 {n0}\n1 200 {n1}\n".encode())
        turns = int(re.search(rb"turns=(\d+)", g.stderr).group(1))
        self.assertGreaterEqual(took, 2 - SLACK)
        self.assertLess(turns, 50, f"PHP's loop turned {turns} times in {took:.1f} s")


class PycurlMultiTest(MultiTestCase):
    NEEDS = ([harness.PYTHON, "-c", "import pycurl"],
             f"{harness.PYTHON} has no pycurl (python3-pycurl)")
    MODES = {"perform_select": "perform", "socket_action": "socket", "fdset_timeout": "fdset"}

    def setUp(self):
        super().setUp()
        self.script = self.tmp / "pcm.py"
        self.script.write_text(PYCURL_MULTI)

    def py(self, mode, urls, env):
        return harness.run([harness.PYTHON, self.script, mode, *urls], env, timeout=90)

    def check(self, mode, faults):
        self.log.unlink(missing_ok=True)
        first = ["503:ra=0"] if faults else []
        gplans = [first + [fixed(0)], [fixed(1)], first + [fixed(2)], [sse(6, 40)]]
        pplans = [[fixed(0)], [fixed(1)], [fixed(2)], [sse(6, 40)]]
        prefix = f"/v1/pcm-{mode}-{int(faults)}"
        gurls, purls = self.urls(gplans, prefix), self.urls(pplans, prefix)
        g = self.py(mode, gurls, self.genv())
        p = self.py(mode, purls, harness.plain_env())
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertSameRun(g, p)
        self.assertEqual(g.stdout.count(b"code=0 status=200"), 4, g.stdout)
        self.assertNotIn(b"503", g.stdout)
        n = 2 if faults else 1
        self.assertServerSaw(gurls, [n, 1, n, 1])
        retried = ["http_503", "ok"] if faults else ["ok"]
        self.assertCalls({f"{prefix}/0": retried, f"{prefix}/1": ["ok"],
                          f"{prefix}/2": retried, f"{prefix}/3": ["ok"]})


# ================================================================ Ruby curb

CURB = textwrap.dedent(r'''
    require 'curb'
    mode, *urls = ARGV
    res = []
    if mode == "easy"
      urls.each_with_index do |u, i|
        c = Curl::Easy.new(u)
        c.perform
        res << [i, c.response_code, c.header_str, c.body_str]
      end
    else
      m = Curl::Multi.new
      easies = urls.each_with_index.map do |u, i|
        c = Curl::Easy.new(u)
        m.add(c)
        c
      end
      m.perform
      easies.each_with_index { |c, i| res << [i, c.response_code, c.header_str, c.body_str] }
    end
    res.each { |i, code, h, b| puts "#{i} #{code} #{h.inspect} #{b.inspect}" }
''')


class RubyCurbTest(MultiTestCase):
    NEEDS = ([RUBY, "-rcurb", "-e", "1"], "ruby with curb (ruby-curb) is not installed")
    MODES = {"easy_perform": "easy", "multi": "multi"}

    def check(self, mode, faults):
        script = self.tmp / "curb.rb"
        script.write_text(CURB)
        self.check_three_calls([RUBY, script, mode], f"/v1/curb-{mode}-{int(faults)}", faults,
                               timeout=60)


# ================================================================ R curl

R_SCRIPT = textwrap.dedent(r'''
    args <- commandArgs(trailingOnly = TRUE)
    mode <- args[1]; urls <- args[-1]
    show <- function(i, r) cat(sprintf("%d %d %s %s\n", i, r$status_code,
                                       encodeString(rawToChar(r$headers), quote = '"'),
                                       encodeString(rawToChar(r$content), quote = '"')))
    if (mode == "fetch") {
      for (i in seq_along(urls)) show(i - 1, curl::curl_fetch_memory(urls[i]))
    } else {
      res <- list()
      pool <- curl::new_pool()
      for (i in seq_along(urls)) local({
        k <- i
        curl::multi_add(curl::new_handle(url = urls[k]), pool = pool,
                        done = function(r) res[[k]] <<- r,
                        fail = function(e) cat("fail", k, e, "\n"))
      })
      curl::multi_run(pool = pool, timeout = 60)
      for (i in seq_along(urls)) show(i - 1, res[[i]])
    }
''')


class RCurlTest(MultiTestCase):
    NEEDS = ([RSCRIPT, "-e", "library(curl)"],
             "Rscript with the curl package (r-cran-curl) is not installed")
    MODES = {"fetch_memory": "fetch", "multi_run": "multi"}

    def check(self, mode, faults):
        script = self.tmp / "fetch.R"
        script.write_text(R_SCRIPT)
        self.check_three_calls([RSCRIPT, script, mode], f"/v1/rcurl-{mode}-{int(faults)}",
                               faults, timeout=90)


# ================================================================ git over smart HTTP

class GitSmartHttpTest(harness.GitTestMixin, MultiTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_git()
        if not any(os.path.exists(os.path.join(d, "git-core", n))
                   for d in ("/usr/lib", "/usr/libexec")
                   for n in ("git-remote-http", "git-http-backend")):
            raise unittest.SkipTest("git-remote-http / git-http-backend are not installed")

    def setUp(self):
        super().setUp()
        self.srv = self.tmp / "srv"
        self.srv.mkdir()
        self.make_bare_repo(self.srv / "repo.git")

    def server(self, name, fail_first):
        """Start a git http-backend server (fail_first: its first request, GET info/refs,
        gets a 503); returns (repo URL, the server)."""
        srv = harness.GitHttpServer(self, self.srv, name,
                                    fail_first=["/repo.git/info/refs"] if fail_first else [])
        return srv.base + "/repo.git", srv

    def requests(self, srv):
        time.sleep(0.1)
        return srv.requests()

    def clone(self, name, url, env):
        dest = self.tmp / f"clone-{name}"
        p = self.git(["clone", "-q", url, str(dest)], env)
        if p.returncode != 0:
            return p, None
        log = self.ok(self.git(["-C", str(dest), "log", "--format=%H %s", "--all"]))
        files = {f: (dest / f).read_bytes() for f in sorted(os.listdir(dest)) if f != ".git"}
        self.ok(self.git(["-C", str(dest), "fsck", "--strict"]))
        return p, (p.stdout, p.stderr, log.stdout, files)

    def genv(self):
        return self.git_env(self.guard_env(extra=FAST))

    def assertGitCalls(self, reqs, retried_first):
        """One record set per call: the server's requests, less the 503 that was retried
        (git POSTs to git-upload-pack twice: ls-refs, then fetch)."""
        calls = self.record_sets()
        served = [r for r in reqs if r[3] != "503"]
        self.assertEqual(len(calls), len(served), (reqs, self.records()))
        by_path = {}
        for rs in calls:
            by_path.setdefault(rs[0]["path"], []).append([r["outcome"] for r in rs])
            self.assertEqual(rs[-1]["status"], 200, rs)
        self.assertEqual({p: len(c) for p, c in by_path.items()},
                         {p: sum(r[2] == p for r in served) for p in {r[2] for r in served}},
                         by_path)
        first = by_path["/repo.git/info/refs"]
        self.assertEqual(first, [["http_503", "ok"]] if retried_first else [["ok"]], by_path)

    def test_clone_no_faults_byte_identical(self):
        purl, psrv = self.server("plain", False)
        gurl, gsrv = self.server("guarded", False)
        p, pres = self.clone("plain", purl, None)
        g, gres = self.clone("guarded", gurl, self.genv())
        self.ok(p)
        self.ok(g)
        self.assertEqual(gres, pres)
        self.assertEqual(len(pres[2].splitlines()), 3)
        reqs = self.requests(gsrv)
        self.assertEqual([r[1:] for r in reqs], [r[1:] for r in self.requests(psrv)])
        self.assertGitCalls(reqs, retried_first=False)

    def test_clone_first_request_503_retried_invisibly(self):
        purl, _ = self.server("plain", False)
        furl, _ = self.server("plain-fault", True)
        gurl, gsrv = self.server("guarded", True)
        p, pres = self.clone("plain", purl, None)
        self.ok(p)
        pf, _ = self.clone("plain-fault", furl, None)          # the fault is real
        self.assertNotEqual(pf.returncode, 0)
        self.assertIn(b"503", pf.stderr)
        g, gres = self.clone("guarded", gurl, self.genv())
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(gres, pres)
        reqs = self.requests(gsrv)
        self.assertEqual(reqs[0][1:], ["GET", "/repo.git/info/refs", "503"], reqs)
        self.assertEqual(reqs[1][1:], ["GET", "/repo.git/info/refs", "200"], reqs)
        self.assertTrue(any(r[1] == "POST" for r in reqs), reqs)
        self.assertGitCalls(reqs, retried_first=True)


if __name__ == "__main__":
    unittest.main()
