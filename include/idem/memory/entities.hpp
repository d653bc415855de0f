#pragma once
// The entity stores' memory backend (idem::MemoryBackend, header-only): entities with a version
// and a state, an op log, and a per-entity lock held from claim to commit or abort.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "idem/detail/hashed_key.hpp"
#include "idem/engine/entity.hpp"
#include "idem/engine/record_model.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"
#include "idem/store_stats.hpp"

namespace idem::detail {

class MemoryEntities {
 public:
  explicit MemoryEntities(EntityKind kind) : kind_(kind) {}
  MemoryEntities(const MemoryEntities&) = delete;
  MemoryEntities& operator=(const MemoryEntities&) = delete;

  /// Creates or overwrites an entity: `value` is its version (decimal) or state.
  void put(std::string_view entity, std::string value) {
    std::unique_lock lock(mutex_);
    Entity& e = entities_[std::string(entity)];
    free_.wait(lock, [&] { return !e.busy; });
    e.value = std::move(value);
  }

  Result<std::string> current(std::string_view entity) {
    std::lock_guard lock(mutex_);
    auto it = entities_.find(entity);
    if (it == entities_.end()) return missing(entity);
    return it->second.value;
  }

  Result<CasAnswer> claim(const CasRequest& r) {
    std::unique_lock lock(mutex_);
    auto it = entities_.find(r.entity);
    // The entity is locked while another holder runs: wait for it as long as the claim may.
    if (it != entities_.end() && it->second.busy) {
      const bool freed = free_.wait_for(lock, r.block_for, [&] { return !it->second.busy; });
      if (!freed) {
        return CasAnswer::of(Claim{.status = ClaimStatus::in_progress,
                                   .lease_remaining = std::chrono::milliseconds{1}});
      }
    }
    if (auto op = ops_.find(r.op_key); op != ops_.end()) {
      // A committed operation never expires: a repeat replays it or is a mismatch.
      return CasAnswer::of(classify(RecordView<>{.state = op->second.state,
                                                 .fingerprint = op->second.fingerprint,
                                                 .fence = op->second.fence,
                                                 .result = op->second.result},
                                    r.fingerprint));
    }
    if (it == entities_.end()) return CasAnswer::refused(CasAnswer::Refusal::missing);
    Entity& e = it->second;
    std::string next;
    if (kind_ == EntityKind::version) {
      if (e.value != std::to_string(r.expected_version)) {
        return CasAnswer::refused(CasAnswer::Refusal::conflict, e.value);
      }
      next = std::to_string(r.expected_version + 1);
    } else {
      bool allowed = false;
      for (const std::string& f : r.from) allowed = allowed || f == e.value;
      if (!allowed) return CasAnswer::refused(CasAnswer::Refusal::conflict, e.value);
      next = std::string(r.to);
    }
    e.busy = true;
    const Fence fence = ++fences_;
    open_.emplace(fence, Open{&e, std::string(r.op_key), std::move(next), r.fingerprint});
    return CasAnswer::of(Claim{.status = ClaimStatus::acquired, .fence = fence});
  }

  Status commit(const Ticket& ticket, const Completion& completion) {
    return finish(ticket, [&](Open& open) {
      open.entity->value = std::move(open.next);
      // The held operation's key moves into the op log: the open entry goes with this commit.
      ops_.insert_or_assign(std::move(open.op_key),
                            Op{open.fingerprint, ticket.fence, finished_state(completion.status),
                               std::string(completion.result)});
    });
  }

  Status abort(const Ticket& ticket) {
    return finish(ticket, [](Open&) {});
  }

  /// Keeps the entity where it was when the holder commits (a remembered failure).
  Status rewind(const Ticket& ticket) {
    std::lock_guard lock(mutex_);
    auto it = held(ticket);
    if (it == open_.end()) return lost();
    it->second.next = it->second.entity->value;
    return {};
  }

  Status extend(const Ticket& ticket, std::chrono::milliseconds) {
    std::lock_guard lock(mutex_);
    if (held(ticket) == open_.end()) return lost();
    return {};  // the holder keeps the entity until it finishes: there is no lease to run out
  }

  /// Memory has no figures of its own: only its name.
  StoreStats stats() const noexcept { return StoreStats{.store = "memory"}; }

 private:
  struct Entity {
    std::string value;
    bool busy = false;
  };
  struct Op {
    Fingerprint fingerprint;
    Fence fence = 0;
    RecordState state = RecordState::completed;
    std::string result;
  };
  struct Open {
    Entity* entity = nullptr;
    std::string op_key;
    std::string next;
    Fingerprint fingerprint;
  };
  // Looked up by string_view, without building a std::string for each lookup.
  template <class V>
  using ByKey = std::unordered_map<std::string, V, HashedKeyHash, HashedKeyEqual>;

  static Failure missing(std::string_view entity) {
    return make_failure(errc::key_invalid, "no entity '" + std::string(entity) + "'");
  }
  static Status lost() {
    return Status(errc::lease_lost, "the entity is no longer held under this fence");
  }

  // The open operation the ticket holds: its fence (each claim's is new) and its key.
  using OpenOps = std::unordered_map<Fence, Open>;
  OpenOps::iterator held(const Ticket& ticket) {
    auto it = open_.find(ticket.fence);
    return it != open_.end() && it->second.op_key == ticket.key ? it : open_.end();
  }

  template <class Change>
  Status finish(const Ticket& ticket, Change&& change) {
    std::unique_lock lock(mutex_);
    auto it = held(ticket);
    if (it == open_.end()) return lost();
    change(it->second);
    it->second.entity->busy = false;
    open_.erase(it);
    lock.unlock();
    free_.notify_all();
    return {};
  }

  EntityKind kind_;
  std::mutex mutex_;
  std::condition_variable free_;
  ByKey<Entity> entities_;  // node-based: Entity* stay valid
  ByKey<Op> ops_;
  OpenOps open_;
  Fence fences_ = 0;
};

}  // namespace idem::detail

namespace idem {

/// Entities in process memory, created with the store's put(). The claim takes the entity's lock
/// (waiting up to the guard's Wait::timeout) and holds it while the handler runs; commit applies
/// the new version or state and records the result, abort leaves the entity as it was.
struct MemoryBackend {
  struct Options {};
  using Impl = detail::MemoryEntities;
  static Impl open(const Options&, detail::EntityKind kind, const EntityTable&) {
    return Impl(kind);
  }
};

}  // namespace idem
