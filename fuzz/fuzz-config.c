/* fuzz-config.c - the configuration (src/config.c): a JSON config file, and the text
 * form of every environment variable.  The first byte picks the mode: even, the rest is
 * the config file (CURLGUARD_CONFIG); odd, the rest is the value of the variable the
 * second byte picks (CURLGUARD_RETRY_ON, CURLGUARD_HOSTS, ...).  Invariants: whatever
 * the input, the snapshot holds values within the documented bounds (README
 * "Variables"), and the backoff cap is never below its base. */
#include "config.h"
#include "fuzz.h"

static const char *const vars[] = {
    "CURLGUARD_RETRY_ON", "CURLGUARD_HOSTS", "CURLGUARD_MAX_RETRY_AFTER_MS",
    "CURLGUARD_DEADLINE_MS", "CURLGUARD_BACKOFF_BASE_MS", "CURLGUARD_BACKOFF_CAP_MS",
    "CURLGUARD_JITTER", "CURLGUARD_RPM", "CURLGUARD_TPM", "CURLGUARD_MAX_INFLIGHT",
    "CURLGUARD_BREAKER", "CURLGUARD_BREAKER_FAILURE_RATE", "CURLGUARD_BREAKER_WINDOW_S",
    "CURLGUARD_BREAKER_COOLDOWN_S", "CURLGUARD_RETRY_BUDGET_RATIO",
    "CURLGUARD_RETRY_BUDGET_WINDOW_S", "CURLGUARD_REQUEST_ID_HEADER", "CURLGUARD_TASK_ID",
    "CURLGUARD_TASK_ID_HEADER", "CURLGUARD_SILENT_RESEND", "CURLGUARD_MAX_ATTEMPTS",
    "CURLGUARD_LOG", "CURLGUARD_STATE", "CURLGUARD_CONNECT_TIMEOUT_MS",
};
#define NVARS (sizeof(vars) / sizeof(vars[0]))

static const char *var_name, *var_value, *config_path;

static const char *fuzz_getenv(const char *name) {
  if (strcmp(name, "CURLGUARD") == 0)
    return "1";
  if (config_path && strcmp(name, "CURLGUARD_CONFIG") == 0)
    return config_path;
  if (var_name && strcmp(name, var_name) == 0)
    return var_value;
  if (strcmp(name, "HOME") == 0)
    return "/nonexistent";
  return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct cg_config c;
  char *value = NULL;
  size_t i;

  if (size < 2)
    return 0;
  var_name = var_value = config_path = NULL;
  if (data[0] % 2 == 0) {
    config_path = cg_fuzz_file("config", data + 1, size - 1);
  } else {
    var_name = vars[data[1] % NVARS];
    var_value = value = cg_fuzz_str(data + 2, size - 2);
  }
  memset(&c, 0, sizeof(c));
  cg_config_load(&c, fuzz_getenv);
  CG_FUZZ_CHECK(c.max_retry_after_ms >= 0 && c.max_retry_after_ms <= 86400000,
                "max_retry_after_ms %ld", c.max_retry_after_ms);
  CG_FUZZ_CHECK(c.deadline_ms >= 1 && c.deadline_ms <= 86400000, "deadline_ms %ld",
                c.deadline_ms);
  CG_FUZZ_CHECK(c.backoff_cap_ms >= c.backoff_base_ms && c.backoff_base_ms >= 0,
                "backoff %ld..%ld", c.backoff_base_ms, c.backoff_cap_ms);
  CG_FUZZ_CHECK(c.max_attempts >= 1, "max_attempts %ld", c.max_attempts);
  CG_FUZZ_CHECK(c.rpm >= 0 && c.tpm >= 0 && c.max_inflight >= 0, "limits");
  CG_FUZZ_CHECK(c.nretry_on <= CG_RETRY_RULES_MAX, "nretry_on %zu", c.nretry_on);
  for (i = 0; i < c.npools; i++) {
    const struct cg_pool_cfg *p = &c.pools[i];
    CG_FUZZ_CHECK(memchr(p->name, '\0', sizeof(p->name)) != NULL, "pool name");
    CG_FUZZ_CHECK(p->lim.rpm >= 0 && p->lim.tpm >= 0 && p->lim.max_inflight >= 0 &&
                      p->lim.burst_requests >= 0 && p->lim.burst_tokens >= 0,
                  "pool %s limits", p->name);
    CG_FUZZ_CHECK(p->nretry_on <= CG_RETRY_RULES_MAX, "pool retry_on");
  }
  {
    struct cg_pool_cfg scratch;
    (void) cg_config_pool(&c, "api.openai.com", &scratch);
    (void) cg_config_pool(&c, "127.0.0.1", &scratch);
  }
  cg_config_free(&c);
  free(value);
  return 0;
}
