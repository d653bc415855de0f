-- RedisStore batch claim: record_claim_step.lua's claim() for each key of KEYS in turn, in one
-- atomic script call. Every key is answered as record_claim.lua answers it alone; a key named
-- twice finds its first claim's hold.
-- KEYS[i]  the records (one cluster slot: the caller groups keys by slot)
-- ARGV     per key i: ARGV[3i-2] fingerprint (16 bytes), ARGV[3i-1] lease, ms, ARGV[3i]
--          retention, ms
-- Returns  one reply per key, claim()'s
--! include record_wake_step.lua
--! include record_claim_step.lua
local replies = {}
for i, key in ipairs(KEYS) do
  replies[i] = claim(key, ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i])
end
return replies
