-- RedisStore claim (docs/design.md §3): one atomic step on the record's hash.
-- KEYS[1]  the record: fields s (state P/C/F/R), f (fingerprint), n (fence), l (lease end, ms),
--          r (result bytes, completed or failed records only)
-- ARGV[1]  fingerprint (16 bytes)   ARGV[2] lease, ms   ARGV[3] retention, ms
-- Returns  {0, fence, took_over}      acquired
--          {1, fence, result, pttl}   completed: replay (pttl: ms before the record expires)
--          {2, fence, result, pttl}   failed: replay the failure
--          {3, fence, lease_left_ms}  in progress under a live lease
--          {4, fence}                 another fingerprint holds the key
-- Time is the server's (TIME), so client clocks cannot shorten a lease.
if redis.replicate_commands then redis.replicate_commands() end  -- Redis < 5: TIME before writes

local key = KEYS[1]
local fingerprint = ARGV[1]
local lease = math.max(tonumber(ARGV[2]), 1)
local retention = math.max(tonumber(ARGV[3]), lease)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local rec = redis.call('HMGET', key, 's', 'f', 'n', 'l', 'r')
local state = rec[1]
local took_over = 0
if state then
  -- Digits below 2^53 only: HINCRBY refuses other text ('1.5', '1e3') and Lua numbers lose
  -- larger integers, so a fence handed out from it could never match a commit.
  local fence = rec[3] and string.match(rec[3], '^%d+$') and tonumber(rec[3])
  if not fence or fence >= 2^53 then
    return redis.error_reply('IDEM_CORRUPT record without a usable fence')
  end
  if state == 'P' or state == 'C' or state == 'F' then
    if rec[2] ~= fingerprint then return {4, fence} end
    if state ~= 'P' then
      if not rec[5] then return redis.error_reply('IDEM_CORRUPT finished record without a result') end
      return {state == 'C' and 1 or 2, fence, rec[5], redis.call('PTTL', key)}
    end
    local left = (tonumber(rec[4]) or 0) - now
    if left > 0 then return {3, fence, left} end
    took_over = 1  -- the holder's lease ran out: compare-and-set on the fence observed
  elseif state ~= 'R' then
    return redis.error_reply('IDEM_CORRUPT unknown record state')
  end
end

if not state then
  -- A new record's fences start from the server's clock in microseconds, not from 1: a record
  -- that expired and is claimed again must never hand out a fence that a holder of the old one,
  -- stalled past its retention, could still present. (Fences stay below 2^53 until 2255.)
  redis.call('HSET', key, 'n', string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2])))
end
local fence = redis.call('HINCRBY', key, 'n', 1)
redis.call('HSET', key, 's', 'P', 'f', fingerprint, 'l', string.format('%.0f', now + lease))
if rec[5] then redis.call('HDEL', key, 'r') end
redis.call('PEXPIRE', key, retention)
return {0, fence, took_over}
