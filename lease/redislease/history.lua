-- history.lua writes one run record into a lease's capped run history.
-- KEYS[1] run history: a sorted set, member = the run's JSON, score = its token
-- ARGV[1] token (decimal, below 2^53: exact as a score)   ARGV[2] record (JSON)
-- ARGV[3] how many runs to keep   ARGV[4] the lease name
-- ARGV[5] the clock skew tolerated, in microseconds (lease.MaxClockSkew)
-- ARGV[6] the latest start a record may have: the writer's clock plus that
--         skew, as "2006-01-02T15:04:05" (UTC; records hold UTC starts)
-- The record of the same token (the one written at the start) is replaced,
-- then the history is cut below its keep newest valid records. A valid record
-- is JSON with this lease's name, a token equal to its score and a start no
-- later than ARGV[6]; tokens are at least the server's clock in microseconds
-- when minted, so a score beyond the clock (plus the skew) is no run either
-- (this run's own included: it cannot be valid). What is not valid (written by
-- hand, by another program, or forged to push real runs out) never counts
-- towards keep: entries scored in the future are dropped, and so is every
-- invalid entry met above the cut. Only commands the ACL in docs/stores.md
-- already grants (ZADD, ZRANGE, ZREM, ZCARD, ZREMRANGEBYSCORE), all of Redis
-- 3.2, and TIME. Returns the number of entries kept.
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', now + tonumber(ARGV[5])), '+inf')
local keep = tonumber(ARGV[3])
local n = redis.call('ZCARD', KEYS[1])
if n <= keep then
  return n
end
local function valid(m, score)
  local ok, r = pcall(cjson.decode, m)
  return ok and type(r) == 'table' and r.name == ARGV[4] and type(r.token) == 'number' and r.token == score
    and type(r.start) == 'string' and string.sub(r.start, 1, 19) <= ARGV[6]
end
-- Walk down from the highest score, 100 entries at a time, to the keep-th
-- valid record; collect the invalid entries met on the way.
local bad, valids, cut, seen = {}, 0, nil, 0
while cut == nil and seen < n do
  local batch = redis.call('ZRANGE', KEYS[1], -(seen + 100), -(seen + 1), 'WITHSCORES')
  if #batch == 0 then break end
  for i = #batch - 1, 1, -2 do
    local score = tonumber(batch[i + 1])
    if valid(batch[i], score) then
      valids = valids + 1
      if valids == keep then
        cut = batch[i + 1]
        break
      end
    else
      bad[#bad + 1] = batch[i]
    end
  end
  seen = seen + #batch / 2
end
-- At most 1000 at a time: unpack's limit on arguments.
for i = 1, #bad, 1000 do
  redis.call('ZREM', KEYS[1], unpack(bad, i, math.min(i + 999, #bad)))
end
if cut ~= nil then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. cut)
end
return redis.call('ZCARD', KEYS[1])
