#pragma once
// The record store's transitions, one case each, through the four calls of idem::Store alone:
// claim, commit, abort and extend as docs/design.md (the record, the store calls, lease, fence
// and takeover) describes them. Every record store passes all of them.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "idem/store.hpp"
#include "idem/testing/detail/conformance_case.hpp"

namespace idem::testing::conformance {

using namespace std::string_literals;

IDEM_TESTING_CASE(FirstClaimAcquiresWithAPositiveFence) {
  const Claim c = this->acquired(this->key());
  EXPECT_GT(c.fence, 0u);
  EXPECT_FALSE(c.took_over);
}

IDEM_TESTING_CASE(ClaimWhileHeldIsInProgressWithTheLeaseLeft) {
  const auto k = this->key();
  const Claim held = this->acquired(k);
  Result<Claim> again = this->claim(k);
  ASSERT_TRUE(again.has_value()) << again.failure().describe();
  EXPECT_EQ(again->status, ClaimStatus::in_progress);
  EXPECT_EQ(again->fence, held.fence);
  EXPECT_GT(again->lease_remaining.count(), 0);
  EXPECT_LE(again->lease_remaining, this->kLease);
}

IDEM_TESTING_CASE(CommittedResultReplaysByteForByte) {
  const std::string bytes = "a\0b\r\n{}'\";%\xff"s;
  const auto k = this->key();
  const Claim held = this->acquired(k);
  ASSERT_TRUE(this->commit(k, held.fence, bytes).ok());
  Result<Claim> replay = this->claim(k);
  ASSERT_TRUE(replay.has_value()) << replay.failure().describe();
  EXPECT_EQ(replay->status, ClaimStatus::completed);
  EXPECT_EQ(replay->result, bytes);
}

IDEM_TESTING_CASE(EmptyResultIsAStoredResult) {
  const auto k = this->key();
  ASSERT_TRUE(this->commit(k, this->acquired(k).fence, "").ok());
  Result<Claim> replay = this->claim(k);
  ASSERT_TRUE(replay.has_value()) << replay.failure().describe();
  EXPECT_EQ(replay->status, ClaimStatus::completed);
  EXPECT_TRUE(replay->result.empty());
}

IDEM_TESTING_CASE(AnotherFingerprintIsAMismatchWhileHeldAndAfter) {
  const auto k = this->key();
  const Claim held = this->acquired(k, {1, 1});
  EXPECT_EQ(this->claim(k, {1, 9})->status, ClaimStatus::mismatch);
  ASSERT_TRUE(this->commit(k, held.fence, "r").ok());
  EXPECT_EQ(this->claim(k, {1, 9})->status, ClaimStatus::mismatch);
  EXPECT_EQ(this->claim(k, {1, 1})->status, ClaimStatus::completed);
}

IDEM_TESTING_CASE(AbortReleasesAndTheNextClaimHasALargerFence) {
  const auto k = this->key();
  const Claim first = this->acquired(k);
  ASSERT_TRUE(this->store().abort(Ticket{k, first.fence}).ok());
  // Released means absent: even another payload may claim it now.
  const Claim second = this->acquired(k, {7, 7});
  EXPECT_GT(second.fence, first.fence);
}

IDEM_TESTING_CASE(StaleFenceAfterAbortAndReclaimIsLeaseLost) {
  const auto k = this->key();
  const Claim first = this->acquired(k);
  ASSERT_TRUE(this->store().abort(Ticket{k, first.fence}).ok());
  const Claim second = this->acquired(k);
  EXPECT_EQ(this->commit(k, first.fence, "stale").error(), errc::lease_lost);
  EXPECT_EQ(this->store().abort(Ticket{k, first.fence}).error(), errc::lease_lost);
  ASSERT_TRUE(this->commit(k, second.fence, "fresh").ok());
  EXPECT_EQ(this->claim(k)->result, "fresh");
}

IDEM_TESTING_CASE(ExpiredLeaseIsTakenOverAndTheOldHolderFencedOff) {
  const auto k = this->key();
  const Claim old_holder = this->acquired(k);
  this->advance(this->kLease + this->kLease / 2);
  if constexpr (HoldsUntilFinished<S>) {
    // No takeover while the holder lives (a crashed holder's transaction rolls back instead):
    // the key stays in progress and the holder's late commit lands.
    Result<Claim> again = this->claim(k);
    ASSERT_TRUE(again.has_value()) << again.failure().describe();
    EXPECT_EQ(again->status, ClaimStatus::in_progress);
    ASSERT_TRUE(this->commit(k, old_holder.fence, "late").ok());
    EXPECT_EQ(this->claim(k)->result, "late");
    return;
  }
  Result<Claim> takeover = this->claim(k);
  ASSERT_TRUE(takeover.has_value()) << takeover.failure().describe();
  ASSERT_EQ(takeover->status, ClaimStatus::acquired);
  EXPECT_TRUE(takeover->took_over);
  EXPECT_EQ(takeover->fence, old_holder.fence + 1);

  const Ticket stale{k, old_holder.fence};
  EXPECT_EQ(this->commit(k, old_holder.fence, "late").error(), errc::lease_lost);
  EXPECT_EQ(this->store().abort(stale).error(), errc::lease_lost);
  EXPECT_EQ(this->store().extend(stale, this->kLease).error(), errc::lease_lost);

  ASSERT_TRUE(this->commit(k, takeover->fence, "new").ok());
  EXPECT_EQ(this->claim(k)->result, "new");
}

IDEM_TESTING_CASE(ExpiredLeaseWithAnotherPayloadIsStillAMismatch) {
  const auto k = this->key();
  (void)this->acquired(k, {1, 1});
  this->advance(this->kLease + this->kLease / 2);
  EXPECT_EQ(this->claim(k, {2, 2})->status, ClaimStatus::mismatch);
}

// A record in progress outlives its lease by another lease, whatever retention the claim asked
// for (idem::held_retention): a claim after the lease ran out finds the record, so another payload
// is still a mismatch and the same payload takes it over (docs/design.md §2, §4). Leases of two
// kLease, looked at a quarter lease after they end: a slow machine's late wake-up has three
// quarters of a lease before the record may go.
IDEM_TESTING_CASE(ALeaseEndsAWholeLeaseBeforeItsRecord) {
  const auto k = this->key();
  const auto lease = 2 * this->kLease;
  // Retention as short as the lease: what a guard whose ttl is below its lease used to ask for.
  Result<Claim> held = this->store().claim(
      ClaimRequest{.key = k, .fingerprint = {1, 1}, .lease = lease, .retention = lease});
  ASSERT_TRUE(held.has_value()) << held.failure().describe();
  ASSERT_EQ(held->status, ClaimStatus::acquired);
  this->advance(lease + lease / 4);
  EXPECT_EQ(this->claim(k, {2, 2})->status, ClaimStatus::mismatch);
  if constexpr (HoldsUntilFinished<S>) {
    EXPECT_EQ(this->claim(k, {1, 1})->status, ClaimStatus::in_progress);
    return;
  }
  Result<Claim> takeover = this->claim(k, {1, 1});
  ASSERT_TRUE(takeover.has_value()) << takeover.failure().describe();
  EXPECT_EQ(takeover->status, ClaimStatus::acquired);
  EXPECT_TRUE(takeover->took_over);
  EXPECT_GT(takeover->fence, held->fence);
}

// An extend keeps the record a whole lease past the new lease's end, as a claim does.
IDEM_TESTING_CASE(AnExtendedLeaseEndsAWholeLeaseBeforeItsRecord) {
  const auto k = this->key();
  const auto lease = 2 * this->kLease;
  Result<Claim> held = this->store().claim(ClaimRequest{
      .key = k, .fingerprint = {1, 1}, .lease = this->kLease, .retention = this->kLease});
  ASSERT_TRUE(held.has_value()) << held.failure().describe();
  ASSERT_EQ(held->status, ClaimStatus::acquired);
  this->advance(this->kLease / 4);
  ASSERT_TRUE(this->store().extend(Ticket{k, held->fence}, lease).ok());
  // The new lease ends two kLease after the extend, the record no sooner than four.
  this->advance(lease + lease / 4);
  EXPECT_EQ(this->claim(k, {2, 2})->status, ClaimStatus::mismatch);
  if constexpr (HoldsUntilFinished<S>) return;
  Result<Claim> takeover = this->claim(k, {1, 1});
  ASSERT_TRUE(takeover.has_value()) << takeover.failure().describe();
  EXPECT_EQ(takeover->status, ClaimStatus::acquired);
  EXPECT_TRUE(takeover->took_over);
}

IDEM_TESTING_CASE(CommitAfterOwnLeaseRanOutButNoTakeoverSucceeds) {
  const auto k = this->key();
  const Claim held = this->acquired(k);
  this->advance(this->kLease + this->kLease / 2);
  // Nobody took over, so the fence is still the record's: fencing, not timing, decides.
  ASSERT_TRUE(this->commit(k, held.fence, "slow but sole").ok());
  EXPECT_EQ(this->claim(k)->status, ClaimStatus::completed);
}

IDEM_TESTING_CASE(ExtendKeepsTheLeaseAlive) {
  const auto k = this->key();
  const Claim held = this->acquired(k);
  // Early in the lease, and for long, so that a slow machine's delays cannot push the extend
  // past the first lease or the check past the second.
  this->advance(this->kLease / 4);
  ASSERT_TRUE(this->store().extend(Ticket{k, held.fence}, this->kLease * 4).ok());
  this->advance(this->kLease + this->kLease / 4);  // past the original lease, within the new one
  EXPECT_EQ(this->claim(k)->status, ClaimStatus::in_progress);
}

IDEM_TESTING_CASE(CompletedRecordExpiresAfterItsTtl) {
  const auto k = this->key();
  const Claim held = this->acquired(k);
  ASSERT_TRUE(this->commit(k, held.fence, "r", ClaimStatus::completed, this->kLease).ok());
  EXPECT_EQ(this->claim(k)->status, ClaimStatus::completed);
  this->advance(this->kLease + this->kLease / 2);
  const Claim again = this->acquired(k, {5, 5});
  EXPECT_GT(again.fence, 0u);
}

IDEM_TESTING_CASE(FailedRecordReplaysItsBytes) {
  const auto k = this->key();
  const Claim held = this->acquired(k);
  ASSERT_TRUE(this->commit(k, held.fence, "why", ClaimStatus::failed).ok());
  Result<Claim> replay = this->claim(k);
  ASSERT_TRUE(replay.has_value()) << replay.failure().describe();
  EXPECT_EQ(replay->status, ClaimStatus::failed);
  EXPECT_EQ(replay->result, "why");
}

// A cache in front (CachedStore) keeps a replay only as long as the store says the record lives.
IDEM_TESTING_CASE(ReplaysSayHowLongTheRecordStillLives) {
  const auto done = this->key("completed");
  ASSERT_TRUE(this->commit(done, this->acquired(done).fence, "r").ok());
  const auto failed = this->key("failed");
  ASSERT_TRUE(this->commit(failed, this->acquired(failed).fence, "why", ClaimStatus::failed).ok());
  for (const auto& k : {done, failed}) {
    Result<Claim> replay = this->claim(k);
    ASSERT_TRUE(replay.has_value()) << replay.failure().describe();
    EXPECT_NE(replay->status, ClaimStatus::acquired) << k;
    EXPECT_GT(replay->expires_in.count(), 0) << k;
    EXPECT_LE(replay->expires_in, this->kTtl) << k;
  }
}

// A second commit with another result under the same fence is not a repeat: lease_lost.
IDEM_TESTING_CASE(CommitTwiceIsLeaseLostTheSecondTime) {
  const auto k = this->key();
  const Claim held = this->acquired(k);
  ASSERT_TRUE(this->commit(k, held.fence, "one").ok());
  EXPECT_EQ(this->commit(k, held.fence, "two").error(), errc::lease_lost);
  EXPECT_EQ(this->claim(k)->result, "one");
}

// A commit retried under its fence after it landed (its answer was lost on the way) finds its own
// completion and succeeds, changing nothing; another state, other bytes or another fence do not.
// A store whose holder keeps the key until it finishes (a transaction) knows a commit's answer was
// lost only from the failure it met: it looks the record up for those (cut the connection at
// COMMIT to test that), and a repeat after an answered commit is lease_lost.
IDEM_TESTING_CASE(CommitRepeatedUnderItsFenceAfterItLandedSucceeds) {
  constexpr bool kAnsweredRepeatSucceeds = !HoldsUntilFinished<S>;
  const auto k = this->key();
  const Claim held = this->acquired(k);
  ASSERT_TRUE(this->commit(k, held.fence, "one").ok());
  const Status repeated = this->commit(k, held.fence, "one");
  if (kAnsweredRepeatSucceeds) {
    EXPECT_TRUE(repeated.ok()) << repeated.failure().describe();
  } else {
    EXPECT_EQ(repeated.error(), errc::lease_lost);
  }
  EXPECT_EQ(this->commit(k, held.fence, "one", ClaimStatus::failed).error(), errc::lease_lost);
  EXPECT_EQ(this->commit(k, held.fence + 1, "one").error(), errc::lease_lost);
  Result<Claim> replay = this->claim(k);
  ASSERT_TRUE(replay.has_value()) << replay.failure().describe();
  EXPECT_EQ(replay->status, ClaimStatus::completed);
  EXPECT_EQ(replay->result, "one");

  const auto failed = this->key("failed");
  const Claim failing = this->acquired(failed);
  ASSERT_TRUE(this->commit(failed, failing.fence, "why", ClaimStatus::failed).ok());
  const Status again = this->commit(failed, failing.fence, "why", ClaimStatus::failed);
  if (kAnsweredRepeatSucceeds) {
    EXPECT_TRUE(again.ok()) << again.failure().describe();
  }
  EXPECT_EQ(this->commit(failed, failing.fence, "why").error(), errc::lease_lost);
  EXPECT_EQ(this->claim(failed)->status, ClaimStatus::failed);
}

IDEM_TESTING_CASE(CommitOfAnUnknownKeyIsLeaseLost) {
  EXPECT_EQ(this->commit(this->key("never-claimed"), 1, "x").error(), errc::lease_lost);
}

IDEM_TESTING_CASE(KeysAreOpaqueBytes) {
  const std::string base = this->key();
  const std::vector<std::string> keys = {
      base + "\0a"s,     base + "\0b"s,  base + "\xff\xfe"s,           base + "'; DROP TABLE x; --",
      base + "%_*?[]{}", base + " \r\n", base + std::string(200, '\0')};
  for (const std::string& k : keys) {
    const Claim c = this->acquired(k);
    ASSERT_TRUE(this->commit(k, c.fence, k).ok());
  }
  for (const std::string& k : keys) {
    Result<Claim> replay = this->claim(k);
    ASSERT_TRUE(replay.has_value()) << replay.failure().describe();
    EXPECT_EQ(replay->status, ClaimStatus::completed);
    EXPECT_EQ(replay->result, k);
  }
}

// A claim after a wait (ClaimRequest::after_wait) may be answered from a read of the record, but
// its answers are the claim's: a live holder, a replay, a mismatch, and a key the claim takes
// (fresh, released, a lapsed lease) taken as a claim takes it.
IDEM_TESTING_CASE(AClaimAfterAWaitAnswersAsAClaim) {
  auto claim_after_wait = [this](std::string_view k, Fingerprint fp = {1, 2}) {
    return this->store().claim(ClaimRequest{.key = k,
                                            .fingerprint = fp,
                                            .lease = this->kLease,
                                            .retention = this->kTtl,
                                            .after_wait = true});
  };
  const auto k = this->key();
  Result<Claim> fresh = claim_after_wait(k);
  ASSERT_TRUE(fresh.has_value()) << fresh.failure().describe();
  ASSERT_EQ(fresh->status, ClaimStatus::acquired);
  Result<Claim> busy = claim_after_wait(k);
  ASSERT_TRUE(busy.has_value()) << busy.failure().describe();
  EXPECT_EQ(busy->status, ClaimStatus::in_progress);
  EXPECT_EQ(busy->fence, fresh->fence);
  EXPECT_GT(busy->lease_remaining.count(), 0);
  EXPECT_EQ(claim_after_wait(k, {9, 9})->status, ClaimStatus::mismatch);
  ASSERT_TRUE(this->commit(k, fresh->fence, "done").ok());
  Result<Claim> replay = claim_after_wait(k);
  ASSERT_TRUE(replay.has_value()) << replay.failure().describe();
  EXPECT_EQ(replay->status, ClaimStatus::completed);
  EXPECT_EQ(replay->result, "done");
  EXPECT_EQ(replay->fence, fresh->fence);
  EXPECT_EQ(claim_after_wait(k, {9, 9})->status, ClaimStatus::mismatch);

  const auto released = this->key("released");
  const Claim first = this->acquired(released);
  ASSERT_TRUE(this->store().abort(Ticket{released, first.fence}).ok());
  Result<Claim> again = claim_after_wait(released);
  ASSERT_TRUE(again.has_value()) << again.failure().describe();
  EXPECT_EQ(again->status, ClaimStatus::acquired);
  EXPECT_GT(again->fence, first.fence);

  if constexpr (!HoldsUntilFinished<S>) {
    const auto lapsed = this->key("lapsed");
    const Claim old_holder = this->acquired(lapsed);
    this->advance(this->kLease + this->kLease / 2);
    Result<Claim> takeover = claim_after_wait(lapsed);
    ASSERT_TRUE(takeover.has_value()) << takeover.failure().describe();
    EXPECT_EQ(takeover->status, ClaimStatus::acquired);
    EXPECT_TRUE(takeover->took_over);
    EXPECT_EQ(this->commit(lapsed, old_holder.fence, "late").error(), errc::lease_lost);
  }
}

}  // namespace idem::testing::conformance
