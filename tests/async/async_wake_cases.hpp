#pragma once
// The behaviour every idem::AsyncWakingStore shares under AsyncGuard, for one store: duplicates
// of a held key wait on the store and are woken by the holder's commit or abort, each costing
// claim + async_await_change + claim; cancelling a waiting duplicate ends its wait; a test's
// ManualClock still polls. No timing is asserted: a wake that never comes shows as a case that
// does not finish within its give-up (the wait bounds are minutes).

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "async/async_test_support.hpp"
#include "idem/asio/async_guard.hpp"
#include "idem/clock.hpp"
#include "support/async_call_counter.hpp"

namespace idem::testing {

inline constexpr std::chrono::milliseconds kNoWaitBound = std::chrono::minutes{10};
inline constexpr std::chrono::seconds kGiveUp{60};  // a case that hangs fails instead

inline Options waking_options(std::string scope) {
  return Options{.scope = std::move(scope),
                 .lease = kNoWaitBound,
                 .in_progress = Wait{.timeout = kNoWaitBound, .max_backoff = kNoWaitBound}};
}

/// Runs `runner` until `done()` or the give-up; false when it gave up.
template <class Done>
bool run_until_or_give_up(IoRunner& runner, Done done) {
  const auto give_up = std::chrono::steady_clock::now() + kGiveUp;
  runner.run_until([&] { return done() || std::chrono::steady_clock::now() > give_up; });
  return done();
}

/// Suspends until `ready()`, looking every millisecond (a handler holding its key meanwhile).
template <class Ready>
net::awaitable<void> until(Ready ready) {
  while (!ready()) co_await pause(std::chrono::milliseconds{1});
}

/// One holder and `n` duplicates on one io_context: the holder's handler runs until every
/// duplicate waits on the store, so each duplicate's answer costs exactly claim (in_progress) +
/// async_await_change + claim (replay), and none runs its handler.
template <class S>
void expect_async_duplicates_woken_by_commit(S& store, IoRunner& runner, int n,
                                             const std::string& scope) {
  AsyncCallCounter<S> counted(store);
  AsyncGuard guard{counted, waking_options(scope)};
  std::atomic<int> runs{0};
  int finished = 0;
  int replayed = 0;
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> {
        auto out = co_await guard.async_execute("k", [&]() -> net::awaitable<std::string> {
          runs.fetch_add(1);
          co_await until([&] { return counted.awaits.load() >= n; });
          co_return std::string("once");
        });
        EXPECT_TRUE(out.executed()) << out.message();
        ++finished;
      },
      net::detached);
  ASSERT_TRUE(run_until_or_give_up(runner, [&] { return runs.load() == 1; }));
  for (int i = 0; i < n; ++i) {
    net::co_spawn(
        runner.io(),
        [&]() -> net::awaitable<void> {
          auto out = co_await guard.async_execute("k", [&] {
            runs.fetch_add(1);
            return std::string("again");
          });
          if (out.replayed() && out.value() == "once") ++replayed;
          ++finished;
        },
        net::detached);
  }
  ASSERT_TRUE(run_until_or_give_up(runner, [&] { return finished == n + 1; }));
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(replayed, n);
  EXPECT_EQ(counted.awaits.load(), n);  // woken once each: no bound ran out, no early return
  EXPECT_EQ(counted.claims.load(), 1 + 2 * n);
  EXPECT_EQ(counted.claims_after_wait.load(), n) << "each duplicate's claim after its wake";
  EXPECT_LE(counted.calls() - 2, 3 * n) << "the holder's claim and commit aside";
}

/// The holder's handler throws once the duplicate waits: the release wakes the duplicate, which
/// takes the key and runs its own handler (claim, wait, claim: three calls before it runs).
template <class S>
void expect_async_duplicate_woken_by_abort(S& store, IoRunner& runner, const std::string& scope) {
  AsyncCallCounter<S> counted(store);
  AsyncGuard guard{counted, waking_options(scope)};
  std::atomic<int> runs{0};
  std::optional<Outcome<int>> duplicate;
  bool holder_done = false;
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> {
        try {
          (void)co_await guard.async_execute("k", [&]() -> net::awaitable<int> {
            runs.fetch_add(1);
            co_await until([&] { return counted.awaits.load() >= 1; });
            throw std::runtime_error("the holder fails");
          });
        } catch (const std::runtime_error&) {
        }
        holder_done = true;
      },
      net::detached);
  ASSERT_TRUE(run_until_or_give_up(runner, [&] { return runs.load() == 1; }));
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> {
        duplicate.emplace(
            co_await guard.async_execute("k", [&] { return 10 + runs.fetch_add(1); }));
      },
      net::detached);
  ASSERT_TRUE(run_until_or_give_up(runner, [&] { return holder_done && duplicate.has_value(); }));
  EXPECT_TRUE(duplicate->executed()) << duplicate->message();
  EXPECT_EQ(runs.load(), 2);
  EXPECT_EQ(counted.aborts.load(), 1);
  EXPECT_EQ(counted.awaits.load(), 1);
  EXPECT_EQ(counted.claims.load(), 3);  // the holder's; the duplicate's in_progress and acquired
  EXPECT_EQ(counted.claims_after_wait.load(), 1);  // the duplicate's claim after the wake
}

/// A duplicate cancelled while it waits on the store ends with operation_aborted, without the
/// holder's end (whose wait bound is minutes), and holds nothing; the holder then commits.
template <class S>
void expect_async_cancel_ends_the_wait(S& store, IoRunner& runner, const std::string& scope) {
  AsyncCallCounter<S> counted(store);
  AsyncGuard guard{counted, waking_options(scope)};
  std::atomic<bool> release{false};
  std::atomic<int> runs{0};
  std::optional<Outcome<int>> held;
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> {
        held.emplace(co_await guard.async_execute("k", [&]() -> net::awaitable<int> {
          runs.fetch_add(1);
          co_await until([&] { return release.load(); });
          co_return 1;
        }));
      },
      net::detached);
  ASSERT_TRUE(run_until_or_give_up(runner, [&] { return runs.load() == 1; }));
  net::cancellation_signal signal;
  Spawned<Outcome<int>> waiting;
  spawn_cancellable(runner.io(), guard.async_execute("k", [&] { return 2 + runs.fetch_add(1); }),
                    signal, waiting);
  ASSERT_TRUE(run_until_or_give_up(runner, [&] { return counted.awaits.load() == 1; }));
  signal.emit(net::cancellation_type::terminal);
  ASSERT_TRUE(run_until_or_give_up(runner, [&] { return waiting.done; }))
      << "the cancelled wait did not end";
  EXPECT_TRUE(waiting.aborted());
  EXPECT_EQ(counted.claims.load(), 2);  // no claim after the cancelled wait
  EXPECT_EQ(counted.claims_after_wait.load(), 0);
  release = true;
  ASSERT_TRUE(run_until_or_give_up(runner, [&] { return held.has_value(); }));
  EXPECT_TRUE(held->executed()) << held->message();
  EXPECT_EQ(runs.load(), 1);
}

/// Under a test's ManualClock the guard polls (the clock moves only when slept on), even over a
/// store that wakes: a wait on a holder that never ends runs out at its timeout in virtual time.
template <class S>
void expect_async_manual_clock_polls(S& store, IoRunner& runner, const std::string& scope) {
  auto clock = std::make_shared<ManualClock>();
  AsyncCallCounter<S> counted(store);
  AsyncGuard guard{counted, Options{.scope = scope,
                                    .lease = kNoWaitBound,
                                    .in_progress = Wait{.timeout = std::chrono::seconds{2}},
                                    .clock = clock}};
  std::optional<Outcome<int>> inner;
  std::optional<Outcome<int>> outer;
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> {
        outer.emplace(co_await guard.async_execute("k", [&]() -> net::awaitable<int> {
          // The holder is this very call: the inner wait never ends but by its timeout.
          inner.emplace(co_await guard.async_execute("k", [] { return 2; }));
          co_return 1;
        }));
      },
      net::detached);
  ASSERT_TRUE(run_until_or_give_up(runner, [&] { return outer.has_value(); }));
  ASSERT_TRUE(inner.has_value());
  EXPECT_EQ(inner->error(), errc::in_progress);
  EXPECT_EQ(counted.awaits.load(), 0);  // the manual clock's sleeps, not the store's wake
  EXPECT_GT(counted.claims.load(), 3);  // the first claim, then one per poll
  // Every claim but the holder's and the duplicate's first follows a pause.
  EXPECT_EQ(counted.claims_after_wait.load(), counted.claims.load() - 2);
}

}  // namespace idem::testing
