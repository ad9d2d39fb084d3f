-- acquire.lua takes the lease if it is free, in one atomic step.
-- KEYS[1] holder record (JSON, PX TTL)   KEYS[2] fencing counter (no TTL)
-- ARGV[1] acquisition ID   ARGV[2] TTL in ms   ARGV[3] holder label   ARGV[4] since (RFC3339Nano)
-- Returns {1, token, since} when we hold it, {0, record, pttl} when another does.
local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, rec = pcall(cjson.decode, cur)
  if ok and type(rec) == 'table' and rec.id == ARGV[1] then
    -- A retry of an attempt whose answer was lost: it is ours already. Restart
    -- the TTL so the store keeps it at least TTL past this request's send time,
    -- which is what the caller counts its deadline from.
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, rec.token, rec.since}
  end
  return {0, cur, redis.call('PTTL', KEYS[1])}
end
local token = redis.call('INCR', KEYS[2])
local rec = cjson.encode({holder = ARGV[3], id = ARGV[1], token = token, since = ARGV[4], ttl_ms = tonumber(ARGV[2])})
redis.call('SET', KEYS[1], rec, 'PX', ARGV[2])
return {1, token, ARGV[4]}
