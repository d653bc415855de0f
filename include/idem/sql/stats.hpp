#pragma once
// ReplicaStats: a SQL store's replica reads, its own part of StoreStats
// (stats.parts.get<idem::ReplicaStats>()); PostgresStore with PostgresReplicaOptions has it.

#include <cstdint>
#include <string_view>

#include "idem/store_stats.hpp"

namespace idem {

/// Replay reads from a replica. Every claim counts once, as a hit or a fall-through.
struct ReplicaStats {
  std::uint64_t hits = 0;           ///< claims answered from the replica
  std::uint64_t fall_throughs = 0;  ///< claims passed on to the primary
  std::uint64_t errors = 0;         ///< failed replica reads (each also a fall-through)
  PoolStats pool{};                 ///< the replica's own connection pool

  /// As exporters show them: store_replica_reads_total{result=...} and the pool "replica".
  void report(StatSink& sink) const {
    sink.counters("store_replica_reads_total",
                  "claims read on the replica: answered there (hit) or passed to the primary",
                  "result", {{"hit", hits}, {"fall_through", fall_throughs}, {"error", errors}});
    sink.pool("replica", pool);
  }
};

}  // namespace idem
