#pragma once
// MemoryRequestIdCache: the gateway's request-ID response cache in process memory, bounded, with
// counted eviction: a MemoryStore and the guard that claims through it. Header-only; the Redis
// twin is RequestIdCache.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

#include "idem/clock.hpp"
#include "idem/guard.hpp"
#include "idem/key.hpp"
#include "idem/options.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"
#include "idem/stores/memory_store.hpp"

namespace idem {

struct MemoryRequestIdCacheOptions {
  /// The guard behind execute(): scope (unset: "request-id"), lease, ttl (how long a response
  /// is replayed; unset: 10 min), in-progress policy and observer. Fields left unset keep these
  /// defaults (idem::Options).
  Options guard{};
  /// Most entries kept (default 100 000). When full, a new request id evicts the oldest entry
  /// that is not in progress (counted in evictions()); expired entries go first, uncounted.
  std::size_t capacity = 100'000;
  /// Independent shards, each with its own lock (default 16).
  std::size_t shards = 16;
  /// Time source for leases and expiry (default: steady clock).
  std::shared_ptr<Clock> clock = nullptr;
};

/// Per (principal, request id), the first request runs fn and its response is replayed to
/// repeats for ttl; a concurrent duplicate gets errc::in_progress (or waits). Same behaviour as
/// RequestIdCache, in one process, on a bounded MemoryStore.
///
/// It is that MemoryStore plus an IdempotencyGuard over it; the scope is the guard's alone. Also
/// an idem::Store over the guard's effective keys (it forwards to the MemoryStore), so it can be
/// a RequestIdLayer of a LayeredGuard. Thread-safe.
class MemoryRequestIdCache {
 public:
  /// What the guard options' unset fields become (idem::Options).
  static constexpr OptionDefaults kDefaults{.scope = "request-id", .ttl = std::chrono::minutes{10}};

  /// The two-phase handle of begin<T>() (see idem::Attempt).
  template <class T>
  using Attempt = typename IdempotencyGuard<MemoryStore>::template Attempt<T>;

  /// Throws std::invalid_argument when the guard options are out of range.
  explicit MemoryRequestIdCache(MemoryRequestIdCacheOptions options = {})
      : entries_(MemoryStoreOptions{.shards = options.shards,
                                    .capacity = options.capacity,
                                    .clock = std::move(options.clock)}),
        guard_(entries_, with_defaults(std::move(options.guard), kDefaults)) {}
  MemoryRequestIdCache(const MemoryRequestIdCache&) = delete;
  MemoryRequestIdCache& operator=(const MemoryRequestIdCache&) = delete;

  /// Runs fn once per request id (idem::Key{request_id, principal}); repeats replay.
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(const Key& request, Fn&& fn) {
    return guard_.execute(request, std::forward<Fn>(fn));
  }
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(const Key& request, std::string_view payload,
                                                      Fn&& fn) {
    return guard_.execute(request, payload, std::forward<Fn>(fn));
  }

  /// The two-phase form of execute(): claims the request id and returns an Attempt that answers
  /// (outcome(): a replayed response or a refusal) or holds the id until its commit(value) or
  /// fail(message); fail() frees the id for a retry. The cache must outlive it.
  template <class T>
  [[nodiscard]] Attempt<T> begin(const Key& request, std::string_view payload = {}) {
    return guard_.template begin<T>(request, payload);
  }

  /// The guard's options; options().scope is the scope of every entry.
  const Options& options() const noexcept { return guard_.options(); }
  /// Entries held now, of every state.
  std::size_t size() const { return entries_.size(); }
  /// Entries evicted by the capacity bound.
  std::uint64_t evictions() const noexcept { return entries_.evictions(); }
  /// Removes expired entries; returns how many went.
  std::size_t purge_expired() { return entries_.purge_expired(); }

  // --- idem::Store, over the guard's effective keys --------------------------------------------
  Result<Claim> claim(const ClaimRequest& request) { return entries_.claim(request); }
  Status commit(const Ticket& ticket, const Completion& completion) {
    return entries_.commit(ticket, completion);
  }
  Status abort(const Ticket& ticket) { return entries_.abort(ticket); }
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    return entries_.extend(ticket, lease);
  }

 private:
  MemoryStore entries_;                  // first: the guard refers to it
  IdempotencyGuard<MemoryStore> guard_;  // holds the scope
};

static_assert(Store<MemoryRequestIdCache>);

}  // namespace idem
