/* test-lib.c - telling libcurl's own calls of its exported API from the host's (lib.h
 * cg_lib_for_caller_ex; issue 11 item 8: libcurl 7.88 makes its connection cache's
 * closure handle with curl_easy_init() and frees it with Curl_close). */
#include "lib.h"

#include <criterion/criterion.h>
#include <dlfcn.h>

static void *curl_so;

static void setup(void) {
  curl_so = dlopen("libcurl.so.4", RTLD_NOW | RTLD_GLOBAL);
}

TestSuite(lib, .init = setup);

Test(lib, a_call_from_inside_libcurl_is_internal) {
  const struct cg_lib *lib;
  char *inside;
  int internal = -1;

  if (!curl_so)
    cr_skip_test("libcurl.so.4 cannot be loaded");
  inside = (char *) dlsym(curl_so, "curl_easy_perform");
  cr_assert_not_null(inside);
  lib = cg_lib_for_caller_ex(inside + 16, &internal);
  cr_assert_not_null(lib);
  cr_assert_eq(internal, 1, "libcurl's own call site");
  internal = -1;
  cr_assert_eq(cg_lib_for_caller_ex(inside + 16, &internal), lib);
  cr_assert_eq(internal, 1, "the same answer from the call-site cache");
}

Test(lib, a_call_from_the_host_is_not) {
  int internal = -1;
  if (!curl_so)
    cr_skip_test("libcurl.so.4 cannot be loaded");
  cr_assert_not_null(cg_lib_for_caller_ex(__builtin_return_address(0), &internal));
  cr_assert_eq(internal, 0);
  internal = -1;
  cr_assert_not_null(cg_lib_for_caller_ex((void *) setup, &internal));
  cr_assert_eq(internal, 0, "the main program's call site");
}
