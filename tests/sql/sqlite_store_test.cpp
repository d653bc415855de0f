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
