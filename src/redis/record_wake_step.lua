-- The wake of a hold's waiters (included by the scripts that end a held record): one element per
-- waiter that record_wait.lua counted (the record's field w) on the wake list of the ending
-- fence, `<record key>:wake:<fence>` (the record's hash slot: its name starts with the record's),
-- each waiter's BLPOP taking one. The list expires after WAKE_TTL_MS, so that the elements of
-- waiters that left before the end do not stay.
-- The list name and its expiry are C++'s too (wake_key, kWakeTtl); tests check that they agree.
local WAKE_SUFFIX, WAKE_TTL_MS = ':wake:', 5000

-- `waiters`: the count, text or nil.
local function wake(record, fence, waiters)
  local n = tonumber(waiters)
  if not n or n < 1 then return end
  local list = record .. WAKE_SUFFIX .. fence
  -- A key of another type under that name is not a wake list: leave it alone.
  local kind = redis.call('TYPE', list)['ok']
  if kind ~= 'none' and kind ~= 'list' then return end
  local ones = {}
  for i = 1, math.min(n, 100) do ones[i] = '1' end
  while n > 0 do
    local k = math.min(n, 100)
    redis.call('RPUSH', list, unpack(ones, 1, k))
    n = n - k
  end
  redis.call('PEXPIRE', list, WAKE_TTL_MS)
end
