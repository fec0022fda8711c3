"""Token usage and cost in the records, read from real responses of the mock provider:
OpenAI-style JSON and SSE streams (CASES.md "Usage in responses"), priced with the shipped
table (data/prices.json)."""

import json
import socket
import threading
import time
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

CHAT = "/v1/chat/completions"


def piecewise_server(pieces, gap_s=0.1, status=b"200 OK", ctype=b"application/json",
                     extra=b""):
    """A one-connection HTTP/1.1 server on 127.0.0.1 that answers the first request with
    `pieces` of a JSON body, each written on its own `gap_s` apart (so libcurl hands
    each to the write callback by itself), then closes.  Returns (port, thread)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(20)

    def serve():
        try:
            c, _ = srv.accept()
        except OSError:
            srv.close()
            return
        with c, srv:
            c.settimeout(20)
            data = b""
            while b"\r\n\r\n" not in data:
                data += c.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            n = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    n = int(line.split(b":")[1])
            while len(rest) < n:
                rest += c.recv(65536)
            body = b"".join(pieces)
            c.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype + b"\r\n" + extra +
                      b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body))
            for p in pieces:
                time.sleep(gap_s)
                c.sendall(p)
            time.sleep(0.1)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return srv.getsockname()[1], t


class UsageTest(harness.GuardTestCase):

    def call(self, body, plan="200"):
        url = self.mock.url(CHAT, plan=plan)
        p = harness.run([harness.CURL, "-sS", "-H", "Content-Type: application/json",
                         "--data-binary", json.dumps(body), url], self.guard_env(), timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        ledger = self.mock.wait_entries(url=url)
        recs = self.records()
        self.assertEqual(len(recs), 1, recs)
        return recs[0], ledger[-1]

    def test_json_usage_and_cost(self):
        rec, entry = self.call({"model": "gpt-4o-mini",
                                "messages": [{"role": "user", "content": "Say hello, please."}]})
        usage = entry["usage"]
        self.assertEqual(rec["prompt_tokens"], usage["prompt_tokens"])
        self.assertEqual(rec["completion_tokens"], usage["completion_tokens"])
        self.assertEqual(rec["total_tokens"], entry["billed_tokens"])
        self.assertEqual(rec["cached_tokens"], 0)
        # gpt-4o-mini: 0.15 USD in, 0.60 USD out per million tokens (data/prices.json)
        want = (usage["prompt_tokens"] * 0.15 + usage["completion_tokens"] * 0.60) / 1e6
        self.assertAlmostEqual(rec["cost_usd"], want, places=12)

    def test_stream_with_include_usage(self):
        rec, entry = self.call({"model": "gpt-4o", "stream": True,
                                "stream_options": {"include_usage": True},
                                "messages": [{"role": "user", "content": "Count to three."}]},
                               plan="200:chunk_ms=5")
        self.assertEqual(rec["total_tokens"], entry["billed_tokens"])
        self.assertIsNotNone(rec["cost_usd"])

    def test_stream_without_usage_is_unknown_not_zero(self):
        rec, entry = self.call({"model": "gpt-4o", "stream": True,
                                "messages": [{"role": "user", "content": "Count to three."}]})
        for k in ("prompt_tokens", "completion_tokens", "total_tokens", "cost_usd"):
            self.assertIsNone(rec[k], k)
        # billed all the same, by an amount nobody told us; the client got its answer, so it
        # is not "possibly billed" (SPEC 7): the report counts it as billed, amount unknown
        self.assertTrue(entry["processing_started"])
        self.assertEqual(rec["outcome"], "ok")
        self.assertFalse(rec["possibly_billed"])

    def test_gemini_answers_of_the_mock_json_sse_and_array(self):
        # Google's three shapes from the mock provider (the model in the path): one JSON
        # answer; a stream of "data:" events with running usageMetadata (alt=sse); the
        # same chunks as one JSON array.  Every record has what the provider billed.
        body = {"contents": [{"role": "user", "parts": [{"text": "Say hello, please."}]}],
                "generationConfig": {"maxOutputTokens": 64}}
        for how in ("generateContent", "streamGenerateContent?alt=sse",
                    "streamGenerateContent"):
            url = self.mock.url("/v1beta/models/gemini-2.5-flash:" + how, plan="200:words=9")
            p = harness.run([harness.CURL, "-sS", "-o", "/dev/null", "--data-binary",
                             json.dumps(body), url], self.guard_env(), timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr)
            usage = self.mock.wait_entries(url=url)[-1]["usage"]
            rec = self.records()[-1]
            self.assertEqual((rec["outcome"], rec["model"]), ("ok", "gemini-2.5-flash"), how)
            self.assertEqual((rec["prompt_tokens"], rec["completion_tokens"],
                              rec["total_tokens"]),
                             (usage["prompt_tokens"], 9, usage["total_tokens"]), how)
            # gemini-2.5-flash: 0.30 USD in, 2.50 out per million tokens (data/prices.json)
            self.assertAlmostEqual(rec["cost_usd"], (usage["prompt_tokens"] * 0.30 +
                                                     9 * 2.50) / 1e6, places=12, msg=how)

    def test_unknown_model_keeps_its_name_and_has_no_cost(self):
        rec, _ = self.call({"model": "my-private-model-7",
                            "messages": [{"role": "user", "content": "hi"}]})
        self.assertEqual(rec["model"], "my-private-model-7")
        self.assertIsNotNone(rec["total_tokens"])
        self.assertIsNone(rec["cost_usd"])

    # -- hand-made streams of the other providers (mock "body" steps, sent chunked)

    def stream(self, events, path=CHAT, body=None, extra_env=None):
        """Serve `events` (a list of SSE event texts) as a chunked 200 stream and return the
        single record and what the host received."""
        step = {"action": 200, "content_type": "text/event-stream", "chunked": True,
                "chunk_ms": 5, "body": "".join(e + "\n\n" for e in events)}
        url = self.mock.url(path, plan=[step])
        body = body or {"model": "gpt-4o", "stream": True,
                        "messages": [{"role": "user", "content": "hi"}]}
        env = self.guard_env(extra=extra_env)
        p = harness.run([harness.CURL, "-sS", "-N", "-H", "Content-Type: application/json",
                         "--data-binary", json.dumps(body), url], env, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = self.records()
        self.assertEqual(len(recs), 1, recs)
        return recs[0], p.stdout

    def test_anthropic_stream_merges_cumulative_usage(self):
        # CASES.md: message_start carries input and cache counts, message_delta the
        # cumulative output; merged, never added.
        events = [
            'event: message_start\ndata: {"type":"message_start","message":{"id":"m1",'
            '"model":"claude-sonnet-4-20250514","usage":{"input_tokens":25,'
            '"cache_read_input_tokens":100,"cache_creation_input_tokens":10,'
            '"output_tokens":1}}}',
            'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
            '"delta":{"type":"text_delta","text":"Hi"}}',
            'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
            '"end_turn"},"usage":{"output_tokens":15}}',
            'event: message_stop\ndata: {"type":"message_stop"}',
        ]
        rec, out = self.stream(events, path="/v1/messages",
                               body={"model": "claude-sonnet-4-20250514", "stream": True,
                                     "max_tokens": 50,
                                     "messages": [{"role": "user", "content": "hi"}]})
        self.assertIn(b"message_stop", out)
        self.assertEqual(rec["outcome"], "ok")
        self.assertEqual(rec["model"], "claude-sonnet-4-20250514")
        self.assertEqual(rec["prompt_tokens"], 135)      # 25 + 100 cache reads + 10 writes
        self.assertEqual(rec["cached_tokens"], 100)
        self.assertEqual(rec["completion_tokens"], 15)   # cumulative: not 1 + 15
        self.assertEqual(rec["total_tokens"], 150)
        # claude-sonnet-4: 3 USD in, 0.30 cached reads, 3.75 cache writes, 15 out per million
        want = (25 * 3.0 + 100 * 0.30 + 10 * 3.75 + 15 * 15.0) / 1e6
        self.assertAlmostEqual(rec["cost_usd"], want, places=12)

    def test_gemini_stream_running_totals_last_wins(self):
        events = [
            'data: {"candidates":[{"content":{"parts":[{"text":"A"}]}}],"usageMetadata":'
            '{"promptTokenCount":12,"candidatesTokenCount":1,"totalTokenCount":13},'
            '"modelVersion":"gemini-2.5-flash"}',
            'data: {"candidates":[{"content":{"parts":[{"text":"B"}]}}],"usageMetadata":'
            '{"promptTokenCount":12,"candidatesTokenCount":7,"thoughtsTokenCount":20,'
            '"totalTokenCount":39},"modelVersion":"gemini-2.5-flash"}',
        ]
        rec, _ = self.stream(events, path="/v1beta/models/gemini-2.5-flash:streamGenerateContent",
                             body={"contents": [{"parts": [{"text": "hi"}]}]})
        self.assertEqual(rec["outcome"], "ok")
        self.assertEqual(rec["model"], "gemini-2.5-flash")
        self.assertEqual(rec["prompt_tokens"], 12)
        self.assertEqual(rec["completion_tokens"], 27)   # candidates + thoughts
        self.assertEqual(rec["total_tokens"], 39)

    def test_responses_api_completed_event(self):
        events = [
            'event: response.created\ndata: {"type":"response.created","response":'
            '{"model":"gpt-4.1-mini","usage":null}}',
            'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
            '"delta":"Hi"}',
            'event: response.completed\ndata: {"type":"response.completed","response":'
            '{"model":"gpt-4.1-mini","usage":{"input_tokens":40,"input_tokens_details":'
            '{"cached_tokens":32},"output_tokens":9,"output_tokens_details":'
            '{"reasoning_tokens":4},"total_tokens":49}}}',
        ]
        rec, _ = self.stream(events, path="/v1/responses",
                             body={"model": "gpt-4.1-mini", "stream": True, "input": "hi"})
        self.assertEqual(rec["outcome"], "ok")
        self.assertEqual((rec["prompt_tokens"], rec["cached_tokens"], rec["completion_tokens"],
                          rec["total_tokens"]), (40, 32, 9, 49))

    # -- an error event inside a 200 stream is a failure, not ok

    def test_anthropic_error_event_mid_stream_is_a_failure(self):
        events = [
            'event: message_start\ndata: {"type":"message_start","message":{"id":"m2",'
            '"model":"claude-sonnet-4-20250514","usage":{"input_tokens":30,"output_tokens":1}}}',
            'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
            '"delta":{"type":"text_delta","text":"Par"}}',
            'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
            '"message":"Overloaded"}}',
        ]
        rec, out = self.stream(events, path="/v1/messages",
                               body={"model": "claude-sonnet-4-20250514", "stream": True,
                                     "max_tokens": 50,
                                     "messages": [{"role": "user", "content": "hi"}]})
        self.assertIn(b"overloaded_error", out)        # the host still gets every byte
        self.assertEqual(rec["status"], 200)
        self.assertEqual(rec["curl_code"], 0)
        self.assertEqual(rec["outcome"], "stream_error")
        self.assertTrue(rec["final"])
        self.assertEqual(rec["decision"], "done")       # final, like any 4xx: never resent
        self.assertTrue(rec["possibly_billed"])
        self.assertEqual(rec["prompt_tokens"], 30)      # what message_start said

    def test_openai_error_chunk_mid_stream_is_a_failure(self):
        events = [
            'data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o","choices":'
            '[{"index":0,"delta":{"content":"Hel"}}]}',
            'data: {"error":{"message":"The server had an error while processing your '
            'request.","type":"server_error"}}',
        ]
        rec, _ = self.stream(events)
        self.assertEqual(rec["outcome"], "stream_error")
        self.assertTrue(rec["possibly_billed"])
        self.assertIsNone(rec["total_tokens"])          # no usage: unknown, not 0

    def test_error_word_in_generated_text_is_not_an_error_event(self):
        events = [
            'data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o","choices":'
            '[{"index":0,"delta":{"content":"{\\"error\\": 1} type: error"}}]}',
            'data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o","choices":[],'
            '"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}',
            'data: [DONE]',
        ]
        rec, _ = self.stream(events)
        self.assertEqual(rec["outcome"], "ok")
        self.assertFalse(rec["possibly_billed"])

    def test_body_over_the_parser_bound_is_skipped_not_truncated(self):
        # A 5 MiB JSON answer (over CG_USAGE_BODY_MAX, 4 MiB) whose usage member comes last:
        # the tokens stay unknown and the reason says why; nothing is guessed from a prefix.
        text = "word " * (1 << 20)
        body = json.dumps({"id": "c1", "object": "chat.completion", "model": "gpt-4o-mini",
                           "choices": [{"index": 0, "message": {"role": "assistant",
                                                               "content": text}}],
                           "usage": {"prompt_tokens": 3, "completion_tokens": 1048576,
                                     "total_tokens": 1048579}})
        url = self.mock.url(CHAT, plan=[{"action": 200, "body": body,
                                         "content_type": "application/json"}])
        p = harness.run([harness.CURL, "-sS", "-o", "/dev/null", "--data-binary",
                         '{"model": "gpt-4o-mini", "messages": []}', url], self.guard_env(),
                        timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        rec = self.records()[0]
        self.assertGreater(rec["bytes_received"], 5 << 20)
        self.assertEqual(rec["outcome"], "ok")
        self.assertEqual(rec["reason"], "usage_too_large")
        for k in ("prompt_tokens", "completion_tokens", "total_tokens", "cost_usd"):
            self.assertIsNone(rec[k], k)

    def test_gemini_model_comes_from_the_path(self):
        # Gemini names the model in the URL, not in the body: a failed attempt (no
        # modelVersion in its answer) still has the model, and so a price to estimate with.
        url = self.mock.url("/v1beta/models/gemini-2.5-flash:generateContent",
                            plan="500,200")
        p = harness.run([harness.CURL, "-sS", "-o", "/dev/null", "-H",
                         "Idempotency-Key: g1", "--data-binary",
                         '{"contents":[{"parts":[{"text":"hi"}]}]}', url],
                        self.guard_env(extra={"CURLGUARD_BACKOFF_BASE_MS": "1"}), timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = self.records()
        self.assertEqual([r["outcome"] for r in recs], ["http_500", "ok"])
        self.assertEqual([r["model"] for r in recs], ["gemini-2.5-flash"] * 2)

    def test_get_polls_of_a_stored_response_are_not_billed_again(self):
        # GET /v1/responses/ID returns the stored response with its usage every time;
        # polling it costs nothing, so its usage is not read.
        body = json.dumps({"id": "resp_1", "object": "response", "status": "completed",
                           "model": "o3-2025-04-16",
                           "usage": {"input_tokens": 100000, "output_tokens": 50000,
                                     "total_tokens": 150000}})
        url = self.mock.url("/v1/responses/resp_1",
                            plan=[{"action": 200, "body": body,
                                   "content_type": "application/json"}])
        for _ in range(3):
            p = harness.run([harness.CURL, "-sS", "-o", "/dev/null", url], self.guard_env(),
                            timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr)
        recs = self.records()
        self.assertEqual(len(recs), 3)
        for r in recs:
            self.assertEqual(r["method"], "GET")
            self.assertIsNone(r["total_tokens"])
            self.assertIsNone(r["cost_usd"])
            self.assertFalse(r["possibly_billed"])

    # -- task_id

    def test_task_id_from_env_and_from_a_request_header(self):
        url = self.mock.url(CHAT, plan="200")
        body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}]})
        env = self.guard_env(extra={"CURLGUARD_TASK_ID": "batch-7",
                                    "CURLGUARD_TASK_ID_HEADER": "X-Task-Id"})
        for hdr in (["-H", "X-Task-Id: invoice-42"], []):
            p = harness.run([harness.CURL, "-sS", *hdr, "--data-binary", body, url], env,
                            timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr)
        recs = self.records()
        self.assertEqual([r["task_id"] for r in recs], ["invoice-42", "batch-7"])
        # the header still reaches the server unchanged
        entries = self.mock.wait_entries(url=url, count=2)
        self.assertEqual(entries[0]["headers"].get("x-task-id"), "invoice-42")

    def test_bad_task_id_header_name_is_reported_and_ignored(self):
        url = self.mock.url(CHAT, plan="200")
        env = self.guard_env(extra={"CURLGUARD_TASK_ID_HEADER": "X Bad:Name"})
        p = harness.run([harness.CURL, "-sS", "-H", "X-Task-Id: t", url], env, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(b"curlguard:", p.stderr)
        self.assertIsNone(self.records()[0]["task_id"])


class PausedHostTest(harness.GuardTestCase):
    """A host whose write callback pauses (CURL_WRITEFUNC_PAUSE, then curl_easy_pause
    CONT from its progress callback) is handed the same bytes again by libcurl: the usage
    scanner reads them once.  Before, a POST's paused chunk was read twice: a prompt of
    500 tokens whose number was split "5" | "00" was recorded as 5500 (cost x11), or the
    body did not parse and the usage was null."""

    def paused(self, pieces, status=b"200 OK"):
        if not harness.CGHOST.exists():
            self.skipTest("cghost is not built")
        port, t = piecewise_server(pieces, status=status)
        url = f"http://127.0.0.1:{port}{CHAT}"
        p = harness.run([str(harness.CGHOST), "--method", "POST", "--post-fields",
                         json.dumps({"model": "gpt-4o", "messages": []}), "--write", "cb",
                         "--pause-once", "--progress", "xferinfo", url],
                        self.guard_env(CURLGUARD_MAX_ATTEMPTS="1"), timeout=30)
        t.join(10)
        self.assertIn(b"rc=0", p.stderr, p.stderr)
        self.assertEqual(p.stdout, b"".join(pieces))       # the host got every byte once
        recs = self.records()
        self.assertEqual(len(recs), 1, recs)
        return recs[0]

    def test_a_paused_chunk_is_read_once(self):
        rec = self.paused([b'{"model":"gpt-4o","usage":{"prompt_tokens":5',
                           b'00,"completion_tokens":5,"total_tokens":505}}'])
        self.assertEqual((rec["prompt_tokens"], rec["completion_tokens"],
                          rec["total_tokens"]), (500, 5, 505), rec)
        # gpt-4o: 2.50 USD in, 10.00 USD out per million tokens (data/prices.json)
        self.assertAlmostEqual(rec["cost_usd"], (500 * 2.5 + 5 * 10.0) / 1e6, places=12)

    def test_an_error_object_in_a_3xx_body_is_no_stream_error(self):
        """SPEC 7: stream_error is a 2xx stream that carried an error event.  A 307 whose
        body is an error object was recorded stream_error, possibly_billed."""
        rec = self.paused([b'{"error":{"message":"moved","type":"redirect"}}'],
                          status=b"307 Temporary Redirect\r\nLocation: /elsewhere")
        self.assertEqual((rec["status"], rec["outcome"], rec["possibly_billed"]),
                         (307, "ok", False), rec)

    def test_ndjson_is_read_a_line_at_a_time(self):
        """application/x-ndjson: a document a line, the last report wins (it was read as
        one JSON document: the first line's 7/1/8 where the last said 7/50/57)."""
        pieces = [b'{"model":"gemini-2.5-flash","usageMetadata":{"promptTokenCount":7,',
                  b'"candidatesTokenCount":1,"totalTokenCount":8}}\n{"model":"gemini-2.5-fl',
                  b'ash","usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":50,'
                  b'"totalTokenCount":57}}\n']
        port, t = piecewise_server(pieces, ctype=b"application/x-ndjson")
        p = harness.run([harness.CURL, "-sS", "-d", '{"model":"gemini-2.5-flash"}',
                         f"http://127.0.0.1:{port}/v1/stream"], self.guard_env(), timeout=30)
        t.join(10)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"".join(pieces))
        (rec,) = self.records()
        self.assertEqual((rec["prompt_tokens"], rec["completion_tokens"], rec["total_tokens"],
                          rec["model"]), (7, 50, 57, "gemini-2.5-flash"), rec)

    def test_a_body_compressed_past_libcurl_is_inflated(self):
        """A host that asks for gzip itself (-H 'Accept-Encoding: gzip', no --compressed:
        libcurl hands the compressed bytes on) got null usage for every answer (a
        helper's repro).  gzip and deflate (zlib's format, or raw) are inflated for the
        reader; a coding it cannot read (br) says so in the record's reason."""
        import zlib
        body = (b'{"model":"gpt-4o-mini","choices":[{"message":{"content":"hi"}}],'
                b'"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}')
        gz = zlib.compressobj(9, zlib.DEFLATED, 31)
        raw = zlib.compressobj(9, zlib.DEFLATED, -15)
        gzdata = gz.compress(body) + gz.flush()
        forms = [("gzip", gzdata), ("deflate", zlib.compress(body)),
                 ("deflate", raw.compress(body) + raw.flush()), ("br", b"\x0b\x02\x80"),
                 # helper-61: the field twice is one list (gzip, then identity)
                 ("gzip\r\nContent-Encoding: identity", gzdata)]
        for coding, data in forms:
            with self.subTest(coding=coding, size=len(data)):
                self.log.unlink(missing_ok=True)
                pieces = [data[:5], data[5:]]
                port, t = piecewise_server(pieces, gap_s=0.05,
                                           extra=b"Content-Encoding: " + coding.encode() + b"\r\n")
                p = harness.run([harness.CURL, "-sS", "-H",
                                 f"Accept-Encoding: {coding.split(chr(13))[0]}", "-d",
                                 '{"model":"gpt-4o-mini"}', f"http://127.0.0.1:{port}{CHAT}"],
                                self.guard_env(), timeout=30)
                t.join(10)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(p.stdout, data)          # the host got the bytes as sent
                (rec,) = self.records()
                if coding == "br":
                    self.assertEqual((rec["total_tokens"], rec["reason"]),
                                     (None, "usage_encoded"), rec)
                else:
                    self.assertEqual((rec["prompt_tokens"], rec["completion_tokens"],
                                      rec["total_tokens"], rec["reason"]),
                                     (11, 7, 18, "ok"), rec)
                    self.assertIsNotNone(rec["cost_usd"], rec)


class HeaderInBodyTest(harness.GuardTestCase):
    HEADER_HOST = r"""
import json, sys, pycurl
out = []
for spec in json.loads(sys.argv[1]):
    c = pycurl.Curl()
    body = []
    c.setopt(pycurl.URL, spec["url"])
    c.setopt(pycurl.HTTPHEADER, spec["headers"])
    c.setopt(pycurl.POSTFIELDS, spec["body"])
    c.setopt(pycurl.HEADER, spec["header"])
    c.setopt(pycurl.FOLLOWLOCATION, 1)
    paused = [0]
    def write(b, c=c, body=body, paused=paused, want=spec.get("pause", 0)):
        # pause on the first write (the status line) `want` times; the progress callback
        # lifts it: libcurl then gives the lines it held back together in one write
        if paused[0] < want:
            paused[0] += 1
            return pycurl.WRITEFUNC_PAUSE
        body.append(b)
    c.setopt(pycurl.WRITEFUNCTION, write)
    if spec.get("easy_pause"):
        # pause by calling curl_easy_pause() from the header function on the status line
        # (libcurl allows it), not by returning CURL_WRITEFUNC_PAUSE
        hp = [0]
        def header(b, c=c, hp=hp):
            if not hp[0]:
                hp[0] = 1
                c.pause(pycurl.PAUSE_RECV)
        c.setopt(pycurl.HEADERFUNCTION, header)
    if spec.get("pause") or spec.get("easy_pause"):
        c.setopt(pycurl.NOPROGRESS, 0)
        c.setopt(pycurl.XFERINFOFUNCTION, lambda *a, c=c: c.pause(pycurl.PAUSE_CONT) or 0)
    c.perform()
    text = b"".join(body).decode()
    out.append({"code": c.getinfo(pycurl.RESPONSE_CODE), "text": text,
                "header_size": c.getinfo(pycurl.HEADER_SIZE)})
    c.close()
print(json.dumps(out))
"""

    def test_header_lines_in_the_body_are_not_read_as_the_body(self):
        """CURLOPT_HEADER (PHP's CURLOPT_HEADER => true, then a split at
        CURLINFO_HEADER_SIZE; pycurl HEADER): libcurl hands each header line to the write
        function too, before the body.  The usage reader took the status line for the
        start of the body, read the JSON answer as an SSE stream and found nothing: every
        such call had no tokens and no cost (a helper's repro).  Now the header lines go
        to the host as before and the body alone is read, also after an interim 100
        Continue, a followed 307 and a retried 503 (whose header the host never sees)."""
        harness.require_pycurl()
        model = "gpt-4o-mini"
        chat = json.dumps({"model": model, "messages": [{"role": "user",
                                                          "content": "hello there, how are you?"}]})
        stream = json.dumps({"model": model, "stream": True,
                             "stream_options": {"include_usage": True},
                             "messages": [{"role": "user", "content": "tell me a story"}]})
        ct = "Content-Type: application/json"
        cases, ours = [], []
        for header in (0, 1):
            u = harness.unique_key("hb")
            ours.append(u)
            cases += [
                ("json", header, self.mock.url(CHAT, plan="200", key=f"{u}j"), [ct], chat),
                ("sse", header, self.mock.url(CHAT, plan="200", key=f"{u}s"), [ct], stream),
                ("continue", header, self.mock.url(CHAT, plan="200", key=f"{u}c"),
                 [ct, "Expect: 100-continue"], chat),
                ("retried", header, self.mock.url(CHAT, plan="503,200", key=f"{u}r"), [ct], chat),
                ("redirect", header, self.mock.base + CHAT,
                 [ct, f"X-Mock-Plan: 307:h.location={CHAT}:h.x-case={u},200"], chat),
                # helper-60: paused on the status line, the lines came back in one write
                ("paused", header, self.mock.url(CHAT, plan="200", key=f"{u}p"), [ct], chat),
                # helper-61: the same by curl_easy_pause() from the header function
                ("easy_paused", header, self.mock.url(CHAT, plan="200", key=f"{u}e"), [ct],
                 chat)]
        specs = [{"url": url, "header": header, "headers": hs, "body": body,
                  "pause": 1 if name == "paused" else 0,
                  "easy_pause": 1 if name == "easy_paused" else 0}
                 for name, header, url, hs, body in cases]
        script = self.tmp / "header_host.py"
        script.write_text(self.HEADER_HOST)
        p = harness.run([harness.PYTHON, str(script), json.dumps(specs)], self.guard_env(),
                        timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        got = json.loads(p.stdout)
        finals = [r for r in self.records() if r["final"]]
        self.assertEqual(len(finals), len(cases), finals)
        billed = {}
        # This test's entries alone (every key, or the redirect's plan, holds one of its
        # unique keys): the mock is shared by every test of the run, and a late answer of
        # an earlier test's call was counted here in long runs (an extra 200 of 9 tokens).
        for e in self.mock.entries():
            if e["status"] == 200 and e.get("usage") and \
                    any(u in (e.get("key") or "") for u in ours):
                billed[e["seq"]] = e["usage"]
        by_case = {}
        for (name, header, *_), host, rec in zip(cases, got, finals):
            with self.subTest(case=name, header=header):
                self.assertEqual(host["code"], 200)
                self.assertEqual(rec["status"], 200, rec)
                self.assertEqual(rec["model"], model, rec)
                self.assertIsNotNone(rec["total_tokens"], rec)
                self.assertIsNotNone(rec["cost_usd"], rec)
                self.assertEqual(rec["total_tokens"],
                                 rec["prompt_tokens"] + rec["completion_tokens"], rec)
                # The host's body is the answer's, after the header lines libcurl gives
                # with CURLOPT_HEADER: one block a response it saw (not the 503's).
                statuses = [ln.split()[1] for ln in host["text"].split("\r\n")
                            if ln.startswith("HTTP/1.1 ")]
                want = {"continue": ["100", "200"], "redirect": ["307", "200"]}.get(
                    name, ["200"])
                self.assertEqual(statuses, want if header else [], host["text"][:300])
                by_case[(name, header)] = rec
        for name, *_ in cases[:7]:
            off, on = by_case[(name, 0)], by_case[(name, 1)]
            with self.subTest(case=name):
                for k in ("prompt_tokens", "completion_tokens", "total_tokens", "cost_usd",
                          "bytes_received", "outcome"):
                    self.assertEqual(on[k], off[k], (k, on, off))
        # Against what the provider billed: every 200 of the run, in order.
        self.assertEqual(sorted(r["total_tokens"] for r in finals),
                         sorted(u["total_tokens"] for u in billed.values()))


if __name__ == "__main__":
    unittest.main()
