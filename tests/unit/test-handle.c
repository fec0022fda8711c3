/* test-handle.c - the per-handle shadow of the host's options (handle.h).
 *
 * The method rules are those of libcurl's lib/setopt.c and lib/http.c
 * (Curl_http_method): NOBODY, UPLOAD/PUT, POST, HTTPGET, POSTFIELDS, COPYPOSTFIELDS,
 * MIMEPOST, HTTPPOST, CUSTOMREQUEST. */
#include "handle.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fake handles and a fake lib: the shadow never dereferences either. */
static char arena[8][1000];
static const struct cg_lib fake_lib = {.path = "fake-libcurl"};
static const struct cg_lib other_lib = {.path = "other-libcurl"};
#define FAKE(i) ((CURL *) &arena[0][(i)])

/* Record an option as the shim does: read it off a real va_list, then record it. */
static void set(struct cg_handle *h, long opt, ...) {
  struct cg_optval v;
  va_list ap;
  va_start(ap, opt);
  cg_optval_read(opt, &ap, &v);
  va_end(ap);
  cg_handle_record(h, opt, &v);
}

static size_t w_cb(char *p, size_t s, size_t n, void *u) {
  (void) p;
  (void) u;
  return s * n;
}
static size_t h_cb(char *p, size_t s, size_t n, void *u) {
  (void) p;
  return u ? s * n : 0;
}
static size_t r_cb(char *p, size_t s, size_t n, void *u) {
  (void) p;
  (void) s;
  (void) n;
  (void) u;
  return 0;
}
static int seek_cb(void *u, curl_off_t off, int origin) {
  (void) u;
  (void) off;
  (void) origin;
  return CURL_SEEKFUNC_OK;
}
static int prereq_cb(void *u, char *ip, char *lip, int rp, int lp) {
  (void) u;
  (void) ip;
  (void) lip;
  (void) rp;
  (void) lp;
  return CURL_PREREQFUNC_OK;
}
static int xfer_cb(void *u, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
  (void) u;
  (void) a;
  (void) b;
  (void) c;
  (void) d;
  return 0;
}
static int prog_cb(void *u, double a, double b, double c, double d) {
  (void) u;
  (void) a;
  (void) b;
  (void) c;
  (void) d;
  return 0;
}

static int rs_cb(void *r, void *x, void *u) {
  (void) r;
  (void) x;
  (void) u;
  return 0;
}
static curl_socket_t os_cb(void *u, curlsocktype p, struct curl_sockaddr *a) {
  (void) u;
  (void) p;
  (void) a;
  return CURL_SOCKET_BAD;
}
static CURLSTScode hr_cb(CURL *c, struct curl_hstsentry *e, void *u) {
  (void) c;
  (void) e;
  (void) u;
  return CURLSTS_DONE;
}

/* ---- the map ---- */

Test(handle, add_get_remove_count) {
  size_t start = cg_handle_count();
  struct cg_handle *a, *b;

  cr_assert_null(cg_handle_get(FAKE(1)));
  a = cg_handle_add(FAKE(1), &fake_lib);
  cr_assert_not_null(a);
  cr_assert_eq(a->curl, FAKE(1));
  cr_assert_eq(a->lib, &fake_lib);
  cr_assert_eq(cg_handle_count(), start + 1);
  b = cg_handle_add(FAKE(2), &other_lib);
  cr_assert_not_null(b);
  cr_assert_neq(a, b);
  cr_assert_eq(cg_handle_count(), start + 2);
  cr_assert_eq(cg_handle_get(FAKE(1)), a);
  cr_assert_eq(cg_handle_get(FAKE(2)), b);
  cr_assert_null(cg_handle_get(FAKE(3)));

  cg_handle_remove(FAKE(3)); /* unknown: no-op */
  cr_assert_eq(cg_handle_count(), start + 2);
  cg_handle_remove(FAKE(1));
  cr_assert_eq(cg_handle_count(), start + 1);
  cr_assert_null(cg_handle_get(FAKE(1)));
  cr_assert_eq(cg_handle_get(FAKE(2)), b);
  cr_assert_eq(b->lib, &other_lib);
  cg_handle_remove(FAKE(1)); /* twice: no-op */
  cr_assert_eq(cg_handle_count(), start + 1);
  cg_handle_remove(FAKE(2));
  cr_assert_eq(cg_handle_count(), start);
  cr_assert_null(cg_handle_get(FAKE(2)));
}

/* The lock-free table (handle.c): it grows while keeping every handle, and a host that
 * makes and frees handles all its life (one per request) never makes it grow, however
 * many it makes: removals empty their slots again, or leave tombstones that adds reuse. */
#define ANY(i) ((CURL *) &arena[(i) / 1000][(i) % 1000])

Test(handle, growth_keeps_every_handle) {
  size_t start = cg_handle_count(), tables;
  struct cg_handle *h[6000];
  int i;

  for (i = 0; i < 6000; i++) {
    h[i] = cg_handle_add(ANY(i), &fake_lib);
    cr_assert_not_null(h[i]);
    cr_assert_eq(cg_handle_get(ANY(i)), h[i]);
  }
  tables = cg_handle_tables();
  cr_assert_gt(tables, 1, "6000 handles outgrow the first table");
  cr_assert_eq(cg_handle_count(), start + 6000);
  for (i = 0; i < 6000; i++)
    cr_assert_eq(cg_handle_get(ANY(i)), h[i], "handle %d after growth", i);
  for (i = 0; i < 6000; i += 3)
    cg_handle_remove(ANY(i));
  for (i = 0; i < 6000; i++) {
    if (i % 3 == 0)
      cr_assert_null(cg_handle_get(ANY(i)));
    else
      cr_assert_eq(cg_handle_get(ANY(i)), h[i]);
  }
  for (i = 5999; i >= 0; i--)
    cg_handle_remove(ANY(i));
  cr_assert_eq(cg_handle_count(), start);
  for (i = 0; i < 6000; i++)
    cr_assert_null(cg_handle_get(ANY(i)));
  cr_assert_eq(cg_handle_tables(), tables, "removals make no table");
}

Test(handle, a_handle_per_request_never_grows_the_table) {
  size_t tables;
  int i;

  cr_assert_not_null(cg_handle_add(ANY(7999), &fake_lib)); /* one long-lived handle */
  tables = cg_handle_tables();
  /* 200,000 requests, each on a new handle at a new address (3 alive at once, as a host
   * with a handle per request and a few in flight has). */
  for (i = 0; i < 200000; i++) {
    struct cg_handle *h = cg_handle_add(ANY(i % 7000), &fake_lib);
    cr_assert_not_null(h);
    cr_assert_eq(cg_handle_get(ANY(i % 7000)), h);
    if (i >= 2)
      cg_handle_remove(ANY((i - 2) % 7000));
  }
  cr_assert_eq(cg_handle_tables(), tables, "%zu tables made for 3 handles alive",
               cg_handle_tables() - tables);
  cr_assert_not_null(cg_handle_get(ANY(7999)));
  cg_handle_remove(ANY(199998 % 7000));
  cg_handle_remove(ANY(199999 % 7000));
  cg_handle_remove(ANY(7999));
}

Test(handle, many_handles_share_buckets) {
  size_t start = cg_handle_count();
  int i;
  for (i = 0; i < 1000; i++)
    cr_assert_not_null(cg_handle_add(FAKE(i), &fake_lib));
  cr_assert_eq(cg_handle_count(), start + 1000);
  for (i = 0; i < 1000; i += 2)
    cg_handle_remove(FAKE(i));
  for (i = 0; i < 1000; i++) {
    struct cg_handle *h = cg_handle_get(FAKE(i));
    if (i % 2)
      cr_assert(h && h->curl == FAKE(i), "handle %d lost", i);
    else
      cr_assert_null(h, "handle %d should be gone", i);
  }
  for (i = 1; i < 1000; i += 2)
    cg_handle_remove(FAKE(i));
  cr_assert_eq(cg_handle_count(), start);
}

/* ---- defaults (lib/url.c Curl_init_userdefined) ---- */

static void assert_defaults(const struct cg_handle *h) {
  cr_assert_eq(h->write_data, (void *) stdout);
  cr_assert_eq(h->read_data, (void *) stdin);
  cr_assert_eq(h->noprogress, 1);
  cr_assert_eq(h->postfieldsize, (curl_off_t) -1);
  cr_assert_eq(h->method, CG_M_GET);
  cr_assert_str_eq(cg_handle_method(h), "GET");
  cr_assert_null(h->url);
  cr_assert_null(h->custom_request);
  cr_assert_null(h->postfields);
  cr_assert_null(h->copypostfields);
  cr_assert_null(h->httpheader);
  cr_assert_eq(h->nobody, 0);
  cr_assert_null(h->write_fn);
  cr_assert_null(h->header_fn);
  cr_assert_null(h->header_data);
  cr_assert_null(h->read_fn);
  cr_assert_null(h->seek_fn);
  cr_assert_null(h->prereq_fn);
  cr_assert_null(h->prereq_data);
  cr_assert_null(h->xferinfo_fn);
  cr_assert_null(h->progress_fn);
  cr_assert_null(h->progress_data);
  cr_assert_eq(h->progress_callback_set, 0);
  cr_assert_null(h->errorbuffer);
  cr_assert_eq(h->timeout_ms, 0);
  cr_assert_eq(h->connecttimeout_ms, 0);
  cr_assert_eq(h->followlocation, 0);
}

Test(handle, defaults) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  size_t len = 99;
  cr_assert_not_null(h);
  assert_defaults(h);
  cr_assert_eq(h->in_perform, 0);
  cr_assert_null(cg_handle_body(h, &len));
  cg_handle_remove(FAKE(1));
}

/* ---- URL ---- */

Test(handle, url_is_copied) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  char buf[64];

  strcpy(buf, "https://api.example.com/v1/chat");
  set(h, CURLOPT_URL, buf);
  memset(buf, 'X', sizeof(buf) - 1);
  buf[sizeof(buf) - 1] = '\0';
  cr_assert_not_null(h->url);
  cr_assert_neq(h->url, buf);
  cr_assert_str_eq(h->url, "https://api.example.com/v1/chat");

  strcpy(buf, "http://second.example/");
  set(h, CURLOPT_URL, buf);
  strcpy(buf, "overwritten");
  cr_assert_str_eq(h->url, "http://second.example/");

  set(h, CURLOPT_URL, (char *) NULL);
  cr_assert_null(h->url);
  cg_handle_remove(FAKE(1));
}

/* A host that resets its handle and sets its URL before every call: the copy's buffer is
 * kept and reused (no malloc and free a call), and grows for a longer URL. */
Test(handle, url_buffer_is_reused_across_reset) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  char long_url[300];
  const char *kept;

  set(h, CURLOPT_URL, "http://127.0.0.1:18001/v1/chat/completions?i=1");
  kept = h->url;
  cg_handle_reset(h);
  cr_assert_null(h->url, "no URL after a reset");
  set(h, CURLOPT_URL, "http://127.0.0.1:18001/v1/chat/completions?i=22");
  cr_assert_eq(h->url, kept, "the buffer was reused");
  cr_assert_str_eq(h->url, "http://127.0.0.1:18001/v1/chat/completions?i=22");
  set(h, CURLOPT_URL, (char *) NULL);
  cr_assert_null(h->url);
  set(h, CURLOPT_URL, "http://a/");
  cr_assert_eq(h->url, kept);
  cr_assert_str_eq(h->url, "http://a/");

  memset(long_url, 'p', sizeof(long_url) - 1);
  memcpy(long_url, "http://b/", 9);
  long_url[sizeof(long_url) - 1] = '\0';
  set(h, CURLOPT_URL, long_url);
  cr_assert_str_eq(h->url, long_url, "grown for a longer URL");
  cg_handle_reset(h);
  set(h, CURLOPT_URL, "http://c/");
  cr_assert_str_eq(h->url, "http://c/");
  cg_handle_remove(FAKE(1));
}

/* A host that makes a handle per request (the curl tool: one per URL): the node and URL
 * buffer of the handle removed last serve the next one, which starts with every default
 * and no trace of the old handle's options; a duplicate made from the spare keeps its own
 * buffer (a leak here shows under ASan's leak check). */
Test(handle, a_removed_handle_serves_the_next_with_defaults) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib), *d;
  char long_url[5000];
  const char *kept;

  cr_assert_not_null(h);
  set(h, CURLOPT_URL, "http://127.0.0.1:18001/v1/chat/completions?i=1");
  set(h, CURLOPT_CUSTOMREQUEST, "PATCH");
  set(h, CURLOPT_POSTFIELDS, "{}");
  set(h, CURLOPT_WRITEFUNCTION, w_cb);
  set(h, CURLOPT_TIMEOUT_MS, 1234L);
  kept = h->url;
  cg_handle_remove(FAKE(1));

  h = cg_handle_add(FAKE(2), &fake_lib);
  cr_assert_not_null(h);
  cr_assert_eq(h->curl, FAKE(2));
  assert_defaults(h);
  cr_assert_null(h->custom_request);
  cr_assert_null(h->postfields);
  cr_assert_null(h->write_fn);
  cr_assert_eq(h->timeout_ms, 0);
  set(h, CURLOPT_URL, "http://127.0.0.1:18001/v1/chat/completions?i=2");
  cr_assert_eq(h->url, kept, "the removed handle's URL buffer was reused");
  cr_assert_str_eq(h->url, "http://127.0.0.1:18001/v1/chat/completions?i=2");

  /* a duplicate has a URL copy of its own, whether its node is new (no spare now) or
   * the spare (the first duplicate's, removed) */
  d = cg_handle_dup(h, FAKE(3));
  cr_assert_not_null(d);
  cr_assert_str_eq(d->url, h->url);
  cr_assert_neq(d->url, h->url);
  cg_handle_remove(FAKE(3));
  d = cg_handle_dup(h, FAKE(3));
  cr_assert_not_null(d);
  cr_assert_str_eq(d->url, h->url);
  cr_assert_neq(d->url, h->url);
  cg_handle_remove(FAKE(3));

  /* a very long URL's buffer is not kept for the next handle (FAKE(5) takes the spare
   * FAKE(3) left, so FAKE(2)'s node becomes it) */
  cr_assert_not_null(cg_handle_add(FAKE(5), &fake_lib));
  memset(long_url, 'p', sizeof(long_url) - 1);
  memcpy(long_url, "http://b/", 9);
  long_url[sizeof(long_url) - 1] = '\0';
  set(h, CURLOPT_URL, long_url);
  cr_assert_str_eq(h->url, long_url);
  cg_handle_remove(FAKE(2));
  h = cg_handle_add(FAKE(4), &fake_lib);
  cr_assert_not_null(h);
  assert_defaults(h);
  cr_assert_eq(h->url_cap, 0, "a buffer over 4096 bytes was freed, not kept");
  cg_handle_remove(FAKE(4));
  cg_handle_remove(FAKE(5));
}

/* ---- the method ---- */

struct step {
  long opt;
  long l;        /* for long options */
  const char *s; /* for pointer options */
};

#define L(o, v) {CURLOPT_##o, (v), NULL}
#define S(o, v) {CURLOPT_##o, 0, (v)}
static char fake_mime[16];

static const struct {
  const char *name;
  struct step steps[4];
  int nsteps;
  const char *method;
} method_cases[] = {
    {"nothing", {{0, 0, NULL}}, 0, "GET"},
    {"NOBODY 1", {L(NOBODY, 1)}, 1, "HEAD"},
    {"NOBODY 1, NOBODY 0", {L(NOBODY, 1), L(NOBODY, 0)}, 2, "GET"},
    {"POST 1", {L(POST, 1)}, 1, "POST"},
    {"POST 1, HTTPGET 1", {L(POST, 1), L(HTTPGET, 1)}, 2, "GET"},
    {"POST 1, HTTPGET 0", {L(POST, 1), L(HTTPGET, 0)}, 2, "POST"},
    {"POST 1, POST 0", {L(POST, 1), L(POST, 0)}, 2, "GET"},
    {"UPLOAD 1", {L(UPLOAD, 1)}, 1, "PUT"},
    {"PUT 1", {L(PUT, 1)}, 1, "PUT"},
    {"UPLOAD 1, UPLOAD 0", {L(UPLOAD, 1), L(UPLOAD, 0)}, 2, "GET"},
    {"UPLOAD 1, POST 1", {L(UPLOAD, 1), L(POST, 1)}, 2, "POST"},
    {"POSTFIELDS", {S(POSTFIELDS, "a=1")}, 1, "POST"},
    {"COPYPOSTFIELDS", {S(COPYPOSTFIELDS, "a=1")}, 1, "POST"},
    {"POSTFIELDS, UPLOAD 1", {S(POSTFIELDS, "a=1"), L(UPLOAD, 1)}, 2, "PUT"},
    {"POSTFIELDS, HTTPGET 1", {S(POSTFIELDS, "a=1"), L(HTTPGET, 1)}, 2, "GET"},
    {"MIMEPOST", {S(MIMEPOST, fake_mime)}, 1, "POST"},
    {"NOBODY 1, MIMEPOST", {L(NOBODY, 1), S(MIMEPOST, fake_mime)}, 2, "POST"},
    {"NOBODY 1, POST 1", {L(NOBODY, 1), L(POST, 1)}, 2, "POST"},
    {"NOBODY 1, UPLOAD 1", {L(NOBODY, 1), L(UPLOAD, 1)}, 2, "PUT"},
    {"NOBODY 1, HTTPGET 1", {L(NOBODY, 1), L(HTTPGET, 1)}, 2, "GET"},
    {"POST 1, NOBODY 1", {L(POST, 1), L(NOBODY, 1)}, 2, "HEAD"},
    /* NOBODY 1 turned the method into HEAD; NOBODY 0 then makes it GET, not POST. */
    {"POST 1, NOBODY 1, NOBODY 0", {L(POST, 1), L(NOBODY, 1), L(NOBODY, 0)}, 3, "GET"},
    /* NOBODY stays set across POSTFIELDS: libcurl sends HEAD. */
    {"NOBODY 1, POSTFIELDS", {L(NOBODY, 1), S(POSTFIELDS, "x")}, 2, "HEAD"},
    {"CUSTOMREQUEST PATCH, POST 1", {S(CUSTOMREQUEST, "PATCH"), L(POST, 1)}, 2, "PATCH"},
    {"POSTFIELDS, CUSTOMREQUEST DELETE", {S(POSTFIELDS, "x"), S(CUSTOMREQUEST, "DELETE")}, 2,
     "DELETE"},
    {"CUSTOMREQUEST over NOBODY", {L(NOBODY, 1), S(CUSTOMREQUEST, "PROPFIND")}, 2, "PROPFIND"},
    {"CUSTOMREQUEST cleared", {L(POST, 1), S(CUSTOMREQUEST, "X"), S(CUSTOMREQUEST, NULL)}, 3,
     "POST"},
};

static void apply(struct cg_handle *h, const struct step *s) {
  if (cg_opt_kind(s->opt) == CG_OPT_LONG)
    set(h, s->opt, s->l);
  else
    set(h, s->opt, (void *) s->s);
}

Test(handle, method_rules_as_libcurl) {
  size_t i;
  int j;
  for (i = 0; i < sizeof(method_cases) / sizeof(method_cases[0]); i++) {
    struct cg_handle *h = cg_handle_add(FAKE(i), &fake_lib);
    cr_assert_not_null(h);
    for (j = 0; j < method_cases[i].nsteps; j++)
      apply(h, &method_cases[i].steps[j]);
    cr_expect_str_eq(cg_handle_method(h), method_cases[i].method, "%s: got %s, want %s",
                     method_cases[i].name, cg_handle_method(h), method_cases[i].method);
    cg_handle_remove(FAKE(i));
  }
}

Test(handle, method_enum_follows_libcurl_httpreq) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  set(h, CURLOPT_NOBODY, 1L);
  cr_assert_eq(h->method, CG_M_HEAD);
  set(h, CURLOPT_MIMEPOST, (void *) fake_mime);
  cr_assert_eq(h->method, CG_M_POST_MIME);
  cr_assert_eq(h->nobody, 0);
  set(h, CURLOPT_UPLOAD, 1L);
  cr_assert_eq(h->method, CG_M_PUT);
  set(h, CURLOPT_POSTFIELDS, "x");
  cr_assert_eq(h->method, CG_M_POST);
  cg_handle_remove(FAKE(1));
}

/* UPLOAD's own flag (h->upload): libcurl before 8.1.0 keeps data->set.upload apart from the
 * method and sends a PUT from the read callback while it is on, whatever POSTFIELDS or
 * MIMEPOST set later (CVE-2023-28322); only UPLOAD/PUT 0 and HTTPGET 1 clear it there.  The
 * attempt then wraps the read and seek callbacks (attempt.c reads_body). */
Test(handle, upload_flag_outlives_a_later_post) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  cr_assert_eq(h->upload, 0);
  set(h, CURLOPT_UPLOAD, 1L);
  cr_assert_eq(h->upload, 1);
  set(h, CURLOPT_POSTFIELDS, "x");
  cr_assert_eq(h->method, CG_M_POST);
  cr_assert_eq(h->upload, 1);
  set(h, CURLOPT_MIMEPOST, (void *) fake_mime);
  cr_assert_eq(h->upload, 1);
  set(h, CURLOPT_HTTPGET, 0L);
  cr_assert_eq(h->upload, 1);
  set(h, CURLOPT_HTTPGET, 1L);
  cr_assert_eq(h->upload, 0);
  set(h, CURLOPT_PUT, 1L);
  cr_assert_eq(h->upload, 1);
  set(h, CURLOPT_UPLOAD, 0L);
  cr_assert_eq(h->upload, 0);
  set(h, CURLOPT_UPLOAD, 1L);
  cg_handle_reset(h);
  cr_assert_eq(h->upload, 0);
  cg_handle_remove(FAKE(1));
}

/* CURLOPT_HTTPPOST (curl_formadd, deprecated but still used) makes a form POST
 * (lib/setopt.c: method = HTTPREQ_POST_FORM, opt_no_body = FALSE). */
Test(handle, httppost_is_a_form_post) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  set(h, CURLOPT_NOBODY, 1L);
  set(h, CURLOPT_HTTPPOST, (void *) fake_mime);
  cr_expect_eq(h->method, CG_M_POST_FORM, "method %d after CURLOPT_HTTPPOST", (int) h->method);
  cr_expect_eq(h->nobody, 0);
  cr_expect_str_eq(cg_handle_method(h), "POST", "HTTPPOST recorded as %s",
                   cg_handle_method(h));
  cg_handle_remove(FAKE(1));
}

/* ---- bodies ---- */

Test(handle, postfields_are_host_owned) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  static const char body[] = "{\"model\":\"gpt-4o\"}";
  size_t len = 0;
  const char *b;

  set(h, CURLOPT_POSTFIELDS, body);
  b = cg_handle_body(h, &len);
  cr_assert_eq(b, body, "POSTFIELDS is not copied: the body is the host's buffer");
  cr_assert_eq(len, strlen(body));
  set(h, CURLOPT_POSTFIELDSIZE, 5L);
  b = cg_handle_body(h, &len);
  cr_assert_eq(b, body);
  cr_assert_eq(len, 5);
  set(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) 7);
  b = cg_handle_body(h, &len);
  cr_assert_eq(len, 7);
  cg_handle_remove(FAKE(1));
}

Test(handle, copypostfields_survives_caller_free) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  char *buf = strdup("{\"prompt\":\"hello\"}");
  size_t len = 0;
  const char *b;

  set(h, CURLOPT_COPYPOSTFIELDS, buf);
  memset(buf, 'Z', strlen(buf));
  free(buf);
  b = cg_handle_body(h, &len);
  cr_assert_not_null(b);
  cr_assert_eq(len, strlen("{\"prompt\":\"hello\"}"));
  cr_assert(memcmp(b, "{\"prompt\":\"hello\"}", len) == 0);
  cr_assert_str_eq(cg_handle_method(h), "POST");
  cg_handle_remove(FAKE(1));
}

Test(handle, copypostfields_with_size_copies_embedded_nuls) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  static const char bin[7] = {'a', '\0', 'b', '\0', 'c', 'd', 'e'};
  char *buf = malloc(sizeof(bin) + 5);
  size_t len = 0;
  const char *b;

  memcpy(buf, bin, sizeof(bin));
  memcpy(buf + sizeof(bin), "TAIL", 5); /* beyond the size: must not be copied */
  set(h, CURLOPT_POSTFIELDSIZE, 7L);
  set(h, CURLOPT_COPYPOSTFIELDS, buf);
  memset(buf, 0xEE, sizeof(bin) + 5);
  free(buf);
  b = cg_handle_body(h, &len);
  cr_assert_not_null(b);
  cr_assert_eq(len, 7);
  cr_assert(memcmp(b, bin, 7) == 0);
  cr_assert_eq(h->copypostfields_len, 7);
  cg_handle_remove(FAKE(1));
}

Test(handle, copypostfields_with_size_large) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  char buf[] = "0123456789";
  size_t len = 0;
  const char *b;

  set(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) 4);
  set(h, CURLOPT_COPYPOSTFIELDS, buf);
  strcpy(buf, "abcdefghij");
  b = cg_handle_body(h, &len);
  cr_assert_eq(len, 4);
  cr_assert(memcmp(b, "0123", 4) == 0);
  cg_handle_remove(FAKE(1));
}

/* A size set after the copy, smaller than it (allowed: only a larger one drops the copy,
 * lib/setopt.c): libcurl sends that many bytes of the copy, and so does the body the
 * guard digests (body_digest, the repeat key) and scans.  Back to -1: up to the first
 * NUL, as libcurl's strlen. */
Test(handle, copypostfields_then_a_smaller_size) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  static const char bin[7] = {'a', 'b', 'c', '\0', 'e', 'f', 'g'};
  size_t len = 0;
  const char *b;

  set(h, CURLOPT_POSTFIELDSIZE, 7L);
  set(h, CURLOPT_COPYPOSTFIELDS, bin);
  set(h, CURLOPT_POSTFIELDSIZE, 5L);
  b = cg_handle_body(h, &len);
  cr_assert_not_null(b);
  cr_assert_eq(len, 5);
  cr_assert(memcmp(b, bin, 5) == 0);
  set(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) 2);
  b = cg_handle_body(h, &len);
  cr_assert_eq(len, 2);
  set(h, CURLOPT_POSTFIELDSIZE, -1L);
  b = cg_handle_body(h, &len);
  cr_assert_eq(len, 3, "unset size: up to the NUL, as libcurl's strlen");
  cg_handle_remove(FAKE(1));
}

Test(handle, postfields_replaces_copypostfields) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  static const char mine[] = "host-owned";
  size_t len = 0;

  set(h, CURLOPT_COPYPOSTFIELDS, "copied");
  set(h, CURLOPT_POSTFIELDS, mine);
  cr_assert_null(h->copypostfields);
  cr_assert_eq(cg_handle_body(h, &len), mine);
  cr_assert_eq(len, strlen(mine));
  cg_handle_remove(FAKE(1));
}

/* lib/setopt.c CURLOPT_POSTFIELDSIZE(_LARGE): "if(s->postfieldsize < arg &&
 * s->str_copypostfields) { free the copy; s->postfields = NULL; }".  The copied body
 * is gone; libcurl then reads the body from the read callback (a reused handle that
 * sent COPYPOSTFIELDS before and now streams a body of known size). */
Test(handle, larger_postfieldsize_after_copypostfields_drops_the_copy) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  size_t len = 0;

  set(h, CURLOPT_COPYPOSTFIELDS, "abc");
  set(h, CURLOPT_POSTFIELDSIZE, 100L);
  set(h, CURLOPT_READFUNCTION, r_cb);
  cr_expect_null(cg_handle_body(h, &len),
                 "libcurl discarded the COPYPOSTFIELDS copy; the body is not \"abc\" any more");
  cr_expect_str_eq(cg_handle_method(h), "POST");
  cg_handle_remove(FAKE(1));
}

Test(handle, no_body_for_get_mime_or_read_callback) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  size_t len = 0;

  cr_assert_null(cg_handle_body(h, &len));
  set(h, CURLOPT_POST, 1L);
  set(h, CURLOPT_READFUNCTION, r_cb);
  cr_assert_null(cg_handle_body(h, &len), "POST from a read callback has no fields body");
  set(h, CURLOPT_POSTFIELDS, "a=1");
  cr_assert_not_null(cg_handle_body(h, &len));
  set(h, CURLOPT_MIMEPOST, (void *) fake_mime);
  cr_assert_null(cg_handle_body(h, &len), "a mime body is not POSTFIELDS");
  cg_handle_remove(FAKE(1));
}

/* ---- headers ---- */

static const struct {
  const char *name;
  int found;
  const char *value;
} header_cases[] = {
    {"Content-Type", 1, "application/json"},
    {"content-type", 1, "application/json"},
    {"CONTENT-TYPE", 1, "application/json"},
    {"Idempotency-Key", 1, "abc-123"},       /* value trimmed of blanks and CRLF */
    {"idempotency-key", 1, "abc-123"},
    {"X-Empty", 0, NULL},                    /* "Name:" removes the header */
    {"X-Blank", 0, NULL},                    /* "Name:   " too */
    {"X-Dup", 1, "first"},
    {"Content", 0, NULL},                    /* a prefix of a name is not the name */
    {"Content-Type-X", 0, NULL},
    {"Authorization", 1, "Bearer sk-test"},
    {"X-Missing", 0, NULL},
    {"X-Tab", 1, "v a l"},
};

Test(handle, header_lookup) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  static char l1[] = "Content-Type: application/json";
  static char l2[] = "Idempotency-Key:   abc-123  \r\n";
  static char l3[] = "X-Empty:";
  static char l4[] = "X-Blank:   ";
  static char l5[] = "X-Dup: first";
  static char l6[] = "X-Dup: second";
  static char l7[] = "authorization: Bearer sk-test";
  static char l8[] = "X-Tab:\tv a l\t";
  struct curl_slist n8 = {l8, NULL}, n7 = {l7, &n8}, n6 = {l6, &n7}, n5 = {l5, &n6},
                    n4 = {l4, &n5}, n3 = {l3, &n4}, n2 = {l2, &n3}, n1 = {l1, &n2};
  size_t i;

  cr_assert_eq(cg_handle_header(h, "Content-Type", NULL, 0), 0, "no headers yet");
  set(h, CURLOPT_HTTPHEADER, &n1);
  cr_assert_eq(h->httpheader, &n1);
  for (i = 0; i < sizeof(header_cases) / sizeof(header_cases[0]); i++) {
    char val[64];
    int r;
    memset(val, '#', sizeof(val));
    r = cg_handle_header(h, header_cases[i].name, val, sizeof(val));
    cr_expect_eq(r, header_cases[i].found, "header %s: found=%d", header_cases[i].name, r);
    if (r && header_cases[i].found)
      cr_expect_str_eq(val, header_cases[i].value, "header %s: value \"%s\"",
                       header_cases[i].name, val);
    cr_expect_eq(cg_handle_header(h, header_cases[i].name, NULL, 0), header_cases[i].found,
                 "header %s without a value buffer", header_cases[i].name);
  }
  cg_handle_remove(FAKE(1));
}

Test(handle, header_value_truncated_to_buffer) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  static char l1[] = "Idempotency-Key: abcdefgh";
  struct curl_slist n1 = {l1, NULL};
  char val[5];

  set(h, CURLOPT_HTTPHEADER, &n1);
  memset(val, '#', sizeof(val));
  cr_assert_eq(cg_handle_header(h, "Idempotency-Key", val, sizeof(val)), 1);
  cr_assert_str_eq(val, "abcd");
  cg_handle_remove(FAKE(1));
}

/* ---- callbacks, limits, progress ---- */

Test(handle, callbacks_and_data_recorded) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  int wd, hd, rdd, sd, pd;
  char errbuf[CURL_ERROR_SIZE];

  set(h, CURLOPT_WRITEFUNCTION, w_cb);
  set(h, CURLOPT_WRITEDATA, &wd);
  set(h, CURLOPT_HEADERFUNCTION, h_cb);
  set(h, CURLOPT_HEADERDATA, &hd);
  set(h, CURLOPT_READFUNCTION, r_cb);
  set(h, CURLOPT_READDATA, &rdd);
  set(h, CURLOPT_SEEKFUNCTION, seek_cb);
  set(h, CURLOPT_SEEKDATA, &sd);
  set(h, CURLOPT_PREREQFUNCTION, prereq_cb);
  set(h, CURLOPT_PREREQDATA, &sd);
  set(h, CURLOPT_XFERINFODATA, &pd);
  set(h, CURLOPT_NOPROGRESS, 0L);
  set(h, CURLOPT_ERRORBUFFER, errbuf);
  set(h, CURLOPT_FOLLOWLOCATION, 1L);
  set(h, CURLOPT_NOSIGNAL, 1L);
  cr_assert(h->write_fn == w_cb);
  cr_assert_eq(h->write_data, (void *) &wd);
  cr_assert(h->header_fn == h_cb);
  cr_assert_eq(h->header_data, (void *) &hd);
  cr_assert(h->read_fn == r_cb);
  cr_assert_eq(h->read_data, (void *) &rdd);
  cr_assert(h->seek_fn == seek_cb);
  cr_assert_eq(h->seek_data, (void *) &sd);
  cr_assert(h->prereq_fn == prereq_cb);
  cr_assert_eq(h->prereq_data, (void *) &sd);
  cr_assert_eq(h->progress_data, (void *) &pd);
  cr_assert_eq(h->noprogress, 0);
  cr_assert_eq(h->errorbuffer, errbuf);
  cr_assert_eq(h->followlocation, 1);
  cr_assert_eq(h->nosignal, 0); /* read by nobody: not recorded */
  /* The callbacks whose refusal is the host's, and the HSTS read callback. */
  cr_assert_null(h->resolver_start_fn);
  set(h, CURLOPT_RESOLVER_START_FUNCTION, rs_cb);
  set(h, CURLOPT_RESOLVER_START_DATA, &hd);
  set(h, CURLOPT_OPENSOCKETFUNCTION, os_cb);
  set(h, CURLOPT_OPENSOCKETDATA, &rdd);
  set(h, CURLOPT_HSTSREADFUNCTION, hr_cb);
  cr_assert(h->resolver_start_fn == rs_cb);
  cr_assert_eq(h->resolver_start_data, (void *) &hd);
  cr_assert(h->opensocket_fn == os_cb);
  cr_assert_eq(h->opensocket_data, (void *) &rdd);
  cr_assert(h->hstsread_fn == hr_cb);
  /* PROGRESSDATA is the same option as XFERINFODATA. */
  set(h, CURLOPT_PROGRESSDATA, &wd);
  cr_assert_eq(h->progress_data, (void *) &wd);
  /* Back to libcurl's defaults by setting NULL. */
  set(h, CURLOPT_WRITEFUNCTION, (curl_write_callback) NULL);
  cr_assert_null(h->write_fn);
  set(h, CURLOPT_NOPROGRESS, 5L);
  cr_assert_eq(h->noprogress, 1);
  cg_handle_remove(FAKE(1));
}

static const struct {
  long opt;
  long value;
  long timeout_ms, connecttimeout_ms;
} limit_cases[] = {
    {CURLOPT_TIMEOUT, 5, 5000, 0},
    {CURLOPT_TIMEOUT_MS, 250, 250, 0},
    {CURLOPT_TIMEOUT, 0, 0, 0},
    {CURLOPT_CONNECTTIMEOUT, 3, 0, 3000},
    {CURLOPT_CONNECTTIMEOUT_MS, 1500, 0, 1500},
};

Test(handle, timeouts_seconds_vs_ms) {
  size_t i;
  for (i = 0; i < sizeof(limit_cases) / sizeof(limit_cases[0]); i++) {
    struct cg_handle *h = cg_handle_add(FAKE(i), &fake_lib);
    set(h, limit_cases[i].opt, limit_cases[i].value);
    cr_expect_eq(h->timeout_ms, limit_cases[i].timeout_ms, "case %zu timeout_ms %ld", i,
                 h->timeout_ms);
    cr_expect_eq(h->connecttimeout_ms, limit_cases[i].connecttimeout_ms,
                 "case %zu connecttimeout_ms %ld", i, h->connecttimeout_ms);
    cg_handle_remove(FAKE(i));
  }
}

/* What the guard's "no transfer" run (guard.c) puts back: the host's protocol list, in
 * the form it was set, and VERBOSE. */
Test(handle, protocols_and_verbose_recorded) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib), *d;
  char list[] = "http,https";
  cr_assert_eq(h->protocols_kind, 0, "libcurl's default: all");
  set(h, CURLOPT_PROTOCOLS, (long) CURLPROTO_HTTP);
  cr_assert_eq(h->protocols_kind, 1);
  cr_assert_eq(h->protocols, (long) CURLPROTO_HTTP);
  set(h, CG_OPT_PROTOCOLS_STR, list);
  list[0] = 'X'; /* the shadow has its own copy */
  cr_assert_eq(h->protocols_kind, 2, "the one set last decides");
  cr_assert_str_eq(h->protocols_str, "http,https");
  set(h, CURLOPT_VERBOSE, 1L);
  cr_assert_eq(h->verbose, 1);
  d = cg_handle_dup(h, FAKE(2));
  cr_assert_not_null(d);
  cr_assert_str_eq(d->protocols_str, "http,https");
  cr_assert_neq(d->protocols_str, h->protocols_str);
  cg_handle_reset(h);
  cr_assert_eq(h->protocols_kind, 0);
  cr_assert_null(h->protocols_str);
  cr_assert_eq(h->verbose, 0);
  cg_handle_remove(FAKE(1));
  cg_handle_remove(FAKE(2));
}

Test(handle, timeout_last_setting_wins) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  set(h, CURLOPT_TIMEOUT, 30L);
  set(h, CURLOPT_TIMEOUT_MS, 1500L);
  cr_assert_eq(h->timeout_ms, 1500);
  set(h, CURLOPT_TIMEOUT, 2L);
  cr_assert_eq(h->timeout_ms, 2000);
  set(h, CURLOPT_CONNECTTIMEOUT_MS, 700L);
  set(h, CURLOPT_CONNECTTIMEOUT, 4L);
  cr_assert_eq(h->connecttimeout_ms, 4000);
  cg_handle_remove(FAKE(1));
}

/* libcurl's data->progress.callback: set by whichever of PROGRESSFUNCTION /
 * XFERINFOFUNCTION was set last, TRUE for a function and FALSE for NULL. */
Test(handle, progress_callback_flag_sequence) {
  static const struct {
    long opt;
    int set_fn; /* 1: the function, 0: NULL */
    int flag;
  } seq[] = {
      {CURLOPT_PROGRESSFUNCTION, 1, 1},  {CURLOPT_XFERINFOFUNCTION, 1, 1},
      {CURLOPT_XFERINFOFUNCTION, 0, 0},  /* NULL wins although PROGRESSFUNCTION is set */
      {CURLOPT_PROGRESSFUNCTION, 1, 1},  {CURLOPT_PROGRESSFUNCTION, 0, 0},
      {CURLOPT_XFERINFOFUNCTION, 1, 1},  {CURLOPT_PROGRESSFUNCTION, 0, 0},
  };
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  size_t i;

  cr_assert_eq(h->progress_callback_set, 0);
  for (i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
    if (seq[i].opt == CURLOPT_PROGRESSFUNCTION)
      set(h, seq[i].opt, seq[i].set_fn ? prog_cb : (curl_progress_callback) NULL);
    else
      set(h, seq[i].opt, seq[i].set_fn ? xfer_cb : (curl_xferinfo_callback) NULL);
    cr_expect_eq(h->progress_callback_set, seq[i].flag, "step %zu: flag %d, want %d", i,
                 h->progress_callback_set, seq[i].flag);
  }
  /* The functions themselves are remembered separately. */
  cr_assert(h->xferinfo_fn == xfer_cb);
  cr_assert_null(h->progress_fn);
  cg_handle_remove(FAKE(1));
}

/* ---- overridden options ---- */

/* Everything cg_attempt_install (attempt.c) points at the guard while an attempt runs,
 * plus the other spellings of the same libcurl fields (TIMEOUT, CONNECTTIMEOUT,
 * PROGRESSFUNCTION, PROGRESSDATA).  A host that sets one of these from a callback
 * during the attempt must only change the shadow: passed on, it would e.g. hand the
 * guard's progress callback the host's pointer instead of the attempt. */
static const long overridden_opts[] = {
    CURLOPT_WRITEFUNCTION,     CURLOPT_WRITEDATA,     CURLOPT_HEADERFUNCTION,
    CURLOPT_HEADERDATA,        CURLOPT_READFUNCTION,  CURLOPT_READDATA,
    CURLOPT_XFERINFOFUNCTION,  CURLOPT_XFERINFODATA,  CURLOPT_PROGRESSFUNCTION,
    CURLOPT_PROGRESSDATA,      CURLOPT_NOPROGRESS,    CURLOPT_ERRORBUFFER,
    CURLOPT_TIMEOUT,           CURLOPT_TIMEOUT_MS,    CURLOPT_CONNECTTIMEOUT,
    CURLOPT_CONNECTTIMEOUT_MS, CURLOPT_HTTPHEADER,    CURLOPT_PREREQFUNCTION,
    CURLOPT_PREREQDATA,        CURLOPT_SEEKFUNCTION,  CURLOPT_SEEKDATA,
    CURLOPT_RESOLVER_START_FUNCTION, CURLOPT_RESOLVER_START_DATA,
    CURLOPT_OPENSOCKETFUNCTION, CURLOPT_OPENSOCKETDATA, CURLOPT_HSTSREADFUNCTION,
};
static const long plain_opts[] = {CURLOPT_URL,        CURLOPT_POSTFIELDS, CURLOPT_VERBOSE,
                                  CURLOPT_CUSTOMREQUEST, CURLOPT_FOLLOWLOCATION,
                                  CURLOPT_USERAGENT,  CURLOPT_POST};

Test(handle, overridden_only_while_in_perform) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  size_t i;

  for (i = 0; i < sizeof(overridden_opts) / sizeof(overridden_opts[0]); i++)
    cr_expect_eq(cg_handle_overridden(h, overridden_opts[i]), 0,
                 "option %ld overridden outside perform", overridden_opts[i]);
  h->in_perform = 1;
  for (i = 0; i < sizeof(overridden_opts) / sizeof(overridden_opts[0]); i++)
    cr_expect_eq(cg_handle_overridden(h, overridden_opts[i]), 1,
                 "option %ld not overridden during perform", overridden_opts[i]);
  for (i = 0; i < sizeof(plain_opts) / sizeof(plain_opts[0]); i++)
    cr_expect_eq(cg_handle_overridden(h, plain_opts[i]), 0, "option %ld overridden",
                 plain_opts[i]);
  h->in_perform = 0;
  for (i = 0; i < sizeof(overridden_opts) / sizeof(overridden_opts[0]); i++)
    cr_expect_eq(cg_handle_overridden(h, overridden_opts[i]), 0,
                 "option %ld overridden after perform", overridden_opts[i]);
  cg_handle_remove(FAKE(1));
}

/* ---- reset and dup ---- */

static void fill(struct cg_handle *h, struct curl_slist *hdrs, int *data) {
  char *cpf = strdup("copied body");
  set(h, CURLOPT_URL, "https://api.example.com/v1/x");
  set(h, CURLOPT_CUSTOMREQUEST, "PATCH");
  set(h, CURLOPT_COPYPOSTFIELDS, cpf);
  free(cpf);
  set(h, CURLOPT_HTTPHEADER, hdrs);
  set(h, CURLOPT_WRITEFUNCTION, w_cb);
  set(h, CURLOPT_WRITEDATA, data);
  set(h, CURLOPT_READDATA, data);
  set(h, CURLOPT_XFERINFOFUNCTION, xfer_cb);
  set(h, CURLOPT_NOPROGRESS, 0L);
  set(h, CURLOPT_TIMEOUT, 9L);
  set(h, CURLOPT_CONNECTTIMEOUT_MS, 333L);
  set(h, CURLOPT_NOSIGNAL, 1L);
  set(h, CURLOPT_FOLLOWLOCATION, 1L);
}

Test(handle, reset_restores_defaults_keeps_lib) {
  struct cg_handle *h = cg_handle_add(FAKE(1), &fake_lib);
  static char l1[] = "Idempotency-Key: k";
  struct curl_slist n1 = {l1, NULL};
  int data;
  size_t n = cg_handle_count();

  fill(h, &n1, &data);
  cg_handle_reset(h);
  cr_assert_eq(h->curl, FAKE(1));
  cr_assert_eq(h->lib, &fake_lib);
  assert_defaults(h);
  cr_assert_eq(h->nosignal, 0);
  cr_assert_eq(cg_handle_get(FAKE(1)), h, "reset keeps the shadow in the map");
  cr_assert_eq(cg_handle_count(), n);
  /* Usable again after the reset. */
  set(h, CURLOPT_URL, "http://again/");
  cr_assert_str_eq(h->url, "http://again/");
  cg_handle_remove(FAKE(1));
}

Test(handle, dup_is_a_deep_copy) {
  struct cg_handle *src = cg_handle_add(FAKE(1), &fake_lib);
  static char l1[] = "Idempotency-Key: k";
  struct curl_slist n1 = {l1, NULL};
  struct cg_handle *d;
  int data;
  size_t n, len = 0;
  const char *b;

  set(src, CURLOPT_POSTFIELDSIZE, 4L);
  fill(src, &n1, &data);
  src->in_perform = 1;
  n = cg_handle_count();
  d = cg_handle_dup(src, FAKE(2));
  cr_assert_not_null(d);
  cr_assert_neq(d, src);
  cr_assert_eq(cg_handle_count(), n + 1);
  cr_assert_eq(cg_handle_get(FAKE(2)), d);
  cr_assert_eq(cg_handle_get(FAKE(1)), src);
  cr_assert_eq(d->curl, FAKE(2));
  cr_assert_eq(d->lib, &fake_lib);
  cr_assert_eq(d->in_perform, 0, "a new handle is not inside a perform");
  cr_assert_neq(d->url, src->url);
  cr_assert_neq(d->custom_request, src->custom_request);
  cr_assert_neq(d->copypostfields, src->copypostfields);

  /* Destroy the source completely: the copy must not notice. */
  src->in_perform = 0;
  cg_handle_reset(src);
  cg_handle_remove(FAKE(1));

  cr_assert_str_eq(d->url, "https://api.example.com/v1/x");
  cr_assert_str_eq(d->custom_request, "PATCH");
  cr_assert_str_eq(cg_handle_method(d), "PATCH");
  b = cg_handle_body(d, &len);
  cr_assert_not_null(b);
  cr_assert_eq(len, 4);
  cr_assert(memcmp(b, "copi", 4) == 0);
  cr_assert_eq(d->httpheader, &n1);
  cr_assert(d->write_fn == w_cb);
  cr_assert_eq(d->write_data, (void *) &data);
  cr_assert_eq(d->read_data, (void *) &data);
  cr_assert(d->xferinfo_fn == xfer_cb);
  cr_assert_eq(d->progress_callback_set, 1);
  cr_assert_eq(d->noprogress, 0);
  cr_assert_eq(d->timeout_ms, 9000);
  cr_assert_eq(d->connecttimeout_ms, 333);
  cr_assert_eq(d->nosignal, 0); /* never recorded */
  cr_assert_eq(d->method, CG_M_POST);
  cr_assert_eq(d->followlocation, 1);
  cr_assert_eq(cg_handle_header(d, "idempotency-key", NULL, 0), 1);
  cg_handle_remove(FAKE(2));
}

Test(handle, dup_of_defaults) {
  struct cg_handle *src = cg_handle_add(FAKE(1), &fake_lib);
  struct cg_handle *d = cg_handle_dup(src, FAKE(2));
  cr_assert_not_null(d);
  cg_handle_remove(FAKE(1));
  assert_defaults(d);
  cg_handle_remove(FAKE(2));
}

/* ---- concurrency ---- */

#define NTHREADS 8
#define PER_THREAD 1000

static int failures;

static void fail(void) {
  __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
}

/* Each thread: add, record, get, remove one handle at a time. */
static void *one_by_one(void *arg) {
  int t = (int) (intptr_t) arg, i;
  char url[64];

  for (i = 0; i < PER_THREAD; i++) {
    CURL *c = (CURL *) &arena[t][i];
    struct cg_handle *h = cg_handle_add(c, &fake_lib);
    if (!h) {
      fail();
      continue;
    }
    snprintf(url, sizeof(url), "https://h%d.example/%d", t, i);
    set(h, CURLOPT_URL, url);
    set(h, CURLOPT_TIMEOUT_MS, (long) (t * PER_THREAD + i));
    if (cg_handle_get(c) != h || !h->url || strcmp(h->url, url) != 0 ||
        h->timeout_ms != t * PER_THREAD + i || h->curl != c)
      fail();
    cg_handle_remove(c);
    if (cg_handle_get(c) != NULL)
      fail();
  }
  return NULL;
}

/* Each thread: add all of its handles, then check and remove them all. */
static void *in_bulk(void *arg) {
  int t = (int) (intptr_t) arg, i;
  char url[64];

  for (i = 0; i < PER_THREAD; i++) {
    struct cg_handle *h = cg_handle_add((CURL *) &arena[t][i], &fake_lib);
    if (!h) {
      fail();
      continue;
    }
    snprintf(url, sizeof(url), "https://h%d.example/%d", t, i);
    set(h, CURLOPT_URL, url);
  }
  for (i = 0; i < PER_THREAD; i++) {
    CURL *c = (CURL *) &arena[t][i];
    struct cg_handle *h = cg_handle_get(c);
    snprintf(url, sizeof(url), "https://h%d.example/%d", t, i);
    if (!h || h->curl != c || !h->url || strcmp(h->url, url) != 0)
      fail();
    if (cg_handle_count() == 0)
      fail();
    cg_handle_remove(c);
  }
  return NULL;
}

static void run_threads(void *(*fn)(void *)) {
  pthread_t th[NTHREADS];
  size_t start = cg_handle_count();
  int t;

  failures = 0;
  for (t = 0; t < NTHREADS; t++)
    cr_assert_eq(pthread_create(&th[t], NULL, fn, (void *) (intptr_t) t), 0);
  for (t = 0; t < NTHREADS; t++)
    pthread_join(th[t], NULL);
  cr_assert_eq(failures, 0, "%d inconsistencies under concurrency", failures);
  cr_assert_eq(cg_handle_count(), start, "count %zu, started at %zu", cg_handle_count(),
               start);
}

Test(handle, threads_one_by_one) {
  run_threads(one_by_one);
}

Test(handle, threads_in_bulk) {
  run_threads(in_bulk);
}

/* A handle freed where the guard cannot see it (libcurl's Curl_close of its closure
 * handle) and its address reused by a new handle: the stale shadow is replaced, so no
 * chain of the map holds one address twice and the map does not grow (issue 11 item 8). */
Test(handle, reused_address_replaces_the_stale_shadow) {
  size_t start = cg_handle_count();
  struct cg_handle *a, *b;
  int i;

  a = cg_handle_add(FAKE(77), &fake_lib);
  cr_assert_not_null(a);
  cg_handle_record(a, CURLOPT_URL, &(struct cg_optval){.u.p = "http://old.example/"});
  for (i = 0; i < 1000; i++) {
    b = cg_handle_add(FAKE(77), &other_lib);
    cr_assert_not_null(b);
  }
  cr_assert_eq(cg_handle_count(), start + 1, "%zu shadows for one address",
               cg_handle_count() - start);
  cr_assert_eq(cg_handle_get(FAKE(77)), b);
  cr_assert_eq(b->lib, &other_lib);
  cr_assert_null(b->url, "the new shadow starts from the defaults");
  cg_handle_remove(FAKE(77));
  cr_assert_null(cg_handle_get(FAKE(77)));
  cr_assert_eq(cg_handle_count(), start);
}

/* The shim records only the options cg_handle_keeps names (issue 16): any other option,
 * of every kind, must leave a shadow exactly as it was. */
Test(handle, untracked_options_change_nothing) {
  static const long kinds[] = {0, CURLOPTTYPE_OBJECTPOINT, CURLOPTTYPE_FUNCTIONPOINT,
                               CURLOPTTYPE_OFF_T, CURLOPTTYPE_BLOB};
  struct cg_handle *h = cg_handle_add(FAKE(5), &fake_lib), before;
  size_t k;
  long n, tracked = 0, stored = 0;

  cr_assert_not_null(h);
  set(h, CURLOPT_POSTFIELDSIZE, 3L); /* fields the switch could touch are not defaults */
  set(h, CURLOPT_COPYPOSTFIELDS, "abc");
  set(h, CURLOPT_URL, "http://x.example/");
  for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
    for (n = 0; n < CG_TRACK_SPAN + 100; n++) {
      long opt = kinds[k] + n;
      struct cg_optval v = {cg_opt_kind(opt), {.l = 0}};
      unsigned keep = cg_handle_keeps(opt);
      if (keep) {
        cr_assert_lt(n, CG_TRACK_SPAN, "option %ld past the table is kept", opt);
        tracked++;
        stored += keep < CG_KEEP_SWITCH;
        continue;
      }
      memcpy(&before, h, sizeof(before));
      cg_handle_record(h, opt, &v);
      cr_assert(memcmp(&before, h, sizeof(before)) == 0, "untracked option %ld changed the shadow",
                opt);
    }
  cr_assert_eq(tracked, 49, "%ld options tracked", tracked);
  cr_assert_eq(stored, 28, "%ld options stored as they are", stored);
  cr_assert_eq(cg_handle_keeps(CURLOPT_HTTPAUTH),
               offsetof(struct cg_handle, httpauth) / sizeof(void *));
  cr_assert(cg_handle_keeps(CURLOPT_URL) >= CG_KEEP_SWITCH);
  cr_assert(cg_handle_keeps(CURLOPT_POSTFIELDSIZE_LARGE) >= CG_KEEP_SWITCH);
  cr_assert_eq(cg_handle_keeps(CURLOPT_WRITEFUNCTION),
               offsetof(struct cg_handle, write_fn) / sizeof(void *));
  cr_assert_eq(cg_handle_keeps(CURLOPT_VERBOSE),
               offsetof(struct cg_handle, verbose) / sizeof(void *));
  cr_assert_eq(cg_handle_keeps(CURLOPT_HEADER), /* the write function's header lines */
               offsetof(struct cg_handle, include_header) / sizeof(void *));
  cr_assert(!cg_handle_keeps(CURLOPT_SSL_VERIFYPEER));
  cr_assert(!cg_handle_keeps(CURLOPT_USERAGENT));
  cr_assert(!cg_handle_keeps(-1));
  cr_assert(!cg_handle_keeps(LONG_MIN));
  cr_assert(!cg_handle_keeps(LONG_MAX));
  cg_handle_remove(FAKE(5));
}

/* cg_handle_keeps finds an option's kind as opt >> 13 instead of opt / 10000: for every
 * number the two ways agree (checked here over the option numbers and beyond, and at
 * numbers near multiples of 10000 and of 8192 up to the largest long). */
Test(handle, keeps_finds_the_kind_as_a_division_would) {
  unsigned long o, step;

  for (o = 0; o < 200000; o++) {
    unsigned long k = o / 10000, n = o % 10000;
    unsigned want = k < 5 && n < CG_TRACK_SPAN ? cg_handle_keep[k * CG_TRACK_SPAN + n] : 0;
    cr_assert_eq(cg_handle_keeps((long) o), want, "option %lu", o);
  }
  for (step = 1; step < ULONG_MAX / 16; step *= 3) {
    unsigned long base[] = {step * 10000, step * 8192, ULONG_MAX - step * 10000};
    size_t i;
    long d;
    for (i = 0; i < 3; i++)
      for (d = -600; d <= 600; d++) {
        o = base[i] + (unsigned long) d;
        if (o >= 5 * 10000)
          cr_assert_eq(cg_handle_keeps((long) o), 0, "number %lu", o);
      }
  }
}

/* Every option stored as it is lands, bit for bit, in its own field and nowhere else. */
Test(handle, stored_options_land_in_their_field) {
#define STORED(o, f) {o, offsetof(struct cg_handle, f)},
  static const struct {
    long opt;
    size_t off;
  } cases[] = {
      STORED(CURLOPT_HTTPHEADER, httpheader)
      STORED(CURLOPT_FOLLOWLOCATION, followlocation)
      STORED(CURLOPT_WRITEFUNCTION, write_fn)
      STORED(CURLOPT_WRITEDATA, write_data)
      STORED(CURLOPT_HEADERFUNCTION, header_fn)
      STORED(CURLOPT_HEADERDATA, header_data)
      STORED(CURLOPT_READFUNCTION, read_fn)
      STORED(CURLOPT_READDATA, read_data)
      STORED(CURLOPT_SEEKFUNCTION, seek_fn)
      STORED(CURLOPT_SEEKDATA, seek_data)
      STORED(CURLOPT_PREREQFUNCTION, prereq_fn)
      STORED(CURLOPT_PREREQDATA, prereq_data)
      STORED(CURLOPT_RESOLVER_START_FUNCTION, resolver_start_fn)
      STORED(CURLOPT_RESOLVER_START_DATA, resolver_start_data)
      STORED(CURLOPT_OPENSOCKETFUNCTION, opensocket_fn)
      STORED(CURLOPT_OPENSOCKETDATA, opensocket_data)
      STORED(CURLOPT_HSTSREADFUNCTION, hstsread_fn)
      STORED(CURLOPT_XFERINFODATA, progress_data)
      STORED(CURLOPT_ERRORBUFFER, errorbuffer)
      STORED(CURLOPT_TIMEOUT_MS, timeout_ms)
      STORED(CURLOPT_CONNECTTIMEOUT_MS, connecttimeout_ms)
      STORED(CURLOPT_VERBOSE, verbose)
  };
#undef STORED
  struct cg_handle *h = cg_handle_add(FAKE(6), &fake_lib), before;
  size_t i, j;

  cr_assert_not_null(h);
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    uintptr_t bits = (uintptr_t) 0x5a5a1234f00du + i;
    struct cg_optval v = {cg_opt_kind(cases[i].opt), {.bits = bits}};
    cr_assert_eq(cg_handle_keeps(cases[i].opt), cases[i].off / sizeof(void *));
    memcpy(&before, h, sizeof(before));
    cg_handle_record(h, cases[i].opt, &v);
    cr_assert(memcmp((char *) h + cases[i].off, &bits, sizeof(bits)) == 0, "option %ld",
              cases[i].opt);
    for (j = 0; j < sizeof(before); j++)
      if (j < cases[i].off || j >= cases[i].off + sizeof(bits))
        cr_assert_eq(((char *) h)[j], ((char *) &before)[j], "option %ld changed byte %zu",
                     cases[i].opt, j);
  }
  cg_handle_remove(FAKE(6));
}

/* The thread's memo of its last lookup never outlives the shadow: removed, replaced, and
 * an address freed and made again each give the map's answer of the moment. */
Test(handle, memo_follows_add_and_remove) {
  struct cg_handle *a, *b;

  cr_assert_null(cg_handle_get(FAKE(9)), "unknown");
  a = cg_handle_add(FAKE(9), &fake_lib);
  cr_assert_eq(cg_handle_get(FAKE(9)), a, "a negative answer is not kept past an add");
  cr_assert_eq(cg_handle_get(FAKE(9)), a);
  cg_handle_remove(FAKE(9));
  cr_assert_null(cg_handle_get(FAKE(9)), "removed");
  b = cg_handle_add(FAKE(9), &other_lib);
  cr_assert_eq(cg_handle_get(FAKE(9)), b);
  cr_assert_eq(cg_handle_get(FAKE(9))->lib, &other_lib);
  a = cg_handle_add(FAKE(9), &fake_lib); /* the stale shadow replaced in place */
  cr_assert_eq(cg_handle_get(FAKE(9)), a);
  cr_assert_eq(cg_handle_get(FAKE(9))->lib, &fake_lib);
  cg_handle_remove(FAKE(9));
  cr_assert_null(cg_handle_get(FAKE(9)));
}

/* A handle passed between threads: each thread's memo sees the other's removes and adds
 * (the hand-over, here a join, orders them). */
static void *memo_get(void *arg) {
  return cg_handle_get((CURL *) arg);
}

static struct cg_handle *memo_get_in_thread(CURL *c) {
  pthread_t t;
  void *r;
  cr_assert_eq(pthread_create(&t, NULL, memo_get, c), 0);
  cr_assert_eq(pthread_join(t, &r), 0);
  return r;
}

static void *memo_replace(void *arg) {
  cg_handle_remove((CURL *) arg);
  return cg_handle_add((CURL *) arg, &other_lib);
}

Test(handle, memo_across_threads) {
  struct cg_handle *a = cg_handle_add(FAKE(11), &fake_lib), *b;
  pthread_t t;
  void *r;

  cr_assert_eq(cg_handle_get(FAKE(11)), a);
  cr_assert_eq(memo_get_in_thread(FAKE(11)), a);
  cr_assert_eq(pthread_create(&t, NULL, memo_replace, FAKE(11)), 0);
  cr_assert_eq(pthread_join(t, &r), 0);
  b = r;
  cr_assert_not_null(b);
  cr_assert_eq(cg_handle_get(FAKE(11)), b, "the other thread's remove voids this memo");
  cr_assert_eq(b->lib, &other_lib);
  cg_handle_remove(FAKE(11));
  cr_assert_null(memo_get_in_thread(FAKE(11)));
  cr_assert_null(cg_handle_get(FAKE(11)));
}

/* handle.h cg_auth_identity: a value signed per request is cut to the identity in it
 * (SigV4's access key id, Digest's username, a draft-cavage keyId), any other is kept. */
Test(handle, auth_identity_of_signed_values) {
  static const struct {
    const char *in, *out;
  } t[] = {
      {"Bearer sk-proj-abc", "Bearer sk-proj-abc"},
      {"Basic dXNlcjpwYXNz", "Basic dXNlcjpwYXNz"},
      {"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261206/us-east-1/bedrock/aws4_request, "
       "SignedHeaders=host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82",
       "AKIDEXAMPLE"},
      {"aws4-hmac-sha256 SignedHeaders=host,Credential=AKID2/x", "AKID2"},
      {"AWS4-HMAC-SHA256 Credential=NOSCOPE, Signature=ab", "NOSCOPE"},
      {"AWS4-HMAC-SHA256 Signature=ab", ""},
      {"AWS4-", ""},
      {"Digest username=\"alice\", realm=\"api\", nonce=\"n1\", response=\"6629fae4\"", "alice"},
      {"Digest realm=\"a, b\", USERNAME=\"bob\"", "bob"},
      {"Digest realm=\"username=eve\", username=carol", "carol"},
      {"Digest usernam=\"x\", username*=UTF-8''%C3%A4", ""},
      {"Digest username=\"unterminated", "unterminated"},
      {"Digest abc==", ""},
      {"Signature keyId=\"tenant-7\",algorithm=\"hs2019\",signature=\"c2ln\"", "tenant-7"},
      {"Signature ,,, ==", ""},
  };
  size_t i;
  for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", t[i].in);
    cg_auth_identity(buf);
    cr_assert_str_eq(buf, t[i].out, "%s", t[i].in);
  }
}
