"""Debian's python3-pycurl (libcurl-gnutls.so.4, dlopen'ed RTLD_LOCAL) under the guard, and a
process holding both libcurl flavours at once (pycurl + ctypes on libcurl.so.4)."""

import re
import subprocess
import textwrap
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

FIXED = '{"id": "fixed-py", "choices": [{"text": "same bytes from pycurl"}]}\n'
OK = {"action": 200, "body": FIXED}
FAST = {"CURLGUARD_BACKOFF_BASE_MS": "50", "CURLGUARD_BACKOFF_CAP_MS": "200"}

# argv: MODE URL...   prints a deterministic transcript on stdout
SCRIPT = textwrap.dedent(r'''
    import sys, threading, pycurl

    def fetch(url, post=None):
        body, headers = [], []
        c = pycurl.Curl()
        c.setopt(pycurl.URL, url)
        c.setopt(pycurl.WRITEFUNCTION, body.append)
        c.setopt(pycurl.HEADERFUNCTION, headers.append)
        if post is not None:
            c.setopt(pycurl.POSTFIELDS, post)
        try:
            c.perform()
            return {"code": c.getinfo(pycurl.RESPONSE_CODE),
                    "size": c.getinfo(pycurl.SIZE_DOWNLOAD),
                    "headers": b"".join(headers), "body": b"".join(body), "err": None}
        except pycurl.error as e:
            return {"code": c.getinfo(pycurl.RESPONSE_CODE), "size": None,
                    "headers": b"".join(headers), "body": b"".join(body),
                    "err": (e.args[0], e.args[1])}
        finally:
            c.close()

    def show(r):
        out = sys.stdout.buffer
        out.write(b"code=%d size=%r err=%r\n" % (r["code"], r["size"], r["err"]))
        out.write(b"headers=%r\nbody=%r\n" % (r["headers"], r["body"]))

    mode = sys.argv[1]
    if mode == "one":
        show(fetch(sys.argv[2]))
    elif mode == "post":
        show(fetch(sys.argv[2], post='{"model": "gpt-4o-mini", "messages": []}'))
    elif mode == "threads":
        urls = sys.argv[2:]
        per = 5
        results = {}
        def worker(t):
            results[t] = [fetch(u) for u in urls[t * per:(t + 1) * per]]
        ts = [threading.Thread(target=worker, args=(t,)) for t in range(len(urls) // per)]
        for t in ts: t.start()
        for t in ts: t.join()
        for t in sorted(results):
            for r in results[t]:
                show(r)
''')

# pycurl (GnuTLS flavour, RTLD_LOCAL) and libcurl.so.4 (OpenSSL flavour) in one process. The
# OpenSSL library is made global and its functions are called through the global scope (as a
# program linked against it would), so they reach the preloaded guard first.
BOTH = textwrap.dedent(r'''
    import ctypes, sys, pycurl

    url_gnutls, url_openssl = sys.argv[1], sys.argv[2]
    out = sys.stdout

    body = []
    c = pycurl.Curl()
    c.setopt(pycurl.URL, url_gnutls)
    c.setopt(pycurl.WRITEFUNCTION, body.append)
    c.perform()
    out.write("pycurl %s %d %r\n" % ("GnuTLS" in pycurl.version, c.getinfo(pycurl.RESPONSE_CODE),
                                      b"".join(body)))
    c.close()

    ossl = ctypes.CDLL("libcurl.so.4", mode=ctypes.RTLD_GLOBAL)
    ossl.curl_version.restype = ctypes.c_char_p
    glob = ctypes.CDLL(None)                 # global scope: the preloaded guard comes first
    glob.curl_easy_init.restype = ctypes.c_void_p
    glob.curl_easy_perform.argtypes = [ctypes.c_void_p]
    glob.curl_easy_cleanup.argtypes = [ctypes.c_void_p]
    WRITE = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.c_size_t, ctypes.c_void_p)
    got = []
    def write(ptr, size, n, data):
        got.append(ctypes.string_at(ptr, size * n))
        return size * n
    write_cb = WRITE(write)
    h = glob.curl_easy_init()
    assert h
    url = ctypes.c_char_p(url_openssl.encode())
    rc1 = glob.curl_easy_setopt(ctypes.c_void_p(h), ctypes.c_int(10002), url)         # URL
    rc2 = glob.curl_easy_setopt(ctypes.c_void_p(h), ctypes.c_int(20011), write_cb)    # WRITEFUNCTION
    rc = glob.curl_easy_perform(h)
    code = ctypes.c_long(0)
    ossl.curl_easy_getinfo(ctypes.c_void_p(h), ctypes.c_int(0x200002), ctypes.byref(code))
    glob.curl_easy_cleanup(h)
    out.write("ctypes %s %d %d %d %d %r\n" % (b"OpenSSL" in ossl.curl_version(), rc1, rc2, rc,
                                               code.value, b"".join(got)))
    maps = open("/proc/self/maps").read()
    out.write("maps %s %s\n" % ("libcurl-gnutls.so.4" in maps, "/libcurl.so.4" in maps))
''')



class PycurlTest(harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        p = subprocess.run([harness.PYTHON, "-c", "import pycurl; print(pycurl.version)"],
                           capture_output=True, env=harness.plain_env(), timeout=30)
        if p.returncode != 0:
            raise unittest.SkipTest(f"{harness.PYTHON} has no pycurl (python3-pycurl)")
        cls.pycurl_version = p.stdout.decode()

    def setUp(self):
        super().setUp()
        self.script = self.tmp / "pc.py"
        self.script.write_text(SCRIPT)

    def genv(self, **extra):
        return self.guard_env(extra=FAST, **extra)

    def py(self, args, env, script=None, timeout=60):
        return harness.run([harness.PYTHON, script or self.script, *args], env, timeout=timeout)

    def test_pycurl_is_the_gnutls_flavour(self):
        self.assertIn("GnuTLS", self.pycurl_version)

    def test_callbacks_see_only_the_final_attempt(self):
        for mode in ("one", "post"):
            with self.subTest(mode=mode):
                g, gurl = self.run_faulted_and_plain(
                    lambda url, env: self.py([mode, url], env), "/v1/py", OK, self.genv())
                self.assertTrue(g.stdout.startswith(b"code=200 size="), g.stdout)
                self.assertIn(repr(FIXED.encode()).encode(), g.stdout)
                self.assertNotIn(b"X-Attempt", g.stdout)
                self.assertRetriedOnce(gurl, "GET" if mode == "one" else "POST")

    def test_connect_refused_raises_error_7_after_retries(self):
        url = f"http://127.0.0.1:{harness.closed_port()}/v1/x"
        g = self.py(["one", url], self.genv(CURLGUARD_MAX_ATTEMPTS="3"))
        p = self.py(["one", url], harness.plain_env())
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertRegex(g.stdout.decode(), r"err=\(7, ")
        norm = lambda b: re.sub(rb"after \d+ ms", b"after N ms", b)
        self.assertEqual(norm(g.stdout), norm(p.stdout))
        recs = self.records()
        self.assertEqual([r["attempt"] for r in recs], [1, 2, 3], recs)
        self.assertEqual({r["outcome"] for r in recs}, {"connect_refused"})
        self.assertEqual([r["final"] for r in recs], [False, False, True])

    def test_four_threads_five_requests_each(self):
        urls = [self.mock.url(f"/v1/pyt/{i}", plan=["503:ra=0", OK]) for i in range(20)]
        purls = [self.mock.url(f"/v1/pyt/{i}", plan=[OK]) for i in range(20)]
        # 20 first attempts that all fail at once are an outage to the shared breaker and
        # 20 retries in a second exceed the default retry budget (0.2 x 20 + 10): this
        # test is about threads, so both are off (test_breaker.py, test_retry_budget.py).
        g = self.py(["threads", *urls], self.genv(CURLGUARD_BREAKER="off",
                                                  CURLGUARD_RETRY_BUDGET="off"))
        p = self.py(["threads", *purls], harness.plain_env())
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(g.stdout, p.stdout)
        self.assertEqual(g.stdout.count(b"code=200 "), 20)
        for u in urls:
            self.assertEqual(len(self.mock.wait_entries(url=u, count=2)), 2)
        recs = self.records()
        self.assertEqual(len(recs), 40)
        by_id = {}
        for r in recs:
            by_id.setdefault(r["request_id"], []).append(r["attempt"])
        self.assertEqual(len(by_id), 20)
        self.assertTrue(all(sorted(a) == [1, 2] for a in by_id.values()), by_id)

    def test_both_flavours_in_one_process(self):
        both = self.tmp / "both.py"
        both.write_text(BOTH)
        gurls = [self.mock.url("/v1/gnutls", plan=["503:ra=0", OK]),
                 self.mock.url("/v1/openssl", plan=["503:ra=0", OK])]
        purls = [self.mock.url("/v1/gnutls", plan=[OK]), self.mock.url("/v1/openssl", plan=[OK])]
        g = self.py(gurls, self.genv(), script=both)
        p = self.py(purls, harness.plain_env(), script=both)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(g.stdout, p.stdout)
        fixed = repr(FIXED.encode())
        self.assertEqual(g.stdout.decode(),
                         f"pycurl True 200 {fixed}\nctypes True 0 0 0 200 {fixed}\n"
                         "maps True True\n")
        for u in gurls:
            self.assertEqual(len(self.mock.wait_entries(url=u, count=2)), 2, u)
        recs = self.records()
        calls = {}
        for r in recs:
            calls.setdefault(r["request_id"], []).append((r["path"], r["attempt"]))
        self.assertEqual(sorted(calls.values()),
                         [[("/v1/gnutls", 1), ("/v1/gnutls", 2)],
                          [("/v1/openssl", 1), ("/v1/openssl", 2)]], recs)


if __name__ == "__main__":
    unittest.main()
