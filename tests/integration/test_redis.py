"""Fleets on Redis (issue 15, README "Fleets: shared state on Redis"): several "machines"
(separate CURLGUARD_STATE files: nothing shared but the Redis server) hold one limit, one
breaker and one set of in-flight slots through CURLGUARD_REDIS; Redis killed, stopped or
misconfigured: the calls go on with the local state file and one `curlguard:` line says so.

The tests start their own redis-server on a free loopback port (--save '' --appendonly no)
and kill it at the end; each test uses its own key prefix.  Timing assertions: tight lower
bounds (nothing early), generous upper bounds (a busy machine is slow, never early).  Each
rate test runs a control without Redis, which must show what Redis prevents."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

REDIS_SERVER = shutil.which("redis-server")
REDIS_CLI = shutil.which("redis-cli")
CHAT = "/v1/chat/completions"
CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")

# Preloaded into redis-server: its wall clock (clock_gettime REALTIME, gettimeofday, time)
# shifted by the seconds in $CLOCKSHIFT_FILE, read again at most every 10 ms: an NTP step on
# the Redis host, the machine's own clock untouched.
CLOCKSHIFT_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
static double off;
static long long last_ms;
static int (*real)(clockid_t, struct timespec *);
static void update(void) {
  struct timespec m;
  long long t;
  const char *f = getenv("CLOCKSHIFT_FILE");
  int fd;
  char b[64] = {0};
  if (!real)
    real = (int (*)(clockid_t, struct timespec *)) dlsym(RTLD_NEXT, "clock_gettime");
  real(CLOCK_MONOTONIC, &m);
  t = m.tv_sec * 1000LL + m.tv_nsec / 1000000;
  if (t - last_ms < 10)
    return;
  last_ms = t;
  if (f && (fd = open(f, O_RDONLY)) >= 0) {
    if (read(fd, b, sizeof(b) - 1) > 0)
      off = strtod(b, NULL);
    close(fd);
  }
}
int clock_gettime(clockid_t c, struct timespec *ts) {
  int r;
  update();
  r = real(c, ts);
  if (!r && (c == CLOCK_REALTIME || c == CLOCK_REALTIME_COARSE)) {
    long long ns = ts->tv_sec * 1000000000LL + ts->tv_nsec + (long long) (off * 1e9);
    ts->tv_sec = ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
  }
  return r;
}
int gettimeofday(struct timeval *tv, void *tz) {
  struct timespec ts;
  (void) tz;
  clock_gettime(CLOCK_REALTIME, &ts);
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = ts.tv_nsec / 1000;
  return 0;
}
time_t time(time_t *t) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (t)
    *t = ts.tv_sec;
  return ts.tv_sec;
}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """A redis-server of the test's own on a free loopback port."""

    def __init__(self, *args, env=None):
        self.args = args
        self.env = env
        self.port = None
        self.proc = None
        self.dir = tempfile.mkdtemp(prefix="cg-redis-")

    def start(self, port=None):
        self.port = port or self.port or free_port()
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--enable-debug-command", "local",
             *self.args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=harness._die_with_parent,
            env=dict(os.environ, **self.env) if self.env else None)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), 0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64):
                        return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    def kill(self, sig=signal.SIGKILL):
        if self.proc is not None:
            self.proc.send_signal(sig)
            if sig == signal.SIGKILL:
                self.proc.wait(10)
                self.proc = None

    def stop(self):
        if self.proc is not None:
            try:
                self.proc.send_signal(signal.SIGCONT)
            except OSError:
                pass
            harness.stop_process(self.proc)
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def cli(self, *args, password=None):
        argv = [REDIS_CLI, "-p", str(self.port)]
        if password:
            argv += ["-a", password, "--no-auth-warning"]
        p = subprocess.run(argv + list(args), capture_output=True, timeout=10, text=True)
        return p.stdout.strip()

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"


class LimitedMock(harness.MockProvider):
    """scripts/mock-provider with extra arguments (--limit-rpm, --limit-tpm)."""

    def __init__(self, *args):
        super().__init__()
        self.args = args

    def start(self):
        self._dir = tempfile.mkdtemp(prefix="cg-mock-")
        port_file = os.path.join(self._dir, "port")
        self.stderr_path = os.path.join(self._dir, "stderr")
        argv = [harness.PYTHON, str(harness.MOCK_PROVIDER), "--port", "0", "--port-file",
                port_file, "--quiet", *self.args]
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err,
                                         env=harness.plain_env(),
                                         preexec_fn=harness._die_with_parent)
        deadline = time.monotonic() + 10
        while True:
            try:
                with open(port_file) as f:
                    self.port = int(f.read().strip())
                break
            except (OSError, ValueError):
                if time.monotonic() > deadline:
                    raise RuntimeError("mock-provider did not start")
                time.sleep(0.02)
        self.base = f"http://127.0.0.1:{self.port}"
        return self

    def summary(self):
        return self._call("GET", "/__summary")


@unittest.skipUnless(REDIS_SERVER and REDIS_CLI, "redis-server / redis-cli not installed")
class RedisTestCase(harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_curl_and_cli()
        cls.redis = Redis().start()

    @classmethod
    def tearDownClass(cls):
        cls.redis.stop()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        if self.redis.proc is None or self.redis.proc.poll() is not None:
            self.redis.start()
        self.prefix = harness.unique_key("t") + ":"

    def machine_env(self, name, redis=True, **kw):
        """A "machine": its own state file (and log); Redis shared when `redis`."""
        env = self.guard_env(log_path=self.tmp / f"{name}.jsonl",
                             CURLGUARD_STATE=str(self.tmp / f"{name}.state"), **kw)
        if redis:
            env["CURLGUARD_REDIS"] = kw.get("CURLGUARD_REDIS", self.redis.url)
            env["CURLGUARD_REDIS_PREFIX"] = self.prefix
        return env

    def curl(self, urls, env, args=(), timeout=60):
        if isinstance(urls, str):
            urls = [urls]
        outs = [a for u in urls for a in ("-o", "/dev/null", u)]
        return harness.run([harness.CURL, "-sS", "-w", "%{http_code}\\n", *args, *outs], env,
                           timeout=timeout)

    def parallel(self, jobs, timeout=60):
        """[(urls, env, args)] at once -> [CompletedProcess] in job order."""
        out = [None] * len(jobs)
        barrier = threading.Barrier(len(jobs))
        for _, env, _ in jobs:     # a skip raised inside a thread would be lost
            harness.skip_unsanitizable([harness.CURL], env)

        def one(i):
            urls, env, args = jobs[i]
            barrier.wait(10)
            out[i] = self.curl(urls, env, args, timeout=timeout)

        ts = [threading.Thread(target=one, args=(i,)) for i in range(len(jobs))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout + 10)
        return out

    def redis_lines(self, p):
        # curl --parallel's progress meter ("\r...") may precede a line: found anywhere.
        return [l.decode(errors="replace") for l in re.findall(rb"curlguard:[^\r\n]*", p.stderr)]

    def key(self, pool, what):
        return f"{self.prefix}{{{pool}}}:{what}"


class FleetRateTest(RedisTestCase):
    def run_fleet(self, mock, redis, machines=2, procs=3, calls=4, body=None, **env):
        urls = [mock.url("/v1/fleet", key=harness.unique_key("f")) if body is None
                else mock.base + CHAT] * calls
        args = () if body is None else ("-H", "Content-Type: application/json",
                                        "--data-binary", body)
        jobs = []
        for m in range(machines):
            e = self.machine_env(f"m{m}", redis=redis, **env)
            jobs += [(urls, e, args)] * procs
        t0 = time.monotonic()
        ps = self.parallel(jobs)
        wall = time.monotonic() - t0
        for p in ps:
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(self.redis_lines(p), [], "the guard said something")
        return ps, wall

    def test_two_machines_hold_one_rpm(self):
        """2 machines x 3 processes x 4 calls = 24 requests, RPM 240 (4/s, burst 4) on
        both: through Redis the mock (enforcing 240/min) refuses none and they take at
        least (24 - 4) / (4 * 0.97) s; each machine on its own sends twice the rate."""
        n, rate, burst = 24, 4 * 0.97, 4
        # The mock's bucket holds one request more than the guard's burst: a request reaches
        # it a few ms after its admission, and on a loaded machine (modules run two at a
        # time) one that was admitted on time sometimes arrived on the heels of the next
        # (25 requests: one 429, retried).  The rate it enforces is still 240/min.
        with LimitedMock("--limit-rpm", "240", "--limit-burst", "5") as mock:
            ps, wall = self.run_fleet(mock, True, CURLGUARD_RPM="240")
            s = mock.summary()
            times = sorted(e["t"] for e in mock.ledger())
            self.assertEqual(len(times), n)
            span = times[-1] - times[0]
            self.assertGreaterEqual(span, (n - burst) / rate - 0.3, f"too fast: {span:.2f} s")
            self.assertLess(span, (n - burst) / rate + 6, f"too slow: {span:.2f} s")
            codes = [c for p in ps for c in p.stdout.decode().split()]
            self.assertEqual(codes.count("429"), 0, s)
            self.assertEqual(int(self.redis.cli("GET", self.key(f"127.0.0.1:{mock.port}",
                                                                "admitted"))), n)
        # The control: without Redis each machine paces itself only (twice the rate).
        with LimitedMock("--limit-rpm", "240") as mock:
            ps, wall = self.run_fleet(mock, False, CURLGUARD_RPM="240",
                                      CURLGUARD_MAX_ATTEMPTS="1")
            codes = [c for p in ps for c in p.stdout.decode().split()]
            self.assertGreater(codes.count("429"), 0,
                               "the control got no 429: the test could not fail")

    def test_two_machines_hold_one_tpm(self):
        """TPM 12000 (200 tokens/s, paced 194/s; burst one second's worth): 12 requests of
        about 110 tokens each from 2 machines take at least (12 * 110 - 200) / 194 s."""
        body = json.dumps({"model": "gpt-4o-mini", "max_tokens": 100,
                           "messages": [{"role": "user", "content": "x" * 20}]})
        with LimitedMock() as mock:
            ps, wall = self.run_fleet(mock, True, procs=3, calls=2, body=body,
                                      CURLGUARD_TPM="12000")
            times = sorted(e["t"] for e in mock.ledger())
            self.assertEqual(len(times), 12)
            recs = [r for m in ("m0", "m1") for r in harness.read_records(self.tmp / f"{m}.jsonl")]
            self.assertTrue(recs)
            per = 100 + 20 // 4          # the guard's charge: text chars / 4 + max_tokens
            floor = (12 * per - 200) / 194.0
            span = times[-1] - times[0]
            self.assertGreaterEqual(span, floor - 0.3, f"too fast: {span:.2f} s")
            self.assertLess(span, floor + 6)


class FleetBreakerTest(RedisTestCase):
    def test_outage_seen_by_one_machine_opens_for_all(self):
        """Machine A sees 5 failures in a row: machine B (its own state file) fails fast
        without sending; without Redis, B would still send."""
        down = self.mock.url("/v1/down", plan="503")
        env_a = self.machine_env("a", CURLGUARD_MAX_ATTEMPTS="1", CURLGUARD_BREAKER_COOLDOWN_S="5",
                                 CURLGUARD_BREAKER_COOLDOWN_MAX_S="5")
        p = self.curl([down] * 5, env_a)
        self.assertEqual(p.stdout.decode().split(), ["503"] * 5, p.stderr)
        pool = harness.mock_pool()
        self.assertTrue(self.redis.cli("GET", self.key(pool, "brk")), "not open in Redis")
        other = self.mock.url("/v1/other", plan="200")
        env_b = self.machine_env("b", CURLGUARD_BREAKER_OPEN="fail")
        t0 = time.monotonic()
        p = self.curl(other, env_b)
        self.assertLess(time.monotonic() - t0, 3)
        self.assertEqual(p.returncode, 7, p.stderr)          # CURLE_COULDNT_CONNECT
        self.assertIn(b"circuit open", p.stderr)
        self.assertEqual(self.mock.entries(url=other), [])
        # Control: machine C without Redis has a closed breaker of its own.
        env_c = self.machine_env("c", redis=False, CURLGUARD_BREAKER_OPEN="fail")
        p = self.curl(other, env_c)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(self.mock.entries(url=other)), 1)

    def test_held_call_counts_on_the_machine(self):
        """Machine A opens the shared breaker (cooldown 1 s); machine B's call waits for the
        probe (open = wait) and succeeds.  B's state file counts it held once and failed
        fast never: before, the Redis path took back a failed-fast count it had never
        made, and "rejected" wrapped to 2^64 - 1."""
        down = self.mock.url("/v1/down", plan="503")
        brk = dict(CURLGUARD_BREAKER_COOLDOWN_S="1", CURLGUARD_BREAKER_COOLDOWN_MAX_S="1",
                   CURLGUARD_BREAKER_JITTER="0")
        p = self.curl([down] * 5, self.machine_env("a", CURLGUARD_MAX_ATTEMPTS="1", **brk))
        self.assertEqual(p.stdout.decode().split(), ["503"] * 5, p.stderr)
        env_b = self.machine_env("b", **brk)
        t0 = time.monotonic()
        p = self.curl(self.mock.url("/v1/later", plan="200"), env_b)
        self.assertEqual((p.returncode, p.stdout), (0, b"200\n"), p.stderr)
        self.assertGreater(time.monotonic() - t0, 0.3)       # it waited for the probe
        st = harness.run([harness.CLI, "stat", "--json"],
                         harness.plain_env(CURLGUARD_STATE=env_b["CURLGUARD_STATE"]), timeout=30)
        self.assertEqual(st.returncode, 0, st.stderr)
        b = {x["name"]: x for x in json.loads(st.stdout)["pools"]}[harness.mock_pool()]["breaker"]
        self.assertEqual((b["held"], b["rejected"]), (1, 0), b)

    def test_an_early_probe_across_the_fleet(self):
        """Machine A opens the shared breaker with a 20 s cooldown; two calls on machine B
        and C (their own state files), deadlines 2 s, cannot see that probe: each is held
        until its last chance and is the probe then, one at a time across the fleet; the
        fleet's cooldown stays where it was (a failed early probe leaves it); then the
        outage ends, and a third call's early probe closes the breaker for every machine.
        Before, they failed fast without sending."""
        down = self.mock.url("/v1/down", plan="503:delay=100")
        brk = dict(CURLGUARD_BREAKER_COOLDOWN_S="20", CURLGUARD_BREAKER_COOLDOWN_MAX_S="20",
                   CURLGUARD_BREAKER_JITTER="0", CURLGUARD_MAX_ATTEMPTS="1")
        p = self.curl([down] * 5, self.machine_env("a", **brk))
        self.assertEqual(p.stdout.decode().split(), ["503"] * 5, p.stderr)
        pool = harness.mock_pool()
        brk_key = self.key(pool, "brk")
        opened = self.redis.cli("GET", brk_key)
        self.assertTrue(opened, "not open in Redis")
        base = len(self.mock.entries(url=down))
        t0 = time.monotonic()
        ps = self.parallel([(down, self.machine_env(m, **brk), ("--max-time", "2"))
                            for m in ("b", "c")])
        took = time.monotonic() - t0
        got = sorted(self.mock.entries(url=down)[base:], key=lambda e: e["t"])
        self.assertGreater(took, 1.5, "held until the last chance")
        self.assertGreaterEqual(len(got), 1, [p.stderr for p in ps])
        self.assertLessEqual(len(got), 2, [p.stderr for p in ps])
        for x, y in zip(got, got[1:]):
            self.assertGreaterEqual(y["t"], x["t_end"] - 0.01, got)   # one at a time
        self.assertEqual(sorted(p.stdout for p in ps).count(b"503\n"), len(got), ps)
        self.assertEqual(self.redis.cli("GET", brk_key), opened, "the cooldown moved")
        healed = self.mock.url("/v1/down", plan="200")
        p = self.curl(healed, self.machine_env("d", **brk), ("--max-time", "2"))
        self.assertEqual((p.returncode, p.stdout), (0, b"200\n"), p.stderr)
        self.assertFalse(self.redis.cli("GET", brk_key), "the early probe's success closes it")

    def test_an_early_probe_out_holds_the_fleet_s_other_calls(self):
        """While machine A's early probe is out (its answer takes 0.3 s), machine B's call,
        which reaches its last chance then, waits for that answer instead of failing
        fast: the probe's success closes the breaker and B's call goes.  Before (a
        helper's find), the fleet's state said "open, the next probe past your deadline"
        while an early probe was out, and B ended with exit 7 (8 POSTs sharing a last
        chance: 4 of 8 in 8 of 21 runs)."""
        down = self.mock.url("/v1/x", plan="503")
        brk = dict(CURLGUARD_BREAKER_COOLDOWN_S="20", CURLGUARD_BREAKER_COOLDOWN_MAX_S="20",
                   CURLGUARD_BREAKER_JITTER="0")
        p = self.curl([down] * 5, self.machine_env("a", CURLGUARD_MAX_ATTEMPTS="1", **brk))
        self.assertEqual(p.stdout.decode().split(), ["503"] * 5, p.stderr)
        back = self.mock.url("/v1/x", plan="200:delay=300,200")   # the first answer slow
        env_a, env_b = self.machine_env("a", **brk), self.machine_env("b", **brk)
        harness.skip_unsanitizable([harness.CURL], env_a)
        argv = [harness.CURL, "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-d", "{}",
                "--max-time", "2", back]
        a = subprocess.Popen(argv, env=env_a, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(0.15)
        b = subprocess.Popen(argv, env=env_b, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        outs = [x.communicate(timeout=30) for x in (a, b)]
        self.assertEqual([(a.returncode, outs[0][0]), (b.returncode, outs[1][0])],
                         [(0, b"200"), (0, b"200")], outs)
        self.assertEqual(len(self.mock.entries(url=back)), 2)

    def test_a_cooldown_longer_than_the_cap_is_kept_on_redis(self):
        """CURLGUARD_BREAKER_COOLDOWN_S=6 with the cap left at its default (shorter): the
        state file's breaker waits 6 s before its probe (the cap is never below the first
        cooldown, breaker.c cg__cap_s), and so must the fleet's.  Before (a helper's find),
        Redis was given the cap alone and probed after 2 s."""
        down = self.mock.url("/v1/cap", plan="503")
        brk = dict(CURLGUARD_BREAKER_COOLDOWN_S="6", CURLGUARD_BREAKER_JITTER="0")
        p = self.curl([down] * 5, self.machine_env("a", CURLGUARD_MAX_ATTEMPTS="1", **brk))
        self.assertEqual(p.stdout.decode().split(), ["503"] * 5, p.stderr)
        opened = time.monotonic()
        self.assertTrue(self.redis.cli("GET", self.key(harness.mock_pool(), "brk")),
                        "not open in Redis")
        healed = self.mock.url("/v1/cap", plan="200")
        p = self.curl(healed, self.machine_env("b", **brk), ("--max-time", "30"))
        self.assertEqual((p.returncode, p.stdout), (0, b"200\n"), p.stderr)
        self.assertGreater(time.monotonic() - opened, 5.8, "probed before the cooldown")

    def test_a_failed_early_probe_s_retry_after_is_a_floor_on_redis(self):
        """Machine A opens the fleet's breaker (10 s cooldown); machine B's call (deadline
        2 s) is the early probe at its last chance and gets a 503 with Retry-After: 30: the
        fleet's next probe is no sooner than 30 s from then (its fail count kept), as the
        state file's.  Before (a helper's find), the hint was dropped and the cooldown the
        early probe found (about 8 s on) was kept."""
        down = self.mock.url("/v1/floor", plan="503")
        brk = dict(CURLGUARD_BREAKER_COOLDOWN_S="10", CURLGUARD_BREAKER_JITTER="0")
        p = self.curl([down] * 5, self.machine_env("a", CURLGUARD_MAX_ATTEMPTS="1", **brk))
        self.assertEqual(p.stdout.decode().split(), ["503"] * 5, p.stderr)
        brk_key = self.key(harness.mock_pool(), "brk")
        opened = self.redis.cli("GET", brk_key)
        self.assertTrue(opened, "not open in Redis")
        hinted = self.mock.url("/v1/floor", plan="503:ra=30")
        base = len(self.mock.entries(url=hinted))
        p = self.curl(hinted, self.machine_env("b", **brk), ("--max-time", "2"))
        self.assertEqual((p.returncode, p.stdout), (0, b"503\n"), p.stderr)
        self.assertEqual(len(self.mock.entries(url=hinted)) - base, 1, "the early probe")
        now_s, now_us = self.redis.cli("TIME").split()
        nxt, fails = self.redis.cli("GET", brk_key).split(":")
        left = (int(nxt) - (int(now_s) * 1000000 + int(now_us))) / 1e6
        self.assertGreater(left, 25, (opened, nxt))
        self.assertLessEqual(left, 30, (opened, nxt))
        self.assertEqual(fails, opened.split(":")[1])

    def fleet_answered_then_open(self, name, answer, **extra):
        """Machine B's answers took `answer` (its state file keeps that time); then machine
        A opens the fleet's breaker (1 s cooldown, no jitter).  -> (plan key, URL, the
        breaker's settings, requests so far): the test stores the plan for what follows."""
        key = harness.unique_key(name)
        url = self.mock.url(f"/v1/{name}", plan="@" + key)
        brk = dict(dict(CURLGUARD_BREAKER_COOLDOWN_S="1", CURLGUARD_BREAKER_COOLDOWN_MAX_S="2",
                        CURLGUARD_BREAKER_JITTER="0"), **extra)
        self.mock.set_plan(key, [answer])
        p = self.curl([url] * 2, self.machine_env("b", **brk), ("-d", "{}"))
        self.assertEqual(p.stdout.decode().split(), ["200"] * 2, p.stderr)
        self.mock.set_plan(key, ["503"])
        p = self.curl([url] * 5, self.machine_env("a", CURLGUARD_MAX_ATTEMPTS="1", **brk))
        self.assertEqual(p.stdout.decode().split(), ["503"] * 5, p.stderr)
        self.assertTrue(self.redis.cli("GET", self.key(harness.mock_pool(), "brk")),
                        "not open in Redis")
        return key, url, brk, len(self.mock.entries(url=url))

    def test_a_stalled_probe_is_taken_over_across_the_fleet(self):
        """Machine B's answers took 20 ms (kept in its state file); machine A opens the
        fleet's breaker; 6 POSTs on B with --max-time 6 are held, and the probe's request
        hangs for 20 s (the outage is over, the other requests answer in 20 ms).  The
        probe's lease in Redis is cut to the pool's answer time (2 s here, breaker.h
        cg_breaker_probe_max_ms): a held call takes it over and closes the breaker.
        Before, the lease ran to the probe call's deadline and every call waited for it:
        0 of 6."""
        key, url, brk, n = self.fleet_answered_then_open("stall", "200:delay=20")
        self.mock.set_plan(key, ["503"] * n + ["200:delay=20000", "200:delay=20"])
        ps = self.parallel([(url, self.machine_env("b", **brk),
                             ("-d", "{}", "--max-time", "6")) for _ in range(6)])
        self.assertEqual(sorted(p.stdout for p in ps), [b"000\n"] + [b"200\n"] * 5,
                         [p.stderr for p in ps])
        self.assertLessEqual(len(self.mock.entries(url=url)) - n, 7)

    def test_a_slow_probe_is_taken_over_once_across_the_fleet(self):
        """As the state file's test_a_slow_probe_is_taken_over_once: machine B's answers
        took 50 ms, the fleet's breaker opens, the provider comes back with 8 s answers.
        The probe's 2 s lease in Redis runs out; the held call that takes it over has seen
        it out, raises the kept answer time to that lease and holds 11 s.  Two requests
        while half-open; before, one every 2 s."""
        key, url, brk, n = self.fleet_answered_then_open("slow", "200:delay=50")
        self.mock.set_plan(key, ["503"] * n + ["200:delay=8000"])
        ps = self.parallel([(url, self.machine_env("b", **brk),
                             ("-d", "{}", "--max-time", "30")) for _ in range(6)])
        self.assertEqual([p.stdout for p in ps], [b"200\n"] * 6, [p.stderr for p in ps])
        got = sorted(self.mock.entries(url=url)[n:], key=lambda e: e["t"])
        first_answer = min(e["t_end"] for e in got)
        self.assertEqual(len([e for e in got if e["t"] < first_answer]), 2, got)

    def test_a_taken_over_probe_s_late_failure_does_not_reopen(self):
        """Machine B's answers took 20 ms; the fleet's breaker opens; 6 POSTs on B are held
        and the probe's request takes 5 s to fail (504).  Its 2 s lease runs out, a held
        call takes it over and succeeds: the breaker closes at about 3 s.  The stalled
        probe's 504 at about 6 s then counts as any attempt's and leaves it closed.  Before
        (a helper's find), it re-opened the closed breaker for the whole fleet."""
        key, url, brk, n = self.fleet_answered_then_open("stale", "200:delay=20",
                                                         CURLGUARD_BREAKER_RAMP_S="1")
        brk_key = self.key(harness.mock_pool(), "brk")
        self.mock.set_plan(key, ["503"] * n + ["504:delay=5000", "200:delay=20"])
        res = {}
        held = threading.Thread(target=lambda: res.setdefault("ps", self.parallel(
            [(url, self.machine_env("b", **brk), ("-d", "{}", "--max-time", "12"))
             for _ in range(6)])))
        held.start()
        seen, t0 = [], time.monotonic()
        while time.monotonic() - t0 < 8:
            v = bool(self.redis.cli("GET", brk_key))
            if not seen or seen[-1] != v:
                seen.append(v)
            time.sleep(0.05)
        held.join(30)
        self.assertEqual(sorted(p.stdout for p in res["ps"]), [b"200\n"] * 5 + [b"504\n"],
                         [p.stderr for p in res["ps"]])
        self.assertEqual(seen, [True, False], "open, closed, and never open again")

    def test_a_probe_that_reaches_its_own_deadline_is_not_slow_on_redis(self):
        """As the state file's test: machine B's answers took 20 ms, the fleet's breaker
        opens and the provider hangs; B's probe (--max-time 1.5) ends at its own deadline,
        shorter than its lease, so the calls held for it that ask again after its key
        expired do not raise B's kept answer time (the key's value says whether its lease
        set the expiry).  A call with --max-time 2 then still gets its early probe when the
        provider answers 503.  Before (a second helper's find), B's kept time climbed from
        20 ms to 30 s and such calls failed fast (exit 7)."""
        key, url, brk, n = self.fleet_answered_then_open("own", "200:delay=20",
                                                         CURLGUARD_BREAKER_COOLDOWN_MAX_S="8")
        self.mock.set_plan(key, ["200:delay=60000"])
        env = self.machine_env("b", **brk)
        harness.skip_unsanitizable([harness.CURL], env)

        def start(max_time):
            return subprocess.Popen([harness.CURL, "-sS", "-o", "/dev/null", "-w",
                                     "%{http_code}", "-d", "{}", "--max-time", max_time, url],
                                    env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        probe = start("1.5")
        deadline = time.monotonic() + 5
        while len(self.mock.entries(url=url)) == n:        # it is the probe at about 1 s
            self.assertLess(time.monotonic(), deadline, "no probe went")
            time.sleep(0.02)
        held = [start("1.2") for _ in range(3)]
        outs = [p.communicate(timeout=30) for p in [probe] + held]
        self.assertEqual(probe.returncode, 28, outs[0])
        self.mock.set_plan(key, ["503"])
        p = self.curl(url, env, ("-d", "{}", "--max-time", "2"))
        self.assertEqual((p.returncode, p.stdout), (0, b"503\n"), p.stderr)

    def test_one_probe_across_the_fleet(self):
        """Open, cooldown over: 6 processes on 3 machines at once, the probe slow (1.5 s):
        exactly one request reaches the provider while it runs; without Redis, one probe
        per machine."""
        def open_and_probe(redis):
            fails = 5 if redis else 15     # each machine of the control opens its own
            slow = self.mock.url("/v1/slow", plan=",".join(["503"] * fails + ["200:delay=1500"]))
            env = dict(CURLGUARD_MAX_ATTEMPTS="1", CURLGUARD_BREAKER_COOLDOWN_S="0.5",
                       CURLGUARD_BREAKER_COOLDOWN_MAX_S="0.5", CURLGUARD_BREAKER_JITTER="0",
                       CURLGUARD_BREAKER_OPEN="fail")
            envs = [self.machine_env(f"{'r' if redis else 'l'}{m}", redis=redis, **env)
                    for m in range(3)]
            for e in envs:            # each machine opens (without Redis: its own breaker)
                p = self.curl([slow] * 5, e)
                if redis:
                    break
            base = len(self.mock.entries(url=slow))
            time.sleep(0.8)
            ps = self.parallel([(slow, envs[i % 3], ()) for i in range(6)])
            time.sleep(0.2)
            probes = len(self.mock.entries(url=slow)) - base
            codes = sorted(p.returncode for p in ps)
            return probes, codes
        probes, codes = open_and_probe(True)
        self.assertEqual(probes, 1, codes)
        self.assertEqual(codes, [0] + [7] * 5)
        self.prefix = harness.unique_key("t") + ":"
        probes, codes = open_and_probe(False)
        self.assertGreaterEqual(probes, 2, "control: one probe per machine without Redis")


class FleetBudgetTest(RedisTestCase):
    def test_one_retry_budget_for_the_fleet(self):
        """A budget of one retry per window (ratio 0, 0.1/s over 10 s): machine A's failing
        call gets it, machine B's does not; without Redis each machine has its own."""
        env = dict(CURLGUARD_MAX_ATTEMPTS="2", CURLGUARD_BACKOFF_BASE_MS="10",
                   CURLGUARD_BACKOFF_CAP_MS="20", CURLGUARD_DEADLINE_MS="1500",
                   CURLGUARD_BREAKER="off", CURLGUARD_RETRY_BUDGET_RATIO="0",
                   CURLGUARD_RETRY_BUDGET_MIN_PER_S="0.1", CURLGUARD_RETRY_BUDGET_WINDOW_S="10")

        def run(redis):
            down = self.mock.url("/v1/budget", plan="503")
            for m in ("a", "b"):
                p = self.curl(down, self.machine_env(f"{m}{redis}", redis=redis, **env))
                self.assertEqual(p.stdout.decode().split(), ["503"], p.stderr)
            return len(self.mock.entries(url=down))
        self.assertEqual(run(True), 3, "A: 2 attempts, B: 1 (its retry refused)")
        self.assertEqual(run(False), 4, "control: each machine's own budget")
        recs = harness.read_records(self.tmp / "bTrue.jsonl")
        self.assertEqual(recs[-1]["reason"], "retry_budget_exhausted", recs[-1])


class FleetLearnedRateTest(RedisTestCase):
    def test_a_throttle_seen_by_one_machine_cuts_every_machine(self):
        """No rpm configured (the learned rate, limiter.h): machine A's 429 cuts A's rate
        and, through Redis, machine B's (B never got a 429); without Redis B's is uncut."""
        def run(redis):
            tag = "r" if redis else "l"
            a_url = self.mock.url("/v1/learn-a", plan="200,200,429,200")
            b_url = self.mock.url("/v1/learn-b", plan="200")
            env_a = self.machine_env(f"a{tag}", redis=redis, CURLGUARD_MAX_ATTEMPTS="2",
                                     CURLGUARD_BACKOFF_BASE_MS="50",
                                     CURLGUARD_BACKOFF_CAP_MS="100")
            env_b = self.machine_env(f"b{tag}", redis=redis)
            # B keeps calling (20/s for 1.5 s) while A meets its 429.
            ps = self.parallel([([a_url] * 3, env_a, ()),
                                ([b_url] * 30, env_b, ("--rate", "20/s"))])
            for p in ps:
                self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(429, [e["status"] for e in self.mock.entries(url=a_url)])
            self.assertNotIn(429, [e["status"] for e in self.mock.entries(url=b_url)])
            st = harness.run([harness.CLI, "stat", "--json"],
                             harness.plain_env(CURLGUARD_STATE=env_b["CURLGUARD_STATE"]),
                             timeout=30)
            pool = {x["name"]: x for x in json.loads(st.stdout)["pools"]}[harness.mock_pool()]
            return pool["learned"]["w_max_rpm"]
        self.assertIsNotNone(run(True), "B's learned rate was not cut through Redis")
        self.assertIsNone(run(False), "control: B cut without Redis")


class FleetKeyedHoldTest(RedisTestCase):
    def test_a_429_holds_its_limit_key_across_the_fleet(self):
        """limiter.h keyed holds through Redis: machine A's 429 for one API key holds
        machine B's calls of that key (B never saw a 429), not B's calls of another key."""
        k = harness.unique_key("kh")
        body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}]})

        def post(url, env, key):
            return self.curl(url, env, ("-H", f"Authorization: Bearer {key}", "-H",
                                        "Content-Type: application/json", "-d", body))

        env_a = self.machine_env("a", CURLGUARD_MAX_ATTEMPTS="1")
        env_b = self.machine_env("b")
        a_url = self.mock.url(CHAT, plan="429:ra=2", key=k + "a")
        self.assertEqual(post(a_url, env_a, "sk-one").stdout, b"429\n")
        (ea,) = self.mock.wait_entries(url=a_url)
        # The fleet's stat shows the keyed hold (it showed hold_ms 0 and nothing of the
        # key; helper-64), in --json and --prometheus alike.
        st = harness.run([harness.CLI, "stat", "--json"],
                         harness.plain_env(CURLGUARD_STATE=env_a["CURLGUARD_STATE"],
                                           CURLGUARD_REDIS=self.redis.url,
                                           CURLGUARD_REDIS_PREFIX=self.prefix), timeout=30)
        fleet = {x["name"]: x for x in json.loads(st.stdout)["pools"]}[harness.mock_pool()]["fleet"]
        self.assertEqual(fleet["held_keys"], 1, fleet)
        self.assertGreater(fleet["key_hold_ms"], 500, fleet)
        self.assertLessEqual(fleet["key_hold_ms"], 2000, fleet)
        st = harness.run([harness.CLI, "stat", "--prometheus"],
                         harness.plain_env(CURLGUARD_STATE=env_a["CURLGUARD_STATE"],
                                           CURLGUARD_REDIS=self.redis.url,
                                           CURLGUARD_REDIS_PREFIX=self.prefix), timeout=30)
        self.assertIn(f'curlguard_fleet_held_keys{{pool="{harness.mock_pool()}"}} 1'.encode(),
                      st.stdout)
        for name, key in (("other", "sk-two"), ("same", "sk-one")):
            u = self.mock.url(CHAT, plan="200", key=k + name)
            p = post(u, env_b, key)
            self.assertEqual((p.returncode, p.stdout), (0, b"200\n"), p.stderr)
            (e,) = self.mock.wait_entries(url=u)
            gap = e["t"] - ea["t"]
            if name == "same":
                self.assertGreaterEqual(gap, 1.9, f"B's call of A's key went {gap:.3f} s after "
                                                  "A's 429")
                self.assertLess(gap, 5.0)
            else:
                self.assertLess(gap, 1.0, f"B's call of another key was held {gap:.3f} s")


class FleetInflightTest(RedisTestCase):
    def test_kill9_returns_slots(self):
        """MAX_INFLIGHT 2 across the fleet: machine A's two slow calls hold both slots
        (machine B cannot get one within 1.5 s); after kill -9 of A's processes their
        leases expire and B's call goes within seconds."""
        env_a = self.machine_env("a", CURLGUARD_MAX_INFLIGHT="2")
        env_b = self.machine_env("b", CURLGUARD_MAX_INFLIGHT="2", CURLGUARD_DEADLINE_MS="1500")
        holders = [self.start_slow_curl(self.mock.url("/v1/hold", plan="200:delay=30000"), env_a)
                   for _ in range(2)]
        try:
            pool = harness.mock_pool()
            self.assertEqual(self.redis.cli("ZCARD", self.key(pool, "inflight")), "2")
            fast = self.mock.url("/v1/fast", plan="200")
            t0 = time.monotonic()
            p = self.curl(fast, env_b)
            self.assertNotEqual(p.returncode, 0, "B got a slot held by A")
            self.assertEqual(self.mock.entries(url=fast), [])
            time.sleep(1.5)      # A renews its leases meanwhile: still held after 3 s
            p = self.curl(fast, env_b)
            self.assertNotEqual(p.returncode, 0, "A's leases expired while A was alive")
        finally:
            for h in holders:
                os.killpg(h.pid, signal.SIGKILL)
                h.wait(10)
        t0 = time.monotonic()
        env_b2 = self.machine_env("b", CURLGUARD_MAX_INFLIGHT="2", CURLGUARD_DEADLINE_MS="15000")
        p = self.curl(fast, env_b2)
        took = time.monotonic() - t0
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertLess(took, 6.0, f"slots of the killed machine came back after {took:.1f} s")


    def busy_machine(self, env, n=20):
        """Machine A: one curl making `n` back-to-back 200 ms calls (one lease each,
        given back and asked for again at once).  Returns it once its first call is in."""
        slow = self.mock.url("/v1/busy", plan="200:delay=200")
        argv = [harness.CURL, "-sS", "-w", "%{http_code}\\n"]
        for i in range(n):
            argv += ["-o", "/dev/null", slow + f"&i={i}"]
        harness.skip_unsanitizable([harness.CURL], env)
        a = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + 10
        while not self.mock.entries(url=slow):
            self.assertLess(time.monotonic(), deadline, "machine A never started")
            time.sleep(0.02)
        return a

    def waiter_is_served_in_turn(self, args):
        """MAX_INFLIGHT 1 on Redis: while machine A keeps re-taking the one lease, machine
        B's call (`args`) waits in the pool's queue and gets the lease A gives back next.
        Before the queue, B's polls lost every race to A's next call (A asks within a
        millisecond of giving its lease back; B every 5 to 100 ms) and B's call failed
        at its deadline: "rate limit wait 0.0 s exceeds deadline"."""
        env_a = self.machine_env("a", CURLGUARD_MAX_INFLIGHT="1")
        env_b = self.machine_env("b", CURLGUARD_MAX_INFLIGHT="1", CURLGUARD_DEADLINE_MS="3000")
        a = self.busy_machine(env_a)
        try:
            fast = self.mock.url("/v1/fast", plan="200")
            t0 = time.monotonic()
            p = self.curl([fast] * (2 if "-Z" in args else 1), env_b, args)
            took = time.monotonic() - t0
            self.assertEqual((p.returncode, p.stdout.split()),
                             (0, [b"200"] * (2 if "-Z" in args else 1)), p.stderr)
            self.assertLess(took, 2.0, f"B waited {took:.2f} s for a 200 ms lease")
            print(f"\n[redis queue] B ({' '.join(args) or 'easy'}) served in {took:.2f} s "
                  f"while A kept re-taking the lease", flush=True)
            self.assertIsNone(a.poll(), "A was still busy: B got its lease in turn")
        finally:
            os.killpg(a.pid, signal.SIGKILL)
            a.wait(10)

    def test_a_waiter_gets_the_lease_in_turn(self):
        self.waiter_is_served_in_turn(())

    def test_a_multi_driver_waiter_gets_the_lease_in_turn(self):
        self.waiter_is_served_in_turn(("-Z",))

    def test_a_waiter_that_gives_up_leaves_the_queue(self):
        """A call that gives up waiting (its deadline) leaves the queue at once: the
        lease it was waiting for goes to the next caller without a pause."""
        env_a = self.machine_env("a", CURLGUARD_MAX_INFLIGHT="1")
        holder = self.start_slow_curl(self.mock.url("/v1/hold", plan="200:delay=5000"), env_a)
        try:
            env_b = self.machine_env("b", CURLGUARD_MAX_INFLIGHT="1",
                                     CURLGUARD_DEADLINE_MS="500")
            pool = harness.mock_pool()
            for args in ((), ("-Z",)):     # the easy driver; the multi driver
                p = self.curl([self.mock.url("/v1/gives-up", plan="200")] * 2, env_b, args)
                self.assertEqual(p.returncode, 28, p.stderr)
                self.assertIn(b"curlguard: no in-flight slot of", p.stderr)
                self.assertEqual(self.redis.cli("ZCARD", self.key(pool, "inq")), "0", args)
        finally:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait(10)


# argv: REDIS_PORT OWN URL...; one JSON line on stdout.  Between requests the host closes
# every descriptor above 2 (a daemon's close loop) and opens files of its own until it
# holds every number a socket had (the Redis connection's among them), as its next
# open(2)s would.  After each request it lists its connections to Redis a program it ran
# would inherit (no close-on-exec).
CLOSE_LOOP = harness.PYCURL_HOST_START + r"""
port, own, urls = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
out = {"answers": [], "mine": [], "kept": [], "redis": 0, "inherited": []}
mine = []
for i, url in enumerate(urls):
    out["answers"].append(fetch(url)[0])
    now = open_fds()
    out["kept"].append(all(now.get(fd) == own + str(k) for k, fd in enumerate(mine)))
    inodes = tcp_to(port)
    for fd, what in now.items():
        if what in inodes:
            out["redis"] += 1
            if not fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC:
                out["inherited"].append(fd)
    if i == len(urls) - 1:
        break
    socks = [fd for fd, what in now.items() if what.startswith("socket:")]
    os.closerange(3, 1 << 16)
    mine = []
    while socks and len(mine) < 256:
        mine.append(os.open(own + str(len(mine)), os.O_RDWR | os.O_CREAT, 0o600))
        if mine[-1] >= max(socks):
            break
    out["mine"].append(mine)
print(json.dumps(out))
"""


# argv: REDIS_PORT URL URL; one JSON line on stdout.  The host closes its stdin and stderr
# first (two numbers: the state file, opened before the connection, may take one); after
# the first request it lists its descriptors that are TCP connections to Redis.
NO_STDERR = harness.PYCURL_HOST_START + r"""
port, urls = int(sys.argv[1]), sys.argv[2:]
os.close(0)
os.close(2)
out = {"answers": [fetch(urls[0])[0]]}
inodes = tcp_to(port)
fds = [fd for fd, what in open_fds().items() if what in inodes]
out["redis_fds"] = len(fds)
out["redis_low"] = [fd for fd in fds if fd <= 2]
out["redis_inherited"] = [fd for fd in fds if not fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC]
out["answers"].append(fetch(urls[1])[0])
print(json.dumps(out))
"""


# argv: URL N; one JSON line on stdout.  One request, then N more, each from a new thread
# (a thread's first call tries to connect to Redis: no backoff carried over); counts the
# host's socket descriptors before and after (libcurl closes its own with each handle).
THREADS_DOWN = harness.PYCURL_HOST_START + r"""
url, n = sys.argv[1], int(sys.argv[2])
codes = []

def sockets():
    return sum(what.startswith("socket:") for what in open_fds().values())

codes.append(fetch(url)[0])
before = sockets()
for i in range(n):
    t = threading.Thread(target=lambda: codes.append(fetch(url)[0]))
    t.start()
    t.join()
print(json.dumps({"codes": codes, "before": before, "after": sockets()}))
"""


class FleetHostDescriptorTest(RedisTestCase):
    def test_host_closes_and_reuses_the_redis_descriptor(self):
        """A host that closes every descriptor between requests and opens files of its own
        on the numbers (the Redis connection's among them): the guard connects again,
        quietly, and never writes into, reads or closes the host's file.  Before, the next
        command went to the host's file and the failed connection's redisFree closed the
        host's descriptor (with a "redis connection lost" line)."""
        harness.require_pycurl()
        script = self.tmp / "host.py"
        script.write_text(CLOSE_LOOP)
        urls = [self.mock.url(f"/v1/redis/fd/{i}", plan="200") for i in range(3)]
        own = str(self.tmp / "own-")
        p = harness.run([harness.PYTHON, script, str(self.redis.port), own, *urls],
                        self.machine_env("a", CURLGUARD_MAX_INFLIGHT="1"), timeout=60)
        self.assertEqual(p.returncode, 0, p)
        self.assertEqual(p.stderr, b"", "Redis did not fail: nothing to say")
        out = json.loads(p.stdout)
        self.assertEqual(out["answers"], [200] * 3)
        self.assertEqual(out["kept"], [True] * 3, f"a host descriptor was closed: {out}")
        self.assertGreaterEqual(out["redis"], 3, "the guard's connections were seen")
        self.assertEqual(out["inherited"], [],
                         "a Redis connection a program the host runs would inherit")
        for mine in out["mine"]:
            self.assertGreaterEqual(len(mine), 2, out)
        for f in self.tmp.glob("own-*"):
            self.assertEqual(f.read_bytes(), b"", f"the guard wrote into the host's {f.name}")
        for u in urls:
            self.assertEqual(len(self.mock.wait_entries(url=u)), 1)
        pool = harness.mock_pool()
        self.assertEqual(self.redis.cli("ZCARD", self.key(pool, "inflight")), "0",
                         "every lease given back")
        self.assertEqual(self.redis.cli("GET", self.key(pool, "admitted")), "3",
                         "every request admitted through Redis")

    def test_host_with_stderr_closed_keeps_the_redis_socket_off_it(self):
        """A host that runs with stdin and stderr closed (`<&- 2>&-`, a daemon): the Redis
        connection is never descriptor 0, 1 or 2, so what the host writes to "stderr"
        cannot go to Redis as commands.  Before, the connection, made before libcurl's,
        took number 2 (the state file number 0)."""
        harness.require_pycurl()
        script = self.tmp / "noerr.py"
        script.write_text(NO_STDERR)
        urls = [self.mock.url(f"/v1/redis/noerr/{i}", plan="200") for i in range(2)]
        p = harness.run([harness.PYTHON, script, str(self.redis.port), *urls],
                        self.machine_env("a", CURLGUARD_MAX_INFLIGHT="1"), timeout=60)
        self.assertEqual(p.returncode, 0, p)
        out = json.loads(p.stdout)
        self.assertEqual(out["answers"], [200] * 2)
        self.assertEqual(out["redis_low"], [], "a Redis connection on a standard stream")
        self.assertEqual(out["redis_inherited"], [],
                         "a Redis connection a program the host runs would inherit")
        self.assertGreaterEqual(out["redis_fds"], 1, "the guard's connection was seen")
        pool = harness.mock_pool()
        self.assertEqual(self.redis.cli("GET", self.key(pool, "admitted")), "2")

    def test_redis_down_leaks_no_socket(self):
        """Redis refuses every connect (nothing listens on its port): each thread's failed
        connect is freed with its socket.  Before, hiredis left the socket open and the
        drop's identity check took it for the host's: one socket leaked per attempt, about
        720 an hour per thread at the 5 s backoff, until the host ran out of descriptors."""
        harness.require_pycurl()
        script = self.tmp / "down.py"
        script.write_text(THREADS_DOWN)
        env = self.machine_env("a", CURLGUARD_REDIS=f"redis://127.0.0.1:{free_port()}")
        url = self.mock.url("/v1/redis/down", plan="200")
        p = harness.run([harness.PYTHON, script, url, "20"], env, timeout=60)
        self.assertEqual(p.returncode, 0, p)
        out = json.loads(p.stdout)
        self.assertEqual(out["codes"], [200] * 21)
        self.assertEqual(out["after"], out["before"], f"sockets leaked: {out}")
        lines = self.redis_lines(p)
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("cannot connect", lines[0])


@unittest.skipUnless(harness.CGMULTI.exists(), "build/tests/cgmulti is not built")
class FleetMultiHostTest(RedisTestCase):
    """A multi-API host (cgmulti: one process, many transfers in one multi handle, the
    non-blocking admission of README "The multi API") is one machine of the fleet like any
    other: admitted, paced and given in-flight slots through Redis, not its state file."""

    def multi(self, urls, env, timeout=90):
        return harness.run([harness.CGMULTI, *urls], env, timeout=timeout)

    def test_multi_host_and_serial_curl_hold_one_rpm(self):
        """Machine A: cgmulti with 12 transfers at once; machine B: one serial curl of 12
        calls; RPM 240 (4/s, burst 4) on both: through Redis the 24 requests reach the mock
        (enforcing 240/min) no faster than (24 - 4) / (4 * 0.97) s, none refused, and all
        24 are Redis's admissions.  (A multi host on its state file alone sends 4/s besides
        B's 4/s: twice the rate, and half the admissions missing from Redis.)"""
        n, rate, burst = 24, 4 * 0.97, 4
        # The mock's bucket holds one request more than the guard's burst (as the
        # single-host test above): requests paced right but delayed on a loaded machine
        # reach it bunched; two machines each at 4/s would still be refused by the dozen.
        with LimitedMock("--limit-rpm", "240", "--limit-burst", "5") as mock:
            key = harness.unique_key("fm")
            urls = [mock.url(f"/v1/fleet-multi/{i}", key=key) for i in range(12)]
            env_a = self.machine_env("a", CURLGUARD_RPM="240", CURLGUARD_ADAPTIVE="off")
            env_b = self.machine_env("b", CURLGUARD_RPM="240", CURLGUARD_ADAPTIVE="off")
            out = {}
            barrier = threading.Barrier(2)
            harness.skip_unsanitizable([harness.CURL], env_b)  # not from inside run_b

            def run_a():
                barrier.wait(10)
                out["a"] = self.multi(urls, env_a)

            def run_b():
                barrier.wait(10)
                out["b"] = self.curl(urls, env_b, timeout=90)

            ts = [threading.Thread(target=f) for f in (run_a, run_b)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(120)
            a, b = out["a"], out["b"]
            self.assertEqual(a.returncode, 0, a.stderr)
            self.assertEqual(b.returncode, 0, b.stderr)
            self.assertEqual(a.stdout.count(b" 0 200 "), 12, a.stdout)
            self.assertEqual(b.stdout.decode().split(), ["200"] * 12)
            for p in (a, b):
                self.assertEqual(self.redis_lines(p), [], "the guard said something")
            seen = mock.ledger()
            self.assertEqual(len(seen), n, "a request was refused and retried")
            times = sorted(e["t"] for e in seen)
            span = times[-1] - times[0]
            self.assertGreaterEqual(span, (n - burst) / rate - 0.3, f"too fast: {span:.2f} s")
            self.assertLess(span, (n - burst) / rate + 8, f"too slow: {span:.2f} s")
            self.assertEqual(int(self.redis.cli("GET", self.key(f"127.0.0.1:{mock.port}",
                                                                "admitted")) or 0), n)

    def test_multi_host_inflight_slots_are_redis_leases_given_back(self):
        """MAX_INFLIGHT 2: cgmulti's 6 transfers of 1 s each hold 2 leases in Redis at a
        time (never more), take at least 3 s, and leave none behind: every lease comes
        back as its transfer ends (ZCARD 0 well before a lease could expire on its own)."""
        key = harness.unique_key("fl")
        urls = [self.mock.url(f"/v1/fleet-lease/{i}", plan="200:delay=1000", key=key)
                for i in range(6)]
        env = self.machine_env("a", CURLGUARD_MAX_INFLIGHT="2")
        zkey = self.key(harness.mock_pool(), "inflight")
        samples, done = [], threading.Event()

        def sample():
            while not done.is_set():
                v = self.redis.cli("ZCARD", zkey)
                samples.append(int(v) if v.isdigit() else -1)
                time.sleep(0.05)

        t = threading.Thread(target=sample)
        t.start()
        t0 = time.monotonic()
        try:
            g = self.multi(urls, env)
        finally:
            took = time.monotonic() - t0
            done.set()
            t.join(15)
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(g.stdout.count(b" 0 200 "), 6, g.stdout)
        self.assertEqual(self.redis_lines(g), [], "the guard said something")
        self.assertGreaterEqual(took, 3.0 - 0.2, f"6 x 1 s, 2 at a time, took {took:.2f} s")
        self.assertEqual(max(samples), 2, f"leases in Redis during the run: {samples}")
        # Given back (sent as each transfer ends, not waited for): gone within a second,
        # where an expiry would take CG_REDIS_LEASE_MS (3 s).
        deadline = time.monotonic() + 1.0
        while self.redis.cli("ZCARD", zkey) != "0" and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.redis.cli("ZCARD", zkey), "0", "a lease was leaked")


class FleetLearnedPacingTest(RedisTestCase):
    """The learned rate on Redis paces as the state file's does (README "One limiter for
    every process on the machine": a fresh pool starts at 2/s with a burst of 4 and, in
    slow start, reaches thousands per second within milliseconds against a fast service;
    nothing is reserved for a call that does not go).  Before the fix the fleet's word was
    moved 0.5 s forward per admission and never back as the rate grew (a fresh pool's
    burst queued for about 2 s), and polls refused an in-flight slot moved it too."""

    def queue_ms(self, name):
        return [r.get("queue_ms") or 0 for r in harness.read_records(self.tmp / f"{name}.jsonl")]

    def parallel_run(self, name, redis, n=30, plan="200", **kw):
        key = harness.unique_key("lp")
        urls = [self.mock.url(f"/v1/learn-par/{i}", plan=plan, key=key) for i in range(n)]
        env = self.machine_env(name, redis=redis, **kw)
        t0 = time.monotonic()
        p = self.curl(urls, env, args=("--parallel", "--parallel-max", "50"), timeout=90)
        wall = time.monotonic() - t0
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.decode().split(), ["200"] * n)
        self.assertEqual(self.redis_lines(p), [], "the guard said something")
        return wall, self.queue_ms(name)

    def test_fresh_pool_parallel_burst_is_not_queued(self):
        """curl --parallel, 30 fast transfers, no limit configured, a fresh pool: no
        transfer queues more than 300 ms, and the wall time stays near the state file's."""
        file_wall, _ = self.parallel_run("file", redis=False)
        wall, q = self.parallel_run("red", redis=True)
        self.assertEqual(len(q), 30, q)
        self.assertLess(max(q), 300, f"queue_ms through Redis: {sorted(q)}")
        self.assertLess(wall, file_wall + 1.0,
                        f"through Redis {wall:.2f} s, the state file {file_wall:.2f} s")

    def test_fresh_pool_concurrent_processes_are_not_queued(self):
        """20 curl processes at once, one fast call each, a fresh pool: none queues more
        than 300 ms (the state file's slow start lets them all go within milliseconds)."""
        url = self.mock.url("/v1/learn-procs", plan="200")
        env = self.machine_env("procs")
        ps = self.parallel([([url], env, ())] * 20)
        for p in ps:
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(self.redis_lines(p), [], "the guard said something")
        q = self.queue_ms("procs")
        self.assertEqual(len(q), 20, q)
        self.assertLess(max(q), 300, f"queue_ms through Redis: {sorted(q)}")

    def test_inflight_one_polls_do_not_take_learned_places(self):
        """MAX_INFLIGHT 1, six 0.5 s transfers through curl --parallel: one after the other,
        3 s of transfers and short idle gaps (the slot's poll), under 4.5 s in all; an ask
        refused its slot takes no place of the learned rate."""
        wall, q = self.parallel_run("one", redis=True, n=6, plan="200:delay=500",
                                    CURLGUARD_MAX_INFLIGHT="1")
        self.assertGreaterEqual(wall, 3.0 - 0.2, f"six 0.5 s one at a time in {wall:.2f} s")
        self.assertLess(wall, 4.5, f"six 0.5 s transfers one at a time took {wall:.2f} s")


class FleetFailOpenTest(RedisTestCase):
    def loop(self, env, n, rpm="600"):
        url = self.mock.url("/v1/loop", plan="200")
        env = dict(env, CURLGUARD_RPM=rpm)
        holder = {}
        harness.skip_unsanitizable([harness.CURL], env)  # not from inside go()

        def go():
            holder["p"] = self.curl([url] * n, env, timeout=60)
        t = threading.Thread(target=go)
        t.start()
        return t, holder, url

    def assertNoCallWaited(self, holder, url, n, redis):
        """The loop's n calls all got their 200, none waited on `redis` Redis (the largest
        gap between arrivals stays below 0.6 s) and one to three lines said something:
        returns them."""
        p = holder["p"]
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.decode().split(), ["200"] * n)
        times = sorted(e["t"] for e in self.mock.entries(url=url))
        gap = max(b - a for a, b in zip(times, times[1:]))
        self.assertLess(gap, 0.6, f"a call waited {gap:.2f} s on {redis} Redis")
        lines = self.redis_lines(p)
        self.assertGreaterEqual(len(lines), 1)
        self.assertLessEqual(len(lines), 3, lines)
        return lines

    def test_redis_killed_and_restarted_midrun(self):
        """60 calls at 10/s from one process; Redis killed after 1 s, restarted 1 s later:
        every call succeeds, a few `curlguard: redis` lines (one per cause), and the same
        process goes back to Redis (the reconnect backoff, 100 ms doubling, reaches it
        within the run)."""
        env = self.machine_env("m")
        t, holder, url = self.loop(env, 60)
        time.sleep(1.0)
        self.redis.kill()
        time.sleep(1.0)
        self.redis.start()
        t.join(70)
        p = holder["p"]
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.decode().split(), ["200"] * 60)
        lines = self.redis_lines(p)
        self.assertGreaterEqual(len(lines), 1, "nothing said about Redis going away")
        self.assertLessEqual(len(lines), 3, lines)
        for l in lines:
            self.assertIn("redis", l)
            self.assertIn("local state", l)
        admitted = self.redis.cli("GET", self.key(harness.mock_pool(), "admitted"))
        self.assertTrue(admitted and int(admitted) >= 1, "never back on Redis after the restart")

    def test_one_outage_says_one_line(self):
        """One process, 100 calls at 10/s.  Redis killed (SIGKILL) for 1.2 s: the process
        says "connection lost" once, and its refused reconnects during that outage say
        nothing more; back on Redis after the restart, a second outage (SIGSTOP, 1 s) of
        another cause says its own line.  Before, the first outage gave two lines
        ("connection lost", then "cannot connect", one per cause; helper-66)."""
        env = self.machine_env("m")
        t, holder, url = self.loop(env, 100)
        time.sleep(1.0)
        self.redis.kill()
        time.sleep(1.2)             # reconnects 0.1, 0.3, 0.7 s after the loss: refused
        self.redis.start()
        time.sleep(3.5)             # the next, 1.5 s after the loss (or 3.1 s), finds it
        back = self.redis.cli("GET", self.key(harness.mock_pool(), "admitted"))
        self.redis.kill(signal.SIGSTOP)
        time.sleep(1.0)
        self.redis.kill(signal.SIGCONT)
        t.join(70)
        p = holder["p"]
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.decode().split(), ["200"] * 100)
        self.assertTrue(back and int(back) >= 1, "not back on Redis after the restart")
        lines = self.redis_lines(p)
        self.assertEqual(len(lines), 2, lines)
        self.assertIn("connection lost", lines[0])
        self.assertIn("timed out", lines[1])
        for l in lines:
            self.assertIn("local state", l)

    def test_a_second_outage_of_the_same_cause_says_its_line(self):
        """One process, 100 calls at 10/s.  Redis killed for 1.2 s, back for 3 s, killed
        again for 1.2 s: two outages, both "connection lost", two lines (the second
        numbered), and back on Redis after each.  Before, the second said nothing (one
        line per cause and process), so a service's later outages went unseen."""
        env = self.machine_env("m")
        t, holder, url = self.loop(env, 100)
        backs = []
        time.sleep(1.0)
        for _ in range(2):
            self.redis.kill()
            time.sleep(1.2)
            self.redis.start()
            time.sleep(3.0)         # the reconnect 1.5 s (or 3.1 s) after the loss finds it
            backs.append(self.redis.cli("GET", self.key(harness.mock_pool(), "admitted")))
        t.join(70)
        p = holder["p"]
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.decode().split(), ["200"] * 100)
        for back in backs:
            self.assertTrue(back and int(back) >= 1, "not back on Redis after a restart")
        lines = self.redis_lines(p)
        self.assertEqual(len(lines), 2, lines)
        for l in lines:
            self.assertIn("connection lost", l)
            self.assertIn("local state", l)
        self.assertNotIn("outage", lines[0])
        self.assertIn("outage 2 of this process", lines[1])

    def test_a_step_back_of_the_redis_clock_holds_no_call(self):
        """The Redis host's wall clock (TIME, which the scripts reckon in) steps back 120 s
        during 40 calls paced at 600 rpm, each with its own 10 s deadline (-m), then 0.9 s
        more: every call gets its 200 and none waits out a step.  Before, every time stored ahead of the
        server's clock lay 120 s further ahead after the step: each call after it failed at
        once with 28 ("rate limit wait 117 s exceeds deadline"), nothing said about Redis."""
        if not CC:
            self.skipTest("no C compiler")
        shim = self.tmp / "clockshift.so"
        src = self.tmp / "clockshift.c"
        src.write_text(CLOCKSHIFT_C)
        subprocess.run([CC, "-shared", "-fPIC", "-O2", "-o", str(shim), str(src), "-ldl"],
                       check=True, capture_output=True, timeout=60)
        shift = self.tmp / "shift.txt"
        shift.write_text("0")
        r = Redis(env={"LD_PRELOAD": str(shim), "CLOCKSHIFT_FILE": str(shift)}).start()
        try:
            env = self.machine_env("m", CURLGUARD_REDIS=r.url, CURLGUARD_RPM="600")
            url = self.mock.url("/v1/clockstep", plan="200")
            holder = {}
            harness.skip_unsanitizable([harness.CURL], env)

            def go():
                holder["p"] = self.curl([url] * 40, env, args=("-m", "10"), timeout=90)
            t = threading.Thread(target=go)
            t.start()
            time.sleep(1.5)
            shift.write_text("-120")
            time.sleep(1.0)
            shift.write_text("-120.9")     # and a step of 0.9 s, as ntpd makes (128 ms up)
            t.join(100)
            p = holder["p"]
            self.assertEqual(p.stdout.decode().split(), ["200"] * 40, p.stderr)
            times = sorted(e["t"] for e in self.mock.entries(url=url))
            gap = max(b - a for a, b in zip(times, times[1:]))
            self.assertLess(gap, 0.7, f"a call waited {gap:.2f} s after the clock's step")
            self.assertEqual(self.redis_lines(p), [])
            # Paced by Redis all along (40 at 600 rpm: 10 a second after the burst), and
            # the pool's clock key says how far the server's clock went back.
            self.assertGreaterEqual(times[-1] - times[0], 2.0)
            clock = r.cli("GET", self.key(harness.mock_pool(), "clock"))
            self.assertGreaterEqual(int(clock.split(":")[1]), 120 * 1000000, clock)
        finally:
            r.stop()

    def test_redis_stopped_midrun_no_hang(self):
        """SIGSTOP of redis-server for 1.5 s during 20 calls: no call waits on it (the largest
        gap between arrivals stays far below the stop), one or two lines."""
        env = self.machine_env("m")
        t, holder, url = self.loop(env, 30, rpm="1200")
        time.sleep(0.5)
        self.redis.kill(signal.SIGSTOP)
        time.sleep(1.5)
        self.redis.kill(signal.SIGCONT)
        t.join(70)
        self.assertNoCallWaited(holder, url, 30, "a stopped")

    def test_redis_stopped_lines_name_a_timeout_in_words(self):
        """SIGSTOP of redis-server for 2.5 s during a multi host's run (cgmulti: 120
        transfers at once, paced at 1200 rpm; a host that also runs under ASan), then SIGCONT: the
        lines say it timed out (in words, with the 50 ms), never blame the password (the
        reconnect's AUTH timing out is a timeout too), and hold only printable text (no
        error text read from a freed connection).  Redis with a password, so the
        reconnect sends AUTH."""
        r = Redis("--requirepass", "sesame").start()
        try:
            key = harness.unique_key("st")
            urls = [self.mock.url(f"/v1/stopped/{i}", plan="200:delay=50", key=key)
                    for i in range(120)]
            env = self.machine_env("m", CURLGUARD_REDIS=f"redis://:sesame@127.0.0.1:{r.port}",
                                   CURLGUARD_RPM="1200")
            holder = {}

            def go():
                holder["p"] = harness.run([harness.CGMULTI, *urls], env, timeout=90)
            t = threading.Thread(target=go)
            t.start()
            time.sleep(0.5)
            r.kill(signal.SIGSTOP)
            time.sleep(2.5)
            r.kill(signal.SIGCONT)
            t.join(100)
            p = holder["p"]
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout.count(b" 0 200 "), 120, p.stdout)
            raw = re.findall(rb"curlguard:[^\r\n]*", p.stderr)
            self.assertGreaterEqual(len(raw), 1, f"nothing said about the stop: {p.stderr!r}")
            for l in raw:
                self.assertTrue(all(32 <= c < 127 for c in l), f"not text: {l!r}")
                txt = l.decode()
                self.assertNotIn("auth", txt.lower(), txt)
                self.assertNotIn("password", txt, txt)
                self.assertNotRegex(txt, r": ;|:\s*$", txt)
                self.assertIn("local state", txt)
            self.assertTrue(any("timed out after 50 ms" in l.decode() for l in raw), raw)
        finally:
            r.stop()

    def test_a_short_deadline_is_not_spent_on_a_stopped_redis(self):
        """Redis stopped (SIGSTOP: connects, never answers) and calls with a deadline
        shorter than Redis's 50 ms timeout (`curl -m 0.045`, easy and multi): each call
        waits on Redis at most half of what its deadline leaves, then goes by the state
        file, so every request reaches the provider, and the line says the deadline cut
        the wait.  Before, each call spent 50 ms on Redis and ended with 28, nothing sent
        (helper-64).  The requests are counted at the mock, not the answers: a slow machine
        may still let a deadline of 45 ms pass after the send."""
        url = self.mock.url("/v1/short-deadline", plan="200", key=harness.unique_key("sd"))
        env = self.machine_env("m")
        self.redis.kill(signal.SIGSTOP)
        try:
            ps = [self.curl([url], env, args=("-m", "0.045")) for _ in range(3)]
            ps.append(self.curl([url] * 3, env, args=("-Z", "--parallel-immediate", "-m",
                                                      "0.045")))
        finally:
            self.redis.kill(signal.SIGCONT)
        self.assertEqual(len(self.mock.wait_entries(url=url, count=6, timeout=10)), 6,
                         [(p.returncode, p.stderr) for p in ps])
        for p in ps:
            lines = self.redis_lines(p)
            self.assertGreaterEqual(len(lines), 1, p.stderr)
            self.assertTrue(all("local state" in l for l in lines), lines)
            self.assertTrue(any("as long as the call's deadline allowed" in l
                                for l in lines), lines)

    def test_queue_ms_counts_the_round_trips_to_a_stopped_redis(self):
        """Redis stopped (SIGSTOP): a call's admission waits 50 ms for the set-up's reply
        (its deadline, -m 5, allows more), then goes by the state file.  Its record's
        queue_ms (SPEC 5: the time it waited before it was sent) holds those 50 ms, easy
        and multi (curl -Z) alike; before, it said 0 (helper-66)."""
        url = self.mock.url("/v1/queue-stopped", plan="200", key=harness.unique_key("qs"))
        runs = []
        self.redis.kill(signal.SIGSTOP)
        try:
            for name, args in (("easy", ("-m", "5")), ("multi", ("-Z", "-m", "5"))):
                env = self.machine_env(name)
                t0 = time.monotonic()
                p = self.curl([url], env, args=args)
                runs.append((name, p, time.monotonic() - t0))
        finally:
            self.redis.kill(signal.SIGCONT)
        for name, p, took in runs:
            self.assertEqual(p.stdout.split(), [b"200"], (name, p.stderr))
            self.assertTrue(any("timed out after 50 ms" in l for l in self.redis_lines(p)),
                            (name, p.stderr))
            (rec,) = harness.read_records(self.tmp / f"{name}.jsonl")
            self.assertGreaterEqual(rec["queue_ms"], 45, (name, rec))
            self.assertLessEqual(rec["queue_ms"], took * 1000, (name, rec))

    def test_redis_answering_slowly(self):
        """DEBUG SLEEP 1 from a redis-cli in the background while a process makes 20 calls:
        no call waits on it (gaps far below 1 s), and a line says so."""
        env = self.machine_env("m")
        t, holder, url = self.loop(env, 20, rpm="1200")
        time.sleep(0.4)
        sleeper = subprocess.Popen([REDIS_CLI, "-p", str(self.redis.port), "DEBUG", "SLEEP",
                                    "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t.join(70)
        sleeper.wait(10)
        lines = self.assertNoCallWaited(holder, url, 20, "a sleeping")
        self.assertTrue(any("timed out after 50 ms" in l for l in lines), lines)

    def one_line(self, redis_url, must=None, **kw):
        url = self.mock.url("/v1/bad", plan="200")
        env = self.machine_env("m", CURLGUARD_REDIS=redis_url, **kw)
        p = self.curl([url] * 3, env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.decode().split(), ["200"] * 3)
        lines = self.redis_lines(p)
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("local state", lines[0])
        if must:
            self.assertIn(must, lines[0])
        return lines[0]

    def test_bad_urls(self):
        self.one_line("redis://127.0.0.1:notaport", "CURLGUARD_REDIS")
        self.one_line("http://127.0.0.1:6379", "CURLGUARD_REDIS")
        self.one_line("rediss://127.0.0.1:6379", "rediss:// not supported")
        self.one_line(f"redis://127.0.0.1:{harness.closed_port()}", "connect")
        self.one_line(f"redis://127.0.0.1:{self.redis.port}/999", "SELECT")

    def test_wrong_password(self):
        r = Redis("--requirepass", "sesame").start()
        try:
            self.one_line(f"redis://:wrong@127.0.0.1:{r.port}", "redis refused the password")
            self.one_line(f"redis://127.0.0.1:{r.port}", "requires a password")
            # The right one: shared, nothing said.
            url = self.mock.url("/v1/pw", plan="200")
            env = self.machine_env("m", CURLGUARD_REDIS=f"redis://:sesame@127.0.0.1:{r.port}/2")
            p = self.curl(url, env)
            self.assertEqual(self.redis_lines(p), [])
            self.assertEqual(r.cli("-n", "2", "GET", self.key(harness.mock_pool(), "admitted"),
                                   password="sesame"), "1")
        finally:
            r.stop()

    def test_an_acl_user_logs_in_as_itself(self):
        # Redis 6 ACL: alice with her own password; the default user has another.  Before,
        # the user was dropped: alice was refused (AUTH with her password as the default
        # user's) and a user that does not exist got in with the default user's password.
        r = Redis("--requirepass", "defpw", "--user", "alice", "on", ">alicepw", "~*",
                  "+@all").start()
        try:
            url = self.mock.url("/v1/acl", plan="200")
            env = self.machine_env("m", CURLGUARD_REDIS=f"redis://alice:alicepw@127.0.0.1:{r.port}")
            p = self.curl(url, env)
            self.assertEqual(p.stdout.strip(), b"200")
            self.assertEqual(self.redis_lines(p), [])
            self.assertEqual(r.cli("--user", "alice", "--pass", "alicepw", "--no-auth-warning",
                                   "GET", self.key(harness.mock_pool(), "admitted")), "1")
            self.one_line(f"redis://nobody:defpw@127.0.0.1:{r.port}", "redis refused the password")
            # "default" is Redis's own user: the password alone, as before.
            env = self.machine_env("d", CURLGUARD_REDIS=f"redis://default:defpw@127.0.0.1:{r.port}")
            p = self.curl(url, env)
            self.assertEqual(self.redis_lines(p), [])
        finally:
            r.stop()

    def test_a_percent_encoded_user_and_password_log_in(self):
        # RFC 3986 3.2.1: a userinfo's '@', ':', '/', '%' and '#' are written %XX, as
        # redis-cli -u and redis-py's from_url read them.  Before, the user and the password
        # were sent as written: the encoded forms were refused.
        pw, user, upw = "p@ss:w/rd%#1", "ops:a@b/%#", "u@s:e/r%#2"
        r = Redis("--requirepass", pw, "--user", user, "on", ">" + upw, "~*",
                  "+@all").start()
        try:
            url = self.mock.url("/v1/pct", plan="200")
            admitted = self.key(harness.mock_pool(), "admitted")
            env = self.machine_env("m", CURLGUARD_REDIS="redis://ops%3Aa%40b%2F%25%23:"
                                   f"u%40s%3Ae%2Fr%25%232@127.0.0.1:{r.port}")
            p = self.curl(url, env)
            self.assertEqual(p.stdout.strip(), b"200")
            self.assertEqual(self.redis_lines(p), [])
            self.assertEqual(r.cli("--user", user, "--pass", upw, "--no-auth-warning",
                                   "GET", admitted), "1")
            # The default user's, lower-case hex, db 2.
            env = self.machine_env("d", CURLGUARD_REDIS="redis://:p%40ss%3aw%2frd%25%231"
                                   f"@127.0.0.1:{r.port}/2")
            p = self.curl(url, env)
            self.assertEqual(p.stdout.strip(), b"200")
            self.assertEqual(self.redis_lines(p), [])
            self.assertEqual(r.cli("-n", "2", "GET", admitted, password=pw), "1")
            # Written raw: a '%' that is not %XX is said in one line, the calls go on with
            # the local state and none is admitted through Redis.
            self.one_line(f"redis://{user}:{upw}@127.0.0.1:{r.port}", "not %XX")
            self.one_line(f"redis://:{pw}@127.0.0.1:{r.port}", "not %XX")
            # A raw ':' splits the user: "ops", the rest its password, refused by Redis.
            self.one_line("redis://ops:a%40b%2F%25%23:u%40s%3Ae%2Fr%25%232"
                          f"@127.0.0.1:{r.port}", "redis refused the password")
            self.assertEqual(r.cli("GET", admitted, password=pw), "1")
        finally:
            r.stop()

    def test_key_of_wrong_type(self):
        pool = harness.mock_pool()
        self.redis.cli("HSET", self.key(pool, "tat_req"), "a", "b")
        self.one_line(self.redis.url, "WRONGTYPE", CURLGUARD_RPM="600")


class HostileRedis:
    """A server on 127.0.0.1 that speaks enough of Redis's protocol for the guard to
    connect (SCRIPT LOAD answered with made-up SHA1s), then answers every other command
    as `mode` says: "drip" (a bulk string of 100 MB announced, then a byte every 30 ms),
    "bigbulk" (4 MiB of a 1 GB bulk string, fast), "bigarray" (an array of 2^31 - 1
    elements announced), "admit_late" (an admission after a wait of 9 * 10^12 µs),
    "int64max" and "int64min" (every script's answer 8 integers of that value), "ints"
    (every command's answer an array of 4 small integers, where Redis gives strings),
    "hangup" (the connection closed at the first command after SCRIPT LOAD: a flapping
    Redis, each connection made and set up, then lost)."""

    def __init__(self, mode):
        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self.accept, daemon=True).start()

    def close(self):
        self.stop.set()
        self.sock.close()

    def accept(self):
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        buf, n = b"", 0
        try:
            while not self.stop.is_set():
                d = c.recv(65536)
                if not d:
                    return
                buf += d
                # one command a RESP array: "*N", then N "$len" + data; only whole ones
                while buf.startswith(b"*"):
                    head, _, rest = buf.partition(b"\r\n")
                    argv, ok = [], True
                    for _ in range(int(head[1:])):
                        ln, _, rest = rest.partition(b"\r\n")
                        size = int(ln[1:]) if ln[:1] == b"$" else -1
                        if size < 0 or len(rest) < size + 2:
                            ok = False
                            break
                        argv.append(rest[:size])
                        rest = rest[size + 2:]
                    if not ok:
                        break
                    buf = rest
                    if argv[0].upper() == b"SCRIPT":
                        c.sendall(b"$40\r\n" + (b"%02d" % n).ljust(40, b"f") + b"\r\n")
                        n += 1
                    elif self.mode == "hangup":
                        return
                    elif self.mode == "drip":
                        c.sendall(b"$100000000\r\n")
                        while not self.stop.is_set():
                            c.sendall(b"x")
                            time.sleep(0.03)
                    elif self.mode == "bigbulk":
                        c.sendall(b"$1000000000\r\n" + b"x" * (4 << 20))
                    elif self.mode == "bigarray":
                        c.sendall(b"*2147483647\r\n")
                    elif self.mode in ("int64max", "int64min"):
                        v = b"9223372036854775807" if self.mode == "int64max" \
                            else b"-9223372036854775808"
                        c.sendall(b"*8\r\n" + (b":" + v + b"\r\n") * 8)
                    elif self.mode == "ints":
                        c.sendall(b"*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n")
                    else:
                        c.sendall(b"*6\r\n:0\r\n:9000000000000\r\n:0\r\n:-1\r\n:-1\r\n:0\r\n")
        except OSError:
            pass
        finally:
            c.close()


class HostileRedisTest(harness.GuardTestCase):
    """A Redis (or something between the guard and it) that answers without end, too much,
    or a wait past the call's deadline: each call of the host still ends within its own
    deadline, as plain, with one `curlguard:` line, its memory bounded.  (hiredis 0.14
    bounds each read, not a reply's reads or size: a dripping reply held `curl -m 3` for
    25 s and more, 1 GB took 2 GB of memory, an array of 2^31 elements 7 s a call; a
    reserve's wait from the network was slept whole.)"""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_curl()

    def test_each_call_ends_in_time(self):
        # int64max, int64min: before, every call was held as "circuit open, probe in
        # flight" until its deadline (int64max), or refused at once with "rate limit wait
        # 0.0 s exceeds deadline" (int64min): verdicts and waits out of range were used
        for mode in ("drip", "bigbulk", "bigarray", "admit_late", "int64max", "int64min"):
            with self.subTest(mode):
                server = HostileRedis(mode)
                try:
                    url = self.mock.url(f"/v1/hostile-redis/{mode}", plan="200")
                    env = self.guard_env(CURLGUARD_REDIS=f"redis://127.0.0.1:{server.port}",
                                         CURLGUARD_STATE=str(self.tmp / f"{mode}.state"))
                    t0 = time.monotonic()
                    p = harness.run([harness.CURL, "-sS", "-m", "5", "-w", "%{http_code}\n",
                                     "-o", "/dev/null", url, "-o", "/dev/null", url],
                                    env, timeout=30)
                    took = time.monotonic() - t0
                finally:
                    server.close()
                self.assertEqual((p.returncode, p.stdout), (0, b"200\n200\n"), p.stderr)
                self.assertLess(took, 2.5, f"{mode}: {took:.1f} s")
                lines = [x for x in p.stderr.decode().splitlines() if x]
                self.assertEqual(len(lines), 1, lines)
                self.assertTrue(lines[0].startswith("curlguard: redis"), lines)

    def test_a_flapping_redis_says_ten_outages_at_most(self):
        """A Redis lost right after each connection is set up: every call (120 ms each)
        begins an outage, and each says its line, numbered, up to the tenth, which says
        later ones are said one an hour at most (the hour: test-shared-redis); the calls
        themselves go on with the state file."""
        server = HostileRedis("hangup")
        try:
            url = self.mock.url("/v1/hostile-redis/hangup", plan="200:delay=120")
            env = self.guard_env(CURLGUARD_REDIS=f"redis://127.0.0.1:{server.port}",
                                 CURLGUARD_STATE=str(self.tmp / "hangup.state"))
            p = harness.run([harness.CURL, "-sS", "-w", "%{http_code}\n"] +
                            ["-o", "/dev/null", url] * 30, env, timeout=60)
        finally:
            server.close()
        self.assertEqual((p.returncode, p.stdout), (0, b"200\n" * 30), p.stderr)
        lines = [x for x in p.stderr.decode().splitlines() if x]
        self.assertEqual(len(lines), 10, lines)
        for k, line in enumerate(lines, 1):
            self.assertTrue(line.startswith("curlguard: redis connection lost"), line)
            self.assertEqual(f"outage {k} of this process" in line, k > 1, line)
        self.assertIn("later ones are said one an hour at most", lines[-1])

    def test_stat_survives_replies_of_the_wrong_type(self):
        """`curlguard stat` against a server that answers with integers where Redis gives
        strings (TIME, HGETALL): it shows what it can, as for any reply it cannot use.
        Before, it died of SIGSEGV (strtol of a NULL string)."""
        url = self.mock.url("/v1/hostile-redis/stat", plan="200")
        p = harness.run([harness.CURL, "-sS", "-o", "/dev/null", url],
                        self.guard_env(), timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        server = HostileRedis("ints")
        try:
            for args in (["stat"], ["stat", "--json"]):
                with self.subTest(args):
                    st = harness.run([harness.CLI, *args], harness.plain_env(
                        CURLGUARD_STATE=str(self.state),
                        CURLGUARD_REDIS=f"redis://127.0.0.1:{server.port}"), timeout=30)
                    self.assertEqual(st.returncode, 0, st.stderr)
                    self.assertIn(harness.mock_pool().encode(), st.stdout)
        finally:
            server.close()


class FleetSymbolsTest(unittest.TestCase):
    def test_hiredis_is_not_exported(self):
        """hiredis is linked in statically with its symbols hidden: a host linking its own
        hiredis keeps its own (nm -D shows none of it)."""
        lib = harness.LIB
        if not lib.exists():
            self.skipTest("not built")
        p = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        names = [l.split()[-1] for l in p.stdout.splitlines() if l.strip()]
        self.assertTrue(names, "nm -D listed nothing")
        leaked = [n for n in names if "redis" in n.lower() or n.startswith("sds")]
        self.assertEqual(leaked, [])
        p = subprocess.run(["nm", str(lib)], capture_output=True, text=True, timeout=30)
        self.assertIn("redisConnectWithTimeout", p.stdout, "hiredis is not linked in")


class FleetStatTest(RedisTestCase):
    def test_stat_shows_fleet(self):
        url = self.mock.url("/v1/stat", plan="200")
        env = self.machine_env("m", CURLGUARD_RPM="600")
        p = self.curl([url] * 3, env)
        self.assertEqual(p.returncode, 0, p.stderr)
        st = harness.run([harness.CLI, "stat", "--json"],
                         harness.plain_env(CURLGUARD_STATE=env["CURLGUARD_STATE"],
                                           CURLGUARD_REDIS=self.redis.url,
                                           CURLGUARD_REDIS_PREFIX=self.prefix), timeout=30)
        self.assertEqual(st.returncode, 0, st.stderr)
        j = json.loads(st.stdout)
        self.assertEqual(j["redis"]["url"], self.redis.url)
        pool = {x["name"]: x for x in j["pools"]}[harness.mock_pool()]
        self.assertEqual(pool["fleet"]["admitted"], 3)
        self.assertEqual(pool["fleet"]["breaker"], "closed")
        txt = harness.run([harness.CLI, "stat"],
                          harness.plain_env(CURLGUARD_STATE=env["CURLGUARD_STATE"],
                                            CURLGUARD_REDIS=self.redis.url,
                                            CURLGUARD_REDIS_PREFIX=self.prefix), timeout=30)
        self.assertIn(b"shared through redis", txt.stdout)

    def test_stat_says_when_the_user_may_not_run_the_scripts(self):
        # An ACL user that may connect but not run EVALSHA, or whose key patterns leave
        # the pool's keys out: every guarded call falls back to the local file (one line),
        # and stat called that Redis reachable.  Now it says why it is not usable.
        r = Redis("--user", "noeval", "on", ">pw1", "~*", "+@all", "-evalsha", "-eval",
                  "--user", "nokeys", "on", ">pw2", "~other:*", "+@all",
                  "--user", "noload", "on", ">pw3", "~*", "+@all", "-script", "-eval").start()
        try:
            url = self.mock.url("/v1/stat-acl", plan="200")
            for user, why in (("noeval:pw1", "'evalsha' command"), ("nokeys:pw2", "keys"),
                              ("noload:pw3", "'script|load' command")):
                redis_url = f"redis://{user}@127.0.0.1:{r.port}"
                env = self.machine_env("a" + user[:3], CURLGUARD_REDIS=redis_url)
                p = self.curl(url, env)
                self.assertEqual(p.stdout.strip(), b"200")
                (line,) = self.redis_lines(p)
                self.assertIn("NOPERM", line)
                self.assertIn("local state file", line)
                for args in (("stat", "--json"), ("stat",)):
                    st = harness.run([harness.CLI, *args],
                                     harness.plain_env(CURLGUARD_STATE=env["CURLGUARD_STATE"],
                                                       CURLGUARD_REDIS=redis_url,
                                                       CURLGUARD_REDIS_PREFIX=self.prefix),
                                     timeout=30)
                    self.assertEqual(st.returncode, 0, st.stderr)
                    if args[-1] == "--json":
                        j = json.loads(st.stdout)
                        self.assertIs(j["redis"]["reachable"], False, j)
                        self.assertIn("NOPERM", j["redis"]["error"])
                        self.assertIn(why, j["redis"]["error"])
                        pool = {x["name"]: x for x in j["pools"]}[harness.mock_pool()]
                        self.assertIsNone(pool["fleet"], pool)
                    else:
                        self.assertIn(b"scripts are refused: NOPERM", st.stdout)
        finally:
            r.stop()

    def stat_json(self, env, redis_url=None):
        st = harness.run([harness.CLI, "stat", "--json"],
                         harness.plain_env(CURLGUARD_STATE=env["CURLGUARD_STATE"],
                                           CURLGUARD_REDIS=redis_url or self.redis.url,
                                           CURLGUARD_REDIS_PREFIX=self.prefix), timeout=60)
        self.assertEqual(st.returncode, 0, st.stderr)
        return json.loads(st.stdout)

    def test_stat_says_when_redis_refuses_the_guard_s_writes(self):
        """Out of memory under noeviction (OOM) and a read-only replica (READONLY, an old
        master after a failover): every guarded call falls back to its file with a line,
        and stat said reachable (its checks wrote nothing; helper-64).  Its script now
        writes as the guard's do."""
        r = Redis().start()
        try:
            url = self.mock.url("/v1/stat-oom", plan="200")
            env = self.machine_env("o", CURLGUARD_REDIS=r.url)
            p = self.curl(url, env)
            self.assertEqual(p.stdout.strip(), b"200")
            self.assertIs(self.stat_json(env, r.url)["redis"]["reachable"], True)
            for on, off, word in ((("CONFIG", "SET", "maxmemory", "1"),
                                   ("CONFIG", "SET", "maxmemory", "0"), "OOM"),
                                  (("REPLICAOF", "127.0.0.1", "1"),
                                   ("REPLICAOF", "NO", "ONE"), "READONLY")):
                r.cli(*on)
                try:
                    p = self.curl(url, self.machine_env("o" + word, CURLGUARD_REDIS=r.url))
                    self.assertEqual(p.stdout.strip(), b"200")
                    self.assertTrue(any(word in l for l in self.redis_lines(p)), p.stderr)
                    j = self.stat_json(env, r.url)
                    self.assertIs(j["redis"]["reachable"], False, j)
                    self.assertIn(word, j["redis"]["error"])
                finally:
                    r.cli(*off)
            self.assertIs(self.stat_json(env, r.url)["redis"]["reachable"], True)
        finally:
            r.stop()

    def prom(self, env, redis_url=None):
        cenv = harness.plain_env(CURLGUARD_STATE=env["CURLGUARD_STATE"],
                                 CURLGUARD_REDIS_PREFIX=self.prefix)
        if redis_url != "":                 # "": no Redis configured
            cenv["CURLGUARD_REDIS"] = redis_url or self.redis.url
        st = harness.run([harness.CLI, "stat", "--prometheus"], cenv, timeout=60)
        self.assertEqual(st.returncode, 0, st.stderr)
        out = {}
        for line in st.stdout.decode().splitlines():
            m = re.match(r'^(\w+)(?:\{pool="([^"]*)"\})? (\S+)$', line)
            if m:
                out[(m.group(1), m.group(2))] = float(m.group(3))
        return out

    def test_prometheus_shows_the_fleet_as_stat_json_does(self):
        """Machine A opens the fleet's breaker (5 failures): machine B, whose own file's
        breaker is closed, shows it open in `stat --prometheus` as in `stat --json`, with
        the fleet's other figures, and whether Redis is reachable.  Before, the metrics had
        no fleet figures: curlguard_breaker_state 0 and nothing else (helper-64)."""
        down = self.mock.url("/v1/prom-down", plan="503")
        env_a = self.machine_env("a", CURLGUARD_MAX_ATTEMPTS="1", CURLGUARD_BREAKER_COOLDOWN_S="30",
                                 CURLGUARD_BREAKER_COOLDOWN_MAX_S="30")
        p = self.curl([down] * 5, env_a)
        self.assertEqual(p.stdout.decode().split(), ["503"] * 5, p.stderr)
        env_b = self.machine_env("b", CURLGUARD_BREAKER_OPEN="fail")
        self.curl(self.mock.url("/v1/prom-other", plan="200"), env_b)
        pool = harness.mock_pool()
        j = {x["name"]: x for x in self.stat_json(env_b)["pools"]}[pool]
        prom = self.prom(env_b)
        self.assertEqual(prom[("curlguard_breaker_state", pool)], 0)   # B's own file
        self.assertEqual(j["fleet"]["breaker"], "open")
        self.assertEqual(prom[("curlguard_redis_reachable", None)], 1)
        self.assertEqual(prom[("curlguard_fleet_breaker_state", pool)], 1)
        for fam, key in (("curlguard_fleet_admitted_total", "admitted"),
                         ("curlguard_fleet_inflight", "inflight"),
                         ("curlguard_fleet_window_requests", "window_requests"),
                         ("curlguard_fleet_window_failures", "window_failures")):
            self.assertEqual(prom[(fam, pool)], j["fleet"][key], fam)
        self.assertGreater(prom[("curlguard_fleet_next_probe_seconds", pool)], 20)
        self.redis.kill(signal.SIGSTOP)
        try:
            prom = self.prom(env_b)
        finally:
            self.redis.kill(signal.SIGCONT)
        self.assertEqual(prom[("curlguard_redis_reachable", None)], 0)
        self.assertNotIn(("curlguard_fleet_breaker_state", pool), prom)
        env_c = self.machine_env("c", redis=False)
        self.curl(self.mock.url("/v1/prom-c", plan="200"), env_c)
        prom = self.prom(env_c, redis_url="")
        self.assertEqual(prom[("curlguard_state_ready", None)], 1)
        self.assertNotIn(("curlguard_redis_reachable", None), prom)

    def connections(self):
        """Connections the test's redis-server took so far (this redis-cli's included)."""
        info = self.redis.cli("INFO", "stats")
        return int(re.search(r"total_connections_received:(\d+)", info).group(1))

    def test_stat_asks_redis_on_one_connection(self):
        """Three pools with 3, 2 and 1 calls through Redis: `stat --json` and the text view
        each ask Redis on one connection for all of them, as --prometheus does, and each
        pool shows its own fleet figures.  Before, each pool had a connection of its own
        (3 for 3 pools; with a password, a connect and an AUTH each; helper-66)."""
        env = self.machine_env("c", CURLGUARD_MAX_ATTEMPTS="1")
        url = self.mock.url("/v1/stat-one", plan="200")
        refused = f"http://127.0.0.1:{harness.closed_port()}/v1/x"
        p = self.curl([url] * 3 + [url.replace("127.0.0.1", "localhost")] * 2 + [refused],
                      env, args=("--connect-timeout", "2"))
        self.assertEqual(p.stdout.decode().split(), ["200"] * 5 + ["000"], p.stderr)
        cenv = harness.plain_env(CURLGUARD_STATE=env["CURLGUARD_STATE"],
                                 CURLGUARD_REDIS=self.redis.url,
                                 CURLGUARD_REDIS_PREFIX=self.prefix)
        want = {harness.mock_pool(): 3, "localhost:" + harness.mock_pool().split(":")[1]: 2,
                refused.split("/")[2]: 1}
        for args in (("stat", "--json"), ("stat",)):
            before = self.connections()
            st = harness.run([harness.CLI, *args], cenv, timeout=30)
            self.assertEqual(st.returncode, 0, st.stderr)
            self.assertEqual(self.connections() - before - 1, 1, args)  # - 1: the INFO's
            if args[-1] == "--json":
                j = json.loads(st.stdout)
                self.assertIs(j["redis"]["reachable"], True, j)
                got = {x["name"]: x["fleet"]["admitted"] for x in j["pools"]}
            else:
                rows = st.stdout.decode().split("fleet_adm")[1].splitlines()[1:]
                got = {r.split()[0]: int(r.split()[1]) for r in rows if r.strip()}
            self.assertEqual(got, want, st.stdout)

    def test_stat_text_says_whether_redis_answers_with_no_pool(self):
        """No pool used yet (a state file just reset, or none at all): the text view says
        whether the configured Redis answers, in the words it uses with pools, as the JSON
        view does.  Before, it said nothing of Redis then (helper-66)."""
        state = self.tmp / "nopool.state"
        shown = f"pools shared through redis {self.redis.url} (prefix {self.prefix})"
        r = harness.run([harness.CLI, "reset"], harness.plain_env(CURLGUARD_STATE=str(state)))
        self.assertEqual(r.returncode, 0, r.stderr)
        for made in (True, False):
            if not made:
                state.unlink()
            for url, reachable in ((self.redis.url, True),
                                   (f"redis://127.0.0.1:{harness.closed_port()}", False)):
                cenv = harness.plain_env(CURLGUARD_STATE=str(state), CURLGUARD_REDIS=url,
                                         CURLGUARD_REDIS_PREFIX=self.prefix)
                txt = harness.run([harness.CLI, "stat"], cenv, timeout=30)
                self.assertEqual(txt.returncode, 0, txt.stderr)
                out = txt.stdout.decode()
                if reachable:
                    self.assertIn(shown + "\n", out)
                else:
                    self.assertRegex(out, r"pools shared through redis redis://127\.0\.0\.1:"
                                          r"\d+ \(prefix .*\): unreachable: .*refused")
                j = json.loads(harness.run([harness.CLI, "stat", "--json"], cenv,
                                           timeout=30).stdout)
                self.assertEqual(j["pools"], [])
                self.assertIs(j["exists"], made)
                self.assertIs(j["redis"]["reachable"], reachable, j)
                if not reachable:
                    self.assertIn(j["redis"]["error"], out)
        self.assertFalse(state.exists(), "stat made the state file")

    def test_stat_of_a_stopped_redis_asks_it_once(self):
        """12 pools and a stopped Redis (SIGSTOP): stat waits for its 500 ms timeout once,
        not once a pool (6 s before; 64 pools, half a minute; helper-64), and says it
        timed out in words (it said "Resource temporarily unavailable")."""
        env = self.machine_env("s", CURLGUARD_MAX_ATTEMPTS="1")
        ports = [free_port() for _ in range(11)]
        p = self.curl([self.mock.url("/v1/stat-stop", plan="200")] +
                      [f"http://127.0.0.1:{port}/v1/x" for port in ports], env,
                      args=("--connect-timeout", "2"))
        self.assertEqual(len(self.stat_json(env)["pools"]), 12, p.stderr)
        self.redis.kill(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            j = self.stat_json(env)
            took = time.monotonic() - t0
        finally:
            self.redis.kill(signal.SIGCONT)
        self.assertLess(took, 3.0)
        self.assertIs(j["redis"]["reachable"], False, j)
        self.assertIn("timed out after 500 ms", j["redis"]["error"])
        self.assertEqual([x["fleet"] for x in j["pools"]], [None] * 12)


if __name__ == "__main__":
    unittest.main()
