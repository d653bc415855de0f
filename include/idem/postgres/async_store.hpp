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
  /// As PostgresStoreOptions::connection: the same table prefix shares records with a
  /// PostgresStore in lease mode.
  postgres::ConnectionOptions connection{};
  /// After a failed or lost connection, calls fail at once (store_unavailable) until this pause
  /// has passed; it doubles up to max_reconnect_backoff, and starts over once connected.
  std::chrono::milliseconds reconnect_backoff{50};
  std::chrono::milliseconds max_reconnect_backoff{2000};
  /// true: every coroutine that calls the store runs on the one thread that runs its executor's
  /// io_context, so calls skip the strand and replies the post. false (default): any thread.
  bool single_threaded = false;
};

/// The unique-index record strategy on PostgreSQL in lease mode, as an idem::AsyncStore: the same
/// table and statements as PostgresStore, so the two can serve the same keys (docs/async.md).
/// One connection in libpq's pipeline mode, each call its own transaction, replies matched in
/// order. A connection that fails, or whose oldest call waited statement_timeout + 1 s, is
/// dropped: its calls fail with store_unavailable, or outcome_unknown for a commit that went out.
/// Transactional mode is not offered (one shared pipelined connection cannot hold a handler's
/// transaction). Thread-safe (a strand of `executor` unless single_threaded). Destroy it after
/// every call on it has completed, with its executor's io_context still alive.
///
/// A waiting duplicate is woken (idem::AsyncWakingStore): async_await_change counts the waiter
/// in the record, as PostgresStore's await_change does, and waits for the NOTIFY the end of the
/// hold sends (commit, abort, takeover, admin release or forget, purge, from any process),
/// heard by one listening connection per store, apart from the pipeline and opened by the first
/// wait (docs/async.md).
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

  /// Always true: every store waits on its listener.
  bool wakes() const noexcept;
  /// Completes (true) once the hold `held` has ended or been taken over, once `bound` has
  /// passed, when the listener loses its connection (the wake may be lost: the caller claims
  /// again), or at once when the caller's coroutine is cancelled. Its count-in statement, on the
  /// pipeline, may add the pipeline's reply deadline to `bound`. Never blocks the event loop.
  boost::asio::awaitable<bool> async_await_change(const Ticket& held,
                                                  std::chrono::milliseconds bound);

  /// Connections opened since construction (the first included).
  std::uint64_t connections_opened() const noexcept;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

static_assert(AsyncWakingStore<AsyncPostgresStore>);

}  // namespace idem
