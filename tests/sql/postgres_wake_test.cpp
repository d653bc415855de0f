// PostgresStore as a WakingStore: a waiter counted in the record is woken (NOTIFY, heard by the
// store's listener) by the holder's commit or abort, a takeover, or an admin release or forget,
// from another store (as another process would); a wait after the end returns at once; a stalled
// listener still ends the wait at its bound; a transactional holder wakes its waiters when the
// user's transaction commits, not before; 31 duplicates cost three store calls each; an earlier
// schema (version 2, without the waiters column) is upgraded.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "idem/admin.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/idem.hpp"
#include "idem/postgres/admin.hpp"
#include "idem/postgres/store.hpp"
#include "sql/pg_relay.hpp"
#include "support/bounded_calls.hpp"
#include "support/pg_env.hpp"
#include "support/unique_name.hpp"
#include "wake/wake_cases.hpp"

namespace idem::testing {
namespace {

using Clock = std::chrono::steady_clock;

static_assert(WakingStore<PostgresStore>);
static_assert(WakingStore<CachedStore<PostgresStore&>>);

std::string tables() { return unique_name("pgwake") + "_"; }

PostgresStoreOptions options_of(const std::string& uri, const std::string& prefix,
                                SqlMode mode = SqlMode::lease) {
  return PostgresStoreOptions{.connection = {.uri = uri, .table_prefix = prefix}, .mode = mode};
}

// One statement on a connection of its own; the first cell of the first row ("" when none).
std::string sql_cell(const std::string& sql) {
  pqxx::connection c(*pg_uri());
  pqxx::nontransaction w(c);
  const pqxx::result r = w.exec(sql);
  if (r.empty() || r[0][0].is_null()) return "";
  return r[0][0].c_str();
}

class PostgresWakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!pg_uri()) GTEST_SKIP() << kNoPgMessage;
    holder_ = std::make_unique<PostgresStore>(options_of(*pg_uri(), prefix_));
    waiting_ = std::make_unique<PostgresStore>(options_of(*pg_uri(), prefix_));
    ASSERT_TRUE(holder_->ensure_schema().ok());
  }

  // The waiters the record of `key` counts now (an ASCII key, as these tests use).
  int counted(const std::string& key) const {
    const std::string n = sql_cell("SELECT waiters FROM " + prefix_ +
                                   "records WHERE key = convert_to('" + key + "', 'UTF8')");
    return n.empty() ? 0 : std::stoi(n);
  }
  void until_counted(const std::string& key, int n) const {
    while (counted(key) < n) std::this_thread::sleep_for(1ms);
  }

  const std::string prefix_ = tables();
  std::unique_ptr<PostgresStore> holder_;
  std::unique_ptr<PostgresStore> waiting_;  // another store on the same tables
};

TEST_F(PostgresWakeTest, ACommitOfAnotherStoreWakesTheWaiter) {
  expect_commit_wakes(*holder_, *waiting_);
  EXPECT_EQ(counted("wake-commit"), 0);  // the end cleared the count
}

TEST_F(PostgresWakeTest, AWaitAfterTheEndReturnsAtOnceAndIsNotCounted) {
  Result<Claim> held = holder_->claim(claim_of("late"));
  ASSERT_TRUE(held);
  const Ticket ticket{"late", held->fence};
  ASSERT_TRUE(holder_->commit(ticket, Completion{ClaimStatus::completed, "r", kNoTimeout}));
  waiting_->await_change(ticket, kNoTimeout);  // returns: the hold is over
  EXPECT_EQ(counted("late"), 0);
  // A stale fence (an older hold of a record held again) is over too.
  Result<Claim> first = holder_->claim(claim_of("stale"));
  ASSERT_TRUE(first);
  ASSERT_TRUE(holder_->abort(Ticket{"stale", first->fence}));
  Result<Claim> second = holder_->claim(claim_of("stale"));
  ASSERT_TRUE(second);
  ASSERT_GT(second->fence, first->fence);
  waiting_->await_change(Ticket{"stale", first->fence}, kNoTimeout);
  EXPECT_EQ(counted("stale"), 0);
}

// A commit or abort of a record nobody waits for sends no NOTIFY (each takes a database-wide
// lock at commit); a waiter that gave up at its bound stays counted until the hold ends, and
// that end clears the count.
TEST_F(PostgresWakeTest, OnlyAnEndThatSomeoneWaitsForNotifies) {
  pqxx::connection listener(*pg_uri());
  pqxx::nontransaction(listener).exec("LISTEN \"" + prefix_ + "records_wake\"");
  int heard = 0;
  struct Count final : pqxx::notification_receiver {
    Count(pqxx::connection& c, const std::string& channel, int& n)
        : pqxx::notification_receiver(c, channel), count(&n) {}
    void operator()(const std::string&, int) override { ++*count; }
    int* count;
  } count(listener, prefix_ + "records_wake", heard);

  Result<Claim> quiet = holder_->claim(claim_of("quiet"));
  ASSERT_TRUE(quiet);
  ASSERT_TRUE(holder_->commit(Ticket{"quiet", quiet->fence},
                              Completion{ClaimStatus::completed, "r", kNoTimeout}));
  // Returns at once (the hold is over), once the waiting store's listener listens.
  waiting_->await_change(Ticket{"quiet", quiet->fence}, kNoTimeout);
  Result<Claim> waited = holder_->claim(claim_of("waited"));
  ASSERT_TRUE(waited);
  waiting_->await_change(Ticket{"waited", waited->fence}, 20ms);  // counted, then gone at 20 ms
  ASSERT_EQ(counted("waited"), 1);
  ASSERT_TRUE(holder_->commit(Ticket{"waited", waited->fence},
                              Completion{ClaimStatus::completed, "r", kNoTimeout}));
  EXPECT_EQ(counted("waited"), 0);
  // The NOTIFY of "waited" committed after "quiet"'s commit: once it is here, a NOTIFY of "quiet"
  // would be here too (a session hears them in commit order).
  for (int second = 0; heard < 1 && second < 60; ++second) listener.await_notification(1, 0);
  listener.get_notifs();
  EXPECT_EQ(heard, 1);
}

TEST_F(PostgresWakeTest, AnAdminReleaseAndForgetWakeTheWaiters) {
  auto admin = admin::postgres_admin(
      admin::PostgresAdminOptions{.connection = {.uri = *pg_uri(), .table_prefix = prefix_}});
  for (const bool forget : {false, true}) {
    SCOPED_TRACE(forget ? "forget" : "release");
    const std::string name = forget ? "forgotten" : "released";
    const std::string key(detail::EffectiveKey("s", {}, name).view());
    Result<Claim> held = holder_->claim(claim_of(key));
    ASSERT_TRUE(held);
    std::atomic<bool> returned{false};
    std::thread w([&] {
      waiting_->await_change(Ticket{key, held->fence}, kNoTimeout);
      returned = true;
    });
    while (sql_cell("SELECT count(*) FROM " + prefix_ + "records WHERE waiters > 0") != "1") {
      std::this_thread::sleep_for(1ms);
    }
    EXPECT_FALSE(returned.load());
    Result<admin::Change> changed =
        forget ? admin->forget("s", Key{name}) : admin->release("s", Key{name});
    ASSERT_TRUE(changed.has_value()) << changed.failure().describe();
    EXPECT_TRUE(changed->changed);
    w.join();  // only the wake ends it: the bound is minutes
    EXPECT_TRUE(returned.load());
  }
}

TEST_F(PostgresWakeTest, ThirtyOneDuplicatesCostThreeStoreCallsEach) {
  expect_duplicates_cost_three_calls(*waiting_, 31);
}

TEST_F(PostgresWakeTest, AHiddenWakePolls) { expect_hidden_wake_polls(*waiting_); }

TEST_F(PostgresWakeTest, WaitTimeoutStillEndsAWaitNothingWakes) {
  expect_timeout_holds_without_commit(*waiting_);
}

// A transactional holder's record is an uncommitted row: the waiter waits on the key's lock and
// returns when the user's transaction commits, not before (its handler has written by then).
TEST_F(PostgresWakeTest, ATransactionalHolderWakesTheWaiterAtTheUsersCommit) {
  const std::string prefix = tables();
  PostgresStore tx_holder(options_of(*pg_uri(), prefix, SqlMode::transactional));
  PostgresStore tx_waiting(options_of(*pg_uri(), prefix, SqlMode::transactional));
  Result<Claim> held = tx_holder.claim(claim_of("tx"));
  ASSERT_TRUE(held);
  ASSERT_EQ(held->status, ClaimStatus::acquired);
  std::atomic<bool> returned{false};
  std::thread w([&] {
    tx_waiting.await_change(Ticket{"tx", held->fence}, kNoTimeout);
    returned = true;
  });
  // The waiter's lock request queues behind the holder's transaction.
  while (sql_cell("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted") ==
         "0") {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_FALSE(returned.load());
  ASSERT_TRUE(tx_holder.commit(Ticket{"tx", held->fence},
                               Completion{ClaimStatus::completed, "done", kNoTimeout}));
  w.join();
  EXPECT_TRUE(returned.load());
  Result<Claim> replay = tx_waiting.claim(claim_of("tx"));
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay->status, ClaimStatus::completed);
}

// A NOTIFY sent from a user's transaction (a transactional claim taking over a lease holder that
// a waiter counted itself in) reaches the waiter when that transaction commits.
TEST_F(PostgresWakeTest, AWakeFromATransactionArrivesAtItsCommit) {
  PostgresStore tx_store(options_of(*pg_uri(), prefix_, SqlMode::transactional));
  Result<Claim> held = holder_->claim(claim_of("mixed", 100ms));
  ASSERT_TRUE(held);
  std::atomic<bool> returned{false};
  std::thread w([&] {
    waiting_->await_change(Ticket{"mixed", held->fence}, kNoTimeout);
    returned = true;
  });
  until_counted("mixed", 1);
  Result<Claim> taken = tx_store.claim(claim_of("mixed"));
  while (taken && taken->status == ClaimStatus::in_progress) {  // until the lease ends
    std::this_thread::sleep_for(20ms);
    taken = tx_store.claim(claim_of("mixed"));
  }
  ASSERT_TRUE(taken);
  ASSERT_EQ(taken->status, ClaimStatus::acquired);
  // The takeover's trigger ran in the open transaction; its NOTIFY waits for the COMMIT.
  EXPECT_FALSE(returned.load());
  ASSERT_TRUE(tx_store.commit(Ticket{"mixed", taken->fence},
                              Completion{ClaimStatus::completed, "done", kNoTimeout}));
  w.join();
  EXPECT_TRUE(returned.load());
}

// The listener's connection stops answering (a stalled relay): the wake is lost on the way and
// the wait ends at its bound, never hangs.
TEST(PostgresWakeStallTest, AStalledListenerStillBoundsTheWait) {
  if (!pg_uri()) GTEST_SKIP() << kNoPgMessage;
  std::optional<PgRelay> relay = pg_relay(*pg_uri());
  if (!relay) GTEST_SKIP() << "the server is not on IPv4: no relay";
  const std::string prefix = tables();
  PostgresStore holder(options_of(*pg_uri(), prefix));
  PostgresStore waiter(options_of(relay->uri, prefix));
  Result<Claim> c = holder.claim(claim_of("k"));
  ASSERT_TRUE(c);
  const Ticket held{"k", c->fence};
  Result<Claim> ended = holder.claim(claim_of("ended"));
  ASSERT_TRUE(ended);
  ASSERT_TRUE(holder.commit(Ticket{"ended", ended->fence},
                            Completion{ClaimStatus::completed, "r", kNoTimeout}));
  // Returns at once (that hold is over), once the waiter's listener listens through the relay.
  waiter.await_change(Ticket{"ended", ended->fence}, kNoTimeout);
  const milliseconds bound{300};
  std::atomic<long long> took{-1};
  std::thread w([&] {
    const auto start = Clock::now();
    waiter.await_change(held, bound);
    took = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  });
  while (sql_cell("SELECT waiters FROM " + prefix + "records WHERE fence = " +
                  std::to_string(held.fence) + " AND state = 0") != "1") {
    std::this_thread::sleep_for(1ms);
  }
  relay->relay->stall();  // counted and waiting: the commit's wake stays in the relay
  ASSERT_TRUE(holder.commit(held, Completion{ClaimStatus::completed, "r", kNoTimeout}));
  w.join();
  EXPECT_GE(took.load(), bound.count());
  relay->relay->cut();
  relay->relay->pass();
}

// A database of schema version 2 (every table, no waiters column or wake triggers) is upgraded
// to 3 by the store that opens it, which then wakes its waiters.
TEST(PostgresWakeSchemaTest, UpgradesAnEarlierSchemaVersion) {
  if (!pg_uri()) GTEST_SKIP() << kNoPgMessage;
  const std::string prefix = tables();
  {
    PostgresStore made(options_of(*pg_uri(), prefix));
    ASSERT_TRUE(made.ensure_schema().ok());
  }
  pqxx::connection c(*pg_uri());
  {
    pqxx::work w(c);
    w.exec("DROP TRIGGER " + prefix + "records_wake ON " + prefix + "records");
    w.exec("DROP TRIGGER " + prefix + "records_wake_gone ON " + prefix + "records");
    w.exec("DROP FUNCTION " + prefix + "records_wake()");
    w.exec("ALTER TABLE " + prefix + "records DROP COLUMN waiters");
    w.exec("UPDATE " + prefix + "schema SET version = 2");
    w.commit();
  }
  PostgresStore holder(options_of(*pg_uri(), prefix));
  PostgresStore waiting(options_of(*pg_uri(), prefix));
  expect_commit_wakes(holder, waiting);
  EXPECT_EQ(sql_cell("SELECT version FROM " + prefix + "schema"), "3");
  EXPECT_EQ(sql_cell("SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass('" + prefix +
                     "records') AND tgname IN ('" + prefix + "records_wake', '" + prefix +
                     "records_wake_gone')"),
            "2");
}

}  // namespace
}  // namespace idem::testing
