-- RequestIdCache commit: replaces this holder's marker with the response, for ttl.
-- KEYS[1]  the entry: "P" .. holder id (8 bytes) .. fingerprint (16 bytes) while in progress
-- ARGV[1]  "P" .. the holder's id   ARGV[2] C (completed) or F (failed)   ARGV[3] response bytes
-- ARGV[4]  ttl, ms (below 1 becomes 1: PX 0 is an error)
-- Returns  1 stored (or this very commit stood already), 0 the marker is gone or another
--          holder's (lease lost)
local key = KEYS[1]
local marker = redis.call('GET', key)
if not marker then return 0 end
if string.sub(marker, 1, 9) ~= ARGV[1] then
  -- The same commit, retried after its reply was lost: success if it stands as sent.
  if string.sub(marker, 1, 1) == ARGV[2] and string.sub(marker, 2, 9) == string.sub(ARGV[1], 2) and
     string.sub(marker, 26) == ARGV[3] then
    return 1
  end
  return 0
end
-- The entry keeps the holder id and fingerprint: a repeat with another payload is a mismatch.
redis.call('SET', key, ARGV[2] .. string.sub(marker, 2, 25) .. ARGV[3], 'PX',
           math.max(tonumber(ARGV[4]), 1))
return 1
