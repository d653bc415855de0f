-- RedisTokenStore claim: consuming a one-time token is the claim, by the record model's claim
-- rules (classify() in include/idem/engine/record_model.hpp; an issued token is claimed like a
-- released record).
-- KEYS[1]  the token: a string STATE_ISSUED while freshly issued (SET NX PX), then a hash with
--          the record fields of record_claim.lua (s = STATE_ISSUED pending again after an abort,
--          STATE_HELD, STATE_COMPLETED, STATE_FAILED) and d, the token's own expiry (ms), to
--          which an abort returns it
-- ARGV[1]  fingerprint (16 bytes)   ARGV[2] lease, ms   ARGV[3] retention, ms
-- Returns  the replies of record_claim.lua, plus
--          {REPLY_TOKEN_UNKNOWN}          no such token: never issued, expired, or a forged value
--          {REPLY_TOKEN_MISMATCH, fence}  consumed (or being consumed) by a request with another
--                                         payload
-- A takeover wakes the old hold's waiters (the wake list named from the token:
-- record_wake_step.lua).
-- The names below are C++'s too (RedisClaimReply, redis_state); tests check that they agree.
--! include record_wake_step.lua
local REPLY_ACQUIRED, REPLY_COMPLETED, REPLY_FAILED, REPLY_IN_PROGRESS = 0, 1, 2, 3
local REPLY_TOKEN_UNKNOWN, REPLY_TOKEN_MISMATCH = 5, 6
local STATE_HELD, STATE_COMPLETED, STATE_FAILED, STATE_ISSUED = 'P', 'C', 'F', 'T'
if redis.replicate_commands then redis.replicate_commands() end

local key = KEYS[1]
local fingerprint = ARGV[1]
local lease = math.max(tonumber(ARGV[2]), 1)
-- A record in progress outlives its lease by another lease (held_retention() in C++): a claim
-- after the lease ran out is always a takeover, never a fresh key.
local retention = math.max(tonumber(ARGV[3]), 2 * lease)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local kind = redis.call('TYPE', key)['ok']
if kind == 'none' then return {REPLY_TOKEN_UNKNOWN} end

local function acquire(deadline, took_over)
  local fence = redis.call('HINCRBY', key, 'n', 1)
  redis.call('HSET', key, 's', STATE_HELD, 'f', fingerprint, 'l',
             string.format('%.0f', now + lease), 'd', deadline)
  redis.call('PEXPIRE', key, retention)
  return {REPLY_ACQUIRED, fence, took_over}
end

if kind == 'string' then
  if redis.call('GET', key) ~= STATE_ISSUED then
    return redis.error_reply('IDEM_CORRUPT token is not pending')
  end
  local left = redis.call('PTTL', key)
  if left < 1 then left = retention end  -- issued without an expiry (not by idem)
  redis.call('DEL', key)
  return acquire(string.format('%.0f', now + left), 0)
end
if kind ~= 'hash' then return redis.error_reply('IDEM_CORRUPT token of type ' .. kind) end

local rec = redis.call('HMGET', key, 's', 'f', 'n', 'l', 'r', 'd', 'w')
local state = rec[1]
local fence = rec[3] and string.match(rec[3], '^%d+$') and tonumber(rec[3])  -- as record_claim
if fence and fence >= 2^53 then fence = nil end
if not fence or not rec[6] then return redis.error_reply('IDEM_CORRUPT token record without fence or expiry') end
if state == STATE_ISSUED then return acquire(rec[6], 0) end
if state ~= STATE_HELD and state ~= STATE_COMPLETED and state ~= STATE_FAILED then
  return redis.error_reply('IDEM_CORRUPT unknown token state')
end
if rec[2] ~= fingerprint then return {REPLY_TOKEN_MISMATCH, fence} end
if state ~= STATE_HELD then
  if not rec[5] then return redis.error_reply('IDEM_CORRUPT finished token without a result') end
  local reply = state == STATE_COMPLETED and REPLY_COMPLETED or REPLY_FAILED
  return {reply, fence, rec[5], redis.call('PTTL', key)}
end
local left = (tonumber(rec[4]) or 0) - now
if left > 0 then return {REPLY_IN_PROGRESS, fence, left} end
-- A new fence counts its own waiters (record_wait.lua); the old one's are woken.
if rec[7] then
  redis.call('HDEL', key, 'w')
  wake(key, rec[3], rec[7])
end
return acquire(rec[6], 1)
