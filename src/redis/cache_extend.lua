-- RequestIdCache extend: renews this holder's marker for ARGV[2] ms from now.
-- KEYS[1]  the entry   ARGV[1] "P" .. the holder's id (8 bytes)   ARGV[2] lease, ms
-- Returns  1 extended, 0 the marker is gone or another holder's (lease lost)
local key = KEYS[1]
local marker = redis.call('GET', key)
if not marker or string.sub(marker, 1, 9) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', key, math.max(tonumber(ARGV[2]), 1))
return 1
