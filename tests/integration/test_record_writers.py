"""Many processes appending to one usage log at once (SPEC section 5: one JSON object per
line).  Every record is written with one write(2) on an O_APPEND descriptor, so lines from
64 concurrent processes never interleave or tear, even when a line is longer than PIPE_BUF
(4096 bytes: the limit that matters for pipes, not for regular files)."""

import json
import os
import subprocess
import tempfile
import time
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

WRITERS = 64
CALLS = 12                   # calls per writer: 768 records in all


class RecordWritersTest(harness.GuardTestCase):

    def test_64_concurrent_writers_give_only_whole_valid_lines(self):
        # Half the writers carry a 5000-byte task id, so their records are longer than
        # PIPE_BUF; the plan mixes retried and final attempts, so records of different
        # shapes and sizes race each other.
        # curl hangs in setlocale() with a preloaded ASan runtime (harness): skip there.
        harness.skip_unsanitizable([harness.CURL], self.guard_env())
        tmp = tempfile.mkdtemp(prefix="cg-writers-", dir=os.path.dirname(self.log))
        procs = []
        for w in range(WRITERS):
            cfg = os.path.join(tmp, f"w{w}.curlrc")
            with open(cfg, "w") as f:
                for c in range(CALLS):
                    url = self.mock.url("/v1/chat/completions", plan="503:ra=0,200",
                                        key=f"w{w}c{c}")
                    f.write(f'url = "{url}"\noutput = "/dev/null"\n')
            # Every call fails once (half of all attempts): to the shared breaker that is an
            # outage and 768 retries are far over the retry budget.  This test is about
            # records, so both are off (test_breaker.py, test_retry_budget.py).
            env = self.guard_env(extra={"CURLGUARD_BACKOFF_BASE_MS": "1",
                                        "CURLGUARD_BREAKER": "off",
                                        "CURLGUARD_RETRY_BUDGET": "off",
                                        "CURLGUARD_TASK_ID": f"writer-{w}" +
                                        ("-" + "t" * 5000 if w % 2 else "")})
            procs.append(subprocess.Popen([harness.CURL, "-sS", "-K", cfg], env=env,
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE))
        deadline = time.monotonic() + 240
        for p in procs:
            try:
                _, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                self.fail("writers did not finish within 240 s")
            self.assertEqual(p.returncode, 0, err)

        with open(self.log, "rb") as f:
            raw = f.read()
        self.assertTrue(raw.endswith(b"\n"))
        lines = raw.split(b"\n")[:-1]
        self.assertEqual(len(lines), WRITERS * CALLS * 2)   # a 503 then a 200 per call
        per_writer = {}
        longest = 0
        for line in lines:
            rec = json.loads(line)           # raises on any torn or interleaved line
            self.assertRecordKeys(rec)
            longest = max(longest, len(line))
            per_writer.setdefault(rec["task_id"], []).append(rec)
        self.assertGreater(longest, 4096)    # lines above PIPE_BUF were among them
        self.assertEqual(len(per_writer), WRITERS)
        for task, recs in per_writer.items():
            self.assertEqual(len(recs), CALLS * 2, task)
            self.assertEqual(len({r["pid"] for r in recs}), 1, task)
            self.assertEqual(sorted(r["attempt"] for r in recs), sorted([1, 2] * CALLS), task)
            self.assertEqual(len({r["request_id"] for r in recs}), CALLS, task)


if __name__ == "__main__":
    unittest.main()
