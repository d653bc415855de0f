-- RedisStore claim (docs/design.md §3): record_claim_step.lua's claim() on one record.
-- KEYS[1]  the record
-- ARGV[1]  fingerprint (16 bytes)   ARGV[2] lease, ms   ARGV[3] retention, ms
-- Returns  claim()'s reply
-- A takeover wakes the old hold's waiters (record_wait.lua), on the wake list named from the
-- record (record_wake_step.lua).
--! include record_wake_step.lua
--! include record_claim_step.lua
return claim(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
