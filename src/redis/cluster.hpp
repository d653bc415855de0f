#pragma once
// Redis Cluster routing: the slot map (which primary serves each of the 16384 hash slots), and
// the loop that sends a call to its slot's primary and follows MOVED, ASK and failed nodes.
// Each server is a Node (node.hpp); this file never talks to a connection directly.
// Internal to idem_redis.

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/redis/client.hpp"
#include "idem/result.hpp"
#include "node.hpp"

namespace idem::redis {

inline constexpr std::size_t kSlots = 16384;

/// A redirection reply: `MOVED <slot> <host>:<port>` or `ASK <slot> <host>:<port>`.
struct Redirect {
  bool ask = false;
  std::uint16_t slot = 0;
  std::string host;
  int port = 0;
};
/// Parses a MOVED or ASK error reply; nullopt for any other reply.
std::optional<Redirect> parse_redirect(const redisReply& reply);

/// One range of a CLUSTER SLOTS reply: slots first..last served by the primary at host:port.
struct SlotRange {
  std::uint16_t first = 0;
  std::uint16_t last = 0;
  std::string host;
  int port = 0;
};
/// Parses a CLUSTER SLOTS reply read from the node at `from_host` (an empty or unknown "?"
/// endpoint means that address); nullopt when the reply is not one. Shared with
/// AsyncRedisStore's routing.
std::optional<std::vector<SlotRange>> parse_cluster_slots(const redisReply& reply,
                                                          std::string_view from_host);

/// A node's name in maps and messages: "host:port", "[host]:port" for IPv6.
std::string node_address(std::string_view host, int port);

/// The pause before try `attempt` after TRYAGAIN, CLUSTERDOWN or a failed node: 1 ms, doubling,
/// at most 100 ms.
std::chrono::milliseconds retry_pause(int attempt) noexcept;

class Cluster {
 public:
  explicit Cluster(ClusterOptions options);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  /// Runs `call` on the primary that serves `key`'s slot. MOVED updates the map and resends;
  /// ASK resends once to the named node after ASKING; TRYAGAIN and CLUSTERDOWN pause and
  /// resend (after CLUSTERDOWN, from a map read from the other nodes first); a node that fails
  /// (refused, timed out, closed) makes the map be re-read before the next try. At most
  /// max_attempts tries, all within connect_timeout + command_timeout. Giving up after a try of
  /// a Call::report_in_doubt went out unanswered is errc::outcome_unknown.
  Result<Answer> execute(std::string_view key, Call call);

  /// PING on every primary of the slot map (read first if need be).
  Status ping();

  const ConnectionOptions& options() const noexcept { return options_.node; }
  std::size_t open_connections() const;
  std::uint64_t dropped() const;
  /// Every node's pool and pipeline, the redirections followed and the slot maps read.
  void add_stats(PoolStats& pool, RedisStats& redis) const;

 private:
  // The node at host:port, created on first use; nodes live as long as the Cluster.
  Node& node(const std::string& host, int port);
  // One node's CLUSTER SLOTS.
  struct SlotMap {
    std::vector<Node*> owners;     // by slot; null: served by nobody in this map
    std::vector<Node*> primaries;  // in the order the reply names them
    std::size_t served = 0;        // slots with an owner
  };

  // Re-reads the slot map unless another call did since `seen` (the generation it routed
  // with). Asks the known nodes in turn, `failed` last, until one gives a map that serves every
  // slot; the most complete map otherwise.
  Status refresh(std::uint64_t seen, Deadline deadline, const Node* failed = nullptr);
  // Whether the last map read names `n` as a primary.
  bool is_primary(const Node* n) const;
  // Reads CLUSTER SLOTS from `from`.
  Result<SlotMap> read_slots(Node& from, Deadline deadline);
  // Makes `map` the one calls route by.
  void install(SlotMap map);

  ClusterOptions options_;

  mutable std::mutex nodes_mutex_;
  std::map<std::string, std::unique_ptr<Node>> nodes_;  // by "host:port"
  std::vector<Node*> seeds_;
  std::vector<Node*> primaries_;  // of the last map read; under nodes_mutex_

  std::array<std::atomic<Node*>, kSlots> slots_{};  // null: not known (yet)
  std::atomic<std::uint64_t> generation_{0};        // maps installed so far
  std::atomic<std::uint64_t> moved_{0}, asked_{0};  // redirections followed (stats)
  std::timed_mutex refresh_mutex_;                  // one re-read at a time
};

}  // namespace idem::redis
