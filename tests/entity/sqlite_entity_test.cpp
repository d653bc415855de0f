// VersionStore and StateMachineStore on SQLite: the typed entity suite, processes, injection.

#include <future>

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

namespace idem::testing {

// SQLite has one write lock per file, and an operation's holder keeps it while its handler runs:
// another operation that cannot get it in time answers store_unavailable (nobody holds that
// operation), while a duplicate of the held one answers in_progress.
TEST_F(SqliteEntityStore, AnOperationNobodyHoldsIsNeverInProgressWhileAnotherHoldsTheFile) {
  StateMachineStoreOptions<SqliteBackend> options{
      .backend = SqliteStoreOptions{.path = target_.location(),
                                    .table_prefix = target_.names().prefix,
                                    .busy_timeout = milliseconds{300}},
      .table = EntityTable{target_.names().orders(), "id", "state"},
      .guard = Options{.scope = "orders", .in_progress = FailFast{}}};
  StateMachineStore<TransitionTable, SqliteBackend> store(order_machine(), std::move(options));
  target_.create_order(store, "o-held");
  target_.create_order(store, "o-free");
  std::promise<void> inside;
  std::promise<void> finish;
  std::shared_future<void> finish_future = finish.get_future().share();
  auto holder = std::async(std::launch::async, [&] {
    return store.execute(EventKey{"o-held", "PAY"}, [&] {
      inside.set_value();
      finish_future.wait_for(std::chrono::seconds{30});
      return 1;
    });
  });
  inside.get_future().wait();
  auto other = store.execute(EventKey{"o-free", "PAY"}, [] { return 2; });
  auto duplicate = store.execute(EventKey{"o-held", "PAY"}, [] { return 3; });
  finish.set_value();
  ASSERT_TRUE(holder.get().has_value());
  ASSERT_FALSE(other.has_value());
  EXPECT_EQ(other.error(), errc::store_unavailable) << other.message();
  ASSERT_FALSE(duplicate.has_value());
  EXPECT_EQ(duplicate.error(), errc::in_progress) << duplicate.message();
  auto later = store.execute(EventKey{"o-free", "PAY"}, [] { return 2; });
  ASSERT_TRUE(later.has_value()) << later.message();
  EXPECT_TRUE(later.executed());
}

}  // namespace idem::testing

namespace idem::testing {

// A store built while another store's handler holds the file's write lock (a worker started
// beside a running one): its ensure_schema() finds the op log with a read and answers at once,
// instead of waiting for the lock (and answering store_unavailable when the handler outlasts
// the wait). stats() names the store and its one connection.
TEST_F(SqliteEntityStore, EnsureSchemaBesideARunningHandlerWaitsForNobody) {
  auto first = orders();
  ASSERT_TRUE(first->ensure_schema().ok());
  target_.create_order(*first, "o-1");
  std::promise<void> inside;
  std::promise<void> finish;
  std::shared_future<void> finish_future = finish.get_future().share();
  auto holder = std::async(std::launch::async, [&] {
    return first->execute(EventKey{"o-1", "PAY"}, [&] {
      inside.set_value();
      finish_future.wait_for(std::chrono::seconds{30});
      return 1;
    });
  });
  inside.get_future().wait();
  auto second = orders();
  auto schema = std::async(std::launch::async, [&] { return second->ensure_schema(); });
  const bool answered = schema.wait_for(std::chrono::seconds{3}) == std::future_status::ready;
  finish.set_value();
  EXPECT_TRUE(answered) << "ensure_schema() waited for the running handler";
  const Status ready = schema.get();
  EXPECT_TRUE(ready.ok()) << ready.failure().describe();
  ASSERT_TRUE(holder.get().has_value());
  const StoreStats stats = first->stats();
  EXPECT_EQ(stats.store, "sqlite");
  ASSERT_TRUE(stats.pool);
  EXPECT_EQ(stats.pool->size, 1u);
  EXPECT_EQ(stats.pool->opened, 1u);
}

}  // namespace idem::testing
