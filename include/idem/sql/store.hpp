#pragma once
// SqlStore: the unique-index record strategy on a SQL database, shared by the SQLite and
// PostgreSQL adapters (compiled in idem::sqlite and idem::postgres); no third-party type here.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/batch_store.hpp"
#include "idem/result.hpp"
#include "idem/steps.hpp"
#include "idem/store.hpp"
#include "idem/store_stats.hpp"

namespace idem {

/// How a SQL store runs a claim.
enum class SqlMode : std::uint8_t {
  /// claim, commit and abort are one fenced statement each; the handler runs between them, outside
  /// any transaction. A crashed holder's key is taken over after its lease.
  lease,
  /// claim opens a transaction and inserts or locks the record's row; the handler runs inside it
  /// (Context::native_transaction(), or the typed sqlite_transaction() / pg_transaction()); commit
  /// writes the result and commits, abort rolls back. The handler's own writes to the same
  /// database happen exactly once with the record, and a crash leaves no trace.
  transactional,
};

namespace sql {
class Engine;  // src/sql/engine.hpp
}  // namespace sql

/// A record store over one table with a primary key on the effective key. Thread-safe; movable,
/// not copyable; the destructor is virtual (an adapter may be deleted through a SqlStore pointer).
/// Cost in round trips (lease mode): claim, commit, abort, extend 1 statement each (SQLite: one
/// short write transaction); transactional mode adds BEGIN and COMMIT. The database library's
/// errors become idem::errc codes (store_unavailable, record_corrupt, in_progress,
/// outcome_unknown).
class SqlStore {
 public:
  static constexpr std::string_view kStoreName = "sql";  // observers' label
  SqlStore(SqlStore&&) noexcept;
  SqlStore& operator=(SqlStore&&) noexcept;
  virtual ~SqlStore();

  /// Takes the key, or says who holds it. One atomic step in the database.
  Result<Claim> claim(const ClaimRequest& request);
  /// Stores the result under the ticket's fence; errc::lease_lost when the fence is stale.
  Status commit(const Ticket& ticket, const Completion& completion);
  /// Releases the key (lease mode: the row stays, released, keeping its fence; transactional
  /// mode: rolls the transaction back). errc::lease_lost when the fence is stale.
  Status abort(const Ticket& ticket);
  /// Renews the holder's lease from the database's now.
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease);
  /// Transactional mode: rolls the handler's writes back to the savepoint taken right after a
  /// rewindable claim (ClaimRequest::rewindable), keeping the record held, so that a failure
  /// commits without them. Lease mode: nothing to undo, success. Throws std::logic_error for a
  /// claim that was not rewindable.
  Status rewind(const Ticket& ticket);

  /// Lease mode: the claims of a batch in one write transaction (SQLite) or one statement
  /// (PostgreSQL), each answered as claim() would answer it (idem::BatchStore). Transactional
  /// mode has no batches: every answer is errc::store_unavailable saying so.
  std::vector<Result<Claim>> claim_batch(std::span<const ClaimRequest> requests);
  /// Lease mode: the commits of a batch in one transaction or statement, each answered as
  /// commit() would. Transactional mode: commit() for each in turn.
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests);
  /// Lease mode: commits, then claims, in one transaction (idem::GroupStore; GroupCommitStore
  /// writes its groups with it).
  GroupAnswers write_group(std::span<const CommitRequest> commits,
                           std::span<const ClaimRequest> claims);
  /// The steps recorded for the ticket's record (idem::StepStore), in <prefix>steps; lease_lost
  /// when the ticket no longer holds it. Transactional mode: in the holder's transaction.
  Result<std::vector<StepRecord>> load_steps(const Ticket& ticket);
  /// Records a step under the ticket's fence, one statement; lease_lost when it no longer holds.
  Status save_step(const Ticket& ticket, const StepWrite& step);
  /// Runs an atomic step (Context::atomic_step): lease mode, in a transaction of its own, the
  /// fenced save last; transactional mode, in the holder's transaction under a savepoint of its
  /// own (docs/steps.md). lease_lost or a failure leaves nothing of the step.
  Status save_step_atomically(const Ticket& ticket, std::uint32_t index, std::string_view name,
                              AtomicStepBody body);
  /// Keeps the run's request beside its steps (idem::CompletableStore), fenced; in transactional
  /// mode within the holder's transaction.
  Status keep_request(const Ticket& ticket, std::string_view request);
  /// At most `limit` abandoned records under the key prefix, by the database clock.
  Result<std::vector<Abandoned>> find_abandoned(std::string_view prefix, std::size_t limit);

  /// Deletes at most `max_rows` records whose retention has passed (by the database clock);
  /// returns how many went. Records in progress under a live retention are never touched.
  Result<std::size_t> purge_expired(std::size_t max_rows = 10'000);

  /// Creates the tables if they are absent and checks the schema version. claim() does this on
  /// first use; call it to fail early at start-up.
  Status ensure_schema();

  SqlMode mode() const noexcept;

  /// The store's own figures: its name ("sqlite", "postgres"), its connection pool (SQLite: the
  /// store's one connection, which its callers take turns on) and, for a PostgresStore with a
  /// replica, the replica's reads and pool. No round trip.
  StoreStats stats() const noexcept;

 protected:
  explicit SqlStore(std::unique_ptr<sql::Engine> engine);
  /// The engine, for an adapter's own calls (null when moved from).
  sql::Engine* engine() noexcept { return engine_.get(); }

 private:
  std::unique_ptr<sql::Engine> engine_;
};

static_assert(RewindableStore<SqlStore>);
static_assert(GroupStore<SqlStore>);
static_assert(AtomicStepStore<SqlStore>);
static_assert(CompletableStore<SqlStore>);

}  // namespace idem
