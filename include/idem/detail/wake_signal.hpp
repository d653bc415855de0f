#pragma once
// WakeSignal: a binary semaphore on a mutex and a condition variable, for one waiter at a time.
// Not std::binary_semaphore: libstdc++'s can lose a wakeup under contention and leave its waiter
// asleep for good (GCC bugs 98033 and 104928; GCC 12 as Debian 12 ships it is affected).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>

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
    posted_.store(true, std::memory_order_release);
    woken_.notify_one();
  }

  void acquire() {
    std::unique_lock lock(mutex_);
    woken_.wait(lock, [&] { return count_ > 0; });
    take();
  }

  /// acquire() without sleeping, until `deadline`: the caller stays runnable, giving the CPU
  /// away between looks, so a release that comes soon costs no sleep and wake-up (two context
  /// switches). False when the deadline came first (nothing taken).
  template <class Clock, class Duration>
  bool try_acquire_spinning_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    do {
      if (posted_.load(std::memory_order_acquire)) {
        std::lock_guard lock(mutex_);  // the releaser may hold it still: let it go first
        if (count_ > 0) {
          take();
          return true;
        }
      }
      std::this_thread::yield();
    } while (Clock::now() < deadline);
    return false;
  }

  /// acquire() until `deadline`; false when it came first (nothing taken).
  template <class Clock, class Duration>
  bool try_acquire_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    std::unique_lock lock(mutex_);
    if (!woken_.wait_until(lock, deadline, [&] { return count_ > 0; })) return false;
    take();
    return true;
  }

 private:
  void take() noexcept {  // under mutex_, count_ > 0
    --count_;
    posted_.store(count_ > 0, std::memory_order_relaxed);
  }

  std::mutex mutex_;
  std::condition_variable woken_;
  std::ptrdiff_t count_;
  std::atomic<bool> posted_{count_ > 0};  // count_ > 0, readable without the mutex
};

}  // namespace idem::detail
