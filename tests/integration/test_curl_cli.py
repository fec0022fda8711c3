"""The Debian curl tool (/usr/bin/curl, libcurl.so.4, curl_easy_perform) under the guard.

Transparency is checked byte for byte against the same command without the guard. The mock's
default body carries a per-key request counter ("n"), so the final 200 of every comparison is
a fixed body from a stored JSON step: a guarded `503,200` and a plain `200` answer alike.
"""

import json
import os
import re
import struct
import threading
import time
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

CHAT = "/v1/chat/completions"
FIXED = '{"id": "fixed-1", "object": "chat.completion", "choices": [{"text": "same bytes"}]}\n'
OK = {"action": 200, "body": FIXED}
POST_BODY = '{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}'
FAST = {"CURLGUARD_BACKOFF_BASE_MS": "50", "CURLGUARD_BACKOFF_CAP_MS": "200"}
TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def normalize_ms(stderr):
    """curl's connect error names the elapsed time ("after 0 ms"): not comparable."""
    return re.sub(rb"after \d+ ms", b"after N ms", stderr)


class CurlTestCase(harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not harness.CURL:
            raise unittest.SkipTest("curl is not installed")

    def genv(self, **extra):
        """guard_env with short backoff (tests stay fast)."""
        return self.guard_env(extra=FAST, **extra)

    def curl(self, args, env, timeout=30, input=None):
        return harness.run([harness.CURL, "-sS", *args], env, timeout=timeout, input=input)

    def pair(self, path, args, guarded_plan, plain_plan, env=None, files=()):
        """Run curl once guarded against guarded_plan and once plainly against plain_plan
        (distinct keys). Returns (guarded, plain, guarded_url, plain_url)."""
        gurl = self.mock.url(path, plan=guarded_plan)
        purl = self.mock.url(path, plan=plain_plan)
        g = self.curl([*args, gurl], env or self.genv())
        p = self.curl([*args, purl], harness.plain_env())
        return g, p, gurl, purl

    def assertSameResult(self, g, p):
        self.assertEqual(g.returncode, p.returncode,
                         f"exit code guarded {g.returncode} vs plain {p.returncode}: {g.stderr!r}")
        self.assertEqual(g.stdout, p.stdout)
        self.assertEqual(g.stderr, p.stderr)

    def assertRetriedOnce(self, recs, first_outcome, method):
        self.assertEqual(len(recs), 2, recs)
        for r in recs:
            self.assertRecordKeys(r)
            self.assertTrue(TS_RE.match(r["ts"]), r["ts"])
            self.assertEqual(r["method"], method)
            self.assertEqual(r["host"], "127.0.0.1")
        self.assertEqual(recs[0]["request_id"], recs[1]["request_id"])
        self.assertTrue(recs[0]["request_id"])
        self.assertEqual(recs[0]["pid"], recs[1]["pid"])
        self.assertEqual([r["attempt"] for r in recs], [1, 2])
        self.assertEqual([r["final"] for r in recs], [False, True])
        self.assertEqual([r["decision"] for r in recs], ["retry", "done"])
        self.assertEqual([r["outcome"] for r in recs], [first_outcome, "ok"])
        self.assertEqual(recs[1]["status"], 200)
        self.assertEqual(recs[1]["curl_code"], 0)


class GuardOffTest(CurlTestCase):
    def test_guard_off_is_pure_passthrough(self):
        xdg = self.tmp / "xdg"
        home = self.tmp / "home"
        home.mkdir()
        for switch in (None, "0", "off"):
            with self.subTest(CURLGUARD=switch):
                off = harness.guard_env(None, CURLGUARD=switch, CURLGUARD_LOG=None,
                                        XDG_STATE_HOME=str(xdg), HOME=str(home), **FAST)
                self.assertIn("libcurlguard", off["LD_PRELOAD"])
                g, p, gurl, purl = self.pair("/v1/off", ["-i"], "503:ra=0,200", "503:ra=0,200",
                                             env=off)
                self.assertSameResult(g, p)
                self.assertIn(b" 503 ", g.stdout.split(b"\n")[0])
                self.assertEqual(len(self.mock.wait_entries(url=gurl)), 1,
                                 "guard off must not retry")
                self.assertFalse(os.path.exists(xdg), "guard off created files under XDG")
                self.assertEqual(os.listdir(home), [], "guard off created files under HOME")
                self.assertFalse(os.path.exists(self.state), "guard off created a state file")

        # Positive control: the same environment with the guard on does write the default log.
        on = harness.guard_env(None, CURLGUARD_LOG=None, XDG_STATE_HOME=str(xdg),
                               HOME=str(home), **FAST)
        g = self.curl([self.mock.url("/v1/on", plan="200")], on)
        self.assertEqual(g.returncode, 0, g.stderr)
        recs = self.records(xdg / "curlguard" / "usage.jsonl")
        self.assertEqual(len(recs), 1, "guard on did not write $XDG_STATE_HOME/curlguard/usage.jsonl")


class RetryTransparencyTest(CurlTestCase):
    def test_get_503_then_200(self):
        g, p, gurl, _ = self.pair(CHAT, [], ["503:ra=0", OK], [OK])
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertSameResult(g, p)
        self.assertEqual(g.stdout, FIXED.encode())
        entries = self.mock.wait_entries(url=gurl, count=2)
        self.assertEqual([e["status"] for e in entries], [503, 200])
        self.assertRetriedOnce(self.records(), "http_503", "GET")
        self.assertIsNone(self.records()[0]["body_digest"])

    def test_post_503_then_200(self):
        args = ["-H", "Content-Type: application/json", "-d", POST_BODY]
        g, p, gurl, _ = self.pair(CHAT, args, ["503:ra=0", OK], [OK])
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertSameResult(g, p)
        entries = self.mock.wait_entries(url=gurl, count=2)
        self.assertEqual(len(entries), 2)
        self.assertEqual(entries[0]["body_digest"], entries[1]["body_digest"])
        self.assertEqual(entries[1]["body_len"], len(POST_BODY))
        recs = self.records()
        self.assertRetriedOnce(recs, "http_503", "POST")
        self.assertEqual([r["path"] for r in recs], [CHAT, CHAT])
        self.assertEqual(recs[0]["body_digest"], recs[1]["body_digest"])
        self.assertIsNotNone(recs[0]["body_digest"])
        self.assertEqual(recs[0]["model"], "gpt-4o-mini")
        self.assertEqual([r["possibly_billed"] for r in recs], [False, False])

    def test_include_shows_only_final_headers(self):
        g, p, gurl, _ = self.pair("/v1/inc", ["-i"], ["503:ra=0:h.X-Attempt=first", OK], [OK])
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertSameResult(g, p)
        self.assertNotIn(b"503", g.stdout)
        self.assertNotIn(b"X-Attempt", g.stdout)
        self.assertTrue(g.stdout.startswith(b"HTTP/1.1 200 OK\r\n"), g.stdout[:100])
        self.assertEqual(len(self.mock.wait_entries(url=gurl, count=2)), 2)

    def test_dump_header_file_shows_only_final_headers(self):
        gfile, pfile = self.tmp / "g.headers", self.tmp / "p.headers"
        gurl = self.mock.url("/v1/dump", plan=["503:ra=0:h.X-Attempt=first", OK])
        purl = self.mock.url("/v1/dump", plan=[OK])
        g = self.curl(["-D", str(gfile), gurl], self.genv())
        p = self.curl(["-D", str(pfile), purl], harness.plain_env())
        self.assertSameResult(g, p)
        self.assertEqual(gfile.read_bytes(), pfile.read_bytes())
        self.assertNotIn(b"503", gfile.read_bytes())
        self.assertNotIn(b"X-Attempt", gfile.read_bytes())
        self.assertEqual(len(self.mock.wait_entries(url=gurl, count=2)), 2)

    def test_write_out_describes_final_attempt(self):
        args = ["-w", "%{http_code} %{size_download} %{num_headers}\n"]
        g, p, gurl, _ = self.pair("/v1/wout", args, ["503:ra=0", OK], [OK])
        self.assertSameResult(g, p)
        self.assertTrue(g.stdout.endswith(f"200 {len(FIXED)} 3\n".encode()), g.stdout)
        self.assertEqual(len(self.mock.wait_entries(url=gurl, count=2)), 2)

    def test_500_on_get_is_retried(self):
        g, p, gurl, _ = self.pair("/v1/g500", [], ["500", OK], [OK])
        self.assertSameResult(g, p)
        self.assertEqual(len(self.mock.wait_entries(url=gurl, count=2)), 2)
        recs = self.records()
        self.assertRetriedOnce(recs, "http_500", "GET")
        self.assertTrue(recs[0]["possibly_billed"])

    def test_4xx_is_never_retried(self):
        for status in ("400", "404"):
            with self.subTest(status=status):
                self.log.unlink(missing_ok=True)
                g, p, gurl, _ = self.pair("/v1/client", ["-i"], f"{status},200", status)
                self.assertSameResult(g, p)
                self.assertIn(f" {status} ".encode(), g.stdout.split(b"\n")[0])
                time.sleep(0.1)
                self.assertEqual(len(self.mock.wait_entries(url=gurl)), 1)
                recs = self.records()
                self.assertEqual(len(recs), 1, recs)
                self.assertEqual((recs[0]["final"], recs[0]["decision"], recs[0]["status"],
                                  recs[0]["outcome"]),
                                 (True, "done", int(status), f"http_{status}"))


class FailureTest(CurlTestCase):
    def test_connect_refused_retried_then_exit_7(self):
        url = f"http://127.0.0.1:{harness.closed_port()}/v1/x"
        g = self.curl([url], self.genv(CURLGUARD_MAX_ATTEMPTS="4"))
        p = self.curl([url], harness.plain_env())
        self.assertEqual(p.returncode, 7, p.stderr)
        self.assertEqual(g.returncode, 7, g.stderr)
        self.assertEqual(g.stdout, p.stdout)
        self.assertEqual(normalize_ms(g.stderr), normalize_ms(p.stderr))
        self.assertIn(b"Failed to connect to 127.0.0.1 port", g.stderr)
        recs = self.records()
        self.assertEqual([r["attempt"] for r in recs], [1, 2, 3, 4], recs)
        self.assertEqual({r["outcome"] for r in recs}, {"connect_refused"})
        self.assertEqual({r["curl_code"] for r in recs}, {7})
        self.assertEqual([r["decision"] for r in recs], ["retry"] * 3 + ["give_up"])
        self.assertEqual([r["final"] for r in recs], [False] * 3 + [True])
        self.assertEqual(recs[-1]["reason"], "max_attempts")
        self.assertEqual(len({r["request_id"] for r in recs}), 1)
        self.assertEqual({r["possibly_billed"] for r in recs}, {False})

    def test_retry_after_is_a_floor(self):
        url = self.mock.url("/v1/ra", plan=["503:ra=1", OK])
        started = time.monotonic()
        g = self.curl([url], self.genv())
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(g.stdout, FIXED.encode())
        self.assertLess(time.monotonic() - started, 5)
        entries = self.mock.wait_entries(url=url, count=2)
        gap = entries[1]["t"] - entries[0]["t"]
        self.assertGreaterEqual(gap, 1.0, f"second attempt only {gap:.3f}s after the first")
        recs = self.records()
        self.assertEqual(recs[0]["reason"], "retry_after")
        self.assertGreaterEqual(recs[0]["backoff_ms"], 1000)

    def test_host_max_time_is_the_deadline(self):
        args = ["--max-time", "2", "-i"]
        started = time.monotonic()
        gurl = self.mock.url("/v1/long", plan="503:ra=10,200")
        g = self.curl([*args, gurl], self.genv())
        elapsed = time.monotonic() - started
        p = self.curl([*args, self.mock.url("/v1/long", plan="503:ra=10")], harness.plain_env())
        self.assertLess(elapsed, 2.5, "the host's --max-time must bound the whole call")
        self.assertSameResult(g, p)
        self.assertIn(b" 503 ", g.stdout.split(b"\n")[0])
        time.sleep(0.1)
        self.assertEqual(len(self.mock.wait_entries(url=gurl)), 1)
        recs = self.records()
        self.assertEqual(len(recs), 1, recs)
        self.assertIn(recs[0]["reason"], ("retry_after_too_long", "deadline"))
        self.assertEqual((recs[0]["final"], recs[0]["decision"]), (True, "give_up"))

    def test_post_closed_after_send_is_not_retried(self):
        args = ["-d", POST_BODY]
        gurl = self.mock.url(CHAT, plan="close,200")
        g = self.curl([*args, gurl], self.genv())
        p = self.curl([*args, self.mock.url(CHAT, plan="close")], harness.plain_env())
        self.assertEqual(p.returncode, 52, p.stderr)
        self.assertSameResult(g, p)
        time.sleep(0.2)
        self.assertEqual(len(self.mock.wait_entries(url=gurl)), 1, "a POST was sent twice")
        recs = self.records()
        self.assertEqual(len(recs), 1, recs)
        r = recs[0]
        self.assertEqual((r["final"], r["decision"], r["reason"], r["possibly_billed"]),
                         (True, "give_up", "not_idempotent", True))
        self.assertEqual(r["curl_code"], 52)

    def test_post_with_idempotency_key_is_retried(self):
        args = ["-H", "Idempotency-Key: k1", "-d", POST_BODY]
        g, p, gurl, _ = self.pair(CHAT, args, ["close", OK], [OK])
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertSameResult(g, p)
        entries = self.mock.wait_entries(url=gurl, count=2)
        self.assertEqual([e["idempotency_key"] for e in entries], ["k1", "k1"])
        self.assertEqual(entries[0]["body_digest"], entries[1]["body_digest"])
        recs = self.records()
        self.assertEqual([r["decision"] for r in recs], ["retry", "done"])
        self.assertTrue(recs[0]["possibly_billed"])


class RecordContentTest(CurlTestCase):
    def test_records_hold_no_secrets(self):
        key = harness.unique_key("AIzaSECRET")
        url = self.mock.url("/v1/secret/path", plan="503:ra=0,500,200", key=key)
        self.assertIn("AIzaSECRET", url)
        body = json.dumps({"model": "gpt-4o-mini",
                           "messages": [{"role": "user", "content": "TOPSECRETPROMPT"}]})
        g = self.curl(["-H", "Authorization: Bearer sk-secret-123", "-H",
                       "Idempotency-Key: idem-SECRETIDEM", "-d", body, url], self.genv())
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(len(self.mock.wait_entries(url=url, count=3)), 3)
        raw = self.log.read_bytes()
        recs = self.records()
        self.assertEqual(len(recs), 3)
        for secret in (b"sk-secret-123", b"Bearer", b"AIzaSECRET", b"TOPSECRETPROMPT",
                       b"SECRETIDEM", b"plan=", b"key="):
            self.assertNotIn(secret, raw, f"{secret!r} leaked into the usage log")
        self.assertEqual({r["path"] for r in recs}, {"/v1/secret/path"})
        self.assertEqual([r["attempt"] for r in recs], [1, 2, 3])

    def test_log_to_stderr(self):
        url = self.mock.url("/v1/stderr", plan=["503:ra=0", OK])
        g = self.curl([url], self.genv(CURLGUARD_LOG="-"))
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(g.stdout, FIXED.encode())
        self.assertFalse(self.log.exists())
        recs = [json.loads(line) for line in g.stderr.decode().splitlines()]
        self.assertEqual([r["attempt"] for r in recs], [1, 2])
        for r in recs:
            self.assertRecordKeys(r)

    def test_task_id_copied(self):
        url = self.mock.url("/v1/task", plan="503:ra=0,200")
        g = self.curl([url], self.genv(CURLGUARD_TASK_ID="batch-7/item 42"))
        self.assertEqual(g.returncode, 0, g.stderr)
        recs = self.records()
        self.assertEqual([r["task_id"] for r in recs], ["batch-7/item 42"] * 2)

    def test_unlisted_host_passes_through(self):
        gurl = self.mock.url("/v1/hosts", plan="503:ra=0,200")
        g = self.curl(["-i", gurl], self.genv(CURLGUARD_HOSTS="other.example,*.other.example"))
        p = self.curl(["-i", self.mock.url("/v1/hosts", plan="503:ra=0,200")],
                      harness.plain_env())
        self.assertSameResult(g, p)
        self.assertIn(b" 503 ", g.stdout.split(b"\n")[0])
        time.sleep(0.1)
        self.assertEqual(len(self.mock.wait_entries(url=gurl)), 1)
        self.assertEqual(self.records(), [])
        # Positive control: a glob that matches 127.0.0.1 is guarded.
        url = self.mock.url("/v1/hosts", plan="503:ra=0,200")
        g = self.curl([url], self.genv(CURLGUARD_HOSTS="other.example,127.0.0.*"))
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(len(self.mock.wait_entries(url=url, count=2)), 2)
        self.assertEqual(len(self.records()), 2)


class CliRunTest(CurlTestCase):
    def test_curlguard_run_matches_ld_preload(self):
        env = harness.plain_env(CURLGUARD_LOG=str(self.log), CURLGUARD_STATE=str(self.state),
                                XDG_STATE_HOME=str(self.tmp / "xdg"), **FAST)
        if harness.SAN_PRELOAD:
            env["LD_PRELOAD"] = harness.SAN_PRELOAD
        args = ["-i", "-d", POST_BODY]
        gurl = self.mock.url(CHAT, plan=["503:ra=0", OK])
        g = harness.run([harness.CLI, "run", "--", harness.CURL, "-sS", *args, gurl], env,
                        timeout=30)
        p = self.curl([*args, self.mock.url(CHAT, plan=[OK])], harness.plain_env())
        self.assertSameResult(g, p)
        self.assertEqual(len(self.mock.wait_entries(url=gurl, count=2)), 2)
        self.assertRetriedOnce(self.records(), "http_503", "POST")

    def test_two_copies_under_other_names_guard_once(self):
        """A copy of the library under another file name ahead of the build's one (an
        installed copy, a vendored one): the second copy sees the first by its SONAME and
        only forwards. Told apart by file name only, the call was guarded twice: 9
        upstream requests for 3 attempts."""
        import shutil
        copy = self.tmp / "cgcopy.so"
        shutil.copy(harness.LIB, copy)
        env = self.genv(CURLGUARD_BREAKER="off", CURLGUARD_RETRY_BUDGET="off")
        env["LD_PRELOAD"] = " ".join(x for x in (harness.SAN_PRELOAD, str(copy),
                                                 str(harness.LIB)) if x)
        url = self.mock.url("/v1/two-copies", plan="503:ra=0")
        g = self.curl([url], env)
        self.assertGreaterEqual(g.returncode, 0, g.stderr)
        self.assertEqual(len(self.mock.wait_entries(url=url, count=3)), 3)
        time.sleep(0.3)
        self.assertEqual(len(self.mock.entries(url=url)), 3)
        self.assertEqual([r["attempt"] for r in self.records()], [1, 2, 3])


    def test_run_refuses_what_would_leave_the_command_unguarded(self):
        """A config file stat and reset refuse (a directory, malformed JSON, text after
        the object), a CURLGUARD_LIB that is missing or not a shared library: one line,
        exit 1, the command not run.  Before, run ran it (exit 0): the config was found
        bad only by a guarded call inside it, and ld.so printed its own errors for
        /etc/passwd (helper-62).  A run inside a run preloads the library once."""
        bad = self.tmp / "bad.json"
        bad.write_text("{")
        tail = self.tmp / "tail.json"
        tail.write_text('{"max_attempts": 1} trailing')
        marker = self.tmp / "ran"
        cmd = ["--", "/bin/sh", "-c", f'touch "{marker}"']
        for args, env, why in (
                (["--config", str(self.tmp)], {}, rb"not a regular file"),
                (["--config", str(bad)], {}, rb"not a JSON object"),
                ([f"--config={tail}"], {}, rb"text after the JSON object"),
                ([], {"CURLGUARD_LIB": "/nonexistent/libcurlguard.so"},
                 rb"CURLGUARD_LIB=/nonexistent/libcurlguard.so: No such file"),
                ([], {"CURLGUARD_LIB": "/etc/passwd"}, rb"not a shared library"),
                ([], {"CURLGUARD_CONFIG": str(bad)}, rb"\(CURLGUARD_CONFIG\): not a JSON")):
            with self.subTest(args=args, env=env):
                p = harness.run([harness.CLI, "run", *args, *cmd], harness.plain_env(**env),
                                timeout=30)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
                self.assertRegex(p.stderr, rb"^curlguard: run: .*" + why)
                self.assertFalse(marker.exists(), "the command ran")
        p = harness.run([harness.CLI, "run", "--", harness.CLI, "run", "--", "/bin/sh", "-c",
                         'printf %s "$LD_PRELOAD"'], harness.plain_env(), timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.decode().split(":").count(str(harness.LIB)), 1, p.stdout)


    def test_run_refuses_a_curlguard_lib_that_is_not_the_guard(self):
        """CURLGUARD_LIB must be a libcurlguard.so this program can preload: an ELF shared
        object of its machine that exports curl_easy_perform, with the guard's soname.
        Before (helper-67), run checked the ELF magic only: /bin/true (a PIE, so ET_DYN),
        libz, libc, libcurl itself and a truncated copy of the library were preloaded,
        ld.so printed its own error or nothing, and the command ran unguarded (exit 0)."""
        listing = harness.run(["ldd", harness.CURL], harness.plain_env(), timeout=30)
        deps = dict(re.findall(r"^\s*(\S+) => (/\S+)", listing.stdout.decode(), re.M))
        data = harness.LIB.read_bytes()
        cases = [("/bin/true", rb"exports no curl_easy_perform"),
                 (deps["libz.so.1"], rb"exports no curl_easy_perform"),
                 (deps["libc.so.6"], rb"exports no curl_easy_perform"),
                 (deps["libcurl.so.4"], rb"soname is libcurl\.so\.4")]
        for n in (4, 64, len(data) // 2, len(data) - 1):
            cut = self.tmp / f"cut-{n}.so"                  # a copy cut short
            cut.write_bytes(data[:n])
            cases.append((str(cut), rb"truncated or damaged"))
        # its section headers whole, its last loaded segment said to run past its end
        grown = bytearray(data)
        phoff, = struct.unpack_from("<Q", grown, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", grown, 0x36)
        last = max(phoff + i * phentsize for i in range(phnum)
                   if struct.unpack_from("<I", grown, phoff + i * phentsize)[0] == 1)
        struct.pack_into("<QQ", grown, last + 0x20, len(data), len(data))   # filesz, memsz
        (self.tmp / "grown.so").write_bytes(grown)
        cases.append((str(self.tmp / "grown.so"), rb"segments lie past its end"))
        if os.path.exists("/lib32/libc.so.6"):              # i386 libc beside an amd64 one
            cases.append(("/lib32/libc.so.6", rb"built for another machine"))
        marker = self.tmp / "ran"
        cmd = ["--", "/bin/sh", "-c", f'touch "{marker}"']
        for lib, why in cases:
            with self.subTest(lib=lib):
                p = harness.run([harness.CLI, "run", *cmd],
                                harness.plain_env(CURLGUARD_LIB=str(lib)), timeout=30)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
                self.assertRegex(p.stderr, rb"^curlguard: run: cannot preload .*" + why)
                self.assertFalse(marker.exists(), "the command ran")
        # the real library, and a copy of it under another name, still guard the call
        copy = self.tmp / "guard-copy.so"
        copy.write_bytes(data)
        for lib in (harness.LIB, copy):
            with self.subTest(lib=lib):
                self.log.unlink(missing_ok=True)
                env = harness.plain_env(CURLGUARD_LIB=str(lib), CURLGUARD_LOG=str(self.log),
                                        CURLGUARD_STATE=str(self.state), **FAST)
                if harness.SAN_PRELOAD:
                    env["LD_PRELOAD"] = harness.SAN_PRELOAD
                url = self.mock.url(CHAT, plan=["503:ra=0", OK])
                p = harness.run([harness.CLI, "run", "--", harness.CURL, "-sS", url], env,
                                timeout=30)
                self.assertEqual((p.returncode, p.stdout), (0, FIXED.encode()), p.stderr)
                self.assertEqual([r["attempt"] for r in self.records()], [1, 2])


    def test_run_refuses_a_crafted_curlguard_lib_at_once(self):
        """Reading CURLGUARD_LIB ends quickly whatever the file says.  Before (helper-70):
        65,535 section headers all naming one 2 MiB .dynsym without curl_easy_perform
        made run read and search that table 65,535 times (about 110 s on one CPU), and a
        FIFO named as the library (or as the command) blocked run in open(2) forever."""
        data = bytearray(harness.LIB.read_bytes())
        body = data + bytes(max(0, (2 << 20) - len(data)))     # the library, zero-padded
        n, count = len(body) // 24 * 24, 65535
        sh = bytearray(64 * count)
        struct.pack_into("<IIQQQQIIQQ", sh, 64, 0, 3, 0, 0, 0, len(body), 0, 0, 1, 0)
        for i in range(2, count):                              # .dynsym: the whole file
            struct.pack_into("<IIQQQQIIQQ", sh, 64 * i, 0, 11, 0, 0, 0, n, 1, 0, 8, 24)
        struct.pack_into("<Q", body, 0x28, len(body))          # e_shoff
        struct.pack_into("<HH", body, 0x3c, count, 0)          # e_shnum, e_shstrndx
        many = self.tmp / "many-dynsym.so"
        many.write_bytes(body + sh)
        fifo = self.tmp / "fifo.so"
        os.mkfifo(fifo)
        os.chmod(fifo, 0o755)
        marker = self.tmp / "ran"
        for lib, cmd, why in (
                (many, ["/bin/sh", "-c", f'touch "{marker}"'],
                 rb"cannot preload .*exports no curl_easy_perform"),
                (fifo, ["/bin/sh", "-c", f'touch "{marker}"'],
                 rb"cannot preload .*not a regular file"),
                (harness.LIB, [str(fifo)], rb"cannot run .*Permission denied")):
            with self.subTest(lib=lib, cmd=cmd):
                start = time.monotonic()
                p = harness.run([harness.CLI, "run", "--", *cmd],
                                harness.plain_env(CURLGUARD_LIB=str(lib)), timeout=30)
                self.assertLess(time.monotonic() - start, 10)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
                self.assertRegex(p.stderr, rb"^curlguard: run: " + why)
                self.assertFalse(marker.exists(), "the command ran")

    def test_run_makes_a_relative_curlguard_lib_absolute(self):
        """A relative CURLGUARD_LIB reaches a command that changes directory.  Before
        (helper-70), LD_PRELOAD got the relative path, ld.so looked it up again from the
        new directory (a bare file name: in the system's library directories), said
        "cannot be preloaded ... ignored" and the curl ran unguarded: a 503, no record."""
        env = harness.plain_env(CURLGUARD_LOG=str(self.log), CURLGUARD_STATE=str(self.state),
                                **FAST)
        if harness.SAN_PRELOAD:
            env["LD_PRELOAD"] = harness.SAN_PRELOAD
        # curl runs inside a shell script here, out of run()'s sight: the ASan skip asked
        # for by name (under check-asan curl hangs in setlocale(), guard or not).
        harness.skip_unsanitizable([harness.CURL], env)
        lib = harness.LIB.resolve()
        for where, rel in ((lib.parent.parent, f"{lib.parent.name}/{lib.name}"),
                           (lib.parent, lib.name)):    # a bare name: ld.so searched /usr/lib
            with self.subTest(rel=rel):
                self.log.unlink(missing_ok=True)
                url = self.mock.url(CHAT, plan=["503:ra=0", OK])
                script = (f'cd "{where}" && CURLGUARD_LIB="{rel}" exec "{harness.CLI}" run '
                          f'-- /bin/sh -c \'cd / && exec "$0" -sS "$1"\' "{harness.CURL}" '
                          f'"{url}"')
                p = harness.run(["/bin/sh", "-c", script], env, timeout=30)
                self.assertEqual((p.returncode, p.stdout), (0, FIXED.encode()), p.stderr)
                self.assertNotIn(b"cannot be preloaded", p.stderr)
                self.assertEqual([r["attempt"] for r in self.records()], [1, 2])


class ParallelTest(CurlTestCase):
    def test_eight_parallel_curls(self):
        n = 8
        urls = [self.mock.url(f"/v1/par/{i}", plan=["503:ra=0", OK]) for i in range(n)]
        results = [None] * n
        env = self.genv()

        def one(i):
            try:
                results[i] = self.curl([urls[i]], env)
            except Exception as e:          # reported below
                results[i] = e

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for r in results:
            if isinstance(r, unittest.SkipTest):
                raise r                     # harness.run skips curl under a sanitizer run
        for i, r in enumerate(results):
            self.assertFalse(isinstance(r, Exception) or r is None, f"curl {i}: {r!r}")
            self.assertEqual(r.returncode, 0, f"curl {i}: {r.stderr!r}")
            self.assertEqual(r.stdout, FIXED.encode(), f"curl {i}")
            self.assertEqual(len(self.mock.wait_entries(url=urls[i], count=2)), 2)
        recs = self.records()        # every line must be a whole JSON object
        self.assertEqual(len(recs), 2 * n)
        by_id = {}
        for r in recs:
            self.assertRecordKeys(r)
            by_id.setdefault(r["request_id"], []).append(r)
        self.assertEqual(len(by_id), n)
        for rid, group in by_id.items():
            self.assertEqual(sorted(r["attempt"] for r in group), [1, 2], rid)
            self.assertEqual(len({r["pid"] for r in group}), 1)
            self.assertEqual(len({r["path"] for r in group}), 1)
        self.assertEqual(sorted({r["path"] for r in recs}), sorted(f"/v1/par/{i}" for i in range(n)))


if __name__ == "__main__":
    unittest.main()
