#pragma once
// How long a guard's handlers take, for the retry hint of an in_progress refusal: come back when
// the holder is likely done (p90 of recent handler durations), never later than its lease ends,
// so a 7 ms charge's duplicate retries in 7 ms, not 30 s. The last 64 durations in a ring of
// relaxed atomics: recording is one fetch_add and one store; reading copies the ring and selects,
// once per recorded duration: until the next one, reads answer from a memo (a storm of refusals
// of one busy key sorts once, not once each).

#include <array>
#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include "idem/clock.hpp"
#include "idem/detail/min_max.hpp"

namespace idem::detail {

class DurationEstimate {
 public:
  static constexpr std::size_t kSamples = 64;

  /// One handler's duration (from its claim to its commit or release).
  void record(std::chrono::nanoseconds took) noexcept {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
    // Zero marks an empty slot: a handler quicker than a microsecond counts as one.
    const auto kept =
        static_cast<std::uint32_t>(max_of<std::int64_t>(1, min_of<std::int64_t>(us, UINT32_MAX)));
    samples_[next_.fetch_add(1, std::memory_order_relaxed) % kSamples].store(
        kept, std::memory_order_relaxed);
  }

  /// The 90th percentile of the recorded durations (the last kSamples), or nullopt before any.
  std::optional<std::chrono::microseconds> p90() const noexcept {
    const std::uint64_t recorded = next_.load(std::memory_order_relaxed);
    if (recorded == 0) return std::nullopt;
    // The memo holds the count it was taken at (low 32 bits) over the answer. A duration being
    // recorded as it is taken may be missing from it until the next one: a hint, not a figure.
    const auto at = static_cast<std::uint32_t>(recorded);
    const std::uint64_t memo = memo_.load(std::memory_order_relaxed);
    if (memo != 0 && static_cast<std::uint32_t>(memo) == at) {
      return std::chrono::microseconds{memo >> 32};
    }
    const std::optional<std::chrono::microseconds> answer = select_p90();
    if (answer) {
      memo_.store((static_cast<std::uint64_t>(answer->count()) << 32) | at,
                  std::memory_order_relaxed);
    }
    return answer;
  }

 private:
  std::optional<std::chrono::microseconds> select_p90() const noexcept {
    std::array<std::uint32_t, kSamples> copy{};
    std::size_t n = 0;
    for (const auto& s : samples_) {
      if (const std::uint32_t v = s.load(std::memory_order_relaxed); v != 0) copy[n++] = v;
    }
    if (n == 0) return std::nullopt;
    // Sorted by insertion, at most kSamples of them: std::nth_element would need <algorithm>.
    for (std::size_t i = 1; i < n; ++i) {
      for (std::size_t j = i; j > 0 && copy[j] < copy[j - 1]; --j) std::swap(copy[j], copy[j - 1]);
    }
    return std::chrono::microseconds{copy[(n * 9) / 10]};
  }

  std::atomic<std::uint64_t> next_{0};
  std::array<std::atomic<std::uint32_t>, kSamples> samples_{};  // microseconds; 0: empty
  mutable std::atomic<std::uint64_t> memo_{0};  // p90 << 32 | recorded count; 0: none yet
};

/// When a target's handler began: kept by the targets whose handlers the estimate learns from.
struct HandlerStart {
  Clock::time_point at{};
};

template <class Target>
concept TimesHandlers = requires(const Target& t) {
  { t.handler_start() } -> std::same_as<HandlerStart&>;
};

/// The claim acquired: the handler starts now.
template <class Target>
void handler_started(const Clock& clock, const Target& target) noexcept {
  if constexpr (TimesHandlers<Target>) target.handler_start().at = clock.now();
}

/// The handler is done (its commit or release starts): its duration joins the estimate.
template <class Target>
void handler_ended(DurationEstimate* estimate, const Clock& clock, const Target& target) noexcept {
  if constexpr (TimesHandlers<Target>) {
    HandlerStart& start = target.handler_start();
    if (estimate == nullptr || start.at == Clock::time_point{}) return;
    estimate->record(clock.now() - start.at);
    start.at = {};
  }
}

/// The retry hint of a refusal whose holder has `lease_left` (zero: unknown): the estimate's
/// p90 rounded up to a millisecond, at most the lease left; the lease left without an estimate.
inline std::chrono::milliseconds retry_hint(const DurationEstimate* estimate,
                                            std::chrono::milliseconds lease_left) noexcept {
  const std::optional<std::chrono::microseconds> p90 =
      estimate != nullptr ? estimate->p90() : std::nullopt;
  if (!p90) return lease_left;
  const auto expected = std::chrono::ceil<std::chrono::milliseconds>(*p90);
  return lease_left.count() > 0 ? min_of(expected, lease_left) : expected;
}

}  // namespace idem::detail
