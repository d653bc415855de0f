#pragma once
// The admin's Lua scripts (src/redis/redis_admin.cpp), each one atomic step. The record's
// fields are the store's (record_claim.lua): s state, f fingerprint, n fence, l lease end (ms),
// r result bytes.

namespace idem::redis::admin_scripts {

// KEYS[1] the record. Returns {} when absent, else
// {s, f, n, lease_left_ms, expire_time_ms, result_len, failure_bytes_or_empty, took_over_unknown}
inline constexpr const char* kRead = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rec = redis.call('HMGET', KEYS[1], 's', 'f', 'n', 'l')
if not rec[1] then return {} end
local len = redis.call('HSTRLEN', KEYS[1], 'r')
local failure = ''
if rec[1] == 'F' then failure = redis.call('HGET', KEYS[1], 'r') or '' end
return {rec[1], rec[2] or '', rec[3] or '0', (tonumber(rec[4]) or 0) - now,
        redis.call('PEXPIRETIME', KEYS[1]), len, failure}
)lua";

// KEYS[1] the record; ARGV[1] 'release' (held records only) or 'forget' (any state);
// ARGV[2] the holder's fence to match, '0' for any. Marks the record released and drops its
// result; the fence and expiry stay, so the next claim continues above the fence. Never DEL.
// A release keeps the run's steps and kept request (the run goes on, as after an abort); a
// forget drops them too (record_step_save.lua, record_keep_request.lua name the fields), so no
// later run of the key sees anything of the forgotten one.
// Returns {changed, <kRead's fields>} or {0} when absent.
inline constexpr const char* kRelease = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rec = redis.call('HMGET', KEYS[1], 's', 'f', 'n', 'l', 'w')
if not rec[1] then return {0} end
local len = redis.call('HSTRLEN', KEYS[1], 'r')
local failure = ''
if rec[1] == 'F' then failure = redis.call('HGET', KEYS[1], 'r') or '' end
local before = {rec[1], rec[2] or '', rec[3] or '0', (tonumber(rec[4]) or 0) - now,
                redis.call('PEXPIRETIME', KEYS[1]), len, failure}
local ok = true  -- a forget changes any record, a released one included (its run's steps go)
if ARGV[1] == 'release' and rec[1] ~= 'P' then ok = false end
if ARGV[2] ~= '0' and rec[3] ~= ARGV[2] then ok = false end
if ok then
  redis.call('HSET', KEYS[1], 's', 'R')
  redis.call('HDEL', KEYS[1], 'r', 'w')
  -- The hold's waiters (record_wait.lua) are woken as by an abort, on the wake list named from
  -- the record and its fence (record_wake_step.lua's name and expiry; the record's hash slot).
  local waiters = tonumber(rec[5])
  if rec[1] == 'P' and waiters and waiters > 0 then
    local list = KEYS[1] .. ':wake:' .. rec[3]
    local kind = redis.call('TYPE', list)['ok']
    if kind == 'none' or kind == 'list' then
      for _ = 1, math.min(waiters, 10000) do redis.call('RPUSH', list, '1') end
      redis.call('PEXPIRE', list, 5000)
    end
  end
  if ARGV[1] == 'forget' then
    local count = tonumber(redis.call('HGET', KEYS[1], 'sc')) or 0
    for i = 0, count - 1 do redis.call('HDEL', KEYS[1], 'x' .. i, 'y' .. i) end
    redis.call('HDEL', KEYS[1], 'sf', 'sc', 'q', 'qn', 'qf')
  end
end
return {ok and 1 or 0, before[1], before[2], before[3], before[4], before[5], before[6], before[7]}
)lua";

// One SCAN step on this server. ARGV[1] cursor, ARGV[2] MATCH pattern, ARGV[3] COUNT.
// Returns {next_cursor, key1, state1, expire_time1, key2, ...}. Reads only keys SCAN returned on
// this server, and only hashes (a record's wake list, `<record>:wake:<fence>`, matches too).
inline constexpr const char* kScan = R"lua(
local step = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3])
local out = {step[1]}
for _, key in ipairs(step[2]) do
  local s = redis.call('TYPE', key)['ok'] == 'hash' and redis.call('HGET', key, 's')
  if s then
    out[#out + 1] = key
    out[#out + 1] = s
    out[#out + 1] = redis.call('PEXPIRETIME', key)
  end
end
return out
)lua";

}  // namespace idem::redis::admin_scripts
