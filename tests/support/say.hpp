#pragma once
// The worker processes' output: one line at a time to stdout, flushed at once (the test reads it
// as it comes), whole even when several threads print; and the fence turn both workers run.

#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>

namespace idem::testing {

inline void say(const std::string& line) {
  static std::mutex out_mutex;
  std::lock_guard lock(out_mutex);
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

/// Whether a worker got at least `want` arguments (argv[0] counted); if not, prints `usage`.
inline bool has_arguments(int argc, int want, const char* usage) {
  if (argc >= want) return true;
  std::fprintf(stderr, "usage: %s\n", usage);
  return false;
}

/// A worker's turn at a fenced key: `execute(handler)` runs the handler through the worker's
/// guard; the handler prints "fence <n>" (n = `record(ctx)`, which writes the fence where the test
/// reads it), returns `value`, or throws after that when `fail`. Then prints "done", "err <why>"
/// or "threw".
template <class Execute, class Record>
int fence_turn(Execute execute, Record record, bool fail, const std::string& value) {
  try {
    auto out = execute([&](auto& ctx) {
      say("fence " + std::to_string(record(ctx)));
      if (fail) throw std::runtime_error("downstream write done, then failed");
      return value;
    });
    say(out ? "done" : "err " + out.message());
  } catch (const std::runtime_error&) {
    say("threw");
  }
  return 0;
}

}  // namespace idem::testing
