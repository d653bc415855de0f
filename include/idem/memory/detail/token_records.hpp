#pragma once
// MemoryTokenRecords: the record store under MemoryTokenStore (pending and consumed tokens).

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "idem/clock.hpp"
#include "idem/detail/hashed_key.hpp"
#include "idem/engine/record_model.hpp"
#include "idem/fingerprint.hpp"
#include "idem/memory/detail/record.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem::detail {

/// An idem::Store whose keys exist only once added (else token_invalid); a claim of a pending key
/// consumes it, an abort returns it to pending until its own expiry. Thread-safe (one mutex).
class MemoryTokenRecords {
 public:
  explicit MemoryTokenRecords(std::shared_ptr<Clock> clock) : clock_(std::move(clock)) {}
  MemoryTokenRecords(const MemoryTokenRecords&) = delete;
  MemoryTokenRecords& operator=(const MemoryTokenRecords&) = delete;

  /// `key` pending for `ttl` (at least 1 ms) until consumed.
  void add(std::string_view key, std::chrono::milliseconds ttl) {
    const auto now = clock_->now();
    std::lock_guard lock(mutex_);
    Entry& e = tokens_[std::string(key)];
    e.deadline = now + std::max(ttl, std::chrono::milliseconds{1});
    e.expires_at = e.deadline;
  }

  Result<Claim> claim(const ClaimRequest& request) {
    const auto now = clock_->now();
    std::lock_guard lock(mutex_);
    auto it = tokens_.find(request.key);
    if (it == tokens_.end()) return unknown();
    Entry& e = it->second;
    if (now >= e.expires_at) {
      tokens_.erase(it);
      return unknown();
    }
    // Expiry was decided above (an expired token is unknown), so the view carries none.
    RecordView<> view = record_at(e, now);
    view.expires_in.reset();
    Claim answer = classify(view, request.fingerprint);
    switch (answer.status) {
      case ClaimStatus::acquired:
        return acquire_record(e, request, now, answer.took_over);
      case ClaimStatus::mismatch:
        return used_by_another();
      default:
        return answer;
    }
  }

  Status commit(const Ticket& ticket, const Completion& completion) {
    const auto now = clock_->now();
    return with_holder(
        ticket,
        [&](auto it) {
          Entry& e = it->second;
          e.state = finished_state(completion.status);
          e.result.assign(completion.result);
          e.expires_at = now + std::max(completion.ttl, std::chrono::milliseconds{1});
        },
        &completion);
  }

  /// Returns the token to pending until its own expiry (gone if that has passed).
  Status abort(const Ticket& ticket) {
    const auto now = clock_->now();
    return with_holder(ticket, [&](auto it) {
      Entry& e = it->second;
      if (now >= e.deadline) {
        tokens_.erase(it);
        return;
      }
      e.state = RecordState::released;  // pending again
      e.expires_at = e.deadline;
      e.result.clear();
    });
  }

  Status extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    const auto now = clock_->now();
    return with_holder(ticket, [&](auto it) {
      Entry& e = it->second;
      e.lease_until = now + lease;
      e.expires_at = std::max(e.expires_at, now + held_retention({}, lease));
    });
  }

  /// Removes expired tokens; returns how many went.
  std::size_t purge_expired() {
    const auto now = clock_->now();
    std::lock_guard lock(mutex_);
    return std::erase_if(tokens_, [&](const auto& kv) { return now >= kv.second.expires_at; });
  }

  /// Tokens held now (pending, in use, consumed; expired ones until purged).
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return tokens_.size();
  }

 private:
  struct Entry {
    // An issued or aborted token is a released record: the next claim takes it.
    RecordState state = RecordState::released;
    Fingerprint fingerprint{};
    Fence fence = 0;
    Clock::time_point lease_until{};
    Clock::time_point deadline{};    // the token's own expiry, to which an abort returns it
    Clock::time_point expires_at{};  // when the entry goes
    std::string result;
  };

  static Failure unknown() {
    return make_failure(errc::token_invalid, "token is unknown or expired");
  }
  static Failure used_by_another() {
    return make_failure(errc::token_invalid, "token was used by a request with another payload");
  }

  // Runs `change` on the token only if the ticket still holds it (as MemoryStore::with_holder).
  template <class Change>
  Status with_holder(const Ticket& ticket, Change&& change, const Completion* repeat = nullptr) {
    std::lock_guard lock(mutex_);
    auto it = tokens_.find(ticket.key);
    const FenceCheck check = it == tokens_.end()
                                 ? FenceCheck::lost
                                 : check_fence(record_of(it->second), ticket.fence, repeat);
    if (check == FenceCheck::held) change(it);
    if (check != FenceCheck::lost) return {};
    return Status(errc::lease_lost, "the token is no longer held under this fence");
  }

  std::shared_ptr<Clock> clock_;
  mutable std::mutex mutex_;
  HashedKeyMap<Entry> tokens_;
};

static_assert(Store<MemoryTokenRecords>);

}  // namespace idem::detail
