#pragma once
// Per-call latency percentiles beside Google Benchmark's mean time. A benchmark loop opens one
// timer per iteration; one call in `every` is timed with the steady clock, and at the end the
// thread's p50, p90, p99, p99.9 and largest go out as counters (p50_ns, p90_ns, p99_ns, p999_ns,
// max_ns), averaged over the benchmark's threads. Guarded benchmarks and their bare twins sample
// the same way, so the percentiles compare like the means do.
//
//   idem_bench::Latency latency;
//   for (auto _ : state) {
//     const auto timer = latency.time();
//     ... one call ...
//   }
//   latency.report(state);

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace idem_bench {

class Latency {
  using Clock = std::chrono::steady_clock;

 public:
  /// every = 1 times each call. Calls of a few hundred nanoseconds want a larger value: two clock
  /// reads on every call would be a good part of what is measured.
  explicit Latency(std::uint32_t every = 1) : every_(every == 0 ? 1 : every) {}

  class Timer {
   public:
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;
    ~Timer() {
      if (owner_ != nullptr) owner_->add(Clock::now() - start_);
    }

   private:
    friend class Latency;
    explicit Timer(Latency* owner)
        : owner_(owner), start_(owner ? Clock::now() : Clock::time_point{}) {}
    Latency* owner_;
    Clock::time_point start_;
  };

  /// Times the rest of the scope if this call is one of the sampled ones.
  [[nodiscard]] Timer time() {
    const bool sampled = ++calls_ % every_ == 0 && samples_.size() < kMaxSamples;
    return Timer(sampled ? this : nullptr);
  }

  /// Sets this thread's percentiles as counters; nothing when no call was sampled.
  void report(benchmark::State& state) {
    if (samples_.empty()) return;
    std::sort(samples_.begin(), samples_.end());
    const auto at = [&](double q) {
      const auto i = static_cast<std::size_t>(q * static_cast<double>(samples_.size() - 1));
      return benchmark::Counter(static_cast<double>(samples_[i]), benchmark::Counter::kAvgThreads);
    };
    state.counters["p50_ns"] = at(0.50);
    state.counters["p90_ns"] = at(0.90);
    state.counters["p99_ns"] = at(0.99);
    state.counters["p999_ns"] = at(0.999);
    state.counters["max_ns"] = at(1.0);
  }

 private:
  // A thread keeps at most this many samples (8 MiB); later calls run untimed.
  static constexpr std::size_t kMaxSamples = std::size_t{1} << 20;

  void add(Clock::duration d) {
    samples_.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  }

  std::uint32_t every_;
  std::uint64_t calls_ = 0;
  std::vector<std::int64_t> samples_;
};

}  // namespace idem_bench
