/* test-config.c - environment + JSON file -> configuration (config.h, SPEC sections 3, 4).
 * The environment is a fake getenv over a static table, so nothing here depends on the
 * real environment of the test run. */
#include "config.h"
#include "limiter.h"

#include "tmpfile.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <malloc.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the fake environment ---- */

struct envvar {
  const char *name, *value;
};

#define ENV_MAX 32
static struct envvar env_table[ENV_MAX];
static int env_n;

static void env_clear(void) {
  env_n = 0;
}

static void env_set(const char *name, const char *value) {
  int i;
  for (i = 0; i < env_n; i++) {
    if (strcmp(env_table[i].name, name) == 0) {
      env_table[i].value = value;
      return;
    }
  }
  cr_assert_lt(env_n, ENV_MAX);
  env_table[env_n].name = name;
  env_table[env_n].value = value;
  env_n++;
}

static const char *fake_getenv(const char *name) {
  int i;
  for (i = 0; i < env_n; i++)
    if (strcmp(env_table[i].name, name) == 0)
      return env_table[i].value;
  return NULL;
}

static void base_env(void) {
  env_clear();
  env_set("HOME", "/home/tester");
}

/* ---- defaults ---- */

static void assert_numeric_defaults(const struct cg_config *c) {
  cr_assert_eq(c->connect_timeout_ms, 10000);
  cr_assert_eq(c->first_byte_timeout_ms, 120000);
  cr_assert_eq(c->read_timeout_ms, 120000);
  cr_assert_eq(c->deadline_ms, 600000);
  cr_assert_eq(c->max_attempts, 3);
  cr_assert_eq(c->backoff_base_ms, 1000);
  cr_assert_eq(c->backoff_cap_ms, 30000);
  cr_assert_eq(c->max_retry_after_ms, 60000);
  cr_assert_eq(c->jitter, CG_JITTER_FULL);
  cr_assert_eq(c->rpm, 0.0);
  cr_assert_eq(c->tpm, 0.0);
  cr_assert_eq(c->max_inflight, 0);
}

Test(config, defaults) {
  struct cg_config c;
  char state[64];

  base_env();
  cr_assert_eq(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.enabled, 0);
  assert_numeric_defaults(&c);
  cr_assert_str_eq(c.log_path, "/home/tester/.local/state/curlguard/usage.jsonl");
  snprintf(state, sizeof(state), "/dev/shm/curlguard-%u.state", (unsigned) getuid());
  cr_assert_str_eq(c.state_path, state);
  cr_assert_eq(c.nhosts, 1);
  cr_assert_str_eq(c.hosts[0], "*");
  cr_assert_null(c.hosts[1], "the host list is NULL-terminated");
  cr_assert_null(c.task_id);
  cr_assert_null(c.prices_path);
  cr_assert_null(c.request_id_header);
  cr_assert(cg_config_host_guarded(&c, "api.openai.com"));
  cr_assert(cg_config_host_guarded(&c, "localhost"));
  cg_config_free(&c);
}

Test(config, log_path_under_xdg_state_home) {
  struct cg_config c;
  base_env();
  env_set("XDG_STATE_HOME", "/var/xdg-state");
  cr_assert_eq(cg_config_load(&c, fake_getenv), 0);
  cr_assert_str_eq(c.log_path, "/var/xdg-state/curlguard/usage.jsonl");
  cg_config_free(&c);
}

Test(config, relative_xdg_state_home_is_ignored) {
  /* XDG Base Directory spec: a relative path is invalid and must be ignored. */
  struct cg_config c;
  base_env();
  env_set("XDG_STATE_HOME", "relative/dir");
  cg_config_load(&c, fake_getenv);
  cr_assert_str_eq(c.log_path, "/home/tester/.local/state/curlguard/usage.jsonl");
  cg_config_free(&c);
}

/* ---- CURLGUARD on/off ---- */

static const struct {
  const char *value; /* NULL = unset */
  int enabled;
} enable_cases[] = {
    {"1", 1},    {"on", 1},  {"ON", 1},   {"true", 1}, {"TRUE", 1}, {"yes", 1},
    {"0", 0},    {"off", 0}, {"OFF", 0},  {NULL, 0},   {"", 0},     {"false", 0},
};

Test(config, curlguard_switch) {
  size_t i;
  for (i = 0; i < sizeof(enable_cases) / sizeof(enable_cases[0]); i++) {
    struct cg_config c;
    int problems;
    base_env();
    if (enable_cases[i].value)
      env_set("CURLGUARD", enable_cases[i].value);
    problems = cg_config_load(&c, fake_getenv);
    cr_expect_eq(c.enabled, enable_cases[i].enabled, "CURLGUARD=%s -> enabled %d",
                 enable_cases[i].value ? enable_cases[i].value : "(unset)", c.enabled);
    cr_expect_eq(problems, 0, "CURLGUARD=%s reported %d problems",
                 enable_cases[i].value ? enable_cases[i].value : "(unset)", problems);
    cg_config_free(&c);
  }
}

Test(config, curlguard_garbage_is_reported_and_stays_off) {
  struct cg_config c;
  base_env();
  env_set("CURLGUARD", "maybe");
  cr_assert_gt(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.enabled, 0);
  cg_config_free(&c);
}

/* ---- values from the environment ---- */

Test(config, environment_values) {
  struct cg_config c;
  base_env();
  env_set("CURLGUARD_CONNECT_TIMEOUT_MS", "2500");
  env_set("CURLGUARD_FIRST_BYTE_TIMEOUT_MS", "90000");
  env_set("CURLGUARD_READ_TIMEOUT_MS", "45000");
  env_set("CURLGUARD_DEADLINE_MS", "300000");
  env_set("CURLGUARD_MAX_ATTEMPTS", "5");
  env_set("CURLGUARD_BACKOFF_BASE_MS", "200");
  env_set("CURLGUARD_BACKOFF_CAP_MS", "8000");
  env_set("CURLGUARD_JITTER", "decorrelated");
  env_set("CURLGUARD_RPM", "60");
  env_set("CURLGUARD_TPM", "1.500005e5");
  env_set("CURLGUARD_MAX_INFLIGHT", "4");
  env_set("CURLGUARD_TASK_ID", "nightly-42");
  env_set("CURLGUARD_PRICES", "/etc/prices.json");
  env_set("CURLGUARD_REQUEST_ID_HEADER", "Idempotency-Key");
  env_set("CURLGUARD_TASK_ID_HEADER", "X-Task-Id");
  env_set("CURLGUARD_STATE", "/tmp/x.state");
  env_set("CURLGUARD_LOG", "/tmp/usage.jsonl");
  cr_assert_eq(cg_config_load(&c, fake_getenv), 0);
  cr_assert_str_eq(c.task_id_header, "X-Task-Id");
  cr_assert_eq(c.connect_timeout_ms, 2500);
  cr_assert_eq(c.first_byte_timeout_ms, 90000);
  cr_assert_eq(c.read_timeout_ms, 45000);
  cr_assert_eq(c.deadline_ms, 300000);
  cr_assert_eq(c.max_attempts, 5);
  cr_assert_eq(c.backoff_base_ms, 200);
  cr_assert_eq(c.backoff_cap_ms, 8000);
  cr_assert_eq(c.jitter, CG_JITTER_DECORRELATED);
  cr_assert_eq(c.rpm, 60.0);
  cr_assert_eq(c.tpm, 150000.5);
  cr_assert_eq(c.max_inflight, 4);
  cr_assert_str_eq(c.task_id, "nightly-42");
  cr_assert_str_eq(c.prices_path, "/etc/prices.json");
  cr_assert_str_eq(c.request_id_header, "Idempotency-Key");
  cr_assert_str_eq(c.state_path, "/tmp/x.state");
  cr_assert_str_eq(c.log_path, "/tmp/usage.jsonl");
  cg_config_free(&c);
}

static const struct {
  const char *value;
  int mode;
} jitter_cases[] = {
    {"full", CG_JITTER_FULL},   {"equal", CG_JITTER_EQUAL},
    {"decorrelated", CG_JITTER_DECORRELATED}, {"none", CG_JITTER_NONE},
    {"EQUAL", CG_JITTER_EQUAL}, {"bogus", -1},
    {"", -1},
};

Test(config, jitter_names) {
  size_t i;
  for (i = 0; i < sizeof(jitter_cases) / sizeof(jitter_cases[0]); i++) {
    struct cg_config c;
    int problems;
    cr_expect_eq(cg_jitter_parse(jitter_cases[i].value), jitter_cases[i].mode,
                 "cg_jitter_parse(\"%s\")", jitter_cases[i].value);
    base_env();
    env_set("CURLGUARD_JITTER", jitter_cases[i].value);
    problems = cg_config_load(&c, fake_getenv);
    if (jitter_cases[i].mode < 0) {
      cr_expect_gt(problems, 0, "JITTER=\"%s\" not reported", jitter_cases[i].value);
      cr_expect_eq(c.jitter, CG_JITTER_FULL);
    } else {
      cr_expect_eq(problems, 0);
      cr_expect_eq((int) c.jitter, jitter_cases[i].mode);
    }
    cg_config_free(&c);
  }
}

Test(config, log_special_values) {
  static const struct {
    const char *value;
    const char *path; /* NULL = off */
  } cases[] = {{"off", NULL}, {"OFF", NULL}, {"-", "-"}, {"/x/y.jsonl", "/x/y.jsonl"}};
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct cg_config c;
    base_env();
    env_set("CURLGUARD_LOG", cases[i].value);
    cr_expect_eq(cg_config_load(&c, fake_getenv), 0);
    if (cases[i].path)
      cr_expect(c.log_path && strcmp(c.log_path, cases[i].path) == 0,
                "CURLGUARD_LOG=%s -> %s", cases[i].value, c.log_path ? c.log_path : "NULL");
    else
      cr_expect_null(c.log_path, "CURLGUARD_LOG=%s -> %s", cases[i].value, c.log_path);
    cg_config_free(&c);
  }
}

/* ---- malformed numbers: reported, default kept ---- */

static const char *const numeric_vars[] = {
    "CURLGUARD_CONNECT_TIMEOUT_MS", "CURLGUARD_FIRST_BYTE_TIMEOUT_MS",
    "CURLGUARD_READ_TIMEOUT_MS",    "CURLGUARD_DEADLINE_MS",
    "CURLGUARD_MAX_ATTEMPTS",       "CURLGUARD_BACKOFF_BASE_MS",
    "CURLGUARD_BACKOFF_CAP_MS",     "CURLGUARD_RPM",
    "CURLGUARD_TPM",                "CURLGUARD_MAX_INFLIGHT",
};
static const char *const bad_numbers[] = {"abc", "-5", "1e99", "12ms", "", "nan", "inf",
                                          "5 0", "99999999999999999999999",
                                          /* strtod(3) takes these; no setting means them */
                                          "0x10", " 5", "\t5", "5 ", ".", "1e", "1e+",
                                          "+", "0x1p4", "infinity"};

Test(config, malformed_numbers_reported_default_kept) {
  size_t v, b;
  for (v = 0; v < sizeof(numeric_vars) / sizeof(numeric_vars[0]); v++) {
    for (b = 0; b < sizeof(bad_numbers) / sizeof(bad_numbers[0]); b++) {
      struct cg_config c;
      int problems;
      base_env();
      env_set(numeric_vars[v], bad_numbers[b]);
      problems = cg_config_load(&c, fake_getenv);
      cr_expect_gt(problems, 0, "%s=\"%s\" not reported", numeric_vars[v], bad_numbers[b]);
      cr_expect_eq(c.connect_timeout_ms, 10000, "%s=\"%s\"", numeric_vars[v], bad_numbers[b]);
      cr_expect_eq(c.first_byte_timeout_ms, 120000, "%s=\"%s\"", numeric_vars[v],
                   bad_numbers[b]);
      cr_expect_eq(c.read_timeout_ms, 120000, "%s=\"%s\"", numeric_vars[v], bad_numbers[b]);
      cr_expect_eq(c.deadline_ms, 600000, "%s=\"%s\"", numeric_vars[v], bad_numbers[b]);
      cr_expect_eq(c.max_attempts, 3, "%s=\"%s\"", numeric_vars[v], bad_numbers[b]);
      cr_expect_eq(c.backoff_base_ms, 1000, "%s=\"%s\"", numeric_vars[v], bad_numbers[b]);
      cr_expect_eq(c.backoff_cap_ms, 30000, "%s=\"%s\"", numeric_vars[v], bad_numbers[b]);
      cr_expect_eq(c.rpm, 0.0, "%s=\"%s\"", numeric_vars[v], bad_numbers[b]);
      cr_expect_eq(c.tpm, 0.0, "%s=\"%s\"", numeric_vars[v], bad_numbers[b]);
      cr_expect_eq(c.max_inflight, 0, "%s=\"%s\"", numeric_vars[v], bad_numbers[b]);
      cg_config_free(&c);
    }
  }
}

/* Integer settings refuse fractions and out-of-range values. */
static const struct {
  const char *var, *value;
} bad_specific[] = {
    {"CURLGUARD_MAX_ATTEMPTS", "0"},          {"CURLGUARD_MAX_ATTEMPTS", "2.5"},
    {"CURLGUARD_CONNECT_TIMEOUT_MS", "0"},    {"CURLGUARD_CONNECT_TIMEOUT_MS", "1.5"},
    {"CURLGUARD_DEADLINE_MS", "-1"},          {"CURLGUARD_MAX_INFLIGHT", "-1"},
};

Test(config, out_of_range_and_fractions) {
  size_t i;
  for (i = 0; i < sizeof(bad_specific) / sizeof(bad_specific[0]); i++) {
    struct cg_config c;
    base_env();
    env_set(bad_specific[i].var, bad_specific[i].value);
    cr_expect_gt(cg_config_load(&c, fake_getenv), 0, "%s=%s not reported", bad_specific[i].var,
                 bad_specific[i].value);
    assert_numeric_defaults(&c);
    cg_config_free(&c);
  }
}

Test(config, one_bad_value_does_not_spoil_the_others) {
  struct cg_config c;
  base_env();
  env_set("CURLGUARD_MAX_ATTEMPTS", "lots");
  env_set("CURLGUARD_CONNECT_TIMEOUT_MS", "1234");
  env_set("CURLGUARD_JITTER", "none");
  cr_assert_eq(cg_config_load(&c, fake_getenv), 1);
  cr_assert_eq(c.max_attempts, 3);
  cr_assert_eq(c.connect_timeout_ms, 1234);
  cr_assert_eq(c.jitter, CG_JITTER_NONE);
  cg_config_free(&c);
}

Test(config, cap_below_base_is_corrected) {
  struct cg_config c;
  base_env();
  env_set("CURLGUARD_BACKOFF_BASE_MS", "5000");
  env_set("CURLGUARD_BACKOFF_CAP_MS", "2000");
  cr_assert_gt(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.backoff_base_ms, 5000);
  cr_assert_geq(c.backoff_cap_ms, c.backoff_base_ms);
  cr_assert_eq(c.backoff_cap_ms, 5000);
  cg_config_free(&c);
}

/* ---- hosts ---- */

static const struct {
  const char *globs;
  const char *host;
  int guarded;
} host_cases[] = {
    {"*.openai.com", "api.openai.com", 1},
    {"*.openai.com", "API.OpenAI.COM", 1},
    {"*.openai.com", "openai.com", 0},
    {"*.openai.com", "evil-openai.com", 0},
    {"*.openai.com", "api.openai.com.evil.net", 0},
    {"*.OPENAI.com", "api.openai.com", 1},
    {"api.anthropic.com,*.openai.com", "api.anthropic.com", 1},
    {"api.anthropic.com,*.openai.com", "x.anthropic.com", 0},
    {"api.anthropic.com, *.openai.com", "chat.openai.com", 1},
    {"api.anthropic.com , generativelanguage.googleapis.com", "generativelanguage.googleapis.com",
     1},
    {"localhost", "localhost", 1},
    {"localhost", "127.0.0.1", 0},
    {"127.0.0.*", "127.0.0.1", 1},
    {"*", "anything.example", 1},
};

Test(config, host_globs) {
  size_t i;
  for (i = 0; i < sizeof(host_cases) / sizeof(host_cases[0]); i++) {
    struct cg_config c;
    base_env();
    env_set("CURLGUARD_HOSTS", host_cases[i].globs);
    cr_expect_eq(cg_config_load(&c, fake_getenv), 0, "HOSTS=%s", host_cases[i].globs);
    cr_expect_eq(cg_config_host_guarded(&c, host_cases[i].host), host_cases[i].guarded,
                 "HOSTS=\"%s\" host %s: want %d", host_cases[i].globs, host_cases[i].host,
                 host_cases[i].guarded);
    cr_expect_eq(cg_config_host_guarded(&c, NULL), 0);
    cg_config_free(&c);
  }
}

Test(config, host_list_parsed) {
  struct cg_config c;
  base_env();
  env_set("CURLGUARD_HOSTS", "a.example, *.b.example,c.example");
  cr_assert_eq(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.nhosts, 3);
  cr_assert_str_eq(c.hosts[0], "a.example");
  cr_assert_str_eq(c.hosts[1], "*.b.example");
  cr_assert_str_eq(c.hosts[2], "c.example");
  cr_assert_null(c.hosts[3]);
  cg_config_free(&c);
}

Test(config, many_hosts) {
  struct cg_config c;
  char list[2048] = "";
  char name[32];
  int i;
  for (i = 0; i < 40; i++) {
    snprintf(name, sizeof(name), "%sh%d.example", i ? "," : "", i);
    strcat(list, name);
  }
  base_env();
  env_set("CURLGUARD_HOSTS", list);
  cr_assert_eq(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.nhosts, 40);
  cr_assert(cg_config_host_guarded(&c, "h0.example"));
  cr_assert(cg_config_host_guarded(&c, "h39.example"));
  cr_assert_not(cg_config_host_guarded(&c, "h40.example"));
  cg_config_free(&c);
}

Test(config, empty_host_list_reported) {
  struct cg_config c;
  base_env();
  env_set("CURLGUARD_HOSTS", " , ");
  cr_assert_gt(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.nhosts, 1);
  cr_assert_str_eq(c.hosts[0], "*");
  cg_config_free(&c);
}

/* ---- the JSON config file ---- */

Test(config, file_values) {
  struct cg_config c;
  char *path = cg_test_write_tmp("config", "{\n"
                          "  \"connect_timeout_ms\": 5000,\n"
                          "  \"first_byte_timeout_ms\": 30000,\n"
                          "  \"max_attempts\": 7,\n"
                          "  \"jitter\": \"equal\",\n"
                          "  \"hosts\": [\"*.openai.com\", \"api.anthropic.com\"],\n"
                          "  \"task_id\": \"from-file\",\n"
                          "  \"rpm\": 120.5,\n"
                          "  \"request_id_header\": \"Idempotency-Key\",\n"
                          "  \"pools\": [{\"name\": \"openai\", \"hosts\": [\"*.openai.com\"]}]\n"
                          "}\n");
  base_env();
  env_set("CURLGUARD_CONFIG", path);
  cr_assert_eq(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.connect_timeout_ms, 5000);
  cr_assert_eq(c.first_byte_timeout_ms, 30000);
  cr_assert_eq(c.max_attempts, 7);
  cr_assert_eq(c.jitter, CG_JITTER_EQUAL);
  cr_assert_eq(c.nhosts, 2);
  cr_assert(cg_config_host_guarded(&c, "api.openai.com"));
  cr_assert(cg_config_host_guarded(&c, "api.anthropic.com"));
  cr_assert_not(cg_config_host_guarded(&c, "example.com"));
  cr_assert_str_eq(c.task_id, "from-file");
  cr_assert_eq(c.rpm, 120.5);
  cr_assert_str_eq(c.request_id_header, "Idempotency-Key");
  cr_assert_eq(c.read_timeout_ms, 120000, "keys the file lacks keep their defaults");
  cr_assert_eq(c.enabled, 0, "only CURLGUARD switches the guard on");
  cg_config_free(&c);
  unlink(path);
  free(path);
}

Test(config, env_wins_over_file) {
  struct cg_config c;
  char *path = cg_test_write_tmp("config", "{\"connect_timeout_ms\": 5000, \"max_attempts\": 7, "
                          "\"jitter\": \"equal\", \"hosts\": \"*.openai.com\", "
                          "\"log\": \"/from/file.jsonl\"}");
  base_env();
  env_set("CURLGUARD_CONFIG", path);
  env_set("CURLGUARD_CONNECT_TIMEOUT_MS", "2500");
  env_set("CURLGUARD_JITTER", "none");
  env_set("CURLGUARD_HOSTS", "api.anthropic.com");
  env_set("CURLGUARD_LOG", "off");
  cr_assert_eq(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.connect_timeout_ms, 2500);
  cr_assert_eq(c.jitter, CG_JITTER_NONE);
  cr_assert_eq(c.max_attempts, 7, "the file still wins over the default");
  cr_assert_not(cg_config_host_guarded(&c, "api.openai.com"));
  cr_assert(cg_config_host_guarded(&c, "api.anthropic.com"));
  cr_assert_null(c.log_path);
  cg_config_free(&c);
  unlink(path);
  free(path);
}

/* A relative state path is made absolute against the working directory when the
 * configuration is read (state.c opens the path again later, after a host's chdir). */
Test(config, relative_state_path_made_absolute) {
  struct cg_config c;
  char cwd[4096], want[4200];
  char *path = cg_test_write_tmp("config", "{\"state\": \"from-file.state\"}");

  cr_assert_not_null(getcwd(cwd, sizeof(cwd)));
  base_env();
  env_set("CURLGUARD_STATE", "sub/dir/x.state");
  cr_assert_eq(cg_config_load(&c, fake_getenv), 0);
  snprintf(want, sizeof(want), "%s/sub/dir/x.state", cwd);
  cr_assert_str_eq(c.state_path, want);
  cg_config_free(&c);

  base_env();
  env_set("CURLGUARD_CONFIG", path);
  cr_assert_eq(cg_config_load(&c, fake_getenv), 0);
  snprintf(want, sizeof(want), "%s/from-file.state", cwd);
  cr_assert_str_eq(c.state_path, want);
  cg_config_free(&c);

  base_env();
  env_set("CURLGUARD_STATE", "/abs/y.state");
  cr_assert_eq(cg_config_load(&c, fake_getenv), 0);
  cr_assert_str_eq(c.state_path, "/abs/y.state", "an absolute path is kept as given");
  cg_config_free(&c);
  unlink(path);
  free(path);
}

Test(config, malformed_json_reported_env_still_loads) {
  struct cg_config c;
  char *path = cg_test_write_tmp("config", "{\"max_attempts\": 5, \"jitter\": ");
  base_env();
  env_set("CURLGUARD_CONFIG", path);
  env_set("CURLGUARD_CONNECT_TIMEOUT_MS", "4321");
  cr_assert_gt(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.connect_timeout_ms, 4321);
  cr_assert_eq(c.max_attempts, 3);
  cr_assert_eq(c.jitter, CG_JITTER_FULL);
  cr_assert_not_null(c.state_path);
  cg_config_free(&c);
  unlink(path);
  free(path);
}

Test(config, json_not_an_object_reported) {
  struct cg_config c;
  char *path = cg_test_write_tmp("config", "[1, 2, 3]");
  base_env();
  env_set("CURLGUARD_CONFIG", path);
  cr_assert_gt(cg_config_load(&c, fake_getenv), 0);
  assert_numeric_defaults(&c);
  cg_config_free(&c);
  unlink(path);
  free(path);
}

Test(config, missing_file_reported) {
  struct cg_config c;
  base_env();
  env_set("CURLGUARD_CONFIG", "/nonexistent/curlguard/config.json");
  env_set("CURLGUARD_MAX_ATTEMPTS", "4");
  cr_assert_gt(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.max_attempts, 4);
  cg_config_free(&c);
}

Test(config, unknown_key_reported_rest_loads) {
  struct cg_config c;
  char *path = cg_test_write_tmp("config", "{\"max_attempts\": 5, \"no_such_key\": 1, \"jitter\": \"none\"}");
  base_env();
  env_set("CURLGUARD_CONFIG", path);
  cr_assert_eq(cg_config_load(&c, fake_getenv), 1);
  cr_assert_eq(c.max_attempts, 5);
  cr_assert_eq(c.jitter, CG_JITTER_NONE);
  cg_config_free(&c);
  unlink(path);
  free(path);
}

Test(config, bad_values_in_file_reported_rest_loads) {
  struct cg_config c;
  char *path = cg_test_write_tmp("config", "{\"max_attempts\": \"lots\", \"connect_timeout_ms\": -5, "
                          "\"deadline_ms\": 2.5, \"hosts\": [1, 2], \"jitter\": \"equal\", "
                          "\"read_timeout_ms\": 7000}");
  base_env();
  env_set("CURLGUARD_CONFIG", path);
  cr_assert_eq(cg_config_load(&c, fake_getenv), 4);
  cr_assert_eq(c.max_attempts, 3);
  cr_assert_eq(c.connect_timeout_ms, 10000);
  cr_assert_eq(c.deadline_ms, 600000);
  cr_assert_eq(c.nhosts, 1);
  cr_assert_str_eq(c.hosts[0], "*");
  cr_assert_eq(c.jitter, CG_JITTER_EQUAL);
  cr_assert_eq(c.read_timeout_ms, 7000);
  cg_config_free(&c);
  unlink(path);
  free(path);
}

Test(config, file_cap_below_base_corrected) {
  struct cg_config c;
  char *path = cg_test_write_tmp("config", "{\"backoff_base_ms\": 4000, \"backoff_cap_ms\": 100}");
  base_env();
  env_set("CURLGUARD_CONFIG", path);
  cr_assert_gt(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.backoff_base_ms, 4000);
  cr_assert_eq(c.backoff_cap_ms, 4000);
  cg_config_free(&c);
  unlink(path);
  free(path);
}

Test(config, file_cannot_enable) {
  struct cg_config c;
  char *path = cg_test_write_tmp("config", "{\"curlguard\": \"on\", \"enabled\": true}");
  base_env();
  env_set("CURLGUARD_CONFIG", path);
  cg_config_load(&c, fake_getenv);
  cr_assert_eq(c.enabled, 0);
  cg_config_free(&c);
  unlink(path);
  free(path);
}

Test(config, free_then_reload) {
  struct cg_config c;
  base_env();
  env_set("CURLGUARD_TASK_ID", "t1");
  cg_config_load(&c, fake_getenv);
  cg_config_free(&c);
  cr_assert_null(c.task_id);
  cr_assert_null(c.hosts);
  cr_assert_eq(c.nhosts, 0);
  env_set("CURLGUARD_TASK_ID", "t2");
  cg_config_load(&c, fake_getenv);
  cr_assert_str_eq(c.task_id, "t2");
  cg_config_free(&c);
}

/* An ignored pool (no name, or a second of one name) and a pool that repeats "hosts"
 * give their host lists back (issue 11 item 9): what load + free leave allocated does
 * not grow with the number of loads (mallinfo2: bytes in use; LSan says the same under
 * make check-asan). */
Test(config, ignored_pools_and_repeated_hosts_do_not_leak) {
  struct cg_config c;
  struct cg_pool_cfg scratch;
  size_t before, after;
  int i;
  char *path = cg_test_write_tmp("config", "{\"pools\": ["
                          "{\"hosts\": [\"nameless.example\", \"b.example\"]},"
                          "{\"name\": \"twice\", \"hosts\": [\"a.example\"]},"
                          "{\"name\": \"twice\", \"hosts\": [\"c.example\", \"d.example\"]},"
                          "{\"name\": \"again\", \"hosts\": [\"e.example\"], "
                          "\"hosts\": [\"f.example\", \"g.example\"]}]}");
  base_env();
  env_set("CURLGUARD_CONFIG", path);
  for (i = 0; i < 20; i++) { /* warm-up: stdio buffers, the allocator's own pools */
    cg_config_load(&c, fake_getenv);
    cg_config_free(&c);
  }
  before = mallinfo2().uordblks;
  for (i = 0; i < 200; i++) {
    cg_config_load(&c, fake_getenv);
    cr_assert_eq(c.npools, 2);
    cr_assert_str_eq(cg_config_pool(&c, "g.example", &scratch)->name, "again");
    cg_config_free(&c);
  }
  after = mallinfo2().uordblks;
  /* Leaking, 200 loads kept about 60 KB (300 bytes a load); the allocator's own noise is
   * a few hundred bytes. */
  cr_expect_lt(after, before + 4096, "%zu bytes more in use after 200 loads",
               after - before);
  unlink(path);
  free(path);
}

/* Found by fuzzing (LeakSanitizer, in the SAN=1 build): a pool given "hosts" twice, a
 * pool ignored for having no name, and a second pool of the same name leaked their host
 * lists.  The last "hosts" wins; ignored pools are freed. */
Test(config, ignored_pools_keep_the_last_hosts_and_free_the_rest) {
  struct cg_config c;
  char *path = cg_test_write_tmp("config", "{\"pools\": ["
                          "{\"name\": \"a\", \"hosts\": [\"x.example\"], \"hosts\": \"y.example\"},"
                          "{\"hosts\": [\"nameless.example\"]},"
                          "{\"name\": \"a\", \"hosts\": [\"dup.example\"]},"
                          "{\"name\": \"" 
                          "a-name-longer-than-forty-seven-bytes-is-ignored-as-a-pool\","
                          " \"hosts\": [\"long.example\"]}]}");
  base_env();
  env_set("CURLGUARD_CONFIG", path);
  cr_assert_gt(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.npools, 1);
  cr_assert_str_eq(c.pools[0].name, "a");
  cr_assert_eq(c.pools[0].nhosts, 1);
  cr_assert_str_eq(c.pools[0].hosts[0], "y.example");
  cg_config_free(&c);
  unlink(path);
  free(path);
#ifdef __SANITIZE_ADDRESS__
  /* In the SAN=1 build, fail here rather than in a report after the test passed. */
  cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "memory leaked (see the report above)");
#endif
}

/* Duplicate names in a long list (helper-67: the check compared every pool with every
 * earlier one, 0.77 s of each guarded process for 20,000 pools; now a hash set): each
 * duplicate is still found wherever it is, at the start, in the middle or at the end of
 * the list, the first pool of a name is the one kept, the later one is ignored with one
 * line naming it, and the kept pools stay in the file's order. */
Test(config, duplicate_pool_names_found_anywhere_in_a_long_list) {
  enum { N = 5000 };
  /* where a duplicate goes (after pool `at`) and the pool whose name it repeats */
  static const struct { int at, of; } dups[] = {
      {0, 0}, {1, 0}, {2500, 2500}, {2600, 17}, {N - 1, N - 1}, {N - 1, 0}, {N - 1, 2499}};
  size_t cap = (size_t) N * 64 + 4096, at = 0, nd = sizeof(dups) / sizeof(dups[0]);
  char *text = malloc(cap), *path, dir[] = "/tmp/cg-test-dups-XXXXXX", err_path[64],
       *err = malloc(65536);
  struct cg_config c;
  int i, fd, saved;
  ssize_t got;

  cr_assert(text && err);
  at += (size_t) snprintf(text + at, cap - at, "{\"pools\": [");
  for (i = 0; i < N; i++) {
    at += (size_t) snprintf(text + at, cap - at, "%s{\"name\": \"p%05d\", \"hosts\": "
                            "[\"h%05d.example\"]}", i ? ", " : "", i, i);
    for (size_t d = 0; d < nd; d++)
      if (dups[d].at == i)
        at += (size_t) snprintf(text + at, cap - at, ", {\"name\": \"p%05d\", \"hosts\": "
                                "[\"dup%zu.example\"]}", dups[d].of, d);
  }
  at += (size_t) snprintf(text + at, cap - at, "]}");
  cr_assert_lt(at, cap - 1);
  path = cg_test_write_tmp("config", text);
  cr_assert_not_null(mkdtemp(dir));
  snprintf(err_path, sizeof(err_path), "%s/stderr", dir);
  fd = open(err_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  cr_assert_geq(fd, 0);
  saved = dup(STDERR_FILENO);
  cr_assert_eq(dup2(fd, STDERR_FILENO), STDERR_FILENO);
  base_env();
  env_set("CURLGUARD_CONFIG", path);
  cr_expect_eq(cg_config_load(&c, fake_getenv), (int) nd);
  dup2(saved, STDERR_FILENO);
  close(saved);
  got = pread(fd, err, 65535, 0);
  err[got > 0 ? got : 0] = '\0';
  close(fd);
  cr_assert_eq(c.npools, (size_t) N);
  for (i = 0; i < N; i++) {
    char name[16], host[32];
    snprintf(name, sizeof(name), "p%05d", i);
    snprintf(host, sizeof(host), "h%05d.example", i);
    cr_assert_str_eq(c.pools[i].name, name);
    cr_assert_eq(c.pools[i].nhosts, 1);
    cr_assert_str_eq(c.pools[i].hosts[0], host, "pool %d kept a duplicate's hosts", i);
  }
  {
    const char *p = err;
    for (size_t d = 0; d < nd; d++) { /* one line per duplicate, in the file's order */
      char line[96];
      snprintf(line, sizeof(line), "config: two pools are named \"p%05d\"; the second is "
               "ignored\n", dups[d].of);
      p = strstr(p, line);
      cr_assert_not_null(p, "no line for duplicate %zu in:\n%s", d, err);
      p += strlen(line);
    }
    cr_assert_null(strstr(p, "two pools"), "a line too many:\n%s", err);
  }
  cg_config_free(&c);
  unlink(err_path);
  rmdir(dir);
  unlink(path);
  free(path);
  free(text);
  free(err);
}

/* A pool carries its name's key in the state file, made once with the name (issue 16: the
 * limiter does not hash it per call): the config's pools and the per-host ones alike.  A
 * key that differed from cg_limiter_name_hash would split one pool in two, between
 * processes or between calls. */
Test(config, pools_carry_their_names_state_key) {
  struct cg_config c;
  struct cg_pool_cfg s1;
  const struct cg_pool_cfg *p;
  char *path = cg_test_write_tmp("config", "{\"pools\": ["
                                 "{\"name\": \"openai\", \"hosts\": [\"api.openai.com\"]},"
                                 "{\"name\": \"local\", \"hosts\": [\"127.0.0.1:*\"]}]}");
  base_env();
  env_set("CURLGUARD_CONFIG", path);
  cg_config_load(&c, fake_getenv);
  cr_assert_eq(c.npools, 2);
  cr_assert_eq(c.pools[0].name_hash, cg_limiter_name_hash("openai"));
  cr_assert_eq(c.pools[1].name_hash, cg_limiter_name_hash("local"));
  cr_assert_neq(c.pools[0].name_hash, c.pools[1].name_hash);
  p = cg_config_pool_at(&c, "127.0.0.1", 8080, "http", &s1);
  cr_assert_eq(p, &c.pools[1]);
  memset(&s1, 0x5a, sizeof(s1)); /* a scratch pool's old contents never show through */
  p = cg_config_pool_at(&c, "example.com", 8443, "https", &s1);
  cr_assert_eq(p, &s1);
  cr_assert_str_eq(p->name, "example.com:8443");
  cr_assert_eq(p->name_hash, cg_limiter_name_hash("example.com:8443"));
  p = cg_config_pool(&c, "example.com", &s1);
  cr_assert_eq(p->name_hash, cg_limiter_name_hash("example.com"));
  cg_config_free(&c);
  unlink(path);
  free(path);
}

/* ---- pools per host and port, the learned rate's switch (issue 12 items 5, 7) ---- */

Test(config, unmatched_pools_are_per_host_and_port) {
  struct cg_config c;
  struct cg_pool_cfg s1, s2;
  base_env();
  cg_config_load(&c, fake_getenv);
  cr_assert_str_eq(cg_config_pool_at(&c, "api.openai.com", 443, "https", &s1)->name,
                   "api.openai.com");
  cr_assert_str_eq(cg_config_pool_at(&c, "example.com", 80, "http", &s1)->name, "example.com");
  cr_assert_str_eq(cg_config_pool_at(&c, "example.com", 443, "http", &s1)->name,
                   "example.com:443");
  cr_assert_str_eq(cg_config_pool_at(&c, "127.0.0.1", 8080, "http", &s1)->name,
                   "127.0.0.1:8080");
  cr_assert_str_eq(cg_config_pool_at(&c, "127.0.0.1", 8081, "http", &s2)->name,
                   "127.0.0.1:8081");
  cr_assert_str_eq(cg_config_pool_at(&c, "::1", 8080, "http", &s1)->name, "[::1]:8080");
  cr_assert_str_eq(cg_config_pool(&c, "127.0.0.1", &s1)->name, "127.0.0.1"); /* no port */
  cr_assert_eq(cg_config_pool_at(&c, "x.example", 8080, "http", &s1)->lim.adaptive, 1);
  cg_config_free(&c);
}

Test(config, globs_match_host_or_host_and_port) {
  struct cg_config c;
  struct cg_pool_cfg s;
  char *path = cg_test_write_tmp("config", "{\"pools\": ["
                          "{\"name\": \"one\", \"hosts\": [\"127.0.0.1:8080\"]},"
                          "{\"name\": \"local\", \"hosts\": [\"localhost\"], \"adaptive\": false},"
                          "{\"name\": \"bad\", \"hosts\": [\"bad.example\"], \"adaptive\": 3}]}");
  base_env();
  env_set("CURLGUARD_CONFIG", path);
  cg_config_load(&c, fake_getenv);
  cr_assert_str_eq(cg_config_pool_at(&c, "127.0.0.1", 8080, "http", &s)->name, "one");
  cr_assert_str_eq(cg_config_pool_at(&c, "127.0.0.1", 8081, "http", &s)->name,
                   "127.0.0.1:8081");
  cr_assert_str_eq(cg_config_pool_at(&c, "localhost", 9000, "http", &s)->name, "local");
  cr_assert_eq(cg_config_pool_at(&c, "localhost", 9000, "http", &s)->lim.adaptive, 0);
  /* A bad "adaptive" is reported and the top level's (on) is used. */
  cr_assert_eq(cg_config_pool_at(&c, "bad.example", 443, "https", &s)->lim.adaptive, 1);
  cg_config_free(&c);
  unlink(path);
}

/* limit_keys (limiter.h keyed holds): on by default; the variable, the top level and a
 * pool's own key, which wins. */
Test(config, limit_keys_switch) {
  struct cg_config c;
  struct cg_pool_cfg s;
  char *path = cg_test_write_tmp("config", "{\"limit_keys\": false, \"pools\": ["
                          "{\"name\": \"own\", \"hosts\": [\"own.example\"], \"limit_keys\": true},"
                          "{\"name\": \"bad\", \"hosts\": [\"bad.example\"], \"limit_keys\": 1}]}");
  base_env();
  cg_config_load(&c, fake_getenv);
  cr_assert_eq(c.limit_keys, 1);
  cr_assert_eq(cg_config_pool_at(&c, "api.example", 443, "https", &s)->lim.limit_keys, 1);
  cg_config_free(&c);
  env_set("CURLGUARD_CONFIG", path);
  cg_config_load(&c, fake_getenv);
  cr_assert_eq(c.limit_keys, 0);
  cr_assert_eq(cg_config_pool_at(&c, "api.example", 443, "https", &s)->lim.limit_keys, 0);
  cr_assert_eq(cg_config_pool_at(&c, "own.example", 443, "https", &s)->lim.limit_keys, 1);
  cr_assert_eq(cg_config_pool_at(&c, "bad.example", 443, "https", &s)->lim.limit_keys, 0);
  cg_config_free(&c);
  env_set("CURLGUARD_LIMIT_KEYS", "on");
  cg_config_load(&c, fake_getenv);
  cr_assert_eq(c.limit_keys, 1, "the variable wins over the file");
  cg_config_free(&c);
  unlink(path);
}

Test(config, adaptive_switch) {
  struct cg_config c;
  base_env();
  env_set("CURLGUARD_ADAPTIVE", "off");
  cg_config_load(&c, fake_getenv);
  cr_assert_eq(c.adaptive, 0);
  cg_config_free(&c);
  env_set("CURLGUARD_ADAPTIVE", "maybe");
  cr_assert_eq(cg_config_load(&c, fake_getenv), 1);
  cr_assert_eq(c.adaptive, 1); /* the default, with one line */
  cg_config_free(&c);
}

/* cg_config_cut_ms: what may cut an attempt under way.  The default deadline does not
 * (only retries and waits are bound by it); the host's CURLOPT_TIMEOUT does, and so does
 * a deadline configured for the guard, the smaller of the two. */
Test(config, deadline_cuts_an_attempt_only_when_someone_set_it) {
  struct cg_config c;
  base_env();
  cr_assert_eq(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.deadline_set, 0);
  cr_assert_eq(cg_config_cut_ms(&c, 0), 0, "the default 10 minutes cut nothing");
  cr_assert_eq(cg_config_cut_ms(&c, 2500), 2500, "the host's own timeout");
  cr_assert_eq(cg_config_cut_ms(&c, 3600000), 3600000, "larger than the default: the host's");
  cg_config_free(&c);
  base_env();
  env_set("CURLGUARD_DEADLINE_MS", "30000");
  cr_assert_eq(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.deadline_set, 1);
  cr_assert_eq(cg_config_cut_ms(&c, 0), 30000);
  cr_assert_eq(cg_config_cut_ms(&c, 2500), 2500);
  cr_assert_eq(cg_config_cut_ms(&c, 60000), 30000);
  cg_config_free(&c);
  base_env();
  env_set("CURLGUARD_DEADLINE_MS", "abc"); /* malformed: the default, not set */
  cr_assert_neq(cg_config_load(&c, fake_getenv), 0); /* said: one problem */
  cr_assert_eq(c.deadline_set, 0);
  cr_assert_eq(cg_config_cut_ms(&c, 0), 0);
  cg_config_free(&c);
}

/* A "hosts" list (top level or a pool's) is joined whole, however long: a fixed 4 KiB
 * buffer cut it without a word, "1*.example.org" at the cut becoming "1*" (127.0.0.1
 * guarded) or the last host dropped (helper-62).  6,000+ bytes each way. */
Test(config, long_host_lists_are_read_whole) {
  struct cg_config c;
  struct cg_pool_cfg s;
  size_t cap = 64 * 1024, at = 0;
  char *text = malloc(cap), *path;
  int i;

  cr_assert_not_null(text);
  at += (size_t) snprintf(text + at, cap - at, "{\"hosts\": [");
  for (i = 0; i < 400; i++)
    at += (size_t) snprintf(text + at, cap - at, "\"h%05d.internal.example\", ", i);
  at += (size_t) snprintf(text + at, cap - at, "\"1*.example.org\"], \"pools\": [{\"name\": "
                                               "\"narrow\", \"hosts\": [");
  for (i = 0; i < 400; i++)
    at += (size_t) snprintf(text + at, cap - at, "\"p%05d.internal.example\", ", i);
  at += (size_t) snprintf(text + at, cap - at, "\"last.example\"]}]}");
  cr_assert_lt(at, cap - 1);
  path = cg_test_write_tmp("config", text);
  base_env();
  env_set("CURLGUARD_CONFIG", path);
  cr_assert_eq(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.nhosts, 401);
  cr_assert(cg_config_host_guarded(&c, "1a.example.org"));
  cr_assert_not(cg_config_host_guarded(&c, "127.0.0.1"));
  cr_assert(cg_config_host_guarded(&c, "h00399.internal.example"));
  cr_assert_str_eq(cg_config_pool_at(&c, "last.example", 443, "https", &s)->name, "narrow");
  cr_assert_str_eq(cg_config_pool_at(&c, "p00000.internal.example", 443, "https", &s)->name,
                   "narrow");
  cr_assert_str_neq(cg_config_pool_at(&c, "127.0.0.1", 443, "https", &s)->name, "narrow");
  cg_config_free(&c);
  unlink(path);
  free(path);
  free(text);
}

/* A member that is not a string spoils the list: the top level's is reported and the
 * default kept; a pool's leaves the pool without hosts, ignored (before, a pool's
 * non-string members were skipped without a word). */
Test(config, a_host_list_with_a_non_string_is_reported) {
  struct cg_config c;
  char *path = cg_test_write_tmp("config", "{\"hosts\": [\"a.example\", 7], \"pools\": [{\"name\": "
                                           "\"p\", \"hosts\": [\"b.example\", null]}]}");
  base_env();
  env_set("CURLGUARD_CONFIG", path);
  cr_assert_geq(cg_config_load(&c, fake_getenv), 2);
  {
    struct cg_config d; /* the default list, not a.example alone */
    base_env();
    cg_config_load(&d, fake_getenv);
    cr_assert_eq(c.nhosts, d.nhosts);
    cr_assert_str_eq(c.hosts[0], d.hosts[0]);
    cg_config_free(&d);
  }
  cr_assert_eq(c.npools, 0);
  cg_config_free(&c);
  unlink(path);
  free(path);
}

/* Text after the top-level object makes the file malformed (cJSON stops at the object's
 * end: "{...} trailing garbage" was applied without a word, helper-62); blanks after it
 * are fine. */
Test(config, text_after_the_object_is_malformed) {
  struct cg_config c;
  char *bad = cg_test_write_tmp("config", "{\"max_attempts\": 1} trailing garbage");
  char *ok = cg_test_write_tmp("config", "{\"max_attempts\": 1}\n \t\r\n");
  base_env();
  env_set("CURLGUARD_CONFIG", bad);
  cr_assert_gt(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.max_attempts, 3);
  cg_config_free(&c);
  env_set("CURLGUARD_CONFIG", ok);
  cr_assert_eq(cg_config_load(&c, fake_getenv), 0);
  cr_assert_eq(c.max_attempts, 1);
  cg_config_free(&c);
  unlink(bad);
  unlink(ok);
  free(bad);
  free(ok);
}

/* More rules than CG_RETRY_RULES_MAX: -2 (its own line says so; helper-65: the line said
 * "malformed value" and showed the list cut short), the rules untouched; a malformed
 * item: -1. */
Test(config, too_many_retry_rules_are_told_apart) {
  struct cg_config c;
  char text[4096];
  size_t at = 0;
  int i;
  base_env();
  cg_config_load(&c, fake_getenv);
  for (i = 0; i <= CG_RETRY_RULES_MAX; i++)
    at += (size_t) snprintf(text + at, sizeof(text) - at, "%shttp_%d=any", i ? "," : "",
                            500 + i);
  cr_assert_eq(cg_retry_on_parse(&c, text), -2);
  cr_assert_eq(c.nretry_on, 0);
  cr_assert_eq(cg_retry_on_parse(&c, "http_500=retry"), -1);
  cr_assert_eq(cg_retry_on_parse(&c, "http_500=any,http_502=never"), 0);
  cr_assert_eq(c.nretry_on, 2);
  cg_config_free(&c);
}
