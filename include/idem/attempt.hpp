#pragma once
// Attempt: the two-phase form of a guarded call, for code that cannot wrap its handler in a
// lambda (event-loop servers, callback-style RPC handlers, consumers that acknowledge later).

#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "idem/codec.hpp"
#include "idem/context.hpp"
#include "idem/engine/engine.hpp"
#include "idem/engine/sim_hooks.hpp"
#include "idem/error.hpp"
#include "idem/outcome.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

namespace detail {

/// What Attempt and AsyncAttempt (`Async`) share: the key's answer, or a hold on it under a
/// fence, and the checks of their misuse, whose messages name the face's own calls.
template <class T, bool Async>
class AttemptState {
 public:
  AttemptState& operator=(AttemptState&&) = delete;
  AttemptState(const AttemptState&) = delete;
  AttemptState& operator=(const AttemptState&) = delete;

  /// True while this attempt holds the key: do the work, then commit or fail it.
  bool acquired() const noexcept { return holding_; }

  /// The key's answer when it was not acquired (a replay, a remembered failure, a refusal), or
  /// after Attempt::fail() what it returned. Throws std::logic_error while held and once settled
  /// by a commit (which returned the outcome).
  Outcome<T>& outcome() & { return answer(); }
  Outcome<T>&& outcome() && { return std::move(answer()); }
  /// The refusal's computed Retry-After (Outcome::retry_after()); zero while holding.
  std::chrono::milliseconds retry_after() const noexcept {
    return answer_ ? answer_->retry_after() : std::chrono::milliseconds{0};
  }

  /// The holder's fence, for downstream systems that reject stale writers. Holding only.
  Fence fence() const {
    require_holding("fence()");
    return fence_;
  }

 protected:
  AttemptState() = default;
  AttemptState(AttemptState&& other) noexcept
      : answer_(std::move(other.answer_)),
        fence_(other.fence_),
        holding_(std::exchange(other.holding_, false)),
        settled_(other.settled_) {}
  ~AttemptState() = default;

  void hold(Fence fence) noexcept {
    fence_ = fence;
    holding_ = true;
  }
  /// Settles the hold (commit or fail), after require_holding(`what`).
  void settle(const char* what) {
    require_holding(what);
    holding_ = false;
    settled_ = true;
  }
  void require_holding(const char* what) const {
    if (holding_) return;
    throw std::logic_error(std::string(kFace) + what +
                           (settled_
                                ? " after the attempt was settled"
                                : " on an attempt that did not acquire the key (see outcome())"));
  }

  std::optional<Outcome<T>> answer_;
  Fence fence_ = 0;
  bool holding_ = false;

 private:
  static constexpr const char* kFace = Async ? "idem: AsyncAttempt::" : "idem: Attempt::";

  Outcome<T>& answer() {
    if (answer_) return *answer_;
    if (holding_) {
      throw std::logic_error(
          std::string(kFace) + "outcome() while the key is held: " +
          (Async ? "async_commit() or async_fail() it" : "commit() or fail() it"));
    }
    throw std::logic_error(std::string(kFace) + "outcome() after " +
                           (Async ? "async_commit() or async_fail(): they returned the answer"
                                  : "commit(): commit() returned the outcome"));
  }

  bool settled_ = false;  // by a commit or a failure, for the messages of misuse
};

}  // namespace detail

/// What `guard.begin<T>(key, payload)` returns: the key's answer (a replay, a remembered failure
/// or a refusal), or a hold on the key that the caller settles exactly once: commit(value)
/// records the value and returns the fresh Outcome; fail(message) releases the key (or records
/// the failure under remember_failures). Dropped while holding, it settles as fail() would.
/// Move-only; its guard and store must outlive it. Settle it from one thread at a time.
template <class T, class Target>
class [[nodiscard]] Attempt : public detail::AttemptState<T, false> {
  using Stored = std::conditional_t<std::is_void_v<T>, std::monostate, T>;
  using State = detail::AttemptState<T, false>;
  using State::answer_, State::fence_, State::holding_, State::require_holding;

 public:
  /// Claims through `target` (the guard calls this; see IdempotencyGuard::begin).
  Attempt(const detail::Policy& policy, Target target)
      : policy_(&policy), target_(std::move(target)) {
    Result<Claim> claimed = detail::claim_or_wait(*policy_, target_);
    if (!claimed) {
      answer_.emplace(Outcome<T>::failed(std::move(claimed).failure()));
      return;
    }
    Claim& claim = claimed.value();
    if (claim.status != ClaimStatus::acquired) {
      answer_.emplace(detail::answer_stored<T>(*policy_, target_, claim));
      return;
    }
    this->hold(claim.fence);
    transaction_ = claim.transaction;
    if (claim.took_over && !IDEM_SIM_MUTATE(11)) {
      detail::notify(*policy_, target_, Event::took_over, fence_, {});
    }
    if constexpr (requires { target_.keep_request(fence_); }) {
      if (Status kept = target_.keep_request(fence_); !kept) {
        release(/*remember=*/false, /*undo=*/false, {});
        answer_.emplace(Outcome<T>::failed(kept.failure()));
      }
    }
  }

  /// An attempt refused before any store call (a key the guard rejects).
  Attempt(Failure refused, Target target) : policy_(nullptr), target_(std::move(target)) {
    answer_.emplace(Outcome<T>::failed(std::move(refused)));
  }

  Attempt(Attempt&& other) noexcept
      : State(std::move(other)),
        policy_(other.policy_),
        target_(std::move(other.target_)),
        transaction_(other.transaction_) {}
  Attempt& operator=(Attempt&&) = delete;

  ~Attempt() {
    if (!holding_) return;
    try {
      release(policy_->remember_failures, /*undo=*/true,
              "the claim was dropped without commit() or fail()");
    } catch (...) {
      // An observer threw while reporting; the key is settled or its lease will expire.
    }
  }

  /// Renews the lease for `lease` from now (zero: the guard's lease). lease_lost: the key was
  /// taken over, stop.
  Status extend(std::chrono::milliseconds lease = std::chrono::milliseconds{0}) {
    require_holding("extend()");
    return target_.extend(fence_, lease.count() > 0 ? lease : target_.lease());
  }
  /// In transactional mode, the store's open transaction the record commits with (see
  /// Context::native_transaction()). Holding only.
  auto native_transaction() const {
    require_holding("native_transaction()");
    return transaction_;
  }
  /// The Context a handler written for execute() takes. Holding only; valid until the Attempt
  /// settles or moves.
  Context& context() {
    require_holding("context()");
    if (!context_) {
      context_.emplace(target_.context_store(), target_.ticket(fence_), target_.lease(),
                       transaction_);
    }
    return *context_;
  }

  /// Records `value` for repeats and returns it as a fresh Outcome (recorded() says whether the
  /// store kept it). Holding only. A value the codec cannot encode is remembered as
  /// handler_failed and the codec's exception propagates.
  Outcome<T> commit(Stored value) requires(!std::is_void_v<T>) {
    this->settle("commit()");
    context_.reset();
    return detail::commit_result<T>(*policy_, target_, fence_, std::move(value));
  }
  /// Records success of a handler without a result. Holding only.
  Outcome<T> commit() requires std::is_void_v<T> {
    this->settle("commit()");
    context_.reset();
    return detail::commit_result<T>(*policy_, target_, fence_, std::monostate{});
  }

  /// The work failed: releases the key so a retry runs again, or under remember_failures records
  /// `message` as errc::handler_failed (after undoing the work's writes through the store's
  /// transaction). Holding only. Returns what became of the key, which outcome() then holds:
  /// handler_failed (remembered) or handler_aborted (released, or left to its lease).
  std::error_code fail(std::string_view message) {
    this->settle("fail()");
    const errc settled = release(policy_->remember_failures, /*undo=*/true, message);
    answer_.emplace(Outcome<T>::failed(make_failure(settled, std::string(message))));
    return make_error_code(settled);
  }

  // The guard's and layer chain's view of what was claimed; not for callers.
  const Target& target() const noexcept { return target_; }

 private:
  errc release(bool remember, bool undo, std::string_view message) {
    holding_ = false;
    context_.reset();
    return detail::settle_failure(*policy_, target_, fence_, message, remember, undo);
  }

  const detail::Policy* policy_;
  Target target_;
  decltype(Claim::transaction) transaction_{};
  std::optional<Context> context_;
};

}  // namespace idem
