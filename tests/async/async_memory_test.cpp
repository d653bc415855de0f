// AsyncGuard on MemoryStore through ImmediateStore: every call completes at once. And what
// observers see of async calls.

#include <boost/asio/detached.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "async/async_guard_cases.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/memory/store.hpp"
#include "idem/observer.hpp"

// Not in an anonymous namespace: the coroutine frames of the header's templates hold these types.
namespace idem::testing {

struct MemoryBackend : IoRunner {
  using Store = ImmediateStore<MemoryStore>;
  void set_up() {}
  bool ready() const { return true; }
  Store& store() { return async_; }

  MemoryStore memory_;
  Store async_{memory_};
};

INSTANTIATE_TYPED_TEST_SUITE_P(Memory, AsyncGuardCases, MemoryBackend);

TEST(ImmediateStore, IsAnAsyncStore) {
  static_assert(AsyncStore<ImmediateStore<MemoryStore>>);
  static_assert(!AsyncStore<MemoryStore>);
}

}  // namespace idem::testing

namespace idem::testing {

// Observers see async calls as blocking ones: the store's name on every event, the call's parts
// timed on its last event (executed comes after the commit), a span per call, none for a key
// refused before any store call.
TEST(AsyncObserver, SeesTheStoreTimingsAndSpansOfEachCall) {
  std::vector<EventInfo> events;
  int spans_started = 0;
  int spans_ended = 0;
  Observer::Settings settings;
  settings.time_one_in = 1;
  settings.span_start = [&](const EventInfo&) -> SpanHandle {
    ++spans_started;
    return nullptr;
  };
  settings.span_end = [&](SpanHandle, const EventInfo&) { ++spans_ended; };
  auto observer = std::make_shared<Observer>(
      [&](const EventInfo& e) {
        EventInfo copy = e;
        copy.scope = copy.key = {};
        events.push_back(copy);
      },
      std::move(settings));
  MemoryStore memory;
  ImmediateStore<MemoryStore> store{memory};
  AsyncGuard guard{store, Options{.scope = "observed", .observer = observer}};
  IoRunner runner;
  auto fresh = runner.run(guard.async_execute("k", [&]() -> net::awaitable<int> {
    EXPECT_TRUE(events.empty()) << "an event came before the commit";
    co_await pause(2ms);
    co_return 7;
  }));
  ASSERT_TRUE(fresh.recorded());
  ASSERT_TRUE(runner.run(guard.async_execute("k", [] { return 8; })).replayed());
  ASSERT_EQ(runner.run(guard.async_execute("", [] { return 9; })).error(), errc::key_invalid);

  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].event, Event::executed);
  EXPECT_FALSE(events[0].error);
  EXPECT_TRUE(events[0].durations.measured);
  EXPECT_GT(events[0].durations.handler.count(), 0);
  EXPECT_EQ(events[1].event, Event::replayed);
  EXPECT_TRUE(events[1].durations.measured);
  EXPECT_EQ(events[2].event, Event::rejected);
  for (const EventInfo& e : events) EXPECT_EQ(e.store, "memory");
  EXPECT_EQ(spans_started, 2);
  EXPECT_EQ(spans_ended, 2);
}

TEST(AsyncObserver, KeepRequestIsRefusedAtConstruction) {
  MemoryStore memory;
  ImmediateStore<MemoryStore> store{memory};
  EXPECT_THROW((AsyncGuard{store, Options{.scope = "kept", .keep_request = true}}),
               std::invalid_argument);
}

}  // namespace idem::testing

namespace idem::testing {

// The guard's clock is the Wait policy's only clock: on a ManualClock (a store and guard in a
// test) the wait's deadline and its pauses both read it, so waiting on a live holder ends at the
// wait's timeout, in virtual time, at once.
TEST(AsyncWait, EndsOnAManualClockAtItsTimeout) {
  auto clock = std::make_shared<ManualClock>();
  MemoryStore memory{MemoryStoreOptions{.clock = clock}};
  ImmediateStore<MemoryStore> store{memory};
  AsyncGuard guard{store, Options{.scope = "wait",
                                  .lease = std::chrono::hours{1},
                                  .in_progress = Wait{.timeout = std::chrono::seconds{5}},
                                  .clock = clock}};
  const detail::EffectiveKey k("wait", {}, "held");
  ASSERT_EQ(memory
                .claim(ClaimRequest{.key = k.view(),
                                    .fingerprint = xxh3_128(""),
                                    .lease = std::chrono::hours{1},
                                    .retention = std::chrono::hours{1}})
                ->status,
            ClaimStatus::acquired);
  IoRunner runner;
  const auto started = clock->now();
  std::optional<Outcome<int>> out;
  auto call = [&]() -> net::awaitable<void> {
    out.emplace(co_await guard.async_execute(Key{"held"}, [] { return 1; }));
  };
  net::co_spawn(runner.io(), call(), net::detached);
  // Bounded in real time: a wait that never ends fails here instead of hanging the suite.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  runner.run_until([&] { return out.has_value() || std::chrono::steady_clock::now() > give_up; });
  ASSERT_TRUE(out.has_value()) << "the wait did not end";
  EXPECT_EQ(out->error(), errc::in_progress);
  EXPECT_GE(clock->now() - started, std::chrono::seconds{5});
  EXPECT_LT(clock->now() - started, std::chrono::seconds{6});
}

}  // namespace idem::testing
