#pragma once
// MemoryTokenStore: the one-time token strategy in process memory (docs/design.md §12).
// Header-only.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "idem/clock.hpp"
#include "idem/detail/effective_key.hpp"
#include "idem/detail/hashed_key.hpp"
#include "idem/detail/memory_record.hpp"
#include "idem/detail/owned_guard.hpp"
#include "idem/detail/token.hpp"
#include "idem/fingerprint.hpp"
#include "idem/guard.hpp"
#include "idem/options.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

struct MemoryTokenStoreOptions {
  /// The guard behind execute(): its scope names the token namespace (unset: "token"), and its
  /// lease, ttl (how long a consumed token replays), in-progress policy and observer apply.
  /// Fields left unset keep these defaults (idem::Options).
  Options guard{};
  /// Time source for token expiry and leases (default: steady clock).
  std::shared_ptr<Clock> clock = nullptr;
};

/// One-time tokens in process memory, for single-process services and tests; same behaviour as
/// RedisTokenStore. issue() hands out a token; execute(token, fn) consumes it: the first request
/// runs fn, a repeat of that request replays its result, and anything else is refused.
///
/// | the token is...                                  | execute(token, payload, fn)          |
/// |--------------------------------------------------|--------------------------------------|
/// | unknown, expired, or malformed                   | errc::token_invalid                  |
/// | pending                                          | runs fn (the claim consumes it)      |
/// | being consumed, same payload, lease live         | errc::in_progress (or waits)         |
/// | consumed or being consumed with another payload  | errc::token_invalid                  |
/// | consumed with the same payload                   | replays the result                   |
/// | consumed, but fn threw                           | pending again, until its expiry      |
///
/// Also an idem::Store over the guard's effective keys. Thread-safe (one mutex).
class MemoryTokenStore {
 public:
  /// What the guard options' unset fields become (idem::Options).
  static constexpr OptionDefaults kDefaults{.scope = "token"};

  explicit MemoryTokenStore(MemoryTokenStoreOptions options = {})
      : clock_(options.clock ? std::move(options.clock) : steady_clock()),
        scope_(options.guard.scope.empty() ? std::string(kDefaults.scope) : options.guard.scope) {
    guard_.bind(*this, with_defaults(std::move(options.guard), kDefaults));
  }
  MemoryTokenStore(const MemoryTokenStore&) = delete;
  MemoryTokenStore& operator=(const MemoryTokenStore&) = delete;

  /// A new pending token, valid for `ttl` (at least 1 ms) until consumed.
  Result<std::string> issue(std::chrono::milliseconds ttl) {
    Result<std::string> token = detail::random_token();
    if (!token) return token;
    const detail::EffectiveKey key(scope_, {}, token.value());
    const auto now = clock_->now();
    std::lock_guard lock(mutex_);
    Entry& e = tokens_[std::string(key.view())];
    e.deadline = now + std::max(ttl, std::chrono::milliseconds{1});
    e.expires_at = e.deadline;
    return token;
  }

  /// Consumes `token` and runs fn once; see the table above. Without a payload every repeat of
  /// the token matches.
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(std::string_view token, Fn&& fn) {
    return execute(token, std::string_view{}, std::forward<Fn>(fn));
  }
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(std::string_view token,
                                                      std::string_view payload, Fn&& fn) {
    if (!detail::token_shaped(token)) {
      return Outcome<handler_result_t<Fn>>::failed(detail::malformed_token(options(), token));
    }
    return guard_.get().execute(Key{token}, payload, std::forward<Fn>(fn));
  }

  const Options& options() const noexcept { return guard_.get().options(); }

  // --- idem::Store, over the guard's effective keys --------------------------------------------

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
    // Expiry was decided above (an expired token is unknown, never claimable), so the view
    // carries none; a replay then says nothing of the time left.
    detail::RecordView<> view = detail::record_at(e, now);
    view.expires_in.reset();
    Claim answer = detail::classify(view, request.fingerprint);
    switch (answer.status) {
      case ClaimStatus::acquired:
        return detail::acquire_record(e, request, now, answer.took_over);
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
          e.state = detail::finished_state(completion.status);
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
      e.state = detail::RecordState::released;  // pending again
      e.expires_at = e.deadline;
      e.result.clear();
    });
  }

  Status extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    const auto now = clock_->now();
    return with_holder(ticket, [&](auto it) {
      Entry& e = it->second;
      e.lease_until = now + lease;
      e.expires_at = std::max(e.expires_at, e.lease_until);
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
    // A token issued and not used yet (or returned by an abort) is a released record: the next
    // claim takes it.
    detail::RecordState state = detail::RecordState::released;
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

  // Runs `change` on the token only if the ticket still holds it. `repeat`: a commit's
  // completion, which succeeds without a change when it already stands under the ticket's fence.
  template <class Change>
  Status with_holder(const Ticket& ticket, Change&& change, const Completion* repeat = nullptr) {
    std::lock_guard lock(mutex_);
    auto it = tokens_.find(ticket.key);
    const detail::FenceCheck check =
        it == tokens_.end()
            ? detail::FenceCheck::lost
            : detail::check_fence(detail::record_of(it->second), ticket.fence, repeat);
    if (check == detail::FenceCheck::held) change(it);
    if (check != detail::FenceCheck::lost) return {};
    return Status(errc::lease_lost, "the token is no longer held under this fence");
  }

  std::shared_ptr<Clock> clock_;
  std::string scope_;
  mutable std::mutex mutex_;
  detail::HashedKeyMap<Entry> tokens_;
  detail::OwnedGuard<MemoryTokenStore> guard_;
};

static_assert(Store<MemoryTokenStore>);

}  // namespace idem
