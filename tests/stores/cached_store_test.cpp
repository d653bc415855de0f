// CachedStore's own promises: replays served without the backend, in-progress never cached,
// cached records expire no later than the backend's, bounded size with counted eviction (second
// chance for replayed records), mismatch answered by the backend, invalidation that no answer
// read before it undoes, and hits, fills, evictions and forgets under racing threads.

#include "idem/cached_store.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "idem/admin/cached_admin.hpp"
#include "idem/idem.hpp"
#include "idem/memory/admin.hpp"

namespace idem {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Passes every call to a MemoryStore and counts the claims that reach it.
class CountingStore {
 public:
  explicit CountingStore(MemoryStore& inner) : inner_(inner) {}

  Result<Claim> claim(const ClaimRequest& request) {
    claims.fetch_add(1);
    return inner_.claim(request);
  }
  Status commit(const Ticket& t, const Completion& c) { return inner_.commit(t, c); }
  Status abort(const Ticket& t) { return inner_.abort(t); }
  Status extend(const Ticket& t, milliseconds lease) { return inner_.extend(t, lease); }

  std::atomic<int> claims{0};

 private:
  MemoryStore& inner_;
};
static_assert(Store<CountingStore>);
static_assert(Store<CachedStore<CountingStore>>);
static_assert(Store<CachedStore<MemoryStore&>>);

constexpr Fingerprint kFp{1, 1};
constexpr Fingerprint kOtherFp{9, 9};

class CachedStoreTest : public ::testing::Test {
 protected:
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  MemoryStore backend_{MemoryStoreOptions{.shards = 4, .clock = clock_}};

  CachedStoreOptions options(CachedStoreOptions o = {}) {
    o.clock = clock_;
    return o;
  }

  template <class St>
  static Result<Claim> claim(St& s, std::string_view k, Fingerprint fp = kFp) {
    return s.claim(ClaimRequest{k, fp, seconds{30}, seconds{3600}});
  }
  // Claims and commits `k` through `s` with result "r:<k>".
  template <class St>
  static void complete(St& s, std::string_view k, milliseconds ttl = seconds{3600},
                       ClaimStatus status = ClaimStatus::completed) {
    Result<Claim> c = claim(s, k);
    ASSERT_TRUE(c.has_value());
    ASSERT_EQ(c->status, ClaimStatus::acquired);
    const std::string result = "r:" + std::string(k);
    ASSERT_TRUE(s.commit(Ticket{k, c->fence}, Completion{status, result, ttl}).ok());
  }
};

TEST_F(CachedStoreTest, ReplayAfterCommitIsServedWithoutCallingTheStore) {
  CachedStore<CountingStore> cached{options(), backend_};
  IdempotencyGuard guard{cached, Options{.scope = "t", .clock = clock_}};
  int runs = 0;
  auto handler = [&] { return "receipt-" + std::to_string(++runs); };

  auto first = guard.execute("k", "payload", handler);
  ASSERT_TRUE(first.recorded());
  EXPECT_EQ(cached.inner().claims.load(), 1);
  for (int i = 0; i < 3; ++i) {
    auto again = guard.execute("k", "payload", handler);
    ASSERT_TRUE(again.replayed());
    EXPECT_EQ(again.value(), "receipt-1");
  }
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(cached.inner().claims.load(), 1);  // no replay reached the store
  EXPECT_EQ(cached.hits(), 3u);
  EXPECT_EQ(cached.misses(), 1u);
}

TEST_F(CachedStoreTest, StatsAreTheWrappedStoresWithTheCachesOwn) {
  CachedStore<MemoryStore&> cached{options(), backend_};
  complete(cached, "a");
  complete(cached, "b");
  for (int i = 0; i < 2; ++i) ASSERT_EQ(claim(cached, "a")->status, ClaimStatus::completed);

  const StoreStats s = cached.stats();
  EXPECT_EQ(s.store, "memory");  // the wrapped store's name and figures
  ASSERT_TRUE(s.records.has_value());
  EXPECT_EQ(*s.records, 2u);
  ASSERT_TRUE(s.cache.has_value());
  EXPECT_EQ(s.cache->entries, 2u);
  EXPECT_EQ(s.cache->hits, 2u);
  EXPECT_EQ(s.cache->misses, 2u);
  EXPECT_EQ(s.cache->evictions, 0u);

  // A wrapped store without stats(): the cache's figures alone.
  CachedStore<CountingStore> bare{options(), backend_};
  complete(bare, "c");
  const StoreStats only = bare.stats();
  EXPECT_FALSE(only.records.has_value());
  ASSERT_TRUE(only.cache.has_value());
  EXPECT_EQ(only.cache->entries, 1u);
  EXPECT_EQ(only.cache->misses, 1u);
}

TEST_F(CachedStoreTest, InProgressIsNeverCached) {
  CachedStore<CountingStore> cached{options(), backend_};
  const Claim held = claim(cached, "k").value();
  ASSERT_EQ(held.status, ClaimStatus::acquired);
  for (int i = 0; i < 3; ++i) {
    Result<Claim> again = claim(cached, "k");
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->status, ClaimStatus::in_progress);
  }
  EXPECT_EQ(cached.inner().claims.load(), 4);  // every claim asked the store
  EXPECT_EQ(cached.size(), 0u);
  EXPECT_EQ(cached.hits(), 0u);

  // Aborted: the next claim acquires again from the store, and still nothing is cached.
  ASSERT_TRUE(cached.abort(Ticket{"k", held.fence}).ok());
  const Claim second = claim(cached, "k").value();
  EXPECT_EQ(second.status, ClaimStatus::acquired);
  EXPECT_GT(second.fence, held.fence);
  EXPECT_EQ(cached.size(), 0u);

  ASSERT_TRUE(cached
                  .commit(Ticket{"k", second.fence},
                          Completion{ClaimStatus::completed, "done", seconds{60}})
                  .ok());
  EXPECT_EQ(cached.size(), 1u);
}

TEST_F(CachedStoreTest, CommittedEntryExpiresNoLaterThanTheRecord) {
  CachedStore<CountingStore> cached{options({.max_ttl = std::chrono::hours{1}}), backend_};
  complete(cached, "k", seconds{10});
  clock_->advance(seconds{9});
  EXPECT_EQ(claim(cached, "k")->status, ClaimStatus::completed);
  EXPECT_EQ(cached.inner().claims.load(), 1);  // from the cache
  clock_->advance(seconds{2});                 // the record expired in the store
  Result<Claim> after = claim(cached, "k");
  EXPECT_EQ(after->status, ClaimStatus::acquired);  // the store decided, not a stale cache
  EXPECT_EQ(cached.inner().claims.load(), 2);
}

// A store whose first commit lands and loses its answer (outcome_unknown), as a dropped
// connection does; the guard's retry then finds its own completion.
class LostFirstCommitReply {
 public:
  explicit LostFirstCommitReply(MemoryStore& inner) : inner_(inner) {}
  Result<Claim> claim(const ClaimRequest& r) { return inner_.claim(r); }
  Status commit(const Ticket& t, const Completion& c) {
    Status landed = inner_.commit(t, c);
    if (landed && !lost_.exchange(true)) return Status(errc::outcome_unknown, "reply lost");
    return landed;
  }
  Status abort(const Ticket& t) { return inner_.abort(t); }
  Status extend(const Ticket& t, milliseconds lease) { return inner_.extend(t, lease); }

 private:
  MemoryStore& inner_;
  std::atomic<bool> lost_{false};
};

TEST_F(CachedStoreTest, ARetriedCommitIsCachedNoLongerThanTheTryThatLanded) {
  // The first try landed at t0 (the record expires at t0 + ttl) and its answer was lost; the
  // retry, 5 s later, hears success. The cached copy must go by t0 + ttl, not t0 + 5 s + ttl.
  CachedStore<LostFirstCommitReply> cached{options({.max_ttl = std::chrono::hours{1}}), backend_};
  Result<Claim> c = claim(cached, "k");
  ASSERT_EQ(c->status, ClaimStatus::acquired);
  const Completion done{ClaimStatus::completed, "r", seconds{10}};
  ASSERT_EQ(cached.commit(Ticket{"k", c->fence}, done).error(), errc::outcome_unknown);
  clock_->advance(seconds{5});
  ASSERT_TRUE(cached.commit(Ticket{"k", c->fence}, done).ok());  // finds its own completion
  clock_->advance(seconds{6});  // 11 s after the landed try: the record expired in the store
  EXPECT_EQ(claim(cached, "k")->status, ClaimStatus::acquired);
}

TEST_F(CachedStoreTest, MaxTtlShortensTheEntryButNotTheRecord) {
  CachedStore<CountingStore> cached{options({.max_ttl = seconds{1}}), backend_};
  complete(cached, "k", seconds{3600});
  clock_->advance(seconds{2});
  Result<Claim> replay = claim(cached, "k");
  EXPECT_EQ(replay->status, ClaimStatus::completed);
  EXPECT_EQ(replay->result, "r:k");
  EXPECT_EQ(cached.inner().claims.load(), 2);  // the cached entry had gone: the store answered
  EXPECT_EQ(cached.misses(), 2u);
}

TEST_F(CachedStoreTest, ClaimThatReturnsCompletedFillsForTheRecordsTimeLeftOnly) {
  complete(backend_, "k", seconds{10});  // committed by another process, not through the cache
  CachedStore<CountingStore> cached{options({.max_ttl = std::chrono::hours{1}}), backend_};
  clock_->advance(seconds{4});
  EXPECT_EQ(claim(cached, "k")->status, ClaimStatus::completed);  // from the store: fills
  EXPECT_EQ(cached.inner().claims.load(), 1);
  clock_->advance(seconds{5});  // 9 s after the commit
  EXPECT_EQ(claim(cached, "k")->status, ClaimStatus::completed);
  EXPECT_EQ(cached.inner().claims.load(), 1);  // from the cache
  clock_->advance(seconds{2});                 // 11 s: the record is gone
  EXPECT_EQ(claim(cached, "k")->status, ClaimStatus::acquired);
  EXPECT_EQ(cached.inner().claims.load(), 2);
}

TEST_F(CachedStoreTest, FullCacheEvictsTheLeastRecentlyUsedAndCountsIt) {
  CachedStore<CountingStore> cached{options({.shards = 1, .max_entries = 2}), backend_};
  complete(cached, "a");
  complete(cached, "b");
  EXPECT_EQ(claim(cached, "a")->status, ClaimStatus::completed);  // "a" now most recent
  EXPECT_EQ(cached.evictions(), 0u);
  const int before = cached.inner().claims.load();
  complete(cached, "c");  // evicts "b"
  EXPECT_EQ(cached.evictions(), 1u);
  EXPECT_EQ(cached.size(), 2u);
  EXPECT_EQ(claim(cached, "a")->status, ClaimStatus::completed);
  EXPECT_EQ(claim(cached, "c")->status, ClaimStatus::completed);
  EXPECT_EQ(cached.inner().claims.load(), before + 1);  // only c's own claim reached the store
  Result<Claim> b = claim(cached, "b");  // evicted from the cache, still in the store
  EXPECT_EQ(b->status, ClaimStatus::completed);
  EXPECT_EQ(b->result, "r:b");
  EXPECT_EQ(cached.inner().claims.load(), before + 2);
}

// A full shard passes over records replayed since it last looked (each once, unmarked) and evicts
// the oldest record nobody replayed.
TEST_F(CachedStoreTest, FullCacheGivesReplayedRecordsASecondChance) {
  CachedStore<CountingStore> cached{options({.shards = 1, .max_entries = 3}), backend_};
  complete(cached, "a");
  complete(cached, "b");
  complete(cached, "c");
  EXPECT_EQ(claim(cached, "a")->status, ClaimStatus::completed);  // "a" and "b" replayed,
  EXPECT_EQ(claim(cached, "b")->status, ClaimStatus::completed);  // "c" not
  complete(cached, "d");                                          // evicts "c"
  EXPECT_EQ(cached.evictions(), 1u);
  EXPECT_EQ(cached.size(), 3u);
  const int before = cached.inner().claims.load();
  for (const char* k : {"a", "b", "d"}) EXPECT_EQ(claim(cached, k)->result, "r:" + std::string(k));
  EXPECT_EQ(cached.inner().claims.load(), before);  // all three from the cache
  Result<Claim> c = claim(cached, "c");             // from the store, which still has it
  EXPECT_EQ(c->result, "r:c");
  EXPECT_EQ(cached.inner().claims.load(), before + 1);
  // That claim filled "c" again. "a", "b" and "d" were all replayed since the last walk: each
  // loses its mark and goes to the back once, and then the oldest, "a", goes.
  EXPECT_EQ(cached.size(), 3u);
  EXPECT_EQ(cached.evictions(), 2u);
  for (const char* k : {"b", "d", "c"}) EXPECT_EQ(claim(cached, k)->result, "r:" + std::string(k));
  EXPECT_EQ(cached.inner().claims.load(), before + 1);
  EXPECT_EQ(claim(cached, "a")->result, "r:a");
  EXPECT_EQ(cached.inner().claims.load(), before + 2);
}

// An expired record at the head of a full shard is dropped without counting as an eviction,
// even when it was replayed.
TEST_F(CachedStoreTest, AnExpiredRecordMakesRoomWithoutAnEviction) {
  CachedStore<CountingStore> cached{options({.shards = 1, .max_entries = 2}), backend_};
  complete(cached, "short", seconds{5});
  complete(cached, "long", seconds{3600});
  EXPECT_EQ(claim(cached, "short")->status, ClaimStatus::completed);
  clock_->advance(seconds{6});
  complete(cached, "new");
  EXPECT_EQ(cached.evictions(), 0u);
  EXPECT_EQ(cached.size(), 2u);
}

// Passes claims to a MemoryStore and runs `during_claim` after the store answered, before the
// answer returns to the cache: what another thread's invalidate() at that moment looks like.
class HookedStore {
 public:
  explicit HookedStore(MemoryStore& inner) : inner_(inner) {}
  Result<Claim> claim(const ClaimRequest& request) {
    Result<Claim> answer = inner_.claim(request);
    if (during_claim) std::exchange(during_claim, nullptr)();
    return answer;
  }
  Status commit(const Ticket& t, const Completion& c) { return inner_.commit(t, c); }
  Status abort(const Ticket& t) { return inner_.abort(t); }
  Status extend(const Ticket& t, milliseconds lease) { return inner_.extend(t, lease); }

  std::function<void()> during_claim;

 private:
  MemoryStore& inner_;
};

TEST_F(CachedStoreTest, AnInvalidatedRecordIsAskedOfTheStoreAndAnOlderAnswerDoesNotFill) {
  CachedStore<HookedStore> cached{options(), backend_};
  complete(cached, "k");
  EXPECT_EQ(claim(cached, "k")->status, ClaimStatus::completed);
  EXPECT_EQ(cached.hits(), 1u);
  cached.invalidate("k");
  EXPECT_EQ(cached.size(), 0u);

  // The store's completed answer was read before the invalidation: it must not fill the cache.
  cached.inner().during_claim = [&] { cached.invalidate("k"); };
  EXPECT_EQ(claim(cached, "k")->status, ClaimStatus::completed);
  EXPECT_EQ(cached.size(), 0u);
  EXPECT_EQ(cached.hits(), 1u);
  // The next one fills as usual, and the one after hits.
  EXPECT_EQ(claim(cached, "k")->status, ClaimStatus::completed);
  EXPECT_EQ(cached.size(), 1u);
  EXPECT_EQ(claim(cached, "k")->status, ClaimStatus::completed);
  EXPECT_EQ(cached.hits(), 2u);

  cached.clear();
  EXPECT_EQ(cached.size(), 0u);
  EXPECT_EQ(claim(cached, "k")->status, ClaimStatus::completed);
  EXPECT_EQ(cached.misses(), 4u);  // the first claim of complete(), and three since
}

TEST_F(CachedStoreTest, ByteBoundEvictsAndSkipsRecordsLargerThanAShard) {
  CachedStore<CountingStore> cached{options({.shards = 1, .max_bytes = 400}), backend_};
  complete(cached, "a");  // about 130 bytes each with the overhead
  complete(cached, "b");
  complete(cached, "c");
  EXPECT_EQ(cached.size(), 3u);
  complete(cached, "d");
  EXPECT_EQ(cached.size(), 3u);
  EXPECT_EQ(cached.evictions(), 1u);

  const Claim big = claim(cached, "big").value();
  const std::string large(1000, 'x');
  ASSERT_TRUE(
      cached
          .commit(Ticket{"big", big.fence}, Completion{ClaimStatus::completed, large, seconds{60}})
          .ok());
  EXPECT_EQ(cached.size(), 3u);  // too large for the cache, stored in the backend all the same
  EXPECT_EQ(claim(cached, "big")->result, large);
}

// A cached record answers its own payload only: another payload goes to the store, which words
// the refusal (a token store says token_invalid), and the cached record stays.
TEST_F(CachedStoreTest, AnotherFingerprintIsAskedOfTheStore) {
  CachedStore<CountingStore> cached{options(), backend_};
  const Claim held = claim(cached, "k", kFp).value();
  ASSERT_TRUE(
      cached.commit(Ticket{"k", held.fence}, Completion{ClaimStatus::completed, "r", seconds{60}})
          .ok());
  const int before = cached.inner().claims.load();
  Result<Claim> other = claim(cached, "k", kOtherFp);
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->status, ClaimStatus::mismatch);
  EXPECT_EQ(other->fence, held.fence);
  EXPECT_EQ(cached.inner().claims.load(), before + 1);
  EXPECT_EQ(claim(cached, "k", kFp)->result, "r");  // still cached: no store call
  EXPECT_EQ(cached.inner().claims.load(), before + 1);

  IdempotencyGuard guard{cached, Options{.scope = "t", .clock = clock_}};
  ASSERT_TRUE(guard.execute("g", "one", [] { return 1; }).recorded());
  auto refused = guard.execute("g", "two", [] { return 2; });
  EXPECT_EQ(refused.error(), errc::payload_mismatch);
  EXPECT_TRUE(guard.execute("g", "one", [] { return 3; }).replayed());
  EXPECT_EQ(cached.hits(), 2u);  // the two replays of "r" and of "one"
}

TEST_F(CachedStoreTest, FailedRecordsAreCachedUnlessTurnedOff) {
  CachedStore<CountingStore> on{options(), backend_};
  complete(on, "f", seconds{60}, ClaimStatus::failed);
  Result<Claim> replay = claim(on, "f");
  EXPECT_EQ(replay->status, ClaimStatus::failed);
  EXPECT_EQ(replay->result, "r:f");
  EXPECT_EQ(on.hits(), 1u);

  CachedStore<CountingStore> off{options({.cache_failures = false}), backend_};
  complete(off, "g", seconds{60}, ClaimStatus::failed);
  EXPECT_EQ(claim(off, "g")->status, ClaimStatus::failed);
  EXPECT_EQ(claim(off, "f")->status, ClaimStatus::failed);
  EXPECT_EQ(off.hits(), 0u);
  EXPECT_EQ(off.size(), 0u);
}

TEST_F(CachedStoreTest, AStaleHoldersCommitCachesNothingAndTheNewHoldersResultReplays) {
  CachedStore<CountingStore> cached{options(), backend_};
  const Claim stale = claim(cached, "k").value();
  clock_->advance(seconds{31});
  const Claim taker = claim(cached, "k").value();
  ASSERT_TRUE(taker.took_over);
  EXPECT_EQ(cached
                .commit(Ticket{"k", stale.fence},
                        Completion{ClaimStatus::completed, "stale", seconds{60}})
                .error(),
            errc::lease_lost);
  EXPECT_EQ(cached.size(), 0u);
  ASSERT_TRUE(
      cached
          .commit(Ticket{"k", taker.fence}, Completion{ClaimStatus::completed, "new", seconds{60}})
          .ok());
  Result<Claim> replay = claim(cached, "k");
  EXPECT_EQ(replay->result, "new");
  EXPECT_EQ(replay->fence, taker.fence);
  EXPECT_EQ(cached.hits(), 1u);
}

TEST_F(CachedStoreTest, AReferenceTypeWrapsAStoreThatLivesElsewhere) {
  CachedStore<MemoryStore&> cached{options(), backend_};
  complete(cached, "k");
  EXPECT_EQ(&cached.inner(), &backend_);
  EXPECT_EQ(claim(backend_, "k")->result, "r:k");
  EXPECT_EQ(claim(cached, "k")->result, "r:k");
  EXPECT_EQ(cached.hits(), 1u);
}

TEST(CachedStoreRaceTest, GuardRunsEachKeyOnceAndRepeatsHitTheCache) {
  constexpr int kThreads = 8;
  constexpr int kKeys = 16;
  constexpr int kRounds = 4;
  MemoryStore backend;
  CachedStore<CountingStore> cached{CachedStoreOptions{.shards = 4}, backend};
  IdempotencyGuard guard{cached,
                         Options{.scope = "race", .in_progress = Wait{.timeout = seconds{20}}}};
  std::vector<std::atomic<int>> runs(kKeys);
  std::mutex seen_mutex;
  std::map<int, std::vector<std::string>> seen;
  std::atomic<int> failures{0};

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        for (int i = 0; i < kKeys; ++i) {
          const int k = (i + t) % kKeys;
          auto out = guard.execute("key-" + std::to_string(k), "p", [&, k, t] {
            runs[k].fetch_add(1);
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            return "value of " + std::to_string(k) + " from " + std::to_string(t);
          });
          if (!out) {
            failures.fetch_add(1);
            continue;
          }
          std::lock_guard lock(seen_mutex);
          seen[k].push_back(out.value());
        }
      }
    });
  }
  for (auto& th : threads) th.join();

  EXPECT_EQ(failures.load(), 0);
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_EQ(runs[k].load(), 1) << "key " << k;
    ASSERT_EQ(seen[k].size(), static_cast<std::size_t>(kThreads * kRounds));
    for (const std::string& v : seen[k]) EXPECT_EQ(v, seen[k].front()) << "key " << k;
  }
  // Every key was committed through the cache in the first round, so later rounds never reach
  // the store: at least kThreads * kKeys * (kRounds - 1) claims were hits.
  EXPECT_GE(cached.hits(), static_cast<std::uint64_t>(kThreads * kKeys * (kRounds - 1)));
  EXPECT_EQ(cached.misses(), static_cast<std::uint64_t>(cached.inner().claims.load()));
}

// Threads replaying a few keys through a small cache, while evictions walk the shard and another
// thread invalidates: every answer is the key's own result, and each claim is a hit or a miss.
TEST(CachedStoreRaceTest, HitsFillsEvictionsAndInvalidationsAgreeUnderRacingThreads) {
  constexpr int kThreads = 4;
  constexpr int kKeys = 64;
  constexpr int kClaims = 4000;
  MemoryStore backend;
  CachedStore<CountingStore> cached{CachedStoreOptions{.shards = 2, .max_entries = 16}, backend};
  auto key = [](int i) { return "key-" + std::to_string(i); };
  for (int i = 0; i < kKeys; ++i) {
    const std::string k = key(i);
    const Claim c = cached.claim(ClaimRequest{k, kFp, seconds{30}, seconds{3600}}).value();
    ASSERT_EQ(c.status, ClaimStatus::acquired);
    ASSERT_TRUE(
        cached
            .commit(Ticket{k, c.fence}, Completion{ClaimStatus::completed, "r:" + k, seconds{3600}})
            .ok());
  }
  const std::uint64_t hits_before = cached.hits();
  const std::uint64_t misses_before = cached.misses();
  std::atomic<int> wrong{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int n = 0; n < kClaims; ++n) {
        // Mostly a hot quarter of the keys, so that both marks and evictions happen.
        const int i = (n % 4 == 0) ? (n * 7 + t) % kKeys : (n + t) % (kKeys / 4);
        const std::string k = key(i);
        Result<Claim> c = cached.claim(ClaimRequest{k, kFp, seconds{30}, seconds{3600}});
        if (!c || c->status != ClaimStatus::completed || c->result != "r:" + k) wrong.fetch_add(1);
      }
    });
  }
  std::thread invalidator([&] {
    for (int n = 0; !stop.load(); ++n) cached.invalidate(key(n % kKeys));
  });
  for (auto& th : threads) th.join();
  stop.store(true);
  invalidator.join();

  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(cached.hits() - hits_before + cached.misses() - misses_before,
            static_cast<std::uint64_t>(kThreads * kClaims));
  EXPECT_GT(cached.evictions(), 0u);
  EXPECT_LE(cached.size(), 16u);
}

// A forget through the cache's admin, with threads replaying the key from the cache all along:
// once forget() returned, no claim that starts after it replays the forgotten result.
TEST(CachedStoreRaceTest, NoHitOutlivesAForgetThroughTheCachesAdmin) {
  constexpr int kThreads = 3;
  constexpr int kClaimsEachSide = 2000;
  CachedStore<MemoryStore> cached{CachedStoreOptions{.shards = 2}, MemoryStoreOptions{}};
  std::unique_ptr<admin::Admin> admin =
      admin::cached_admin(cached, std::make_unique<admin::MemoryAdmin>(cached.inner()));
  const std::string k = admin::detail::effective_key("s", Key{"k"});
  const Claim held = cached.claim(ClaimRequest{k, kFp, seconds{30}, seconds{3600}}).value();
  ASSERT_TRUE(
      cached.commit(Ticket{k, held.fence}, Completion{ClaimStatus::completed, "old", seconds{3600}})
          .ok());

  std::latch warmed(kThreads);  // every thread replayed from the cache before the forget
  std::atomic<bool> forgotten{false};
  std::atomic<int> stale{0};
  std::atomic<int> replayed_before{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int n = 0; n < 2 * kClaimsEachSide; ++n) {
        if (n == kClaimsEachSide) warmed.count_down();
        const bool after = forgotten.load();
        Result<Claim> c = cached.claim(ClaimRequest{k, kFp, seconds{30}, seconds{3600}});
        const bool old = c && c->status == ClaimStatus::completed && c->result == "old";
        if (after && old) stale.fetch_add(1);
        if (!after && old) replayed_before.fetch_add(1);
      }
    });
  }
  warmed.wait();
  ASSERT_TRUE(admin->forget("s", Key{"k"}).has_value());
  forgotten.store(true);
  for (auto& th : threads) th.join();

  EXPECT_EQ(stale.load(), 0);
  EXPECT_GE(replayed_before.load(), kThreads * kClaimsEachSide);
  EXPECT_GE(cached.hits(), static_cast<std::uint64_t>(kThreads * kClaimsEachSide));
  Result<Claim> now = cached.claim(ClaimRequest{k, kFp, seconds{30}, seconds{3600}});
  ASSERT_TRUE(now.has_value());
  EXPECT_NE(now->status, ClaimStatus::completed);  // held by the first claim after the forget
}

}  // namespace
}  // namespace idem
