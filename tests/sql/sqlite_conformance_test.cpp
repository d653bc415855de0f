// The record-store conformance suite on SqliteStore, lease and transactional mode, each test on a
// fresh database file. Time is SQLite's clock: advance() sleeps.

#include <memory>
#include <thread>

#include "conformance/record_store_suite.hpp"
#include "sql/sql_test_support.hpp"

namespace idem::testing {

namespace {
// Owns the file; a base listed before the store, so it outlives it.
struct TempDbHolder {
  TempDb db;
};

template <SqlMode Mode>
struct SqliteModeStore : private TempDbHolder, public SqliteStore {
  SqliteModeStore()
      : SqliteStore(SqliteStoreOptions{.path = db.path(), .mode = Mode, .table_prefix = "idem_"}) {}
};
}  // namespace

using SqliteLeaseStore = SqliteModeStore<SqlMode::lease>;
using SqliteTransactionalStore = SqliteModeStore<SqlMode::transactional>;

template <SqlMode Mode>
struct SqliteTraits {
  static constexpr std::chrono::milliseconds lease{600};
  static constexpr bool holds_until_finished = Mode == SqlMode::transactional;
  static std::unique_ptr<SqliteModeStore<Mode>> make() {
    return std::make_unique<SqliteModeStore<Mode>>();
  }
  static void advance(SqliteModeStore<Mode>&, std::chrono::milliseconds d) {
    std::this_thread::sleep_for(d);
  }
};

template <>
struct StoreTraits<SqliteLeaseStore> : SqliteTraits<SqlMode::lease> {};
template <>
struct StoreTraits<SqliteTransactionalStore> : SqliteTraits<SqlMode::transactional> {};

using SqliteStores = ::testing::Types<SqliteLeaseStore, SqliteTransactionalStore>;
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, RecordStoreConformance, SqliteStores);

}  // namespace idem::testing
