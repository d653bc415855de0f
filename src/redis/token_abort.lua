-- RedisTokenStore abort: the holder under ARGV[1] returns the token to pending, so the client
-- may retry with it until the token's own expiry. A token already past that expiry is deleted:
-- it can never be claimed again, so no later fence can meet a fenced-off holder.
-- KEYS[1]  the token   ARGV[1] fence (decimal)
-- Returns  1 returned to pending (or expired), 0 the fence or state no longer matches
if redis.replicate_commands then redis.replicate_commands() end

local key = KEYS[1]
local rec = redis.call('HMGET', key, 's', 'n', 'd')
if rec[1] ~= 'P' or rec[2] ~= ARGV[1] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local left = (tonumber(rec[3]) or 0) - now
if left < 1 then
  redis.call('DEL', key)
  return 1
end
redis.call('HSET', key, 's', 'T')
redis.call('HDEL', key, 'f', 'l', 'r')
redis.call('PEXPIRE', key, left)
return 1
