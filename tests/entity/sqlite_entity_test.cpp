// VersionStore and StateMachineStore on SQLite: the typed entity suite, processes, injection.

#include "entity/sql_entity_cases.hpp"

namespace idem::testing {

INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, EntityStoreTest, SqliteTarget);
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, EntityProcessTest, SqliteTarget);

TEST(SqliteEntityStoreTest, TableAndColumnNamesThatAreNotIdentifiersAreRefused) {
  expect_injection_refused<SqliteBackend>(SqliteStoreOptions{.path = "/tmp/unused.db"});
}

}  // namespace idem::testing

namespace idem::testing {

using SqliteEntityStore = EntityStoreTest<SqliteTarget>;

// An op-log row that idem did not write (a state that is not a number or not one of idem's, a
// fence that is not an integer) is record_corrupt: not store_unavailable, not a wait on an
// operation that never finishes, and never a replay.
TEST_F(SqliteEntityStore, CorruptOpLogRowsAreRecordCorruptNotAReplayOrAnOutage) {
  auto store = orders(Options{.scope = "orders"});
  target_.create_order(*store, "o-c");
  int runs = 0;
  auto pay = [&] { return store->execute(EventKey{"o-c", "PAY"}, [&] { return ++runs; }); };
  ASSERT_TRUE(pay().executed());
  const std::string ops = target_.names().prefix + "entity_ops";
  for (const char* damage : {"state = 'x'", "state = 9", "state = 1, fence = 'abc'",
                             "state = 1, fp_hi = 1.5", "state = 1, fence = 0"}) {
    target_.exec("UPDATE " + ops + " SET state = 1, fence = 1, " + damage);
    auto out = pay();
    ASSERT_FALSE(out.has_value()) << damage;
    EXPECT_EQ(out.error(), errc::record_corrupt) << damage << ": " << out.message();
  }
  EXPECT_EQ(runs, 1);
}

}  // namespace idem::testing
