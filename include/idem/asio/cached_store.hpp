#pragma once
// AsyncCachedStore<S>: CachedStore's local replay cache in front of an idem::AsyncStore, so a hot
// replay through AsyncGuard costs no round trip and no hand-off (docs/design.md §12).

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "idem/asio/async_store.hpp"
#include "idem/cached_store_options.hpp"
#include "idem/detail/replay_cache.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"
#include "idem/store_stats.hpp"

namespace idem {

/// The asynchronous CachedStore: the same cache (what it keeps, for how long, its bounds and
/// counters), each call of S awaited instead of made. A hit completes without suspending.
/// Owns S, built from the trailing constructor arguments. Thread-safe when S is: calls may come
/// from any thread of the io_context. Waits for a holder (AsyncWakingStore) go to S.
template <AsyncStore S>
class AsyncCachedStore {
 public:
  static constexpr std::string_view kStoreName = detail::store_name_of<S>();  // observers' label

  template <class... Args>
  explicit AsyncCachedStore(CachedStoreOptions options, Args&&... inner_args)
      : inner_(std::forward<Args>(inner_args)...), cache_(std::move(options)) {}

  AsyncCachedStore(const AsyncCachedStore&) = delete;
  AsyncCachedStore& operator=(const AsyncCachedStore&) = delete;

  boost::asio::awaitable<Result<Claim>> async_claim(const ClaimRequest& request) {
    detail::ReplayCache::Miss miss;
    if (auto hit = cache_.lookup(request, miss)) co_return std::move(*hit);
    Result<Claim> claimed = co_await inner_.async_claim(request);
    cache_.after_claim(miss, request, claimed);
    co_return claimed;
  }

  boost::asio::awaitable<Status> async_commit(const Ticket& ticket, const Completion& completion) {
    const detail::ReplayCache::Committing at = cache_.before_commit(ticket);
    Status status = co_await inner_.async_commit(ticket, completion);
    cache_.after_commit(at, ticket, completion, status);
    co_return status;
  }

  boost::asio::awaitable<Status> async_abort(const Ticket& ticket) {
    Status status = co_await inner_.async_abort(ticket);
    cache_.after_abort(ticket, status);
    co_return status;
  }

  boost::asio::awaitable<Status> async_extend(const Ticket& ticket,
                                              std::chrono::milliseconds lease) {
    return inner_.async_extend(ticket, lease);
  }

  bool wakes() const requires AsyncWakingStore<S> { return inner_.wakes(); }
  boost::asio::awaitable<bool> async_await_change(
      const Ticket& held, std::chrono::milliseconds bound) requires AsyncWakingStore<S> {
    return inner_.async_await_change(held, bound);
  }

  /// The wrapped store.
  S& inner() noexcept { return inner_; }
  const S& inner() const noexcept { return inner_; }

  /// Claims answered from the cache; claims passed on to S; records evicted before they expired.
  std::uint64_t hits() const noexcept { return cache_.hits(); }
  std::uint64_t misses() const noexcept { return cache_.misses(); }
  std::uint64_t evictions() const noexcept { return cache_.evictions(); }
  /// Cached records now, expired ones not yet dropped included.
  std::size_t size() const { return cache_.size(); }

  /// S's figures (when it has stats()) with the cache's own in `cache`.
  StoreStats stats() const {
    StoreStats s = stats_of(inner_);
    if (s.store.empty()) s.store = kStoreName;
    s.cache = cache_.stats();
    return s;
  }

  /// As CachedStore::invalidate and clear: for records changed behind this object's back.
  void invalidate(std::string_view key) { cache_.invalidate(key); }
  void clear() { cache_.clear(); }

 private:
  S inner_;
  detail::ReplayCache cache_;
};

}  // namespace idem
