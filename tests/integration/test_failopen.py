"""Fail open: when the guard cannot do its job as configured, the host's result is unchanged
and exactly one line starting "curlguard:" says why (SPEC section 3, README "How it stays
invisible"). Every case but one runs one curl process with two requests, so "once" is checked too;
the state file tried again runs a long-lived pycurl host."""

import os
import shutil
import subprocess
import time
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

FIXED = '{"id": "fixed-fo", "choices": [{"text": "fail open"}]}\n'
OK = {"action": 200, "body": FIXED}
FAST = {"CURLGUARD_BACKOFF_BASE_MS": "50", "CURLGUARD_BACKOFF_CAP_MS": "200"}


class FailOpenTest(harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not harness.CURL:
            raise unittest.SkipTest("curl is not installed")

    def curl(self, urls, env, fsize=None):
        """curl -sS URLS; with `fsize`, under that file size limit in bytes (RLIMIT_FSIZE,
        as `ulimit -f` or systemd's LimitFSIZE= set it), through prlimit(1)."""
        pre = ["prlimit", f"--fsize={fsize}", "--"] if fsize else []
        return harness.run([*pre, harness.CURL, "-sS", *urls], env, timeout=30)

    def compare(self, gplan=(OK,), pplan=(OK,), fsize=None, **env):
        """Two requests in one guarded curl vs the same plainly. Returns (g, p, gurls, line)."""
        as_plan = lambda plan: plan if isinstance(plan, str) else list(plan)
        gurls = [self.mock.url(f"/v1/fo/{i}", plan=as_plan(gplan)) for i in range(2)]
        purls = [self.mock.url(f"/v1/fo/{i}", plan=as_plan(pplan)) for i in range(2)]
        g = self.curl(gurls, self.guard_env(extra=FAST, **env), fsize)
        p = self.curl(purls, harness.plain_env(), fsize)
        self.assertEqual(p.stderr, b"")
        self.assertEqual(g.returncode, p.returncode, g.stderr)
        self.assertEqual(g.stdout, p.stdout)
        lines = g.stderr.decode("utf-8", "replace").splitlines()
        self.assertEqual(len(lines), 1, f"wanted one line on stderr, got {g.stderr!r}")
        self.assertTrue(lines[0].startswith("curlguard:"), lines[0])
        return g, p, gurls, lines[0]

    def test_log_path_not_writable(self):
        blocker = self.tmp / "a-regular-file"
        blocker.write_text("not a directory\n")
        log = blocker / "sub" / "usage.jsonl"
        g, p, gurls, line = self.compare(CURLGUARD_LOG=str(log))
        self.assertEqual(g.stdout, FIXED.encode() * 2)
        self.assertEqual(blocker.read_text(), "not a directory\n")
        self.assertFalse(self.log.exists())

    def test_config_file_missing(self):
        missing = self.tmp / "no-such-config.json"
        g, p, gurls, line = self.compare(CURLGUARD_CONFIG=str(missing))
        self.assertIn("no-such-config.json", line)
        self.assertEqual(len(self.records()), 2, "the guard still runs with its defaults")

    def test_config_file_invalid_json(self):
        bad = self.tmp / "bad.json"
        bad.write_text('{"max_attempts": 5, oops')
        g, p, gurls, line = self.compare(CURLGUARD_CONFIG=str(bad))
        self.assertIn("bad.json", line)
        self.assertEqual(len(self.records()), 2)

    def test_max_attempts_malformed_uses_default(self):
        g, p, gurls, line = self.compare(CURLGUARD_MAX_ATTEMPTS="abc")
        self.assertIn("CURLGUARD_MAX_ATTEMPTS", line)
        # the built-in default (3 attempts) is in force
        self.log.unlink()
        url = self.mock.url("/v1/fo/always503", plan="503:ra=0")
        g = self.curl([url], self.guard_env(extra=FAST, CURLGUARD_MAX_ATTEMPTS="abc"))
        self.assertEqual(g.returncode, 0, g.stderr)          # the last 503 reaches curl
        self.assertEqual(len(self.mock.wait_entries(url=url, count=3)), 3)
        self.assertEqual([r["attempt"] for r in self.records()], [1, 2, 3])

    def test_switch_neither_on_nor_off(self):
        g, p, gurls, line = self.compare(gplan="503:ra=0,200", pplan="503:ra=0,200",
                                         CURLGUARD="maybe")
        self.assertIn("maybe", line)
        self.assertIn(b'"code": "overloaded"', g.stdout)      # the 503, not retried
        for u in gurls:
            self.assertEqual(len(self.mock.wait_entries(url=u)), 1)
        self.assertFalse(self.log.exists(), "guard stayed off: no record")
        self.assertFalse(os.path.exists(self.state))

    def test_state_file_unusable(self):
        # A directory where the state file should be: the guard runs without the limiter.
        state = self.tmp / "state-is-a-dir"
        state.mkdir()
        g, p, gurls, line = self.compare(CURLGUARD_STATE=str(state), CURLGUARD_RPM="60")
        self.assertIn("state file", line)
        self.assertIn(str(state), line)
        self.assertEqual(g.stdout, FIXED.encode() * 2)
        self.assertEqual(os.listdir(state), [])
        recs = self.records()
        self.assertEqual(len(recs), 2, "the guard still runs, without the limiter")
        self.assertEqual([r["queue_ms"] for r in recs], [0, 0], "no limiter: RPM 60 not applied")

    def test_a_state_file_that_could_not_be_opened_is_tried_again(self):
        """A long-running host (pycurl, a call every 50 ms for 4 s, RPM 60) whose state
        file cannot be made at its start (its directory is a file), made possible 0.5 s
        later: the host is paced by the limiter from then on, and says so in one line.
        Before, the one failed opening left it unpaced for the rest of its life (helper-55:
        a full tmpfs freed 0.5 s after the start, 30 calls in 3 s at RPM 60)."""
        harness.require_pycurl()
        blocker = self.tmp / "statedir"
        blocker.write_text("a file where the state file's directory should be")
        state = blocker / "state"
        url = self.mock.url("/v1/fo/retry", plan="200", key=harness.unique_key("rt"))
        script = (
            "import sys, time, pycurl\n"
            "c = pycurl.Curl(); c.setopt(pycurl.URL, sys.argv[1])\n"
            "c.setopt(pycurl.WRITEFUNCTION, lambda b: None)\n"
            "end = time.monotonic() + 4\n"
            "while time.monotonic() < end:\n"
            "    c.perform(); time.sleep(0.05)\n")
        env = self.guard_env(CURLGUARD_STATE=str(state), CURLGUARD_RPM="60",
                             CURLGUARD_ADAPTIVE="off")
        proc = subprocess.Popen([harness.PYTHON, "-c", script, url], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        time.sleep(0.5)
        blocker.unlink()
        blocker.mkdir()
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        times = sorted(e["t"] for e in self.mock.entries(url=url))
        late = [t for t in times if t > times[0] + 2.0]
        # Paced from the second try on (at most ~1.5 s in): a place a second after that.
        self.assertLessEqual(len(late), 3, f"{len(late)} calls in the last 2 s: not paced")
        self.assertGreaterEqual(len(late), 1)
        self.assertTrue(state.exists())
        lines = err.decode(errors="replace").splitlines()
        self.assertEqual(len(lines), 2, lines)
        self.assertIn("tried again once a second", lines[0])
        self.assertIn(f"state file {state} opened now", lines[1])

    def test_a_file_size_limit_too_low_for_the_state_file(self):
        """A process whose file size limit is below the state file's size: growing the
        new file would raise SIGXFSZ, which kills the host (before: curl died, exit 153,
        and the file was left empty).  The state file is not grown, and the requests run
        without the limiter."""
        if not shutil.which("prlimit"):
            self.skipTest("prlimit (util-linux) is not installed")
        g, p, gurls, line = self.compare(fsize=100 * 1024, CURLGUARD_RPM="60")
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(g.stdout, FIXED.encode() * 2)
        self.assertIn("state file", line)
        self.assertIn("file size limit", line)
        self.assertEqual([r["queue_ms"] for r in self.records()], [0, 0])

    def test_a_log_past_the_file_size_limit(self):
        """A usage log 100 bytes short of the process's file size limit: a record would
        cross it, and is not written (no torn line the next record would be glued to),
        instead of killing the host with SIGXFSZ (before: curl died, exit 153, at the
        first record)."""
        if not shutil.which("prlimit"):
            self.skipTest("prlimit (util-linux) is not installed")
        warm = self.curl([self.mock.url("/v1/fo/warm", plan=[OK])], self.guard_env())
        self.assertEqual(warm.returncode, 0, warm.stderr)   # the state file, full size
        self.assertGreater(os.path.getsize(self.state), 200 * 1024)
        limit = os.path.getsize(self.state)                  # the state file fits it
        self.log.write_bytes(b"\n" * (limit - 100))           # a record does not
        g, p, gurls, line = self.compare(fsize=limit)
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(g.stdout, FIXED.encode() * 2)
        self.assertIn("usage log write failed", line)
        self.assertEqual(os.path.getsize(self.log), limit - 100, "no part of a record")


if __name__ == "__main__":
    unittest.main()
