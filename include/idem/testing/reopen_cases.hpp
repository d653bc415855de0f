#pragma once
// For a store another store can open over the same records (StoreTraits<S>::reopen): records and
// fences outlive the store object that wrote them, a holder whose store closed without finishing
// (a crashed process) is taken over, and holders in two stores fence each other off.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "idem/store.hpp"
#include "idem/testing/detail/conformance_case.hpp"

namespace idem::testing::conformance {

// Claims `key` until the answer is no longer in_progress, for at most `bound`: a backend may
// notice a closed session (and roll its transaction back) a moment after the store is gone.
template <class S>
Result<Claim> claim_once_free(S& store, std::string_view key, std::chrono::milliseconds lease,
                              std::chrono::milliseconds retention,
                              std::chrono::milliseconds bound = std::chrono::seconds{10}) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  for (;;) {
    Result<Claim> c = store.claim(
        ClaimRequest{.key = key, .fingerprint = {1, 2}, .lease = lease, .retention = retention});
    if (!c || c->status != ClaimStatus::in_progress ||
        std::chrono::steady_clock::now() >= deadline) {
      return c;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
}

// Another store's claim of a key this case's store holds: in_progress. A store whose holder keeps
// its key until it finishes may instead fail the claim once it stopped waiting for the holder:
// errc::in_progress where the wait was on the key's own lock (PostgreSQL), store_unavailable
// where it was on a lock of more than the key, which does not say which key its holder has
// (SQLite: the whole file's write lock).
template <class S>
::testing::AssertionResult held_elsewhere(const Result<Claim>& c) {
  if (c && c->status == ClaimStatus::in_progress) return ::testing::AssertionSuccess();
  if constexpr (HoldsUntilFinished<S>) {
    if (!c && (c.error() == errc::in_progress || c.error() == errc::store_unavailable)) {
      return ::testing::AssertionSuccess();
    }
  }
  if (c) {
    return ::testing::AssertionFailure()
           << "the claim answered status " << static_cast<int>(c->status) << ", not in_progress";
  }
  return ::testing::AssertionFailure() << "the claim failed: " << c.failure().describe();
}

IDEM_TESTING_CASE(RecordsOutliveTheStoreThatWroteThem) {
  const auto done = this->key("done");
  ASSERT_TRUE(this->commit(done, this->acquired(done).fence, "r").ok());
  std::unique_ptr<S> other = this->reopen();
  ASSERT_TRUE(other);
  Result<Claim> replay = this->claim_in(*other, done);
  ASSERT_TRUE(replay.has_value()) << replay.failure().describe();
  EXPECT_EQ(replay->status, ClaimStatus::completed);
  EXPECT_EQ(replay->result, "r");
  EXPECT_EQ(this->claim_in(*other, done, {9, 9})->status, ClaimStatus::mismatch);

  const auto held_key = this->key("held");
  const Claim held = this->acquired(held_key);
  EXPECT_TRUE(held_elsewhere<S>(this->claim_in(*other, held_key)));
  ASSERT_TRUE(this->commit(held_key, held.fence, "late").ok());

  this->close_store();
  for (const auto& [k, bytes] : {std::pair{done, "r"}, std::pair{held_key, "late"}}) {
    Result<Claim> again = this->claim_in(*other, k);
    ASSERT_TRUE(again.has_value()) << again.failure().describe();
    EXPECT_EQ(again->status, ClaimStatus::completed) << k;
    EXPECT_EQ(again->result, bytes) << k;
  }
}

// The holder's store closes without finishing (its process crashed). A lease-mode record stays
// in progress until its lease passes, then another store takes it over; a holder that keeps its
// key until it finishes loses it with its session. Either way the next fence is larger.
IDEM_TESTING_CASE(AHolderWhoseStoreClosedIsTakenOverUnderALargerFence) {
  const auto k = this->key();
  const Claim held = this->acquired(k);
  std::unique_ptr<S> other = this->reopen();
  ASSERT_TRUE(other);
  this->close_store();

  std::optional<Result<Claim>> next;
  if constexpr (HoldsUntilFinished<S>) {
    next.emplace(claim_once_free(*other, k, this->kLease, this->kTtl));
  } else {
    Result<Claim> busy = this->claim_in(*other, k);
    ASSERT_TRUE(busy.has_value()) << busy.failure().describe();
    EXPECT_EQ(busy->status, ClaimStatus::in_progress);
    StoreTraits<S>::advance(*other, this->kLease + this->kLease / 2);
    next.emplace(this->claim_in(*other, k));
  }
  ASSERT_TRUE(next->has_value()) << next->failure().describe();
  ASSERT_EQ((*next)->status, ClaimStatus::acquired);
  EXPECT_EQ((*next)->took_over, !HoldsUntilFinished<S>);
  EXPECT_GT((*next)->fence, held.fence);

  ASSERT_TRUE(this->commit_in(*other, k, (*next)->fence, "new").ok());
  EXPECT_EQ(this->claim_in(*other, k)->result, "new");
}

// A holder in one store and the holder that followed it in another: the first one's late
// commit, abort and extend answer lease_lost and change nothing.
IDEM_TESTING_CASE(HoldersInTwoStoresFenceEachOtherOff) {
  const auto k = this->key();
  const Claim first = this->acquired(k);
  std::unique_ptr<S> other = this->reopen();
  ASSERT_TRUE(other);
  EXPECT_TRUE(held_elsewhere<S>(this->claim_in(*other, k)));

  if constexpr (HoldsUntilFinished<S>) {
    ASSERT_TRUE(this->store().abort(Ticket{k, first.fence}).ok());  // no takeover of a live holder
  } else {
    this->advance(this->kLease + this->kLease / 2);
  }
  Result<Claim> second = this->claim_in(*other, k);
  ASSERT_TRUE(second.has_value()) << second.failure().describe();
  ASSERT_EQ(second->status, ClaimStatus::acquired);
  EXPECT_GT(second->fence, first.fence);

  const Ticket stale{k, first.fence};
  EXPECT_EQ(this->commit(k, first.fence, "late").error(), errc::lease_lost);
  EXPECT_EQ(this->store().extend(stale, this->kLease).error(), errc::lease_lost);
  EXPECT_EQ(this->store().abort(stale).error(), errc::lease_lost);

  ASSERT_TRUE(this->commit_in(*other, k, second->fence, "new").ok());
  Result<Claim> replay = this->claim(k);
  ASSERT_TRUE(replay.has_value()) << replay.failure().describe();
  EXPECT_EQ(replay->status, ClaimStatus::completed);
  EXPECT_EQ(replay->result, "new");
}

}  // namespace idem::testing::conformance
