"""The artifacts of `make` and the curlguard CLI (SPEC sections 2 and 6).

- build/libcurlguard.so links no libcurl and exports exactly the six interposed symbols;
- `make install PREFIX=...` lays out bin/curlguard and lib/curlguard/libcurlguard.so, and the
  installed `curlguard run` finds its own library;
- `curlguard plan` computes the worst-case timeline;
- CLI exit codes and one-line messages; `curlguard run` warnings for unguardable commands.
"""

import json
import os
import re
import shutil
import subprocess
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

# The six the guard needs, plus curl_easy_pause: a host that pauses while the guard hands
# it a held response after the transfer ended gets libcurl's answer for a running one.
EXPORTS = {"curl_easy_init", "curl_easy_setopt", "curl_easy_perform", "curl_easy_cleanup",
           "curl_easy_reset", "curl_easy_duphandle", "curl_easy_pause"}
# src/loader.c (issue 14): PHP's RTLD_DEEPBIND and dlsym on a libcurl handle (FFI hosts).
EXPORTS |= {"dlopen", "dlsym"}
# The multi API (issue 13, src/shim-multi.c).
EXPORTS |= {"curl_multi_" + f for f in (
    "init", "add_handle", "remove_handle", "perform", "info_read", "timeout", "wait", "poll",
    "fdset", "cleanup", "socket_action", "socket", "socket_all", "setopt", "assign", "wakeup")}
# --attempt-timeout 2 --base 1 --cap 20 --max-attempts 8: waits 0,1,2,4,8,16,20,20
PLAN_ENDS = [2, 5, 9, 15, 25, 43, 65, 87]
PLAN_WAITS = [0, 1, 2, 4, 8, 16, 20, 20]
PLAN_FIT = {10: 3, 20: 4, 30: 5, 60: 6, 90: 8}


def _tool(name):
    path = shutil.which(name, path="/usr/bin:/bin:/usr/local/bin")
    if not path:
        raise unittest.SkipTest(f"{name} is not installed")
    return path


def _one_curlguard_line(testcase, stderr, what):
    """stderr is exactly one line and it starts with 'curlguard: '."""
    text = stderr.decode("utf-8", "replace")
    lines = text.splitlines()
    testcase.assertEqual(len(lines), 1, f"{what}: wanted exactly one stderr line, got {text!r}")
    testcase.assertTrue(lines[0].startswith("curlguard: "),
                        f"{what}: stderr line does not start with 'curlguard: ': {text!r}")
    testcase.assertTrue(text.endswith("\n"), f"{what}: message not newline-terminated: {text!r}")
    return lines[0]


class LibraryTest(harness.GuardTestCase):
    def test_no_libcurl_needed(self):
        p = harness.run([_tool("readelf"), "-d", harness.LIB], harness.plain_env(), timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", p.stdout.decode())
        self.assertTrue(needed, f"readelf -d listed no NEEDED entries at all: {p.stdout!r}")
        curl = [n for n in needed if "curl" in n.lower()]
        self.assertEqual(curl, [], f"libcurlguard.so must not link any libcurl: {needed}")

    def test_exports_exactly_the_interposed_symbols(self):
        p = harness.run([_tool("nm"), "-D", "--defined-only", harness.LIB], harness.plain_env(),
                        timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        symbols = set()
        for line in p.stdout.decode().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[1] not in ("A",):     # skip version-definition ABS
                symbols.add(parts[2].split("@")[0])
        self.assertEqual(symbols, EXPORTS,
                         f"extra: {sorted(symbols - EXPORTS)}, missing: {sorted(EXPORTS - symbols)}")


class InstallTest(harness.GuardTestCase):
    def test_make_install_layout_and_run_finds_its_library(self):
        make = _tool("make")
        prefix = self.tmp / "prefix"
        env = harness.plain_env()
        env.pop("DESTDIR", None)
        env.pop("MAKEFLAGS", None)
        env.pop("MFLAGS", None)
        argv = [make, "-s", "-C", harness.ROOT, "install", f"PREFIX={prefix}",
                f"BUILD={harness.BUILD}"]
        if harness.SAN_PRELOAD:
            argv.append("SAN=1")
        p = harness.run(argv, env, timeout=300)
        self.assertEqual(p.returncode, 0, f"make install failed:\n{p.stdout!r}\n{p.stderr!r}")
        cli = prefix / "bin" / "curlguard"
        lib = prefix / "lib" / "curlguard" / "libcurlguard.so"
        self.assertTrue(cli.is_file() and os.access(cli, os.X_OK), f"{cli} missing")
        self.assertTrue(lib.is_file(), f"{lib} missing")
        with open(lib, "rb") as f:
            self.assertEqual(f.read(4), b"\x7fELF", f"{lib} is not an ELF file")

        # The installed CLI resolves ../lib/curlguard/libcurlguard.so from its own location
        # (not from the build tree): LD_PRELOAD seen by the child names the installed file.
        run_env = harness.plain_env()
        if harness.SAN_PRELOAD:
            run_env["LD_PRELOAD"] = harness.SAN_PRELOAD
        run_env["CURLGUARD_LOG"] = str(self.log)
        run_env["CURLGUARD_STATE"] = str(self.state)
        run_env["XDG_STATE_HOME"] = str(self.tmp / "xdg")
        run_env["CURLGUARD_BACKOFF_BASE_MS"] = "50"
        p = harness.run([cli, "run", "--", "/bin/sh", "-c", 'printf "%s|%s" "$LD_PRELOAD" '
                         '"$CURLGUARD"'], run_env, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        preload, switch = p.stdout.decode().split("|")
        first = preload.split(":")[0]
        self.assertEqual(os.path.realpath(first), os.path.realpath(lib),
                         f"installed curlguard preloaded {preload!r}")
        self.assertEqual(switch, "1")

        if not harness.CURL:
            self.skipTest("curl is not installed")
        url = self.mock.url("/v1/install", plan="503:ra=0,200")
        p = harness.run([cli, "run", "--", harness.CURL, "-sS", url], run_env, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["n"], 2, "the 503 was not retried")
        self.assertEqual(len(self.mock.wait_entries(url=url, count=2)), 2)
        recs = self.records()
        self.assertEqual([r["attempt"] for r in recs], [1, 2], recs)


class PlanTest(harness.GuardTestCase):
    def plan(self, *args):
        return harness.run([harness.CLI, "plan", *args], harness.plain_env(), timeout=30)

    def test_plan_json_timeline(self):
        for budget, fit in PLAN_FIT.items():
            with self.subTest(budget=budget):
                p = self.plan("--budget", str(budget), "--attempt-timeout", "2", "--base", "1",
                              "--cap", "20", "--max-attempts", "8", "--json")
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(p.stderr, b"")
                doc = json.loads(p.stdout)
                self.assertEqual(doc["attempts_fit"], fit)
                self.assertEqual(doc["needed_s"], 87)
                self.assertEqual([t["attempt"] for t in doc["timeline"]], list(range(1, 9)))
                self.assertEqual([t["end_s"] for t in doc["timeline"]], PLAN_ENDS)
                self.assertEqual([t["wait_s"] for t in doc["timeline"]], PLAN_WAITS)

    def test_plan_text(self):
        p = self.plan("--budget", "30", "--attempt-timeout", "2", "--base", "1", "--cap", "20",
                      "--max-attempts", "8")
        self.assertEqual(p.returncode, 0, p.stderr)
        text = p.stdout.decode()
        self.assertIn("5 of 8 attempts fit a budget of 30 s; all 8 need 87 s", text)

    def test_plan_keeps_every_digit(self):
        """Times to the millisecond and beyond 10^6 s as given (%g printed 3600.12 for
        3600.125, and 1e+07)."""
        p = self.plan("--budget", "7201", "--attempt-timeout", "3600.125", "--base", ".25",
                      "--cap", ".25", "--max-attempts", "2", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([t["end_s"] for t in json.loads(p.stdout)["timeline"]],
                         [3600.125, 7200.5])
        p = self.plan("--budget", "9999999", "--attempt-timeout", "1234567", "--base", "1",
                      "--cap", "1", "--max-attempts", "1")
        self.assertIn(b"fit a budget of 9999999 s; all 1 need 1234567 s", p.stdout)


class CliErrorsTest(harness.GuardTestCase):
    def cli(self, *args, env=None):
        return harness.run([harness.CLI, *args], env or harness.plain_env(), timeout=30)

    def test_usage_errors_exit_2(self):
        cases = {
            "run without a command": ["run"],
            "run with -- and nothing after": ["run", "--"],
            "run with an unknown option": ["run", "--bogus", "--", "/bin/true"],
            "plan without flags": ["plan"],
            "plan missing --cap": ["plan", "--budget", "30", "--attempt-timeout", "2",
                                   "--base", "1"],
            "plan with a bad number": ["plan", "--budget", "abc", "--attempt-timeout", "2",
                                       "--base", "1", "--cap", "20"],
            "plan with -0": ["plan", "--budget", "-0", "--attempt-timeout", "2",
                             "--base", "1", "--cap", "20"],
            "plan with hexadecimal": ["plan", "--budget", "30", "--attempt-timeout", "0x10",
                                      "--base", "1", "--cap", "20"],
            "run --config without its file": ["run", "--config"],
            "unknown command": ["frobnicate"],
        }
        for what, args in cases.items():
            with self.subTest(what):
                p = self.cli(*args)
                self.assertEqual(p.returncode, 2, f"{what}: {p.stderr!r}")
                self.assertEqual(p.stdout, b"")
                _one_curlguard_line(self, p.stderr, what)

    def test_help_of_every_command(self):
        """`curlguard CMD --help` prints the usage and exits 0 (run, plan, stat, reset and
        exporter took it for an unknown option: exit 2)."""
        for cmd in ("run", "plan", "stat", "reset", "exporter", "report", "prices"):
            with self.subTest(cmd):
                p = self.cli(cmd, "--help")
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn(b"usage:", p.stdout.lower())

    def test_a_config_file_that_cannot_be_used_is_an_error(self):
        """stat, reset and exporter with a config file they cannot use (missing, not a
        JSON object): one line, exit 1, the state file untouched.  Before, they warned
        "using defaults" and went on with the default state file: `reset --config
        typo.json` re-initialised it, exit 0.  run: 1 for a file it cannot read."""
        state = self.tmp / "state"
        warm = harness.run([harness.CURL, "-sS", "-o", "/dev/null",
                            self.mock.url("/v1/cli-config", plan="200")],
                           self.guard_env(), timeout=30)
        self.assertEqual(warm.returncode, 0, warm.stderr)
        before = state.read_bytes()
        bad = self.tmp / "bad.json"
        bad.write_text("{bad")
        env = harness.plain_env(CURLGUARD_STATE=str(state))
        for cfg in (self.tmp / "missing.json", bad):
            for args in (["reset"], ["stat"], ["stat", "--json"],
                         ["exporter", "--listen", "127.0.0.1:0"]):
                with self.subTest(cfg=cfg.name, args=args):
                    p = self.cli(*args, "--config", str(cfg), env=env)
                    self.assertEqual(p.returncode, 1, p.stderr)
                    line = _one_curlguard_line(self, p.stderr, args[0])
                    self.assertIn(cfg.name, line)
            with self.subTest(cfg=cfg.name, env="CURLGUARD_CONFIG"):
                p = self.cli("reset", env=dict(env, CURLGUARD_CONFIG=str(cfg)))
                self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(state.read_bytes(), before, "the state file was re-initialised")
        p = self.cli("run", "--config", str(self.tmp / "missing.json"), "--", "/bin/true")
        self.assertEqual(p.returncode, 1, p.stderr)
        _one_curlguard_line(self, p.stderr, "run")

    def test_unrunnable_command_exit_1(self):
        not_exec = self.tmp / "not-executable"
        not_exec.write_text("#!/bin/sh\necho hi\n")
        os.chmod(not_exec, 0o644)
        cases = {"missing file": ["run", "--", str(self.tmp / "no-such-program")],
                 "not in PATH": ["run", "--", "cg-no-such-command-xyz"],
                 "not executable": ["run", "--", str(not_exec)]}
        for what, args in cases.items():
            with self.subTest(what):
                p = self.cli(*args)
                self.assertEqual(p.returncode, 1, f"{what}: {p.stderr!r}")
                line = _one_curlguard_line(self, p.stderr, what)
                self.assertIn(os.path.basename(args[-1]), line)

    def test_warns_for_static_binary(self):
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            self.skipTest("no C compiler")
        src = self.tmp / "hello.c"
        src.write_text('#include <stdio.h>\nint main(void){puts("static hello");return 3;}\n')
        exe = self.tmp / "hello-static"
        p = subprocess.run([cc, "-static", "-o", str(exe), str(src)], capture_output=True,
                           timeout=120)
        if p.returncode != 0:
            self.skipTest(f"cannot link a static binary here (static libc missing?): "
                          f"{p.stderr.decode(errors='replace')[-300:]}")
        p = self.cli("run", "--", str(exe))
        self.assertEqual(p.stdout, b"static hello\n")
        self.assertEqual(p.returncode, 3, "the command's exit status must pass through")
        line = _one_curlguard_line(self, p.stderr, "static binary")
        self.assertIn("static binary", line)

    def test_warns_for_program_without_libcurl(self):
        p = self.cli("run", "--", "/bin/true")
        self.assertEqual(p.returncode, 0)
        line = _one_curlguard_line(self, p.stderr, "/bin/true")
        self.assertIn("does not use libcurl", line)

    def test_no_warning_for_curl(self):
        if not harness.CURL:
            self.skipTest("curl is not installed")
        p = self.cli("run", "--", harness.CURL, "--version",
                     env=harness.plain_env(CURLGUARD_LOG="off"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn(b"curlguard:", p.stderr)


if __name__ == "__main__":
    unittest.main()
