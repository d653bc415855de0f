#pragma once
// Observer: counters and events from the guard, for metrics and logs without a logging dependency.

#include <atomic>
#include <cstdint>
#include <functional>
#include <string_view>
#include <system_error>
#include <utility>

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

/// One event as the callback sees it. The views are valid only during the callback.
struct EventInfo {
  Event event;
  std::string_view scope;
  std::string_view key;     // the key's id (bytes as given)
  std::uint64_t fence = 0;  // the holder's fence, where there is one
  std::error_code error;    // the error, for refusals and failures
};

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
};

/// Counts every event and forwards it to an optional callback. Thread-safe; one Observer may
/// serve many guards. Counting costs one relaxed atomic add on a cache line of its own.
class Observer {
 public:
  using Callback = std::function<void(const EventInfo&)>;

  Observer() = default;
  explicit Observer(Callback on_event) : on_event_(std::move(on_event)) {}

  void notify(const EventInfo& info) {
    if (std::atomic<std::uint64_t>* counter = counter_for(info.event)) {
      counter->fetch_add(1, std::memory_order_relaxed);
    }
    if (on_event_) on_event_(info);
  }

  Counters counters() const noexcept {
    auto get = [](const Slot& s) { return s.value.load(std::memory_order_relaxed); };
    return Counters{get(executed_), get(replayed_),   get(in_progress_), get(mismatched_),
                    get(rejected_), get(lease_lost_), get(aborted_),     get(store_errors_)};
  }

 private:
  struct alignas(64) Slot {
    std::atomic<std::uint64_t> value{0};
  };

  std::atomic<std::uint64_t>* counter_for(Event e) noexcept {
    switch (e) {
      case Event::executed:
        return &executed_.value;
      case Event::replayed:
        return &replayed_.value;
      case Event::in_progress:
        return &in_progress_.value;
      case Event::mismatched:
        return &mismatched_.value;
      case Event::rejected:
        return &rejected_.value;
      case Event::lease_lost:
        return &lease_lost_.value;
      case Event::aborted:
        return &aborted_.value;
      case Event::store_error:
        return &store_errors_.value;
      case Event::took_over:
      case Event::commit_retried:
      case Event::result_unrecorded:
        return nullptr;  // events only, no counter
    }
    return nullptr;
  }

  Slot executed_, replayed_, in_progress_, mismatched_, rejected_, lease_lost_, aborted_,
      store_errors_;
  Callback on_event_;
};

inline std::string_view to_string(Event e) noexcept {
  switch (e) {
    case Event::executed:
      return "executed";
    case Event::replayed:
      return "replayed";
    case Event::in_progress:
      return "in_progress";
    case Event::mismatched:
      return "mismatched";
    case Event::rejected:
      return "rejected";
    case Event::lease_lost:
      return "lease_lost";
    case Event::aborted:
      return "aborted";
    case Event::store_error:
      return "store_error";
    case Event::took_over:
      return "took_over";
    case Event::commit_retried:
      return "commit_retried";
    case Event::result_unrecorded:
      return "result_unrecorded";
  }
  return "unknown";
}

}  // namespace idem
