#pragma once
// Observer: counters and events from the guard, for metrics and logs without a logging dependency.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <system_error>
#include <utility>

#include "idem/detail/enum_names.hpp"
#include "idem/detail/thread_counters.hpp"

namespace idem {

/// What happened in one guard call. Several events can happen in one call (took_over, then
/// executed).
enum class Event : std::uint8_t {
  executed,           // the handler ran and returned
  replayed,           // a stored result (or remembered failure) answered
  in_progress,        // refused: another caller holds the key
  mismatched,         // refused: same key, another payload
  rejected,           // refused: bad key or a store's own refusal (token, transition, version)
  lease_lost,         // a commit or abort came too late: the key was taken over
  aborted,            // the handler threw; the claim was released or recorded as failed
  store_error,        // the store failed a claim, commit or abort
  took_over,          // a claim took over a record whose holder's lease had expired
  commit_retried,     // a commit failed and is being tried again
  result_unrecorded,  // a fresh result was returned but not recorded
};

std::string_view to_string(Event e) noexcept;

/// How long the parts of one guard call took, where the guard timed them (Observer::Settings::
/// time_one_in); zero when not measured. `claim`: every store call of the claim, waits included;
/// `handler`: from the claim to the commit or failure; `commit`: the commit with its retries.
struct Durations {
  std::chrono::nanoseconds claim{0};
  std::chrono::nanoseconds handler{0};
  std::chrono::nanoseconds commit{0};
  bool measured = false;
};

/// One event as the callback sees it. The views are valid only during the callback.
struct EventInfo {
  Event event;
  std::string_view scope;
  std::string_view key;      // the key's id (bytes as given)
  std::uint64_t fence = 0;   // the holder's fence, where there is one
  std::error_code error;     // the error, for refusals and failures
  std::string_view store{};  // the store's name: "memory", "sqlite", "postgres", "redis", ...
  Durations durations{};     // on the event that ends a timed call
};

/// An opaque span a tracer started (Observer::Settings::span_start); handed back at its end.
using SpanHandle = void*;

/// Snapshot of an Observer's counters.
struct Counters {
  std::uint64_t executed = 0;
  std::uint64_t replayed = 0;
  std::uint64_t in_progress = 0;
  std::uint64_t mismatched = 0;
  std::uint64_t rejected = 0;
  std::uint64_t lease_lost = 0;
  std::uint64_t aborted = 0;
  std::uint64_t store_errors = 0;
  std::uint64_t took_over = 0;
  std::uint64_t commit_retried = 0;
  std::uint64_t result_unrecorded = 0;
};

/// Counts every event and forwards it to an optional callback. Thread-safe; one Observer may
/// serve many guards. Each thread counts in a block of its own (no locked instruction, no cache
/// line shared between threads counting at once); counters() sums them.
class Observer {
 public:
  using Callback = std::function<void(const EventInfo&)>;

  struct Settings {
    /// Time one call in N on each thread (claim, handler, commit: EventInfo::durations on the
    /// call's last event); 1 times every call, 0 (default) none. Each timed call reads the
    /// steady clock about four times, which is a large share of an in-memory replay: sample.
    std::uint32_t time_one_in = 0;
    /// Span hooks for a tracing library: span_start is called as a guard call begins (the
    /// event field is `executed`, a placeholder), span_end with its handle and the call's last
    /// event (its attributes: scope, store, key, fence, error, durations). Both or neither.
    /// A call whose key is refused before any store call opens no span.
    std::function<SpanHandle(const EventInfo&)> span_start{};
    std::function<void(SpanHandle, const EventInfo&)> span_end{};
  };

  Observer() = default;
  explicit Observer(Callback on_event) : on_event_(std::move(on_event)) {}
  Observer(Callback on_event, Settings settings)
      : on_event_(std::move(on_event)), settings_(std::move(settings)) {
    const std::uint32_t n = settings_.time_one_in;
    if (n == 0) return;
    std::uint32_t pow2 = 1;
    while (pow2 < n && pow2 < (1u << 30)) pow2 <<= 1;
    time_mask_ = pow2 - 1;
  }

  /// Whether the guard should time the call now starting (Settings::time_one_in, rounded up to
  /// a power of two so that the choice is a mask, not a division).
  bool time_this_call() noexcept {
    if (time_mask_ == kNever) return false;
    thread_local std::uint32_t calls = 0;
    return (++calls & time_mask_) == 0;
  }
  bool has_spans() const noexcept { return static_cast<bool>(settings_.span_start); }
  SpanHandle start_span(const EventInfo& info) { return settings_.span_start(info); }
  void end_span(SpanHandle span, const EventInfo& info) {
    if (settings_.span_end) settings_.span_end(span, info);
  }

  void notify(const EventInfo& info) {
    if (const auto i = static_cast<std::size_t>(info.event); i < kEvents) counts_.add(i);
    if (on_event_) on_event_(info);
  }

  Counters counters() const noexcept {
    auto get = [this](Event e) { return counts_.get(static_cast<std::size_t>(e)); };
    return Counters{
        get(Event::executed),       get(Event::replayed),         get(Event::in_progress),
        get(Event::mismatched),     get(Event::rejected),         get(Event::lease_lost),
        get(Event::aborted),        get(Event::store_error),      get(Event::took_over),
        get(Event::commit_retried), get(Event::result_unrecorded)};
  }

 private:
  static constexpr std::size_t kEvents = static_cast<std::size_t>(Event::result_unrecorded) + 1;

  detail::ThreadCounters<kEvents> counts_;
  static constexpr std::uint32_t kNever = ~std::uint32_t{0};
  Callback on_event_;
  Settings settings_;
  std::uint32_t time_mask_ = kNever;
};

namespace detail {
inline constexpr std::array<std::string_view, 11> kEventNames = {
    "executed", "replayed",    "in_progress", "mismatched",     "rejected",         "lease_lost",
    "aborted",  "store_error", "took_over",   "commit_retried", "result_unrecorded"};
static_assert(kEventNames.size() == static_cast<std::size_t>(Event::result_unrecorded) + 1);
}  // namespace detail

inline std::string_view to_string(Event e) noexcept {
  return detail::name_in(detail::kEventNames, e);
}

}  // namespace idem
