#pragma once
// AsyncPostgresStore: PostgresStore's records, table and statements (lease mode) on libpq's
// asynchronous API in pipeline mode, driven by Boost.Asio: one connection carries every call in
// flight. In the compiled library idem::asio_postgres; no libpq type appears here.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "idem/asio/async_store.hpp"
#include "idem/postgres/options.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

struct AsyncPostgresStoreOptions {
  /// As PostgresStoreOptions::connection: a PostgresStore in lease mode and an
  /// AsyncPostgresStore with the same table prefix share their records. The client waits for
  /// the oldest call's reply up to statement_timeout plus 1 s; then the connection is dropped
  /// and every call on it fails.
  postgres::ConnectionOptions connection{};
  /// After a failed or lost connection, calls fail at once (store_unavailable) until this pause
  /// has passed; it doubles after each failed attempt up to max_reconnect_backoff, and starts
  /// over once a connection is made.
  std::chrono::milliseconds reconnect_backoff{50};
  std::chrono::milliseconds max_reconnect_backoff{2000};
  /// true: every coroutine that calls the store runs on the one thread that runs its
  /// executor's io_context, so calls go straight to the connection instead of through a strand,
  /// and each reply resumes its caller as it is read instead of through a post (no hop either
  /// way). false (default): calls may come from any thread.
  bool single_threaded = false;
};

/// The unique-index record strategy on PostgreSQL in lease mode, as an idem::AsyncStore: the
/// same table and statements as PostgresStore (src/sql/statements.cpp), so the two can serve
/// the same keys. Creates the tables on its first connection if they are missing.
///
/// One connection, opened on the first call, in libpq's pipeline mode: each call is sent as it
/// comes (a prepared statement and a sync point of its own, so each is its own transaction) and
/// the replies are matched in order. A connection that fails, or on which the oldest call has
/// waited statement_timeout + 1 s for its reply, is dropped: its calls fail with
/// store_unavailable, or outcome_unknown for a commit that went out (a retry under the same
/// fence finds it if it landed). The next call after the backoff opens a new one.
///
/// Transactional mode is not offered: its claim keeps a transaction open on a connection for
/// the handler's whole run, which one shared pipelined connection cannot do (docs/async.md).
///
/// Thread-safe: calls may come from coroutines on any thread; the connection is driven on a
/// strand of `executor` (unless single_threaded). Destroy the store after every call on it has
/// completed, with its executor's io_context still alive.
class AsyncPostgresStore {
 public:
  static constexpr std::string_view kStoreName = "postgres";  // observers' label

  /// Connects lazily. Throws std::invalid_argument for an empty uri or a table prefix with
  /// other characters than letters, digits and '_'.
  explicit AsyncPostgresStore(const boost::asio::any_io_executor& executor,
                              AsyncPostgresStoreOptions options);
  ~AsyncPostgresStore();
  AsyncPostgresStore(const AsyncPostgresStore&) = delete;
  AsyncPostgresStore& operator=(const AsyncPostgresStore&) = delete;

  boost::asio::awaitable<Result<Claim>> async_claim(const ClaimRequest& request);
  boost::asio::awaitable<Status> async_commit(const Ticket& ticket, const Completion& completion);
  /// Releases the record, keeping its fence.
  boost::asio::awaitable<Status> async_abort(const Ticket& ticket);
  boost::asio::awaitable<Status> async_extend(const Ticket& ticket,
                                              std::chrono::milliseconds lease);

  /// Connections opened since construction (the first included).
  std::uint64_t connections_opened() const noexcept;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

static_assert(AsyncStore<AsyncPostgresStore>);

}  // namespace idem
