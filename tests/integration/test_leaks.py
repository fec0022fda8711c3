"""Memory stays flat in a long-lived host (issue 11 item 8).

libcurl 7.88 makes its connection cache's closure handle with its own exported
curl_easy_init() (seen by the shim) and frees it with Curl_close (never seen): a shadow per
performing handle leaked.  A C host (tests/hosts/rsshost.c, its own keep-alive server in a
thread) measures its own resident memory after N1 and after N2 requests, with a new handle
per request and with one reused handle; the difference must stay under 1 MB.

make check: 1,000 vs 20,000 requests.  make check-soak (CG_SOAK=1, run by .ci/run):
1,000 vs 100,000."""

import os
import subprocess
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

RSSHOST = harness.BUILD / "tests" / "rsshost"
SOAK = os.environ.get("CG_SOAK") == "1"
N1 = 1000
N2 = 100000 if SOAK else 20000
LIMIT_KB = 1024
# Under ASan freed memory sits in its quarantine (256 MB): resident size says nothing.
SANITIZED = os.environ.get("CG_SANITIZE") == "1"


def rss_pair(mode, env):
    p = harness.run([RSSHOST, mode, str(N1), str(N2)], env, timeout=600 if SOAK else 180)
    if p.returncode != 0:
        raise AssertionError(f"rsshost {mode} exited {p.returncode}: {p.stderr[-500:]!r}")
    got = dict(line.split()[1:] for line in p.stdout.decode().splitlines()
               if line.startswith("rss "))
    return int(got[str(N1)]), int(got[str(N2)]), p.stderr.decode("utf-8", "replace")


class RssFlatTest(harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if SANITIZED:
            raise unittest.SkipTest("ASan's quarantine keeps freed memory resident")
        if not RSSHOST.exists():
            raise unittest.SkipTest(f"{RSSHOST} is not built")

    def check_mode(self, mode):
        env = self.guard_env(CURLGUARD_LOG="off", CURLGUARD_MAX_ATTEMPTS="1")
        a, b, err = rss_pair(mode, env)
        print(f"\n  guarded {mode}: rss {a} KB after {N1}, {b} KB after {N2} "
              f"(+{b - a} KB)", end="")
        self.assertEqual(err, "", "the guard complained")
        self.assertLess(b - a, LIMIT_KB,
                        f"{mode}: resident memory grew {b - a} KB from {N1} to {N2} requests")
        if SOAK:
            pa, pb, _ = rss_pair(mode, harness.plain_env())
            print(f"; plain: {pa} KB, {pb} KB (+{pb - pa} KB)", end="")

    def test_a_new_handle_per_request(self):
        self.check_mode("new")

    def test_one_reused_handle(self):
        self.check_mode("reuse")


class CurlConfigManyUrlsTest(harness.GuardTestCase):
    """`curl -K` with many URLs, as the issue measured it: the curl tool keeps every URL of
    its config in memory itself, so the guarded run's growth is compared with the plain
    run's (maximum resident size of curl, wait4 in `rsshost maxrss`)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if SANITIZED:
            raise unittest.SkipTest("ASan's quarantine keeps freed memory resident")
        if not harness.CURL or not RSSHOST.exists():
            raise unittest.SkipTest("curl or rsshost missing")

    def maxrss(self, cfg, env):
        p = harness.run([RSSHOST, "maxrss", harness.CURL, "-sS", "-K", str(cfg)], env,
                        timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr[-500:])
        return int(p.stdout.split()[-1]), p.stderr

    def test_curl_K_many_urls(self):
        server = subprocess.Popen([RSSHOST, "serve"], stdout=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, env=harness.plain_env())
        self.addCleanup(server.stdout.close)
        self.addCleanup(server.wait)
        self.addCleanup(server.kill)
        url = server.stdout.readline().decode().strip()
        growth = {}
        for n in (2000, 20000):
            cfg = self.tmp / f"k{n}.cfg"
            cfg.write_text("".join(f'url = "{url}?{i}"\noutput = /dev/null\n' for i in range(n)))
            g, err = self.maxrss(cfg, self.guard_env(CURLGUARD_LOG="off"))
            self.assertEqual(err, b"")
            p, _ = self.maxrss(cfg, harness.plain_env())
            growth[n] = (g, p)
            print(f"\n  curl -K {n} URLs: guarded maxrss {g} KB, plain {p} KB", end="")
        gd = growth[20000][0] - growth[2000][0]
        pd = growth[20000][1] - growth[2000][1]
        print(f"\n  curl -K: guarded +{gd} KB, plain +{pd} KB from 2,000 to 20,000 URLs", end="")
        self.assertLess(gd - pd, LIMIT_KB, f"guarded curl grew {gd} KB, plain {pd} KB")


if __name__ == "__main__":
    unittest.main()
