/* test-shared-redis.c - the pure parts of the Redis back end (shared.h): CURLGUARD_REDIS
 * URLs and the keys of a pool (one hash slot per pool: Redis Cluster hash tags). */
#include "shared.h"

#include <criterion/criterion.h>
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

Test(redis_key, one_slot_per_pool) {
  char k[128];
  cr_assert_str_eq(cg_redis_key(k, sizeof(k), "curlguard:", "api.openai.com", "tat_req"),
                   "curlguard:{api.openai.com}:tat_req");
  cr_assert_str_eq(cg_redis_key(k, sizeof(k), "fleetB:", "127.0.0.1:8080", "inflight"),
                   "fleetB:{127.0.0.1:8080}:inflight");
  cr_assert_str_eq(cg_redis_key(k, sizeof(k), NULL, "p", "brk"), "curlguard:{p}:brk");
}
