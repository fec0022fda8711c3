"""libcurl's silent re-send on a dead reused keep-alive connection (README "libcurl's silent
re-send", CURLGUARD_SILENT_RESEND; CASES.md "Timeouts and duplicate billing").

Set-up: one host process makes two calls to the same URL (one plan key), so the second call
goes out on the kept-alive connection of the first. Plan 200,close,200: the server reads the
second request and closes the connection without answering; libcurl then sends the request
again on a new connection by itself (the 3rd ledger entry). Without a guard nobody sees that.

  auto (default)  POST re-sent when the connection died at once; blocked when it held the
                  request for 1 s or more
  block           POST never re-sent: curl exits 55, record reset_after_send,
                  reason libcurl_resend_blocked, possibly_billed
  allow           always re-sent, counted in libcurl_resends
  GET             idempotent: always re-sent, whatever the mode
"""

import json
import time
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

PATH = "/v1/resend"
BODY = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
FAST = {"CURLGUARD_BACKOFF_BASE_MS": "50", "CURLGUARD_BACKOFF_CAP_MS": "200"}


class ResendCase(harness.GuardTestCase):

    def two_calls(self, plan, method="POST", host="curl", **env):
        """Two calls of one host process to the same URL -> (process, url, elapsed)."""
        url = self.mock.url(PATH, plan=plan)
        if host == "curl":
            argv = [harness.CURL, "-sS", "--noproxy", "*"]
            if method == "POST":
                argv += ["--data-binary", BODY]
            argv += [url, url]
        else:                                   # the C host: two performs on one handle
            if not harness.CGHOST.exists():
                self.skipTest(f"{harness.CGHOST} is not built")
            argv = [harness.CGHOST, "--method", method, "--errbuf", "--twice"]
            if method == "POST":
                argv += ["--post-fields", BODY]
            argv += [url]
        started = time.monotonic()
        p = harness.run(argv, self.guard_env(extra=FAST, **env), timeout=30)
        return p, url, time.monotonic() - started

    def ledger(self, url, count):
        try:   # the host has exited: a request not there by now never came
            self.mock.wait_entries(url=url, count=count, timeout=3)
        except AssertionError:
            pass                      # reported below, with the entries
        time.sleep(0.1)
        got = self.mock.entries(url=url)
        self.assertEqual(len(got), count,
                         f"server saw {len(got)} requests, expected {count}: "
                         f"{[(e['n'], e['action'], e['conn'], e['conn_req']) for e in got]}")
        return got

    def summary(self, recs):
        return [(r.get("attempt"), r.get("outcome"), r.get("decision"), r.get("reason"),
                 r.get("curl_code"), r.get("libcurl_resends")) for r in recs]

    def assert_reused(self, entries):
        """The set-up worked: request 2 went out on request 1's connection."""
        self.assertEqual(entries[1]["conn"], entries[0]["conn"],
                         f"no keep-alive reuse, the test proves nothing: {entries}")
        self.assertEqual(entries[1]["conn_req"], 2)
        self.assertEqual(entries[1]["action"], "close")

    def assert_resent(self, p, url, method="POST"):
        """libcurl re-sent call 2 on a new connection; the guard counted it."""
        self.assertEqual(p.returncode, 0, p.stderr)
        entries = self.ledger(url, 3)
        self.assert_reused(entries)
        self.assertNotEqual(entries[2]["conn"], entries[1]["conn"])
        self.assertEqual(entries[2]["conn_req"], 1)
        self.assertEqual([e["method"] for e in entries], [method] * 3)
        self.assertEqual(entries[1]["body_digest"], entries[2]["body_digest"])
        lines = p.stdout.decode().splitlines()
        self.assertEqual([json.loads(x)["n"] for x in lines], [1, 3], p.stdout)
        recs = self.records()
        s = self.summary(recs)
        self.assertEqual(len(recs), 2, f"one record per call (the re-send is no attempt): {s}")
        self.assertEqual(len({r["request_id"] for r in recs}), 2, s)
        self.assertEqual([(r["attempt"], r["outcome"], r["final"]) for r in recs],
                         [(1, "ok", True), (1, "ok", True)], s)
        self.assertEqual([r["libcurl_resends"] for r in recs], [0, 1], s)
        return recs

    def assert_blocked(self, p, url, host="curl"):
        """The re-send was prevented: 2 requests only, CURLE_SEND_ERROR, a clear record."""
        if host == "curl":
            self.assertEqual(p.returncode, 55, p.stderr)
            self.assertIn(b"curl: (55) curlguard:", p.stderr)
            self.assertEqual(json.loads(p.stdout)["n"], 1)      # the first call's answer only
        else:
            self.assertIn(b"perform=2 rc=55 ", p.stderr)
            self.assertIn(b'errbuf="curlguard:', p.stderr)
        entries = self.ledger(url, 2)
        self.assert_reused(entries)
        recs = self.records()
        s = self.summary(recs)
        self.assertEqual(len(recs), 2, s)
        for r in recs:
            self.assertRecordKeys(r)
        self.assertEqual((recs[0]["outcome"], recs[0]["libcurl_resends"]), ("ok", 0), s)
        r = recs[1]
        self.assertEqual((r["attempt"], r["final"], r["outcome"], r["decision"], r["reason"],
                          r["possibly_billed"], r["curl_code"], r["status"]),
                         (1, True, "reset_after_send", "give_up", "libcurl_resend_blocked",
                          True, 55, None), s)
        self.assertEqual(r["libcurl_resends"], 1, s)
        return recs


class AutoModeTest(ResendCase):

    def test_post_dead_at_once_is_resent(self):
        p, url, _ = self.two_calls("200,close,200")
        self.assert_resent(p, url)

    def test_post_dead_after_holding_request_is_blocked(self):
        """The dead connection held the request 1.5 s: it may have been processed."""
        p, url, elapsed = self.two_calls("200,close:delay=1500,200")
        self.assert_blocked(p, url)
        self.assertGreaterEqual(elapsed, 1.5)

    def test_post_dead_after_half_a_second_is_resent(self):
        """Below the 1 s threshold auto still lets libcurl re-send."""
        p, url, _ = self.two_calls("200,close:delay=500,200")
        self.assert_resent(p, url)

    def test_get_dead_after_holding_request_is_resent(self):
        p, url, _ = self.two_calls("200,close:delay=1200,200", method="GET")
        self.assert_resent(p, url, method="GET")

    def test_c_host_post_blocked(self):
        """The same through a C host: two performs on one easy handle."""
        p, url, _ = self.two_calls("200,close:delay=1200,200", host="cghost")
        self.assert_blocked(p, url, host="cghost")


class BlockModeTest(ResendCase):

    def test_post_blocked(self):
        p, url, _ = self.two_calls("200,close,200", CURLGUARD_SILENT_RESEND="block")
        self.assert_blocked(p, url)

    def test_get_still_resent(self):
        p, url, _ = self.two_calls("200,close,200", method="GET",
                                   CURLGUARD_SILENT_RESEND="block")
        self.assert_resent(p, url, method="GET")

    def test_c_host_post_blocked(self):
        p, url, _ = self.two_calls("200,close,200", host="cghost",
                                   CURLGUARD_SILENT_RESEND="block")
        self.assert_blocked(p, url, host="cghost")


class AllowModeTest(ResendCase):

    def test_post_resent_and_counted(self):
        p, url, _ = self.two_calls("200,close,200", CURLGUARD_SILENT_RESEND="allow")
        self.assert_resent(p, url)

    def test_post_resent_after_holding_request(self):
        p, url, _ = self.two_calls("200,close:delay=1200,200", CURLGUARD_SILENT_RESEND="allow")
        self.assert_resent(p, url)


if __name__ == "__main__":
    unittest.main()
