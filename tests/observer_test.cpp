// Observer: each guard path bumps its counter and reports its event with scope, key and fence.

#include "idem/observer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "idem/idem.hpp"
#include "support/flaky_store.hpp"

namespace idem {
namespace {

// Both known sequences below replay, mismatch, reject, meet one in progress, abort and lose a
// lease once each.
void expect_one_of_each_other_outcome(const Counters& c) {
  const std::map<std::string, std::uint64_t> once{
      {"replayed", c.replayed},       {"mismatched", c.mismatched}, {"rejected", c.rejected},
      {"in_progress", c.in_progress}, {"aborted", c.aborted},       {"lease_lost", c.lease_lost}};
  for (const auto& [counter, value] : once) EXPECT_EQ(value, 1u) << counter;
}

TEST(ObserverTest, CountsEveryPathAndReportsEvents) {
  std::vector<EventInfo> events;
  std::vector<std::string> keys;
  auto observer = std::make_shared<Observer>([&](const EventInfo& e) {
    events.push_back(e);
    keys.emplace_back(e.key);
  });
  auto clock = std::make_shared<ManualClock>();
  MemoryStore store{MemoryStoreOptions{.clock = clock}};
  IdempotencyGuard guard{
      store,
      Options{
          .scope = "obs", .lease = std::chrono::seconds{1}, .clock = clock, .observer = observer}};

  (void)guard.execute("a", "p", [] { return 1; });  // executed
  (void)guard.execute("a", "p", [] { return 1; });  // replayed
  (void)guard.execute("a", "q", [] { return 1; });  // mismatched
  (void)guard.execute("", [] { return 1; });        // rejected
  (void)guard.execute("b", [&] {                    // in_progress inside
    return guard.execute("b", [] { return 2; }).error().value();
  });
  EXPECT_THROW((void)guard.execute("c", []() -> int { throw std::runtime_error("x"); }),
               std::runtime_error);  // aborted
  (void)guard.execute("d", [&] {     // lease_lost, took_over
    clock->advance(std::chrono::seconds{2});
    (void)guard.execute("d", [] { return 3; });
    return 4;
  });

  const Counters c = observer->counters();
  EXPECT_EQ(c.executed, 4u);  // a, b, d's taker, d's stale holder
  expect_one_of_each_other_outcome(c);
  EXPECT_EQ(c.store_errors, 0u);

  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().event, Event::executed);
  EXPECT_EQ(events.front().scope, "obs");
  EXPECT_EQ(keys.front(), "a");
  EXPECT_EQ(events.front().fence, 1u);
  bool took_over = false;
  for (const EventInfo& e : events) took_over |= e.event == Event::took_over;
  EXPECT_TRUE(took_over);
  EXPECT_EQ(to_string(Event::result_unrecorded), "result_unrecorded");
}

TEST(ObserverTest, EveryEventHasItsOwnName) {
  const std::pair<Event, std::string_view> names[] = {
      {Event::executed, "executed"},
      {Event::replayed, "replayed"},
      {Event::in_progress, "in_progress"},
      {Event::mismatched, "mismatched"},
      {Event::rejected, "rejected"},
      {Event::lease_lost, "lease_lost"},
      {Event::aborted, "aborted"},
      {Event::store_error, "store_error"},
      {Event::took_over, "took_over"},
      {Event::commit_retried, "commit_retried"},
      {Event::result_unrecorded, "result_unrecorded"}};
  for (const auto& [event, name] : names) EXPECT_EQ(to_string(event), name);
  EXPECT_EQ(to_string(static_cast<Event>(200)), "unknown");  // a value no enumerator has
}

TEST(ObserverTest, OneObserverServesManyThreads) {
  auto observer = std::make_shared<Observer>();
  MemoryStore store;
  IdempotencyGuard guard{store, Options{.scope = "s", .observer = observer}};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i)
        (void)guard.execute(std::to_string(t * 1000 + i), [] { return 0; });
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(observer->counters().executed, 4000u);
}

// Per-thread counting: threads that exit hand their blocks back with their counts, later threads
// adopt them, more observers than a thread caches at once each keep their own counts, and a new
// observer never sees a destroyed one's counts.
TEST(ObserverTest, CountsSurviveExitedThreadsAndStayPerObserver) {
  constexpr int kObservers = 6;  // more than a thread's cache of blocks
  std::vector<std::unique_ptr<Observer>> observers;
  for (int o = 0; o < kObservers; ++o) observers.push_back(std::make_unique<Observer>());
  auto replay = [](Observer& ob) {
    EventInfo info{};
    info.event = Event::replayed;
    ob.notify(info);
  };
  for (int round = 0; round < 3; ++round) {  // each round's threads exit before the next
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 500; ++i) {
          for (int o = 0; o < kObservers; ++o) {
            if (o <= t + 2) replay(*observers[o]);
          }
        }
      });
    }
    // Read while the threads count: never more than the final figure.
    EXPECT_LE(observers[0]->counters().replayed, 2000u * (round + 1));
    for (auto& th : threads) th.join();
  }
  for (int o = 0; o < kObservers; ++o) {
    int threads_counting = 0;
    for (int t = 0; t < 4; ++t) threads_counting += o <= t + 2 ? 1 : 0;
    EXPECT_EQ(observers[o]->counters().replayed, 3u * 500u * threads_counting) << "observer " << o;
    EXPECT_EQ(observers[o]->counters().executed, 0u);
  }
  observers.clear();
  Observer fresh;
  replay(fresh);
  EXPECT_EQ(fresh.counters().replayed, 1u);
}

}  // namespace
}  // namespace idem

namespace idem {
namespace {

// Every event of a known sequence of calls, counted; timed calls carry their durations; every
// span opened is closed once.
TEST(ObserverTest, KnownSequenceGivesEveryCounterDurationsAndSpans) {
  std::vector<EventInfo> last_events;
  int spans_started = 0;
  int spans_ended = 0;
  int timed_events = 0;
  Observer::Settings settings{
      .time_one_in = 1,
      .span_start = [&](const EventInfo&) -> SpanHandle { return &++spans_started; },
      .span_end =
          [&](SpanHandle span, const EventInfo& e) {
            EXPECT_NE(span, nullptr);
            ++spans_ended;
            last_events.push_back(e);
          }};
  auto observer = std::make_shared<Observer>(
      [&](const EventInfo& e) { timed_events += e.durations.measured ? 1 : 0; }, settings);
  auto clock = std::make_shared<ManualClock>();
  testing::FlakyStore store{MemoryStoreOptions{.clock = clock}};
  IdempotencyGuard guard{store, Options{.scope = "metrics",
                                        .lease = std::chrono::seconds{1},
                                        .clock = clock,
                                        .observer = observer,
                                        .commit_retry = {.attempts = 3}}};

  (void)guard.execute("a", "p", [] { return 1; });  // executed
  (void)guard.execute("a", "p", [] { return 1; });  // replayed
  (void)guard.execute("a", "q", [] { return 1; });  // mismatched
  (void)guard.execute("", [] { return 1; });        // rejected (no store call, no span)
  (void)guard.execute("b", [&] {                    // executed; in_progress inside
    return guard.execute("b", [] { return 2; }).error().value();
  });
  EXPECT_THROW((void)guard.execute("c", []() -> int { throw std::runtime_error("x"); }),
               std::runtime_error);  // aborted
  (void)guard.execute("d", [&] {     // took_over + executed inside, lease_lost + executed outside
    clock->advance(std::chrono::seconds{2});
    (void)guard.execute("d", [] { return 3; });
    return 4;
  });
  store.failing_commits = 1;  // one retry, then recorded
  (void)guard.execute("e", [] { return 5; });
  store.failing_commits = 3;  // every try fails: store_error, result_unrecorded
  (void)guard.execute("f", [] { return 6; });

  const Counters c = observer->counters();
  EXPECT_EQ(c.executed, 6u);  // a, b, d's taker, d's stale holder, e, f
  expect_one_of_each_other_outcome(c);
  EXPECT_EQ(c.took_over, 1u);
  EXPECT_EQ(c.commit_retried, 3u);     // e once, f twice
  EXPECT_EQ(c.store_errors, 1u);       // f's commit, given up
  EXPECT_EQ(c.result_unrecorded, 2u);  // d's stale holder (lease_lost) and f

  // Ten calls reached the store (the empty key did not): ten spans, each closed by its last
  // event, which carries the call's timings.
  EXPECT_EQ(spans_started, 10);
  EXPECT_EQ(spans_ended, 10);
  EXPECT_EQ(timed_events, 10);
  for (const EventInfo& e : last_events) {
    EXPECT_TRUE(e.durations.measured) << to_string(e.event);
    EXPECT_GT(e.durations.claim.count(), 0) << to_string(e.event);
    EXPECT_EQ(e.scope, "metrics");
    if (e.event == Event::executed) {
      EXPECT_GT(e.durations.commit.count(), 0);
    }
  }
}

TEST(ObserverTest, EventsNameTheStoreAndUntimedCallsCarryNoDurations) {
  std::vector<std::string> stores;
  bool any_measured = false;
  auto observer = std::make_shared<Observer>([&](const EventInfo& e) {
    stores.emplace_back(e.store);
    any_measured |= e.durations.measured;
  });
  MemoryStore store;
  IdempotencyGuard guard{store, Options{.scope = "s", .observer = observer}};
  (void)guard.execute("k", [] { return 1; });
  (void)guard.execute("k", [] { return 1; });
  ASSERT_EQ(stores.size(), 2u);
  EXPECT_EQ(stores[0], "memory");
  EXPECT_FALSE(any_measured);
}

}  // namespace
}  // namespace idem

namespace idem {
namespace {

// The events of one call come in the order docs/guide.md gives ("Counters and events"): a call's
// last event (executed or aborted) ends it, after the commit or release, and carries its error.
TEST(ObserverTest, EventsOfOneCallComeInTheOrderTheGuideGives) {
  std::vector<std::pair<Event, std::error_code>> seen;
  auto observer =
      std::make_shared<Observer>([&](const EventInfo& e) { seen.emplace_back(e.event, e.error); });
  auto clock = std::make_shared<ManualClock>();
  testing::FlakyStore store{MemoryStoreOptions{.clock = clock}};
  IdempotencyGuard guard{store, Options{.scope = "order",
                                        .lease = std::chrono::seconds{1},
                                        .max_result_size = 8,
                                        .clock = clock,
                                        .observer = observer,
                                        .commit_retry = {.attempts = 3}}};
  auto events = [&] {
    std::vector<Event> out;
    for (const auto& [event, error] : seen) out.push_back(event);
    seen.clear();
    return out;
  };
  using E = Event;

  // A takeover: took_over, executed.
  auto stale = guard.begin<int>(Key{"t"});
  ASSERT_TRUE(stale.acquired());
  clock->advance(std::chrono::seconds{2});
  seen.clear();
  (void)guard.execute("t", [] { return 1; });
  EXPECT_EQ(events(), (std::vector<E>{E::took_over, E::executed}));
  (void)stale.commit(2);  // lease_lost, then executed with its error, result_unrecorded
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[1].second, make_error_code(errc::lease_lost));
  EXPECT_EQ(events(), (std::vector<E>{E::lease_lost, E::executed, E::result_unrecorded}));

  // A commit that keeps failing: a commit_retried per retry, store_error, executed (carrying
  // the commit's error), result_unrecorded.
  store.failing_commits = 3;
  (void)guard.execute("c", [] { return 3; });
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen[3].second, make_error_code(errc::store_unavailable));
  EXPECT_EQ(events(), (std::vector<E>{E::commit_retried, E::commit_retried, E::store_error,
                                      E::executed, E::result_unrecorded}));

  // An oversized result: executed, result_unrecorded (result_too_large).
  (void)guard.execute("big", [] { return std::string(64, 'x'); });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].second, make_error_code(errc::result_too_large));
  EXPECT_EQ(events(), (std::vector<E>{E::executed, E::result_unrecorded}));

  // A handler that throws and whose key cannot be released: store_error, then aborted, whose
  // error says the failure was not remembered (the key is left to its lease).
  store.failing_aborts = 1;
  EXPECT_THROW((void)guard.execute("h", []() -> int { throw std::runtime_error("x"); }),
               std::runtime_error);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].second, make_error_code(errc::handler_aborted));
  EXPECT_EQ(events(), (std::vector<E>{E::store_error, E::aborted}));
  // Released: aborted alone, handler_aborted.
  EXPECT_THROW((void)guard.execute("h2", []() -> int { throw std::runtime_error("x"); }),
               std::runtime_error);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].second, make_error_code(errc::handler_aborted));
  EXPECT_EQ(events(), (std::vector<E>{E::aborted}));

  // A batch keeps the same order: a commit that keeps failing (the batch's own commit, then the
  // retries) ends with executed, carrying the commit's error, then result_unrecorded.
  store.failing_commits = 4;
  const std::vector<BatchItem> items{{Key{"bc"}}};
  (void)guard.execute_batch(items, [](std::size_t) { return 5; });
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(seen[4].second, make_error_code(errc::store_unavailable));
  EXPECT_EQ(events(), (std::vector<E>{E::commit_retried, E::commit_retried, E::commit_retried,
                                      E::store_error, E::executed, E::result_unrecorded}));
  // A batch item that throws: aborted, handler_aborted. ("bc" is still held: its commit failed.)
  const std::vector<BatchItem> throwing{{Key{"bt"}}};
  (void)guard.execute_batch(throwing, [](std::size_t) -> int { throw std::runtime_error("x"); });
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].second, make_error_code(errc::handler_aborted));
  EXPECT_EQ(events(), (std::vector<E>{E::aborted}));
}

// Under remember_failures the aborted event says the failure was remembered.
TEST(ObserverTest, AnAbortedEventSaysWhetherTheFailureWasRemembered) {
  std::vector<std::error_code> aborted;
  auto observer = std::make_shared<Observer>([&](const EventInfo& e) {
    if (e.event == Event::aborted) aborted.push_back(e.error);
  });
  MemoryStore store;
  IdempotencyGuard guard{store, Options{.remember_failures = true, .observer = observer}};
  EXPECT_THROW((void)guard.execute("k", []() -> int { throw std::runtime_error("x"); }),
               std::runtime_error);
  EXPECT_EQ(aborted, (std::vector<std::error_code>{make_error_code(errc::handler_failed)}));
}

}  // namespace
}  // namespace idem
