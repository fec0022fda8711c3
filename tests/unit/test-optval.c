/* test-optval.c - setopt arguments are read and forwarded with the type libcurl
 * expects for the option number (optval.h, CASES.md "libcurl API details"). */
#include "optval.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

/* ---- cg_opt_kind: the five ranges and their boundaries ---- */

static const struct {
  long opt;
  enum cg_optkind kind;
} kind_cases[] = {
    {0, CG_OPT_LONG},
    {1, CG_OPT_LONG},
    {9999, CG_OPT_LONG},
    {10000, CG_OPT_PTR},
    {10001, CG_OPT_PTR},
    {19999, CG_OPT_PTR},
    {20000, CG_OPT_FUNC},
    {29999, CG_OPT_FUNC},
    {30000, CG_OPT_OFFT},
    {39999, CG_OPT_OFFT},
    {40000, CG_OPT_BLOB},
    {40291, CG_OPT_BLOB},
    {49999, CG_OPT_BLOB},
    /* Real options of each range. */
    {CURLOPT_VERBOSE, CG_OPT_LONG},
    {CURLOPT_TIMEOUT_MS, CG_OPT_LONG},
    {CURLOPT_POSTFIELDSIZE, CG_OPT_LONG},
    {CURLOPT_URL, CG_OPT_PTR},
    {CURLOPT_HTTPHEADER, CG_OPT_PTR},
    {CURLOPT_WRITEDATA, CG_OPT_PTR},
    {CURLOPT_WRITEFUNCTION, CG_OPT_FUNC},
    {CURLOPT_XFERINFOFUNCTION, CG_OPT_FUNC},
    {CURLOPT_POSTFIELDSIZE_LARGE, CG_OPT_OFFT},
    {CURLOPT_MAXFILESIZE_LARGE, CG_OPT_OFFT},
    {CURLOPT_SSLCERT_BLOB, CG_OPT_BLOB},
};

Test(optval, kind_ranges_and_boundaries) {
  size_t i;
  for (i = 0; i < sizeof(kind_cases) / sizeof(kind_cases[0]); i++)
    cr_expect_eq(cg_opt_kind(kind_cases[i].opt), kind_cases[i].kind,
                 "cg_opt_kind(%ld) = %d, want %d", kind_cases[i].opt,
                 (int) cg_opt_kind(kind_cases[i].opt), (int) kind_cases[i].kind);
}

/* ---- cg_optval_read through a real variadic call ---- */

static void rd(struct cg_optval *o, long opt, ...) {
  va_list ap;
  va_start(ap, opt);
  cg_optval_read(opt, &ap, o);
  va_end(ap);
}

static size_t sample_write(char *p, size_t s, size_t n, void *u) {
  (void) p;
  (void) u;
  return s * n;
}

static int sample_xferinfo(void *u, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
  (void) u;
  return (int) (a + b + c + d);
}

Test(optval, read_long) {
  static const long values[] = {0, 1, -1, 30000, LONG_MAX, LONG_MIN};
  size_t i;
  for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
    struct cg_optval o;
    memset(&o, 0xA5, sizeof(o));
    rd(&o, CURLOPT_TIMEOUT_MS, values[i]);
    cr_expect_eq(o.kind, CG_OPT_LONG);
    cr_expect_eq(o.u.l, values[i], "long %ld arrived as %ld", values[i], o.u.l);
  }
}

Test(optval, read_pointer) {
  static char url[] = "https://api.example.com/v1/chat";
  struct cg_optval o;

  rd(&o, CURLOPT_URL, url);
  cr_assert_eq(o.kind, CG_OPT_PTR);
  cr_assert_eq(o.u.p, (void *) url);
  rd(&o, CURLOPT_WRITEDATA, (void *) NULL);
  cr_assert_eq(o.kind, CG_OPT_PTR);
  cr_assert_null(o.u.p);
}

Test(optval, read_function_pointer) {
  struct cg_optval o;

  rd(&o, CURLOPT_WRITEFUNCTION, sample_write);
  cr_assert_eq(o.kind, CG_OPT_FUNC);
  cr_assert(o.u.f == (void (*)(void)) sample_write);
  cr_assert_eq(((curl_write_callback) o.u.f)(NULL, 3, 7, NULL), 21,
               "the function pointer must stay callable");
  rd(&o, CURLOPT_XFERINFOFUNCTION, sample_xferinfo);
  cr_assert_eq(o.kind, CG_OPT_FUNC);
  cr_assert(o.u.f == (void (*)(void)) sample_xferinfo);
  rd(&o, CURLOPT_XFERINFOFUNCTION, (curl_xferinfo_callback) NULL);
  cr_assert(o.u.f == NULL);
}

Test(optval, read_off_t_large_values_intact) {
  static const curl_off_t values[] = {
      (curl_off_t) 5000000000LL,        /* CASES.md: must arrive intact */
      (curl_off_t) 4294967296LL,        /* 2^32 */
      (curl_off_t) 4294967295LL,        /* 2^32 - 1 */
      (curl_off_t) -1,                  /* "unknown size" */
      (curl_off_t) 0x7FFFFFFFFFFFFFFFLL, /* CURL_OFF_T_MAX */
  };
  size_t i;
  for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
    struct cg_optval o;
    rd(&o, CURLOPT_POSTFIELDSIZE_LARGE, values[i]);
    cr_expect_eq(o.kind, CG_OPT_OFFT);
    cr_expect_eq(o.u.o, values[i], "curl_off_t %lld arrived as %lld", (long long) values[i],
                 (long long) o.u.o);
  }
}

Test(optval, read_blob) {
  static char cert[] = "-----BEGIN CERTIFICATE-----";
  struct curl_blob blob = {cert, sizeof(cert) - 1, CURL_BLOB_COPY};
  struct cg_optval o;

  rd(&o, CURLOPT_SSLCERT_BLOB, &blob);
  cr_assert_eq(o.kind, CG_OPT_BLOB);
  cr_assert_eq(o.u.p, (void *) &blob);
  cr_assert_eq(((struct curl_blob *) o.u.p)->len, sizeof(cert) - 1);
}

/* Several arguments of different types read from one va_list in sequence: each read
 * must consume exactly one argument of its own type, or the next one comes out wrong. */
static void rd_seq(struct cg_optval *out, size_t n, const long *opts, ...) {
  va_list ap;
  size_t i;
  va_start(ap, opts);
  for (i = 0; i < n; i++)
    cg_optval_read(opts[i], &ap, &out[i]);
  va_end(ap);
}

Test(optval, read_mixed_sequence_consumes_one_argument_each) {
  static const long opts[] = {CURLOPT_POSTFIELDSIZE_LARGE, CURLOPT_VERBOSE, CURLOPT_URL,
                              CURLOPT_WRITEFUNCTION, CURLOPT_MAXFILESIZE_LARGE,
                              CURLOPT_TIMEOUT_MS};
  static char url[] = "http://x/";
  struct cg_optval o[6];

  rd_seq(o, 6, opts, (curl_off_t) 5000000000LL, 1L, url, sample_write,
         (curl_off_t) -7, 2500L);
  cr_expect_eq(o[0].u.o, (curl_off_t) 5000000000LL);
  cr_expect_eq(o[1].u.l, 1L);
  cr_expect_eq(o[2].u.p, (void *) url);
  cr_expect(o[3].u.f == (void (*)(void)) sample_write);
  cr_expect_eq(o[4].u.o, (curl_off_t) -7);
  cr_expect_eq(o[5].u.l, 2500L);
}

/* ---- cg_optval_forward to a fake variadic setopt ---- */

/* What the fake setopt received, read with the type libcurl would use (ranges written
 * out here independently of cg_opt_kind). */
static struct {
  int calls;
  CURL *curl;
  long opt;
  int kind; /* 0 long, 1 ptr, 2 func, 3 off_t, 4 blob */
  long l;
  void *p;
  void (*f)(void);
  curl_off_t o;
} got;

static CURLcode fake_setopt(CURL *curl, CURLoption option, ...) {
  va_list ap;
  long opt = (long) option;

  got.calls++;
  got.curl = curl;
  got.opt = opt;
  va_start(ap, option);
  if (opt < 10000) {
    got.kind = 0;
    got.l = va_arg(ap, long);
  } else if (opt < 20000) {
    got.kind = 1;
    got.p = va_arg(ap, void *);
  } else if (opt < 30000) {
    got.kind = 2;
    got.f = va_arg(ap, void (*)(void));
  } else if (opt < 40000) {
    got.kind = 3;
    got.o = va_arg(ap, curl_off_t);
  } else {
    got.kind = 4;
    got.p = va_arg(ap, struct curl_blob *);
  }
  va_end(ap);
  /* A distinctive result, so the test sees that forward returns it. */
  return opt == CURLOPT_VERBOSE ? CURLE_UNKNOWN_OPTION : CURLE_OK;
}

static CURL *const fake_curl = (CURL *) (uintptr_t) 0x1000;

Test(optval, forward_long) {
  struct cg_optval v;
  rd(&v, CURLOPT_TIMEOUT_MS, 123456L);
  memset(&got, 0, sizeof(got));
  cr_assert_eq(cg_optval_forward(fake_setopt, fake_curl, CURLOPT_TIMEOUT_MS, &v), CURLE_OK);
  cr_assert_eq(got.calls, 1);
  cr_assert_eq(got.curl, fake_curl);
  cr_assert_eq(got.opt, (long) CURLOPT_TIMEOUT_MS);
  cr_assert_eq(got.kind, 0);
  cr_assert_eq(got.l, 123456L);
}

Test(optval, forward_returns_setopt_result) {
  struct cg_optval v;
  rd(&v, CURLOPT_VERBOSE, 1L);
  cr_assert_eq(cg_optval_forward(fake_setopt, fake_curl, CURLOPT_VERBOSE, &v),
               CURLE_UNKNOWN_OPTION);
}

Test(optval, forward_pointer) {
  static char url[] = "https://example.org/";
  struct cg_optval v;
  rd(&v, CURLOPT_URL, url);
  memset(&got, 0, sizeof(got));
  cg_optval_forward(fake_setopt, fake_curl, CURLOPT_URL, &v);
  cr_assert_eq(got.calls, 1);
  cr_assert_eq(got.kind, 1);
  cr_assert_eq(got.p, (void *) url);
}

Test(optval, forward_function_pointer) {
  struct cg_optval v;
  rd(&v, CURLOPT_WRITEFUNCTION, sample_write);
  memset(&got, 0, sizeof(got));
  cg_optval_forward(fake_setopt, fake_curl, CURLOPT_WRITEFUNCTION, &v);
  cr_assert_eq(got.calls, 1);
  cr_assert_eq(got.kind, 2);
  cr_assert(got.f == (void (*)(void)) sample_write);
}

Test(optval, forward_off_t_intact) {
  struct cg_optval v;
  rd(&v, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) 5000000000LL);
  memset(&got, 0, sizeof(got));
  cg_optval_forward(fake_setopt, fake_curl, CURLOPT_POSTFIELDSIZE_LARGE, &v);
  cr_assert_eq(got.calls, 1);
  cr_assert_eq(got.kind, 3);
  cr_assert_eq(got.o, (curl_off_t) 5000000000LL, "got %lld", (long long) got.o);
}

Test(optval, forward_blob) {
  static char data[] = "abc";
  struct curl_blob blob = {data, 3, CURL_BLOB_NOCOPY};
  struct cg_optval v;
  rd(&v, CURLOPT_SSLCERT_BLOB, &blob);
  memset(&got, 0, sizeof(got));
  cg_optval_forward(fake_setopt, fake_curl, CURLOPT_SSLCERT_BLOB, &v);
  cr_assert_eq(got.calls, 1);
  cr_assert_eq(got.kind, 4);
  cr_assert_eq(got.p, (void *) &blob);
}
