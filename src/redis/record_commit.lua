-- RedisStore / RedisTokenStore commit: the holder under ARGV[1] stores its end.
-- KEYS[1]  the record
-- ARGV[1]  fence (decimal)   ARGV[2] state, C (completed) or F (failed)   ARGV[3] result bytes
-- ARGV[4]  ttl, ms (below 1 becomes 1: PEXPIRE 0 would delete at once, EX 0 is an error)
-- Returns  1 committed (or this very commit stood already), 0 the fence or state no longer
--          matches (lease lost)
local key = KEYS[1]
local rec = redis.call('HMGET', key, 's', 'n')
if rec[2] ~= ARGV[1] then return 0 end
if rec[1] ~= 'P' then
  -- The same commit, retried after its reply was lost: success if it stands as sent. The state
  -- is written again (the same value, the expiry untouched) so that a WAIT after this reply
  -- covers the earlier write too, whichever connection made it.
  if rec[1] ~= ARGV[2] or redis.call('HGET', key, 'r') ~= ARGV[3] then return 0 end
  redis.call('HSET', key, 's', ARGV[2])
  return 1
end
redis.call('HSET', key, 's', ARGV[2], 'r', ARGV[3])
redis.call('PEXPIRE', key, math.max(tonumber(ARGV[4]), 1))
return 1
