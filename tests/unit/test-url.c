/* test-url.c - the parts of a request URL the guard records (url.h).  The query string
 * and userinfo must never survive (SPEC section 5: "path (no query string, ever)"). */
#include "url.h"

#include <criterion/criterion.h>
#include <string.h>

static const struct {
  const char *url;
  const char *scheme, *host;
  int port;
  const char *path;
} ok_cases[] = {
    {"https://api.openai.com/v1/chat/completions", "https", "api.openai.com", 443,
     "/v1/chat/completions"},
    {"http://example.com/", "http", "example.com", 80, "/"},
    {"http://example.com:8080/a/b", "http", "example.com", 8080, "/a/b"},
    {"https://example.com:8443", "https", "example.com", 8443, "/"},
    /* Query and fragment dropped. */
    {"https://api.example.com/v1/models?key=sk-secret&x=1", "https", "api.example.com", 443,
     "/v1/models"},
    {"https://api.example.com/v1/models#frag", "https", "api.example.com", 443, "/v1/models"},
    {"https://api.example.com/v1/x#frag?notquery", "https", "api.example.com", 443, "/v1/x"},
    {"https://api.example.com?key=sk-secret", "https", "api.example.com", 443, "/"},
    {"https://api.example.com:444?key=sk-secret", "https", "api.example.com", 444, "/"},
    {"https://api.example.com#top", "https", "api.example.com", 443, "/"},
    /* Userinfo dropped, also with '@' (and ':') in the password. */
    {"https://user:pass@api.example.com/v1", "https", "api.example.com", 443, "/v1"},
    {"https://user:p@ss@api.example.com:8443/v1/x?k=v", "https", "api.example.com", 8443,
     "/v1/x"},
    {"https://user@api.example.com/", "https", "api.example.com", 443, "/"},
    {"https://u:p:w@h.example/", "https", "h.example", 443, "/"},
    /* '@' after the authority is not userinfo. */
    {"https://api.example.com/users/a@b.c", "https", "api.example.com", 443, "/users/a@b.c"},
    {"https://api.example.com/?email=a@b.c", "https", "api.example.com", 443, "/"},
    /* IPv6 literals. */
    {"http://[::1]:8080/x", "http", "::1", 8080, "/x"},
    {"http://[::1]/", "http", "::1", 80, "/"},
    {"https://[2001:DB8::1]/v1", "https", "2001:db8::1", 443, "/v1"},
    {"http://user:pw@[::1]:9000/p?q", "http", "::1", 9000, "/p"},
    /* No scheme: libcurl guesses from the host's first label (urlapi.c), else http. */
    {"ftp.example.com/pub", "ftp", "ftp.example.com", -1, "/pub"},
    {"FTP.example.com", "ftp", "ftp.example.com", -1, "/"},
    {"dict.example.com", "dict", "dict.example.com", -1, "/"},
    {"ldap.example.com", "ldap", "ldap.example.com", -1, "/"},
    {"imap.example.com", "imap", "imap.example.com", -1, "/"},
    {"smtp.example.com", "smtp", "smtp.example.com", -1, "/"},
    {"pop3.example.com", "pop3", "pop3.example.com", -1, "/"},
    {"user@ftp.example.com/x", "ftp", "ftp.example.com", -1, "/x"},
    {"ftpx.example.com", "http", "ftpx.example.com", 80, "/"},
    {"ftp/x", "http", "ftp", 80, "/x"},
    /* One slash (or three) after the scheme, as libcurl takes it. */
    {"http:/example.com/x", "http", "example.com", 80, "/x"},
    {"https:///example.com/x", "https", "example.com", 443, "/x"},
    {"example.com/path", "http", "example.com", 80, "/path"},
    {"example.com", "http", "example.com", 80, "/"},
    {"localhost:3000/v1?x=1", "http", "localhost", 3000, "/v1"},
    /* Case: scheme and host lowered, path kept. */
    {"HTTPS://API.OpenAI.COM/V1/Chat", "https", "api.openai.com", 443, "/V1/Chat"},
    /* Empty port falls back to the default. */
    {"http://example.com:/x", "http", "example.com", 80, "/x"},
    /* Unknown scheme: no default port. */
    {"ftp://files.example/pub", "ftp", "files.example", -1, "/pub"},
    /* Found by fuzzing: atoi of the port wrapped ("99999999999" -> 1215752191).  A port
     * that is not 0-65535 in digits is unknown, as libcurl refuses it. */
    {"http://h:99999999999/", "http", "h", -1, "/"},
    {"http://h:65536/", "http", "h", -1, "/"},
    {"http://h:65535/", "http", "h", 65535, "/"},
    {"http://h:80abc/", "http", "h", -1, "/"},
    {"http://h:-1/", "http", "h", -1, "/"},
    {"http://[::1]:4294967377/", "http", "::1", -1, "/"},
    /* Leading blanks are skipped. */
    {"  https://example.com/x", "https", "example.com", 443, "/x"},
};

Test(url, parse) {
  size_t i;
  for (i = 0; i < sizeof(ok_cases) / sizeof(ok_cases[0]); i++) {
    struct cg_url u;
    int r;
    memset(&u, 0x5A, sizeof(u));
    r = cg_url_parse(ok_cases[i].url, &u);
    cr_expect_eq(r, 0, "%s: returned %d", ok_cases[i].url, r);
    if (r != 0)
      continue;
    cr_expect_str_eq(u.scheme, ok_cases[i].scheme, "%s: scheme %s", ok_cases[i].url, u.scheme);
    cr_expect_str_eq(u.host, ok_cases[i].host, "%s: host %s", ok_cases[i].url, u.host);
    cr_expect_eq(u.port, ok_cases[i].port, "%s: port %d", ok_cases[i].url, u.port);
    cr_expect_str_eq(u.path, ok_cases[i].path, "%s: path %s", ok_cases[i].url, u.path);
    cr_expect_null(strchr(u.path, '?'), "%s: query in the path", ok_cases[i].url);
    cr_expect_null(strstr(u.host, "pass"), "%s: userinfo in the host", ok_cases[i].url);
  }
}

/* A URL without a scheme whose query holds "://": the "://" is not the end of a scheme
 * (a scheme is ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), RFC 3986 3.1), so libcurl
 * guesses http for the whole URL and the host is the one before the first '/'. */
static const struct {
  const char *url;
  const char *host, *path;
} schemeless_cases[] = {
    {"h.io/?u=s://x/secret", "h.io", "/"},
    {"a.io/r?to=http://evil.example/x", "a.io", "/r"},
    {"api.example/x?cb=ftp://y", "api.example", "/x"},
};

Test(url, schemeless_with_scheme_like_text_in_query) {
  size_t i;
  for (i = 0; i < sizeof(schemeless_cases) / sizeof(schemeless_cases[0]); i++) {
    struct cg_url u;
    cr_expect_eq(cg_url_parse(schemeless_cases[i].url, &u), 0, "%s", schemeless_cases[i].url);
    cr_expect_str_eq(u.scheme, "http", "%s: scheme \"%s\"", schemeless_cases[i].url, u.scheme);
    cr_expect_str_eq(u.host, schemeless_cases[i].host, "%s: host \"%s\"",
                     schemeless_cases[i].url, u.host);
    cr_expect_str_eq(u.path, schemeless_cases[i].path, "%s: path \"%s\" (from the query!)",
                     schemeless_cases[i].url, u.path);
  }
}

static const char *const bad_cases[] = {
    /* "http:///path" is host "path" to libcurl (one to three slashes); four are not. */
    "http:////path", "https://", "http://:8080/", "http://user@/x", "http://[::1/x", "", "/just/a/path",
};

Test(url, missing_host_is_an_error) {
  size_t i;
  for (i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
    struct cg_url u;
    cr_expect_eq(cg_url_parse(bad_cases[i], &u), -1, "\"%s\" should fail (host \"%s\")",
                 bad_cases[i], u.host);
  }
  {
    struct cg_url u;
    cr_expect_eq(cg_url_parse(NULL, &u), -1);
  }
}

Test(url, long_parts_are_cut_safely) {
  static char url[4096];
  struct cg_url u;
  size_t i;

  strcpy(url, "https://example.com/");
  for (i = strlen(url); i < sizeof(url) - 20; i++)
    url[i] = 'a';
  strcpy(url + i, "?key=secret");
  cr_assert_eq(cg_url_parse(url, &u), 0);
  cr_assert_eq(strlen(u.path), sizeof(u.path) - 1);
  cr_assert_null(strchr(u.path, '?'));

  strcpy(url, "https://");
  for (i = strlen(url); i < 600; i++)
    url[i] = 'h';
  strcpy(url + i, ".example/x");
  cr_assert_eq(cg_url_parse(url, &u), 0);
  cr_assert_eq(strlen(u.host), sizeof(u.host) - 1);
  cr_assert_str_eq(u.path, "/x");
}

Test(url, is_http) {
  static const struct {
    const char *url;
    int http;
  } c[] = {{"http://a/", 1}, {"HTTPS://a/", 1}, {"ftp://a/", 0}, {"ws://a/", 0}, {"a/", 1}};
  size_t i;
  for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
    struct cg_url u;
    cr_assert_eq(cg_url_parse(c[i].url, &u), 0);
    cr_expect_eq(cg_url_is_http(&u), c[i].http, "%s", c[i].url);
  }
}

/* file: URLs never go to a host, with one slash too (issue 11 item 9): never http. */
Test(url, file_urls_are_not_http) {
  static const char *const urls[] = {"file:/etc/hostname", "file:///etc/hostname",
                                     "file://localhost/etc/hostname", "FILE:/etc/hostname"};
  size_t i;
  for (i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
    struct cg_url u;
    cg_url_parse(urls[i], &u);
    cr_expect_str_eq(u.scheme, "file", "%s: scheme \"%s\"", urls[i], u.scheme);
    cr_expect_eq(cg_url_is_http(&u), 0, "%s: taken for http", urls[i]);
    cr_expect_eq(cg_url_parse(urls[i], &u), -1, "%s: has no host", urls[i]);
  }
}

/* CURLOPT_DEFAULT_PROTOCOL replaces the guess for a URL without a scheme only. */
Test(url, default_protocol) {
  struct cg_url u;
  cr_assert_eq(cg_url_parse_default("example.com/x", "ftp", &u), 0);
  cr_expect_str_eq(u.scheme, "ftp");
  cr_assert_eq(cg_url_parse_default("ftp.example.com/x", "https", &u), 0);
  cr_expect_str_eq(u.scheme, "https");
  cr_expect_eq(u.port, 443);
  cr_assert_eq(cg_url_parse_default("http://example.com/x", "ftp", &u), 0);
  cr_expect_str_eq(u.scheme, "http");
}
