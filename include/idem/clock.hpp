#pragma once
// Clock: where the guard and the in-memory store read time and wait. Injectable for tests.

#include <atomic>
#include <chrono>
#include <memory>

// POSIX nanosleep rather than std::this_thread::sleep_for: <thread> costs every includer of the
// core a tenth more compile time.
#if defined(_WIN32)
#include <thread>
#else
#include <time.h>  // NOLINT(modernize-deprecated-headers): nanosleep is POSIX, declared here

#include <cerrno>
#endif

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

/// std::chrono::steady_clock, and a sleep that resumes after a signal.
class SteadyClock final : public Clock {
 public:
  time_point now() const override { return std::chrono::steady_clock::now(); }
  void sleep_for(duration d) override {
#if defined(_WIN32)
    std::this_thread::sleep_for(d);
#else
    if (d <= duration::zero()) return;
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(d);
    timespec left{static_cast<time_t>(seconds.count()),
                  static_cast<long>(std::chrono::nanoseconds(d - seconds).count())};
    while (nanosleep(&left, &left) == -1 && errno == EINTR) {
    }
#endif
  }
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
