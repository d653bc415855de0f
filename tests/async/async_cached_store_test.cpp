// AsyncCachedStore: the guard's cases through async_execute over it, and what the cache saves:
// a replay of a finished key answers without calling the store behind; another payload, a held
// key and an expired record still go to it; an aborted key is not cached; forgetting through
// cached_admin drops the cached record.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "async/async_guard_cases.hpp"
#include "idem/admin/cached_admin.hpp"
#include "idem/asio/cached_store.hpp"
#include "idem/memory/admin.hpp"
#include "idem/memory/store.hpp"

// Not in an anonymous namespace: the coroutine frames of the header's templates hold these types.
namespace idem::testing {

struct CachedMemoryBackend : IoRunner {
  using Store = AsyncCachedStore<ImmediateStore<MemoryStore>>;
  void set_up() {}
  bool ready() const { return true; }
  Store& store() { return cached_; }

  MemoryStore memory_;
  Store cached_{CachedStoreOptions{}, memory_};
};

INSTANTIATE_TYPED_TEST_SUITE_P(CachedMemory, AsyncGuardCases, CachedMemoryBackend);

/// The memory store run in place, counting the claims that reach it.
class CountedMemory {
 public:
  explicit CountedMemory(MemoryStore& store) : store_(store) {}
  net::awaitable<Result<Claim>> async_claim(const ClaimRequest& request) {
    ++claims;
    co_return store_.claim(request);
  }
  net::awaitable<Status> async_commit(const Ticket& ticket, const Completion& completion) {
    co_return store_.commit(ticket, completion);
  }
  net::awaitable<Status> async_abort(const Ticket& ticket) { co_return store_.abort(ticket); }
  net::awaitable<Status> async_extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    co_return store_.extend(ticket, lease);
  }
  int claims = 0;

 private:
  MemoryStore& store_;
};

class AsyncCachedStoreTest : public ::testing::Test {
 protected:
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  MemoryStore memory_{MemoryStoreOptions{.clock = clock_}};
  AsyncCachedStore<CountedMemory> cached_{CachedStoreOptions{.clock = clock_}, memory_};
  AsyncGuard<AsyncCachedStore<CountedMemory>> guard_{
      cached_, Options{.scope = "cache", .ttl = std::chrono::seconds{60}}};
  IoRunner runner_;

  Outcome<std::string> execute(const std::string& key, const std::string& payload) {
    return runner_.run(guard_.async_execute(key, payload, [] { return std::string("answer"); }));
  }
  int store_claims() { return cached_.inner().claims; }
};

TEST_F(AsyncCachedStoreTest, AReplayOfAFinishedKeyDoesNotReachTheStore) {
  ASSERT_TRUE(execute("k", "p").recorded());
  EXPECT_EQ(store_claims(), 1);
  for (int i = 0; i < 3; ++i) {
    auto replay = execute("k", "p");
    ASSERT_TRUE(replay.replayed()) << replay.message();
    EXPECT_EQ(replay.value(), "answer");
  }
  EXPECT_EQ(store_claims(), 1);
  EXPECT_EQ(cached_.hits(), 3u);
  EXPECT_EQ(cached_.size(), 1u);
}

TEST_F(AsyncCachedStoreTest, AnotherPayloadAndAnExpiredRecordGoToTheStore) {
  ASSERT_TRUE(execute("k", "p").recorded());
  EXPECT_EQ(execute("k", "other").error(), errc::payload_mismatch);
  EXPECT_EQ(store_claims(), 2);
  clock_->advance(std::chrono::seconds{61});  // past the record's ttl: the key is fresh again
  EXPECT_TRUE(execute("k", "p").recorded());
  EXPECT_EQ(store_claims(), 3);
  EXPECT_EQ(cached_.hits(), 0u);
}

TEST_F(AsyncCachedStoreTest, AnAbortedKeyIsNotCachedAndRunsAgain) {
  // The guard aborts the claim and lets the handler's exception through.
  EXPECT_THROW(runner_.run(guard_.async_execute(
                   "k", "p", []() -> std::string { throw std::runtime_error("handler failed"); })),
               std::runtime_error);
  EXPECT_EQ(cached_.size(), 0u);
  EXPECT_TRUE(execute("k", "p").recorded());
  EXPECT_EQ(store_claims(), 2);
}

TEST_F(AsyncCachedStoreTest, AForgetThroughTheCachedAdminDropsTheCachedRecord) {
  ASSERT_TRUE(execute("k", "p").recorded());
  ASSERT_TRUE(execute("k", "p").replayed());
  auto admin = admin::cached_admin(cached_, std::make_unique<admin::MemoryAdmin>(memory_));
  ASSERT_TRUE(admin->forget("cache", Key{"k"}).has_value());
  EXPECT_EQ(cached_.size(), 0u);
  EXPECT_TRUE(execute("k", "p").recorded()) << "a forgotten key runs again";
  EXPECT_EQ(store_claims(), 2);
}

}  // namespace idem::testing
