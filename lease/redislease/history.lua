-- history.lua writes one run record into a lease's capped run history.
-- KEYS[1] run history: a sorted set, member = the run's JSON, score = its token
-- ARGV[1] token (decimal, below 2^53: exact as a score)   ARGV[2] record (JSON)
-- ARGV[3] how many runs to keep
-- The record of the same token (the one written at the start) is replaced,
-- then the lowest tokens beyond the cap are dropped. Returns the runs kept.
redis.call('ZREMRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
local keep = tonumber(ARGV[3])
local n = redis.call('ZCARD', KEYS[1])
if n > keep then
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - keep - 1)
  n = keep
end
return n
