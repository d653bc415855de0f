#pragma once
// SqliteStore: the SQL record store on one SQLite file (compiled library idem::sqlite).

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "idem/sql/store.hpp"

namespace idem {

struct SqliteStoreOptions {
  std::string path{};  ///< the database file; created if absent. Several processes may share it
  SqlMode mode = SqlMode::lease;  ///< lease (default) or transactional; see idem::SqlMode
  /// Prefixes the table and index names: <prefix>records, <prefix>schema. Letters, digits, '_'.
  std::string table_prefix = "idem_";
  /// How long a write waits for the file's other writers (this process's in arrival order, then
  /// other processes' through SQLite's busy handler) before store_unavailable; also bounds
  /// opening the file. A transactional claim may wait longer (ClaimRequest::block_for).
  std::chrono::milliseconds busy_timeout{5000};
  /// PRAGMA synchronous: false (default) = NORMAL, which in WAL mode may lose the last commits on
  /// power loss but never corrupts; true = FULL, every commit is synced.
  bool synchronous_full = false;
};

/// The unique-index record strategy on SQLite, in WAL mode. Thread-safe: one connection, its
/// statements serialised. Stores of one process on one file wait for each other in arrival
/// order (a running writer may pass the oldest waiter for at most 500 µs), processes through
/// SQLite's busy handler, both within busy_timeout.
/// In transactional mode the claim's transaction holds SQLite's single write lock until commit
/// or abort, so handlers of this file run one at a time (across processes too); keep them short.
/// A duplicate claim of a key held in this process fails fast (errc::in_progress) when the
/// request may not block, else waits for the holder and replays.
class SqliteStore : public SqlStore {
 public:
  static constexpr std::string_view kStoreName = "sqlite";  // observers' label
  /// Opens nothing yet: the file is opened and the schema created on first use, so a bad path
  /// shows as errc::store_unavailable from the first call. Throws std::invalid_argument for an
  /// empty path or a table prefix with other characters than letters, digits and '_'.
  explicit SqliteStore(SqliteStoreOptions options);
};

}  // namespace idem
