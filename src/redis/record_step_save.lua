-- RedisStore save_step: the holder under ARGV[1] records a step of its run in the record's own
-- hash, so the step shares the record's slot, fence and expiry. Fields: sf (the fingerprint the
-- steps belong to), sc (how many), x<i> (step i's name), y<i> (its result bytes). Steps of
-- another payload's run (sf is not the record's f) are dropped first.
-- KEYS[1]  the record
-- ARGV[1]  fence (decimal)   ARGV[2] step index (decimal)   ARGV[3] name   ARGV[4] result bytes
-- Returns  REPLY_DONE saved, REPLY_LEASE_LOST the fence or state no longer matches,
--          REPLY_GAP the steps before the index are missing
local REPLY_LEASE_LOST, REPLY_DONE, REPLY_GAP = 0, 1, 2
local STATE_HELD = 'P'
local key = KEYS[1]
local rec = redis.call('HMGET', key, 's', 'n', 'f', 'sf', 'sc')
if rec[1] ~= STATE_HELD or rec[2] ~= ARGV[1] then return REPLY_LEASE_LOST end
local count = tonumber(rec[5]) or 0
if rec[4] ~= rec[3] then
  for i = 0, count - 1 do redis.call('HDEL', key, 'x' .. i, 'y' .. i) end
  count = 0
  redis.call('HSET', key, 'sf', rec[3])
end
local index = tonumber(ARGV[2])
if not index or index > count then return REPLY_GAP end
redis.call('HSET', key, 'x' .. index, ARGV[3], 'y' .. index, ARGV[4], 'sc', index + 1)
return REPLY_DONE
