#pragma once
// The SQL record strategy written once; a dialect supplies a Backend and its Sessions (one
// connection in one thread's hands, running the statements of statements.hpp).

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

/// ClaimRow::state of a row with columns of other types than idem writes: record_corrupt.
inline constexpr std::int16_t kMalformedState = -1;

struct ClaimArgs {
  std::string_view key;
  Fingerprint fingerprint;
  std::int64_t lease_ms = 0;
  std::int64_t keep_ms = 0;  // retention: held_retention(request retention, lease)
  Fence min_fence = 1;       // the fence is max(old fence + 1, min_fence[, drawn fence])
};

struct ClaimRow {  // the acquired fence, or the record in the way
  bool acquired = false;
  Fence fence = 0;
  bool took_over = false;
  std::int16_t state = 0;  // as stored: State, or kMalformedState
  Fingerprint fingerprint;
  std::int64_t lease_left_ms = 0;
  std::int64_t expire_left_ms = 0;
  std::string result;
};

struct FinishArgs {  // one fenced finish of a batch
  Ticket ticket;
  State state = State::completed;
  std::string_view result;
  std::int64_t ttl_ms = 0;
};

struct Param {  // of a generic statement
  enum Kind : std::uint8_t { integer, text, bytes } kind = integer;
  std::int64_t number = 0;    // integer
  std::string_view string{};  // text or bytes
};

/// A row of a generic query; nullopt for NULL, integers as decimal text, columns whose bit is set
/// in `blob_columns` as their bytes.
using Row = std::vector<std::optional<std::string>>;

/// One database connection, used by one thread at a time; throws what Backend::failure() maps.
class Session {
 public:
  virtual ~Session() = default;

  /// Lease mode: one atomic step. Transactional mode: inside the open transaction, after hold(),
  /// drawing a fence no rollback undoes (docs/sql.md#fences). nullopt: the record changed under
  /// the statement; the engine asks again.
  virtual std::optional<ClaimRow> claim(const ClaimArgs& args) = 0;
  /// Fenced single statements; true when they changed the held record.
  virtual bool finish(const Ticket& ticket, State state, std::string_view result,
                      std::int64_t ttl_ms) = 0;
  virtual bool release(const Ticket& ticket) = 0;
  virtual bool extend(const Ticket& ticket, std::int64_t lease_ms) = 0;
  virtual std::size_t purge(std::size_t max_rows) = 0;
  /// Lease mode, batches and groups: the finishes, then the claims (distinct keys), in one
  /// transaction, answered in order; a throw leaves none written unless the session broke while
  /// committing. A session may run each item under a savepoint of its own: an item that failed
  /// alone is rolled back alone, its error in `finish_errors` / `claim_errors`, and the others
  /// commit.
  struct Written {
    std::vector<bool> finished;                    // per finish: it matched the held record
    std::vector<std::optional<ClaimRow>> claimed;  // per claim, as claim() answers
    // Per item, when the session runs items under savepoints (else empty): null, or the error
    // that rolled that item alone back.
    std::vector<std::exception_ptr> finish_errors;
    std::vector<std::exception_ptr> claim_errors;
  };
  virtual Written write_many(std::span<const FinishArgs> finishes,
                             std::span<const ClaimArgs> claims) = 0;
  /// The record under `key` as it stands, without writing; nullopt when there is none.
  virtual std::optional<ClaimRow> read(std::string_view key) = 0;

  /// Transactional mode: opens the claim's transaction; `block_for` bounds lock waits in it.
  virtual void begin(std::chrono::milliseconds block_for) = 0;
  /// Transactional mode, right after begin(): another transaction that holds the same `key` of
  /// `table` waits (up to its `block_for`) until this one ends.
  virtual void hold(std::string_view table, std::string_view key) = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;
  /// Transactional mode: finish() then commit(), one round trip where the database allows;
  /// false (rolled back) when the record is not held under the ticket's fence.
  virtual bool finish_and_commit(const Ticket& ticket, State state, std::string_view result,
                                 std::int64_t ttl_ms) {
    if (!finish(ticket, state, result, ttl_ms)) {
      rollback();
      return false;
    }
    commit();
    return true;
  }
  /// Transactional mode: a savepoint that rollback_to_mark() goes back to, undoing every write
  /// since, even in a transaction a failed statement left aborted; earlier locks stay.
  virtual void mark() = 0;
  virtual void rollback_to_mark() = 0;
  /// A nested savepoint for one atomic step in an open transaction; end_step() ends the newest,
  /// keeping its writes or rolling them back (also after a failed statement).
  virtual void step_savepoint() = 0;
  virtual void end_step(bool keep) = 0;
  /// The open transaction handed to handlers, tagged with its backend.
  virtual NativeTransaction native() noexcept = 0;

  /// Generic statements (the entity stores, steps), prepared once per session by text; params
  /// ?1/$1... run(): rows changed; first_row(): whether a row came back (into `row`).
  virtual std::int64_t run(const std::string& sql, std::span<const Param> params) = 0;
  virtual bool first_row(const std::string& sql, std::span<const Param> params, Row& row,
                         unsigned blob_columns) = 0;
  virtual std::vector<Row> rows(const std::string& sql, std::span<const Param> params,
                                unsigned blob_columns) = 0;

  /// The server process this session's connection is served by; 0 when there is none (an
  /// embedded database, whose commit has ended when the call returns).
  virtual std::int64_t server_process() const noexcept { return 0; }
  /// Whether the transaction server process `process` had open has ended, so that nothing it
  /// was sent can still commit: true when the process is gone or idle; false while it is in a
  /// transaction or its state cannot be read.
  virtual bool transaction_ended(std::int64_t process) {
    (void)process;
    return true;
  }
};

/// Thrown by Backend::acquire when every connection stayed busy past the wait.
using PoolBusy = detail::PoolExhausted;

using SessionPool = detail::ConnectionPool<Session>;
using SessionLease = SessionPool::Lease;

/// How the engine reaches the database. Thread-safe.
class Backend {
 public:
  virtual ~Backend() = default;

  /// A session, waiting up to `wait` (zero: the backend's default); throws on failure.
  virtual SessionLease acquire(std::chrono::milliseconds wait) = 0;
  /// Creates the tables if absent and checks the schema version.
  virtual void create_schema() = 0;

  /// Maps `error` to a Failure; sets `broken` when the session is unusable. In a
  /// `transactional_claim` a lock wait running out means errc::in_progress.
  virtual Failure failure(std::exception_ptr error, bool& broken,
                          bool transactional_claim) const noexcept = 0;

  virtual const Statements& statements() const noexcept = 0;
  virtual std::string_view store_name() const noexcept = 0;  // "sqlite", "postgres"
  virtual PoolStats pool_stats() const noexcept = 0;
  /// Whether a lease-mode claim reads the record before it writes, in its own statement
  /// (Statements::claim_in_one): the engine's read for a claim after a wait would repeat it.
  virtual bool claim_reads_first() const noexcept { return false; }
};

class ReplicaReads;  // src/sql/replica_reads.hpp

class Engine {
 public:
  /// `replica`: when set, claims first look for a settled record there (replica_reads.hpp).
  Engine(std::unique_ptr<Backend> backend, SqlMode mode,
         std::shared_ptr<ReplicaReads> replica = nullptr);
  ~Engine();

  Result<Claim> claim(const ClaimRequest& request);
  /// A lease-mode claim after a wait (ClaimRequest::after_wait) answered from a plain read of the
  /// record, which takes no lock and writes nothing: a finished record that has not expired (a
  /// replay, or a payload mismatch), as the claim would answer. nullopt: any other record (held,
  /// released, expired, none), or a read that failed; the claim decides.
  std::optional<Result<Claim>> settled_answer(const ClaimRequest& request);
  Status commit(const Ticket& ticket, const Completion& completion);
  Status abort(const Ticket& ticket);
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease);
  Status rewind(const Ticket& ticket);
  // Batches and groups (batch_engine.cpp): each answered as commit() or claim() alone would.
  GroupAnswers write_group(std::span<const CommitRequest> commits,
                           std::span<const ClaimRequest> claims);
  std::vector<Result<Claim>> claim_batch(std::span<const ClaimRequest> requests);
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests);
  // Steps (engine_steps.cpp): transactional mode, in the holder's open transaction.
  Result<std::vector<StepRecord>> load_steps(const Ticket& ticket);
  Status save_step(const Ticket& ticket, const StepWrite& step);
  Status save_step_atomically(const Ticket& ticket, std::uint32_t index, std::string_view name,
                              AtomicStepBody body);
  Status keep_request(const Ticket& ticket, std::string_view request);
  Result<std::vector<Abandoned>> find_abandoned(std::string_view prefix, std::size_t limit);
  Result<std::size_t> purge_expired(std::size_t max_rows);
  Status ensure_schema();
  // Waiting for a holder (engine_waits.cpp; PostgreSQL). Lease mode: counts one more waiter in
  // the record while `held` still holds it, one statement; the wake's payload, or empty when the
  // hold is over. Transactional mode: waits, at most `bound`, for the holder's transaction to end
  // on the key's lock, as a blocking claim does. Failures are the caller's return (a pause).
  Result<std::string> count_waiter(const Ticket& held);
  void await_transaction(const Ticket& held, std::chrono::milliseconds bound);
  SqlMode mode() const noexcept { return mode_; }
  StoreStats stats() const noexcept;

 private:
  struct Open {  // a transactional holder in this process: its session's transaction is open
    Fence fence = 0;
    Fingerprint fingerprint;
    std::chrono::steady_clock::time_point lease_until;
    SessionLease session;  // discarded when a rewind failed on the connection
    bool marked = false;   // the claim was rewindable: mark() was taken right after it
  };
  using Registry = std::multimap<std::string, Open, std::less<>>;
  // Transactions that failed to commit: a retry of the ticket hears the same failure, not a
  // misleading lease_lost (one in doubt reads the table first: it may have landed). Kept by
  // age, not count, so that each retry in an outage finds its own.
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
  // A transactional claim that failed to get its turn: held_here()'s answer, else `f`.
  Result<Claim> busy(const ClaimRequest& request, Failure f);
  // A row that is not acquired as the caller's answer; nullopt: ask again.
  static std::optional<Result<Claim>> classify(const ClaimRow& row, const ClaimRequest& request);
  std::optional<Open> take_open(const Ticket& ticket);
  // The open transaction of `ticket` in this process, or open_.end(). Under open_mutex_.
  Registry::iterator find_open(const Ticket& ticket);
  // Runs `statement` on a session lent for it; maps failures, dropping a broken session.
  template <class Fn>
  auto on_lent_session(Fn&& statement) -> decltype(statement(std::declval<Session&>())) {
    bool broken = false;
    try {
      SessionLease s = backend_->acquire(std::chrono::milliseconds{0});
      try {
        return statement(*s);
      } catch (...) {
        return failure(s);
      }
    } catch (...) {
      return failure(broken);
    }
  }
  Status finish_transactional(const Ticket& ticket, const Completion* completion);
  // A ticket no open transaction holds: its remembered end, or lease_lost.
  Status finish_ended(const Ticket& ticket, const Completion* completion);
  void forget_ended_before(std::chrono::steady_clock::time_point t);  // under open_mutex_

  Failure failure(bool& broken, bool transactional_claim = false) const noexcept;
  // The same on a lent session, discarded when the failure left it unusable.
  Failure failure(SessionLease& session, bool transactional_claim = false) const noexcept;
  // A fenced row of the steps table (a step, or the kept request at index -1).
  Status save_row(const Ticket& ticket, std::int64_t index, std::string_view name,
                  std::string_view result);
  // The session the ticket's steps run in: a transactional holder's here, or (lease mode) an
  // atomic step's this thread runs for the ticket; null when there is none.
  Session* held_session(const Ticket& ticket);
  // The holder's connection failed: dropped when the holder ends.
  void mark_broken(const Ticket& ticket);
  // An atomic step in an open transaction, under its own savepoint.
  Status step_in_savepoint(Session& session, const Ticket& ticket, std::uint32_t index,
                           std::string_view name, AtomicStepBody body);
  // Lease mode: an atomic step's body in `session`'s transaction, which nested steps join.
  bool run_stepping(Session& session, const Ticket& ticket, AtomicStepBody body,
                    std::string& result);
  // Runs `statement` on held_session() or else (lease mode) a lent one; maps failures.
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

/// Backends for stores other than SqlStore; they check the options (std::invalid_argument).
std::unique_ptr<Backend> make_sqlite_backend(const SqliteStoreOptions& options);
std::unique_ptr<Backend> make_postgres_backend(const PostgresStoreOptions& options);

}  // namespace idem::sql
