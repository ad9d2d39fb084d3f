-- hold.lua is a release that keeps the lease taken for a while (--hold-at-least):
-- while the record still carries our ID, it is rewritten with the time the
-- hold ends and set to expire then, instead of being deleted. The ID stays in
-- it, so nobody else can renew or release it; the fencing counter is not
-- touched, so the next holder's token is still above ours.
-- KEYS[1] holder record   ARGV[1] acquisition ID   ARGV[2] hold in ms   ARGV[3] hold end (RFC3339Nano)
-- Returns 1 when held, 0 when the lease is gone or another's.
local cur = redis.call('GET', KEYS[1])
if not cur then
  return 0
end
local ok, rec = pcall(cjson.decode, cur)
if not ok or type(rec) ~= 'table' or rec.id ~= ARGV[1] then
  return 0
end
-- The record is rewritten as text, not through cjson, which would round the
-- token (see acquire.lua); a hold_until of an earlier hold is replaced.
local s = string.gsub(cur, ',"held_until":"[^"]*"', '')
s = string.sub(s, 1, -2) .. ',"held_until":"' .. ARGV[3] .. '"}'
redis.call('SET', KEYS[1], s, 'PX', ARGV[2])
return 1
