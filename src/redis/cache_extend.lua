-- RequestIdCache extend: renews this holder's marker for ARGV[2] ms from now.
-- KEYS[1]  the entry   ARGV[1] STATE_HELD .. the holder's id (8 bytes)   ARGV[2] lease, ms
-- Returns  REPLY_DONE extended, REPLY_LEASE_LOST the marker is gone or another holder's
-- The names below are C++'s too (RedisFencedReply); tests check that they agree.
local REPLY_LEASE_LOST, REPLY_DONE = 0, 1
local key = KEYS[1]
local marker = redis.call('GET', key)
if not marker or string.sub(marker, 1, 9) ~= ARGV[1] then return REPLY_LEASE_LOST end
redis.call('PEXPIRE', key, math.max(tonumber(ARGV[2]), 1))
return REPLY_DONE
