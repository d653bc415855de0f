#pragma once
// The protocol engine's steps as coroutines, for AsyncGuard: the blocking engine's decisions
// (engine/engine.hpp), with store calls and pauses that suspend. Cancellation is looked at at each
// suspension; store calls are never cut short. Before the result exists a cancelled call settles
// what it holds and throws operation_aborted; once it exists it is committed and returned.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "idem/asio/async_store.hpp"
#include "idem/codec.hpp"
#include "idem/engine/call_timer.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/engine/engine.hpp"
#include "idem/engine/handler_call.hpp"
#include "idem/key.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

/// What a handler of AsyncGuard::async_execute may take: the holder's fence, and a lease
/// renewal that suspends instead of blocking. Valid only while the handler runs.
class AsyncContext {
 public:
  /// The fence of this holder: pass it to downstream systems that can reject stale writers.
  Fence fence() const noexcept { return ticket_.fence; }
  /// Renews the lease for `lease` from now (zero: the guard's lease); lease_lost: stop.
  boost::asio::awaitable<Status> extend_lease(
      std::chrono::milliseconds lease = std::chrono::milliseconds{0}) {
    return extend_(store_, ticket_, lease.count() > 0 ? lease : default_lease_);
  }

  template <class S>
  AsyncContext(S& store, Ticket ticket, std::chrono::milliseconds default_lease)
      : store_(&store),
        ticket_(ticket),
        default_lease_(default_lease),
        extend_([](void* s, const Ticket& t, std::chrono::milliseconds l) {
          return static_cast<S*>(s)->async_extend(t, l);
        }) {}
  AsyncContext(const AsyncContext&) = delete;
  AsyncContext& operator=(const AsyncContext&) = delete;

 private:
  using ExtendFn = boost::asio::awaitable<Status> (*)(void*, const Ticket&,
                                                      std::chrono::milliseconds);
  void* store_;
  Ticket ticket_;
  std::chrono::milliseconds default_lease_;
  ExtendFn extend_;
};

namespace detail {

template <class T>
struct AwaitedValue {
  using type = T;
  static constexpr bool awaitable = false;
};
template <class T, class Executor>
struct AwaitedValue<boost::asio::awaitable<T, Executor>> {
  using type = T;
  static constexpr bool awaitable = true;
};

/// What the engine claims for an AsyncGuard: one key of one asynchronous store. It owns the
/// effective key, so a call may outlive its caller's Key.
template <class S>
class AsyncTarget {
 public:
  AsyncTarget(S& store, const Options& options, const Key& key, Fingerprint fingerprint)
      : store_(&store),
        options_(&options),
        key_(effective_key_string(options.scope, key.principal, key.id)),
        fingerprint_(fingerprint) {
    if (options.observer) observed_ = std::make_unique<Observed>(Observed{std::string(key.id), {}});
  }

  // What the steps send; they keep it in their own frames while the store's call runs.
  ClaimRequest request() const noexcept {
    return ClaimRequest{key_,
                        fingerprint_,
                        options_->lease,
                        held_retention(*options_->ttl, options_->lease),
                        std::chrono::milliseconds{0},
                        /*rewindable=*/false};
  }
  Completion completion(ClaimStatus status, std::string_view bytes) const noexcept {
    return Completion{status, bytes, *options_->ttl};
  }

  std::string_view scope() const noexcept { return options_->scope; }
  std::string_view key_id() const noexcept {
    return observed_ ? std::string_view(observed_->id) : std::string_view();
  }
  static std::string refusal_message(errc) { return {}; }
  std::chrono::milliseconds lease() const noexcept { return options_->lease; }
  S& store() const noexcept { return *store_; }
  Ticket ticket(Fence fence) const noexcept { return Ticket{key_, fence}; }
  // Called with an observer only (engine/engine.hpp looks at policy.observer first).
  CallTimer& timer() const noexcept { return observed_->timer; }
  HandlerStart& handler_start() const noexcept { return handler_start_; }

 private:
  S* store_;
  const Options* options_;
  std::string key_;  // the effective key
  Fingerprint fingerprint_;
  // Made only for observers, so that the target (in the engine's coroutine frame) stays small.
  struct Observed {
    std::string id;
    CallTimer timer;  // for observers that time or trace calls
  };
  std::unique_ptr<Observed> observed_;
  mutable HandlerStart handler_start_;
};

// Whether the coroutine's cancellation slot was triggered (read without suspending: a helper
// coroutine would cost a frame per call).
inline bool cancelled(const boost::asio::cancellation_state& state) noexcept {
  return state.cancelled() != boost::asio::cancellation_type::none;
}

[[noreturn]] inline void throw_cancelled() {
  throw boost::system::system_error(boost::asio::error::operation_aborted,
                                    "idem: async_execute cancelled");
}

/// A pause on the policy's clock: a timer of the event loop for the steady clock; for an injected
/// clock its own non-blocking sleep_for(), then a yield to the loop. True when cancelled.
class AsyncPause {
 public:
  explicit AsyncPause(Clock& clock)
      : clock_(&clock), real_time_(dynamic_cast<SteadyClock*>(&clock) != nullptr) {}

  boost::asio::awaitable<bool> pause(Clock::duration d) {
    if (!real_time_) {
      clock_->sleep_for(d);
      co_await boost::asio::post(co_await boost::asio::this_coro::executor,
                                 boost::asio::use_awaitable);
      co_return false;
    }
    if (!timer_) timer_.emplace(co_await boost::asio::this_coro::executor);
    timer_->expires_after(d);
    auto [waited] = co_await timer_->async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    co_return static_cast<bool>(waited);
  }

 private:
  Clock* clock_;
  bool real_time_;
  std::optional<boost::asio::steady_timer> timer_;
};

/// waits_on_store for AsyncGuard: a wait for the holder suspends on the store (woken when the
/// hold ends) only under Wait, with the real steady clock (a test's clock moves only when slept
/// on), on an AsyncWakingStore that wakes.
template <class S>
bool async_waits_on_store(const Policy& policy, const AsyncTarget<S>& target) {
  if constexpr (AsyncWakingStore<S>) {
    return policy.wait() != nullptr && target.store().wakes() &&
           dynamic_cast<const SteadyClock*>(policy.clock.get()) != nullptr;
  } else {
    return false;
  }
}

/// pause_for_holder as a coroutine: a wait on the store that the hold's end cuts short, or the
/// pause on the clock (polling, and after a store that could not wait). True when cancelled.
template <class S>
boost::asio::awaitable<bool> async_pause_for_holder(AsyncTarget<S>& target, AsyncPause& pauses,
                                                    bool waking, Fence holder,
                                                    Clock::duration pause) {
  if constexpr (AsyncWakingStore<S>) {
    if (waking) {
      const auto until = std::chrono::steady_clock::now() + pause;
      const Ticket held = target.ticket(holder);
      if (co_await target.store().async_await_change(
              held, std::chrono::ceil<std::chrono::milliseconds>(pause))) {
        co_return cancelled(co_await boost::asio::this_coro::cancellation_state);
      }
      pause = until - std::chrono::steady_clock::now();
      if (pause <= Clock::duration::zero()) co_return false;
    }
  }
  co_return co_await pauses.pause(pause);
}

/// The rest of claim_or_wait once a claim found the key in progress: pause (or wait on the
/// store), claim again, until the holder finishes, the wait runs out (refuse_busy) or the claim
/// is answered. A cancelled pause throws (nothing is held). Apart from the first claim so that
/// most calls skip its frame.
template <class S>
boost::asio::awaitable<Result<Claim>> async_wait_for_holder(const Policy& policy,
                                                            AsyncTarget<S>& target,
                                                            const ClaimRequest& request,
                                                            Claim busy) {
  WaitPacer pacer(policy.wait(), *policy.clock);
  AsyncPause pauses(*policy.clock);
  const bool waking = async_waits_on_store(policy, target);
  ClaimRequest again = request;
  again.after_wait = true;
  for (;;) {
    const auto pause = pacer.next_pause(busy, waking);
    if (!pause) co_return refuse_busy(policy, target, busy);
    if (cancelled(co_await boost::asio::this_coro::cancellation_state)) throw_cancelled();
    if (co_await async_pause_for_holder(target, pauses, waking, busy.fence, *pause)) {
      throw_cancelled();
    }
    Result<Claim> claim = co_await target.store().async_claim(again);
    if (claim_refused(policy, target, claim)) co_return claim;
    if (claim->status != ClaimStatus::in_progress) {
      claim_answered(policy, target, claim.value());
      co_return claim;
    }
    busy = std::move(claim).value();
  }
}

/// After the first claim of claim_or_wait: true when it ends the claim step; false when a live
/// holder has the key and the caller goes on in async_wait_for_holder.
template <class S>
bool first_claim_ends(const Policy& policy, AsyncTarget<S>& target, Result<Claim>& claimed) {
  if (claim_refused(policy, target, claimed)) return true;
  if (claimed->status == ClaimStatus::in_progress) return false;
  claim_answered(policy, target, claimed.value());
  return true;
}

/// commit_with_retry after a first try that did not end it (`last`), until CommitTries says a
/// status is the answer; apart so that most commits skip its frame. Cancellation does not stop
/// it: the work happened (a cancelled pause only makes the next try sooner).
template <class S>
boost::asio::awaitable<Status> async_commit_retries(const Policy& policy, AsyncTarget<S>& target,
                                                    Fence fence, ClaimStatus status,
                                                    std::string_view bytes, CommitTries tries,
                                                    Status last) {
  AsyncPause pauses(*policy.clock);
  const Ticket ticket = target.ticket(fence);
  const Completion completion = target.completion(status, bytes);
  for (;;) {
    notify(policy, target, Event::commit_retried, fence, last.error());
    (void)co_await pauses.pause(tries.next_pause());
    last = co_await target.store().async_commit(ticket, completion);
    if (tries.finished(last)) {
      Status answer = tries.answer(std::move(last));
      if (!answer) report(policy, target, answer, fence);
      co_return answer;
    }
  }
}

/// settle_failure for a store without rewind: release the key, or remember the failure; returns
/// what became of it. Failures are reported, never thrown. `message` comes as a named variable:
/// g++ 12 frees a temporary built in a conditional expression twice as a coroutine parameter.
template <class S>
boost::asio::awaitable<errc> async_settle_failure(const Policy& policy, AsyncTarget<S>& target,
                                                  Fence fence, std::string message, bool remember) {
  handler_done(policy, target);
  const Ticket ticket = target.ticket(fence);
  Status settled;
  if (remember) {
    const std::string failure = encode_failure(errc::handler_failed, message);
    const Completion completion = target.completion(ClaimStatus::failed, failure);
    settled = co_await target.store().async_commit(ticket, completion);
  } else {
    settled = co_await target.store().async_abort(ticket);
  }
  if (!settled) report(policy, target, settled, fence);
  const errc outcome = remember && settled ? errc::handler_failed : errc::handler_aborted;
  finish_settled(policy, target, Event::aborted, fence, make_error_code(outcome));
  co_return outcome;
}

/// After a caller was cancelled while its claim was in flight: whatever the claim found, the
/// caller gave up; a key it acquired is settled as a failed handler's would be, `why` its message.
template <class S>
boost::asio::awaitable<void> async_settle_cancelled(const Policy& policy, AsyncTarget<S>& target,
                                                    const Result<Claim>& claimed, const char* why) {
  if (!claimed || claimed->status != ClaimStatus::acquired) co_return;
  std::string message = why;
  co_await async_settle_failure(policy, target, claimed->fence, std::move(message),
                                policy.remember_failures);
}

/// commit_result and commit_bytes: encode, the result limit, commit with retry.
template <class T, class S, class Stored>
boost::asio::awaitable<Outcome<T>> async_commit_result(const Policy& policy, AsyncTarget<S>& target,
                                                       Fence fence, Stored value) {
  std::string encoded;
  std::string_view bytes;
  if constexpr (!std::is_void_v<T>) {
    std::exception_ptr unencodable;
    try {
      bytes = stored_bytes(value, encoded);
    } catch (...) {
      unencodable = std::current_exception();
    }
    if (unencodable) {
      std::string message = exception_message(unencodable);
      co_await async_settle_failure(policy, target, fence, std::move(message), /*remember=*/true);
      std::rethrow_exception(unencodable);
    }
  }
  // `executed` ends the call, after the commit: it carries the commit's duration and error.
  handler_done(policy, target);
  // A result over the limit is not stored: the failure is, so that repeats learn of it.
  ClaimStatus status = ClaimStatus::completed;
  std::optional<Failure> too_large;
  std::string failure;
  if (bytes.size() > policy.max_result_size) {
    too_large = result_too_large(policy, bytes.size());
    failure = encode_failure(errc::result_too_large, too_large->message);
    status = ClaimStatus::failed;
    bytes = failure;
  }
  // The first try in this frame (most commits end on it), the others in async_commit_retries.
  CommitTries tries(policy.commit_retry);
  Status committed =
      co_await target.store().async_commit(target.ticket(fence), target.completion(status, bytes));
  if (!tries.finished(committed)) {
    committed = co_await async_commit_retries(policy, target, fence, status, bytes, tries,
                                              std::move(committed));
  } else if (committed = tries.answer(std::move(committed)); !committed) {
    report(policy, target, committed, fence);
  }
  finish_settled(policy, target, Event::executed, fence, committed.error());
  if (too_large) {
    notify(policy, target, Event::result_unrecorded, fence, too_large->code);
    if (committed.error() == errc::lease_lost) {
      co_return Outcome<T>::fresh(std::move(value), committed.failure());
    }
    co_return Outcome<T>::fresh(std::move(value), std::move(*too_large));
  }
  if (committed) co_return Outcome<T>::fresh(std::move(value));
  notify(policy, target, Event::result_unrecorded, fence, committed.error());
  co_return Outcome<T>::fresh(std::move(value), committed.failure());
}

/// The rest of execute_on once the first claim acquired the key or found a live holder: wait,
/// run the handler (under `caller_throws`, the caller's throw_if_cancelled), commit or settle.
/// The Outcome goes to `out`, held by async_execute_on's frame, to keep this frame small.
template <class R, class S, class Fn>
boost::asio::awaitable<void> async_execute_steps(const Policy& policy, AsyncTarget<S>& target,
                                                 Fn& fn, bool caller_throws, Result<Claim> claimed,
                                                 std::optional<Outcome<R>>& out) {
  if (claimed && claimed->status == ClaimStatus::in_progress) {
    const ClaimRequest request = target.request();
    claimed = co_await async_wait_for_holder(policy, target, request, std::move(claimed).value());
  }
  const bool acquired = claimed && claimed->status == ClaimStatus::acquired;
  if (cancelled(co_await boost::asio::this_coro::cancellation_state)) {
    co_await async_settle_cancelled(policy, target, claimed, "cancelled before the handler ran");
    throw_cancelled();
  }
  if (!claimed) {
    out.emplace(Outcome<R>::failed(std::move(claimed).failure()));
    co_return;
  }
  Claim& claim = claimed.value();
  if (!acquired) {
    out.emplace(answer_stored<R>(policy, target, claim));
    co_return;
  }
  const Fence fence = claim.fence;
  if (claim.took_over) notify(policy, target, Event::took_over, fence, {});

  using Stored = std::conditional_t<std::is_void_v<R>, std::monostate, R>;
  std::optional<Stored> value;
  std::exception_ptr thrown;
  {
    AsyncContext context(target.store(), target.ticket(fence), target.lease());
    co_await boost::asio::this_coro::throw_if_cancelled(caller_throws);
    using Return = handler_return_t<Fn, AsyncContext>;
    auto call = [&]() -> decltype(auto) { return call_handler(fn, context); };
    // The handler's value (std::monostate for void), awaiting what it returns if awaitable.
    try {
      if constexpr (AwaitedValue<Return>::awaitable && std::is_void_v<R>) {
        co_await call();
        value.emplace();
      } else if constexpr (AwaitedValue<Return>::awaitable) {
        value.emplace(co_await call());
      } else if constexpr (std::is_void_v<R>) {
        call();
        value.emplace();
      } else {
        value.emplace(call());
      }
    } catch (...) {
      thrown = std::current_exception();
    }
    co_await boost::asio::this_coro::throw_if_cancelled(false);
  }
  if (thrown) {
    // Thrown or cancelled (operation_aborted included): release the key, or remember the failure.
    const bool remember = policy.remember_failures;
    std::string message;
    if (remember) message = exception_message(thrown);
    co_await async_settle_failure(policy, target, fence, std::move(message), remember);
    std::rethrow_exception(thrown);
  }
  out.emplace(co_await async_commit_result<R>(policy, target, fence, std::move(*value)));
}

/// execute_on as a coroutine, restoring the caller's throw_if_cancelled before returning or
/// throwing. A call answered by its first claim ends in this one frame; the others go on in
/// async_execute_steps, so a replay costs one small frame allocation, not two.
template <class R, class S, class Fn>
boost::asio::awaitable<Outcome<R>> async_execute_on(const Policy& policy, AsyncTarget<S> target,
                                                    Fn fn) {
  const bool caller_throws = co_await boost::asio::this_coro::throw_if_cancelled();
  co_await boost::asio::this_coro::throw_if_cancelled(false);
  begin_call(policy, target);
  Result<Claim> claimed = co_await target.store().async_claim(target.request());
  std::optional<Outcome<R>> out;
  std::exception_ptr failed;
  bool gave_up = false;  // cancelled while the first claim was in flight, holding nothing
  if (first_claim_ends(policy, target, claimed) &&
      !(claimed && claimed->status == ClaimStatus::acquired)) {
    if (cancelled(co_await boost::asio::this_coro::cancellation_state)) {
      gave_up = true;
    } else if (!claimed) {
      out.emplace(Outcome<R>::failed(std::move(claimed).failure()));
    } else {
      out.emplace(answer_stored<R>(policy, target, claimed.value()));
    }
  } else {
    try {
      co_await async_execute_steps<R>(policy, target, fn, caller_throws, std::move(claimed), out);
    } catch (...) {
      failed = std::current_exception();
    }
  }
  co_await boost::asio::this_coro::throw_if_cancelled(caller_throws);
  if (failed) std::rethrow_exception(failed);
  if (gave_up) throw_cancelled();
  co_return std::move(*out);
}

/// Runs `inner` to its end whatever the caller's cancellation, restoring the caller's
/// throw_if_cancelled after: for the steps that settle a key, which must finish once begun.
template <class R>
boost::asio::awaitable<R> uncancelled(boost::asio::awaitable<R> inner) {
  const bool caller_throws = co_await boost::asio::this_coro::throw_if_cancelled();
  co_await boost::asio::this_coro::throw_if_cancelled(false);
  std::exception_ptr failed;
  if constexpr (std::is_void_v<R>) {
    try {
      co_await std::move(inner);
    } catch (...) {
      failed = std::current_exception();
    }
    co_await boost::asio::this_coro::throw_if_cancelled(caller_throws);
    if (failed) std::rethrow_exception(failed);
  } else {
    std::optional<R> out;
    try {
      out.emplace(co_await std::move(inner));
    } catch (...) {
      failed = std::current_exception();
    }
    co_await boost::asio::this_coro::throw_if_cancelled(caller_throws);
    if (failed) std::rethrow_exception(failed);
    co_return std::move(*out);
  }
}

template <class R>
boost::asio::awaitable<Outcome<R>> async_ready(Outcome<R> out) {
  co_return out;
}

}  // namespace detail
}  // namespace idem
