#pragma once
// WakeRoom: where the callers waiting for a shard's held records sleep (MemoryStore's
// await_change), so that a commit, abort or takeover wakes them instead of their polling.

#include <chrono>
#include <condition_variable>
#include <cstddef>

namespace idem::detail {

/// One per shard, used under the shard's lock. A change that ends a hold pays one read of the
/// waiter count when nobody waits; a wake (notify) only when somebody does.
class WakeRoom {
 public:
  /// Sleeps (the shard's `lock` released meanwhile) until `changed()` holds, checked under the
  /// lock after each wake, or until `deadline`. Call with the lock held.
  template <class Lock, class Changed>
  void wait_until(Lock& lock, std::chrono::steady_clock::time_point deadline, Changed changed) {
    ++waiters_;
    (void)sleepers_.wait_until(lock, deadline, changed);
    --waiters_;
  }

  /// As wait_until, with no deadline.
  template <class Lock, class Changed>
  void wait(Lock& lock, Changed changed) {
    ++waiters_;
    sleepers_.wait(lock, changed);
    --waiters_;
  }
  /// Whether a change made under the lock must wake() once the lock is released.
  bool watched() const noexcept { return waiters_ != 0; }

  /// Wakes every sleeper; each checks its own record again under the lock. Best called with the
  /// lock released (condition_variable_any still orders it after a sleeper's check).
  void wake() noexcept { sleepers_.notify_all(); }

 private:
  std::size_t waiters_ = 0;  // under the shard's lock
  std::condition_variable_any sleepers_;
};

}  // namespace idem::detail
