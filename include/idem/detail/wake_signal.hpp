#pragma once
// WakeSignal: a binary semaphore on a mutex and a condition variable, for one waiter at a time.
// Not std::binary_semaphore: libstdc++'s can lose a wakeup under contention and leave its waiter
// asleep for good (GCC bugs 98033 and 104928; GCC 12 as Debian 12 ships it is affected).

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace idem::detail {

class WakeSignal {
 public:
  explicit WakeSignal(std::ptrdiff_t initial) : count_(initial) {}
  WakeSignal(const WakeSignal&) = delete;
  WakeSignal& operator=(const WakeSignal&) = delete;

  // Notifies under the mutex: a waiter that returns may destroy this signal at once (it often
  // lives in the waiter's stack frame), so the releaser must not touch it once the mutex is free.
  void release() {
    std::lock_guard lock(mutex_);
    ++count_;
    woken_.notify_one();
  }

  void acquire() {
    std::unique_lock lock(mutex_);
    woken_.wait(lock, [&] { return count_ > 0; });
    --count_;
  }

  /// acquire() until `deadline`; false when it came first (nothing taken).
  template <class Clock, class Duration>
  bool try_acquire_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    std::unique_lock lock(mutex_);
    if (!woken_.wait_until(lock, deadline, [&] { return count_ > 0; })) return false;
    --count_;
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable woken_;
  std::ptrdiff_t count_;
};

}  // namespace idem::detail
