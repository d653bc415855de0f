/* One property per promise of docs/design.md, and the known limits (docs/design.md §16) as
 * properties expected to fail. scripts/model checks each: `./pan -N <name>`. */

/* At most one commit per key: a record ends (completed or failed) once. */
ltl one_commit { [] (commits <= 1) }

/* Every replay is the committed value, and a value reported recorded is the committed one. */
ltl replay_is_committed { [] !bad_answer }

/* A holder that was taken over never commits, and is never told its value was recorded. */
ltl taken_over_never_commits { [] !bad_takeover }

/* Lease mode: a claim's fence is one more than the last acquired. Transactional mode: larger
 * than every fence acquired before, across processes and rollbacks. */
ltl fence_grows { [] !bad_fence }

/* A commit whose reply was lost is reported recorded once a retry gets an answer, and lease_lost
 * means another claim acquired the key. */
ltl lost_reply_is_recorded { [] !bad_lost }

/* Fencing downstream: at most one accepted write per fence ... */
ltl ledger_one_write_per_fence { [] (ledger_at_hi <= 1) }

/* ... and once the key completes, the newest accepted write is the committed run's. */
ltl ledger_newest_is_committed { [] (rstate == DONE -> ledger_last == rresult) }

#ifdef TX
/* Writes in the store's transaction commit exactly once: once the key completes, once. */
ltl tx_effects_once { [] (effects <= 1 && (rstate == DONE -> effects == 1)) }

/* A remembered failure commits without the failed handler's writes. */
ltl failure_carries_no_effects { [] (rstate == FAILED -> effects == 0) }
#endif

/* Every call returns (or its caller crashed). Needs ./pan -a. */
ltl every_call_returns { <> (ended == NC) }

/* Known limit, expected to FAIL: two holders' writes both accepted by the ledger, when a lease
 * passes (transactional mode: a session ends) while the first holder still runs. */
ltl limit_ledger_single_write { [] (ledger_n <= 1) }

/* Known limit, expected to FAIL: the handler runs again while an earlier run still goes on. */
ltl limit_handler_runs_alone { [] (running <= 1) }
