/* idem's record protocol for one key: NC callers, atomic claim / commit / abort / extend /
 * rewind, leases that pass at any moment, takeovers, fences, crashes at every step, a lost reply
 * or failed call, commit retry, remembered failures, and a downstream ledger that accepts a write
 * only with a fence >= the highest it has seen. How to read and run it: docs/model.md.
 *
 *   spin -a [-DTX] [-DNC=3 ...] idem.pml   lease mode, or SQL transactional mode with -DTX
 */

#ifndef NC
#define NC 2            /* callers of the one key */
#endif
#ifndef ATTEMPTS
#define ATTEMPTS 2      /* claims per caller: the first and a retry (a Wait poll or the client's) */
#endif
#ifndef COMMIT_TRIES
#define COMMIT_TRIES 2  /* Options::commit_retry.attempts */
#endif
#ifndef CRASHES
#define CRASHES 1       /* caller crashes in all */
#endif
#ifndef FAULTS
#define FAULTS 1        /* store calls that fail or lose their reply, in all */
#endif
#ifndef DROPS
#define DROPS 1         /* transactional mode: sessions the database ends under a live holder */
#endif

#include "record.pml"
#ifdef TX
#include "tx_store.pml"
#else
#include "lease_store.pml"
#endif
#include "caller.pml"

#ifdef TX
/* The database ends a live holder's session (its connection dropped, its host cut off) while the
 * holder's process may still run: the transaction rolls back, the key is free. */
active proctype Drops() {
end:
  do
  :: atomic {
       drops < DROPS && txh != 0 ->
       drops++;
       printf("the database ends the session of the holder of fence %d\n", txh);
       tx_rollback()
     }
  od
}
#else
/* A holder's lease passes at any moment. */
active proctype Leases() {
end:
  do
  :: atomic {
       rstate == HELD && lease_live ->
       lease_live = false;
       printf("the lease of fence %d passes\n", rfence)
     }
  od
}
#endif

init {
  byte i;
  atomic {
    if
    :: remember = true
    :: remember = false
    fi;
    for (i : 1 .. NC) {
      run Caller()
    }
  }
}

#include "properties.pml"
