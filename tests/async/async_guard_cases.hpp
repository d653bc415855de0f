#pragma once
// The guard's behaviour through AsyncGuard::async_execute, on any asynchronous store: replay,
// refusals, failures, waiting on a timer, cancellation at each suspension point, and many
// coroutines on several threads. A backend B gives:
//
//   using Store = ...;                       an idem::AsyncStore
//   bool ready();                            false: skipped or failed in SetUp
//   Store& store();                          a fresh store, its records its own
//   boost::asio::io_context& io();           what the store's I/O runs on
//   template <class T> T run(awaitable<T>);  runs a coroutine on io() to its end

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "async/async_test_support.hpp"
#include "idem/asio/async_guard.hpp"
#include "idem/clock.hpp"

namespace idem::testing {

using namespace std::chrono_literals;

template <class Backend>
class AsyncGuardCases : public ::testing::Test {
 protected:
  // A backend whose store takes its calls from one thread only (AsyncRedisStore with
  // single_threaded): the cases that spread callers over threads keep them on the test's.
  static constexpr bool kOneThread = requires { requires Backend::kOneThread; };

  // A coroutine holds "k" until a second one, 20 ms later, is answered on it: the holder's outcome
  // and the second one's.
  template <class Guard>
  std::pair<std::optional<Outcome<int>>, std::optional<Outcome<int>>> refused_while_held(
      Guard& guard) {
    bool release = false;
    std::optional<Outcome<int>> held;
    std::optional<Outcome<int>> refused;
    net::co_spawn(
        io(),
        [&]() -> net::awaitable<void> {
          held.emplace(co_await guard.async_execute("k", [&]() -> net::awaitable<int> {
            while (!release) co_await pause(1ms);
            co_return 1;
          }));
        },
        net::detached);
    net::co_spawn(
        io(),
        [&]() -> net::awaitable<void> {
          co_await pause(20ms);  // the holder has claimed by then
          refused.emplace(co_await guard.async_execute("k", [] { return 2; }));
          release = true;
        },
        net::detached);
    run_until([&] { return held.has_value() && refused.has_value(); });
    return {std::move(held), std::move(refused)};
  }

  void SetUp() override { backend_.set_up(); }
  bool ready() const { return backend_.ready(); }
  typename Backend::Store& store() { return backend_.store(); }

 public:  // for the helpers below the cases, too
  net::io_context& io() { return backend_.io(); }
  template <class T>
  T run(net::awaitable<T> task) {
    return backend_.run(std::move(task));
  }
  // Runs io() until `done` holds.
  template <class Done>
  void run_until(Done done) {
    backend_.run_until(done);
  }

 protected:
  Backend backend_;
};

TYPED_TEST_SUITE_P(AsyncGuardCases);

TYPED_TEST_P(AsyncGuardCases, FreshKeyRunsOnceAndRepeatsReplay) {
  if (!this->ready()) return;
  AsyncGuard guard{this->store(), Options{.scope = "fresh"}};
  int runs = 0;
  auto handler = [&]() -> net::awaitable<std::string> {
    ++runs;
    co_await pause(1ms);
    co_return "receipt-1";
  };
  auto first = this->run(guard.async_execute("k", "pay 10", handler));
  ASSERT_TRUE(first) << first.message();
  EXPECT_TRUE(first.recorded());
  EXPECT_FALSE(first.replayed());
  EXPECT_EQ(first.value(), "receipt-1");
  auto again = this->run(guard.async_execute("k", "pay 10", handler));
  ASSERT_TRUE(again) << again.message();
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.value(), "receipt-1");
  EXPECT_EQ(runs, 1);
}

TYPED_TEST_P(AsyncGuardCases, PlainAndVoidHandlersAreStoredResults) {
  if (!this->ready()) return;
  AsyncGuard guard{this->store(), Options{.scope = "plain"}};
  int runs = 0;
  auto number = [&] { return ++runs * 0; };  // 0 is a stored result, not "no record"
  ASSERT_TRUE(this->run(guard.async_execute("n", number)));
  auto zero = this->run(guard.async_execute("n", number));
  ASSERT_TRUE(zero.replayed());
  EXPECT_EQ(zero.value(), 0);
  auto nothing = [&]() -> net::awaitable<void> {
    ++runs;
    co_return;
  };
  ASSERT_TRUE(this->run(guard.async_execute("v", nothing)).recorded());
  EXPECT_TRUE(this->run(guard.async_execute("v", nothing)).replayed());
  EXPECT_EQ(runs, 2);
}

TYPED_TEST_P(AsyncGuardCases, AnotherPayloadIsAMismatchAndABadKeyIsRefused) {
  if (!this->ready()) return;
  AsyncGuard guard{this->store(), Options{.scope = "refusals", .max_key_size = 8}};
  int runs = 0;
  auto handler = [&] { return ++runs; };
  ASSERT_TRUE(this->run(guard.async_execute("k", "a", handler)));
  EXPECT_EQ(this->run(guard.async_execute("k", "b", handler)).error(), errc::payload_mismatch);
  EXPECT_EQ(this->run(guard.async_execute("", "a", handler)).error(), errc::key_invalid);
  EXPECT_EQ(this->run(guard.async_execute("longer than 8", "a", handler)).error(),
            errc::key_invalid);
  EXPECT_EQ(runs, 1);
}

TYPED_TEST_P(AsyncGuardCases, AThrowingHandlerLeavesTheKeyToARetry) {
  if (!this->ready()) return;
  AsyncGuard guard{this->store(), Options{.scope = "throws"}};
  int runs = 0;
  auto failing = [&]() -> net::awaitable<int> {
    ++runs;
    co_await pause(1ms);
    throw std::runtime_error("card declined");
  };
  EXPECT_THROW((void)this->run(guard.async_execute("k", failing)), std::runtime_error);
  auto retried = this->run(guard.async_execute("k", [&] { return ++runs; }));
  ASSERT_TRUE(retried) << retried.message();
  EXPECT_TRUE(retried.recorded());
  EXPECT_EQ(runs, 2);
}

TYPED_TEST_P(AsyncGuardCases, ARememberedFailureReplays) {
  if (!this->ready()) return;
  AsyncGuard guard{this->store(), Options{.scope = "remember", .remember_failures = true}};
  int runs = 0;
  auto failing = [&]() -> net::awaitable<int> {
    ++runs;
    co_await pause(1ms);
    throw std::runtime_error("card declined");
  };
  EXPECT_THROW((void)this->run(guard.async_execute("k", failing)), std::runtime_error);
  auto replay = this->run(guard.async_execute("k", failing));
  EXPECT_EQ(replay.error(), errc::handler_failed);
  EXPECT_TRUE(replay.replayed());
  EXPECT_NE(replay.message().find("card declined"), std::string::npos) << replay.message();
  EXPECT_EQ(runs, 1);
}

TYPED_TEST_P(AsyncGuardCases, AnOversizedResultIsReturnedAndRemembered) {
  if (!this->ready()) return;
  AsyncGuard guard{this->store(), Options{.scope = "large", .max_result_size = 4}};
  auto big = [] { return std::string(10, 'x'); };
  auto first = this->run(guard.async_execute("k", big));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first.value(), std::string(10, 'x'));
  EXPECT_EQ(first.commit_error(), errc::result_too_large);
  EXPECT_EQ(this->run(guard.async_execute("k", big)).error(), errc::result_too_large);
}

TYPED_TEST_P(AsyncGuardCases, ALiveHolderIsRefusedWithItsLeaseLeft) {
  if (!this->ready()) return;
  AsyncGuard guard{this->store(), Options{.scope = "busy", .lease = 10s}};
  auto [held, refused] = this->refused_while_held(guard);
  EXPECT_EQ(refused->error(), errc::in_progress);
  EXPECT_GT(refused->retry_after(), 5s);
  EXPECT_LE(refused->retry_after(), 10s);
  EXPECT_TRUE(held->recorded());
}

// The retry hint is when the holder is likely done (the 90th percentile of the guard's recent
// handler durations, here 7 ms on the guard's clock), not the 10 s left on its lease.
TYPED_TEST_P(AsyncGuardCases, ARefusalsRetryHintIsTheGuardsRecentHandlerDurations) {
  if (!this->ready()) return;
  auto clock = std::make_shared<ManualClock>();
  AsyncGuard guard{this->store(), Options{.scope = "hint", .lease = 10s, .clock = clock}};
  for (int i = 0; i < 10; ++i) {
    auto fast = this->run(guard.async_execute("fast-" + std::to_string(i), [&] {
      clock->advance(7ms);
      return i;
    }));
    ASSERT_TRUE(fast.has_value()) << fast.message();
  }
  auto [held, refused] = this->refused_while_held(guard);
  EXPECT_EQ(refused->error(), errc::in_progress);
  EXPECT_EQ(refused->retry_after(), 7ms);
  const auto* lease = std::get_if<HolderLease>(&refused->refusal());
  ASSERT_NE(lease, nullptr);
  EXPECT_GT(lease->remaining, 5s);
  EXPECT_TRUE(held->recorded());
}

// Both coroutines run on ONE thread: a wait that slept its thread would never let the holder
// finish, and the waiter would time out.
TYPED_TEST_P(AsyncGuardCases, AWaiterPausesOnATimerAndReplaysTheHoldersResult) {
  if (!this->ready()) return;
  AsyncGuard guard{this->store(), Options{.scope = "wait", .in_progress = Wait{.timeout = 10s}}};
  int runs = 0;
  std::vector<Outcome<int>> outs;
  for (int i = 0; i < 3; ++i) {
    net::co_spawn(
        this->io(),
        [&]() -> net::awaitable<void> {
          outs.push_back(co_await guard.async_execute("k", [&]() -> net::awaitable<int> {
            ++runs;
            co_await pause(50ms);
            co_return 7;
          }));
        },
        net::detached);
  }
  this->run_until([&] { return outs.size() == 3; });
  EXPECT_EQ(runs, 1);
  int replays = 0;
  for (auto& out : outs) {
    ASSERT_TRUE(out) << out.message();
    EXPECT_EQ(out.value(), 7);
    replays += out.replayed() ? 1 : 0;
  }
  EXPECT_EQ(replays, 2);
}

TYPED_TEST_P(AsyncGuardCases, AHandlerRenewsItsLeaseThroughTheContext) {
  if (!this->ready()) return;
  AsyncGuard guard{this->store(), Options{.scope = "extend"}};
  Fence seen = 0;
  auto out = this->run(guard.async_execute("k", [&](AsyncContext& ctx) -> net::awaitable<int> {
    seen = ctx.fence();
    Status renewed = co_await ctx.extend_lease(60s);
    co_return renewed.ok() ? 1 : 0;
  }));
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ(out.value(), 1);
  EXPECT_GT(seen, 0u);
}

// Cancellation at each suspension point: the wait's timer, the handler, the claim in flight,
// the commit in flight, the commit retry's pause.
TYPED_TEST_P(AsyncGuardCases, ACancelledWaitGivesUpHoldingNothing) {
  if (!this->ready()) return;
  AsyncGuard guard{
      this->store(),
      Options{.scope = "cancel-wait", .lease = 10s, .in_progress = Wait{.timeout = 10s}}};
  bool release = false;
  Spawned<Outcome<int>> holder;
  Spawned<Outcome<int>> waiter;
  net::cancellation_signal holder_signal;
  net::cancellation_signal waiter_signal;
  spawn_cancellable(this->io(),
                    guard.async_execute("k",
                                        [&]() -> net::awaitable<int> {
                                          while (!release) co_await pause(1ms);
                                          co_return 1;
                                        }),
                    holder_signal, holder);
  int waiter_runs = 0;
  spawn_cancellable(this->io(), guard.async_execute("k", [&] { return ++waiter_runs; }),
                    waiter_signal, waiter);
  bool cancelled = false;
  net::steady_timer at(this->io(), 50ms);
  at.async_wait([&](auto) {
    waiter_signal.emit(net::cancellation_type::terminal);
    cancelled = true;
  });
  const auto start = std::chrono::steady_clock::now();
  this->run_until([&] { return waiter.done; });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "the wait did not end at its cancel";
  EXPECT_TRUE(cancelled);
  EXPECT_TRUE(waiter.aborted());
  EXPECT_EQ(waiter_runs, 0);
  release = true;
  this->run_until([&] { return holder.done; });
  ASSERT_TRUE(holder.value && holder.value->recorded());
}

TYPED_TEST_P(AsyncGuardCases, ACancelledHandlerReleasesItsKey) {
  if (!this->ready()) return;
  AsyncGuard guard{this->store(), Options{.scope = "cancel-handler", .lease = 10s}};
  Spawned<Outcome<int>> call;
  net::cancellation_signal signal;
  int runs = 0;
  // The cancellation is timed from the handler's start: timed from the call's, it could land in
  // a first claim that opens the connection, and the handler would never run.
  net::steady_timer at(this->io());
  spawn_cancellable(this->io(),
                    guard.async_execute("k",
                                        [&]() -> net::awaitable<int> {
                                          ++runs;
                                          cancel_after(at, signal, 30ms);
                                          co_await pause(10s);  // cancelled long before
                                          co_return 1;
                                        }),
                    signal, call);
  this->run_until([&] { return call.done; });
  EXPECT_TRUE(call.aborted());
  // Released, not left held for its 10 s lease: the next call runs at once.
  auto next = this->run(guard.async_execute("k", [&] { return ++runs; }));
  ASSERT_TRUE(next) << next.message();
  EXPECT_TRUE(next.recorded());
  EXPECT_EQ(runs, 2);
}

TYPED_TEST_P(AsyncGuardCases, ACancelledHandlerIsRememberedUnderRememberFailures) {
  if (!this->ready()) return;
  AsyncGuard guard{this->store(),
                   Options{.scope = "cancel-remember", .lease = 10s, .remember_failures = true}};
  Spawned<Outcome<int>> call;
  net::cancellation_signal signal;
  net::steady_timer at(this->io());
  spawn_cancellable(this->io(),
                    guard.async_execute("k",
                                        [&]() -> net::awaitable<int> {
                                          cancel_after(at, signal, 30ms);
                                          co_await pause(10s);
                                          co_return 1;
                                        }),
                    signal, call);
  this->run_until([&] { return call.done; });
  EXPECT_TRUE(call.aborted());
  auto replay = this->run(guard.async_execute("k", [] { return 2; }));
  EXPECT_EQ(replay.error(), errc::handler_failed);
  EXPECT_TRUE(replay.replayed());
}

TYPED_TEST_P(AsyncGuardCases, ACancelDuringTheClaimReleasesWhatTheClaimTook) {
  if (!this->ready()) return;
  SlowStore slow(this->store());
  slow.claim_delay = 100ms;
  AsyncGuard guard{slow, Options{.scope = "cancel-claim", .lease = 10s}};
  Spawned<Outcome<int>> call;
  net::cancellation_signal signal;
  int runs = 0;
  spawn_cancellable(this->io(), guard.async_execute("k", [&] { return ++runs; }), signal, call);
  net::steady_timer at(this->io(), 20ms);
  at.async_wait([&](auto) { signal.emit(net::cancellation_type::terminal); });
  this->run_until([&] { return call.done; });
  EXPECT_TRUE(call.aborted());
  EXPECT_EQ(runs, 0);
  EXPECT_EQ(slow.aborts.load(), 1) << "the claim completed and its key was released";
  slow.claim_delay = 0ms;
  auto next = this->run(guard.async_execute("k", [&] { return ++runs; }));
  ASSERT_TRUE(next) << next.message();
  EXPECT_TRUE(next.recorded());
}

// A claim in flight that finds a stored result: the caller gave up, so no answer but the abort.
TYPED_TEST_P(AsyncGuardCases, ACancelDuringAClaimThatFindsAReplayEndsTheCall) {
  if (!this->ready()) return;
  SlowStore slow(this->store());
  AsyncGuard guard{slow, Options{.scope = "cancel-replay"}};
  ASSERT_TRUE(this->run(guard.async_execute("k", [] { return 1; })).recorded());
  slow.claim_delay = 100ms;
  Spawned<Outcome<int>> call;
  net::cancellation_signal signal;
  spawn_cancellable(this->io(), guard.async_execute("k", [] { return 2; }), signal, call);
  net::steady_timer at(this->io(), 20ms);
  at.async_wait([&](auto) { signal.emit(net::cancellation_type::terminal); });
  this->run_until([&] { return call.done; });
  EXPECT_TRUE(call.aborted());
  EXPECT_EQ(slow.aborts.load(), 0) << "nothing was held";
}

// Calls key "k" through `guard` with a handler that returns 5 and has the call cancelled
// `after` it ran; what the call ended with.
template <class Fixture, class Guard>
Spawned<Outcome<int>> cancelled_after_the_handler(Fixture& fixture, Guard& guard,
                                                  std::chrono::milliseconds after) {
  Spawned<Outcome<int>> call;
  net::cancellation_signal signal;
  net::steady_timer at(fixture.io());
  bool ran = false;
  bool fired = false;
  auto handler = [&] {
    ran = true;
    at.expires_after(after);
    at.async_wait([&](auto) {
      signal.emit(net::cancellation_type::terminal);
      fired = true;
    });
    return 5;
  };
  spawn_cancellable(fixture.io(), guard.async_execute("k", handler), signal, call);
  fixture.run_until([&] { return call.done; });
  if (ran) {
    at.cancel();  // its handler names the signal: it runs before both go
    fixture.run_until([&] { return fired; });
  }
  return call;
}

TYPED_TEST_P(AsyncGuardCases, ACancelDuringTheCommitStillRecordsTheResult) {
  if (!this->ready()) return;
  SlowStore slow(this->store());
  slow.commit_delay = 100ms;
  AsyncGuard guard{slow, Options{.scope = "cancel-commit"}};
  // The cancellation comes 20 ms after the handler ran, inside the commit's 100 ms (a fixed
  // time from the start could fall in a first claim that opens the connection).
  Spawned<Outcome<int>> call = cancelled_after_the_handler(*this, guard, 20ms);
  ASSERT_TRUE(call.value.has_value()) << "the handler's result exists: it is returned";
  EXPECT_TRUE(call.value->recorded());
  slow.commit_delay = 0ms;
  auto replay = this->run(guard.async_execute("k", [] { return 6; }));
  ASSERT_TRUE(replay.replayed());
  EXPECT_EQ(replay.value(), 5);
}

TYPED_TEST_P(AsyncGuardCases, ACancelDuringACommitRetryPauseStillRetries) {
  if (!this->ready()) return;
  SlowStore slow(this->store());
  slow.fail_commits = 1;
  AsyncGuard guard{
      slow, Options{.scope = "cancel-retry",
                    .commit_retry = {.attempts = 3, .backoff = 200ms, .max_backoff = 200ms}}};
  // 50 ms after the handler ran: inside the 200 ms pause after the first commit failed.
  Spawned<Outcome<int>> call = cancelled_after_the_handler(*this, guard, 50ms);
  ASSERT_TRUE(call.value.has_value());
  EXPECT_TRUE(call.value->recorded()) << call.value->commit_failure().message;
  EXPECT_EQ(slow.commits.load(), 2);
}

// Callers of one guard meeting on every key: caller c calls each of the keys once (from key c
// on), its handler counted per key; what each caller got is kept.
struct KeyTally {
  KeyTally(int key_count, int caller_count)
      : runs(key_count), keys(key_count), callers(caller_count) {}

  template <class Guard>
  net::awaitable<void> caller(Guard& guard, int c) {
    for (int i = 0; i < keys; ++i) {
      const int k = (i + c) % keys;
      auto out = co_await guard.async_execute("key-" + std::to_string(k),
                                              [this, k, c]() -> net::awaitable<std::string> {
                                                runs[k].fetch_add(1);
                                                co_await pause(std::chrono::milliseconds{1});
                                                co_return "from " + std::to_string(c);
                                              });
      if (!out) {
        failures.fetch_add(1);
        continue;
      }
      std::lock_guard lock(seen_mutex);
      seen[k].push_back(out.value());
    }
    finished.fetch_add(1);
  }
  bool done() const { return finished.load() == callers; }
  // No call failed, each key's handler ran once, and every caller got that run's value.
  void expect_each_key_ran_once() {
    EXPECT_EQ(failures.load(), 0);
    for (int k = 0; k < keys; ++k) {
      EXPECT_EQ(runs[k].load(), 1) << "key " << k;
      ASSERT_EQ(seen[k].size(), static_cast<std::size_t>(callers));
      for (const auto& v : seen[k]) EXPECT_EQ(v, seen[k].front());
    }
  }

  std::vector<std::atomic<int>> runs;
  std::mutex seen_mutex;
  std::map<int, std::vector<std::string>> seen;
  std::atomic<int> failures{0};
  std::atomic<int> finished{0};
  int keys;
  int callers;
};

// Many coroutines on four io_context threads share the guard and meet on every key.
TYPED_TEST_P(AsyncGuardCases, ManyCoroutinesOnSeveralThreadsRunEachKeyOnce) {
  if (!this->ready()) return;
  constexpr int kKeys = 16;
  constexpr int kCallers = 64;
  AsyncGuard guard{this->store(), Options{.scope = "threads", .in_progress = Wait{.timeout = 20s}}};
  KeyTally tally(kKeys, kCallers);
  for (int c = 0; c < kCallers; ++c)
    net::co_spawn(this->io(), tally.caller(guard, c), net::detached);
  std::vector<std::thread> threads;
  for (int t = 0; t < (TestFixture::kOneThread ? 0 : 3); ++t)
    threads.emplace_back([&] { this->run_until([&] { return tally.done(); }); });
  this->run_until([&] { return tally.done(); });
  for (auto& th : threads) th.join();
  tally.expect_each_key_ran_once();
}

// A repeat's async_begin of "k" through `guard` finds its remembered failure, whose message
// holds `why`.
template <class Fixture, class Guard>
void expect_remembered_failure(Fixture& fixture, Guard& guard, std::string_view why) {
  auto repeat = fixture.run(guard.template async_begin<int>("k"));
  ASSERT_FALSE(repeat.acquired()) << "the failure was recorded";
  EXPECT_EQ(repeat.outcome().error(), errc::handler_failed);
  EXPECT_NE(repeat.outcome().message().find(why), std::string::npos) << repeat.outcome().message();
}

// ---- The two-phase form: async_begin, then async_commit or async_fail ------------------------

TYPED_TEST_P(AsyncGuardCases, TwoPhaseCommitRecordsAndRepeatsReplay) {
  if (!this->ready()) return;
  AsyncGuard guard{this->store(), Options{.scope = "two-phase"}};
  auto attempt = this->run(guard.template async_begin<int>("k", "pay 10"));
  ASSERT_TRUE(attempt.acquired());
  EXPECT_GT(attempt.fence(), 0U);
  EXPECT_THROW((void)attempt.outcome(), std::logic_error);

  auto second = this->run(guard.template async_begin<int>("k", "pay 10"));
  ASSERT_FALSE(second.acquired()) << "the key is held";
  EXPECT_EQ(second.outcome().error(), errc::in_progress);
  EXPECT_GT(second.retry_after(), 0ms);

  auto out = this->run(attempt.async_commit(7));
  ASSERT_TRUE(out) << out.message();
  EXPECT_TRUE(out.recorded());
  EXPECT_EQ(out.value(), 7);
  EXPECT_FALSE(attempt.acquired());
  EXPECT_THROW((void)attempt.async_commit(8), std::logic_error);

  auto again = this->run(guard.template async_begin<int>("k", "pay 10"));
  ASSERT_FALSE(again.acquired());
  ASSERT_TRUE(again.outcome()) << again.outcome().message();
  EXPECT_TRUE(again.outcome().replayed());
  EXPECT_EQ(again.outcome().value(), 7);
  auto other = this->run(guard.template async_begin<int>("k", "pay 11"));
  EXPECT_EQ(other.outcome().error(), errc::payload_mismatch);
  auto bad = this->run(guard.template async_begin<void>(""));
  EXPECT_EQ(bad.outcome().error(), errc::key_invalid);
}

TYPED_TEST_P(AsyncGuardCases, TwoPhaseFailReleasesTheKeyOrRemembersTheFailure) {
  if (!this->ready()) return;
  AsyncGuard guard{this->store(), Options{.scope = "two-phase-fail"}};
  auto attempt = this->run(guard.template async_begin<void>("k"));
  ASSERT_TRUE(attempt.acquired());
  this->run(attempt.async_fail("card declined"));
  EXPECT_FALSE(attempt.acquired());
  auto retry = this->run(guard.template async_begin<void>("k"));
  ASSERT_TRUE(retry.acquired()) << "a failure released the key";
  EXPECT_TRUE(this->run(retry.async_commit()).recorded());

  AsyncGuard remembering{this->store(),
                         Options{.scope = "two-phase-remember", .remember_failures = true}};
  auto failing = this->run(remembering.template async_begin<int>("k"));
  ASSERT_TRUE(failing.acquired());
  this->run(failing.async_fail("card declined"));
  expect_remembered_failure(*this, remembering, "card declined");
}

TYPED_TEST_P(AsyncGuardCases, ADroppedAttemptIsSettledInTheBackground) {
  if (!this->ready()) return;
  SlowStore slow(this->store());
  AsyncGuard guard{slow, Options{.scope = "two-phase-dropped"}};
  {
    auto dropped = this->run(guard.template async_begin<int>("k"));
    ASSERT_TRUE(dropped.acquired());
  }
  auto next = this->run(guard.template async_begin<int>("k"));
  EXPECT_TRUE(next.acquired()) << "the dropped attempt released the key";
  EXPECT_EQ(slow.aborts.load(), 1);
  EXPECT_TRUE(this->run(next.async_commit(1)).recorded());

  AsyncGuard remembering{slow,
                         Options{.scope = "two-phase-dropped-remember", .remember_failures = true}};
  { auto dropped = this->run(remembering.template async_begin<int>("k")); }
  expect_remembered_failure(*this, remembering, "dropped");
}

TYPED_TEST_P(AsyncGuardCases, ACancelledBeginReleasesWhatItsClaimTook) {
  if (!this->ready()) return;
  SlowStore slow(this->store());
  AsyncGuard guard{slow, Options{.scope = "two-phase-cancel-claim"}};
  slow.claim_delay = 100ms;
  Spawned<AsyncAttempt<int, SlowStore<typename TypeParam::Store>>> call;
  net::cancellation_signal signal;
  spawn_cancellable(this->io(), guard.template async_begin<int>("k"), signal, call);
  net::steady_timer at(this->io(), 20ms);
  at.async_wait([&](auto) { signal.emit(net::cancellation_type::terminal); });
  this->run_until([&] { return call.done; });
  EXPECT_TRUE(call.aborted());
  EXPECT_EQ(slow.aborts.load(), 1) << "the claim completed and its key was released";
  slow.claim_delay = 0ms;
  auto next = this->run(guard.template async_begin<int>("k"));
  EXPECT_TRUE(next.acquired());
  EXPECT_TRUE(this->run(next.async_commit(2)).recorded());
}

TYPED_TEST_P(AsyncGuardCases, ATwoPhaseCommitFinishesWhenItsCallerIsCancelled) {
  if (!this->ready()) return;
  SlowStore slow(this->store());
  AsyncGuard guard{slow, Options{.scope = "two-phase-cancel-commit"}};
  auto attempt = this->run(guard.template async_begin<int>("k"));
  ASSERT_TRUE(attempt.acquired());
  slow.commit_delay = 100ms;
  Spawned<Outcome<int>> call;
  net::cancellation_signal signal;
  spawn_cancellable(this->io(), attempt.async_commit(5), signal, call);
  net::steady_timer at(this->io(), 20ms);
  at.async_wait([&](auto) { signal.emit(net::cancellation_type::terminal); });
  this->run_until([&] { return call.done; });
  ASSERT_TRUE(call.value.has_value()) << "the work happened: its result is committed";
  EXPECT_TRUE(call.value->recorded());
  slow.commit_delay = 0ms;
  auto replay = this->run(guard.template async_begin<int>("k"));
  ASSERT_FALSE(replay.acquired());
  EXPECT_EQ(replay.outcome().value(), 5);
}

// Coroutines on three more io_contexts, each run by two threads, share the guard (and the store,
// whose own I/O stays on io()): every result is handed back across contexts, and each key still
// runs once.
TYPED_TEST_P(AsyncGuardCases, CoroutinesOnSeveralIoContextsRunEachKeyOnce) {
  if (!this->ready()) return;
  constexpr int kContexts = 3;
  constexpr int kThreadsEach = 2;
  constexpr int kCallersEach = 16;
  constexpr int kKeys = 12;
  constexpr int kCallers = kContexts * kCallersEach;
  AsyncGuard guard{this->store(),
                   Options{.scope = "contexts", .in_progress = Wait{.timeout = 20s}}};
  KeyTally tally(kKeys, kCallers);
  std::vector<std::unique_ptr<net::io_context>> contexts;
  for (int x = 0; x < kContexts; ++x) {
    contexts.push_back(std::make_unique<net::io_context>());
    for (int c = 0; c < kCallersEach; ++c) {
      net::co_spawn(TestFixture::kOneThread ? this->io() : *contexts.back(),
                    tally.caller(guard, x * kCallersEach + c), net::detached);
    }
  }
  std::vector<std::thread> threads;
  for (auto& io : contexts) {
    for (int t = 0; t < kThreadsEach; ++t) threads.emplace_back([&io] { io->run(); });
  }
  // The store's own context, on this thread and (unless it takes one thread only) one more.
  if (!TestFixture::kOneThread) {
    threads.emplace_back([&] { this->run_until([&] { return tally.done(); }); });
  }
  this->run_until([&] { return tally.done(); });
  for (auto& th : threads) th.join();
  tally.expect_each_key_ran_once();
}

REGISTER_TYPED_TEST_SUITE_P(
    AsyncGuardCases, FreshKeyRunsOnceAndRepeatsReplay, PlainAndVoidHandlersAreStoredResults,
    AnotherPayloadIsAMismatchAndABadKeyIsRefused, AThrowingHandlerLeavesTheKeyToARetry,
    ARememberedFailureReplays, AnOversizedResultIsReturnedAndRemembered,
    ALiveHolderIsRefusedWithItsLeaseLeft, ARefusalsRetryHintIsTheGuardsRecentHandlerDurations,
    AWaiterPausesOnATimerAndReplaysTheHoldersResult, AHandlerRenewsItsLeaseThroughTheContext,
    ACancelledWaitGivesUpHoldingNothing, ACancelledHandlerReleasesItsKey,
    ACancelledHandlerIsRememberedUnderRememberFailures,
    ACancelDuringTheClaimReleasesWhatTheClaimTook, ACancelDuringAClaimThatFindsAReplayEndsTheCall,
    ACancelDuringTheCommitStillRecordsTheResult, ACancelDuringACommitRetryPauseStillRetries,
    ManyCoroutinesOnSeveralThreadsRunEachKeyOnce, CoroutinesOnSeveralIoContextsRunEachKeyOnce,
    TwoPhaseCommitRecordsAndRepeatsReplay, TwoPhaseFailReleasesTheKeyOrRemembersTheFailure,
    ADroppedAttemptIsSettledInTheBackground, ACancelledBeginReleasesWhatItsClaimTook,
    ATwoPhaseCommitFinishesWhenItsCallerIsCancelled);

}  // namespace idem::testing
