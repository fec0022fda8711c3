"""The man pages curlguard(1) and libcurlguard(7) (issue 17), built by `make` from doc/*.scd.

- both render with the real `man -l` (man-db, groff) without a warning, and carry their
  key sections;
- every CURLGUARD_* variable that src/ or cli/ reads (string literals: config.c's table,
  getenv calls, the CLI's own), every configuration-file key of config.c's tables, every
  record key record.c writes and every outcome classify.c names is in libcurlguard(7),
  and so is every variable of README.md; so a variable, key or field added without its
  documentation fails here;
- every command cli/main.c dispatches has its section in curlguard(1), and so have the
  commands of SPEC section 6;
- `make install DESTDIR=D PREFIX=/usr` puts both pages under D/usr/share/man/man{1,7} and
  `make uninstall` with the same arguments removes them.
"""

import pathlib
import re
import shutil
import subprocess
import tempfile
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

ROOT = pathlib.Path(harness.ROOT)
BUILD = pathlib.Path(harness.BUILD)
PAGE1 = BUILD / "curlguard.1"
PAGE7 = BUILD / "libcurlguard.7"

# SPEC section 6: the commands the contract names (beyond what main.c dispatches today).
SPEC_COMMANDS = ["run", "plan", "stat", "report", "reset", "exporter", "prices check"]
SPEC_FORMS = ["stat --prometheus", "exporter --listen", "report --html", "prices check"]


def _read(rel):
    return (ROOT / rel).read_text(encoding="utf-8")


def _sources(*globs):
    for g in globs:
        for path in sorted(ROOT.glob(g)):
            yield path, path.read_text(encoding="utf-8")


def code_variables():
    """Every "CURLGUARD..." string literal of src/ and cli/: the variables the code reads
    (config.c's table, getenv, the CLI's own lookups)."""
    names = set()
    for _, text in _sources("src/*.c", "src/*.h", "cli/*.c", "cli/*.h"):
        names.update(re.findall(r'"(CURLGUARD(?:_[A-Z0-9]+)*)"', text))
    return names


def config_table():
    """config.c's table: (variable, config-file key) pairs."""
    return re.findall(r'\{"(CURLGUARD_[A-Z0-9_]+)",\s*"([a-z0-9_]+)"', _read("src/config.c"))


def config_defaults():
    """{variable: default as the page writes it} for the table's variables whose default
    cg__defaults sets to a number: numbers as such, switches as on/off, the breaker's open
    mode as wait/fail (strings and other enums are checked by eye)."""
    text = _read("src/config.c")
    fields = re.findall(r'\{"(CURLGUARD_[A-Z0-9_]+)",\s*"[a-z0-9_]+",\s*CG_T_(\w+),\s*'
                        r'CG_OFF\(([a-z_.]+)\)', text)
    body = text[text.index("static void cg__defaults("):]
    body = body[:body.index("\n}\n")]
    values = dict(re.findall(r"c->([a-z_.]+) = (-?[0-9.]+);", body))
    words_of = {"SWITCH": {"1": "on", "0": "off"}, "OPENMODE": {"1": "wait", "0": "fail"}}
    out = {}
    for env, kind, field in fields:
        if field in values:
            out[env] = words_of.get(kind, {}).get(values[field], values[field])
    return out


def env_entries(text):
    """{VARIABLE: its paragraph} of a rendered ENVIRONMENT section: a term line (7 blanks,
    then the name) and the lines indented deeper under it."""
    out, name = {}, None
    for line in text.splitlines():
        m = re.match(r"^       (CURLGUARD[A-Z0-9_]*)\s*$", line)
        if m:
            name = m.group(1)
            out[name] = []
        elif name and (line.startswith("           ") or not line.strip()):
            out[name].append(line)
        else:
            name = None
    return {k: words("\n".join(v)) for k, v in out.items()}


def config_sub_keys():
    """The keys of a pool and of its breaker / retry_budget objects, as config.c reads them."""
    text = _read("src/config.c")
    keys = set(re.findall(r'\{"([a-z_]+)", CG_(?:BRK|BUD)\(', text))          # breaker, budget
    keys.update(re.findall(r'\{"([a-z_]+)", 1e\d+\}', text))                # rpm, burst, ...
    pool = text[text.index("static int cg__parse_pool("):]
    pool = pool[:pool.index("\n}\n")]
    keys.update(re.findall(r'strcmp\(k, "([a-z_]+)"\)', pool))            # name, hosts, ...
    return keys


def record_keys():
    """The keys src/record.c writes, in order: its table cg__fields, one entry a line
    (`CG__FIELD_KEY("ts", ts_ms, ...)` or `CG__FIELD(pid, ...)`)."""
    return [a or b for a, b in re.findall(
        r'^\s+CG__FIELD(?:_KEY\("([a-z_]+)"|\(([a-z_]+)),', _read("src/record.c"), re.M)]


def outcome_names():
    return set(re.findall(r'"([a-z_0-9]+)"', _read("src/classify.c"))) - {"http"}


def dispatched_commands():
    """The commands cli/main.c dispatches: strcmp(argv[1], "NAME") that is not an option."""
    names = re.findall(r'strcmp\(argv\[1\], "([^"]+)"\)', _read("cli/main.c"))
    return sorted({n for n in names if not n.startswith("-")})


def readme_variables():
    return set(re.findall(r"\b(CURLGUARD(?:_[A-Z0-9]+)*)\b", _read("README.md"))) - {"CURLGUARD_"}


def man_env():
    env = harness.plain_env()
    env.update({"MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "80", "LC_ALL": "C.UTF-8",
                "LANG": "C.UTF-8"})
    env.pop("MANOPT", None)
    env.pop("MANROFFOPT", None)
    return env


def render(page):
    """`man -l PAGE` as a reader gets it (formatting stripped), and its stderr."""
    man = shutil.which("man", path="/usr/bin:/bin")
    if not man:
        raise AssertionError("man is not installed (scripts/install-deps installs man-db)")
    p = subprocess.run([man, "--warnings", "-l", str(page)], env=man_env(),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    text = p.stdout.decode("utf-8", "replace")
    text = re.sub(r".\x08", "", text)                 # overstrike bold and underline
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)        # SGR, should a pager setting add it
    return p.returncode, text, p.stderr.decode("utf-8", "replace")


def words(text):
    """The page's text with hyphenated line breaks joined and all white space one blank."""
    text = re.sub(r"[\u2010-]\n\s*", "", text)
    return " ".join(text.split())


def sections(text):
    """{heading: body} of a rendered page (headings are the lines at column 0)."""
    out, name = {}, None
    for line in text.splitlines():
        if line and not line[0].isspace() and line.strip() == line and line.upper() == line:
            name = line.strip()
            out[name] = []
        elif name:
            out[name].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


class PagesBuilt(unittest.TestCase):
    def setUp(self):
        for page in (PAGE1, PAGE7):
            self.assertTrue(page.is_file(), f"{page} is missing: `make` builds it from "
                            f"doc/{page.name}.scd (scdoc, from scripts/install-deps)")


class RenderTest(PagesBuilt):
    def check_page(self, page, want_sections, name_line):
        rc, text, err = render(page)
        self.assertEqual(rc, 0, f"man -l {page} failed: {err}")
        self.assertEqual(err, "", f"man -l {page} warned on stderr:\n{err}")
        self.assertGreater(len(text.splitlines()), 50, f"{page} rendered nearly empty: {text!r}")
        got = sections(text)
        for s in want_sections:
            self.assertIn(s, got, f"{page.name}: no section {s}; sections: {list(got)}")
            self.assertTrue(got[s].strip(), f"{page.name}: section {s} is empty")
        self.assertIn(name_line, words(got["NAME"]))
        # scdoc markup that did not turn into formatting shows up as stray characters.
        for stray in ("\\fB", "\\fI", "\\fR", "**", "\\*"):
            self.assertNotIn(stray, text, f"{page.name}: stray {stray!r} in the rendered text")
        return text, got

    def test_curlguard_1_renders(self):
        text, got = self.check_page(PAGE1, ["NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS",
                                            "OPTIONS", "EXIT STATUS", "ENVIRONMENT",
                                            "EXAMPLES", "FILES", "SEE ALSO"], "curlguard - ")
        self.assertIn("libcurlguard(7)", words(got["SEE ALSO"]))

    def test_libcurlguard_7_renders(self):
        text, got = self.check_page(PAGE7, ["NAME", "SYNOPSIS", "DESCRIPTION", "ENVIRONMENT",
                                            "CONFIGURATION FILE", "POOLS", "OUTCOMES",
                                            "DECISIONS", "BACKOFF AND HINTS",
                                            "CIRCUIT BREAKER AND RETRY BUDGET", "USAGE RECORD",
                                            "PRICE TABLE", "STATE FILE", "FILES",
                                            "LIMITATIONS", "SEE ALSO"], "libcurlguard - ")
        self.assertIn("curlguard(1)", words(got["SEE ALSO"]))


class CompletenessTest(PagesBuilt):
    def page(self, page):
        rc, text, err = render(page)
        self.assertEqual(rc, 0, err)
        return text

    def assert_all_in(self, names, text, where, what):
        missing = sorted(n for n in names if n not in text)
        self.assertEqual(missing, [], f"{what} missing from {where}")

    def test_every_variable_the_code_reads_is_documented(self):
        names = code_variables()
        # The extraction must see the table: a refactor that hides it fails here, not
        # silently later.
        table = config_table()
        self.assertGreaterEqual(len(table), 35, f"config.c's table not found: {table}")
        self.assertTrue({"CURLGUARD", "CURLGUARD_LOG", "CURLGUARD_LIB"} <= names, names)
        self.assertTrue({env for env, _ in table} <= names)
        text = words(self.page(PAGE7))
        self.assert_all_in(names, text, "libcurlguard(7)",
                           "variables read by src/ or cli/ (add them to doc/libcurlguard.7.scd)")

    def test_numeric_defaults_match_the_code(self):
        defaults = config_defaults()
        self.assertGreaterEqual(len(defaults), 25, f"cg__defaults not found: {defaults}")
        entries = env_entries(sections(self.page(PAGE7))["ENVIRONMENT"])
        wrong = {}
        for env, value in sorted(defaults.items()):
            self.assertIn(env, entries, f"libcurlguard(7) has no ENVIRONMENT entry for {env}")
            m = re.search(r"Default: (-?[0-9][0-9.]*?|[a-z]+)\.?(?:\s|$)", entries[env])
            got = m.group(1) if m else None
            same = got == value or (got is not None and got[0].isdigit() and
                                    value[0].isdigit() and float(got) == float(value))
            if not same:
                wrong[env] = (got, value)
        self.assertEqual(wrong, {}, "libcurlguard(7) defaults (page, src/config.c) differ")

    def test_every_readme_variable_is_documented(self):
        names = readme_variables()
        self.assertGreaterEqual(len(names), 40, names)
        self.assert_all_in(names, words(self.page(PAGE7)), "libcurlguard(7)",
                           "variables of README.md")

    def test_every_config_key_is_documented(self):
        got = sections(self.page(PAGE7))
        conf = words(got["CONFIGURATION FILE"])
        keys = {key for _, key in config_table()} | {"pools"}
        self.assert_all_in(keys, conf, "libcurlguard(7) CONFIGURATION FILE",
                           "config-file keys of config.c's table")
        sub = config_sub_keys()
        self.assertTrue({"name", "hosts", "rpm", "burst", "fallback_url", "ratio",
                         "consecutive_failures"} <= sub, sub)
        self.assert_all_in(sub, conf, "libcurlguard(7) CONFIGURATION FILE",
                           "pool, breaker and retry_budget keys of config.c")

    def test_every_record_key_and_outcome_is_documented(self):
        got = sections(self.page(PAGE7))
        keys = record_keys()
        self.assertEqual(keys[:len(harness.REQUIRED_RECORD_KEYS)], harness.REQUIRED_RECORD_KEYS)
        self.assert_all_in(keys, words(got["USAGE RECORD"]), "libcurlguard(7) USAGE RECORD",
                           "record keys that src/record.c writes")
        outcomes = outcome_names()
        self.assertTrue({"ok", "dns_error", "stream_error", "circuit_open"} <= outcomes)
        table = words(got["OUTCOMES"])
        self.assert_all_in(outcomes | {"http_429", "http_500", "http_503"}, table,
                           "libcurlguard(7) OUTCOMES", "outcomes of src/classify.c")
        self.assert_all_in(["done", "retry", "give_up"], words(got["DECISIONS"]),
                           "libcurlguard(7) DECISIONS", "decisions")

    def test_every_command_is_documented(self):
        commands = dispatched_commands()
        self.assertTrue({"run", "plan", "stat", "report", "reset"} <= set(commands), commands)
        text = self.page(PAGE1)
        got = sections(text)
        body = got["COMMANDS"]
        # Subsection headings: the lines indented by exactly three blanks.
        heads = [h.strip() for h in body.splitlines() if re.match(r"^   \S", h)]
        covered = set()
        for h in heads:
            for part in h.split(","):
                covered.add(part.strip())
                covered.add(part.split()[0])        # "prices check" is the command prices
        for cmd in sorted(set(commands) | set(SPEC_COMMANDS)):
            self.assertIn(cmd, covered, f"curlguard(1) has no COMMANDS subsection for {cmd!r} "
                          f"(subsections: {heads})")
            self.assertIn(f"curlguard {cmd}", words(got["SYNOPSIS"]),
                          f"curlguard(1) SYNOPSIS lacks {cmd!r}")
        flat = words(body)
        for form in SPEC_FORMS:
            cmd, _, opt = form.partition(" ")
            self.assertRegex(flat, rf"curlguard {re.escape(cmd)} .*{re.escape(opt)}",
                             f"curlguard(1) does not describe {form!r}")


class InstallTest(PagesBuilt):
    def make(self, *args):
        make = shutil.which("make", path="/usr/bin:/bin")
        if not make:
            raise AssertionError("make is not installed")
        env = harness.plain_env()
        for v in ("DESTDIR", "MAKEFLAGS", "MFLAGS", "PREFIX", "MANDIR"):
            env.pop(v, None)
        argv = [make, "-s", "-C", str(ROOT), *args, f"BUILD={BUILD}"]
        if harness.SAN_PRELOAD:
            argv.append("SAN=1")
        p = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=300)
        self.assertEqual(p.returncode, 0, f"make {' '.join(args)} failed:\n"
                         f"{p.stdout.decode()}\n{p.stderr.decode()}")

    def test_install_and_uninstall_the_pages(self):
        dest = pathlib.Path(tempfile.mkdtemp(prefix="cg-man-install-"))
        self.addCleanup(shutil.rmtree, dest, True)
        self.make("install", f"DESTDIR={dest}", "PREFIX=/usr")
        man1 = dest / "usr/share/man/man1/curlguard.1"
        man7 = dest / "usr/share/man/man7/libcurlguard.7"
        for got, built in ((man1, PAGE1), (man7, PAGE7)):
            self.assertTrue(got.is_file(), f"make install did not put {got}")
            self.assertEqual(got.read_bytes(), built.read_bytes(), f"{got} differs from {built}")
            self.assertEqual(got.stat().st_mode & 0o777, 0o644, f"{got} mode")
        self.assertTrue((dest / "usr/bin/curlguard").is_file())
        # man finds the installed pages by name through the tree's MANPATH.
        env = man_env()
        env["MANPATH"] = str(dest / "usr/share/man")
        p = subprocess.run(["man", "--warnings", "7", "libcurlguard"], env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, b"")
        self.assertIn("CURLGUARD_STATE", p.stdout.decode("utf-8", "replace"))

        self.make("uninstall", f"DESTDIR={dest}", "PREFIX=/usr")
        for gone in (man1, man7, dest / "usr/bin/curlguard",
                     dest / "usr/lib/curlguard/libcurlguard.so"):
            self.assertFalse(gone.exists(), f"make uninstall left {gone}")


if __name__ == "__main__":
    unittest.main()
