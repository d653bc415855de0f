-- RedisStore / RedisTokenStore extend: the holder under ARGV[1] renews its lease from now.
-- KEYS[1]  the record   ARGV[1] fence (decimal)   ARGV[2] lease, ms
-- Returns  1 extended, 0 the fence or state no longer matches (lease lost)
if redis.replicate_commands then redis.replicate_commands() end

local key = KEYS[1]
local rec = redis.call('HMGET', key, 's', 'n')
if rec[1] ~= 'P' or rec[2] ~= ARGV[1] then return 0 end
local lease = math.max(tonumber(ARGV[2]), 1)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', key, 'l', string.format('%.0f', now + lease))
if redis.call('PTTL', key) < lease then redis.call('PEXPIRE', key, lease) end
return 1
