// MemoryStore as a WakingStore, beyond the conformance kit's wake cases (which run on it with a
// ManualClock): a wake is for the waited key alone, and guards (plain, cached, layered) wake
// their waiting duplicates instead of polling, except under a test's ManualClock.

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "idem/idem.hpp"
#include "idem/layered_guard.hpp"
#include "idem/testing/call_counter.hpp"
#include "wake/wake_cases.hpp"

namespace idem::testing {
namespace {

static_assert(WakingStore<MemoryStore>);
static_assert(WakingStore<CachedStore<MemoryStore&>>);
static_assert(WakingStore<MemoryRequestIdCache>);
static_assert(!WakingStore<CallCounter<MemoryStore, false>>);

TEST(MemoryWakeTest, AnotherKeysCommitInTheShardDoesNotEndTheWait) {
  MemoryStore store{MemoryStoreOptions{.shards = 1}};  // every key shares the one wake room
  Result<Claim> held = store.claim(claim_of("waited"));
  Result<Claim> other = store.claim(claim_of("other"));
  ASSERT_TRUE(held && other);
  conformance::Waiter<MemoryStore> waiter(store, "waited", held->fence);
  ASSERT_TRUE(store.commit(Ticket{"other", other->fence},
                           Completion{ClaimStatus::completed, "x", kNoTimeout}));
  std::this_thread::sleep_for(20ms);  // a wrong wake would have returned by now; not relied on
  EXPECT_FALSE(waiter.returned());    // woken, it found its record still held and slept again
  ASSERT_TRUE(store.commit(Ticket{"waited", held->fence},
                           Completion{ClaimStatus::completed, "y", kNoTimeout}));
  Result<Claim>& after = waiter.answer();
  ASSERT_TRUE(after);
  EXPECT_EQ(after->result, "y");
}

TEST(MemoryWakeTest, AWaitForAStaleFenceReturnsAtOnce) {
  MemoryStore store;
  Result<Claim> held = store.claim(claim_of("stale"));
  ASSERT_TRUE(held);
  store.await_change(Ticket{"stale", held->fence + 1}, kNoTimeout);  // not this hold: no wait
  store.await_change(Ticket{"never-claimed", 1}, kNoTimeout);
}

TEST(MemoryWakeTest, DuplicatesCostThreeStoreCalls) {
  MemoryStore store;
  expect_duplicates_cost_three_calls(store, 31);
}

TEST(MemoryWakeTest, DuplicatesOfACachedStoreCostThreeStoreCalls) {
  CachedStore<MemoryStore> cached{CachedStoreOptions{}};
  expect_duplicates_cost_three_calls(cached, 8);
}

TEST(MemoryWakeTest, SpuriousWakeClaimsAgainAndReplays) {
  MemoryStore store;
  expect_spurious_wake_claims_again(store);
}

TEST(MemoryWakeTest, AStoreThatHidesItsWakeIsPolled) {
  MemoryStore store;
  expect_hidden_wake_polls(store);
}

TEST(MemoryWakeTest, TheWaitTimeoutHoldsWhenNobodyCommits) {
  MemoryStore store;
  expect_timeout_holds_without_commit(store);
}

TEST(MemoryWakeTest, AManualClockStillPolls) {
  auto clock = std::make_shared<ManualClock>();
  MemoryStore store{MemoryStoreOptions{.clock = clock}};
  CallCounter<MemoryStore> counted(store);
  IdempotencyGuard guard{
      counted, Options{.scope = "manual", .in_progress = Wait{.timeout = 2s}, .clock = clock}};
  Outcome<int> inner = Outcome<int>::failed(make_failure(errc::store_unavailable));
  ASSERT_TRUE(guard.execute("k", [&] {
    inner = guard.execute("k", [] { return 2; });  // the holder is this very call: never ends
    return 1;
  }));
  EXPECT_EQ(inner.error(), errc::in_progress);
  EXPECT_EQ(counted.awaits.load(), 0);  // the manual clock's sleeps, not the store's wake
  EXPECT_GT(counted.claims.load(), 3);  // the first claim, then one per poll
}

TEST(MemoryWakeTest, ALayeredGuardWakesOnItsRecordLayer) {
  MemoryStore records;
  CallCounter<MemoryStore> counted(records);
  LayeredGuard guard(LayeredOptions{.policy = {.in_progress = Wait{.timeout = kNoTimeout,
                                                                   .max_backoff = kNoTimeout}}},
                     RecordLayer(counted, LayerSettings{.scope = "pay", .lease = kNoTimeout}));
  std::atomic<bool> started{false};
  std::thread holder([&] {
    auto out = guard.execute({"", "", "order-1", "alice", "p"}, [&] {
      started = true;
      while (counted.awaits.load() < 1) std::this_thread::sleep_for(1ms);
      return 7;
    });
    EXPECT_TRUE(out.executed());
  });
  while (!started.load()) std::this_thread::sleep_for(1ms);
  auto out = guard.execute({"", "", "order-1", "alice", "p"}, [] { return 8; });
  holder.join();
  ASSERT_TRUE(out) << out.message();
  EXPECT_TRUE(out.replayed());
  EXPECT_EQ(out.value(), 7);
  EXPECT_EQ(counted.awaits.load(), 1);
  EXPECT_EQ(counted.claims.load(), 3);  // the holder's; the duplicate's in_progress and replay
}

}  // namespace
}  // namespace idem::testing
