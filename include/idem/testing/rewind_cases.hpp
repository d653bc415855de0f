#pragma once
// For a store with rewind() (idem::RewindableStore): a rewind undoes what the handler wrote in
// the store's transaction but keeps the key held, so that the holder can still commit its
// failure, or abort.

#include <gtest/gtest.h>

#include "idem/store.hpp"
#include "idem/testing/detail/conformance_case.hpp"

namespace idem::testing::conformance {

template <class S>
Result<Claim> claim_rewindable(S& store, std::string_view key, std::chrono::milliseconds lease,
                               std::chrono::milliseconds retention) {
  return store.claim(ClaimRequest{.key = key,
                                  .fingerprint = {1, 2},
                                  .lease = lease,
                                  .retention = retention,
                                  .rewindable = true});
}

IDEM_TESTING_CASE(RewindKeepsTheKeyHeldAndAFailureCommitsAfterIt) {
  const auto k = this->key();
  Result<Claim> held = claim_rewindable(this->store(), k, this->kLease, this->kTtl);
  ASSERT_TRUE(held.has_value()) << held.failure().describe();
  ASSERT_EQ(held->status, ClaimStatus::acquired);
  const Status rewound = this->store().rewind(Ticket{k, held->fence});
  ASSERT_TRUE(rewound.ok()) << rewound.failure().describe();

  Result<Claim> other = this->claim(k);
  ASSERT_TRUE(other.has_value()) << other.failure().describe();
  EXPECT_EQ(other->status, ClaimStatus::in_progress);

  ASSERT_TRUE(this->commit(k, held->fence, "why", ClaimStatus::failed).ok());
  Result<Claim> replay = this->claim(k);
  ASSERT_TRUE(replay.has_value()) << replay.failure().describe();
  EXPECT_EQ(replay->status, ClaimStatus::failed);
  EXPECT_EQ(replay->result, "why");
}

IDEM_TESTING_CASE(AbortAfterRewindReleasesTheKey) {
  const auto k = this->key();
  Result<Claim> held = claim_rewindable(this->store(), k, this->kLease, this->kTtl);
  ASSERT_TRUE(held.has_value()) << held.failure().describe();
  ASSERT_EQ(held->status, ClaimStatus::acquired);
  ASSERT_TRUE(this->store().rewind(Ticket{k, held->fence}).ok());
  ASSERT_TRUE(this->store().abort(Ticket{k, held->fence}).ok());
  const Claim next = this->acquired(k);
  EXPECT_GT(next.fence, held->fence);
}

}  // namespace idem::testing::conformance
