// SqliteStore as a WakingStore within one process: a commit, abort or takeover through any store
// of the process on the same file wakes the waiters of that file; guards' waiting duplicates cost
// claim + await_change + claim.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "idem/group_commit_store.hpp"
#include "idem/idem.hpp"
#include "idem/sqlite/store.hpp"
#include "support/unique_name.hpp"
#include "wake/wake_cases.hpp"

namespace idem::testing {
namespace {

class TempDb {
 public:
  TempDb() : dir_(std::filesystem::temp_directory_path() / unique_name("idem_wake_test")) {
    std::filesystem::create_directories(dir_);
  }
  ~TempDb() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  TempDb(const TempDb&) = delete;
  TempDb& operator=(const TempDb&) = delete;
  std::string path() const { return (dir_ / "idem.db").string(); }

 private:
  std::filesystem::path dir_;
};

static_assert(WakingStore<SqliteStore>);
static_assert(WakingStore<CachedStore<SqliteStore&>>);
static_assert(WakingStore<GroupCommitStore<SqliteStore>>);

class SqliteWakeTest : public ::testing::Test {
 protected:
  TempDb db_;
  SqliteStore holder_{SqliteStoreOptions{.path = db_.path()}};
  SqliteStore waiting_{SqliteStoreOptions{.path = db_.path()}};  // another store, same file
};

TEST_F(SqliteWakeTest, AHoldThatEndedBetweenTheClaimAndTheWaitIsNotMissed) {
  Result<Claim> held = holder_.claim(claim_of("between"));
  ASSERT_TRUE(held);
  Result<Claim> busy = waiting_.claim(claim_of("between"));
  ASSERT_TRUE(busy);
  ASSERT_EQ(busy->status, ClaimStatus::in_progress);
  ASSERT_TRUE(holder_.commit(Ticket{"between", held->fence},
                             Completion{ClaimStatus::completed, "done", kNoTimeout}));
  waiting_.await_change(Ticket{"between", busy->fence}, kNoTimeout);  // returns: no wake needed
  Result<Claim> replay = waiting_.claim(claim_of("between"));
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay->status, ClaimStatus::completed);
}

TEST_F(SqliteWakeTest, DuplicatesCostThreeStoreCalls) {
  expect_duplicates_cost_three_calls(waiting_, 31);
}

TEST_F(SqliteWakeTest, DuplicatesOfAGroupCommitStoreCostThreeStoreCalls) {
  GroupCommitStore<SqliteStore> grouped(waiting_);
  expect_duplicates_cost_three_calls(grouped, 8);
}

TEST_F(SqliteWakeTest, SpuriousWakeClaimsAgainAndReplays) {
  expect_spurious_wake_claims_again(waiting_);
}

TEST_F(SqliteWakeTest, AStoreThatHidesItsWakeIsPolled) { expect_hidden_wake_polls(waiting_); }

TEST_F(SqliteWakeTest, TheWaitTimeoutHoldsWhenNobodyCommits) {
  expect_timeout_holds_without_commit(waiting_);
}

}  // namespace
}  // namespace idem::testing
