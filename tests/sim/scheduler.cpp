#include "sim/scheduler.hpp"

#include <algorithm>
#include <thread>
#include <utility>

namespace idem::sim {

namespace {
thread_local Scheduler* running_scheduler = nullptr;
}  // namespace

Scheduler::Scheduler(std::uint64_t seed, bool real_time)
    : rng_(seed, /*stream=*/1),
      real_time_(real_time),
      // Far from the epoch, so that "now minus a lease" never underflows.
      now_(real_time ? std::chrono::steady_clock::now() : Time{} + std::chrono::hours(1)),
      previous_(running_scheduler) {
  running_scheduler = this;
}

Scheduler::~Scheduler() {
  running_scheduler = previous_;
  // A task still blocked (its process crashed while it waited for a call that never came
  // back) is dropped without unwinding: its stack goes back to the pool.
}

Scheduler* Scheduler::running() noexcept { return running_scheduler; }

Task& Scheduler::spawn(int process, std::string name, std::function<void()> body) {
  auto task = std::make_unique<Task>();
  task->id = static_cast<int>(tasks_.size());
  task->process = process;
  task->name = std::move(name);
  task->fiber = std::make_unique<Fiber>(std::move(body));
  tasks_.push_back(std::move(task));
  return *tasks_.back();
}

void Scheduler::switch_out(Task& task) { task.fiber->yield(); }

void Scheduler::sleep_for(Duration d) {
  Task& task = *current_;
  if (task.dead) return;
  if (d <= Duration::zero()) {
    yield();
    return;
  }
  task.state = Task::State::sleeping;
  task.wake = now() + d;
  switch_out(task);
}

void Scheduler::yield() {
  Task& task = *current_;
  if (task.dead) return;
  task.state = Task::State::ready;
  task.runnable_since = now();
  switch_out(task);
}

bool Scheduler::block(std::optional<Time> deadline) {
  Task& task = *current_;
  task.state = Task::State::blocked;
  task.timed = deadline.has_value();
  task.wake = deadline.value_or(Time{});
  task.notified = false;
  switch_out(task);
  return task.notified;
}

void Scheduler::notify(Task& task) {
  if (task.state != Task::State::blocked) return;
  task.runnable_since = now();
  task.notified = true;
  task.state = Task::State::ready;
}

void Scheduler::crash(int process) {
  for (auto& task : tasks_) {
    if (task->process == process) task->dead = true;
  }
}

std::vector<const Task*> Scheduler::stuck() const {
  std::vector<const Task*> out;
  for (const auto& task : tasks_) {
    if (task->state != Task::State::done && !task->dead) out.push_back(task.get());
  }
  return out;
}

RunEnd Scheduler::run(const std::function<bool()>& between, std::uint64_t max_steps) {
  std::vector<Task*> ready;
  for (;;) {
    if (steps_ >= max_steps) return RunEnd::too_long;
    if (between && !between()) return RunEnd::stopped;
    if (real_time_) now_ = std::chrono::steady_clock::now();
    // Dead tasks first, in order: they unwind without reaching the world.
    Task* next = nullptr;
    ready.clear();
    bool live = false;
    std::optional<Time> earliest;
    for (auto& t : tasks_) {
      Task& task = *t;
      if (task.state == Task::State::done) continue;
      const bool waiting_on_time =
          task.state == Task::State::sleeping || (task.state == Task::State::blocked && task.timed);
      if (waiting_on_time && task.wake <= now_) task.state = Task::State::ready;
      if (task.state == Task::State::ready) {
        if (task.dead) {
          next = &task;
          break;
        }
        ready.push_back(&task);
      } else if (task.state == Task::State::sleeping ||
                 (task.state == Task::State::blocked && task.timed)) {
        if (!earliest || task.wake < *earliest) earliest = task.wake;
      }
      if (!task.dead) live = true;
    }
    if (next == nullptr) {
      if (ready.empty()) {
        if (earliest) {
          if (real_time_) std::this_thread::sleep_until(*earliest);
          now_ = std::max(now_, *earliest);
          continue;
        }
        // Nothing can run or wake: ended, unless a live task waits for what never comes.
        return live ? RunEnd::deadlock : RunEnd::finished;
      }
      next = ready[rng_.below(ready.size())];
    }
    digest_ = mix(digest_, static_cast<std::uint64_t>(next->id));
    digest_ = mix(digest_, static_cast<std::uint64_t>(now_.time_since_epoch().count()));
    current_ = next;
    ++steps_;
    if (real_time_ && next->fiber->started()) {
      // The time it waited while others ran: real work of theirs, not a stall of its call.
      const Time since = std::max(next->runnable_since, next->wake);
      if (now() > since) next->held_up += now() - since;
    }
    next->fiber->resume();
    current_ = nullptr;
    if (next->fiber->done()) next->state = Task::State::done;
  }
}

}  // namespace idem::sim
