-- RedisStore / RedisTokenStore commit: the holder under ARGV[1] stores its end.
-- KEYS[1]  the record
-- ARGV[1]  fence (decimal)   ARGV[2] state, C (completed) or F (failed)   ARGV[3] result bytes
-- ARGV[4]  ttl, ms (below 1 becomes 1: PEXPIRE 0 would delete at once, EX 0 is an error)
-- Returns  1 committed, 0 the fence or state no longer matches (lease lost)
local key = KEYS[1]
local rec = redis.call('HMGET', key, 's', 'n')
if rec[1] ~= 'P' or rec[2] ~= ARGV[1] then return 0 end
redis.call('HSET', key, 's', ARGV[2], 'r', ARGV[3])
redis.call('PEXPIRE', key, math.max(tonumber(ARGV[4]), 1))
return 1
