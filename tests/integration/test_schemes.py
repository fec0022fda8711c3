"""URLs the guard must leave alone (issue 11 item 9): `file:` URLs (one slash too) and
URLs without a scheme that libcurl guesses to be something else than HTTP (url.h)."""

import os
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness


class FileUrlTest(harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not harness.CURL:
            raise unittest.SkipTest("curl is not installed")

    def test_file_urls_pass_through_unguarded(self):
        target = self.tmp / "hostname.txt"
        target.write_bytes(b"file scheme content\n")
        for url in (f"file:{target}", f"file://{target}", f"file://localhost{target}"):
            with self.subTest(url=url):
                g = harness.run([harness.CURL, "-sS", url], self.guard_env(), timeout=30)
                p = harness.run([harness.CURL, "-sS", url], harness.plain_env(), timeout=30)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual((g.returncode, g.stdout, g.stderr), (p.returncode, p.stdout, b""))
                self.assertFalse(self.log.exists() and self.log.read_bytes(),
                                 "a file: URL was recorded (taken for http)")

    def test_etc_hostname_as_in_the_issue(self):
        if not os.path.exists("/etc/hostname"):
            raise unittest.SkipTest("no /etc/hostname")
        g = harness.run([harness.CURL, "-sS", "file:/etc/hostname"], self.guard_env(), timeout=30)
        p = harness.run([harness.CURL, "-sS", "file:/etc/hostname"], harness.plain_env(),
                        timeout=30)
        self.assertEqual((g.returncode, g.stdout, g.stderr), (p.returncode, p.stdout, p.stderr))
        self.assertFalse(self.log.exists() and self.log.read_bytes())
        self.assertFalse(self.state.exists(), "a file: URL touched the state file")


if __name__ == "__main__":
    unittest.main()
