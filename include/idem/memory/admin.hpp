#pragma once
// The admin of a MemoryStore (header-only): the same operations as on the other stores, each one
// critical section on the record's shard (listings and counts take the shards one at a time).

#include <algorithm>
#include <chrono>
#include <limits>
#include <tuple>
#include <utility>

#include "idem/admin.hpp"
#include "idem/engine/sim_hooks.hpp"
#include "idem/memory/store.hpp"

namespace idem::admin {

class MemoryAdmin final : public Admin {
 public:
  /// `store` must outlive the admin.
  explicit MemoryAdmin(MemoryStore& store) : store_(store) {}

  std::string_view store_name() const noexcept override { return "memory"; }

  Result<std::optional<RecordInfo>> inspect(std::string_view scope, const Key& key) override {
    if (key.id.empty()) return make_failure(errc::key_invalid, "the key id is empty");
    const std::string k = detail::effective_key(scope, key);
    const auto hk = MemoryStore::hashed(k);
    MemoryStore::Shard& shard = store_.shard_for(hk);
    std::lock_guard lock(shard.mutex);
    const MemoryStore::Entry* e = shard.records.find(hk);
    if (e == nullptr) return std::optional<RecordInfo>{};
    return std::optional<RecordInfo>(info_of(*e, k, scope, store_.clock_->now()));
  }

  Result<Page> list(std::string_view scope, const ListRequest& request) override {
    std::int64_t after_expiry = std::numeric_limits<std::int64_t>::min();
    std::string after_key;
    if (!request.cursor.empty() && !detail::read_cursor(request.cursor, after_expiry, after_key)) {
      return make_failure(errc::key_invalid, "the cursor is not one a listing returned");
    }
    const std::string prefix = detail::scope_prefix(scope);
    const auto now = store_.clock_->now();
    std::vector<std::pair<std::string, RecordInfo>> found;
    for (MemoryStore::Shard& shard : store_.shards_) {
      std::lock_guard lock(shard.mutex);
      for (const MemoryStore::Entry* e = shard.head; e != nullptr; e = e->next) {
        const std::string_view k = shard.records.key_of(*e);
        if (!k.starts_with(prefix)) continue;
        RecordInfo info = info_of(*e, k, scope, now);
        if (info.state != request.state) continue;
        const bool before_cursor = info.expires_at_ms < after_expiry ||
                                   (info.expires_at_ms == after_expiry && k <= after_key);
        if (before_cursor) continue;
        found.emplace_back(std::string(k), std::move(info));
      }
    }
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
      return std::tie(a.second.expires_at_ms, a.first) < std::tie(b.second.expires_at_ms, b.first);
    });
    const std::size_t limit = std::max<std::size_t>(request.limit, 1);
    Page page;
    for (std::size_t i = 0; i < found.size() && i < limit; ++i) {
      page.records.push_back(std::move(found[i].second));
    }
    if (found.size() > limit) {
      page.next_cursor =
          detail::make_cursor(page.records.back().expires_at_ms, found[limit - 1].first);
    }
    return page;
  }

  Result<Change> release(std::string_view scope, const Key& key, Fence only_fence) override {
    return mark_released(scope, key, true, only_fence);
  }

  Result<Change> forget(std::string_view scope, const Key& key) override {
    return mark_released(scope, key, false, 0);
  }

  Result<std::size_t> purge_expired(std::size_t /*max_records*/) override {
    return store_.purge_expired();
  }

  std::string schema_text() const override {
    return "-- MemoryStore: records in process memory; no schema\n";
  }
  Result<SchemaReport> check_schema() override {
    SchemaReport out;
    out.expected_version = out.found_version = 1;
    out.complete = true;
    out.note = "memory: no schema";
    return out;
  }
  Result<SchemaReport> migrate_schema() override { return check_schema(); }

  Result<Stats> stats(std::string_view scope, bool all_scopes) override {
    const std::string prefix = detail::scope_prefix(scope);
    const auto now = store_.clock_->now();
    Stats out;
    out.store = "memory";
    for (MemoryStore::Shard& shard : store_.shards_) {
      std::lock_guard lock(shard.mutex);
      for (const MemoryStore::Entry* e = shard.head; e != nullptr; e = e->next) {
        if (!all_scopes && !shard.records.key_of(*e).starts_with(prefix)) continue;
        if (now >= e->expires_at) ++out.expired;
        detail::count(out, state_of(e->state));
      }
    }
    return out;
  }

 private:
  static State state_of(idem::detail::RecordState state) noexcept {
    using idem::detail::RecordState;
    if (state == RecordState::held) return State::in_progress;
    if (state == RecordState::completed) return State::completed;
    return state == RecordState::failed ? State::failed : State::released;
  }

  static RecordInfo info_of(const MemoryStore::Entry& e, std::string_view k, std::string_view scope,
                            Clock::time_point now) {
    using std::chrono::duration_cast;
    using std::chrono::milliseconds;
    RecordInfo info;
    if (!detail::split_key(k, scope, info.principal, info.id)) info.id = k;
    info.state = state_of(e.state);
    if (info.state == State::in_progress) {
      info.lease_left = std::max(duration_cast<milliseconds>(e.lease_until - now), milliseconds{0});
    } else if (info.state == State::completed) {
      info.result_size = e.result.size();
    } else if (info.state == State::failed) {
      info.failure = detail::failure_text(e.result);
    }
    info.fence = e.fence;
    info.fingerprint = e.fingerprint;
    info.expires_in = duration_cast<milliseconds>(e.expires_at - now);
    info.expires_at_ms = duration_cast<milliseconds>(e.expires_at.time_since_epoch()).count();
    return info;
  }

  // One critical section: marks the record released and drops its result, keeping its fence.
  Result<Change> mark_released(std::string_view scope, const Key& key, bool only_held,
                               Fence only_fence) {
    if (key.id.empty()) return make_failure(errc::key_invalid, "the key id is empty");
    const std::string k = detail::effective_key(scope, key);
    const auto hk = MemoryStore::hashed(k);
    std::string dropped;                              // the result's buffer, freed after the lock
    decltype(MemoryStore::Entry::run) forgotten_run;  // a forget's steps and request, likewise
    MemoryStore::Shard& shard = store_.shard_for(hk);
    std::lock_guard lock(shard.mutex);
    MemoryStore::Entry* e = shard.records.find(hk);
    Change change;
    if (e == nullptr) return change;
    change.before = info_of(*e, k, scope, store_.clock_->now());
    const bool held = e->state == idem::detail::RecordState::held;
    // A release changes a held record only; a forget any record.
    if ((only_held && !held) || (only_fence != 0 && e->fence != only_fence)) return change;
    e->state = idem::detail::RecordState::released;
    e->result.swap(dropped);
    // A release keeps the run's steps and kept request (as after an abort); a forget drops them.
    if (!only_held && !IDEM_SIM_MUTATE(17)) e->run.swap(forgotten_run);
    if (held && shard.wakes.watched()) shard.wakes.wake();  // the hold ended: wake its waiters
    change.changed = true;
    return change;
  }

  MemoryStore& store_;
};

}  // namespace idem::admin
