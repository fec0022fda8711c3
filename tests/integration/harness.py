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


def require_curl_and_cli():
    """Skip the calling test class when Debian's curl or the built CLI is missing."""
    if not CURL:
        raise unittest.SkipTest("curl is not installed")
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
    """run() hit its timeout: the whole process group was killed. Fails (not errors) a test."""

    def __str__(self):
        def tail(b):
            return (b or b"")[-1500:].decode("utf-8", "replace")
        return (f"command timed out after {self.timeout}s and was killed: {self.cmd}\n"
                f"--- stdout (tail)\n{tail(self.output)}\n--- stderr (tail)\n{tail(self.stderr)}")


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
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        out, err = proc.communicate()
        raise RunTimeout(argv, timeout, out, err) from None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


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
