-- renew.lua extends the lease only while the record still carries our ID;
-- it never re-creates a vanished record.
-- KEYS[1] holder record   ARGV[1] acquisition ID   ARGV[2] TTL in ms
-- Returns 1 when extended, 0 when the lease is gone or another's.
local cur = redis.call('GET', KEYS[1])
if not cur then
  return 0
end
local ok, rec = pcall(cjson.decode, cur)
if not ok or type(rec) ~= 'table' or rec.id ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
