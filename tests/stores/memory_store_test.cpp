// MemoryStore's own promises: the capacity bound, counted eviction that spares in-progress
// records, expiry, and sharding.

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "idem/idem.hpp"
#include "idem/memory/store.hpp"

namespace idem {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class MemoryStoreTest : public ::testing::Test {
 protected:
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();

  static Result<Claim> claim(MemoryStore& s, std::string_view k) {
    return s.claim(ClaimRequest{k, {1, 1}, seconds{30}, seconds{3600}});
  }
  static void complete(MemoryStore& s, std::string_view k, milliseconds ttl = seconds{3600}) {
    Result<Claim> c = claim(s, k);
    ASSERT_TRUE(c && c->status == ClaimStatus::acquired);
    ASSERT_TRUE(s.commit(Ticket{k, c->fence}, Completion{ClaimStatus::completed, k, ttl}).ok());
  }
};

TEST_F(MemoryStoreTest, FullStoreEvictsTheOldestFinishedRecordAndCountsIt) {
  MemoryStore store{MemoryStoreOptions{.shards = 1, .capacity = 3, .clock = clock_}};
  for (const char* key : {"a", "b", "c"}) complete(store, key);
  EXPECT_EQ(store.evictions(), 0u);
  complete(store, "d");
  EXPECT_EQ(store.size(), 3u);
  EXPECT_EQ(store.evictions(), 1u);
  EXPECT_EQ(claim(store, "a")->status, ClaimStatus::acquired);  // "a" was the one evicted
  EXPECT_EQ(claim(store, "c")->status, ClaimStatus::completed);
}

TEST_F(MemoryStoreTest, StatsGiveTheRecordsHeldAndTheEvictions) {
  MemoryStore store{MemoryStoreOptions{.shards = 1, .capacity = 3, .clock = clock_}};
  StoreStats stats = store.stats();
  EXPECT_EQ(stats.store, "memory");
  EXPECT_EQ(stats.records, 0u);
  EXPECT_EQ(stats.evictions, 0u);
  EXPECT_FALSE(stats.pool);  // no pool in memory, and no backend part
  EXPECT_TRUE(stats.parts.empty());
  for (const char* k : {"a", "b", "c", "d", "e"}) complete(store, k);
  ASSERT_EQ(claim(store, "held")->status, ClaimStatus::acquired);
  stats = store.stats();
  EXPECT_EQ(stats.records, 3u);
  EXPECT_EQ(stats.evictions, 3u);  // d, e and the held claim each evicted the oldest
  clock_->advance(seconds{7200});
  EXPECT_EQ(store.purge_expired(), 3u);
  EXPECT_EQ(store.stats().records, 0u);
  EXPECT_EQ(store.stats().evictions, 3u);
}

TEST_F(MemoryStoreTest, InProgressRecordsAreNeverEvicted) {
  MemoryStore store{MemoryStoreOptions{.shards = 1, .capacity = 2, .clock = clock_}};
  ASSERT_EQ(claim(store, "held-1")->status, ClaimStatus::acquired);
  ASSERT_EQ(claim(store, "held-2")->status, ClaimStatus::acquired);
  Result<Claim> refused = claim(store, "new");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), errc::store_unavailable);
  EXPECT_EQ(store.evictions(), 0u);
  EXPECT_EQ(claim(store, "held-1")->status, ClaimStatus::in_progress);
}

TEST_F(MemoryStoreTest, EvictionSkipsAnOlderInProgressRecord) {
  MemoryStore store{MemoryStoreOptions{.shards = 1, .capacity = 2, .clock = clock_}};
  ASSERT_EQ(claim(store, "held")->status, ClaimStatus::acquired);
  complete(store, "done");
  complete(store, "next");
  EXPECT_EQ(store.evictions(), 1u);
  EXPECT_EQ(claim(store, "held")->status, ClaimStatus::in_progress);
  EXPECT_EQ(claim(store, "done")->status, ClaimStatus::acquired);
}

TEST_F(MemoryStoreTest, AStalledHolderStaysFencedOffAfterItsRecordWasEvicted) {
  MemoryStore store{MemoryStoreOptions{.shards = 1, .capacity = 1, .clock = clock_}};
  const Claim stalled = claim(store, "k").value();
  clock_->advance(seconds{31});
  const Claim taker = claim(store, "k").value();
  ASSERT_TRUE(taker.took_over);
  ASSERT_TRUE(
      store.commit(Ticket{"k", taker.fence}, Completion{ClaimStatus::completed, "t", seconds{60}})
          .ok());
  complete(store, "other");  // evicts "k": its fence must not start again at 1
  const Claim fresh = claim(store, "k").value();
  ASSERT_EQ(fresh.status, ClaimStatus::acquired);
  EXPECT_GT(fresh.fence, taker.fence);
  EXPECT_EQ(store
                .commit(Ticket{"k", stalled.fence},
                        Completion{ClaimStatus::completed, "stale", seconds{60}})
                .error(),
            errc::lease_lost);
}

TEST_F(MemoryStoreTest, ExpiredRecordsMakeRoomWithoutCountingAsEvictions) {
  MemoryStore store{MemoryStoreOptions{.shards = 1, .capacity = 2, .clock = clock_}};
  complete(store, "short", seconds{1});
  complete(store, "long");
  clock_->advance(seconds{2});
  complete(store, "new");
  EXPECT_EQ(store.evictions(), 0u);
  EXPECT_EQ(claim(store, "long")->status, ClaimStatus::completed);
}

TEST_F(MemoryStoreTest, EvictionFromAFullStoreStaysCheap) {
  // Each claim of a new key in a full store evicts one record. Were eviction to walk the whole
  // shard, these 20'000 claims would take ~2·10^8 steps; they take ~2·10^4.
  MemoryStore store{MemoryStoreOptions{.shards = 1, .capacity = 10'000, .clock = clock_}};
  for (int i = 0; i < 30'000; ++i) complete(store, std::to_string(i));
  EXPECT_EQ(store.size(), 10'000u);
  EXPECT_EQ(store.evictions(), 20'000u);
  EXPECT_EQ(claim(store, "29999")->status, ClaimStatus::completed);  // the young ones stay
  EXPECT_EQ(claim(store, "0")->status, ClaimStatus::acquired);
}

TEST_F(MemoryStoreTest, PurgeExpiredRemovesOnlyExpiredRecords) {
  MemoryStore store{MemoryStoreOptions{.shards = 4, .clock = clock_}};
  complete(store, "a", seconds{1});
  complete(store, "b", seconds{1});
  complete(store, "c", seconds{10});
  ASSERT_EQ(claim(store, "held")->status, ClaimStatus::acquired);
  clock_->advance(seconds{5});
  EXPECT_EQ(store.purge_expired(), 2u);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(claim(store, "c")->status, ClaimStatus::completed);
  EXPECT_EQ(claim(store, "held")->status, ClaimStatus::in_progress);
}

TEST_F(MemoryStoreTest, UnboundedWhenCapacityIsZero) {
  MemoryStore store{MemoryStoreOptions{.shards = 1, .capacity = 0, .clock = clock_}};
  for (int i = 0; i < 1000; ++i) complete(store, std::to_string(i));
  EXPECT_EQ(store.size(), 1000u);
  EXPECT_EQ(store.evictions(), 0u);
}

TEST_F(MemoryStoreTest, AnyShardCountWorksAndKeysSpreadOverShards) {
  for (std::size_t shards : {1u, 3u, 5u, 64u}) {
    MemoryStore store{MemoryStoreOptions{.shards = shards, .capacity = 0, .clock = clock_}};
    for (int i = 0; i < 200; ++i) complete(store, "k" + std::to_string(i));
    for (int i = 0; i < 200; ++i) {
      EXPECT_EQ(claim(store, "k" + std::to_string(i))->result, "k" + std::to_string(i));
    }
  }
}

TEST_F(MemoryStoreTest, ConcurrentClaimsOfOneKeyAcquireOnce) {
  MemoryStore store{MemoryStoreOptions{.clock = clock_}};
  for (int round = 0; round < 50; ++round) {
    const std::string k = "k" + std::to_string(round);
    std::atomic<int> acquired{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        if (claim(store, k)->status == ClaimStatus::acquired) acquired.fetch_add(1);
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(acquired.load(), 1) << k;
  }
}

TEST_F(MemoryStoreTest, AReclaimedRecordReplaysOnlyItsLatestResult) {
  MemoryStore store{MemoryStoreOptions{.shards = 1, .clock = clock_}};
  const std::string first(200, 'a');  // a heap buffer the record keeps until it is replaced
  Result<Claim> c = claim(store, "k");
  ASSERT_TRUE(
      store.commit(Ticket{"k", c->fence}, Completion{ClaimStatus::completed, first, seconds{1}})
          .ok());
  EXPECT_EQ(claim(store, "k")->result, first);

  clock_->advance(seconds{2});  // retention over: the next claim takes the record again
  c = claim(store, "k");
  ASSERT_EQ(c->status, ClaimStatus::acquired);
  EXPECT_TRUE(c->result.empty());
  ASSERT_TRUE(store.abort(Ticket{"k", c->fence}).ok());

  c = claim(store, "k");
  ASSERT_EQ(c->status, ClaimStatus::acquired);
  ASSERT_TRUE(
      store.commit(Ticket{"k", c->fence}, Completion{ClaimStatus::failed, "second", seconds{60}})
          .ok());
  Result<Claim> replay = claim(store, "k");
  EXPECT_EQ(replay->status, ClaimStatus::failed);
  EXPECT_EQ(replay->result, "second");
  // A commit under a lost fence changes nothing.
  EXPECT_EQ(store
                .commit(Ticket{"k", c->fence - 1},
                        Completion{ClaimStatus::completed, "late", seconds{60}})
                .error(),
            errc::lease_lost);
  EXPECT_EQ(claim(store, "k")->result, "second");
}

// Threads share one shard, so every claim and commit contends for its lock, and the losers of
// each key's race ask again until the winner's result is there: each key runs once, and every
// thread sees the winner's bytes.
TEST_F(MemoryStoreTest, ContendedClaimsAndCommitsOnOneShardKeepEveryResult) {
  MemoryStore store{MemoryStoreOptions{.shards = 1, .capacity = 0, .clock = clock_}};
  constexpr int kThreads = 6;
  constexpr int kKeys = 2000;
  std::atomic<int> acquired{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kKeys; ++i) {
        const std::string k = "key-" + std::to_string(i);
        const std::string mine = "result-of-" + k + "-by-thread-" + std::to_string(t);
        for (;;) {
          Result<Claim> c = claim(store, k);
          if (!c) {
            wrong.fetch_add(1);
            break;
          }
          if (c->status == ClaimStatus::acquired) {
            acquired.fetch_add(1);
            if (!store
                     .commit(Ticket{k, c->fence},
                             Completion{ClaimStatus::completed, mine, seconds{3600}})
                     .ok()) {
              wrong.fetch_add(1);
            }
            break;
          }
          if (c->status == ClaimStatus::completed) {
            if (c->result.rfind("result-of-" + k + "-by-thread-", 0) != 0) wrong.fetch_add(1);
            break;
          }
          if (c->status != ClaimStatus::in_progress) {
            wrong.fetch_add(1);
            break;
          }
          std::this_thread::yield();  // the winner has not committed yet
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(acquired.load(), kKeys);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(store.size(), static_cast<std::size_t>(kKeys));
}

}  // namespace
}  // namespace idem
