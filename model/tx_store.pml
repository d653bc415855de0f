/* SQL transactional mode: SqliteStore / PostgresStore with SqlMode::transactional. The claim opens
 * a transaction that holds the record's row (uncommitted) until commit or abort; the handler's
 * writes in that transaction (txw) become durable only with the commit. A holder never loses the
 * key while its session lives; the database ends a session (a dropped connection, a crash) by
 * rolling its transaction back (proctype Drops in idem.pml). Fences come from a source no
 * rollback undoes (seq). Committed rows are ABSENT, DONE or FAILED; HELD is never committed. */

byte txh = 0;       /* the fence of the open transaction that holds the row; 0: none */
bool txw = false;   /* the holder's transaction holds a write of its handler */
byte seq = 0;       /* the fence source: grows across processes and rollbacks */
byte drops = 0;     /* sessions the database ended under a live holder */

inline tx_rollback() {
  txh = 0;
  txw = false
}

inline store_claim(cs, myf, val) {
  if
  :: txh != 0 -> cs = INPROG  /* blocks on the row up to block_for, then in_progress */
  :: txh == 0 && rstate == ABSENT ->
#ifdef MUTANT_PROCESS_FENCES
     /* a per-process counter: max(row fence + 1, this caller's own counter) */
     mycounter++;
     if
     :: rfence + 1 > mycounter -> myf = rfence + 1
     :: else -> myf = mycounter
     fi;
#else
     seq++;
     myf = seq;
#endif
     note_acquired(myf);
     txh = myf;
     txw = false;
     cs = ACQUIRED
  :: txh == 0 && rstate == DONE -> cs = REPLAY; val = rresult
  :: txh == 0 && rstate == FAILED -> cs = RFAILED; val = rresult
  fi
}

/* The fenced UPDATE and COMMIT; a retry after a COMMIT in doubt reads the row. */
inline store_commit(f, v, st, cr) {
  if
  :: txh == f ->
     commits++;
     rstate = st;
     rfence = f;
     rresult = v;
     if
     :: txw -> effects++
     :: else -> skip
     fi;
     tx_rollback();  /* the transaction has ended (committed) */
     cr = OK
#ifndef MUTANT_LOST_REPLY_IS_LEASE_LOST
  :: txh != f && rstate == st && rfence == f && rresult == v ->
     cr = OK  /* the COMMIT landed before its reply was lost: the retry finds it */
#endif
  :: else -> cr = UNAVAILABLE  /* the transaction was rolled back: its failure, remembered */
  fi
}

inline store_abort(f, cr) {
  if
  :: txh == f -> tx_rollback()
  :: else -> skip
  fi;
  cr = OK
}

inline store_extend(f, cr) {
  if
  :: txh == f -> cr = OK
  :: else -> cr = UNAVAILABLE
  fi
}

/* ROLLBACK TO SAVEPOINT taken right after the claim: the handler's writes go, the row stays held. */
inline store_rewind(f, cr) {
  if
  :: txh == f ->
#ifndef MUTANT_NO_REWIND
     txw = false;
#endif
     cr = OK
  :: else -> cr = UNAVAILABLE
  fi
}

/* A call that failed or lost its reply drops its connection: the server rolls back what this
 * caller still had open. */
inline after_fault(myf) {
  if
  :: txh == myf && myf != 0 -> tx_rollback()
  :: else -> skip
  fi
}

/* A caller crashed: its session ends and the database rolls its transaction back. */
inline crash_cleanup(myf) {
  after_fault(myf)
}

/* The handler writes through the claim's transaction; on a session that is gone it throws. */
inline store_tx_write(myf, accepted) {
  if
  :: txh == myf -> txw = true; accepted = true
  :: else -> accepted = false
  fi
}
