/* redis-lua.h - the Lua scripts of the Redis back end (shared-redis.c), run with EVALSHA
 * (loaded once per connection with SCRIPT LOAD, again on a NOSCRIPT reply).
 *
 * Every script reads the server's clock, redis.call('TIME') (seconds, microseconds), so
 * the machines of a fleet never compare their own clocks (go-redis/redis_rate does the
 * same).  Times in keys are server microseconds since the epoch (about 1.7e15: exact in
 * a Lua double, < 2^53).  Every key a script writes gets a TTL.  KEYS of one script all
 * carry the pool's hash tag `{pool}`, so they live in one slot (Redis Cluster).
 * Scripts that call TIME and then write are allowed since Redis 5 (effects replication;
 * the only mode from Redis 7).
 *
 * TIME is the server's wall clock, which an NTP correction or a resumed virtual machine
 * may step back: every time stored ahead of it would then lie that much further ahead,
 * and every call of the fleet would wait out the step (or, past its deadline, fail at
 * once).  So the scripts' `now` never goes back: the pool's clock key ("<prefix>{pool}:
 * clock", in the slot of its other keys) keeps "<the last now>:<offset>", written by every
 * script whose now is later, and a TIME behind the last now (scripts run one at a time,
 * so only a step does that) adds the difference to the offset, which every later TIME
 * gets: the pool's time goes on from the last now.  What passed between the last script
 * and the step is lost (the pool's time stood still for it): when the fleet was silent
 * for a while (every call asleep in a long hold), its places and holds move that much
 * later; a step seen without such a silence costs nothing.  A step forward is taken as it
 * comes (stored times fall behind: holds and places end early, the way of failing open).
 * The key lives a day from its last write (PX), longer than any time stored in the pool's
 * other keys, which have expired by the time it does.
 */
#ifndef CG_REDIS_LUA_H
#define CG_REDIS_LUA_H

#define CG_LUA_NOW                                                                      \
  "local t = redis.call('TIME')\n"                                                      \
  "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"                             \
  "do\n"                                                                                \
  "  local ck = string.match(KEYS[1] or '', '^(.*}):')\n"                               \
  "  if ck then\n"                                                                      \
  "    ck = ck .. ':clock'\n"                                                           \
  "    local v = redis.call('GET', ck) or ''\n"                                         \
  "    local last = tonumber(string.match(v, '^(%d+):')) or 0\n"                        \
  "    local off = tonumber(string.match(v, ':(%d+)$')) or 0\n"                         \
  "    now = now + off\n"                                                               \
  "    if now < last then\n"                                                            \
  "      off = off + last - now\n"                                                      \
  "      now = last\n"                                                                  \
  "      last = 0\n"                                                                    \
  "    end\n"                                                                           \
  "    if now > last then\n"                                                            \
  "      redis.call('SET', ck, string.format('%.0f:%.0f', now, off), 'PX', 86400000)\n"  \
  "    end\n"                                                                           \
  "  end\n"                                                                             \
  "end\n"

/* The pool's in-flight leases with a fair queue (first come, first served across the
 * fleet; the state file's slots have theirs in limiter.c).  ik: the leases (id -> expiry,
 * server ms); qk: the waiters (id -> ticket, the server's us when it first asked); xk:
 * the waiters' expiry (id -> server ms).  A waiter asks again at least every
 * CG_SHARED_POLL_MS (100 ms), which moves its expiry 1000 ms on; one that stops asking
 * (its process died, or it gave up without saying so) is dropped after that, at most 64
 * a call.  A lease for `id` is taken when one of the mi is free and fewer waiters than
 * free leases are ahead of it (it then leaves the queue): 1.  Else `id` joins the queue,
 * keeping its first ticket: 0.  Without it a waiter polled as a newcomer, and a process
 * making back-to-back calls took each lease it gave back within a millisecond (the
 * other machine's call waited out its deadline). */
#define CG_LUA_SLOT_FN                                                                  \
  "local function slot_take(ik, qk, xk, mi, id, lms)\n"                                 \
  "  local nms = math.floor(now / 1000)\n"                                              \
  "  redis.call('ZREMRANGEBYSCORE', ik, '-inf', nms)\n"                                 \
  "  local dead = redis.call('ZRANGEBYSCORE', xk, '-inf', nms, 'LIMIT', 0, 64)\n"       \
  "  for _, d in ipairs(dead) do\n"                                                     \
  "    redis.call('ZREM', qk, d)\n"                                                     \
  "    redis.call('ZREM', xk, d)\n"                                                     \
  "  end\n"                                                                             \
  "  local free = mi - redis.call('ZCARD', ik)\n"                                       \
  "  local rank = redis.call('ZRANK', qk, id)\n"                                        \
  "  if free > 0 and (rank or redis.call('ZCARD', qk)) < free then\n"                   \
  "    if rank then\n"                                                                  \
  "      redis.call('ZREM', qk, id)\n"                                                  \
  "      redis.call('ZREM', xk, id)\n"                                                  \
  "    end\n"                                                                           \
  "    redis.call('ZADD', ik, nms + lms, id)\n"                                         \
  "    redis.call('PEXPIRE', ik, lms * 4)\n"                                            \
  "    return 1\n"                                                                      \
  "  end\n"                                                                             \
  "  if not rank then redis.call('ZADD', qk, now, id) end\n"                            \
  "  redis.call('ZADD', xk, nms + 1000, id)\n"                                          \
  "  redis.call('PEXPIRE', qk, 4000)\n"                                                 \
  "  redis.call('PEXPIRE', xk, 4000)\n"                                                 \
  "  return 0\n"                                                                        \
  "end\n"

/* The learned rate's place (limiter.c cg_limiter_learn_take and learn_success, on one
 * word for the fleet): learn_tat holds "<tat us>:<T us it was reckoned at>".  A caller
 * whose learned rate is higher than the one the word was last reckoned at (T below it:
 * the rate rose, as in slow start) first brings it back to at most now + T, as
 * cg_limiter_learn_success does with the file's word when the rate rises.  Then: the
 * place is free when tat - tau <= now.  With an in-flight limit (mi > 0) the place is
 * taken only together with a lease (nothing reserved for a call that does not go): no
 * slot, nothing taken.  Returns learn (0 taken, > 0 us until it might be, -2 free but
 * no slot: nothing taken), lease (1 taken). */
#define CG_LUA_LEARN_FN                                                                 \
  "local function learn_place(lk, tl, tau, ik, qk, xk, mi, id, lms)\n"                  \
  "  local v = redis.call('GET', lk) or ''\n"                                           \
  "  local lt = tonumber(string.match(v, '^(%d+)')) or 0\n"                             \
  "  local lastt = tonumber(string.match(v, ':([%d%.]+)$')) or 0\n"                     \
  "  if (lastt == 0 or tl < lastt) and lt > now + tl then lt = now + tl end\n"          \
  "  local go = lt - tau\n"                                                             \
  "  if go > now then return math.floor(go - now), 0 end\n"                             \
  "  local lease = 0\n"                                                                 \
  "  if mi > 0 then\n"                                                                  \
  "    if slot_take(ik, qk, xk, mi, id, lms) == 0 then return -2, 0 end\n"              \
  "    lease = 1\n"                                                                     \
  "  end\n"                                                                             \
  "  if lt < now then lt = now end\n"                                                   \
  "  redis.call('SET', lk, string.format('%.0f:%.3f', lt + tl, tl), 'PX',\n"            \
  "    math.floor((lt + tl - now) / 1000) + 60000)\n"                                   \
  "  return 0, lease\n"                                                                 \
  "end\n"

/* GCRA (ITU-T I.371; limiter.h) for one request against the pool's rpm and tpm at once.
 * KEYS: tat_req, tat_tok, hold, admitted, brk, learn_tat, cut.  ARGV: T_req us (0: no
 * rpm), tau_req us, T_tok us (0: no tpm), tau_tok us, tokens, max_wait us, T_learn us
 * (0: not learning), tau_learn us.
 * Returns {0, wait_us, open, learn, cut_age} (reserved) or {1, wait_us, open, -1,
 * cut_age} (too long: nothing reserved); `open` 1 when the pool's breaker key exists
 * (not closed): the caller's cached "closed" is refreshed by every admission at no extra
 * round trip.  `learn`: a reservation with no wait also takes the learned rate's place
 * when it is free now (limiter.h cg_limiter_learn_take: 0 taken, else us until it might
 * be; -2 free but no in-flight slot: nothing taken; -1 not asked; CG_LUA_LEARN_FN).
 * `cut_age`: us since a machine last cut the learned rate (-1:
 * none in the last minute).  KEYS[8] inflight, KEYS[9] its queue, KEYS[10] the queue's
 * expiry (CG_LUA_SLOT_FN), ARGV max_inflight (0: none), lease id (the call's place in
 * the queue), lease_ms: an admission that goes now (no wait, the learned place taken or
 * not asked) also takes its in-flight lease when its turn has come (with the learned
 * place: both or none), as CG_LUA_ACQUIRE, saving the acquire's round trip: the 6th
 * element is 1 then; else it joins the queue.  KEYS[11], when given: the call's limit
 * key's hold (limiter.h keyed holds); the 7th element is how long it still holds (us, 0:
 * none), and a call it holds takes neither the learned place nor a lease.
 * The rule is limiter.c's cg__reserve_one: a request goes when its whole cost fits the
 * burst (a larger cost: when the bucket is full), at max(that, the 429 hold), and moves
 * TAT to max(TAT, now, go) + cost * T. */
#define CG_LUA_RESERVE                                                                  \
  CG_LUA_NOW                                                                            \
  CG_LUA_SLOT_FN                                                                        \
  CG_LUA_LEARN_FN                                                                       \
  "local brk = redis.call('EXISTS', KEYS[5])\n"                                        \
  "local floor = now\n"                                                                 \
  "local hold = tonumber(redis.call('GET', KEYS[3]) or '0') or 0\n"                     \
  "if hold > floor then floor = hold end\n"                                             \
  "local maxw = tonumber(ARGV[6])\n"                                                    \
  "if floor - now > maxw then return {1, floor - now, brk, -1, -1, 0} end\n"                            \
  "local function place(key, tt, tau, cost)\n"                                          \
  "  local tat = tonumber(redis.call('GET', key) or '0') or 0\n"                        \
  "  local base = tat\n"                                                                \
  "  if base < now then base = now end\n"                                               \
  "  local c = cost\n"                                                                  \
  "  local burst = tau / tt + 1\n"                                                      \
  "  if c > burst then c = burst end\n"                                                 \
  "  local go = base - tau + (c - 1) * tt\n"                                            \
  "  if go < floor then go = floor end\n"                                               \
  "  local nxt = base\n"                                                                \
  "  if go > nxt then nxt = go end\n"                                                   \
  "  return go, nxt + cost * tt\n"                                                      \
  "end\n"                                                                               \
  "local w, nr, nt = floor - now, nil, nil\n"                                           \
  "local treq = tonumber(ARGV[1])\n"                                                    \
  "if treq > 0 then\n"                                                                  \
  "  local go\n"                                                                        \
  "  go, nr = place(KEYS[1], treq, tonumber(ARGV[2]), 1)\n"                             \
  "  if go - now > maxw then return {1, go - now, brk, -1, -1, 0} end\n"                                \
  "  if go - now > w then w = go - now end\n"                                           \
  "end\n"                                                                               \
  "local ttok, tokens = tonumber(ARGV[3]), tonumber(ARGV[5])\n"                         \
  "if ttok > 0 and tokens > 0 then\n"                                                   \
  "  local go\n"                                                                        \
  "  go, nt = place(KEYS[2], ttok, tonumber(ARGV[4]), tokens)\n"                        \
  "  if go - now > maxw then return {1, go - now, brk, -1, -1, 0} end\n"                                \
  "  if go - now > w then w = go - now end\n"                                           \
  "end\n"                                                                               \
  "if nr then redis.call('SET', KEYS[1], string.format('%.0f', nr), 'PX',\n"            \
  "  math.floor((nr - now) / 1000) + 60000) end\n"                                      \
  "if nt then redis.call('SET', KEYS[2], string.format('%.0f', nt), 'PX',\n"            \
  "  math.floor((nt - now) / 1000) + 60000) end\n"                                      \
  "redis.call('INCR', KEYS[4])\n"                                                       \
  "redis.call('PEXPIRE', KEYS[4], 86400000)\n"                                          \
  "local cut = tonumber(redis.call('GET', KEYS[7]) or '0') or 0\n"                     \
  "local age = -1\n"                                                                    \
  "if cut > 0 and cut <= now then age = math.floor(now - cut) end\n"                    \
  "local learn, lease, khold = -1, 0, 0\n"                                             \
  "if KEYS[11] then\n"                                                                  \
  "  local kh = tonumber(redis.call('GET', KEYS[11]) or '0') or 0\n"                    \
  "  if kh > now then khold = math.floor(kh - now) end\n"                               \
  "end\n"                                                                               \
  "local tl = tonumber(ARGV[7])\n"                                                      \
  "local mi = tonumber(ARGV[9])\n"                                                      \
  "if khold > 0 then\n"                                                                 \
  "elseif tl > 0 and w <= 0 then\n"                                                     \
  "  learn, lease = learn_place(KEYS[6], tl, tonumber(ARGV[8]), KEYS[8], KEYS[9],\n"  \
  "    KEYS[10], mi, ARGV[10], tonumber(ARGV[11]))\n"                                   \
  "elseif mi > 0 and w <= 0 then\n"                                                     \
  "  lease = slot_take(KEYS[8], KEYS[9], KEYS[10], mi, ARGV[10], tonumber(ARGV[11]))\n" \
  "end\n"                                                                               \
  "return {0, math.floor(w), brk, learn, age, lease, khold}\n"

/* A 429 hold: KEYS hold; ARGV for_us.  Holds only move forward; PX = its length. */
#define CG_LUA_HOLD                                                                     \
  CG_LUA_NOW                                                                            \
  "local d = tonumber(ARGV[1])\n"                                                       \
  "local cur = tonumber(redis.call('GET', KEYS[1]) or '0') or 0\n"                      \
  "if now + d > cur then\n"                                                             \
  "  redis.call('SET', KEYS[1], string.format('%.0f', now + d), 'PX',\n"                \
  "    math.floor(d / 1000) + 1)\n"                                                     \
  "end\n"                                                                               \
  "return 0\n"

/* The hold left, us (0: none): the longest of KEYS (the pool's hold, and a limit key's,
 * limiter.h keyed holds). */
#define CG_LUA_HOLD_LEFT                                                                \
  CG_LUA_NOW                                                                            \
  "local left = 0\n"                                                                    \
  "for i = 1, #KEYS do\n"                                                               \
  "  local cur = tonumber(redis.call('GET', KEYS[i]) or '0') or 0\n"                    \
  "  if cur - now > left then left = cur - now end\n"                                   \
  "end\n"                                                                               \
  "return math.floor(left)\n"

/* An in-flight lease: KEYS inflight (a sorted set: lease id -> expiry, server ms), its
 * queue, the queue's expiry (CG_LUA_SLOT_FN); ARGV id (the waiter's, the same on every
 * ask), max, lease_ms.  Expired leases (their machine died) are dropped first.  1:
 * taken, 0: not this caller's turn yet (it holds its place in the queue). */
#define CG_LUA_ACQUIRE                                                                  \
  CG_LUA_NOW                                                                            \
  CG_LUA_SLOT_FN                                                                        \
  "return slot_take(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[2]), ARGV[1],\n"           \
  "  tonumber(ARGV[3]))\n"

/* Renew a live lease: KEYS inflight; ARGV id, lease_ms.  1 renewed, 0 gone. */
#define CG_LUA_RENEW                                                                    \
  CG_LUA_NOW                                                                            \
  "if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end\n"                   \
  "redis.call('ZADD', KEYS[1], math.floor(now / 1000) + tonumber(ARGV[2]), ARGV[1])\n"  \
  "redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 4)\n"                             \
  "return 1\n"

/* The breaker's gate: KEYS brk ("<next probe us>:<failed probes>" while open; absent:
 * closed), probe; ARGV id, probe_ms.  {0, 0} go; {1, 0} go as the probe (SET NX PX: one
 * across the fleet; it expires with its holder's deadline or lease); {2, us, probing,
 * leased} refused, us until a probe may go (the cooldown's end, or the running probe's
 * expiry), leased 1 when the running probe's value ends in "|L" (its lease, not its
 * deadline, sets that expiry: shared-redis.c cg__r_probe_val). */
#define CG_LUA_BRK_ADMIT                                                                \
  "local v = redis.call('GET', KEYS[1])\n"                                              \
  "if not v then return {0, 0, 0} end\n"                                                \
  CG_LUA_NOW                                                                            \
  "local nxt = tonumber(string.match(v, '^(%d+):')) or 0\n"                             \
  "if now < nxt then return {2, math.floor(nxt - now), 0} end\n"                        \
  "if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', tonumber(ARGV[2])) then\n"        \
  "  return {1, 0, 0}\n"                                                                \
  "end\n"                                                                               \
  "local pt = redis.call('PTTL', KEYS[2])\n"                                            \
  "if pt < 0 then pt = 0 end\n"                                                         \
  "local cur = redis.call('GET', KEYS[2])\n"                                            \
  "local lf = 0\n"                                                                      \
  "if cur and string.sub(cur, -2) == '|L' then lf = 1 end\n"                            \
  "return {2, pt * 1000, 1, lf}\n"

/* An early probe (breaker.h cg_breaker_early): KEYS brk, probe, early; ARGV id, probe_ms,
 * gap_ms.  1 when the breaker is open and cooling down, no early probe began in the last
 * gap_ms (the key `early`, which this sets) and this call took the probe (SET NX PX, as
 * BRK_ADMIT's); 0 otherwise (closed, ready for a regular probe, a probe out).  brk keeps
 * the cooldown: a failed early probe leaves it as it was (BRK_REPORT with probe 2). */
#define CG_LUA_BRK_EARLY                                                                \
  "local v = redis.call('GET', KEYS[1])\n"                                              \
  "if not v then return 0 end\n"                                                       \
  CG_LUA_NOW                                                                            \
  "local nxt = tonumber(string.match(v, '^(%d+):')) or 0\n"                             \
  "if now >= nxt then return 0 end\n"                                                  \
  "if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end\n"                           \
  "if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', tonumber(ARGV[2])) then\n"        \
  "  redis.call('SET', KEYS[3], '1', 'PX', tonumber(ARGV[3]))\n"                        \
  "  return 1\n"                                                                        \
  "end\n"                                                                               \
  "return 0\n"

/* The breaker's state: KEYS brk, probe.  {0 closed | 1 open | 2 half-open, us until the
 * next probe may go (open) or the probe expires (half-open)}.  The probe is looked at
 * first: an early one (BRK_EARLY) is out while brk still holds the cooldown, and the
 * calls held with it wait for its answer (a helper's find: looked at second, they saw
 * "open, the next probe past the deadline" and ended 3 ms before it closed the breaker:
 * 4 of 8 in 8 of 21 runs). */
#define CG_LUA_BRK_STATE                                                                \
  "local v = redis.call('GET', KEYS[1])\n"                                              \
  "if not v then return {0, 0} end\n"                                                   \
  CG_LUA_NOW                                                                            \
  "local nxt = tonumber(string.match(v, '^(%d+):')) or 0\n"                             \
  "local pt = redis.call('PTTL', KEYS[2])\n"                                            \
  "if pt > 0 then return {2, pt * 1000} end\n"                                          \
  "if now < nxt then return {1, math.floor(nxt - now)} end\n"                           \
  "return {1, 0}\n"

/* A result for the breaker (breaker.h's rules): KEYS brk, probe, win (a hash of
 * per-bucket counts "<bucket>:o" / "<bucket>:f", 10 buckets per window), run (failures
 * in a row).  ARGV failed (1, 0, -1), probe (1/0), id, window_us, min_requests,
 * failure_rate, consecutive, cooldown_us, cooldown_max_us, jitter, u (0..1), floor_us.
 * A probe's failure re-opens it with the interval doubled (cooldown * 2^failed probes, at
 * most cooldown_max, times 1 - j + 2 j u, at least floor); its success closes it and
 * empties the window.  An early probe's (probe 2): its success closes it as well; any
 * other result leaves brk as it was (the cooldown it found), but a failure's floor moves
 * the next probe to at least floor_us from now (its fail count kept).  A probe's failure
 * that comes after its lease ran out and another call took the probe, or after the
 * breaker closed, counts as any attempt's (a helper's find: a stalled probe's late 504
 * re-opened a breaker its taker had closed, for the whole fleet); a late success still
 * closes it.  Returns 1 when this result opened it. */
#define CG_LUA_BRK_REPORT                                                               \
  CG_LUA_NOW                                                                            \
  "local failed = tonumber(ARGV[1])\n"                                                  \
  "local wus = tonumber(ARGV[4])\n"                                                     \
  "local function open(fails)\n"                                                        \
  "  local iv = tonumber(ARGV[8]) * 2 ^ fails\n"                                        \
  "  local mx = tonumber(ARGV[9])\n"                                                    \
  "  if iv > mx then iv = mx end\n"                                                     \
  "  local j = tonumber(ARGV[10])\n"                                                    \
  "  iv = iv * (1 - j + 2 * j * tonumber(ARGV[11]))\n"                                  \
  "  local fl = tonumber(ARGV[12])\n"                                                   \
  "  if iv < fl then iv = fl end\n"                                                     \
  "  redis.call('SET', KEYS[1], string.format('%.0f:%d', now + iv, fails), 'PX',\n"     \
  "    math.floor(iv / 1000) + 60000)\n"                                                \
  "  redis.call('DEL', KEYS[3], KEYS[4])\n"                                             \
  "end\n"                                                                               \
  "if ARGV[2] == '2' then\n"                                                            \
  "  if redis.call('GET', KEYS[2]) == ARGV[3] then redis.call('DEL', KEYS[2]) end\n"    \
  "  if failed == 0 then redis.call('DEL', KEYS[1], KEYS[3], KEYS[4]) end\n"           \
  "  local fl = tonumber(ARGV[12])\n"                                                   \
  "  local v = redis.call('GET', KEYS[1])\n"                                            \
  "  if failed == 1 and fl > 0 and v then\n"                                            \
  "    local nxt = tonumber(string.match(v, '^(%d+):')) or 0\n"                         \
  "    if now + fl > nxt then\n"                                                        \
  "      redis.call('SET', KEYS[1], string.format('%.0f:%s', now + fl,\n"               \
  "        string.match(v, ':(%d+)$') or '0'), 'PX', math.floor(fl / 1000) + 60000)\n"  \
  "    end\n"                                                                           \
  "  end\n"                                                                             \
  "  return 0\n"                                                                        \
  "end\n"                                                                               \
  "local stale = false\n"                                                               \
  "if ARGV[2] == '1' then\n"                                                            \
  "  local cur = redis.call('GET', KEYS[2])\n"                                          \
  "  if cur == ARGV[3] then redis.call('DEL', KEYS[2]) end\n"                           \
  "  stale = failed == 1 and cur ~= ARGV[3] and\n"                                      \
  "    (cur or redis.call('EXISTS', KEYS[1]) == 0)\n"                                   \
  "end\n"                                                                               \
  "if ARGV[2] == '1' and not stale then\n"                                              \
  "  if failed == 1 then\n"                                                             \
  "    local v = redis.call('GET', KEYS[1])\n"                                          \
  "    local fails = 0\n"                                                               \
  "    if v then fails = (tonumber(string.match(v, ':(%d+)$')) or 0) + 1 end\n"         \
  "    open(fails)\n"                                                                   \
  "    return 1\n"                                                                      \
  "  elseif failed == 0 then\n"                                                         \
  "    redis.call('DEL', KEYS[1], KEYS[3], KEYS[4])\n"                                  \
  "  end\n"                                                                             \
  "  return 0\n"                                                                        \
  "end\n"                                                                               \
  "if failed < 0 then return 0 end\n"                                                   \
  "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end\n"                           \
  "local bw = wus / 10\n"                                                               \
  "local b = math.floor(now / bw)\n"                                                    \
  "local ttl = math.floor(wus / 1000) + 1000\n"                                         \
  "if failed == 1 then\n"                                                               \
  "  redis.call('HINCRBY', KEYS[3], b .. ':f', 1)\n"                                    \
  "else\n"                                                                              \
  "  redis.call('HINCRBY', KEYS[3], b .. ':o', 1)\n"                                    \
  "end\n"                                                                               \
  "redis.call('PEXPIRE', KEYS[3], ttl)\n"                                               \
  "local run = 0\n"                                                                     \
  "if failed == 1 then\n"                                                               \
  "  run = redis.call('INCR', KEYS[4])\n"                                               \
  "  redis.call('PEXPIRE', KEYS[4], ttl)\n"                                             \
  "else\n"                                                                              \
  "  redis.call('DEL', KEYS[4])\n"                                                      \
  "end\n"                                                                               \
  "local cons = tonumber(ARGV[7])\n"                                                    \
  "if cons > 0 and run >= cons then open(0) return 1 end\n"                             \
  "local all = redis.call('HGETALL', KEYS[3])\n"                                        \
  "local ok, fl = 0, 0\n"                                                               \
  "for i = 1, #all, 2 do\n"                                                             \
  "  local bb, k = string.match(all[i], '^(%d+):(%a)$')\n"                              \
  "  if not bb or tonumber(bb) <= b - 10 then redis.call('HDEL', KEYS[3], all[i])\n"    \
  "  elseif k == 'f' then fl = fl + tonumber(all[i + 1])\n"                             \
  "  else ok = ok + tonumber(all[i + 1]) end\n"                                         \
  "end\n"                                                                               \
  "if ok + fl >= tonumber(ARGV[5]) and fl / (ok + fl) >= tonumber(ARGV[6]) then\n"      \
  "  open(0)\n"                                                                         \
  "  return 1\n"                                                                        \
  "end\n"                                                                               \
  "return 0\n"

/* Give an unused probe back: KEYS probe; ARGV id (only its holder's). */
#define CG_LUA_BRK_RELEASE                                                              \
  "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end\n"      \
  "return 0\n"

/* The learned rate's place, fleet-wide (CG_LUA_LEARN_FN): KEYS learn_tat, inflight, its
 * queue and the queue's expiry (CG_LUA_SLOT_FN);
 * ARGV T us, tau us, max_inflight (0: none), lease id, lease_ms.  {learn, lease}: learn
 * 0 taken, > 0 us until it might be, -2 free but every slot is taken (nothing taken:
 * ask again); lease 1 when an in-flight lease was taken with the place. */
#define CG_LUA_LEARN_TAKE                                                               \
  CG_LUA_NOW                                                                            \
  CG_LUA_SLOT_FN                                                                        \
  CG_LUA_LEARN_FN                                                                       \
  "local l, s = learn_place(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), KEYS[2],\n"  \
  "  KEYS[3], KEYS[4], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5]))\n"                \
  "return {l, s}\n"

/* A machine cut the learned rate (a throttle): KEYS cut, learn_tat.  Every machine sees
 * the cut's age in its next admission and cuts its own (once per round: limiter.h's
 * quiet period); the fleet's learned word starts again from now. */
#define CG_LUA_LEARN_CUT                                                                \
  CG_LUA_NOW                                                                            \
  "redis.call('SET', KEYS[1], string.format('%.0f', now), 'PX', 60000)\n"              \
  "redis.call('SET', KEYS[2], string.format('%.0f', now), 'PX', 60000)\n"              \
  "return 0\n"

/* The retry budget (budget.h, Finagle's RetryBudget): KEYS bud, a hash of per-bucket
 * counts "<bucket>:f" (first attempts) and "<bucket>:r" (retries), 10 buckets per window.
 * BUD_FIRST: ARGV window_us; counts one first attempt. */
#define CG_LUA_BUD_FIRST                                                                \
  CG_LUA_NOW                                                                            \
  "local w = tonumber(ARGV[1])\n"                                                       \
  "local b = math.floor(now / (w / 10))\n"                                              \
  "redis.call('HINCRBY', KEYS[1], b .. ':f', 1)\n"                                      \
  "redis.call('PEXPIRE', KEYS[1], math.floor(w / 1000) + 1000)\n"                       \
  "return 0\n"

/* BUD_RETRY: KEYS bud, budc (a sorted set of retry slots: id -> expiry, server ms);
 * ARGV window_us, ratio, min_per_s, max_concurrent (0: none), id, slot_ms.  A retry goes
 * while retries + 1 <= ratio * first + min_per_s * window_s, and fewer than
 * max_concurrent slots are live.  {0, 0, bucket} granted (counted; the slot taken);
 * {1, us, bucket} refused by the window (us: to the next bucket's start, when the oldest
 * rotates out); {2, us, bucket} refused by concurrency. */
#define CG_LUA_BUD_RETRY                                                                \
  CG_LUA_NOW                                                                            \
  "local w = tonumber(ARGV[1])\n"                                                       \
  "local bw = w / 10\n"                                                                 \
  "local b = math.floor(now / bw)\n"                                                    \
  "local all = redis.call('HGETALL', KEYS[1])\n"                                        \
  "local first, retries = 0, 0\n"                                                       \
  "for i = 1, #all, 2 do\n"                                                             \
  "  local bb, k = string.match(all[i], '^(%d+):(%a)$')\n"                              \
  "  if not bb or tonumber(bb) <= b - 10 then redis.call('HDEL', KEYS[1], all[i])\n"    \
  "  elseif k == 'f' then first = first + tonumber(all[i + 1])\n"                       \
  "  else retries = retries + tonumber(all[i + 1]) end\n"                               \
  "end\n"                                                                               \
  "local allowed = tonumber(ARGV[2]) * first + tonumber(ARGV[3]) * w / 1000000\n"       \
  "if retries + 1 > allowed then return {1, math.floor((b + 1) * bw - now), b} end\n"   \
  "local maxc = tonumber(ARGV[4])\n"                                                    \
  "if maxc > 0 then\n"                                                                  \
  "  local nms = math.floor(now / 1000)\n"                                              \
  "  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', nms)\n"                            \
  "  if redis.call('ZCARD', KEYS[2]) >= maxc then return {2, 100000, b} end\n"          \
  "  redis.call('ZADD', KEYS[2], nms + tonumber(ARGV[6]), ARGV[5])\n"                   \
  "  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[6]) + 1000)\n"                        \
  "end\n"                                                                               \
  "redis.call('HINCRBY', KEYS[1], b .. ':r', 1)\n"                                      \
  "redis.call('PEXPIRE', KEYS[1], math.floor(w / 1000) + 1000)\n"                       \
  "return {0, 0, b}\n"

/* BUD_REFUND: KEYS bud; ARGV bucket.  A retry that succeeded leaves the window (budget.h
 * cg_budget_refund) while its bucket is still there. */
#define CG_LUA_BUD_REFUND                                                               \
  "local f = ARGV[1] .. ':r'\n"                                                         \
  "local v = tonumber(redis.call('HGET', KEYS[1], f) or '0') or 0\n"                    \
  "if v > 0 then redis.call('HINCRBY', KEYS[1], f, -1) end\n"                           \
  "return 0\n"

#endif
