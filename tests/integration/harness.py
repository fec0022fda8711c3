"""Shared helpers for the curlguard integration tests (Python 3 standard library only).

Run from the project root:  /usr/bin/python3 -m unittest discover -s tests/integration -t .

    from . import harness            # or: from .harness import GuardTestCase, run, ...

    class RetryTest(harness.GuardTestCase):
        def test_503_then_ok(self):
            url = self.mock.url("/v1/chat/completions", plan="503:ra=0,200")   # unique key
            p = harness.run([harness.CURL, "-sS", "--noproxy", "*", "-d", "{}", url],
                            self.guard_env())              # LD_PRELOAD, CURLGUARD_LOG=self.log
            recs = self.records()                          # the usage log, parsed
            seen = self.mock.wait_entries(url=url, count=2)  # what the server really got

Paths (ROOT, BUILD, LIB, CLI, CGHOST, MOCK_PROVIDER) are pathlib paths that also concatenate
with str (LIB + ":" + x). The mock provider's plan grammar is documented at the top of
scripts/mock-provider (or: scripts/mock-provider --help-grammar).
"""

import atexit
import itertools
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
import uuid


class _Path(type(pathlib.Path())):
    """A pathlib path that can also be concatenated with str: LIB + ":" + other."""

    def __add__(self, other):
        return str(self) + other

    def __radd__(self, other):
        return other + str(self)


ROOT = _Path(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# scripts/run-tests sets CG_BUILD (build/ or build-asan/ for the sanitizer run).
BUILD = _Path(os.environ["CG_BUILD"]) if os.environ.get("CG_BUILD") else ROOT / "build"
# Sanitizer runs: the ASan/UBSan runtimes must load before the instrumented library in
# hosts that are not instrumented themselves (curl, python3, git).
SAN_PRELOAD = os.environ.get("CG_SAN_PRELOAD", "")
LIB = BUILD / "libcurlguard.so"
CLI = BUILD / "curlguard"
CGHOST = BUILD / "tests" / "cghost"
MOCK_PROVIDER = ROOT / "scripts" / "mock-provider"
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
CURL = shutil.which("curl", path="/usr/bin:/bin") or shutil.which("curl")
GIT = shutil.which("git", path="/usr/bin:/bin")

# SPEC section 5, in order.
REQUIRED_RECORD_KEYS = [
    "ts", "pid", "request_id", "task_id", "attempt", "final", "method", "host", "path",
    "pool", "status", "curl_code", "outcome", "decision", "reason", "queue_ms", "backoff_ms",
    "connect_ms", "ttfb_ms", "duration_ms", "bytes_sent", "bytes_received", "model",
    "prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "cost_usd",
    "possibly_billed", "body_digest",
]

PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
              "all_proxy", "no_proxy", "NO_PROXY")

KEEP_TMP = os.environ.get("CURLGUARD_TEST_KEEP") == "1"   # keep per-test temp dirs for debugging

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_keys = itertools.count(1)


def closed_port():
    """A loopback port nothing listens on (bound once, then closed): connect refused."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port



# The start of a pycurl host script a test writes out and runs under the guard (a separate
# program: the test's own process is not guarded): fetch() and the looks at the host's own
# descriptors that the descriptor tests (test_state_file, test_redis, test_log_descriptor)
# share.  The test appends the host's own steps.
PYCURL_HOST_START = r"""
import fcntl, json, os, subprocess, sys, threading, time, pycurl

def fetch(url, timeout=10, handle=None):
    # GET url: (status, body text); pycurl.error when the transfer fails
    c = handle or pycurl.Curl()
    body = []
    c.setopt(pycurl.URL, url)
    c.setopt(pycurl.TIMEOUT, timeout)
    c.setopt(pycurl.WRITEFUNCTION, body.append)
    try:
        c.perform()
        return c.getinfo(pycurl.RESPONSE_CODE), b"".join(body).decode()
    finally:
        if handle is None:
            c.close()

def open_fds():
    # {descriptor: what /proc/self/fd names}, without one closed meanwhile
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[int(name)] = os.readlink("/proc/self/fd/" + name)
        except OSError:
            pass
    return out

def fds_of(path):
    # this process's descriptors of the file at path, lowest first
    want = os.path.realpath(path)
    return sorted(fd for fd, what in open_fds().items() if what == want)

def tcp_to(port):
    # the names ("socket:[inode]") of this machine's TCP connections to port
    found = set()
    with open("/proc/net/tcp") as f:
        for line in list(f)[1:]:
            col = line.split()
            if int(col[2].split(":")[1], 16) == port:
                found.add("socket:[%s]" % col[9])
    return found
"""

def require_curl():
    """Skip the calling test class when curl is missing."""
    if not CURL:
        raise unittest.SkipTest("curl is not installed")


def require_git():
    """Skip the calling test class when git is missing."""
    if not GIT:
        raise unittest.SkipTest("git is not installed")


def require_pycurl():
    """Skip the calling test (class) when Debian's python3 has no pycurl (python3-pycurl)."""
    p = subprocess.run([PYTHON, "-c", "import pycurl"], capture_output=True,
                       env=plain_env(), timeout=30)
    if p.returncode != 0:
        raise unittest.SkipTest(f"{PYTHON} has no pycurl (python3-pycurl)")


def require_curl_and_cli():
    """Skip the calling test class when Debian's curl or the built CLI is missing."""
    require_curl()
    if not CLI.exists():
        raise unittest.SkipTest(f"{CLI} is not built")


def unique_key(prefix="k"):
    """A plan key no other test (or test process) uses, so request counters never collide."""
    return f"{prefix}-{os.getpid()}-{next(_keys)}-{uuid.uuid4().hex[:6]}"


# ---------------------------------------------------------------- mock provider

def _die_with_parent():
    """preexec_fn: the mock gets SIGTERM if the test process dies (no orphaned servers)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except Exception:
        pass


class MockProvider:
    """scripts/mock-provider as a child process. Use as a context manager or start()/stop()."""

    def __init__(self, plan_file=None):
        self.plan_file = plan_file
        self.proc = None
        self.port = None
        self.base = None
        self.last_key = None          # the key used by the last url() call
        self.stderr_path = None
        self._dir = None

    # -- lifecycle

    def start(self):
        if self.proc is not None and self.proc.poll() is None:
            return self
        self._dir = tempfile.mkdtemp(prefix="cg-mock-")
        port_file = os.path.join(self._dir, "port")
        self.stderr_path = os.path.join(self._dir, "stderr")
        argv = [PYTHON, str(MOCK_PROVIDER), "--port", "0", "--port-file", port_file, "--quiet"]
        if self.plan_file is not None:
            argv += ["--plan", str(self.plan_file)]
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err,
                                         env=plain_env(), preexec_fn=_die_with_parent)
        deadline = time.monotonic() + 10
        while True:
            if self.proc.poll() is not None:
                msg = self._stderr_tail()
                self.proc = None
                raise RuntimeError(f"mock-provider exited at start: {msg}")
            try:
                with open(port_file) as f:
                    self.port = int(f.read().strip())
                break
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("mock-provider did not write its port file within 10 s")
            time.sleep(0.02)
        self.base = f"http://127.0.0.1:{self.port}"
        return self

    def stop(self):
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_process(proc)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _stderr_tail(self):
        try:
            with open(self.stderr_path, errors="replace") as f:
                return f.read()[-2000:].strip() or "(no stderr)"
        except OSError:
            return "(no stderr)"

    # -- URLs

    def url(self, path, plan=None, key=None, **extra_query):
        """http://127.0.0.1:PORT/path?plan=...&key=...&extra=...

        plan: inline grammar ("503:ra=1,200"), "@name" of a stored plan, or a list of JSON steps
        (stored under a fresh name). key: the counter key; None with a plan (or True) makes a
        unique one, so tests never share counters. The key is also in self.last_key.
        """
        if not path.startswith("/"):
            path = "/" + path
        query = []
        if plan is not None:
            if not isinstance(plan, str):
                name = unique_key("plan")
                self.set_plan(name, plan)
                plan = "@" + name
            query.append(("plan", plan))
            if key is None:
                key = True
        if key is True:
            key = unique_key()
        if key is not None:
            query.append(("key", str(key)))
        for name, value in extra_query.items():
            if value is not None:
                query.append((name, str(value)))
        self.last_key = key
        if not query:
            return self.base + path
        sep = "&" if "?" in path else "?"
        return self.base + path + sep + urllib.parse.urlencode(query, safe=":,@=")

    # -- control endpoints

    def _call(self, method, path, payload=None):
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with _opener.open(req, timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"mock-provider {method} {path}: {e.code} {e.read()[:500]!r}") from None

    def ledger(self):
        """Every ledger entry (list of dicts, oldest first)."""
        return self._call("GET", "/__ledger")["entries"]

    def entries(self, key=None, path=None, url=None):
        """Ledger entries filtered by key and/or path; url= takes the key from a url() result."""
        if url is not None:
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
            if "key" in q:
                key = q["key"][0]
            elif "plan" in q:
                key = q["plan"][0]
        return [e for e in self.ledger()
                if (key is None or e["key"] == key) and (path is None or e["path"] == path)]

    def wait_entries(self, key=None, path=None, url=None, count=1, timeout=10):
        """Wait until at least count matching entries exist and all are done; return them."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.entries(key=key, path=path, url=url)
            if len(got) >= count and all(e["done"] for e in got):
                return got
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"mock-provider: wanted {count} finished entries for key={key!r} "
                    f"path={path!r} url={url!r} within {timeout}s, got "
                    f"{[(e['n'], e['action'], e['done']) for e in got]}")
            time.sleep(0.05)

    def reset(self):
        """Clear ledger, counters and stored plans (affects every test using this server)."""
        self._call("POST", "/__reset")

    def set_plan(self, key, steps):
        """Store a plan (list of JSON steps or grammar strings) usable as plan="@key"."""
        return self._call("POST", "/__plan", {"key": key, "steps": steps})


_shared = None
_shared_lock = threading.Lock()


def provider():
    """The MockProvider shared by the whole test process (started on first use)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.proc is None or _shared.proc.poll() is not None:
            _shared = MockProvider().start()
            atexit.register(_shared.stop)
        return _shared


# ---------------------------------------------------------------- environments and processes

_current_tmp = None          # set by GuardTestCase.setUp: where guard_env puts the state file
_fallback_tmp = None


def _test_dir():
    global _fallback_tmp
    if _current_tmp is not None:
        return str(_current_tmp)
    if _fallback_tmp is None:
        _fallback_tmp = tempfile.mkdtemp(prefix="cg-env-")
        if not KEEP_TMP:
            atexit.register(shutil.rmtree, _fallback_tmp, True)
    return _fallback_tmp


def _base_env():
    env = dict(os.environ)
    for name in PROXY_VARS:
        env.pop(name, None)
    for name in list(env):
        if name == "CURLGUARD" or (name.startswith("CURLGUARD_") and name != "CURLGUARD_TEST_KEEP"):
            del env[name]
    env.pop("LD_PRELOAD", None)
    return env


def _apply(env, *dicts):
    for d in dicts:
        for name, value in (d or {}).items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = str(value)
    return env


def stop_process(proc, grace_s=5):
    """Terminate `proc` (a Popen) if it still runs, kill it after `grace_s`, and reap it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def guard_env(log_path=None, extra=None, **overrides):
    """os.environ without proxy variables (and without inherited CURLGUARD_* settings), with
    LD_PRELOAD=LIB, CURLGUARD=1, CURLGUARD_LOG=log_path (if given), CURLGUARD_STATE in the
    current test's temp dir and XDG_STATE_HOME there too (so nothing lands in $HOME).
    extra (a dict) and keyword overrides are applied last; a value of None removes a variable."""
    env = _base_env()
    tmp = _test_dir()
    env["LD_PRELOAD"] = (SAN_PRELOAD + ":" if SAN_PRELOAD else "") + str(LIB)
    env["CURLGUARD"] = "1"
    if log_path is not None:
        env["CURLGUARD_LOG"] = str(log_path)
    env["CURLGUARD_STATE"] = os.path.join(tmp, "state")
    env["XDG_STATE_HOME"] = os.path.join(tmp, "xdg-state")
    return _apply(env, extra, overrides)


def plain_env(extra=None, **overrides):
    """os.environ without proxy variables, LD_PRELOAD or any CURLGUARD* variable."""
    return _apply(_base_env(), extra, overrides)


class RunTimeout(subprocess.TimeoutExpired, AssertionError):
    """run() hit its timeout: the whole process group was killed. Fails (not errors) a test.
    `stacks`: the stacks of the group's newest processes just before the kill (_stacks)."""
    stacks = b""

    def __str__(self):
        def tail(b, n=1500):
            return (b or b"")[-n:].decode("utf-8", "replace")
        return (f"command timed out after {self.timeout}s and was killed: {self.cmd}\n"
                f"--- stdout (tail)\n{tail(self.output)}\n--- stderr (tail)\n{tail(self.stderr)}"
                + (f"\n--- stacks before the kill{tail(self.stacks, 24000)}" if self.stacks else ""))


# Programs that hang in glibc's setlocale() when an ASan runtime is preloaded into them
# (glibc 2.36 + GCC 12 libasan: `LD_PRELOAD=$(cc -print-file-name=libasan.so) curl URL`
# deadlocks without the guard too).  Under `make check-asan` the guard is exercised through
# the instrumented cghost and through python3/pycurl instead.
_SAN_HANGS = {"curl", "git"}


def skip_unsanitizable(argv, env):
    """Skip the test when argv would run curl/git with a preloaded ASan runtime (see above).
    Tests that start such programs with their own subprocess.Popen call this first."""
    _skip_unsanitizable(argv, env)


def _skip_unsanitizable(argv, env):
    if not SAN_PRELOAD or not env or SAN_PRELOAD not in env.get("LD_PRELOAD", ""):
        return
    names = {os.path.basename(a if isinstance(a, str) else a.decode()) for a in argv}
    for prog in sorted(names & _SAN_HANGS):   # also `curlguard run -- curl ...`
        raise unittest.SkipTest(f"{prog} deadlocks in setlocale() with a preloaded ASan "
                                "runtime (even without the guard)")


def run(argv, env, timeout=60, input=None):
    """Run argv (str, bytes or paths) with env (None: plain_env()) -> CompletedProcess with
    bytes stdout/stderr, stdin from input (bytes or str) or /dev/null.
    On timeout the process and everything it started are killed and RunTimeout is raised."""
    argv = [a if isinstance(a, (str, bytes)) else str(a) for a in argv]
    _skip_unsanitizable(argv, env)
    if isinstance(input, str):
        input = input.encode()
    proc = subprocess.Popen(argv, env=plain_env() if env is None else env,
                            stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        stacks = _stacks(proc.pid)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        out, err = proc.communicate()
        exc = RunTimeout(argv, timeout, out, err)
        exc.stacks = stacks
        raise exc from None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _stacks(pgid, most=4):
    """The threads' stacks (gdb, when installed) of at most `most` processes of the process
    group `pgid`, newest first: what a hung host was waiting for, for the failure's text."""
    gdb = shutil.which("gdb")
    if not gdb:
        return b""
    try:
        pids = subprocess.run(["pgrep", "-g", str(pgid)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, timeout=10).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return b""
    out = b""
    for pid in sorted(pids, key=int, reverse=True)[:most]:
        try:
            bt = subprocess.run([gdb, "-p", pid.decode(), "-batch", "-ex",
                                 "thread apply all bt 24"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        lines = [ln for ln in bt.splitlines() if ln.startswith((b"#", b"Thread"))]
        out += b"\n--- stacks of pid " + pid + b"\n" + b"\n".join(lines)[-6000:] + b"\n"
    return out


def read_records(path):
    """The JSON objects of a JSONL file, one per line (missing file -> []).
    Any line that is not a JSON object fails the test with file, line number and content."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AssertionError(f"{path}: not UTF-8: {e}") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    records = []
    for number, line in enumerate(lines, 1):
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise AssertionError(f"{path}:{number}: invalid JSON ({e}): {line[:400]!r}") from None
        if not isinstance(obj, dict):
            raise AssertionError(f"{path}:{number}: not a JSON object: {line[:400]!r}")
        records.append(obj)
    return records


# ---------------------------------------------------------------- test case base

def _require_lib():
    if not LIB.exists():
        raise unittest.SkipTest(f"{LIB} is not built (run make first); skipping curlguard tests")


class GuardTestCase(unittest.TestCase):
    """Base class for tests that need build/libcurlguard.so (skipped as a whole without it).

    self.tmp    per-test temp dir (removed afterwards unless CURLGUARD_TEST_KEEP=1)
    self.log    self.tmp / "usage.jsonl";  self.state: the CURLGUARD_STATE file guard_env uses
    self.mock   the shared MockProvider (use unique keys: url() makes them when given a plan)
    """

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        _require_lib()

    def setUp(self):
        global _current_tmp
        super().setUp()
        _require_lib()
        self.tmp = _Path(tempfile.mkdtemp(prefix=f"cg-{self._testMethodName[:40]}-"))
        self.addCleanup(self._cleanup_tmp)
        self.log = self.tmp / "usage.jsonl"
        self.state = self.tmp / "state"
        _current_tmp = self.tmp
        self.mock = provider()

    def _cleanup_tmp(self):
        global _current_tmp
        if _current_tmp == self.tmp:
            _current_tmp = None
        if KEEP_TMP:
            sys.stderr.write(f"\n[kept {self.tmp}]\n")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def guard_env(self, log_path=None, extra=None, **overrides):
        """guard_env() with this test's log by default."""
        return guard_env(self.log if log_path is None else log_path, extra, **overrides)

    def exact_entries(self, url, count):
        """The ledger entries of `url`, which must be exactly `count` once the host has
        exited (a request not there by now never came)."""
        try:
            self.mock.wait_entries(url=url, count=count, timeout=3)
        except AssertionError:
            pass                      # reported below, with the entries
        time.sleep(0.05)
        got = self.mock.entries(url=url)
        self.assertEqual(len(got), count,
                         f"server saw {len(got)} requests, expected {count}: "
                         f"{[(e['n'], e['action'], e['status']) for e in got]}")
        return got

    def run_faulted_and_plain(self, run, path, ok, env):
        """`run(url, env)` guarded against a 503 (with an X-Attempt header) then the step
        `ok`, and `run(url, plain_env())` against `ok` alone (the log emptied first): the
        guarded run exits 0 with the plain run's stdout and stderr. Returns (guarded run,
        its url)."""
        self.log.unlink(missing_ok=True)
        gurl = self.mock.url(path, plan=["503:ra=0:h.X-Attempt=first", ok])
        purl = self.mock.url(path, plan=[ok])
        g = run(gurl, env)
        p = run(purl, plain_env())
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(g.stdout, p.stdout)
        self.assertEqual(g.stderr, p.stderr)
        return g, gurl

    def assertRetriedOnce(self, url, method, outcomes=None):
        """The mock saw `url` twice; the log is one call of two attempts (retry, then
        done; with `outcomes`, these outcomes) with `method` and every SPEC key."""
        self.assertEqual(len(self.mock.wait_entries(url=url, count=2)), 2)
        recs = self.records()
        self.assertEqual([r["attempt"] for r in recs], [1, 2], recs)
        self.assertEqual([r["decision"] for r in recs], ["retry", "done"])
        if outcomes is not None:
            self.assertEqual([r["outcome"] for r in recs], outcomes)
        self.assertEqual(len({r["request_id"] for r in recs}), 1)
        self.assertEqual(recs[0]["method"], method)
        for r in recs:
            self.assertRecordKeys(r)

    def paced_arrivals(self, key, n, rate, burst):
        """The sorted arrival times at the mock of the `n` requests of `key` (exactly n),
        which never beat the limiter: within any 1.0 s window at most burst + rate * 1 s
        (+1 for scheduling)."""
        seen = self.mock.wait_entries(key=key, count=n)
        self.assertEqual(len(seen), n)
        times = sorted(e["t"] for e in seen)
        for i, start in enumerate(times):
            inside = [t for t in times[i:] if t <= start + 1.0]
            self.assertLessEqual(len(inside), burst + rate * 1.0 + 1,
                                 f"{len(inside)} requests within 1 s from {start}: {times}")
        return times

    def start_slow_curl(self, url, env, timeout=10):
        """Start `curl URL` in the background under `env` and return its Popen once the
        mock has its request (the call is then in flight: holding a slot, a probe, ...).
        The caller kills and reaps it (or deliberately does not)."""
        skip_unsanitizable([CURL], env)
        holder = subprocess.Popen([CURL, "-sS", "-o", "/dev/null", url], env=env,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self.mock.entries(url=url):
            if time.monotonic() > deadline or holder.poll() is not None:
                holder.kill()
                holder.wait(10)
                self.fail(f"the slow call to {url} never arrived (exit {holder.returncode})")
            time.sleep(0.02)
        return holder

    def records(self, path=None):
        return read_records(self.log if path is None else path)

    def assertRecordKeys(self, record):
        """Every SPEC section 5 key is present (null allowed)."""
        missing = [k for k in REQUIRED_RECORD_KEYS if k not in record]
        self.assertFalse(missing, f"usage record lacks {missing}: {record}")


def mock_pool(port=None):
    """The pool name of calls to the shared mock (or to 127.0.0.1:`port`): a host no
    configured glob matches is a pool per host and port (README "Pools")."""
    return f"127.0.0.1:{port if port is not None else provider().port}"


# ---------------------------------------------------------------- multi-API hosts (issue 13)

# tests/hosts/cgmulti.c: N transfers in one multi, an epoll loop over socket_action or
# perform + poll (usage at the top of its source).
CGMULTI = BUILD / "tests" / "cgmulti"


# ---------------------------------------------------------------- git over HTTP

# A git server over HTTP (argv: ROOT PORT_FILE LOG MODE FAIL_FIRST PROTOCOL).
# MODE "smart": `git http-backend` (one CGI run per request, request bodies plain or chunked);
# "dumb": the files below ROOT as they are.  The first request of each path in FAIL_FIRST
# (a comma list) is answered 503 with Retry-After: 0.  Every request is logged to LOG as
# "n METHOD PATH STATUS" (n counts from 1) once its status is known, before its answer.
GIT_HTTP_SERVER = textwrap.dedent(r'''
    import functools, http.server, os, subprocess, sys, threading
    root, port_file, log_path, mode, fail_first, protocol = sys.argv[1:7]
    fail_first = set(p for p in fail_first.split(",") if p)
    lock = threading.Lock()
    count, seen = [0], set()

    class Handler(http.server.SimpleHTTPRequestHandler):
        protocol_version = protocol

        def log_message(self, *a):
            pass

        def send_response(self, code, message=None):
            with lock, open(log_path, "a") as f:
                f.write(f"{self.n} {self.command} {self.path.partition('?')[0]} {code}\n")
            super().send_response(code, message)

        def body(self):
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                parts = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return b"".join(parts)
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def answer(self, status, headers, payload):
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def next_request(self):
            """This request's number, and whether it gets the 503."""
            with lock:
                count[0] += 1
                self.n = count[0]
                path = self.path.partition("?")[0]
                fail = path in fail_first and path not in seen
                seen.add(path)
            return fail

        def do_HEAD(self):
            self.next_request()
            super().do_HEAD()

        def serve(self):
            fail = self.next_request()
            path, _, query = self.path.partition("?")
            data = self.body() if self.command == "POST" else b""
            if fail:
                return self.answer(503, [("Retry-After", "0")], b"busy\n")
            if mode == "dumb":
                return super().do_GET()
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                   "GIT_PROJECT_ROOT": root, "GIT_HTTP_EXPORT_ALL": "1",
                   "PATH_INFO": path, "QUERY_STRING": query,
                   "REQUEST_METHOD": self.command, "REMOTE_ADDR": "127.0.0.1",
                   "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                   "CONTENT_LENGTH": str(len(data)),
                   "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                   "HTTP_GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                   "GIT_PROTOCOL": self.headers.get("Git-Protocol", "")}
            out = subprocess.run(["git", "http-backend"], input=data, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
            sep = out.find(b"\r\n\r\n")
            head, payload = (out[:sep], out[sep + 4:]) if sep >= 0 else out.split(b"\n\n", 1)
            status, headers = 200, []
            for line in head.replace(b"\r\n", b"\n").split(b"\n"):
                name, _, value = line.decode("latin-1").partition(":")
                if name.lower() == "status":
                    status = int(value.split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.answer(status, headers, payload)

        do_GET = do_POST = serve

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                          functools.partial(Handler, directory=root))
    with open(port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    srv.serve_forever()
''')


class GitHttpServer:
    """GIT_HTTP_SERVER serving the repositories below `root` for the GuardTestCase `test`
    (stopped at the test's cleanup). name: its files in test.tmp (NAME.port, NAME.log).
    smart: git http-backend, else dumb HTTP (static files). fail_first: paths whose first
    request gets a 503. protocol: the HTTP version it answers with.
    self.base is http://127.0.0.1:PORT; self.log the request log."""

    def __init__(self, test, root, name, smart=True, fail_first=(), protocol="HTTP/1.0"):
        script = test.tmp / "git-http-server.py"
        if not script.exists():
            script.write_text(GIT_HTTP_SERVER)
        port_file, self.log = test.tmp / f"{name}.port", test.tmp / f"{name}.log"
        kind = "smart" if smart else "dumb"
        self.proc = subprocess.Popen([PYTHON, str(script), str(root), str(port_file),
                                      str(self.log), kind, ",".join(fail_first), protocol],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=plain_env())
        test.addCleanup(stop_process, self.proc)
        deadline = time.monotonic() + 10
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                test.fail(f"the {kind}-HTTP git server did not start")
            time.sleep(0.02)
        self.base = f"http://127.0.0.1:{int(port_file.read_text())}"

    def requests(self):
        """The requests so far, each [n, METHOD, PATH, STATUS] (strings)."""
        return [line.split() for line in self.log.read_text().splitlines()] \
            if self.log.exists() else []


class GitTestMixin:
    """For a GuardTestCase that runs git: its environment (HOME in self.tmp, fixed author
    and dates), runs and a bare repository to serve."""

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
        return run([GIT, *args], env or self.git_env(plain_env()), timeout=timeout)

    def ok(self, p):
        self.assertEqual(p.returncode, 0, f"{p.args}: {p.stderr!r}")
        return p

    def make_bare_repo(self, bare, big=True, tag=True):
        """self.tmp/home, and `bare` cloned from a work tree self.tmp/work of three commits
        (file0..2.txt, with big=True also a growing big.bin; tag=True: tag v1 on the last)."""
        (self.tmp / "home").mkdir()
        work = self.tmp / "work"
        self.ok(self.git(["init", "-q", "-b", "main", str(work)]))
        for i in range(3):
            (work / f"file{i}.txt").write_text(f"content {i}\n" * (i + 1))
            if big:
                (work / "big.bin").write_bytes(bytes(range(256)) * (64 * (i + 1)))
            self.ok(self.git(["-C", str(work), "add", "-A"]))
            self.ok(self.git(["-C", str(work), "commit", "-q", "-m", f"commit {i}"]))
        if tag:
            self.ok(self.git(["-C", str(work), "tag", "v1"]))
        self.ok(self.git(["clone", "-q", "--bare", str(work), str(bare)]))
