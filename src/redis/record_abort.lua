-- RedisStore abort: the holder under ARGV[1] releases the record. The record stays, released
-- (state R) with its fence and expiry, so the next claim continues from that fence and a holder
-- fenced off earlier can never match it. Never DEL.
-- KEYS[1]  the record   ARGV[1] fence (decimal)
-- Returns  1 released, 0 the fence or state no longer matches (lease lost)
local key = KEYS[1]
local rec = redis.call('HMGET', key, 's', 'n')
if rec[1] ~= 'P' or rec[2] ~= ARGV[1] then return 0 end
redis.call('HSET', key, 's', 'R')
return 1
