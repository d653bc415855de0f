#pragma once
// AsyncRedisStore: RedisStore's records, scripts and key layout on connections driven by
// Boost.Asio: one connection carries every call in flight. In the compiled library
// idem::asio_redis; no hiredis type appears here.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "idem/asio/async_store.hpp"
#include "idem/redis/client.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

struct AsyncRedisStoreOptions {
  /// Where and how to connect: host and port or unix_socket, user, password, db,
  /// connect_timeout, command_timeout, keep_alive, ignore_sigpipe and wait_connections (the
  /// connections on which waiting duplicates block: async_await_change). The pool's other fields
  /// do not apply: there is one connection for the calls (per node, on a cluster). command_timeout
  /// bounds the wait of the oldest call in flight: when no reply comes for that long, the
  /// connection is dropped and every call on it fails. On a cluster: the options of every node's
  /// connection except the address, which comes from the seeds and the slot map
  /// (ClusterOptions::node); db and unix_socket must stay at their defaults (the constructor throws
  /// std::invalid_argument).
  redis::ConnectionOptions connection{};
  /// Redis Cluster mode when not empty (ClusterOptions::seeds): "host:port" of one or more
  /// nodes ("[::1]:7000" for IPv6). The slot map (CLUSTER SLOTS) is read from the first that
  /// answers, on the first call, and each call goes to the primary of its key's slot.
  std::vector<std::string> cluster_seeds{};
  /// On a cluster, the most sends one call makes (ClusterOptions::max_attempts, default 16):
  /// redirections (MOVED, ASK), retries after TRYAGAIN or CLUSTERDOWN, and one retry after a
  /// failed node once the slot map is read again. Whatever this allows, a call sends nothing
  /// more, and stops waiting for a slot map, once connect_timeout + command_timeout have passed
  /// since its start; a send already out waits for its reply as long as the connection's
  /// watchdog allows (up to about 1.5 × command_timeout).
  int max_attempts = 16;
  /// Prepended to every record's Redis key (default "idem:"), as RedisStoreOptions::prefix: a
  /// RedisStore and an AsyncRedisStore with the same prefix share their records.
  std::string prefix = "idem:";
  /// Optional WAIT for replicas after a claim that acquired and after a commit (default off),
  /// as RedisStoreOptions::durability: a commit that fewer replicas acknowledged in time fails
  /// with errc::outcome_unknown, a claim's shortfall is only reported. WAIT runs on the
  /// connection that carried the write, which the other calls to that server share: while it
  /// waits (up to durability.timeout when replicas lag), the replies behind it wait too, so keep
  /// command_timeout well above durability.timeout.
  redis::Durability durability{};
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
/// One connection, opened on the first call, multiplexes every call in flight: the commands of
/// a turn of the executor go out in one write, and the replies are matched in order. A connection
/// that fails or times out is dropped; its calls fail (store_unavailable, or outcome_unknown for a
/// commit that went out) and the next call after the backoff opens a new one.
///
/// On a Redis Cluster (cluster_seeds), each call goes to the primary that serves its key's slot,
/// on that node's own multiplexed connection, opened on demand: MOVED updates the slot map and
/// resends, ASK resends once to the importing node after ASKING, TRYAGAIN and CLUSTERDOWN pause
/// and resend, and a failed node makes the map be read again before one more try (RedisStore's
/// routing, with the same slot map parsing and key hashing).
///
/// Thread-safe: calls may come from coroutines on any thread; the connections are driven on a
/// strand of `executor`. Destroy the store after every call on it has completed, with its
/// executor's io_context still alive.
class AsyncRedisStore {
 public:
  static constexpr std::string_view kStoreName = "redis";  // observers' label

  /// Never connects (the first call does). Throws std::invalid_argument for cluster options no
  /// cluster allows: db other than 0, unix_socket set, a seed that is not host:port.
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

  /// idem::AsyncWakingStore: whether waiting duplicates wait on the server
  /// (connection.wait_connections above 0).
  bool wakes() const noexcept;
  /// Waits for the end of the hold `held`, as RedisStore::await_change: record_wait.lua counts
  /// the waiter in the record, then BLPOP on the hold's wake list until the commit, abort or
  /// takeover pushes its wake or `bound` passes; on a wait connection of its own (up to
  /// connection.wait_connections, opened on demand and kept; on a cluster, per node, to the node
  /// that serves the record's slot), never the connection the other calls share. False at once
  /// when every wait connection is busy, or on a cluster when no slot map names the slot's node
  /// yet or the slot moved (MOVED); a connection that fails or stalls is dropped by its watchdog
  /// once `bound` and command_timeout have passed.
  boost::asio::awaitable<bool> async_await_change(const Ticket& held,
                                                  std::chrono::milliseconds bound);

  /// The Redis key that holds the record of `effective_key` (RedisStore::record_key's).
  std::string record_key(std::string_view effective_key) const;
  /// Connections opened since construction (the first included; on a cluster, to all nodes).
  std::uint64_t connections_opened() const noexcept;
  /// On a cluster: MOVED and ASK redirections followed, and slot maps installed, since
  /// construction (RedisStats::moved, asked, slot_map_reads); 0 on one server.
  std::uint64_t moved() const noexcept;
  std::uint64_t asked() const noexcept;
  std::uint64_t slot_map_reads() const noexcept;
  /// Writes for which WAIT returned fewer replicas than Durability::replicas asked for.
  std::uint64_t replication_timeouts() const noexcept;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
  std::string prefix_;
};

static_assert(AsyncWakingStore<AsyncRedisStore>);

}  // namespace idem
