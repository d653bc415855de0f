#pragma once
// One Redis server: its connection pool, and Node::execute, the single entry point that runs one
// call (a command or a script, with what must share its connection) on that server. Everything
// above it (Client::Impl's routing, the stores) reaches a server only through Node::execute.
// Internal to idem_redis.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "common/connection_pool.hpp"
#include "idem/redis/client.hpp"
#include "idem/result.hpp"
#include "idem/store_stats.hpp"
#include "protocol.hpp"
#include "socket.hpp"

namespace idem::redis {

/// A node's blocking connections (src/common/connection_pool.hpp).
using ConnectionPool = idem::detail::ConnectionPool<BlockingConnection>;

/// What one call sends to one server. Its commands run back to back on one connection: ASKING
/// must directly precede the command it admits, and WAIT counts the writes of its connection.
struct Call {
  /// The command. For a script: EVALSHA <sha> <numkeys> keys... args... with `script` set.
  std::span<const std::string_view> argv;
  /// The script argv runs; on NOSCRIPT argv is sent once more as EVAL with its source.
  const Script* script = nullptr;
  /// Send ASKING first: the server is importing the key's slot (an ASK redirection).
  bool asking = false;
  /// After a reply that `wrote` accepts, `WAIT wait_replicas wait_timeout`; 0: no WAIT.
  int wait_replicas = 0;
  std::chrono::milliseconds wait_timeout{0};
  bool (*wrote)(const redisReply&) = nullptr;
  /// A commit: when argv went out and no reply came (I/O error, timeout, closed), the server may
  /// have run it, and the failure is errc::outcome_unknown instead of store_unavailable.
  bool report_in_doubt = false;
  /// A blocking call (RedisStore::await_change): `argv`, then `then`, in one write on a
  /// connection of the node's wait pool (never the pipeline or the command pool, which a
  /// blocked connection would hold up), their replies due within `blocks_for` and a short slack.
  /// The answer is then's reply. Zero: an ordinary call.
  std::span<const std::string_view> then{};
  std::chrono::milliseconds blocks_for{0};
};

/// How much longer than a blocking command's own timeout its reply may take: the server's
/// answer at that timeout is on its way by then, unless the server or the network stalls.
inline std::chrono::milliseconds blocking_slack(const ConnectionOptions& options) noexcept {
  return std::min(options.command_timeout, std::chrono::milliseconds{100});
}

/// A server's answer to a Call.
struct Answer {
  /// The reply; error replies (MOVED, ASK, WRONGTYPE...) are replies, not failures.
  ReplyPtr reply;
  /// Replicas that acknowledged the WAIT, 0 when WAIT failed; -1 when no WAIT ran.
  int acknowledged = -1;
  /// The server that answered ("host:port"), for messages; lives as long as the Client.
  std::string_view where;
};

class Pipeline;

/// One server: a pool of blocking connections (socket.hpp) (pool_size of them at most, a call
/// waiting up to pool_wait for one; one idle for 100 ms or more is checked before it is lent) and,
/// unless pipeline_connections is 0, a pipeline over a few shared ones (pipeline.hpp) for script
/// calls. Thread-safe.
class Node {
 public:
  /// `tls`: the client's TLS context, null when options.tls is off.
  Node(ConnectionOptions options, std::shared_ptr<const TlsContext> tls);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// THE entry point to a server: runs `call` on one connection (borrowed from the pool, or, with
  /// automatic pipelining, shared) and returns its reply. I/O failures and timeouts are
  /// errc::store_unavailable (errc::outcome_unknown for a Call::report_in_doubt whose argv went
  /// out); the waits end by `deadline` at the latest.
  Result<Answer> execute(const Call& call, Deadline deadline = Deadline::max());

  const ConnectionOptions& options() const noexcept { return options_; }
  /// Pooled and pipelined connections open now.
  std::size_t open_connections() const;
  /// Pooled and pipelined connections dropped (failed, or found closed) since construction.
  std::uint64_t dropped() const noexcept;
  /// The pool's own counters (the pipeline's connections are not in them).
  idem::detail::PoolCounters pool_counters() const noexcept { return pool_.counters(); }
  /// Adds this server's pool to `pool` and its pipeline to `redis` (a Client's stats()).
  void add_stats(PoolStats& pool, RedisStats& redis) const;
  /// "host:port" or the socket path, for messages.
  const std::string& where() const noexcept { return where_; }

 private:
  // `check_closed`: look for a close by the server on any idle connection, however briefly idle.
  Result<ConnectionPool::Lease> acquire(Deadline deadline, bool check_closed = false);
  Result<Answer> send(const Call& call, Deadline deadline);
  // A call with Call::blocks_for, on a connection of waiters_.
  Result<Answer> send_blocking(const Call& call, Deadline deadline);

  ConnectionOptions options_;
  std::shared_ptr<const TlsContext> tls_;
  std::string where_;
  ConnectionPool pool_;
  ConnectionPool waiters_;  // the blocking calls' connections (wait_connections of them at most)
  std::unique_ptr<Pipeline> pipeline_;  // null when pipeline_connections is 0
};

}  // namespace idem::redis
