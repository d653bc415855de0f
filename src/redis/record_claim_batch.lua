-- RedisStore batch claim: record_claim.lua's step for each key of KEYS in turn, in one atomic
-- script call. Every key is answered as record_claim.lua answers it alone; a key named twice
-- finds its first claim's hold.
-- KEYS[i]  the records (one cluster slot: the caller groups keys by slot)
-- ARGV     per key i: ARGV[3i-2] fingerprint (16 bytes), ARGV[3i-1] lease, ms, ARGV[3i]
--          retention, ms
-- Returns  one reply per key, as record_claim.lua's ({REPLY_*, ...}), or an error reply for a
--          key whose record is not idem's (nothing of that key is written then)
local REPLY_ACQUIRED, REPLY_COMPLETED, REPLY_FAILED, REPLY_IN_PROGRESS, REPLY_MISMATCH = 0, 1, 2, 3, 4
local STATE_HELD, STATE_COMPLETED, STATE_FAILED, STATE_RELEASED = 'P', 'C', 'F', 'R'
if redis.replicate_commands then redis.replicate_commands() end  -- Redis < 5: TIME before writes

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local first_fence = tonumber(t[1]) * 1000000 + tonumber(t[2])  -- below 2^53 until 2255

local function claim(key, fingerprint, lease, retention)
  local rec = redis.call('HMGET', key, 's', 'f', 'n', 'l', 'r')
  local state = rec[1]
  local took_over = 0
  if state then
    local fence = rec[3] and string.match(rec[3], '^%d+$') and tonumber(rec[3])
    if not fence or fence >= 2^53 then
      return redis.error_reply('IDEM_CORRUPT record without a usable fence')
    end
    if state == STATE_HELD or state == STATE_COMPLETED or state == STATE_FAILED then
      if rec[2] ~= fingerprint then return {REPLY_MISMATCH, fence} end
      if state ~= STATE_HELD then
        if not rec[5] then return redis.error_reply('IDEM_CORRUPT finished record without a result') end
        local reply = state == STATE_COMPLETED and REPLY_COMPLETED or REPLY_FAILED
        return {reply, fence, rec[5], redis.call('PTTL', key)}
      end
      local left = (tonumber(rec[4]) or 0) - now
      if left > 0 then return {REPLY_IN_PROGRESS, fence, left} end
      took_over = 1
    elseif state ~= STATE_RELEASED then
      return redis.error_reply('IDEM_CORRUPT unknown record state')
    end
  end
  local lease_end = string.format('%.0f', now + lease)
  local fence
  if state then
    fence = redis.call('HINCRBY', key, 'n', 1)
    redis.call('HSET', key, 's', STATE_HELD, 'f', fingerprint, 'l', lease_end)
    if rec[5] then redis.call('HDEL', key, 'r') end
  else
    -- A new record: its first fence one past the clock's, written with the rest in one HSET.
    fence = first_fence + 1
    redis.call('HSET', key, 'n', string.format('%.0f', fence), 's', STATE_HELD, 'f', fingerprint,
               'l', lease_end)
  end
  redis.call('PEXPIRE', key, retention)
  return {REPLY_ACQUIRED, fence, took_over}
end

local replies = {}
for i, key in ipairs(KEYS) do
  local lease = math.max(tonumber(ARGV[3 * i - 1]), 1)
  local retention = math.max(tonumber(ARGV[3 * i]), 2 * lease)  -- held_retention()
  replies[i] = claim(key, ARGV[3 * i - 2], lease, retention)
end
return replies
