#pragma once
// The entity stores' memory backend (idem::MemoryBackend, header-only): entities with a version
// and a state, an op log, and a per-entity lock held from claim to commit or abort.

#include <chrono>
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
#include "idem/memory/detail/record_table.hpp"
#include "idem/memory/detail/spin_mutex.hpp"
#include "idem/memory/detail/wake_room.hpp"
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
    const HashedKey op_key = hashed(r.op_key);
    std::unique_lock lock(mutex_);
    auto it = entities_.find(r.entity);
    // The entity is locked while another holder runs: wait for it as long as the claim may.
    if (it != entities_.end() && it->second.busy) {
      free_.wait_until(lock, std::chrono::steady_clock::now() + r.block_for,
                       [&] { return !it->second.busy; });
      if (it->second.busy) return in_progress();
    }
    if (const Op* op = ops_.find(op_key)) {
      // Only the entity's holder has a held operation, and it just let the entity go.
      if (op->state == RecordState::held) return in_progress();
      // A committed operation never expires: a repeat replays it or is a mismatch.
      return CasAnswer::of(classify(RecordView<>{.state = op->state,
                                                 .fingerprint = op->fingerprint,
                                                 .fence = op->fence,
                                                 .result = op->result},
                                    r.fingerprint));
    }
    if (it == entities_.end()) return CasAnswer::refused(CasAnswer::Refusal::missing);
    Entity& e = it->second;
    if (kind_ == EntityKind::version) {
      if (e.value != std::to_string(r.expected_version)) {
        return CasAnswer::refused(CasAnswer::Refusal::conflict, e.value);
      }
      e.next = std::to_string(r.expected_version + 1);
    } else {
      bool allowed = false;
      for (const std::string& f : r.from) allowed = allowed || f == e.value;
      if (!allowed) return CasAnswer::refused(CasAnswer::Refusal::conflict, e.value);
      e.next.assign(r.to);
    }
    // The operation goes into the log as held, in one allocation with its key: its commit finds
    // it by the ticket's key, its abort takes it out again. (Inserted before the entity is
    // marked busy: a failed allocation leaves the entity free.)
    Op& op = ops_.insert(op_key);
    op.state = RecordState::held;
    op.fingerprint = r.fingerprint;
    op.fence = ++fences_;
    op.entity = &e;
    e.busy = true;
    return CasAnswer::of(Claim{.status = ClaimStatus::acquired, .fence = op.fence});
  }

  Status commit(const Ticket& ticket, const Completion& completion) {
    // The result is copied before the lock, so the critical section never calls the allocator
    // for it.
    std::string result(completion.result);
    return finish(ticket, [&](Op& op) {
      op.entity->value.swap(op.entity->next);
      op.state = finished_state(completion.status);
      op.result.swap(result);
      return false;
    });
  }

  Status abort(const Ticket& ticket) {
    return finish(ticket, [](Op&) { return true; });
  }

  /// Keeps the entity where it was when the holder commits (a remembered failure).
  Status rewind(const Ticket& ticket) {
    std::lock_guard lock(mutex_);
    Op* op = held(ticket);
    if (op == nullptr) return lost();
    op->entity->next = op->entity->value;
    return {};
  }

  Status extend(const Ticket& ticket, std::chrono::milliseconds) {
    std::lock_guard lock(mutex_);
    if (held(ticket) == nullptr) return lost();
    return {};  // the holder keeps the entity until it finishes: there is no lease to run out
  }

  /// Memory has no figures of its own: only its name.
  StoreStats stats() const noexcept { return StoreStats{.store = "memory"}; }

 private:
  struct Entity {
    std::string value;
    std::string next;  // what a commit of its held operation makes `value`
    bool busy = false;
  };
  // An op-log entry: held from its claim to its commit (then completed or failed, for good) or
  // its abort (then gone).
  struct Op {
    Fingerprint fingerprint;
    Fence fence = 0;
    Entity* entity = nullptr;  // held: the entity its commit changes
    RecordState state = RecordState::held;
    std::string result;
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
  static CasAnswer in_progress() {
    return CasAnswer::of(
        Claim{.status = ClaimStatus::in_progress, .lease_remaining = std::chrono::milliseconds{1}});
  }

  // The ticket's operation while it is held under the ticket's fence (each claim's is new).
  Op* held(const Ticket& ticket) const noexcept {
    Op* op = ops_.find(hashed(ticket.key));
    return op != nullptr && op->state == RecordState::held && op->fence == ticket.fence ? op
                                                                                        : nullptr;
  }

  // Ends the ticket's hold: `change` returns whether the operation leaves the log (an abort).
  template <class Change>
  Status finish(const Ticket& ticket, Change&& change) {
    const HashedKey key = hashed(ticket.key);
    std::unique_lock lock(mutex_);
    Op* op = ops_.find(key);
    if (op == nullptr || op->state != RecordState::held || op->fence != ticket.fence) {
      return lost();
    }
    op->entity->busy = false;
    if (change(*op)) ops_.erase(*op);
    const bool wake = free_.watched();
    lock.unlock();
    if (wake) free_.wake();
    return {};
  }

  EntityKind kind_;
  // Sections of a few lookups: a spinning lock, and a wake only when a claim waits for an entity.
  SpinMutex mutex_;
  WakeRoom free_;           // claims (and put) waiting for a busy entity
  ByKey<Entity> entities_;  // node-based: Entity* stay valid
  RecordTable<Op> ops_;     // flat; each entry and its key in one allocation
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
