-- RequestIdCache wait: a waiter for the hold under ARGV[1] counts itself in
-- (`<entry>:waiting:<holder>`, cache_wake_step.lua), so that the commit or abort of that hold
-- wakes it; its BLPOP on the hold's wake list follows this script on the same connection. A hold
-- that already ended or was taken over gives the waiter a wake of its own instead: its BLPOP
-- returns at once. The count lives as long as the marker's lease and the wake list's expiry.
-- KEYS[1]  the entry (the count's and the wake list's names are derived from it)
-- ARGV[1]  STATE_HELD .. the holder's id (8 bytes)
-- Returns  REPLY_COUNTED counted, REPLY_WOKEN woken at once
-- The names below are C++'s too (WaitReply); tests check that they agree.
--! include record_wake_step.lua
--! include cache_wake_step.lua
local REPLY_WOKEN, REPLY_COUNTED = 0, 1
local key = KEYS[1]
local id = holder_hex(ARGV[1])
local marker = redis.call('GET', key)
if marker and string.sub(marker, 1, 9) == ARGV[1] then
  local left = redis.call('PTTL', key)
  if left > 0 then
    local waiting = key .. WAITING_SUFFIX .. id
    redis.call('INCR', waiting)
    redis.call('PEXPIRE', waiting, left + WAKE_TTL_MS)
    return REPLY_COUNTED
  end
end
wake(key, id, 1)
return REPLY_WOKEN
