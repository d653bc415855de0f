// SqliteStore: bad input, sizes, purge, transactional mode, and processes racing on one file.

#include "sql/sql_cases.hpp"

namespace idem::testing {

INSTANTIATE_TEST_SUITE_P(Sqlite, SqlStoreTest,
                         ::testing::Values(Config{Backend::sqlite, SqlMode::lease},
                                           Config{Backend::sqlite, SqlMode::transactional}),
                         config_name);
INSTANTIATE_TEST_SUITE_P(Sqlite, SqlTransactionalTest,
                         ::testing::Values(Config{Backend::sqlite, SqlMode::transactional}),
                         config_name);
INSTANTIATE_TEST_SUITE_P(Sqlite, SqlProcessTest,
                         ::testing::Values(Config{Backend::sqlite, SqlMode::lease},
                                           Config{Backend::sqlite, SqlMode::transactional}),
                         config_name);

}  // namespace idem::testing

namespace idem::testing {
namespace {

TEST(SqliteStoreOptionsTest, BadOptionsThrowAndTransactionAccessorRefusesLeaseMode) {
  EXPECT_THROW(SqliteStore(SqliteStoreOptions{.path = ""}), std::invalid_argument);
  EXPECT_THROW(SqliteStore(SqliteStoreOptions{.path = "x.db", .table_prefix = "1abc"}),
               std::invalid_argument);
  TempDb db;
  SqliteStore store{SqliteStoreOptions{.path = db.path()}};  // lease mode: no transaction
  IdempotencyGuard guard{store, Options{.scope = "accessor"}};
  bool threw = false;
  try {
    (void)guard.execute("k", [&](Context& ctx) { return &sqlite_transaction(ctx) != nullptr; });
  } catch (const Error& e) {
    threw = e.code() == errc::store_unavailable;
  }
  EXPECT_TRUE(threw);
}

}  // namespace
}  // namespace idem::testing

namespace idem::testing {
namespace {

// SQLite has one writer per file: an open transactional claim holds it, so a claim of another
// key waits up to busy_timeout and then answers in_progress; after the holder commits it runs.
TEST(SqliteTransactionalTest, AnOpenHandlerHoldsTheFileForOtherKeysUpToBusyTimeout) {
  TempDb db;
  SqliteStore store{SqliteStoreOptions{.path = db.path(),
                                       .mode = SqlMode::transactional,
                                       .busy_timeout = std::chrono::milliseconds{300}}};
  IdempotencyGuard guard{store, Options{.scope = "one-writer"}};
  std::promise<void> inside, finish;
  std::shared_future<void> finish_future = finish.get_future().share();
  auto holder = std::async(std::launch::async, [&] {
    return guard.execute("a", [&] {
      inside.set_value();
      finish_future.wait();
      return 1;
    });
  });
  inside.get_future().wait();
  const auto start = std::chrono::steady_clock::now();
  auto other = guard.execute("b", [] { return 2; });
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(other.has_value());
  EXPECT_EQ(other.error(), errc::in_progress);
  EXPECT_GE(waited, std::chrono::milliseconds{250});
  EXPECT_LT(waited, std::chrono::seconds{3});
  finish.set_value();
  ASSERT_TRUE(holder.get().has_value());
  auto later = guard.execute("b", [] { return 2; });
  ASSERT_TRUE(later.has_value()) << later.error().message();
  EXPECT_EQ(later.value(), 2);
}

}  // namespace
}  // namespace idem::testing
