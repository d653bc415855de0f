// NativeTransaction: a claim's open transaction, typed by its backend. Handles here are fakes of
// the adapters' (sqlite/transaction.hpp, postgres/transaction.hpp); tests/sql covers the real
// stores.

#include "idem/transaction.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "idem/context.hpp"
#include "idem/guard.hpp"
#include "idem/memory/store.hpp"

namespace idem {
namespace {

// Kinds of the test's own, as an adapter defines its kind: the core knows none of them.
constexpr TransactionKind fake_sqlite{
    "SQLite", "a SqliteStore in SqlMode::transactional, or an entity store on SQLite"};
constexpr TransactionKind fake_postgres{
    "PostgreSQL", "a PostgresStore in SqlMode::transactional, or an entity store on PostgreSQL"};

struct FakeSqliteHandle : detail::TransactionHandle {
  static constexpr const TransactionKind& kKind = fake_sqlite;
  FakeSqliteHandle() : TransactionHandle(kKind) {}
  int connection = 7;
};

struct FakePostgresHandle : detail::TransactionHandle {
  static constexpr const TransactionKind& kKind = fake_postgres;
  FakePostgresHandle() : TransactionHandle(kKind) {}
  int transaction = 9;
};

// What asking `tx` for a PostgreSQL transaction throws, checked to name the kinds asked and
// `held`; its message, or "" when nothing (or something else) was thrown.
std::string postgres_mismatch(const NativeTransaction& tx, const TransactionKind& held) {
  try {
    (void)tx.get<FakePostgresHandle>("idem::pg_transaction");
    ADD_FAILURE() << to_string(held) << " was handed out as a PostgreSQL transaction";
  } catch (const TransactionMismatch& e) {
    EXPECT_EQ(e.asked(), fake_postgres);
    EXPECT_EQ(e.held(), held);
    return e.what();
  }
  return "";
}

TEST(NativeTransactionTest, NoneHoldsNoTransactionAndRefusesEveryKind) {
  const NativeTransaction none;
  EXPECT_EQ(none.kind(), no_transaction);
  EXPECT_FALSE(none);
  EXPECT_EQ(postgres_mismatch(none, no_transaction),
            "idem::pg_transaction: asked for a PostgreSQL transaction, but the claim has no "
            "open transaction; only a PostgresStore in SqlMode::transactional, or an entity "
            "store on PostgreSQL, runs the handler inside one");
}

TEST(NativeTransactionTest, AHandleIsHandedOutToItsOwnKindOnly) {
  const FakeSqliteHandle sqlite;
  const NativeTransaction tx(sqlite);
  EXPECT_EQ(tx.kind(), fake_sqlite);
  EXPECT_TRUE(tx);
  EXPECT_EQ(&tx.get<FakeSqliteHandle>("idem::sqlite_transaction"), &sqlite);
  EXPECT_EQ(tx.get<FakeSqliteHandle>("idem::sqlite_transaction").connection, 7);
  const std::string what = postgres_mismatch(tx, fake_sqlite);
  EXPECT_NE(what.find("idem::pg_transaction: asked for a PostgreSQL transaction, but the "
                      "claim holds a SQLite one"),
            std::string::npos)
      << what;
  const FakePostgresHandle postgres;
  EXPECT_THROW((void)NativeTransaction(postgres).get<FakeSqliteHandle>("idem::sqlite_transaction"),
               TransactionMismatch);
}

TEST(NativeTransactionTest, AMismatchIsAProgrammingErrorNotAnErrorCode) {
  // Callers that catch std::logic_error for misuse keep catching it; it is no idem::Error (an
  // outage or refusal a retry could get past).
  static_assert(std::is_base_of_v<std::logic_error, TransactionMismatch>);
  static_assert(!std::is_base_of_v<std::system_error, TransactionMismatch>);
  EXPECT_EQ(to_string(no_transaction), "none");
  EXPECT_EQ(to_string(fake_sqlite), "SQLite");
  EXPECT_EQ(to_string(fake_postgres), "PostgreSQL");
  // Kinds are their objects: two kinds with the same words are still two kinds.
  static constexpr TransactionKind another_sqlite{"SQLite", "elsewhere"};
  EXPECT_FALSE(another_sqlite == fake_sqlite);
  EXPECT_TRUE(fake_sqlite == fake_sqlite);
}

TEST(NativeTransactionTest, AMemoryStoreHandlerSeesNoTransaction) {
  MemoryStore store;
  IdempotencyGuard guard{store, Options{.scope = "tx"}};
  const TransactionKind* seen = &fake_sqlite;
  auto out = guard.execute("k", [&](Context& ctx) {
    seen = &ctx.native_transaction().kind();
    return 1;
  });
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ(seen, &no_transaction);
}

}  // namespace
}  // namespace idem
