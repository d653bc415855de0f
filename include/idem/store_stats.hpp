#pragma once
// StoreStats: a store's own figures in one struct, read with the store's stats(): its connection
// pool, its replica reads, its Redis routing, its records in memory, as each store has them.
// What the guard sees of the calls (events, durations) is the Observer's; these are what the
// store itself holds and did. Reading them takes no store round trip. docs/operations.md lists
// them and what to watch.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace idem {

/// A connection pool: counts since the store was made, and what it holds now.
struct PoolStats {
  std::size_t size = 0;         ///< most connections open at once (the pool_size option)
  std::size_t in_use = 0;       ///< connections lent to a call, or being opened, now
  std::size_t idle = 0;         ///< connections open and idle now
  std::uint64_t opened = 0;     ///< connections opened
  std::uint64_t reused = 0;     ///< calls served by a connection already open
  std::uint64_t discarded = 0;  ///< connections closed after a failure, or found closed
  std::uint64_t waits = 0;      ///< calls that found every connection busy and queued
  std::uint64_t timeouts = 0;   ///< of those, calls that gave up (errc::store_unavailable)
};

/// PostgresStore's replay reads from a replica (PostgresReplicaOptions). Every claim counts
/// once, as a hit or a fall-through.
struct ReplicaStats {
  std::uint64_t hits = 0;           ///< claims answered from the replica
  std::uint64_t fall_throughs = 0;  ///< claims passed on to the primary
  std::uint64_t errors = 0;         ///< failed replica reads (each also a fall-through)
  PoolStats pool{};                 ///< the replica's own connection pool
};

/// A Redis client's figures beyond its pools, summed over its servers.
struct RedisStats {
  std::size_t servers = 0;                 ///< servers the client has connections for
  std::size_t pipeline_connections = 0;    ///< shared pipelining connections open now
  std::uint64_t pipeline_dropped = 0;      ///< of those, dropped after a failure
  std::uint64_t moved = 0;                 ///< Cluster: MOVED redirections followed
  std::uint64_t asked = 0;                 ///< Cluster: ASK redirections followed
  std::uint64_t slot_map_reads = 0;        ///< Cluster: slot maps read (CLUSTER SLOTS)
  std::uint64_t replication_timeouts = 0;  ///< writes WAIT confirmed on too few replicas
};

/// CachedStore's figures, beside those of the store it wraps.
struct CacheStats {
  std::uint64_t entries = 0;    ///< cached records now (expired ones not yet dropped included)
  std::uint64_t hits = 0;       ///< claims answered from the cache
  std::uint64_t misses = 0;     ///< claims passed on to the wrapped store
  std::uint64_t evictions = 0;  ///< cached records dropped by the entry or byte bound
};

/// GroupCommitStore's figures, beside those of the store it writes to.
struct GroupStats {
  std::uint64_t groups = 0;  ///< groups written
  std::uint64_t calls = 0;   ///< calls they carried (calls / groups: the mean group size)
};

/// One store's figures; a part is set when the store has it.
struct StoreStats {
  std::string_view store{};                  ///< the store's kStoreName ("memory", "sqlite", ...)
  std::optional<std::uint64_t> records{};    ///< records held now (in-memory stores)
  std::optional<std::uint64_t> evictions{};  ///< records evicted by the capacity bound (memory)
  std::optional<PoolStats> pool{};           ///< the connection pool (Redis: all servers' summed)
  std::optional<ReplicaStats> replica{};     ///< PostgresStore with a replica
  std::optional<RedisStats> redis{};         ///< the Redis stores
  std::optional<CacheStats> cache{};         ///< a CachedStore (the rest: its wrapped store's)
  std::optional<GroupStats> group{};         ///< a GroupCommitStore (the rest: its store's)
};

/// A store that reports its own figures.
template <class S>
concept HasStoreStats = requires(const S& s) {
  { s.stats() } -> std::convertible_to<StoreStats>;
};

/// `store`'s figures, or none when it has no stats(): what a wrapping store starts from before
/// adding its own part.
template <class S>
StoreStats stats_of(const S& store) {
  if constexpr (HasStoreStats<S>) {
    return store.stats();
  } else {
    return StoreStats{};
  }
}

}  // namespace idem
