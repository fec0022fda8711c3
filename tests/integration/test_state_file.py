"""The shared state file under real processes (README "One limiter for every process on the
machine" / "The file", SPEC sections 3 and 6): a file the guard must not use leaves the host
unharmed and is reported once; a file it must not trust is re-initialised; many processes
starting at once agree on one file; `curlguard stat` and `curlguard reset`."""

import concurrent.futures
import json
import os
import socket
import threading
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

FIXED = '{"id": "fixed-state", "choices": [{"text": "state file"}]}\n'
OK = {"action": 200, "body": FIXED}


# The pycurl host scripts' one handle: one() fetches `url` (a global of the script) and
# returns the status.
ONE_HANDLE = r"""
c = pycurl.Curl()
c.setopt(pycurl.WRITEFUNCTION, lambda b: None)
def one():
    c.setopt(pycurl.URL, url)
    c.perform()
    return c.getinfo(pycurl.RESPONSE_CODE)
"""


class StateFileTestCase(harness.GuardTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_curl_and_cli()

    def curl(self, urls, env):
        return harness.run([harness.CURL, "-sS", *urls], env, timeout=30)

    def cli(self, *args, state=None):
        return harness.run([harness.CLI, *args],
                           harness.plain_env(CURLGUARD_STATE=str(state or self.state)), timeout=30)

    def stat(self, state=None):
        p = self.cli("stat", "--json", state=state)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def guarded_vs_plain(self, state):
        """Two requests in one guarded curl (CURLGUARD_STATE=state) vs the same plainly.
        Returns the guarded run's stderr lines."""
        gurls = [self.mock.url(f"/v1/state/{i}", plan=[OK]) for i in range(2)]
        purls = [self.mock.url(f"/v1/state/{i}", plan=[OK]) for i in range(2)]
        g = self.curl(gurls, self.guard_env(CURLGUARD_STATE=str(state)))
        p = self.curl(purls, harness.plain_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(g.returncode, 0, f"the host was harmed: {g.stderr!r}")
        self.assertEqual(g.stdout, p.stdout)
        self.assertEqual(g.stdout, FIXED.encode() * 2)
        for u in gurls:
            self.assertEqual(len(self.mock.wait_entries(url=u)), 1)
        recs = self.records()
        self.assertEqual([r["outcome"] for r in recs], ["ok", "ok"],
                         "the guard should still run (without the limiter)")
        return g.stderr.decode("utf-8", "replace").splitlines()

    def assertRefused(self, state):
        """The host is unharmed and exactly one curlguard: line names the state file."""
        lines = self.guarded_vs_plain(state)
        self.assertEqual(len(lines), 1, f"wanted one line on stderr, got {lines}")
        self.assertTrue(lines[0].startswith("curlguard:"), lines[0])
        self.assertIn("state file", lines[0])
        self.assertIn(str(state), lines[0])
        return lines[0]

    def assertReinitialised(self, state):
        lines = self.guarded_vs_plain(state)
        self.assertEqual(lines, [], "a re-initialised file needs no message")
        st = self.stat(state)
        self.assertTrue(st["exists"])
        self.assertEqual(st["layout_version"], 7)   # 2: breaker and budget; 3: issue 12; 4: learned rate; 5: used_ms; 6: keyed holds; 7: turns
        self.assertEqual(st["size"], 573696)        # state.h: 7, with the tallies (issue 17), 256 pools
        self.assertGreaterEqual(os.path.getsize(state), st["size"],
                                "the file was not grown to its layout")
        pools = {p["name"]: p for p in st["pools"]}
        self.assertEqual(list(pools), [harness.mock_pool()], st)
        self.assertEqual(pools[harness.mock_pool()]["admitted"], 2)
        p = self.cli("stat", state=state)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(harness.mock_pool().encode(), p.stdout)


class UnusableStateFileTest(StateFileTestCase):
    def test_symlink_to_a_file(self):
        target = self.tmp / "target"
        target.write_text("keep me\n")
        link = self.tmp / "state-link"
        os.symlink(target, link)
        line = self.assertRefused(link)
        self.assertIn("symbolic link", line)
        self.assertEqual(target.read_text(), "keep me\n", "the symlink's target was written")
        self.assertTrue(os.path.islink(link))

    def test_dangling_symlink(self):
        target = self.tmp / "nowhere"
        link = self.tmp / "state-link"
        os.symlink(target, link)
        self.assertRefused(link)
        self.assertFalse(os.path.lexists(target), "the symlink's target was created")

    def test_directory(self):
        d = self.tmp / "state-dir"
        d.mkdir()
        self.assertRefused(d)
        self.assertEqual(os.listdir(d), [])

    def test_path_in_missing_directory(self):
        missing = self.tmp / "no" / "such" / "dir" / "state"
        self.assertRefused(missing)
        self.assertFalse(os.path.exists(self.tmp / "no"), "directories were created")

    def test_file_of_another_user(self):
        if os.geteuid() != 0:
            self.skipTest("chown to another user needs root")
        f = self.tmp / "foreign-state"
        f.write_bytes(b"someone else's\n")
        os.chown(f, 65534, 65534)
        self.assertRefused(f)
        self.assertEqual(f.read_bytes(), b"someone else's\n", "another user's file was changed")

    def test_stat_and_reset_refuse_a_symlink(self):
        target = self.tmp / "target"
        target.write_text("keep me\n")
        link = self.tmp / "state-link"
        os.symlink(target, link)
        for cmd in (["stat"], ["reset"]):
            with self.subTest(cmd=cmd):
                p = self.cli(*cmd, state=link)
                self.assertEqual(p.returncode, 1, p)
                self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
                self.assertIn(b"symbolic link", p.stderr)
        self.assertEqual(target.read_text(), "keep me\n")

    def test_stat_and_reset_refuse_a_fifo_at_once(self):
        """A FIFO at the path is refused, not waited on for a writer (the read-only open of
        `stat` blocked for good before)."""
        fifo = self.tmp / "state-fifo"
        os.mkfifo(fifo)
        for cmd in (["stat"], ["reset"]):
            with self.subTest(cmd=cmd):
                p = self.cli(*cmd, state=fifo)
                self.assertEqual(p.returncode, 1, p)
                self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
                self.assertIn(b"not a regular file", p.stderr)


class UntrustedStateFileTest(StateFileTestCase):
    def test_a_file_that_is_not_a_state_file_is_never_overwritten(self):
        """CURLGUARD_STATE naming some other file of the user's (a typo: ~/.bashrc; as root,
        any file): the host runs as without the guard, one line says why, and not one
        byte of the file changes; `curlguard reset` refuses it too.  (It was grown to the
        layout's size and overwritten without a word: a helper's review lost a file of
        notes that way, and /etc/passwd as root.)"""
        for name, data in (("notes.txt", b"my precious notes\nline 2\n"),
                           ("random.bin", os.urandom(50000)),
                           ("full-size.bin", b"\x7fELF" + os.urandom(573696 - 4))):
            with self.subTest(name):
                self.log.unlink(missing_ok=True)
                f = self.tmp / name
                f.write_bytes(data)
                line = self.assertRefused(f)
                self.assertIn("is not a curlguard state file", line)
                self.assertEqual(f.read_bytes(), data, "the file was changed")
                p = self.cli("reset", state=f)
                self.assertEqual(p.returncode, 1, p)
                self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
                self.assertEqual(f.read_bytes(), data, "curlguard reset changed the file")

    def test_truncated_file_reinitialised(self):
        self.state.write_bytes(b"CGCGGRD1\x01\x00")        # 10 bytes: the start of a header
        self.assertReinitialised(self.state)

    def test_valid_file_cut_short_is_grown(self):
        """A file that was good, cut after its header: mapping it as is would SIGBUS."""
        first = self.mock.url("/v1/state/first", plan=[OK])
        p = self.curl([first], self.guard_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        size = os.path.getsize(self.state)
        os.truncate(self.state, 300)
        self.log.unlink()
        lines = self.guarded_vs_plain(self.state)
        self.assertEqual(lines, [])
        self.assertEqual(os.path.getsize(self.state), size)
        self.stat()

    def test_file_truncated_while_mapped_fails_open(self):
        """The file is cut to 0 bytes while a host has it mapped (review 6, item 10): the
        next call checks the length first (a guarded read of the mapping's last page, no
        system call) and, instead of dying of SIGBUS, grows
        the file back and re-initialises it under its lock, as a new process would (issue
        11 item 2), with one `curlguard:` line; the limiter is used from then on
        (`curlguard reset` clears it again here)."""
        if harness.run([harness.PYTHON, "-c", "import pycurl"], None).returncode != 0:
            raise unittest.SkipTest("python3-pycurl is not installed")
        script = r'''
import os, subprocess, sys, pycurl
url, state, cli = sys.argv[1:4]
''' + ONE_HANDLE + r'''
out = [one()]                       # maps the file
os.truncate(state, 0)               # cut under the mapping
out += [one(), one()]               # unpaced, one line
subprocess.run([cli, "reset"], stdout=subprocess.DEVNULL, check=True)  # whole again
out += [one()]
print(out)
'''
        url = self.mock.url("/v1/state/cut")
        env = self.guard_env(CURLGUARD_LOG="off", CURLGUARD_MAX_ATTEMPTS="1",
                             CURLGUARD_STATE=str(self.state))
        p = harness.run([harness.PYTHON, "-c", script, url, str(self.state), str(harness.CLI)],
                        env, timeout=60)
        self.assertEqual(p.returncode, 0, f"host died: {p.returncode} {p.stderr!r}")
        self.assertEqual(p.stdout.strip(), b"[200, 200, 200, 200]")
        lines = p.stderr.decode().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertRegex(lines[0], r"^curlguard: state file .* was cut short under this "
                                   r"process \(truncated\?\); re-initialised it \(its pools, "
                                   r"breakers and budgets start over\)$")
        admitted = {x["name"]: x for x in self.stat()["pools"]}[harness.mock_pool()]["admitted"]
        self.assertEqual(admitted, 1, "only the call after the file was whole again")

    HOST_HANDLER = r'''
import faulthandler, os, signal, sys, time, pycurl
url, state, how, then = sys.argv[1:5]
''' + ONE_HANDLE + r'''
def handler():
    if how == "faulthandler":
        faulthandler.enable()       # the host's own, in front of the guard's
    else:
        signal.signal(signal.SIGBUS, lambda s, f: print("host handler ran", file=sys.stderr))
out = [one()]                       # maps the file: the guard's SIGBUS handler
if then == "unrepairable":
    # cut, and another user's file (refused): the guard goes on without it, then the
    # host's handler comes while the file is still short
    os.truncate(state, 0)
    os.chown(state, 65534, 65534)
    out += [one()]
    handler()
    time.sleep(1.2)
    out += [one()]
    os.chown(state, os.getuid(), os.getgid())
    out += [one()]
else:
    handler()
    time.sleep(1.2)                 # the guard's once-a-second checks come round
    out += [one()]
    if then == "close-fd":          # a host closing descriptors it does not know
        for fd in os.listdir("/proc/self/fd"):
            try:
                if os.readlink("/proc/self/fd/" + fd) == state:
                    os.close(int(fd))
            except OSError:
                pass
    os.truncate(state, 0)           # cut under the mapping
    out += [one(), one()]
if how == "signal":
    os.kill(os.getpid(), signal.SIGBUS)  # the host's handler still gets its signals
print(out)
'''

    def check_host_handler(self, how, then="cut"):
        if harness.run([harness.PYTHON, "-c", "import pycurl"], None).returncode != 0:
            raise unittest.SkipTest("python3-pycurl is not installed")
        if then == "unrepairable" and os.getuid() != 0:
            raise unittest.SkipTest("makes the state file another user's: root only")
        url = self.mock.url(f"/v1/state/host-bus-{how}-{then}")
        env = self.guard_env(CURLGUARD_LOG="off", CURLGUARD_MAX_ATTEMPTS="1",
                             CURLGUARD_STATE=str(self.state))
        p = harness.run([harness.PYTHON, "-c", self.HOST_HANDLER, url, str(self.state), how,
                         then], env, timeout=60)
        self.assertEqual(p.returncode, 0, f"host died: {p.returncode} {p.stderr!r}")
        self.assertEqual(p.stdout.strip(), b"[200, 200, 200, 200]")
        lines = p.stderr.decode().splitlines()
        if then != "unrepairable":
            self.assertRegex(lines[0], r"^curlguard: state file .* was cut short under this "
                                       r"process \(truncated\?\); re-initialised it")
            self.assertEqual(lines[1:], ["host handler ran"] if how == "signal" else [],
                             lines)
        self.assertFalse([x for x in lines if "Fatal Python error" in x], lines)
        self.assertEqual(os.path.getsize(self.state),
                         os.path.getsize(self.fresh_state()), "repaired")

    def test_host_faulthandler_enabled_after_the_first_call(self):
        """A host that puts a SIGBUS handler of its own in front of the guard's after its
        first call (Python's faulthandler.enable()): the guard notices within a second and
        from then on reads the file's length before it probes the mapping, so a file cut
        short is repaired instead of the probe's fault reaching the host's handler (before:
        "Fatal Python error: Bus error", the host killed by SIGBUS)."""
        self.check_host_handler("faulthandler")

    def test_host_signal_handler_set_after_the_first_call(self):
        """The same with signal.signal(SIGBUS, ...), whose C handler returns: before, the
        probe's fault ran again and again (the host hung).  A SIGBUS sent to the host
        still reaches its handler."""
        self.check_host_handler("signal")

    def test_host_handler_after_the_guard_closed_its_descriptor(self):
        """The same after the host closed the guard's descriptor of the file (its length
        unknown until the guard opens it again): the mapping is not read meanwhile."""
        for how in ("faulthandler", "signal"):
            with self.subTest(how=how):
                self.state.unlink(missing_ok=True)
                self.check_host_handler(how, "close-fd")

    def test_host_handler_while_the_file_stays_cut(self):
        """The file is cut and cannot be repaired (another user's: refused), and only
        then the host puts its handler in front: the guard, which found the file short,
        does not read the mapping again until fstat says it is whole."""
        for how in ("faulthandler", "signal"):
            with self.subTest(how=how):
                self.state.unlink(missing_ok=True)
                self.check_host_handler(how, "unrepairable")

    def test_relative_path_and_a_host_chdir(self):
        """A relative CURLGUARD_STATE names the file in the directory the host was in at
        its first guarded call, for the whole process: after the host's chdir(2), the file
        cut short under it is repaired where it is, and no state file is made in the
        host's new directory (before: the repair opened the relative path in the new
        directory, found nothing there and made a second state file in it)."""
        if harness.run([harness.PYTHON, "-c", "import pycurl"], None).returncode != 0:
            raise unittest.SkipTest("python3-pycurl is not installed")
        script = r'''
import os, sys, pycurl
url, first, then = sys.argv[1:4]
os.chdir(first)
''' + ONE_HANDLE + r'''
out = [one()]                                  # maps first/rel.state
os.chdir(then)
os.truncate(os.path.join(first, "rel.state"), 0)
out += [one(), one()]
print(out)
'''
        first, then = self.tmp / "first", self.tmp / "then"
        first.mkdir()
        then.mkdir()
        state = first / "rel.state"
        url = self.mock.url("/v1/state/chdir")
        env = self.guard_env(CURLGUARD_LOG="off", CURLGUARD_MAX_ATTEMPTS="1",
                             CURLGUARD_STATE="rel.state")
        p = harness.run([harness.PYTHON, "-c", script, url, str(first), str(then)], env,
                        timeout=60)
        self.assertEqual(p.returncode, 0, f"host died: {p.returncode} {p.stderr!r}")
        self.assertEqual(p.stdout.strip(), b"[200, 200, 200]")
        self.assertEqual(os.listdir(then), [], "a state file was made in the new directory")
        lines = p.stderr.decode().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertIn(f"curlguard: state file {state} was cut short under this process",
                      lines[0])
        self.assertEqual(os.path.getsize(state), os.path.getsize(self.fresh_state()))
        pools = {x["name"]: x for x in self.stat(state=state)["pools"]}
        self.assertEqual(pools[harness.mock_pool()]["admitted"], 2, pools)

    def fresh_state(self):
        """A state file as a new process makes it (curlguard reset at a new path)."""
        path = self.tmp / "fresh.state"
        p = self.cli("reset", state=path)
        self.assertEqual(p.returncode, 0, p.stderr)
        return path


# argv: STATE SLOW_URL URL URL; one JSON line on stdout.  While the first (slow) request
# runs, the state file's last two pages are cut off; then two more requests, each with a
# deadline of the host's own.
TAIL_CUT = harness.PYCURL_HOST_START + r"""
state, urls = sys.argv[1], sys.argv[2:]
out = {"answers": []}

def cut():
    time.sleep(0.7)
    os.truncate(state, os.path.getsize(state) - 8192)

threading.Thread(target=cut).start()
for url in urls:
    try:
        out["answers"].append(fetch(url, timeout=8)[0])
    except pycurl.error as e:
        out["answers"].append("error %d: %s" % (e.args[0], e.args[1]))
print(json.dumps(out))
"""


class TruncatedDuringACallTest(StateFileTestCase):
    def test_file_truncated_during_a_transfer_fails_open(self):
        """The file is cut while a call is in flight (review 6, N3): the call checks the
        length again after its transfer, writes nothing it learned and ends normally,
        with one `curlguard:` line, instead of dying of SIGBUS."""
        env = self.guard_env(CURLGUARD_LOG="off", CURLGUARD_MAX_ATTEMPTS="1",
                             CURLGUARD_STATE=str(self.state))
        slow = self.mock.url("/v1/state/cut-in-flight", plan="200:delay=1000")
        holder = self.start_slow_curl(slow, env)
        os.truncate(self.state, 0)
        holder.wait(30)
        self.assertEqual(holder.returncode, 0, "the host died (SIGBUS is -7)")

    def test_tail_cut_during_a_transfer_gives_the_slot_back(self):
        """The file's last pages are cut while a call holds the only in-flight slot (an
        operator's `truncate -s`): the call gives its slot back before it drops the state,
        the next call grows the file back and re-makes it, and the host's later calls
        go.  Before, the slot stayed counted (its word was not cut), the repair kept the
        file, and every later call of every process waited for that slot."""
        harness.require_pycurl()
        script = self.tmp / "cut.py"
        script.write_text(TAIL_CUT)
        urls = [self.mock.url("/v1/state/tail/slow", plan="200:delay=1500"),
                self.mock.url("/v1/state/tail/a", plan="200"),
                self.mock.url("/v1/state/tail/b", plan="200")]
        env = self.guard_env(CURLGUARD_LOG="off", CURLGUARD_MAX_INFLIGHT="1")
        p = harness.run([harness.PYTHON, script, str(self.state), *urls], env, timeout=60)
        self.assertEqual(p.returncode, 0, p)
        out = json.loads(p.stdout)
        self.assertEqual(out["answers"], [200, 200, 200], out)
        pool = {x["name"]: x for x in self.stat()["pools"]}[harness.mock_pool()]
        self.assertEqual(pool["inflight"], 0)


class ManyProcessesTest(StateFileTestCase):
    def test_32_processes_agree_on_one_new_file(self):
        n = 32
        self.assertFalse(self.state.exists())
        env = self.guard_env()
        key = harness.unique_key("many")
        url = self.mock.url("/v1/many", plan="200", key=key)
        barrier = threading.Barrier(n)

        def one(_):
            barrier.wait(20)
            return harness.run([harness.CURL, "-sS", "-o", "/dev/null", url], env, timeout=60)

        with concurrent.futures.ThreadPoolExecutor(n) as ex:
            results = list(ex.map(one, range(n)))
        for p in results:
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stderr, b"", "a process could not use the state file")
        self.assertEqual(len(self.mock.wait_entries(key=key, count=n)), n)
        self.assertEqual(len(self.records()), n)
        st = self.stat()
        self.assertEqual([p["name"] for p in st["pools"]], [harness.mock_pool()], st)
        self.assertEqual(st["pools"][0]["admitted"], n,
                         "processes did not agree on one file (a late initialisation wiped counts)")
        self.assertEqual(st["pools"][0]["inflight"], 0)
        self.assertEqual(oct(os.stat(self.state).st_mode & 0o777), oct(0o600))


class CliTest(StateFileTestCase):
    def test_reset_reinitialises(self):
        urls = [self.mock.url("/v1/state/reset", plan="200") for _ in range(2)]
        p = self.curl(urls, self.guard_env(CURLGUARD_RPM="600"))
        self.assertEqual(p.returncode, 0, p.stderr)
        before = self.stat()
        self.assertEqual(len(before["pools"]), 1, before)
        self.assertEqual(before["pools"][0]["admitted"], 2)
        r = self.cli("reset")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(str(self.state).encode(), r.stdout)
        after = self.stat()
        self.assertTrue(after["exists"])
        self.assertEqual(after["pools"], [], after)
        text = self.cli("stat")
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn(b"no pools", text.stdout)
        # The file is still usable: the next call starts a fresh pool.
        p = self.curl([self.mock.url("/v1/state/reset", plan="200")], self.guard_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.stat()["pools"][0]["admitted"], 1)

    def test_stat_text_shows_pool_names_escaped(self):
        # A pool name from a config file cannot split a row of the text tables (`--json`
        # keeps it as it is).
        cfg = self.tmp / "guard.json"
        name = 'a"b\\c\nd'
        cfg.write_text(json.dumps({"pools": [{"name": name, "hosts": ["127.0.0.1"]}]}))
        p = self.curl([self.mock.url("/v1/state/escape", plan="200")],
                      self.guard_env(CURLGUARD_CONFIG=str(cfg)))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([x["name"] for x in self.stat()["pools"]], [name])
        text = self.cli("stat")
        self.assertEqual(text.returncode, 0, text.stderr)
        lines = text.stdout.decode().splitlines()
        rows = [line for line in lines if line.startswith('a"b')]
        self.assertEqual(len(rows), 4, text.stdout)          # one in each table
        for r in rows:
            self.assertTrue(r.startswith('a"b\\\\c\\nd '), rows)
        self.assertFalse([line for line in lines if line.startswith("d ")], text.stdout)

    def test_stat_is_read_only(self):
        """`stat` neither grows a short file nor re-initialises one of another layout: it
        says why it shows nothing and leaves the bytes as they were (review 6, item 11)."""
        p = self.curl([self.mock.url("/v1/state/ro", plan="200")], self.guard_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        good = self.state.read_bytes()
        old = bytearray(good)
        old[8] = 1                              # layout 1 in the header
        # another program's file: stat gave reset's advice, which reset then refused
        # (helper-62); it says what reset says now
        foreign = bytes((i * 131 + 7) % 251 for i in range(len(good)))
        for content, why in ((bytes(old), rb"has layout 1 in its header, not 7: not read"),
                             (good[:300], rb"is 300 bytes, shorter than layout 7"),
                             (foreign, rb"is not a curlguard state file \(it does not start "
                                       rb"with CGCGGRD1\): not read; name another file")):
            self.state.write_bytes(content)
            for args in (("stat",), ("stat", "--json")):
                r = self.cli(*args)
                self.assertEqual(r.returncode, 1, r)
                self.assertRegex(r.stderr, why)
                self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
                self.assertEqual(self.state.read_bytes(), content, "stat changed the file")

    def test_stat_of_missing_file_creates_nothing(self):
        missing = self.tmp / "not-yet"
        p = self.cli("stat", state=missing)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(b"not created yet", p.stdout)
        self.assertIn(str(missing).encode(), p.stdout)
        st = self.stat(missing)
        self.assertEqual(st["exists"], False)
        self.assertEqual(st["pools"], [])
        self.assertFalse(os.path.lexists(missing), "stat created the state file")

    def test_stat_says_a_config_warning_once_and_whether_redis_answers(self):
        """`stat` read the configuration twice (the state path, then Redis) and said each
        of its warnings twice; with no pool yet it called an unreachable Redis reachable
        (nothing had asked it)."""
        p = self.curl([self.mock.url("/v1/state/cfg", plan="200")], self.guard_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        cfg = self.tmp / "warn.json"
        cfg.write_text('{"rpm": "abc", "bogus": 1}')
        for args in (("stat",), ("stat", "--json"), ("stat", "--prometheus")):
            r = self.cli(*args, "--config", str(cfg))
            self.assertEqual(r.returncode, 0, r)
            self.assertEqual(r.stderr.count(b"rpm"), 1, r.stderr)
            self.assertEqual(r.stderr.count(b"bogus"), 1, r.stderr)
        with socket.socket() as sk:                 # a port nobody listens on
            sk.bind(("127.0.0.1", 0))
            port = sk.getsockname()[1]
        self.state.unlink()
        self.assertEqual(self.cli("reset").returncode, 0)   # a state file with no pool
        r = harness.run([harness.CLI, "stat", "--json"],
                        harness.plain_env(CURLGUARD_STATE=str(self.state),
                                          CURLGUARD_REDIS=f"redis://127.0.0.1:{port}"),
                        timeout=30)
        self.assertEqual(r.returncode, 0, r)
        st = json.loads(r.stdout)
        self.assertEqual(st["pools"], [])
        self.assertIs(st["redis"]["reachable"], False, st)
        self.assertTrue(st["redis"]["error"], st)

    def test_stat_usage_error(self):
        p = self.cli("stat", "--bogus")
        self.assertEqual(p.returncode, 2, p)
        self.assertFalse(os.path.lexists(self.state))

    def test_guard_off_never_creates_the_state_file(self):
        for switch in ("0", "off", None):
            with self.subTest(CURLGUARD=switch):
                env = self.guard_env(CURLGUARD=switch, CURLGUARD_RPM="60")
                self.assertEqual(env["CURLGUARD_STATE"], str(self.state))
                urls = [self.mock.url("/v1/state/off", plan="200") for _ in range(2)]
                p = self.curl(urls, env)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertFalse(os.path.lexists(self.state), "guard off created the state file")
        # Positive control: the same environment with the guard on creates it.
        p = self.curl([self.mock.url("/v1/state/on", plan="200")], self.guard_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(self.state.exists())


class FullFileTest(StateFileTestCase):
    # state.h, version 7: struct cg_state_pool at 256 + i * 640; name_hash at 0, name at 8
    # (48 bytes), used_ms at 96.
    POOLS_OFF, POOL_SIZE, NAME_OFF, USED_OFF = 256, 640, 8, 96

    def age_pool(self, name):
        """Make pool `name` look unused for a long time (its used_ms far in the past), as
        an hour without calls would."""
        import mmap
        import struct
        with open(self.state, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
            for i in range(256):
                at = self.POOLS_OFF + i * self.POOL_SIZE
                if m[at + self.NAME_OFF:at + self.NAME_OFF + 48].split(b"\0")[0] == name.encode():
                    m[at + self.USED_OFF:at + self.USED_OFF + 8] = struct.pack("<q", -(1 << 40))
                    return
        self.fail(f"no pool {name} in the file")

    def test_full_file_gives_an_idle_pool_to_a_new_host(self):
        """256 hosts fill the file; a 257th runs unpaced (one line) while every pool was
        in use, used in the last 10 minutes, or held, then gets the pool idle longest (limiter.h
        CG_POOL_IDLE_MS), with its counters from zero."""
        port = self.mock.url("/").split(":")[2].split("/")[0]
        def call(hosts):
            args = []
            for h in hosts:
                args += ["--resolve", f"{h}:{port}:127.0.0.1",
                         self.mock.url("/v1/state/pools", plan="200").replace("127.0.0.1", h)]
            return self.curl(args, self.guard_env())
        fill = [f"h{i}.test" for i in range(256)]
        for at in range(0, 256, 64):        # four processes, 64 hosts each
            p = call(fill[at:at + 64])
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stderr, b"")
        names = {q["name"] for q in self.stat()["pools"]}
        self.assertEqual(names, {f"{h}:{port}" for h in fill})
        p = call(["new.test"])
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stderr.decode().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertIn(f"no room for pool new.test:{port}", lines[0])
        self.assertNotIn(f"new.test:{port}", {q["name"] for q in self.stat()["pools"]})
        self.age_pool(f"h7.test:{port}")
        self.age_pool(f"h9.test:{port}")
        p = call(["h9.test", "new.test", "new.test"])   # h9 used again: h7 is the idle one
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, b"", "a pool was idle: no line")
        pools = {q["name"]: q for q in self.stat()["pools"]}
        self.assertEqual(len(pools), 256)
        self.assertNotIn(f"h7.test:{port}", pools)
        self.assertIn(f"h9.test:{port}", pools)
        self.assertEqual(pools[f"new.test:{port}"]["tally"]["calls"], 2,
                         "the new pool counts its own calls only")
        self.assertEqual(pools[f"h9.test:{port}"]["tally"]["calls"], 2)
        recs = [r for r in self.records() if r["pool"] == f"new.test:{port}"]
        self.assertEqual([r["outcome"] for r in recs], ["ok", "ok", "ok"])


# argv: STATE CLI OWN URL...; one JSON line on stdout.  Between requests the host closes
# every descriptor above 2 (a daemon's close loop) and opens files of its own until one
# lands on the number the state file had, as a host's next open(2) would.
CLOSE_LOOP = harness.PYCURL_HOST_START + r"""
state, cli, own, urls = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]

def mappings():
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if line.rstrip().endswith(os.path.realpath(state)))

out = {"answers": [], "took": [], "fds": [], "maps": []}
for i, url in enumerate(urls):
    out["answers"].append(list(fetch(url)))
    fds = fds_of(state)
    out["fds"].append(fds)
    out["maps"].append(mappings())
    if i == len(urls) - 1:
        break
    os.closerange(3, 1 << 16)
    mine = []
    while fds and len(mine) < 256:
        mine.append(os.open(own + str(len(mine)), os.O_RDWR | os.O_CREAT, 0o600))
        if mine[-1] == fds[0]:
            break
    out["took"].append(bool(fds) and mine[-1] == fds[0])
    time.sleep(1.1)                  # past the guard's once-a-second length check
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
p = subprocess.run([cli, "stat", "--json"], env=env, capture_output=True, text=True)
out["stat"] = json.loads(p.stdout)
print(json.dumps(out))
"""


# argv: STATE URL URL; one JSON line on stdout.  The host closes its stderr first, then
# writes a line to descriptor 2 after the first request, as a daemon's code would.
NO_STDERR = harness.PYCURL_HOST_START + r"""
state, urls = sys.argv[1], sys.argv[2:]
os.close(2)
out = {"answers": [list(fetch(urls[0]))], "state_fds": fds_of(state)}
try:
    os.write(2, b"host: a line for stderr\n")
    out["wrote"] = True
except OSError:
    out["wrote"] = False
out["answers"].append(list(fetch(urls[1])))
print(json.dumps(out))
"""


# argv: STATE ROUNDS URL; one JSON line on stdout.  Each round: a request, then the host
# closes every descriptor above 2 and the state file is removed (another process's clean
# up), and a pause past the guard's once-a-second length check.
REMOVED_LOOP = harness.PYCURL_HOST_START + r"""
state, rounds, url = sys.argv[1], int(sys.argv[2]), sys.argv[3]
out = {"answers": []}
for i in range(rounds):
    out["answers"].append(fetch(url + str(i))[0])
    os.closerange(3, 1 << 16)
    out.setdefault("there", []).append(os.path.exists(state))
    if os.path.exists(state):
        os.unlink(state)
    time.sleep(1.1)
print(json.dumps(out))
"""


class HostTakesTheDescriptorTest(StateFileTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_pycurl()

    def test_host_closes_and_reuses_the_state_descriptor(self):
        """A host that closes every descriptor between requests and puts files of its own
        on the numbers (the state file's among them): the guard opens the file again, with
        the same mapping, says nothing, and gives back every in-flight slot.  Before, the
        length check read the host's file through the old number, took the state for cut
        short, dropped it mid-call with the slot still counted, and with max_inflight 1 the
        host's next request waited for that slot for good."""
        script = self.tmp / "host.py"
        script.write_text(CLOSE_LOOP)
        urls = [self.mock.url(f"/v1/state/fd/{i}", plan=[OK]) for i in range(3)]
        p = harness.run([harness.PYTHON, script, str(self.state), harness.CLI,
                         str(self.tmp / "own-"), *urls],
                        self.guard_env(CURLGUARD_MAX_INFLIGHT="1"), timeout=60)
        self.assertEqual(p.returncode, 0, p)
        self.assertEqual(p.stderr, b"", "nothing was cut short or re-made")
        out = json.loads(p.stdout)
        self.assertEqual(out["answers"], [[200, FIXED]] * 3)
        self.assertEqual(out["took"], [True, True], "the host's file sat on the state's number")
        for fds in out["fds"]:
            self.assertEqual(len(fds), 1, f"one descriptor of the state file: {out['fds']}")
        self.assertNotEqual(out["fds"][1], out["fds"][0], "opened again on a new number")
        self.assertEqual(out["maps"], [1, 1, 1], "the same mapping, never a new one")
        pools = out["stat"]["pools"]
        self.assertEqual(len(pools), 1)
        self.assertEqual(pools[0]["inflight"], 0, "every slot given back, the host alive")
        self.assertEqual(pools[0]["admitted"], 3)
        for f in self.tmp.glob("own-*"):
            self.assertEqual(f.read_bytes(), b"", f"the guard wrote into the host's {f.name}")
        self.assertEqual([r["outcome"] for r in self.records()], ["ok"] * 3)

    def test_host_with_stderr_closed_keeps_the_state_file_off_it(self):
        """A host that runs with stderr closed (`2>&-`, a daemon): the state file is never
        opened as descriptor 2, so what the host writes to "stderr" cannot land in it.
        Before, the file took number 2, the host's line went into its header, and the next
        reader found no state file: 'not a ready layout-5 file'."""
        script = self.tmp / "noerr.py"
        script.write_text(NO_STDERR)
        urls = [self.mock.url(f"/v1/state/noerr/{i}", plan=[OK]) for i in range(2)]
        p = harness.run([harness.PYTHON, script, str(self.state), *urls], self.guard_env(),
                        timeout=60)
        self.assertEqual(p.returncode, 0, p)
        out = json.loads(p.stdout)
        self.assertEqual(out["answers"], [[200, FIXED]] * 2)
        self.assertEqual(len(out["state_fds"]), 1, out)
        self.assertGreater(out["state_fds"][0], 2, "the state file on a standard stream")
        pools = self.stat()["pools"]
        self.assertEqual([(q["admitted"], q["inflight"]) for q in pools], [(2, 0)])
        self.assertEqual([r["outcome"] for r in self.records()], ["ok"] * 2)

    def test_state_file_removed_again_and_again_while_the_host_closes_descriptors(self):
        """Each round the host closes every descriptor and the state file is removed: the
        guard maps the new file at the path four times (CG_STATE_REMAPS), then goes on
        with the file it has, with one line that says so, and gives back every slot.
        Before, it then said the file was 'shorter than its layout (truncated?)' and ran
        every later call without the limiter."""
        script = self.tmp / "removed.py"
        script.write_text(REMOVED_LOOP)
        url = self.mock.url("/v1/state/removed/", plan="200")
        p = harness.run([harness.PYTHON, script, str(self.state), "7", url],
                        self.guard_env(CURLGUARD_MAX_INFLIGHT="1"), timeout=60)
        self.assertEqual(p.returncode, 0, p)
        out = json.loads(p.stdout)
        self.assertEqual(out["answers"], [200] * 7)
        self.assertEqual(out["there"], [True] * 5 + [False] * 2,
                         "a new file at the path for the first call and four re-maps, then none")
        lines = p.stderr.decode().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("no longer opens as the file this process maps", lines[0])
        self.assertIn("goes on with the file it has", lines[0])
        self.assertNotIn("truncated", lines[0])
        self.assertEqual([r["outcome"] for r in self.records()], ["ok"] * 7)


if __name__ == "__main__":
    unittest.main()
