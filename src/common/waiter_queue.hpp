#pragma once
// WaiterQueue: the threads waiting for something that is handed over in arrival order (a SQLite
// file's writers' lock, a pooled connection), and when a caller that has not waited may pass
// them. Internal to the adapters; every member is called under the owner's mutex.
//
// With patience above zero, a freed resource goes to whoever asks first: the thread that just
// gave it back and asks again goes on while it runs, rather than waiting for a woken waiter to be
// scheduled (on a busy machine, a context switch per use). Once the oldest waiter has been the
// oldest for `patience`, the resource is handed straight to it, so no waiter starves: the n-th
// in line waits at most about n times `patience` (plus the uses in between). Counting from each
// waiter's arrival instead would bound that by about `patience` plus one use per waiter ahead,
// but under steady contention every waiter is then overdue and the queue is a convoy again
// (measured: docs/performance.md). Zero patience: strict arrival order.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <list>

namespace idem::detail {

/// What every waiter of a WaiterQueue has; owners derive their waiter (what it is handed) from it.
struct QueuedWaiter {
  std::condition_variable woken;
  bool notified = false;  // woken and not yet run: no need to wake it again
  std::chrono::steady_clock::time_point front_since;  // when it became the oldest waiter
};

template <class Waiter>
class WaiterQueue {
 public:
  using Clock = std::chrono::steady_clock;
  using Place = typename std::list<Waiter*>::iterator;

  explicit WaiterQueue(std::chrono::microseconds patience) : patience_(patience) {}

  bool empty() const noexcept { return waiters_.empty(); }
  std::size_t size() const noexcept { return waiters_.size(); }
  bool at_front(const Waiter& waiter) const noexcept {
    return !waiters_.empty() && waiters_.front() == &waiter;
  }

  /// A free resource may go to a caller that has not queued: no one waits, or the oldest waiter
  /// still lets callers pass.
  bool may_pass() const { return waiters_.empty() || !front_overdue(); }
  /// A resource given back now goes straight to the oldest waiter.
  bool front_due() const { return !waiters_.empty() && front_overdue(); }

  /// Queues `waiter` (which lives on its thread's stack until it leaves) last.
  Place enter(Waiter& waiter) {
    if (waiters_.empty()) waiter.front_since = Clock::now();
    return waiters_.insert(waiters_.end(), &waiter);
  }
  void leave(Place place) {
    const bool front = place == waiters_.begin();
    waiters_.erase(place);
    if (front) next_front();
  }
  /// The oldest waiter, out of the queue: the one to hand the resource to.
  Waiter& pop_front() {
    Waiter& front = *waiters_.front();
    waiters_.pop_front();
    next_front();
    return front;
  }

  /// Wakes the oldest waiter, if any, to look at the resource again.
  void wake_front() {
    if (!waiters_.empty()) wake(*waiters_.front());
  }
  static void wake(Waiter& waiter) {
    // A waiter woken but not yet run sees the resource as it is when it runs: once is enough.
    if (waiter.notified) return;
    waiter.notified = true;
    waiter.woken.notify_one();
  }

 private:
  bool front_overdue() const { return Clock::now() - waiters_.front()->front_since >= patience_; }
  void next_front() {  // the oldest left: the next one's patience as the oldest starts now
    if (!waiters_.empty()) waiters_.front()->front_since = Clock::now();
  }

  std::chrono::microseconds patience_;
  std::list<Waiter*> waiters_;  // oldest first
};

}  // namespace idem::detail
