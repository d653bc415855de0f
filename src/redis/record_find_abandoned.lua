-- RedisStore find_abandoned: what each record named by an entry of a scope's abandoned-run index
-- is now. An entry (record, fence) was written before the record's request was kept under that
-- fence (record_keep_request.lua). Read only; the caller removes the stale entries.
-- KEYS[i]  a record   ARGV[i] the fence its index entry names (decimal)
-- ARGV[#KEYS + 1]  how many requests the caller still wants: past them, an abandoned record
--                  answers REPLY_LIVE, so that a page never carries requests it would drop
-- Returns  one reply per key:
--          {REPLY_ABANDONED, request}  in progress past its lease, or released, with the request
--                                      kept under this entry's fence, of the record's payload
--          {REPLY_LIVE}                keep the entry: the run is alive, or belongs to another
--                                      payload for now, or its holder may still keep its request
--          {REPLY_STALE}               drop the entry: the record is gone (expired, deleted),
--                                      finished, or moved past this fence without a request
--                                      kept under it (no keep under this fence can land now)
-- Time is the server's (TIME), as the claim script's.
local REPLY_STALE, REPLY_LIVE, REPLY_ABANDONED = 0, 1, 2
local STATE_HELD, STATE_RELEASED = 'P', 'R'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local want = tonumber(ARGV[#KEYS + 1]) or 0
local replies = {}
for i, key in ipairs(KEYS) do
  local entry = ARGV[i]
  local rec = redis.call('HMGET', key, 's', 'n', 'l', 'f', 'qn', 'qf')
  local state = rec[1]
  local reply = {REPLY_STALE}
  if state == STATE_HELD or state == STATE_RELEASED then
    if rec[5] == entry then
      local lapsed = state == STATE_RELEASED or (tonumber(rec[3]) or 0) <= now
      if lapsed and rec[6] == rec[4] and want > 0 then
        reply = {REPLY_ABANDONED, redis.call('HGET', key, 'q') or ''}
        want = want - 1
      else
        reply = {REPLY_LIVE}
      end
    elseif state == STATE_HELD and rec[2] == entry then
      reply = {REPLY_LIVE}
    end
  end
  replies[i] = reply
end
return replies
