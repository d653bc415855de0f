#pragma once
// What runs explored: store calls, faults injected per kind, world events, the guard calls and
// how they ended. Summed over seeds for scripts/sim's summary.

#include <array>
#include <cstdint>
#include <string>

namespace idem::sim {

enum class Stat : std::uint8_t {
  store_calls,
  lost_requests,
  lost_replies,
  delayed_replies,
  duplicates,
  latencies,
  refused_while_down,
  crashes,
  restarts,
  wipes,
  clock_jumps,
  session_drops,
  admin_releases,
  admin_forgets,
  admin_purges,
  guard_calls,
  handler_runs,
  replays,
  refusals,
  takeovers,
  handler_throws,
  steps_run,
  steps_replayed,
  batches,
  completer_passes,
  completer_redrives,
  cache_hits,
  groups,
  grouped_calls,
  layered_calls,
  count_
};

inline constexpr std::size_t kStats = static_cast<std::size_t>(Stat::count_);

const char* name(Stat stat) noexcept;

struct Stats {
  std::array<std::uint64_t, kStats> counts{};
  std::uint64_t seeds = 0;
  std::uint64_t steps = 0;          // scheduling steps
  std::uint64_t longest_trace = 0;  // the most scheduling steps of one seed
  std::uint64_t longest_seed = 0;

  void add(Stat s, std::uint64_t n = 1) noexcept { counts[static_cast<std::size_t>(s)] += n; }
  std::uint64_t get(Stat s) const noexcept { return counts[static_cast<std::size_t>(s)]; }
  void merge(const Stats& other);
  /// Lines of "name count", for the summary.
  std::string summary() const;
};

}  // namespace idem::sim
