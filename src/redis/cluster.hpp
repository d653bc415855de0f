#pragma once
// Redis Cluster for the blocking face: the routing core (slot_routing.hpp) over Nodes, each try
// a blocking Node::execute within the call's deadline. Internal to idem_redis.

#include <cstdint>
#include <mutex>
#include <string_view>

#include "idem/redis/client.hpp"
#include "idem/result.hpp"
#include "node.hpp"
#include "slot_routing.hpp"

namespace idem::redis {

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
  // Re-reads the slot map unless another call did since `seen` (the generation it routed
  // with). Asks the known nodes in turn, `failed` last (SlotMapRead).
  Status refresh(std::uint64_t seen, Deadline deadline, const Node* failed = nullptr);

  ClusterOptions options_;
  Topology<Node> topology_;
  std::timed_mutex refresh_mutex_;  // one re-read at a time
};

}  // namespace idem::redis
