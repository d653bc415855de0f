-- RequestIdCache claim: SET-if-absent of an in-progress marker (never exists-then-forward, which
-- lets two concurrent duplicates through). The marker expires with the lease: a crashed holder's
-- request id frees itself.
-- KEYS[1]  the entry: a string, the marker while in progress, the response once committed
-- ARGV[1]  this holder's marker: the held state (C++'s redis_state::held, 'P') .. holder id
--          (8 bytes) .. fingerprint (16 bytes); C++ classifies an entry in the way
-- ARGV[2]  lease, ms
-- Returns  {}               the marker was set: the caller holds the request id
--          {entry, pttl_ms} the entry already there, and its time left: the lease on a marker,
--                           how long a response is still replayed
local key = KEYS[1]
if redis.call('SET', key, ARGV[1], 'NX', 'PX', math.max(tonumber(ARGV[2]), 1)) then return {} end
return {redis.call('GET', key), redis.call('PTTL', key)}
