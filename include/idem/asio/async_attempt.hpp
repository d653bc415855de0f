#pragma once
// AsyncAttempt: the two-phase form of an AsyncGuard call. `co_await guard.async_begin<T>(key,
// payload)` claims; the caller does the work however it likes (other coroutines, callbacks,
// several steps) and settles the key with `co_await async_commit(value)` or `async_fail(why)`.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>
#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "idem/asio/async_store.hpp"
#include "idem/asio/detail/async_engine.hpp"
#include "idem/engine/engine.hpp"
#include "idem/outcome.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

/// What `co_await guard.async_begin<T>(key, payload)` returns: the key's answer (a replayed
/// value or failure, a refusal such as in_progress with retry_after()), or a hold on the key,
/// as idem::Attempt is for IdempotencyGuard (docs/two_phase.md).
///
/// Holding (`acquired()`), the caller does the work and settles the key exactly once: `co_await
/// async_commit(value)` records the value and returns the fresh Outcome; `co_await
/// async_fail(message)` releases the key for a retry (or, under Options::remember_failures,
/// records the failure). The settling calls finish whatever the caller's cancellation: the work
/// happened. An AsyncAttempt destroyed while it holds the key (a forgotten path, an exception)
/// cannot wait in its destructor: it starts the settlement, as async_fail would, as a detached
/// coroutine on the executor it was begun on. That executor's io_context must run it, and the
/// guard must outlive it.
///
/// Move-only. Refers to its guard and store. Not thread-safe: settle it from one coroutine.
template <class T, AsyncStore S>
class [[nodiscard]] AsyncAttempt {
  using Stored = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

 public:
  /// An answered attempt (the guard's; see AsyncGuard::async_begin).
  AsyncAttempt(const detail::Policy& policy, detail::AsyncTarget<S> target, Outcome<T> answer)
      : policy_(&policy), target_(std::move(target)), answer_(std::move(answer)) {}
  /// A hold on the key under `fence`; settled on `executor` if it is dropped.
  AsyncAttempt(const detail::Policy& policy, detail::AsyncTarget<S> target, Fence fence,
               boost::asio::any_io_executor executor)
      : policy_(&policy),
        target_(std::move(target)),
        fence_(fence),
        holding_(true),
        executor_(std::move(executor)) {}

  AsyncAttempt(AsyncAttempt&& other) noexcept
      : policy_(other.policy_),
        target_(std::move(other.target_)),
        answer_(std::move(other.answer_)),
        fence_(other.fence_),
        holding_(std::exchange(other.holding_, false)),
        executor_(std::move(other.executor_)) {}
  AsyncAttempt& operator=(AsyncAttempt&&) = delete;
  AsyncAttempt(const AsyncAttempt&) = delete;
  AsyncAttempt& operator=(const AsyncAttempt&) = delete;

  ~AsyncAttempt() {
    if (!holding_) return;
    try {
      boost::asio::co_spawn(executor_, settle_dropped(policy_, std::move(target_), fence_),
                            boost::asio::detached);
    } catch (...) {
      // Out of memory for the coroutine: the key is left to its lease.
    }
  }

  /// True while this attempt holds the key: do the work, then async_commit() or async_fail().
  bool acquired() const noexcept { return holding_; }
  /// The key's answer when it was not acquired: a replayed value (replayed()), a remembered
  /// failure, or a refusal. Throws std::logic_error while holding or once settled.
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

  /// Renews the lease for `lease` from now (zero: the guard's lease); lease_lost when the key
  /// was taken over: stop. Holding only.
  boost::asio::awaitable<Status> async_extend(
      std::chrono::milliseconds lease = std::chrono::milliseconds{0}) {
    require_holding("async_extend()");
    return target_.store().async_extend(target_.ticket(fence_),
                                        lease.count() > 0 ? lease : target_.lease());
  }

  /// Records `value` for repeats and returns it as the fresh Outcome (recorded() says whether
  /// the store kept it, commit_error() why not). Holding only. A value the codec cannot encode
  /// is remembered as handler_failed and the codec's exception propagates.
  boost::asio::awaitable<Outcome<T>> async_commit(Stored value) requires(!std::is_void_v<T>) {
    require_holding("async_commit()");
    holding_ = false;
    return detail::uncancelled(
        detail::async_commit_result<T>(*policy_, target_, fence_, std::move(value)));
  }
  /// Records success of work without a result. Holding only.
  boost::asio::awaitable<Outcome<T>> async_commit() requires std::is_void_v<T> {
    require_holding("async_commit()");
    holding_ = false;
    return detail::uncancelled(
        detail::async_commit_result<T>(*policy_, target_, fence_, std::monostate{}));
  }
  /// The work failed: releases the key so that a retry runs again, or under
  /// Options::remember_failures records `message` as errc::handler_failed. Holding only.
  /// Returns what became of the key, as Attempt::fail() does: errc::handler_failed
  /// (remembered) or errc::handler_aborted (not: a retry runs the work again). Failures of the
  /// store go to the observer; the key is then left to its lease.
  boost::asio::awaitable<std::error_code> async_fail(std::string message) {
    require_holding("async_fail()");
    holding_ = false;
    return detail::uncancelled(settle_failed(policy_, target_, fence_, std::move(message)));
  }

 private:
  static boost::asio::awaitable<std::error_code> settle_failed(const detail::Policy* policy,
                                                               detail::AsyncTarget<S>& target,
                                                               Fence fence, std::string message) {
    co_return make_error_code(co_await detail::async_settle_failure(
        *policy, target, fence, std::move(message), policy->remember_failures));
  }
  static boost::asio::awaitable<void> settle_dropped(const detail::Policy* policy,
                                                     detail::AsyncTarget<S> target, Fence fence) {
    std::string message = "the claim was dropped without async_commit() or async_fail()";
    co_await detail::async_settle_failure(*policy, target, fence, std::move(message),
                                          policy->remember_failures);
  }

  void require_holding(const char* what) const {
    if (!holding_) {
      throw std::logic_error(std::string("idem::AsyncAttempt::") + what +
                             ": the attempt does not hold the key (not acquired, or settled)");
    }
  }
  Outcome<T>& answer() {
    if (!answer_) {
      throw std::logic_error(
          "idem::AsyncAttempt::outcome(): the attempt holds the key; the outcome comes from "
          "async_commit()");
    }
    return *answer_;
  }

  const detail::Policy* policy_;
  detail::AsyncTarget<S> target_;
  std::optional<Outcome<T>> answer_;
  Fence fence_ = 0;
  bool holding_ = false;
  boost::asio::any_io_executor executor_;
};

namespace detail {

/// async_begin's claim: claim_or_wait as async_execute_steps runs it, with the engine's own
/// handling of cancellation: a claim in flight completes; if the caller was cancelled meanwhile
/// a key it acquired is settled (released, or its failure remembered) and operation_aborted is
/// thrown.
template <class T, class S>
boost::asio::awaitable<AsyncAttempt<T, S>> async_begin_on(const Policy& policy,
                                                          AsyncTarget<S> target) {
  const bool caller_throws = co_await boost::asio::this_coro::throw_if_cancelled();
  co_await boost::asio::this_coro::throw_if_cancelled(false);
  const ClaimRequest request = target.request();
  begin_call(policy, target);
  Result<Claim> claimed = co_await target.store().async_claim(request);
  if (!first_claim_ends(policy, target, claimed)) {
    std::exception_ptr gave_up;  // a cancelled wait throws; the caller's setting comes back first
    try {
      claimed = co_await async_wait_for_holder(policy, target, request, std::move(claimed).value());
    } catch (...) {
      gave_up = std::current_exception();
    }
    if (gave_up) {
      co_await boost::asio::this_coro::throw_if_cancelled(caller_throws);
      std::rethrow_exception(gave_up);
    }
  }
  const bool acquired = claimed && claimed->status == ClaimStatus::acquired;
  if (cancelled(co_await boost::asio::this_coro::cancellation_state)) {
    co_await async_settle_cancelled(policy, target, claimed, "cancelled before the work began");
    co_await boost::asio::this_coro::throw_if_cancelled(caller_throws);
    throw_cancelled();
  }
  co_await boost::asio::this_coro::throw_if_cancelled(caller_throws);
  if (!claimed) {
    co_return AsyncAttempt<T, S>(policy, std::move(target),
                                 Outcome<T>::failed(std::move(claimed).failure()));
  }
  Claim& claim = claimed.value();
  if (!acquired) {
    Outcome<T> answer = answer_stored<T>(policy, target, claim);
    co_return AsyncAttempt<T, S>(policy, std::move(target), std::move(answer));
  }
  if (claim.took_over) notify(policy, target, Event::took_over, claim.fence, {});
  co_return AsyncAttempt<T, S>(policy, std::move(target), claim.fence,
                               co_await boost::asio::this_coro::executor);
}

template <class T, class S>
boost::asio::awaitable<AsyncAttempt<T, S>> async_begin_refused(const Policy& policy,
                                                               AsyncTarget<S> target,
                                                               Failure refused) {
  co_return AsyncAttempt<T, S>(policy, std::move(target), Outcome<T>::failed(std::move(refused)));
}

}  // namespace detail
}  // namespace idem
