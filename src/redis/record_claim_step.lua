-- The record claim's step (included by record_claim.lua and record_claim_batch.lua): one atomic
-- step on a record's hash, by the record model's claim rules (classify() in
-- include/idem/engine/record_model.hpp).
-- The record: fields s (state), f (fingerprint), n (fence), l (lease end, ms), r (result bytes,
-- completed or failed records only), w (waiters counted under the fence, record_wait.lua).
-- A script that includes this step includes record_wake_step.lua before it (a takeover wakes the
-- old holder's waiters).
-- claim() returns  {REPLY_ACQUIRED, fence, took_over}      acquired
--                  {REPLY_COMPLETED, fence, result, pttl}  completed: replay (pttl: ms before it
--                                                          expires)
--                  {REPLY_FAILED, fence, result, pttl}     failed: replay the failure
--                  {REPLY_IN_PROGRESS, fence, lease_left}  in progress under a live lease
--                  {REPLY_MISMATCH, fence}                 another fingerprint holds the key
--                  or an error reply for a record that is not idem's (nothing written then)
-- Time is the server's (TIME), so client clocks cannot shorten a lease.
-- The names below are C++'s too (RedisClaimReply, redis_state); tests check that they agree.
local REPLY_ACQUIRED, REPLY_COMPLETED, REPLY_FAILED, REPLY_IN_PROGRESS, REPLY_MISMATCH = 0, 1, 2, 3, 4
local STATE_HELD, STATE_COMPLETED, STATE_FAILED, STATE_RELEASED = 'P', 'C', 'F', 'R'
if redis.replicate_commands then redis.replicate_commands() end  -- Redis < 5: TIME before writes

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- A new record's fences start from the server's clock in microseconds, not from 1: a record
-- that expired and is claimed again must never hand out a fence that a holder of the old one,
-- stalled past its retention, could still present. (Fences stay below 2^53 until 2255.)
local first_fence = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- `lease` and `retention` as ARGV carries them (ms).
local function claim(key, fingerprint, lease, retention)
  lease = math.max(tonumber(lease), 1)
  -- A record in progress outlives its lease by another lease (held_retention() in C++): a claim
  -- after the lease ran out is always a takeover, never a fresh key.
  retention = math.max(tonumber(retention), 2 * lease)
  local rec = redis.call('HMGET', key, 's', 'f', 'n', 'l', 'r', 'w')
  local state = rec[1]
  local took_over = 0
  if state then
    -- Digits below 2^53 only: HINCRBY refuses other text ('1.5', '1e3') and Lua numbers lose
    -- larger integers, so a fence handed out from it could never match a commit.
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
      took_over = 1  -- the holder's lease ran out: compare-and-set on the fence observed
    elseif state ~= STATE_RELEASED then
      return redis.error_reply('IDEM_CORRUPT unknown record state')
    end
  end
  local lease_end = string.format('%.0f', now + lease)
  local fence
  if state then
    fence = redis.call('HINCRBY', key, 'n', 1)
    redis.call('HSET', key, 's', STATE_HELD, 'f', fingerprint, 'l', lease_end)
    -- A new fence counts its own waiters; a takeover wakes those of the old one
    -- (record_wake_step.lua's wake(), which the including script brings in first).
    if rec[5] or rec[6] then redis.call('HDEL', key, 'r', 'w') end
    if took_over == 1 then wake(key, rec[3], rec[6]) end
  else
    -- A new record: its first fence one past the clock's, written with the rest in one HSET.
    fence = first_fence + 1
    redis.call('HSET', key, 'n', string.format('%.0f', fence), 's', STATE_HELD, 'f', fingerprint,
               'l', lease_end)
  end
  redis.call('PEXPIRE', key, retention)
  return {REPLY_ACQUIRED, fence, took_over}
end
