#pragma once
// RedisStats: the Redis stores' own part of StoreStats (stats.parts.get<idem::RedisStats>()).

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "idem/store_stats.hpp"

namespace idem {

/// A Redis client's figures beyond its pools, summed over its servers.
struct RedisStats {
  std::size_t servers = 0;                 ///< servers the client has connections for
  std::size_t pipeline_connections = 0;    ///< shared pipelining connections open now
  std::uint64_t pipeline_dropped = 0;      ///< of those, dropped after a failure
  std::uint64_t moved = 0;                 ///< Cluster: MOVED redirections followed
  std::uint64_t asked = 0;                 ///< Cluster: ASK redirections followed
  std::uint64_t slot_map_reads = 0;        ///< Cluster: slot maps read (CLUSTER SLOTS)
  std::uint64_t replication_timeouts = 0;  ///< writes WAIT confirmed on too few replicas

  /// As exporters show them: store_redis_pipeline_connections (a gauge) and
  /// store_redis_events_total{event=...}.
  void report(StatSink& sink) const {
    sink.figure({.family = "store_redis_pipeline_connections",
                 .help = "shared pipelining connections open now",
                 .counter = false,
                 .value = pipeline_connections});
    sink.counters("store_redis_events_total",
                  "Redis routing and durability: pipelines dropped, cluster redirections, slot "
                  "maps read, writes short of replicas",
                  "event",
                  {{"pipeline_dropped", pipeline_dropped},
                   {"moved", moved},
                   {"asked", asked},
                   {"slot_map_read", slot_map_reads},
                   {"replication_timeout", replication_timeouts}});
  }
};

}  // namespace idem
