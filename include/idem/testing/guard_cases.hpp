#pragma once
// The guard on top of the store, as far as its store calls go; what callers see is checked on
// every face of the store (face_cases.hpp). Every record store passes all of them.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "idem/idem.hpp"
#include "idem/testing/detail/conformance_case.hpp"

namespace idem::testing::conformance {

/// The store S with its calls counted, for the round-trip case below.
template <class S>
class CountedCalls {
 public:
  explicit CountedCalls(S& store) : store_(store) {}
  Result<Claim> claim(const ClaimRequest& r) {
    ++claims;
    return store_.claim(r);
  }
  Status commit(const Ticket& t, const Completion& c) {
    ++commits;
    return store_.commit(t, c);
  }
  Status abort(const Ticket& t) {
    ++aborts;
    return store_.abort(t);
  }
  Status extend(const Ticket& t, std::chrono::milliseconds lease) {
    return store_.extend(t, lease);
  }
  std::atomic<int> claims{0};
  std::atomic<int> commits{0};
  std::atomic<int> aborts{0};

 private:
  S& store_;
};

// docs/design.md §3, §14: a fresh key is one claim and one commit, a replay and a refusal one
// claim each: the floor the guard adds nothing to.
IDEM_TESTING_CASE(AFreshKeyIsAClaimAndACommitAndAReplayOneClaim) {
  CountedCalls<S> counted(this->store());
  IdempotencyGuard guard{counted, Options{.scope = this->key("calls")}};
  ASSERT_TRUE(guard.execute("k", "p", [] { return 1; }).has_value());
  EXPECT_EQ(counted.claims.load(), 1);
  EXPECT_EQ(counted.commits.load(), 1);
  EXPECT_TRUE(guard.execute("k", "p", [] { return 2; }).replayed());
  EXPECT_EQ(guard.execute("k", "other", [] { return 3; }).error(), errc::payload_mismatch);
  EXPECT_EQ(counted.claims.load(), 3);
  EXPECT_EQ(counted.commits.load(), 1);
  EXPECT_EQ(counted.aborts.load(), 0);
}

}  // namespace idem::testing::conformance
