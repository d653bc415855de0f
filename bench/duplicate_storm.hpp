#pragma once
// The duplicate storm: one holder and 31 duplicates of one key, a 5 ms handler (the benchmark's
// argument, in ms: 50 shows how polling's calls grow with the wait). Each iteration
// takes a new key; the duplicates start together while the holder's handler runs, and wait under
// the Wait policy. Its time (manual) runs from the moment the holder's handler returns (its
// commit starts) to the last duplicate's answer. Counters: that time's p50 and p90 over the
// iterations, and the store calls each duplicate cost (counted by a wrapper), mean and most.
//
// A store is run twice: as it is (a WakingStore wakes the duplicates) and behind a wrapper that
// hides await_change (the guard polls, as before wakes existed). The bare twin is the floor: 31
// threads woken by one condition variable, timed from the notify to the last one awake.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "idem/guard.hpp"
#include "idem/store.hpp"

namespace idem::bench {

inline constexpr int kDuplicates = 31;
inline constexpr int kStormIterations = 60;

/// Every storm benchmark's shape: handlers of 5 and 50 ms, the time the storm measures itself,
/// kStormIterations storms (`BENCHMARK(f)->Apply(storm_shape)`).
inline void storm_shape(benchmark::internal::Benchmark* b) {
  b->Arg(5)->Arg(50)->UseManualTime()->Iterations(kStormIterations)->Unit(benchmark::kMicrosecond);
}

using StormClock = std::chrono::steady_clock;

/// Counts the calls a store gets; Wakes = false hides await_change (the guard then polls).
template <class S, bool Wakes>
class CountedStore {
 public:
  explicit CountedStore(S& store) noexcept : store_(&store) {}
  std::atomic<long> calls{0};

  Result<Claim> claim(const ClaimRequest& request) {
    calls.fetch_add(1, std::memory_order_relaxed);
    return store_->claim(request);
  }
  Status commit(const Ticket& ticket, const Completion& completion) {
    calls.fetch_add(1, std::memory_order_relaxed);
    return store_->commit(ticket, completion);
  }
  Status abort(const Ticket& ticket) {
    calls.fetch_add(1, std::memory_order_relaxed);
    return store_->abort(ticket);
  }
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    calls.fetch_add(1, std::memory_order_relaxed);
    return store_->extend(ticket, lease);
  }
  void await_change(const Ticket& held, std::chrono::milliseconds bound) requires Wakes {
    calls.fetch_add(1, std::memory_order_relaxed);
    store_->await_change(held, bound);
  }

 private:
  S* store_;
};

/// A gate the duplicates wait at until the holder's handler runs.
class Gate {
 public:
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    opened_.notify_all();
  }
  void pass() {
    std::unique_lock lock(mutex_);
    opened_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
};

inline double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto at = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(at, values.size() - 1)];
}

/// Reports the storm's counters from each iteration's time (us) and calls per duplicate.
inline void report_storm(benchmark::State& state, const std::vector<double>& times_us,
                         const std::vector<double>& calls_per_duplicate) {
  state.counters["commit_to_last_p50_us"] = percentile(times_us, 0.5);
  state.counters["commit_to_last_p90_us"] = percentile(times_us, 0.9);
  double sum = 0;
  double most = 0;
  for (double c : calls_per_duplicate) {
    sum += c;
    most = std::max(most, c);
  }
  state.counters["calls_per_dup"] =
      calls_per_duplicate.empty() ? 0 : sum / static_cast<double>(calls_per_duplicate.size());
  state.counters["calls_per_dup_max"] = most;
}

/// One storm per iteration over `store`, through a CountedStore<S, Wakes>.
template <bool Wakes, class S>
void run_storm(benchmark::State& state, S& store, const std::string& prefix) {
  const std::chrono::milliseconds handler{state.range(0)};
  CountedStore<S, Wakes> counted(store);
  IdempotencyGuard guard{
      counted, Options{.scope = "storm", .in_progress = Wait{.timeout = std::chrono::seconds{10}}}};
  std::vector<double> times_us;
  std::vector<double> calls_per_duplicate;
  long iteration = 0;
  for (auto _ : state) {
    const std::string key = prefix + std::to_string(iteration++);
    Gate gate;
    std::atomic<StormClock::rep> handler_end{0};
    std::atomic<StormClock::rep> last_answer{0};
    std::atomic<int> wrong{0};
    const long calls_before = counted.calls.load();
    std::vector<std::thread> duplicates;
    duplicates.reserve(kDuplicates);
    for (int i = 0; i < kDuplicates; ++i) {
      duplicates.emplace_back([&] {
        gate.pass();
        Outcome<int> out = guard.execute(key, [] { return 2; });
        const StormClock::rep now = StormClock::now().time_since_epoch().count();
        StormClock::rep seen = last_answer.load();
        while (seen < now && !last_answer.compare_exchange_weak(seen, now)) {
        }
        if (!out || !out.replayed() || out.value() != 1) wrong.fetch_add(1);
      });
    }
    std::thread holder([&] {
      Outcome<int> out = guard.execute(key, [&] {
        gate.open();
        std::this_thread::sleep_for(handler);
        handler_end = StormClock::now().time_since_epoch().count();
        return 1;
      });
      if (!out.executed()) wrong.fetch_add(1);
    });
    holder.join();
    for (std::thread& t : duplicates) t.join();
    const double us =
        std::chrono::duration<double, std::micro>(
            StormClock::duration(std::max<StormClock::rep>(last_answer - handler_end, 0)))
            .count();
    state.SetIterationTime(us / 1e6);
    times_us.push_back(us);
    calls_per_duplicate.push_back(static_cast<double>(counted.calls.load() - calls_before - 2) /
                                  kDuplicates);  // the holder's claim and commit aside
    if (wrong.load() != 0) {
      state.SkipWithError("a duplicate was not answered with the holder's replay");
      break;
    }
  }
  report_storm(state, times_us, calls_per_duplicate);
}

/// The floor: 31 threads asleep on one condition variable, woken by one notify_all; the time runs
/// from the notify to the last one awake.
inline void run_storm_bare(benchmark::State& state) {
  const std::chrono::milliseconds handler{state.range(0)};
  std::vector<double> times_us;
  for (auto _ : state) {
    std::mutex mutex;
    std::condition_variable changed;
    bool done = false;
    int asleep = 0;
    std::atomic<StormClock::rep> last_awake{0};
    std::vector<std::thread> duplicates;
    for (int i = 0; i < kDuplicates; ++i) {
      duplicates.emplace_back([&] {
        std::unique_lock lock(mutex);
        ++asleep;
        changed.notify_all();
        changed.wait(lock, [&] { return done; });
        lock.unlock();
        const StormClock::rep now = StormClock::now().time_since_epoch().count();
        StormClock::rep seen = last_awake.load();
        while (seen < now && !last_awake.compare_exchange_weak(seen, now)) {
        }
      });
    }
    StormClock::time_point notified;
    {
      std::unique_lock lock(mutex);
      changed.wait(lock, [&] { return asleep == kDuplicates; });
      std::this_thread::sleep_for(handler);  // as the holder's handler would
      done = true;
      notified = StormClock::now();
    }
    changed.notify_all();
    for (std::thread& t : duplicates) t.join();
    const double us = std::chrono::duration<double, std::micro>(
                          StormClock::duration(std::max<StormClock::rep>(
                              last_awake - notified.time_since_epoch().count(), 0)))
                          .count();
    state.SetIterationTime(us / 1e6);
    times_us.push_back(us);
  }
  report_storm(state, times_us, {});
}

}  // namespace idem::bench
