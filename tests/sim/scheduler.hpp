#pragma once
// The seeded scheduler: tasks (simulated callers, each on a fiber) run one at a time; at each
// scheduling point (a store call, a sleep, a wait) the running task hands back, and the
// scheduler picks the next ready task with its random stream. Time is virtual: it moves only
// when no task is ready (to the earliest sleeper's wake time) or when the world jumps it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "idem/clock.hpp"
#include "sim/fiber.hpp"
#include "sim/rng.hpp"

namespace idem::sim {

using Time = Clock::time_point;
using Duration = Clock::duration;

struct Task {
  enum class State { ready, sleeping, blocked, done };
  int id = 0;
  int process = 0;
  std::string name;
  std::unique_ptr<Fiber> fiber;
  State state = State::ready;
  Time wake{};            // sleeping; blocked with a deadline
  bool timed = false;     // blocked: with a deadline
  bool notified = false;  // blocked: woken by a notify, not by its deadline
  bool dead = false;      // its process crashed: its calls are lost, its sleeps end at once
  Duration held_up{};     // virtual time spent in injected delays and waits, for call bounds
  std::uint64_t store_calls = 0;  // calls that went out to the store
  Time runnable_since{};          // real time: when it could have run again
};

/// How a run of the scheduler ended.
enum class RunEnd { finished, deadlock, too_long, stopped };

class Scheduler {
 public:
  /// `real_time`: time is the machine's steady clock and sleeps take real time (runs against
  /// real stores, whose leases are on their own clocks); the schedule is then not replayable.
  explicit Scheduler(std::uint64_t seed, bool real_time = false);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  Time now() const noexcept { return real_time_ ? std::chrono::steady_clock::now() : now_; }
  /// The clock jumps forward (a world event between steps).
  void jump(Duration d) { now_ += d; }
  Rng& rng() noexcept { return rng_; }

  /// A new task of `process`, ready to run `body`.
  Task& spawn(int process, std::string name, std::function<void()> body);
  /// The running task; null between steps.
  Task* current() noexcept { return current_; }
  const std::vector<std::unique_ptr<Task>>& tasks() const noexcept { return tasks_; }

  // --- From inside a task -------------------------------------------------------------------
  /// Sleeps `d` of virtual time (a scheduling point); a dead task returns at once.
  void sleep_for(Duration d);
  /// A scheduling point that does not wait: other ready tasks may run first.
  void yield();
  /// Blocks until notify() or, with a deadline, until the clock reaches it; true when notified.
  bool block(std::optional<Time> deadline);
  /// Makes a blocked task ready.
  void notify(Task& task);

  /// Marks every task of `process` dead: they are run to their end before anything else.
  void crash(int process);

  /// Runs until every task ended (dead tasks blocked for good count as ended), no task can run
  /// (deadlock), `max_steps` steps, or `between` (run before each step: the world's events)
  /// returns false.
  RunEnd run(const std::function<bool()>& between, std::uint64_t max_steps);

  std::uint64_t steps() const noexcept { return steps_; }
  /// A digest of every scheduling decision and the time it was taken at: two runs of one seed
  /// agree on it exactly when they took the same schedule.
  std::uint64_t digest() const noexcept { return digest_; }
  void add_to_digest(std::uint64_t v) noexcept { digest_ = mix(digest_, v); }
  /// Tasks blocked or sleeping when a run ended early.
  std::vector<const Task*> stuck() const;

  /// The scheduler of the thread's run (for code that has no other way to reach the clock).
  static Scheduler* running() noexcept;

 private:
  void switch_out(Task& task);

  Rng rng_;
  bool real_time_;
  Time now_;
  std::vector<std::unique_ptr<Task>> tasks_;
  Task* current_ = nullptr;
  std::uint64_t steps_ = 0;
  std::uint64_t digest_ = 0;
  Scheduler* previous_ = nullptr;
};

/// idem::Clock over the scheduler's virtual time: sleep_for is a scheduling point.
class SimClock final : public Clock {
 public:
  explicit SimClock(Scheduler& scheduler) : scheduler_(&scheduler) {}
  time_point now() const override { return scheduler_->now(); }
  void sleep_for(duration d) override { scheduler_->sleep_for(d); }

 private:
  Scheduler* scheduler_;
};

}  // namespace idem::sim
