-- RequestIdCache abort: removes this holder's marker so a retry may run. Holder ids are random
-- and never reused, so deleting cannot let a fenced-off holder match a later marker.
-- KEYS[1]  the entry   ARGV[1] "P" .. the holder's id (8 bytes)
-- Returns  1 removed, 0 the marker is gone or another holder's (lease lost)
local key = KEYS[1]
local marker = redis.call('GET', key)
if not marker or string.sub(marker, 1, 9) ~= ARGV[1] then return 0 end
redis.call('DEL', key)
return 1
