// PostgresStore: bad input, sizes, purge, transactional mode, and processes racing on one database.

#include "sql/sql_cases.hpp"

namespace idem::testing {

INSTANTIATE_TEST_SUITE_P(Postgres, SqlStoreTest,
                         ::testing::Values(Config{Backend::postgres, SqlMode::lease},
                                           Config{Backend::postgres, SqlMode::transactional}),
                         config_name);
INSTANTIATE_TEST_SUITE_P(Postgres, SqlTransactionalTest,
                         ::testing::Values(Config{Backend::postgres, SqlMode::transactional}),
                         config_name);
INSTANTIATE_TEST_SUITE_P(Postgres, SqlProcessTest,
                         ::testing::Values(Config{Backend::postgres, SqlMode::lease},
                                           Config{Backend::postgres, SqlMode::transactional}),
                         config_name);

}  // namespace idem::testing

namespace idem::testing {
namespace {

// postgresql://user@host:port/db -> "host=... port=... user=... dbname=..."
std::string key_value_form(const std::string& uri) {
  const auto scheme = uri.find("://");
  std::string rest = uri.substr(scheme + 3);
  std::string user = "postgres";
  if (const auto at = rest.find('@'); at != std::string::npos) {
    user = rest.substr(0, at);
    rest = rest.substr(at + 1);
  }
  const auto slash = rest.find('/');
  const std::string hostport = rest.substr(0, slash);
  std::string db = slash == std::string::npos ? "postgres" : rest.substr(slash + 1);
  if (const auto q = db.find('?'); q != std::string::npos) db.resize(q);
  const auto colon = hostport.rfind(':');
  const std::string host = hostport.substr(0, colon);
  const std::string port = colon == std::string::npos ? "5432" : hostport.substr(colon + 1);
  return "host=" + host + " port=" + port + " user=" + user + " dbname=" + db;
}

TEST(PostgresStoreOptionsTest, KeyValueConnectionStringsWorkAndBadOptionsThrow) {
  EXPECT_THROW(PostgresStore(PostgresStoreOptions{.uri = ""}), std::invalid_argument);
  EXPECT_THROW(PostgresStore(PostgresStoreOptions{.uri = "host=x", .pool_size = 0}),
               std::invalid_argument);
  EXPECT_THROW(PostgresStore(PostgresStoreOptions{.uri = "host=x", .table_prefix = "a b"}),
               std::invalid_argument);
  const auto uri = pg_uri();
  if (!uri) GTEST_SKIP() << kNoPgMessage;
  PostgresStore store{
      PostgresStoreOptions{.uri = key_value_form(*uri), .table_prefix = unique_name("kv") + "_"}};
  IdempotencyGuard guard{store, Options{.scope = "kv"}};
  int runs = 0;
  for (int i = 0; i < 2; ++i) {
    auto out = guard.execute("k", [&] { return ++runs; });
    ASSERT_TRUE(out.has_value()) << out.error().message();
    EXPECT_EQ(out.value(), 1);
  }
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace idem::testing
