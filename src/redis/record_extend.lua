-- RedisStore / RedisTokenStore extend: the holder under ARGV[1] renews its lease from now.
-- KEYS[1]  the record   ARGV[1] fence (decimal)   ARGV[2] lease, ms
-- Returns  REPLY_DONE extended, REPLY_LEASE_LOST the fence or state no longer matches
-- The names below are C++'s too (RedisFencedReply, redis_state); tests check that they agree.
local REPLY_LEASE_LOST, REPLY_DONE = 0, 1
local STATE_HELD = 'P'
if redis.replicate_commands then redis.replicate_commands() end

local key = KEYS[1]
local rec = redis.call('HMGET', key, 's', 'n')
if rec[1] ~= STATE_HELD or rec[2] ~= ARGV[1] then return REPLY_LEASE_LOST end
local lease = math.max(tonumber(ARGV[2]), 1)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', key, 'l', string.format('%.0f', now + lease))
-- The record outlives the new lease by another lease (held_retention() in C++).
if redis.call('PTTL', key) < 2 * lease then redis.call('PEXPIRE', key, 2 * lease) end
return REPLY_DONE
