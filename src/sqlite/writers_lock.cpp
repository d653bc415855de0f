#include "sqlite/writers_lock.hpp"

namespace idem::sql {

bool WritersLock::lock_until(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (!held_ && waiters_.may_pass()) {
    held_ = true;
    return true;
  }
  Waiter me;
  const auto place = waiters_.enter(me);
  for (;;) {
    const bool timed_out = me.woken.wait_until(lock, deadline) == std::cv_status::timeout;
    me.notified = false;
    if (me.granted) return true;  // handed over: out of the queue already
    const bool oldest = waiters_.at_front(me);
    if (oldest && !held_) {  // freed, and no newcomer came first
      waiters_.pop_front();
      held_ = true;
      return true;
    }
    if (timed_out) {
      waiters_.leave(place);
      // Freed meanwhile with no one woken but this waiter: the next one may take it.
      if (oldest && !held_) waiters_.wake_front();
      return false;
    }
  }
}

void WritersLock::unlock() noexcept {
  std::lock_guard lock(mutex_);
  if (waiters_.empty()) {
    held_ = false;
    return;
  }
  if (waiters_.front_due()) {
    Waiter& next = waiters_.pop_front();
    next.granted = true;  // held_ stays set: no newcomer passes it
    // Under the mutex: the waiter re-takes it before it returns, so `next` outlives this call.
    decltype(waiters_)::wake(next);
    return;
  }
  held_ = false;  // the oldest waiter takes it when it runs, unless a newcomer is quicker
  waiters_.wake_front();
}

std::size_t WritersLock::waiting() {
  std::lock_guard lock(mutex_);
  return waiters_.size();
}

}  // namespace idem::sql
