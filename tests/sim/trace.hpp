#pragma once
// The story of a run, one line per store call, fault, world event and guard call, kept only when
// asked for (replaying a failing seed): a run without it costs nothing here.

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/scheduler.hpp"

namespace idem::sim {

class Trace {
 public:
  explicit Trace(bool on) : on_(on) {}
  bool on() const noexcept { return on_; }
  void add(const Scheduler& scheduler, const std::string& line) {
    if (!on_) return;
    const auto ms = std::chrono::duration<double, std::milli>(scheduler.now() - start_).count();
    char head[48];
    const Task* task = const_cast<Scheduler&>(scheduler).current();
    std::snprintf(head, sizeof head, "%9.3f ms  %-10s ", ms,
                  task != nullptr ? (task->name + (task->dead ? "+" : "")).c_str() : "world");
    lines_.push_back(head + line);
  }
  void start(Time t) { start_ = t; }
  std::vector<std::string>& lines() noexcept { return lines_; }

 private:
  bool on_;
  Time start_{};
  std::vector<std::string> lines_;
};

}  // namespace idem::sim
