"""The shared circuit breaker (README "Circuit breaker and retry budget", SPEC sections 4, 5,
7; src/breaker.h): real curl processes under the guard share one state file; the mock
provider's ledger is the ground truth of which requests reached the server.

Every test uses its own state file (GuardTestCase) and its own mock keys. The breaker is set
small (4 requests, a short cooldown) through the environment; one test uses a pool's
"breaker" object in a config file. Timing: generous upper bounds, tight lower bounds."""

import concurrent.futures
import json
import os
import re
import signal
import subprocess
import textwrap
import threading
import time
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

OPEN_RE = re.compile(r"curlguard: circuit open for 127\.0\.0\.1(?::\d+)?, next probe in (\d+) s")
PROBING = rb"curlguard: circuit open for 127\.0\.0\.1(?::\d+)?, probe in flight"


class BreakerTestCase(harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not harness.CURL:
            raise unittest.SkipTest("curl is not installed")

    def benv(self, cooldown="30", **extra):
        """One attempt per call (so calls and requests are one to one), a 4-request breaker
        that fails fast while open (CURLGUARD_BREAKER_OPEN=fail: these tests are about the
        fail-fast behaviour, issue 12's holding is in test_breaker_hold) with a fixed
        cooldown: no doubling, no jitter, no slow start."""
        env = dict(CURLGUARD_MAX_ATTEMPTS="1", CURLGUARD_BREAKER_MIN_REQUESTS="4",
                   CURLGUARD_BREAKER_FAILURE_RATE="0.5", CURLGUARD_BREAKER_WINDOW_S="60",
                   CURLGUARD_BREAKER_COOLDOWN_S=cooldown, CURLGUARD_BREAKER_OPEN="fail",
                   CURLGUARD_BREAKER_COOLDOWN_MAX_S=cooldown, CURLGUARD_BREAKER_JITTER="0",
                   CURLGUARD_BREAKER_RAMP_S="0")
        env.update(extra)
        return self.guard_env(extra=env)

    def curl(self, url, env, timeout=30):
        return harness.run([harness.CURL, "-sS", "-o", "/dev/null", "-w", "%{http_code}", url],
                           env, timeout=timeout)

    def stat_breaker(self):
        p = harness.run([harness.CLI, "stat", "--json"],
                        harness.plain_env(CURLGUARD_STATE=str(self.state)), timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        pools = {x["name"]: x for x in json.loads(p.stdout)["pools"]}
        self.assertIn(harness.mock_pool(), pools, pools)
        return pools[harness.mock_pool()]["breaker"]

    def open_breaker(self, env):
        """Four failing requests (503) open it; returns the time the last one ended."""
        url = self.mock.url("/v1/chat/completions", plan="503")
        for _ in range(4):
            p = self.curl(url, env)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout, b"503")
        self.exact_entries(url, 4)
        self.assertEqual(self.stat_breaker()["state"], "open")
        return time.monotonic()

    def assertFastFail(self, p, took):
        self.assertEqual(p.returncode, 7, f"exit {p.returncode}: {p.stderr!r}")
        m = OPEN_RE.search(p.stderr.decode())
        self.assertIsNotNone(m, p.stderr)
        self.assertLess(took, 1.0, f"an open circuit took {took:.3f} s to fail")
        return int(m.group(1))


class OpenTest(BreakerTestCase):
    def test_outage_opens_and_later_calls_never_reach_the_server(self):
        env = self.benv()
        self.open_breaker(env)
        later = self.mock.url("/v1/chat/completions", plan="200")
        other = self.mock.url("/v1/other/path", plan="200")
        for url in (later, later, later, other, other):
            t0 = time.monotonic()
            p = self.curl(url, env)
            n = self.assertFastFail(p, time.monotonic() - t0)
            self.assertTrue(1 <= n <= 30, n)
        self.exact_entries(later, 0)
        self.exact_entries(other, 0)

        recs = self.records()
        self.assertEqual(len(recs), 9, recs)
        self.assertEqual([r["outcome"] for r in recs[:4]], ["http_503"] * 4)
        for r in recs[4:]:
            self.assertRecordKeys(r)
            self.assertEqual(r["outcome"], "circuit_open")
            self.assertEqual(r["decision"], "give_up")
            self.assertEqual(r["reason"], "circuit_open")
            self.assertEqual(r["curl_code"], 7)
            self.assertTrue(r["final"])
            self.assertIsNone(r["status"])
            self.assertEqual(r["bytes_sent"], 0)

        b = self.stat_breaker()
        self.assertEqual(b["state"], "open")
        self.assertEqual((b["requests"], b["failures"]), (4, 4), b)
        self.assertEqual(b["failure_rate"], 1)
        self.assertTrue(0 < b["next_probe_s"] <= 30, b)
        self.assertEqual((b["opened"], b["rejected"], b["probes"]), (1, 5, 0), b)
        self.assertEqual((b["threshold"], b["min_requests"], b["cooldown_s"]), (0.5, 4, 30), b)

        # The error code is configurable; the text stays.
        p = self.curl(later, self.benv(CURLGUARD_BREAKER_OPEN_CODE="6"))
        self.assertEqual(p.returncode, 6, p.stderr)
        self.assertRegex(p.stderr.decode(), OPEN_RE)

        # `stat` in words.
        t = harness.run([harness.CLI, "stat"], harness.plain_env(CURLGUARD_STATE=str(self.state)))
        self.assertEqual(t.returncode, 0, t.stderr)
        self.assertRegex(t.stdout.decode(), "\n" + re.escape(harness.mock_pool()) + r" +open +100 +4 ")

    def test_client_errors_and_successes_do_not_open(self):
        env = self.benv()
        for plan in ("404", "400", "200"):
            url = self.mock.url("/v1/x", plan=plan)
            for _ in range(3):
                self.assertEqual(self.curl(url, env).returncode, 0)
            self.exact_entries(url, 3)
        b = self.stat_breaker()
        self.assertEqual(b["state"], "closed")
        self.assertEqual((b["requests"], b["failures"]), (9, 0), b)

    def test_below_failure_rate_stays_closed(self):
        env = self.benv()
        ok = self.mock.url("/v1/ok", plan="200")
        bad = self.mock.url("/v1/bad", plan="503")
        for url in (ok, ok, ok, bad, ok, bad):        # 2 of 6 failed: 33 % < 50 %
            self.curl(url, env)
        self.exact_entries(bad, 2)
        self.assertEqual(self.stat_breaker()["state"], "closed")

    def test_connect_failures_count(self):
        with __import__("socket").socket() as s:          # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = self.benv()
        url = f"http://127.0.0.1:{port}/v1/x"
        for _ in range(4):
            p = self.curl(url, env)
            self.assertEqual(p.returncode, 7)
            self.assertNotIn(b"circuit open", p.stderr)
        t0 = time.monotonic()
        p = self.curl(url, env)
        self.assertFastFail(p, time.monotonic() - t0)
        self.assertEqual([r["outcome"] for r in self.records()],
                         ["connect_refused"] * 4 + ["circuit_open"])

    def test_off_switch(self):
        env = self.benv(CURLGUARD_BREAKER="off")
        url = self.mock.url("/v1/x", plan="503")
        for _ in range(8):
            self.assertEqual(self.curl(url, env).stdout, b"503")
        self.exact_entries(url, 8)
        self.assertFalse(self.stat_breaker()["enabled"])

    def test_pool_breaker_from_config_file(self):
        cfg = self.tmp / "guard.json"
        cfg.write_text(json.dumps({"pools": [{
            "name": "mockpool", "hosts": ["127.0.0.1"],
            "breaker": {"min_requests": 3, "failure_rate": 1.0, "window_s": 5,
                        "cooldown_s": 20, "open_code": 56, "open": "fail"}}]}))
        env = self.guard_env(CURLGUARD_CONFIG=str(cfg), CURLGUARD_MAX_ATTEMPTS="1")
        url = self.mock.url("/v1/x", plan="503")
        for _ in range(3):
            self.assertEqual(self.curl(url, env).stdout, b"503")
        p = self.curl(url, env)
        self.assertEqual(p.returncode, 56, p.stderr)
        self.assertIn(b"curlguard: circuit open for mockpool, next probe in", p.stderr)
        self.exact_entries(url, 3)
        st = json.loads(harness.run([harness.CLI, "stat", "--json", "--config", str(cfg)],
                                    harness.plain_env(CURLGUARD_STATE=str(self.state))).stdout)
        b = {x["name"]: x for x in st["pools"]}["mockpool"]["breaker"]
        self.assertEqual((b["state"], b["min_requests"], b["threshold"], b["window_s"],
                          b["cooldown_s"]), ("open", 3, 1, 5, 20), b)

    def test_environment_off_wins_over_a_pools_config_file(self):
        """CURLGUARD_BREAKER=off switches off a pool whose config file says enabled: true
        (SPEC 3: env wins over the config file); a pool's other keys stay (review 6, 8)."""
        cfg = self.tmp / "guard.json"
        cfg.write_text(json.dumps({"pools": [{
            "name": "mockpool", "hosts": ["127.0.0.1"],
            "breaker": {"enabled": True, "min_requests": 3, "failure_rate": 1.0,
                        "open": "fail"}}]}))
        url = self.mock.url("/v1/x", plan="503")
        env = self.guard_env(CURLGUARD_CONFIG=str(cfg), CURLGUARD_MAX_ATTEMPTS="1",
                             CURLGUARD_BREAKER="off")
        for _ in range(5):
            p = self.curl(url, env)
            self.assertEqual((p.returncode, p.stdout), (0, b"503"), p.stderr)
        self.exact_entries(url, 5)
        # Without the variable the file's pool breaker is on: 3 failures open it.
        url2 = self.mock.url("/v1/y", plan="503")
        env = self.guard_env(CURLGUARD_CONFIG=str(cfg), CURLGUARD_MAX_ATTEMPTS="1")
        codes = [self.curl(url2, env).returncode for _ in range(4)]
        self.assertEqual(codes, [0, 0, 0, 7])

    def test_stat_shows_an_open_breaker_after_a_process_ran_with_it_off(self):
        """A process with CURLGUARD_BREAKER=off does not hide the shared state from `stat`
        (review 6, item 6)."""
        env = self.benv()
        self.open_breaker(env)
        url = self.mock.url("/v1/chat/completions", plan="200")
        p = self.curl(url, self.benv(CURLGUARD_BREAKER="off"))
        self.assertEqual((p.returncode, p.stdout), (0, b"200"), p.stderr)
        self.assertEqual(self.stat_breaker()["state"], "open")
        t = harness.run([harness.CLI, "stat"], harness.plain_env(CURLGUARD_STATE=str(self.state)))
        self.assertRegex(t.stdout.decode(), "\n" + re.escape(harness.mock_pool()) + r" +open +100 ")
        self.assertEqual(self.curl(url, env).returncode, 7)   # still open for the others

    def test_429_with_a_hint_is_left_to_the_limiter(self):
        """A 429 carrying Retry-After / retry-after-ms does not count (the limiter holds the
        pool for the hint); one without a hint does (review 6, item 7)."""
        env = self.benv()
        for plan in ("429:ram=50", "429:ra=0"):
            url = self.mock.url("/v1/chat/completions", plan=plan)
            for _ in range(6):
                p = self.curl(url, env)
                self.assertEqual((p.returncode, p.stdout), (0, b"429"), p.stderr)
            self.exact_entries(url, 6)
            b = self.stat_breaker()
            self.assertEqual((b["state"], b["requests"]), ("closed", 0), (plan, b))
        url = self.mock.url("/v1/chat/completions", plan="429")
        codes = [self.curl(url, env).returncode for _ in range(5)]
        self.assertEqual(codes, [0, 0, 0, 0, 7])
        self.exact_entries(url, 4)
        self.assertEqual(self.stat_breaker()["state"], "open")

    def test_one_line_per_bad_breaker_object(self):
        """Six bad keys in one "breaker" object: one `curlguard:` line naming them all, and
        the good keys of the object still apply (review 6, item 14)."""
        cfg = self.tmp / "guard.json"
        cfg.write_text(json.dumps({"pools": [{
            "name": "mockpool", "hosts": ["127.0.0.1"],
            "breaker": {"enabled": "yes", "failure_rate": 5, "min_requests": -1,
                        "window_s": "x", "cooldown_s": 0, "open_code": 500, "bogus": 1,
                        "min_requests ": 2}}]}))
        env = self.guard_env(CURLGUARD_CONFIG=str(cfg), CURLGUARD_MAX_ATTEMPTS="1")
        p = self.curl(self.mock.url("/v1/x", plan="200"), env)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stderr.decode().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertTrue(lines[0].startswith('curlguard: config: pool "mockpool" "breaker": '),
                        lines)
        for key in ("enabled", "failure_rate", "min_requests", "window_s", "cooldown_s",
                    "open_code", "bogus"):
            self.assertIn(f'"{key}"', lines[0])
        self.assertTrue(lines[0].endswith("those keys ignored"), lines)

    def test_malformed_values_warn_once_and_use_defaults(self):
        env = self.guard_env(CURLGUARD_BREAKER_FAILURE_RATE="lots", CURLGUARD_BREAKER="maybe",
                             CURLGUARD_MAX_ATTEMPTS="1")
        url = self.mock.url("/v1/x", plan="200")
        p = self.curl(url, env)
        self.assertEqual(p.returncode, 0)
        lines = p.stderr.decode().splitlines()
        self.assertEqual(len(lines), 2, lines)
        self.assertTrue(all(x.startswith("curlguard:") for x in lines), lines)
        b = self.stat_breaker()
        self.assertTrue(b["enabled"])
        self.assertEqual((b["threshold"], b["min_requests"], b["window_s"], b["cooldown_s"]),
                         (0.5, 10, 10, 1), b)
        self.assertEqual((b["open"], b["consecutive_max"], b["cooldown_max_s"], b["ramp_s"]),
                         ("wait", 5, 2, 3), b)

    def test_fail_fast_cost_in_process(self):
        """How long an open circuit takes to fail, measured inside one process (pycurl), so
        process start-up is not in the figure. Printed; only a generous bound is asserted.
        (pycurl also opens the breaker here: under `make check-asan`, where curl cannot run,
        this test takes the breaker through the instrumented library.)"""
        if harness.run([harness.PYTHON, "-c", "import pycurl"], None).returncode != 0:
            raise unittest.SkipTest("python3-pycurl is not installed")
        script = textwrap.dedent(r'''
            import sys, time, pycurl
            n = int(sys.argv[3]); codes = set()
            c = pycurl.Curl()
            c.setopt(pycurl.WRITEFUNCTION, lambda b: None)
            def one(url):
                c.setopt(pycurl.URL, url)
                try:
                    c.perform()
                    return c.getinfo(pycurl.RESPONSE_CODE)
                except pycurl.error as e:
                    return -e.args[0]
            if sys.argv[1] != "-":
                opened = [one(sys.argv[1]) for _ in range(4)]
                assert opened == [503] * 4, opened
            codes.add(one(sys.argv[2]))     # warm-up: maps the state file, opens the log
            t0 = time.perf_counter()
            for _ in range(n):
                codes.add(one(sys.argv[2]))
            print((time.perf_counter() - t0) / n * 1e6, sorted(codes))
        ''')
        bad = self.mock.url("/v1/chat/completions", plan="503")
        url = self.mock.url("/v1/chat/completions", plan="200")
        for log in ("off", str(self.tmp / "ff.jsonl")):
            p = harness.run([harness.PYTHON, "-c", script, bad if log == "off" else "-", url,
                             "200"],
                            self.guard_env(extra=dict(CURLGUARD_MAX_ATTEMPTS="1",
                                                      CURLGUARD_LOG=log,
                                                      CURLGUARD_BREAKER_MIN_REQUESTS="4",
                                                      CURLGUARD_BREAKER_COOLDOWN_S="30",
                                                      CURLGUARD_BREAKER_OPEN="fail")))
            self.assertEqual(p.returncode, 0, p.stderr)
            us, codes = p.stdout.decode().split(" ", 1)
            self.assertEqual(codes.strip(), "[-7]")
            print(f"\n[breaker] open circuit: {float(us):.1f} us per call (pycurl, 200 calls, "
                  f"log {'off' if log == 'off' else 'on'})", flush=True)
            self.assertLess(float(us), 50000)
        self.exact_entries(bad, 4)
        self.exact_entries(url, 0)
        recs = harness.read_records(self.tmp / "ff.jsonl")
        self.assertEqual(len(recs), 201)
        self.assertEqual({r["outcome"] for r in recs}, {"circuit_open"})
        self.assertEqual(self.stat_breaker()["state"], "open")


class HalfOpenTest(BreakerTestCase):
    def wait_cooldown(self, opened_at, cooldown):
        left = opened_at + cooldown + 0.15 - time.monotonic()
        if left > 0:
            time.sleep(left)

    def test_one_probe_from_16_processes_then_recovery_closes(self):
        env = self.benv(cooldown="2")
        opened = self.open_breaker(env)
        # Before the cooldown ends nothing goes.
        early = self.mock.url("/v1/chat/completions", plan="200")
        p = self.curl(early, env)
        self.assertEqual(p.returncode, 7)
        self.wait_cooldown(opened, 2)

        probe = self.mock.url("/v1/chat/completions", plan="200:delay=3000")
        barrier = threading.Barrier(16)

        def one(_):
            barrier.wait(10)
            t0 = time.monotonic()
            r = self.curl(probe, env)
            return r, time.monotonic() - t0

        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            results = list(ex.map(one, range(16)))
        codes = sorted(r.returncode for r, _ in results)
        self.assertEqual(codes, [0] + [7] * 15, [(r.returncode, r.stderr) for r, _ in results])
        for r, took in results:
            if r.returncode == 7:
                # While the probe is out nobody is told a time: it may close any moment.
                self.assertRegex(r.stderr, PROBING)
                self.assertNotRegex(r.stderr.decode(), OPEN_RE)
                # The probe takes 3 s; 16 processes starting at once on a small machine
                # need a moment each, so the bound is looser than the sequential 1 s.
                self.assertLess(took, 2.0, "a caller waited for the probe instead of failing")
            else:
                self.assertEqual(r.stdout, b"200")
        seen = self.exact_entries(probe, 1)
        print(f"\n[breaker] probes that reached the server from 16 processes: {len(seen)}",
              flush=True)
        self.exact_entries(early, 0)

        b = self.stat_breaker()
        self.assertEqual(b["state"], "closed", b)
        self.assertEqual((b["requests"], b["probes"], b["opened"]), (0, 1, 1), b)
        after = self.mock.url("/v1/chat/completions", plan="200")
        for _ in range(3):
            self.assertEqual(self.curl(after, env).returncode, 0)
        self.exact_entries(after, 3)
        outcomes = [r["outcome"] for r in self.records()]
        self.assertEqual(outcomes.count("circuit_open"), 16)   # 1 early + 15 during the probe

    def test_failed_probe_reopens(self):
        env = self.benv(cooldown="1")
        opened = self.open_breaker(env)
        self.wait_cooldown(opened, 1)
        probe = self.mock.url("/v1/chat/completions", plan="503")
        p = self.curl(probe, env)
        self.assertEqual((p.returncode, p.stdout), (0, b"503"), p.stderr)
        self.exact_entries(probe, 1)
        b = self.stat_breaker()
        self.assertEqual((b["state"], b["opened"], b["probes"]), ("open", 2, 1), b)
        self.assertGreater(b["next_probe_s"], 0.5, b)
        t0 = time.monotonic()
        p = self.curl(probe, env)
        self.assertFastFail(p, time.monotonic() - t0)
        self.exact_entries(probe, 1)
        # A cooldown later the next probe goes, and its success closes the breaker.
        time.sleep(1.1)
        good = self.mock.url("/v1/chat/completions", plan="200")
        self.assertEqual(self.curl(good, env).stdout, b"200")
        self.assertEqual(self.stat_breaker()["state"], "closed")

    def test_probe_is_not_retried_by_the_guard(self):
        """A probe that fails retryably re-opens the breaker; the guard does not retry it
        (`reason: circuit_open`): one request, whatever max_attempts says."""
        env = self.benv(cooldown="1", CURLGUARD_MAX_ATTEMPTS="3",
                        CURLGUARD_BACKOFF_BASE_MS="10", CURLGUARD_BACKOFF_CAP_MS="20")
        opened = self.open_breaker(self.benv(cooldown="1"))
        self.wait_cooldown(opened, 1)
        probe = self.mock.url("/v1/chat/completions", plan="503,200")
        p = self.curl(probe, env)
        self.assertEqual(p.stdout, b"503")
        self.exact_entries(probe, 1)
        last = self.records()[-1]
        self.assertEqual((last["outcome"], last["decision"], last["reason"]),
                         ("http_503", "give_up", "circuit_open"))

    def test_killed_probe_holder_is_released(self):
        env = self.benv(cooldown="1")
        opened = self.open_breaker(env)
        self.wait_cooldown(opened, 1)
        slow = self.mock.url("/v1/chat/completions", plan="200:delay=20000")
        holder = self.start_slow_curl(slow, env)
        try:
            b = self.stat_breaker()
            self.assertEqual((b["state"], b["probe_pid"]), ("half_open", holder.pid), b)
            # While the probe lives, everybody else fails fast, told a probe is out.
            other = self.mock.url("/v1/chat/completions", plan="200")
            t0 = time.monotonic()
            p = self.curl(other, env)
            self.assertLess(time.monotonic() - t0, 1.0)
            self.assertEqual(p.returncode, 7, p.stderr)
            self.assertRegex(p.stderr, PROBING)
        finally:
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(10)
        self.assertEqual(holder.returncode, -signal.SIGKILL)
        # Its deadline is 20 s away, but its process is gone: the next caller probes.
        t0 = time.monotonic()
        p = self.curl(other, env)
        self.assertEqual((p.returncode, p.stdout), (0, b"200"), p.stderr)
        self.assertLess(time.monotonic() - t0, 2.0)
        self.exact_entries(other, 1)
        b = self.stat_breaker()
        self.assertEqual((b["state"], b["probes"]), ("closed", 2), b)


    def test_killed_but_unreaped_probe_holder_is_released(self):
        """The parent SIGKILLs the stalled probe and does not reap it: a zombie still
        answers kill(pid, 0), yet the next caller probes (review 6, item 4)."""
        env = self.benv(cooldown="1")
        opened = self.open_breaker(env)
        self.wait_cooldown(opened, 1)
        slow = self.mock.url("/v1/chat/completions", plan="200:delay=20000")
        holder = self.start_slow_curl(slow, env)
        try:
            os.kill(holder.pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while True:             # a zombie now, and nobody waits for it
                with open(f"/proc/{holder.pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        break
                self.assertLess(time.monotonic(), deadline, "the holder never died")
                time.sleep(0.02)
            other = self.mock.url("/v1/chat/completions", plan="200")
            t0 = time.monotonic()
            p = self.curl(other, env)
            self.assertEqual((p.returncode, p.stdout), (0, b"200"), p.stderr)
            self.assertLess(time.monotonic() - t0, 2.0)
            self.exact_entries(other, 1)
            self.assertEqual(self.stat_breaker()["state"], "closed")
        finally:
            if holder.poll() is None:
                os.kill(holder.pid, signal.SIGKILL)
            holder.wait(10)


class FallbackTest(BreakerTestCase):
    def test_fallback_serves_while_open_under_its_own_breaker(self):
        """Two provider names for the one mock (curl --resolve: every connection still goes
        to 127.0.0.1): while the primary pool's breaker is open, calls go to its
        fallback_url, whose own pool and breaker protect it in turn."""
        port = self.mock.port
        cfg = self.tmp / "guard.json"
        small = {"min_requests": 3, "failure_rate": 0.5, "cooldown_s": 30, "open": "fail"}
        cfg.write_text(json.dumps({"pools": [
            {"name": "primary", "hosts": ["primary.test"], "breaker": small,
             "fallback_url": f"http://fallback.test:{port}/fb"},
            {"name": "backup", "hosts": ["fallback.test"], "breaker": small}]}))
        env = self.guard_env(CURLGUARD_CONFIG=str(cfg), CURLGUARD_MAX_ATTEMPTS="1")
        # One key, so the mock answers in order whichever name the request used:
        # 3 x 503 (the primary opens), 2 x 200 (the fallback serves), 2 x 503 (2 of its 4
        # failed: the fallback opens too), then both fail fast.
        url = self.mock.url("/v1/chat/completions", plan="503,503,503,200,200,503")
        url = url.replace("127.0.0.1", "primary.test", 1)
        resolve = ["--resolve", f"primary.test:{port}:127.0.0.1",
                   "--resolve", f"fallback.test:{port}:127.0.0.1"]

        def call():
            return harness.run([harness.CURL, "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                                *resolve, url], env, timeout=30)

        got = [call() for _ in range(9)]
        self.assertEqual([p.stdout for p in got],
                         [b"503"] * 3 + [b"200"] * 2 + [b"503"] * 2 + [b"000"] * 2,
                         [p.stderr for p in got])
        for p in got[7:]:
            self.assertEqual(p.returncode, 7)
            self.assertIn(b"curlguard: circuit open for backup, next probe in", p.stderr)

        seen = self.exact_entries(url, 7)
        self.assertEqual([e["path"] for e in seen],
                         ["/v1/chat/completions"] * 3 + ["/fb/v1/chat/completions"] * 4)
        self.assertEqual({e["headers"]["host"] for e in seen[3:]}, {f"fallback.test:{port}"})

        recs = self.records()
        self.assertEqual([(r["host"], r["pool"], r["fallback_from"]) for r in recs],
                         [("primary.test", "primary", None)] * 3 +
                         [("fallback.test", "backup", "primary")] * 6)
        self.assertEqual([r["outcome"] for r in recs][-1], "circuit_open")
        for r in recs:
            self.assertRecordKeys(r)
            self.assertEqual(r["path"], "/fb/v1/chat/completions" if r["fallback_from"]
                             else "/v1/chat/completions")

        st = json.loads(harness.run([harness.CLI, "stat", "--json", "--config", str(cfg)],
                                    harness.plain_env(CURLGUARD_STATE=str(self.state))).stdout)
        b = {x["name"]: x["breaker"] for x in st["pools"]}
        self.assertEqual((b["primary"]["state"], b["primary"]["rejected"]), ("open", 6), b)
        self.assertEqual((b["backup"]["state"], b["backup"]["requests"]), ("open", 4), b)


class SharedWindowTest(BreakerTestCase):
    def test_processes_with_different_windows_share_the_first_ones(self):
        """Two configurations (window_s 60 and 5) alternating on one state file: 4
        failures at 100 % open the breaker as for one process; the second one says once
        that it uses the file's window (review 6, item 9)."""
        url = self.mock.url("/v1/chat/completions", plan="503")
        envs = [self.benv(CURLGUARD_BREAKER_WINDOW_S="60", CURLGUARD_RETRY_BUDGET_WINDOW_S="10"),
                self.benv(CURLGUARD_BREAKER_WINDOW_S="5", CURLGUARD_RETRY_BUDGET_WINDOW_S="3")]
        got = [self.curl(url, envs[i % 2]) for i in range(8)]
        self.assertEqual([p.returncode for p in got], [0] * 4 + [7] * 4,
                         [p.stderr for p in got])
        self.exact_entries(url, 4)
        second = got[1].stderr.decode().splitlines()
        self.assertEqual(second, [
            f"curlguard: pool {harness.mock_pool()}: the state file's breaker window is 60 s (another "
            "process set it first), not 5 s; using 60 s (curlguard reset clears it)",
            f"curlguard: pool {harness.mock_pool()}: the state file's retry budget window is 10 s (another "
            "process set it first), not 3 s; using 10 s (curlguard reset clears it)"])
        self.assertEqual(got[0].stderr, b"")
        self.assertEqual(self.stat_breaker()["window_s"], 60)
        # `reset` clears it: the next process's window is the file's.
        r = harness.run([harness.CLI, "reset"], harness.plain_env(CURLGUARD_STATE=str(self.state)))
        self.assertEqual(r.returncode, 0, r.stderr)
        p = self.curl(url, envs[1])
        self.assertEqual((p.returncode, p.stderr), (0, b""))
        self.assertEqual(self.stat_breaker()["window_s"], 5)


GETINFO_SCRIPT = r'''
import os, sys, pycurl
mode, ok_url, bad_url, dict_url = sys.argv[1:5]
c = pycurl.Curl()
calls = []
c.setopt(pycurl.WRITEFUNCTION, lambda b: calls.append("write"))
c.setopt(pycurl.PROTOCOLS, pycurl.PROTO_HTTP)
c.setopt(pycurl.TIMEOUT, 10)
def one(url, watch=False):
    c.setopt(pycurl.URL, url)
    if watch:                       # every host callback libcurl could call, recorded
        del calls[:]
        c.setopt(pycurl.HEADERFUNCTION, lambda b: calls.append("header"))
        c.setopt(pycurl.NOPROGRESS, 0)
        c.setopt(pycurl.XFERINFOFUNCTION, lambda *a: calls.append("progress"))
        c.setopt(pycurl.DEBUGFUNCTION, lambda t, m: calls.append("debug"))
        c.setopt(pycurl.VERBOSE, 1)
        os.write(2, b"MARK-BEFORE\n")
    try:
        c.perform()
        rc = 0
    except pycurl.error as e:
        rc = e.args[0]
    if watch:
        os.write(2, b"MARK-AFTER\n")
        c.setopt(pycurl.VERBOSE, 0)
        c.setopt(pycurl.NOPROGRESS, 1)
    return [rc, c.getinfo(pycurl.RESPONSE_CODE), c.getinfo(pycurl.SIZE_DOWNLOAD),
            c.errstr()]
out = [one(ok_url)]
if mode == "breaker":
    for _ in range(4):
        one(bad_url)
out.append(one(ok_url, watch=True) + [list(calls)])
out.append(one(dict_url)[:1])       # the host's protocol list is back: dict refused
print(repr(out))
'''


class GetinfoAfterFailFastTest(BreakerTestCase):
    """After a local fail-fast, curl_easy_getinfo says "no transfer" (status 0, 0 bytes),
    not the handle's previous transfer, without any socket or host callback; the host's
    CURLOPT_PROTOCOLS is back afterwards (review 6, items 2 and 3)."""

    def setUp(self):
        super().setUp()
        if harness.run([harness.PYTHON, "-c", "import pycurl"], None).returncode != 0:
            raise unittest.SkipTest("python3-pycurl is not installed")

    def run_script(self, mode, env, strace=None):
        ok = self.mock.url("/v1/chat/completions", plan="200")
        bad = self.mock.url("/v1/chat/completions", plan="503")
        argv = [harness.PYTHON, "-c", GETINFO_SCRIPT, mode, ok, bad,
                f"dict://127.0.0.1:{self.mock.port}/x"]
        if strace:
            argv = [strace, "-f", "-e", "trace=socket,connect,write", "-o",
                    str(self.tmp / "strace.txt")] + argv
        p = harness.run(argv, env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return eval(p.stdout.decode())

    def test_circuit_open_after_a_200(self):
        first, refused, proto = self.run_script("breaker", self.benv())
        self.assertEqual(first[:2], [0, 200])
        self.assertGreater(first[2], 0)
        self.assertEqual(refused[:3], [7, 0, 0.0], refused)
        self.assertRegex(refused[3], OPEN_RE)
        self.assertEqual(refused[4], [], "no host callback during the fail-fast")
        self.assertEqual(proto, [1], "CURLOPT_PROTOCOLS put back (dict: unsupported)")

    def test_a_refused_protocol_list_is_never_widened(self):
        """libcurl 7.88 keeps part of a CURLOPT_PROTOCOLS_STR it refused ("http,foo": http
        only).  The guard cannot know what the handle allows then, so after a fail-fast it
        leaves the protocols alone (and getinfo as it was) rather than put back "all": a
        dict:// URL stays refused, as without the guard (review 6, N1)."""
        env = self.benv()
        self.open_breaker(env)
        ok = self.mock.url("/v1/chat/completions", plan="200")
        argv = [harness.CGHOST, "--protocols-str", "http,foo", "--twice", "--url2",
                f"dict://127.0.0.1:{self.mock.port}/x", ok]
        p = harness.run(argv, env, timeout=30)
        out = p.stdout.decode() + p.stderr.decode()
        self.assertIn("protocols_str=1", out)                  # libcurl refused the list
        self.assertRegex(out, r"perform=1 rc=7 ")              # the circuit is open
        self.assertRegex(out, r"perform=2 rc=1 ")              # dict: still unsupported
        plain = harness.run(argv, harness.plain_env(), timeout=30)
        self.assertRegex(plain.stdout.decode() + plain.stderr.decode(), r"perform=2 rc=1 ")

    def test_local_rate_limited_after_a_200(self):
        env = self.benv(CURLGUARD_RPM="1", CURLGUARD_DEADLINE_MS="3000")
        first, refused, proto = self.run_script("rpm", env)
        self.assertEqual(first[:2], [0, 200])
        self.assertGreater(first[2], 0)
        self.assertEqual(refused[:3], [28, 0, 0.0], refused)
        self.assertIn("curlguard: rate limit wait", refused[3])
        self.assertEqual(proto, [1])

    def test_breaker_opening_during_a_retrys_backoff(self):
        """A call waits 2 s before its retry; meanwhile other processes open the breaker:
        the retry is not sent, the call ends circuit_open (exit code 7) and getinfo says no
        transfer, not the first attempt's 503 (review 6, items 2 and 3)."""
        script = r'''
import sys, pycurl
c = pycurl.Curl()
c.setopt(pycurl.WRITEFUNCTION, lambda b: None)
c.setopt(pycurl.URL, sys.argv[1])
try:
    c.perform(); rc = 0
except pycurl.error as e:
    rc = e.args[0]
print(repr([rc, c.getinfo(pycurl.RESPONSE_CODE), c.getinfo(pycurl.SIZE_DOWNLOAD),
            c.errstr()]))
'''
        first = self.mock.url("/v1/chat/completions", plan="503,200")
        env = self.benv(CURLGUARD_MAX_ATTEMPTS="2", CURLGUARD_BACKOFF_BASE_MS="2000",
                        CURLGUARD_BACKOFF_CAP_MS="2000", CURLGUARD_JITTER="none")
        waiting = subprocess.Popen([harness.PYTHON, "-c", script, first], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            self.mock.wait_entries(url=first, count=1, timeout=10)
            bad = self.mock.url("/v1/chat/completions", plan="503")
            # The waiting call's 503 is not counted (issue 12 item 6: its retry may fix
            # it): 4 other failed calls open the breaker.
            for _ in range(4):
                self.assertEqual(self.curl(bad, self.benv()).stdout, b"503")
            self.assertEqual(self.stat_breaker()["state"], "open")
            out, err = waiting.communicate(timeout=30)
        finally:
            if waiting.poll() is None:
                waiting.kill()
                waiting.wait(10)
        self.assertEqual(waiting.returncode, 0, err)
        rc, status, size, text = eval(out.decode())
        self.assertEqual((rc, status, size), (7, 0, 0.0), text)
        self.assertRegex(text, OPEN_RE)
        self.exact_entries(first, 1)            # the retry was never sent
        recs = [r for r in self.records() if r["request_id"] ==
                self.records()[0]["request_id"]]
        self.assertEqual([(r["attempt"], r["outcome"], r["decision"]) for r in recs],
                         [(1, "http_503", "retry"), (2, "circuit_open", "give_up")])

    def test_no_socket_during_the_fail_fast(self):
        import shutil
        strace = shutil.which("strace")
        if not strace:
            raise unittest.SkipTest("strace is not installed")
        env = self.benv()
        harness.skip_unsanitizable([strace], env)
        _, refused, _ = self.run_script("breaker", env, strace=strace)
        self.assertEqual(refused[0], 7)
        trace = (self.tmp / "strace.txt").read_text()
        between = trace.split("MARK-BEFORE", 1)[1].split("MARK-AFTER", 1)[0]
        self.assertNotRegex(between, r"\b(socket|connect)\(", between)


class QueuedCallsTest(BreakerTestCase):
    """Calls waiting in the limiter when the breaker opens do not go out afterwards: the
    breaker is asked again right before each attempt (review 6, item 1)."""

    def run_parallel(self, env, url, n):
        barrier = threading.Barrier(n)

        def one(_):
            barrier.wait(10)
            return self.curl(url, env, timeout=60)

        with concurrent.futures.ThreadPoolExecutor(n) as ex:
            return list(ex.map(one, range(n)))

    def check(self, env, label):
        url = self.mock.url("/v1/chat/completions", plan="503:delay=100")
        results = self.run_parallel(env, url, 12)
        codes = sorted(r.returncode for r in results)
        seen = len(self.mock.entries(url=url))
        print(f"\n[breaker] {label}: {seen} of 12 queued calls reached the server "
              f"(min_requests 4)", flush=True)
        # Four open it; a few more may already be on the wire then (in flight, or past the
        # re-check a moment before the breaker opened).  Without the re-check all 12 go.
        self.assertLessEqual(seen, 7, [(r.returncode, r.stderr) for r in results])
        self.assertEqual(codes.count(0), seen)
        self.assertEqual(codes.count(7), 12 - seen, codes)
        for r in results:
            if r.returncode == 7:
                self.assertIn(b"curlguard: circuit open for 127.0.0.1", r.stderr)
        outcomes = [x["outcome"] for x in self.records()]
        self.assertEqual(outcomes.count("circuit_open"), 12 - seen, outcomes)

    def test_rpm_paced_calls_fail_fast_once_open(self):
        self.check(self.benv(CURLGUARD_RPM="240"), "RPM 240")

    def test_inflight_limited_calls_fail_fast_once_open(self):
        self.check(self.benv(CURLGUARD_MAX_INFLIGHT="1"), "MAX_INFLIGHT 1")


class FallbackDowngradeTest(BreakerTestCase):
    def test_https_pool_with_an_http_fallback_warns_once(self):
        """An https pool whose fallback_url is http:// sends its calls (API keys included)
        in clear text: one `curlguard:` line says so (review 6, item 12)."""
        import socket
        with socket.socket() as s:          # a port nobody listens on: connect refused
            s.bind(("127.0.0.1", 0))
            closed = s.getsockname()[1]
        port = self.mock.port
        cfg = self.tmp / "guard.json"
        cfg.write_text(json.dumps({"pools": [
            {"name": "primary", "hosts": ["primary.test"],
             "breaker": {"min_requests": 2, "failure_rate": 0.5, "cooldown_s": 30},
             "fallback_url": f"http://fallback.test:{port}"},
            {"name": "backup", "hosts": ["fallback.test"]}]}))
        env = self.guard_env(CURLGUARD_CONFIG=str(cfg), CURLGUARD_MAX_ATTEMPTS="1")
        url = f"https://primary.test:{closed}/v1/chat/completions?key={harness.unique_key()}"
        resolve = ["--resolve", f"primary.test:{closed}:127.0.0.1",
                   "--resolve", f"fallback.test:{port}:127.0.0.1"]
        script = [harness.CURL, "-sS", "-w", "%{http_code}\\n", *resolve]
        for _ in range(4):
            script += ["-o", "/dev/null", url]
        p = harness.run(script, env, timeout=60)
        self.assertEqual(p.stdout.split(), [b"000", b"000", b"200", b"200"], p.stderr)
        warn = [l for l in p.stderr.decode().splitlines() if "clear text" in l]
        self.assertEqual(len(warn), 1, p.stderr)
        self.assertTrue(warn[0].startswith("curlguard: pool primary sends https calls to its "
                                           f"fallback http://fallback.test:{port} in clear "
                                           "text"), warn)
        cfg.write_text(json.dumps({"pools": [{"name": "p", "hosts": ["x.test"],
                                              "fallback_url": "http://127.0.0.1:65536"}]}))
        p = harness.run([harness.CURL, "-sS", "-o", "/dev/null", self.mock.url("/v1/x")],
                        env, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        bad = [l for l in p.stderr.decode().splitlines() if "fallback_url" in l]
        self.assertEqual(len(bad), 1, p.stderr)
        self.assertIn("port from 1 to 65535", bad[0])


if __name__ == "__main__":
    unittest.main()
