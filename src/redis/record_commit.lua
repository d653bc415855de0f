-- RedisStore / RedisTokenStore commit: the holder under ARGV[1] stores its end, by the record
-- model's fence rule (check_fence() in include/idem/engine/record_model.hpp).
-- KEYS[1]  the record   (the hold's wake list is named from it: record_wake_step.lua)
-- ARGV[1]  fence (decimal)   ARGV[2] state, STATE_COMPLETED or STATE_FAILED   ARGV[3] result bytes
-- ARGV[4]  ttl, ms (below 1 becomes 1: PEXPIRE 0 would delete at once, EX 0 is an error)
-- Returns  REPLY_DONE committed (or this very commit stood already), REPLY_LEASE_LOST the fence
--          or state no longer matches
-- A commit wakes the hold's waiters (record_wait.lua).
-- The names below are C++'s too (RedisFencedReply, redis_state); tests check that they agree.
--! include record_wake_step.lua
local REPLY_LEASE_LOST, REPLY_DONE = 0, 1
local STATE_HELD = 'P'
local key = KEYS[1]
local rec = redis.call('HMGET', key, 's', 'n', 'w')
if rec[2] ~= ARGV[1] then return REPLY_LEASE_LOST end
if rec[1] ~= STATE_HELD then
  -- The same commit, retried after its reply was lost: success if it stands as sent. The state
  -- is written again (the same value, the expiry untouched) so that a WAIT after this reply
  -- covers the earlier write too, whichever connection made it.
  if rec[1] ~= ARGV[2] or redis.call('HGET', key, 'r') ~= ARGV[3] then return REPLY_LEASE_LOST end
  redis.call('HSET', key, 's', ARGV[2])
  return REPLY_DONE
end
redis.call('HSET', key, 's', ARGV[2], 'r', ARGV[3])
-- A finished record has no lease (l) and no waiters to count (w), and a kept request
-- (record_keep_request.lua) goes,
redis.call('HDEL', key, 'l', 'q', 'qn', 'qf', 'w')
-- and so do the run's steps (record_step_save.lua): a finished record replays, it runs nothing,
-- and no later run of the key (after a forget) may resume the finished one's steps.
local steps = tonumber(redis.call('HGET', key, 'sc'))
if steps then
  for i = 0, steps - 1 do redis.call('HDEL', key, 'x' .. i, 'y' .. i) end
  redis.call('HDEL', key, 'sf', 'sc')
end
redis.call('PEXPIRE', key, math.max(tonumber(ARGV[4]), 1))
wake(key, ARGV[1], rec[3])
return REPLY_DONE
