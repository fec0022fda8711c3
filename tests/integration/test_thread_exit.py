"""Guarded calls made while a host thread exits (issue 16's per-thread spare call).

The guard keeps each thread's last ended call struct for its next call and frees it with a
pthread key's destructor at thread exit.  A host's own key destructors run after it (glibc
runs them in key order) and may still make calls: a logging or metrics library that flushes
over HTTP when a worker thread ends.  Such a call must neither reuse the freed struct
(heap corruption: "corrupted double-linked list", SIGABRT, before the fix) nor be lost.
A small C host, compiled here, does one call in a thread, then one from a key destructor.
"""

import os
import shutil
import subprocess
import unittest

try:
    from . import harness
except ImportError:          # discovered with tests/integration as the top-level directory
    import harness

CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")

HOST_C = r'''
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
static const char *url;
static pthread_key_t later;
static size_t sink(char *p, size_t s, size_t n, void *u) { (void) p; (void) u; return s * n; }
static void one(const char *tag) {
  CURL *c = curl_easy_init();
  long code = 0;
  CURLcode rc;
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
  rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  printf("%s: rc=%d status=%ld\n", tag, (int) rc, code);
  fflush(stdout);
  curl_easy_cleanup(c);
}
static void at_exit_of_thread(void *v) { (void) v; one("from a key destructor"); }
static void *worker(void *arg) {
  (void) arg;
  pthread_key_create(&later, at_exit_of_thread); /* after the guard's own key */
  one("in the thread");
  pthread_setspecific(later, (void *) 1);
  return NULL;
}
int main(int argc, char **argv) {
  pthread_t t;
  int i;
  url = argv[1];
  curl_global_init(CURL_GLOBAL_DEFAULT);
  for (i = 0; i < (argc > 2 ? 3 : 1); i++) { /* several threads, one after the other */
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
  }
  printf("joined\n");
  return 0;
}
'''


class ThreadExitTest(harness.GuardTestCase):
    def test_a_call_from_a_key_destructor_at_thread_exit(self):
        if not CC:
            self.skipTest("no C compiler")
        src, exe = self.tmp / "host.c", self.tmp / "host"
        src.write_text(HOST_C)
        subprocess.run([CC, "-O2", "-o", str(exe), str(src), "-lcurl", "-lpthread"],
                       check=True, timeout=60, capture_output=True)
        url = self.mock.url("/v1/thread-exit", plan="200", key=True)
        want = b"in the thread: rc=0 status=200\nfrom a key destructor: rc=0 status=200\n"
        for env in (harness.plain_env(), self.guard_env()):
            p = harness.run([str(exe), url, "3"], env, timeout=60)
            self.assertEqual(p.returncode, 0, (p.stdout, p.stderr))
            self.assertEqual(p.stdout, want * 3 + b"joined\n", p.stderr)
        recs = self.records()
        self.assertEqual(len(recs), 6, recs)
        self.assertEqual({r["status"] for r in recs}, {200})


if __name__ == "__main__":
    unittest.main()
