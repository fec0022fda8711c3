"""The price table (SPEC section 8): the shipped table is what scripts/prices-from-litellm
makes of the committed LiteLLM excerpt, guarded calls to the mock provider cost what the
table says (computed here from the committed file, never typed in), CURLGUARD_PRICES may
name a file in LiteLLM's own format, and `curlguard prices check` lists the models a log
has that the table cannot price."""

import fnmatch
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

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
SHIPPED = harness.ROOT / "data" / "prices.json"
EXCERPT = harness.ROOT / "tests" / "data" / "litellm-excerpt.json"
SCRIPT = harness.ROOT / "scripts" / "prices-from-litellm"
# What the tests call: model, endpoint.  The mock answers with the model it was asked for.
CALLS = [("gpt-4o-mini", CHAT), ("gpt-4o", CHAT), ("gpt-4.1-mini", CHAT), ("o3-2025-04-16", CHAT),
         ("claude-sonnet-4-20250514", MESSAGES), ("gemini-2.5-flash", CHAT)]


def whole(model, **fields):
    """A whole usage record (every key the guard writes) of `model`: what prices check and
    report count; a JSON line with a "model" and less is malformed, not a record."""
    rec = {"ts": "2026-11-30T10:00:00.000Z", "pid": 1, "request_id": "r", "task_id": None,
           "attempt": 1, "final": True, "method": "POST", "host": "h",
           "path": CHAT, "pool": "p", "status": 200, "curl_code": 0, "outcome": "ok",
           "decision": "done", "reason": "ok", "queue_ms": 0, "backoff_ms": 0,
           "connect_ms": 1, "ttfb_ms": 2, "duration_ms": 5, "bytes_sent": 100,
           "bytes_received": 200, "model": model, "prompt_tokens": 10,
           "completion_tokens": 2, "total_tokens": 12, "cached_tokens": 0, "cost_usd": None,
           "possibly_billed": False, "body_digest": None}
    rec.update(fields)
    return rec


def own_lookup(table, model):
    """The first entry of a curlguard-format table whose glob matches (case-insensitive)."""
    for e in table["models"]:
        if fnmatch.fnmatchcase(model.lower(), e["match"].lower()):
            return e
    return None


def own_cost(e, prompt, cached, completion):
    """USD of a call, from per-million prices (price.h: cached_input absent = input)."""
    cached_price = e.get("cached_input", e["input"])
    return ((prompt - cached) * e["input"] + cached * cached_price
            + completion * e["output"]) / 1e6


class PricesTest(harness.GuardTestCase):

    def call(self, model, path, env=None):
        if path == MESSAGES:
            body = {"model": model, "max_tokens": 64,
                    "messages": [{"role": "user", "content": "Price this call, please."}]}
        else:
            body = {"model": model,
                    "messages": [{"role": "user", "content": "Price this call, please."}]}
        url = self.mock.url(path, plan="200")
        p = harness.run([harness.CURL, "-sS", "-H", "Content-Type: application/json",
                         "--data-binary", json.dumps(body), url],
                        env or self.guard_env(), timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        entry = self.mock.wait_entries(url=url)[-1]
        rec = [r for r in self.records() if r["path"] == path and r["model"] == model][-1]
        self.assertEqual(rec["total_tokens"], entry["billed_tokens"])
        self.assertGreater(rec["prompt_tokens"], 0)
        self.assertGreater(rec["completion_tokens"], 0)
        return rec

    def cli(self, args, env=None, input=None):
        return harness.run([harness.CLI] + args, env or harness.plain_env(), timeout=30,
                           input=input)

    # -- the shipped table

    def test_shipped_table_is_the_scripts_output_with_provenance(self):
        table = json.loads(SHIPPED.read_text())
        up = table["upstream"]
        self.assertEqual(up["project"], "BerriAI/litellm")
        self.assertEqual(up["file"], "model_prices_and_context_window.json")
        self.assertRegex(up["commit"], r"^[0-9a-f]{40}$")
        self.assertIn(up["commit"], up["url"])
        self.assertEqual(up["date"], table["date"])
        self.assertIn(up["commit"], table["source"])
        # regenerated from the committed excerpt with the recorded commit and date: identical
        p = subprocess.run([harness.PYTHON, str(SCRIPT), "--commit", up["commit"], "--date",
                            up["date"], str(EXCERPT)], capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.decode(), SHIPPED.read_text())

    def test_script_refuses_bad_input(self):
        bad = self.tmp / "bad.json"
        bad.write_text('{"x": {"input_cost_per_token": 1e-6, "output_cost_per_token": 1e-6,'
                       ' "litellm_provider": "azure", "mode": "chat"}}')
        p = subprocess.run([harness.PYTHON, str(SCRIPT), "--commit", "0" * 40, str(bad)],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(b"no first-party chat model", p.stderr)
        p = subprocess.run([harness.PYTHON, str(SCRIPT), "--commit", "not-a-sha", str(EXCERPT)],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)

    def test_cost_of_the_mocks_models_is_the_shipped_price_times_tokens(self):
        table = json.loads(SHIPPED.read_text())
        for model, path in CALLS:
            with self.subTest(model=model):
                rec = self.call(model, path)
                e = own_lookup(table, model)
                self.assertIsNotNone(e, f"{model} is not in {SHIPPED}")
                want = own_cost(e, rec["prompt_tokens"], rec["cached_tokens"] or 0,
                                rec["completion_tokens"])
                self.assertGreater(want, 0)
                self.assertAlmostEqual(rec["cost_usd"], want, places=12)

    def test_a_build_directory_outside_the_tree_prices_with_the_copy_beside_it(self):
        """make puts data/prices.json beside the library and the CLI; a build directory that
        has no ../data (make BUILD=/tmp/b) finds that copy.  Without it such a build priced
        nothing (cost_usd null, prices check without a table), and so did the profiled
        build's training library in BUILD/pgo."""
        made = harness.BUILD / "prices.json"
        self.assertEqual(made.read_bytes(), SHIPPED.read_bytes(), f"{made}: not make's copy")
        b = self.tmp / "elsewhere" / "b"
        b.mkdir(parents=True)
        for f in (harness.LIB, harness.CLI):
            shutil.copy(f, b)
        lib = (harness.SAN_PRELOAD + ":" if harness.SAN_PRELOAD else "") + str(b / harness.LIB.name)
        e = own_lookup(json.loads(SHIPPED.read_text()), "gpt-4o-mini")
        for beside in (False, True):
            with self.subTest(copy_beside=beside):
                if beside:
                    (b / "prices.json").write_bytes(made.read_bytes())
                rec = self.call("gpt-4o-mini", CHAT, self.guard_env(extra={"LD_PRELOAD": lib}))
                if beside:
                    self.assertIsNotNone(rec["cost_usd"], "the copy beside it was not found")
                    self.assertAlmostEqual(rec["cost_usd"], own_cost(
                        e, rec["prompt_tokens"], rec["cached_tokens"] or 0,
                        rec["completion_tokens"]), places=12)
                else:
                    self.assertIsNone(rec["cost_usd"])
                p = harness.run([str(b / harness.CLI.name), "prices", "check", str(self.log)],
                                harness.plain_env(), timeout=30)
                self.assertEqual(p.returncode, 0 if beside else 1, p.stderr)
                if not beside:
                    self.assertIn(b"no price table", p.stderr)

    # -- CURLGUARD_PRICES in LiteLLM's format

    def litellm_file(self, factor=3):
        """The committed excerpt of LiteLLM's file with OpenAI's and Anthropic's keys
        prefixed by their provider ("openai/gpt-4o-mini") and every price times `factor`,
        so a cost can only come from this file."""
        src = json.loads(EXCERPT.read_text())
        out = {}
        for key, e in src.items():
            e = dict(e)
            if key != "sample_spec":
                for k in ("input_cost_per_token", "output_cost_per_token",
                          "cache_read_input_token_cost", "cache_creation_input_token_cost"):
                    if isinstance(e.get(k), (int, float)):
                        e[k] = e[k] * factor
            if e.get("litellm_provider") in ("openai", "anthropic"):
                key = e["litellm_provider"] + "/" + key
            out[key] = e
        path = self.tmp / "model_prices_and_context_window.json"
        path.write_text(json.dumps(out, indent=4))
        return path, out

    def test_litellm_file_prices_guarded_calls(self):
        path, table = self.litellm_file()
        env = self.guard_env(extra={"CURLGUARD_PRICES": path})
        # (model asked for, LiteLLM key that must price it)
        cases = [("gpt-4o-mini", "openai/gpt-4o-mini"), ("o3-2025-04-16", "openai/o3-2025-04-16"),
                 ("gpt-4.1-2099-01-01", "openai/gpt-4.1"),   # an unlisted snapshot
                 ("claude-sonnet-4-20250514", "anthropic/claude-sonnet-4-20250514"),
                 ("gemini-2.5-pro", "gemini-2.5-pro")]
        for model, key in cases:
            with self.subTest(model=model):
                rec = self.call(model, MESSAGES if model.startswith("claude") else CHAT, env)
                e = table[key]
                cached = rec["cached_tokens"] or 0
                want = ((rec["prompt_tokens"] - cached) * e["input_cost_per_token"]
                        + cached * e.get("cache_read_input_token_cost", e["input_cost_per_token"])
                        + rec["completion_tokens"] * e["output_cost_per_token"])
                self.assertGreater(want, 0)
                self.assertAlmostEqual(rec["cost_usd"], want, places=12)
        # a model in neither: still null; one only the shipped table has: null here
        rec = self.call("my-private-model-7", CHAT, env)
        self.assertIsNone(rec["cost_usd"])
        rec = self.call("gpt-4o-realtime-preview", CHAT, env)   # realtime: not a chat price
        self.assertIsNone(rec["cost_usd"])

    def test_bad_litellm_file_fails_open_with_one_line(self):
        path = self.tmp / "prices.json"
        path.write_text('{"sample_spec": {"mode": "chat"}, "x": {"mode": "embedding",'
                        ' "input_cost_per_token": 1e-7, "output_cost_per_token": 0}}')
        url = self.mock.url(CHAT, plan="200")
        p = harness.run([harness.CURL, "-sS", "--data-binary",
                         json.dumps({"model": "gpt-4o-mini", "messages": []}), url],
                        self.guard_env(extra={"CURLGUARD_PRICES": path}), timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [l for l in p.stderr.decode().splitlines() if l.startswith("curlguard:")]
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("no chat model", lines[0])
        self.assertIsNone(self.records()[0]["cost_usd"])

    # -- curlguard prices check

    def test_prices_check_lists_the_unknown_model_of_a_real_log(self):
        for model, path in [("gpt-4o-mini", CHAT), ("gpt-4o-mini", CHAT),
                            ("my-private-model-7", CHAT), ("claude-sonnet-4-20250514", MESSAGES)]:
            self.call(model, path)
        p = self.cli(["prices", "check", str(self.log)])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stdout.decode(), "my-private-model-7\t1\n")
        self.assertIn(b"1 of 3 models (1 of 4 records with a model)", p.stderr)
        # the same log from stdin
        p = self.cli(["prices", "check", "-"], input=self.log.read_bytes())
        self.assertEqual((p.returncode, p.stdout), (1, b"my-private-model-7\t1\n"), p.stderr)

    def test_prices_check_counts_the_records_report_counts(self):
        """Both commands count one population: the whole records (helper-67: a tester saw
        89 records in prices check against 86 in report, every JSON line with a "model"
        counted).  The log holds real guard records and what a log can hold besides."""
        for model, path in [("gpt-4o-mini", CHAT), ("my-private-model-7", CHAT),
                            ("my-private-model-7", CHAT), ("claude-sonnet-4-20250514", MESSAGES)]:
            self.call(model, path)
        lines = self.log.read_text().splitlines()
        mine = json.loads([l for l in lines if "my-private-model-7" in l][0])
        line = json.dumps(mine)
        no_usage = dict(mine, prompt_tokens=None, completion_tokens=None, total_tokens=None,
                        cached_tokens=None, cost_usd=None)      # a stream without usage
        no_model = dict(mine, model=None)                      # a GET: a record, no model
        extra = [line[:len(line) // 2],                        # cut mid-write
                 json.dumps({"model": "my-private-model-7"}),  # not a usage record
                 json.dumps(dict(mine, attempt="1")),          # a key of the wrong type
                 json.dumps({k: v for k, v in mine.items() if k != "ts"}),  # a key missing
                 json.dumps(dict(mine, pad="x" * (1 << 20))),  # over the line limit
                 json.dumps(no_usage), json.dumps(no_model), "", "  \r"]
        log = self.tmp / "mixed.jsonl"
        log.write_text("\n".join(lines + extra + [line]))     # the last line unterminated
        rep = json.loads(harness.run([harness.CLI, "report", "--json", str(log), str(log)],
                                     harness.plain_env(), timeout=60).stdout)
        p = self.cli(["prices", "check", str(log), str(log)])
        self.assertEqual(p.returncode, 1, p.stderr)
        attempts = sum(g["attempts"] for g in rep["groups"]
                       if g["model"] == "my-private-model-7")
        self.assertEqual(attempts, 4)                          # two calls, no usage, the last
        self.assertEqual(p.stdout.decode(), f"my-private-model-7\t{attempts}\n")
        modelled = sum(g["attempts"] for g in rep["groups"] if g["model"] is not None)
        err = p.stderr.decode()
        self.assertIn(f"1 of 3 models ({attempts} of {modelled} records with a model)", err)
        self.assertIn(f"read {rep['records']} records from {rep['lines']} lines, "
                      f"{rep['malformed']['total']} malformed lines skipped", err)
        self.assertEqual((rep["records"], rep["malformed"]["total"]), (len(lines) + 3, 5))
        self.assertIn("is " + str(log) + " again: read once", err)

    def test_prices_check_reads_a_huge_line_in_bounded_memory(self):
        """prices check reads the logs through the report's reader: a line over the
        limit is skipped, not held.  Before (helper-70), getline held each line whole:
        a 300 MiB line cost 309 MB of memory (report: 4 MB), and under a 64 MiB
        address-space limit getline failed on a 96 MiB line and the lines after it were
        silently not read ("read 5 records from 5 lines" here, the report: 10 of 11)."""
        if os.environ.get("CG_SANITIZE") == "1":
            self.skipTest("ASan reserves far more address space than the limit")
        recs = [whole("mystery-9")] * 3 + [whole("gpt-4o", cost_usd=0.1)] * 2
        text = "".join(json.dumps(r) + "\n" for r in recs).encode()
        log = self.tmp / "huge.jsonl"
        log.write_bytes(text + b'{"model": "' + b"x" * (96 << 20) + b'"}\n' + text)
        limited = ["/bin/sh", "-c", 'ulimit -v 65536 && exec "$0" "$@"', harness.CLI]
        rep = harness.run(limited + ["report", "--json", str(log)], harness.plain_env(),
                          timeout=60)
        self.assertEqual(rep.returncode, 0, rep.stderr)
        rep = json.loads(rep.stdout)
        self.assertEqual((rep["records"], rep["lines"], rep["malformed"]["too_long"]),
                         (10, 11, 1))
        p = harness.run(limited + ["prices", "check", str(log)], harness.plain_env(),
                        timeout=60)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stdout.decode(), "mystery-9\t6\n")
        self.assertIn("read 10 records from 11 lines, 1 malformed lines skipped",
                      p.stderr.decode())

    def test_prices_check_counts_and_honours_curlguard_prices(self):
        log = self.tmp / "mixed.jsonl"
        recs = ([whole("gpt-4o", cost_usd=0.1)] * 3 + [whole("mystery-9")] * 2
                + [whole("zeta-1")] * 2 + [whole(None), {"no": "model"}])
        log.write_text("".join(json.dumps(r) + "\n" for r in recs) + "not json\n\n")
        p = self.cli(["prices", "check", str(log)])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stdout.decode(), "mystery-9\t2\nzeta-1\t2\n")
        # all priced: exit 0, nothing on stdout
        known = self.tmp / "known.jsonl"
        known.write_text(json.dumps(whole("GPT-4o-2024-08-06")) + "\n")
        p = self.cli(["prices", "check", str(known)])
        self.assertEqual((p.returncode, p.stdout), (0, b""), p.stderr)
        self.assertIn(b"all 1 models (1 records with a model) are priced", p.stderr)
        # a LiteLLM table named by CURLGUARD_PRICES that knows gpt-4o only as openai/...
        path, _ = self.litellm_file(factor=1)
        env = harness.plain_env(extra={"CURLGUARD_PRICES": path})
        p = self.cli(["prices", "check", str(known)], env)
        self.assertEqual((p.returncode, p.stdout), (0, b""), p.stderr)
        self.assertIn(str(path).encode(), p.stderr)
        odd = self.tmp / "odd.json"
        odd.write_text(json.dumps({"sample_spec": {}, "zeta-1": {
            "input_cost_per_token": 1e-6, "output_cost_per_token": 1e-6, "mode": "chat"}}))
        p = self.cli(["prices", "check", str(log)],
                     harness.plain_env(extra={"CURLGUARD_PRICES": odd}))
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stdout.decode(), "gpt-4o\t3\nmystery-9\t2\n")

    def test_prices_check_shows_hostile_model_names_escaped(self):
        # A model name from a log is data: an ESC sequence, a newline (a fake row) and a
        # tab are shown escaped, one row per model (new-user review).
        log = self.tmp / "hostile.jsonl"
        log.write_text(json.dumps(whole("x\u001b[31mred\nfake\tline\\")) + "\n")
        p = self.cli(["prices", "check", str(log)])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stdout, b"x\\x1B[31mred\\nfake\\tline\\\\\t1\n")

    def test_prices_check_shows_the_tables_date_and_path_escaped(self):
        """The table's date is data too: its summary stays one line, no ESC sequence."""
        table = self.tmp / "odd.json"
        table.write_text(json.dumps({"date": "\n\u001b[31mred", "models": [
            {"match": "gpt-4o", "input": 1, "output": 1}]}))
        log = self.tmp / "one.jsonl"
        log.write_text(json.dumps(whole("mystery")) + "\n")
        p = self.cli(["prices", "check", str(log)],
                     harness.plain_env(extra={"CURLGUARD_PRICES": table}))
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
        self.assertNotIn(b"\x1b", p.stderr)
        self.assertIn(b"(dated \\n\\x1B[31mred)", p.stderr)

    def test_prices_check_errors_and_usage(self):
        for args in (["prices"], ["prices", "list"], ["prices", "check", "--bogus"]):
            with self.subTest(args=args):
                p = self.cli(args)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertRegex(p.stderr.decode(), r"^curlguard: prices[^\n]*\n$")
        p = self.cli(["prices", "check", str(self.tmp / "missing.jsonl")])
        self.assertEqual(p.returncode, 1)
        self.assertRegex(p.stderr.decode(), r"^curlguard: prices: .*No such file[^\n]*\n$")
        p = self.cli(["prices", "check", str(self.tmp)])
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"is a directory", p.stderr)
        p = self.cli(["prices", "check", str(self.log)],
                     harness.plain_env(extra={"CURLGUARD_PRICES": self.tmp / "nope.json"}))
        self.assertEqual(p.returncode, 1)
        self.assertRegex(p.stderr.decode(), r"^curlguard: prices .*nope\.json[^\n]*\n$")
        p = self.cli(["prices", "--help"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(b"1 some are not", p.stdout)
        self.assertIn(b"prices check", self.cli(["help"]).stdout)


if __name__ == "__main__":
    unittest.main()
