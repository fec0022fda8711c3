"""Self-test of scripts/mock-provider and harness.py. Needs no libcurlguard.so (a few cases
use /usr/bin/curl and are skipped without it)."""

import email.utils
import hashlib
import json
import math
import os
import tempfile
import time
import unittest
import unittest.mock
import urllib.error
import urllib.request

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
CHAT = "/v1/chat/completions"
PROMPT = "Hello there, how are you?"


def chat_body(content=PROMPT, **extra):
    return json.dumps({"model": "gpt-4o-mini",
                       "messages": [{"role": "user", "content": content}], **extra}).encode()


def request(url, data=None, method=None, headers=None):
    """-> (status, headers, body bytes); HTTP errors are returned, not raised."""
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with OPENER.open(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


class MockProviderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.mock = harness.provider()

    def curl(self, *args, timeout=20):
        if not harness.CURL:
            self.skipTest("curl is not installed")
        return harness.run([harness.CURL, "-sS", "--noproxy", "*", *args], harness.plain_env(),
                           timeout=timeout)

    def test_plan_sequence_and_ledger(self):
        url = self.mock.url(CHAT, plan="503:ra=1.5:sr=false,429:ram=250,200")
        body = chat_body()
        status, headers, raw = request(url, body)
        self.assertEqual(status, 503)
        self.assertEqual(headers["Retry-After"], "1.5")
        self.assertEqual(headers["x-should-retry"], "false")
        self.assertEqual(json.loads(raw)["error"]["type"], "server_error")
        status, headers, _ = request(url, body)
        self.assertEqual((status, headers["retry-after-ms"]), (429, "250"))
        for _ in range(2):                                  # the last step repeats
            status, headers, raw = request(url, body, headers={"Idempotency-Key": "idem-1",
                                                               "Authorization": "Bearer sk-x"})
            self.assertEqual(status, 200)
        reply = json.loads(raw)
        usage = reply["usage"]
        words = len(reply["choices"][0]["message"]["content"].split())
        self.assertEqual(reply["model"], "gpt-4o-mini")
        self.assertEqual(usage["prompt_tokens"], math.ceil(len(PROMPT) / 4))
        self.assertEqual(usage["completion_tokens"], words)
        self.assertEqual(usage["total_tokens"], usage["prompt_tokens"] + words)
        self.assertEqual(usage["prompt_tokens_details"]["cached_tokens"], 0)

        entries = self.mock.wait_entries(url=url, count=4)
        self.assertEqual([e["n"] for e in entries], [1, 2, 3, 4])
        self.assertEqual([e["action"] for e in entries], ["503", "429", "200", "200"])
        self.assertEqual([e["status"] for e in entries], [503, 429, 200, 200])
        self.assertEqual([e["processing_started"] for e in entries], [False, False, True, True])
        self.assertEqual([e["billed_tokens"] for e in entries],
                         [0, 0, usage["total_tokens"], usage["total_tokens"]])
        digest = hashlib.sha256(body).hexdigest()
        for e in entries:
            self.assertEqual((e["method"], e["path"], e["body_len"], e["body_digest"]),
                             ("POST", CHAT, len(body), digest))
            self.assertTrue(e["completed"] and e["client_connected_at_end"] and e["done"])
            self.assertNotIn("plan=", e["path"])
        self.assertEqual(entries[3]["idempotency_key"], "idem-1")
        self.assertEqual(entries[3]["headers"]["authorization"], "<redacted>")
        self.assertIsNone(entries[0]["idempotency_key"])

    def test_close_and_reset_with_curl(self):
        close_url = self.mock.url("/anything/x", plan="close")
        self.assertEqual(self.curl(close_url).returncode, 52)
        reset_url = self.mock.url("/anything/x", plan="reset")
        self.assertIn(self.curl("-o", "/dev/null", reset_url).returncode, (56, 18))
        closed = self.mock.wait_entries(url=close_url)[0]
        self.assertEqual((closed["action"], closed["status"], closed["completed"],
                          closed["processing_started"]), ("close", None, False, False))
        reset = self.mock.wait_entries(url=reset_url)[0]
        self.assertEqual((reset["action"], reset["status"], reset["completed"],
                          reset["processing_started"]), ("reset", 200, False, True))

    def test_stall_cut_short_by_client(self):
        url = self.mock.url(CHAT, plan="stall:ms=8000")
        started = time.monotonic()
        p = self.curl("-m", "1", "-o", "/dev/null", "--data-binary", chat_body(), url)
        self.assertEqual(p.returncode, 28, p.stderr)
        entry = self.mock.wait_entries(url=url, timeout=5)[0]
        self.assertLess(time.monotonic() - started, 5)      # the server noticed the hang-up
        self.assertFalse(entry["client_connected_at_end"])
        self.assertFalse(entry["completed"])
        self.assertEqual(entry["status"], 200)
        self.assertTrue(entry["processing_started"])
        self.assertGreater(entry["billed_tokens"], 0)

    def test_stream_with_usage_and_pings(self):
        url = self.mock.url(CHAT, plan="stall:ms=350:ping_ms=100:words=5")
        status, headers, raw = request(url, chat_body(stream=True,
                                                      stream_options={"include_usage": True}))
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/event-stream"))
        self.assertEqual(headers["Transfer-Encoding"], "chunked")
        text = raw.decode()
        self.assertIn(": ping\n\n", text)
        data = [line[6:] for line in text.split("\n") if line.startswith("data: ")]
        self.assertEqual(data[-1], "[DONE]")
        chunks = [json.loads(d) for d in data[:-1]]
        self.assertEqual(chunks[-1]["choices"], [])
        self.assertTrue(all(c["usage"] is None for c in chunks[:-1]))
        content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1])
        usage = chunks[-1]["usage"]
        self.assertEqual(usage["completion_tokens"], 5)
        self.assertEqual(len(content.split()), 5)
        entry = self.mock.wait_entries(url=url)[0]
        self.assertTrue(entry["stream"] and entry["completed"])
        self.assertEqual(entry["billed_tokens"], usage["total_tokens"])

    def test_gemini_answers_json_sse_and_array(self):
        # Google's Gemini API: the model from the path, usageMetadata in every chunk
        # (running totals), alt=sse for "data:" events, else one JSON array; Google-style
        # errors.
        gem = "/v1beta/models/gemini-2.5-flash:"
        body = json.dumps({"contents": [{"role": "user", "parts": [{"text": PROMPT}]}],
                           "systemInstruction": {"parts": [{"text": "Be terse."}]},
                           "generationConfig": {"maxOutputTokens": 4}}).encode()
        prompt = math.ceil((len(PROMPT) + len("Be terse.")) / 4)
        url = self.mock.url(gem + "generateContent", key=True)
        status, headers, raw = request(url, body)
        self.assertEqual(status, 200)
        ans = json.loads(raw)
        self.assertEqual(ans["modelVersion"], "gemini-2.5-flash")
        self.assertEqual(ans["candidates"][0]["finishReason"], "MAX_TOKENS")
        self.assertEqual(len(ans["candidates"][0]["content"]["parts"][0]["text"].split()), 4)
        self.assertEqual(ans["usageMetadata"]["promptTokenCount"], prompt)
        self.assertEqual(ans["usageMetadata"]["candidatesTokenCount"], 4)
        self.assertEqual(ans["usageMetadata"]["totalTokenCount"], prompt + 4)
        entry = self.mock.wait_entries(url=url)[0]
        self.assertEqual((entry["model"], entry["stream"], entry["billed_tokens"]),
                         ("gemini-2.5-flash", False, prompt + 4))
        url = self.mock.url(gem + "streamGenerateContent?alt=sse", key=True)
        status, headers, raw = request(url, body)
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/event-stream"))
        chunks = [json.loads(line[6:]) for line in raw.decode().split("\n")
                  if line.startswith("data: ")]
        self.assertEqual([c["usageMetadata"]["candidatesTokenCount"] for c in chunks],
                         [1, 2, 3, 4])
        self.assertEqual(chunks[-1]["candidates"][0]["finishReason"], "MAX_TOKENS")
        self.assertNotIn("finishReason", chunks[0]["candidates"][0])
        entry = self.mock.wait_entries(url=url)[0]
        self.assertEqual((entry["stream"], entry["billed_tokens"]), (True, prompt + 4))
        status, headers, raw = request(self.mock.url(gem + "streamGenerateContent", key=True),
                                       body)
        self.assertEqual((status, headers["Transfer-Encoding"]), (200, "chunked"))
        arr = json.loads(raw)
        self.assertEqual(["".join(p["text"] for p in c["candidates"][0]["content"]["parts"])
                          for c in arr], [c["candidates"][0]["content"]["parts"][0]["text"]
                                          for c in chunks])
        status, _, raw = request(self.mock.url(gem + "generateContent", plan="429"), body)
        self.assertEqual(status, 429)
        self.assertEqual(json.loads(raw)["error"]["status"], "RESOURCE_EXHAUSTED")
        status, _, raw = request(self.mock.url(gem + "generateContent", key=True), b"not json")
        self.assertEqual((status, json.loads(raw)["error"]["code"]), (400, 400))

    def test_stored_plan_with_http_date(self):
        steps = [{"action": "status", "status": 429, "date_offset_s": -120,
                  "headers": {"Retry-After": "{date+30}"}}, "200"]
        url = self.mock.url("/anything/hd", plan=steps)
        self.assertIn("plan=@plan-", url)
        status, headers, _ = request(url)
        self.assertEqual(status, 429)
        date = email.utils.parsedate_to_datetime(headers["Date"])
        retry = email.utils.parsedate_to_datetime(headers["Retry-After"])
        self.assertEqual((retry - date).total_seconds(), 30)
        self.assertAlmostEqual(date.timestamp(), time.time() - 120, delta=5)   # skewed clock
        self.assertEqual(request(url)[0], 200)

    def test_request_bodies(self):
        status, headers, raw = request(self.mock.url("/anything/put", key=True), b"hello world",
                                       method="PUT")
        self.assertEqual((status, json.loads(raw)["body_len"]), (200, 11))
        status, headers, raw = request(self.mock.url("/anything/head"), method="HEAD")
        self.assertEqual((status, raw), (200, b""))
        self.assertGreater(int(headers["Content-Length"]), 0)
        with tempfile.NamedTemporaryFile(prefix="cg-mock-body-") as f:
            body = os.urandom(1_500_000)
            f.write(body)
            f.flush()
            for extra in (["-H", "Expect: 100-continue"], ["-H", "Transfer-Encoding: chunked"]):
                url = self.mock.url("/anything/upload", key=True)
                p = self.curl("--data-binary", "@" + f.name, *extra, url)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(json.loads(p.stdout)["body_len"], len(body))
                entry = self.mock.wait_entries(url=url)[0]
                self.assertEqual(entry["body_digest"], hashlib.sha256(body).hexdigest())
                header, value = extra[1].lower().split(": ")
                self.assertEqual(entry["headers"][header], value)

    def test_schedule_plan_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump({"seed": 1, "plans": {"twice": ["500", "201"]},
                       "schedule": [{"from_s": 0, "to_s": 600, "p": {"503:ra=2": 1.0},
                                     "step": {"headers": {"X-Window": "one"}}}]}, f)
            f.flush()
            with harness.MockProvider(plan_file=f.name) as mock:
                status, headers, _ = request(mock.url("/anything/s"))
                self.assertEqual((status, headers["Retry-After"], headers["X-Window"]),
                                 (503, "2", "one"))
                self.assertEqual(request(mock.url("/x", plan="@twice"))[0], 500)
                generated = mock.last_key
                self.assertEqual(request(mock.url("/x", plan="@twice", key="tw"))[0], 500)
                self.assertEqual(request(mock.url("/x", plan="@twice", key="tw"))[0], 201)
                self.assertEqual([(e["key"], e["n"]) for e in mock.ledger()],
                                 [("@schedule", 1), (generated, 1), ("tw", 1), ("tw", 2)])
                mock.reset()
                self.assertEqual(mock.ledger(), [])
                proc = mock.proc
            self.assertIsNotNone(proc.poll())

    def test_latency_draws_and_summary(self):
        """Seeded per-request draws (faults and lognormal latency), the clock reset, and the
        billing summary: billed = processing started, usage = billed, duplicates by body."""
        plan = {"seed": 3, "draw": "request",
                "latency": {"median_ms": 40, "p99_ms": 160},
                "schedule": [{"from_s": 0, "to_s": 600, "p": {"503": 0.3}}]}
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(plan, f)
            f.flush()
            with harness.MockProvider(plan_file=f.name) as mock:
                def batch(order):
                    got = {}
                    for i in order:
                        status, _, raw = request(mock.url(CHAT), chat_body(f"call {i}"))
                        usage = json.loads(raw)["usage"] if status == 200 else None
                        got[i] = (status, usage)
                    return got

                first = batch(range(24))
                # The server closes an entry (t_end) after the answer's last byte left it:
                # the client may read the ledger first.
                entries = mock.wait_entries(count=24)
                statuses = [s for s, _ in first.values()]
                self.assertIn(503, statuses)
                self.assertIn(200, statuses)
                lat = [e["latency_ms"] for e in entries if e["status"] == 200]
                self.assertTrue(all(x is not None and 0 < x <= 480 for x in lat), lat)
                self.assertTrue(all(e["latency_ms"] is None for e in entries if e["status"] == 503))
                self.assertTrue(5 < sorted(lat)[len(lat) // 2] < 200, lat)
                for e in entries:                  # the answer waited for its draw
                    if e["status"] == 200:
                        self.assertGreaterEqual(e["t_end"] - e["t"], e["latency_ms"] / 1000 - 0.01)
                summary = mock._call("GET", "/__summary?bucket_ms=100")
                ok = [u for s, u in first.values() if s == 200]
                self.assertEqual(summary["requests"], 24)
                self.assertEqual(summary["billed_requests"], len(ok))
                self.assertEqual(summary["answered_2xx"], len(ok))
                self.assertEqual(summary["billed_tokens"], sum(u["total_tokens"] for u in ok))
                self.assertEqual((summary["usage_mismatches"], summary["duplicate_charges"]), (0, 0))
                self.assertEqual(summary["actions"], {"200": len(ok), "503": 24 - len(ok)})
                self.assertEqual(sum(summary["series"]["requests"]), 24)
                self.assertEqual(sum(summary["series"]["ok"]), len(ok))
                self.assertEqual(summary["latency"]["median_ms"], 40)

                # Same calls in another order after a reset: the same fate per call.
                mock._call("POST", "/__reset?clock=1")
                self.assertLess(mock._call("GET", "/__health")["t"], 5)
                second = batch(reversed(range(24)))
                self.assertEqual({i: s for i, (s, _) in first.items()},
                                 {i: s for i, (s, _) in second.items()})
                lat2 = sorted(e["latency_ms"] for e in mock.ledger() if e["status"] == 200)
                self.assertEqual(sorted(lat), lat2)
                # The second arrival of a body draws anew; billing it twice is a duplicate.
                again = [i for i, (s, _) in first.items() if s == 200][0]
                status = 503
                for _ in range(10):
                    status = request(mock.url(CHAT), chat_body(f"call {again}"))[0]
                    if status == 200:
                        break
                self.assertEqual(status, 200)
                summary = mock._call("GET", "/__summary")
                self.assertEqual((summary["duplicate_charges"], summary["duplicate_bodies"]), (1, 1))

    def test_billed_when_client_gone(self):
        url = self.mock.url(CHAT, plan="200:delay=3000")
        seq0 = max([e["seq"] for e in self.mock.ledger()] or [0])
        p = self.curl("-m", "1", "-o", "/dev/null", "--data-binary", chat_body(), url)
        self.assertEqual(p.returncode, 28, p.stderr)
        entry = self.mock.wait_entries(url=url, timeout=5)[0]
        self.assertTrue(entry["processing_started"] and entry["done"])
        self.assertFalse(entry["completed"])
        self.assertGreater(entry["billed_tokens"], 0)
        summary = self.mock._call("GET", f"/__summary?since={seq0}")
        self.assertEqual((summary["billed_requests"], summary["billed_client_gone"],
                          summary["answered_2xx"]), (1, 1, 0))
        self.assertEqual(summary["billed_tokens"], entry["billed_tokens"])

    def test_harness_helpers(self):
        with unittest.mock.patch.dict(os.environ, {"http_proxy": "http://bad:1",
                                                   "HTTPS_PROXY": "http://bad:1",
                                                   "CURLGUARD_RPM": "5", "LD_PRELOAD": "x.so"}):
            env = harness.guard_env("/tmp/log.jsonl", extra={"CURLGUARD_JITTER": "none"},
                                    CURLGUARD_MAX_ATTEMPTS=4, CURLGUARD=None)
            plain = harness.plain_env(FOO="1")
        self.assertNotIn("http_proxy", env)
        self.assertNotIn("HTTPS_PROXY", env)
        self.assertNotIn("CURLGUARD_RPM", env)
        self.assertNotIn("CURLGUARD", env)                   # None removes
        self.assertEqual(env["LD_PRELOAD"].split(":")[-1], str(harness.LIB))
        self.assertEqual(env["CURLGUARD_LOG"], "/tmp/log.jsonl")
        self.assertEqual((env["CURLGUARD_JITTER"], env["CURLGUARD_MAX_ATTEMPTS"]), ("none", "4"))
        self.assertTrue(env["CURLGUARD_STATE"].startswith(tempfile.gettempdir()))
        self.assertFalse({"LD_PRELOAD", "CURLGUARD_RPM", "http_proxy"} & set(plain))
        self.assertEqual(plain["FOO"], "1")
        self.assertEqual(len(harness.REQUIRED_RECORD_KEYS), 30)
        self.assertTrue(str(harness.LIB).endswith("/libcurlguard.so"))
        self.assertEqual(harness.LIB.parent, harness.BUILD)
        self.assertEqual(harness.LIB + ":x", str(harness.LIB) + ":x")

        u1, u2 = self.mock.url(CHAT, plan="200"), self.mock.url(CHAT, plan="200")
        self.assertNotEqual(u1, u2)
        self.assertEqual(self.mock.url("/a"), self.mock.base + "/a")

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.jsonl")
            self.assertEqual(harness.read_records(path), [])
            with open(path, "w") as f:
                f.write('{"a": 1}\n{"b": 2}\n')
            self.assertEqual(harness.read_records(path), [{"a": 1}, {"b": 2}])
            with open(path, "a") as f:
                f.write("{oops\n")
            with self.assertRaisesRegex(AssertionError, r"r\.jsonl:3: invalid JSON"):
                harness.read_records(path)

        p = harness.run(["/bin/sh", "-c", "read x; echo got $x"], harness.plain_env(), input="hi")
        self.assertEqual(p.stdout, b"got hi\n")
        with self.assertRaises(harness.RunTimeout):
            harness.run(["/bin/sh", "-c", "sleep 5 & sleep 5"], harness.plain_env(), timeout=0.3)


if __name__ == "__main__":
    unittest.main()
