-- acquire.lua takes the lease if it is free, in one atomic step.
-- KEYS[1] holder record (JSON, PX TTL)   KEYS[2] fencing counter (no TTL)
-- ARGV[1] acquisition ID   ARGV[2] TTL in ms   ARGV[3] holder label   ARGV[4] since (RFC3339Nano)
-- ARGV[5] how far, in microseconds, a token may be ahead of TIME
-- Returns {1, token, since, TIME in µs} when we hold it, {0, record, pttl} when another
-- does, {2, counter} when the counter is not a number below 2^53 (corrupt:
-- no token is minted from it), and {3, token, TIME in µs} when the token
-- would be further ahead of the server's clock than ARGV[5] (nothing written).
--
-- The token is max(counter + 1, server TIME in microseconds), written back to
-- the counter: strictly increasing while the counter survives, and still
-- above every earlier token after it is lost (restart without persistence,
-- failover to a replica that missed the write, the key deleted or evicted),
-- as long as the server's clock does not step back. Scripts replicate their
-- effects, not the script, so calling TIME before a write is allowed.
-- Numbers are written with %d, never through cjson (which rounds past 14 digits).
local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, rec = pcall(cjson.decode, cur)
  if ok and type(rec) == 'table' and rec.id == ARGV[1] then
    -- A retry of an attempt whose answer was lost: it is ours already. Restart
    -- the TTL so the store keeps it at least TTL past this request's send time,
    -- which is what the caller counts its deadline from.
    if redis.replicate_commands then redis.replicate_commands() end
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    local t = redis.call('TIME')
    return {1, tonumber(rec.token), rec.since, string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))}
  end
  return {0, cur, redis.call('PTTL', KEYS[1])}
end
local limit = 9007199254740992 -- 2^53: JSON readers lose integers from here on
local prev = 0
local raw = redis.call('GET', KEYS[2])
if raw then
  if not string.match(raw, '^%d+$') or string.len(raw) > 16 then
    return {2, raw}
  end
  prev = tonumber(raw)
  if prev + 1 >= limit then
    return {2, raw}
  end
end
-- Redis 3.2-4.x replicate scripts verbatim unless told otherwise, and refuse
-- writes after TIME; from 5.0 on this is the default and the call a no-op.
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local token = prev + 1
if now > token then
  token = now
end
if token >= limit then
  return {2, raw or ''}
end
if token - now > tonumber(ARGV[5]) then
  return {3, string.format('%d', token), string.format('%d', now)}
end
local tok = string.format('%d', token)
redis.call('SET', KEYS[2], tok)
local rec = cjson.encode({holder = ARGV[3], id = ARGV[1], since = ARGV[4], ttl_ms = tonumber(ARGV[2])})
rec = string.sub(rec, 1, -2) .. ',"token":' .. tok .. '}'
redis.call('SET', KEYS[1], rec, 'PX', ARGV[2])
return {1, token, ARGV[4], string.format('%d', now)}
