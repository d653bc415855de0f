// PostgresStore and the admin under the least rights docs/sql.md ("Least privilege") gives them:
// a store role with row rights on idem's tables and their sequences alone (the tables made
// beforehand by their owner), and an operator role with what the admin's commands need. Both
// work, and a right taken away is config_invalid naming it, not an outage.

#include <gtest/gtest.h>
#include <unistd.h>

#include <pqxx/pqxx>
#include <string>

#include "idem/guard.hpp"
#include "idem/postgres/admin.hpp"
#include "idem/postgres/store.hpp"
#include "support/pg_env.hpp"

namespace idem::testing {
namespace {

// docs/sql.md's grants, for tables of prefix `p` and a role `r`.
std::string store_grants(const std::string& p, const std::string& r) {
  return "GRANT SELECT ON " + p + "schema TO " + r + "; GRANT SELECT, INSERT, UPDATE, DELETE ON " +
         p + "records, " + p + "steps, " + p + "entity_ops TO " + r + "; GRANT USAGE ON SEQUENCE " +
         p + "fences, " + p + "entity_fences TO " + r;
}
std::string admin_grants(const std::string& p, const std::string& r) {
  return "GRANT SELECT, UPDATE ON " + p + "schema TO " + r + "; GRANT SELECT, UPDATE, DELETE ON " +
         p + "records, " + p + "steps, " + p + "entity_ops TO " + r;
}

class PostgresPrivileges : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto uri = pg_uri();
    if (!uri) GTEST_SKIP() << kNoPgMessage;
    uri_ = *uri;
    const std::string id = std::to_string(::getpid());
    prefix_ = "priv_" + id + "_";
    app_ = "idem_app_" + id;
    ops_ = "idem_ops_" + id;
    // The owner (the test's superuser) makes the tables, as `idem schema migrate` would.
    ASSERT_TRUE(admin::postgres_admin({.connection = {.uri = uri_, .table_prefix = prefix_}})
                    ->migrate_schema());
    run("DROP ROLE IF EXISTS " + app_ + "; DROP ROLE IF EXISTS " + ops_ + "; CREATE ROLE " + app_ +
        " LOGIN; CREATE ROLE " + ops_ + " LOGIN; " + store_grants(prefix_, app_) + "; " +
        admin_grants(prefix_, ops_));
  }
  void TearDown() override {
    if (app_.empty()) return;
    run("DROP OWNED BY " + app_ + ", " + ops_ + "; DROP ROLE " + app_ + "; DROP ROLE " + ops_);
  }
  void run(const std::string& sql) const {
    pqxx::connection c(uri_);
    pqxx::work w(c);
    w.exec(sql);
    w.commit();
  }
  std::string as(const std::string& role) const {
    std::string uri = uri_;
    uri.replace(uri.find("postgres@"), 9, role + "@");
    return uri;
  }

  std::string uri_, prefix_, app_, ops_;
};

TEST_F(PostgresPrivileges, TheStoreAndTheAdminWorkWithTheDocumentedGrantsAlone) {
  for (SqlMode mode : {SqlMode::lease, SqlMode::transactional}) {
    PostgresStore store(PostgresStoreOptions{
        .connection = {.uri = as(app_), .table_prefix = prefix_}, .mode = mode});
    IdempotencyGuard guard{store, Options{.scope = "priv"}};
    const std::string id = mode == SqlMode::lease ? "lease" : "transactional";
    int runs = 0;
    for (int i = 0; i < 2; ++i) {  // fresh, then replayed
      auto out = guard.execute(id, [&] { return ++runs; });
      ASSERT_TRUE(out) << out.message();
      EXPECT_EQ(out.value(), 1);
    }
    EXPECT_EQ(runs, 1);
    auto held = guard.execute(id + "-steps", [&](Context& ctx) {
      return ctx.step("one", [] { return 1; }) + ctx.step("two", [] { return 2; });
    });
    ASSERT_TRUE(held) << held.message();
  }
  const auto ops =
      admin::postgres_admin({.connection = {.uri = as(ops_), .table_prefix = prefix_}});
  const auto schema = ops->check_schema();
  ASSERT_TRUE(schema) << schema.failure().message;
  EXPECT_TRUE(schema->complete) << schema->note;
  const auto page = ops->list("priv", {.state = admin::State::completed});
  ASSERT_TRUE(page) << page.failure().message;
  EXPECT_EQ(page->records.size(), 4u);  // a key with steps and one without, per mode
  const auto counted = ops->stats("priv");
  ASSERT_TRUE(counted) << counted.failure().message;
  const auto forgotten = ops->forget("priv", Key{"lease"});
  ASSERT_TRUE(forgotten) << forgotten.failure().message;
  EXPECT_TRUE(forgotten->changed);
  const auto released = ops->release("priv", Key{"none"});
  ASSERT_TRUE(released) << released.failure().message;
  const auto purged = ops->purge_expired(100);
  ASSERT_TRUE(purged) << purged.failure().message;
}

TEST_F(PostgresPrivileges, AMissingRightIsConfigInvalidNamingItNotAnOutage) {
  run("REVOKE INSERT ON " + prefix_ + "records FROM " + app_);
  PostgresStore store(
      PostgresStoreOptions{.connection = {.uri = as(app_), .table_prefix = prefix_}});
  IdempotencyGuard guard{store, Options{.scope = "priv"}};
  int runs = 0;
  auto out = guard.execute("k", [&] { return ++runs; });
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error(), errc::config_invalid) << out.message();
  EXPECT_NE(out.message().find("permission denied for table " + prefix_ + "records"),
            std::string::npos)
      << out.message();
  EXPECT_EQ(runs, 0);

  run("REVOKE DELETE ON " + prefix_ + "records FROM " + ops_);
  const auto ops =
      admin::postgres_admin({.connection = {.uri = as(ops_), .table_prefix = prefix_}});
  const auto purged = ops->purge_expired(100);
  ASSERT_FALSE(purged);
  EXPECT_EQ(purged.failure().code, errc::config_invalid) << purged.failure().message;
  EXPECT_NE(purged.failure().message.find("permission denied"), std::string::npos)
      << purged.failure().message;
}

}  // namespace
}  // namespace idem::testing
