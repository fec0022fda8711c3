"""Guarded calls made while a host thread exits (issue 16's per-thread spare call).

The guard keeps each thread's last ended call struct for its next call and frees it with a
pthread key's destructor at thread exit.  A host's own key destructors run after it (glibc
runs them in key order) and may still make calls: a logging or metrics library that flushes
over HTTP when a worker thread ends.  Such a call must neither reuse the freed struct
(heap corruption: "corrupted double-linked list", SIGABRT, before the fix) nor be lost.
A small C host, compiled here, does one call in a thread, then one from a key destructor.
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

# argv: SLOW_URL MODE(cancel|exit) NEXT_URL.  A worker performs SLOW_URL; the main thread
# cancels it after 1 s (MODE cancel), or the worker's write callback ends its thread at the
# first byte (MODE exit).  Then the main thread performs NEXT_URL twice with a 5 s timeout.
CANCEL_C = r'''
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static const char *slow;
static int end_thread;
static size_t sink(char *p, size_t s, size_t n, void *u) {
  (void) p; (void) u;
  if (end_thread)
    pthread_exit(NULL);
  return s * n;
}
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}
static void *worker(void *arg) {
  CURL *c = curl_easy_init();
  (void) arg;
  curl_easy_setopt(c, CURLOPT_URL, slow);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_perform(c);
  printf("worker not stopped\n");
  return NULL;
}
int main(int argc, char **argv) {
  pthread_t t;
  void *r;
  int k;
  (void) argc;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  slow = argv[1];
  end_thread = strcmp(argv[2], "exit") == 0;
  pthread_create(&t, NULL, worker, NULL);
  sleep(1);
  if (!end_thread)
    pthread_cancel(t);
  pthread_join(t, &r);
  end_thread = 0;
  printf("worker %s\n", r == PTHREAD_CANCELED ? "cancelled" : "ended");
  for (k = 0; k < 2; k++) {
    CURL *c = curl_easy_init();
    double t0 = now();
    CURLcode rc;
    curl_easy_setopt(c, CURLOPT_URL, argv[3]);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
    rc = curl_easy_perform(c);
    printf("next: rc=%d%s\n", (int) rc, now() - t0 < 2 ? "" : " (slow)");
    curl_easy_cleanup(c);
  }
  return 0;
}
'''

# argv: SLOW_URL NEXT_URL.  Thread A holds the only in-flight slot (SLOW_URL answers late);
# thread B waits for a slot and is cancelled there after 500 ms.
CANCEL_WAITER_C = r'''
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static size_t sink(char *p, size_t s, size_t n, void *u) { (void) p; (void) u; return s * n; }
static void *one(void *url) {
  CURL *c = curl_easy_init();
  curl_easy_setopt(c, CURLOPT_URL, (const char *) url);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_perform(c);
  curl_easy_cleanup(c);
  return NULL;
}
int main(int argc, char **argv) {
  pthread_t a, b;
  void *r;
  (void) argc;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  pthread_create(&a, NULL, one, argv[1]);
  usleep(300000);
  pthread_create(&b, NULL, one, argv[2]);
  usleep(500000);
  pthread_cancel(b);
  pthread_join(b, &r);
  pthread_join(a, NULL);
  printf("B %s\n", r == PTHREAD_CANCELED ? "cancelled" : "ended");
  return 0;
}
'''


class ThreadExitTest(harness.GuardTestCase):
    def compile(self, name, text):
        """The C host `text`, built as `name` in the test's directory -> its path."""
        if not CC:
            self.skipTest("no C compiler")
        src, exe = self.tmp / f"{name}.c", self.tmp / name
        src.write_text(text)
        subprocess.run([CC, "-O2", "-o", str(exe), str(src), "-lcurl", "-lpthread"],
                       check=True, timeout=60, capture_output=True)
        return exe

    def test_a_call_from_a_key_destructor_at_thread_exit(self):
        exe = self.compile("host", HOST_C)
        url = self.mock.url("/v1/thread-exit", plan="200", key=True)
        want = b"in the thread: rc=0 status=200\nfrom a key destructor: rc=0 status=200\n"
        for env in (harness.plain_env(), self.guard_env()):
            p = harness.run([str(exe), url, "3"], env, timeout=60)
            self.assertEqual(p.returncode, 0, (p.stdout, p.stderr))
            self.assertEqual(p.stdout, want * 3 + b"joined\n", p.stderr)
        recs = self.records()
        self.assertEqual(len(recs), 6, recs)
        self.assertEqual({r["status"] for r in recs}, {200})

    def test_a_thread_stopped_inside_a_call_gives_its_in_flight_slot_back(self):
        """A worker thread cancelled (pthread_cancel) inside a guarded call, or ended by its
        own write callback (pthread_exit), with CURLGUARD_MAX_INFLIGHT=1: the slot it held
        goes back (guard.c cg__attempt_abandoned), and the next calls run at once, as
        without the guard.  Before, the slot stayed counted for the process's whole life
        (its owner lives on): each next call waited for it and failed with 28 after 4.9 s,
        in this process and in every other process of the pool."""
        exe = self.compile("cancel", CANCEL_C)
        for mode, plan, said in (("cancel", "200:delay=3000", b"cancelled"),
                                 ("exit", "stall:ms=3000", b"ended")):
            with self.subTest(mode):
                slow = self.mock.url(f"/v1/thread-stop/{mode}", plan=plan)
                nxt = self.mock.url(f"/v1/thread-stop/{mode}/next", plan="200")
                p = harness.run([str(exe), slow, mode, nxt],
                                self.guard_env(CURLGUARD_MAX_INFLIGHT="1",
                                               CURLGUARD_STATE=str(self.tmp / f"{mode}.state")),
                                timeout=60)
                self.assertEqual(p.returncode, 0, (p.stdout, p.stderr))
                self.assertEqual(p.stdout, b"worker " + said + b"\nnext: rc=0\nnext: rc=0\n",
                                 p.stderr)

    def test_a_thread_cancelled_while_waiting_for_a_slot_is_no_waiter_any_more(self):
        """A thread cancelled while it waits for the pool's only in-flight slot takes its
        count of waiters back (a cleanup handler in limiter.c): `curlguard stat` showed
        `waiters 1` for good, and every release made one more futex wake."""
        if harness.SAN_PRELOAD:
            # pthread_cancel's forced unwinding leaves the ASan redzones of the frames it
            # skips poisoned, and GCC 12's libasan then reports its own sigaltstack() write
            # at the thread's exit (stack-buffer-underflow in AsanThread::Destroy)
            self.skipTest("a thread cancelled in instrumented code trips ASan at its exit")
        exe = self.compile("cancel-waiter", CANCEL_WAITER_C)
        slow = self.mock.url("/v1/thread-stop/holder", plan="200:delay=2000")
        waiter = self.mock.url("/v1/thread-stop/waiter", plan="200")
        p = harness.run([str(exe), slow, waiter],
                        self.guard_env(CURLGUARD_MAX_INFLIGHT="1"), timeout=60)
        self.assertEqual((p.returncode, p.stdout), (0, b"B cancelled\n"), p.stderr)
        st = harness.run([harness.CLI, "stat", "--json"],
                         harness.plain_env(CURLGUARD_STATE=str(self.state)), timeout=30)
        self.assertEqual(st.returncode, 0, st.stderr)
        pool = {x["name"]: x for x in json.loads(st.stdout)["pools"]}[harness.mock_pool()]
        self.assertEqual((pool["inflight"], pool["waiters"]), (0, 0))


if __name__ == "__main__":
    unittest.main()
