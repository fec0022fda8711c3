"""The multi driver (issue 13): real multi hosts under the guard.

curl --parallel (poll + perform + info_read), pycurl's CurlMulti (perform + select, and
socket_action with its own timer and socket callbacks) and git's smart HTTP (git
http-backend; git-remote-http drives every request through curl_multi_* with
libcurl-gnutls).  Each: 503s retried invisibly, one CURLMSG_DONE per transfer, byte-identical
output, one record set per call; a host that removes a handle while it waits for its backoff
gets its call ended with a final record; a transfer of the same multi keeps flowing while
another waits for its backoff.  Timing: tight lower bounds (a Retry-After is a floor),
generous upper bounds, no assertion of speed.
"""

import datetime
import json
import os
import subprocess
import textwrap
import time
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness


def have_pycurl():
    p = subprocess.run([harness.PYTHON, "-c", "import pycurl"], capture_output=True)
    return p.returncode == 0


# A pycurl CurlMulti host.  argv: MODE (perform | socket) and a JSON spec on stdin:
# {"urls": [...], "remove_after_ms": {"index": ms}}.  Prints one JSON line per finished or
# removed transfer, in the order the host saw them: index, curl code, HTTP code, body, t (s).
PYHOST = textwrap.dedent(r'''
    import io, json, pycurl, select, sys, time
    mode = sys.argv[1]
    spec = json.load(sys.stdin)
    t0 = time.monotonic()
    m = pycurl.CurlMulti()
    handles, bufs = [], []
    for i, u in enumerate(spec["urls"]):
        c = pycurl.Curl(); b = io.BytesIO()
        c.setopt(pycurl.URL, u); c.setopt(pycurl.WRITEDATA, b); c.setopt(pycurl.PROXY, "")
        post = spec.get("post", {}).get(str(i))
        if post is not None:
            c.setopt(pycurl.POSTFIELDS, post)
            c.setopt(pycurl.HTTPHEADER, ["Content-Type: application/json"])
        c.idx = i
        handles.append(c); bufs.append(b); m.add_handle(c)
    remove_at = {int(k): v / 1000.0 for k, v in spec.get("remove_after_ms", {}).items()}
    out, left = [], set(range(len(handles)))
    def report(c, code):
        left.discard(c.idx)
        out.append({"index": c.idx, "curl": code, "http": c.getinfo(pycurl.RESPONSE_CODE),
                    "body": bufs[c.idx].getvalue().decode("utf-8", "replace"),
                    "t": time.monotonic() - t0})
    def drain():
        while True:
            q, ok, err = m.info_read()
            for c in ok: report(c, 0)
            for c, e, msg in err: report(c, e)
            if q == 0: break
    def removals():
        for i, at in list(remove_at.items()):
            if time.monotonic() - t0 >= at and i in left:
                m.remove_handle(handles[i])
                left.discard(i)
                out.append({"index": i, "removed": True, "t": time.monotonic() - t0})
                del remove_at[i]
    deadline = t0 + 30
    if mode == "perform":
        while left and time.monotonic() < deadline:
            while m.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
                pass
            drain(); removals()
            if left:
                m.select(0.05)
    else:
        timer = [None]; socks = {}
        def tf(ms):
            timer[0] = None if ms < 0 else time.monotonic() + ms / 1000.0
        def sf(ev, s, multi, data):
            if ev == pycurl.POLL_REMOVE: socks.pop(s, None)
            else: socks[s] = ev
        m.setopt(pycurl.M_TIMERFUNCTION, tf); m.setopt(pycurl.M_SOCKETFUNCTION, sf)
        m.socket_action(pycurl.SOCKET_TIMEOUT, 0)
        while left and time.monotonic() < deadline:
            wait = 0.05 if timer[0] is None else min(0.05, max(0, timer[0] - time.monotonic()))
            r = [s for s, e in socks.items() if e in (pycurl.POLL_IN, pycurl.POLL_INOUT)]
            w = [s for s, e in socks.items() if e in (pycurl.POLL_OUT, pycurl.POLL_INOUT)]
            rr, ww, _ = select.select(r, w, [], wait)
            if timer[0] is not None and time.monotonic() >= timer[0]:
                timer[0] = None
                m.socket_action(pycurl.SOCKET_TIMEOUT, 0)
            for s in set(rr) | set(ww):
                ev = (pycurl.CSELECT_IN if s in rr else 0) | (pycurl.CSELECT_OUT if s in ww else 0)
                m.socket_action(s, ev)
            drain(); removals()
    for c in handles:
        if c.idx not in [o["index"] for o in out if o.get("removed")]:
            m.remove_handle(c)
        c.close()
    m.close()
    for o in out:
        print(json.dumps(o))
''')


# The start of a small pycurl CurlMulti host: add(url) adds a transfer; drive(total, on_end)
# runs perform + info_read + select until `total` transfers ended (on_end called at each
# end: a worker queue adds its next one there), then prints "done N".
PYMULTI = textwrap.dedent(r'''
    import io, pycurl, sys, time
    m = pycurl.CurlMulti()
    def add(u):
        c = pycurl.Curl(); c.setopt(pycurl.URL, u); c.setopt(pycurl.PROXY, "")
        c.setopt(pycurl.WRITEDATA, io.BytesIO()); m.add_handle(c)
    def drive(total, on_end=lambda: None):
        t0 = time.monotonic(); done = 0
        while done < total and time.monotonic() - t0 < 30:
            while m.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
                pass
            while True:
                q, ok, err = m.info_read()
                for c, e, msg in err:
                    print("error", e, msg)
                for c in ok + [x[0] for x in err]:
                    done += 1
                    on_end()
                if not q:
                    break
            m.select(0.005)
        print("done", done)
''')


class MultiDriverTest(harness.GuardTestCase):
    def genv(self, **kw):
        env = self.guard_env(CURLGUARD_BACKOFF_BASE_MS="100", **kw)
        return env

    def calls(self):
        """Records grouped by request_id, attempts in order."""
        by = {}
        for r in self.records():
            self.assertRecordKeys(r)
            by.setdefault(r["request_id"], []).append(r)
        for recs in by.values():
            recs.sort(key=lambda r: r["attempt"])
        return by

    def assertOneFinalPerCall(self, calls):
        for rid, recs in calls.items():
            self.assertEqual([r["attempt"] for r in recs], list(range(1, len(recs) + 1)), recs)
            self.assertEqual([r["final"] for r in recs], [False] * (len(recs) - 1) + [True], recs)

    # ---- curl --parallel

    def curl_parallel(self, urls, env, outdir):
        outdir.mkdir()
        argv = [harness.CURL, "-sS", "--no-progress-meter", "--noproxy", "*", "--parallel",
                "--parallel-max", "8"]
        for i, u in enumerate(urls):
            argv += ["-o", str(outdir / f"out{i}"), u]
        p = harness.run(argv, env, timeout=60)
        return p, [(outdir / f"out{i}").read_bytes() for i in range(len(urls))]

    def test_curl_parallel_identical_without_faults(self):
        def urls():
            return [self.mock.url(f"/p{i}", key=True) for i in range(4)]
        plain, pout = self.curl_parallel(urls(), harness.plain_env(), self.tmp / "plain")
        guarded, gout = self.curl_parallel(urls(), self.genv(), self.tmp / "guarded")
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertEqual((guarded.returncode, guarded.stderr), (plain.returncode, plain.stderr))
        self.assertEqual(gout, pout)
        calls = self.calls()
        self.assertEqual(len(calls), 4)
        self.assertOneFinalPerCall(calls)
        self.assertTrue(all(len(r) == 1 and r[0]["outcome"] == "ok" for r in calls.values()))

    def test_curl_parallel_503_retried_invisibly(self):
        faulty = [self.mock.url("/a", plan="503:ra=0,200"), self.mock.url("/b", key=True),
                  self.mock.url("/c", plan="503,503,200")]
        guarded, gout = self.curl_parallel(faulty, self.genv(), self.tmp / "guarded")
        self.assertEqual(guarded.returncode, 0, guarded.stderr)
        self.assertEqual(guarded.stderr, b"")
        for body in gout:
            doc = json.loads(body)             # the final 200 only, never a 503 page
            self.assertIs(doc["ok"], True, body)
        self.assertEqual([json.loads(b)["n"] for b in gout], [2, 1, 3])
        calls = self.calls()
        self.assertEqual(len(calls), 3)
        self.assertOneFinalPerCall(calls)
        by_path = {recs[0]["path"]: recs for recs in calls.values()}
        self.assertEqual([r["outcome"] for r in by_path["/a"]], ["http_503", "ok"])
        self.assertEqual([r["outcome"] for r in by_path["/c"]], ["http_503", "http_503", "ok"])
        self.assertEqual([r["decision"] for r in by_path["/c"]], ["retry", "retry", "done"])
        self.assertEqual(len(self.mock.entries(url=faulty[2])), 3)

    def test_curl_parallel_off_passes_through(self):
        env = harness.plain_env(LD_PRELOAD=str(harness.LIB), CURLGUARD="0",
                                CURLGUARD_LOG=str(self.log))
        urls = [self.mock.url("/a", plan="503,200"), self.mock.url("/b", key=True)]
        p, out = self.curl_parallel(urls, env, self.tmp / "off")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(b"overloaded", out[0])   # the 503 reaches the host: no guard
        self.assertFalse(self.log.exists())

    # ---- pycurl CurlMulti

    def pyhost(self, mode, spec, env):
        script = self.tmp / "pyhost.py"
        script.write_text(PYHOST)
        p = harness.run([harness.PYTHON, str(script), mode], env, timeout=60,
                        input=json.dumps(spec).encode())
        self.assertEqual(p.returncode, 0, p.stderr)
        return [json.loads(l) for l in p.stdout.splitlines()], p

    def check_pycurl_retry(self, mode):
        if not have_pycurl():
            self.skipTest("python3-pycurl is not installed")
        urls = [self.mock.url("/a", plan="503:ra=0,200"), self.mock.url("/b", key=True),
                self.mock.url("/c", plan="503,200")]
        out, p = self.pyhost(mode, {"urls": urls}, self.genv())
        self.assertEqual(p.stderr, b"")
        self.assertEqual(sorted(o["index"] for o in out), [0, 1, 2])   # one DONE each
        for o in out:
            self.assertEqual((o["curl"], o["http"]), (0, 200), o)
            self.assertIs(json.loads(o["body"])["ok"], True)
        calls = self.calls()
        self.assertEqual(len(calls), 3)
        self.assertOneFinalPerCall(calls)
        self.assertEqual(sorted(len(r) for r in calls.values()), [1, 2, 2])

    def test_pycurl_perform_select_retry(self):
        self.check_pycurl_retry("perform")

    def test_pycurl_socket_action_retry(self):
        self.check_pycurl_retry("socket")

    def check_remove_mid_backoff(self, mode):
        if not have_pycurl():
            self.skipTest("python3-pycurl is not installed")
        # /a is told to come back in 3 s; the host gives up on it after 0.5 s.
        urls = [self.mock.url("/a", plan="503:ra=3,200"), self.mock.url("/b", key=True)]
        t0 = time.monotonic()
        out, _ = self.pyhost(mode, {"urls": urls, "remove_after_ms": {"0": 500}}, self.genv())
        elapsed = time.monotonic() - t0
        self.assertLess(elapsed, 2.9, "the host's loop waited for the backoff")   # generous
        removed = [o for o in out if o.get("removed")]
        self.assertEqual([o["index"] for o in removed], [0])
        self.assertEqual([o["index"] for o in out if not o.get("removed")], [1])
        calls = self.calls()
        self.assertOneFinalPerCall(calls)
        by_path = {recs[0]["path"]: recs for recs in calls.values()}
        a = by_path["/a"]
        self.assertEqual([r["outcome"] for r in a], ["http_503", "aborted_by_host"])
        self.assertEqual(a[-1]["reason"], "removed_by_host")
        self.assertEqual(len(self.mock.entries(url=urls[0])), 1)   # never sent again

    def test_pycurl_remove_mid_backoff_perform(self):
        self.check_remove_mid_backoff("perform")

    def test_pycurl_remove_mid_backoff_socket_action(self):
        self.check_remove_mid_backoff("socket")

    def test_stream_keeps_flowing_while_another_waits(self):
        if not have_pycurl():
            self.skipTest("python3-pycurl is not installed")
        # /a waits 2 s (Retry-After, a floor); the stream takes about half a second.
        body = json.dumps({"model": "gpt-4o-mini", "stream": True,
                           "messages": [{"role": "user", "content": "hi"}]})
        urls = [self.mock.url("/a", plan="503:ra=2,200"),
                self.mock.url("/v1/chat/completions", plan="200:chunk_ms=50:words=8")]
        out, _ = self.pyhost("perform", {"urls": urls, "post": {"1": body}}, self.genv())
        t = {o["index"]: o["t"] for o in out}
        self.assertEqual(sorted(t), [0, 1])
        self.assertGreaterEqual(t[0], 2.0)               # the hint is a floor
        self.assertIn("data: [DONE]", [o for o in out if o["index"] == 1][0]["body"])
        # Had the guard slept in curl_multi_perform, the stream would end with /a, after 2 s.
        self.assertLess(t[1], t[0] - 1.0, out)

    def test_pycurl_multi_close_with_calls_inside(self):
        if not have_pycurl():
            self.skipTest("python3-pycurl is not installed")
        # /a waits 3 s for its retry, /b is in flight (a stall), /c is done: then
        # curl_multi_cleanup (CurlMulti.close) with all three still inside.
        script = self.tmp / "close.py"
        script.write_text(textwrap.dedent(r'''
            import io, pycurl, sys, time
            m = pycurl.CurlMulti(); hs = []
            for u in sys.argv[1:]:
                c = pycurl.Curl(); c.setopt(pycurl.URL, u); c.setopt(pycurl.PROXY, "")
                c.setopt(pycurl.WRITEDATA, io.BytesIO()); m.add_handle(c); hs.append(c)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 0.6:
                m.perform(); m.select(0.05)
            m.close()
            for c in hs:
                c.close()
            print("closed")
        '''))
        urls = [self.mock.url("/a", plan="503:ra=3,200"),
                self.mock.url("/b", plan="stall:ms=4000"), self.mock.url("/c", key=True)]
        t0 = time.monotonic()
        p = harness.run([harness.PYTHON, str(script), *urls], self.genv(), timeout=60)
        self.assertEqual((p.returncode, p.stdout), (0, b"closed\n"), p.stderr)
        self.assertLess(time.monotonic() - t0, 2.9)          # neither waited for
        calls = self.calls()
        self.assertOneFinalPerCall(calls)
        by_path = {recs[0]["path"]: recs for recs in calls.values()}
        self.assertEqual([(r["outcome"], r["reason"]) for r in by_path["/a"]],
                         [("http_503", "retry_after"), ("aborted_by_host", "multi_cleanup")])
        self.assertEqual([(r["outcome"], r["reason"]) for r in by_path["/b"]],
                         [("aborted_by_host", "multi_cleanup")])
        self.assertEqual([r["outcome"] for r in by_path["/c"]], ["ok"])

    def test_open_breaker_holds_one_pool_not_the_loop(self):
        if not have_pycurl():
            self.skipTest("python3-pycurl is not installed")
        # Open the breaker of 127.0.0.1:PORT (two failed calls in a row), then run a multi
        # with one transfer to that pool (held: open = wait) and one to localhost:PORT, a
        # pool of its own, which must not wait for the first one's probe.
        brk = dict(CURLGUARD_MAX_ATTEMPTS="1", CURLGUARD_BREAKER_CONSECUTIVE_FAILURES="2",
                   CURLGUARD_BREAKER_COOLDOWN_S="2", CURLGUARD_BREAKER_COOLDOWN_MAX_S="2",
                   CURLGUARD_BREAKER_JITTER="0")
        for _ in range(2):
            harness.run([harness.CURL, "-s", "-o", "/dev/null", "--noproxy", "*",
                         self.mock.url("/down", plan="500")], self.genv(**brk))
        free = self.mock.url("/free", plan="200:delay=200").replace("127.0.0.1", "localhost")
        urls = [self.mock.url("/held", key=True), free]
        out, _ = self.pyhost("perform", {"urls": urls}, self.genv(**brk))
        t = {o["index"]: o["t"] for o in out}
        self.assertEqual([(o["curl"], o["http"]) for o in out], [(0, 200), (0, 200)])
        held = [r for r in self.records() if r["path"] == "/held"]
        self.assertEqual(len(held), 1)
        self.assertEqual(held[0]["reason"], "breaker_wait")
        self.assertGreater(held[0]["breaker_wait_ms"], 500)
        self.assertLess(t[1], t[0] - 0.4, out)               # /free did not wait for /held

    def test_waiting_call_goes_before_a_later_add(self):
        if not have_pycurl():
            self.skipTest("python3-pycurl is not installed")
        # The learned rate of a pool that has started (one call): 2/s, 4 at once until a
        # cut, and no reservation (a waiter asks again).  /a0-/a3 go at once, /a4 waits
        # about 500 ms.  The host is busy for 700 ms, then, in one turn of its loop, adds
        # /b and calls perform (as curl's libntlmconnect, test 2032, does after its
        # select).  The freed slot is /a4's: /b must not take it (/a4 waiting again,
        # behind it: out of order, and starved by a host that keeps adding).
        script = self.tmp / "late.py"
        script.write_text(PYMULTI + textwrap.dedent(r'''
            for u in sys.argv[1:-1]:
                add(u)
            m.perform()
            time.sleep(0.7)
            add(sys.argv[-1])
            drive(len(sys.argv) - 1)
        '''))
        env = self.genv()
        harness.run([harness.CURL, "-s", "-o", "/dev/null", "--noproxy", "*",
                     self.mock.url("/start", key=True)], env)
        key = harness.unique_key("fifo")
        paths = ["/a0", "/a1", "/a2", "/a3", "/a4", "/b"]
        p = harness.run([harness.PYTHON, str(script), *[self.mock.url(x, key=key) for x in paths]],
                        env, timeout=60)
        self.assertEqual((p.returncode, p.stdout), (0, b"done 6\n"), p.stderr)
        seen = [e["path"] for e in sorted(self.mock.wait_entries(key=key, count=6),
                                          key=lambda e: e["n"])]
        queued = {r["path"]: r["queue_ms"] for r in self.records() if r["outcome"] == "ok"}
        self.assertEqual(len(queued), 7, self.records())
        self.assertGreater(queued["/a4"], 300, f"/a4 was not held: the test shows nothing {queued}")
        # /b must not take /a4's place: /a4 starts in the same pass as /b or before it.
        # Had /b taken it, /a4 would have waited one more interval (500 ms) behind /b.
        # When the host was busy long enough for two places (a loaded machine stretches
        # its 0.7 s), both go in one pass and which request reaches the server first is
        # the network's, so the order the mock saw is not what is asserted.
        start = {r["path"]: datetime.datetime.fromisoformat(r["ts"].replace("Z", "+00:00"))
                 .timestamp() - r["duration_ms"] / 1000
                 for r in self.records() if r["outcome"] == "ok"}
        self.assertLess(start["/a4"], start["/b"] + 0.25, (seen, queued, start))

    def test_slot_waiter_goes_before_the_next_of_a_worker_queue(self):
        if not have_pycurl():
            self.skipTest("python3-pycurl is not installed")
        # CURLGUARD_MAX_INFLIGHT=1: /a takes the slot, /b waits for it.  A worker-queue host
        # adds its next transfer each time it reads one's end: when /a ends, the slot is
        # /b's, not the newcomer's (before, /b was overtaken by every later add).
        script = self.tmp / "queue.py"
        script.write_text(PYMULTI + textwrap.dedent(r'''
            urls = sys.argv[1:]; rest = urls[2:]
            add(urls[0]); add(urls[1])
            drive(len(urls), lambda: rest and add(rest.pop(0)))
        '''))
        key = harness.unique_key("queue")
        paths = ["/a", "/b", "/c0", "/c1", "/c2"]
        p = harness.run([harness.PYTHON, str(script),
                         *[self.mock.url(x, plan="200:delay=150", key=key) for x in paths]],
                        self.genv(CURLGUARD_MAX_INFLIGHT="1"), timeout=60)
        self.assertEqual((p.returncode, p.stdout), (0, b"done 5\n"), p.stderr)
        seen = [e["path"] for e in sorted(self.mock.wait_entries(key=key, count=5),
                                          key=lambda e: e["n"])]
        self.assertEqual(seen, paths)
        self.assertEqual([r["outcome"] for r in self.records()], ["ok"] * 5)

    def test_held_answer_to_a_paused_host_does_not_hold_the_loop(self):
        if not have_pycurl():
            self.skipTest("python3-pycurl is not installed")
        # /p's 503 is held for a retry the budget then refuses (no retry fits the deadline):
        # the answer in hand goes to the host after the transfer ended, about 0.25 s before
        # the deadline.  The host pauses at its first byte and resumes 100 ms later from its
        # own loop (curl_easy_pause); /q must finish meanwhile.  (A pause past the deadline
        # ends the call with 28, attempt.c cg__paused; with 300 ms it did, and the test
        # passed only while no wake-up of the guard's fell between the deadline and the
        # host's resume.)
        script = self.tmp / "pause.py"
        script.write_text(textwrap.dedent(r'''
            import io, pycurl, sys, time
            t0 = time.monotonic(); st = {"paused": False, "resume_at": None, "body": b""}
            def wr(data):
                if st["paused"]:
                    return pycurl.WRITEFUNC_PAUSE
                if st["resume_at"] is None:
                    st["paused"] = True
                    st["resume_at"] = time.monotonic() + 0.1
                    return pycurl.WRITEFUNC_PAUSE
                st["body"] += data
            m = pycurl.CurlMulti()
            a = pycurl.Curl(); a.setopt(pycurl.URL, sys.argv[1]); a.setopt(pycurl.PROXY, "")
            a.setopt(pycurl.WRITEFUNCTION, wr)
            b = pycurl.Curl(); b.setopt(pycurl.URL, sys.argv[2]); b.setopt(pycurl.PROXY, "")
            b.setopt(pycurl.WRITEDATA, io.BytesIO())
            m.add_handle(a); m.add_handle(b); done = {}
            while len(done) < 2 and time.monotonic() - t0 < 20:
                while m.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
                    pass
                q, ok, err = m.info_read()
                for c in ok: done[c] = (0, c.getinfo(pycurl.RESPONSE_CODE), time.monotonic() - t0)
                for c, e, msg in err: done[c] = (e, 0, time.monotonic() - t0)
                if st["paused"] and time.monotonic() >= st["resume_at"]:
                    st["paused"] = False
                    a.pause(pycurl.PAUSE_CONT)
                m.select(0.02)
            # flushed before the body goes to the binary buffer under it: a text line still
            # pending in sys.stdout would otherwise come out after the body (seen in CI)
            print(done[a][0], done[a][1], round(done[a][2], 3), round(done[b][2], 3),
                  flush=True)
            sys.stdout.buffer.write(st["body"])
        '''))
        urls = [self.mock.url("/p", plan="503"), self.mock.url("/q", plan="200:delay=100")]
        env = self.genv(CURLGUARD_RETRY_BUDGET_RATIO="0", CURLGUARD_RETRY_BUDGET_MIN_PER_S="0",
                        CURLGUARD_DEADLINE_MS="1500")
        p = harness.run([harness.PYTHON, str(script), *urls], env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        head, _, body = p.stdout.partition(b"\n")
        self.assertEqual(len(head.split()), 4, p.stdout)
        code, http, ta, tb = head.split()
        self.assertEqual((code, http), (b"0", b"503"))
        self.assertIn(b"overloaded", body)                   # the whole answer, once
        self.assertEqual(body.count(b"\"code\": \"overloaded\""), 1)
        self.assertLess(float(tb), float(ta) - 0.2, head)    # /q did not wait for /p's host
        recs = [r for r in self.records() if r["path"] == "/p"]
        self.assertEqual([(r["outcome"], r["decision"], r["final"]) for r in recs],
                         [("http_503", "give_up", True)])

    def test_a_select_loop_sleeps_through_a_backoff(self):
        """pycurl's own loop (perform, info_read, CurlMulti.select) while the only call
        waits out a Retry-After of 1 s outside the real multi: libcurl has no descriptor
        then, and pycurl's select returns at once on max_fd -1, so the guard offers one of
        its own (multi.c cg_multi_fdset) that becomes readable when the call is due.
        Before, the loop turned about a million times a second (a core busy for the whole
        wait); now a few times."""
        if not have_pycurl():
            self.skipTest("python3-pycurl is not installed")
        script = self.tmp / "spin.py"
        script.write_text(textwrap.dedent(r'''
            import io, pycurl, sys, time
            m = pycurl.CurlMulti(); c = pycurl.Curl()
            c.setopt(pycurl.URL, sys.argv[1]); c.setopt(pycurl.PROXY, "")
            c.setopt(pycurl.WRITEDATA, io.BytesIO())
            m.add_handle(c); turns, n, t0 = 0, 1, time.monotonic()
            while n and time.monotonic() - t0 < 20:
                turns += 1
                while True:
                    r, n = m.perform()
                    if r != pycurl.E_CALL_MULTI_PERFORM:
                        break
                m.info_read()
                if n:
                    m.select(1.0)
            print(c.getinfo(pycurl.RESPONSE_CODE), turns, round(time.monotonic() - t0, 3))
        '''))
        url = self.mock.url("/spin", plan="503:ra=1,200")
        p = harness.run([harness.PYTHON, str(script), url], self.genv(), timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        code, turns, took = p.stdout.split()
        self.assertEqual(code, b"200")
        self.assertGreaterEqual(float(took), 0.95)           # the Retry-After was waited
        self.assertLess(int(turns), 100, f"the loop turned {int(turns)} times in {float(took)} s")

    def test_a_select_loop_starts_a_new_transfer_while_another_call_waits(self):
        """The same loop while a call waits out a Retry-After of 3 s: each time a quick
        transfer ends the host adds the next (a worker queue).  A handle just added has no
        descriptor yet and libcurl's timer says "now", so the guard's descriptor is armed
        to libcurl's timer too (multi.c cg_multi_fdset).  In the first version it was armed
        to the waiting call's due time only, and each new transfer waited out the host's
        select timeout: 1002 ms instead of a few."""
        if not have_pycurl():
            self.skipTest("python3-pycurl is not installed")
        script = self.tmp / "chain.py"
        script.write_text(textwrap.dedent(r'''
            import io, pycurl, sys, time
            m = pycurl.CurlMulti(); t0 = time.monotonic()
            def add(url, name):
                c = pycurl.Curl(); c.setopt(pycurl.URL, url); c.setopt(pycurl.PROXY, "")
                c.setopt(pycurl.WRITEDATA, io.BytesIO()); c.name = name
                c.added = time.monotonic(); m.add_handle(c)
            add(sys.argv[1], "a"); add(sys.argv[2] % 0, "q")
            chained, active, took = 1, 2, []
            while active and time.monotonic() - t0 < 30:
                while m.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
                    pass
                while True:
                    q, ok, err = m.info_read()
                    for c in ok + [e[0] for e in err]:
                        active -= 1
                        m.remove_handle(c)
                        if c.name == "q":
                            took.append(round((time.monotonic() - c.added) * 1000))
                            if chained < 5:
                                add(sys.argv[2] % chained, "q"); chained += 1; active += 1
                    if not q:
                        break
                if active:
                    m.select(1.0)
            print(*took)
        '''))
        slow = self.mock.url("/chain/a", plan="503:ra=3,200")
        quick = self.mock.url("/chain/q", plan="200")
        # another pool (localhost, not 127.0.0.1): the quick ones are not held with /a's
        quick = quick.replace("127.0.0.1", "localhost") + "&i=%d"
        p = harness.run([harness.PYTHON, str(script), slow, quick], self.genv(), timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        took = [int(x) for x in p.stdout.split()]
        self.assertEqual(len(took), 5, p.stdout)
        self.assertLess(max(took), 500, f"ms from add to end of each quick transfer: {took}")

    def test_a_select_loop_with_a_quiet_transfer_sends_a_retry_when_due(self):
        """The same loop with a long select timeout while another transfer sits in the real
        multi with nothing to read (a long completion before its first byte): libcurl
        offers its connection's descriptor, and the call backing off a Retry-After of 1 s
        must still be sent at its due time.  Before, the guard's descriptor was offered only
        when libcurl had none, and the retry waited for the host's select timeout (3 s
        here, up to 1 s in pycurl's documented loop)."""
        if not have_pycurl():
            self.skipTest("python3-pycurl is not installed")
        script = self.tmp / "quiet.py"
        script.write_text(textwrap.dedent(r'''
            import io, pycurl, sys, time
            m = pycurl.CurlMulti(); t0 = time.monotonic(); done = {}
            for name, url in (("a", sys.argv[1]), ("slow", sys.argv[2])):
                c = pycurl.Curl(); c.setopt(pycurl.URL, url); c.setopt(pycurl.PROXY, "")
                c.setopt(pycurl.WRITEDATA, io.BytesIO()); c.name = name; m.add_handle(c)
            active = 2
            while active and time.monotonic() - t0 < 30:
                while m.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
                    pass
                while True:
                    q, ok, err = m.info_read()
                    for c in ok + [e[0] for e in err]:
                        active -= 1
                        done[c.name] = (c.getinfo(pycurl.RESPONSE_CODE),
                                        round(time.monotonic() - t0, 3))
                        m.remove_handle(c)
                    if not q:
                        break
                if active:
                    m.select(3.0)
            print(*done["a"], *done["slow"])
        '''))
        a = self.mock.url("/quiet/a", plan="503:ra=1,200")
        # another pool (localhost): the slow call is not held with /a's
        slow = self.mock.url("/quiet/slow", plan="200:delay=4500").replace("127.0.0.1",
                                                                            "localhost")
        p = harness.run([harness.PYTHON, str(script), a, slow], self.genv(), timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        code_a, took_a, code_s, took_s = p.stdout.split()
        self.assertEqual((code_a, code_s), (b"200", b"200"), p.stdout)
        self.assertGreaterEqual(float(took_a), 0.95)         # the Retry-After was waited
        self.assertLess(float(took_a), 2.0, f"/a ended at {float(took_a)} s")
        self.assertGreaterEqual(float(took_s), 4.4)

    def test_a_retry_the_host_comes_back_to_after_the_deadline_is_recorded_as_deadline(self):
        """A multi host that sleeps through a call's backoff (Retry-After 0.5 s) and comes
        back after the call's deadline (TIMEOUT_MS 800): the retry is not sent, the host
        gets the 503 in hand, and the record says `deadline`.  Before, it said
        `local_rate_limited` / "rate_limit_wait", with no limit set."""
        if not have_pycurl():
            self.skipTest("python3-pycurl is not installed")
        script = self.tmp / "late.py"
        script.write_text(textwrap.dedent(r'''
            import io, pycurl, sys, time
            m = pycurl.CurlMulti(); c = pycurl.Curl()
            c.setopt(pycurl.URL, sys.argv[1]); c.setopt(pycurl.PROXY, "")
            c.setopt(pycurl.TIMEOUT_MS, 800); c.setopt(pycurl.WRITEDATA, io.BytesIO())
            m.add_handle(c); n, t0, res = 1, time.monotonic(), None
            while n and time.monotonic() - t0 < 20:
                while True:
                    r, n = m.perform()
                    if r != pycurl.E_CALL_MULTI_PERFORM:
                        break
                q, ok, err = m.info_read()
                for x in ok: res = [0, x.getinfo(pycurl.RESPONSE_CODE)]
                for x, e, msg in err: res = [e, 0]
                if n:
                    if time.monotonic() - t0 < 0.2:
                        m.select(0.02)
                    else:
                        time.sleep(1.0)              # past the deadline, the retry due
            print(*res)
        '''))
        url = self.mock.url("/late", plan="503:ra=0.5,200")
        p = harness.run([harness.PYTHON, str(script), url], self.genv(), timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split(), [b"0", b"503"])
        self.assertEqual(len(self.mock.entries(url=url)), 1)
        recs = [(r["attempt"], r["outcome"], r["reason"], r["decision"])
                for r in self.records()]
        self.assertEqual(recs, [(1, "http_503", "retry_after", "retry"),
                                (2, "deadline", "deadline", "give_up")])


    def test_easy_perform_of_a_handle_held_in_a_backoff_is_refused(self):
        """A C host calls curl_easy_perform on a handle it added to a multi, while the
        guard holds that handle in a backoff (outside libcurl's multi, whose own check then
        passes): refused with CURLE_FAILED_INIT and libcurl's words, as plain libcurl
        refuses it on a handle in a multi, and nothing is sent.  Before, it returned 0
        after a whole POST went out: one more possibly billed request (helper-63)."""
        import shutil
        cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
        if not cc:
            self.skipTest("no C compiler")
        src = self.tmp / "readd.c"
        src.write_text(textwrap.dedent(r'''
            #include <curl/curl.h>
            #include <stdio.h>
            #include <time.h>
            static double now(void) {
              struct timespec t;
              clock_gettime(CLOCK_MONOTONIC, &t);
              return t.tv_sec + t.tv_nsec / 1e9;
            }
            static size_t wr(char *p, size_t s, size_t n, void *u) {
              (void) p; (void) u;
              return s * n;
            }
            int main(int argc, char **argv) {
              char eb[CURL_ERROR_SIZE] = "";
              CURLM *m;
              CURL *e;
              int running = 1, tested = 0, nf;
              double t0;
              (void) argc;
              curl_global_init(CURL_GLOBAL_ALL);
              m = curl_multi_init();
              e = curl_easy_init();
              curl_easy_setopt(e, CURLOPT_URL, argv[1]);
              curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, wr);
              curl_easy_setopt(e, CURLOPT_POSTFIELDS, "bill-me");
              curl_easy_setopt(e, CURLOPT_ERRORBUFFER, eb);
              curl_multi_add_handle(m, e);
              t0 = now();
              while (running && now() - t0 < 15) {
                CURLMsg *msg;
                int q;
                curl_multi_perform(m, &running);
                while ((msg = curl_multi_info_read(m, &q))) {
                  long c = 0;
                  curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &c);
                  printf("done %d %ld\n", (int) msg->data.result, c);
                }
                if (!tested && now() - t0 > 0.3) {
                  int rc;
                  tested = 1;
                  rc = (int) curl_easy_perform(e);
                  printf("perform %d %s\n", rc, eb);
                }
                curl_multi_poll(m, NULL, 0, 100, &nf);
              }
              return 0;
            }
        '''))
        exe = self.tmp / "readd"
        subprocess.run([cc, "-O1", "-o", str(exe), str(src), "-lcurl"], check=True)
        url = self.mock.url("/v1/readd", plan="429:ra=2,200")
        p = harness.run([str(exe), url], self.genv(), timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.decode().splitlines()
        self.assertIn("perform 2 easy handle already used in multi handle", lines)
        self.assertIn("done 0 200", lines)
        self.assertEqual(len(self.mock.entries(url=url)), 2)


class GitSmartHttpMultiTest(harness.GitTestMixin, harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_git()

    def git(self, args, env=None, timeout=60):
        p = super().git(args, env, timeout)
        self.assertEqual(p.returncode, 0, f"{args}: {p.stderr!r}")
        return p

    def server(self, name, fail_first):
        """A smart-HTTP server of self.tmp/srv (HTTP/1.1) whose first request of each path
        in fail_first gets a 503: (repo URL, the server)."""
        srv = harness.GitHttpServer(self, self.tmp / "srv", name, fail_first=fail_first,
                                    protocol="HTTP/1.1")
        return srv.base + "/repo.git", srv

    def setUp(self):
        super().setUp()
        (self.tmp / "srv").mkdir()
        self.make_bare_repo(self.tmp / "srv" / "repo.git", big=False, tag=False)

    def clone(self, url, dest, env):
        p = self.git(["clone", "-q", url, str(dest)], env)
        log = self.git(["-C", str(dest), "log", "--format=%H %s", "--all"])
        files = {f: (dest / f).read_bytes() for f in sorted(os.listdir(dest)) if f != ".git"}
        return p.stdout, p.stderr, log.stdout, files

    def test_clone_first_request_503_retried(self):
        url, _ = self.server("srv-plain", [])
        plain = self.clone(url, self.tmp / "plain", None)
        url, srv = self.server("srv-faulty", ["/repo.git/info/refs"])
        env = self.git_env(self.guard_env(CURLGUARD_BACKOFF_BASE_MS="50"))
        guarded = self.clone(url, self.tmp / "guarded", env)
        self.assertEqual(guarded, plain)
        reqs = [r[1:3] for r in srv.requests()]
        self.assertEqual(reqs.count(["GET", "/repo.git/info/refs"]), 2)   # the 503, then the retry
        recs = self.records()
        for r in recs:
            self.assertRecordKeys(r)
        refs = [r for r in recs if r["path"] == "/repo.git/info/refs"]
        self.assertEqual([(r["outcome"], r["final"]) for r in refs],
                         [("http_503", False), ("ok", True)])
        self.assertEqual(len({r["request_id"] for r in refs}), 1)
        packs = [r for r in recs if r["path"] == "/repo.git/git-upload-pack"]
        self.assertTrue(packs and all(r["final"] and r["outcome"] == "ok" for r in packs), recs)


if __name__ == "__main__":
    unittest.main()
