#pragma once
// The conformance suite every record store passes: docs/design.md §2-§4 transition by
// transition, then the guard on top of it with real threads (docs/model.md ties each case to the
// model's transitions). Instantiate with
//   INSTANTIATE_TYPED_TEST_SUITE_P(Memory, RecordStoreConformance, ::testing::Types<MemoryStore>);

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "conformance/store_traits.hpp"
#include "idem/idem.hpp"

namespace idem::testing {

using std::chrono::milliseconds;
using namespace std::string_literals;

// A store whose holder keeps the key until it commits or aborts, lease or not (the SQL stores in
// transactional mode: the holder's open transaction locks the row), says so in its traits with
//   static constexpr bool holds_until_finished = true;
template <class S>
concept HoldsUntilFinished = requires {
  requires StoreTraits<S>::holds_until_finished;
};

template <class S>
class RecordStoreConformance : public ::testing::Test {
 protected:
  using Traits = StoreTraits<S>;
  static constexpr milliseconds kLease = Traits::lease;
  static constexpr milliseconds kTtl{std::chrono::hours{1}};

  void SetUp() override { store_ = Traits::make(); }

  S& store() { return *store_; }
  void advance(milliseconds d) { Traits::advance(*store_, d); }

  // Keys differ per test so that stores sharing a backend cannot see each other's records.
  std::string key(std::string_view suffix = "k") const {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string(info->name()) + "/" + std::string(suffix);
  }

  Result<Claim> claim(std::string_view k, Fingerprint fp = {1, 2}, milliseconds lease = kLease) {
    return store().claim(ClaimRequest{k, fp, lease, kTtl});
  }
  Claim acquired(std::string_view k, Fingerprint fp = {1, 2}) {
    Result<Claim> c = claim(k, fp);
    EXPECT_TRUE(c.has_value()) << (c ? "" : c.failure().describe());
    EXPECT_EQ(c->status, ClaimStatus::acquired);
    return std::move(c).value();
  }
  Status commit(std::string_view k, Fence fence, std::string_view bytes,
                ClaimStatus status = ClaimStatus::completed, milliseconds ttl = kTtl) {
    return store().commit(Ticket{k, fence}, Completion{status, bytes, ttl});
  }

 private:
  std::unique_ptr<S> store_;
};

TYPED_TEST_SUITE_P(RecordStoreConformance);

TYPED_TEST_P(RecordStoreConformance, FirstClaimAcquiresWithAPositiveFence) {
  const Claim c = this->acquired(this->key());
  EXPECT_GT(c.fence, 0u);
  EXPECT_FALSE(c.took_over);
}

TYPED_TEST_P(RecordStoreConformance, ClaimWhileHeldIsInProgressWithTheLeaseLeft) {
  const auto k = this->key();
  const Claim held = this->acquired(k);
  Result<Claim> again = this->claim(k);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->status, ClaimStatus::in_progress);
  EXPECT_EQ(again->fence, held.fence);
  EXPECT_GT(again->lease_remaining.count(), 0);
  EXPECT_LE(again->lease_remaining, this->kLease);
}

TYPED_TEST_P(RecordStoreConformance, CommittedResultReplaysByteForByte) {
  const std::string bytes = "a\0b\r\n{}'\";%\xff"s;
  const auto k = this->key();
  const Claim held = this->acquired(k);
  ASSERT_TRUE(this->commit(k, held.fence, bytes).ok());
  Result<Claim> replay = this->claim(k);
  ASSERT_TRUE(replay.has_value());
  EXPECT_EQ(replay->status, ClaimStatus::completed);
  EXPECT_EQ(replay->result, bytes);
}

TYPED_TEST_P(RecordStoreConformance, EmptyResultIsAStoredResult) {
  const auto k = this->key();
  ASSERT_TRUE(this->commit(k, this->acquired(k).fence, "").ok());
  Result<Claim> replay = this->claim(k);
  ASSERT_TRUE(replay.has_value());
  EXPECT_EQ(replay->status, ClaimStatus::completed);
  EXPECT_TRUE(replay->result.empty());
}

TYPED_TEST_P(RecordStoreConformance, AnotherFingerprintIsAMismatchWhileHeldAndAfter) {
  const auto k = this->key();
  const Claim held = this->acquired(k, {1, 1});
  EXPECT_EQ(this->claim(k, {1, 9})->status, ClaimStatus::mismatch);
  ASSERT_TRUE(this->commit(k, held.fence, "r").ok());
  EXPECT_EQ(this->claim(k, {1, 9})->status, ClaimStatus::mismatch);
  EXPECT_EQ(this->claim(k, {1, 1})->status, ClaimStatus::completed);
}

TYPED_TEST_P(RecordStoreConformance, AbortReleasesAndTheNextClaimHasALargerFence) {
  const auto k = this->key();
  const Claim first = this->acquired(k);
  ASSERT_TRUE(this->store().abort(Ticket{k, first.fence}).ok());
  // Released means absent: even another payload may claim it now.
  const Claim second = this->acquired(k, {7, 7});
  EXPECT_GT(second.fence, first.fence);
}

TYPED_TEST_P(RecordStoreConformance, StaleFenceAfterAbortAndReclaimIsLeaseLost) {
  const auto k = this->key();
  const Claim first = this->acquired(k);
  ASSERT_TRUE(this->store().abort(Ticket{k, first.fence}).ok());
  const Claim second = this->acquired(k);
  EXPECT_EQ(this->commit(k, first.fence, "stale").error(), errc::lease_lost);
  EXPECT_EQ(this->store().abort(Ticket{k, first.fence}).error(), errc::lease_lost);
  ASSERT_TRUE(this->commit(k, second.fence, "fresh").ok());
  EXPECT_EQ(this->claim(k)->result, "fresh");
}

TYPED_TEST_P(RecordStoreConformance, ExpiredLeaseIsTakenOverAndTheOldHolderFencedOff) {
  const auto k = this->key();
  const Claim old_holder = this->acquired(k);
  this->advance(this->kLease + this->kLease / 2);
  if constexpr (HoldsUntilFinished<TypeParam>) {
    // No takeover while the holder lives (a crashed holder's transaction rolls back instead):
    // the key stays in progress and the holder's late commit lands.
    Result<Claim> again = this->claim(k);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->status, ClaimStatus::in_progress);
    ASSERT_TRUE(this->commit(k, old_holder.fence, "late").ok());
    EXPECT_EQ(this->claim(k)->result, "late");
    return;
  }
  Result<Claim> takeover = this->claim(k);
  ASSERT_TRUE(takeover.has_value());
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

TYPED_TEST_P(RecordStoreConformance, ExpiredLeaseWithAnotherPayloadIsStillAMismatch) {
  const auto k = this->key();
  (void)this->acquired(k, {1, 1});
  this->advance(this->kLease + this->kLease / 2);
  EXPECT_EQ(this->claim(k, {2, 2})->status, ClaimStatus::mismatch);
}

TYPED_TEST_P(RecordStoreConformance, CommitAfterOwnLeaseRanOutButNoTakeoverSucceeds) {
  const auto k = this->key();
  const Claim held = this->acquired(k);
  this->advance(this->kLease + this->kLease / 2);
  // Nobody took over, so the fence is still the record's: fencing, not timing, decides.
  ASSERT_TRUE(this->commit(k, held.fence, "slow but sole").ok());
  EXPECT_EQ(this->claim(k)->status, ClaimStatus::completed);
}

TYPED_TEST_P(RecordStoreConformance, ExtendKeepsTheLeaseAlive) {
  const auto k = this->key();
  const Claim held = this->acquired(k);
  this->advance(this->kLease / 2);
  ASSERT_TRUE(this->store().extend(Ticket{k, held.fence}, this->kLease * 2).ok());
  this->advance(this->kLease);  // past the original lease, within the extended one
  EXPECT_EQ(this->claim(k)->status, ClaimStatus::in_progress);
}

TYPED_TEST_P(RecordStoreConformance, CompletedRecordExpiresAfterItsTtl) {
  const auto k = this->key();
  const Claim held = this->acquired(k);
  ASSERT_TRUE(this->commit(k, held.fence, "r", ClaimStatus::completed, this->kLease).ok());
  EXPECT_EQ(this->claim(k)->status, ClaimStatus::completed);
  this->advance(this->kLease + this->kLease / 2);
  const Claim again = this->acquired(k, {5, 5});
  EXPECT_GT(again.fence, 0u);
}

TYPED_TEST_P(RecordStoreConformance, FailedRecordReplaysItsBytes) {
  const auto k = this->key();
  const Claim held = this->acquired(k);
  ASSERT_TRUE(this->commit(k, held.fence, "why", ClaimStatus::failed).ok());
  Result<Claim> replay = this->claim(k);
  ASSERT_TRUE(replay.has_value());
  EXPECT_EQ(replay->status, ClaimStatus::failed);
  EXPECT_EQ(replay->result, "why");
}

// A cache in front (CachedStore) keeps a replay only as long as the store says the record lives.
TYPED_TEST_P(RecordStoreConformance, ReplaysSayHowLongTheRecordStillLives) {
  const auto done = this->key("completed");
  ASSERT_TRUE(this->commit(done, this->acquired(done).fence, "r").ok());
  const auto failed = this->key("failed");
  ASSERT_TRUE(this->commit(failed, this->acquired(failed).fence, "why", ClaimStatus::failed).ok());
  for (const auto& k : {done, failed}) {
    Result<Claim> replay = this->claim(k);
    ASSERT_TRUE(replay.has_value());
    EXPECT_NE(replay->status, ClaimStatus::acquired) << k;
    EXPECT_GT(replay->expires_in.count(), 0) << k;
    EXPECT_LE(replay->expires_in, this->kTtl) << k;
  }
}

// A second commit with another result under the same fence is not a repeat: lease_lost.
TYPED_TEST_P(RecordStoreConformance, CommitTwiceIsLeaseLostTheSecondTime) {
  const auto k = this->key();
  const Claim held = this->acquired(k);
  ASSERT_TRUE(this->commit(k, held.fence, "one").ok());
  EXPECT_EQ(this->commit(k, held.fence, "two").error(), errc::lease_lost);
  EXPECT_EQ(this->claim(k)->result, "one");
}

// A commit retried under its fence after it landed (its answer was lost on the way) finds its own
// completion and succeeds, changing nothing; another state, other bytes or another fence do not.
// A store whose holder keeps the key until it finishes (a transaction) knows a commit's answer was
// lost only from the failure it met: it looks the record up for those (the SQL tests cut the
// connection at COMMIT), and a repeat after an answered commit is lease_lost.
TYPED_TEST_P(RecordStoreConformance, CommitRepeatedUnderItsFenceAfterItLandedSucceeds) {
  constexpr bool kAnsweredRepeatSucceeds = !HoldsUntilFinished<TypeParam>;
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
  ASSERT_TRUE(replay.has_value());
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

TYPED_TEST_P(RecordStoreConformance, CommitOfAnUnknownKeyIsLeaseLost) {
  EXPECT_EQ(this->commit(this->key("never-claimed"), 1, "x").error(), errc::lease_lost);
}

TYPED_TEST_P(RecordStoreConformance, KeysAreOpaqueBytes) {
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
    ASSERT_TRUE(replay.has_value());
    EXPECT_EQ(replay->status, ClaimStatus::completed);
    EXPECT_EQ(replay->result, k);
  }
}

TYPED_TEST_P(RecordStoreConformance, GuardRunsEachKeyOnceUnderRacingThreads) {
  constexpr int kThreads = 8;
  constexpr int kKeys = 16;
  constexpr int kRounds = 4;
  IdempotencyGuard guard{this->store(),
                         Options{.scope = this->key("race"),
                                 .in_progress = Wait{.timeout = std::chrono::seconds{20}}}};
  std::vector<std::atomic<int>> runs(kKeys);
  std::mutex seen_mutex;
  std::map<int, std::vector<std::string>> seen;
  std::atomic<int> failures{0};

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        for (int i = 0; i < kKeys; ++i) {
          const int k = (i + t) % kKeys;  // threads meet on every key, in different orders
          auto out = guard.execute("key-" + std::to_string(k), [&, k, t] {
            runs[k].fetch_add(1);
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            return "value of " + std::to_string(k) + " from " + std::to_string(t);
          });
          if (!out) {
            failures.fetch_add(1);
            continue;
          }
          std::lock_guard lock(seen_mutex);
          seen[k].push_back(out.value());
        }
      }
    });
  }
  for (auto& th : threads) th.join();

  EXPECT_EQ(failures.load(), 0);
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_EQ(runs[k].load(), 1) << "key " << k;
    ASSERT_EQ(seen[k].size(), static_cast<std::size_t>(kThreads * kRounds));
    for (const std::string& v : seen[k]) EXPECT_EQ(v, seen[k].front()) << "key " << k;
  }
}

REGISTER_TYPED_TEST_SUITE_P(
    RecordStoreConformance, FirstClaimAcquiresWithAPositiveFence,
    ClaimWhileHeldIsInProgressWithTheLeaseLeft, CommittedResultReplaysByteForByte,
    EmptyResultIsAStoredResult, AnotherFingerprintIsAMismatchWhileHeldAndAfter,
    AbortReleasesAndTheNextClaimHasALargerFence, StaleFenceAfterAbortAndReclaimIsLeaseLost,
    ExpiredLeaseIsTakenOverAndTheOldHolderFencedOff, ExpiredLeaseWithAnotherPayloadIsStillAMismatch,
    CommitAfterOwnLeaseRanOutButNoTakeoverSucceeds, ExtendKeepsTheLeaseAlive,
    CompletedRecordExpiresAfterItsTtl, FailedRecordReplaysItsBytes,
    ReplaysSayHowLongTheRecordStillLives, CommitTwiceIsLeaseLostTheSecondTime,
    CommitRepeatedUnderItsFenceAfterItLandedSucceeds, CommitOfAnUnknownKeyIsLeaseLost, KeysAreOpaqueBytes, GuardRunsEachKeyOnceUnderRacingThreads);

}  // namespace idem::testing
