#pragma once
// Traits for the kits on a memory store, whose time is a ManualClock of the case's own that
// advance() moves: ManualTime<S> for the record-store kit's StoreTraits (a make() of its own),
// ManualClockTraits<S, StoreOptions> for the token-store and request-ID-cache kits (S made from
// StoreOptions{.guard, .clock}).

#include <chrono>
#include <memory>
#include <utility>

#include "idem/clock.hpp"
#include "idem/options.hpp"

namespace idem::testing {

template <class S>
struct ManualTime {
  static constexpr std::chrono::milliseconds lease{std::chrono::seconds{30}};

  /// A new clock for the case's new store.
  static std::shared_ptr<ManualClock> fresh_clock() {
    return clock() = std::make_shared<ManualClock>();
  }
  static void advance(S&, std::chrono::milliseconds d) { clock()->advance(d); }
  static std::shared_ptr<Clock> clock(S&) { return clock(); }
  static std::shared_ptr<ManualClock>& clock() {
    static std::shared_ptr<ManualClock> c;
    return c;
  }
};

template <class S, class StoreOptions>
struct ManualClockTraits : ManualTime<S> {
  static std::unique_ptr<S> make(Options guard) {
    guard.clock = ManualTime<S>::fresh_clock();
    return std::make_unique<S>(
        StoreOptions{.guard = std::move(guard), .clock = ManualTime<S>::clock()});
  }
};

}  // namespace idem::testing
