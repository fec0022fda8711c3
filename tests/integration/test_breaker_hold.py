"""Issue 12: the breaker holds calls for the probe's result instead of failing them
(CURLGUARD_BREAKER_OPEN=wait, the default), opens on consecutive failed calls, probes soon
and releases the held calls with a slow start; a failure that the call's retry fixes is not
an outage (README "Circuit breaker and retry budget", src/breaker.h).

Many real curl processes share one state file against the mock provider. An outage is a
stored plan (every request 503) that the test swaps for a healthy one (200) when the outage
ends: "the last step repeats", so the swap takes effect at once for every later request.
Timing: generous upper bounds, tight lower bounds."""

import concurrent.futures
import json
import os
import signal
import subprocess
import time
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

class HoldTestCase(harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not harness.CURL:
            raise unittest.SkipTest("curl is not installed")

    def setUp(self):
        super().setUp()
        self.plan = harness.unique_key("outage")
        self.mock.set_plan(self.plan, ["503"])
        self.url = self.mock.url("/v1/chat/completions", plan="@" + self.plan)

    def henv(self, **extra):
        """The library's breaker defaults (wait, 5 consecutive failures), except a 1 s first
        probe without jitter and a 1 s slow start, so that tests are short and exact."""
        env = dict(CURLGUARD_BREAKER_COOLDOWN_S="1", CURLGUARD_BREAKER_JITTER="0",
                   CURLGUARD_BREAKER_RAMP_S="1", CURLGUARD_BACKOFF_BASE_MS="50",
                   CURLGUARD_BACKOFF_CAP_MS="100")
        env.update(extra)
        return self.guard_env(extra=env)

    def curl(self, url, env, extra=(), timeout=60):
        return harness.run([harness.CURL, "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                            *extra, url], env, timeout=timeout)

    def popen(self, url, env, extra=()):
        harness.skip_unsanitizable([harness.CURL], env)
        return subprocess.Popen([harness.CURL, "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                                 *extra, url], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)

    def stat_breaker(self):
        p = harness.run([harness.CLI, "stat", "--json"],
                        harness.plain_env(CURLGUARD_STATE=str(self.state)), timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        pools = {x["name"]: x for x in json.loads(p.stdout)["pools"]}
        return pools[harness.mock_pool()]["breaker"]

    def open_it(self, env):
        """Five calls in a row end failed (one attempt each): the breaker opens, whatever
        the window says."""
        one = dict(env, CURLGUARD_MAX_ATTEMPTS="1")
        for _ in range(5):
            p = self.curl(self.url, one)
            self.assertEqual(p.stdout, b"503", p.stderr)
        b = self.stat_breaker()
        self.assertEqual(b["state"], "open", b)
        self.assertEqual(b["opened"], 1, b)
        return time.monotonic()

    def answered_then_open(self, env, before, after):
        """Two calls answered by plan step `before`, then the breaker opened (open_it),
        then the provider answers `after`: the pool's kept answer time is `before`'s."""
        self.mock.set_plan(self.plan, [before])
        for _ in range(2):
            p = self.curl(self.url, env, extra=("-d", "{}"))
            self.assertEqual((p.returncode, p.stdout), (0, b"200"), p.stderr)
        self.mock.set_plan(self.plan, ["503"])
        self.open_it(env)
        self.mock.set_plan(self.plan, [after])

    def heal(self):
        self.mock.set_plan(self.plan, ["200"])

    def wait_held(self, n, timeout=10):
        """Until `n` calls have been held (stat's counter)."""
        deadline = time.monotonic() + timeout
        while self.stat_breaker()["held"] < n:
            self.assertLess(time.monotonic(), deadline, "the calls were never held")
            time.sleep(0.05)


class HoldTest(HoldTestCase):
    def test_held_calls_all_complete_once_the_outage_ends(self):
        env = self.henv()
        self.open_it(env)
        before = len(self.mock.entries(url=self.url))
        procs = [self.popen(self.url, env) for _ in range(12)]
        self.wait_held(11)
        time.sleep(1.5)                  # the first probe (after 1 s) fails: 503
        during = len(self.mock.entries(url=self.url)) - before
        healed = time.monotonic()
        self.heal()
        outs = [p.communicate(timeout=60) for p in procs]
        took = time.monotonic() - healed
        codes = [(p.returncode, o) for p, (o, _) in zip(procs, outs)]
        self.assertEqual(codes, [(0, b"200")] * 12, [e for _, e in outs])
        print(f"\n[breaker] 12 held calls: {during} requests during the outage, all done "
              f"{took:.1f} s after it ended", flush=True)
        self.assertLessEqual(during, 2, "one probe at a time, every ~1-2 s")
        # The failed probe doubled the interval (2 s); then the slow start (1 s).
        self.assertLess(took, 8.0)
        recs = [r for r in self.records() if r["final"] and r["status"] == 200]
        self.assertEqual(len(recs), 12)
        for r in recs:
            self.assertGreater(r["breaker_wait_ms"], 0, r)
            self.assertGreaterEqual(r["queue_ms"], r["breaker_wait_ms"], r)
            self.assertEqual(r["reason"], "breaker_wait", r)
        b = self.stat_breaker()
        self.assertEqual(b["state"], "closed", b)
        self.assertGreaterEqual(b["held"], 12, b)

    def held_at_the_last_attempt(self, launch, n=4):
        """`n` calls (started by `launch(env)`, which returns the processes) each fail two
        attempts (1.5 s apart, no jitter); then a one-attempt call opens the breaker, so
        that every third attempt is held and each probe is some call's last attempt.  The
        outage lasts three probes; returns (processes, their outputs, requests sent while
        the breaker was open and the provider down)."""
        env = self.henv(CURLGUARD_JITTER="none", CURLGUARD_BACKOFF_BASE_MS="1500",
                        CURLGUARD_BACKOFF_CAP_MS="1500", CURLGUARD_BREAKER_COOLDOWN_S="1",
                        CURLGUARD_BREAKER_COOLDOWN_MAX_S="2",
                        CURLGUARD_RETRY_BUDGET_MIN_PER_S="10")
        procs = launch(env)
        self.mock.wait_entries(url=self.url, count=2 * n, timeout=20)  # attempts 1 and 2
        p = self.curl(self.url, dict(env, CURLGUARD_MAX_ATTEMPTS="1"))
        self.assertEqual(p.stdout, b"503", p.stderr)
        self.assertEqual(self.stat_breaker()["state"], "open")
        before = len(self.mock.entries(url=self.url))
        time.sleep(4.5)                  # probes at about 1, 3 and 5 s after opening fail
        during = len(self.mock.entries(url=self.url)) - before
        self.heal()
        outs = [p.communicate(timeout=60) for p in procs]
        pids = {p.pid for p in procs}
        recs = [r for r in self.records() if r["pid"] in pids]
        self.assertFalse([r for r in recs if r["reason"] == "max_attempts"], recs)
        done = [r for r in recs if r["final"] and r["status"] == 200]
        self.assertEqual(len(done), n, recs)
        self.assertTrue(any(r["attempt"] > 3 for r in done), "a probe went, was not counted")
        return procs, outs, during

    def test_a_failed_probe_does_not_use_up_the_held_call_s_attempts(self):
        """The probe is the breaker's attempt, not the call's: a held call sent as the
        probe, and failing, is held again for the next one (max_attempts does not count
        it).  Counted, each failed probe ended one held call with its deadline left: 2 of
        4 were lost here, and 6 or 7 of 8 in a 20 s outage, where curl --retry 5 loses
        none."""
        n = 4
        procs, outs, during = self.held_at_the_last_attempt(
            lambda env: [self.popen(self.url, env, extra=("-d", "{}")) for _ in range(n)], n)
        self.assertEqual([o for o, _ in outs], [b"200"] * n, [e for _, e in outs])
        self.assertLessEqual(during, 3, "one probe at a time, every 1-2 s")

    def test_a_failed_probe_does_not_use_up_the_attempts_in_the_multi_driver(self):
        n = 4

        def launch(env):
            argv = [harness.CURL, "-Z", "-sS", "-w", "%{http_code}\n", "-d", "{}"]
            for _ in range(n):
                argv += ["-o", "/dev/null", self.url]
            harness.skip_unsanitizable([harness.CURL], env)
            return [subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)]

        procs, outs, during = self.held_at_the_last_attempt(launch, n)
        self.assertEqual(outs[0][0].split(), [b"200"] * n, outs[0][1])
        self.assertEqual(procs[0].returncode, 0, outs[0][1])
        self.assertLessEqual(during, 3, "one probe at a time, every 1-2 s")

    def test_a_deadline_that_cannot_see_the_probe_is_the_probe_at_its_last_chance(self):
        """The next probe is 10 s away, the call's deadline 2 s: held until its last chance
        (the deadline less 300 ms), it is the probe then (none is out), and the breaker
        stays open until the probe it had planned: a failed early probe neither doubles
        the interval nor moves it.  Before, it failed fast (code 7, nothing sent), where
        `curl --retry` would have sent its retries."""
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_S="10")
        self.open_it(env)
        before = self.stat_breaker()
        sent = len(self.mock.entries(url=self.url))
        t0 = time.monotonic()
        p = self.curl(self.url, env, extra=("--max-time", "2"))
        took = time.monotonic() - t0
        self.assertEqual((p.returncode, p.stdout), (0, b"503"), p.stderr)
        self.assertGreater(took, 1.5, "held until its last chance")
        self.assertLess(took, 2.5)
        sent = len(self.mock.entries(url=self.url)) - sent
        self.assertEqual(sent, 1, "one early probe a call: failed, the provider is down")
        b = self.stat_breaker()
        self.assertEqual((b["state"], b["opened"]), ("open", 1), b)
        self.assertEqual(b["probes"] - before["probes"], sent, b)   # each one the probe
        # the cooldown it found: 10 s from the opening, not re-opened at twice that
        self.assertLess(b["next_probe_s"], before["next_probe_s"] - 1.5, (before, b))
        recs = [r for r in self.records() if r["request_id"] == self.records()[-1]["request_id"]]
        self.assertEqual(recs[-1]["decision"], "give_up", recs)
        self.assertGreater(recs[0]["breaker_wait_ms"], 1400, recs)

    def test_a_failed_early_probe_s_retry_after_is_a_floor(self):
        """As above, but the early probe's 503 says Retry-After: 30: the next probe comes no
        sooner than that, as after a regular probe's failure, not at the end of the
        cooldown the early probe found (10 s from the opening).  Before (a helper's find),
        the hint was dropped: the next probe came about 8 s after the answer."""
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_S="10")
        self.open_it(env)
        self.mock.set_plan(self.plan, ["503:ra=30"])
        sent = len(self.mock.entries(url=self.url))
        p = self.curl(self.url, env, extra=("--max-time", "2"))
        self.assertEqual((p.returncode, p.stdout), (0, b"503"), p.stderr)
        self.assertEqual(len(self.mock.entries(url=self.url)) - sent, 1, "the early probe")
        b = self.stat_breaker()
        self.assertEqual((b["state"], b["opened"]), ("open", 1), b)
        self.assertGreater(b["next_probe_s"], 25, b)
        self.assertLessEqual(b["next_probe_s"], 30, b)

    def test_an_early_probe_that_succeeds_closes_the_breaker(self):
        """As above, the outage over while the call is held: its early probe succeeds, the
        breaker closes, and the next call goes at once."""
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_S="10")
        self.open_it(env)
        self.heal()
        t0 = time.monotonic()
        p = self.curl(self.url, env, extra=("--max-time", "2"))
        took = time.monotonic() - t0
        self.assertEqual((p.returncode, p.stdout), (0, b"200"), p.stderr)
        self.assertGreater(took, 1.5)
        self.assertEqual(self.stat_breaker()["state"], "closed")
        t0 = time.monotonic()
        p = self.curl(self.url, env, extra=("--max-time", "2"))
        self.assertEqual((p.returncode, p.stdout), (0, b"200"), p.stderr)
        self.assertLess(time.monotonic() - t0, 1.0)

    def test_a_retry_the_gate_refuses_after_a_hold_keeps_the_answer(self):
        """4 POSTs get slow 503s (1.5 s); meanwhile other processes open the breaker (5 s
        cooldown), so each retry is decided while it is open and its deadline (4 s) cannot
        see the next probe.  Each is held for its last chance; one is the early probe, the
        others find it too late and the gate refuses them: each gets the 503 it had (exit 0),
        not exit 7 and nothing.  Before (a helper's find), 3 of 4 exit 7 in 5 of 5 runs."""
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_S="5", CURLGUARD_BREAKER_COOLDOWN_MAX_S="10",
                        CURLGUARD_BACKOFF_BASE_MS="1000", CURLGUARD_BACKOFF_CAP_MS="2000")
        slow = self.mock.url("/v1/chat/completions", plan="503:delay=1500")
        procs = [self.popen(slow, env, ("-d", "{}", "--max-time", "4")) for _ in range(4)]
        time.sleep(0.3)
        self.open_it(env)
        outs = [p.communicate(timeout=30) for p in procs]
        self.assertEqual([(p.returncode, o) for p, (o, _) in zip(procs, outs)],
                         [(0, b"503")] * 4, outs)

    def test_an_early_probe_leaves_what_the_pool_s_answers_take(self):
        """The pool's successful answers took 0.8 s; then the breaker opens (20 s cooldown)
        and the provider comes back, still answering in 0.8 s.  A call with --max-time 3 is
        the probe early with about 1.1 s left, time enough for its answer.  Left the bare
        minimum (0.3 s, or a fifth of the deadline), it would be a request sent to be
        abandoned: exit 28, and possibly billed."""
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_S="20", CURLGUARD_BREAKER_COOLDOWN_MAX_S="20")
        self.answered_then_open(env, "200:delay=800", "200:delay=800")
        t0 = time.monotonic()
        p = self.curl(self.url, env, extra=("-d", "{}", "--max-time", "3"))
        took = time.monotonic() - t0
        self.assertEqual((p.returncode, p.stdout), (0, b"200"), p.stderr)
        self.assertGreater(took, 2.5)                    # it went at about 1.9 s
        self.assertEqual(self.stat_breaker()["state"], "closed")

    def not_sent_as_a_probe_it_cannot_finish(self, extra=()):
        """The pool's answers take 0.8 s; the breaker opens (2 s cooldown) and the provider
        comes back.  A call with --max-time 2.5 could be held for the probe at 2 s, but
        that probe's answer would not fit in the 0.5 s left: it is the probe early instead,
        at its last chance (about 1.4 s), and gets its 200.  Before (a helper's find), it
        was held for the regular probe and sent with 0.5 s left: exit 28, a POST the
        provider billed and never finished; plain curl --retry gets its 200 at 0.8 s."""
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_S="2", CURLGUARD_BREAKER_COOLDOWN_MAX_S="2")
        self.answered_then_open(env, "200:delay=800", "200:delay=800")
        sent = len(self.mock.entries(url=self.url))
        t0 = time.monotonic()
        p = self.curl(self.url, env, extra=(*extra, "-d", "{}", "--max-time", "2.5"))
        took = time.monotonic() - t0
        self.assertEqual((p.returncode, p.stdout), (0, b"200"), p.stderr)
        self.assertEqual(len(self.mock.entries(url=self.url)) - sent, 1)
        self.assertGreater(took, 2.0)  # held until about 1.4 s, then 0.8 s
        self.assertEqual(self.stat_breaker()["state"], "closed")

    def test_a_held_call_is_not_sent_as_a_probe_it_cannot_finish(self):
        self.not_sent_as_a_probe_it_cannot_finish()

    def test_a_held_call_is_not_sent_as_a_probe_it_cannot_finish_multi(self):
        self.not_sent_as_a_probe_it_cannot_finish(("-Z",))

    def test_with_no_early_probe_left_a_call_is_still_held_for_the_next_probe(self):
        """No success seen in the pool (a fresh state file), so an attempt is taken to need a
        fifth of the deadline; four POSTs with --max-time 10 are held from the start of an
        outage, probes at 1, 3, 5 and 7 s fail, one call's early probe at 8 s fails too.
        The other three cannot have an early probe then (one at a time, one a second), but
        the regular probe at 9 s is still inside their deadline: they are held for it, and
        the outage ends at 8.5 s.  Before (a second helper's find, in the change that made
        a hold ask for the probe's answer to fit), they failed at 8 s with 2 s left."""
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_MAX_S="2")
        self.open_it(env)
        procs = [self.popen(self.url, env, extra=("-d", "{}", "--max-time", "10"))
                 for _ in range(4)]
        time.sleep(8.5)
        self.heal()
        outs = [p.communicate(timeout=30) for p in procs]
        self.assertEqual([(p.returncode, o) for p, (o, _) in zip(procs, outs)],
                         [(0, b"200")] * 4, outs)

    def test_a_slow_probe_does_not_fail_the_pool_s_fast_calls(self):
        """One pool, two endpoints: the probe is a completion whose answer takes 3 s, and
        four embeddings calls (answered at once, --max-time 4) come while it is out.  The
        probe's success lets them go with about 1 s left, plenty for their answers.  A
        rule that let a held call go only with half of the pool's answer time left (3.8 s)
        failed all four unsent (a second helper's find; plain curl 4 of 4)."""
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_S="2", CURLGUARD_BREAKER_COOLDOWN_MAX_S="2")
        fast = harness.unique_key("fast")
        self.mock.set_plan(fast, ["503"])
        furl = self.mock.url("/v1/embeddings", plan="@" + fast)
        one = dict(env, CURLGUARD_MAX_ATTEMPTS="1")
        for _ in range(5):
            p = self.curl(furl, one, extra=("-d", "{}"))
            self.assertEqual(p.stdout, b"503", p.stderr)
        t_open = time.monotonic()
        slow = self.popen(self.url, env, extra=("-d", "{}", "--max-time", "30"))
        time.sleep(1.0)
        self.mock.set_plan(self.plan, ["200:delay=3000"])
        self.mock.set_plan(fast, ["200"])
        while time.monotonic() < t_open + 2.2:   # the probe (the slow call) is out
            time.sleep(0.02)
        procs = [self.popen(furl, env, extra=("-d", "{}", "--max-time", "4")) for _ in range(4)]
        outs = [p.communicate(timeout=30) for p in procs]
        self.assertEqual([(p.returncode, o) for p, (o, _) in zip(procs, outs)],
                         [(0, b"200")] * 4, outs)
        o, e = slow.communicate(timeout=30)
        self.assertEqual((slow.returncode, o), (0, b"200"), e)

    def test_a_multi_host_s_abort_is_seen_while_held(self):
        """pycurl CurlMulti, the breaker open (20 s cooldown), TIMEOUT_MS 4000: the handles
        are held for their last chance; one's progress callback aborts after 0.5 s: that
        call ends aborted (42) within about a second, not at its deadline, and sends
        nothing; the others are held on.  Before, the multi driver never ran a host's
        progress callback while it held a call (the blocking driver does, about once a
        second): the abort was seen only at the deadline (a helper's find)."""
        harness.require_pycurl()
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_S="20", CURLGUARD_MAX_ATTEMPTS="1")
        self.open_it(env)
        script = r'''
import io, json, sys, time, pycurl
t0 = time.monotonic()
m = pycurl.CurlMulti(); hs = []
for i in range(3):
    c = pycurl.Curl(); c.setopt(c.URL, sys.argv[1]); c.setopt(c.WRITEDATA, io.BytesIO())
    c.setopt(c.TIMEOUT_MS, 4000)
    if i == 0:
        c.setopt(c.NOPROGRESS, 0)
        c.setopt(c.XFERINFOFUNCTION, lambda *a: 1 if time.monotonic() - t0 > 0.5 else 0)
    m.add_handle(c); hs.append(c)
res, n = {}, 3
while n:
    while m.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
        pass
    _, ok, err = m.info_read()
    for c in ok:
        res[hs.index(c)] = [0, round(time.monotonic() - t0, 2)]
    for c, e, _ in err:
        res[hs.index(c)] = [e, round(time.monotonic() - t0, 2)]
    n -= len(ok) + len(err)
    if n:
        m.select(0.1)
print(json.dumps([res[i] for i in range(3)]))
'''
        sent = len(self.mock.entries(url=self.url))
        p = harness.run([harness.PYTHON, "-c", script, self.url], env, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        (rc0, t0), (rc1, t1), _ = json.loads(p.stdout)
        self.assertEqual(rc0, 42, p.stdout)               # CURLE_ABORTED_BY_CALLBACK
        self.assertLess(t0, 2.0, "seen while held, not at the deadline")
        self.assertGreater(t1, 2.5, "the others were held on")
        # theirs alone: one early probe, and the other's too if a second had passed
        self.assertIn(len(self.mock.entries(url=self.url)) - sent, (1, 2))
        recs = [r for r in self.records() if r["reason"] == "aborted_by_host"]
        self.assertEqual(len(recs), 1, recs)

    def test_an_early_probe_that_ran_out_of_time_leaves_the_next_more(self):
        """The pool's answers took 20 ms before the outage and take 0.6 s after it: the
        first early probe, left 0.3 s, runs out of time (exit 28); the next call's early
        probe is left at least twice that, and succeeds.  Before (a helper's find), every
        early probe was left 0.3 s until a regular probe succeeded: requests sent to be
        abandoned, one after another."""
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_S="20", CURLGUARD_BREAKER_COOLDOWN_MAX_S="20",
                        CURLGUARD_MAX_ATTEMPTS="1")
        self.answered_then_open(env, "200:delay=20", "200:delay=600")
        first = self.curl(self.url, env, extra=("-d", "{}", "--max-time", "2"))
        self.assertEqual((first.returncode, first.stdout), (28, b"000"), first.stderr)
        p = self.curl(self.url, env, extra=("-d", "{}", "--max-time", "2"))
        self.assertEqual((p.returncode, p.stdout), (0, b"200"), p.stderr)
        self.assertEqual(self.stat_breaker()["state"], "closed")

    def test_one_early_probe_at_a_time(self):
        """Four processes held with deadlines that cannot see the next probe reach their
        last chance together: one at a time is the probe (each answer takes 100 ms); the
        provider never sees two of their requests at once, and the breaker stays open."""
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_S="20", CURLGUARD_MAX_ATTEMPTS="1")
        self.open_it(env)
        self.mock.set_plan(self.plan, ["503:delay=100"])
        sent = len(self.mock.entries(url=self.url))
        procs = [self.popen(self.url, env, ("--max-time", "2")) for _ in range(4)]
        outs = [p.communicate(timeout=30) for p in procs]
        got = sorted(self.mock.entries(url=self.url)[sent:], key=lambda e: e["t"])
        self.assertGreaterEqual(len(got), 1, outs)
        self.assertLessEqual(len(got), 4, outs)
        for x, y in zip(got, got[1:]):
            self.assertIsNotNone(x["t_end"], got)
            self.assertGreaterEqual(y["t"], x["t_end"] - 0.01, got)   # never two at once
        for p, (o, e) in zip(procs, outs):
            self.assertIn((p.returncode, o), ((0, b"503"), (28, b"000")), e)
        self.assertEqual(sum(o == b"503" for o, _ in outs), len(got), outs)
        self.assertEqual(self.stat_breaker()["state"], "open")

    def stalled_probe(self, launch):
        """The pool's answers took 20 ms; then an outage opens the breaker, 8 POSTs with
        --max-time 6 are held, and the outage ends with the probe's request hanging for
        20 s (the first request after it; the others answer in 20 ms).  The probe's lease
        is cut to its pool's answer time (4 x 25 ms + 1 s, at least 2 s: breaker.h
        cg_breaker_probe_max_ms): then a held call takes it over, succeeds, and the breaker
        closes.  Before (a stalled probe held half-open up to 30 s), every call held with
        it waited until its deadline: 0 of 8, where `curl --retry 3` got 8 of 8 (its
        --max-time is per attempt).  Returns (exit code, output) of the 8 calls and the
        requests sent after the outage."""
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_MAX_S="2")
        self.answered_then_open(env, "200:delay=20", "503")
        procs = launch(env)
        self.wait_held(1)
        n = len(self.mock.entries(url=self.url))
        self.mock.set_plan(self.plan, ["503"] * n + ["200:delay=20000", "200:delay=20"])
        outs = [p.communicate(timeout=60) for p in procs]
        return [(p.returncode, o) for p, (o, _) in zip(procs, outs)], \
            len(self.mock.entries(url=self.url)) - n

    def test_a_stalled_probe_is_taken_over(self):
        codes, sent = self.stalled_probe(
            lambda env: [self.popen(self.url, env, ("-d", "{}", "--max-time", "6"))
                         for _ in range(8)])
        self.assertEqual(sorted(codes), [(0, b"200")] * 7 + [(28, b"000")], codes)
        self.assertLessEqual(sent, 9, "one request a call, and the stalled probe's")
        self.assertEqual(self.stat_breaker()["state"], "closed")

    def test_a_stalled_probe_is_taken_over_in_the_multi_driver(self):
        def launch(env):
            # --http1.1: else libcurl itself holds a new transfer until the stalled one's
            # answer says whether its connection can multiplex ("Server doesn't support
            # multiplex yet, wait"), with or without the guard
            argv = [harness.CURL, "-Z", "--http1.1", "-sS", "-w", "%{http_code}\n", "-d", "{}",
                    "--max-time", "6"]
            for _ in range(8):
                argv += ["-o", "/dev/null", self.url]
            harness.skip_unsanitizable([harness.CURL], env)
            return [subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)]
        codes, sent = self.stalled_probe(launch)
        self.assertEqual(sorted(codes[0][1].split()), [b"000"] + [b"200"] * 7, codes)
        self.assertLessEqual(sent, 9, "one request a call, and the stalled probe's")

    def test_a_slow_probe_is_taken_over_once(self):
        """The pool's answers took 50 ms, then the provider comes back slow but healthy
        (8 s answers, a long completion): the probe's 2 s lease runs out and a held call
        takes it over, and the kept answer time is raised to that lease, so the taker holds
        half-open for 11 s.  The first probe's success closes the breaker although it was
        taken over.  Two requests while half-open, and the breaker closes with the first
        answer.  Before (a helper's find), it was taken over every 2 s: 6 requests, up to
        4 at once, and it closed at 18.9 s instead of 9 s."""
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_MAX_S="2")
        self.answered_then_open(env, "200:delay=50", "503")
        procs = [self.popen(self.url, env, ("-d", "{}", "--max-time", "30")) for _ in range(8)]
        self.wait_held(1)
        n = len(self.mock.entries(url=self.url))
        self.mock.set_plan(self.plan, ["503"] * n + ["200:delay=8000"])
        outs = [p.communicate(timeout=60) for p in procs]
        self.assertEqual([(p.returncode, o) for p, (o, _) in zip(procs, outs)],
                         [(0, b"200")] * 8, outs)
        got = sorted(self.mock.entries(url=self.url)[n:], key=lambda e: e["t"])
        first_answer = min(e["t_end"] for e in got)
        self.assertEqual(len([e for e in got if e["t"] < first_answer]), 2, got)
        b = self.stat_breaker()
        self.assertEqual((b["state"], b["probes"], b["opened"]), ("closed", 2, 1), b)

    def test_a_probe_that_reaches_its_own_deadline_is_not_slow(self):
        """The pool's answers took 20 ms; the breaker opens and the provider hangs.  The
        probe (--max-time 1.5) ends at its own deadline, shorter than its lease: the call
        that takes over does not raise the kept answer time, which says nothing of answers
        beyond that deadline (nor do the held calls, --max-time 1.2, that take over after it and
        reach theirs).  So when the provider then answers 503 at once, a call with
        --max-time 2 still gets its early probe (the 503, exit 0), the next regular probe
        being far.  Before (a second helper's find), each takeover raised 20 ms to 2 s and
        more, and such calls failed fast (circuit_open, exit 7): 13 of 16 calls done after
        an outage where the build before had 16."""
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_MAX_S="8")
        self.answered_then_open(env, "200:delay=20", "200:delay=60000")
        probes = self.stat_breaker()["probes"]
        probe = self.popen(self.url, env, ("-d", "{}", "--max-time", "1.5"))
        deadline = time.monotonic() + 5
        while self.stat_breaker()["probes"] == probes:     # it is the probe at about 1 s
            self.assertLess(time.monotonic(), deadline, "no probe went")
            time.sleep(0.02)
        held = [self.popen(self.url, env, ("-d", "{}", "--max-time", "1.2")) for _ in range(3)]
        outs = [p.communicate(timeout=30) for p in [probe] + held]
        self.assertEqual(probe.returncode, 28, outs[0])
        self.mock.set_plan(self.plan, ["503"])
        self.assertEqual(self.stat_breaker()["state"], "open")
        p = self.curl(self.url, env, extra=("-d", "{}", "--max-time", "2"))
        self.assertEqual((p.returncode, p.stdout), (0, b"503"), p.stderr)

    def test_a_held_call_never_outlives_its_max_time(self):
        env = self.henv()
        opened = self.open_it(env)
        time.sleep(max(0, opened + 1.2 - time.monotonic()))
        slow = self.mock.url("/v1/chat/completions", plan="200:delay=20000")
        holder = self.start_slow_curl(slow, env)     # the probe, out for 20 s
        try:
            t0 = time.monotonic()
            p = self.curl(self.url, env, extra=("--max-time", "2"))
            took = time.monotonic() - t0
            # A timeout (open: wait), which curl --retry tries again; 7 ended its loop.
            self.assertEqual(p.returncode, 28, p.stderr)
            self.assertIn(b"probe in flight", p.stderr)
            self.assertGreater(took, 1.0, "a probe was out: it waited for its answer")
            self.assertLess(took, 2.5, f"held {took:.2f} s past --max-time 2")
        finally:
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(10)
        self.exact_entries(self.url, 5)

    def test_one_probe_at_a_time_across_processes(self):
        env = self.henv()
        self.open_it(env)
        self.mock.set_plan(self.plan, ["200:delay=2000"])   # up again, but slow
        before = len(self.mock.entries(url=self.url))
        procs = [self.popen(self.url, env) for _ in range(10)]
        self.wait_held(10)
        time.sleep(1.8)                  # the probe went after 1 s and takes 2 s
        self.assertEqual(len(self.mock.entries(url=self.url)) - before, 1,
                         "exactly one probe while it is out")
        outs = [p.communicate(timeout=60) for p in procs]
        self.assertEqual([o for o, _ in outs], [b"200"] * 10, [e for _, e in outs])
        self.assertEqual(self.stat_breaker()["probes"], 1)

    def test_kill_9_of_the_probe_holder_lets_the_waiters_go_on(self):
        env = self.henv()
        opened = self.open_it(env)
        self.heal()
        time.sleep(max(0, opened + 1.2 - time.monotonic()))
        slow = self.mock.url("/v1/chat/completions", plan="200:delay=30000")
        holder = self.start_slow_curl(slow, env)
        waiters = [self.popen(self.url, env) for _ in range(4)]
        try:
            self.wait_held(4)
        finally:
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(10)
        t0 = time.monotonic()
        outs = [p.communicate(timeout=60) for p in waiters]
        self.assertEqual([o for o, _ in outs], [b"200"] * 4, [e for _, e in outs])
        self.assertLess(time.monotonic() - t0, 6.0, "a dead probe holder is taken over")

    def test_kill_9_of_waiters_leaves_the_others_going(self):
        env = self.henv()
        self.open_it(env)
        procs = [self.popen(self.url, env) for _ in range(6)]
        self.wait_held(6)
        for p in procs[:3]:
            os.killpg(p.pid, signal.SIGKILL)
        for p in procs[:3]:
            p.wait(10)
        self.heal()
        outs = [p.communicate(timeout=60) for p in procs[3:]]
        self.assertEqual([o for o, _ in outs], [b"200"] * 3, [e for _, e in outs])
        self.assertEqual(self.stat_breaker()["state"], "closed")

    def test_a_held_call_runs_the_host_progress_callback_and_may_abort(self):
        """While held, the host's progress callback runs about once a second, as in the
        limiter's waits; its abort ends the call (aborted_by_host) within a second."""
        if not harness.CGHOST.exists():
            self.skipTest("cghost is not built")
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_S="30")
        self.open_it(env)
        t0 = time.monotonic()
        p = harness.run([str(harness.CGHOST), "--progress", "xferinfo",
                         "--abort-progress-after", "3", self.url], env, timeout=30)
        took = time.monotonic() - t0
        self.assertIn(b"rc=42", p.stderr, p.stderr)         # CURLE_ABORTED_BY_CALLBACK
        self.assertGreater(took, 1.5, "held, with the callback called once a second")
        self.assertLess(took, 8.0)
        last = self.records()[-1]
        self.assertEqual((last["outcome"], last["reason"]), ("aborted_by_host",
                                                              "aborted_by_host"), last)
        self.exact_entries(self.url, 5)

    def test_open_fail_keeps_fail_fast(self):
        env = self.henv(CURLGUARD_BREAKER_OPEN="fail", CURLGUARD_BREAKER_COOLDOWN_S="30")
        self.open_it(env)
        t0 = time.monotonic()
        p = self.curl(self.url, env)
        self.assertEqual(p.returncode, 7, p.stderr)
        self.assertLess(time.monotonic() - t0, 1.0)
        self.assertEqual(self.stat_breaker()["held"], 0)

    def test_pool_key_open_fail(self):
        cfg = self.tmp / "cfg.json"
        cfg.write_text(json.dumps({"pools": [{"name": "local", "hosts": ["127.0.0.1"],
                                               "breaker": {"open": "fail",
                                                           "cooldown_s": 30}}]}))
        env = self.henv(CURLGUARD_CONFIG=str(cfg))
        one = dict(env, CURLGUARD_MAX_ATTEMPTS="1")
        for _ in range(5):
            self.curl(self.url, one)
        t0 = time.monotonic()
        p = self.curl(self.url, env)
        self.assertEqual(p.returncode, 7, p.stderr)
        self.assertLess(time.monotonic() - t0, 1.0)

    def test_malformed_variables_warn_once_and_the_call_runs(self):
        self.heal()
        env = self.henv(CURLGUARD_BREAKER_OPEN="sometimes",
                        CURLGUARD_BREAKER_CONSECUTIVE_FAILURES="many",
                        CURLGUARD_BREAKER_COOLDOWN_MAX_S="-3", CURLGUARD_BREAKER_RAMP_S="x")
        p = self.curl(self.url, env)
        self.assertEqual((p.returncode, p.stdout), (0, b"200"), p.stderr)
        lines = [ln for ln in p.stderr.decode().splitlines() if ln.startswith("curlguard:")]
        for var in ("CURLGUARD_BREAKER_OPEN", "CURLGUARD_BREAKER_CONSECUTIVE_FAILURES",
                    "CURLGUARD_BREAKER_COOLDOWN_MAX_S", "CURLGUARD_BREAKER_RAMP_S"):
            self.assertEqual(sum(var + ":" in ln or var + " " in ln for ln in lines), 1,
                             (var, lines))
        b = self.stat_breaker()
        self.assertEqual((b["open"], b["consecutive_max"]), ("wait", 5), b)


class FlakyProviderTest(HoldTestCase):
    def flaky(self, env, n=48):
        def one(i):
            url = self.mock.url("/v1/chat/completions", plan="503,200")
            return self.curl(url, env).stdout

        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            return list(ex.map(one, range(n)))

    def test_failures_that_retries_fix_do_not_open(self):
        """Every call's first attempt gets a 503, its retry a 200 (issue 12 item 6): all
        calls succeed and the breaker never opens, as unguarded (the retry budget, which
        is not the breaker's, off)."""
        got = self.flaky(self.henv(CURLGUARD_RETRY_BUDGET="off"))
        self.assertEqual(got, [b"200"] * 48)
        b = self.stat_breaker()
        self.assertEqual((b["state"], b["opened"], b["failures"]), ("closed", 0, 0), b)

    def test_retries_the_budget_refuses_do_not_open_either(self):
        """With the retry budget on, the calls whose retry it refuses end 503, but that is
        the budget's no, not the provider's: the breaker stays closed."""
        got = self.flaky(self.henv())
        self.assertGreater(got.count(b"200"), 0)
        b = self.stat_breaker()
        self.assertEqual((b["state"], b["opened"]), ("closed", 0), b)

    def test_an_outage_still_opens_quickly_with_retries(self):
        """Three attempts per call: the retries' failures count, so 5 failed retries open
        it, well before the calls' last attempts end."""
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_S="30", CURLGUARD_BREAKER_OPEN="fail")
        t0 = time.monotonic()

        def one(i):
            return self.curl(self.url, env)

        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            list(ex.map(one, range(8)))
        b = self.stat_breaker()
        self.assertEqual(b["state"], "open", b)
        self.assertLess(time.monotonic() - t0, 10)
        # 8 first attempts, and at most a few retries before it opened.
        self.assertLessEqual(len(self.mock.entries(url=self.url)), 8 + 8)

    def test_a_retry_waiting_for_the_budget_sees_the_breaker_open(self):
        """A retry the budget makes wait (one retry per 10 s window here) asks the breaker
        again while it waits: when the breaker opens meanwhile (open = fail), the call ends
        at once with the answer in hand (503), not ~10 s later with curl's error 7."""
        self.budget_waiter_sees_the_breaker(())

    def test_the_multi_driver_s_budget_wait_sees_the_breaker_open_too(self):
        """The same through curl --parallel (the multi API's non-blocking driver)."""
        self.budget_waiter_sees_the_breaker(("--parallel",))

    def test_a_call_waiting_in_the_limiter_sees_the_breaker_open(self):
        """A call the request limit makes wait asks the breaker again after the wait
        (guard.c cg__admit, admit.h `waited`): when the breaker opened meanwhile (open =
        fail), the call is not sent and ends circuit_open.  (Without a wait the breaker is
        not asked twice, issue 16.)"""
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_S="30", CURLGUARD_BREAKER_OPEN="fail")
        limited = dict(env, CURLGUARD_RPM="12")          # one request per 5 s
        ok_url = self.mock.url("/v1/chat/completions", plan="200")
        self.assertEqual(self.curl(ok_url, limited).stdout, b"200")   # takes the turn
        waiter_url = self.mock.url("/v1/chat/completions", plan="200")
        waiter = self.popen(waiter_url, limited)
        time.sleep(0.5)                                  # it waits in the limiter now
        opened = self.open_it(env)                       # no request limit: at once
        out, err = waiter.communicate(timeout=30)
        self.assertLess(time.monotonic() - opened, 10.0)
        self.assertEqual(self.mock.entries(url=waiter_url), [], "sent with the breaker open")
        self.assertNotEqual(out, b"200", err)
        last = [r for r in self.records() if r["pid"] == waiter.pid]
        self.assertEqual([(r["attempt"], r["reason"], r["final"]) for r in last],
                         [(1, "circuit_open", True)], last)
        self.assertGreaterEqual(last[0]["queue_ms"], 3000, last)

    def budget_waiter_sees_the_breaker(self, extra):
        env = self.henv(CURLGUARD_BREAKER_COOLDOWN_S="30", CURLGUARD_BREAKER_OPEN="fail",
                        CURLGUARD_RETRY_BUDGET_RATIO="0", CURLGUARD_RETRY_BUDGET_MIN_PER_S="0.1")
        waiter_url = self.mock.url("/v1/chat/completions", plan="503")
        waiter = self.popen(waiter_url, env, extra)
        # Its first retry takes the window's one grant; its second one waits for the budget.
        self.mock.wait_entries(url=waiter_url, count=2, timeout=10)
        time.sleep(0.3)
        one = dict(env, CURLGUARD_MAX_ATTEMPTS="1")
        for _ in range(5):           # the waiter's failed retry counted too: 4 may do
            self.assertEqual(self.curl(self.url, one).stdout, b"503")
            if self.stat_breaker()["state"] == "open":
                break
        opened = time.monotonic()
        self.assertEqual(self.stat_breaker()["state"], "open")
        out, err = waiter.communicate(timeout=30)
        took = time.monotonic() - opened
        self.assertEqual((waiter.returncode, out), (0, b"503"), err)
        self.assertLess(took, 3.0, "it waited for the budget past the breaker's opening")
        self.assertEqual(len(self.mock.entries(url=waiter_url)), 2)
        last = [r for r in self.records() if r["pid"] == waiter.pid and r["final"]]
        self.assertEqual([(r["attempt"], r["status"], r["reason"]) for r in last],
                         [(2, 503, "circuit_open")], last)



class OutlastCurlRetryTest(HoldTestCase):
    """The guide: a guard that completes fewer calls than `curl --retry` on the same faults
    has a bug.  curl --retry 2 waits 1 s, then 2 s; the guard's 3 attempts with full jitter
    drew from [0, 1 s] and [0, 2 s], so a call could spend them in a fraction of a second
    of an outage that curl's outlast."""

    def test_the_backoffs_before_the_last_attempt_add_up_to_the_schedule(self):
        """The backoff before the last counted attempt is raised so that the call's backoffs
        add up to at least the schedule without jitter (400 + 800 ms here), plus at most
        10 %.  Before, the sum was any of [0, 1200] ms."""
        env = self.henv(CURLGUARD_BACKOFF_BASE_MS="400", CURLGUARD_BACKOFF_CAP_MS="10000",
                        CURLGUARD_JITTER="full", CURLGUARD_RETRY_BUDGET="off")
        for i in range(3):
            url = self.mock.url("/v1/chat/completions", plan="503,503,200")
            t0 = time.monotonic()
            p = self.curl(url, env, extra=("-d", "{}"))
            took = time.monotonic() - t0
            self.assertEqual((p.returncode, p.stdout), (0, b"200"), p.stderr)
            self.assertGreaterEqual(took, 1.2)
            self.exact_entries(url, 3)
        calls = {}
        for r in self.records():
            calls.setdefault(r["request_id"], []).append(r)
        self.assertEqual(len(calls), 3, calls)
        for recs in calls.values():
            self.assertEqual([(r["attempt"], r["decision"]) for r in recs],
                             [(1, "retry"), (2, "retry"), (3, "done")], recs)
            slept = recs[0]["backoff_ms"] + recs[1]["backoff_ms"]
            self.assertLessEqual(recs[0]["backoff_ms"], 400, recs)   # still full jitter
            self.assertGreaterEqual(slept, 1200, recs)
            self.assertLessEqual(slept, 1320, recs)

    def test_a_short_outage_loses_no_call_that_curl_retry_completes(self):
        """4 POSTs at once against 2 s of 503s, the library's defaults (3 attempts, full
        jitter, 1 s base) and plain curl --retry 2 (3 attempts too): every call completes
        both ways.  Before, with a 2.5 s outage, 3 of 4 in 5 of 5 runs: the loser's draws
        spent its attempts in 0.3 to 1.2 s, before the breaker opened."""
        self.outage_against_curl_retry(4, 2.0, ())

    def test_retries_the_budget_refuses_are_held_for_the_probe(self):
        """16 POSTs, 2.5 s of 503s, --max-time 5, both drivers: the retry budget (10 + 20 %
        of the calls a 10 s window) refuses some retries, and its next grant is past the
        deadline; while the breaker is open such a retry is held for the probe like the
        calls it holds, instead of ending.  Before, 7 of 16 in 4 of 4 runs (a helper's
        hunt); curl --retry 2: 16 of 16."""
        self.outage_against_curl_retry(16, 2.5, ("--max-time", "5"))
        self.outage_against_curl_retry(16, 2.5, ("--max-time", "5"), parallel=True)

    def test_a_deadline_that_cannot_see_the_next_probe_loses_no_call(self):
        """8 POSTs, 2 s of 503s, --max-time 3.5, both drivers: the probe at about 1.4 s
        fails and the next is 2 s +- 20 % later, past the held calls' deadlines.  Such a
        call is now held until its last chance (0.7 s before its deadline: a fifth of it,
        no success seen) and is then the probe early, one at a time, instead of failing
        fast with about 2 s left.  Before, 0 of 8 in 4 of 4 runs (with 2.5 s of 503s, 0
        to 8); curl --retry 2 (its third attempt at 3 s): 8 of 8."""
        self.outage_against_curl_retry(8, 2.0, ("--max-time", "3.5"))
        self.outage_against_curl_retry(8, 2.0, ("--max-time", "3.5"), parallel=True)

    def outage_against_curl_retry(self, n, secs, extra_both, parallel=False):
        """`n` POSTs at once (one curl each, or one `curl -Z`) against `secs` of 503s, the
        guard's defaults and plain curl --retry 2: every call completes both ways."""
        got = {}
        for name, env, extra in (("curl --retry 2", harness.plain_env(),
                                  ("--retry", "2") + extra_both),
                                 ("guard", self.guard_env(), extra_both)):
            self.mock.set_plan(self.plan, ["503"])
            self.state.unlink(missing_ok=True)
            before = len(self.mock.entries(url=self.url))
            harness.skip_unsanitizable([harness.CURL], env)
            # each its own file: curl --retry truncates it before a retry (not /dev/null)
            if parallel:
                argv = [harness.CURL, "-Z", "-sS", "-w", "%{http_code}\n", "-d", "{}", *extra]
                for i in range(n):
                    argv += ["-o", str(self.tmp / f"out{i}"), self.url]
                argvs = [argv]
            else:
                argvs = [[harness.CURL, "-sS", "-o", str(self.tmp / f"out{i}"), "-w",
                          "%{http_code}\n", "-d", "{}", *extra, self.url] for i in range(n)]
            procs = [subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      start_new_session=True) for argv in argvs]
            time.sleep(secs)
            self.heal()
            outs = [p.communicate(timeout=60) for p in procs]
            got[name] = (b"".join(o for o, _ in outs).split(),
                         len(self.mock.entries(url=self.url)) - before, [e for _, e in outs])
        print(f"\n[outage] {secs} s of 503s, {n} POSTs{' (-Z)' if parallel else ''} "
              f"{' '.join(extra_both)}: {got['guard'][0].count(b'200')} done, "
              f"{got['guard'][1]} requests; curl --retry 2: "
              f"{got['curl --retry 2'][0].count(b'200')} done, "
              f"{got['curl --retry 2'][1]} requests", flush=True)
        # Plain curl is the yardstick, not under test: its third attempt lands near the
        # outage's end (at 3 s, 2.5 s of 503s), and in a fresh clone's `make check` on an
        # idle machine `curl -Z --retry 2` once got 2 of 16 (the guard 16 of 16, fewer
        # requests).  The guard completes every call, and never fewer than curl.
        self.assertGreaterEqual(got["guard"][0].count(b"200"),
                                got["curl --retry 2"][0].count(b"200"), got)
        calls = {}
        for r in self.records():        # on a failure, what each call did
            calls.setdefault(r["request_id"], []).append(
                (r["attempt"], r["status"], r["decision"], r["reason"], r["backoff_ms"],
                 r["breaker_wait_ms"], r["duration_ms"], r["ts"][-9:]))
        self.assertEqual(got["guard"][0], [b"200"] * n, (got, calls))
        self.assertLessEqual(got["guard"][1], got["curl --retry 2"][1], got)

    def test_curl_retry_on_top_finishes_an_outage_as_plain_curl_retry(self):
        """helper-59: 8 POSTs, each `curl --retry 3 -m 2`, started 0.1 s apart into 6 s of
        503s.  Plain curl: 8 of 8 (its retries at 1, 3 and 7 s).  Under the guard every
        call failed fast once the breaker was open or the retry budget refused curl's
        repeat, with CURLE_COULDNT_CONNECT, which curl does not retry: 0 of 8.  Those
        fail-fasts are timeouts now (28), which curl retries after its own backoff, and
        the repeat asks the breaker and the budget again."""
        n, secs = 8, 6.0
        got = {}
        for name, env in (("plain", harness.plain_env()), ("guard", self.guard_env())):
            self.mock.set_plan(self.plan, ["503"])
            self.state.unlink(missing_ok=True)
            harness.skip_unsanitizable([harness.CURL], env)
            before = len(self.mock.entries(url=self.url))
            procs = []
            t0 = time.monotonic()
            for i in range(n):
                time.sleep(max(0.0, t0 + 0.1 * i - time.monotonic()))
                procs.append(subprocess.Popen(
                    [harness.CURL, "-sS", "-o", str(self.tmp / f"o{i}"), "-w", "%{http_code}\n",
                     "--retry", "3", "-m", "2", "-d", "{}", self.url], env=env,
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    start_new_session=True))
            time.sleep(max(0.0, t0 + secs - time.monotonic()))
            self.heal()
            outs = [p.communicate(timeout=60) for p in procs]
            got[name] = ([o.strip() for o, _ in outs], [p.returncode for p in procs],
                         len(self.mock.entries(url=self.url)) - before, [e for _, e in outs])
        print(f"\n[outage] {secs} s of 503s, {n} x curl --retry 3 -m 2: guarded "
              f"{got['guard'][0].count(b'200')} done, {got['guard'][2]} requests; plain "
              f"{got['plain'][0].count(b'200')} done, {got['plain'][2]} requests", flush=True)
        self.assertGreaterEqual(got["guard"][0].count(b"200"), got["plain"][0].count(b"200"),
                                got)
        self.assertEqual(got["guard"][0], [b"200"] * n, got)
        self.assertLessEqual(got["guard"][2], got["plain"][2], got)

    def held_over(self, extra=()):
        """One POST whose three attempts get 503s; its third failure is the second in a row
        the breaker counts (a first attempt's is deferred), which opens it."""
        env = self.henv(CURLGUARD_BREAKER_CONSECUTIVE_FAILURES="2", CURLGUARD_JITTER="none")
        url = self.mock.url("/v1/chat/completions", plan="503,503,503,200")
        out = self.tmp / "out"
        argv = [harness.CURL, "-sS", "-o", str(out), "-w", "%{http_code}\n", "-d", "{}",
                *extra, url]
        t0 = time.monotonic()
        p = harness.run(argv, env, timeout=60)
        return p, time.monotonic() - t0, url, out

    def test_a_call_whose_last_attempt_opens_the_breaker_is_held_over(self):
        """That call is held for the probe as the calls after it are, and its next attempt
        is the breaker's (not counted): it completes when the provider is back.  Its third
        answer was held, not handed to the host.  Before, it ended 503 (max_attempts)."""
        for extra in ((), ("-Z",)):
            with self.subTest(extra=extra):
                try:
                    os.unlink(self.log)
                except FileNotFoundError:
                    pass
                self.state.unlink(missing_ok=True)
                p, took, url, out = self.held_over(extra)
                self.assertEqual((p.returncode, p.stdout), (0, b"200\n"), p.stderr)
                self.exact_entries(url, 4)
                recs = self.records()
                self.assertEqual([(r["attempt"], r["status"], r["decision"], r["reason"])
                                  for r in recs],
                                 [(1, 503, "retry", "retryable"), (2, 503, "retry", "retryable"),
                                  (3, 503, "retry", "breaker_hold"),
                                  (4, 200, "done", "breaker_wait")], recs)
                self.assertGreaterEqual(took, 0.9, "held for the probe, 1 s after it opened")
                body = json.loads(out.read_bytes())     # the 200's alone
                self.assertIn("choices", body)

    def test_a_held_over_call_the_gate_then_refuses_gets_its_answer(self):
        """A pool with a fallback sends calls there while its breaker is open, but a call
        whose URL is a CURLOPT_CURLU handle is not diverted (that would change the host's
        handle): its held-over attempt is refused at the gate.  The host then gets the
        answer it had, the 503 and code 0, as before the hold-over; the first version
        dropped it and the host got code 7 and nothing (a helper's hunt; the same when
        another process's probe fails and the next one is past the deadline)."""
        if not harness.CGHOST.exists():
            self.skipTest("cghost is not built")
        fb = harness.MockProvider()
        fb.start()
        self.addCleanup(fb.stop)
        cfg = self.tmp / "cfg.json"
        cfg.write_text(json.dumps({"pools": [{"name": "main",
                                              "hosts": [f"127.0.0.1:{self.mock.port}"],
                                              "fallback_url": fb.base}]}))
        env = self.henv(CURLGUARD_CONFIG=str(cfg), CURLGUARD_BREAKER_CONSECUTIVE_FAILURES="2",
                        CURLGUARD_JITTER="none")
        url = self.mock.url("/v1/chat/completions", plan="503,503,503,200")
        p = harness.run([str(harness.CGHOST), "--curlu", "--headers", "cb", "--method", "POST",
                         "--post-fields", "{}", url], env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stderr, rb"cghost: perform=1 rc=0 status=503 ")
        self.assertIn(b"H: HTTP/1.1 503 ", p.stderr)
        self.assertIn(b"error", p.stdout)                  # the 503's body
        self.exact_entries(url, 3)
        recs = self.records()
        self.assertEqual([(r["attempt"], r["status"], r["decision"], r["reason"], r["final"])
                          for r in recs],
                         [(1, 503, "retry", "retryable", False),
                          (2, 503, "retry", "retryable", False),
                          (3, 503, "retry", "breaker_hold", False),
                          (4, None, "give_up", "max_attempts", True)], recs)

    def test_open_fail_gives_up_as_before(self):
        env = self.henv(CURLGUARD_BREAKER_CONSECUTIVE_FAILURES="2", CURLGUARD_JITTER="none",
                        CURLGUARD_BREAKER_OPEN="fail")
        url = self.mock.url("/v1/chat/completions", plan="503,503,503,200")
        p = self.curl(url, env, extra=("-d", "{}"))
        self.assertEqual((p.returncode, p.stdout), (0, b"503"), p.stderr)
        self.exact_entries(url, 3)
        self.assertEqual(self.records()[-1]["reason"], "max_attempts")

if __name__ == "__main__":
    unittest.main()
