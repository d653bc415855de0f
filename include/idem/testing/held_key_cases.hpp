#pragma once
// in_progress means a live holder has the key: a claim of a key nobody holds acquires it, or,
// when the store cannot take it in time (a SQLite file whose one write lock another key's
// handler holds), fails with store_unavailable; never in_progress, whatever holds other keys.

#include <gtest/gtest.h>

#include "idem/store.hpp"
#include "idem/testing/detail/conformance_case.hpp"

namespace idem::testing::conformance {

IDEM_TESTING_CASE(AKeyNobodyHoldsIsNeverInProgress) {
  const auto held_key = this->key("held");
  const auto free_key = this->key("free");
  const Claim held = this->acquired(held_key);
  Result<Claim> other = this->claim(free_key);
  if (other.has_value()) {
    EXPECT_EQ(other->status, ClaimStatus::acquired)
        << "a key nobody holds answered as if it were held";
    ASSERT_TRUE(this->commit(free_key, other->fence, "free").ok());
  } else {
    EXPECT_EQ(other.error(), errc::store_unavailable)
        << "a key nobody holds: " << other.failure().describe();
  }
  // The held key itself is in progress.
  Result<Claim> duplicate = this->claim(held_key);
  if (duplicate.has_value()) {
    EXPECT_EQ(duplicate->status, ClaimStatus::in_progress);
  } else {
    EXPECT_EQ(duplicate.error(), errc::in_progress) << duplicate.failure().describe();
  }
  ASSERT_TRUE(this->commit(held_key, held.fence, "held").ok());
}

}  // namespace idem::testing::conformance
