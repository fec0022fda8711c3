"""The usage log's descriptor in a host that closes or replaces descriptors it does not own
(README "How it stays invisible": a host that closes the log's descriptor gets the log
reopened, never its own descriptor written to; issue 16: no fstat(2) per record).

The guard keeps the log's descriptor at the top of the numbers the process may use, notices
a closed one by the write's EBADF and reopens the log, and checks the descriptor's identity
with fstat(2) once a second (before every record when it could not be moved up). Each case
is one unmodified python3 + pycurl host doing three requests."""

import json
import subprocess
import textwrap
import unittest
from urllib.parse import urlsplit

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

FIXED = '{"id": "fixed-fd", "choices": [{"text": "log descriptor"}]}\n'
OK = {"action": 200, "body": FIXED}

# argv: MODE LOG OWN URL1 URL2 URL3 [NOFILE]; prints one JSON line on stdout
SCRIPT = textwrap.dedent(r'''
    import json, os, resource, sys, time, pycurl

    mode, log, own, urls = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:7]
    if len(sys.argv) > 7:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[7]), hard))

    def fetch(url):
        body = []
        c = pycurl.Curl()
        c.setopt(pycurl.URL, url)
        c.setopt(pycurl.WRITEFUNCTION, body.append)
        c.perform()
        code = c.getinfo(pycurl.RESPONSE_CODE)
        c.close()
        return code, b"".join(body).decode()

    def log_fds():
        want = os.path.realpath(log)
        fds = []
        for name in os.listdir("/proc/self/fd"):
            try:
                if os.path.realpath("/proc/self/fd/" + name) == want:
                    fds.append(int(name))
            except OSError:
                pass
        return fds

    out = {"top": min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1024) - 1}
    out["answers"] = [fetch(urls[0])]
    out["fds"] = log_fds()
    if mode == "closeall":
        os.closerange(3, 1 << 16)            # a daemon's close loop
        mine = [os.open(own + str(i), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                for i in range(8)]
        out["mine"] = mine
    elif mode in ("dup2", "dup2-wait"):
        mine = os.open(own + "0", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(mine, out["fds"][0])         # a file of the host's own on the log's number
        if mode == "dup2-wait":
            time.sleep(1.3)                  # past the once-a-second identity check
    out["answers"].append(fetch(urls[1]))
    out["answers"].append(fetch(urls[2]))
    out["after"] = log_fds()
    print(json.dumps(out))
''')


class LogDescriptorTest(harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        p = subprocess.run([harness.PYTHON, "-c", "import pycurl"], capture_output=True,
                           env=harness.plain_env(), timeout=30)
        if p.returncode != 0:
            raise unittest.SkipTest(f"{harness.PYTHON} has no pycurl (python3-pycurl)")

    def host(self, mode, *nofile):
        script = self.tmp / "host.py"
        script.write_text(SCRIPT)
        own = self.tmp / "own-"
        urls = [self.mock.url(f"/v1/fd/{mode}/{i}", plan=[OK]) for i in range(3)]
        p = harness.run([harness.PYTHON, script, mode, str(self.log), str(own), *urls,
                         *map(str, nofile)], self.guard_env(), timeout=60)
        self.assertEqual(p.returncode, 0, p)
        self.assertEqual(p.stderr, b"", p)
        out = json.loads(p.stdout)
        self.assertEqual(out["answers"], [[200, FIXED]] * 3)
        for f in self.tmp.glob("own-*"):
            self.assertEqual(f.read_bytes(), b"", f"a record went into the host's {f.name}")
        recs = self.records()
        self.assertEqual([r["path"] for r in recs], [urlsplit(u).path for u in urls],
                         "one record per request, in the log")
        return out

    def test_descriptor_sits_at_the_top(self):
        out = self.host("plain")
        self.assertGreaterEqual(out["top"], 64)
        self.assertEqual(out["fds"], [out["top"]], "soft limit - 1, at most 1023")
        self.assertEqual(out["after"], [out["top"]])

    def test_host_closes_every_descriptor(self):
        out = self.host("closeall")
        self.assertEqual(out["mine"], list(range(3, 11)), "the host got the low numbers back")
        self.assertEqual(out["after"], [out["top"]], "the log reopened at the top")

    def test_host_dup2_onto_the_log_number_is_seen_within_a_second(self):
        out = self.host("dup2-wait")
        self.assertEqual(out["fds"], [out["top"]])
        self.assertEqual(len(out["after"]), 1)
        self.assertNotEqual(out["after"], out["fds"], "the log reopened on a number of its own")

    def test_low_soft_limit_checks_every_record(self):
        # a soft limit under 64: the descriptor stays where open(2) put it and fstat(2)
        # checks it before every record, so even an immediate dup2 onto it is seen
        out = self.host("dup2", 40)
        self.assertEqual(len(out["fds"]), 1)
        self.assertLess(out["fds"][0], 40)
        self.assertEqual(len(out["after"]), 1)
        self.assertNotEqual(out["after"], out["fds"])


if __name__ == "__main__":
    unittest.main()
