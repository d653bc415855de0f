// VersionStore and StateMachineStore on PostgreSQL: the typed entity suite, processes,
// injection. Needs IDEM_TEST_PG_URI (skips without it; fails when it is set but unreachable).

#include "entity/sql_entity_cases.hpp"
#include "sql/pg_relay.hpp"

namespace idem::testing {

INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, EntityStoreTest, PostgresTarget);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, EntityProcessTest, PostgresTarget);

TEST(PostgresEntityStoreTest, TableAndColumnNamesThatAreNotIdentifiersAreRefused) {
  // Connections are lazy: the names are refused before any server is asked.
  expect_injection_refused<PostgresBackend>(
      PostgresStoreOptions{.uri = "postgresql://nobody@127.0.0.1:1/none"});
}

// The COMMIT of an operation reaches the server, which commits it, and its reply is lost: the
// caller gets its value with outcome_unknown, and the guard's retries of the commit hear the same
// (nobody took the operation over: never lease_lost). It landed: a repeat replays, and the
// handler's write committed once.
TEST(PostgresEntityStoreTest, ACommitWhoseReplyIsLostIsOutcomeUnknownNotALeaseLost) {
  PostgresTarget target;
  std::string why;
  if (!target.set_up(why)) GTEST_SKIP() << why;
  auto through = pg_relay(target.location());
  if (!through) GTEST_SKIP() << "the relay speaks IPv4; the test server is not on it";
  PostgresStoreOptions connection = target.connection();
  connection.uri = through->uri;
  VersionStore<PostgresBackend> accounts(VersionStoreOptions<PostgresBackend>{
      .backend = connection,
      .table = EntityTable{target.names().accounts(), "id", "version"},
      .guard = Options{.scope = "accounts"}});
  target.create_account(accounts, "a-1", 100);
  int runs = 0;
  auto debit = [&](std::function<void()> after_handler = {}) {
    return accounts.execute(VersionKey{"a-1", 0, "debit-1"}, [&](Context& ctx) {
      ++runs;
      target.add_effect(ctx, "debit-1");
      if (after_handler) after_handler();
      return 40 + runs;
    });
  };
  auto out = debit([&] {
    through->relay->lose_reply_after([](std::string_view chunk) {
      return !chunk.empty() && chunk[0] == 'Q' && chunk.find("COMMIT") != std::string_view::npos;
    });
  });
  ASSERT_TRUE(through->relay->one_shot_fired());
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_TRUE(out) << "a commit in doubt is no takeover: " << out.message();
  EXPECT_EQ(out.value(), 41);
  EXPECT_FALSE(out.recorded());
  EXPECT_EQ(out.commit_error(), errc::outcome_unknown) << out.commit_failure().describe();
  auto again = debit();
  ASSERT_TRUE(again.has_value()) << again.message();
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.value(), 41);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(target.effects("debit-1"), 1);
}

}  // namespace idem::testing
