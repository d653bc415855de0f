#pragma once
// A lock taken in arrival order, with a deadline, that any thread may release; the holder hands
// it straight to the oldest waiter, who spins briefly first, since transactions are short.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <list>
#include <mutex>

namespace idem::sql {

class FifoLock {
 public:
  using Clock = std::chrono::steady_clock;
  /// How long the oldest waiter spins before it blocks: a few short write transactions.
  static constexpr std::chrono::microseconds kSpin{200};

  FifoLock() = default;
  FifoLock(const FifoLock&) = delete;
  FifoLock& operator=(const FifoLock&) = delete;

  /// True once the lock is the caller's; false when `deadline` came first (the caller is then
  /// out of the queue). Throws std::bad_alloc.
  bool lock_until(Clock::time_point deadline);
  /// Hands the lock to the oldest waiter, or frees it. The holder may call it from any thread.
  void unlock() noexcept;
  std::size_t waiting();  // threads waiting now

 private:
  struct Waiter {
    std::condition_variable woken;
    std::atomic<bool> granted{false};  // set under mutex_ by unlock()
  };

  // Out of the queue after the deadline, unless the lock came meanwhile. Under mutex_.
  bool give_up(std::list<Waiter*>::iterator place, Waiter& me);

  std::mutex mutex_;
  bool held_ = false;           // stays set while the lock passes from holder to waiter
  std::list<Waiter*> waiters_;  // oldest first; each lives on its waiting thread's stack
};

}  // namespace idem::sql
