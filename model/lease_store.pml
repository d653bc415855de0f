/* Lease mode: MemoryStore, RedisStore (one server or a cluster: one script on one slot), and
 * SqliteStore / PostgresStore with SqlMode::lease. Each inline is one atomic step of the store
 * (a critical section, a Lua script, one SQL statement or transaction); the caller wraps it in
 * `atomic` together with the fault that may hit the call. The holder's lease passes at any moment
 * (proctype Leases in idem.pml). */

inline store_claim(cs, myf, val) {
  if
  :: rstate == ABSENT || (rstate == HELD && !lease_live) ->
     /* acquire, or take over a holder whose lease passed: fence + 1, a compare-and-set on it */
#ifdef MUTANT_ABORT_FORGETS_FENCE
     if
     :: rstate == ABSENT -> rfence = 0  /* a store that deletes released records and restarts */
     :: else -> skip
     fi;
#endif
     if
     :: rfence + 1 != max_acq + 1 -> bad_fence = true  /* lease mode: exactly one more */
     :: else -> skip
     fi;
     rfence = rfence + 1;
     note_acquired(rfence);
     rstate = HELD;
     lease_live = true;
     myf = rfence;
     cs = ACQUIRED
  :: rstate == HELD && lease_live -> cs = INPROG
  :: rstate == DONE -> cs = REPLAY; val = rresult
  :: rstate == FAILED -> cs = RFAILED; val = rresult
  fi
}

/* Commit completion `st` (DONE or FAILED) with result `v` under fence `f`. */
inline store_commit(f, v, st, cr) {
  if
  :: rstate == HELD && rfence == f ->
     commits++;
     rstate = st;
     rresult = v;
     cr = OK
#ifndef MUTANT_LOST_REPLY_IS_LEASE_LOST
  :: rstate == st && rfence == f && rresult == v ->
     cr = OK  /* this very completion landed before (its reply was lost): success, no change */
#endif
  :: else -> cr = LEASE_LOST
  fi
}

inline store_abort(f, cr) {
  if
  :: rstate == HELD && rfence == f -> rstate = ABSENT; cr = OK  /* released; keeps its fence */
  :: else -> cr = LEASE_LOST
  fi
}

inline store_extend(f, cr) {
  if
  :: rstate == HELD && rfence == f -> lease_live = true; cr = OK
  :: else -> cr = LEASE_LOST
  fi
}

/* Lease-mode stores have no transaction of the handler's to rewind (not RewindableStore). */
inline store_rewind(f, cr) {
  cr = OK
}

/* After a fault the store has nothing more to undo in lease mode: the record is as the call
 * left it (a lost claim reply leaves a record in progress that nobody runs: its lease passes). */
inline after_fault(myf) {
  skip
}

/* A caller crashed: its record stays in progress until its lease passes. */
inline crash_cleanup(myf) {
  skip
}

/* A write the handler makes in the store's own transaction: none in lease mode. */
inline store_tx_write(myf, accepted) {
  accepted = true
}
