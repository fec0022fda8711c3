/* test-repeat.c - host-retry detection keys and slots (src/repeat.c). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "repeat.h"

/* A call's key changes with each of its parts, and only with them. */
Test(repeat, call_key_follows_method_url_and_body) {
  const uint64_t b1[2] = {1, 2}, b2[2] = {1, 3}, b3[2] = {2, 2};
  uint64_t k = cg_repeat_key_call("POST", "http://127.0.0.1/v1/chat", b1);

  cr_assert_eq(k, cg_repeat_key_call("POST", "http://127.0.0.1/v1/chat", b1));
  cr_assert_neq(k, cg_repeat_key_call("PUT", "http://127.0.0.1/v1/chat", b1));
  cr_assert_neq(k, cg_repeat_key_call("POST", "http://127.0.0.1/v1/chat?i=1", b1));
  cr_assert_neq(k, cg_repeat_key_call("POST", "http://127.0.0.1/v1/chat", b2));
  cr_assert_neq(k, cg_repeat_key_call("POST", "http://127.0.0.1/v1/chat", b3));
  cr_assert_neq(k, cg_repeat_key_call("POST", "http://127.0.0.1/v1/chat", NULL));
  /* the method's length is part of it: "GET" and "GET\0..." cannot meet */
  cr_assert_neq(cg_repeat_key_call("GE", "u", NULL), cg_repeat_key_call("GET", "u", NULL));
  /* a method of 8 bytes or more is hashed, not folded */
  cr_assert_eq(cg_repeat_key_call("PROPFIND", "u", b1), cg_repeat_key_call("PROPFIND", "u", b1));
  cr_assert_neq(cg_repeat_key_call("PROPFIND", "u", b1), cg_repeat_key_call("PROPFINE", "u", b1));
}

/* A failed call with a key makes the next identical call a repeat of it; success ends
 * the chain. */
Test(repeat, failed_call_starts_a_chain_success_ends_it) {
  const uint64_t b[2] = {42, 43};
  uint64_t k = cg_repeat_key_call("POST", "http://127.0.0.1/x", b);
  char prev[64];

  cr_assert_eq(cg_repeat_note(k, 0, 1000, 60000, prev, sizeof(prev)), 0);
  cg_repeat_done(k, 0, CG_REPEAT_FAILED, 1000, 0, "req-1");
  cr_assert_eq(cg_repeat_note(k, 0, 2000, 60000, prev, sizeof(prev)), 1);
  cr_assert_str_eq(prev, "req-1");
  cg_repeat_done(k, 0, CG_REPEAT_OK, 2000, 1, "req-1");
  cr_assert_eq(cg_repeat_note(k, 0, 3000, 60000, prev, sizeof(prev)), 0);
}

/* What the guard may skip (and its clock read with it): a local end always, a success
 * while no failed slot exists; never a failure, nor a success that may end a chain. */
Test(repeat, needs_done_only_when_it_changes_something) {
  const uint64_t b[2] = {7, 8};
  uint64_t k = cg_repeat_key_call("POST", "http://127.0.0.1/y", b);

  cr_assert_eq(cg_repeat_needs_done(CG_REPEAT_LOCAL), 0);
  cr_assert_eq(cg_repeat_needs_done(CG_REPEAT_OK), 0);
  cr_assert_eq(cg_repeat_needs_done(CG_REPEAT_FAILED), 1);
  cg_repeat_done(k, 0, CG_REPEAT_FAILED, 1000, 0, "req-9");
  cr_assert_eq(cg_repeat_needs_done(CG_REPEAT_OK), 1); /* it may end that chain */
  cg_repeat_done(k, 0, CG_REPEAT_OK, 1500, 1, "req-9");
  cr_assert_eq(cg_repeat_needs_done(CG_REPEAT_OK), 0);
}

/* A failure is repeated only by the worker that ended it: another handle of the multi
 * driver (cg_repeat_worker_handle) or the thread (0) makes a distinct call; the same
 * handle again (`curl --parallel --retry` adds it again) is a repeat. */
Test(repeat, a_multi_handle_is_its_own_worker) {
  const uint64_t b[2] = {9, 10};
  uint64_t k = cg_repeat_key_call("POST", "http://127.0.0.1/z", b);
  uint64_t h1 = cg_repeat_worker_handle(1), h2 = cg_repeat_worker_handle(2);
  char prev[64];

  cg_repeat_done(k, h1, CG_REPEAT_FAILED, 1000, 0, "req-h1");
  cr_assert_eq(cg_repeat_note(k, h2, 1500, 60000, prev, sizeof(prev)), 0);
  cr_assert_eq(cg_repeat_note(k, 0, 1500, 60000, prev, sizeof(prev)), 0);
  cr_assert_eq(cg_repeat_note(k, h1, 1500, 60000, prev, sizeof(prev)), 1);
  cr_assert_str_eq(prev, "req-h1");
  cr_assert_neq(cg_repeat_worker_handle(1), 1); /* apart from thread numbers */
  cg_repeat_done(k, h1, CG_REPEAT_OK, 1600, 1, "req-h1");
}
