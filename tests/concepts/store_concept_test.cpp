// Which types are idem::Store: the memory store and any type with the four operations of the
// right shapes; near misses are not.

#include <gtest/gtest.h>

#include "idem/memory/store.hpp"
#include "idem/store.hpp"
#include "support/flaky_store.hpp"

namespace idem {
namespace {

struct Complete {
  Result<Claim> claim(const ClaimRequest&) { return Claim{}; }
  Status commit(const Ticket&, const Completion&) { return {}; }
  Status abort(const Ticket&) { return {}; }
  Status extend(const Ticket&, std::chrono::milliseconds) { return {}; }
};

struct MissingExtend {
  Result<Claim> claim(const ClaimRequest&) { return Claim{}; }
  Status commit(const Ticket&, const Completion&) { return {}; }
  Status abort(const Ticket&) { return {}; }
};

struct ClaimReturnsBareClaim {
  Claim claim(const ClaimRequest&) { return {}; }
  Status commit(const Ticket&, const Completion&) { return {}; }
  Status abort(const Ticket&) { return {}; }
  Status extend(const Ticket&, std::chrono::milliseconds) { return {}; }
};

struct CommitReturnsBool {
  Result<Claim> claim(const ClaimRequest&) { return Claim{}; }
  bool commit(const Ticket&, const Completion&) { return true; }
  Status abort(const Ticket&) { return {}; }
  Status extend(const Ticket&, std::chrono::milliseconds) { return {}; }
};

struct ConstOnlyClaim {
  Result<Claim> claim(const ClaimRequest&) && { return Claim{}; }  // not callable on an lvalue
  Status commit(const Ticket&, const Completion&) { return {}; }
  Status abort(const Ticket&) { return {}; }
  Status extend(const Ticket&, std::chrono::milliseconds) { return {}; }
};

TEST(StoreConceptTest, StoresSatisfyTheConcept) {
  static_assert(Store<MemoryStore>);
  static_assert(Store<testing::FlakyStore>);
  static_assert(Store<Complete>);
  EXPECT_TRUE(Store<Complete>);
}

TEST(StoreConceptTest, NearMissesDoNot) {
  static_assert(!Store<MissingExtend>);
  static_assert(!Store<ClaimReturnsBareClaim>);
  static_assert(!Store<CommitReturnsBool>);
  static_assert(!Store<ConstOnlyClaim>);
  static_assert(!Store<int>);
  EXPECT_FALSE(Store<MissingExtend>);
}

}  // namespace
}  // namespace idem
