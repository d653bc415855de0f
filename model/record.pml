/* The record of one key, the answers of the store calls, the fault budget, and the ghost
 * variables the properties read. Included by idem.pml. */

/* Record states. A released record (aborted) is ABSENT for claims but keeps its fence. */
#define ABSENT 0
#define HELD   1   /* in progress: a holder runs the handler (lease mode only; see tx_store.pml) */
#define DONE   2   /* completed: replays its result */
#define FAILED 3   /* a remembered failure: replays it */

/* What a store call answers. */
#define ACQUIRED    1
#define INPROG      2
#define REPLAY      3
#define RFAILED     4
#define OK          5
#define LEASE_LOST  6
#define UNAVAILABLE 7  /* store_unavailable, or outcome_unknown: the call failed, or its reply
                          was lost (the model does not tell the two apart) */

/* What a caller's call returns (idem::Outcome). */
#define O_RECORDED    1  /* fresh value, recorded() */
#define O_LEASE_LOST  2  /* fresh value, commit_error() == lease_lost */
#define O_UNRECORDED  3  /* fresh value, commit_error() == store_unavailable or outcome_unknown */
#define O_REPLAY      4  /* replayed value */
#define O_RFAILED     5  /* replayed remembered failure (handler_failed) */
#define O_INPROG      6  /* in_progress */
#define O_UNAVAILABLE 7  /* the claim failed: store_unavailable */
#define O_THREW       8  /* the handler's exception propagated */

byte rstate = ABSENT;
byte rfence = 0;       /* the record's fence */
byte rresult = 0;      /* the run (its id) whose result or failure the record holds */
bool lease_live = false;
bool remember = false; /* Options::remember_failures, chosen once for every guard */

/* Faults: one lost reply or failed call (FAULTS), callers crashing (CRASHES). */
byte faults = 0;
byte crashes = 0;

/* Ghost variables: what happened, for the properties. */
byte max_acq = 0;      /* the largest fence any claim has acquired */
byte claims = 0;       /* claims that acquired; each holder is known by its number */
byte last_claim = 0;   /* the latest claim that acquired: the only holder that may commit */
byte runs = 0;         /* handler runs started; a run is known by its number (rid), its value */
byte running = 0;      /* handler runs in progress right now */
byte commits = 0;      /* commits that ended the record (completed or failed) */
byte effects = 0;      /* handler writes committed in the store's own database (transactional) */
byte ended = 0;        /* calls that returned, or whose caller crashed */
bool bad_fence = false;     /* a claim acquired a fence that did not grow as promised */
bool bad_takeover = false;  /* a holder that was taken over committed, or was told recorded */
bool bad_answer = false;    /* a replay or a recorded value that is not the committed one */
bool bad_lost = false;      /* a landed commit not reported recorded; lease_lost without takeover */

/* A downstream system (a ledger) that accepts a write only with a fence >= the highest seen. */
byte ledger_hi = 0;    /* the highest fence seen */
byte ledger_last = 0;  /* the run whose write was accepted last */
byte ledger_n = 0;     /* writes accepted */
byte ledger_at_hi = 0; /* writes accepted under the highest fence */

/* The next store call fails before it runs (f = 1), or runs and its reply is lost (f = 2). */
inline pick_fault(f) {
  if
  :: f = 0
  :: faults < FAULTS -> faults++; f = 1
  :: faults < FAULTS -> faults++; f = 2
  fi
}

/* A claim acquired fence `f`. */
inline note_acquired(f) {
  if
  :: f <= max_acq -> bad_fence = true
  :: else -> skip
  fi;
  max_acq = f
}

/* The ledger: a write under fence `f` by the run `rid`. */
inline ledger_write(f, rid, accepted) {
  if
  :: f >= ledger_hi ->
     if
     :: f == ledger_hi && ledger_n > 0 -> ledger_at_hi++
     :: else -> ledger_at_hi = 1
     fi;
     ledger_hi = f;
     ledger_last = rid;
     ledger_n++;
     accepted = true
  :: else -> accepted = false
  fi
}
