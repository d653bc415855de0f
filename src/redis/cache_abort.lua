-- RequestIdCache abort: removes this holder's marker so a retry may run. Holder ids are random
-- and never reused, so deleting cannot let a fenced-off holder match a later marker.
-- KEYS[1]  the entry (the waiters' count and wake list are named from it: cache_wake_step.lua)
-- ARGV[1] STATE_HELD .. the holder's id (8 bytes)
-- Returns  REPLY_DONE removed, REPLY_LEASE_LOST the marker is gone or another holder's
-- A release wakes the hold's waiters (cache_wait.lua), only when some counted themselves in.
-- The names below are C++'s too (RedisFencedReply); tests check that they agree.
--! include record_wake_step.lua
--! include cache_wake_step.lua
local REPLY_LEASE_LOST, REPLY_DONE = 0, 1
local key = KEYS[1]
local marker = redis.call('GET', key)
if not marker or string.sub(marker, 1, 9) ~= ARGV[1] then return REPLY_LEASE_LOST end
redis.call('DEL', key)
wake_waiters(key, ARGV[1])
return REPLY_DONE
