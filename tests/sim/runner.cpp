#include "sim/runner.hpp"

#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

namespace idem::sim {

SweepResult sweep(const Sweep& sweep) {
  SweepResult result;
  std::mutex mutex;
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> done{0};
  const auto started = std::chrono::steady_clock::now();
  auto work = [&] {
    Stats local;
    for (;;) {
      if (stop.load()) break;
      const std::uint64_t i = next.fetch_add(1);
      if (i >= sweep.count) break;
      const std::uint64_t seed = sweep.first + i;
      Scenario scenario = generate(seed);
      if (sweep.adjust) sweep.adjust(scenario);
      RunReport report = run(scenario);
      local.merge(report.stats);
      const std::uint64_t n = done.fetch_add(1) + 1;
      if (report.failed) {
        std::lock_guard lock(mutex);
        if (!result.failure || seed < result.failure->seed) {
          result.failure = Failure{seed, scenario, report.violation};
        }
        if (sweep.stop_at_failure) stop = true;
      }
      if (sweep.progress && n % 10000 == 0) {
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        std::fprintf(stderr, "sim: %llu seeds, %.0f s, %.0f seeds/s\n",
                     static_cast<unsigned long long>(n), s, static_cast<double>(n) / s);
      }
    }
    std::lock_guard lock(mutex);
    result.stats.merge(local);
  };
  std::vector<std::thread> workers;
  for (unsigned j = 1; j < sweep.jobs; ++j) workers.emplace_back(work);
  work();
  for (std::thread& t : workers) t.join();
  result.ran = done.load();
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

namespace {

// Every way to make a scenario one notch smaller, in the order they are tried.
std::vector<Scenario> cuts(const Scenario& s) {
  std::vector<Scenario> out;
  auto with = [&](auto&& change) {
    Scenario c = s;
    if (change(c)) out.push_back(std::move(c));
  };
  for (std::size_t p = 0; p < s.processes.size(); ++p) {
    with([&](Scenario& c) {
      if (c.processes.size() < 2) return false;
      c.processes.erase(c.processes.begin() + static_cast<std::ptrdiff_t>(p));
      return true;
    });
  }
  for (std::size_t p = 0; p < s.processes.size(); ++p) {
    const ProcessPlan& pp = s.processes[p];
    for (std::size_t a = 0; a < pp.actors.size(); ++a) {
      with([&](Scenario& c) {
        auto& actors = c.processes[p].actors;
        if (actors.size() < 2) return false;
        actors.erase(actors.begin() + static_cast<std::ptrdiff_t>(a));
        return true;
      });
      for (std::size_t o = 0; o < pp.actors[a].ops.size(); ++o) {
        with([&](Scenario& c) {
          auto& ops = c.processes[p].actors[a].ops;
          if (ops.size() < 2) return false;
          ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(o));
          return true;
        });
      }
    }
    with([&](Scenario& c) { return std::exchange(c.processes[p].cache, false); });
    with([&](Scenario& c) { return std::exchange(c.processes[p].group, false); });
  }
  for (std::size_t p = 0; p < s.processes.size(); ++p) {
    for (std::size_t a = 0; a < s.processes[p].actors.size(); ++a) {
      for (std::size_t o = 0; o < s.processes[p].actors[a].ops.size(); ++o) {
        auto op = [&](Scenario& c) -> Op& { return c.processes[p].actors[a].ops[o]; };
        with([&](Scenario& c) {
          if (op(c).items.size() < 2) return false;
          op(c).items.pop_back();
          return true;
        });
        with([&](Scenario& c) { return std::exchange(op(c).pause_ms, 0) != 0; });
        with([&](Scenario& c) {
          if (op(c).kind == OpKind::execute) return false;
          op(c).kind = OpKind::execute;
          return true;
        });
        with([&](Scenario& c) {
          HandlerPlan& h = op(c).handler;
          if (h.steps == 0) return false;
          --h.steps;
          if (h.fail_step >= h.steps) h.fail_step = -1;
          return true;
        });
        with([&](Scenario& c) { return std::exchange(op(c).handler.fail_step, -1) != -1; });
        with([&](Scenario& c) { return std::exchange(op(c).handler.catch_step, false); });
        with([&](Scenario& c) { return std::exchange(op(c).handler.work_ms, 0) != 0; });
        with([&](Scenario& c) { return std::exchange(op(c).handler.extend, false); });
        with([&](Scenario& c) { return std::exchange(op(c).handler.ledger, false); });
        with([&](Scenario& c) { return std::exchange(op(c).handler.throws, false); });
        with([&](Scenario& c) { return std::exchange(op(c).handler.big, false); });
      }
    }
  }
  with([](Scenario& c) { return std::exchange(c.faults.lose_request, 0) != 0; });
  with([](Scenario& c) { return std::exchange(c.faults.lose_reply, 0) != 0; });
  with([](Scenario& c) { return std::exchange(c.faults.delay_reply, 0) != 0; });
  with([](Scenario& c) { return std::exchange(c.faults.duplicate, 0) != 0; });
  with([](Scenario& c) { return std::exchange(c.faults.latency, 0) != 0; });
  with([](Scenario& c) { return std::exchange(c.crash_rate, 0) != 0; });
  with([](Scenario& c) { return std::exchange(c.restart_rate, 0) != 0; });
  with([](Scenario& c) { return std::exchange(c.jump_rate, 0) != 0; });
  with([](Scenario& c) { return std::exchange(c.drop_rate, 0) != 0; });
  with([](Scenario& c) { return std::exchange(c.remember_failures, false); });
  with([](Scenario& c) { return std::exchange(c.wait_ms, 0) != 0; });
  with([](Scenario& c) { return std::exchange(c.keep_request, false); });
  with([](Scenario& c) {
    if (c.commit_tries < 2) return false;
    --c.commit_tries;
    return true;
  });
  with([](Scenario& c) {
    if (c.max_events < 2) return false;
    --c.max_events;
    return true;
  });
  return out;
}

}  // namespace

Scenario shrink(const Scenario& failing, Check check,
                const std::function<void(const std::string&)>& log) {
  constexpr int kSchedules = 24;  // schedules tried for each cut
  Scenario best = failing;
  auto still_fails = [&](Scenario candidate) {
    const std::uint64_t base = candidate.seed;
    for (int i = 0; i < kSchedules; ++i) {
      candidate.seed = i == 0 ? base : mix(base, static_cast<std::uint64_t>(i));
      const RunReport report = run(candidate);
      if (report.failed && report.violation.check == check) {
        best = candidate;
        return true;
      }
    }
    return false;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (Scenario& cut : cuts(best)) {
      if (still_fails(std::move(cut))) {
        progress = true;
        if (log) log("sim: shrunk to " + std::to_string(best.size()) + " operations");
        break;
      }
    }
  }
  return best;
}

}  // namespace idem::sim
