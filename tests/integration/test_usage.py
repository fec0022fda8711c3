"""Token usage and cost in the records, read from real responses of the mock provider:
OpenAI-style JSON and SSE streams (CASES.md "Usage in responses"), priced with the shipped
table (data/prices.json)."""

import json
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

CHAT = "/v1/chat/completions"


class UsageTest(harness.GuardTestCase):

    def call(self, body, plan="200"):
        url = self.mock.url(CHAT, plan=plan)
        p = harness.run([harness.CURL, "-sS", "-H", "Content-Type: application/json",
                         "--data-binary", json.dumps(body), url], self.guard_env(), timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        ledger = self.mock.wait_entries(url=url)
        recs = self.records()
        self.assertEqual(len(recs), 1, recs)
        return recs[0], ledger[-1]

    def test_json_usage_and_cost(self):
        rec, entry = self.call({"model": "gpt-4o-mini",
                                "messages": [{"role": "user", "content": "Say hello, please."}]})
        usage = entry["usage"]
        self.assertEqual(rec["prompt_tokens"], usage["prompt_tokens"])
        self.assertEqual(rec["completion_tokens"], usage["completion_tokens"])
        self.assertEqual(rec["total_tokens"], entry["billed_tokens"])
        self.assertEqual(rec["cached_tokens"], 0)
        # gpt-4o-mini: 0.15 USD in, 0.60 USD out per million tokens (data/prices.json)
        want = (usage["prompt_tokens"] * 0.15 + usage["completion_tokens"] * 0.60) / 1e6
        self.assertAlmostEqual(rec["cost_usd"], want, places=12)

    def test_stream_with_include_usage(self):
        rec, entry = self.call({"model": "gpt-4o", "stream": True,
                                "stream_options": {"include_usage": True},
                                "messages": [{"role": "user", "content": "Count to three."}]},
                               plan="200:chunk_ms=5")
        self.assertEqual(rec["total_tokens"], entry["billed_tokens"])
        self.assertIsNotNone(rec["cost_usd"])

    def test_stream_without_usage_is_unknown_not_zero(self):
        rec, _ = self.call({"model": "gpt-4o", "stream": True,
                            "messages": [{"role": "user", "content": "Count to three."}]})
        for k in ("prompt_tokens", "completion_tokens", "total_tokens", "cost_usd"):
            self.assertIsNone(rec[k], k)

    def test_unknown_model_keeps_its_name_and_has_no_cost(self):
        rec, _ = self.call({"model": "my-private-model-7",
                            "messages": [{"role": "user", "content": "hi"}]})
        self.assertEqual(rec["model"], "my-private-model-7")
        self.assertIsNotNone(rec["total_tokens"])
        self.assertIsNone(rec["cost_usd"])


if __name__ == "__main__":
    unittest.main()
