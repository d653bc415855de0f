#pragma once
// The SQL record strategy written once: claim classification, retries, the transactional-mode
// registry of open transactions and error mapping glue. A dialect supplies a Backend (how to reach
// the database) and its Sessions (one connection in one thread's hands, running the statements
// of statements.hpp).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/connection_pool.hpp"
#include "idem/batch_store.hpp"
#include "idem/engine/record_model.hpp"
#include "idem/result.hpp"
#include "idem/sql/store.hpp"
#include "idem/steps.hpp"
#include "idem/store.hpp"
#include "idem/store_stats.hpp"
#include "idem/transaction.hpp"
#include "sql/statements.hpp"

namespace idem {
struct SqliteStoreOptions;
struct PostgresStoreOptions;
}  // namespace idem

namespace idem::sql {

/// Record states as stored in the `state` column (the record model's SQL encoding).
using State = detail::SqlState;

/// ClaimRow::state of a row whose columns do not have the types idem writes (a foreign or
/// damaged row): the engine answers errc::record_corrupt instead of coercing it to a state.
inline constexpr std::int16_t kMalformedState = -1;

/// What the claim statement asks.
struct ClaimArgs {
  std::string_view key;
  Fingerprint fingerprint;
  std::int64_t lease_ms = 0;
  std::int64_t keep_ms = 0;  // retention: held_retention(request retention, lease)
  Fence min_fence = 1;       // the fence is max(old fence + 1, min_fence[, drawn fence])
};

/// What the claim statement answers: the acquired fence, or the record that is in the way.
struct ClaimRow {
  bool acquired = false;
  Fence fence = 0;
  bool took_over = false;
  std::int16_t state = 0;  // as stored: State, or kMalformedState
  Fingerprint fingerprint;
  std::int64_t lease_left_ms = 0;
  std::int64_t expire_left_ms = 0;
  std::string result;
};

/// One fenced finish of a batch (Session::write_many).
struct FinishArgs {
  Ticket ticket;
  State state = State::completed;
  std::string_view result;
  std::int64_t ttl_ms = 0;
};

/// A parameter of a generic statement (the entity stores' statements, src/sql/entity_engine.cpp).
struct Param {
  enum Kind : std::uint8_t { integer, text, bytes } kind = integer;
  std::int64_t number = 0;    // integer
  std::string_view string{};  // text or bytes
};

/// The first row of a generic query, one cell per column; nullopt for NULL. Integers come as
/// decimal text, binary columns (bit i of `blob_columns` set) as their raw bytes.
using Row = std::vector<std::optional<std::string>>;

/// One database connection, used by one thread at a time. Methods throw the library's
/// exceptions; the Engine maps them through Backend::failure().
class Session {
 public:
  virtual ~Session() = default;

  /// Lease mode: the claim as one atomic step. Transactional mode: the claim inside the open
  /// transaction, which first holds the key (hold()) and only then draws a new fence from a
  /// source that no rollback undoes (Dialect::next_fence), so that the fences of a key's
  /// holders grow in the order they held it, across processes, rollbacks and crashes. nullopt:
  /// the record changed under the statement; the engine asks again.
  virtual std::optional<ClaimRow> claim(const ClaimArgs& args) = 0;
  /// Fenced single statements; true when they changed the held record.
  virtual bool finish(const Ticket& ticket, State state, std::string_view result,
                      std::int64_t ttl_ms) = 0;
  virtual bool release(const Ticket& ticket) = 0;
  virtual bool extend(const Ticket& ticket, std::int64_t lease_ms) = 0;
  virtual std::size_t purge(std::size_t max_rows) = 0;
  /// Lease mode, batches and groups (src/sql/batch_engine.cpp): the finishes, then the claims,
  /// each of distinct keys, in one transaction, answered in order. A throw leaves none of them
  /// written, except where the session broke while the transaction committed. The default runs
  /// one statement (and transaction) per item.
  struct Written {
    std::vector<bool> finished;                    // per finish: it matched the held record
    std::vector<std::optional<ClaimRow>> claimed;  // per claim, as claim() answers
  };
  virtual Written write_many(std::span<const FinishArgs> finishes,
                             std::span<const ClaimArgs> claims);
  /// The record under `key` as it stands, without writing; nullopt when there is none. Sessions
  /// on a read-only replica (src/sql/replica_reads.hpp), and a commit on the primary that looks
  /// for its own landed commit.
  virtual std::optional<ClaimRow> read(std::string_view key) {
    (void)key;
    throw std::logic_error("idem: this SQL session cannot read records on their own");
  }

  /// Transactional mode: opens the claim's transaction; `block_for` bounds lock waits in it.
  virtual void begin(std::chrono::milliseconds block_for) = 0;
  /// Transactional mode, right after begin(): until the transaction ends, another transaction
  /// that holds the same `key` of `table` waits (up to its `block_for`). A claim holds its key
  /// before it draws a fence. SQLite: nothing to do, BEGIN IMMEDIATE took the write lock of
  /// the whole file. PostgreSQL: an advisory transaction lock on a hash of both, sent with the
  /// transaction's first statement.
  virtual void hold(std::string_view table, std::string_view key) = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;
  /// Transactional mode: finish() then commit(), in one round trip where the database allows.
  /// False: the record is not held under the ticket's fence, and the transaction rolled back.
  virtual bool finish_and_commit(const Ticket& ticket, State state, std::string_view result,
                                 std::int64_t ttl_ms) {
    if (!finish(ticket, state, result, ttl_ms)) {
      rollback();
      return false;
    }
    commit();
    return true;
  }
  /// Transactional mode: marks the point rollback_to_mark() goes back to (a savepoint).
  virtual void mark() = 0;
  /// Transactional mode: undoes every write since mark(); the transaction and the locks taken
  /// before the mark stay. Works in a transaction a failed statement left aborted.
  virtual void rollback_to_mark() = 0;
  /// An open transaction: a savepoint for one atomic step (Context::atomic_step) inside it, so
  /// that a step that fails takes its writes with it and leaves the transaction to its holder.
  /// Steps nest: each call opens one more, end_step() ends the newest.
  virtual void step_savepoint() = 0;
  /// Ends the newest step savepoint: `keep`, its writes stay in the transaction; otherwise they
  /// are rolled back first. Works in a transaction a failed statement left aborted.
  virtual void end_step(bool keep) = 0;
  /// The open transaction handed to handlers, tagged with its backend (the handles of
  /// sqlite/transaction.hpp and postgres/transaction.hpp).
  virtual NativeTransaction native() noexcept = 0;

  /// Generic statements for stores whose SQL is built at configuration (the entity stores):
  /// `sql` is prepared once per session and cached by its text; parameters are ?1/$1...
  /// run() returns the rows changed; first_row() says whether a row came back and fills `row`.
  virtual std::int64_t run(const std::string& sql, std::span<const Param> params) {
    (void)sql, (void)params;
    throw std::logic_error("idem: this SQL session has no generic statements");
  }
  virtual bool first_row(const std::string& sql, std::span<const Param> params, Row& row,
                         unsigned blob_columns) {
    (void)sql, (void)params, (void)row, (void)blob_columns;
    throw std::logic_error("idem: this SQL session has no generic statements");
  }
  /// Every row of a generic query, in order, each as first_row() gives it.
  virtual std::vector<Row> rows(const std::string& sql, std::span<const Param> params,
                                unsigned blob_columns) {
    (void)sql, (void)params, (void)blob_columns;
    throw std::logic_error("idem: this SQL session has no generic statements");
  }
};

/// Thrown by Backend::acquire when every connection stayed busy past the wait (the backends'
/// ConnectionPool's own failure).
using PoolBusy = detail::PoolExhausted;

/// The backends' pool of sessions, and a session lent from it: given back (its transaction
/// rolled back) when the lease ends, or closed if discard() was called.
using SessionPool = detail::ConnectionPool<Session>;
using SessionLease = SessionPool::Lease;

/// How the engine reaches the database. Thread-safe.
class Backend {
 public:
  virtual ~Backend() = default;

  /// A session for this thread, waiting up to `wait` (zero: the backend's default wait).
  /// Throws on failure (mapped by failure()).
  virtual SessionLease acquire(std::chrono::milliseconds wait) = 0;
  /// Creates the tables if absent and checks the schema version (throws on failure).
  virtual void create_schema() = 0;

  /// Maps the exception in flight to a Failure; sets `broken` when the session is unusable.
  /// `transactional_claim`: the exception came from a transactional claim, where a lock wait
  /// running out means errc::in_progress.
  virtual Failure failure(std::exception_ptr error, bool& broken,
                          bool transactional_claim) const noexcept = 0;

  /// The statement texts of the store's tables (the steps' statements run from them).
  virtual const Statements& statements() const noexcept = 0;

  /// The store's name ("sqlite", "postgres") and its connection pool's figures.
  virtual std::string_view store_name() const noexcept = 0;
  virtual PoolStats pool_stats() const noexcept = 0;
};

class ReplicaReads;  // src/sql/replica_reads.hpp

class Engine {
 public:
  /// `replica`: when set, claims first look for a settled record there (replica_reads.hpp).
  Engine(std::unique_ptr<Backend> backend, SqlMode mode,
         std::shared_ptr<ReplicaReads> replica = nullptr);
  ~Engine();

  Result<Claim> claim(const ClaimRequest& request);
  Status commit(const Ticket& ticket, const Completion& completion);
  Status abort(const Ticket& ticket);
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease);
  Status rewind(const Ticket& ticket);
  // Batches and groups (src/sql/batch_engine.cpp): the commits, then the claims, in one
  // transaction; each answered as commit() and claim() would answer it alone.
  GroupAnswers write_group(std::span<const CommitRequest> commits,
                           std::span<const ClaimRequest> claims);
  std::vector<Result<Claim>> claim_batch(std::span<const ClaimRequest> requests);
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests);
  // Steps (src/sql/engine_steps.cpp): lease mode, one statement each; transactional mode, in
  // the holder's open transaction.
  Result<std::vector<StepRecord>> load_steps(const Ticket& ticket);
  Status save_step(const Ticket& ticket, const StepWrite& step);
  Status save_step_atomically(const Ticket& ticket, std::uint32_t index, std::string_view name,
                              AtomicStepBody body);
  Status keep_request(const Ticket& ticket, std::string_view request);
  Result<std::vector<Abandoned>> find_abandoned(std::string_view prefix, std::size_t limit);
  Result<std::size_t> purge_expired(std::size_t max_rows);
  Status ensure_schema();
  SqlMode mode() const noexcept { return mode_; }
  /// The backend's name and pool, and the replica's reads when there is one.
  StoreStats stats() const noexcept;

 private:
  // A transactional-mode holder in this process: its session keeps the transaction open.
  struct Open {
    Fence fence = 0;
    Fingerprint fingerprint;
    std::chrono::steady_clock::time_point lease_until;
    SessionLease session;  // discarded when a rewind failed on the connection
    bool marked = false;   // the claim was rewindable: mark() was taken right after it
  };
  using Registry = std::multimap<std::string, Open, std::less<>>;
  // Transactions that failed to commit: a retried commit of the same ticket gets the same answer
  // (the transaction is gone, with the handler's writes), not a misleading lease_lost. One whose
  // COMMIT was in doubt (the connection went while it was under way) is looked up in the table
  // first: a retry finds it landed and succeeds. Kept by age, not count, so that however many
  // commits fail in an outage, each one's retries find it.
  struct Ended {
    std::string key;
    Fence fence = 0;
    Failure failure;
    bool in_doubt = false;
    std::chrono::steady_clock::time_point at;
  };
  static constexpr std::chrono::minutes kEndedKeptFor{5};

  Result<Claim> claim_lease(const ClaimRequest& request);
  Result<Claim> claim_transactional(const ClaimRequest& request);
  std::optional<Claim> held_here(const ClaimRequest& request);
  // A transactional claim that failed to get its turn (`f`): held_here()'s answer when a
  // holder of this store has the key, else `f`.
  Result<Claim> busy(const ClaimRequest& request, Failure f);
  // Turns a row that is not acquired into what the caller must do; nullopt: ask again.
  static std::optional<Result<Claim>> classify(const ClaimRow& row, const ClaimRequest& request);
  // Removes and returns the open transaction of `ticket`, if this process holds it.
  std::optional<Open> take_open(const Ticket& ticket);
  Status finish_transactional(const Ticket& ticket, const Completion* completion);
  // A ticket no open transaction holds: its remembered end, or lease_lost.
  Status finish_ended(const Ticket& ticket, const Completion* completion);
  // Drops ended transactions older than `t` (under open_mutex_).
  void forget_ended_before(std::chrono::steady_clock::time_point t);

  Failure failure(bool& broken, bool transactional_claim = false) const noexcept;
  // The same for a failure on a lent session: discards it when the failure left it unusable.
  Failure failure(SessionLease& session, bool transactional_claim = false) const noexcept;
  // A row of the steps table (a step, or the kept request at index -1), fenced.
  Status save_row(const Ticket& ticket, std::int64_t index, std::string_view name,
                  std::string_view result);
  // The session whose transaction the ticket's steps run in: a transactional holder's in this
  // process, or in lease mode the transaction of an atomic step this thread runs for the
  // ticket; null when there is none.
  Session* held_session(const Ticket& ticket);
  // Transactional mode: the holder's connection failed; it is dropped when the holder ends.
  void mark_broken(const Ticket& ticket);
  // An atomic step inside an open transaction, under a savepoint of its own (Session::
  // step_savepoint): kept when the step and its record saved, rolled back otherwise.
  Status step_in_savepoint(Session& session, const Ticket& ticket, std::uint32_t index,
                           std::string_view name, AtomicStepBody body);
  // Lease mode: runs an atomic step's body in `session`'s transaction, which steps inside it
  // (nested atomic steps, plain steps) join meanwhile.
  bool run_stepping(Session& session, const Ticket& ticket, AtomicStepBody body,
                    std::string& result);
  // Runs `statement` on the ticket's session: the holder's own in transactional mode, one from
  // the backend in lease mode. Maps failures; null session: lease lost.
  template <class Fn>
  auto on_step_session(const Ticket& ticket, Fn&& statement)
      -> Result<decltype(statement(std::declval<Session&>()))>;

  std::unique_ptr<Backend> backend_;
  SqlMode mode_;
  std::shared_ptr<ReplicaReads> replica_;
  std::mutex schema_mutex_;
  std::atomic<bool> schema_ready_{false};
  std::mutex open_mutex_;
  Registry open_;
  std::deque<Ended> ended_;  // under open_mutex_, oldest first
  // Lease mode: the atomic steps running now, each in its own transaction (run_stepping).
  struct Stepping {
    std::string key;
    Fence fence = 0;
    std::thread::id thread;
    Session* session = nullptr;
  };
  std::vector<Stepping> stepping_;  // under open_mutex_
};

/// Backends of the two dialects, for stores other than SqlStore (src/sqlite, src/postgres).
/// The options were not checked yet: these throw std::invalid_argument as the stores do.
std::unique_ptr<Backend> make_sqlite_backend(const SqliteStoreOptions& options);
std::unique_ptr<Backend> make_postgres_backend(const PostgresStoreOptions& options);

}  // namespace idem::sql
