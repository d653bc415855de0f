#pragma once
// The two-phase API on the SQL stores: the backend type of the shared suites for SQLite and
// PostgreSQL in both modes, and, in transactional mode, writes through the claim's transaction
// (Attempt::native_transaction()) that commit with commit() and roll back with fail().

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>

#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "idem/postgres/transaction.hpp"
#include "idem/sqlite/transaction.hpp"
#include "sql/sql_test_support.hpp"
#include "two_phase/process_race_cases.hpp"
#include "two_phase/two_phase_cases.hpp"

namespace idem::testing {

/// A fresh store per test: a SQLite file of its own, or PostgreSQL tables under a prefix of
/// their own (IDEM_TEST_PG_URI; skipped when unset).
template <Backend kBackend, SqlMode kMode>
struct SqlBackend {
  using StoreType = SqlStore;
  static constexpr bool kTransactional = kMode == SqlMode::transactional;
  static constexpr const char* kName =
      kBackend == Backend::sqlite ? (kTransactional ? "sqlite_transactional" : "sqlite_lease")
                                  : (kTransactional ? "postgres_transactional" : "postgres_lease");

  void set_up() {
    target_.backend = kBackend;
    target_.prefix = unique_name("tp") + "_";
    if (kBackend == Backend::sqlite) {
      target_.location = db_.path();
    } else {
      const auto uri = pg_uri();
      if (!uri) GTEST_SKIP() << kNoPgMessage;
      target_.location = *uri;
    }
    store_ = make_store(target_, kMode);
    const Status ready = store_->ensure_schema();
    ASSERT_TRUE(ready.ok()) << "database unreachable: " << ready.failure().describe();
  }
  SqlStore& store() { return *store_; }
  std::shared_ptr<Clock> clock() { return nullptr; }  // leases run on the database's clock
  void pass(milliseconds d) { std::this_thread::sleep_for(d); }

  std::vector<std::string> worker_args() const {
    return {name_of(kBackend), target_.location, target_.prefix, name_of(kMode)};
  }
  void prepare_side_effects() { create_business_table(target_); }
  long long side_effects(const std::string& scope, const std::string& key) const {
    return count_business_rows(target_, scope + "/" + key);
  }

  TempDb db_;
  Target target_;
  std::unique_ptr<SqlStore> store_;
};

/// Inserts a business row through the open transaction `native` (Attempt::native_transaction()).
inline void insert_through(const Target& t, const idem::NativeTransaction& native,
                           const std::string& key, const std::string& note) {
  const std::string sql = "INSERT INTO " + business_table(t) + " (key, note) VALUES ";
  if (t.backend == Backend::sqlite) {
    SQLite::Statement st(idem::sqlite_transaction(native), sql + "(?1, ?2)");
    st.bind(1, key);
    st.bind(2, note);
    st.exec();
  } else {
    pqxx::dbtransaction& tx = idem::pg_transaction(native);
    tx.exec(sql + "(" + tx.quote(key) + ", " + tx.quote(note) + ")");
  }
}

template <class B>
class TwoPhaseTransactionTest : public TwoPhaseTest<B> {
 protected:
  void SetUp() override {
    TwoPhaseTest<B>::SetUp();
    if (this->IsSkipped() || this->HasFatalFailure()) return;
    this->backend_.prepare_side_effects();
  }
  const Target& target() const { return this->backend_.target_; }
  long long rows(const std::string& key) const { return count_business_rows(target(), key); }
};

TYPED_TEST_SUITE_P(TwoPhaseTransactionTest);

TYPED_TEST_P(TwoPhaseTransactionTest, WritesThroughTheNativeTransactionCommitWithCommit) {
  typename TestFixture::Guard guard{this->store(), this->options()};
  auto a = guard.template begin<std::string>("order-1");
  ASSERT_TRUE(a.acquired()) << a.outcome().message();
  ASSERT_TRUE(a.native_transaction());
  insert_through(this->target(), a.native_transaction(), "order-1", "placed");
  EXPECT_EQ(this->rows("order-1"), 0) << "visible before the record committed";
  Outcome<std::string> out = a.commit("receipt-1");
  ASSERT_TRUE(out) << out.message();
  EXPECT_TRUE(out.recorded());
  EXPECT_EQ(this->rows("order-1"), 1);

  auto repeat = guard.template begin<std::string>("order-1");
  ASSERT_TRUE(repeat.outcome()) << repeat.outcome().message();
  EXPECT_EQ(repeat.outcome().value(), "receipt-1");
  EXPECT_EQ(this->rows("order-1"), 1);

  // The Context a handler written for execute() takes reaches the same transaction.
  auto b = guard.template begin<std::string>("order-2");
  ASSERT_TRUE(b.acquired()) << b.outcome().message();
  EXPECT_EQ(b.context().native_transaction(), b.native_transaction());
  insert_business_row(this->target(), b.context(), "order-2", "placed");
  ASSERT_TRUE(b.commit("receipt-2"));
  EXPECT_EQ(this->rows("order-2"), 1);
}

TYPED_TEST_P(TwoPhaseTransactionTest, WritesThroughTheNativeTransactionRollBackWithFail) {
  typename TestFixture::Guard guard{this->store(), this->options()};
  auto a = guard.template begin<std::string>("order-1");
  ASSERT_TRUE(a.acquired()) << a.outcome().message();
  insert_through(this->target(), a.native_transaction(), "order-1", "doomed");
  a.fail("payment declined");
  EXPECT_EQ(this->rows("order-1"), 0);
  EXPECT_EQ(count_records(this->target()), 0);

  auto retry = guard.template begin<std::string>("order-1");
  ASSERT_TRUE(retry.acquired()) << retry.outcome().message();
  insert_through(this->target(), retry.native_transaction(), "order-1", "placed");
  ASSERT_TRUE(retry.commit("receipt"));
  EXPECT_EQ(this->rows("order-1"), 1);

  // Dropped without commit() or fail(): rolled back the same way.
  {
    auto dropped = guard.template begin<std::string>("order-2");
    ASSERT_TRUE(dropped.acquired()) << dropped.outcome().message();
    insert_through(this->target(), dropped.native_transaction(), "order-2", "dropped");
  }
  EXPECT_EQ(this->rows("order-2"), 0);
}

TYPED_TEST_P(TwoPhaseTransactionTest, ARememberedFailureCommitsWithoutTheWrites) {
  typename TestFixture::Guard guard{this->store(), this->options({.remember_failures = true})};
  auto a = guard.template begin<std::string>("order-1");
  ASSERT_TRUE(a.acquired()) << a.outcome().message();
  insert_through(this->target(), a.native_transaction(), "order-1", "doomed");
  a.fail("payment declined");
  EXPECT_EQ(this->rows("order-1"), 0);
  EXPECT_EQ(count_records(this->target()), 1);  // the failure, committed alone

  auto repeat = guard.template begin<std::string>("order-1");
  EXPECT_FALSE(repeat.acquired());
  EXPECT_EQ(repeat.outcome().error(), errc::handler_failed);
  EXPECT_NE(repeat.outcome().message().find("payment declined"), std::string::npos)
      << repeat.outcome().message();
}

REGISTER_TYPED_TEST_SUITE_P(TwoPhaseTransactionTest,
                            WritesThroughTheNativeTransactionCommitWithCommit,
                            WritesThroughTheNativeTransactionRollBackWithFail,
                            ARememberedFailureCommitsWithoutTheWrites);

}  // namespace idem::testing

/// Runs the two-phase cases on `backend` (Backend::sqlite or Backend::postgres) in both modes,
/// its suites named after `Prefix`. At namespace scope inside idem::testing, once per backend.
#define IDEM_SQL_TWO_PHASE_TESTS(Prefix, backend)                                               \
  using Prefix##Lease = SqlBackend<backend, SqlMode::lease>;                                    \
  using Prefix##Transactional = SqlBackend<backend, SqlMode::transactional>;                    \
  using Prefix##BothModes = ::testing::Types<Prefix##Lease, Prefix##Transactional>;             \
  INSTANTIATE_TYPED_TEST_SUITE_P(Prefix, TwoPhaseTest, Prefix##BothModes, BackendNames);        \
  INSTANTIATE_TYPED_TEST_SUITE_P(Prefix, TwoPhaseLeaseTest, Prefix##Lease, BackendNames);       \
  INSTANTIATE_TYPED_TEST_SUITE_P(Prefix, TwoPhaseProcessTest, Prefix##BothModes, BackendNames); \
  INSTANTIATE_TYPED_TEST_SUITE_P(Prefix, TwoPhaseTransactionTest, Prefix##Transactional,        \
                                 BackendNames)
