-- candidates.lua reads the holder record and the live standbys of a lease in
-- one consistent step. It only reads: lapsed registrations are skipped here
-- and removed by the next join.
-- KEYS[1] holder record   KEYS[2] candidates (sorted set)   KEYS[3] candidate records (hash)
-- Returns {record or false, record pttl, now ms, ID1, expiry1, JSON1, ID2, ...}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {false, -2, now}
local cur = redis.call('GET', KEYS[1])
if cur then
  out[1] = cur
  out[2] = redis.call('PTTL', KEYS[1])
end
local live = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local rec = redis.call('HGET', KEYS[3], live[i])
  if rec then
    out[#out + 1] = live[i]
    out[#out + 1] = live[i + 1]
    out[#out + 1] = rec
  end
end
return out
