#pragma once
// idem's conformance kit for record stores: the cases every idem::Store of the unique-index
// record strategy passes, on GoogleTest. A store written for another database runs the same
// cases as idem's own stores (memory, SQLite, PostgreSQL, Redis):
//
//   #include <idem/testing/record_store_conformance.hpp>
//
//   template <>
//   struct idem::testing::StoreTraits<MyStore> {  // idem/testing/store_traits.hpp
//     static constexpr std::chrono::milliseconds lease{500};
//     static std::unique_ptr<MyStore> make();
//     static void advance(MyStore&, std::chrono::milliseconds);
//   };
//
//   IDEM_RECORD_STORE_CONFORMANCE(MyStore, MyStore);  // at namespace scope, once per store
//
// and link idem::testing (CMake: find_package(idem COMPONENTS testing)) and a main() such as
// GTest::gtest_main. The cases run as <Prefix>/RecordStoreConformance.<Case>:
//
//   record_store_cases.hpp   each transition of the record through claim, commit, abort, extend
//   guard_cases.hpp          IdempotencyGuard's store calls: a claim and a commit per fresh key
//   rewind_cases.hpp         stores with rewind() (idem::RewindableStore)
//   reopen_cases.hpp         stores whose traits can reopen their records (StoreTraits::reopen)
//   step_cases.hpp           stores that keep a handler's steps (idem::StepStore), and requests
//                            for a completer (idem::CompletableStore)
//   face_cases.hpp           what callers see, on every face of the store (faces.hpp: execute(),
//                            begin(), batches, LayeredGuard, CachedStore and GroupCommitStore in
//                            front, the async guard), as <Prefix>/<Face>.<Case>; with an admin
//                            (StoreTraits::admin) also forgets and releases racing callers
//   held_key_cases.hpp       in_progress only for a key a live holder has
//   wake_cases.hpp           stores that wake a waiting duplicate (idem::WakingStore), as
//                            <Prefix>/WakeConformance.<Case>
//   atomic_step_cases.hpp    stores with atomic steps (idem::AtomicStepStore) whose traits can
//                            write through the step's transaction (WritesInTransactions)
//
// Cases for an ability the store lacks are not registered at all.

#include <gtest/gtest.h>

#include <string>

#include "idem/store.hpp"
#include "idem/testing/atomic_step_cases.hpp"
#include "idem/testing/detail/conformance_case.hpp"
#include "idem/testing/face_cases.hpp"
#include "idem/testing/guard_cases.hpp"
#include "idem/testing/held_key_cases.hpp"
#include "idem/testing/record_store_cases.hpp"
#include "idem/testing/record_store_test.hpp"
#include "idem/testing/reopen_cases.hpp"
#include "idem/testing/rewind_cases.hpp"
#include "idem/testing/step_cases.hpp"
#include "idem/testing/store_traits.hpp"
#include "idem/testing/wake_cases.hpp"

namespace idem::testing {

/// Registers every case that applies to S as `<prefix>/RecordStoreConformance.<Case>`; call it
/// before RUN_ALL_TESTS (IDEM_RECORD_STORE_CONFORMANCE does, during static initialisation).
template <class S>
bool register_record_store_conformance(const char* prefix, const char* file, int line) {
  static_assert(Store<S>,
                "the conformance kit checks an idem::Store: S needs claim, commit, "
                "abort and extend (idem/store.hpp)");
  static_assert(ConformanceTraits<S>,
                "specialise idem::testing::StoreTraits<S> with make(), advance() and lease "
                "(idem/testing/store_traits.hpp)");
  const std::string suite = std::string(prefix) + "/RecordStoreConformance";
  using namespace conformance;  // the cases and register_cases
  register_cases<
      S, FirstClaimAcquiresWithAPositiveFence, ClaimWhileHeldIsInProgressWithTheLeaseLeft,
      CommittedResultReplaysByteForByte, EmptyResultIsAStoredResult,
      AnotherFingerprintIsAMismatchWhileHeldAndAfter, AbortReleasesAndTheNextClaimHasALargerFence,
      StaleFenceAfterAbortAndReclaimIsLeaseLost, ExpiredLeaseIsTakenOverAndTheOldHolderFencedOff,
      ExpiredLeaseWithAnotherPayloadIsStillAMismatch, ALeaseEndsAWholeLeaseBeforeItsRecord,
      AnExtendedLeaseEndsAWholeLeaseBeforeItsRecord, CommitAfterOwnLeaseRanOutButNoTakeoverSucceeds,
      ExtendKeepsTheLeaseAlive, CompletedRecordExpiresAfterItsTtl, FailedRecordReplaysItsBytes,
      ReplaysSayHowLongTheRecordStillLives, CommitTwiceIsLeaseLostTheSecondTime,
      CommitRepeatedUnderItsFenceAfterItLandedSucceeds, CommitOfAnUnknownKeyIsLeaseLost,
      KeysAreOpaqueBytes, AClaimAfterAWaitAnswersAsAClaim>(suite.c_str(), file, line);
  register_cases<S, AFreshKeyIsAClaimAndACommitAndAReplayOneClaim>(suite.c_str(), file, line);
  if constexpr (RewindableStore<S>) {
    register_cases<S, RewindKeepsTheKeyHeldAndAFailureCommitsAfterIt,
                   AbortAfterRewindReleasesTheKey>(suite.c_str(), file, line);
  }
  if constexpr (StepStore<S>) {
    register_cases<S, StepsComeBackInOrderToTheKeysNextHolder,
                   AStaleHolderCanNeitherSaveNorLoadSteps, AFinishedRecordKeepsNoSteps,
                   AnotherPayloadStartsWithoutTheSteps,
                   GuardResumesAHandlerAtItsFirstUnfinishedStep>(suite.c_str(), file, line);
    if constexpr (!HoldsUntilFinished<S>) {
      register_cases<S, ATakeoverGetsTheOldHoldersStepsAndFencesItOff,
                     GuardRefusesStepsInAnotherOrderAndKeepsTheKeysSteps,
                     AnExpiredRunLeavesNoStepsToTheNextOne>(suite.c_str(), file, line);
    }
    if constexpr (CompletableStore<S> && !HoldsUntilFinished<S>) {
      register_cases<S, AKeptRequestIsFoundOnceItsRunIsAbandoned, AStaleHolderKeepsNoRequest,
                     FinishedAndExpiredRunsAreNotAbandoned, ACompleterFinishesTheRunAGuardKept>(
          suite.c_str(), file, line);
    }
  }
  register_cases<S, AKeyNobodyHoldsIsNeverInProgress>(suite.c_str(), file, line);
  if constexpr (AtomicStepStore<S> && WritesInTransactions<S>) {
    register_cases<S, AThrowingAtomicStepLeavesNoWritesWhenTheHandlerGoesOn,
                   AStepWhoseStatementFailedLeavesTheHandlersTransactionUsable,
                   AStepsWritesRemainExactlyWhenItsRecordDoes,
                   ANestedAtomicStepIsPartOfItsOuterStep>(suite.c_str(), file, line);
    if constexpr (RewindableStore<S>) {
      register_cases<S, ARememberedFailureAfterAFailedStepCommitsWithoutItsWrites>(suite.c_str(),
                                                                                   file, line);
    }
    if constexpr (!HoldsUntilFinished<S>) {
      register_cases<S, AStaleHoldersAtomicStepLeavesNoWrites>(suite.c_str(), file, line);
    }
  }
  if constexpr (Reopenable<S>) {
    register_cases<S, RecordsOutliveTheStoreThatWroteThem,
                   AHolderWhoseStoreClosedIsTakenOverUnderALargerFence,
                   HoldersInTwoStoresFenceEachOtherOff>(suite.c_str(), file, line);
  }
  if constexpr (WakingStore<S>) {
    register_wake_cases<S>(prefix, file, line);
  }
  face_cases::register_faces<S>(prefix, file, line);
  return true;
}

}  // namespace idem::testing

/// Runs the conformance cases on the store type given after `Prefix` (an identifier naming it in
/// test names; the type may contain commas). At namespace scope, once per store type.
#define IDEM_RECORD_STORE_CONFORMANCE(Prefix, ...) \
  IDEM_TESTING_REGISTER(register_record_store_conformance, Prefix, __VA_ARGS__)
