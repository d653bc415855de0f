// Observer: each guard path bumps its counter and reports its event with scope, key and fence.

#include "idem/observer.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "idem/idem.hpp"

namespace idem {
namespace {

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
  EXPECT_EQ(c.replayed, 1u);
  EXPECT_EQ(c.mismatched, 1u);
  EXPECT_EQ(c.rejected, 1u);
  EXPECT_EQ(c.in_progress, 1u);
  EXPECT_EQ(c.aborted, 1u);
  EXPECT_EQ(c.lease_lost, 1u);
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

}  // namespace
}  // namespace idem
