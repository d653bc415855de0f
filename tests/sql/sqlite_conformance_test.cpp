// The record-store conformance kit on SqliteStore, lease and transactional mode, each case on a
// fresh database file. Time is SQLite's clock: advance() sleeps. reopen() opens another store on
// the same file, as another process would.

#include <memory>
#include <thread>

#include "idem/sqlite/admin.hpp"
#include "idem/testing/record_store_conformance.hpp"
#include "sql/sql_test_support.hpp"

namespace idem::testing {

namespace {
// Holds the file for every store opened on it; a base listed before the store, so it outlives it.
struct SharedDb {
  std::shared_ptr<TempDb> db;
};

template <SqlMode Mode>
struct SqliteModeStore : private SharedDb, public SqliteStore {
  explicit SqliteModeStore(std::shared_ptr<TempDb> file,
                           std::chrono::milliseconds busy_timeout = std::chrono::seconds{5})
      : SharedDb{std::move(file)},
        SqliteStore(SqliteStoreOptions{.path = db->path(),
                                       .mode = Mode,
                                       .table_prefix = "idem_",
                                       .busy_timeout = busy_timeout}) {}
  const std::shared_ptr<TempDb>& file() const { return db; }
};
}  // namespace

using SqliteLeaseStore = SqliteModeStore<SqlMode::lease>;
using SqliteTransactionalStore = SqliteModeStore<SqlMode::transactional>;

template <SqlMode Mode>
struct SqliteTraits {
  static constexpr std::chrono::milliseconds lease{600};
  static constexpr bool holds_until_finished = Mode == SqlMode::transactional;
  static constexpr bool admin_release_wakes = false;  // the admin is not a store of the process
  static std::unique_ptr<SqliteModeStore<Mode>> make() {
    auto file = std::make_shared<TempDb>();
    SQLite::Database(file->path(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE)
        .exec("CREATE TABLE tags (tag TEXT PRIMARY KEY)");
    return std::make_unique<SqliteModeStore<Mode>>(std::move(file));
  }
  // Writes through an atomic step's transaction (WritesInTransactions).
  static void write(SqliteModeStore<Mode>&, const NativeTransaction& tx, std::string_view tag) {
    SQLite::Statement insert(sqlite_transaction(tx), "INSERT INTO tags (tag) VALUES (?1)");
    insert.bind(1, std::string(tag));
    insert.exec();
  }
  static std::size_t written(SqliteModeStore<Mode>& store, std::string_view tag) {
    SQLite::Database db(store.file()->path(), SQLite::OPEN_READONLY);
    SQLite::Statement count(db, "SELECT count(*) FROM tags WHERE tag = ?1");
    count.bind(1, std::string(tag));
    count.executeStep();
    return static_cast<std::size_t>(count.getColumn(0).getInt64());
  }
  // In transactional mode the other store's claims wait for the holder's write lock, which the
  // cases never give up meanwhile: a short wait keeps them quick.
  static std::unique_ptr<SqliteModeStore<Mode>> reopen(SqliteModeStore<Mode>& store) {
    return std::make_unique<SqliteModeStore<Mode>>(store.file(), std::chrono::milliseconds{300});
  }
  static void advance(SqliteModeStore<Mode>&, std::chrono::milliseconds d) {
    std::this_thread::sleep_for(d);
  }
  static std::unique_ptr<admin::Admin> admin(SqliteModeStore<Mode>& store) {
    return admin::sqlite_admin({.path = store.file()->path(), .table_prefix = "idem_"});
  }
};

template <>
struct StoreTraits<SqliteLeaseStore> : SqliteTraits<SqlMode::lease> {};
template <>
struct StoreTraits<SqliteTransactionalStore> : SqliteTraits<SqlMode::transactional> {};

}  // namespace idem::testing

IDEM_RECORD_STORE_CONFORMANCE(SqliteLease, idem::testing::SqliteLeaseStore);
IDEM_RECORD_STORE_CONFORMANCE(SqliteTransactional, idem::testing::SqliteTransactionalStore);
