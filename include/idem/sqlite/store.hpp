#pragma once
// SqliteStore: the SQL record store on one SQLite file (compiled library idem::sqlite).

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/sql/store.hpp"

namespace idem {

namespace sql {
class FileWaiters;  // src/sqlite/file_waiters.hpp
struct FileGroup;   // src/sqlite/file_group.hpp
}  // namespace sql

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
/// In lease mode the claims and commits of the process's stores on one file (same prefix and
/// settings) are group-committed: the caller whose turn it is writes those queued behind it in
/// one transaction, each under a savepoint of its own, and each caller returns after that COMMIT
/// with its own single-key answer; a call still queued after busy_timeout answers
/// store_unavailable unwritten (docs/sql.md, "Group commit of lease-mode claims and commits").
/// In transactional mode the claim's transaction holds SQLite's single write lock until commit
/// or abort, so handlers of this file run one at a time (across processes too); keep them short.
/// A duplicate claim of a key held in this process fails fast (errc::in_progress) when the
/// request may not block, else waits for the holder and replays.
/// A WakingStore within one process: a caller waiting for a holder (the Wait policy) is woken by
/// the commit, abort or takeover of any SqliteStore of this process on the same file. A holder in
/// another process does not wake it: it claims again after its bound (polling).
class SqliteStore : public SqlStore {
 public:
  static constexpr std::string_view kStoreName = "sqlite";  // observers' label
  /// Opens nothing yet: the file is opened and the schema created on first use, so a bad path
  /// shows as errc::store_unavailable from the first call. Throws std::invalid_argument for an
  /// empty path or a table prefix with other characters than letters, digits and '_'.
  explicit SqliteStore(SqliteStoreOptions options);

  // SqlStore's calls, plus the wake of this process's waiters when a hold ends.
  Result<Claim> claim(const ClaimRequest& request);
  Status commit(const Ticket& ticket, const Completion& completion);
  Status abort(const Ticket& ticket);
  std::vector<Result<Claim>> claim_batch(std::span<const ClaimRequest> requests);
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests);
  GroupAnswers write_group(std::span<const CommitRequest> commits,
                           std::span<const ClaimRequest> claims);

  /// SqlStore::stats(), with in `group` the group commit of this process's lease-mode stores
  /// that share this store's file, table prefix and settings (all of them together).
  StoreStats stats() const noexcept;

  /// Returns once a store of this process on this file committed, aborted or took over the
  /// record held.key held under held.fence (or a record of a key sharing its wake slot), or once
  /// `bound` has passed. A hold that ended after this thread's last claim of the key answered
  /// in_progress and before this call returns at once.
  void await_change(const Ticket& held, std::chrono::milliseconds bound);

 private:
  Result<Claim> grouped_claim(const ClaimRequest& request);
  Status grouped_commit(const Ticket& ticket, const Completion& completion);

  SqliteStore(std::shared_ptr<sql::FileWaiters> waiters, std::shared_ptr<sql::FileGroup> group,
              SqliteStoreOptions&& options);

  std::shared_ptr<sql::FileWaiters> waiters_;
  std::shared_ptr<sql::FileGroup> group_;  // lease mode: the file's group commit (null: none)
};

static_assert(WakingStore<SqliteStore>);
static_assert(GroupStore<SqliteStore>);

}  // namespace idem
