"""The usage log's descriptor in a host that closes or replaces descriptors it does not own
(README "How it stays invisible": a host that closes the log's descriptor gets the log
reopened, never its own descriptor written to; issue 16: no fstat(2) per record).

The guard keeps the log's descriptor at the top of the numbers the process may use, notices
a closed one by the write's EBADF and reopens the log, and checks the descriptor's identity
with fstat(2) when 10 ms have passed since the last check (before every record when it
could not be moved up, and once the host has closed or replaced it). Each case
is one unmodified python3 + pycurl host doing three requests."""

import http.server
import json
import socketserver
import textwrap
import threading
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
        def write(b):
            global hold2
            if hold2:
                os.close(2)
                hold2 = False
            body.append(b)
        c.setopt(pycurl.WRITEFUNCTION, write)
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

    hold2 = mode.startswith("noerr-")        # stderr closed while the first transfer runs
    if hold2:                                # (after its sockets took their numbers): the
        mode = mode[len("noerr-"):]          # first record opens the log as fd 2
    out = {"top": min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1024) - 1}
    if mode == "hold-top":                   # the top number is the host's before we open
        os.dup2(os.open(own + "0", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), out["top"])
    out["answers"] = [fetch(urls[0])]
    out["fds"] = log_fds()
    if mode == "closeall":
        os.closerange(3, 1 << 16)            # a daemon's close loop
        mine = [os.open(own + str(i), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                for i in range(8)]
        out["mine"] = mine
    elif mode in ("dup2", "dup2-wait", "dup2-twice"):
        mine = os.open(own + "0", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(mine, out["fds"][0])         # a file of the host's own on the log's number
        if mode != "dup2":
            time.sleep(0.1)                  # past the identity check's 10 ms
    if mode == "dup2-twice":
        out["answers"].append(fetch(urls[1]))
        out["between"] = log_fds()
        mine = os.open(own + "1", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(mine, out["between"][0])     # at once: checked before every record now
        out["answers"].append(fetch(urls[2]))
        out["after"] = log_fds()
        print(json.dumps(out))
        sys.exit(0)
    out["answers"].append(fetch(urls[1]))
    out["answers"].append(fetch(urls[2]))
    out["after"] = log_fds()
    print(json.dumps(out))
''')


class LogDescriptorTest(harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_pycurl()

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
        self.assertEqual(len(out["after"]), 1)
        self.assertNotIn(out["after"][0], out["mine"])
        self.assertLess(out["after"][0], out["top"],
                        "reopened where open(2) put it: checked before every record now")

    def test_host_dup2_onto_the_log_number_is_seen_within_10_ms(self):
        out = self.host("dup2-wait")
        self.assertEqual(out["fds"], [out["top"]])
        self.assertEqual(len(out["after"]), 1)
        self.assertNotEqual(out["after"], out["fds"], "the log reopened on a number of its own")

    def test_a_host_that_replaced_it_once_gets_every_record_checked(self):
        out = self.host("dup2-twice")
        self.assertEqual(out["fds"], [out["top"]])
        self.assertEqual(len(out["between"]), 1)
        self.assertLess(out["between"][0], out["top"])
        self.assertEqual(len(out["after"]), 1)
        self.assertNotEqual(out["after"], out["between"])

    def test_top_number_taken_stays_low(self):
        # F_DUPFD_CLOEXEC would give the next free number above the top: not taken
        out = self.host("hold-top")
        self.assertEqual(len(out["fds"]), 1)
        self.assertLess(out["fds"][0], out["top"])
        self.assertEqual(out["after"], out["fds"])

    def test_low_soft_limit_checks_every_record(self):
        # a soft limit under 64: the descriptor stays where open(2) put it and fstat(2)
        # checks it before every record, so even an immediate dup2 onto it is seen
        out = self.host("dup2", 40)
        self.assertEqual(len(out["fds"]), 1)
        self.assertLess(out["fds"][0], 40)
        self.assertEqual(len(out["after"]), 1)
        self.assertNotEqual(out["after"], out["fds"])

    def test_log_never_sits_on_descriptor_2(self):
        # stderr closed and a soft limit under 64: open(2) hands out fd 2, but the log
        # moves off it (log.h cg_fd_off_stdio), so the host's own "stderr" lines never go
        # into the records; where it stays low, a dup2 onto it is still seen
        out = self.host("noerr-dup2", 40)
        self.assertEqual(len(out["fds"]), 1)
        self.assertGreater(out["fds"][0], 2)
        self.assertLess(out["fds"][0], 40)
        self.assertEqual(len(out["after"]), 1)
        self.assertNotEqual(out["after"], out["fds"])


# argv: OUT URL...; writes one JSON line to OUT.  A daemon-like host: it closes its stdin,
# stdout and stderr first, then reuses one handle (keep-alive) for every URL.
NO_STDIO = harness.PYCURL_HOST_START + r"""
out_path, urls = sys.argv[1], sys.argv[2:]
for fd in (0, 1, 2):
    os.close(fd)
c = pycurl.Curl()
answers = []
for url in urls:
    try:
        answers.append(fetch(url, handle=c)[0])
    except pycurl.error as e:
        answers.append("error %d" % e.args[0])
fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(fd, json.dumps({"answers": answers}).encode())
"""


class NoStdioTest(harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_pycurl()

    def test_a_line_never_goes_into_the_connection_on_descriptor_2(self):
        """A host that closed its stdin, stdout and stderr, with a usage log that cannot
        be opened (so the guard has a line to say): libcurl's connection takes one of the
        numbers, and the line is not written into it (log.c cg__stderr_ok: descriptor 2
        is no longer the stderr the process started with, and it is a socket).  Before,
        the line went into the keep-alive connection and the next request got a 400."""
        script = self.tmp / "nostdio.py"
        script.write_text(NO_STDIO)
        (self.tmp / "notadir").write_text("")
        urls = [self.mock.url(f"/v1/fd/nostdio/{i}", plan=[OK]) for i in range(3)]
        result = self.tmp / "result.json"
        p = harness.run([harness.PYTHON, script, str(result), *urls],
                        self.guard_env(log_path=self.tmp / "notadir" / "usage.jsonl"),
                        timeout=60)
        self.assertEqual(p.returncode, 0, p)
        self.assertEqual(json.loads(result.read_text())["answers"], [200] * 3)
        for u in urls:
            entries = self.mock.wait_entries(url=u)
            self.assertEqual(len(entries), 1, u)

    def test_a_record_never_goes_into_the_connection_on_descriptor_2(self):
        """The same host with CURLGUARD_LOG=- (records to stderr): the records follow the
        lines' rule (log.c cg_stderr_usable), so none goes into the connection that took
        descriptor 2; they are lost, as the host's own stderr output is.  Before, each
        record went into the keep-alive connection and the next request got a 400."""
        script = self.tmp / "nostdio.py"
        script.write_text(NO_STDIO)
        urls = [self.mock.url(f"/v1/fd/nostdio-rec/{i}", plan=[OK]) for i in range(3)]
        result = self.tmp / "result.json"
        p = harness.run([harness.PYTHON, script, str(result), *urls],
                        self.guard_env(log_path="-"), timeout=60)
        self.assertEqual(p.returncode, 0, p)
        self.assertEqual(json.loads(result.read_text())["answers"], [200] * 3)
        for u in urls:
            entries = self.mock.wait_entries(url=u)
            self.assertEqual(len(entries), 1, u)

    def test_a_record_never_goes_into_a_unix_socket_connection_on_descriptor_2(self):
        """The same host talking HTTP over a Unix socket (CURLOPT_UNIX_SOCKET_PATH, as a
        Docker API client does): libcurl's connection on descriptor 2 is a Unix socket,
        which is no stderr either (log.c cg_stderr_usable: only journald's stream socket
        is, when put there after load).  Before, two records went into the connection as
        request lines, and the second request failed."""
        sock = self.tmp / "http.sock"
        seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def address_string(self):
                return "unix"

            def log_message(self, fmt, *args):
                seen.append(self.requestline)

            def do_GET(self):
                body = FIXED.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        server = Server(str(sock), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        script = self.tmp / "nostdio-unix.py"
        script.write_text(NO_STDIO.replace(
            "answers.append(fetch(url, handle=c)[0])",
            "c.setopt(pycurl.UNIX_SOCKET_PATH, os.environ['SOCK'])\n"
            "        answers.append(fetch(url, handle=c)[0])"))
        result = self.tmp / "result.json"
        try:
            p = harness.run([harness.PYTHON, script, str(result),
                             *[f"http://localhost/v1.41/containers/json?i={i}"
                               for i in range(3)]],
                            self.guard_env(log_path="-", SOCK=str(sock)), timeout=60)
        finally:
            server.shutdown()
            server.server_close()
        self.assertEqual(p.returncode, 0, p)
        self.assertEqual(json.loads(result.read_text())["answers"], [200] * 3)
        self.assertEqual(len(seen), 3, seen)
        self.assertTrue(all(x.startswith("GET /v1.41/containers/json") for x in seen), seen)


if __name__ == "__main__":
    unittest.main()
