// WakeSignal, the group commit's per-caller wake: a spinning wait takes a release that came before
// it or during it, gives up at its deadline without taking anything, and leaves a later release to
// the sleeping wait after it.

#include "idem/detail/wake_signal.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace {

using idem::detail::WakeSignal;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

TEST(WakeSignal, ASpinningWaitTakesAReleaseThatCameBeforeIt) {
  WakeSignal signal(0);
  signal.release();
  EXPECT_TRUE(signal.try_acquire_spinning_until(Clock::now()));  // looks once, deadline or not
  EXPECT_FALSE(signal.try_acquire_spinning_until(Clock::now() + milliseconds{5}))
      << "one release is taken once";
}

TEST(WakeSignal, ASpinningWaitTakesAReleaseFromAnotherThread) {
  WakeSignal signal(0);
  std::thread releaser([&] {
    std::this_thread::sleep_for(milliseconds{5});
    signal.release();
  });
  EXPECT_TRUE(signal.try_acquire_spinning_until(Clock::now() + std::chrono::seconds{10}));
  releaser.join();
}

TEST(WakeSignal, ASpinningWaitGivesUpAtItsDeadlineAndTheSleepingWaitGetsTheLateRelease) {
  WakeSignal signal(0);
  const auto start = Clock::now();
  EXPECT_FALSE(signal.try_acquire_spinning_until(start + milliseconds{2}));
  EXPECT_GE(Clock::now() - start, milliseconds{2});
  std::thread releaser([&] {
    std::this_thread::sleep_for(milliseconds{20});
    signal.release();
  });
  signal.acquire();  // returns only with the release
  releaser.join();
  EXPECT_FALSE(signal.try_acquire_spinning_until(Clock::now())) << "nothing left to take";
}

}  // namespace
