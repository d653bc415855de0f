// The record-store conformance kit on PostgresStore, lease and transactional mode. Each test
// binary run uses tables of its own (a unique prefix). Time is the server's clock: advance()
// sleeps. reopen() opens another store on the same tables, as another process would. The
// atomic-step cases write to a table <prefix>tags beside them.

#include <memory>
#include <thread>

#include "idem/postgres/admin.hpp"
#include "idem/testing/record_store_conformance.hpp"
#include "sql/sql_test_support.hpp"

namespace idem::testing {

namespace {
template <SqlMode Mode>
struct PgModeStore : public PostgresStore {
  explicit PgModeStore(const std::string& uri)
      : PostgresStore(PostgresStoreOptions{.connection = {.uri = uri, .table_prefix = prefix()},
                                           .mode = Mode}) {}
  static const std::string& prefix() {
    static const std::string p = unique_name(Mode == SqlMode::lease ? "cl" : "ct") + "_";
    return p;
  }
};
}  // namespace

using PgLeaseStore = PgModeStore<SqlMode::lease>;
using PgTransactionalStore = PgModeStore<SqlMode::transactional>;

template <SqlMode Mode>
struct PgTraits {
  static constexpr std::chrono::milliseconds lease{600};
  static constexpr bool holds_until_finished = Mode == SqlMode::transactional;
  static std::unique_ptr<PgModeStore<Mode>> make() {
    const auto uri = pg_uri();
    if (!uri) {
      [] { GTEST_SKIP() << kNoPgMessage; }();
      return nullptr;
    }
    return open(*uri);
  }
  static std::unique_ptr<PgModeStore<Mode>> reopen(PgModeStore<Mode>&) { return open(*pg_uri()); }
  // Writes through an atomic step's transaction (WritesInTransactions).
  static void write(PgModeStore<Mode>&, const NativeTransaction& tx, std::string_view tag) {
    pg_transaction(tx).exec_params("INSERT INTO " + tags() + " (tag) VALUES ($1)",
                                   std::string(tag));
  }
  static std::size_t written(PgModeStore<Mode>&, std::string_view tag) {
    pqxx::connection c(*pg_uri());
    return pqxx::nontransaction(c)
        .exec_params("SELECT count(*) FROM " + tags() + " WHERE tag = $1", std::string(tag))
        .at(0)
        .at(0)
        .template as<std::size_t>();
  }
  static void advance(PgModeStore<Mode>&, std::chrono::milliseconds d) {
    std::this_thread::sleep_for(d);
  }
  static std::unique_ptr<admin::Admin> admin(PgModeStore<Mode>&) {
    return admin::postgres_admin(
        {.connection = {.uri = *pg_uri(), .table_prefix = PgModeStore<Mode>::prefix()}});
  }

 private:
  static std::string tags() { return PgModeStore<Mode>::prefix() + "tags"; }
  static std::unique_ptr<PgModeStore<Mode>> open(const std::string& uri) {
    {
      pqxx::connection c(uri);
      pqxx::nontransaction(c).exec("CREATE TABLE IF NOT EXISTS " + tags() +
                                   " (tag text PRIMARY KEY)");
    }
    auto store = std::make_unique<PgModeStore<Mode>>(uri);
    const Status ready = store->ensure_schema();
    EXPECT_TRUE(ready.ok()) << "PostgreSQL at IDEM_TEST_PG_URI is unreachable: "
                            << ready.failure().describe();
    return store;
  }
};

template <>
struct StoreTraits<PgLeaseStore> : PgTraits<SqlMode::lease> {};
template <>
struct StoreTraits<PgTransactionalStore> : PgTraits<SqlMode::transactional> {};

}  // namespace idem::testing

IDEM_RECORD_STORE_CONFORMANCE(PostgresLease, idem::testing::PgLeaseStore);
IDEM_RECORD_STORE_CONFORMANCE(PostgresTransactional, idem::testing::PgTransactionalStore);
