-- release.lua deletes the record only while it carries our ID. Waiters are
-- told by a separate, best-effort PUBLISH from the client (not here: a user
-- without channel permission would make the whole script fail after the DEL).
-- KEYS[1] holder record   ARGV[1] acquisition ID
-- Returns 1 when released, 0 when the lease is gone or another's.
local cur = redis.call('GET', KEYS[1])
if not cur then
  return 0
end
local ok, rec = pcall(cjson.decode, cur)
if not ok or type(rec) ~= 'table' or rec.id ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
