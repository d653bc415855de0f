#pragma once
// CachedStoreOptions: the bounds of a local replay cache (CachedStore, AsyncCachedStore).

#include <chrono>
#include <cstddef>
#include <memory>

#include "idem/clock.hpp"

namespace idem {

struct CachedStoreOptions {
  std::size_t shards = 16;  ///< independent shards, each with its own lock; a power of two
  /// Most cached records in all (split evenly over the shards). A full shard evicts its oldest
  /// record not replayed since it last looked (second chance: a replayed record moves to the
  /// back once, unmarked), counted in evictions().
  std::size_t max_entries = 100'000;
  /// Most bytes in all: key and result bytes plus a fixed per-record overhead (an estimate of
  /// the map node). A record larger than a shard's share is not cached.
  std::size_t max_bytes = std::size_t{64} << 20;                // 64 MiB
  std::chrono::milliseconds max_ttl = std::chrono::minutes{5};  ///< never past the backend's
  bool cache_failures = true;              ///< also cache failed records: they replay until expiry
  std::shared_ptr<Clock> clock = nullptr;  ///< for cache expiry (default: steady clock)
};

}  // namespace idem
