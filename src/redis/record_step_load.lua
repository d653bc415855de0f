-- RedisStore load_steps: the steps of the run the holder under ARGV[1] continues, in order
-- (fields as record_step_save.lua writes them); none when they belong to another payload.
-- KEYS[1]  the record   ARGV[1] fence (decimal)
-- Returns  {REPLY_LEASE_LOST} the fence or state no longer matches,
--          {REPLY_DONE, name0, result0, name1, result1, ...} the steps
local REPLY_LEASE_LOST, REPLY_DONE = 0, 1
local STATE_HELD = 'P'
local key = KEYS[1]
local rec = redis.call('HMGET', key, 's', 'n', 'f', 'sf', 'sc')
if rec[1] ~= STATE_HELD or rec[2] ~= ARGV[1] then return {REPLY_LEASE_LOST} end
local out = {REPLY_DONE}
if rec[4] == rec[3] then
  for i = 0, (tonumber(rec[5]) or 0) - 1 do
    local step = redis.call('HMGET', key, 'x' .. i, 'y' .. i)
    if not step[1] or not step[2] then break end
    out[#out + 1] = step[1]
    out[#out + 1] = step[2]
  end
end
return out
