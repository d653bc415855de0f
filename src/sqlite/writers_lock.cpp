#include "sqlite/writers_lock.hpp"

namespace idem::sql {

bool WritersLock::lock_until(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  // A free lock is the caller's, unless the oldest waiter's patience is over.
  if (!held_ && (waiters_.empty() || !overdue(*waiters_.front()))) {
    held_ = true;
    return true;
  }
  Waiter me;
  const auto place = waiters_.insert(waiters_.end(), &me);
  if (waiters_.front() == &me) me.oldest = Clock::now();
  for (;;) {
    const bool timed_out = me.woken.wait_until(lock, deadline) == std::cv_status::timeout;
    me.notified = false;
    if (me.granted) return true;  // handed over: out of the queue already
    const bool oldest = waiters_.front() == &me;
    if (oldest && !held_) {  // freed, and no newcomer came first
      waiters_.pop_front();
      next_oldest();
      held_ = true;
      return true;
    }
    if (timed_out) {
      waiters_.erase(place);
      if (oldest) {
        next_oldest();
        // Freed meanwhile with no one woken but this waiter: the next one may take it.
        if (!held_ && !waiters_.empty()) wake(*waiters_.front());
      }
      return false;
    }
  }
}

void WritersLock::next_oldest() {
  if (!waiters_.empty()) waiters_.front()->oldest = Clock::now();
}

void WritersLock::unlock() noexcept {
  std::lock_guard lock(mutex_);
  if (waiters_.empty()) {
    held_ = false;
    return;
  }
  Waiter* next = waiters_.front();
  if (overdue(*next)) {
    waiters_.pop_front();
    next_oldest();
    next->granted = true;  // held_ stays set: no newcomer passes it
  } else {
    held_ = false;  // the oldest waiter takes it when it runs, unless a newcomer is quicker
  }
  // Under the mutex: a waiter re-takes it before it returns, so `next` outlives this call.
  wake(*next);
}

void WritersLock::wake(Waiter& waiter) {
  // A waiter woken but not yet run sees the lock as it is when it runs: once is enough.
  if (waiter.notified) return;
  waiter.notified = true;
  waiter.woken.notify_one();
}

std::size_t WritersLock::waiting() {
  std::lock_guard lock(mutex_);
  return waiters_.size();
}

}  // namespace idem::sql
