"""`curlguard report --html FILE [LOG...]` (SPEC section 6; README "The HTML report").

A log from real guarded calls (Debian's curl under the interposer) against the mock
provider, two pools and four models, with a mix of outcomes: 200, 429 then a retry, a 503
given up after its attempts, a possibly billed 500 (a POST without a key: not retried), and
a model whose name holds `<script>` and quotes.  Then:

1. the page is well-formed (html.parser: every tag closed in order, nothing but void
   elements left open), self-contained (no script, no src, no href but "#..." anchors, no
   CSS url() or @import);
2. its tables carry the pool and model names and figures equal to `report --json`'s
   (exactly, through the data-v attributes; p90, which --json lacks, against the nearest
   rank of the log's durations within the histogram's 0.4 %), and its charts add up to the
   same totals (outcomes, retries, tokens, cost);
3. the hostile model name comes out escaped in text, attributes and SVG;
4. usage errors exit 2, an unwritable FILE exits 1 with one line, and no page is left
   behind when a LOG cannot be read;
5. headless Chromium renders the page: a PNG of the asked size that is not blank (skipped
   when Debian's chromium is not installed).

The guarded program is /usr/bin/curl, or python3 + pycurl under `make check-asan`.
"""

import html.parser
import json
import math
import os
import shutil
import stat
import struct
import subprocess
import tempfile
import time
import unittest
import zlib

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
EVIL_MODEL = 'evil<script>alert("x")</script>\'&amp;'
EVIL_ESCAPED = "evil&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39;&amp;amp;"
MAIN_POOL = "chat-main"

ENV = {"CURLGUARD_BACKOFF_BASE_MS": "20", "CURLGUARD_BACKOFF_CAP_MS": "50",
       "CURLGUARD_MAX_ATTEMPTS": "3", "CURLGUARD_ADAPTIVE": "off", "CURLGUARD_BREAKER": "off"}

# A guarded host under ASan (the curl tool deadlocks with a preloaded ASan runtime, see
# harness.py): python3 + pycurl, IPv4 only like `curl -4`.  argv: URL BODY [HEADER...]
PYCURL_HOST = """
import sys, pycurl
c = pycurl.Curl()
c.setopt(pycurl.URL, sys.argv[1])
c.setopt(pycurl.IPRESOLVE, pycurl.IPRESOLVE_V4)
c.setopt(pycurl.POSTFIELDS, sys.argv[2])
c.setopt(pycurl.HTTPHEADER, ["Content-Type: application/json"] + sys.argv[3:])
c.setopt(pycurl.WRITEFUNCTION, lambda b: None)
try:
    c.perform()
except pycurl.error:
    pass
"""

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


def chat(model="gpt-4o-mini", text="Say hello."):
    return json.dumps({"model": model, "messages": [{"role": "user", "content": text}]})


def anthropic(text="Hello, Claude."):
    return json.dumps({"model": "claude-sonnet-4-20250514", "max_tokens": 64,
                       "messages": [{"role": "user", "content": text}]})


# (host, path, plan, body): host "127.0.0.1" is the configured pool, "localhost" a pool of
# its own (named after host and port).
CALLS = [
    ("127.0.0.1", CHAT, "200", chat()),
    ("127.0.0.1", CHAT, "200", chat(text="Hello again.")),
    ("127.0.0.1", CHAT, "429:ra=0,200", chat(text="Rate limited.")),
    ("127.0.0.1", CHAT, "503:ra=0", chat(text="Always busy.")),           # 3 x 503, given up
    ("127.0.0.1", CHAT, "500,200", chat(model="gpt-4o", text="Server error.")),  # billed?
    ("127.0.0.1", CHAT, "200", chat(model="gpt-4o", text="Fine.")),
    ("localhost", MESSAGES, "200", anthropic()),
    ("localhost", MESSAGES, "529,200", anthropic("Overloaded.")),
    ("localhost", CHAT, "200", chat(model=EVIL_MODEL, text="Escape me.")),
]


class PageParser(html.parser.HTMLParser):
    """Tag balance, external references, and the figures of the page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.refs = [], [], []
        self.tags = set()
        self.widths = set()        # data-width of the charts over time (one for the page)
        self.cells = {}            # (group, key) -> list of (data-v, text)
        self.names = {}            # group -> [pool text, model text]
        self.marks = []            # (chart, group, attrs) of chart marks with data-v
        self.chart = None          # (kind, group) of the open <svg>
        self.row = None            # data-group of the open groups-table row
        self.table = None
        self.cell = None           # (key, data-v) of the open <td>, or "name"
        self.text = []
        self.style = []
        self.in_style = False

    def handle_starttag(self, tag, attrs):
        self._start(tag, attrs)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self._start(tag, attrs)
        self._end(tag)

    def _start(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        for name, value in attrs:
            if name in ("src", "srcset", "xlink:href", "action", "formaction", "poster",
                        "background") or name.startswith("on"):
                self.refs.append((tag, name, value))
            if name == "href" and not (value or "").startswith("#"):
                self.refs.append((tag, name, value))
        if tag == "style":
            self.in_style = True
        if tag == "table":
            self.table = a.get("class")
        if tag == "svg":
            self.chart = (a.get("data-chart"), a.get("data-group"))
            if "data-width" in a:
                self.widths.add(int(a["data-width"]))
        elif self.chart and "data-v" in a:
            self.marks.append((self.chart[0], self.chart[1], a))
        if tag == "tr" and self.table == "groups":
            self.row = a.get("data-group")
            if self.row is not None:
                self.names[self.row] = []
        if tag == "td" and self.row is not None and self.table == "groups":
            self.cell = (a["data-k"], a["data-v"]) if "data-k" in a else "name"
            self.text = []

    def handle_endtag(self, tag):
        self._end(tag)
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            if tag in self.stack:
                while self.stack.pop() != tag:
                    pass
            return
        self.stack.pop()

    def _end(self, tag):
        if tag == "style":
            self.in_style = False
        if tag == "svg":
            self.chart = None
        if tag == "table":
            self.table = None
        if tag == "tr":
            self.row = None
        if tag == "td" and self.cell is not None:
            text = "".join(self.text)
            if self.cell == "name":
                self.names[self.row].append(text)
            else:
                self.cells.setdefault((self.row, self.cell[0]), []).append((self.cell[1], text))
            self.cell = None

    def handle_data(self, data):
        if self.in_style:
            self.style.append(data)
        if self.cell is not None:
            self.text.append(data)


def png_info(path, rows):
    """(width, height, distinct pixel values in the first `rows` rows) of an 8-bit RGB or
    RGBA PNG, decoded with the standard library (zlib, the five scanline filters)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise AssertionError(f"{path}: not a PNG")
    pos, idat, width = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    if width is None or depth != 8 or colour not in (2, 6) or interlace:
        raise AssertionError(f"{path}: unexpected PNG format (depth {depth}, colour {colour})")
    bpp = 3 if colour == 2 else 4
    stride = width * bpp
    raw = zlib.decompressobj().decompress(b"".join(idat), (stride + 1) * min(rows, height))
    prev = bytearray(stride)
    pixels = set()
    for y in range(min(rows, height)):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if ftype == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif ftype == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif ftype == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        elif ftype != 0:
            raise AssertionError(f"{path}: bad filter type {ftype} in row {y}")
        pixels.update(bytes(line[i:i + bpp]) for i in range(0, stride, bpp))
        prev = line
    return width, height, pixels


class ReportHtmlTest(harness.GuardTestCase):
    """One run of guarded calls (a few seconds), shared by the tests of this class."""

    run_dir = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_curl_and_cli()
        cls.run_dir = tempfile.mkdtemp(prefix="cg-report-html-")
        cls.run_log = os.path.join(cls.run_dir, "usage.jsonl")
        config = os.path.join(cls.run_dir, "config.json")
        with open(config, "w") as f:
            json.dump({"pools": [{"name": MAIN_POOL, "hosts": ["127.0.0.1"]}]}, f)
        mock = harness.provider()
        for i, (host, path, plan, body) in enumerate(CALLS):
            url = mock.url(path, plan=plan).replace("127.0.0.1", host, 1)
            env = harness.guard_env(cls.run_log, ENV, CURLGUARD_CONFIG=config,
                                    CURLGUARD_STATE=os.path.join(cls.run_dir, "state"))
            headers = ["x-api-key: test", "anthropic-version: 2023-06-01"] \
                if path == MESSAGES else []
            if harness.SAN_PRELOAD:
                argv = [harness.PYTHON, "-c", PYCURL_HOST, url, body] + headers
            else:
                argv = [harness.CURL, "-4", "-sS", "-o", "/dev/null", "--max-time", "20",
                        "-H", "Content-Type: application/json", "--data-binary", body, url]
                for h in headers:
                    argv += ["-H", h]
            harness.run(argv, env, timeout=60)
        cls.records = harness.read_records(cls.run_log)
        cls.page = os.path.join(cls.run_dir, "report.html")
        p = harness.run([harness.CLI, "report", "--html", cls.page, cls.run_log], None, timeout=60)
        cls.html_rc, cls.html_out, cls.html_err = p.returncode, p.stdout, p.stderr
        p = harness.run([harness.CLI, "report", "--json", cls.run_log], None, timeout=60)
        cls.json = json.loads(p.stdout) if p.returncode == 0 else None

    @classmethod
    def tearDownClass(cls):
        if cls.run_dir and not harness.KEEP_TMP:
            shutil.rmtree(cls.run_dir, ignore_errors=True)
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.assertEqual(self.html_rc, 0, self.html_err.decode(errors="replace"))
        self.assertEqual(self.html_out, b"", "--html without --json prints nothing")
        self.assertIsNotNone(self.json, "report --json failed")
        with open(self.page, encoding="utf-8") as f:
            self.raw = f.read()
        self.parsed = PageParser()
        self.parsed.feed(self.raw)
        self.parsed.close()

    def test_the_log_has_the_mix(self):
        outcomes = {(r["outcome"], r["decision"]) for r in self.records}
        self.assertIn(("ok", "done"), outcomes)
        self.assertIn(("http_429", "retry"), outcomes)
        self.assertIn(("http_503", "give_up"), outcomes)
        self.assertTrue(any(r["outcome"] == "http_500" and r["possibly_billed"] and r["final"]
                            for r in self.records), "no possibly billed final 500")
        self.assertIn(EVIL_MODEL, {r["model"] for r in self.records})
        self.assertEqual(sum(r["final"] for r in self.records), len(CALLS))

    def test_page_is_well_formed_and_self_contained(self):
        p = self.parsed
        self.assertTrue(self.raw.startswith("<!DOCTYPE html>"))
        self.assertEqual(p.errors, [])
        self.assertEqual(p.stack, [], "tags left open at the end")
        self.assertEqual(p.refs, [], "external references or handlers")
        for tag in ("script", "link", "img", "iframe", "object", "embed", "image", "use"):
            self.assertNotIn(tag, p.tags)
        css = "".join(p.style).lower()
        self.assertTrue(css, "no inline CSS")
        self.assertNotIn("url(", css)
        self.assertNotIn("@import", css)
        self.assertIn("svg", p.tags)
        self.assertNotIn("<script", self.raw.lower())

    def test_names_and_figures_equal_report_json(self):
        p, doc = self.parsed, self.json
        groups = doc["groups"]
        self.assertEqual(len(groups), 4)     # 2 pools x (gpt-4o-mini, gpt-4o | claude, evil)
        self.assertIn(MAIN_POOL, {g["pool"] for g in groups})
        self.assertIn(harness.mock_pool().replace("127.0.0.1", "localhost"),
                      {g["pool"] for g in groups})
        checked = 0
        for gi, g in enumerate(groups):
            self.assertEqual(p.names[str(gi)], [g["pool"], g["model"]])
            checked += self.assert_cells(str(gi), g, [r for r in self.records
                                                      if self.in_group(r, g)])
        checked += self.assert_cells("total", doc["totals"], self.records)
        self.assertGreaterEqual(checked, 5 * 13)     # 5 rows of 13 figures

    @staticmethod
    def in_group(r, g):
        return r["pool"] == g["pool"] and r["model"] in g["models"]

    def assert_cells(self, group, want, records):
        n = 0
        for (g, key), cells in self.parsed.cells.items():
            if g != group:
                continue
            for value, text in cells:
                got = None if value == "" else float(value)
                if key == "latency_ms.p90":
                    durations = sorted(r["duration_ms"] for r in records)
                    rank = durations[max(0, math.ceil(0.9 * len(durations)) - 1)]
                    self.assertLessEqual(abs(got - rank), rank / 256 + 1e-9, (group, key))
                else:
                    node = want
                    for part in key.split("."):
                        node = node[part]
                    self.assertEqual(got, node, (group, key, text))
                if got is not None and key in ("calls", "attempts", "retries"):
                    self.assertEqual(text, str(int(got)))
                n += 1
        return n

    def test_charts_add_up_to_the_totals(self):
        doc = self.json
        wanted = {"total": doc["totals"]}
        wanted.update((str(i), g) for i, g in enumerate(doc["groups"]))
        for group, want in wanted.items():
            marks = [(c, a) for c, g, a in self.parsed.marks if g == group]
            outcomes = {}
            for c, a in marks:
                if c == "outcomes":
                    outcomes[a["data-outcome"]] = outcomes.get(a["data-outcome"], 0) + \
                        int(a["data-v"])
            self.assertEqual(outcomes, want["outcomes"], group)
            retry = [a for c, a in marks if c == "retry"]
            self.assertEqual(sum(int(a["data-retries"]) for a in retry), want["retries"], group)
            self.assertEqual(sum(int(a["data-attempts"]) for a in retry), want["attempts"], group)
            tokens = sum(int(a["data-v"]) for c, a in marks if c == "tokens")
            self.assertEqual(tokens, want["tokens"]["total"], group)
            cost = sum(float(a["data-v"]) for c, a in marks if c == "cost")
            if want["priced_attempts"]:
                self.assertAlmostEqual(cost, want["cost_usd"], delta=want["cost_usd"] * 1e-9)
            else:
                self.assertEqual(cost, 0)
            lat = {a["data-p"]: int(a["data-v"]) for c, a in marks if c == "latency"}
            for k in ("p50", "p95", "p99"):
                self.assertEqual(lat[k], want["latency_ms"][k], (group, k))

    def test_bars_hold_the_records_of_their_time(self):
        self.assertEqual(len(self.parsed.widths), 1, self.parsed.widths)
        width = self.parsed.widths.pop()
        self.assertIn(width, (1000, 2000, 10000))     # a run of seconds: 120 bars of 1 s fit
        want = {}
        for r in self.records:
            start = harness_ts(r["ts"]) // width * width
            want[start] = want.get(start, 0) + 1
        got = {}
        for chart, group, a in self.parsed.marks:
            if chart == "outcomes" and group == "total":
                got[int(a["data-t"])] = got.get(int(a["data-t"]), 0) + int(a["data-v"])
        self.assertEqual(got, want)

    def test_hostile_model_name_is_escaped(self):
        raw = self.raw
        self.assertIn(EVIL_ESCAPED, raw)
        self.assertNotIn("<script", raw.lower())
        self.assertNotIn('alert("x")', raw)
        # The raw name is back after parsing: in the table text and in SVG titles.
        self.assertIn([harness.mock_pool().replace("127.0.0.1", "localhost"), EVIL_MODEL],
                      list(self.parsed.names.values()))

    def test_usage_and_output_errors(self):
        log = self.run_log
        cases = [
            (["--html"], 2),
            (["--html", "", log], 2),
            (["--html", "-", "--json", log], 2),
            (["--html", str(self.tmp / "no-such-dir" / "r.html"), log], 1),
            (["--html", str(self.tmp), log], 1),                     # a directory
            (["--html", str(self.tmp / "r.html"), str(self.tmp / "missing.jsonl")], 1),
        ]
        for args, code in cases:
            p = harness.run([harness.CLI, "report"] + args, None, timeout=30)
            err = p.stderr.decode(errors="replace")
            self.assertEqual(p.returncode, code, (args, err))
            self.assertEqual(len(err.splitlines()), 1, (args, err))
            self.assertTrue(err.startswith("curlguard: report: "), (args, err))
        self.assertFalse(os.path.exists(self.tmp / "r.html"), "a page from a failed run")
        self.assertEqual([f for f in os.listdir(self.tmp) if ".tmp-" in f], [])
        # "-" is stdout; --html=FILE works too and replaces an old page.
        p = harness.run([harness.CLI, "report", "--html", "-", log], None, timeout=30)
        self.assertEqual(p.returncode, 0)
        self.assertTrue(p.stdout.startswith(b"<!DOCTYPE html>"))
        out = self.tmp / "again.html"
        out.write_text("<!DOCTYPE html>\n<p>an older page</p>\n")
        p = harness.run([harness.CLI, "report", f"--html={out}", "--json", log], None, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["totals"], self.json["totals"])
        self.assertTrue(out.read_text().startswith("<!DOCTYPE html>"))

    def test_a_page_past_the_file_size_limit_is_one_line(self):
        """Under a file size limit (`ulimit -f`) smaller than the page: one line and exit
        1, no page and no temporary file left (SPEC 6).  Before, SIGXFSZ killed the CLI
        (exit 153, no reason, FILE.tmp-XXXXXX left behind)."""
        if not shutil.which("prlimit"):
            self.skipTest("prlimit (util-linux) is not installed")
        out = self.tmp / "limited.html"
        p = harness.run(["prlimit", "--fsize=10000", "--", harness.CLI, "report", "--html",
                         str(out), self.run_log], None, timeout=30)
        err = p.stderr.decode(errors="replace")
        self.assertEqual((p.returncode, len(err.splitlines())), (1, 1), err)
        self.assertIn("File too large", err)
        self.assertFalse(out.exists())
        self.assertEqual([f for f in os.listdir(self.tmp) if ".tmp-" in f], [])

    def test_only_regular_files_are_replaced_and_never_a_log(self):
        """A device, a FIFO or a LOG of the run is never replaced by the page; a symlink is
        written through and a replaced file keeps its mode (found by a new-user review: as
        root, --html /dev/null turned the device into a regular file)."""
        log = self.tmp / "copy.jsonl"
        shutil.copy(self.run_log, log)
        before = log.read_bytes()
        fifo = self.tmp / "fifo"
        os.mkfifo(fifo)
        for args, code, what in ((["--html", "/dev/null", str(log)], 1, "not a regular file"),
                                 (["--html", str(fifo), str(log)], 1, "not a regular file"),
                                 (["--html", str(log), str(log)], 2, "is one of the logs")):
            p = harness.run([harness.CLI, "report"] + args, None, timeout=30)
            err = p.stderr.decode(errors="replace")
            self.assertEqual((p.returncode, len(err.splitlines())), (code, 1), (args, err))
            self.assertIn(what, err)
        self.assertTrue(os.path.exists("/dev/null") and not os.path.isfile("/dev/null"))
        self.assertTrue(stat.S_ISFIFO(os.stat(fifo).st_mode))
        self.assertEqual(log.read_bytes(), before, "the log was overwritten")
        target, link = self.tmp / "target.html", self.tmp / "link.html"
        target.write_text("\n<html><p>an older page</p></html>\n")
        os.chmod(target, 0o640)
        os.symlink(target.name, link)
        p = harness.run([harness.CLI, "report", "--html", str(link), str(log)], None, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.islink(link), "the symlink was replaced")
        self.assertTrue(target.read_text().startswith("<!DOCTYPE html>"))
        self.assertEqual(stat.S_IMODE(os.stat(target).st_mode), 0o640)

    def test_a_file_that_is_not_a_page_is_not_replaced(self):
        """`report --html usage.jsonl` (--html taken for a switch like --json, the log as
        its FILE; no LOG, so stdin is read) renamed the page over the log, rc 0 and not a
        word (helper-62).  Only an empty file or one that starts with '<' (a page) is
        replaced now; anything else is one line, exit 1, and the file as it was."""
        log = self.tmp / "usage.jsonl"
        shutil.copy(self.run_log, log)
        before = log.read_bytes()
        for args in (["--html", str(log)], ["--html", str(log), self.run_log],
                     [f"--html={log}", "-"]):
            p = harness.run([harness.CLI, "report"] + args, None, timeout=30)
            err = p.stderr.decode(errors="replace")
            self.assertEqual((p.returncode, len(err.splitlines())), (1, 1), (args, err))
            self.assertIn("is not an HTML page", err)
            self.assertEqual(log.read_bytes(), before, "the log was replaced")
        self.assertEqual([f for f in os.listdir(self.tmp) if ".tmp-" in f], [])
        notes = self.tmp / "notes.txt"
        notes.write_text("plain text\n")
        p = harness.run([harness.CLI, "report", "--html", str(notes), self.run_log], None,
                        timeout=30)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(notes.read_text(), "plain text\n")
        for name, text in (("empty.html", ""), ("bom.html", "\ufeff <!doctype html><p>x")):
            out = self.tmp / name
            out.write_text(text, encoding="utf-8")
            p = harness.run([harness.CLI, "report", "--html", str(out), self.run_log], None,
                            timeout=30)
            self.assertEqual(p.returncode, 0, (name, p.stderr))
            self.assertTrue(out.read_text().startswith("<!DOCTYPE html>"), name)

    def test_a_report_killed_while_it_reads_leaves_no_temporary_page(self):
        """SIGTERM, SIGINT or SIGHUP while the report waits on stdin: it ends by the signal
        and FILE.tmp-XXXXXX is gone (it was left behind, helper-62)."""
        import signal
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            out = self.tmp / f"killed-{sig}.html"
            proc = subprocess.Popen([str(harness.CLI), "report", "--html", str(out)],
                                    env=harness.plain_env(), stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                for _ in range(200):  # the temporary page exists once FILE is checked
                    if [f for f in os.listdir(self.tmp) if f.startswith(out.name + ".tmp-")]:
                        break
                    time.sleep(0.02)
                proc.send_signal(sig)
                self.assertEqual(proc.wait(timeout=10), -sig)
            finally:
                proc.kill()
                proc.wait()
                proc.stdin.close()
            self.assertEqual([f for f in os.listdir(self.tmp) if ".tmp-" in f], [], sig)
            self.assertFalse(out.exists())

    def test_chromium_renders_the_page(self):
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if not chromium:
            self.skipTest("Debian's chromium is not installed (scripts/install-deps)")
        png = self.tmp / "page.png"
        profile = self.tmp / "profile"
        argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1",
                f"--user-data-dir={profile}", f"--screenshot={png}", "--window-size=1280,2000",
                "file://" + self.page]
        p = harness.run(argv, harness.plain_env(), timeout=90)
        self.assertTrue(png.exists(), p.stderr.decode(errors="replace")[-2000:])
        width, height, pixels = png_info(png, rows=450)
        self.assertEqual((width, height), (1280, 2000))
        self.assertGreater(len(pixels), 16, "the screenshot is (nearly) blank")


def harness_ts(ts):
    """RFC 3339 UTC with ms ("2026-11-30T13:34:19.007Z") -> ms since the epoch."""
    import datetime
    d = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc)
    return int(round(d.timestamp() * 1000))


if __name__ == "__main__":
    unittest.main()
