"""cghost (tests/hosts/cghost.c), an ordinary libcurl program, plain vs under the guard.

Each case runs cghost once without the guard against a plan that succeeds at once and once
with the guard against a plan that needs a retry (`503:ra=0` then the same fixed 200), and
compares stdout, the stderr summary and any output files byte for byte. Only the progress
callback count is normalised (it depends on timing even between two plain runs).
"""

import hashlib
import re
import time
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

FIXED = '{"id": "fixed-c", "object": "chat.completion", "choices": [{"text": "from cghost"}]}\n'
OK = {"action": 200, "body": FIXED}
RETRY = ["503:ra=0", OK]
FAST = {"CURLGUARD_BACKOFF_BASE_MS": "50", "CURLGUARD_BACKOFF_CAP_MS": "200"}
BODY = "0123456789abcdefghijklmnopqrstuvwxyz-request-body"      # > 7 bytes: several reads
SHA = hashlib.sha256(BODY.encode()).hexdigest()
SUMMARY_RE = re.compile(rb"^(?:\[t\d+\] )?cghost: perform=(\d+) rc=(\d+) status=(\d+) .*$", re.M)



def normalize(stderr, fields=("progress",)):
    """Timing-dependent parts of the summary: callback counts named in fields, ms in errors."""
    for f in fields:
        stderr = re.sub(rf"\b{f}=\d+".encode(), f"{f}=N".encode(), stderr)
    return re.sub(rb"after \d+ ms", b"after N ms", stderr)


def summaries(stderr):
    """[(perform, rc, status), ...] from cghost's summary lines."""
    return [tuple(int(x) for x in m.groups()) for m in SUMMARY_RE.finditer(stderr)]


class CHostTest(harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not harness.CGHOST.exists():
            raise unittest.SkipTest(f"{harness.CGHOST} is not built (make build/tests/cghost)")

    def genv(self, **extra):
        return self.guard_env(extra=FAST, **extra)

    def host(self, opts, url, env, timeout=30):
        return harness.run([harness.CGHOST, *opts, url], env, timeout=timeout)

    def both(self, opts, gplan=RETRY, pplan=(OK,), path="/v1/host", genv=None, files=(),
             url2=None):
        """Run cghost guarded (gplan) and plain (pplan). opts may hold "{F}" placeholders for
        each name F in files: replaced by a per-run path. url2: (guarded plan, plain plan) for
        --url2. Returns (g, p, gurl, gfiles, pfiles, gurl2)."""
        gurl = self.mock.url(path, plan=list(gplan) if isinstance(gplan, tuple) else gplan)
        purl = self.mock.url(path, plan=list(pplan) if isinstance(pplan, tuple) else pplan)
        gurl2 = purl2 = None
        if url2:
            gurl2 = self.mock.url(path + "/2", plan=url2[0])
            purl2 = self.mock.url(path + "/2", plan=url2[1])
        out = {}
        for run, url, u2, env in (("g", gurl, gurl2, genv or self.genv()),
                                  ("p", purl, purl2, harness.plain_env())):
            paths = {f: self.tmp / f"{run}-{f}" for f in files}
            args = [a.format(**{k: str(v) for k, v in paths.items()}) for a in opts]
            if u2:
                args += ["--url2", u2]
            out[run] = (self.host(args, url, env), paths)
        (g, gfiles), (p, pfiles) = out["g"], out["p"]
        return g, p, gurl, gfiles, pfiles, gurl2

    def assertSame(self, g, p, fields=("progress",)):
        self.assertEqual(g.returncode, p.returncode, f"guarded stderr: {g.stderr!r}")
        self.assertEqual(g.stdout, p.stdout)
        self.assertEqual(normalize(g.stderr, fields), normalize(p.stderr, fields))

    def assertRetried(self, gurl, count=2):
        entries = self.mock.wait_entries(url=gurl, count=count)
        self.assertEqual(len(entries), count, entries)
        return entries

    def assertNoMore(self, url, count=1):
        time.sleep(0.15)        # a wrong retry would have arrived by now
        entries = self.mock.wait_entries(url=url, count=count) if count else self.mock.entries(url=url)
        self.assertEqual(len(entries), count, entries)
        return entries

    def test_a_url_given_with_curlopt_curlu_is_guarded(self):
        """libcurl goes by CURLOPT_CURLU (a curl_url handle) instead of CURLOPT_URL: such
        a call is guarded like any (before: never, and no record, since the shadow saw no
        URL), and its record has the CURLU's path without its query."""
        g, p, gurl, *_ = self.both(["--curlu", "--headers", "cb"])
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertSame(g, p)
        self.assertRetried(gurl, 2)                        # the 503, then the 200
        recs = self.records()
        self.assertEqual([(r["attempt"], r["status"], r["path"]) for r in recs],
                         [(1, 503, "/v1/host"), (2, 200, "/v1/host")], recs)
        self.assertEqual(len({r["request_id"] for r in recs}), 1, recs)

    # ------------------------------------------------------------------ delivery modes

    def test_own_write_and_header_callbacks(self):
        g, p, gurl, *_ = self.both(["--headers", "cb"])
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertSame(g, p)
        self.assertEqual(g.stdout, FIXED.encode())
        self.assertIn(b"H: HTTP/1.1 200 OK\r\n", g.stderr)
        self.assertNotIn(b"503", g.stderr)
        self.assertEqual(summaries(g.stderr), [(1, 0, 200)])
        self.assertRetried(gurl)
        recs = self.records()
        self.assertEqual([(r["attempt"], r["decision"]) for r in recs], [(1, "retry"), (2, "done")])

    def test_default_write_to_stdout(self):
        g, p, gurl, *_ = self.both(["--write", "default"])
        self.assertSame(g, p)
        self.assertEqual(g.stdout, FIXED.encode())
        self.assertRetried(gurl)

    def test_writedata_file_only(self):
        g, p, gurl, gf, pf, _ = self.both(["--write", "data", "--out", "{body}"], files=["body"])
        self.assertSame(g, p)
        self.assertEqual(gf["body"].read_bytes(), pf["body"].read_bytes())
        self.assertEqual(gf["body"].read_bytes(), FIXED.encode())
        self.assertEqual(g.stdout, b"")
        self.assertRetried(gurl)

    def test_headerdata_only_goes_to_the_write_function(self):
        # own write callback, HEADERDATA set, no HEADERFUNCTION: headers reach write_cb
        g, p, gurl, *_ = self.both(["--headers", "data"])
        self.assertSame(g, p)
        self.assertIn(b"HTTP/1.1 200 OK\r\n", g.stderr)
        self.assertNotIn(b"503", g.stderr)
        self.assertRetried(gurl)
        # libcurl's default fwrite, HEADERDATA a file
        g, p, gurl, gf, pf, _ = self.both(["--write", "default", "--headers", "data",
                                           "--header-out", "{hdr}"], files=["hdr"])
        self.assertSame(g, p)
        self.assertEqual(gf["hdr"].read_bytes(), pf["hdr"].read_bytes())
        self.assertTrue(gf["hdr"].read_bytes().startswith(b"HTTP/1.1 200 OK\r\n"))
        self.assertNotIn(b"503", gf["hdr"].read_bytes())
        self.assertRetried(gurl)

    def test_no_header_delivery(self):
        g, p, gurl, *_ = self.both(["--headers", "none"])
        self.assertSame(g, p)
        self.assertNotIn(b"HTTP/1.1", g.stdout + g.stderr)
        self.assertRetried(gurl)

    def test_include(self):
        g, p, gurl, *_ = self.both(["--include", "--headers", "cb"])
        self.assertSame(g, p)
        self.assertTrue(g.stdout.startswith(b"HTTP/1.1 200 OK\r\n"), g.stdout[:80])
        self.assertTrue(g.stdout.endswith(FIXED.encode()))
        self.assertNotIn(b"503", g.stdout)
        self.assertRetried(gurl)

    # ------------------------------------------------------------------ request bodies

    def test_postfields(self):
        g, p, gurl, *_ = self.both(["--post-fields", BODY])
        self.assertSame(g, p)
        entries = self.assertRetried(gurl)
        self.assertEqual([(e["method"], e["body_digest"]) for e in entries], [("POST", SHA)] * 2)

    def test_copypostfields_survive_the_freed_buffer(self):
        g, p, gurl, *_ = self.both(["--copy-post-fields", BODY])
        self.assertSame(g, p)
        entries = self.assertRetried(gurl)
        self.assertEqual([(e["body_len"], e["body_digest"]) for e in entries],
                         [(len(BODY), SHA)] * 2)
        recs = self.records()
        self.assertEqual(len(recs), 2)
        self.assertEqual(recs[0]["body_digest"], recs[1]["body_digest"])
        self.assertIsNotNone(recs[0]["body_digest"])

    def test_read_callback_with_seek_is_replayed(self):
        opts = ["--method", "PUT", "--read-body", BODY, "--seek"]
        g, p, gurl, *_ = self.both(opts, gplan=["500", OK], path="/v1/put")
        # The host sees its body read twice and one rewind (as with libcurl's own resend);
        # everything else is identical.
        self.assertSame(g, p, fields=("progress", "seeks", "reads"))
        self.assertRegex(g.stderr.decode(), rf"seeks=1 reads={2 * len(BODY)}\n")
        entries = self.assertRetried(gurl)
        self.assertEqual([(e["method"], e["body_len"], e["body_digest"]) for e in entries],
                         [("PUT", len(BODY), SHA)] * 2)
        self.assertEqual([e["status"] for e in entries], [500, 200])
        recs = self.records()
        self.assertEqual([r["decision"] for r in recs], ["retry", "done"])

    def test_read_callback_without_seek_is_not_replayed(self):
        opts = ["--method", "PUT", "--read-body", BODY]
        for plan in ("500", "503:ra=0"):
            with self.subTest(plan=plan):
                self.log.unlink(missing_ok=True)
                g, p, gurl, *_ = self.both(opts, gplan=plan + ",200", pplan=plan, path="/v1/put")
                self.assertSame(g, p)
                self.assertIn(b"rc=0 status=" + plan[:3].encode(), g.stderr)
                self.assertEqual(self.assertNoMore(gurl)[0]["body_digest"], SHA)
                recs = self.records()
                self.assertEqual(len(recs), 1, recs)
                self.assertEqual((recs[0]["final"], recs[0]["decision"], recs[0]["reason"]),
                                 (True, "give_up", "body_not_replayable"))

    # ------------------------------------------------------------------ callbacks

    def test_progress_callbacks_keep_their_data_pointer(self):
        # ra=1: the guard's backoff wait lasts a second, during which it calls the host's
        # progress callback itself (cghost aborts on a wrong data pointer).
        for mode, plan in (("xferinfo", ["503:ra=1", OK]), ("progress", RETRY)):
            with self.subTest(mode=mode):
                g, p, gurl, *_ = self.both(["--progress", mode, "--headers", "cb"], gplan=plan)
                self.assertSame(g, p)
                self.assertNotIn(b"FATAL", g.stderr)
                self.assertRegex(g.stderr.decode(), r"progress=[1-9]\d*")
                self.assertRetried(gurl)

    def test_data_pointers_set_from_a_callback(self):
        """The host points WRITEDATA, HEADERDATA and XFERINFODATA at other sinks from its
        first header callback. While an attempt runs the shim only records them (the
        attempt's callbacks stand in for the host's), and the easy driver leaves libcurl's
        copies as they were before the perform (issue 16: the attempt's callbacks find it
        through the thread, not through these options): every later header line, body byte
        and progress call must still go to the new pointers at once, as without the guard,
        and the next perform (retried too) uses them from its start. A held answer (GET,
        after a retry: handed over at its end) and a streamed one (POST)."""
        opts = ["--headers", "cb", "--progress", "xferinfo", "--swap-data-in-callback",
                "--twice"]
        for how, gplan, url2 in ((["--method", "GET"], RETRY, (RETRY, [OK])),
                                 (["--post-fields", "x"], (OK,), ([OK], [OK]))):
            with self.subTest(how=how):
                g, p, gurl, _, _, gurl2 = self.both(opts + how, gplan=gplan, url2=url2,
                                                    path="/v1/swap%d" % len(how[1]))
                self.assertSame(g, p)
                self.assertNotIn(b"FATAL", g.stderr)
                self.assertEqual(summaries(g.stderr), [(1, 0, 200), (2, 0, 200)])
                self.assertEqual(g.stdout, FIXED.encode() * 2)
                # the first status line to the first sinks, all the rest to the second
                # ones (their counts run on across both performs)
                self.assertRegex(g.stderr, rb"perform=1 .* writes=0 bytes=0 headers=1 ")
                self.assertRegex(g.stderr, rb"perform=2 .* writes=0 bytes=0 headers=0 ")
                self.assertRegex(g.stderr, rb"after the swap: writes=2 bytes=%d headers=9 "
                                 % (2 * len(FIXED)))
                self.assertIn(b"H2: HTTP/1.1 200", g.stderr)

    def test_progress_abort_is_final(self):
        for mode in ("xferinfo", "progress"):
            with self.subTest(mode=mode):
                self.log.unlink(missing_ok=True)
                opts = ["--progress", mode, "--abort-progress-after", "1"]
                g, p, gurl, *_ = self.both(opts, gplan="503:ra=0,200", pplan="503:ra=0,200")
                self.assertSame(g, p)
                self.assertEqual(summaries(g.stderr), [(1, 42, 0)])
                recs = self.records()
                self.assertEqual(len(recs), 1, recs)
                self.assertEqual((recs[0]["final"], recs[0]["outcome"], recs[0]["curl_code"]),
                                 (True, "aborted_by_host", 42))
                time.sleep(0.15)
                self.assertLessEqual(len(self.mock.entries(url=gurl)), 1)

    def test_progress_abort_in_limiter_wait_keeps_queue_ms(self):
        # RPM 6 (burst 1): a first call takes the burst, so the host's call waits about
        # 10 s in the limiter, calling its progress callback once a second; it aborts on
        # the 2nd. The record says how long it queued, not 0.
        env = self.genv(CURLGUARD_RPM="6")
        first = self.host([], self.mock.url("/v1/queue-first", plan=[OK]), env)
        self.assertEqual(first.returncode, 0, first.stderr)
        url = self.mock.url("/v1/queue-abort", plan=[OK])
        t0 = time.monotonic()
        g = self.host(["--progress", "xferinfo", "--abort-progress-after", "2"], url, env)
        took = time.monotonic() - t0
        self.assertEqual(summaries(g.stderr), [(1, 42, 0)], g.stderr)
        self.assertLess(took, 8, "aborted in the wait, not after it")
        recs = [r for r in self.records() if r["path"] == "/v1/queue-abort"]
        self.assertEqual(len(recs), 1, recs)
        self.assertEqual((recs[0]["outcome"], recs[0]["curl_code"]), ("aborted_by_host", 42))
        self.assertGreaterEqual(recs[0]["queue_ms"], 1500, recs[0])
        self.assertLessEqual(recs[0]["queue_ms"], took * 1000 + 100, recs[0])
        self.assertEqual(self.mock.entries(url=url), [])

    def test_write_abort_is_final(self):
        g, p, gurl, *_ = self.both(["--abort-write-after", "10"])
        self.assertSame(g, p)
        self.assertEqual(g.stdout, FIXED.encode()[:10])
        self.assertEqual(summaries(g.stderr), [(1, 23, 200)])
        self.assertNoMore(gurl, 2)                 # the 503 retry, then nothing more
        recs = self.records()
        self.assertEqual([r["attempt"] for r in recs], [1, 2], recs)
        self.assertEqual((recs[1]["final"], recs[1]["decision"]), (True, "done"))
        # on a 200 at once: one request, one record
        self.log.unlink()
        g, p, gurl, *_ = self.both(["--abort-write-after", "10"], gplan=(OK,))
        self.assertSame(g, p)
        self.assertNoMore(gurl, 1)
        self.assertEqual(len(self.records()), 1)

    def test_write_abort_final_record_matches_host_result(self):
        # The final record is "the attempt whose result the host got": the host got
        # CURLE_WRITE_ERROR (23) from its own short write, so the record should say so.
        cases = (("GET retried", [], RETRY), ("GET first attempt", [], (OK,)),
                 ("POST first attempt", ["--post-fields", BODY], (OK,)))
        for what, extra, gplan in cases:
            with self.subTest(what):
                self.log.unlink(missing_ok=True)
                g, p, gurl, *_ = self.both(["--abort-write-after", "10", *extra], gplan=gplan)
                self.assertEqual(summaries(g.stderr), [(1, 23, 200)])
                final = [r for r in self.records() if r["final"]]
                self.assertEqual(len(final), 1)
                self.assertEqual((final[0]["curl_code"], final[0]["outcome"]),
                                 (23, "aborted_by_host"), final[0])

    def test_pause_once(self):
        # The write callback returns CURL_WRITEFUNC_PAUSE once (it has NOT taken the bytes),
        # the progress callback resumes: libcurl delivers the same bytes again.
        cases = (("GET retried", [], RETRY), ("GET 200 at once", [], (OK,)),
                 ("POST 200 at once", ["--post-fields", BODY], (OK,)))
        for what, extra, gplan in cases:
            with self.subTest(what):
                g, p, gurl, *_ = self.both(["--pause-once", "--headers", "cb", *extra],
                                           gplan=gplan)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(p.stdout, FIXED.encode())
                self.assertSame(g, p)
                self.assertRetried(gurl, 2 if gplan is RETRY else 1)

    def test_unpause_from_thread(self):
        # The write callback pauses once and another thread resumes the transfer while
        # curl_easy_perform runs (curl_easy_pause(3) says this "cannot" be done, yet it
        # works in libcurl 7.88 and hosts do it): libcurl then calls the write callback
        # from inside curl_easy_pause, on that thread.  The guard's callbacks find their
        # attempt through the thread that performs (attempt.c cg_attempt_cur), so
        # curl_easy_pause lends it to the other thread for the call (shim.c): without,
        # the streamed POST's body was lost (perform 0, pause 23, no bytes).
        cases = (("GET retried", [], RETRY), ("GET 200 at once", [], (OK,)),
                 ("POST 200 at once", ["--post-fields", BODY], (OK,)),
                 ("POST retried", ["--post-fields", BODY,
                                   "--header", "Idempotency-Key: k-unpause"], RETRY))
        for what, extra, gplan in cases:
            with self.subTest(what):
                g, p, gurl, *_ = self.both(["--unpause-from-thread", "--headers", "cb",
                                            *extra], gplan=gplan)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(p.stdout, FIXED.encode())
                self.assertNotIn(b"curl_easy_pause", p.stderr)
                self.assertSame(g, p)
                self.assertRetried(gurl, 2 if gplan is RETRY else 1)

    def test_errbuf(self):
        g, p, gurl, *_ = self.both(["--errbuf"])
        self.assertSame(g, p)
        self.assertIn(b'errbuf="" ', g.stderr)          # cleared (it was pre-filled with Z)
        self.assertRetried(gurl)
        url = f"http://127.0.0.1:{harness.closed_port()}/v1/refused"
        self.log.unlink()
        g = self.host(["--errbuf"], url, self.genv(CURLGUARD_MAX_ATTEMPTS="3"))
        p = self.host(["--errbuf"], url, harness.plain_env())
        self.assertSame(g, p)
        self.assertIn(b'rc=7 status=0 method=GET errbuf="Failed to connect to 127.0.0.1 port',
                      g.stderr)
        self.assertEqual([r["outcome"] for r in self.records()], ["connect_refused"] * 3)

    # ------------------------------------------------------------------ handle life cycle

    def test_dup(self):
        g, p, gurl, *_ = self.both(["--dup", "--headers", "cb", "--progress", "xferinfo"])
        self.assertSame(g, p)
        self.assertEqual(g.stdout, FIXED.encode())
        self.assertRetried(gurl)
        self.assertEqual([r["attempt"] for r in self.records()], [1, 2])

    def test_twice_same_url(self):
        g, p, gurl, *_ = self.both(["--twice", "--headers", "cb"])
        self.assertSame(g, p)
        self.assertEqual(g.stdout, FIXED.encode() * 2)
        self.assertEqual(summaries(g.stderr), [(1, 0, 200), (2, 0, 200)])
        self.assertRetried(gurl, 3)
        recs = self.records()
        self.assertEqual([r["attempt"] for r in recs], [1, 2, 1])
        self.assertEqual(len({r["request_id"] for r in recs}), 2)

    def test_twice_second_perform_also_retried(self):
        g, p, gurl, _, _, gurl2 = self.both(["--twice", "--headers", "cb"],
                                            url2=(RETRY, [OK]), path="/v1/twice")
        self.assertSame(g, p)
        self.assertEqual(summaries(g.stderr), [(1, 0, 200), (2, 0, 200)])
        self.assertRetried(gurl)
        self.assertRetried(gurl2)
        self.assertCalls(["/v1/twice", "/v1/twice/2"])

    def test_reset(self):
        g, p, gurl, _, _, gurl2 = self.both(["--reset", "--headers", "cb", "--post-fields", BODY],
                                            url2=(RETRY, [OK]), path="/v1/reset")
        self.assertSame(g, p)
        self.assertEqual(summaries(g.stderr), [(1, 0, 200), (2, 0, 200)])
        self.assertEqual(g.stderr.count(b"H: HTTP/1.1 200 OK"), 1, "reset must drop the "
                         "header callback for the second perform")
        self.assertRetried(gurl)
        second = self.assertRetried(gurl2)
        self.assertEqual([(e["method"], e["body_len"]) for e in second], [("GET", 0)] * 2,
                         "after curl_easy_reset the request is a plain GET")
        self.assertCalls(["/v1/reset", "/v1/reset/2"])
        recs = self.records()
        self.assertEqual([r["method"] for r in recs], ["POST", "POST", "GET", "GET"])
        self.assertEqual([r["body_digest"] is None for r in recs], [False, False, True, True])

    def assertCalls(self, paths):
        """The records are two attempts per call, one call per path, in order."""
        recs = self.records()
        self.assertEqual([(r["path"], r["attempt"], r["final"]) for r in recs],
                         [(p, a, a == 2) for p in paths for a in (1, 2)])
        ids = [r["request_id"] for r in recs]
        self.assertEqual(len(set(ids)), len(paths))
        self.assertEqual(ids[0], ids[1])

    # ------------------------------------------------------------------ time and threads

    def test_host_timeout_is_the_deadline(self):
        opts = ["--timeout-ms", "1500", "--headers", "cb"]
        started = time.monotonic()
        g = self.host(opts, self.mock.url("/v1/slow", plan="503:ra=5,200"), self.genv())
        elapsed = time.monotonic() - started
        p = self.host(opts, self.mock.url("/v1/slow", plan="503:ra=5"), harness.plain_env())
        self.assertLess(elapsed, 2.5)
        self.assertSame(g, p)
        self.assertEqual(summaries(g.stderr), [(1, 0, 503)])
        recs = self.records()
        self.assertEqual(len(recs), 1, recs)
        self.assertIn(recs[0]["reason"], ("deadline", "retry_after_too_long"))

    def test_threads(self):
        # One URL for all threads, so one counter: the first 8 requests get a 503 that is
        # held back 500 ms, so every thread's first attempt arrives before any retry.
        n = 8
        gplan = ["503:ra=0:delay=500"] * n + [OK]
        # The order of arrivals is the test's premise: no learned-rate slow start, which
        # would space a fresh pool's first attempts (test_learned_rate.py covers it).
        g, p, gurl, *_ = self.both(["--threads", str(n), "--headers", "cb"], gplan=gplan,
                                   genv=self.genv(CURLGUARD_ADAPTIVE="off"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertSame(g, p)
        self.assertEqual(summaries(g.stderr), [(1, 0, 200)] * n)
        self.assertEqual(g.stdout, FIXED.encode() * n)
        entries = self.assertRetried(gurl, 2 * n)
        self.assertEqual([e["status"] for e in entries], [503] * n + [200] * n)
        recs = self.records()
        self.assertEqual(len(recs), 2 * n)
        by_id = {}
        for r in recs:
            self.assertRecordKeys(r)
            by_id.setdefault(r["request_id"], []).append(r["attempt"])
        self.assertEqual(sorted(sorted(a) for a in by_id.values()), [[1, 2]] * n)


if __name__ == "__main__":
    unittest.main()
