#include "sim/stats.hpp"

#include <cstdio>

namespace idem::sim {

const char* name(Stat stat) noexcept {
  static constexpr const char* kNames[kStats] = {
      "store calls",      "lost requests",  "lost replies",   "delayed replies",
      "duplicates",       "latencies",      "refused (down)", "process crashes",
      "store restarts",   "store wipes",    "clock jumps",    "sessions dropped",
      "admin releases",   "admin forgets",  "admin purges",   "guard calls",
      "handler runs",     "replays",        "refusals",       "takeovers",
      "handler throws",   "steps run",      "steps replayed", "batches",
      "completer passes", "completer runs", "cache hits",     "groups written",
      "grouped calls",    "layered calls",
  };
  const auto i = static_cast<std::size_t>(stat);
  return i < kStats ? kNames[i] : "?";
}

void Stats::merge(const Stats& other) {
  for (std::size_t i = 0; i < kStats; ++i) counts[i] += other.counts[i];
  seeds += other.seeds;
  steps += other.steps;
  if (other.longest_trace > longest_trace) {
    longest_trace = other.longest_trace;
    longest_seed = other.longest_seed;
  }
}

std::string Stats::summary() const {
  std::string out;
  char line[96];
  for (std::size_t i = 0; i < kStats; ++i) {
    std::snprintf(line, sizeof line, "  %-18s %llu\n", name(static_cast<Stat>(i)),
                  static_cast<unsigned long long>(counts[i]));
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-18s %llu (seed %llu)\n", "longest trace",
                static_cast<unsigned long long>(longest_trace),
                static_cast<unsigned long long>(longest_seed));
  out += line;
  return out;
}

}  // namespace idem::sim
