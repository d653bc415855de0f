#pragma once
// AsyncRedisStore: RedisStore's records, scripts and key layout on hiredis's asynchronous API,
// driven by Boost.Asio: one connection carries every call in flight. In the compiled library
// idem::asio_redis; no hiredis type appears here.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "idem/asio/async_store.hpp"
#include "idem/redis/client.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

struct AsyncRedisStoreOptions {
  /// Where and how to connect: host and port or unix_socket, user, password, db,
  /// connect_timeout and command_timeout. The pool's fields do not apply: there is one
  /// connection. command_timeout bounds the wait of the oldest call in flight: when no reply
  /// comes for that long, the connection is dropped and every call on it fails.
  redis::ConnectionOptions connection{};
  /// Prepended to every record's Redis key (default "idem:"), as RedisStoreOptions::prefix: a
  /// RedisStore and an AsyncRedisStore with the same prefix share their records.
  std::string prefix = "idem:";
  /// After a failed connection, calls fail at once (store_unavailable) until this pause has
  /// passed; it doubles after each failed attempt up to max_reconnect_backoff, and starts over
  /// once a connection is made.
  std::chrono::milliseconds reconnect_backoff{50};
  std::chrono::milliseconds max_reconnect_backoff{2000};
  /// true: every coroutine that calls the store runs on the one thread that runs its
  /// executor's io_context, so calls go straight to the connection instead of through a strand
  /// (one hop less per call). false (default): calls may come from any thread.
  bool single_threaded = false;
};

/// The unique-index record strategy on one Redis server, as an idem::AsyncStore: the same Lua
/// scripts (record_*.lua, by EVALSHA, loaded again by EVAL after NOSCRIPT) and the same key
/// layout as RedisStore (docs/design.md §12), so the two can serve the same keys.
///
/// One connection, opened on the first call, multiplexes every call in flight: hiredis writes
/// each command as it comes and matches the replies in order. A connection that fails or times
/// out is dropped; its calls fail (store_unavailable, or outcome_unknown for a commit that went
/// out) and the next call after the backoff opens a new one.
///
/// Thread-safe: calls may come from coroutines on any thread; the connection is driven on a
/// strand of `executor`. Destroy the store after every call on it has completed, with its
/// executor's io_context still alive.
class AsyncRedisStore {
 public:
  static constexpr std::string_view kStoreName = "redis";  // observers' label

  explicit AsyncRedisStore(const boost::asio::any_io_executor& executor,
                           AsyncRedisStoreOptions options = {});
  ~AsyncRedisStore();
  AsyncRedisStore(const AsyncRedisStore&) = delete;
  AsyncRedisStore& operator=(const AsyncRedisStore&) = delete;

  boost::asio::awaitable<Result<Claim>> async_claim(const ClaimRequest& request);
  boost::asio::awaitable<Status> async_commit(const Ticket& ticket, const Completion& completion);
  /// Releases the record, keeping its fence (the record is never deleted on abort).
  boost::asio::awaitable<Status> async_abort(const Ticket& ticket);
  boost::asio::awaitable<Status> async_extend(const Ticket& ticket,
                                              std::chrono::milliseconds lease);

  /// The Redis key that holds the record of `effective_key` (RedisStore::record_key's).
  std::string record_key(std::string_view effective_key) const;
  /// Connections opened since construction (the first included).
  std::uint64_t connections_opened() const noexcept;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
  std::string prefix_;
};

static_assert(AsyncStore<AsyncRedisStore>);

}  // namespace idem
