"""The outcome x idempotency retry matrix (SPEC section 7, README "How it decides"), proved
against the mock provider's ledger (what really reached the server) and the usage records.

Every row of the default matrix is run with POST and with GET (and, where the row says
"idempotent only", with PUT, DELETE and a POST carrying Idempotency-Key), plus the
x-should-retry override, CURLGUARD_RETRY_ON and CURLGUARD_MAX_ATTEMPTS.

Host: the Debian /usr/bin/curl (one call = one curl_easy_perform).
"""

import json
import os
import socket
import subprocess
import threading
import time
import unittest
import uuid

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

PATH = "/v1/matrix"
BODY = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
# Small waits: every test stays well under a second or two.
FAST = {"CURLGUARD_BACKOFF_BASE_MS": "50", "CURLGUARD_BACKOFF_CAP_MS": "200"}

METHOD_ARGS = {
    "GET": [],
    "HEAD": ["-I"],
    "POST": ["--data-binary", BODY],
    "PUT": ["-X", "PUT", "--data-binary", BODY],
    "DELETE": ["-X", "DELETE"],
    "OPTIONS": ["-X", "OPTIONS"],
}


def free_port():
    """A loopback port nobody listens on (bound, then closed again)."""
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


class MatrixCase(harness.GuardTestCase):
    """Helpers shared by the matrix tests."""

    def curl(self, method, url, *extra, headers=(), env=None, **env_overrides):
        argv = [harness.CURL, "-sS", "--noproxy", "*", *METHOD_ARGS[method]]
        for h in headers:
            argv += ["-H", h]
        argv += [*extra, url]
        if env is None:
            env = self.guard_env(extra=FAST, **env_overrides)
        return harness.run(argv, env, timeout=30)

    def ledger(self, url, count):
        """The ledger entries of url; exactly count of them (the host has exited already)."""
        try:   # the host has exited: a request not there by now never came
            self.mock.wait_entries(url=url, count=count, timeout=3)
        except AssertionError:
            pass                      # reported below, with the entries
        time.sleep(0.05)
        got = self.mock.entries(url=url)
        self.assertEqual(len(got), count,
                         f"server saw {len(got)} requests, expected {count}: "
                         f"{[(e['n'], e['method'], e['action'], e['status']) for e in got]}")
        return got

    def check_records(self, outcomes, decisions, billed, method, reasons=None):
        """One record per attempt, attempt numbering, final flag, one request_id."""
        recs = self.records()
        desc = [(r.get("attempt"), r.get("outcome"), r.get("decision"), r.get("reason"))
                for r in recs]
        self.assertEqual(len(recs), len(outcomes), f"records: {desc}")
        for r in recs:
            self.assertRecordKeys(r)
        self.assertEqual([r["attempt"] for r in recs], list(range(1, len(recs) + 1)), desc)
        self.assertEqual([r["final"] for r in recs], [False] * (len(recs) - 1) + [True], desc)
        self.assertEqual([r["outcome"] for r in recs], outcomes, desc)
        self.assertEqual([r["decision"] for r in recs], decisions, desc)
        self.assertEqual([r["possibly_billed"] for r in recs], billed, desc)
        self.assertEqual({r["method"] for r in recs}, {method}, desc)
        self.assertEqual(len({r["request_id"] for r in recs}), 1, f"request_id differs: {desc}")
        self.assertEqual({r["path"] for r in recs}, {PATH})
        if reasons is not None:
            for r, want in zip(recs, reasons):
                if want is not None:
                    self.assertEqual(r["reason"], want, desc)
        for r in recs:
            self.assertIsInstance(r["reason"], str)
            self.assertTrue(r["reason"], desc)
        return recs

    def first_outcome(self):
        recs = self.records()
        self.assertTrue(recs, "no usage record at all")
        return recs[0]["outcome"]

    def host_json(self, p):
        """The body the host printed: exactly one JSON document (never two attempts' bodies)."""
        try:
            return json.loads(p.stdout)
        except ValueError:
            self.fail(f"host output is not one JSON document (rc={p.returncode}): "
                      f"{p.stdout[:400]!r} stderr={p.stderr[:300]!r}")

    def _fresh(self):
        """Forget the records of the previous call (several calls in one test)."""
        try:
            os.unlink(self.log)
        except FileNotFoundError:
            pass

    # -- the two shapes every row reduces to

    def assert_retried(self, method, first, status_first=None, headers=(), billed_first=False,
                       **env):
        """plan FIRST,200: two requests reach the server, the host gets the second answer."""
        url = self.mock.url(PATH, plan=f"{first},200")
        p = self.curl(method, url, headers=headers, **env)
        self.assertEqual(p.returncode, 0, p.stderr)
        entries = self.ledger(url, 2)
        self.assertEqual([e["method"] for e in entries], [method, method])
        self.assertEqual(entries[0]["body_digest"], entries[1]["body_digest"])
        self.assertEqual(entries[0]["body_len"], entries[1]["body_len"])
        if method != "HEAD":
            body = self.host_json(p)
            self.assertEqual(body.get("n"), 2, f"host got {body}")
        outcome = "http_%d" % status_first if status_first else self.first_outcome()
        recs = self.records()
        self.check_records([outcome, "ok"], ["retry", "done"],
                           [billed_first, False], method, reasons=[None, "ok"])
        self.assertEqual([r["status"] for r in recs], [status_first or recs[0]["status"], 200])
        self.assertGreaterEqual(recs[0]["backoff_ms"], 0)
        return entries, recs

    def assert_not_retried(self, method, first, status, decision, reason, billed,
                           headers=(), **env):
        """plan FIRST,200: one request reaches the server; the host gets that (error) answer."""
        url = self.mock.url(PATH, plan=f"{first},200")
        p = self.curl(method, url, headers=headers, **env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.ledger(url, 1)
        if method != "HEAD":
            body = self.host_json(p)
            self.assertIn("error", body, f"host did not get the {status} answer: {body}")
        recs = self.check_records(["http_%d" % status], [decision], [billed], method,
                                  reasons=[reason])
        self.assertEqual(recs[0]["status"], status)
        self.assertEqual(recs[0]["backoff_ms"], 0)
        return recs


class ConnectPhaseTest(MatrixCase):
    """connect_refused: the request never reached the server -> retried for any method."""

    def _refused(self, method):
        port = free_port()
        url = f"http://127.0.0.1:{port}{PATH}"
        p = self.curl(method, url)
        self.assertEqual(p.returncode, 7, p.stderr)
        recs = self.check_records(["connect_refused"] * 3, ["retry", "retry", "give_up"],
                                  [False] * 3, method, reasons=["retryable", "retryable",
                                                                "max_attempts"])
        self.assertEqual([r["status"] for r in recs], [None] * 3)
        self.assertEqual([r["curl_code"] for r in recs], [7] * 3)

    def test_connect_refused_post_retried(self):
        self._refused("POST")

    def test_connect_refused_get_retried(self):
        self._refused("GET")

    def test_connect_refused_then_listening_post_gets_answer(self):
        """A POST refused once is sent again when the server comes up: one request arrives,
        and the host gets its answer."""
        port = free_port()
        got = []

        def serve():
            srv = socket.socket()
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            srv.bind(("127.0.0.1", port))
            srv.listen(4)
            srv.settimeout(8)
            try:
                conn, _ = srv.accept()
            except OSError:
                srv.close()
                return
            with conn:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                head, _, rest = data.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(rest) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    rest += chunk
                got.append((head.split(b"\r\n")[0], rest))
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n"
                             b"\r\nlistening")
            srv.close()

        env = self.guard_env(CURLGUARD_BACKOFF_BASE_MS=1500, CURLGUARD_JITTER="none",
                             CURLGUARD_MAX_ATTEMPTS=2)
        argv = [harness.CURL, "-sS", "--noproxy", "*", "--data-binary", BODY,
                f"http://127.0.0.1:{port}{PATH}"]
        harness.skip_unsanitizable(argv, env)
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        time.sleep(0.5)              # attempt 1 is long refused; attempt 2 comes at ~1.5 s
        t = threading.Thread(target=serve, daemon=True)
        t.start()
        try:
            out, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
        t.join(10)
        recs = self.records()
        if recs and recs[0]["outcome"] == "ok":
            self.skipTest("curl started too slowly: attempt 1 found the server already up")
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(out, b"listening")
        self.assertEqual(len(got), 1, got)
        self.assertTrue(got[0][0].startswith(b"POST "), got)
        self.assertEqual(got[0][1], BODY.encode())
        self.check_records(["connect_refused", "ok"], ["retry", "done"], [False, False], "POST",
                           reasons=["retryable", "ok"])


class NotProcessedStatusTest(MatrixCase):
    """http_429/503/502/408: reached the server, not processed -> retried for any method."""

    STATUSES = (429, 503, 502, 408)

    def _row(self, method):
        for status in self.STATUSES:
            with self.subTest(status=status, method=method):
                self._fresh()
                self.assert_retried(method, str(status), status)

    def test_post_retried(self):
        self._row("POST")

    def test_get_retried(self):
        self._row("GET")

    def test_put_retried(self):
        self.assert_retried("PUT", "503", 503)


class MaybeProcessedStatusTest(MatrixCase):
    """http_500/504: maybe processed -> retried only for idempotent requests."""

    def test_idempotent_methods_retried(self):
        for status in (500, 504):
            for method in ("GET", "PUT", "DELETE", "HEAD", "OPTIONS"):
                with self.subTest(status=status, method=method):
                    self._fresh()
                    self.assert_retried(method, str(status), status, billed_first=True)

    def test_post_not_retried(self):
        for status in (500, 504):
            with self.subTest(status=status):
                self._fresh()
                self.assert_not_retried("POST", str(status), status, "give_up",
                                        "not_idempotent", True)

    def test_post_with_idempotency_key_retried(self):
        for status in (500, 504):
            with self.subTest(status=status):
                self._fresh()
                key = "idem-" + uuid.uuid4().hex
                entries, _ = self.assert_retried("POST", str(status), status,
                                                 headers=[f"Idempotency-Key: {key}"],
                                                 billed_first=True)
                self.assertEqual([e["idempotency_key"] for e in entries], [key, key])


class ConnectionFailureAfterSendTest(MatrixCase):
    """close (no answer at all) and reset (mid-body): reset_after_send, maybe processed."""

    def test_close_post_not_retried(self):
        url = self.mock.url(PATH, plan="close,200")
        p = self.curl("POST", url)
        self.assertEqual(p.returncode, 52, p.stderr)
        entries = self.ledger(url, 1)
        self.assertEqual(entries[0]["action"], "close")
        self.check_records(["reset_after_send"], ["give_up"], [True], "POST",
                           reasons=["not_idempotent"])

    def test_close_get_retried(self):
        entries, recs = self.assert_retried("GET", "close", billed_first=True)
        self.assertEqual(recs[0]["outcome"], "reset_after_send")
        self.assertEqual(recs[0]["curl_code"], 52)
        self.assertIsNone(recs[0]["status"])

    def test_close_post_with_idempotency_key_retried(self):
        key = "idem-" + uuid.uuid4().hex
        entries, recs = self.assert_retried("POST", "close", headers=[f"Idempotency-Key: {key}"],
                                            billed_first=True)
        self.assertEqual(recs[0]["outcome"], "reset_after_send")
        self.assertEqual([e["idempotency_key"] for e in entries], [key, key])

    def test_reset_mid_body_post_not_retried(self):
        url = self.mock.url(PATH, plan="reset:after=20,200")
        p = self.curl("POST", url)
        self.assertIn(p.returncode, (56, 18), p.stderr)
        entries = self.ledger(url, 1)
        self.assertEqual(entries[0]["action"], "reset")
        recs = self.check_records([self.first_outcome()], ["give_up"], [True], "POST",
                                  reasons=["not_idempotent"])
        self.assertIn(recs[0]["outcome"], ("reset_after_send", "partial_response"))
        self.assertIn(recs[0]["curl_code"], (56, 18))

    def test_reset_mid_body_get_retried_host_sees_only_second(self):
        url = self.mock.url(PATH, plan="reset:after=20,200")
        p = self.curl("GET", url)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.ledger(url, 2)
        # exactly the second response, no partial bytes of the first in front of it
        self.assertEqual(self.host_json(p).get("n"), 2)
        recs = self.check_records([self.first_outcome(), "ok"], ["retry", "done"],
                                  [True, False], "GET")
        self.assertIn(recs[0]["outcome"], ("reset_after_send", "partial_response"))


class FinalStatusTest(MatrixCase):
    """Other 4xx, 501, 505 and 2xx: final, never retried, whatever the method."""

    def test_final_statuses_never_retried(self):
        for status in (400, 404, 409, 501, 505):
            for method, headers in (("POST", ()), ("GET", ()),
                                    ("POST", ("Idempotency-Key: idem-final",))):
                with self.subTest(status=status, method=method, headers=headers):
                    self._fresh()
                    self.assert_not_retried(method, str(status), status, "done",
                                            "final_status", False, headers=headers)

    def test_ok_is_done(self):
        for method in ("POST", "GET"):
            with self.subTest(method=method):
                self._fresh()
                url = self.mock.url(PATH, plan="200,503")
                p = self.curl(method, url)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.ledger(url, 1)
                self.assertEqual(self.host_json(p).get("n"), 1)
                recs = self.check_records(["ok"], ["done"], [False], method, reasons=["ok"])
                self.assertEqual(recs[0]["status"], 200)


class ShouldRetryHeaderTest(MatrixCase):
    """x-should-retry from the server overrides the status verdict."""

    def test_503_should_retry_false_not_retried(self):
        for method in ("POST", "GET"):
            with self.subTest(method=method):
                self._fresh()
                self.assert_not_retried(method, "503:sr=false", 503, "give_up",
                                        "should_retry_false", False)

    def test_500_should_retry_false_get_not_retried(self):
        self.assert_not_retried("GET", "500:sr=false", 500, "give_up", "should_retry_false",
                                True)

    def test_409_should_retry_true_retried(self):
        for method in ("POST", "GET"):
            with self.subTest(method=method):
                self._fresh()
                self.assert_retried(method, "409:sr=true", 409)


class RetryOnTest(MatrixCase):
    """CURLGUARD_RETRY_ON changes the matrix."""

    def test_503_never(self):
        for method in ("POST", "GET"):
            with self.subTest(method=method):
                self._fresh()
                recs = self.assert_not_retried(method, "503", 503, "done", None, False,
                                               CURLGUARD_RETRY_ON="http_503=never")
                self.assertNotEqual(recs[0]["decision"], "retry")

    def test_404_any(self):
        for method in ("POST", "GET"):
            with self.subTest(method=method):
                self._fresh()
                self.assert_retried(method, "404", 404, CURLGUARD_RETRY_ON="http_404=any")

    def test_5xx_never(self):
        for status in (500, 502, 503, 504):
            with self.subTest(status=status):
                self._fresh()
                self.assert_not_retried("GET", str(status), status, "done", None,
                                        status in (500, 504), CURLGUARD_RETRY_ON="http_5xx=never")

    def test_429_idempotent(self):
        self.assert_not_retried("POST", "429", 429, "give_up", "not_idempotent", False,
                                CURLGUARD_RETRY_ON="http_429=idempotent")
        self._fresh()
        self.assert_retried("GET", "429", 429, CURLGUARD_RETRY_ON="http_429=idempotent")

    def test_500_any_retries_post(self):
        self.assert_retried("POST", "500", 500, billed_first=True,
                            CURLGUARD_RETRY_ON="http_500=any")

    def test_several_rules(self):
        rules = "http_404=any,http_503=never"
        self.assert_retried("POST", "404", 404, CURLGUARD_RETRY_ON=rules)
        self._fresh()
        self.assert_not_retried("POST", "503", 503, "done", None, False,
                                CURLGUARD_RETRY_ON=rules)


class MaxAttemptsTest(MatrixCase):
    """CURLGUARD_MAX_ATTEMPTS bounds the attempts (the server keeps answering 503)."""

    def _always_503(self, method, attempts, **env):
        url = self.mock.url(PATH, plan="503")
        p = self.curl(method, url, **env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.ledger(url, attempts)
        self.assertIn("error", self.host_json(p))
        recs = self.check_records(["http_503"] * attempts,
                                  ["retry"] * (attempts - 1) + ["give_up"], [False] * attempts,
                                  method, reasons=[None] * (attempts - 1) + ["max_attempts"])
        self.assertEqual(recs[-1]["backoff_ms"], 0)

    def test_default_is_three(self):
        self._always_503("POST", 3)

    def test_one_means_no_retry(self):
        self._always_503("GET", 1, CURLGUARD_MAX_ATTEMPTS=1)

    def test_five(self):
        self._always_503("POST", 5, CURLGUARD_MAX_ATTEMPTS=5, CURLGUARD_BACKOFF_CAP_MS=60)


if __name__ == "__main__":
    unittest.main()
