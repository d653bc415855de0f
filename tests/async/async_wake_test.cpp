// AsyncGuard over ThreadedAsyncStore<MemoryStore>: waiting duplicates are woken on the adapter's
// wait threads instead of polling (async_wake_cases.hpp), a wait that finds every wait thread
// busy answers at once so the guard pauses instead, and with no wait threads the guard polls.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "async/async_test_support.hpp"
#include "async/async_wake_cases.hpp"
#include "idem/asio/threaded_store.hpp"
#include "idem/memory/store.hpp"
#include "support/async_call_counter.hpp"

namespace idem::testing {
namespace {

using ThreadedMemory = ThreadedAsyncStore<MemoryStore>;
static_assert(AsyncWakingStore<ThreadedMemory>);
static_assert(!AsyncWakingStore<ImmediateStore<MemoryStore>>);  // a wait would block the loop
static_assert(!AsyncWakingStore<AsyncCallCounter<ThreadedMemory, false>>);

TEST(AsyncWakeThreaded, DuplicatesWokenByTheCommitCostThreeStoreCallsEach) {
  ThreadedMemory store{ThreadedStoreOptions{}};
  IoRunner runner;
  expect_async_duplicates_woken_by_commit(store, runner, 31, "storm");
}

TEST(AsyncWakeThreaded, TheHoldersAbortWakesADuplicateThatThenRuns) {
  ThreadedMemory store{ThreadedStoreOptions{}};
  IoRunner runner;
  expect_async_duplicate_woken_by_abort(store, runner, "abort");
}

TEST(AsyncWakeThreaded, CancellingAWaitingDuplicateEndsItsWait) {
  ThreadedMemory store{ThreadedStoreOptions{}};
  IoRunner runner;
  expect_async_cancel_ends_the_wait(store, runner, "cancel");
}

TEST(AsyncWakeThreaded, AManualClockStillPolls) {
  ThreadedMemory store{ThreadedStoreOptions{}};
  IoRunner runner;
  expect_async_manual_clock_polls(store, runner, "manual");
}

// One wait thread, held by a first wait: a second finds none free and is answered false at once
// (the guard then pauses on its own); the first ends once the hold ends. Each wait is handed to
// its thread as it starts, so the first has the thread before the second asks.
TEST(AsyncWakeThreaded, AWaitFindingEveryWaitThreadBusyAnswersAtOnce) {
  ThreadedMemory store{ThreadedStoreOptions{.wait_threads = 1}};
  MemoryStore& memory = store.store();
  const ClaimRequest request{.key = "busy",
                             .lease = kNoWaitBound,
                             .retention = held_retention(kNoWaitBound, kNoWaitBound)};
  Result<Claim> held = memory.claim(request);
  ASSERT_TRUE(held);
  const Ticket ticket{"busy", held->fence};
  IoRunner runner;
  std::optional<bool> first;
  std::optional<bool> second;
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> {
        first = co_await store.async_await_change(ticket, kNoWaitBound);
      },
      net::detached);
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> {
        second = co_await store.async_await_change(ticket, kNoWaitBound);
      },
      net::detached);
  ASSERT_TRUE(run_until_or_give_up(runner, [&] { return second.has_value(); }));
  EXPECT_FALSE(*second);
  EXPECT_FALSE(first.has_value());
  ASSERT_TRUE(memory.commit(ticket, Completion{ClaimStatus::completed, "x", kNoWaitBound}));
  ASSERT_TRUE(run_until_or_give_up(runner, [&] { return first.has_value(); }));
  EXPECT_TRUE(*first);
}

TEST(AsyncWakeThreaded, NoWaitThreadsMeansTheGuardPolls) {
  ThreadedMemory store{ThreadedStoreOptions{.wait_threads = 0}};
  EXPECT_FALSE(store.wakes());
  AsyncCallCounter<ThreadedMemory> counted(store);
  AsyncGuard guard{counted,
                   Options{.scope = "polled",
                           .lease = kNoWaitBound,
                           .in_progress = Wait{.timeout = kNoWaitBound,
                                               .initial_backoff = std::chrono::milliseconds{1},
                                               .max_backoff = std::chrono::milliseconds{2}}}};
  IoRunner runner;
  std::atomic<bool> started{false};
  std::optional<Outcome<std::string>> holder;
  std::optional<Outcome<std::string>> duplicate;
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> {
        holder.emplace(co_await guard.async_execute("k", [&]() -> net::awaitable<std::string> {
          started = true;
          co_await until([&] { return counted.claims.load() >= 5; });  // the poller's claims
          co_return std::string("once");
        }));
      },
      net::detached);
  ASSERT_TRUE(run_until_or_give_up(runner, [&] { return started.load(); }));
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> {
        duplicate.emplace(co_await guard.async_execute("k", [] { return std::string("again"); }));
      },
      net::detached);
  ASSERT_TRUE(
      run_until_or_give_up(runner, [&] { return holder.has_value() && duplicate.has_value(); }));
  EXPECT_TRUE(duplicate->replayed()) << duplicate->message();
  EXPECT_EQ(counted.awaits.load(), 0);
  EXPECT_GE(counted.claims.load(), 5);
}

}  // namespace
}  // namespace idem::testing
