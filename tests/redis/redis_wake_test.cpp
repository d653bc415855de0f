// RedisStore::await_change (idem::WakingStore): a duplicate blocked on a hold's wake list is woken
// by the holder's commit or abort, a wait that starts after the end returns at once, the wake
// list expires, a stalled server bounds the wait by its deadline, and a woken duplicate costs
// three store calls (claim, await_change, claim) with 31 of them waiting on one key.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "idem/engine/effective_key.hpp"
#include "idem/redis/admin.hpp"
#include "idem/redis/store.hpp"
#include "idem/redis/token_store.hpp"
#include "redis/redis_cluster_support.hpp"
#include "redis/redis_test_support.hpp"
#include "support/bounded_calls.hpp"
#include "support/fault_relay.hpp"

namespace idem::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Far beyond any wake on loopback: a wait that returns well before it was woken.
constexpr milliseconds kLongBound{20'000};
constexpr milliseconds kWoken{10'000};
constexpr milliseconds kLease{30'000};

class RedisWakeTest : public RedisTest {
 protected:
  RedisWakeTest() : RedisTest("wake") {}
  void SetUp() override {
    RedisTest::SetUp();
    if (!ready()) return;
    store_ = std::make_unique<RedisStore>(client_, RedisStoreOptions{.prefix = prefix_});
  }

  Ticket hold(const std::string& key) {
    Result<Claim> c = store_->claim(ClaimRequest{key, {1, 2}, kLease, kLease});
    EXPECT_TRUE(c.has_value() && c->status == ClaimStatus::acquired);
    return Ticket{key, c ? c->fence : 0};
  }
  std::string record(const std::string& key) const { return store_->record_key(key); }
  std::string wake_list(const Ticket& t) const {
    return record(std::string(t.key)) + ":wake:" + std::to_string(t.fence);
  }
  // The waiters the record counts now (its field w).
  long long counted(const std::string& key) {
    const std::string n = redis_string(*client_, {"HGET", record(key), "w"});
    return n == "<nil>" ? 0 : std::stoll(n);
  }
  // Blocks until `n` waiters are counted in the record (each is then in its BLPOP or about to
  // send it on the same write).
  void until_counted(const std::string& key, long long n) {
    while (counted(key) < n) std::this_thread::sleep_for(milliseconds{1});
  }
  // A thread that waits for `held`'s end with kLongBound; `took` is how long it waited.
  std::thread waiter(Ticket held, std::atomic<long long>& took_ms) {
    return std::thread([this, held, &took_ms] {
      const auto start = Clock::now();
      store_->await_change(held, kLongBound);
      took_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
    });
  }

  std::unique_ptr<RedisStore> store_;
};

TEST_F(RedisWakeTest, ACommitWakesTheWaiterAndLeavesNoWakeList) {
  const std::string key = "commit";
  const Ticket held = hold(key);
  std::atomic<long long> took{-1};
  std::thread w = waiter(held, took);
  until_counted(key, 1);
  ASSERT_TRUE(store_->commit(held, Completion{.result = "r", .ttl = kLease}).ok());
  w.join();
  EXPECT_LT(took.load(), kWoken.count());
  EXPECT_EQ(redis_integer(*client_, {"EXISTS", wake_list(held)}), 0);  // its element was taken
  EXPECT_EQ(counted(key), 0);                                          // the count went too
  Result<Claim> again = store_->claim(ClaimRequest{key, {1, 2}, kLease, kLease});
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->status, ClaimStatus::completed);
}

TEST_F(RedisWakeTest, AnAbortWakesEveryWaiter) {
  const std::string key = "abort";
  const Ticket held = hold(key);
  std::array<std::atomic<long long>, 3> took{-1, -1, -1};
  std::vector<std::thread> waiters;
  for (auto& t : took) waiters.push_back(waiter(held, t));
  until_counted(key, 3);
  ASSERT_TRUE(store_->abort(held).ok());
  for (auto& w : waiters) w.join();
  for (auto& t : took) EXPECT_LT(t.load(), kWoken.count());
  EXPECT_EQ(redis_integer(*client_, {"EXISTS", wake_list(held)}), 0);
  Result<Claim> again = store_->claim(ClaimRequest{key, {1, 2}, kLease, kLease});
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->status, ClaimStatus::acquired);  // released: the next claim takes it
}

TEST_F(RedisWakeTest, AWaitThatStartsAfterTheEndReturnsAtOnce) {
  const std::string key = "late";
  const Ticket held = hold(key);
  ASSERT_TRUE(store_->commit(held, Completion{.result = "r", .ttl = kLease}).ok());
  std::atomic<long long> took{-1};
  waiter(held, took).join();
  EXPECT_LT(took.load(), kWoken.count());
  EXPECT_EQ(counted(key), 0);  // not counted: the hold was over
  EXPECT_EQ(redis_integer(*client_, {"EXISTS", wake_list(held)}), 0);
  // A stale fence (an older hold of a record held again) is over too.
  const std::string other = "stale";
  const Ticket first = hold(other);
  ASSERT_TRUE(store_->abort(first).ok());
  const Ticket second = hold(other);
  ASSERT_GT(second.fence, first.fence);
  took = -1;
  waiter(first, took).join();
  EXPECT_LT(took.load(), kWoken.count());
  EXPECT_EQ(counted(other), 0);
}

TEST_F(RedisWakeTest, AWakeNoWaiterTakesExpires) {
  const std::string key = "leftover";
  const Ticket held = hold(key);
  // A waiter that gave up at its bound before the end stays counted: the commit pushes its wake,
  // which nobody takes.
  store_->await_change(held, milliseconds{20});
  ASSERT_EQ(counted(key), 1);
  ASSERT_TRUE(store_->commit(held, Completion{.result = "r", .ttl = kLease}).ok());
  const std::string list = wake_list(held);
  EXPECT_EQ(redis_integer(*client_, {"LLEN", list}), 1);
  const long long pttl = redis_integer(*client_, {"PTTL", list});
  EXPECT_GT(pttl, 0);
  EXPECT_LE(pttl, 5000);
  std::this_thread::sleep_for(milliseconds{pttl + 50});
  EXPECT_EQ(redis_integer(*client_, {"EXISTS", list}), 0);
  // Nothing of the wait is left under the store's prefix but the record.
  Result<redis::Reply> keys = client_->command({"KEYS", prefix_ + "*"});
  ASSERT_TRUE(keys.has_value());
  ASSERT_EQ(keys->elements.size(), 1u);
  EXPECT_EQ(keys->elements[0].str, record(key));
}

TEST_F(RedisWakeTest, NoWaitConnectionsMakesItAPauseOfTheBound) {
  redis::ConnectionOptions options = redis_options();
  options.wait_connections = 0;
  RedisStore polling(std::make_shared<redis::Client>(options),
                     RedisStoreOptions{.prefix = prefix_});
  const std::string key = "no-wait";  // outlives the ticket that views it
  const Ticket held = hold(key);
  const auto start = Clock::now();
  polling.await_change(held, milliseconds{50});
  EXPECT_GE(Clock::now() - start, milliseconds{50});  // paused, not spinning
  EXPECT_EQ(counted(key), 0);                         // and never counted
}

// 31 duplicates of one key, each as the engine drives a waking store: claim (in_progress),
// await_change, claim again. All counted before the commit, each is woken by it: three store
// calls per duplicate, every one replaying the result.
TEST_F(RedisWakeTest, ThirtyOneDuplicatesCostThreeStoreCallsEach) {
  const std::string key = "storm";
  const Ticket held = hold(key);
  constexpr int kDuplicates = 31;
  std::vector<int> calls(kDuplicates, 0);
  std::vector<ClaimStatus> answers(kDuplicates, ClaimStatus::in_progress);
  std::vector<std::thread> duplicates;
  duplicates.reserve(kDuplicates);
  for (int d = 0; d < kDuplicates; ++d) {
    duplicates.emplace_back([&, d] {
      for (;;) {
        ++calls[d];
        Result<Claim> c = store_->claim(ClaimRequest{key, {1, 2}, kLease, kLease});
        if (!c.has_value() || c->status != ClaimStatus::in_progress) {
          answers[d] = c ? c->status : ClaimStatus::mismatch;
          return;
        }
        ++calls[d];
        store_->await_change(Ticket{key, c->fence},
                             std::min(kLongBound, c->lease_remaining + milliseconds{1}));
      }
    });
  }
  until_counted(key, kDuplicates);
  ASSERT_TRUE(store_->commit(held, Completion{.result = "r", .ttl = kLease}).ok());
  for (auto& d : duplicates) d.join();
  for (int d = 0; d < kDuplicates; ++d) {
    EXPECT_EQ(answers[d], ClaimStatus::completed) << d;
    EXPECT_LE(calls[d], 3) << d;
  }
  EXPECT_EQ(redis_integer(*client_, {"EXISTS", wake_list(held)}), 0);
}

// The admin's release ends a hold as an abort does: its waiters are woken. Its record listing
// meanwhile reads past a wake list (a list under the records' pattern).
TEST_F(RedisWakeTest, AnAdminReleaseWakesTheWaitersAndListingSkipsWakeLists) {
  auto admin = admin::redis_admin(client_, admin::RedisAdminOptions{.prefix = prefix_});
  const std::string left(detail::EffectiveKey("s", {}, "left").view());
  const Ticket first = hold(left);
  store_->await_change(first, milliseconds{20});  // counted, then gone: its wake stays
  ASSERT_TRUE(store_->commit(first, Completion{.result = "r", .ttl = kLease}).ok());
  ASSERT_EQ(redis_integer(*client_, {"LLEN", wake_list(first)}), 1);

  const std::string key(detail::EffectiveKey("s", {}, "held").view());
  const Ticket held = hold(key);
  std::atomic<long long> took{-1};
  std::thread w = waiter(held, took);
  until_counted(key, 1);
  Result<admin::Page> page = admin->list("s", admin::ListRequest{});
  ASSERT_TRUE(page.has_value()) << page.failure().describe();
  ASSERT_EQ(page->records.size(), 1u);  // the record in progress, and no failure on the list
  Result<admin::Change> released = admin->release("s", Key{"held"});
  ASSERT_TRUE(released.has_value()) << released.failure().describe();
  EXPECT_TRUE(released->changed);
  w.join();
  EXPECT_LT(took.load(), kWoken.count());
  EXPECT_EQ(counted(key), 0);
  EXPECT_EQ(redis_integer(*client_, {"EXISTS", wake_list(held)}), 0);
}

// A token consumed by one request wakes the duplicates that wait for it when it commits.
TEST_F(RedisWakeTest, ATokensCommitWakesItsWaiters) {
  detail::RedisTokenRecords tokens(client_, prefix_ + "tok:", {});
  const std::string key = "token";
  Result<bool> added = tokens.add(key, kLease);
  ASSERT_TRUE(added.has_value() && added.value());
  Result<Claim> c = tokens.claim(ClaimRequest{key, {1, 2}, kLease, kLease});
  ASSERT_TRUE(c.has_value() && c->status == ClaimStatus::acquired);
  const Ticket held{key, c->fence};
  std::atomic<long long> took{-1};
  std::thread w([&] {
    const auto start = Clock::now();
    tokens.await_change(held, kLongBound);
    took = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  });
  while (redis_string(*client_, {"HGET", tokens.redis_key(key), "w"}) != "1") {
    std::this_thread::sleep_for(milliseconds{1});
  }
  ASSERT_TRUE(tokens.commit(held, Completion{.result = "r", .ttl = kLease}).ok());
  w.join();
  EXPECT_LT(took.load(), kWoken.count());
}

// A server that stops answering (a stalled relay): the wait ends at its bound and the short
// slack, its blocked connection dropped, never at the bound of a caller who gives up later.
TEST(RedisWakeStallTest, AStalledServerBoundsTheWaitByItsDeadline) {
  IDEM_REQUIRE_REDIS(direct);
  const redis::ConnectionOptions options = redis_options();
  FaultRelay relay(options.host, options.port);
  redis::ConnectionOptions through = options;
  through.host = "127.0.0.1";
  through.port = relay.port();
  through.command_timeout = milliseconds{500};
  const std::string prefix = unique_prefix("wake-stall");
  RedisStore holder(direct, RedisStoreOptions{.prefix = prefix});
  RedisStore waiter(std::make_shared<redis::Client>(through), RedisStoreOptions{.prefix = prefix});
  Result<Claim> c = holder.claim(ClaimRequest{"k", {1, 2}, kLease, kLease});
  ASSERT_TRUE(c.has_value() && c->status == ClaimStatus::acquired);
  const Ticket held{"k", c->fence};
  // A first wait opens the wait connection while the relay passes.
  waiter.await_change(held, milliseconds{10});
  relay.stall();
  const milliseconds bound{300};
  const std::vector<std::function<int()>> wait{[&] {
    waiter.await_change(held, bound);
    return 0;
  }};
  // The bound, the slack (at most 100 ms) and room for a loaded machine; far below the holder's
  // lease, which no wake would end.
  const auto r = run_bounded<int>(wait, milliseconds{3000}, [&] { relay.cut(); });
  ASSERT_TRUE(r[0].result.has_value());
  EXPECT_GE(r[0].took, bound);
  relay.pass();
  EXPECT_TRUE(holder.commit(held, Completion{.result = "r", .ttl = kLease}).ok());
}

// On a Redis Cluster: the waiter's script and BLPOP, and the commit and abort scripts with their
// wake list, each reach the record's slot (a prefix with an unclosed '{' puts the hash tag across
// the prefix and the key's tag: the wake list still shares the record's slot), and every
// duplicate is woken.
TEST(RedisWakeClusterTest, CommitAndAbortWakeTheWaitersOfEachKeyOnItsNode) {
  IDEM_REQUIRE_REDIS_CLUSTER(client);
  for (const std::string& prefix : {unique_prefix("wake-cluster"), unique_prefix("wake{open")}) {
    RedisStore store(client, RedisStoreOptions{.prefix = prefix});
    for (int k = 0; k < 8; ++k) {  // keys on several nodes
      const std::string key = "key-" + std::to_string(k);
      Result<Claim> c = store.claim(ClaimRequest{key, {1, 2}, kLease, kLease});
      ASSERT_TRUE(c.has_value() && c->status == ClaimStatus::acquired)
          << (c ? "" : c.failure().describe());
      const Ticket held{key, c->fence};
      std::atomic<long long> took{-1};
      std::thread w([&] {
        const auto start = Clock::now();
        store.await_change(held, kLongBound);
        took = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
      });
      const std::string record = store.record_key(key);
      while (true) {
        Result<redis::Reply> n = client->command({"HGET", record, "w"});
        ASSERT_TRUE(n.has_value());
        if (n->type == redis::Reply::Type::string && n->str == "1") break;
        std::this_thread::sleep_for(milliseconds{1});
      }
      const Status ended = k % 2 == 0 ? store.commit(held, Completion{.result = "r", .ttl = kLease})
                                      : store.abort(held);
      ASSERT_TRUE(ended.ok()) << ended.failure().describe();
      w.join();
      EXPECT_LT(took.load(), kWoken.count()) << prefix << key;
    }
  }
}

}  // namespace
}  // namespace idem::testing
