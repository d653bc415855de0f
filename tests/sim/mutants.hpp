#pragma once
// The defects the simulator can put back (IDEM_SIM_MUTATE, idem/engine/sim_hooks.hpp), each a
// bug the library had or could have, and the check expected to catch it. scripts/sim --mutants
// runs each and fails unless its check catches it within the seeds the test command runs.

#include <string_view>

#include "idem/engine/sim_hooks.hpp"
#include "sim/checks.hpp"

namespace idem::sim {

// Mutation points in the library (numbers shared with the IDEM_SIM_MUTATE calls there).
inline constexpr int kMutantCommitForgetsLanded = 1;          // engine/record_model.hpp
inline constexpr int kMutantTakeoverAnyPayload = 2;           // engine/record_model.hpp
inline constexpr int kMutantTakeoverLiveLease = 3;            // engine/record_model.hpp
inline constexpr int kMutantExpiredStillReplays = 4;          // engine/record_model.hpp
inline constexpr int kMutantAbortLowersFence = 5;             // memory/store.hpp
inline constexpr int kMutantStepsForAnyPayload = 6;           // memory/store.hpp
inline constexpr int kMutantLeaseLostRecorded = 7;            // engine/engine.hpp
inline constexpr int kMutantNoRewind = 8;                     // engine/engine.hpp
inline constexpr int kMutantWaitForever = 9;                  // engine/engine.hpp
inline constexpr int kMutantForgetsDoubt = 10;                // engine/protocol.hpp
inline constexpr int kMutantTakeoverUnreported = 11;          // guard.hpp
inline constexpr int kMutantStepRunsAgain = 12;               // context.hpp
inline constexpr int kMutantCacheFillsLostCommit = 13;        // cached_store.hpp
inline constexpr int kMutantGroupAnswersSwapped = 14;         // group_commit_store.hpp
inline constexpr int kMutantBatchForgetsDoubt = 15;           // batch.hpp
inline constexpr int kMutantCacheOutlivesStore = 16;          // cached_store.hpp
inline constexpr int kMutantForgetKeepsSteps = 17;            // memory/admin.hpp
inline constexpr int kMutantBatchNotRetryable = 18;           // batch.hpp
inline constexpr int kMutantRetentionEndsWithLease = 19;      // store.hpp
inline constexpr int kMutantCacheKeepsForgotten = 21;         // cached_store.hpp
inline constexpr int kMutantLayersCommitOutwardFirst = 22;    // layered_guard.hpp
inline constexpr int kMutantGroupWriterMissesItsAnswer = 23;  // group_commit_store.hpp
// Mutation points in the simulator's own transactional server (it mirrors the SQL stores).
inline constexpr int kMutantAtomicStepKeepsWrites = 20;  // tests/sim/tx_server.cpp

struct Mutant {
  int id;
  std::string_view name;
  std::string_view defect;
  Check expected;  // the check meant to catch it
};

inline constexpr Mutant kMutants[] = {
    {kMutantCommitForgetsLanded, "commit-forgets-landed",
     "a commit retried under its fence does not recognise its own landed completion",
     Check::lost_reply_is_recorded},
    {kMutantTakeoverAnyPayload, "takeover-any-payload",
     "a claim with another payload takes over a record whose lease ran out",
     Check::takeover_same_payload},
    {kMutantTakeoverLiveLease, "takeover-live-lease",
     "a claim takes over a record whose holder's lease is still live", Check::store_answers},
    {kMutantExpiredStillReplays, "expired-still-replays",
     "a completed record past its ttl keeps replaying", Check::no_forgotten_replay},
    {kMutantAbortLowersFence, "abort-lowers-fence",
     "an abort lowers the record's fence, so the next claim reuses a holder's fence",
     Check::fence_grows},
    {kMutantStepsForAnyPayload, "steps-for-any-payload",
     "a run under another payload is handed the earlier payload's steps",
     Check::no_forgotten_replay},
    {kMutantLeaseLostRecorded, "lease-lost-recorded",
     "a commit answered lease_lost is reported recorded", Check::taken_over_never_commits},
    {kMutantNoRewind, "no-rewind",
     "a remembered failure is committed without rewinding the handler's writes",
     Check::failure_carries_no_effects},
    {kMutantWaitForever, "wait-forever", "Wait ignores its timeout while the key is held",
     Check::calls_return},
    {kMutantForgetsDoubt, "commit-forgets-doubt",
     "a commit whose first try's reply was lost and whose last try could not reach the store "
     "reports store_unavailable (no try landed) instead of outcome_unknown",
     Check::lost_reply_is_recorded},
    {kMutantTakeoverUnreported, "takeover-unreported", "a takeover is not reported to the observer",
     Check::observer_matches},
    {kMutantStepRunsAgain, "step-runs-again", "a recorded step's body runs again",
     Check::steps_once},
    {kMutantCacheFillsLostCommit, "cache-fills-lost-commit",
     "CachedStore caches a completion its store refused (lease_lost)", Check::replay_is_committed},
    {kMutantGroupAnswersSwapped, "group-answers-swapped",
     "GroupCommitStore hands a group's claim answers to the wrong callers", Check::store_answers},
    {kMutantBatchForgetsDoubt, "batch-forgets-doubt",
     "a batch's commit whose answer was lost, retried for its key without reaching the store, "
     "reports store_unavailable (nothing landed) instead of outcome_unknown",
     Check::lost_reply_is_recorded},
    {kMutantCacheOutlivesStore, "cache-outlives-store",
     "CachedStore dates a record it caches from the commit try that answered, not the first: "
     "after a lost reply it replays past the store's expiry",
     Check::no_forgotten_replay},
    {kMutantForgetKeepsSteps, "forget-keeps-steps",
     "an admin's forget leaves the run's steps and kept request to the next run",
     Check::no_forgotten_replay},
    {kMutantBatchNotRetryable, "batch-not-retryable",
     "a batch item whose handler threw and whose key was released answers handler_failed (a "
     "retry cannot help)",
     Check::retry_advice},
    {kMutantRetentionEndsWithLease, "retention-ends-with-lease",
     "a record in progress is kept only max(ttl, lease): with ttl <= lease it expires with its "
     "lease, so another payload takes it and a takeover goes unreported",
     Check::takeover_same_payload},
    {kMutantCacheKeepsForgotten, "cache-keeps-forgotten",
     "a forget through the cache's own admin (cached_admin) leaves the cache replaying the "
     "record",
     Check::no_forgotten_replay},
    {kMutantLayersCommitOutwardFirst, "layers-commit-outward-first",
     "LayeredGuard commits its request-ID layer before the record, which may then refuse the "
     "commit",
     Check::replay_is_committed},
    {kMutantGroupWriterMissesItsAnswer, "group-writer-misses-its-answer",
     "GroupCommitStore with two groups in flight: a writer whose call another writer's group "
     "answered while it collected waits for an answer nobody sends",
     Check::calls_return},
    {kMutantAtomicStepKeepsWrites, "atomic-step-keeps-writes",
     "transactional mode: a throwing atomic step keeps its writes (no savepoint)",
     Check::failure_carries_no_effects},
};

}  // namespace idem::sim
