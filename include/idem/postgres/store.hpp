#pragma once
// PostgresStore: the SQL record store on PostgreSQL (compiled library idem::postgres, libpqxx).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "idem/postgres/options.hpp"
#include "idem/sql/stats.hpp"
#include "idem/sql/store.hpp"

namespace idem {

/// Where replays may be read from instead of the primary (docs/sql.md, "Replicas"). Claims,
/// commits, aborts and extends always go to the primary.
struct PostgresReplicaOptions {
  /// libpq connection string of a read-only replica (a hot standby of the primary); empty (the
  /// default): every call goes to the primary.
  std::string uri{};
  std::size_t pool_size = 8;  ///< most replica connections open at once (a pool of its own)
  /// Longest wait for a free replica connection; past it the claim goes to the primary. Zero
  /// (default): never wait, since the primary can answer at once.
  std::chrono::milliseconds acquire_timeout{0};
  /// Longest connect of a new replica connection, in milliseconds, unless the connection string
  /// sets connect_timeout. Must be positive (std::invalid_argument).
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds statement_timeout{1000};  ///< statement_timeout on replica connections
  std::chrono::milliseconds retry_after{1000};  ///< skip the replica after a failed read; 0: never
};

/// What the replica read path did, since the store was made. Every claim of a store with a
/// replica counts once, as a hit or a fall-through.
struct ReplicaCounters {
  /// Claims answered from the replica (a replay, a remembered failure, or a payload mismatch)
  /// without a statement on the primary.
  std::uint64_t hits = 0;
  /// Claims passed on to the primary: no settled live record on the replica, the replica failing
  /// or resting after a failure, or every replica connection busy.
  std::uint64_t fall_throughs = 0;
  std::uint64_t errors = 0;  ///< replica reads that failed; each is also a fall-through
};

struct PostgresStoreOptions {
  /// The primary's connection string, the table prefix and each connection's timeouts. The
  /// primary: a read-only server (hot standby) fails every call with store_unavailable.
  postgres::ConnectionOptions connection{};
  SqlMode mode = SqlMode::lease;  ///< lease (default) or transactional; see idem::SqlMode
  postgres::PoolOptions pool{};  ///< how many connections, and how long a call waits for a free one
  PostgresReplicaOptions replica{};  ///< opt-in replay reads from a replica (default: none)
};

namespace sql {
class ReplicaReads;  // src/sql/replica_reads.hpp
}  // namespace sql
namespace postgres::detail {
class PgWaker;  // src/postgres/pg_waker.hpp
}  // namespace postgres::detail

/// The unique-index record strategy on PostgreSQL. Thread-safe: a pool of connections; a broken
/// one is dropped and a new one opened on demand, so the store recovers after a server restart.
/// In transactional mode a duplicate claim blocks on the holder's row lock for at most
/// ClaimRequest::block_for (lock_timeout), then replays; zero: errc::in_progress at once. With a
/// replica, a claim first reads the key there (1 statement): a live completed or failed record
/// answers without the primary, anything else goes on to the primary (docs/sql.md, "Replicas").
/// A WakingStore: a caller waiting for a holder (the Wait policy) is woken when the hold ends, by
/// any process (docs/sql.md, "Waking a waiting duplicate").
class PostgresStore : public SqlStore {
 public:
  static constexpr std::string_view kStoreName = "postgres";  // observers' label
  /// Connects lazily: an unreachable server shows as errc::store_unavailable from the calls,
  /// never as an exception here. Throws std::invalid_argument for an empty uri, a zero pool size
  /// (also the replica's, when it has a uri) or a table prefix with other characters than
  /// letters, digits and '_'.
  explicit PostgresStore(PostgresStoreOptions options);

  /// The replica read path's counters; all zero without a replica. stats().parts has them too
  /// (idem::ReplicaStats), with the replica's pool.
  ReplicaCounters replica_counters() const noexcept;

  /// Returns once the record held.key is no longer held under held.fence (committed, aborted,
  /// released, forgotten, purged or taken over, by any process), or once `bound` has passed
  /// (plus a statement's deadline). Lease mode: the caller counts itself in the record (one
  /// statement, only while that hold lives; else it returns at once) and waits for the wake the
  /// hold's end then sends (NOTIFY), heard by the store's one listening connection. Transactional
  /// mode: it waits on the key's lock for the holder's transaction to end, on a connection of the
  /// pool. Reports nothing: a failure is a return.
  void await_change(const Ticket& held, std::chrono::milliseconds bound);

 private:
  explicit PostgresStore(std::pair<PostgresStoreOptions, std::shared_ptr<sql::ReplicaReads>> parts);

  std::shared_ptr<sql::ReplicaReads> replica_;
  std::shared_ptr<postgres::detail::PgWaker> waker_;  // listens from the first await_change
};

static_assert(WakingStore<PostgresStore>);

}  // namespace idem
