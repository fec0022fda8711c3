"""Server hints and backoff (README "Backoff and hints"; CASES.md "Retry-After and friends").

The ground truth is the mock provider's ledger: t is when each request arrived, so the gap
between the arrivals of attempt 1 and attempt 2 is the wait the guard really made. Lower
bounds are tight (a hint is a floor), upper bounds generous (shared, noisy machines).

Calls that each wait seconds run in parallel (one curl process each, own usage log).
"""

import concurrent.futures
import time
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

PATH = "/v1/hints"
BODY = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
# Ordinary backoff is short, so any wait of a second or more comes from a hint.
FAST = {"CURLGUARD_BACKOFF_BASE_MS": "50", "CURLGUARD_BACKOFF_CAP_MS": "200"}
ORDINARY_MAX_S = 0.5           # an ordinary retry (base 50 ms, cap 200 ms) comes before this


class HintCase(harness.GuardTestCase):

    def call(self, plan, name="main", args=("--data-binary", BODY), **env):
        """One guarded curl call (POST by default) -> dict(p, url, log, elapsed)."""
        url = self.mock.url(PATH, plan=plan)
        log = self.tmp / f"{name}.jsonl"
        argv = [harness.CURL, "-sS", "--noproxy", "*", *args, url]
        # Each call its own shared-state file: a 429 holds the whole pool of a state file
        # (every process using it), and the calls of one test run side by side.
        env.setdefault("CURLGUARD_STATE", str(self.tmp / f"{name}.state"))
        started = time.monotonic()
        p = harness.run(argv, self.guard_env(log_path=log, extra=FAST, **env), timeout=60)
        return {"p": p, "url": url, "log": log, "elapsed": time.monotonic() - started,
                "name": name}

    def parallel(self, calls):
        """calls: {name: (plan, env dict)} -> {name: result of call()}, run at the same time."""
        with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
            futures = {name: pool.submit(self.call, plan, name, **env)
                       for name, (plan, env) in calls.items()}
            return {name: f.result() for name, f in futures.items()}

    def arrivals(self, res, count):
        """The arrival times of the call's requests; exactly count of them."""
        url = res["url"]
        try:   # the host has exited: a request not there by now never came
            self.mock.wait_entries(url=url, count=count, timeout=3)
        except AssertionError:
            pass                      # reported below, with the entries
        time.sleep(0.05)
        got = self.mock.entries(url=url)
        self.assertEqual(len(got), count,
                         f"{res['name']}: server saw {len(got)} requests, expected {count}: "
                         f"{[(e['n'], e['action'], e['status']) for e in got]}")
        return [e["t"] for e in got]

    def retried_after(self, res, status=429):
        """The call was retried once and succeeded -> (gap between arrivals s, records)."""
        p = res["p"]
        self.assertEqual(p.returncode, 0, f"{res['name']}: {p.stderr!r}")
        t = self.arrivals(res, 2)
        recs = harness.read_records(res["log"])
        desc = [(r["attempt"], r["outcome"], r["decision"], r["reason"], r["backoff_ms"])
                for r in recs]
        self.assertEqual([(r["outcome"], r["decision"]) for r in recs],
                         [(f"http_{status}", "retry"), ("ok", "done")], f"{res['name']}: {desc}")
        return t[1] - t[0], recs

    def assert_hint_floor(self, res, hint_s, upper_s, status=429, gap_slack_s=0.0):
        """Retried no sooner than hint_s after the first request arrived (less gap_slack_s:
        HTTP-dates are whole seconds) and the record's backoff_ms is the hint plus at most
        the promised jitter."""
        gap, recs = self.retried_after(res, status)
        name = res["name"]
        self.assertGreaterEqual(gap, hint_s - gap_slack_s, f"{name}: retried {gap:.3f} s after the "
                                             f"first request, hint was {hint_s} s")
        self.assertLess(gap, upper_s, f"{name}: waited {gap:.3f} s for a {hint_s} s hint")
        backoff = recs[0]["backoff_ms"]
        self.assertGreaterEqual(backoff, hint_s * 1000, f"{name}: backoff_ms {backoff}")
        # floor plus a small positive jitter: up to 10 %, at most 1 s (+ rounding)
        self.assertLessEqual(backoff, hint_s * 1000 + min(hint_s * 100, 1000) + 2,
                             f"{name}: backoff_ms {backoff} for a {hint_s} s hint")
        return gap, recs

    def assert_ordinary(self, res, status=429):
        """The hint was ignored: retried after ordinary (short) backoff."""
        gap, recs = self.retried_after(res, status)
        self.assertLess(gap, ORDINARY_MAX_S,
                        f"{res['name']}: waited {gap:.3f} s; an invalid hint must be ignored")
        self.assertLessEqual(recs[0]["backoff_ms"], 200, f"{res['name']}: {recs[0]}")
        return gap, recs


class NumericHintTest(HintCase):

    def test_numeric_hints(self):
        res = self.parallel({
            # Retry-After: 1.5 -> 1.5 s, not 1 and not a year
            "ra_1.5": ("429:ra=1.5,200", {}),
            # retry-after-ms wins when it parses
            "ram_250_over_ra_1": ("429:ra=1:ram=250,200", {}),
            # ... and when it does not, Retry-After is used
            "ram_abc_ra_1": ("429:ram=abc:ra=1,200", {}),
            # a 503 works the same
            "503_ra_1": ("503:ra=1,200", {}),
        })
        gap, recs = self.assert_hint_floor(res["ra_1.5"], 1.5, 3.5)
        self.assertEqual(recs[0]["status"], 429)
        self.assert_hint_floor(res["ram_250_over_ra_1"], 0.25, 1.0)
        self.assert_hint_floor(res["ram_abc_ra_1"], 1.0, 3.0)
        self.assert_hint_floor(res["503_ra_1"], 1.0, 3.0, status=503)
        for r in res.values():
            print(f"\n[test_hints] {r['name']}: host call took {r['elapsed']:.3f} s", end="")

    def test_invalid_hints_ignored(self):
        res = self.parallel({
            "ra_-3": ("429:ra=-3,200", {}),
            "ram_-1": ("429:ram=-1,200", {}),
            "ra_abc": ("429:ra=abc,200", {}),
            "ram_-1_ra_-3": ("429:ram=-1:ra=-3,200", {}),
        })
        for name, r in res.items():
            with self.subTest(name):
                self.assert_ordinary(r)

    def test_invalid_ms_falls_back_to_valid_seconds(self):
        """retry-after-ms: -1 is invalid, so Retry-After: 1 is the hint."""
        self.assert_hint_floor(self.call("429:ram=-1:ra=1,200"), 1.0, 3.0)

    def test_ratelimit_reset_is_not_a_wait(self):
        """x-ratelimit-reset-requests: 6m0s says when the window refills, not how long to wait:
        no six-minute sleep and no giving up."""
        self.assert_ordinary(self.call("429:h.x-ratelimit-reset-requests=6m0s:"
                                       "h.x-ratelimit-remaining-requests=0,200"))


class DateHintTest(HintCase):

    @staticmethod
    def date_plan(value, **step):
        return [dict({"action": 429, "headers": {"Retry-After": value}}, **step),
                {"action": 200}]

    def test_http_date_forms(self):
        """IMF-fixdate, RFC 850 and asctime, 2 s after the response's Date header."""
        res = self.parallel({
            "imf": (self.date_plan("{date+2}", date=True), {}),
            "rfc850": (self.date_plan("{rfc850+2}", date=True), {}),
            "asctime": (self.date_plan("{asctime+2}", date=True), {}),
        })
        for name, r in res.items():
            with self.subTest(name):
                # Date and Retry-After are whole seconds, exactly 2 s apart
                self.assert_hint_floor(r, 2.0, 4.5, gap_slack_s=0.05)

    def test_skewed_server_clock(self):
        """Measured against the response's Date, not the local clock: a server an hour ahead
        (3602 s by the local clock: would give up) or an hour behind (already past by the
        local clock: would not wait) still means 2 s."""
        res = self.parallel({
            "ahead": (self.date_plan("{date+2}", date_offset_s=3600), {}),
            "behind": (self.date_plan("{date+2}", date_offset_s=-3600), {}),
        })
        for name, r in res.items():
            with self.subTest(name):
                self.assert_hint_floor(r, 2.0, 4.5, gap_slack_s=0.05)

    def test_past_date_is_no_wait(self):
        res = self.parallel({
            "past_with_date": (self.date_plan("{date-30}", date=True), {}),
            "past_no_date": (self.date_plan("{date-30}"), {}),
            "past_rfc850": (self.date_plan("{rfc850-3600}", date=True), {}),
        })
        for name, r in res.items():
            with self.subTest(name):
                gap, recs = self.assert_ordinary(r)
                self.assertGreaterEqual(recs[0]["backoff_ms"], 0)

    def test_future_date_without_date_header(self):
        """No Date header: the local clock is the reference (between 1 and 2 s from now)."""
        gap, recs = self.retried_after(self.call(self.date_plan("{date+2}")))
        self.assertGreaterEqual(gap, 0.95)
        self.assertLess(gap, 4.0)


class TooLongHintTest(HintCase):

    def assert_gave_up(self, res, status=429):
        p = res["p"]
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(b'"error"', p.stdout, "the host did not get the 429 answer")
        self.assertLess(res["elapsed"], 1.5, "waited instead of giving up at once")
        self.arrivals(res, 1)
        recs = harness.read_records(res["log"])
        self.assertEqual([(r["outcome"], r["decision"], r["reason"], r["final"])
                          for r in recs],
                         [(f"http_{status}", "give_up", "retry_after_too_long", True)],
                         recs)

    def test_above_max_retry_after(self):
        res = self.parallel({
            "ra_5_max_2000": ("429:ra=5,200", {"CURLGUARD_MAX_RETRY_AFTER_MS": "2000"}),
            "ram_3000_max_2000": ("429:ram=3000,200", {"CURLGUARD_MAX_RETRY_AFTER_MS": "2000"}),
            "ra_120_default_max": ("429:ra=120,200", {}),
            "date_ra_120": (DateHintTest.date_plan("{date+120}", date=True), {}),
        })
        for name, r in res.items():
            with self.subTest(name):
                self.assert_gave_up(r)

    def test_below_max_retry_after_is_honoured(self):
        self.assert_hint_floor(self.call("429:ra=1,200", CURLGUARD_MAX_RETRY_AFTER_MS="2000"),
                               1.0, 3.0)


class OrdinaryBackoffTest(HintCase):
    """Without hints: min(cap, base * 2^(k-1)) and the jitter modes."""

    def test_no_jitter_doubles_up_to_cap(self):
        res = self.call("503,503,503,200", CURLGUARD_BACKOFF_BASE_MS="100",
                        CURLGUARD_BACKOFF_CAP_MS="300", CURLGUARD_JITTER="none",
                        CURLGUARD_MAX_ATTEMPTS="4")
        self.assertEqual(res["p"].returncode, 0)
        t = self.arrivals(res, 4)
        gaps = [b - a for a, b in zip(t, t[1:])]
        recs = harness.read_records(res["log"])
        self.assertEqual([r["backoff_ms"] for r in recs], [100, 200, 300, 0], recs)
        for gap, want in zip(gaps, (0.1, 0.2, 0.3)):
            self.assertGreaterEqual(gap, want - 0.002, gaps)
            self.assertLess(gap, want + 1.0, gaps)

    def test_equal_jitter_range(self):
        # 4 attempts: neither wait is the one before the last attempt, which is raised
        # to the schedule without jitter (test_breaker_hold.OutlastCurlRetryTest)
        res = self.call("503,503,200", CURLGUARD_BACKOFF_BASE_MS="100",
                        CURLGUARD_BACKOFF_CAP_MS="1000", CURLGUARD_JITTER="equal",
                        CURLGUARD_MAX_ATTEMPTS="4")
        t = self.arrivals(res, 3)
        recs = harness.read_records(res["log"])
        b = [r["backoff_ms"] for r in recs]
        self.assertTrue(50 <= b[0] <= 100 and 100 <= b[1] <= 200, b)
        self.assertGreaterEqual(t[1] - t[0], 0.05 - 0.002)
        self.assertGreaterEqual(t[2] - t[1], 0.1 - 0.002)

    def test_full_jitter_range(self):
        # 4 attempts: neither wait is the one before the last attempt, which is raised
        # to the schedule without jitter (test_breaker_hold.OutlastCurlRetryTest)
        res = self.call("503,503,200", CURLGUARD_BACKOFF_BASE_MS="100",
                        CURLGUARD_BACKOFF_CAP_MS="1000", CURLGUARD_JITTER="full",
                        CURLGUARD_MAX_ATTEMPTS="4")
        self.arrivals(res, 3)
        b = [r["backoff_ms"] for r in harness.read_records(res["log"])]
        self.assertTrue(0 <= b[0] <= 100 and 0 <= b[1] <= 200, b)


if __name__ == "__main__":
    unittest.main()
