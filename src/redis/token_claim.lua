-- RedisTokenStore claim: consuming a one-time token is the claim.
-- KEYS[1]  the token: a string "T" while freshly issued (SET NX PX), then a hash with the
--          record fields of record_claim.lua (s = T pending again after an abort, P, C, F) and
--          d, the token's own expiry (ms), to which an abort returns it
-- ARGV[1]  fingerprint (16 bytes)   ARGV[2] lease, ms   ARGV[3] retention, ms
-- Returns  the codes of record_claim.lua, plus
--          {5}         no such token: never issued, expired, or a forged value
--          {6, fence}  consumed (or being consumed) by a request with another payload
if redis.replicate_commands then redis.replicate_commands() end

local key = KEYS[1]
local fingerprint = ARGV[1]
local lease = math.max(tonumber(ARGV[2]), 1)
local retention = math.max(tonumber(ARGV[3]), lease)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local kind = redis.call('TYPE', key)['ok']
if kind == 'none' then return {5} end

local function acquire(deadline, took_over)
  local fence = redis.call('HINCRBY', key, 'n', 1)
  redis.call('HSET', key, 's', 'P', 'f', fingerprint, 'l', string.format('%.0f', now + lease),
             'd', deadline)
  redis.call('PEXPIRE', key, retention)
  return {0, fence, took_over}
end

if kind == 'string' then
  if redis.call('GET', key) ~= 'T' then return redis.error_reply('IDEM_CORRUPT token is not pending') end
  local left = redis.call('PTTL', key)
  if left < 1 then left = retention end  -- issued without an expiry (not by idem)
  redis.call('DEL', key)
  return acquire(string.format('%.0f', now + left), 0)
end
if kind ~= 'hash' then return redis.error_reply('IDEM_CORRUPT token of type ' .. kind) end

local rec = redis.call('HMGET', key, 's', 'f', 'n', 'l', 'r', 'd')
local state = rec[1]
local fence = rec[3] and string.match(rec[3], '^%d+$') and tonumber(rec[3])  -- as record_claim
if fence and fence >= 2^53 then fence = nil end
if not fence or not rec[6] then return redis.error_reply('IDEM_CORRUPT token record without fence or expiry') end
if state == 'T' then return acquire(rec[6], 0) end
if state ~= 'P' and state ~= 'C' and state ~= 'F' then
  return redis.error_reply('IDEM_CORRUPT unknown token state')
end
if rec[2] ~= fingerprint then return {6, fence} end
if state ~= 'P' then
  if not rec[5] then return redis.error_reply('IDEM_CORRUPT finished token without a result') end
  return {state == 'C' and 1 or 2, fence, rec[5], redis.call('PTTL', key)}
end
local left = (tonumber(rec[4]) or 0) - now
if left > 0 then return {3, fence, left} end
return acquire(rec[6], 1)
