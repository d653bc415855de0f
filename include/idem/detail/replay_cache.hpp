#pragma once
// ReplayCache: the records a local replay cache keeps (CachedStore, AsyncCachedStore), apart from
// how the store behind it is called: each call of the cache store asks it before the call
// (lookup, before_commit) and tells it what the store answered after (after_claim, after_commit,
// after_abort). Header-only.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "idem/cached_store_options.hpp"
#include "idem/clock.hpp"
#include "idem/detail/hashed_key.hpp"
#include "idem/detail/lru_list.hpp"
#include "idem/engine/record_model.hpp"
#include "idem/engine/sim_hooks.hpp"
#include "idem/fingerprint.hpp"
#include "idem/memory/detail/record_table.hpp"
#include "idem/memory/detail/spin_mutex.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"
#include "idem/store_stats.hpp"

namespace idem::detail {

/// Completed (and failed) records of the store behind, in process memory, in shards each with
/// its own lock, never held across a call to that store. Thread-safe.
class ReplayCache {
  struct Shard;

 public:
  explicit ReplayCache(CachedStoreOptions options)
      : clock_(options.clock ? std::move(options.clock) : steady_clock()),
        max_ttl_(options.max_ttl),
        cache_failures_(options.cache_failures),
        shards_(options.shards) {
    const std::size_t n = shards_.size();
    for (Shard& shard : shards_) {
      shard.max_entries = std::max<std::size_t>((options.max_entries + n - 1) / n, 1);
      shard.max_bytes = options.max_bytes / n;
    }
  }
  ReplayCache(const ReplayCache&) = delete;
  ReplayCache& operator=(const ReplayCache&) = delete;

  /// A claim the cache did not answer: what after_claim needs. Views the request's key.
  struct Miss {
    HashedKey key;
    Shard* shard = nullptr;
    std::uint64_t generation = 0;  // the store's answer fills the cache only if still this
    Clock::time_point now{};
  };

  /// The answer of a live cached record of the request's key and payload (completed or failed),
  /// or none: `miss` is then set for after_claim. Another payload's claim goes to the store.
  std::optional<Claim> lookup(const ClaimRequest& request, Miss& miss) {
    const auto now = clock_->now();
    const HashedKey key = hashed(request.key);
    Shard& shard = shards_.of(key);
    std::lock_guard lock(shard.mutex);
    if (Entry* e = shard.entries.find(key)) {
      Claim answer = classify(RecordView<>{.state = e->state,
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
    miss = Miss{key, &shard, shard.generation.load(std::memory_order_relaxed), now};
    return std::nullopt;
  }

  /// What the store answered the claim `miss` came from: a holder is remembered for its commit,
  /// a finished record cached.
  void after_claim(const Miss& miss, const ClaimRequest& request, const Result<Claim>& claimed) {
    if (!claimed) return;
    const Claim& c = claimed.value();
    Shard& shard = *miss.shard;
    if (c.status == ClaimStatus::acquired) {
      remember_holder(shard, miss.key, request, c.fence, miss.now);
    } else if (cacheable(c.status) && c.expires_in.count() > 0) {
      std::lock_guard lock(shard.mutex);
      if (shard.generation.load(std::memory_order_relaxed) == miss.generation) {
        fill_locked(shard, miss.key, request.fingerprint, c.fence, c.status, c.result,
                    miss.now + std::min(c.expires_in, max_ttl_));
      }
    }
  }

  /// Taken before a commit is sent to the store: what after_commit needs. Views the ticket's key.
  struct Committing {
    HashedKey key;
    Shard* shard = nullptr;
    std::uint64_t generation = 0;
    Clock::time_point before{};  // the backend's expiry is later than before + ttl
  };

  Committing before_commit(const Ticket& ticket) {
    const auto before = clock_->now();
    const HashedKey key = hashed(ticket.key);
    Shard& shard = shards_.of(key);
    return Committing{key, &shard, shard.generation.load(std::memory_order_acquire), before};
  }

  /// What the store answered the commit: on success the record is cached under the
  /// fingerprint its holder claimed with.
  void after_commit(const Committing& at, const Ticket& ticket, const Completion& completion,
                    const Status& status) {
    Shard& shard = *at.shard;
    std::lock_guard lock(shard.mutex);
    auto it = shard.holders.find(at.key);
    if (it == shard.holders.end() || it->second.fence != ticket.fence) return;
    const Fingerprint fingerprint = it->second.fingerprint;
    // An earlier try whose answer was lost may have landed: the store's expiry counts from that
    // try.
    const auto since = it->second.tried && !IDEM_SIM_MUTATE(16)
                           ? std::min(it->second.first_try, at.before)
                           : at.before;
    if (status.ok() || status.error() == errc::lease_lost) {
      shard.holders.erase(it);
    } else if (!it->second.tried) {
      // Keep the holder through a retryable failure: the guard commits again with its ticket.
      it->second.tried = true;
      it->second.first_try = at.before;
    }
    const bool landed = status.ok() || (IDEM_SIM_MUTATE(13) && status.error() == errc::lease_lost);
    if (landed && cacheable(completion.status) && completion.ttl.count() > 0 &&
        shard.generation.load(std::memory_order_relaxed) == at.generation) {
      fill_locked(shard, at.key, fingerprint, ticket.fence, completion.status, completion.result,
                  since + std::min(completion.ttl, max_ttl_));
    }
  }

  /// What the store answered an abort: only the holder's fingerprint is dropped (nothing is
  /// cached for a held key).
  void after_abort(const Ticket& ticket, const Status& status) {
    if (status.ok() || status.error() == errc::lease_lost) forget_holder(ticket);
  }

  /// Claims answered from the cache (completed or failed) without calling the store.
  std::uint64_t hits() const noexcept { return shards_.sum(&Shard::hits); }
  /// Claims passed on to the store.
  std::uint64_t misses() const noexcept { return shards_.sum(&Shard::misses); }
  /// Cached records dropped by the entry or byte bound before they expired.
  std::uint64_t evictions() const noexcept { return shards_.sum(&Shard::evictions); }
  /// Cached records now, expired ones not yet dropped included.
  std::size_t size() const {
    return shards_.sum_locked([](const Shard& shard) { return shard.entries.size(); });
  }
  CacheStats stats() const {
    return CacheStats{
        .entries = size(), .hits = hits(), .misses = misses(), .evictions = evictions()};
  }

  /// Drops the cached record of `key` (an effective key); an answer of the store read before
  /// this call does not fill the cache after it.
  void invalidate(std::string_view key) {
    if (IDEM_SIM_MUTATE(21)) return;
    const HashedKey hk = hashed(key);
    Shard& shard = shards_.of(hk);
    std::lock_guard lock(shard.mutex);
    if (Entry* e = shard.entries.find(hk)) shard.erase(e);
    shard.generation.fetch_add(1, std::memory_order_release);
  }

  /// Drops every cached record, as invalidate() does for one. Holders in flight keep their
  /// fingerprints.
  void clear() {
    for (Shard& shard : shards_) {
      std::lock_guard lock(shard.mutex);
      while (shard.head != nullptr) shard.erase(shard.head);
      shard.generation.fetch_add(1, std::memory_order_release);
    }
  }

 private:
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
    RecordState state = RecordState::completed;
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

  // The counters are written under the lock (a plain increment, no locked instruction) and read
  // without it.
  struct alignas(64) Shard : LruList<Entry> {
    // What a hit touches comes first: with the list's ends, one cache line.
    mutable SpinMutex mutex;
    RecordTable<Entry> entries;
    std::atomic<std::uint64_t> hits{0};
    std::atomic<std::uint64_t> misses{0};
    HashedKeyMap<Holder> holders;
    std::size_t bytes = 0;
    std::size_t max_entries = 0;
    std::size_t max_bytes = 0;
    std::atomic<std::uint64_t> evictions{0};
    // Bumped (under the lock) by invalidate() and clear(): an answer of the store read before
    // the bump must not fill the cache after it. Read without the lock before a commit.
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
    return RecordTable<Entry>::key_of(e).size() + e.result_size + kEntryOverhead;
  }

  static std::string_view result_of(const Entry& e) noexcept {
    return {RecordTable<Entry>::trailing_bytes(e), e.result_size};
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
    Shard& shard = shards_.of(key);
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
    e.state = finished_state(status);
    e.fingerprint = fingerprint;
    e.fence = fence;
    e.expires_at = expires_at;
    if (!result.empty()) {
      std::memcpy(RecordTable<Entry>::trailing_bytes(e), result.data(), result.size());
    }
    e.result_size = result.size();
    shard.bytes += bytes;
    shard.push_back(&e);
  }

  std::shared_ptr<Clock> clock_;
  std::chrono::milliseconds max_ttl_;
  bool cache_failures_;
  Shards<Shard> shards_;
};

}  // namespace idem::detail
