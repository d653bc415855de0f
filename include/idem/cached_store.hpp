#pragma once
// CachedStore<S>: a local replay cache in front of any idem::Store (docs/design.md §12).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "idem/clock.hpp"
#include "idem/detail/hashed_key.hpp"
#include "idem/detail/held_key_calls.hpp"
#include "idem/detail/lru_list.hpp"
#include "idem/engine/record_model.hpp"
#include "idem/engine/sim_hooks.hpp"
#include "idem/fingerprint.hpp"
#include "idem/memory/detail/record_table.hpp"
#include "idem/memory/detail/spin_mutex.hpp"
#include "idem/result.hpp"
#include "idem/steps.hpp"
#include "idem/store.hpp"
#include "idem/store_stats.hpp"

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
      : inner_(std::forward<Args>(inner_args)...),
        clock_(options.clock ? std::move(options.clock) : steady_clock()),
        max_ttl_(options.max_ttl),
        cache_failures_(options.cache_failures),
        shards_(options.shards) {
    const std::size_t n = shards_.size();
    for (Shard& shard : shards_) {
      shard.max_entries = std::max<std::size_t>((options.max_entries + n - 1) / n, 1);
      shard.max_bytes = options.max_bytes / n;
    }
  }

  CachedStore(const CachedStore&) = delete;
  CachedStore& operator=(const CachedStore&) = delete;

  /// A live cached record of the request's payload replays without calling S; otherwise S's
  /// claim, whose completed or failed answer fills the cache. Another payload always goes to S.
  Result<Claim> claim(const ClaimRequest& request) {
    const auto now = clock_->now();
    const HashedKey key = hashed(request.key);
    Shard& shard = shard_for(key);
    std::uint64_t generation = 0;  // S's answer fills the cache only if nothing was invalidated
    {
      std::lock_guard lock(shard.mutex);
      if (Entry* e = shard.entries.find(key)) {
        Claim answer = detail::classify(detail::RecordView<>{.state = e->state,
                                                             .fingerprint = e->fingerprint,
                                                             .fence = e->fence,
                                                             .expires_in = e->expires_at - now,
                                                             .result = result_of(*e)},
                                        request.fingerprint);
        // A cached record is completed or failed: only its expiry makes it claimable.
        if (answer.status == ClaimStatus::completed || answer.status == ClaimStatus::failed) {
          count_locked(shard.hits);
          if (!e->used) e->used = true;  // written once: a hot record's line stays shared
          return answer;
        }
        if (answer.status == ClaimStatus::acquired) shard.erase(e);  // expired: not evicted
      }
      count_locked(shard.misses);
      generation = shard.generation.load(std::memory_order_relaxed);
    }

    Result<Claim> claimed = inner_.claim(request);
    if (!claimed) return claimed;
    const Claim& c = claimed.value();
    if (c.status == ClaimStatus::acquired) {
      remember_holder(shard, key, request, c.fence, now);
    } else if (cacheable(c.status) && c.expires_in.count() > 0) {
      std::lock_guard lock(shard.mutex);
      if (shard.generation.load(std::memory_order_relaxed) == generation) {
        fill_locked(shard, key, request.fingerprint, c.fence, c.status, c.result,
                    now + std::min(c.expires_in, max_ttl_));
      }
    }
    return claimed;
  }

  /// S's commit; on success the record is cached under the fingerprint its holder claimed with.
  Status commit(const Ticket& ticket, const Completion& completion) {
    const auto before = clock_->now();  // the backend's expiry is later than before + ttl
    const HashedKey key = hashed(ticket.key);
    Shard& shard = shard_for(key);
    const std::uint64_t generation = shard.generation.load(std::memory_order_acquire);
    Status status = inner_.commit(ticket, completion);
    std::lock_guard lock(shard.mutex);
    auto it = shard.holders.find(key);
    if (it == shard.holders.end() || it->second.fence != ticket.fence) return status;
    const Fingerprint fingerprint = it->second.fingerprint;
    // An earlier try whose answer was lost may have landed: S's expiry counts from that try.
    const auto since =
        it->second.tried && !IDEM_SIM_MUTATE(16) ? std::min(it->second.first_try, before) : before;
    if (status.ok() || status.error() == errc::lease_lost) {
      shard.holders.erase(it);
    } else if (!it->second.tried) {
      // Keep the holder through a retryable failure: the guard commits again with its ticket.
      it->second.tried = true;
      it->second.first_try = before;
    }
    const bool landed = status.ok() || (IDEM_SIM_MUTATE(13) && status.error() == errc::lease_lost);
    if (landed && cacheable(completion.status) && completion.ttl.count() > 0 &&
        shard.generation.load(std::memory_order_relaxed) == generation) {
      fill_locked(shard, key, fingerprint, ticket.fence, completion.status, completion.result,
                  since + std::min(completion.ttl, max_ttl_));
    }
    return status;
  }

  /// S's abort; only the holder's fingerprint is dropped (nothing is cached for a held key).
  Status abort(const Ticket& ticket) {
    Status status = inner_.abort(ticket);
    if (status.ok() || status.error() == errc::lease_lost) forget_holder(ticket);
    return status;
  }

  /// The wrapped store.
  Inner& inner() noexcept { return inner_; }

  /// Claims answered from the cache (completed or failed) without calling S.
  std::uint64_t hits() const noexcept { return shards_.sum(&Shard::hits); }
  /// Claims passed on to S.
  std::uint64_t misses() const noexcept { return shards_.sum(&Shard::misses); }
  /// Cached records dropped by the entry or byte bound before they expired.
  std::uint64_t evictions() const noexcept { return shards_.sum(&Shard::evictions); }

  /// The wrapped store's figures (when it has stats()) with the cache's own in `cache`.
  StoreStats stats() const {
    StoreStats s = stats_of(inner_);
    s.cache =
        CacheStats{.entries = size(), .hits = hits(), .misses = misses(), .evictions = evictions()};
    return s;
  }

  /// Cached records now, expired ones not yet dropped included.
  std::size_t size() const {
    return shards_.sum_locked([](const Shard& shard) { return shard.entries.size(); });
  }

  /// Drops the cached record of `key` (an effective key), so its next claim asks S: for records
  /// changed behind this object's back (cached_admin calls it). An answer of S read before this
  /// call does not fill the cache after it.
  void invalidate(std::string_view key) {
    if (IDEM_SIM_MUTATE(21)) return;
    const HashedKey hk = hashed(key);
    Shard& shard = shard_for(hk);
    std::lock_guard lock(shard.mutex);
    if (Entry* e = shard.entries.find(hk)) shard.erase(e);
    shard.generation.fetch_add(1, std::memory_order_release);
  }

  /// Drops every cached record (after records were deleted from the backend by hand), as
  /// invalidate() does for one. Holders in flight keep their fingerprints.
  void clear() {
    for (Shard& shard : shards_) {
      std::lock_guard lock(shard.mutex);
      while (shard.head != nullptr) shard.erase(shard.head);
      shard.generation.fetch_add(1, std::memory_order_release);
    }
  }

 private:
  friend detail::HeldKeyCalls<CachedStore, Inner>;
  Inner& wrapped() noexcept { return inner_; }

  // A rough size of an entry and its table slot, for the byte bound.
  static constexpr std::size_t kEntryOverhead = 128;

  // A cached record. Its key and then its result bytes follow it in the same allocation
  // (RecordTable), so a hit reads one block and copies the result from it. What only eviction
  // reads comes first, so that a hit's fields, key and result lie together, in as few lines as
  // they fit.
  struct Entry {
    Entry* prev = nullptr;  // the eviction order: oldest first
    Entry* next = nullptr;
    Fingerprint fingerprint;
    Clock::time_point expires_at{};
    Fence fence = 0;
    std::size_t result_size = 0;
    detail::RecordState state = detail::RecordState::completed;
    bool used = false;  // replayed since it last came to the back of the order
  };

  // A claim acquired through this object: what its commit needs to cache the record.
  struct Holder {
    Fence fence = 0;
    Fingerprint fingerprint;
    Clock::time_point stale_at{};   // past this, a holder that never finished may be dropped
    bool tried = false;             // a commit failed, and the guard will try again
    Clock::time_point first_try{};  // when that first failed commit began
  };

  using HashedKey = detail::HashedKey;

  // The counters are written under the lock (a plain increment, no locked instruction) and read
  // without it.
  struct alignas(64) Shard : detail::LruList<Entry> {
    // What a hit touches comes first: with the list's ends, one cache line.
    mutable detail::SpinMutex mutex;
    detail::RecordTable<Entry> entries;
    std::atomic<std::uint64_t> hits{0};
    std::atomic<std::uint64_t> misses{0};
    detail::HashedKeyMap<Holder> holders;
    std::size_t bytes = 0;
    std::size_t max_entries = 0;
    std::size_t max_bytes = 0;
    std::atomic<std::uint64_t> evictions{0};
    // Bumped (under the lock) by invalidate() and clear(): an answer of S read before the bump
    // must not fill the cache after it. Read without the lock before a commit.
    std::atomic<std::uint64_t> generation{0};

    void erase(Entry* e) {
      this->unlink(e);
      bytes -= bytes_of(*e);
      entries.erase(*e);
    }
  };

  static void count_locked(std::atomic<std::uint64_t>& counter) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  // What a record counts against the byte bound.
  static std::size_t bytes_of(const Entry& e) noexcept {
    return detail::RecordTable<Entry>::key_of(e).size() + e.result_size + kEntryOverhead;
  }

  static std::string_view result_of(const Entry& e) noexcept {
    return {detail::RecordTable<Entry>::trailing_bytes(e), e.result_size};
  }

  bool cacheable(ClaimStatus status) const noexcept {
    return status == ClaimStatus::completed || (cache_failures_ && status == ClaimStatus::failed);
  }

  void remember_holder(Shard& shard, const HashedKey& key, const ClaimRequest& request, Fence fence,
                       Clock::time_point now) {
    std::lock_guard lock(shard.mutex);
    if (shard.holders.size() >= shard.max_entries && !shard.holders.contains(key)) {
      // Holders that never committed nor aborted (their caller went away) go first; if every
      // one is live, this holder's commit simply does not fill the cache.
      std::erase_if(shard.holders, [now](const auto& h) { return now >= h.second.stale_at; });
      if (shard.holders.size() >= shard.max_entries) return;
    }
    auto it = shard.holders.find(key);
    if (it == shard.holders.end()) it = shard.holders.try_emplace(std::string(request.key)).first;
    it->second = Holder{fence, request.fingerprint,
                        now + request.lease + held_retention(request.retention, request.lease)};
  }

  void forget_holder(const Ticket& ticket) {
    const HashedKey key = hashed(ticket.key);
    Shard& shard = shard_for(key);
    std::lock_guard lock(shard.mutex);
    auto it = shard.holders.find(key);
    if (it != shard.holders.end() && it->second.fence == ticket.fence) shard.holders.erase(it);
  }

  void fill_locked(Shard& shard, const HashedKey& key, const Fingerprint& fingerprint, Fence fence,
                   ClaimStatus status, std::string_view result, Clock::time_point expires_at) {
    const auto now = clock_->now();
    if (expires_at <= now) return;  // the backend's record may be gone already
    const std::size_t bytes = key.bytes.size() + result.size() + kEntryOverhead;
    if (bytes > shard.max_bytes) return;

    if (Entry* old = shard.entries.find(key)) shard.erase(old);  // replaced below, not evicted
    // Second chance: the oldest record goes unless it was replayed since it last came to the
    // back; then it goes to the back, unmarked. Each mark is cleared once, so a fill walks past
    // at most as many records as hits marked since the last walk.
    while (shard.head != nullptr &&
           (shard.entries.size() >= shard.max_entries || shard.bytes + bytes > shard.max_bytes)) {
      Entry* oldest = shard.head;
      const bool live = now < oldest->expires_at;
      if (live && oldest->used) {
        oldest->used = false;
        shard.move_to_back(oldest);
        continue;
      }
      if (live) count_locked(shard.evictions);
      shard.erase(oldest);
    }
    Entry& e = shard.entries.insert(key, result.size());
    e.state = detail::finished_state(status);
    e.fingerprint = fingerprint;
    e.fence = fence;
    e.expires_at = expires_at;
    if (!result.empty()) {
      std::memcpy(detail::RecordTable<Entry>::trailing_bytes(e), result.data(), result.size());
    }
    e.result_size = result.size();
    shard.bytes += bytes;
    shard.push_back(&e);
  }

  static HashedKey hashed(std::string_view key) noexcept { return detail::hashed(key); }

  Shard& shard_for(const HashedKey& key) noexcept { return shards_.of(key); }

  S inner_;
  std::shared_ptr<Clock> clock_;
  std::chrono::milliseconds max_ttl_;
  bool cache_failures_;
  detail::Shards<Shard> shards_;
};

}  // namespace idem
