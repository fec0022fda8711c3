"""Request identity (SPEC section 5 request_id; README CURLGUARD_REQUEST_ID_HEADER and
"Host retries"): one request_id per call on every attempt's record, the id carried to the
server in a header on every attempt (checked in the mock's ledger), a host's own
Idempotency-Key reused, and host retries (curl --retry) marked with repeat_of / repeats.
"""

import re
import unittest
import uuid

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

PATH = "/v1/identity"
BODY = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
FAST = {"CURLGUARD_BACKOFF_BASE_MS": "50", "CURLGUARD_BACKOFF_CAP_MS": "200"}
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


class IdentityCase(harness.GuardTestCase):

    def curl(self, *args, **env):
        argv = [harness.CURL, "-sS", "--noproxy", "*", *args]
        return harness.run(argv, self.guard_env(extra=FAST, **env), timeout=30)

    def summary(self, recs):
        return [(r.get("attempt"), r.get("outcome"), r.get("decision"), r.get("reason"),
                 r.get("request_id"), r.get("repeat_of"), r.get("repeats")) for r in recs]


class RequestIdTest(IdentityCase):

    def test_one_id_per_call_uuid4_and_calls_differ(self):
        url1 = self.mock.url(PATH, plan="503,503,200")
        url2 = self.mock.url(PATH, plan="503,200")
        # two calls in one process (curl --next) and a third in another process
        p = self.curl("--data-binary", BODY, url1, "--next", "--data-binary", BODY, url2)
        self.assertEqual(p.returncode, 0, p.stderr)
        url3 = self.mock.url(PATH, plan="200")
        p = self.curl(url3)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.exact_entries(url1, 3)
        self.exact_entries(url2, 2)
        recs = self.records()
        s = self.summary(recs)
        self.assertEqual([r["attempt"] for r in recs], [1, 2, 3, 1, 2, 1], s)
        calls = [recs[0:3], recs[3:5], recs[5:6]]
        ids = []
        for call in calls:
            self.assertEqual(len({r["request_id"] for r in call}), 1, s)
            rid = call[0]["request_id"]
            self.assertRegex(rid, UUID4)
            ids.append(rid)
            self.assertEqual([r["final"] for r in call], [False] * (len(call) - 1) + [True], s)
        self.assertEqual(len(set(ids)), 3, f"calls share a request_id: {s}")

    def test_no_header_unless_configured(self):
        url = self.mock.url(PATH, plan="503,200")
        p = self.curl("--data-binary", BODY, url)
        self.assertEqual(p.returncode, 0, p.stderr)
        for e in self.exact_entries(url, 2):
            self.assertIsNone(e["idempotency_key"], e["headers"])
            self.assertIsNone(e["request_id"], e["headers"])

    def test_idempotency_key_header_on_every_attempt(self):
        url = self.mock.url(PATH, plan="503,429,200")
        p = self.curl("--data-binary", BODY, url, CURLGUARD_REQUEST_ID_HEADER="Idempotency-Key")
        self.assertEqual(p.returncode, 0, p.stderr)
        entries = self.exact_entries(url, 3)
        recs = self.records()
        self.assertEqual(len(recs), 3, self.summary(recs))
        rid = recs[0]["request_id"]
        self.assertRegex(rid, UUID4)
        self.assertEqual([e["idempotency_key"] for e in entries], [rid] * 3)
        self.assertEqual([e["headers"].get("idempotency-key") for e in entries], [rid] * 3)
        self.assertEqual({r["request_id"] for r in recs}, {rid})

    def test_guard_idempotency_key_makes_post_500_retryable(self):
        """With CURLGUARD_REQUEST_ID_HEADER=Idempotency-Key every attempt carries the key, so
        the request is idempotent (SPEC 7: "any request carrying an Idempotency-Key header")
        and a POST that got a 500 is sent again, with the same key."""
        url = self.mock.url(PATH, plan="500,200")
        p = self.curl("--data-binary", BODY, url, CURLGUARD_REQUEST_ID_HEADER="Idempotency-Key")
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = self.records()
        entries = self.mock.wait_entries(url=url, count=1)
        self.assertEqual([(r["outcome"], r["decision"]) for r in recs],
                         [("http_500", "retry"), ("ok", "done")],
                         f"records {self.summary(recs)}; the server saw "
                         f"{[(e['n'], e['status'], e['idempotency_key']) for e in entries]}")
        entries = self.exact_entries(url, 2)
        rid = recs[0]["request_id"]
        self.assertEqual([e["idempotency_key"] for e in entries], [rid, rid])

    def test_host_idempotency_key_is_reused(self):
        """The host sends Idempotency-Key: abc itself: that is the request_id, and the request
        carries it once (no second value, no guard-made key)."""
        for spelling in ("Idempotency-Key", "idempotency-key"):
            with self.subTest(spelling=spelling):
                try:
                    self.log.unlink()
                except FileNotFoundError:
                    pass
                key = "abc-" + uuid.uuid4().hex[:8]
                url = self.mock.url(PATH, plan="500,200")
                p = self.curl("--data-binary", BODY, "-H", f"{spelling}: {key}", url,
                              CURLGUARD_REQUEST_ID_HEADER="Idempotency-Key")
                self.assertEqual(p.returncode, 0, p.stderr)
                entries = self.exact_entries(url, 2)          # a POST with a key: 500 is retried
                for e in entries:
                    self.assertEqual(e["idempotency_key"], key)
                    self.assertEqual(e["headers"].get("idempotency-key"), key,
                                     f"header sent twice or replaced: {e['headers']}")
                recs = self.records()
                self.assertEqual([r["request_id"] for r in recs], [key, key],
                                 self.summary(recs))

    def test_x_request_id_header(self):
        url = self.mock.url(PATH, plan="503,200")
        p = self.curl("--data-binary", BODY, url, CURLGUARD_REQUEST_ID_HEADER="X-Request-Id")
        self.assertEqual(p.returncode, 0, p.stderr)
        entries = self.exact_entries(url, 2)
        rid = self.records()[0]["request_id"]
        self.assertRegex(rid, UUID4)
        self.assertEqual([e["request_id"] for e in entries], [rid, rid])
        self.assertEqual([e["headers"].get("x-request-id") for e in entries], [rid, rid])
        self.assertEqual([e["idempotency_key"] for e in entries], [None, None])
        self.assertEqual({r["request_id"] for r in self.records()}, {rid})

    def test_host_x_request_id_is_reused(self):
        url = self.mock.url(PATH, plan="503,200")
        p = self.curl("--data-binary", BODY, "-H", "X-Request-Id: xyz-1", url,
                      CURLGUARD_REQUEST_ID_HEADER="X-Request-Id")
        self.assertEqual(p.returncode, 0, p.stderr)
        entries = self.exact_entries(url, 2)
        self.assertEqual([e["headers"].get("x-request-id") for e in entries], ["xyz-1"] * 2)
        self.assertEqual([r["request_id"] for r in self.records()], ["xyz-1"] * 2)

    def test_x_request_id_does_not_make_post_idempotent(self):
        """Only Idempotency-Key makes a POST idempotent; X-Request-Id does not."""
        url = self.mock.url(PATH, plan="500,200")
        p = self.curl("--data-binary", BODY, url, CURLGUARD_REQUEST_ID_HEADER="X-Request-Id")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.exact_entries(url, 1)
        recs = self.records()
        self.assertEqual([(r["outcome"], r["decision"], r["reason"], r["possibly_billed"])
                          for r in recs],
                         [("http_500", "give_up", "not_idempotent", True)], self.summary(recs))


class HostRetryTest(IdentityCase):

    def test_curl_retry_marks_repeats(self):
        """Plain curl retries a 503 by itself (curl --retry, one new call each time); with the
        guard's own retries off, the 2nd and 3rd calls are repeats of the first."""
        url = self.mock.url(PATH, plan="503")
        # --retry-delay 1: curl 7.88 sleeps at least 1 s between its retries (0 = 1 s, 2 s)
        p = self.curl("--retry", "2", "--retry-delay", "1", "--data-binary", BODY, url,
                      CURLGUARD_MAX_ATTEMPTS=1)
        self.assertEqual(p.returncode, 0, p.stderr)
        entries = self.exact_entries(url, 3)
        self.assertEqual(len({e["body_digest"] for e in entries}), 1)
        recs = self.records()
        s = self.summary(recs)
        self.assertEqual(len(recs), 3, s)
        self.assertEqual([r["attempt"] for r in recs], [1, 1, 1], s)
        ids = [r["request_id"] for r in recs]
        self.assertEqual(len(set(ids)), 3, s)
        self.assertEqual([r["repeats"] for r in recs], [0, 1, 2], s)
        self.assertIsNone(recs[0]["repeat_of"], s)
        self.assertEqual(recs[1]["repeat_of"], ids[0], s)
        self.assertEqual(recs[2]["repeat_of"], ids[0],
                         f"the 3rd call should point at the first call {ids[0]}: {s}")

    def test_curl_parallel_retry_marks_repeats(self):
        """curl --parallel --retry adds the same easy handle again for each retry: in the
        multi driver, where the handle is the worker (repeat.h), its new calls are still
        repeats of the first."""
        url = self.mock.url(PATH, plan="503")
        p = self.curl("-Z", "--retry", "2", "--retry-delay", "1", "--data-binary", BODY, url,
                      CURLGUARD_MAX_ATTEMPTS=1)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.exact_entries(url, 3)
        recs = self.records()
        s = self.summary(recs)
        self.assertEqual([r["repeats"] for r in recs], [0, 1, 2], s)
        self.assertEqual([r["repeat_of"] for r in recs[1:]], [recs[0]["request_id"]] * 2, s)

    def test_curl_parallel_retry_of_identical_transfers_marks_repeats(self):
        """Four identical POSTs in one curl -Z --retry 2, each failing: each handle's own
        retries are repeats of its first call, not lost because another handle ended an
        identical call in between (one chain per key and worker).  Before (a second
        helper's find), each handle's end overwrote the others' failure: 8 identical
        transfers with --retry 3 had 3 of 24 retries marked, and the budget bounded
        nothing."""
        url = self.mock.url(PATH, plan="503")
        # files of their own: a retry truncates what it wrote (not /dev/null)
        outs = [a for i in range(4) for a in ("-o", str(self.tmp / f"out{i}"), url)]
        p = self.curl("-Z", "--retry", "2", "--retry-delay", "1", "--data-binary", BODY, *outs,
                      CURLGUARD_MAX_ATTEMPTS=1, CURLGUARD_BREAKER="off",
                      CURLGUARD_RETRY_BUDGET_MIN_PER_S=100)
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = self.records()
        s = self.summary(recs)
        self.assertEqual(len(recs), 12, s)
        self.assertEqual(sum(1 for r in recs if r["repeats"] == 0), 4, s)
        firsts = {r["request_id"] for r in recs if r["repeats"] == 0}
        self.assertTrue(all(r["repeat_of"] in firsts for r in recs if r["repeats"]), s)

    def test_identical_parallel_transfers_are_not_repeats(self):
        """Four identical POSTs in one curl -Z, two at a time: the first two fail (503, one
        attempt each), then the other two start, on handles of their own.  They are
        distinct calls, as identical calls of concurrent threads are: a multi host's
        transfers are its workers.  Before (a helper's find), one thread ran them all, so
        they counted as host retries of the failed two, and after an outage, with the retry
        budget drained, they were refused unsent (16 identical POSTs, 8 at a time: 8 of 16
        done against a healthy provider; plain curl 16 of 16)."""
        url = self.mock.url(PATH, plan="503,503,200,200")
        outs = [a for _ in range(4) for a in ("-o", "/dev/null", url)]
        p = self.curl("-Z", "--parallel-max", "2", "-w", "%{http_code}\n",
                      "--data-binary", BODY, *outs, CURLGUARD_MAX_ATTEMPTS=1)
        self.assertEqual(sorted(p.stdout.decode().split()), ["200", "200", "503", "503"],
                         p.stderr)
        recs = self.records()
        s = self.summary(recs)
        self.assertEqual(len(recs), 4, s)
        self.assertEqual([(r["repeat_of"], r["repeats"]) for r in recs], [(None, 0)] * 4, s)

    def test_different_bodies_are_not_repeats(self):
        # The first call fails (503, one attempt), so the host trying it again is a retry.
        url = self.mock.url(PATH, plan="503,200,200")
        p = self.curl("--data-binary", '{"a":1}', url, "--next", "--data-binary", '{"a":2}', url,
                      "--next", "--data-binary", '{"a":1}', url, CURLGUARD_MAX_ATTEMPTS="1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.exact_entries(url, 3)
        recs = self.records()
        s = self.summary(recs)
        self.assertEqual(len(recs), 3, s)
        self.assertNotEqual(recs[0]["body_digest"], recs[1]["body_digest"])
        self.assertEqual(recs[0]["body_digest"], recs[2]["body_digest"])
        self.assertEqual([r["repeats"] for r in recs[:2]], [0, 0], s)
        self.assertEqual([r["repeat_of"] for r in recs[:2]], [None, None], s)
        # the third has the first one's body: a repeat of the first, not of the second
        self.assertEqual((recs[2]["repeat_of"], recs[2]["repeats"]),
                         (recs[0]["request_id"], 1), s)

    def test_identical_calls_after_success_are_not_repeats(self):
        # Polling the same thing is not a host retry: only a call after a failure is.
        url = self.mock.url(PATH, plan="200")
        p = self.curl("--data-binary", BODY, url, "--next", "--data-binary", BODY, url)
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = self.records()
        self.assertEqual([(r["repeat_of"], r["repeats"]) for r in recs], [(None, 0)] * 2,
                         self.summary(recs))

    def test_different_urls_are_not_repeats(self):
        url1 = self.mock.url(PATH, plan="200")
        url2 = self.mock.url(PATH + "/other", plan="200")
        p = self.curl("--data-binary", BODY, url1, "--next", "--data-binary", BODY, url2)
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = self.records()
        self.assertEqual([(r["repeat_of"], r["repeats"]) for r in recs],
                         [(None, 0), (None, 0)], self.summary(recs))

    def test_repeat_window_zero_disables(self):
        url = self.mock.url(PATH, plan="200")
        p = self.curl("--data-binary", BODY, url, "--next", "--data-binary", BODY, url,
                      CURLGUARD_REPEAT_WINDOW_MS=0)
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = self.records()
        self.assertEqual([(r["repeat_of"], r["repeats"]) for r in recs],
                         [(None, 0), (None, 0)], self.summary(recs))

    def test_guard_retries_are_not_repeats(self):
        """The guard's own attempts belong to one call: no repeat_of on them."""
        url = self.mock.url(PATH, plan="503,503,200")
        p = self.curl("--data-binary", BODY, url)
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = self.records()
        self.assertEqual([(r["attempt"], r["repeat_of"], r["repeats"]) for r in recs],
                         [(1, None, 0), (2, None, 0), (3, None, 0)], self.summary(recs))


if __name__ == "__main__":
    unittest.main()
