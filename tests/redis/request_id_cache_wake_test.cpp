// RequestIdCache's entries as an idem::WakingStore: a duplicate waiting on an entry in progress
// is woken by the holder's commit or abort (cache_wait.lua counts it in, the ending script pushes
// its wake only then), a waiting duplicate costs three store calls, the wait timeout and a test's
// ManualClock still hold, a stalled server bounds the wait, and the cache's own guard wakes. On a
// Redis Cluster the count and the wake list share the entry's slot.

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "idem/redis/request_id_cache.hpp"
#include "idem/testing/call_counter.hpp"
#include "redis/redis_cluster_support.hpp"
#include "redis/redis_test_support.hpp"
#include "support/bounded_calls.hpp"
#include "support/fault_relay.hpp"
#include "wake/wake_cases.hpp"

namespace idem::testing {
namespace {

using Records = detail::RedisRequestIdRecords;
using namespace std::chrono_literals;

// A holder id as the count's and wake list's names spell it: 16 hex digits.
std::string holder_hex(Fence fence) {
  std::array<char, 17> out{};
  std::snprintf(out.data(), out.size(), "%016llx", static_cast<unsigned long long>(fence));
  return std::string(out.data(), 16);
}
static_assert(WakingStore<Records>);
static_assert(WakingStore<RequestIdCache>);

class RequestIdCacheWakeTest : public RedisTest {
 protected:
  RequestIdCacheWakeTest() : RedisTest("cache-wake") {}
  void SetUp() override {
    RedisTest::SetUp();
    if (!ready()) return;
    records_ = std::make_unique<Records>(client_, prefix_);
  }
  // The entry's waiting counts and wake lists now (KEYS under the prefix: the test's own).
  std::size_t keys_like(const std::string& pattern) {
    Result<redis::Reply> keys = client_->command({"KEYS", prefix_ + pattern});
    EXPECT_TRUE(keys.has_value());
    return keys ? keys->elements.size() : 0;
  }

  std::unique_ptr<Records> records_;
};

TEST_F(RequestIdCacheWakeTest, ACommitWakesTheWaiter) {
  if (!ready()) return;
  expect_commit_wakes(*records_, *records_);
  EXPECT_EQ(keys_like("*:waiting:*"), 0u);  // the count went with the wake
  EXPECT_EQ(keys_like("*:wake:*"), 0u);     // and the waiter took its element
}

TEST_F(RequestIdCacheWakeTest, AnAbortWakesTheWaiterWhichTakesTheEntry) {
  if (!ready()) return;
  expect_abort_wakes(*records_, *records_);
  EXPECT_EQ(keys_like("*:waiting:*"), 0u);
}

// Nobody waits: the ending scripts push no wake (only a waiter who counted itself in gets one).
TEST_F(RequestIdCacheWakeTest, NoWaiterNoWakeList) {
  if (!ready()) return;
  for (const bool commit : {true, false}) {
    const std::string key = commit ? "alone-commit" : "alone-abort";
    Result<Claim> held = records_->claim(claim_of(key));
    ASSERT_TRUE(held && held->status == ClaimStatus::acquired);
    const Ticket ticket{key, held->fence};
    ASSERT_TRUE(commit ? records_->commit(ticket, Completion{.result = "r", .ttl = kNoTimeout})
                       : records_->abort(ticket));
  }
  EXPECT_EQ(keys_like("*:wake:*"), 0u);
  EXPECT_EQ(keys_like("*:waiting:*"), 0u);
}

TEST_F(RequestIdCacheWakeTest, AWaitThatStartsAfterTheEndReturnsAtOnce) {
  if (!ready()) return;
  const std::string key = "late";
  Result<Claim> held = records_->claim(claim_of(key));
  ASSERT_TRUE(held);
  const Ticket ticket{key, held->fence};
  ASSERT_TRUE(records_->commit(ticket, Completion{.result = "r", .ttl = kNoTimeout}));
  records_->await_change(ticket, kNoTimeout);  // would hang the case if it waited
  EXPECT_EQ(keys_like("*:waiting:*"), 0u);     // not counted: the hold was over
}

TEST_F(RequestIdCacheWakeTest, ThirtyOneDuplicatesCostThreeStoreCallsEach) {
  if (!ready()) return;
  expect_duplicates_cost_three_calls(*records_, 31);
}

TEST_F(RequestIdCacheWakeTest, SpuriousWakeClaimsAgainAndReplays) {
  if (!ready()) return;
  expect_spurious_wake_claims_again(*records_);
}

TEST_F(RequestIdCacheWakeTest, TheWaitTimeoutHoldsWhenNobodyCommits) {
  if (!ready()) return;
  expect_timeout_holds_without_commit(*records_);
}

TEST_F(RequestIdCacheWakeTest, AManualClockStillPolls) {
  if (!ready()) return;
  auto clock = std::make_shared<ManualClock>();
  CallCounter<Records> counted(*records_);
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

// The cache itself (its guard over the entries) under Wait: the duplicate is woken by the
// holder's commit, counted in (its count key) while the holder runs.
TEST_F(RequestIdCacheWakeTest, TheCachesOwnGuardWakesItsDuplicates) {
  if (!ready()) return;
  RequestIdCache cache(
      client_, RequestIdCacheOptions{.prefix = prefix_,
                                     .guard = {.lease = kNoTimeout,
                                               .in_progress = Wait{.timeout = kNoTimeout,
                                                                   .max_backoff = kNoTimeout}}});
  std::atomic<bool> started{false};
  std::thread holder([&] {
    Outcome<std::string> out = cache.execute(Key{"req-1"}, [&] {
      started = true;
      while (keys_like("*:waiting:*") < 1) std::this_thread::sleep_for(1ms);
      return std::string("response");
    });
    EXPECT_TRUE(out.executed());
  });
  while (!started.load()) std::this_thread::sleep_for(1ms);
  Outcome<std::string> out = cache.execute(Key{"req-1"}, [] { return std::string("again"); });
  holder.join();
  ASSERT_TRUE(out) << out.message();
  EXPECT_TRUE(out.replayed());
  EXPECT_EQ(out.value(), "response");
}

// A server that stops answering (a stalled relay): the wait ends at its bound and the blocking
// slack, not at the holder's end, which no wake would bring.
TEST(RequestIdCacheWakeStallTest, AStalledServerBoundsTheWait) {
  IDEM_REQUIRE_REDIS(direct);
  const redis::ConnectionOptions options = redis_options();
  FaultRelay relay(options.host, options.port);
  redis::ConnectionOptions through = options;
  through.host = "127.0.0.1";
  through.port = relay.port();
  through.command_timeout = milliseconds{500};
  const std::string prefix = unique_prefix("cache-wake-stall");
  Records holder(direct, prefix);
  Records waiter(std::make_shared<redis::Client>(through), prefix);
  Result<Claim> c = holder.claim(claim_of("k"));
  ASSERT_TRUE(c.has_value() && c->status == ClaimStatus::acquired);
  const Ticket held{"k", c->fence};
  waiter.await_change(held, milliseconds{10});  // opens the wait connection while it passes
  relay.stall();
  const std::vector<std::function<int()>> wait{[&] {
    waiter.await_change(held, milliseconds{300});
    return 0;
  }};
  // Far below the holder's lease (minutes): only the client-side bound ends this wait.
  const auto r = run_bounded<int>(wait, milliseconds{5000}, [&] { relay.cut(); });
  EXPECT_TRUE(r[0].result.has_value()) << "the wait outlived its bound and slack";
  relay.pass();
  EXPECT_TRUE(holder.commit(held, Completion{.result = "r", .ttl = kNoTimeout}).ok());
}

// On a Redis Cluster: the waiter's script and BLPOP, and the commit and abort scripts (the entry
// alone declared, the count and wake list named from it), reach the entry's slot on each node.
TEST(RequestIdCacheWakeClusterTest, CommitAndAbortWakeTheWaitersOfEachKeyOnItsNode) {
  IDEM_REQUIRE_REDIS_CLUSTER(client);
  Records records(client, unique_prefix("cache-wake-cluster"));
  for (int k = 0; k < 8; ++k) {  // keys on several nodes
    const std::string key = "key-" + std::to_string(k);
    Result<Claim> c = records.claim(claim_of(key));
    ASSERT_TRUE(c.has_value() && c->status == ClaimStatus::acquired)
        << (c ? "" : c.failure().describe());
    const Ticket held{key, c->fence};
    std::thread w([&] { records.await_change(held, kNoTimeout); });  // only a wake ends it
    const std::string waiting = records.redis_key(key) + ":waiting:" + holder_hex(held.fence);
    for (;;) {
      Result<redis::Reply> n = client->command({"GET", waiting});
      ASSERT_TRUE(n.has_value());
      if (n->type == redis::Reply::Type::string && n->str == "1") break;
      std::this_thread::sleep_for(1ms);
    }
    const Status ended = k % 2 == 0
                             ? records.commit(held, Completion{.result = "r", .ttl = kNoTimeout})
                             : records.abort(held);
    ASSERT_TRUE(ended.ok()) << ended.failure().describe();
    w.join();
  }
}

}  // namespace
}  // namespace idem::testing
