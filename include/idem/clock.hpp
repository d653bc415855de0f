#pragma once
// Clock: where the guard and the in-memory store read time and wait. Injectable for tests.

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace idem {

/// A monotonic clock that can also wait. The default reads std::chrono::steady_clock.
class Clock {
 public:
  using duration = std::chrono::steady_clock::duration;
  using time_point = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  virtual time_point now() const = 0;
  virtual void sleep_for(duration d) = 0;
};

/// std::chrono::steady_clock and std::this_thread::sleep_for.
class SteadyClock final : public Clock {
 public:
  time_point now() const override { return std::chrono::steady_clock::now(); }
  void sleep_for(duration d) override { std::this_thread::sleep_for(d); }
};

/// A clock that moves only when told: advance() by hand; sleep_for() advances it instead of
/// blocking, so tests of leases, expiry and waiting are exact and instant. Thread-safe.
class ManualClock final : public Clock {
 public:
  time_point now() const override { return time_point{duration{ticks_.load()}}; }
  void sleep_for(duration d) override { advance(d); }
  void advance(duration d) { ticks_.fetch_add(d.count()); }

 private:
  // Starts far from zero so that "now minus a lease" never underflows the epoch.
  std::atomic<duration::rep> ticks_{
      std::chrono::duration_cast<duration>(std::chrono::hours(1)).count()};
};

/// The shared default clock.
inline std::shared_ptr<Clock> steady_clock() {
  static const std::shared_ptr<Clock> clock = std::make_shared<SteadyClock>();
  return clock;
}

}  // namespace idem
