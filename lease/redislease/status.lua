-- status.lua reads the record and its remaining TTL in one consistent step.
-- KEYS[1] holder record
-- Returns {} when free, else {record, pttl}.
local cur = redis.call('GET', KEYS[1])
if not cur then
  return {}
end
return {cur, redis.call('PTTL', KEYS[1])}
