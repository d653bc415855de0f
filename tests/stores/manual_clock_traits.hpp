#pragma once
// Traits for the token-store and request-ID-cache kits on a memory store: S made from
// StoreOptions{.guard, .clock} on a ManualClock of its own, which advance() moves.

#include <chrono>
#include <memory>
#include <utility>

#include "idem/clock.hpp"
#include "idem/options.hpp"

namespace idem::testing {

template <class S, class StoreOptions>
struct ManualClockTraits {
  static constexpr std::chrono::milliseconds lease{std::chrono::seconds{30}};

  static std::unique_ptr<S> make(Options guard) {
    clock() = std::make_shared<ManualClock>();
    guard.clock = clock();
    return std::make_unique<S>(StoreOptions{.guard = std::move(guard), .clock = clock()});
  }
  static void advance(S&, std::chrono::milliseconds d) { clock()->advance(d); }
  static std::shared_ptr<ManualClock>& clock() {
    static std::shared_ptr<ManualClock> c;
    return c;
  }
};

}  // namespace idem::testing
