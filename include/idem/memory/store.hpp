#pragma once
// MemoryStore: the unique-index record strategy in process memory. Header-only.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/clock.hpp"
#include "idem/detail/hashed_key.hpp"
#include "idem/detail/lru_list.hpp"
#include "idem/detail/min_max.hpp"
#include "idem/engine/sim_hooks.hpp"
#include "idem/fingerprint.hpp"
#include "idem/memory/detail/record.hpp"
#include "idem/memory/detail/record_table.hpp"
#include "idem/memory/detail/spin_mutex.hpp"
#include "idem/memory/detail/wake_room.hpp"
#include "idem/result.hpp"
#include "idem/steps.hpp"
#include "idem/store.hpp"
#include "idem/store_stats.hpp"

namespace idem {

namespace admin {
class MemoryAdmin;  // idem/memory/admin.hpp: reads and releases records
}  // namespace admin

struct MemoryStoreOptions {
  std::size_t shards = 64;  ///< independent shards, each with its own lock; a power of two
  /// Most records kept in all (split evenly over the shards); 0 means unbounded. When a shard is
  /// full, a claim of a new key evicts its oldest record that is not in progress.
  std::size_t capacity = 1'000'000;
  std::shared_ptr<Clock> clock = nullptr;  ///< for leases and expiry (default: steady clock)
};

/// Records in a sharded hash table: one lock per shard, no global lock; every claim, commit,
/// abort and extend is one critical section on one shard. Thread-safe; records live as long as
/// the object. A WakingStore: a caller waiting for a holder sleeps until that hold ends.
class MemoryStore {
 public:
  static constexpr std::string_view kStoreName = "memory";  // observers' label
  explicit MemoryStore(MemoryStoreOptions options = {})
      : clock_(options.clock ? std::move(options.clock) : steady_clock()), shards_(options.shards) {
    const std::size_t n = shards_.size();
    const std::size_t per_shard = options.capacity == 0 ? 0 : (options.capacity + n - 1) / n;
    for (Shard& shard : shards_) shard.capacity = per_shard;
  }

  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  Result<Claim> claim(const ClaimRequest& request) {
    const auto now = clock_->now();
    const HashedKey key = hashed(request.key);
    Shard& shard = shard_for(key);
    std::unique_ptr<RunState> stale_run;  // freed after the lock
    bool wake = false;                    // a takeover ends a hold that callers may wait for
    Result<Claim> claimed = claim_locked(shard, key, request, now, stale_run, wake);
    if (wake) shard.wakes.wake();
    return claimed;
  }

  /// Returns once the record held.key is no longer held under held.fence (committed, aborted,
  /// released, taken over, removed) or `bound` has passed (a steady-clock wait, whatever the
  /// store's clock). The hold's end wakes it: no polling in between.
  void await_change(const Ticket& held, std::chrono::milliseconds bound) {
    const auto deadline = std::chrono::steady_clock::now() + bound;
    const HashedKey key = hashed(held.key);
    Shard& shard = shard_for(key);
    std::unique_lock lock(shard.mutex);
    shard.wakes.wait_until(lock, deadline, [&] {
      const Entry* e = shard.records.find(key);
      return e == nullptr || e->state != RecordState::held || e->fence != held.fence;
    });
  }

  Status commit(const Ticket& ticket, const Completion& completion) {
    const auto now = clock_->now();
    // The copy is made before the lock and the record's old buffer freed after it, so the
    // critical section never calls the allocator.
    std::string result(completion.result);
    std::unique_ptr<RunState> run;  // the finished record's steps go, freed after the lock
    return with_holder(
        ticket,
        [&](Entry& e) {
          e.state = detail::finished_state(completion.status);
          e.result.swap(result);
          e.expires_at = now + completion.ttl;
          e.run.swap(run);
        },
        &completion, /*ends_hold=*/true);
  }

  /// Keeps the run's request with the ticket's record (CompletableStore); lease_lost if not held.
  Status keep_request(const Ticket& ticket, std::string_view request) {
    auto fresh = std::make_unique<RunState>();  // made before the lock, freed after if unused
    std::optional<std::string> kept(request);
    return with_holder(ticket, [&](Entry& e) {
      if (!e.run) e.run.swap(fresh);
      e.run->request.swap(kept);
    });
  }

  /// At most `limit` records under `prefix` that kept a request and are abandoned: in progress
  /// past their lease, or released, and not expired. Walks every record.
  Result<std::vector<Abandoned>> find_abandoned(std::string_view prefix, std::size_t limit) {
    const auto now = clock_->now();
    std::vector<Abandoned> found;
    for (Shard& shard : shards_) {
      std::lock_guard lock(shard.mutex);
      for (Entry* e = shard.head; e != nullptr && found.size() < limit; e = e->next) {
        const bool abandoned = e->state == RecordState::released ||
                               (e->state == RecordState::held && now >= e->lease_until);
        if (!abandoned || !e->run || !e->run->request || now >= e->expires_at) continue;
        const std::string_view key = detail::RecordTable<Entry>::key_of(*e);
        if (key.substr(0, prefix.size()) != prefix) continue;
        found.push_back(Abandoned{std::string(key), *e->run->request});
      }
    }
    return found;
  }

  /// The steps recorded for the ticket's record, in order; lease_lost when it no longer holds it.
  Result<std::vector<StepRecord>> load_steps(const Ticket& ticket) {
    std::vector<StepRecord> steps;
    Status held = with_holder(ticket, [&](Entry& e) {
      if (e.run) steps = std::vector<StepRecord>(e.run->steps);  // not copy-assigned: compile time
    });
    if (!held) return held.failure();
    return steps;
  }

  /// Records a step of the ticket's run (copies made before the lock); lease_lost if not held.
  Status save_step(const Ticket& ticket, const StepWrite& step) {
    StepRecord saved{std::string(step.name), std::string(step.result)};
    StepRecord replaced;  // freed after the lock
    auto fresh = std::make_unique<RunState>();
    bool gap = false;
    Status held = with_holder(ticket, [&](Entry& e) {
      if (!e.run) e.run.swap(fresh);
      std::vector<StepRecord>& steps = e.run->steps;
      if (step.index < steps.size()) {
        std::swap(replaced, steps[step.index]);
        steps[step.index] = std::move(saved);
        steps.resize(step.index + 1);
      } else if (step.index == steps.size()) {
        steps.push_back(std::move(saved));
      } else {
        gap = true;
      }
    });
    if (held && gap) {
      return Status(errc::step_mismatch,
                    "step " + std::to_string(step.index) + " saved before the steps ahead of it");
    }
    return held;
  }

  Status abort(const Ticket& ticket) {
    // The record stays, released, so that its fence keeps growing: a holder fenced off before
    // the abort must not match a later claim's fence.
    std::string released;  // takes the record's buffer, freed after the lock
    return with_holder(
        ticket,
        [&](Entry& e) {
          e.state = RecordState::released;
          e.result.swap(released);
          if (IDEM_SIM_MUTATE(5)) e.fence -= 1;
        },
        nullptr, /*ends_hold=*/true);
  }

  Status extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    const auto now = clock_->now();
    return with_holder(ticket, [&](Entry& e) {
      e.lease_until = now + lease;
      e.expires_at = detail::max_of(e.expires_at, now + held_retention({}, lease));
    });
  }

  /// Removes records whose retention has passed; returns how many went.
  std::size_t purge_expired() {
    const auto now = clock_->now();
    std::size_t removed = 0;
    for (Shard& shard : shards_) {
      std::lock_guard lock(shard.mutex);
      for (Entry* e = shard.head; e != nullptr;) {
        Entry* next = e->next;
        if (now >= e->expires_at) {
          shard.erase(e);
          ++removed;
        }
        e = next;
      }
    }
    return removed;
  }

  /// Records held now, of every state.
  std::size_t size() const {
    return shards_.sum_locked([](const Shard& shard) { return shard.records.size(); });
  }

  /// Records evicted by the capacity bound (expired records removed do not count).
  std::uint64_t evictions() const noexcept { return shards_.sum(&Shard::evictions); }

  /// The store's figures: records held now and evictions (size() and evictions() in one).
  StoreStats stats() const {
    return StoreStats{.store = kStoreName, .records = size(), .evictions = evictions()};
  }

 private:
  friend class admin::MemoryAdmin;
  using RecordState = detail::RecordState;

  // What a run keeps beside its record (CompletableStore); rare, so an entry holds a pointer.
  struct RunState {
    std::vector<StepRecord> steps;
    std::optional<std::string> request;  // the run's payload, if kept (Options::keep_request)
  };

  struct Entry {
    RecordState state = RecordState::released;
    Fingerprint fingerprint;
    Fence fence = 0;
    Clock::time_point lease_until{};
    Clock::time_point expires_at{};
    std::string result;
    std::unique_ptr<RunState> run;  // steps and kept request, made by the first of either
    Entry* prev = nullptr;          // claim order, oldest first, for eviction
    Entry* next = nullptr;
  };

  using HashedKey = detail::HashedKey;

  struct alignas(64) Shard : detail::LruList<Entry> {
    mutable detail::SpinMutex mutex;
    detail::RecordTable<Entry> records;
    detail::WakeRoom wakes;  // callers in await_change for this shard's records
    std::size_t capacity = 0;
    std::atomic<std::uint64_t> evictions{0};
    // The largest fence of any record removed from this shard. New records start above it, so a
    // holder of a removed record (stalled past its lease) never matches a later claim's fence.
    Fence fence_floor = 0;

    void erase(Entry* e) {
      fence_floor = detail::max_of(fence_floor, e->fence);
      unlink(e);
      records.erase(*e);
    }
    // Frees one slot: the oldest record not in progress (or past its retention). In-progress
    // records met on the way move to the back, so the walk is O(1) unless nearly all are.
    bool evict_one(Clock::time_point now) {
      for (std::size_t seen = 0, n = records.size(); seen < n; ++seen) {
        Entry* e = head;
        if (e->state != RecordState::held || now >= e->expires_at) {
          if (now < e->expires_at) evictions.fetch_add(1, std::memory_order_relaxed);
          erase(e);
          return true;
        }
        move_to_back(e);
      }
      return false;
    }
  };

  // Runs `change` on the record only if the ticket still holds it. `repeat`: a commit's
  // completion, which succeeds without a change when it already stands under the ticket's fence.
  // `ends_hold`: the change ends the hold, so callers in await_change are woken.
  template <class Change>
  Status with_holder(const Ticket& ticket, Change&& change, const Completion* repeat = nullptr,
                     bool ends_hold = false) {
    const HashedKey key = hashed(ticket.key);
    Shard& shard = shard_for(key);
    detail::FenceCheck check = detail::FenceCheck::lost;
    bool wake = false;
    {
      std::lock_guard lock(shard.mutex);
      Entry* e = shard.records.find(key);
      if (e != nullptr) check = detail::check_fence(detail::record_of(*e), ticket.fence, repeat);
      if (check == detail::FenceCheck::held) {
        change(*e);
        wake = ends_hold && shard.wakes.watched();
      }
    }
    if (wake) shard.wakes.wake();
    if (check != detail::FenceCheck::lost) return {};
    return Status(errc::lease_lost, "the record is no longer held under this fence");
  }

  // claim() under the shard's lock; `wake` set when it took over a hold somebody waits for.
  Result<Claim> claim_locked(Shard& shard, const HashedKey& key, const ClaimRequest& request,
                             Clock::time_point now, std::unique_ptr<RunState>& stale_run,
                             bool& wake) {
    std::lock_guard lock(shard.mutex);
    Entry* found = shard.records.find(key);
    if (found == nullptr) {
      if (shard.capacity != 0 && shard.records.size() >= shard.capacity && !shard.evict_one(now)) {
        return make_failure(errc::store_unavailable,
                            "memory store is full: every record in the shard is in progress");
      }
      Entry& fresh = shard.records.insert(key);
      fresh.fence = shard.fence_floor;  // a removed key's holders must never match again
      shard.push_back(&fresh);
      return detail::acquire_record(fresh, request, now, /*took_over=*/false);
    }

    Entry& e = *found;
    Claim answer = detail::classify(detail::record_at(e, now), request.fingerprint);
    if (answer.status != ClaimStatus::acquired) return answer;
    // A new claim of a released or expired record (not a takeover) is as young as a new record.
    if (!answer.took_over) shard.move_to_back(&e);
    // Steps carry over to a takeover or a run after an abort of the same request; an expired
    // record or another payload starts without them.
    if (e.run &&
        (now >= e.expires_at || (e.fingerprint != request.fingerprint && !IDEM_SIM_MUTATE(6)))) {
      e.run.swap(stale_run);
    }
    wake = answer.took_over && shard.wakes.watched();
    return detail::acquire_record(e, request, now, answer.took_over);
  }

  static HashedKey hashed(std::string_view key) noexcept { return detail::hashed(key); }

  Shard& shard_for(const HashedKey& key) noexcept { return shards_.of(key); }

  std::shared_ptr<Clock> clock_;
  detail::Shards<Shard> shards_;
};

static_assert(CompletableStore<MemoryStore>);

}  // namespace idem
