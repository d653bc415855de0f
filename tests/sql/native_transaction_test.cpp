// The transaction accessors on every kind of claim: each hands out its own backend's open
// transaction, and refuses with a std::logic_error naming what was asked and what the claim holds
// when the claim holds another backend's transaction or none (lease mode, the memory store).
// Asking a SQLite claim for the PostgreSQL transaction (or the reverse) must never hand out the
// other backend's object as if it were the one asked for.

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>

#include "sql/sql_test_support.hpp"

namespace idem::testing {
namespace {

// What one accessor did inside a handler: the message of the std::logic_error it threw, or
// nullopt when it handed out a transaction.
using Accessor = std::function<void(Context&)>;

template <class S>
std::optional<std::string> ask(S& store, const Accessor& accessor) {
  IdempotencyGuard guard{store, Options{.scope = unique_name("accessor")}};
  std::optional<std::string> refusal;
  auto out = guard.execute("k", [&](Context& ctx) {
    try {
      accessor(ctx);
    } catch (const std::logic_error& e) {
      refusal = e.what();
    }
    return 1;
  });
  EXPECT_TRUE(out) << out.message();
  return refusal;
}

const Accessor kSqlite = [](Context& ctx) { (void)sqlite_transaction(ctx).exec("SELECT 1"); };
const Accessor kPostgres = [](Context& ctx) { (void)pg_transaction(ctx).exec("SELECT 1"); };
// Only binds the reference: with no check, a wrong object would go unnoticed here.
const Accessor kSqliteRef = [](Context& ctx) { (void)&sqlite_transaction(ctx); };
const Accessor kPostgresRef = [](Context& ctx) { (void)&pg_transaction(ctx); };

void expect_refusal(const std::optional<std::string>& refusal, const char* accessor,
                    const char* asked, const char* held) {
  ASSERT_TRUE(refusal.has_value()) << accessor << " handed out a transaction";
  for (const std::string& part :
       {std::string(accessor), "asked for a " + std::string(asked) + " transaction",
        std::string(held)}) {
    EXPECT_NE(refusal->find(part), std::string::npos) << "'" << part << "' not in: " << *refusal;
  }
}

// A claim with no open transaction: both accessors refuse.
template <class S>
void expect_both_refused(S& store) {
  expect_refusal(ask(store, kSqliteRef), "idem::sqlite_transaction", "SQLite",
                 "the claim has no open transaction");
  expect_refusal(ask(store, kPostgresRef), "idem::pg_transaction", "PostgreSQL",
                 "the claim has no open transaction");
}

PostgresStoreOptions postgres_options(const std::string& uri, SqlMode mode) {
  return {.connection = {.uri = uri, .table_prefix = unique_name("ntx") + "_"}, .mode = mode};
}

TEST(NativeTransactionTest, ASqliteTransactionalClaimHandsOutItsConnectionAndRefusesPostgres) {
  TempDb db;
  SqliteStore store{SqliteStoreOptions{.path = db.path(), .mode = SqlMode::transactional}};
  EXPECT_FALSE(ask(store, kSqlite).has_value());
  expect_refusal(ask(store, kPostgresRef), "idem::pg_transaction", "PostgreSQL",
                 "the claim holds a SQLite one");
}

TEST(NativeTransactionTest, ALeaseModeSqliteClaimRefusesBothAccessors) {
  TempDb db;
  SqliteStore store{SqliteStoreOptions{.path = db.path(), .mode = SqlMode::lease}};
  expect_both_refused(store);
}

TEST(NativeTransactionTest, AMemoryStoreClaimRefusesBothAccessors) {
  MemoryStore store;
  expect_both_refused(store);
}

TEST(NativeTransactionTest, APostgresTransactionalClaimHandsOutItsTransactionAndRefusesSqlite) {
  const std::optional<std::string> uri = pg_uri();
  if (!uri) GTEST_SKIP() << kNoPgMessage;
  PostgresStore store{postgres_options(*uri, SqlMode::transactional)};
  EXPECT_FALSE(ask(store, kPostgres).has_value());
  expect_refusal(ask(store, kSqliteRef), "idem::sqlite_transaction", "SQLite",
                 "the claim holds a PostgreSQL one");
}

TEST(NativeTransactionTest, ALeaseModePostgresClaimRefusesBothAccessors) {
  const std::optional<std::string> uri = pg_uri();
  if (!uri) GTEST_SKIP() << kNoPgMessage;
  PostgresStore store{postgres_options(*uri, SqlMode::lease)};
  expect_both_refused(store);
}

}  // namespace
}  // namespace idem::testing
