"""Prometheus metrics of the shared state file (SPEC section 6: `curlguard stat
--prometheus`, `curlguard exporter --listen ADDR`; README "Prometheus metrics").

Traffic goes through the guard (Debian's curl) to the mock provider; its usage log is the
ground truth the state file's tallies must match, `stat --json` must show the same numbers
as `stat --prometheus`, promtool must find the text clean, and a real Prometheus server
scraping the exporter must end up with the same values.  Everything on loopback, every
wait bounded."""

import collections
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import time
import unittest
import urllib.parse
import urllib.request

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

CHAT = "/v1/chat/completions"
PROMETHEUS = shutil.which("prometheus", path="/usr/bin:/bin") or shutil.which("prometheus")
PROMTOOL = shutil.which("promtool", path="/usr/bin:/bin") or shutil.which("promtool")
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')


def _unescape(v):
    return re.sub(r'\\(.)', lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), v)


def parse_prom(text):
    """{(name, frozenset of (label, value))): float} of a text exposition; fails on a
    line that is neither a comment nor a sample."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise AssertionError(f"not a sample line: {line!r}")
        labels = frozenset((k, _unescape(v)) for k, v in _LABEL.findall(m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


DASHBOARD = harness.ROOT / "contrib" / "grafana-curlguard.json"


def dashboard_exprs():
    """Every PromQL expression of the Grafana dashboard, with Grafana's variables replaced
    as Grafana would for "All" pools over the last hour."""
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    return [e.replace("$pool", ".*").replace("$__rate_interval", "1m")
             .replace("$__range", "1h") for e in exprs]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class MetricsTest(harness.GuardTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_curl_and_cli()

    # -- helpers

    def cli(self, *args, timeout=30):
        return harness.run([harness.CLI, *args],
                           harness.plain_env(CURLGUARD_STATE=str(self.state)), timeout=timeout)

    def stat_pool(self):
        p = self.cli("stat", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        pools = {x["name"]: x for x in json.loads(p.stdout)["pools"]}
        self.assertIn(harness.mock_pool(), pools, pools.keys())
        return pools[harness.mock_pool()]

    def prom_text(self):
        p = self.cli("stat", "--prometheus")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, b"")
        return p.stdout.decode("utf-8")

    def traffic(self, rpm=None, **env_over):
        """Calls of every kind the tallies count: ok with tokens and cost, a 503 and a 429
        retried, a final 404 and the host's repeat of it (a host retry), a final 500 on a
        POST (possibly billed), a GET's 500 retried.  `rpm`: the pool's limit (5 requests
        per second makes the limiter wait about a second in all); `env_over`: more of the
        guard's variables (CURLGUARD_LOG="off": no records, None is returned).  Returns the
        records."""
        env = self.guard_env(CURLGUARD_BACKOFF_BASE_MS=10, CURLGUARD_BACKOFF_CAP_MS=50,
                             CURLGUARD_RPM=rpm, **env_over)
        body = json.dumps({"model": "gpt-4o-mini",
                           "messages": [{"role": "user", "content": "Say hello, please."}]})
        urls = [[self.mock.url(CHAT, plan=plan)]
                for plan in ("200", "200", "503:ra=0,200", "429:ra=0,200", "404", "500")]
        urls[4] *= 2    # the same call again in the same process: a host retry of the 404
        for batch in urls:
            p = harness.run([harness.CURL, "-sS", "-H", "Content-Type: application/json",
                             "--data-binary", body] + [a for u in batch for a in
                                                       ("-o", "/dev/null", u)],
                            env, timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr)
        url = self.mock.url("/v1/models", plan="500,200")
        p = harness.run([harness.CURL, "-sS", "-o", "/dev/null", url], env, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        if env.get("CURLGUARD_LOG") == "off":
            return None
        recs = self.records()
        self.assertEqual(len(recs), 11, [(r["outcome"], r["decision"]) for r in recs])
        return recs

    def expected(self, recs):
        """The tallies `curlguard report` would count from the records."""
        known = lambda k: sum(r[k] for r in recs if r[k] is not None)   # noqa: E731
        return {
            "calls": sum(1 for r in recs if r["final"]),
            "calls_ok": sum(1 for r in recs if r["final"] and r["outcome"] == "ok"),
            "attempts": len(recs),
            "retries": sum(1 for r in recs if r["attempt"] > 1),
            "host_retry_calls": sum(1 for r in recs if r["final"] and r.get("repeat_of")),
            "queue_ms": sum(max(0, r["queue_ms"] - r["breaker_wait_ms"]) for r in recs),
            "possibly_billed": sum(1 for r in recs if r["possibly_billed"]),
            "prompt_tokens": known("prompt_tokens"),
            "completion_tokens": known("completion_tokens"),
            "cached_tokens": known("cached_tokens"),
            "cost_usd": known("cost_usd"),
            "outcomes": dict(collections.Counter(r["outcome"] for r in recs)),
        }

    def assertPromMatchesJson(self, value, pool):
        """`value(name, **labels)` (a float, None when absent) agrees with `stat --json`'s
        pool `pool` on every metric that has a JSON counterpart."""
        t, b, r = pool["tally"], pool["breaker"], pool["retry_budget"]
        pairs = [
            ("curlguard_calls_total", t["calls"]),
            ("curlguard_calls_ok_total", t["calls_ok"]),
            ("curlguard_attempts_total", t["attempts"]),
            ("curlguard_retries_total", t["retries"]),
            ("curlguard_host_retries_total", t["host_retry_calls"]),
            ("curlguard_possibly_billed_attempts_total", t["possibly_billed"]),
            ("curlguard_input_tokens_total", t["prompt_tokens"]),
            ("curlguard_output_tokens_total", t["completion_tokens"]),
            ("curlguard_cached_input_tokens_total", t["cached_tokens"]),
            ("curlguard_http_429_total", pool["seen_429"]),
            ("curlguard_limiter_admitted_total", pool["admitted"]),
            ("curlguard_limiter_waited_total", pool["waited"]),
            ("curlguard_limiter_rejected_total", pool["rejected"]),
            ("curlguard_breaker_opens_total", b["opened"]),
            ("curlguard_breaker_rejected_total", b["rejected"]),
            ("curlguard_breaker_probes_total", b["probes"]),
            ("curlguard_breaker_held_total", b["held"]),
            ("curlguard_budget_refusals_total", r["refused"]),
            ("curlguard_budget_rescued_total", r["rescued"]),
            ("curlguard_breaker_state", {"closed": 0, "open": 1, "half_open": 2}[b["state"]]),
            ("curlguard_inflight", pool["inflight"]),
            ("curlguard_inflight_limit", pool["max_inflight"]),
        ]
        for name, want in pairs:
            self.assertEqual(value(name), want, name)
        self.assertAlmostEqual(value("curlguard_cost_usd_total"), t["cost_usd"], places=9)
        self.assertAlmostEqual(value("curlguard_limiter_wait_seconds_total"), t["queue_s"],
                               places=3)
        self.assertAlmostEqual(value("curlguard_breaker_wait_seconds_total"),
                               t["breaker_wait_s"], places=3)
        learned = pool["learned"]["rpm"]
        got = value("curlguard_learned_rate_requests_per_second")
        if learned is None:
            self.assertEqual(got, 0)
        else:   # stat --json rounds requests per minute to 0.1
            self.assertAlmostEqual(got * 60, learned, delta=0.051)
        for outcome, n in t["outcomes"].items():
            self.assertEqual(value("curlguard_outcomes_total", outcome=outcome), n, outcome)

    def test_tally_is_the_same_with_the_log_off(self):
        """With the log off a record is filled only as far as the tally reads it, and a
        call's body digest and repeat key are made only when a failed call needs them
        (issue 16): the tallies, the host's repeat of the 404 among them, are those of the
        same traffic with the log on."""
        self.traffic()
        on = self.stat_pool()["tally"]
        os.rename(self.state, str(self.state) + ".on")
        self.traffic(CURLGUARD_LOG="off")
        off = self.stat_pool()["tally"]
        self.assertEqual(len(self.records()), 11, "the log-off run wrote records")
        for k in ("calls", "calls_ok", "attempts", "retries", "host_retry_calls",
                  "possibly_billed", "prompt_tokens", "completion_tokens", "cached_tokens",
                  "outcomes"):
            self.assertEqual(off[k], on[k], k)
        self.assertEqual(off["host_retry_calls"], 1)
        self.assertAlmostEqual(off["cost_usd"], on["cost_usd"], places=9)

    # -- stat --prometheus

    def test_stat_prometheus_matches_json_and_the_log(self):
        recs = self.traffic(rpm=300)
        pool = self.stat_pool()
        want = self.expected(recs)
        t = pool["tally"]
        for k in ("calls", "calls_ok", "attempts", "retries", "host_retry_calls",
                  "possibly_billed", "prompt_tokens", "completion_tokens", "cached_tokens",
                  "outcomes"):
            self.assertEqual(t[k], want[k], k)
        self.assertAlmostEqual(t["cost_usd"], want["cost_usd"], places=9)
        self.assertEqual(round(t["queue_s"] * 1000), want["queue_ms"])
        self.assertGreater(t["cost_usd"], 0)
        self.assertGreater(t["queue_s"], 0.2, "5 requests/s made nobody wait")
        self.assertGreater(pool["waited"], 0)
        self.assertEqual((t["calls"], t["retries"], t["host_retry_calls"]), (8, 3, 1))
        self.assertEqual(t["outcomes"]["http_503"], 1)
        self.assertEqual(t["outcomes"]["http_404"], 2)
        self.assertEqual(pool["seen_429"], 1)
        samples = parse_prom(self.prom_text())
        pool_name = harness.mock_pool()

        def value(name, **labels):
            return samples.get((name, frozenset({"pool": pool_name, **labels}.items())))
        self.assertEqual(samples[("curlguard_state_ready", frozenset())], 1)
        self.assertEqual(samples[("curlguard_pools", frozenset())], 1)
        self.assertPromMatchesJson(value, pool)
        self.assertEqual(value("curlguard_limit_requests_per_second"), 5)
        self.assertIsNone(value("curlguard_outcomes_total", outcome="dns_error"),
                          "an outcome never seen has no series")

    def test_dashboard_uses_only_exported_metrics(self):
        self.traffic()
        families = set(re.findall(r"^# TYPE (\S+) ", self.prom_text(), re.M))
        exprs = dashboard_exprs()
        self.assertGreaterEqual(len(exprs), 20)
        used = {n for e in exprs for n in re.findall(r"curlguard_[a-z0-9_]+", e)}
        self.assertFalse(used - families, "the dashboard names metrics nobody exports")
        for must in ("curlguard_calls_total", "curlguard_outcomes_total",
                     "curlguard_breaker_state", "curlguard_cost_usd_total",
                     "curlguard_learned_rate_requests_per_second",
                     "curlguard_budget_refusals_total", "curlguard_input_tokens_total"):
            self.assertIn(must, used)

    def test_promtool_check_metrics_is_clean(self):
        if not PROMTOOL:
            self.skipTest("promtool is not installed (Debian package prometheus; "
                          "scripts/install-deps installs it)")
        self.traffic()
        text = self.prom_text()
        p = harness.run([PROMTOOL, "check", "metrics"], harness.plain_env(), input=text,
                        timeout=60)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, b"", b""), text)

    def test_stat_prometheus_without_a_file_and_usage_errors(self):
        p = self.cli("stat", "--prometheus")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(parse_prom(p.stdout.decode()), {("curlguard_state_ready", frozenset()): 0})
        self.assertFalse(os.path.exists(self.state), "stat created the state file")
        p = self.cli("stat", "--prometheus", "--json")
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
        self.assertTrue(p.stderr.startswith(b"curlguard: stat: "), p.stderr)
        with open(self.state, "wb") as f:
            f.write(b"CGCGGRD1" + b"\0" * 292)   # a state file cut short
        p = self.cli("stat", "--prometheus")
        self.assertEqual(p.returncode, 1)
        self.assertRegex(p.stderr, rb"^curlguard: stat: state file .* shorter than layout 7")
        self.assertEqual(p.stdout, b"")
        with open(self.state, "wb") as f:
            f.write(b"\0" * 300)                  # not one: the guard would not re-make it
        p = self.cli("stat", "--prometheus")
        self.assertEqual(p.returncode, 1)
        self.assertRegex(p.stderr, rb"^curlguard: stat: state file .* is not a curlguard state "
                                   rb"file")
        self.assertEqual(p.stdout, b"")

    # -- the exporter

    def start_exporter(self, addr="127.0.0.1:0"):
        """`curlguard exporter --listen addr` and the port its first line names."""
        err = open(self.tmp / "exporter.err", "wb")
        self.addCleanup(err.close)
        proc = subprocess.Popen([str(harness.CLI), "exporter", "--listen", addr],
                                env=harness.plain_env(CURLGUARD_STATE=str(self.state)),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                start_new_session=True)
        self.addCleanup(self.stop, proc)
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        self.assertTrue(ready, "the exporter said nothing within 10 s")
        line = proc.stdout.readline().decode()
        m = re.match(r"curlguard exporter: listening on 127\.0\.0\.1:(\d+), serving /metrics "
                     r"of state file (.*)$", line.strip())
        self.assertTrue(m, line)
        self.assertEqual(m.group(2), str(self.state))
        return proc, int(m.group(1))

    def stop(self, proc):
        harness.stop_process(proc)
        if proc.stdout:
            proc.stdout.close()

    def get(self, port, path="/metrics", method="GET"):
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
        try:
            with _opener.open(req, timeout=10) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def raw(self, port, data, read_timeout=10, close_write=False):
        """Send `data` on a fresh connection and return all the server answers."""
        s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout)
        try:
            if data:
                s.sendall(data)
            if close_write:
                s.shutdown(socket.SHUT_WR)
            chunks = []
            while True:
                b = s.recv(65536)
                if not b:
                    return b"".join(chunks)
                chunks.append(b)
        finally:
            s.close()

    def test_exporter_serves_metrics_and_survives_bad_clients(self):
        self.traffic()
        proc, port = self.start_exporter()
        status, headers, body = self.get(port)
        self.assertEqual(status, 200)
        self.assertEqual(headers["Content-Type"], "text/plain; version=0.0.4; charset=utf-8")
        self.assertEqual(body.decode(), self.prom_text(), "the exporter and stat disagree")
        status, _, head_body = self.get(port, method="HEAD")
        self.assertEqual((status, head_body), (200, b""))
        self.assertEqual(self.get(port, "/")[0], 200)
        self.assertEqual(self.get(port, "/nope")[0], 404)
        status, headers, _ = self.get(port, method="POST")
        self.assertEqual((status, headers.get("Allow")), (405, "GET, HEAD"))
        # Malformed: a TLS hello, an HTTP/2 preface, a head over 8 KiB, nothing at all.
        self.assertTrue(self.raw(port, b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n")
                        .startswith(b"HTTP/1.1 400 "))
        self.assertTrue(self.raw(port, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
                        .startswith(b"HTTP/1.1 400 "))
        self.assertTrue(self.raw(port, b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 9000)
                        .startswith(b"HTTP/1.1 431 "))
        self.assertEqual(self.raw(port, b"", close_write=True), b"")
        # A slow client (half a request line, then silence) holds the server for 2 s at
        # most: it gets a 408, and a scrape queued behind it is served.
        slow = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            slow.sendall(b"GET /met")
            time.sleep(0.2)
            t0 = time.monotonic()
            status, _, body = self.get(port)
            waited = time.monotonic() - t0
            self.assertEqual(status, 200)
            self.assertIn(b"curlguard_calls_total", body)
            self.assertLess(waited, 4.0, "the slow client held the exporter too long")
            self.assertTrue(slow.recv(4096).startswith(b"HTTP/1.1 408 "))
        finally:
            slow.close()
        self.assertIsNone(proc.poll(), "the exporter died")
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(5), 0)
        err = (self.tmp / "exporter.err").read_bytes()
        self.assertEqual(err, b"", err)

    def test_exporter_serves_a_scrape_beside_silent_clients(self):
        """Connections were served one at a time: five clients that connected and said
        nothing (or sent half a head) held a scrape behind them 2 s each, past a 10 s
        scrape timeout.  Now each waits out its own 2 s beside the others; a request in
        absolute-form (RFC 9112 section 3.2.2) is served too (it was a 400)."""
        self.traffic()
        proc, port = self.start_exporter()
        silent = []
        try:
            for i in range(8):
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                if i % 2:
                    s.sendall(b"GET /metr")
                silent.append(s)
            time.sleep(0.2)
            t0 = time.monotonic()
            status, _, body = self.get(port)
            waited = time.monotonic() - t0
            self.assertEqual(status, 200)
            self.assertIn(b"curlguard_calls_total", body)
            self.assertLess(waited, 1.5, "silent clients held the scrape")
            answer = self.raw(port, f"GET http://127.0.0.1:{port}/metrics HTTP/1.1\r\n"
                                    f"Host: 127.0.0.1:{port}\r\n\r\n".encode())
            self.assertTrue(answer.startswith(b"HTTP/1.1 200 "), answer[:80])
            self.assertIn(b"curlguard_calls_total", answer)
            self.assertLess(time.monotonic() - t0, 1.5)
            for s in silent:                      # each gets its 408 after its own 2 s
                self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 408 "))
            self.assertLess(time.monotonic() - t0, 4.0)
        finally:
            for s in silent:
                s.close()
        self.assertIsNone(proc.poll(), "the exporter died")
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(5), 0)

    def test_exporter_survives_a_state_file_cut_short(self):
        """Truncated under it (any process of the user may): curlguard_state_ready 0 and
        one stderr line, no SIGBUS; the next guarded call re-makes the file and the
        metrics are back."""
        self.traffic()
        proc, port = self.start_exporter()
        self.assertIn(b"curlguard_state_ready 1\n", self.get(port)[2])
        os.truncate(self.state, 0)
        for _ in range(3):
            status, _, body = self.get(port)
            self.assertEqual((status, parse_prom(body.decode())),
                             (200, {("curlguard_state_ready", frozenset()): 0}))
        url = self.mock.url(CHAT, plan="200")
        p = harness.run([harness.CURL, "-sS", "-o", "/dev/null", "-d", "{}", url],
                        self.guard_env(), timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        samples = parse_prom(self.get(port)[2].decode())
        self.assertEqual(samples[("curlguard_state_ready", frozenset())], 1)
        self.assertEqual(samples[("curlguard_calls_total",
                                  frozenset({("pool", harness.mock_pool())}))], 1)
        self.assertIsNone(proc.poll(), "the exporter died")
        self.stop(proc)
        err = (self.tmp / "exporter.err").read_text().splitlines()
        self.assertEqual(len(err), 1, err)
        self.assertRegex(err[0], r"^curlguard: exporter: state file .* shorter than layout 7.*"
                                 r"serving curlguard_state_ready 0 until it can be read$")

    def test_exporter_bad_listen_addresses(self):
        for addr in ("127.0.0.1", "127.0.0.1:65536", "127.0.0.1:http", "::1:9464", "",
                     "example.invalid:9464", "192.0.2.1:9464", "[]:0"):
            p = self.cli("exporter", "--listen", addr, timeout=30)
            self.assertEqual(p.returncode, 2, (addr, p.stderr))
            self.assertEqual(len(p.stderr.splitlines()), 1, (addr, p.stderr))
            self.assertTrue(p.stderr.startswith(b"curlguard: exporter: "), p.stderr)
        for args in ((), ("--listen",), ("--port", "1")):
            p = self.cli("exporter", *args)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
        # In use: not a usage error.
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        try:
            p = self.cli("exporter", "--listen", f"127.0.0.1:{s.getsockname()[1]}")
        finally:
            s.close()
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertRegex(p.stderr, rb"^curlguard: exporter: cannot listen on .*in use\n$")

    def test_stat_and_plan_fail_when_their_output_cannot_be_written(self):
        """stdout on /dev/full: exit 1 and one line, as `report` (they exited 0 with
        nothing written)."""
        plan = ["plan", "--budget", "30", "--attempt-timeout", "5", "--base", "1", "--cap", "8"]
        for args in (["stat"], ["stat", "--json"], plan, plan + ["--json"], ["version"],
                     ["help"], ["run", "--help"], ["report", "--help"], ["prices", "--help"]):
            with self.subTest(args=args):
                p = harness.run(["/bin/sh", "-c", 'exec "$0" "$@" >/dev/full', harness.CLI,
                                 *args], harness.plain_env(CURLGUARD_STATE=str(self.state)))
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertRegex(p.stderr, rb"^curlguard: (stat|plan|version|help|run|report|prices): writing "
                                           rb"the output: No space left on device\n$")

    def test_stat_json_of_a_state_file_not_made_yet_escapes_its_path(self):
        odd = self.tmp / 'no"pe\\x'
        p = harness.run([harness.CLI, "stat", "--json"],
                        harness.plain_env(CURLGUARD_STATE=str(odd)))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout), {"path": str(odd), "exists": False, "pools": []})

    def test_a_long_host_name_is_cut_between_characters(self):
        """A pool is named after its host (47 bytes at most): a cut inside "é" left a lone
        byte in `stat --json` (not UTF-8) and U+FFFD in the records; now the name ends
        before the character the cut would split."""
        port = urllib.parse.urlsplit(self.mock.url("/x")).port
        names = {}
        for host, want in (("a" * 46 + "é.test", "a" * 46), ("a" * 45 + "é.test", "a" * 45 + "é"),
                           ("a" * 44 + "€.test", "a" * 44 + "€")):
            p = harness.run([harness.CURL, "-sS", "-o", "/dev/null", "--connect-to",
                             f"::127.0.0.1:{port}", "-d", "{}",
                             f"http://{host}:{port}/v1/chat/completions"],
                            self.guard_env(), timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr)
            names[want] = host
        p = self.cli("stat", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        pools = [x["name"] for x in json.loads(p.stdout.decode("utf-8", "strict"))["pools"]]
        for want in names:
            self.assertIn(want, pools)
        recs = self.records()
        self.assertEqual(sorted(r["pool"] for r in recs), sorted(names), recs)

    # -- a real Prometheus scraping the exporter

    def test_prometheus_scrapes_the_exporter(self):
        if not PROMETHEUS:
            self.skipTest("prometheus is not installed (Debian package prometheus; "
                          "scripts/install-deps installs it)")
        self.traffic()
        pool = self.stat_pool()
        exporter, port = self.start_exporter()
        web = free_port()
        config = self.tmp / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: curlguard\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{port}']\n")
        log = open(self.tmp / "prometheus.log", "wb")
        self.addCleanup(log.close)
        prom = subprocess.Popen([PROMETHEUS, f"--config.file={config}",
                                 f"--storage.tsdb.path={self.tmp / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{web}"],
                                env=harness.plain_env(), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=log, start_new_session=True)
        self.addCleanup(self.stop, prom)

        def query(q):
            url = f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode({"query": q})
            try:
                with _opener.open(url, timeout=5) as r:
                    data = json.loads(r.read())
            except OSError:
                return None         # not up yet
            self.assertEqual(data["status"], "success", data)
            return data["data"]["result"]

        pool_name = harness.mock_pool()
        deadline = time.monotonic() + 20
        while True:
            got = query(f'curlguard_calls_total{{pool="{pool_name}"}}')
            if got:
                break
            if prom.poll() is not None or time.monotonic() > deadline:
                self.fail("Prometheus had no curlguard_calls_total within 20 s (exit "
                          f"{prom.poll()}):\n" + (self.tmp / "prometheus.log").read_text()[-3000:])
            time.sleep(0.25)
        self.assertEqual(got[0]["metric"]["job"], "curlguard")
        self.assertEqual(got[0]["metric"]["instance"], f"127.0.0.1:{port}")
        up = query('up{job="curlguard"}')
        self.assertEqual(up[0]["value"][1], "1")

        def value(name, **labels):
            sel = ",".join(f'{k}="{v}"' for k, v in {"pool": pool_name, **labels}.items())
            res = query(f"{name}{{{sel}}}")
            self.assertEqual(len(res), 1, (name, labels, res))
            return float(res[0]["value"][1])
        self.assertPromMatchesJson(value, pool)
        # Every query of the Grafana dashboard parses, and those over counters have data.
        for expr in dashboard_exprs():
            self.assertIsNotNone(query(expr), expr)
        # A rate needs two scrapes: a second or two after the first.
        deadline = time.monotonic() + 10
        while not query(dashboard_exprs()[0]):
            if time.monotonic() > deadline:
                self.fail("the dashboard's first panel stayed empty for 10 s")
            time.sleep(0.25)
        self.assertIsNone(exporter.poll(), "the exporter died under scraping")
        self.stop(prom)
        self.stop(exporter)
        self.assertEqual(exporter.returncode, 0)


if __name__ == "__main__":
    unittest.main()
