-- RedisStore await_change: a waiter for the hold under ARGV[1] counts itself (the record's field
-- w), so that the end of that hold wakes it (record_wake_step.lua); its BLPOP on the wake list
-- follows this script on the same connection. A hold that already ended, was taken over, or whose
-- lease ran out gives the waiter a wake of its own instead: its BLPOP returns at once.
-- KEYS[1]  the record (the hold's wake list is named from it)   ARGV[1] the holder's fence (decimal)
-- Returns  REPLY_COUNTED counted, REPLY_WOKEN woken at once
-- The names below are C++'s too (WaitReply); tests check that they agree.
--! include record_wake_step.lua
local REPLY_WOKEN, REPLY_COUNTED = 0, 1
local STATE_HELD = 'P'
if redis.replicate_commands then redis.replicate_commands() end  -- Redis < 5: TIME before writes

local rec = redis.call('HMGET', KEYS[1], 's', 'n', 'l')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if rec[1] == STATE_HELD and rec[2] == ARGV[1] and (tonumber(rec[3]) or 0) > now then
  redis.call('HINCRBY', KEYS[1], 'w', 1)
  return REPLY_COUNTED
end
wake(KEYS[1], ARGV[1], 1)
return REPLY_WOKEN
