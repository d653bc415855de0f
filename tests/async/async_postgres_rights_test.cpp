// AsyncPostgresStore as a role missing a right (INSERT on the records table, with every other
// row right of docs/sql.md's store role): config_invalid naming the right, as on PostgresStore,
// not an outage; the handler never runs. And a login refused for a wrong password:
// store_unavailable naming the cause, as on PostgresStore, without the password (the role is
// then a member of the test server's password group, scripts/lib/servers.sh). The role and the
// tables are the test's own.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <pqxx/pqxx>
#include <string>

#include "async/async_test_support.hpp"
#include "idem/asio/async_guard.hpp"
#include "idem/postgres/admin.hpp"
#include "idem/postgres/async_store.hpp"
#include "support/pg_env.hpp"

namespace idem::testing {
namespace {

using namespace std::chrono_literals;

class AsyncPostgresRights : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto uri = pg_uri();
    if (!uri) GTEST_SKIP() << kNoPgMessage;
    uri_ = *uri;
    const std::string id = std::to_string(::getpid());
    prefix_ = "async_rights_" + id + "_";
    role_ = "idem_async_rights_" + id;
    // The owner (the test's superuser) makes the tables, as `idem schema migrate` would.
    ASSERT_TRUE(admin::postgres_admin({.connection = {.uri = uri_, .table_prefix = prefix_}})
                    ->migrate_schema());
    const std::string& p = prefix_;
    run("DROP ROLE IF EXISTS " + role_ + "; CREATE ROLE " + role_ + " LOGIN; GRANT SELECT ON " + p +
        "schema TO " + role_ + "; GRANT SELECT, UPDATE, DELETE ON " + p + "records, " + p +
        "steps, " + p + "entity_ops TO " + role_ + "; GRANT INSERT ON " + p + "steps, " + p +
        "entity_ops TO " + role_ + "; GRANT USAGE ON SEQUENCE " + p + "fences, " + p +
        "entity_fences TO " + role_);
  }
  void TearDown() override {
    if (role_.empty()) return;
    run("DROP OWNED BY " + role_ + "; DROP ROLE " + role_);
  }
  void run(const std::string& sql) const {
    pqxx::connection c(uri_);
    pqxx::work w(c);
    w.exec(sql);
    w.commit();
  }

  AsyncPostgresStoreOptions options_as_role(const std::string& password) const {
    std::string as_role = uri_;
    as_role.replace(as_role.find("postgres@"), 9,
                    role_ + (password.empty() ? "" : ":" + password) + "@");
    return AsyncPostgresStoreOptions{.connection = {.uri = as_role,
                                                    .table_prefix = prefix_,
                                                    .connect_timeout = 5s,
                                                    .statement_timeout = 5s}};
  }

  std::string uri_, prefix_, role_;
};

TEST_F(AsyncPostgresRights, AMissingRightIsConfigInvalidNamingItNotAnOutage) {
  IoRunner runner;
  AsyncPostgresStore store{runner.io().get_executor(), options_as_role("")};
  AsyncGuard guard{store, Options{.scope = "async.rights"}};
  int runs = 0;
  const auto out = runner.run(guard.async_execute("k", [&] { return ++runs; }));
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error(), errc::config_invalid) << out.message();
  EXPECT_NE(out.message().find("the role lacks a right idem needs"), std::string::npos)
      << out.message();
  EXPECT_NE(out.message().find("permission denied for table " + prefix_ + "records"),
            std::string::npos)
      << out.message();
  EXPECT_EQ(runs, 0);
}

TEST_F(AsyncPostgresRights, AWrongPasswordIsRefusedNamingTheCauseNotThePassword) {
  const char* group = std::getenv("IDEM_TEST_PG_PASSWORD_GROUP");
  if (group == nullptr || *group == '\0') {
    GTEST_SKIP() << "IDEM_TEST_PG_PASSWORD_GROUP is not set: the server must ask the group's "
                    "members for a password (scripts/lib/servers.sh start_postgres)";
  }
  const std::string right = "Async-Right-" + std::to_string(::getpid()) + "-k";
  const std::string wrong = "Async-Wrong-" + std::to_string(::getpid()) + "-k";
  run("ALTER ROLE " + role_ + " PASSWORD '" + right + "'; GRANT " + group + " TO " + role_);
  IoRunner runner;
  AsyncPostgresStore store{runner.io().get_executor(), options_as_role(wrong)};
  AsyncGuard guard{store, Options{.scope = "async.rights"}};
  int runs = 0;
  const auto out = runner.run(guard.async_execute("k", [&] { return ++runs; }));
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error(), errc::store_unavailable) << out.message();
  EXPECT_NE(out.message().find("authentication failed: the server refused the role's password"),
            std::string::npos)
      << out.message();
  EXPECT_EQ(out.message().find(wrong), std::string::npos) << out.message();
  EXPECT_EQ(out.message().find(right), std::string::npos) << out.message();
  EXPECT_EQ(runs, 0);
}

}  // namespace
}  // namespace idem::testing
