-- RequestIdCache commit: replaces this holder's marker with the response, for ttl.
-- KEYS[1]  the entry (the waiters' count and wake list are named from it: cache_wake_step.lua):
--          STATE_HELD .. holder id (8 bytes) .. fingerprint (16 bytes) while in
--          progress (the states are C++'s redis_state: P held, C completed, F failed)
-- ARGV[1]  STATE_HELD .. the holder's id   ARGV[2] STATE_COMPLETED or STATE_FAILED
-- ARGV[3]  response bytes   ARGV[4] ttl, ms (below 1 becomes 1: PX 0 is an error)
-- Returns  REPLY_DONE stored (or this very commit stood already), REPLY_LEASE_LOST the marker is
--          gone or another holder's
-- A commit wakes the hold's waiters (cache_wait.lua), only when some counted themselves in.
-- The names below are C++'s too (RedisFencedReply); tests check that they agree.
--! include record_wake_step.lua
--! include cache_wake_step.lua
local REPLY_LEASE_LOST, REPLY_DONE = 0, 1
local key = KEYS[1]
local marker = redis.call('GET', key)
if not marker then return REPLY_LEASE_LOST end
if string.sub(marker, 1, 9) ~= ARGV[1] then
  -- The same commit, retried after its reply was lost: success if it stands as sent.
  if string.sub(marker, 1, 1) == ARGV[2] and string.sub(marker, 2, 9) == string.sub(ARGV[1], 2) and
     string.sub(marker, 26) == ARGV[3] then
    return REPLY_DONE
  end
  return REPLY_LEASE_LOST
end
-- The entry keeps the holder id and fingerprint: a repeat with another payload is a mismatch.
redis.call('SET', key, ARGV[2] .. string.sub(marker, 2, 25) .. ARGV[3], 'PX',
           math.max(tonumber(ARGV[4]), 1))
wake_waiters(key, ARGV[1])
return REPLY_DONE
