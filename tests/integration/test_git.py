"""git over dumb HTTP under the guard. git-remote-http links libcurl-gnutls and drives its
transfers through the multi API only (handles made with curl_easy_duphandle, options through
the interposed curl_easy_setopt): it must pass through unharmed."""

import os
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness


class GitDumbHttpTest(harness.GitTestMixin, harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_git()
        if not any(os.path.exists(os.path.join(d, "git-core", "git-remote-http"))
                   for d in ("/usr/lib", "/usr/libexec")):
            raise unittest.SkipTest("git-remote-http is not installed")

    def setUp(self):
        super().setUp()
        srv = self.tmp / "srv"
        self.bare = srv / "repo.git"
        srv.mkdir()
        self.make_bare_repo(self.bare)
        self.ok(self.git(["-C", str(self.bare), "update-server-info"]))
        self.base = harness.GitHttpServer(self, srv, "dumb", smart=False).base
        self.url = self.base + "/repo.git"

    def genv(self):
        return self.git_env(self.guard_env(CURLGUARD_BACKOFF_BASE_MS="50"))

    def assertValidRecords(self):
        for r in self.records():            # whatever the guard logs must be well formed
            self.assertRecordKeys(r)

    def test_ls_remote(self):
        plain = self.ok(self.git(["ls-remote", self.url]))
        guarded = self.ok(self.git(["ls-remote", self.url], self.genv()))
        self.assertEqual(guarded.stdout, plain.stdout)
        self.assertEqual(guarded.stderr, plain.stderr)
        self.assertIn(b"refs/heads/main", plain.stdout)
        self.assertIn(b"refs/tags/v1", plain.stdout)
        self.assertValidRecords()

    def test_clone(self):
        results = {}
        for name, env in (("plain", None), ("guarded", self.genv())):
            dest = self.tmp / f"clone-{name}"
            p = self.ok(self.git(["clone", "-q", self.url, str(dest)], env))
            log = self.ok(self.git(["-C", str(dest), "log", "--format=%H %s", "--all"]))
            files = {f: (dest / f).read_bytes() for f in sorted(os.listdir(dest)) if f != ".git"}
            fsck = self.ok(self.git(["-C", str(dest), "fsck", "--strict"]))
            results[name] = (p.stdout, p.stderr, log.stdout, files, fsck.returncode)
        self.assertEqual(results["guarded"], results["plain"])
        self.assertEqual(len(results["plain"][2].splitlines()), 3)
        self.assertIn("big.bin", results["plain"][3])
        self.assertValidRecords()

    def test_git_remote_http_calls_reach_the_guard(self):
        # Not a vacuous pass-through: git-remote-http's curl_easy_* calls bind to the guard.
        env = self.genv()
        env.update(LD_DEBUG="bindings", LD_DEBUG_OUTPUT=str(self.tmp / "ld"))
        plain = self.ok(self.git(["ls-remote", self.url]))
        guarded = self.ok(self.git(["ls-remote", self.url], env))
        self.assertEqual(guarded.stdout, plain.stdout)
        bound = set()
        for name in os.listdir(self.tmp):
            if not name.startswith("ld."):
                continue
            with open(self.tmp / name, "rb") as f:
                for line in f:
                    if (b"git-remote-http [0] to " in line and b"libcurlguard.so" in line
                            and b"`curl_easy_" in line):
                        bound.add(line.split(b"`")[1].split(b"'")[0].decode())
        self.assertTrue({"curl_easy_init", "curl_easy_setopt"} <= bound,
                        f"git-remote-http did not call the guard (bound: {sorted(bound)})")

    def test_missing_repository_fails_alike(self):
        missing = self.base + "/missing.git"
        plain = self.git(["ls-remote", missing])
        guarded = self.git(["ls-remote", missing], self.genv())
        self.assertNotEqual(plain.returncode, 0)
        self.assertEqual((guarded.returncode, guarded.stdout, guarded.stderr),
                         (plain.returncode, plain.stdout, plain.stderr))


if __name__ == "__main__":
    unittest.main()
