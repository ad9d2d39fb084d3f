-- join.lua registers or refreshes a standby of a lease, and drops the ones
-- whose registration lapsed, in one step.
-- KEYS[1] candidates (sorted set: ID → expiry, server ms)   KEYS[2] candidate records (hash: ID → JSON)
-- ARGV[1] candidate ID   ARGV[2] expiry in ms   ARGV[3] candidate record (JSON)
-- Returns {live candidates, 1 if the candidate is new else 0}.
-- Both keys expire with their last candidate, so a lease nobody waits for
-- leaves nothing behind.
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #dead > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  for i = 1, #dead, 500 do -- unpack has a stack limit
    redis.call('HDEL', KEYS[2], unpack(dead, i, math.min(i + 499, #dead)))
  end
end
local new = redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
if new == 1 or redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
end
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local keep = tonumber(last[2]) - now + 1000
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('PEXPIRE', KEYS[2], keep)
return {redis.call('ZCARD', KEYS[1]), new}
