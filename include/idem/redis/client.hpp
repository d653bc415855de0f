#pragma once
// idem::redis::Client: a thread-safe pool of connections to one Redis server, shared by the Redis
// stores (RedisStore, RedisTokenStore, RequestIdCache). Part of the compiled adapter idem::redis;
// no hiredis type appears here.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/redis/stats.hpp"
#include "idem/result.hpp"
#include "idem/store_stats.hpp"

namespace idem::redis {

/// TLS on every connection to the server (`rediss://`). Off by default; each field has a default,
/// so setting one keeps the others. The files are read once per Client (or AsyncRedisStore), by
/// its first connect; a file that cannot be used fails every call with errc::config_invalid.
struct TlsOptions {
  /// Speak TLS (a `rediss://` URI sets it).
  bool enabled = false;
  /// PEM file of the authorities the server's certificate must chain to; empty (default) with
  /// ca_dir empty too: the system's default authorities.
  std::string ca_file{};
  /// Folder of authorities in OpenSSL's hashed layout (`openssl rehash`); empty (default): none.
  std::string ca_dir{};
  /// PEM client certificate for servers that require one (`tls-auth-clients yes`), with its
  /// unencrypted PEM key in key_file; both empty (default): none.
  std::string cert_file{};
  std::string key_file{};
  /// The name sent as SNI and checked against the server's certificate; empty (default): the
  /// host connected to (in cluster mode, each node's address from the slot map).
  std::string server_name{};
  /// Check the server's certificate and name (default true). false accepts ANY certificate: the
  /// traffic is encrypted but a man in the middle can read and change it. Unsafe; for tests.
  bool verify = true;
};

/// Where and how to connect. Every field has a default; most services set a URI.
struct ConnectionOptions {
  /// TCP host name or address (ignored when unix_socket is set).
  std::string host = "127.0.0.1";
  /// TCP port.
  int port = 6379;
  /// Path of a unix socket; empty (default): connect over TCP.
  std::string unix_socket{};
  /// ACL user for AUTH; empty (default): the default user.
  std::string user{};
  /// Password for AUTH; empty (default): no AUTH.
  std::string password{};
  /// Database selected on every new connection (default 0).
  int db = 0;
  /// How long opening a connection may take (default 1 s).
  std::chrono::milliseconds connect_timeout{1000};
  /// How long one command may wait for its reply (default 1 s); a connection that times out is
  /// dropped, since its reply may still arrive later.
  std::chrono::milliseconds command_timeout{1000};
  /// Most open connections (default 8); they open on demand and are reused.
  std::size_t pool_size = 8;
  /// How long a call waits for a free connection when all are busy (default 1 s); then
  /// errc::store_unavailable.
  std::chrono::milliseconds pool_wait{1000};
  /// Shared connections for automatic pipelining (default 2): the stores' script calls from all
  /// threads travel over these few connections together, so one write and one read serve many
  /// callers. 0: every call borrows a pooled connection of its own. Calls followed by WAIT
  /// (Durability) and Client::command always use the pool.
  std::size_t pipeline_connections = 2;
  /// Connections on which waiting duplicates block for a holder's end (RedisStore::await_change:
  /// BLPOP), apart from the pool and the pipelines (default 64): one per waiter blocked on this
  /// server at once, opened on demand and kept. A waiter that finds them all busy waits for one
  /// within its bound. 0: no blocking wait; await_change pauses for its bound instead (polling).
  std::size_t wait_connections = 64;
  /// TCP keep-alive on every connection (default on).
  bool keep_alive = true;
  /// A write to a socket the server closed raises SIGPIPE, which kills the process by default.
  /// true (default): the Client sets SIGPIPE to SIG_IGN if it is still at SIG_DFL. false: the
  /// application handles SIGPIPE itself.
  bool ignore_sigpipe = true;
  /// TLS (default off; docs/redis.md, "TLS").
  TlsOptions tls{};

  /// Parses `redis://[[user]:password@]host[:port][/db]`, the same with `rediss://` (TLS; query
  /// parameters ca_file, ca_dir, cert_file, key_file, server_name, percent-encoded, and
  /// verify=no), and `unix://[[user]:password@]/path/to/socket[?db=N]`. Other fields keep their
  /// defaults. errc::config_invalid with a message (the password shown as ***) when the URI
  /// cannot be used.
  static Result<ConnectionOptions> from_uri(std::string_view uri);
};

/// A Redis Cluster: where to read the slot map from, and how to connect to each node.
struct ClusterOptions {
  /// "host:port" of one or more nodes ("[::1]:7000" for IPv6). The client reads the slot map
  /// (CLUSTER SLOTS) from the first that answers and finds the other nodes there.
  std::vector<std::string> seeds{};
  /// The options of every node's pool (pool_size, timeouts, user, password...) except the
  /// address, which comes from the seeds and the slot map. A cluster has only database 0 and
  /// speaks TCP only: `db` and `unix_socket` must stay at their defaults. With node.tls on, the
  /// nodes must announce their TLS ports (`tls-cluster yes`).
  ConnectionOptions node{};
  /// Most redirections (MOVED, ASK) and retries after a failed node that one call follows
  /// (default 16). Whatever this allows, a call ends within node.connect_timeout +
  /// node.command_timeout of its start.
  int max_attempts = 16;

  /// Parses `redis+cluster://[[user]:password@]host:port[,host:port...]`: the seeds, and the
  /// user and password of every node; `rediss+cluster://` speaks TLS to every node and takes
  /// ConnectionOptions::from_uri's TLS query parameters after the seeds. Other fields keep their
  /// defaults. errc::config_invalid with a message (the password shown as ***) when the URI cannot
  /// be used.
  static Result<ClusterOptions> from_uri(std::string_view uri);
};

/// The hash slot (0-16383) Redis Cluster puts `key` in: CRC16 (XMODEM) of the key's hash tag
/// (the bytes between the first '{' and the next '}', when not empty), else of the whole key,
/// modulo 16384.
std::uint16_t key_slot(std::string_view key) noexcept;

/// Optional durability: after a claim that acquired and after a commit, `WAIT replicas timeout`
/// on the same connection, so on the primary that took the write (in cluster mode: the primary
/// of the key's slot). One more round trip per write when on.
///
/// A commit that fewer replicas acknowledged in time fails with errc::outcome_unknown ("commit
/// not confirmed"): the guard hands the value back with recorded() == false and that failure, so
/// the caller knows a failover could still lose the record. The record stands on the primary and
/// replays while it lives there. A claim's shortfall is only reported (on_timeout, the store's
/// replication_timeouts()): the handler runs, and its confirmed commit confirms the claim too.
struct Durability {
  /// Replicas that must acknowledge the write; 0 (default): no WAIT.
  int replicas = 0;
  /// How long WAIT blocks for them (default 100 ms).
  std::chrono::milliseconds timeout{100};
  /// Called when fewer replicas acknowledged in time, from the calling thread. Arguments: the
  /// operation ("claim", "commit"), acknowledged, wanted.
  std::function<void(std::string_view operation, int acknowledged, int wanted)> on_timeout{};
};

/// A reply to Client::command, converted from the wire.
struct Reply {
  enum class Type : std::uint8_t { nil, status, error, integer, string, array };
  Type type = Type::nil;
  long long integer = 0;          // Type::integer
  std::string str{};              // Type::string, status and error: the bytes
  std::vector<Reply> elements{};  // Type::array
};

/// A pool of connections to one server, or one pool per node of a Redis Cluster. Thread-safe:
/// any number of threads may call it; each call borrows a connection for its duration.
/// Connections open on demand (up to pool_size per server); a connection that fails (I/O error,
/// timeout, closed by the server) is dropped and the next call opens a fresh one, so a restarted
/// server is reached again without intervention.
///
/// In cluster mode each call goes to the primary that serves its key's slot (see key_slot). A
/// MOVED reply updates the slot map and the call is sent again; an ASK reply sends it once to
/// the importing node after ASKING; a node that cannot be reached makes the client re-read the
/// slot map (CLUSTER SLOTS) and try again, within the call's deadline.
class Client {
 public:
  /// Connects lazily: the constructor never blocks and never fails on an unreachable server.
  explicit Client(ConnectionOptions options = {});
  /// Cluster mode. Also lazy: the slot map is read by the first call. Throws
  /// std::invalid_argument for options no cluster allows: no seeds, a seed that is not
  /// host:port, node.db other than 0, node.unix_socket set.
  explicit Client(ClusterOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// One command, binary-safe arguments. An error reply is a Reply of Type::error; failures are
  /// errc::store_unavailable (unreachable, timed out, pool exhausted). One round trip. Each call
  /// may run on another pooled connection: commands that change a connection's state (SELECT,
  /// MULTI, SUBSCRIBE, CLIENT SETNAME) leave it on whichever connection ran them; avoid them.
  /// In cluster mode the command goes to the node that serves its first argument's slot (the
  /// key of every single-key command), redirections followed.
  Result<Reply> command(std::span<const std::string_view> argv);
  Result<Reply> command(std::initializer_list<std::string_view> argv) {
    return command(std::span<const std::string_view>(argv.begin(), argv.size()));
  }

  /// PING: whether the server answers now (in cluster mode: every primary of the slot map).
  Status ping();

  /// Whether this client was built from ClusterOptions.
  bool is_cluster() const noexcept;
  /// The connection options (in cluster mode: those of every node).
  const ConnectionOptions& options() const noexcept;
  /// Connections open now (idle and borrowed), all servers together.
  std::size_t open_connections() const;
  /// Connections dropped because they failed or were found closed, since construction.
  std::uint64_t dropped_connections() const noexcept;
  /// The figures the Redis stores over this client report (their stats()): the connection
  /// pools summed over the servers (StoreStats::pool), the pipelines, and in cluster mode the
  /// redirections followed and slot maps read (StoreStats::redis). `store` is "redis".
  StoreStats stats() const;

  class Impl;  // declared in src/redis/, where idem's Redis stores reach it (impl_of)

 private:
  friend Impl& impl_of(Client& client) noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace idem::redis
