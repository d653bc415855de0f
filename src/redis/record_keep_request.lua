-- RedisStore keep_request: the holder under ARGV[1] keeps its run's request in the record's own
-- hash, so that idem::Completer can finish the run if its holder dies. Fields: q (the request
-- bytes), qn (the fence it was kept under: the index entry that names it, see
-- record_find_abandoned.lua), qf (the fingerprint of the run it belongs to). The scope's index
-- entry (record, fence) is written here too on one server (KEYS[2], ARGV[3]); on a Cluster the
-- index is in another slot, and the caller writes the entry before this call.
-- KEYS[1]  the record   KEYS[2] (one server) the scope's index of kept requests
-- ARGV[1]  fence (decimal)   ARGV[2] request bytes   ARGV[3] (with KEYS[2]) the index entry
-- Returns  REPLY_DONE kept, REPLY_LEASE_LOST the fence or state no longer matches (nothing
--          written)
local REPLY_LEASE_LOST, REPLY_DONE = 0, 1
local STATE_HELD = 'P'
local key = KEYS[1]
local rec = redis.call('HMGET', key, 's', 'n', 'f')
if rec[1] ~= STATE_HELD or rec[2] ~= ARGV[1] then return REPLY_LEASE_LOST end
if KEYS[2] then redis.call('ZADD', KEYS[2], 0, ARGV[3]) end
redis.call('HSET', key, 'q', ARGV[2], 'qn', ARGV[1], 'qf', rec[3])
return REPLY_DONE
