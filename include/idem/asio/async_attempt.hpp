#pragma once
// AsyncAttempt: the two-phase form of an AsyncGuard call (docs/two_phase.md).

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
#include "idem/attempt.hpp"
#include "idem/engine/engine.hpp"
#include "idem/outcome.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

/// What `co_await guard.async_begin<T>(key, payload)` returns, as idem::Attempt is for
/// IdempotencyGuard. Its settling calls finish whatever the caller's cancellation. Dropped while
/// holding, it settles as async_fail would in a detached coroutine on the executor it was begun
/// on, whose io_context must run it; the guard must outlive it. Move-only, not thread-safe.
template <class T, AsyncStore S>
class [[nodiscard]] AsyncAttempt : public detail::AttemptState<T, true> {
  using Stored = std::conditional_t<std::is_void_v<T>, std::monostate, T>;
  using State = detail::AttemptState<T, true>;
  using State::fence_, State::holding_, State::require_holding;

 public:
  /// An answered attempt (the guard's; see AsyncGuard::async_begin).
  AsyncAttempt(const detail::Policy& policy, detail::AsyncTarget<S> target, Outcome<T> answer)
      : policy_(&policy), target_(std::move(target)) {
    this->answer_.emplace(std::move(answer));
  }
  /// A hold on the key under `fence`; settled on `executor` if it is dropped.
  AsyncAttempt(const detail::Policy& policy, detail::AsyncTarget<S> target, Fence fence,
               boost::asio::any_io_executor executor)
      : policy_(&policy), target_(std::move(target)), executor_(std::move(executor)) {
    this->hold(fence);
  }

  AsyncAttempt(AsyncAttempt&& other) noexcept
      : State(std::move(other)),
        policy_(other.policy_),
        target_(std::move(other.target_)),
        executor_(std::move(other.executor_)) {}
  AsyncAttempt& operator=(AsyncAttempt&&) = delete;

  ~AsyncAttempt() {
    if (!holding_) return;
    try {
      boost::asio::co_spawn(executor_, settle_dropped(policy_, std::move(target_), fence_),
                            boost::asio::detached);
    } catch (...) {
      // Out of memory for the coroutine: the key is left to its lease.
    }
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
    this->settle("async_commit()");
    return detail::uncancelled(
        detail::async_commit_result<T>(*policy_, target_, fence_, std::move(value)));
  }
  /// Records success of work without a result. Holding only.
  boost::asio::awaitable<Outcome<T>> async_commit() requires std::is_void_v<T> {
    this->settle("async_commit()");
    return detail::uncancelled(
        detail::async_commit_result<T>(*policy_, target_, fence_, std::monostate{}));
  }
  /// The work failed: releases the key for a retry, or under Options::remember_failures records
  /// `message`; returns what became of the key, as Attempt::fail() does. Holding only.
  boost::asio::awaitable<std::error_code> async_fail(std::string message) {
    this->settle("async_fail()");
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

  const detail::Policy* policy_;
  detail::AsyncTarget<S> target_;
  boost::asio::any_io_executor executor_;
};

namespace detail {

/// async_begin's claim, with the engine's cancellation handling: a claim in flight completes; a
/// key acquired by a caller cancelled meanwhile is settled and operation_aborted thrown.
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
