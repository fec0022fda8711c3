"""One limiter for every process on the machine (README "One limiter for every process on the
machine", SPEC sections 3-6): real curl processes under the guard share one state file
(CURLGUARD_STATE) and are paced together; the mock's ledger is the ground truth of when
requests really arrived.

Timing assertions are tight lower bounds (the limiter must not let anything through early)
and generous upper bounds (scheduling on a busy machine is slow, never early)."""

import concurrent.futures
import datetime
import json
import os
import signal
import subprocess
import threading
import textwrap
import time
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

CHAT = "/v1/chat/completions"
SLACK = 0.3                  # seconds of scheduling slack allowed on lower bounds of spreads


class LimiterTestCase(harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_curl_and_cli()

    # -- running things

    def curl(self, urls, env, args=(), timeout=30):
        if isinstance(urls, str):
            urls = [urls]
        return harness.run([harness.CURL, "-sS", "-o", "/dev/null", *args, *urls], env,
                           timeout=timeout)

    def parallel(self, jobs, timeout=30):
        """Run [(urls, env, args), ...] at once (one curl process each, released together).
        Returns [(CompletedProcess, start, end)] in job order (time.monotonic())."""
        barrier = threading.Barrier(len(jobs))

        def one(job):
            urls, env, args = job
            barrier.wait(10)
            t0 = time.monotonic()
            p = self.curl(urls, env, args, timeout=timeout)
            return p, t0, time.monotonic()

        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as ex:
            return list(ex.map(one, jobs))

    def stat(self, state=None):
        """`curlguard stat --json` for the state file (default: this test's)."""
        p = harness.run([harness.CLI, "stat", "--json"],
                        harness.plain_env(CURLGUARD_STATE=str(state or self.state)), timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def stat_pool(self, name, state=None):
        st = self.stat(state)
        pools = {p["name"]: p for p in st["pools"]}
        self.assertIn(name, pools, f"no pool {name!r} in stat: {st}")
        return pools[name], st

    def assertOk(self, p):
        self.assertEqual(p.returncode, 0, f"curl exit {p.returncode}: {p.stderr!r}")
        self.assertEqual(p.stderr, b"", "the guard said something on stderr")


class SharedPacingTest(LimiterTestCase):
    def test_processes_share_one_rate(self):
        """12 processes at once, RPM 120 (default burst 2): arrivals never beat the GCRA."""
        n, rate, burst = 12, 2.0, 2          # 120/min = 2/s, one second's worth of burst
        key = harness.unique_key("contend")
        url = self.mock.url("/v1/contend", plan="200", key=key)
        env = self.guard_env(CURLGUARD_RPM="120")
        t0 = time.monotonic()
        results = self.parallel([(url, env, ())] * n)
        elapsed = time.monotonic() - t0
        for p, _, _ in results:
            self.assertOk(p)

        # Within any 1.0 s window: at most burst + rate * 1 s (+1 for scheduling).
        times = self.paced_arrivals(key, n, rate, burst)
        spread = times[-1] - times[0]
        self.assertGreaterEqual(spread, (n - burst) / rate - SLACK,
                                f"12 requests at 2/s after a burst of 2 took only {spread:.3f} s")
        self.assertLess(spread, (n - burst) / rate + 3.0, f"pacing far too slow: {times}")
        self.assertLess(elapsed, (n - burst) / rate + 10)

        recs = self.records()
        self.assertEqual(len(recs), n, recs)
        for r in recs:
            self.assertRecordKeys(r)
            self.assertEqual(r["pool"], harness.mock_pool())
            self.assertEqual(r["outcome"], "ok")
        q = sorted(r["queue_ms"] for r in recs)
        # Each caller learns its own place: the k-th shortest wait is about (k - 1) * 500 ms
        # (a process that started late waits a little less).
        for k in range(burst, n):
            self.assertGreaterEqual(q[k], (k - burst + 1) * 500 - 400, f"queue_ms {q}")
        self.assertGreaterEqual(q[-1], (n - burst) / rate * 1000 - 400, f"queue_ms {q}")
        self.assertLess(q[0], 200, f"the first request should not wait: {q}")

        pool, st = self.stat_pool(harness.mock_pool())
        self.assertTrue(st["exists"])
        self.assertEqual(len(st["pools"]), 1, st)
        self.assertEqual(pool["admitted"], n, pool)
        self.assertGreaterEqual(pool["waited"], n - burst - 1, pool)
        self.assertEqual(pool["rejected"], 0, pool)
        self.assertEqual(pool["rpm"], 120, pool)
        self.assertEqual(pool["inflight"], 0, pool)

    def test_separate_state_files_do_not_share(self):
        """Control: the pacing comes from the shared file. Two files -> two independent
        accounts, so each process's first request goes at once."""
        env = {"CURLGUARD_RPM": "6"}            # one per 10 s, burst 1
        urls = [self.mock.url("/v1/separate", plan="200") for _ in range(2)]
        jobs = [(urls[i], self.guard_env(CURLGUARD_STATE=str(self.tmp / f"state-{i}"), **env), ())
                for i in range(2)]
        t0 = time.monotonic()
        for p, _, _ in self.parallel(jobs):
            self.assertOk(p)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual([r["queue_ms"] for r in self.records()], [0, 0])


class InflightTest(LimiterTestCase):
    def test_max_inflight_across_processes(self):
        n, limit, delay = 6, 2, 0.8
        key = harness.unique_key("inflight")
        url = self.mock.url("/v1/inflight", plan=f"200:delay={int(delay * 1000)}", key=key)
        env = self.guard_env(CURLGUARD_MAX_INFLIGHT=str(limit))
        t0 = time.monotonic()
        results = self.parallel([(url, env, ())] * n)
        elapsed = time.monotonic() - t0
        for p, _, _ in results:
            self.assertOk(p)
        seen = self.mock.wait_entries(key=key, count=n)
        self.assertEqual(len(seen), n)
        # The slot is given back after the response was read; the mock notes t_end just after
        # its last write, so allow 50 ms of overlap at the edges.
        eps = 0.05
        peak = max(sum(1 for o in seen if o["t"] <= e["t"] < o["t_end"] - eps) for e in seen)
        self.assertLessEqual(peak, limit, [(e["t"], e["t_end"]) for e in seen])
        self.assertEqual(peak, limit, "the calls never ran two at a time")
        self.assertGreaterEqual(elapsed, (n / limit) * delay - 0.05,
                                f"{n} calls of {delay} s, {limit} at a time, took {elapsed:.2f} s")
        self.assertLess(elapsed, (n / limit) * delay + 5)
        waited = sorted(r["queue_ms"] for r in self.records())
        self.assertGreaterEqual(waited[-1], 2 * delay * 1000 - 300, waited)
        pool, _ = self.stat_pool(harness.mock_pool())
        self.assertEqual(pool["max_inflight"], limit)
        self.assertEqual(pool["inflight"], 0, pool)
        self.assertEqual(pool["waiters"], 0, pool)
        self.assertEqual(pool["admitted"], n, pool)

    def test_stat_counts_calls_that_waited_for_a_slot(self):
        """state.h: `waited` counts "calls that had to wait". A call that waited for an
        in-flight slot (its record's queue_ms says so) is one of them."""
        key = harness.unique_key("slotwait")
        url = self.mock.url("/v1/slotwait", plan="200:delay=500", key=key)
        env = self.guard_env(CURLGUARD_MAX_INFLIGHT="1")
        for p, _, _ in self.parallel([(url, env, ())] * 2):
            self.assertOk(p)
        waited = sorted(r["queue_ms"] for r in self.records())
        self.assertGreaterEqual(waited[-1], 400, f"the second call did not wait: {waited}")
        pool, _ = self.stat_pool(harness.mock_pool())
        self.assertEqual(pool["admitted"], 2, pool)
        self.assertEqual(pool["waited"], 1,
                         f"stat counts {pool['waited']} calls that waited; the records say 1 "
                         f"(queue_ms {waited})")

    def kill_slot_holder(self, env, path):
        """A slow call at `path` takes the only slot; its process is killed with SIGKILL."""
        holder = self.start_slow_curl(self.mock.url(path, plan="200:delay=5000"), env)
        try:
            pool, _ = self.stat_pool(harness.mock_pool())
            self.assertEqual(pool["inflight"], 1, f"the slow call holds no slot: {pool}")
        finally:
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(10)
        self.assertEqual(holder.returncode, -signal.SIGKILL)

    def test_slot_of_killed_process_is_taken_back(self):
        env = self.guard_env(CURLGUARD_MAX_INFLIGHT="1")
        self.kill_slot_holder(env, "/v1/killed")

        fast = self.mock.url("/v1/after-kill", plan="200")
        t0 = time.monotonic()
        p = self.curl(fast, env, timeout=20)
        took = time.monotonic() - t0
        self.assertOk(p)
        self.assertLess(took, 1.5, f"the dead process's slot was taken back only after {took:.2f} s")
        self.assertEqual(len(self.mock.wait_entries(url=fast)), 1)
        pool, _ = self.stat_pool(harness.mock_pool())
        self.assertEqual(pool["inflight"], 0, pool)


    def test_slot_of_killed_process_is_taken_back_by_a_multi_host(self):
        """The same with `curl --parallel` (the multi driver) waiting for the slot: its
        transfers look for dead holders as a blocking waiter does, every 0.5 s (they never
        did: three 300 ms calls waited out curl's 600 s deadline, or failed at -m 5 with
        "rate limit wait exceeds deadline", the dead slot counted for ever)."""
        env = self.guard_env(CURLGUARD_MAX_INFLIGHT="1")
        self.kill_slot_holder(env, "/v1/killed-m")
        urls = [self.mock.url(f"/v1/after-kill-m/{i}", plan="200:delay=300") for i in range(3)]
        argv = [harness.CURL, "-sS", "--parallel", "-m", "10", "-w", "%{http_code}\\n"]
        for u in urls:
            argv += ["-o", "/dev/null", u]
        t0 = time.monotonic()
        p = harness.run(argv, env, timeout=30)
        took = time.monotonic() - t0
        self.assertEqual((p.returncode, p.stdout), (0, b"200\n200\n200\n"), p.stderr)
        self.assertLess(took, 4.0, f"took {took:.2f} s")
        pool, _ = self.stat_pool(harness.mock_pool())
        self.assertEqual(pool["inflight"], 0, pool)


    def fair_load(self, easy_procs=4, easy_calls=10, multi_calls=3, late=0.5, args=()):
        """README's scenario: `easy_procs` curl processes of `easy_calls` serial calls of
        200 ms each, and `late` s later one `curl -Z` of `multi_calls`, one slot
        (CURLGUARD_MAX_INFLIGHT=1).  Returns (easy entries, multi entries) of the mock's
        ledger, each sorted by arrival."""
        env = self.guard_env(CURLGUARD_MAX_INFLIGHT="1")
        ke, km = harness.unique_key("fair-e"), harness.unique_key("fair-m")
        jobs = []
        for j in range(easy_procs):
            argv = []
            for i in range(easy_calls):
                argv += ["-o", "/dev/null",
                         self.mock.url(f"/v1/fair-e/{j}/{i}", plan="200:delay=200", key=ke)]
            jobs.append(argv)
        margv = [harness.CURL, "-sS", "--no-progress-meter", "-Z", "-m", "60", *args]
        for i in range(multi_calls):
            margv += ["-o", "/dev/null",
                      self.mock.url(f"/v1/fair-m/{i}", plan="200:delay=200", key=km)]

        def easy(argv):
            return harness.run([harness.CURL, "-sS", "-m", "60", *argv], env, timeout=90)

        with concurrent.futures.ThreadPoolExecutor(easy_procs + 1) as ex:
            futs = [ex.submit(easy, a) for a in jobs]
            time.sleep(late)
            multi = ex.submit(harness.run, margv, env, timeout=90)
            for f in futs:
                self.assertOk(f.result())
            self.assertOk(multi.result())
        es = sorted(self.mock.wait_entries(key=ke, count=easy_procs * easy_calls),
                    key=lambda e: e["t"])
        ms = sorted(self.mock.wait_entries(key=km, count=multi_calls), key=lambda e: e["t"])
        return es, ms

    def test_a_multi_host_gets_its_turn_among_easy_callers(self):
        """Slots are handed out in turn (limiter.h "turns"): a `curl -Z` that asks every 20
        ms is not passed over by easy-API callers that sleep and are woken at once.  Before,
        its first call went out after all 40 easy calls (8.1 s), and under a load that never
        ends it failed at its deadline."""
        es, ms = self.fair_load()
        # It came 0.5 s in, behind the 3 easy calls waiting then: each of its 3 calls goes
        # once those ahead of it had theirs (about 7 easy calls before its last; a race it
        # won now and then before could not make all 3 early).
        before = [sum(1 for e in es if e["t"] < m["t"]) for m in ms]
        self.assertLess(before[-1], 15, f"the curl -Z's calls went after {before} of the "
                                        f"{len(es)} easy calls")
        # One slot: never two at once.
        both = es + ms
        eps = 0.05
        peak = max(sum(1 for o in both if o["t"] <= e["t"] < o["t_end"] - eps) for e in both)
        self.assertEqual(peak, 1, [(e["t"], e["t_end"]) for e in both])
        pool, _ = self.stat_pool(harness.mock_pool())
        self.assertEqual((pool["inflight"], pool["waiters"]), (0, 0), pool)


    def test_stat_counts_multi_waiters_until_the_host_removes_them(self):
        """`stat` counts the calls waiting for a slot in a multi host (pycurl CurlMulti) too
        (it counted only easy-API calls asleep on the futex: 0 here), and a handle the host
        removes leaves its turn at once (limiter.h turns), not once passed over."""
        harness.require_pycurl()
        env = self.guard_env(CURLGUARD_MAX_INFLIGHT="1")
        holder = self.start_slow_curl(self.mock.url("/v1/mw-holder", plan="200:delay=3000"), env)
        script = self.tmp / "mw.py"
        script.write_text(textwrap.dedent(r'''
            import json, os, pycurl, subprocess, sys, time
            cli, urls = sys.argv[1], sys.argv[2:]
            plain = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
            def waiters():
                out = subprocess.run([cli, "stat", "--json"], env=plain, check=True,
                                     capture_output=True).stdout
                return [p["waiters"] for p in json.loads(out)["pools"] if p["inflight"]]
            m, hs = pycurl.CurlMulti(), []
            for u in urls:
                c = pycurl.Curl()
                c.setopt(pycurl.URL, u)
                c.setopt(pycurl.WRITEFUNCTION, lambda d: None)
                m.add_handle(c)
                hs.append(c)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 0.5:
                m.perform()
                m.info_read()
                m.select(0.05)
            m.perform()
            seen = [waiters()]
            for c in hs:
                m.remove_handle(c)
            seen.append(waiters())
            print(json.dumps(seen))
        '''))
        try:
            urls = [self.mock.url(f"/v1/mw/{i}", plan="200") for i in range(3)]
            p = harness.run([harness.PYTHON, str(script), str(harness.CLI), *urls], env,
                            timeout=60)
        finally:
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(10)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout), [[3], [0]],
                         "stat's waiters while 3 handles wait, and once they are removed")

    def wait_waiters(self, n, timeout=10):
        """Poll `stat` until the mock's pool shows at least `n` calls waiting for a slot."""
        deadline = time.monotonic() + timeout
        while True:
            pool, _ = self.stat_pool(harness.mock_pool())
            if pool["waiters"] >= n:
                return pool
            if time.monotonic() > deadline:
                self.fail(f"{n} waiters never showed: {pool}")
            time.sleep(0.05)

    def test_waiters_killed_in_turn_do_not_hold_the_next_up(self):
        """Waiters killed with kill -9 ahead of another, a `curl` and a `curl -Z` of 3, just
        before the slot is free, hold it up no more than a turn's grace (limiter.h
        CG_TURN_STALE_MS + CG_TURN_BEAT_MS, 190 ms): they are passed over, and `stat`
        stops counting them."""
        harness.skip_unsanitizable([harness.CURL], self.guard_env())
        env = self.guard_env(CURLGUARD_MAX_INFLIGHT="1")
        holder_url = self.mock.url("/v1/turn-holder", plan="200:delay=2500")
        holder = self.start_slow_curl(holder_url, env)
        ends = time.monotonic() + 2.5     # about when the holder gives its slot back
        procs = []
        quiet = dict(env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            dead_url = self.mock.url("/v1/turn-dead", plan="200")
            procs.append(subprocess.Popen([harness.CURL, "-sS", "-o", "/dev/null", dead_url],
                                          **quiet))
            self.wait_waiters(1)
            margv = [harness.CURL, "-sS", "--no-progress-meter", "-Z"]
            for i in range(3):
                margv += ["-o", "/dev/null", self.mock.url(f"/v1/turn-dead-m/{i}", plan="200")]
            procs.append(subprocess.Popen(margv, **quiet))
            self.wait_waiters(4)
            live_url = self.mock.url("/v1/turn-live", plan="200")
            with concurrent.futures.ThreadPoolExecutor(1) as ex:
                live = ex.submit(self.curl, live_url, env, ["-m", "20"], 30)
                self.wait_waiters(5)
                # Killed about 0.1 s before the slot is free: still in turn then.
                time.sleep(max(0, ends - 0.1 - time.monotonic()))
                for p in procs:
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait(10)
                self.assertOk(live.result())
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
            holder.wait(20)
        held = self.mock.wait_entries(url=holder_url)[0]
        got = self.mock.wait_entries(url=live_url)[0]
        self.assertEqual(self.mock.entries(url=dead_url), [], "the killed one went")
        late = got["t"] - held["t_end"]
        self.assertLess(late, 0.6, f"the live waiter went {late:.2f} s after the slot was free")
        pool, _ = self.stat_pool(harness.mock_pool())
        self.assertEqual((pool["inflight"], pool["waiters"]), (0, 0), pool)


    def test_waiters_beyond_the_turns_killed_are_not_counted_for_good(self):
        """More blocking waiters than a pool keeps in turn (limiter.h CG_STATE_TURNS, 32),
        all killed with kill -9: once things settle `stat` shows none waiting and a new
        call goes at once.  Before, the waiters without a turn counted themselves in the
        pool's `waiters` while asleep, and a killed one was never counted off: 40 killed,
        `waiters` stayed 8 for good (and every release made a futex wake for nobody)."""
        harness.skip_unsanitizable([harness.CURL], self.guard_env())
        env = self.guard_env(CURLGUARD_MAX_INFLIGHT="1")
        # An answer first: the pool's slow start then lets the 40 reach their wait at once.
        self.assertOk(self.curl(self.mock.url("/v1/many-warm", plan="200"), env))
        holder = self.start_slow_curl(self.mock.url("/v1/many-holder", plan="200:delay=20000"),
                                      env)
        quiet = dict(env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
        procs = []
        try:
            for i in range(40):
                procs.append(subprocess.Popen(
                    [harness.CURL, "-sS", "-m", "30", "-o", "/dev/null",
                     self.mock.url(f"/v1/many/{i}", plan="200")], **quiet))
            self.wait_waiters(32, timeout=20)
            time.sleep(1)                 # the last of the 40 asleep in their wait too
            for p in procs:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(10)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
            holder.kill()
            holder.wait(10)
        # Words of killed waiters are freed after limiter.h CG_TURN_DROP_MS (2 s) by whoever
        # finds them; the dead holder's slot by the next call (CG_INFLIGHT_RECHECK_MS).
        time.sleep(2.5)
        t0 = time.monotonic()
        self.assertOk(self.curl(self.mock.url("/v1/many-after", plan="200"), env, ["-m", "10"]))
        took = time.monotonic() - t0
        self.assertLess(took, 1.0, f"a call after the load waited {took:.2f} s")
        pool, _ = self.stat_pool(harness.mock_pool())
        self.assertEqual((pool["inflight"], pool["waiters"]), (0, 0), pool)
        self.assertEqual([e["path"] for e in self.mock.entries() if "/v1/many/" in e["path"]],
                         [], "a killed waiter went")

class FailFastTest(LimiterTestCase):
    def test_wait_past_deadline_fails_at_once(self):
        env = self.guard_env(CURLGUARD_RPM="1")       # one request a minute, burst 1
        first = self.mock.url("/v1/ff", plan="200")
        second = self.mock.url("/v1/ff", plan="200")
        self.assertOk(self.curl(first, env, ["--max-time", "2"]))
        t0 = time.monotonic()
        p = self.curl(second, env, ["--max-time", "2"])
        took = time.monotonic() - t0
        self.assertEqual(p.returncode, 28, p.stderr)             # CURLE_OPERATION_TIMEDOUT
        err = p.stderr.decode("utf-8", "replace")
        self.assertRegex(err, r"curlguard: rate limit wait \d+(\.\d+)? s exceeds deadline")
        self.assertLess(took, 1.0, f"a wait that cannot fit was started: {took:.2f} s")
        self.assertEqual(self.mock.entries(url=second), [], "the rejected call reached the mock")

        recs = self.records()
        self.assertEqual(len(recs), 2, recs)
        r = recs[1]
        self.assertRecordKeys(r)
        self.assertEqual(r["outcome"], "local_rate_limited")
        self.assertEqual(r["curl_code"], 28)
        self.assertIsNone(r["status"])
        self.assertTrue(r["final"])
        self.assertEqual(r["decision"], "give_up")
        self.assertEqual(r["pool"], harness.mock_pool())
        pool, _ = self.stat_pool(harness.mock_pool())
        self.assertEqual(pool["admitted"], 1, pool)
        self.assertEqual(pool["rejected"], 1, pool)


    def test_inflight_wait_past_deadline_fails_at_the_deadline(self):
        """No free slot before the call's deadline: it fails then (exit 28), never later,
        and nothing reaches the provider."""
        harness.skip_unsanitizable([harness.CURL], self.guard_env())
        env = self.guard_env(CURLGUARD_MAX_INFLIGHT="1")
        slow = self.mock.url("/v1/ff-slot-holder", plan="200:delay=4000")
        holder = self.start_slow_curl(slow, env)
        try:
            second = self.mock.url("/v1/ff-slot", plan="200")
            t0 = time.monotonic()
            p = self.curl(second, env, ["--max-time", "1"], timeout=20)
            took = time.monotonic() - t0
        finally:
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(10)
        self.assertEqual(p.returncode, 28, p.stderr)
        # It says what it waited for (it said "rate limit wait 0.0 s exceeds deadline").
        self.assertRegex(p.stderr, rb"curlguard: no in-flight slot of \S+ free within the "
                                   rb"deadline \(waited 0\.\d s\)")
        self.assertGreaterEqual(took, 0.5, "gave up long before the deadline")
        self.assertLess(took, 1.6, f"waited {took:.2f} s for a slot with --max-time 1")
        self.assertEqual(self.mock.entries(url=second), [])
        recs = [r for r in self.records() if r["path"] == "/v1/ff-slot"]
        self.assertEqual([r["outcome"] for r in recs], ["local_rate_limited"], recs)

    def test_rejected_call_does_not_delay_the_others(self):
        """A call failed fast for its tokens reserved nothing: the provider's pacing (1 s
        apart) continues from the last admitted request, not one interval later."""
        env = self.guard_env(CURLGUARD_TPM="6000")           # 100 tokens/s, burst 100
        pace = ("200:h.x-ratelimit-remaining-requests=2:h.x-ratelimit-reset-requests=3s"
                ":h.x-ratelimit-limit-requests=60")
        self.assertOk(self.curl(self.mock.url("/v1/gb-pace", plan=pace), env))
        big = ["-H", "Content-Type: application/json", "-d",
               json.dumps({"model": "m", "max_tokens": 300, "messages": []})]   # 300 tokens
        self.assertOk(self.curl(self.mock.url("/v1/gb-big1", plan="200"), env, big))
        # Its request slot (~1 s) would fit 1.5 s, its tokens (~2 s) would not.
        p = self.curl(self.mock.url("/v1/gb-big2", plan="200"), env, ["--max-time", "1.5", *big])
        self.assertEqual(p.returncode, 28, p.stderr)
        self.assertOk(self.curl(self.mock.url("/v1/gb-small", plan="200"), env, timeout=20))
        q = {r["path"]: r["queue_ms"] for r in self.records()}
        self.assertGreaterEqual(q["/v1/gb-small"], 400, f"pacing not applied: {q}")
        self.assertLess(q["/v1/gb-small"], 1400,
                        f"the rejected call's paced slot was kept: the next call waited "
                        f"{q['/v1/gb-small']} ms instead of about 900 ({q})")

    def test_calls_the_host_cancels_give_their_turns_back(self):
        """A multi host adds 10 handles at 60 rpm and removes them all after 0.3 s (one
        sent), or an easy host aborts its wait from its progress callback: the turns
        reserved for the requests never sent are given back, and the next process's call
        goes about a second after the one sent.  Before, it waited for all of them: 10 s
        (helper-63)."""
        harness.require_pycurl()
        script = self.tmp / "cancel.py"
        script.write_text(textwrap.dedent(r'''
            import pycurl, sys, time
            mode, urls = sys.argv[1], sys.argv[2:]
            if mode == "multi":
                m, hs = pycurl.CurlMulti(), []
                for u in urls:
                    c = pycurl.Curl()
                    c.setopt(pycurl.URL, u)
                    c.setopt(pycurl.WRITEFUNCTION, lambda d: None)
                    m.add_handle(c)
                    hs.append(c)
                t0 = time.monotonic()
                while time.monotonic() - t0 < 0.3:
                    m.perform()
                    m.info_read()
                    m.select(0.05)
                for c in hs:
                    m.remove_handle(c)
            else:
                t0 = time.monotonic()
                for u in urls:
                    c = pycurl.Curl()
                    c.setopt(pycurl.URL, u)
                    c.setopt(pycurl.WRITEFUNCTION, lambda d: None)
                    c.setopt(pycurl.NOPROGRESS, 0)
                    c.setopt(pycurl.XFERINFOFUNCTION,
                             lambda *a: 1 if time.monotonic() - t0 > 0.3 else 0)
                    try:
                        c.perform()
                    except pycurl.error:
                        pass
        '''))
        for mode in ("multi", "easy"):
            with self.subTest(mode=mode):
                env = self.guard_env(CURLGUARD_RPM="60",
                                     CURLGUARD_STATE=str(self.tmp / f"{mode}.state"))
                key = harness.unique_key("cancel")
                urls = [self.mock.url(f"/v1/cancel/{i}", plan="200", key=key)
                        for i in range(10 if mode == "multi" else 4)]
                p = harness.run([harness.PYTHON, str(script), mode, *urls], env, timeout=60)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(len(self.mock.entries(key=key)), 1)
                t0 = time.monotonic()
                self.assertOk(self.curl(self.mock.url("/v1/cancel/next", plan="200"), env))
                self.assertLess(time.monotonic() - t0, 2.5)

    def test_hold_longer_than_max_retry_after_fails_fast(self):
        """README: a hold longer than CURLGUARD_MAX_RETRY_AFTER_MS fails the waiting calls
        fast instead (here: a 5 s Retry-After, at most 1 s accepted). Since holds are capped
        at the maximum of the process that got the hint (test_hostile_hints.py), such a hold
        comes from a process allowed more: A accepts 10 s, B 1 s."""
        env = self.guard_env(CURLGUARD_MAX_ATTEMPTS="1", CURLGUARD_MAX_RETRY_AFTER_MS="1000")
        a_url = self.mock.url("/v1/long-hold-a", plan="429:ra=5")
        self.assertEqual(self.curl(a_url, dict(env, CURLGUARD_MAX_RETRY_AFTER_MS="10000"))
                         .returncode, 0)
        b_url = self.mock.url("/v1/long-hold-b", plan="200")
        t0 = time.monotonic()
        b = self.curl(b_url, env, timeout=20)
        took = time.monotonic() - t0
        self.assertEqual(b.returncode, 28, b.stderr)
        self.assertIn(b"curlguard: rate limit wait", b.stderr)
        self.assertLess(took, 1.0, f"waited {took:.2f} s on a hold it should not accept")
        self.assertEqual(self.mock.entries(url=b_url), [])
        self.assertEqual(self.records()[-1]["outcome"], "local_rate_limited")


class ProviderSignalsTest(LimiterTestCase):
    def test_429_holds_other_processes(self):
        """Process A gets a 429 (no retry); process B, started right after on another key,
        reaches the provider only when A's hint has expired."""
        for hint in ("ra=1.5", "ram=1500"):            # Retry-After, retry-after-ms
            with self.subTest(hint=hint):
                state = self.tmp / f"state-{hint[:3]}"
                log = self.tmp / f"log-{hint[:3]}"
                a_url = self.mock.url("/v1/hold-a", plan=f"429:{hint}")
                b_url = self.mock.url("/v1/hold-b", plan="200")
                env = self.guard_env(log, CURLGUARD_MAX_ATTEMPTS="1", CURLGUARD_STATE=str(state))
                a = self.curl(a_url, env)
                self.assertEqual(a.returncode, 0, a.stderr)
                b = self.curl(b_url, env, timeout=20)
                self.assertOk(b)
                (ea,) = self.mock.wait_entries(url=a_url)
                (eb,) = self.mock.wait_entries(url=b_url)
                self.assertEqual(ea["status"], 429)
                gap = eb["t"] - ea["t"]
                self.assertGreaterEqual(gap, 1.4, f"B went {gap:.3f} s after A's 429 ({hint})")
                self.assertLess(gap, 4.0)
                recs = {r["path"]: r for r in self.records(log)}
                self.assertGreaterEqual(recs["/v1/hold-b"]["queue_ms"], 1000, recs["/v1/hold-b"])
                pool, _ = self.stat_pool(harness.mock_pool(), state)
                self.assertEqual(pool["seen_429"], 1, pool)

    def keyed_post(self, url, env, key, model="gpt-4o-mini", args=()):
        """One curl POST of a chat body for `model` with `key` as its API key."""
        body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}]})
        return self.curl(url, env, ["-H", f"Authorization: Bearer {key}", "-H",
                                    "Content-Type: application/json", "-d", body, *args],
                         timeout=30)

    def test_a_429_holds_its_own_limit_key_not_another(self):
        """limiter.h keyed holds: providers limit per key and model, so a 429 holds the calls
        of its API key and model only (calls of another key or model go at once); with
        CURLGUARD_LIMIT_KEYS=off it holds the whole pool, as before."""
        for limit_keys in ("on", "off"):
            with self.subTest(limit_keys=limit_keys):
                state = self.tmp / f"state-keys-{limit_keys}"
                env = self.guard_env(CURLGUARD_MAX_ATTEMPTS="1", CURLGUARD_STATE=str(state),
                                     CURLGUARD_LIMIT_KEYS=limit_keys)
                k = harness.unique_key("lk")
                a_url = self.mock.url(CHAT, plan="429:ra=2", key=k + "a")
                self.assertEqual(self.keyed_post(a_url, env, "sk-tenant-a").returncode, 0)
                (ea,) = self.mock.wait_entries(url=a_url)
                self.assertEqual(ea["status"], 429)
                pool, _ = self.stat_pool(harness.mock_pool(), state)
                # stat's table: the pool's row, its `keys` column.
                text = harness.run([harness.CLI, "stat"],
                                   harness.plain_env(CURLGUARD_STATE=str(state)), timeout=30)
                head = text.stdout.decode().splitlines()[1].split()
                row = next(ln.split() for ln in text.stdout.decode().splitlines()
                           if ln.startswith(harness.mock_pool() + " "))
                keys_shown = row[head.index("keys")]
                if limit_keys == "on":
                    self.assertEqual(pool["held_keys"], 1, pool)
                    self.assertEqual(pool["hold_ms"], 0, pool)
                    self.assertGreater(pool["key_hold_ms"], 1000, pool)
                    self.assertEqual(keys_shown, "1", text.stdout)
                else:
                    self.assertEqual(keys_shown, "0", text.stdout)
                    self.assertEqual(pool["held_keys"], 0, pool)
                    self.assertGreater(pool["hold_ms"], 1000, pool)
                # Another key, the same key with another model, the same key and model.
                calls = [("c", "sk-tenant-c", "gpt-4o-mini"), ("d", "sk-tenant-a", "gpt-4o"),
                         ("b", "sk-tenant-a", "gpt-4o-mini")]
                for name, key, model in calls:
                    u = self.mock.url(CHAT, plan="200", key=k + name)
                    self.assertOk(self.keyed_post(u, env, key, model))
                    (e,) = self.mock.wait_entries(url=u)
                    gap = e["t"] - ea["t"]
                    if name == "b" or limit_keys == "off":
                        self.assertGreaterEqual(gap, 1.9, f"{name} went {gap:.3f} s after the 429")
                        self.assertLess(gap, 5.0)
                    else:
                        self.assertLess(gap, 1.0, f"{name} ({key}, {model}) was held {gap:.3f} s "
                                                  f"by another key's 429")

    def test_a_signed_authorization_counts_by_its_access_key(self):
        """An SDK that signs each request with AWS SigV4 itself (the AWS SDK for PHP over
        libcurl, for Bedrock) sends an Authorization that differs on every call; as a whole
        it made every call a limit key of its own (an account's 429 held none of its other
        calls: a helper's repro, 16 processes into a 60 rpm limit, 2 of 16 where the whole
        pool's hold made 10). Its access key id (Credential=...) is the key now: the same
        access key is held, another is not (handle.h cg_auth_identity)."""
        env = self.guard_env(CURLGUARD_MAX_ATTEMPTS="1")
        k = harness.unique_key("sigv4")
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}]})

        def post(url, akid):
            auth = (f"AWS4-HMAC-SHA256 Credential={akid}/20261206/us-east-1/bedrock/"
                    f"aws4_request, SignedHeaders=host;x-amz-date, "
                    f"Signature={os.urandom(32).hex()}")
            return self.curl(url, env, ["-H", f"Authorization: {auth}", "-H",
                                        "Content-Type: application/json", "-d", body],
                             timeout=30)

        a_url = self.mock.url("/model/m1/invoke", plan="429:ra=2", key=k + "a")
        self.assertEqual(post(a_url, "AKIDTENANTONE").returncode, 0)
        (ea,) = self.mock.wait_entries(url=a_url)
        for name, akid in (("other", "AKIDTENANTTWO"), ("same", "AKIDTENANTONE")):
            u = self.mock.url("/model/m1/invoke", plan="200", key=k + name)
            self.assertOk(post(u, akid))
            (e,) = self.mock.wait_entries(url=u)
            gap = e["t"] - ea["t"]
            if name == "same":
                self.assertGreaterEqual(gap, 1.9, f"the same access key went {gap:.3f} s after "
                                                  "its 429")
                self.assertLess(gap, 5.0)
            else:
                self.assertLess(gap, 1.0, f"another access key was held {gap:.3f} s")

    def test_429s_of_several_keys_finish_like_curl_retry(self):
        """A helper's oracle: 12 processes, each with its own API key (a service calling
        for its tenants), each answered 429 Retry-After: 2 twice and then 200. curl --retry
        3 gets 12 of 12 in 4.3 s. The guard held the whole pool for every key's 429 and cut
        the learned rate for each: one request a hint for all of them, 0 to 1 of them within
        -m 10. Now each 429 holds its key, 429s of several keys cut no rate (limiter.h),
        and a retry that waits out a 429's Retry-After is not drawn from the retry budget
        (which refused the third attempts of all 12 once: 0 of 12)."""
        env = self.guard_env()
        k = harness.unique_key("keys6")
        jobs = [(self.mock.url(CHAT, plan="429:ra=2,429:ra=2,200", key=f"{k}-{i}"), env, i)
                for i in range(12)]
        barrier = threading.Barrier(len(jobs))

        def one(job):
            url, env, i = job
            barrier.wait(10)
            return self.keyed_post(url, env, f"sk-tenant-{i}", args=("-m", "10", "-w",
                                                                      "%{http_code}"))

        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as ex:
            done = list(ex.map(one, jobs))
        codes = [p.stdout.decode() for p in done]
        self.assertEqual(codes, ["200"] * 12, f"{[p.stderr for p in done]}")
        for i in range(12):
            self.assertEqual([e["status"] for e in self.mock.entries(key=f"{k}-{i}")],
                             [429, 429, 200])

    def test_rate_limit_headers_pace_other_processes(self):
        plan = ("200:h.x-ratelimit-remaining-requests=2:h.x-ratelimit-reset-requests=3s"
                ":h.x-ratelimit-limit-requests=60")
        a_url = self.mock.url("/v1/pace-a", plan=plan)
        env = self.guard_env()
        self.assertOk(self.curl(a_url, env))
        pool, _ = self.stat_pool(harness.mock_pool())
        # 2 remaining over 3 s: one request every 3 / (2 + 1) = 1 s.
        self.assertAlmostEqual(pool["pace_ms"], 1000, delta=1, msg=pool)
        key = harness.unique_key("paced")
        b_urls = [self.mock.url(f"/v1/pace-b/{i}", plan="200", key=key) for i in range(3)]
        self.assertOk(self.curl(b_urls, env, timeout=20))
        times = sorted(e["t"] for e in self.mock.wait_entries(key=key, count=3))
        gaps = [b - a for a, b in zip(times, times[1:])]
        for g in gaps:
            self.assertGreaterEqual(g, 0.9, f"paced requests only {gaps} apart")
            self.assertLess(g, 2.0, f"paced requests {gaps} apart: far more than 1 s")

    def test_anthropic_and_ietf_headers_pace_the_pool(self):
        """Each provider's header family reaches the limiter: 2 remaining, window full again
        in 3 s -> the pool is paced one request a second (`stat` pace_ms)."""
        reset = (datetime.datetime.now(datetime.timezone.utc)
                 + datetime.timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        variants = {
            "anthropic": {"anthropic-ratelimit-requests-limit": "50",
                          "anthropic-ratelimit-requests-remaining": "2",
                          "anthropic-ratelimit-requests-reset": reset},
            "ietf-early": {"RateLimit": "limit=100, remaining=2, reset=3"},
            "ietf-structured": {"RateLimit": '"default";r=2;t=3'},
        }
        for name, headers in variants.items():
            with self.subTest(name):
                state = self.tmp / f"state-{name}"
                url = self.mock.url(f"/v1/headers/{name}", plan=[{"action": 200, "headers": headers}])
                self.assertOk(self.curl(url, self.guard_env(CURLGUARD_STATE=str(state))))
                pool, _ = self.stat_pool(harness.mock_pool(), state)
                # Anthropic's reset is a wall-clock time: up to a few hundred ms already gone.
                self.assertGreaterEqual(pool["pace_ms"], 800 if name == "anthropic" else 999, pool)
                self.assertLessEqual(pool["pace_ms"], 1001, pool)

    def test_reset_with_nothing_remaining_and_unknown_limit_is_not_a_wait(self):
        """CASES.md: a reset is when the window refills, not a wait. remaining 0 with a
        6m0s reset and no limit must not hold the pool for minutes."""
        a_url = self.mock.url("/v1/reset-a", plan="200:h.x-ratelimit-remaining-requests=0"
                                                  ":h.x-ratelimit-reset-requests=6m0s")
        env = self.guard_env()
        self.assertOk(self.curl(a_url, env))
        b_url = self.mock.url("/v1/reset-b", plan="200")
        t0 = time.monotonic()
        b = self.curl(b_url, env, ["--max-time", "20"], timeout=30)
        took = time.monotonic() - t0
        self.assertOk(b)
        self.assertLess(took, 2.0, f"held {took:.1f} s by a 6m0s reset")
        self.assertLess(self.records()[-1]["queue_ms"], 500)
        pool, _ = self.stat_pool(harness.mock_pool())
        self.assertEqual(pool["hold_ms"], 0, pool)

    def test_nothing_remaining_with_known_limit_waits_one_refill(self):
        """Control for the case above: with the limit known, the next request waits for one
        request's refill, reset / limit = 3 s / 3 = 1 s (not the whole 3 s). The IETF
        draft's early form carries its limit in the same field (`limit=3, remaining=0,
        reset=3`): it was not read, so nothing remaining never paced."""
        variants = {
            "openai": {"x-ratelimit-remaining-requests": "0",
                       "x-ratelimit-reset-requests": "3s", "x-ratelimit-limit-requests": "3"},
            "ietf-early": {"RateLimit": "limit=3, remaining=0, reset=3"},
        }
        for name, headers in variants.items():
            with self.subTest(name):
                env = self.guard_env(CURLGUARD_STATE=str(self.tmp / f"state-{name}"))
                a_url = self.mock.url(f"/v1/refill-a/{name}",
                                      plan=[{"action": 200, "headers": headers}])
                self.assertOk(self.curl(a_url, env))
                b_url = self.mock.url(f"/v1/refill-b/{name}", plan="200")
                self.assertOk(self.curl(b_url, env, timeout=20))
                (ea,) = self.mock.wait_entries(url=a_url)
                (eb,) = self.mock.wait_entries(url=b_url)
                gap = eb["t"] - ea["t"]
                self.assertGreaterEqual(gap, 0.95,
                                        f"B went {gap:.3f} s after A had 0 of 3 left (reset 3)")
                self.assertLess(gap, 2.5, f"B waited {gap:.3f} s: the reset is not a wait")

class PoolsTest(LimiterTestCase):
    def config(self, pools):
        path = self.tmp / "config.json"
        path.write_text(json.dumps({"pools": pools}))
        return str(path)

    def test_pool_from_config_file(self):
        cfg = self.config([{"name": "elsewhere", "hosts": ["api.example.com"], "rpm": 1},
                           {"name": "mockpool", "hosts": ["127.0.0.*"], "rpm": 60, "burst": 1},
                           {"name": "catchall", "hosts": ["*"]}])     # not first: never used
        env = self.guard_env(CURLGUARD_CONFIG=cfg)
        urls = [self.mock.url("/v1/pooled", plan="200") for _ in range(2)]
        p = self.curl(urls, env, timeout=20)
        self.assertOk(p)
        recs = self.records()
        self.assertEqual([r["pool"] for r in recs], ["mockpool", "mockpool"])
        self.assertLess(recs[0]["queue_ms"], 200)
        self.assertGreaterEqual(recs[1]["queue_ms"], 900, "the pool's rpm 60 does not apply")
        gap = self.mock.wait_entries(url=urls[1])[0]["t"] - self.mock.wait_entries(url=urls[0])[0]["t"]
        self.assertGreaterEqual(gap, 0.95)
        pool, st = self.stat_pool("mockpool")
        self.assertEqual(pool["rpm"], 60)
        self.assertEqual(pool["admitted"], 2)
        self.assertEqual([q["name"] for q in st["pools"]], ["mockpool"], st)

    def test_host_matching_no_pool_gets_its_own(self):
        cfg = self.config([{"name": "elsewhere", "hosts": ["api.example.com"], "rpm": 1}])
        env = self.guard_env(CURLGUARD_CONFIG=cfg, CURLGUARD_RPM="60")
        urls = [self.mock.url("/v1/own-pool", plan="200") for _ in range(2)]
        self.assertOk(self.curl(urls, env, timeout=20))
        recs = self.records()
        self.assertEqual([r["pool"] for r in recs], [harness.mock_pool(), harness.mock_pool()])
        # The default limits (CURLGUARD_RPM=60, burst 1), not the other pool's rpm 1.
        self.assertGreaterEqual(recs[1]["queue_ms"], 900)
        self.assertLess(recs[1]["queue_ms"], 5000)
        pool, st = self.stat_pool(harness.mock_pool())
        self.assertEqual(pool["rpm"], 60)
        self.assertEqual([q["name"] for q in st["pools"]], [harness.mock_pool()], st)


class TokensTest(LimiterTestCase):
    def test_token_limit_waits_for_refill(self):
        # 6000 tpm = 100 tokens/s, token burst one second's worth (100). Each call is charged
        # ceil(chars("user" + "hi") / 4) + max_tokens = 2 + 200 = 202 tokens.
        body = json.dumps({"model": "gpt-4o-mini", "max_tokens": 200,
                           "messages": [{"role": "user", "content": "hi"}]})
        env = self.guard_env(CURLGUARD_TPM="6000")
        args = ["-H", "Content-Type: application/json", "-d", body]
        urls = [self.mock.url(CHAT, plan="200") for _ in range(2)]
        self.assertOk(self.curl(urls[0], env, args))
        self.assertOk(self.curl(urls[1], env, args, timeout=20))
        recs = self.records()
        self.assertEqual(len(recs), 2, recs)
        self.assertLess(recs[0]["queue_ms"], 200)
        # The first call is charged its estimate (202 tokens, more than the 100-token burst)
        # before sending, and nothing is given back when it used fewer: the provider counts
        # its limit with that estimate too.  So the second waits for the first's 202 tokens
        # to refill (about 2.02 s past the burst), as the provider would make it.
        used = recs[0]["total_tokens"]
        self.assertIsNotNone(used, recs[0])
        self.assertLess(used, 100, recs[0])
        self.assertGreaterEqual(recs[1]["queue_ms"], 1500, recs[1])
        self.assertLess(recs[1]["queue_ms"], 6000, recs[1])
        gap = self.mock.wait_entries(url=urls[1])[0]["t"] - self.mock.wait_entries(url=urls[0])[0]["t"]
        self.assertGreaterEqual(gap, 1.5)
        pool, _ = self.stat_pool(harness.mock_pool())
        self.assertEqual(pool["tpm"], 6000)
        self.assertLess(pool["tokens_available"], 100, pool)   # the estimate is gone
        self.assertIsNone(pool["requests_available"], "no request limit: unlimited")

    def test_every_output_limit_name_is_charged(self):
        """OpenAI max_completion_tokens, Responses max_output_tokens, Gemini
        generationConfig.maxOutputTokens: each is charged before sending, so one call of
        ~200 tokens empties a 100-token burst (`stat` tokens_available 0)."""
        bodies = {
            "max_completion_tokens": {"model": "o1", "max_completion_tokens": 200,
                                      "messages": [{"role": "user", "content": "hi"}]},
            "max_output_tokens": {"model": "gpt-4.1", "input": "hi", "max_output_tokens": 200},
            "gemini": {"contents": [{"parts": [{"text": "hi"}]}],
                       "generationConfig": {"maxOutputTokens": 200}},
        }
        for name, body in bodies.items():
            with self.subTest(name):
                state = self.tmp / f"state-{name}"
                env = self.guard_env(CURLGUARD_TPM="6000", CURLGUARD_STATE=str(state))
                url = self.mock.url(f"/v1/tokens/{name}", plan="200")
                self.assertOk(self.curl(url, env, ["-H", "Content-Type: application/json",
                                                   "-d", json.dumps(body)]))
                pool, _ = self.stat_pool(harness.mock_pool(), state)
                self.assertEqual(pool["tokens_available"], 0, pool)

    def test_no_output_limit_is_cheap(self):
        """Control: the same pool without max_tokens charges 2 tokens, then the rest of the
        real usage, which is larger: no wait."""
        body = json.dumps({"model": "gpt-4o-mini",
                           "messages": [{"role": "user", "content": "hi"}]})
        env = self.guard_env(CURLGUARD_TPM="6000")
        args = ["-H", "Content-Type: application/json", "-d", body]
        for _ in range(3):
            self.assertOk(self.curl(self.mock.url(CHAT, plan="200"), env, args))
        recs = self.records()
        self.assertEqual([r["queue_ms"] for r in recs], [0, 0, 0])
        # Each call was charged its real usage, larger than the estimate: that much is gone.
        used = sum(r["total_tokens"] for r in recs)
        pool, _ = self.stat_pool(harness.mock_pool())
        self.assertGreaterEqual(pool["tokens_available"], 100 - used - 2, (pool, used))
        self.assertLessEqual(pool["tokens_available"], 100, pool)


if __name__ == "__main__":
    unittest.main()
