#include "sqlite/fifo_lock.hpp"

#include <thread>

namespace idem::sql {

bool FifoLock::lock_until(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (!held_) {  // hence no waiter either
    held_ = true;
    return true;
  }
  Waiter me;
  const auto place = waiters_.insert(waiters_.end(), &me);
  for (;;) {
    if (waiters_.front() == &me) {
      // The next to go: spin a little, the holder is likely in a short transaction.
      lock.unlock();
      const auto spin_until = std::min(deadline, Clock::now() + kSpin);
      while (!me.granted.load(std::memory_order_acquire) && Clock::now() < spin_until) {
        std::this_thread::yield();
      }
      lock.lock();  // also waits until unlock() is done with `me`
      if (me.granted.load(std::memory_order_relaxed)) return true;
    }
    if (me.woken.wait_until(lock, deadline) == std::cv_status::timeout) {
      return give_up(place, me);
    }
    if (me.granted.load(std::memory_order_relaxed)) return true;
  }
}

bool FifoLock::give_up(std::list<Waiter*>::iterator place, Waiter& me) {
  if (me.granted.load(std::memory_order_relaxed)) return true;
  const bool was_next = waiters_.front() == &me;
  waiters_.erase(place);
  if (was_next && !waiters_.empty()) waiters_.front()->woken.notify_one();  // now the next
  return false;
}

void FifoLock::unlock() noexcept {
  std::lock_guard lock(mutex_);
  if (waiters_.empty()) {
    held_ = false;
    return;
  }
  Waiter* next = waiters_.front();
  waiters_.pop_front();
  next->granted.store(true, std::memory_order_release);  // held_ stays set
  // Under the mutex: a waiter re-takes it before it returns, so `next` outlives these calls.
  next->woken.notify_one();
  if (!waiters_.empty()) waiters_.front()->woken.notify_one();  // the new next starts spinning
}

std::size_t FifoLock::waiting() {
  std::lock_guard lock(mutex_);
  return waiters_.size();
}

}  // namespace idem::sql
