#pragma once
// MemoryRequestIdCache: the gateway's request-ID response cache in process memory, bounded.
// Header-only; the Redis twin is RequestIdCache.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

#include "idem/clock.hpp"
#include "idem/engine/guarded_records.hpp"
#include "idem/guard.hpp"
#include "idem/key.hpp"
#include "idem/memory/store.hpp"
#include "idem/options.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

struct MemoryRequestIdCacheOptions {
  /// The guard behind execute(): scope (unset: "request-id"), lease, ttl (unset: 10 min),
  /// in-progress policy, observer; unset fields keep these defaults.
  Options guard{};
  /// Most entries kept (default 100 000). When full, a new request id evicts the oldest entry not
  /// in progress (docs/stores.md); only a live entry's eviction counts in evictions().
  std::size_t capacity = 100'000;
  std::size_t shards = 16;  ///< independent shards, each with its own lock (default 16)
  std::shared_ptr<Clock> clock = nullptr;  ///< for leases and expiry (default: steady clock)
};

/// Per (principal, request id), the first request runs fn and its response replays to repeats
/// for ttl; a concurrent duplicate gets errc::in_progress (or waits): RequestIdCache in one
/// process, on a bounded MemoryStore with an IdempotencyGuard over it. Also an idem::Store over
/// the guard's effective keys (a RequestIdLayer of a LayeredGuard). Thread-safe.
class MemoryRequestIdCache : public detail::RequestIdFront<MemoryStore> {
 public:
  /// What the guard options' unset fields become (idem::Options).
  static constexpr OptionDefaults kDefaults{.scope = "request-id", .ttl = std::chrono::minutes{10}};

  /// Throws std::invalid_argument when the guard options are out of range.
  explicit MemoryRequestIdCache(MemoryRequestIdCacheOptions options = {})
      : RequestIdFront(with_defaults(std::move(options.guard), kDefaults),
                       MemoryStoreOptions{.shards = options.shards,
                                          .capacity = options.capacity,
                                          .clock = std::move(options.clock)}) {}

  // execute(), begin<T>(), options() and the idem::Store members come from RequestIdFront.

  /// Entries held now, of every state.
  std::size_t size() const { return records_.size(); }
  /// Entries evicted by the capacity bound.
  std::uint64_t evictions() const noexcept { return records_.evictions(); }
  /// Its figures: entries held and evictions (those of the MemoryStore underneath).
  StoreStats stats() const { return records_.stats(); }
  /// Removes expired entries; returns how many went.
  std::size_t purge_expired() { return records_.purge_expired(); }
};

static_assert(Store<MemoryRequestIdCache>);

}  // namespace idem
