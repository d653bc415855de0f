#pragma once
// What a guard call keeps for observers that time calls or trace them (Observer::Settings): the
// parts' durations and the open span. Lives in the call's target; untouched without an observer.

#include <chrono>

#include "idem/observer.hpp"

namespace idem::detail {

struct CallTimer {
  using Clock = std::chrono::steady_clock;
  bool timed = false;        // this call is timed (Observer::time_this_call)
  Clock::time_point mark{};  // when the part now running began
  Durations durations{};
  SpanHandle span = nullptr;
  bool span_open = false;
  bool claim_done = false;

  /// Ends the part that began at `mark`, returns its length and starts the next one.
  std::chrono::nanoseconds lap() noexcept {
    const auto now = Clock::now();
    const auto took = now - mark;
    mark = now;
    return std::chrono::duration_cast<std::chrono::nanoseconds>(took);
  }
};

/// The name observers label a store with: its `static constexpr std::string_view kStoreName`.
template <class S>
constexpr std::string_view store_name_of() noexcept {
  if constexpr (requires { S::kStoreName; }) {
    return S::kStoreName;
  } else {
    return "store";
  }
}

}  // namespace idem::detail
