#pragma once
// The writers' lock of one SQLite file in this process, with a deadline, that any thread may
// release. Waiters queue in arrival order, but a free lock goes to whoever asks first: the thread
// that just wrote and writes again goes on while it still runs, rather than handing the file to a
// waiter that has yet to be scheduled (on a busy machine, a context switch per write). Once the
// oldest waiter has waited kFairAfter, the holder hands the lock straight to it, so no waiter
// starves: each waits at most about kFairAfter plus one write per waiter ahead of it.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <list>
#include <mutex>

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
  struct Waiter {
    std::condition_variable woken;
    bool granted = false;      // handed over by unlock(), under mutex_
    bool notified = false;     // woken and not yet run: no need to wake it again, under mutex_
    Clock::time_point oldest;  // since when it is the oldest waiter, under mutex_
  };

  bool overdue(const Waiter& oldest) const { return Clock::now() - oldest.oldest >= kFairAfter; }
  void next_oldest();  // the front left: the new front's wait as the oldest starts now
  static void wake(Waiter& waiter);

  std::mutex mutex_;
  bool held_ = false;           // stays set while the lock is handed from holder to waiter
  std::list<Waiter*> waiters_;  // oldest first; each lives on its waiting thread's stack
};

}  // namespace idem::sql
