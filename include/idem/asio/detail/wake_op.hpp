#pragma once
// One asynchronous wait for a hold's end, for the stores' async_await_change: the caller's
// coroutine suspends until the store's side completes the wait (woken, its bound passed, or it
// could not wait) or the coroutine is cancelled, whichever comes first. The two may race from
// different threads: the first completes the wait, the other finds it done and does nothing.

#include <atomic>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

namespace idem::detail {

/// The store's side of one wait: complete(waited) ends it, once; later calls do nothing.
/// `waited` false: the store could not wait at all (no free waiter), the caller pauses itself.
class WaitCompletion {
 public:
  virtual void complete(bool waited) = 0;

 protected:
  WaitCompletion() = default;
  ~WaitCompletion() = default;
  WaitCompletion(const WaitCompletion&) = default;
  WaitCompletion& operator=(const WaitCompletion&) = default;
};

template <class Handler>
class WakeOp final : public WaitCompletion {
 public:
  explicit WakeOp(Handler handler)
      : handler_(std::move(handler)),
        work_(boost::asio::make_work_guard(boost::asio::get_associated_executor(*handler_))) {}

  // The caller's cancellation ends the wait at once. The slot keeps a weak reference: once the
  // wait is over and the store's side let go, a late cancellation finds nothing.
  static void watch_cancellation(const std::shared_ptr<WakeOp>& op,
                                 boost::asio::cancellation_slot slot) {
    if (!slot.is_connected()) return;
    slot.assign([weak = std::weak_ptr<WakeOp>(op)](boost::asio::cancellation_type) {
      if (auto live = weak.lock()) live->complete(true);
    });
  }

  void complete(bool waited) override {
    std::unique_lock lock(mutex_);
    if (!handler_) return;
    Handler handler = std::move(*handler_);
    handler_.reset();
    auto work = std::move(*work_);
    work_.reset();
    lock.unlock();
    // Once resumed, the caller may destroy its io_context, so every touch of it from here (the
    // post's wake-up, the work guard's end) comes first: the handler waits for `posted`.
    auto posted = std::make_shared<std::atomic<bool>>(false);
    boost::asio::post(work.get_executor(), [h = std::move(handler), posted, waited]() mutable {
      posted->wait(false);
      std::move(h)(waited);
    });
    work.reset();
    posted->store(true);
    posted->notify_one();
  }

 private:
  std::mutex mutex_;
  std::optional<Handler> handler_;  // until completed, under mutex_
  std::optional<boost::asio::executor_work_guard<boost::asio::associated_executor_t<Handler>>>
      work_;  // keeps the caller's executor running while it waits
};

/// Suspends the calling coroutine while `begin(done)` starts the store's wait, which ends with
/// done->complete(waited) from any thread; the caller's cancellation ends it sooner (true then).
/// Yields `waited`. `begin` must not complete the handler inline in a way that throws.
template <class Begin>
boost::asio::awaitable<bool> async_wait_with(Begin begin) {
  return boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&, void(bool)>(
      [](auto handler, Begin start) {
        using Handler = decltype(handler);
        boost::asio::cancellation_slot slot =
            boost::asio::get_associated_cancellation_slot(handler);
        auto op = std::make_shared<WakeOp<Handler>>(std::move(handler));
        WakeOp<Handler>::watch_cancellation(op, slot);
        start(std::shared_ptr<WaitCompletion>(op));
      },
      boost::asio::use_awaitable, std::move(begin));
}

}  // namespace idem::detail
