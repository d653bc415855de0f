-- RedisTokenStore abort: the holder under ARGV[1] returns the token to pending (STATE_ISSUED), so
-- the client may retry with it until the token's own expiry. A token already past that expiry is
-- deleted: it can never be claimed again, so no later fence can meet a fenced-off holder.
-- KEYS[1]  the token   (the hold's wake list is named from it: record_wake_step.lua)
-- ARGV[1]  fence (decimal)
-- Returns  REPLY_DONE returned to pending (or expired), REPLY_LEASE_LOST the fence or state no
--          longer matches
-- Either way the hold's waiters are woken (record_wait.lua).
-- The names below are C++'s too (RedisFencedReply, redis_state); tests check that they agree.
--! include record_wake_step.lua
local REPLY_LEASE_LOST, REPLY_DONE = 0, 1
local STATE_HELD, STATE_ISSUED = 'P', 'T'
if redis.replicate_commands then redis.replicate_commands() end

local key = KEYS[1]
local rec = redis.call('HMGET', key, 's', 'n', 'd', 'w')
if rec[1] ~= STATE_HELD or rec[2] ~= ARGV[1] then return REPLY_LEASE_LOST end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
wake(key, ARGV[1], rec[4])
local left = (tonumber(rec[3]) or 0) - now
if left < 1 then
  redis.call('DEL', key)
  return REPLY_DONE
end
redis.call('HSET', key, 's', STATE_ISSUED)
redis.call('HDEL', key, 'f', 'l', 'r', 'w')
redis.call('PEXPIRE', key, left)
return REPLY_DONE
