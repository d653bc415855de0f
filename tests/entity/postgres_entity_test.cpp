// VersionStore and StateMachineStore on PostgreSQL: the typed entity suite, processes,
// injection. Needs IDEM_TEST_PG_URI (skips without it; fails when it is set but unreachable).

#include "entity/sql_entity_cases.hpp"
#include "sql/pg_relay.hpp"

namespace idem::testing {

// The message that carries an operation's COMMIT (a simple query, after its last statement).
bool commit_message(std::string_view chunk) {
  return !chunk.empty() && chunk[0] == 'Q' && chunk.find("COMMIT") != std::string_view::npos;
}

INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, EntityStoreTest, PostgresTarget);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, EntityProcessTest, PostgresTarget);

TEST(PostgresEntityStoreTest, TableAndColumnNamesThatAreNotIdentifiersAreRefused) {
  // Connections are lazy: the names are refused before any server is asked.
  expect_injection_refused<PostgresBackend>(
      PostgresStoreOptions{.connection = {.uri = "postgresql://nobody@127.0.0.1:1/none"}});
}

// An account store whose connections go through a fault relay; debit() runs the handler, which
// counts its runs and writes an effect in the operation's transaction.
class RelayedAccounts : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!target_.set_up(why)) GTEST_SKIP() << why;
    through_ = pg_relay(target_.location());
    if (!through_) GTEST_SKIP() << "the relay speaks IPv4; the test server is not on it";
    PostgresStoreOptions connection = target_.connection();
    connection.connection.uri = through_->uri;
    accounts_ =
        std::make_unique<VersionStore<PostgresBackend>>(VersionStoreOptions<PostgresBackend>{
            .backend = connection,
            .table = EntityTable{target_.names().accounts(), "id", "version"},
            .guard = Options{.scope = "accounts"}});
    target_.create_account(*accounts_, "a-1", 100);
  }
  VersionOutcome<int> debit(const std::function<void()>& after_handler = {}) {
    return accounts_->execute(VersionKey{"a-1", 0, "debit-1"}, [&](Context& ctx) {
      ++runs_;
      target_.add_effect(ctx, "debit-1");
      if (after_handler) after_handler();
      return 40 + runs_;
    });
  }
  FaultRelay& relay() { return *through_->relay; }

  // `out`, the first debit, committed although its commit's reply was lost: it answers success,
  // a repeat replays it, and the handler ran and wrote once.
  void expect_committed_once(const VersionOutcome<int>& out) {
    ASSERT_TRUE(out.has_value()) << out.message();
    EXPECT_EQ(out.value(), 41);
    EXPECT_TRUE(out.recorded()) << out.commit_failure().describe();
    auto again = debit();
    ASSERT_TRUE(again.has_value()) << again.message();
    EXPECT_TRUE(again.replayed());
    EXPECT_EQ(again.value(), 41);
    EXPECT_EQ(runs_, 1);
    EXPECT_EQ(target_.effects("debit-1"), 1);
  }

  PostgresTarget target_;
  std::optional<PgRelay> through_;
  std::unique_ptr<VersionStore<PostgresBackend>> accounts_;
  int runs_ = 0;
};

// The COMMIT of an operation reaches the server, which commits it, and its reply is lost: the
// store reads the op log on another connection, finds its own commit there, and answers
// success, not outcome_unknown (nor a lease_lost no takeover caused). A repeat replays, and the
// handler's write committed once.
TEST_F(RelayedAccounts, ACommitWhoseReplyIsLostFindsItselfInTheOpLog) {
  auto out = debit([&] { relay().lose_reply_after(commit_message); });
  ASSERT_TRUE(relay().one_shot_fired());
  expect_committed_once(out);
  // stats(): the store's name and its pool, which dropped the connection the relay cut.
  const StoreStats stats = accounts_->stats();
  EXPECT_EQ(stats.store, "postgres");
  ASSERT_TRUE(stats.pool);
  EXPECT_GE(stats.pool->opened, 2u);
  EXPECT_GE(stats.pool->discarded, 1u);
}

// The COMMIT is still on its way when the client's connection breaks: it reaches the server
// 300 ms later. The op log read at once would not hold the commit yet; the store first waits
// for the server process to end the transaction, then finds its commit and answers success, not
// "rolled back".
TEST_F(RelayedAccounts, ACommitStillOnItsWayIsWaitedForBeforeTheOpLogIsRead) {
  auto out =
      debit([&] { relay().lose_reply_after_late(commit_message, std::chrono::milliseconds{300}); });
  ASSERT_TRUE(relay().one_shot_fired());
  expect_committed_once(out);
  EXPECT_EQ(accounts_->version("a-1").value(), 1u);
}

// The COMMIT is cut on its way: the server rolls the transaction back. The store reads the op
// log, finds no commit of its own, and says the transaction did not commit (store_unavailable),
// not outcome_unknown; a repeat runs the handler once more, and its write commits once.
TEST_F(RelayedAccounts, ACommitCutOnItsWayIsFoundMissingFromTheOpLog) {
  auto out = debit([&] { relay().cut_before(commit_message); });
  ASSERT_TRUE(relay().one_shot_fired());
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_EQ(out.value(), 41);
  EXPECT_FALSE(out.recorded());
  EXPECT_EQ(out.commit_error(), errc::store_unavailable) << out.commit_failure().describe();
  auto again = debit();
  ASSERT_TRUE(again.has_value()) << again.message();
  EXPECT_TRUE(again.executed());
  EXPECT_EQ(again.value(), 42);
  EXPECT_EQ(target_.effects("debit-1"), 1);
  EXPECT_EQ(accounts_->version("a-1").value(), 1u);
}

}  // namespace idem::testing
