-- history.lua writes one run record into a lease's capped run history.
-- KEYS[1] run history: a sorted set, member = the run's JSON, score = its token
-- ARGV[1] token (decimal, below 2^53: exact as a score)   ARGV[2] record (JSON)
-- ARGV[3] how many runs to keep
-- The record of the same token (the one written at the start) is replaced,
-- then the lowest tokens beyond the cap are dropped. Only commands the ACL
-- in docs/stores.md already grants (ZADD, ZRANGE, ZREM, ZCARD,
-- ZREMRANGEBYSCORE), all of Redis 3.2. Returns the number of runs kept.
redis.call('ZREMRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
local keep = tonumber(ARGV[3])
local n = redis.call('ZCARD', KEYS[1])
while n > keep do
  -- At most 1000 at a time: unpack's limit on arguments.
  local old = redis.call('ZRANGE', KEYS[1], 0, math.min(n - keep, 1000) - 1)
  redis.call('ZREM', KEYS[1], unpack(old))
  n = n - #old
end
return n
