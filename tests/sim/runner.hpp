#pragma once
// Running many seeds: on worker threads (each seed is independent and single-threaded), with
// progress, the first failure kept, and what the runs explored summed.

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "sim/scenario.hpp"
#include "sim/stats.hpp"
#include "sim/world.hpp"

namespace idem::sim {

struct Failure {
  std::uint64_t seed = 0;
  Scenario scenario;
  Violation violation;
};

struct Sweep {
  std::uint64_t first = 1;  // the first seed
  std::uint64_t count = 1;  // seeds in all
  unsigned jobs = 1;        // worker threads
  bool progress = false;    // a line on stderr now and then
  bool stop_at_failure = true;
  /// Each seed's scenario is changed by this before it runs (the shrinker's filters), if set.
  std::function<void(Scenario&)> adjust;
};

struct SweepResult {
  Stats stats;
  std::uint64_t ran = 0;
  std::optional<Failure> failure;  // the lowest failing seed seen
  double seconds = 0;
};

SweepResult sweep(const Sweep& sweep);

/// Cuts a failing scenario down while it still fails the same check: fewer processes, actors,
/// operations, items, handler features and faults, trying a few schedules for each cut.
Scenario shrink(const Scenario& failing, Check check,
                const std::function<void(const std::string&)>& log);

}  // namespace idem::sim
