"""The shared retry budget (README "Circuit breaker and retry budget"; src/budget.h): retries
stay a bounded fraction of first attempts across processes, also when the host retries on top
of the guard (`curl --retry`). The mock provider's ledger counts what reached the server.

The breaker is off in these tests so that only the budget limits retries."""

import concurrent.futures
import json
import math
import threading
import time
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

FAST = {"CURLGUARD_BREAKER": "off", "CURLGUARD_BACKOFF_BASE_MS": "10",
        "CURLGUARD_BACKOFF_CAP_MS": "20", "CURLGUARD_MAX_ATTEMPTS": "3"}


class BudgetTestCase(harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not harness.CURL:
            raise unittest.SkipTest("curl is not installed")

    def benv(self, **extra):
        env = dict(FAST)
        env.update(extra)
        return self.guard_env(extra=env)

    def curl(self, url, env, args=(), timeout=60, out="/dev/null"):
        # (curl --retry truncates its output file before a retry: /dev/null cannot be.)
        return harness.run([harness.CURL, "-sS", "-o", str(out), "-w", "%{http_code}",
                            *args, url], env, timeout=timeout)

    def parallel(self, n, url_of, env, args=()):
        barrier = threading.Barrier(n)

        def one(i):
            barrier.wait(10)
            return self.curl(url_of(i), env, args, out=self.tmp / f"body-{i}")

        with concurrent.futures.ThreadPoolExecutor(n) as ex:
            return list(ex.map(one, range(n)))

    def stat_budget(self, state=None):
        p = harness.run([harness.CLI, "stat", "--json"],
                        harness.plain_env(CURLGUARD_STATE=str(state or self.state)), timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        pools = {x["name"]: x for x in json.loads(p.stdout)["pools"]}
        return pools[harness.mock_pool()]["retry_budget"]


class StormTest(BudgetTestCase):
    N = 16                      # processes, one logical call each
    RATIO, MIN_PER_S, WINDOW = 0.2, 0.1, 30

    def storm(self, env):
        """N curl processes, each `curl --retry 3` on a 503 storm, under the guard (3 attempts
        per call). Returns (ledger count, results, seconds)."""
        key = harness.unique_key("storm")
        url = self.mock.url("/v1/chat/completions", plan="503", key=key)
        t0 = time.monotonic()
        results = self.parallel(self.N, lambda i: url, env,
                                ("--retry", "3", "--retry-delay", "1"))
        took = time.monotonic() - t0
        time.sleep(0.1)
        return len(self.mock.entries(key=key)), results, took

    def test_budget_caps_upstream_requests_under_host_retries(self):
        budget = {"CURLGUARD_RETRY_BUDGET_RATIO": str(self.RATIO),
                  "CURLGUARD_RETRY_BUDGET_MIN_PER_S": str(self.MIN_PER_S),
                  "CURLGUARD_RETRY_BUDGET_WINDOW_S": str(self.WINDOW),
                  # Refused retries wait for the 30 s window while the deadline allows:
                  # a short one makes them end instead (what this test counts).
                  "CURLGUARD_DEADLINE_MS": "4000"}
        upstream, results, took = self.storm(self.benv(**budget))
        allowed = math.floor(self.RATIO * self.N + self.MIN_PER_S * self.WINDOW)   # 6
        bound = self.N + allowed
        self.assertGreaterEqual(upstream, self.N, "every first attempt must go")
        self.assertLessEqual(upstream, bound,
                             f"{upstream} upstream requests for {self.N} calls; the budget "
                             f"allows {allowed} retries")
        # A timeout: the host's own loop (curl --retry) may ask again after its backoff,
        # and the budget answers that too (helper-59: CURLE_COULDNT_CONNECT ended it).
        refused_repeat = [r for r in results if r.returncode == 28]
        self.assertTrue(refused_repeat, [(r.returncode, r.stderr) for r in results])
        for r in refused_repeat:
            self.assertIn(b"curlguard: retry budget exhausted for 127.0.0.1", r.stderr)
        for r in results:
            self.assertIn(r.returncode, (0, 28), r.stderr)

        recs = self.records()
        by = lambda k, v: [r for r in recs if r[k] == v]
        # Host repeats refused before they were sent, and guard retries refused with the
        # 503 in hand.
        self.assertTrue(by("outcome", "retry_budget_exhausted"), recs)
        for r in by("outcome", "retry_budget_exhausted"):
            self.assertRecordKeys(r)
            self.assertEqual((r["decision"], r["reason"], r["curl_code"], r["final"]),
                             ("give_up", "retry_budget_exhausted", 28, True))
            self.assertIsNotNone(r["repeat_of"])
        gave_up = [r for r in by("reason", "retry_budget_exhausted") if r["outcome"] == "http_503"]
        self.assertTrue(gave_up, "no guard retry was refused with the answer in hand")
        for r in gave_up:
            self.assertEqual((r["decision"], r["status"], r["final"]), ("give_up", 503, True))
        self.assertEqual(len([r for r in recs if r["outcome"] == "http_503"]), upstream)

        b = self.stat_budget()
        self.assertLessEqual(b["retries"], allowed, b)
        self.assertEqual(b["first_attempts"], self.N, b)
        self.assertGreater(b["refused"], 0, b)
        self.assertEqual(b["concurrent"], 0, b)

        # Control: the same storm without the budget.
        control_state = self.tmp / "state-control"
        plain, _, took_plain = self.storm(self.benv(CURLGUARD_RETRY_BUDGET="off",
                                                    CURLGUARD_STATE=str(control_state),
                                                    CURLGUARD_LOG="off"))
        self.assertEqual(plain, self.N * 4 * 3, "curl --retry 3 x 3 guard attempts")
        print(f"\n[budget] 503 storm, {self.N} calls with curl --retry 3 on top of 3 guard "
              f"attempts: {upstream} upstream requests with the budget "
              f"({upstream / self.N:.2f} per call, {took:.1f} s), {plain} without "
              f"({plain / self.N:.2f} per call, {took_plain:.1f} s)", flush=True)


class GuardRetryTest(BudgetTestCase):
    def test_refused_retry_keeps_the_answer(self):
        # The budget waits for room while the deadline allows (issue 12): with no floor and
        # no other calls there is none, so the call ends at its deadline with the answer.
        env = self.benv(CURLGUARD_RETRY_BUDGET_RATIO="0", CURLGUARD_RETRY_BUDGET_MIN_PER_S="0",
                        CURLGUARD_DEADLINE_MS="2500")
        url = self.mock.url("/v1/chat/completions", plan="503,200")
        p = self.curl(url, env)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, b"503", b""))
        self.exact_entries(url, 1)
        [r] = self.records()
        self.assertEqual((r["outcome"], r["decision"], r["reason"], r["final"]),
                         ("http_503", "give_up", "retry_budget_exhausted", True))

    def test_retries_within_the_floor_go(self):
        # Retries that fail stay counted (a retry that succeeds is given back: below).
        env = self.benv(CURLGUARD_RETRY_BUDGET_RATIO="0", CURLGUARD_RETRY_BUDGET_MIN_PER_S="0.2",
                        CURLGUARD_RETRY_BUDGET_WINDOW_S="10",      # 2 retries per 10 s
                        CURLGUARD_MAX_ATTEMPTS="2",
                        CURLGUARD_DEADLINE_MS="3000")   # the third cannot wait ~10 s for room
        urls = [self.mock.url("/v1/chat/completions", plan="503") for _ in range(3)]
        got = [self.curl(u, env).stdout for u in urls]
        self.assertEqual(got, [b"503", b"503", b"503"])
        self.exact_entries(urls[0], 2)
        self.exact_entries(urls[1], 2)
        self.exact_entries(urls[2], 1)
        b = self.stat_budget()
        self.assertEqual((b["retries"], b["first_attempts"], b["allowed"], b["retries_left"],
                          b["rescued"]), (2, 3, 2, 0, 0), b)
        finals = [r for r in self.records() if r["final"]]
        self.assertEqual([r["reason"] for r in finals][-1], "retry_budget_exhausted")

    def test_retries_that_succeed_are_given_back(self):
        # The same budget, 2 retries per 10 s: retries that fix their call do not use it
        # up (issue 12: a flaky provider whose retries all succeed keeps every call).
        env = self.benv(CURLGUARD_RETRY_BUDGET_RATIO="0", CURLGUARD_RETRY_BUDGET_MIN_PER_S="0.2",
                        CURLGUARD_RETRY_BUDGET_WINDOW_S="10", CURLGUARD_DEADLINE_MS="3000")
        urls = [self.mock.url("/v1/chat/completions", plan="503,200") for _ in range(5)]
        got = [self.curl(u, env).stdout for u in urls]
        self.assertEqual(got, [b"200"] * 5)
        for u in urls:
            self.exact_entries(u, 2)
        b = self.stat_budget()
        self.assertEqual((b["retries"], b["first_attempts"], b["rescued"], b["refused"]),
                         (0, 5, 5, 0), b)
        # A failing retry after them still finds the floor whole: counted, not refused.
        url = self.mock.url("/v1/chat/completions", plan="503")
        self.assertEqual(self.curl(url, self.benv(
            CURLGUARD_RETRY_BUDGET_RATIO="0", CURLGUARD_RETRY_BUDGET_MIN_PER_S="0.2",
            CURLGUARD_RETRY_BUDGET_WINDOW_S="10", CURLGUARD_DEADLINE_MS="3000",
            CURLGUARD_MAX_ATTEMPTS="3")).stdout, b"503")
        self.exact_entries(url, 3)
        b = self.stat_budget()
        self.assertEqual((b["retries"], b["rescued"], b["refused"]), (2, 5, 0), b)

    def test_concurrent_retries_are_capped(self):
        # Each retry holds its slot through a 1.5 s backoff: of 4 processes retrying at
        # once, one may.
        env = self.benv(CURLGUARD_RETRY_BUDGET_MAX_CONCURRENT="1",
                        CURLGUARD_RETRY_BUDGET_MIN_PER_S="100", CURLGUARD_JITTER="none",
                        CURLGUARD_BACKOFF_BASE_MS="1500", CURLGUARD_BACKOFF_CAP_MS="1500",
                        CURLGUARD_DEADLINE_MS="1700")   # no time to wait for the slot
        urls = [self.mock.url("/v1/chat/completions", plan="503,200") for _ in range(4)]
        results = self.parallel(4, lambda i: urls[i], env)
        self.assertEqual(sorted(r.stdout for r in results), [b"200", b"503", b"503", b"503"],
                         [(r.stdout, r.stderr) for r in results])
        self.assertEqual(sum(len(self.mock.entries(url=u)) for u in urls), 5)
        reasons = sorted(r["reason"] for r in self.records() if r["final"])
        self.assertEqual(reasons, ["ok"] + ["retry_budget_exhausted"] * 3)
        self.assertEqual(self.stat_budget()["concurrent"], 0)

    def test_off_switch(self):
        env = self.benv(CURLGUARD_RETRY_BUDGET="off", CURLGUARD_RETRY_BUDGET_RATIO="0",
                        CURLGUARD_RETRY_BUDGET_MIN_PER_S="0")
        url = self.mock.url("/v1/chat/completions", plan="503,503,200")
        self.assertEqual(self.curl(url, env).stdout, b"200")
        self.exact_entries(url, 3)

    def test_pool_budget_from_config_file(self):
        cfg = self.tmp / "guard.json"
        cfg.write_text(json.dumps({"pools": [{
            "name": "mockpool", "hosts": ["127.0.0.1"],
            "retry_budget": {"ratio": 0, "min_per_s": 0.1, "window_s": 10,
                             "max_concurrent_retries": 4}}]}))
        env = self.benv(CURLGUARD_CONFIG=str(cfg), CURLGUARD_DEADLINE_MS="2500",
                        CURLGUARD_MAX_ATTEMPTS="2")
        urls = [self.mock.url("/v1/x", plan="503") for _ in range(2)]
        self.assertEqual([self.curl(u, env).stdout for u in urls], [b"503", b"503"])
        self.exact_entries(urls[0], 2)
        self.exact_entries(urls[1], 1)
        st = json.loads(harness.run([harness.CLI, "stat", "--json", "--config", str(cfg)],
                                    harness.plain_env(CURLGUARD_STATE=str(self.state))).stdout)
        b = {x["name"]: x for x in st["pools"]}["mockpool"]["retry_budget"]
        self.assertEqual((b["ratio"], b["min_per_s"], b["window_s"], b["max_concurrent"],
                          b["retries"], b["refused"]), (0, 0.1, 10, 4, 1, 1), b)


if __name__ == "__main__":
    unittest.main()


class LocalFailuresAreNotRepeatsTest(BudgetTestCase):
    """A call that never reached the network (circuit_open, retry_budget_exhausted) neither
    starts nor refreshes a host-retry chain (review 6, item 5): otherwise identical calls
    0.6 s apart refresh the chain forever, each refused as an over-budget repeat."""

    def test_identical_calls_go_out_after_recovery(self):
        if harness.run([harness.PYTHON, "-c", "import pycurl"], None).returncode != 0:
            raise unittest.SkipTest("python3-pycurl is not installed")
        script = r'''
import sys, time, pycurl
c = pycurl.Curl()
c.setopt(pycurl.WRITEFUNCTION, lambda b: None)
def one(url):
    c.setopt(pycurl.URL, url)
    try:
        c.perform()
        return str(c.getinfo(pycurl.RESPONSE_CODE))
    except pycurl.error as e:
        return "E%d" % e.args[0]
# Four different failing calls open the breaker (none is a repeat of another).
print(" ".join(one(sys.argv[1] + "&n=%d" % i) for i in range(4)), flush=True)
out = []
for _ in range(int(sys.argv[3])):
    out.append(one(sys.argv[2]))
    time.sleep(0.6)
print(" ".join(out))
'''
        bad = self.mock.url("/v1/chat/completions", plan="503", key=harness.unique_key("bad"))
        good = self.mock.url("/v1/chat/completions", plan="200")
        env = self.guard_env(extra=dict(
            CURLGUARD_MAX_ATTEMPTS="1", CURLGUARD_BREAKER_MIN_REQUESTS="4",
            CURLGUARD_BREAKER_COOLDOWN_S="2", CURLGUARD_RETRY_BUDGET_MIN_PER_S="0",
            CURLGUARD_REPEAT_WINDOW_MS="1000", CURLGUARD_BREAKER_OPEN="fail",
            CURLGUARD_BREAKER_JITTER="0"))
        p = harness.run([harness.PYTHON, "-c", script, bad, good, "9"], env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        opening, calls = p.stdout.decode().splitlines()
        self.assertEqual(opening, "503 503 503 503")
        calls = calls.split()
        # Open for 2 s (about 3 calls), then the probe and everything after it go out.
        self.assertEqual(calls[0], "E7", calls)
        self.assertEqual(calls[-4:], ["200"] * 4, calls)
        seen = len(self.mock.entries(url=good))
        self.assertGreaterEqual(seen, 4, calls)
        recs = [r for r in self.records() if r["path"] == "/v1/chat/completions"][4:]
        self.assertEqual({r["outcome"] for r in recs}, {"circuit_open", "ok"}, recs)
        self.assertNotIn("retry_budget_exhausted", [r["reason"] for r in recs])


class EnvironmentWinsTest(BudgetTestCase):
    def test_environment_off_wins_over_a_pools_config_file(self):
        """CURLGUARD_RETRY_BUDGET=off switches off a pool's budget the config file enables
        (SPEC 3: env wins over the config file; review 6, item 8)."""
        cfg = self.tmp / "guard.json"
        cfg.write_text(json.dumps({"pools": [{
            "name": "mockpool", "hosts": ["127.0.0.1"],
            "retry_budget": {"enabled": True, "ratio": 0, "min_per_s": 0}}]}))
        url = self.mock.url("/v1/x", plan="503")
        p = self.curl(url, self.benv(CURLGUARD_CONFIG=str(cfg), CURLGUARD_DEADLINE_MS="2500"))
        self.assertEqual(p.stdout, b"503", p.stderr)
        self.exact_entries(url, 1)           # the file's budget allows no retry in time
        url2 = self.mock.url("/v1/y", plan="503")
        p = self.curl(url2, self.benv(CURLGUARD_CONFIG=str(cfg), CURLGUARD_RETRY_BUDGET="off"))
        self.assertEqual(p.stdout, b"503", p.stderr)
        self.exact_entries(url2, 3)          # off: all three attempts
