-- The wake of a RequestIdCache entry's waiters (included, after record_wake_step.lua, by the cache
-- scripts that end a hold): an entry is a string, so the waiters that cache_wait.lua counts live
-- in a key of their own, `<entry>:waiting:<holder>`, and their wake list is
-- `<entry>:wake:<holder>`; <holder> is the holder id as 16 hex digits. Both names start with the
-- entry's, so they share its hash slot, and the scripts derive them from the entry (KEYS[1]).
-- The names are C++'s too (cache_waiting_key, cache_wake_key); tests check that they agree.
local WAITING_SUFFIX = ':waiting:'

-- `holder`: STATE_HELD .. the holder id (8 bytes), as the scripts' ARGV[1].
local function holder_hex(holder)
  return (string.gsub(string.sub(holder, 2, 9), '.', function(c)
    return string.format('%02x', string.byte(c))
  end))
end

-- Wakes the waiters of `entry`'s hold by `holder`, if any counted themselves in.
local function wake_waiters(entry, holder)
  local id = holder_hex(holder)
  local waiting = entry .. WAITING_SUFFIX .. id
  local n = redis.call('GET', waiting)
  if not n then return end
  redis.call('DEL', waiting)
  wake(entry, id, n)
end
