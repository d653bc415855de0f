#pragma once
// The writers' lock of one SQLite file in this process, with a deadline, that any thread may
// release. Waiters queue in arrival order, but a free lock goes to whoever asks first until the
// oldest waiter has been the oldest for kFairAfter; then it is handed straight to that waiter
// (src/common/waiter_queue.hpp says why and what that bounds).

#include <chrono>
#include <cstddef>
#include <mutex>

#include "common/waiter_queue.hpp"

namespace idem::sql {

class WritersLock {
 public:
  using Clock = std::chrono::steady_clock;
  /// How long the oldest waiter lets newcomers pass before the lock is handed to it: a few
  /// short write transactions.
  static constexpr std::chrono::microseconds kFairAfter{500};

  WritersLock() = default;
  WritersLock(const WritersLock&) = delete;
  WritersLock& operator=(const WritersLock&) = delete;

  /// True once the lock is the caller's; false when `deadline` came first (the caller is then
  /// out of the queue). Throws std::bad_alloc.
  bool lock_until(Clock::time_point deadline);
  /// Frees the lock and wakes the oldest waiter, or hands the lock to it once it has waited
  /// kFairAfter. The holder may call it from any thread.
  void unlock() noexcept;
  std::size_t waiting();  // threads waiting now

 private:
  struct Waiter : detail::QueuedWaiter {
    bool granted = false;  // handed over by unlock(), under mutex_
  };

  std::mutex mutex_;
  bool held_ = false;  // stays set while the lock is handed from holder to waiter
  detail::WaiterQueue<Waiter> waiters_{kFairAfter};
};

}  // namespace idem::sql
