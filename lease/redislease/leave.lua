-- leave.lua removes a standby of a lease.
-- KEYS[1] candidates (sorted set)   KEYS[2] candidate records (hash)   ARGV[1] candidate ID
-- Returns 1 when it was registered, else 0.
redis.call('HDEL', KEYS[2], ARGV[1])
return redis.call('ZREM', KEYS[1], ARGV[1])
