-- RedisStore batch commit: record_commit.lua's step for each key of KEYS in turn, in one atomic
-- script call.
-- KEYS[i]  the records (one cluster slot: the caller groups keys by slot)
-- ARGV     per key i: ARGV[4i-3] fence (decimal), ARGV[4i-2] state (STATE_COMPLETED or
--          STATE_FAILED), ARGV[4i-1] result bytes, ARGV[4i] ttl, ms
-- Returns  one REPLY_DONE or REPLY_LEASE_LOST per key, as record_commit.lua's
-- Each commit wakes its hold's waiters, on the wake list named from the record (record_wake_step.lua).
--! include record_wake_step.lua
local REPLY_LEASE_LOST, REPLY_DONE = 0, 1
local STATE_HELD = 'P'

local function commit(key, fence, state, result, ttl)
  -- 'sc': steps (record_step_save.lua), dropped below only where there are some: fewer calls
  -- for most keys; 'w': the hold's waiters, woken below.
  local rec = redis.call('HMGET', key, 's', 'n', 'sc', 'w')
  if rec[2] ~= fence then return REPLY_LEASE_LOST end
  if rec[1] ~= STATE_HELD then
    if rec[1] ~= state or redis.call('HGET', key, 'r') ~= result then return REPLY_LEASE_LOST end
    redis.call('HSET', key, 's', state)
    return REPLY_DONE
  end
  redis.call('HSET', key, 's', state, 'r', result)
  -- A finished record has no lease (l) and no waiters to count (w), and a kept request
  -- (record_keep_request.lua) goes.
  redis.call('HDEL', key, 'l', 'q', 'qn', 'qf', 'w')
  if rec[3] then
    for i = 0, tonumber(rec[3]) - 1 do redis.call('HDEL', key, 'x' .. i, 'y' .. i) end
    redis.call('HDEL', key, 'sf', 'sc')
  end
  redis.call('PEXPIRE', key, math.max(tonumber(ttl), 1))
  if rec[4] then wake(key, fence, rec[4]) end
  return REPLY_DONE
end

local replies = {}
for i, key in ipairs(KEYS) do
  replies[i] = commit(key, ARGV[4 * i - 3], ARGV[4 * i - 2], ARGV[4 * i - 1], ARGV[4 * i])
end
return replies
