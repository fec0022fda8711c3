"""git over dumb HTTP under the guard. git-remote-http links libcurl-gnutls and drives its
transfers through the multi API only (handles made with curl_easy_duphandle, options through
the interposed curl_easy_setopt): it must pass through unharmed."""

import os
import shutil
import subprocess
import textwrap
import time
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

GIT = shutil.which("git", path="/usr/bin:/bin")

SERVER = textwrap.dedent(r'''
    import functools, http.server, os, sys
    root, port_file = sys.argv[1], sys.argv[2]
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                          functools.partial(Quiet, directory=root))
    with open(port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    srv.serve_forever()
''')


class GitDumbHttpTest(harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not GIT:
            raise unittest.SkipTest("git is not installed")
        if not any(os.path.exists(os.path.join(d, "git-core", "git-remote-http"))
                   for d in ("/usr/lib", "/usr/libexec")):
            raise unittest.SkipTest("git-remote-http is not installed")

    def git_env(self, base):
        env = dict(base)
        env.update(HOME=str(self.tmp / "home"), GIT_CONFIG_NOSYSTEM="1",
                   GIT_TERMINAL_PROMPT="0", GIT_AUTHOR_NAME="T", GIT_AUTHOR_EMAIL="t@example",
                   GIT_COMMITTER_NAME="T", GIT_COMMITTER_EMAIL="t@example",
                   GIT_AUTHOR_DATE="2020-01-01T00:00:00Z",
                   GIT_COMMITTER_DATE="2020-01-01T00:00:00Z", LC_ALL="C")
        env.pop("GIT_DIR", None)
        return env

    def git(self, args, env=None, timeout=60):
        return harness.run([GIT, *args], env or self.git_env(harness.plain_env()),
                           timeout=timeout)

    def ok(self, p):
        self.assertEqual(p.returncode, 0, f"{p.args}: {p.stderr!r}")
        return p

    def setUp(self):
        super().setUp()
        (self.tmp / "home").mkdir()
        srv = self.tmp / "srv"
        work = self.tmp / "work"
        self.bare = srv / "repo.git"
        srv.mkdir()
        self.ok(self.git(["init", "-q", "-b", "main", str(work)]))
        for i in range(3):
            (work / f"file{i}.txt").write_text(f"content {i}\n" * (i + 1))
            (work / "big.bin").write_bytes(bytes(range(256)) * (64 * (i + 1)))
            self.ok(self.git(["-C", str(work), "add", "-A"]))
            self.ok(self.git(["-C", str(work), "commit", "-q", "-m", f"commit {i}"]))
        self.ok(self.git(["-C", str(work), "tag", "v1"]))
        self.ok(self.git(["clone", "-q", "--bare", str(work), str(self.bare)]))
        self.ok(self.git(["-C", str(self.bare), "update-server-info"]))

        script = self.tmp / "server.py"
        script.write_text(SERVER)
        port_file = self.tmp / "port"
        self.server = subprocess.Popen([harness.PYTHON, str(script), str(srv), str(port_file)],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, env=harness.plain_env())
        self.addCleanup(self._stop_server)
        deadline = time.monotonic() + 10
        while not port_file.exists():
            if self.server.poll() is not None or time.monotonic() > deadline:
                self.fail("the dumb-HTTP server did not start")
            time.sleep(0.02)
        self.base = f"http://127.0.0.1:{int(port_file.read_text())}"
        self.url = self.base + "/repo.git"

    def _stop_server(self):
        if self.server.poll() is None:
            self.server.terminate()
            try:
                self.server.wait(5)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()

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
