"""The Debian package (`make deb`, issue 17), end to end on this machine.

`make deb` builds BUILD/curlguard_VERSION_ARCH.deb from the built tree; the test checks its
control fields (Depends computed by dpkg-shlibdeps: libc6 and libcjson1, nothing of curl)
and contents, runs lintian on it when lintian is installed (no error tags), installs it with
`apt-get install` from the local file, guards Debian's curl through the *installed*
/usr/bin/curlguard against the mock provider (the installed CLI must preload the installed
/usr/lib/curlguard/libcurlguard.so, which must find the installed price table), preloads that
library by path as a systemd drop-in does (README "Guarding a systemd service"), reads the
shared state with the installed `curlguard stat`, and removes the package with `dpkg -r`:
none of its files (man pages too, when `make install` has them) and none of its directories
may be left. A cleanup purges the package whatever happened.

Runs only as root with dpkg-deb, dpkg-shlibdeps and apt-get, on a normal build (not the
sanitizer one), and only when no curlguard is installed in /usr already (the test would
replace it, then remove it).
"""

import json
import os
import shutil
import subprocess
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

PKG = "curlguard"
BIN = "/usr/bin/curlguard"
LIB = "/usr/lib/curlguard/libcurlguard.so"
PRICES = "/usr/share/curlguard/prices.json"
DOC = "/usr/share/doc/curlguard"
# What the package must hold (dpkg-deb -c shows "./usr/...").
FILES = [BIN, LIB, PRICES, DOC + "/copyright", DOC + "/changelog.Debian.gz"]
# What must be gone after `dpkg -r`.
LEFTOVERS = [BIN, os.path.dirname(LIB), os.path.dirname(PRICES), DOC]
TOOLS = ("dpkg", "dpkg-deb", "dpkg-query", "dpkg-shlibdeps", "apt-get", "make")


def _tool(name):
    return shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")


def _status():
    """dpkg's status of the package: "" when dpkg knows nothing of it."""
    p = subprocess.run([_tool("dpkg-query"), "-W", "-f=${Status}", PKG],
                       capture_output=True, timeout=30)
    return p.stdout.decode().strip() if p.returncode == 0 else ""


def _fields(deb):
    """The control fields of a .deb (dpkg-deb -f), continuation lines joined."""
    out = subprocess.run([_tool("dpkg-deb"), "-f", deb], capture_output=True, check=True,
                         timeout=30).stdout.decode()
    fields, name = {}, None
    for line in out.splitlines():
        if line.startswith((" ", "\t")) and name:
            fields[name] += "\n" + line
        elif ":" in line:
            name, value = line.split(":", 1)
            fields[name] = value.strip()
    return fields


class DebPackageTest(harness.GuardTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if os.geteuid() != 0:
            raise unittest.SkipTest("installs a Debian package: runs as root only")
        missing = [t for t in TOOLS if not _tool(t)]
        if missing:
            raise unittest.SkipTest(f"{', '.join(missing)} not installed "
                                    "(dpkg-dev: scripts/install-deps)")
        if harness.SAN_PRELOAD:
            raise unittest.SkipTest("sanitizer build: the package is made from the normal "
                                    "build (make deb), and curl deadlocks under ASan")
        if not harness.CURL:
            raise unittest.SkipTest("curl is not installed")
        status = _status()
        there = [p for p in LEFTOVERS if os.path.lexists(p)]
        if (status and "not-installed" not in status) or there:
            raise unittest.SkipTest(f"curlguard is installed on this machine already "
                                    f"({status or 'not by dpkg'}; {' '.join(there)}): the test "
                                    "would replace it and then remove it")

    def _purge(self):
        """Cleanup, whatever the test did: the package leaves the machine."""
        if _status() and "not-installed" not in _status():
            subprocess.run([_tool("dpkg"), "--purge", PKG], capture_output=True, timeout=120,
                           env=dict(harness.plain_env(), DEBIAN_FRONTEND="noninteractive"))

    def sh(self, argv, env=None, timeout=120, ok=True):
        p = harness.run(argv, env if env is not None else harness.plain_env(), timeout=timeout)
        if ok:
            self.assertEqual(p.returncode, 0, f"{argv} exited {p.returncode}:\n"
                             f"{p.stdout.decode(errors='replace')[-2000:]}\n"
                             f"{p.stderr.decode(errors='replace')[-2000:]}")
        return p

    def guarded_env(self):
        """The environment of the installed CLI: no preload from the build tree, this test's
        log and state file."""
        return harness.plain_env(CURLGUARD_LOG=str(self.log), CURLGUARD_STATE=str(self.state),
                                 XDG_STATE_HOME=str(self.tmp / "xdg"),
                                 CURLGUARD_BACKOFF_BASE_MS="50",
                                 PATH="/usr/sbin:/usr/bin:/sbin:/bin")

    def build_deb(self):
        env = harness.plain_env()
        for name in ("DESTDIR", "PREFIX", "MAKEFLAGS", "MFLAGS"):
            env.pop(name, None)
        p = self.sh([_tool("make"), "-s", "--no-print-directory", "-C", harness.ROOT, "deb",
                     f"BUILD={harness.BUILD}"], env, timeout=300)
        deb = p.stdout.decode().strip().splitlines()[-1]
        self.assertTrue(deb.endswith(".deb") and os.path.isfile(deb),
                        f"make deb did not name a package file: {p.stdout!r}")
        return deb

    def check_fields(self, deb):
        f = _fields(deb)
        version = (harness.ROOT / "VERSION").read_text().strip()
        arch = self.sh([_tool("dpkg"), "--print-architecture"]).stdout.decode().strip()
        self.assertEqual(f.get("Package"), PKG, f)
        self.assertTrue(f.get("Version", "").startswith(version + "-"),
                        f"package version {f.get('Version')!r} is not VERSION {version}-N")
        self.assertEqual(os.path.basename(deb), f"{PKG}_{f['Version']}_{arch}.deb")
        self.assertEqual(f.get("Architecture"), arch, f)
        for name in ("Maintainer", "Section", "Priority", "Description", "Installed-Size"):
            self.assertTrue(f.get(name), f"control file has no {name}: {f}")
        self.assertIn("\n", f["Description"], "Description has no extended description")
        self.assertRegex(f["Maintainer"], r"^[^<>]+ <[^@<>\s]+@[^@<>\s]+>$")
        deps = [d.strip().split()[0] for d in f.get("Depends", "").split(",") if d.strip()]
        self.assertIn("libc6", deps, f"Depends: {f.get('Depends')}")
        self.assertIn("libcjson1", deps, f"Depends: {f.get('Depends')}")
        self.assertFalse([d for d in deps if "curl" in d],
                         f"the package must not depend on libcurl: {f.get('Depends')}")

        listing = self.sh([_tool("dpkg-deb"), "-c", deb]).stdout.decode().splitlines()
        paths = {}
        for line in listing:
            parts = line.split(None, 5)
            paths[parts[5].split(" -> ")[0].lstrip(".").rstrip("/")] = (parts[0], parts[1])
        for path in FILES:
            self.assertIn(path, paths, f"{path} not in the package:\n" + "\n".join(listing))
        self.assertEqual({owner for _, owner in paths.values()}, {"root/root"}, listing)
        self.assertEqual(paths[BIN][0], "-rwxr-xr-x")
        self.assertEqual(paths[LIB][0], "-rw-r--r--")

    def lint(self, deb):
        lintian = _tool("lintian")
        if not lintian:
            return "lintian not installed: not run"
        # lintian (2.116) leaves two mldbm-elf-* directories in $TMPDIR each run: the
        # test's own directory, removed with it, takes them.
        tmp = self.tmp / "lintian-tmp"
        tmp.mkdir(exist_ok=True)
        p = self.sh([lintian, "--tag-display-limit", "0", deb],
                    dict(harness.plain_env(), TMPDIR=str(tmp)), timeout=180, ok=False)
        out = p.stdout.decode(errors="replace")
        errors = [line for line in out.splitlines() if line.startswith("E:")]
        self.assertEqual(errors, [], f"lintian errors:\n{out}")
        self.assertEqual(p.returncode, 0, f"lintian failed:\n{out}\n"
                         f"{p.stderr.decode(errors='replace')[-2000:]}")
        return out

    def test_build_install_guard_remove(self):
        deb = self.build_deb()
        self.check_fields(deb)
        self.lint(deb)

        self.addCleanup(self._purge)       # from here on the package may be on the machine
        env = dict(harness.plain_env(), DEBIAN_FRONTEND="noninteractive")
        self.sh([_tool("apt-get"), "install", "-y", "-q", "--no-install-recommends",
                 "-o", "DPkg::Lock::Timeout=60", os.path.abspath(deb)], env, timeout=180)
        self.assertEqual(_status(), "install ok installed")
        listed = self.sh([_tool("dpkg"), "-L", PKG]).stdout.decode().splitlines()
        for path in FILES:
            self.assertIn(path, listed)
            self.assertTrue(os.path.isfile(path), f"{path} not installed")
        installed = [p for p in listed if os.path.isfile(p) or os.path.islink(p)]

        # The installed CLI, from its installed path: its version, and the library it preloads.
        version = (harness.ROOT / "VERSION").read_text().strip()
        out = self.sh([BIN, "version"], self.guarded_env()).stdout.decode().strip()
        self.assertEqual(out, f"curlguard {version}")
        out = self.sh([BIN, "run", "--", "/bin/sh", "-c", 'printf "%s|%s" "$LD_PRELOAD" '
                       '"$CURLGUARD"'], self.guarded_env()).stdout.decode()
        preload, switch = out.split("|")
        # run.c finds it as ../lib/curlguard/ from /usr/bin: /usr/bin/../lib/curlguard/...
        self.assertEqual(os.path.realpath(preload.split(":")[0]), LIB,
                         f"installed curlguard preloaded {preload!r}")
        self.assertEqual(switch, "1")

        # A guarded curl call: the 503 is retried, a record per attempt, the cost priced with
        # the installed table (the library finds /usr/share/curlguard/prices.json itself).
        url = self.mock.url("/v1/chat/completions", plan="503:ra=0,200")
        body = json.dumps({"model": "gpt-4o-mini",
                           "messages": [{"role": "user", "content": "Hello from a package."}]})
        p = self.sh([BIN, "run", "--", "curl", "-sS", "-H", "Content-Type: application/json",
                     "--data-binary", body, url], self.guarded_env(), timeout=60)
        self.assertIn("choices", json.loads(p.stdout), p.stdout)
        self.assertEqual(len(self.mock.wait_entries(url=url, count=2)), 2)
        recs = self.records()
        self.assertEqual([(r["attempt"], r["status"], r["final"]) for r in recs],
                         [(1, 503, False), (2, 200, True)], recs)
        for r in recs:
            self.assertRecordKeys(r)
        self.assertEqual(recs[1]["model"], "gpt-4o-mini")
        self.assertIsNotNone(recs[1]["cost_usd"], "no cost: the installed price table was "
                             f"not found by {LIB}: {recs[1]}")
        self.assertGreater(recs[1]["cost_usd"], 0)

        # What a systemd drop-in does (README): the installed library preloaded by path, no
        # curlguard run; the same log gets the call's record, priced.
        url = self.mock.url("/v1/chat/completions", plan="200")
        env = self.guarded_env()
        env.update(LD_PRELOAD=LIB, CURLGUARD="1")
        p = self.sh(["/usr/bin/curl", "-sS", "-H", "Content-Type: application/json",
                     "--data-binary", body, url], env, timeout=60)
        self.assertEqual(len(self.mock.wait_entries(url=url, count=1)), 1)
        recs = self.records()
        self.assertEqual(len(recs), 3, recs)
        self.assertEqual((recs[2]["attempt"], recs[2]["status"], recs[2]["final"]), (1, 200, True))
        self.assertGreater(recs[2]["cost_usd"] or 0, 0, recs[2])

        # The installed `curlguard stat` reads the same state file: the mock's pool is there.
        st = json.loads(self.sh([BIN, "stat", "--json"], self.guarded_env()).stdout)
        pools = {p["name"]: p for p in st["pools"]}
        pool = harness.mock_pool()
        self.assertIn(pool, pools, st)
        self.assertGreaterEqual(pools[pool]["admitted"], 3, pools[pool])
        text = self.sh([BIN, "stat"], self.guarded_env()).stdout.decode()
        self.assertIn(pool, text)

        # Removal leaves nothing of the package.
        self.sh([_tool("dpkg"), "-r", PKG], env, timeout=120)
        self.assertIn(_status(), ("", "unknown ok not-installed", "deinstall ok not-installed"))
        left = [p for p in LEFTOVERS + installed if os.path.lexists(p)]
        self.assertEqual(left, [], f"dpkg -r left {left}")


if __name__ == "__main__":
    unittest.main()
