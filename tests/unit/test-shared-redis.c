/* test-shared-redis.c - the pure parts of the Redis back end (shared.h): CURLGUARD_REDIS
 * URLs and the keys of a pool (one hash slot per pool: Redis Cluster hash tags). */
#include "shared.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

Test(redis_url, tcp_forms) {
  struct cg_redis_url u;
  cr_assert_eq(cg_redis_url_parse("redis://127.0.0.1:6380/2", &u), 0);
  cr_assert_str_eq(u.host, "127.0.0.1");
  cr_assert_eq(u.port, 6380);
  cr_assert_eq(u.db, 2);
  cr_assert_str_eq(u.password, "");
  cr_assert_eq(u.unix_socket, 0);
  cr_assert_eq(cg_redis_url_parse("redis://cache.internal", &u), 0);
  cr_assert_str_eq(u.host, "cache.internal");
  cr_assert_eq(u.port, 6379);
  cr_assert_eq(u.db, 0);
  cr_assert_eq(cg_redis_url_parse("redis://:s3cret@h:1/", &u), 0);
  cr_assert_str_eq(u.password, "s3cret");
  cr_assert_str_eq(u.host, "h");
  cr_assert_eq(u.db, 0);
  /* Redis's own user "default" is AUTH with the password alone; a password may hold '@',
   * ':' and '/'. */
  cr_assert_eq(cg_redis_url_parse("redis://default:p@s:s/w@h:7/3", &u), 0);
  cr_assert_str_eq(u.user, "");
  cr_assert_str_eq(u.password, "p@s:s/w");
  cr_assert_str_eq(u.host, "h");
  cr_assert_eq(u.port, 7);
  cr_assert_eq(u.db, 3);
  /* An ACL user (Redis 6): named to AUTH with its password. */
  cr_assert_eq(cg_redis_url_parse("redis://alice:a:b@c@h", &u), 0);
  cr_assert_str_eq(u.user, "alice");
  cr_assert_str_eq(u.password, "a:b@c");
  cr_assert_str_eq(u.host, "h");
  cr_assert_eq(cg_redis_url_parse("redis://:s3cret@h", &u), 0);
  cr_assert_str_eq(u.user, "");
  cr_assert_eq(cg_redis_url_parse("redis://s3cret@h", &u), 0); /* no ':': a password */
  cr_assert_str_eq(u.user, "");
  cr_assert_str_eq(u.password, "s3cret");
  {
    char url[200];
    memset(url, 0, sizeof(url));
    memcpy(url, "redis://", 8);
    memset(url + 8, 'u', 140); /* a user longer than the field: malformed */
    memcpy(url + 148, ":pw@h", 5);
    cr_assert_eq(cg_redis_url_parse(url, &u), -1);
  }
  cr_assert_eq(cg_redis_url_parse("redis://[::1]:6390", &u), 0);
  cr_assert_str_eq(u.host, "::1");
  cr_assert_eq(u.port, 6390);
}

Test(redis_url, unix_socket) {
  struct cg_redis_url u;
  cr_assert_eq(cg_redis_url_parse("unix:///run/redis/redis.sock", &u), 0);
  cr_assert_eq(u.unix_socket, 1);
  cr_assert_str_eq(u.path, "/run/redis/redis.sock");
  cr_assert_eq(cg_redis_url_parse("unix:///tmp/r.sock?db=4", &u), 0);
  cr_assert_eq(u.db, 4);
  cr_assert_eq(cg_redis_url_parse("unix://relative.sock", &u), -1);
  cr_assert_eq(cg_redis_url_parse("unix:///tmp/r.sock?x=1", &u), -1);
}

Test(redis_url, refused) {
  struct cg_redis_url u;
  const char *bad[] = {"", "http://h:1", "redis://", "redis://h:0", "redis://h:65536",
                       "redis://h:port", "redis://h:1/db", "redis://h:1/-1", "redis://[::1",
                       "redis://:", NULL};
  int i;
  for (i = 0; bad[i]; i++)
    cr_expect_eq(cg_redis_url_parse(bad[i], &u), -1, "%s", bad[i]);
  cr_assert_eq(cg_redis_url_parse("rediss://h:6380", &u), -2);
  cr_assert_eq(cg_redis_url_parse(NULL, &u), -1);
}

/* The user and the password are percent-decoded (RFC 3986 3.2.1) after the split on the
 * last '@' and the first ':': an encoded ':' or '@' stays in its part. */
Test(redis_url, percent_decoded) {
  struct cg_redis_url u;
  cr_assert_eq(cg_redis_url_parse("redis://ops%3Aa%40b:p%40ss%3Aw%2Frd%25%231@h:7/2", &u), 0);
  cr_assert_str_eq(u.user, "ops:a@b");
  cr_assert_str_eq(u.password, "p@ss:w/rd%#1");
  cr_assert_str_eq(u.host, "h");
  cr_assert_eq(u.port, 7);
  cr_assert_eq(u.db, 2);
  /* Either case of hex; a password alone, and after an empty user. */
  cr_assert_eq(cg_redis_url_parse("redis://a%2fb%2Fc%3a%3A@h", &u), 0);
  cr_assert_str_eq(u.user, "");
  cr_assert_str_eq(u.password, "a/b/c::");
  cr_assert_eq(cg_redis_url_parse("redis://:%25%2525@h", &u), 0); /* decoded once */
  cr_assert_str_eq(u.password, "%%25");
  cr_assert_eq(cg_redis_url_parse("redis://%C3%A9t%C3%A9:%7e%20x@h", &u), 0);
  cr_assert_str_eq(u.user, "\xc3\xa9t\xc3\xa9");
  cr_assert_str_eq(u.password, "~ x");
  /* Raw forms accepted before still are: '@', ':' and '/' in the password; '#' too. */
  cr_assert_eq(cg_redis_url_parse("redis://u:a:b@c/d#e@h", &u), 0);
  cr_assert_str_eq(u.user, "u");
  cr_assert_str_eq(u.password, "a:b@c/d#e");
  cr_assert_str_eq(u.host, "h");
  /* "default", however written, is Redis's own user: the password alone. */
  cr_assert_eq(cg_redis_url_parse("redis://%64efault:pw@h", &u), 0);
  cr_assert_str_eq(u.user, "");
  cr_assert_str_eq(u.password, "pw");
  cr_assert_eq(cg_redis_url_parse("redis://%44efault:pw@h", &u), 0); /* "Default": a user */
  cr_assert_str_eq(u.user, "Default");
}

Test(redis_url, bad_escapes) {
  struct cg_redis_url u;
  const char *bad[] = {"redis://:%@h",       "redis://:%4@h",    "redis://:%zz@h",
                       "redis://:ab%@h",     "redis://:ab%4@h",  "redis://:%g1@h",
                       "redis://:%1g@h",     "redis://:%00@h",   "redis://:a%00b@h",
                       "redis://%@h",        "redis://u%:pw@h",  "redis://u%0:pw@h",
                       "redis://u%00:pw@h",  "redis://%zz:pw@h", "redis://u:p%#1@h",
                       NULL};
  int i;
  for (i = 0; bad[i]; i++)
    cr_expect_eq(cg_redis_url_parse(bad[i], &u), -3, "%s", bad[i]);
}

/* The fields bound the decoded value: an encoded one may be three times as long. */
Test(redis_url, decoded_lengths) {
  struct cg_redis_url u;
  char url[1200], *q;
  size_t i;

  /* A user of 127 bytes (the most user[128] holds), all encoded: 381 bytes in the URL. */
  q = url + sprintf(url, "redis://");
  for (i = 0; i < sizeof(u.user) - 1; i++)
    q += sprintf(q, "%%3A");
  sprintf(q, ":pw@h");
  cr_assert_eq(cg_redis_url_parse(url, &u), 0);
  cr_assert_eq(strlen(u.user), sizeof(u.user) - 1);
  cr_assert_eq(u.user[0], ':');
  cr_assert_str_eq(u.password, "pw");
  /* One more: refused, as a raw one too long is. */
  q = url + sprintf(url, "redis://");
  for (i = 0; i < sizeof(u.user); i++)
    q += sprintf(q, "%%3a");
  sprintf(q, ":pw@h");
  cr_assert_eq(cg_redis_url_parse(url, &u), -1);
  /* The password likewise (password[256]). */
  q = url + sprintf(url, "redis://u:");
  for (i = 0; i < sizeof(u.password) - 1; i++)
    q += sprintf(q, "%%40");
  sprintf(q, "@h:9");
  cr_assert_eq(cg_redis_url_parse(url, &u), 0);
  cr_assert_eq(strlen(u.password), sizeof(u.password) - 1);
  cr_assert_eq(u.password[sizeof(u.password) - 2], '@');
  cr_assert_str_eq(u.host, "h");
  cr_assert_eq(u.port, 9);
  q = url + sprintf(url, "redis://u:");
  for (i = 0; i < sizeof(u.password); i++)
    q += sprintf(q, "%%40");
  sprintf(q, "@h:9");
  cr_assert_eq(cg_redis_url_parse(url, &u), -1);
  /* A raw password of 255 bytes still fits, and 256 still does not. */
  q = url + sprintf(url, "redis://:");
  memset(q, 'x', sizeof(u.password) - 1);
  strcpy(q + sizeof(u.password) - 1, "@h");
  cr_assert_eq(cg_redis_url_parse(url, &u), 0);
  cr_assert_eq(strlen(u.password), sizeof(u.password) - 1);
  memset(q, 'x', sizeof(u.password));
  strcpy(q + sizeof(u.password), "@h");
  cr_assert_eq(cg_redis_url_parse(url, &u), -1);
}

Test(redis_key, one_slot_per_pool) {
  char k[128];
  cr_assert_str_eq(cg_redis_key(k, sizeof(k), "curlguard:", "api.openai.com", "tat_req"),
                   "curlguard:{api.openai.com}:tat_req");
  cr_assert_str_eq(cg_redis_key(k, sizeof(k), "fleetB:", "127.0.0.1:8080", "inflight"),
                   "fleetB:{127.0.0.1:8080}:inflight");
  cr_assert_str_eq(cg_redis_key(k, sizeof(k), NULL, "p", "brk"), "curlguard:{p}:brk");
}

/* Outage lines (cg_redis_outage_say): the first ten each, numbered from the second, the
 * tenth saying what comes after it; then one an hour at most, with the unsaid counted. */
Test(redis_outages, ten_then_one_an_hour) {
  struct cg_redis_outages o = {0};
  char sfx[128];
  int64_t t = 5000; /* monotonic ms: any start */
  int k;

  cr_assert_eq(cg_redis_outage_say(&o, t, sfx, sizeof(sfx)), 1);
  cr_assert_str_eq(sfx, ""); /* the first outage's line as it always was */
  for (k = 2; k <= 9; k++) {
    char want[64];
    cr_assert_eq(cg_redis_outage_say(&o, t + k, sfx, sizeof(sfx)), 1, "outage %d", k);
    snprintf(want, sizeof(want), "; outage %d of this process", k);
    cr_assert_str_eq(sfx, want);
  }
  cr_assert_eq(cg_redis_outage_say(&o, t + 10, sfx, sizeof(sfx)), 1);
  cr_assert_str_eq(sfx, "; outage 10 of this process; later ones are said one an hour at most");
  /* a flapping Redis: the next 500 outages within the hour say nothing */
  for (k = 11; k <= 510; k++) {
    cr_assert_eq(cg_redis_outage_say(&o, t + 10 + k * 1000, sfx, sizeof(sfx)), 0, "%d", k);
    cr_assert_str_eq(sfx, "");
  }
  /* one ms short of the hour after the tenth line: still quiet; at the hour: said */
  cr_assert_eq(cg_redis_outage_say(&o, t + 10 + CG_REDIS_OUTAGE_QUIET_MS - 1, sfx, sizeof(sfx)),
               0);
  cr_assert_eq(cg_redis_outage_say(&o, t + 10 + CG_REDIS_OUTAGE_QUIET_MS, sfx, sizeof(sfx)), 1);
  cr_assert_str_eq(sfx, "; outage 512 of this process, 501 not said since the last line");
  /* the hour counts from that line; a month later the next one is said at once */
  cr_assert_eq(cg_redis_outage_say(&o, t + 20 + CG_REDIS_OUTAGE_QUIET_MS, sfx, sizeof(sfx)), 0);
  cr_assert_eq(cg_redis_outage_say(&o, t + 30 * 86400 * INT64_C(1000), sfx, sizeof(sfx)), 1);
  cr_assert_str_eq(sfx, "; outage 514 of this process, 1 not said since the last line");
  /* a short buffer is cut, never overrun; n 0 writes nothing */
  cr_assert_eq(cg_redis_outage_say(&o, t + 60 * 86400 * INT64_C(1000), sfx, 8), 1);
  cr_assert_str_eq(sfx, "; outag");
  cr_assert_eq(cg_redis_outage_say(&o, t + 90 * 86400 * INT64_C(1000), NULL, 0), 1);
}

/* The counts stop at INT_MAX rather than wrap to a negative outage number. */
Test(redis_outages, counts_saturate) {
  struct cg_redis_outages o = {INT_MAX, INT_MAX, 0};
  char sfx[128];
  cr_assert_eq(cg_redis_outage_say(&o, 1000, sfx, sizeof(sfx)), 0);
  cr_assert_eq(o.begun, INT_MAX);
  cr_assert_eq(o.unsaid, INT_MAX);
  cr_assert_eq(cg_redis_outage_say(&o, CG_REDIS_OUTAGE_QUIET_MS, sfx, sizeof(sfx)), 1);
  cr_assert(strstr(sfx, "of this process, 2147483647 not said") != NULL, "%s", sfx);
}
