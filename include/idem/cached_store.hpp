#pragma once
// CachedStore<S>: a local replay cache in front of any idem::Store (docs/design.md §12).

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>

#include "idem/cached_store_options.hpp"
#include "idem/detail/held_key_calls.hpp"
#include "idem/detail/replay_cache.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"
#include "idem/store_stats.hpp"

namespace idem {

/// Keeps recently completed records of the store S in process memory, so that a hot replay costs
/// no round trip (docs/design.md §12). It caches only what the backend confirmed, never an
/// in-progress record, and a cached record expires no later than the backend's (counted from
/// before the commit or claim, at most max_ttl).
/// S is the store type (owned, built from the trailing constructor arguments) or a reference type
/// (CachedStore<SqliteStore&>). Thread-safe when S is; one lock per shard, never held across a
/// call to S. Cost: a hit is one lookup under a shard lock and a copy of the result, with no
/// write but a flag on the record (the eviction order is kept when a shard is full, not on each
/// hit); a miss adds that lookup to S's claim; a fresh key adds two short critical sections.
template <class S>
class CachedStore : public detail::HeldKeyCalls<CachedStore<S>, std::remove_reference_t<S>> {
 public:
  using Inner = std::remove_reference_t<S>;
  static_assert(Store<Inner>, "idem::CachedStore<S>: S is not an idem::Store");

  template <class... Args>
  explicit CachedStore(CachedStoreOptions options, Args&&... inner_args)
      : inner_(std::forward<Args>(inner_args)...), cache_(std::move(options)) {}

  CachedStore(const CachedStore&) = delete;
  CachedStore& operator=(const CachedStore&) = delete;

  /// A live cached record of the request's payload replays without calling S; otherwise S's
  /// claim, whose completed or failed answer fills the cache. Another payload always goes to S.
  Result<Claim> claim(const ClaimRequest& request) {
    detail::ReplayCache::Miss miss;
    if (auto hit = cache_.lookup(request, miss)) return std::move(*hit);
    Result<Claim> claimed = inner_.claim(request);
    cache_.after_claim(miss, request, claimed);
    return claimed;
  }

  /// S's commit; on success the record is cached under the fingerprint its holder claimed with.
  Status commit(const Ticket& ticket, const Completion& completion) {
    const detail::ReplayCache::Committing at = cache_.before_commit(ticket);
    Status status = inner_.commit(ticket, completion);
    cache_.after_commit(at, ticket, completion, status);
    return status;
  }

  /// S's abort; only the holder's fingerprint is dropped (nothing is cached for a held key).
  Status abort(const Ticket& ticket) {
    Status status = inner_.abort(ticket);
    cache_.after_abort(ticket, status);
    return status;
  }

  /// The wrapped store.
  Inner& inner() noexcept { return inner_; }

  /// Claims answered from the cache (completed or failed) without calling S.
  std::uint64_t hits() const noexcept { return cache_.hits(); }
  /// Claims passed on to S.
  std::uint64_t misses() const noexcept { return cache_.misses(); }
  /// Cached records dropped by the entry or byte bound before they expired.
  std::uint64_t evictions() const noexcept { return cache_.evictions(); }

  /// The wrapped store's figures (when it has stats()) with the cache's own in `cache`.
  StoreStats stats() const {
    StoreStats s = stats_of(inner_);
    s.cache = cache_.stats();
    return s;
  }

  /// Cached records now, expired ones not yet dropped included.
  std::size_t size() const { return cache_.size(); }

  /// Drops the cached record of `key` (an effective key), so its next claim asks S: for records
  /// changed behind this object's back (cached_admin calls it). An answer of S read before this
  /// call does not fill the cache after it.
  void invalidate(std::string_view key) { cache_.invalidate(key); }

  /// Drops every cached record (after records were deleted from the backend by hand), as
  /// invalidate() does for one. Holders in flight keep their fingerprints.
  void clear() { cache_.clear(); }

 private:
  friend detail::HeldKeyCalls<CachedStore, Inner>;
  Inner& wrapped() noexcept { return inner_; }

  S inner_;
  detail::ReplayCache cache_;
};

}  // namespace idem
