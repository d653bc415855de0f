#pragma once
// GroupCommitStore's waits on the scheduler: a condition variable and a semaphore whose waits
// are scheduling points, and the virtual clock (idem::GroupCommitSync's members).

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <vector>

#include "sim/scheduler.hpp"

namespace idem::sim {

/// The virtual clock as a std::chrono clock (GroupCommitStore reads Clock::now()).
struct SimSteadyClock {
  using duration = Clock::duration;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = Clock::time_point;
  static constexpr bool is_steady = true;
  static time_point now() { return Scheduler::running()->now(); }
};

class SimConditionVariable {
 public:
  template <class Predicate>
  bool wait_until(std::unique_lock<std::mutex>& lock, Time deadline, Predicate ready) {
    Scheduler& s = *Scheduler::running();
    while (!ready()) {
      if (s.now() >= deadline) return ready();
      Task& task = *s.current();
      waiters_.push_back(&task);
      lock.unlock();
      const Time from = s.now();
      s.block(deadline);
      task.held_up += s.now() - from;
      lock.lock();
      waiters_.erase(std::remove(waiters_.begin(), waiters_.end(), &task), waiters_.end());
    }
    return true;
  }
  void notify_all() {
    Scheduler& s = *Scheduler::running();
    for (Task* t : waiters_) s.notify(*t);
    waiters_.clear();
  }

 private:
  std::vector<Task*> waiters_;
};

class SimSemaphore {
 public:
  explicit SimSemaphore(std::ptrdiff_t initial) : count_(initial) {}
  void acquire() {
    Scheduler& s = *Scheduler::running();
    while (count_ == 0) {
      Task& task = *s.current();
      waiter_ = &task;
      const Time from = s.now();
      s.block(std::nullopt);
      task.held_up += s.now() - from;
    }
    count_ = 0;
    waiter_ = nullptr;
  }
  void release() {
    count_ = 1;
    if (waiter_ != nullptr) Scheduler::running()->notify(*waiter_);
  }

 private:
  std::ptrdiff_t count_;
  Task* waiter_ = nullptr;
};

struct SimSync {
  using Clock = SimSteadyClock;
  using Mutex = std::mutex;
  using ConditionVariable = SimConditionVariable;
  using Semaphore = SimSemaphore;
};

}  // namespace idem::sim
