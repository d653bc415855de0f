-- RedisStore abort: the holder under ARGV[1] releases the record. The record stays, released
-- (STATE_RELEASED) with its fence and expiry, so the next claim continues from that fence and a
-- holder fenced off earlier can never match it. Never DEL.
-- KEYS[1]  the record   (the hold's wake list is named from it: record_wake_step.lua)
-- ARGV[1]  fence (decimal)
-- Returns  REPLY_DONE released, REPLY_LEASE_LOST the fence or state no longer matches
-- A release wakes the hold's waiters (record_wait.lua).
-- The names below are C++'s too (RedisFencedReply, redis_state); tests check that they agree.
--! include record_wake_step.lua
local REPLY_LEASE_LOST, REPLY_DONE = 0, 1
local STATE_HELD, STATE_RELEASED = 'P', 'R'
local key = KEYS[1]
local rec = redis.call('HMGET', key, 's', 'n', 'w')
if rec[1] ~= STATE_HELD or rec[2] ~= ARGV[1] then return REPLY_LEASE_LOST end
redis.call('HSET', key, 's', STATE_RELEASED)
if rec[3] then
  redis.call('HDEL', key, 'w')
  wake(key, ARGV[1], rec[3])
end
return REPLY_DONE
