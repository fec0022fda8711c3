"""Hostile server hints (issue 11 items 3 and 4; CASES.md "Turn 2": hints are capped, and
nothing longer than the cap is ever stored in shared state).

One answer, from a gateway, a test server or a MITM on plain HTTP, must never lock a host
out for every process on the machine. Each case: a guarded curl gets one hostile answer
(a 429 whose hint is a year, 10^30 s, 1e309, inf, an HTTP-date 5 years after its Date or
in year 817853964; a 200 whose rate-limit headers reset in 114 years or in 2099, or whose
body reports 10^11 tokens to a pool with a token limit), then
`curlguard stat` must show no hold or pacing beyond CURLGUARD_MAX_RETRY_AFTER_MS, and two
normal calls to the same host, through the same state file, must both be answered (not
failed fast) within that maximum each. Cases run side by side, each with its own state
file (a pool is per state file).
"""

import concurrent.futures
import json
import time
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

CAP_MS = 2000
SLACK_S = 1.5                # scheduling on a busy 2-core machine; never early
# A wait of the cap is slept in slices (the limiter asks again every 100 ms): on a busy
# machine each wakes a little late (make check once: queued 2002 ms for a 2000 ms cap).
QUEUE_SLACK_MS = 250
PATH = "/v1/chat/completions"
BODY = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
FIVE_YEARS_S = 5 * 365 * 86400 + 86400

# A 200 whose body reports 10^11 tokens (under 2^53, so read): with a token limit, the
# usage beyond the estimate is charged to the pool, capped like a hint.
HUGE_USAGE = ('{"id":"c","object":"chat.completion","model":"gpt-4o-mini","choices":[],'
              '"usage":{"prompt_tokens":50000000000,"completion_tokens":50000000000,'
              '"total_tokens":100000000000}}')
TOKEN_LIMIT = {"CURLGUARD_TPM": "6000"}

# name -> (status, headers, date header wanted[, extra step fields, extra environment])
CASES = {
    "429 Retry-After 31536000": (429, {"Retry-After": "31536000"}, False),
    "429 Retry-After 10^30": (429, {"Retry-After": "1" + "0" * 30}, False),
    "429 Retry-After 1e309": (429, {"Retry-After": "1e309"}, False),
    "429 Retry-After inf": (429, {"Retry-After": "inf"}, False),
    "429 retry-after-ms 1e309": (429, {"retry-after-ms": "1e309"}, False),
    "429 Retry-After ,2Oct817853964": (429, {"Retry-After": ",2Oct817853964"}, False),
    "429 HTTP-date 5 years after Date": (429, {"Retry-After": "{date+%d}" % FIVE_YEARS_S}, True),
    "200 openai remaining 0 reset 999999h": (200, {
        "x-ratelimit-limit-requests": "1", "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "999999h"}, False),
    "200 openai remaining 1 reset 999999h": (200, {
        "x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "1",
        "x-ratelimit-reset-requests": "999999h"}, False),
    "200 openai reset 1e309s": (200, {
        "x-ratelimit-limit-requests": "1", "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1e309s"}, False),
    "200 RateLimit remaining=0 reset=31536000": (200, {
        "RateLimit": "remaining=0, reset=31536000"}, False),
    "200 RateLimit remaining=1 reset=31536000": (200, {
        "RateLimit": "remaining=1, reset=31536000"}, False),
    "200 anthropic reset in 2099": (200, {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": "2099-01-01T00:00:00Z"}, False),
    "200 anthropic remaining 3 reset in 2099": (200, {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "3",
        "anthropic-ratelimit-requests-reset": "2099-01-01T00:00:00Z"}, False),
    "200 usage 10^11 tokens at 6000 tpm": (200, {}, False, {
        "body": HUGE_USAGE, "content_type": "application/json"}, TOKEN_LIMIT),
}


class HostileHintTest(harness.GuardTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_curl_and_cli()

    def curl(self, url, state, log, extra=None):
        env = self.guard_env(log_path=log, extra=extra, CURLGUARD_STATE=str(state),
                             CURLGUARD_MAX_RETRY_AFTER_MS=str(CAP_MS),
                             CURLGUARD_BACKOFF_BASE_MS="50", CURLGUARD_BACKOFF_CAP_MS="200")
        t0 = time.monotonic()
        p = harness.run([harness.CURL, "-sS", "--noproxy", "*", "--data-binary", BODY, url],
                        env, timeout=60)
        return p, time.monotonic() - t0

    def stat_pool(self, state):
        p = harness.run([harness.CLI, "stat", "--json"],
                        harness.plain_env(CURLGUARD_STATE=str(state)), timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        pools = {q["name"]: q for q in json.loads(p.stdout)["pools"]}
        self.assertIn(harness.mock_pool(), pools, pools)
        return pools[harness.mock_pool()]

    def one_case(self, i, name):
        """-> list of failure strings (empty: the case passed) and a line for the log."""
        status, headers, date, step, extra = (CASES[name] + ({}, {}))[:5]
        state = self.tmp / f"case{i}.state"
        key = harness.unique_key(f"hostile{i}")
        self.mock.set_plan(key, [dict({"action": status, "headers": headers, "date": date},
                                      **step), {"action": 200}])
        url = self.mock.url(PATH, plan=f"@{key}", key=key)
        bad = []

        # 1. the hostile answer: a 429 gives up at once with the answer in hand
        p, took = self.curl(url, state, self.tmp / f"case{i}-hostile.jsonl", extra)
        recs = harness.read_records(self.tmp / f"case{i}-hostile.jsonl")
        if p.returncode != 0:
            bad.append(f"hostile call: curl exit {p.returncode} {p.stderr!r}")
        if status == 429:
            got = [(r["outcome"], r["decision"], r["reason"]) for r in recs]
            if got != [("http_429", "give_up", "retry_after_too_long")]:
                bad.append(f"hostile call: records {got}, want one give_up "
                           "retry_after_too_long")
            if took > SLACK_S:
                bad.append(f"hostile call took {took:.2f} s instead of giving up at once")

        # 2. nothing beyond the cap in the shared state
        pool = self.stat_pool(state)
        if pool["hold_ms"] > CAP_MS:
            bad.append(f"stat: hold_ms {pool['hold_ms']} > {CAP_MS}")
        if pool["pace_ms"] > CAP_MS:
            bad.append(f"stat: pace_ms {pool['pace_ms']} > {CAP_MS}")

        # 3. two normal calls to the same host are answered, each within the cap
        normal = []
        for n in (1, 2):
            log = self.tmp / f"case{i}-normal{n}.jsonl"
            p, took = self.curl(self.mock.url(PATH, key=f"{key}-n{n}"), state, log, extra)
            recs = harness.read_records(log)
            normal.append(took)
            outcomes = [(r["outcome"], r["queue_ms"]) for r in recs]
            if p.returncode != 0 or [o for o, _ in outcomes] != ["ok"]:
                bad.append(f"normal call {n}: curl exit {p.returncode}, records {outcomes}, "
                           f"stderr {p.stderr[-200:]!r}")
            elif recs[0]["queue_ms"] > CAP_MS + QUEUE_SLACK_MS:
                bad.append(f"normal call {n}: queued {recs[0]['queue_ms']} ms > {CAP_MS} "
                           f"+ {QUEUE_SLACK_MS}")
            if took > CAP_MS / 1000 + SLACK_S:
                bad.append(f"normal call {n} took {took:.2f} s > cap {CAP_MS} ms + slack")
        line = (f"{name}: hold_ms {pool['hold_ms']}, pace_ms {pool['pace_ms']}, normal calls "
                + ", ".join(f"{t:.2f} s" for t in normal))
        return bad, line

    def test_one_answer_never_holds_a_host_beyond_the_cap(self):
        names = list(CASES)
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            results = list(ex.map(lambda a: self.one_case(*a), enumerate(names)))
        for name, (bad, line) in zip(names, results):
            print(f"\n[test_hostile_hints] {line}", end="")
            with self.subTest(name):
                self.assertEqual(bad, [], name)


if __name__ == "__main__":
    unittest.main()
