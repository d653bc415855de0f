#pragma once
// BlockingStore<A>: any idem::AsyncStore as a blocking idem::Store, each call run to its end on
// the calling thread, so that the conformance kit's record cases (and a test of an asynchronous
// store written elsewhere) call it as they call any store. Link idem::asio (Boost.Asio).

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <future>
#include <optional>
#include <utility>

#include "idem/asio/async_store.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem::testing {

/// Owns an event loop and the asynchronous store A made on it (A's constructor takes the loop's
/// executor first, then `args`). Each call drives the loop on the calling thread until the
/// call's answer is there; several threads may call at once (the loop then runs on each of them
/// in turn), as A allows. Not for production: a service awaits the asynchronous store.
template <AsyncStore A>
class BlockingStore {
 public:
  template <class... Args>
  explicit BlockingStore(Args&&... args)
      : async_(io_.get_executor(), std::forward<Args>(args)...) {}
  BlockingStore(const BlockingStore&) = delete;
  BlockingStore& operator=(const BlockingStore&) = delete;

  Result<Claim> claim(const ClaimRequest& request) { return run(async_.async_claim(request)); }
  Status commit(const Ticket& ticket, const Completion& completion) {
    return run(async_.async_commit(ticket, completion));
  }
  Status abort(const Ticket& ticket) { return run(async_.async_abort(ticket)); }
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    return run(async_.async_extend(ticket, lease));
  }

  /// Whether await_change waits (the asynchronous store's own wakes()).
  bool wakes() const noexcept requires AsyncWakingStore<A> { return async_.wakes(); }
  /// The asynchronous wait, run to its end: so the blocking kits' wake cases reach it.
  void await_change(const Ticket& held,
                    std::chrono::milliseconds bound) requires AsyncWakingStore<A> {
    (void)run(async_.async_await_change(held, bound));
  }

  /// The asynchronous store, for an AsyncGuard over it (idem/testing/async_face.hpp).
  A& async() noexcept { return async_; }

  /// Runs `call` (an awaitable on this store's loop) to its end and returns its answer.
  template <class T>
  T run(boost::asio::awaitable<T> call) {
    // co_spawn needs a default-constructible result; an Outcome is not one.
    auto wrapped = [](boost::asio::awaitable<T> c) -> boost::asio::awaitable<std::optional<T>> {
      co_return co_await std::move(c);
    };
    std::future<std::optional<T>> done =
        boost::asio::co_spawn(io_, wrapped(std::move(call)), boost::asio::use_future);
    while (done.wait_for(std::chrono::seconds{0}) != std::future_status::ready) {
      io_.run_one_for(std::chrono::milliseconds{5});
    }
    return std::move(*done.get());
  }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{
      io_.get_executor()};
  A async_;  // after the loop: made on it, gone before it
};

}  // namespace idem::testing
