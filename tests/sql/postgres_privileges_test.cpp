// PostgresStore, VersionStore and the admin under the least rights docs/sql.md ("Least
// privilege") gives them, read from the file itself so that the test and the docs cannot drift:
// a services' role with row rights on idem's tables and their sequences alone (the tables made
// beforehand by their owner), and an operators' role with what the admin's commands need. Both
// work; and the grants are minimal: with any one of them revoked, some operation fails, and every
// one that fails is config_invalid naming the table or sequence, not an outage.

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <pqxx/pqxx>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "idem/engine/effective_key.hpp"
#include "idem/guard.hpp"
#include "idem/postgres/admin.hpp"
#include "idem/postgres/entities.hpp"
#include "idem/postgres/store.hpp"
#include "idem/version_store.hpp"
#include "support/pg_env.hpp"

namespace idem::testing {
namespace {

// The statements of docs/sql.md's first sql block under "## Least privilege", comments dropped.
std::vector<std::string> documented_grants() {
  std::ifstream in(std::string(IDEM_SOURCE_DIR) + "/docs/sql.md");
  if (!in) throw std::runtime_error("cannot read docs/sql.md");
  std::vector<std::string> statements;
  std::string statement;
  bool section = false;
  bool block = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) section = line == "## Least privilege";
    if (!section) continue;
    if (line == "```sql") {
      block = true;
      continue;
    }
    if (!block) continue;
    if (line == "```") break;
    line = line.substr(0, line.find("--"));
    statement += line + " ";
    if (line.find(';') != std::string::npos) {
      statements.push_back(std::regex_replace(statement, std::regex("^ +| *; *$"), ""));
      statement.clear();
    }
  }
  return statements;
}

// One right of a GRANT: a privilege on an object to a role.
struct Right {
  std::string privilege;
  std::string object;  // "SEQUENCE idem_fences" or "idem_records"
  std::string role;
};

// The rights of the GRANT statements among `statements`, one each.
std::vector<Right> rights_of(const std::vector<std::string>& statements) {
  static const std::regex grant("GRANT (.+) ON (SEQUENCE )?(.+) TO (\\S+)");
  std::vector<Right> out;
  for (const std::string& s : statements) {
    std::smatch m;
    if (!std::regex_match(s, m, grant)) continue;
    std::istringstream privileges(std::regex_replace(m[1].str(), std::regex(","), " "));
    std::istringstream objects(std::regex_replace(m[3].str(), std::regex(","), " "));
    std::vector<std::string> names;
    for (std::string o; objects >> o;) names.push_back(o);
    for (std::string p; privileges >> p;) {
      for (const std::string& o : names) out.push_back({p, m[2].str() + o, m[4].str()});
    }
  }
  return out;
}

// A call that failed, and what it was doing.
struct FailedCall {
  std::string doing;
  Failure failure;
};

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
    accounts_ = prefix_ + "accounts";
    // The owner (the test's superuser) makes the tables, as `idem schema migrate` would, and the
    // entity stores' table of the user's own.
    ASSERT_TRUE(admin::postgres_admin({.connection = {.uri = uri_, .table_prefix = prefix_}})
                    ->migrate_schema());
    run("DROP ROLE IF EXISTS " + app_ + "; DROP ROLE IF EXISTS " + ops_ + "; CREATE TABLE " +
        accounts_ + " (id TEXT PRIMARY KEY, version BIGINT NOT NULL)");
    const std::vector<std::string> documented = documented_grants();
    ASSERT_FALSE(documented.empty()) << "docs/sql.md gives no grants";
    std::string all;
    for (const std::string& s : documented) {
      statements_.push_back(ours(s));
      all += statements_.back() + "; ";
    }
    run(all + "GRANT SELECT, UPDATE ON " + accounts_ + " TO " + app_);  // the user's own table
  }
  void TearDown() override {
    if (app_.empty()) return;
    run("DROP OWNED BY " + app_ + ", " + ops_ + "; DROP ROLE " + app_ + "; DROP ROLE " + ops_ +
        "; DROP TABLE IF EXISTS " + accounts_);
  }
  // A documented statement for this test's roles and tables.
  std::string ours(const std::string& statement) const {
    std::string s = std::regex_replace(statement, std::regex("\\bidem_app\\b"), app_);
    s = std::regex_replace(s, std::regex("\\bidem_ops\\b"), ops_);
    return std::regex_replace(
        s, std::regex("\\bidem_(schema|records|steps|entity_ops|fences|entity_fences)\\b"),
        prefix_ + "$1");
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
  std::string scope() { return "priv." + std::to_string(++scopes_); }

  // Every operation of the services' role: both modes of PostgresStore (fresh, replay, steps,
  // an abort, a kept request), and an entity store.
  std::vector<FailedCall> run_as_app() {
    std::vector<FailedCall> failed;
    const auto note = [&](const std::string& doing, const auto& outcome) {
      if (outcome && !outcome.commit_error()) return;
      failed.push_back(
          outcome ? FailedCall{doing + " (commit)", outcome.commit_failure()}
                  : FailedCall{doing, make_failure(static_cast<errc>(outcome.error().value()),
                                                   outcome.message())});
    };
    const auto note_result = [&](const std::string& doing, const auto& result) {
      if (!result) failed.push_back({doing, result.failure()});
    };
    const std::string s = scope();
    for (SqlMode mode : {SqlMode::lease, SqlMode::transactional}) {
      PostgresStore store(PostgresStoreOptions{
          .connection = {.uri = as(app_), .table_prefix = prefix_}, .mode = mode});
      IdempotencyGuard guard{store, Options{.scope = s, .keep_request = true}};
      const std::string m = mode == SqlMode::lease ? "lease " : "transactional ";
      for (const char* pass : {"fresh call", "replay"}) {
        note(m + pass, guard.execute(m + "k", "request", [] { return 1; }));
      }
      note(m + "steps", guard.execute(m + "steps", "request", [](Context& ctx) {
        return ctx.step("one", [] { return 1; }) + ctx.step("two", [] { return 2; });
      }));
      if (mode == SqlMode::lease) {  // a record that expires at once, then the store's purge
        IdempotencyGuard brief{store, Options{.scope = s, .ttl = std::chrono::milliseconds{1}}};
        note("expiring", brief.execute("expiring", [] { return 1; }));
        // Past its 1 ms ttl by the server's clock before the purge looks: an unexpired record
        // is not purged, and the purge then needs no right to raise the fence floor.
        std::this_thread::sleep_for(std::chrono::milliseconds{50});
        note_result("purge_expired", store.purge_expired(100));
      }
      try {
        note(m + "abort", guard.execute(m + "thrown", "request",
                                        []() -> int { throw std::runtime_error("x"); }));
      } catch (const std::runtime_error&) {
      }
    }
    VersionStore<PostgresBackend> accounts(VersionStoreOptions<PostgresBackend>{
        .backend = {.connection = {.uri = as(app_), .table_prefix = prefix_}},
        .table = EntityTable{accounts_, "id", "version"},
        .guard = Options{.scope = s}});
    const std::string entity = "a-" + std::to_string(scopes_);
    run("INSERT INTO " + accounts_ + " VALUES ('" + entity + "', 0)");
    note("entity store", accounts.execute(VersionKey{entity, 0, "op"}, [] { return 1; }));
    return failed;
  }

  // Every admin command as the operators' role, on records of a scope of its own that the
  // owner makes first: completed ones (one with steps), one held.
  std::vector<FailedCall> run_as_ops() {
    const std::string s = scope();
    {
      PostgresStore owner(
          PostgresStoreOptions{.connection = {.uri = uri_, .table_prefix = prefix_}});
      IdempotencyGuard guard{owner, Options{.scope = s}};
      EXPECT_TRUE(guard.execute("k", [] { return 1; }));
      EXPECT_TRUE(
          guard.execute("steps", [](Context& ctx) { return ctx.step("one", [] { return 1; }); }));
      IdempotencyGuard brief{owner, Options{.scope = s, .ttl = std::chrono::milliseconds{1}}};
      EXPECT_TRUE(brief.execute("expired", [] { return 1; }));  // for the purge
      const std::string held(detail::EffectiveKey(s, {}, "held").view());
      EXPECT_TRUE(
          owner.claim(ClaimRequest{held, {1, 2}, std::chrono::seconds{30}, std::chrono::hours{1}}));
    }
    std::vector<FailedCall> failed;
    const auto note = [&](const std::string& doing, const auto& result) {
      if (!result) failed.push_back({doing, result.failure()});
    };
    const auto ops =
        admin::postgres_admin({.connection = {.uri = as(ops_), .table_prefix = prefix_}});
    note("check_schema", ops->check_schema());
    note("list", ops->list(s, {.state = admin::State::completed}));
    note("inspect", ops->inspect(s, Key{"k"}));
    note("stats", ops->stats(s));
    note("release", ops->release(s, Key{"held"}));
    note("forget", ops->forget(s, Key{"steps"}));
    note("forget", ops->forget(s, Key{"k"}));
    std::this_thread::sleep_for(std::chrono::milliseconds{50});  // "expired" is past its ttl
    note("purge_expired", ops->purge_expired(100));
    return failed;
  }

  std::string uri_, prefix_, app_, ops_, accounts_;
  std::vector<std::string> statements_;
  int scopes_ = 0;
};

TEST_F(PostgresPrivileges, EveryOperationWorksWithTheDocumentedGrantsAlone) {
  for (const FailedCall& f : run_as_app()) ADD_FAILURE() << f.doing << ": " << f.failure.describe();
  for (const FailedCall& f : run_as_ops()) ADD_FAILURE() << f.doing << ": " << f.failure.describe();
}

TEST_F(PostgresPrivileges, WithAnyOneGrantRevokedSomeOperationFailsAsConfigInvalidNamingIt) {
  (void)run_as_app();  // records for the admin to find
  const std::vector<Right> rights = rights_of(statements_);
  ASSERT_GE(rights.size(), 10u);
  for (const Right& r : rights) {
    SCOPED_TRACE(r.privilege + " ON " + r.object + " TO " + r.role);
    run("REVOKE " + r.privilege + " ON " + r.object + " FROM " + r.role);
    const std::vector<FailedCall> failed = r.role == app_ ? run_as_app() : run_as_ops();
    const bool sequence = r.object.rfind("SEQUENCE ", 0) == 0;
    const std::string named = std::string("permission denied for ") +
                              (sequence ? "sequence " + r.object.substr(9) : "table " + r.object);
    // Some call is refused naming it; after one, a key a refused commit left held answers
    // in_progress until its lease ends, as a crashed holder's would.
    bool refused = false;
    for (const FailedCall& f : failed) {
      if (refused && f.failure.code == errc::in_progress) continue;
      EXPECT_EQ(f.failure.code, errc::config_invalid) << f.doing << ": " << f.failure.describe();
      EXPECT_NE(f.failure.message.find(named), std::string::npos)
          << f.doing << ": " << f.failure.describe();
      refused = true;
    }
    EXPECT_TRUE(refused) << "no operation needed it";
    run("GRANT " + r.privilege + " ON " + r.object + " TO " + r.role);
  }
}

}  // namespace
}  // namespace idem::testing
