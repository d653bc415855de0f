/* A caller: the guard's protocol engine (engine/engine.hpp) running one call (execute(), or the
 * two-phase idem::Attempt: begin, commit / fail, extend, destroyed while holding), repeated up
 * to ATTEMPTS times while the answer invites a retry (a Wait poll, or the client retrying).
 *
 * Every step that touches shared state is one atomic step, together with the caller's own
 * bookkeeping around it, so that the search interleaves only what matters. Before each step of a
 * held call the caller may crash (CRASHES in all); any store call may fail before it runs or lose
 * its reply after it ran (FAULTS in all). */

/* One store call under a fault; the caller hears UNAVAILABLE when f != 0. A failed call or a lost
 * reply drops the connection (after_fault: in transactional mode the server rolls back). */
#define CALL(op) \
  pick_fault(f); \
  if \
  :: f != 1 -> op \
  :: else -> skip \
  fi; \
  if \
  :: f != 0 -> after_fault(myf); cr = UNAVAILABLE \
  :: else -> skip \
  fi

/* A commit call (completion `st`), with the ghost check that only the latest claim's holder ends
 * the record. */
#define COMMIT_CALL(st) \
  before = commits; \
  CALL(store_commit(myf, rid, st, cr)); \
  if \
  :: commits != before && myclaim != last_claim -> bad_takeover = true \
  :: else -> skip \
  fi; \
  before = 0

/* The caller's process dies: one of the options of each step of a held call. */
#define CRASH(in_handler) \
  atomic { \
    crashes < CRASHES -> \
    crashes++; \
    crash_cleanup(myf); \
    if \
    :: in_handler -> running-- \
    :: else -> skip \
    fi; \
    ended++; \
    printf("caller %d: crashes\n", _pid); \
    goto dead \
  }

/* The call returns `o`: check what it tells its caller, then retry or end. */
#define ANSWER \
  /* every replay is the committed value; a recorded value is the committed one */ \
  if \
  :: o == O_REPLAY && !(rstate == DONE && val == rresult) -> bad_answer = true \
  :: o == O_RECORDED && !(rstate == DONE && rresult == rid) -> bad_answer = true \
  :: o == O_RFAILED && rstate != FAILED -> bad_answer = true \
  :: else -> skip \
  fi; \
  /* a holder that was taken over is never told its value was recorded */ \
  if \
  :: o == O_RECORDED && last_claim != myclaim -> bad_takeover = true \
  :: else -> skip \
  fi; \
  /* a commit that landed is reported recorded once a try got an answer; lease_lost only after \
   * another claim acquired the key */ \
  if \
  :: heard && o != O_RECORDED && rstate == DONE && rfence == myf && rresult == rid -> \
     bad_lost = true \
  :: o == O_LEASE_LOST && max_acq <= myf -> bad_lost = true \
  :: else -> skip \
  fi; \
  printf("caller %d: returns outcome %d (1 recorded, 2 lease_lost, 3 unrecorded, 4 replay, \
5 failure replay, 6 in_progress, 7 unavailable, 8 threw)\n", _pid, o); \
  if \
  :: attempt < ATTEMPTS && (o == O_UNAVAILABLE || o == O_INPROG || o == O_THREW) -> goto call \
  :: else -> ended++; goto dead \
  fi

proctype Caller() {
  byte attempt = 0;
  byte cs, myf, val, rid, f, cr, tries, o;
  byte myclaim, before;  /* ghost: this call's claim id; commits before a commit call */
  bool heard, accepted, settle_by_abort;
#ifdef MUTANT_PROCESS_FENCES
  byte mycounter = 0;
#endif

call:
  /* claim; on ACQUIRED the handler starts (the ghost claim id tells holders apart, whatever
   * their fences) */
  atomic {
    attempt++;
    cs = 0; myf = 0; val = 0; rid = 0; myclaim = 0; tries = 0; heard = false;
    pick_fault(f);
    if
    :: f != 1 ->
       store_claim(cs, myf, val);
       if
       :: cs == ACQUIRED -> claims++; last_claim = claims; myclaim = claims
       :: else -> skip
       fi
    :: else -> skip
    fi;
    if
    :: f != 0 -> after_fault(myf); myf = 0; myclaim = 0; o = O_UNAVAILABLE; ANSWER
    :: f == 0 && cs == INPROG -> o = O_INPROG; ANSWER
    :: f == 0 && cs == REPLAY -> o = O_REPLAY; ANSWER
    :: f == 0 && cs == RFAILED -> o = O_RFAILED; ANSWER
    :: f == 0 && cs == ACQUIRED ->
       runs++; rid = runs; running++;
       printf("caller %d: acquires fence %d, runs the handler (run %d)\n", _pid, myf, rid)
    fi
  };

  /* the handler writes to the ledger under its fence; a refusal makes it throw */
  if
  :: CRASH(true)
  :: atomic {
       ledger_write(myf, rid, accepted);
       printf("caller %d: ledger write under fence %d accepted: %d\n", _pid, myf, accepted);
       if
       :: !accepted -> goto threw
       :: else -> skip
       fi
     }
  fi;

  /* it may renew its lease, writes in the store's transaction (transactional mode), and returns
   * or throws */
  if
  :: CRASH(true)
  :: atomic {
       if
       :: CALL(store_extend(myf, cr));
          if
          :: cr != OK -> goto threw  /* lease_lost or unavailable: the handler stops */
          :: else -> skip
          fi
       :: skip
       fi;
       store_tx_write(myf, accepted);
       if
       :: !accepted -> goto threw
       :: else -> skip
       fi;
       if
       :: goto threw
       :: running--
       fi
     }
  fi;

  /* commit, retried under the same fence while the store is unavailable */
commit:
  if
  :: CRASH(false)
  :: atomic {
       tries++;
       COMMIT_CALL(DONE);
       printf("caller %d: commit under fence %d: answer %d, fault %d (5 ok, 6 lease_lost, \
7 unavailable; fault 1 failed, 2 reply lost)\n", _pid, myf, cr, f);
       if
       :: f == 0 -> heard = true
       :: else -> skip
       fi;
       val = rid;
       if
       :: cr == OK -> o = O_RECORDED; ANSWER
       :: cr == LEASE_LOST -> o = O_LEASE_LOST; ANSWER  /* no retry: another holder took over */
       :: cr == UNAVAILABLE && tries < COMMIT_TRIES -> goto commit
       :: cr == UNAVAILABLE && tries >= COMMIT_TRIES -> o = O_UNRECORDED; ANSWER
       fi
     }
  fi;

threw:
  /* the handler threw: release the key, or remember the failure without the handler's effects
   * (rewind first; a failed rewind releases instead) */
  if
  :: CRASH(true)
  :: atomic {
       running--;
       printf("caller %d: the handler threw; remember_failures %d\n", _pid, remember);
       settle_by_abort = !remember;
       if
       :: remember ->
#ifdef TX
          CALL(store_rewind(myf, cr));
#else
          cr = OK;  /* lease-mode stores are not rewindable: the guard commits the failure */
#endif
          if
          :: cr != OK -> settle_by_abort = true
          :: else -> COMMIT_CALL(FAILED)
          fi
       :: else -> skip
       fi;
       if
       :: settle_by_abort -> CALL(store_abort(myf, cr))
       :: else -> skip
       fi;
       settle_by_abort = false;
       o = O_THREW;
       ANSWER
     }
  fi;

dead:
  skip
}
