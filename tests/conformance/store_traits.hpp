#pragma once
// How the conformance suite makes a store and moves its time. Each backend specialises
// StoreTraits<S> in its own *_conformance_test.cpp:
//
//   static std::unique_ptr<S> make();                     a fresh, empty store
//   static void advance(S&, std::chrono::milliseconds);   let that much store time pass
//   static constexpr std::chrono::milliseconds lease;     a lease long enough for one step
//   static constexpr bool holds_until_finished;           optional: no takeover while held
//
// Stores on a shared backend read the backend's clock, so their advance() sleeps; the memory
// store's ManualClock moves instantly.

#include <chrono>
#include <memory>

namespace idem::testing {

template <class S>
struct StoreTraits;

}  // namespace idem::testing
