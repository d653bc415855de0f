#pragma once
// The cases every request-ID cache passes (MemoryRequestIdCache, RequestIdCache on Redis). A
// cache plugs in with RequestIdCacheTraits<C>:
//   static std::unique_ptr<C> make(Options guard);        a fresh cache, execute() under `guard`
//   static void advance(C&, std::chrono::milliseconds);   let that much cache time pass
//   static constexpr std::chrono::milliseconds lease;     a lease long enough for one step

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "idem/idem.hpp"

namespace idem::testing {

template <class C>
struct RequestIdCacheTraits;

template <class C>
class RequestIdCacheSuite : public ::testing::Test {
 protected:
  using Traits = RequestIdCacheTraits<C>;
  static constexpr std::chrono::milliseconds kLease = Traits::lease;

  void SetUp() override { make(Options{.scope = "gateway", .lease = kLease}); }
  void make(Options guard) { cache_ = Traits::make(std::move(guard)); }
  C& cache() { return *cache_; }
  void advance(std::chrono::milliseconds d) { Traits::advance(*cache_, d); }

 private:
  std::unique_ptr<C> cache_;
};

TYPED_TEST_SUITE_P(RequestIdCacheSuite);

TYPED_TEST_P(RequestIdCacheSuite, FirstRequestIsForwardedRepeatsGetItsResponse) {
  int forwarded = 0;
  auto first = this->cache().execute(Key{"req-1", "tenant-a"}, [&] {
    return ++forwarded, std::string("HTTP/1.1 201 Created\r\n\r\n{\"id\":7}");
  });
  ASSERT_TRUE(first) << first.message();
  EXPECT_TRUE(first.executed());
  for (int i = 0; i < 3; ++i) {
    auto again = this->cache().execute(Key{"req-1", "tenant-a"},
                                       [&] { return ++forwarded, std::string("other"); });
    ASSERT_TRUE(again) << again.message();
    EXPECT_TRUE(again.replayed());
    EXPECT_EQ(again.value(), "HTTP/1.1 201 Created\r\n\r\n{\"id\":7}");
  }
  EXPECT_EQ(forwarded, 1);
}

TYPED_TEST_P(RequestIdCacheSuite, TheSameIdFromAnotherPrincipalIsAnotherRequest) {
  int forwarded = 0;
  auto a = this->cache().execute(Key{"req-1", "tenant-a"}, [&] { return ++forwarded; });
  auto b = this->cache().execute(Key{"req-1", "tenant-b"}, [&] { return ++forwarded; });
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a.value(), 1);
  EXPECT_EQ(b.value(), 2);
  EXPECT_TRUE(b.executed());
}

TYPED_TEST_P(RequestIdCacheSuite, EmptyAndBinaryResponsesReplayExactly) {
  const std::string binary("\0\r\n{}\xff", 6);
  ASSERT_TRUE(this->cache().execute(Key{"empty"}, [] { return std::string(); }));
  ASSERT_TRUE(this->cache().execute(Key{"bin"}, [&] { return binary; }));
  auto empty = this->cache().execute(Key{"empty"}, [] { return std::string("x"); });
  auto bin = this->cache().execute(Key{"bin"}, [] { return std::string("x"); });
  ASSERT_TRUE(empty && bin);
  EXPECT_TRUE(empty.replayed());
  EXPECT_EQ(empty.value(), "");
  EXPECT_EQ(bin.value(), binary);
}

TYPED_TEST_P(RequestIdCacheSuite, AnotherPayloadUnderTheSameIdIsAMismatch) {
  ASSERT_TRUE(this->cache().execute(Key{"req"}, "body-1", [] { return 1; }));
  auto other = this->cache().execute(Key{"req"}, "body-2", [] { return 2; });
  EXPECT_EQ(other.error(), errc::payload_mismatch);
}

TYPED_TEST_P(RequestIdCacheSuite, ConcurrentDuplicatesForwardOnce) {
  constexpr int kThreads = 8;
  for (int round = 0; round < 5; ++round) {
    const std::string id = "dup-" + std::to_string(round);
    std::atomic<int> forwarded{0}, ok{0}, busy{0}, other{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&] {
        while (!go) std::this_thread::yield();
        auto out = this->cache().execute(Key{id, "t"}, [&] {
          forwarded.fetch_add(1);
          std::this_thread::sleep_for(std::chrono::milliseconds{5});
          return std::string("response");
        });
        if (out && out.value() == "response") {
          ok.fetch_add(1);
        } else if (out.error() == errc::in_progress) {
          busy.fetch_add(1);
        } else {
          other.fetch_add(1);
        }
      });
    }
    go = true;
    for (auto& th : threads) th.join();
    EXPECT_EQ(forwarded.load(), 1);
    EXPECT_EQ(other.load(), 0);
    EXPECT_EQ(ok.load() + busy.load(), kThreads);
  }
}

TYPED_TEST_P(RequestIdCacheSuite, AFailedForwardFreesTheIdForARetry) {
  EXPECT_THROW((void)this->cache().execute(
                   Key{"req"}, [&]() -> int { throw std::runtime_error("upstream down"); }),
               std::runtime_error);
  auto retry = this->cache().execute(Key{"req"}, [] { return 2; });
  ASSERT_TRUE(retry) << retry.message();
  EXPECT_TRUE(retry.executed());
}

TYPED_TEST_P(RequestIdCacheSuite, ResponsesExpireAfterTheirTtl) {
  this->make(Options{.scope = "gateway-ttl", .lease = this->kLease, .ttl = this->kLease});
  ASSERT_TRUE(this->cache().execute(Key{"req"}, [] { return 1; }));
  EXPECT_TRUE(this->cache().execute(Key{"req"}, [] { return 2; }).replayed());
  this->advance(this->kLease * 2);
  auto later = this->cache().execute(Key{"req"}, [] { return 3; });
  ASSERT_TRUE(later);
  EXPECT_TRUE(later.executed());
  EXPECT_EQ(later.value(), 3);
}

TYPED_TEST_P(RequestIdCacheSuite, ACrashedHoldersMarkerExpiresAndItsLateCommitIsRefused) {
  const detail::EffectiveKey key(this->cache().options().scope, "t", "req");
  const ClaimRequest request{key.view(), {1, 1}, this->kLease, this->kLease};
  Result<Claim> crashed = this->cache().claim(request);
  ASSERT_TRUE(crashed);
  ASSERT_EQ(crashed->status, ClaimStatus::acquired);
  Result<Claim> busy = this->cache().claim(request);
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, ClaimStatus::in_progress);
  EXPECT_GT(busy->lease_remaining.count(), 0);
  this->advance(this->kLease + this->kLease / 2);
  Result<Claim> next = this->cache().claim(request);
  ASSERT_TRUE(next);
  ASSERT_EQ(next->status, ClaimStatus::acquired);
  EXPECT_NE(next->fence, crashed->fence);
  const Completion done{ClaimStatus::completed, "late", std::chrono::hours{1}};
  EXPECT_EQ(this->cache().commit(Ticket{key.view(), crashed->fence}, done).error(),
            errc::lease_lost);
  EXPECT_EQ(this->cache().abort(Ticket{key.view(), crashed->fence}).error(), errc::lease_lost);
  ASSERT_TRUE(this->cache().commit(Ticket{key.view(), next->fence}, done).ok());
  Result<Claim> replay = this->cache().claim(request);
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay->status, ClaimStatus::completed);
  EXPECT_EQ(replay->result, "late");
}

// A commit retried by its holder after it landed (its answer lost) succeeds; another response
// under that holder is lease_lost.
TYPED_TEST_P(RequestIdCacheSuite, ACommitRepeatedByItsHolderAfterItLandedSucceeds) {
  const detail::EffectiveKey key(this->cache().options().scope, "t", "req");
  const ClaimRequest request{key.view(), {1, 1}, this->kLease, this->kLease};
  Result<Claim> held = this->cache().claim(request);
  ASSERT_TRUE(held);
  ASSERT_EQ(held->status, ClaimStatus::acquired);
  const Ticket ticket{key.view(), held->fence};
  const Completion done{ClaimStatus::completed, "response", std::chrono::hours{1}};
  ASSERT_TRUE(this->cache().commit(ticket, done).ok());
  const Status repeated = this->cache().commit(ticket, done);
  EXPECT_TRUE(repeated.ok()) << repeated.failure().describe();
  const Completion failed{ClaimStatus::failed, "response", std::chrono::hours{1}};
  EXPECT_EQ(this->cache().commit(ticket, failed).error(), errc::lease_lost);
  const Completion other{ClaimStatus::completed, "other", std::chrono::hours{1}};
  EXPECT_EQ(this->cache().commit(ticket, other).error(), errc::lease_lost);
  Result<Claim> replay = this->cache().claim(request);
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay->status, ClaimStatus::completed);
  EXPECT_EQ(replay->result, "response");
}

// A cache in front (CachedStore) keeps a replay only as long as the entry is still replayed.
TYPED_TEST_P(RequestIdCacheSuite, ReplaysSayHowLongTheResponseIsStillKept) {
  const std::chrono::milliseconds ttl = std::chrono::minutes{5};
  for (const ClaimStatus outcome : {ClaimStatus::completed, ClaimStatus::failed}) {
    const detail::EffectiveKey key(this->cache().options().scope, "t",
                                   outcome == ClaimStatus::completed ? "done" : "failed");
    const ClaimRequest request{key.view(), {1, 1}, this->kLease, this->kLease};
    Result<Claim> held = this->cache().claim(request);
    ASSERT_TRUE(held);
    ASSERT_EQ(held->status, ClaimStatus::acquired);
    ASSERT_TRUE(
        this->cache().commit(Ticket{key.view(), held->fence}, Completion{outcome, "r", ttl}).ok());
    Result<Claim> replay = this->cache().claim(request);
    ASSERT_TRUE(replay);
    EXPECT_EQ(replay->status, outcome);
    EXPECT_GT(replay->expires_in, ttl - std::chrono::seconds{30});
    EXPECT_LE(replay->expires_in, ttl);
  }
}

// The two-phase form: begin<T>() holds the request id until commit() or fail(); fail() frees it
// for a retry; after commit() a repeat's outcome replays the response, and begin() and execute()
// share entries.
TYPED_TEST_P(RequestIdCacheSuite, BeginHoldsTheIdUntilCommitOrFail) {
  this->make(Options{.scope = "gateway-begin", .lease = std::chrono::seconds{30}});
  const Key request{"req-b", "tenant"};
  {
    auto held = this->cache().template begin<std::string>(request, "body");
    ASSERT_TRUE(held.acquired()) << held.outcome().message();
    auto busy = this->cache().template begin<std::string>(request, "body");
    ASSERT_FALSE(busy.acquired());
    EXPECT_EQ(busy.outcome().error(), errc::in_progress) << busy.outcome().message();
    EXPECT_GT(busy.retry_after().count(), 0);
    held.fail("upstream down");
  }
  auto again = this->cache().template begin<std::string>(request, "body");
  ASSERT_TRUE(again.acquired()) << again.outcome().message();
  Outcome<std::string> committed = again.commit("HTTP/1.1 200 OK");
  ASSERT_TRUE(committed) << committed.message();
  EXPECT_TRUE(committed.recorded());

  auto repeat = this->cache().template begin<std::string>(request, "body");
  ASSERT_FALSE(repeat.acquired());
  ASSERT_TRUE(repeat.outcome()) << repeat.outcome().message();
  EXPECT_TRUE(repeat.outcome().replayed());
  EXPECT_EQ(repeat.outcome().value(), "HTTP/1.1 200 OK");
  auto by_execute = this->cache().execute(request, "body", [] { return std::string("other"); });
  ASSERT_TRUE(by_execute) << by_execute.message();
  EXPECT_TRUE(by_execute.replayed());
  EXPECT_EQ(by_execute.value(), "HTTP/1.1 200 OK");

  auto other = this->cache().template begin<std::string>(request, "another body");
  ASSERT_FALSE(other.acquired());
  EXPECT_EQ(other.outcome().error(), errc::payload_mismatch) << other.outcome().message();
}

REGISTER_TYPED_TEST_SUITE_P(RequestIdCacheSuite, FirstRequestIsForwardedRepeatsGetItsResponse,
                            TheSameIdFromAnotherPrincipalIsAnotherRequest,
                            EmptyAndBinaryResponsesReplayExactly,
                            AnotherPayloadUnderTheSameIdIsAMismatch,
                            ConcurrentDuplicatesForwardOnce, AFailedForwardFreesTheIdForARetry,
                            ResponsesExpireAfterTheirTtl,
                            ACrashedHoldersMarkerExpiresAndItsLateCommitIsRefused,
                            ACommitRepeatedByItsHolderAfterItLandedSucceeds,
                            ReplaysSayHowLongTheResponseIsStillKept,
                            BeginHoldsTheIdUntilCommitOrFail);

}  // namespace idem::testing
