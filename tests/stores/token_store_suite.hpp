#pragma once
// The cases every one-time token store passes (MemoryTokenStore, RedisTokenStore). A store plugs
// in with TokenStoreTraits<S>:
//   static std::unique_ptr<S> make(Options guard);        a fresh store, execute() under `guard`
//   static void advance(S&, std::chrono::milliseconds);   let that much store time pass
//   static constexpr std::chrono::milliseconds lease;     a lease long enough for one step

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "idem/cached_store.hpp"
#include "idem/engine/token.hpp"
#include "idem/idem.hpp"

namespace idem::testing {

template <class S>
struct TokenStoreTraits;

template <class S>
class TokenStoreSuite : public ::testing::Test {
 protected:
  using Traits = TokenStoreTraits<S>;
  static constexpr std::chrono::milliseconds kLease = Traits::lease;

  void SetUp() override { store_ = Traits::make(Options{.scope = "tokens", .lease = kLease}); }
  void make(Options guard) { store_ = Traits::make(std::move(guard)); }

  S& store() { return *store_; }
  void advance(std::chrono::milliseconds d) { Traits::advance(*store_, d); }
  std::string issue(std::chrono::milliseconds ttl = std::chrono::minutes{10}) {
    Result<std::string> t = store_->issue(ttl);
    EXPECT_TRUE(t.has_value()) << (t ? "" : t.failure().describe());
    return t ? t.value() : std::string{};
  }

 private:
  std::unique_ptr<S> store_;
};

TYPED_TEST_SUITE_P(TokenStoreSuite);

TYPED_TEST_P(TokenStoreSuite, IssuedTokensAre128RandomBitsInBase64Url) {
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    const std::string t = this->issue();
    ASSERT_EQ(t.size(), 22u) << t;
    EXPECT_TRUE(detail::token_shaped(t)) << t;
    EXPECT_EQ(
        t.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
        std::string::npos);
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 200u);
}

TYPED_TEST_P(TokenStoreSuite, FirstUseRunsAndARepeatReplays) {
  const std::string t = this->issue();
  int runs = 0;
  auto first = this->store().execute(t, "order=1", [&] { return ++runs, std::string("receipt"); });
  ASSERT_TRUE(first) << first.message();
  EXPECT_TRUE(first.executed());
  EXPECT_TRUE(first.recorded());
  auto again = this->store().execute(t, "order=1", [&] { return ++runs, std::string("other"); });
  ASSERT_TRUE(again) << again.message();
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.value(), "receipt");
  EXPECT_EQ(runs, 1);
}

TYPED_TEST_P(TokenStoreSuite, UnknownForgedAndMalformedTokensAreInvalid) {
  const std::string real = this->issue();
  std::string forged = real;
  forged[3] = forged[3] == 'A' ? 'B' : 'A';  // well-formed, never issued
  const std::vector<std::string> bad = {forged,
                                        "AAAAAAAAAAAAAAAAAAAAAA",  // well-formed, never issued
                                        "",
                                        "short",
                                        real + "A",
                                        real.substr(0, 21) + "B",  // last char carries 2 bits
                                        real.substr(0, 21) + "!",
                                        std::string("\0\r\n{}", 5) + real.substr(5)};
  int runs = 0;
  for (const std::string& t : bad) {
    auto out = this->store().execute(t, [&] { return ++runs; });
    ASSERT_FALSE(out.has_value()) << t;
    EXPECT_EQ(out.error(), errc::token_invalid) << t << ": " << out.message();
  }
  EXPECT_EQ(runs, 0);
  EXPECT_TRUE(this->store().execute(real, [&] { return ++runs; }));  // the real one still works
  EXPECT_EQ(runs, 1);
}

TYPED_TEST_P(TokenStoreSuite, RefusedTokensAreRejectionsNotStoreErrors) {
  auto observer = std::make_shared<Observer>();
  this->make(Options{.scope = "tokens-observed", .lease = this->kLease, .observer = observer});
  const std::string t = this->issue();
  std::string unknown = t;
  unknown[0] = unknown[0] == 'A' ? 'B' : 'A';
  EXPECT_EQ(this->store().execute(unknown, [] { return 1; }).error(), errc::token_invalid);
  EXPECT_EQ(this->store().execute("malformed", [] { return 1; }).error(), errc::token_invalid);
  ASSERT_TRUE(this->store().execute(t, [] { return 1; }));
  const Counters c = observer->counters();
  EXPECT_EQ(c.rejected, 2u);
  EXPECT_EQ(c.store_errors, 0u);
  EXPECT_EQ(c.executed, 1u);
}

TYPED_TEST_P(TokenStoreSuite, ExpiredTokenIsInvalid) {
  const std::string t = this->issue(this->kLease);
  this->advance(this->kLease * 2);
  int runs = 0;
  auto out = this->store().execute(t, [&] { return ++runs; });
  EXPECT_EQ(out.error(), errc::token_invalid) << out.message();
  EXPECT_EQ(runs, 0);
}

TYPED_TEST_P(TokenStoreSuite, ATokenUsedWithAnotherPayloadIsInvalid) {
  const std::string t = this->issue();
  ASSERT_TRUE(this->store().execute(t, "amount=10", [] { return 1; }));
  int runs = 0;
  auto other = this->store().execute(t, "amount=99", [&] { return ++runs; });
  EXPECT_EQ(other.error(), errc::token_invalid) << other.message();
  EXPECT_EQ(runs, 0);
}

TYPED_TEST_P(TokenStoreSuite, HandlerThatThrowsReturnsTheTokenToPending) {
  const std::string t = this->issue();
  EXPECT_THROW((void)this->store().execute(t, "p", [&]() -> int { throw std::runtime_error("x"); }),
               std::runtime_error);
  // Pending again: the client may retry with the same token, even with another payload.
  int runs = 0;
  auto retry = this->store().execute(t, "p2", [&] { return ++runs; });
  ASSERT_TRUE(retry) << retry.message();
  EXPECT_TRUE(retry.executed());
  EXPECT_EQ(runs, 1);
}

TYPED_TEST_P(TokenStoreSuite, AbortAfterTheTokensExpiryLeavesItInvalid) {
  const std::string t = this->issue(this->kLease);
  EXPECT_THROW((void)this->store().execute(t,
                                           [&]() -> int {
                                             this->advance(this->kLease * 2);
                                             throw std::runtime_error("late");
                                           }),
               std::runtime_error);
  auto out = this->store().execute(t, [] { return 1; });
  EXPECT_EQ(out.error(), errc::token_invalid) << out.message();
}

TYPED_TEST_P(TokenStoreSuite, ConsumedTokenReplaysUntilTtlThenIsInvalid) {
  this->make(Options{.scope = "tokens-ttl", .lease = this->kLease, .ttl = this->kLease});
  const std::string t = this->issue();
  ASSERT_TRUE(this->store().execute(t, [] { return 5; }));
  auto replay = this->store().execute(t, [] { return 6; });
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay.value(), 5);
  this->advance(this->kLease * 2);
  EXPECT_EQ(this->store().execute(t, [] { return 7; }).error(), errc::token_invalid);
}

TYPED_TEST_P(TokenStoreSuite, ExpiredLeaseIsTakenOverAndTheOldHolderFencedOff) {
  const std::string t = this->issue();
  const detail::EffectiveKey key(this->store().options().scope, {}, t);
  const ClaimRequest request{key.view(), {1, 1}, this->kLease, std::chrono::hours{1}};
  Result<Claim> first = this->store().claim(request);
  ASSERT_TRUE(first) << first.failure().describe();
  ASSERT_EQ(first->status, ClaimStatus::acquired);
  Result<Claim> held = this->store().claim(request);
  ASSERT_TRUE(held);
  EXPECT_EQ(held->status, ClaimStatus::in_progress);
  EXPECT_GT(held->lease_remaining.count(), 0);
  this->advance(this->kLease + this->kLease / 2);
  Result<Claim> second = this->store().claim(request);
  ASSERT_TRUE(second);
  ASSERT_EQ(second->status, ClaimStatus::acquired);
  EXPECT_TRUE(second->took_over);
  EXPECT_EQ(second->fence, first->fence + 1);
  const Completion done{ClaimStatus::completed, "r", std::chrono::hours{1}};
  EXPECT_EQ(this->store().commit(Ticket{key.view(), first->fence}, done).error(), errc::lease_lost);
  EXPECT_EQ(this->store().abort(Ticket{key.view(), first->fence}).error(), errc::lease_lost);
  EXPECT_TRUE(this->store().commit(Ticket{key.view(), second->fence}, done).ok());
}

// A commit retried under its fence after it landed (its answer lost) succeeds; other bytes under
// that fence are lease_lost.
TYPED_TEST_P(TokenStoreSuite, CommitRepeatedUnderItsFenceAfterItLandedSucceeds) {
  const std::string t = this->issue();
  const detail::EffectiveKey key(this->store().options().scope, {}, t);
  const ClaimRequest request{key.view(), {1, 1}, this->kLease, std::chrono::hours{1}};
  Result<Claim> held = this->store().claim(request);
  ASSERT_TRUE(held) << held.failure().describe();
  ASSERT_EQ(held->status, ClaimStatus::acquired);
  const Ticket ticket{key.view(), held->fence};
  const Completion done{ClaimStatus::completed, "r", std::chrono::hours{1}};
  ASSERT_TRUE(this->store().commit(ticket, done).ok());
  const Status repeated = this->store().commit(ticket, done);
  EXPECT_TRUE(repeated.ok()) << repeated.failure().describe();
  const Completion other{ClaimStatus::completed, "other", std::chrono::hours{1}};
  EXPECT_EQ(this->store().commit(ticket, other).error(), errc::lease_lost);
  Result<Claim> replay = this->store().claim(request);
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay->status, ClaimStatus::completed);
  EXPECT_EQ(replay->result, "r");
}

TYPED_TEST_P(TokenStoreSuite, DoubleSubmitFromEightThreadsRunsOnce) {
  constexpr int kThreads = 8;
  for (int round = 0; round < 5; ++round) {
    const std::string t = this->issue();
    std::atomic<int> runs{0}, executed{0}, replayed{0}, busy{0}, other{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&] {
        while (!go) std::this_thread::yield();
        auto out = this->store().execute(t, "same form", [&] {
          runs.fetch_add(1);
          std::this_thread::sleep_for(std::chrono::milliseconds{5});
          return std::string("done");
        });
        if (out && out.executed()) {
          executed.fetch_add(1);
        } else if (out && out.replayed() && out.value() == "done") {
          replayed.fetch_add(1);
        } else if (out.error() == errc::in_progress) {
          busy.fetch_add(1);
        } else {
          other.fetch_add(1);
        }
      });
    }
    go = true;
    for (auto& th : threads) th.join();
    EXPECT_EQ(runs.load(), 1);
    EXPECT_EQ(executed.load(), 1);
    EXPECT_EQ(other.load(), 0);
    EXPECT_EQ(replayed.load() + busy.load(), kThreads - 1);
  }
}

// The two-phase form: begin<T>() holds the token until commit() or fail(); fail() returns it to
// pending (a retry may use it, even with another payload); after commit() a repeat's outcome
// replays the value, and begin() and execute() answer alike.
TYPED_TEST_P(TokenStoreSuite, BeginHoldsTheTokenUntilCommitOrFail) {
  this->make(Options{.scope = "tokens-begin", .lease = std::chrono::seconds{30}});
  const std::string t = this->issue();
  {
    auto held = this->store().template begin<std::string>(t, "order=1");
    ASSERT_TRUE(held.acquired()) << held.outcome().message();
    EXPECT_GT(held.fence(), 0u);
    auto busy = this->store().template begin<std::string>(t, "order=1");
    ASSERT_FALSE(busy.acquired());
    EXPECT_EQ(busy.outcome().error(), errc::in_progress) << busy.outcome().message();
    EXPECT_GT(busy.retry_after().count(), 0);
    held.fail("card declined");
    EXPECT_FALSE(held.acquired());
  }
  auto again = this->store().template begin<std::string>(t, "order=2");
  ASSERT_TRUE(again.acquired()) << again.outcome().message();
  Outcome<std::string> committed = again.commit("receipt");
  ASSERT_TRUE(committed) << committed.message();
  EXPECT_TRUE(committed.executed());
  EXPECT_TRUE(committed.recorded());

  auto repeat = this->store().template begin<std::string>(t, "order=2");
  ASSERT_FALSE(repeat.acquired());
  ASSERT_TRUE(repeat.outcome()) << repeat.outcome().message();
  EXPECT_TRUE(repeat.outcome().replayed());
  EXPECT_EQ(repeat.outcome().value(), "receipt");
  auto by_execute = this->store().execute(t, "order=2", [] { return std::string("other"); });
  ASSERT_TRUE(by_execute) << by_execute.message();
  EXPECT_TRUE(by_execute.replayed());
  EXPECT_EQ(by_execute.value(), "receipt");

  auto other = this->store().template begin<std::string>(t, "order=3");
  ASSERT_FALSE(other.acquired());
  EXPECT_EQ(other.outcome().error(), errc::token_invalid) << other.outcome().message();
  auto malformed = this->store().template begin<std::string>("not-a-token", "order=2");
  ASSERT_FALSE(malformed.acquired());
  EXPECT_EQ(malformed.outcome().error(), errc::token_invalid) << malformed.outcome().message();
}

// A CachedStore in front answers what the token store would: a consumed token replays from the
// cache, and the same token with another payload is still token_invalid (the cache passes it on),
// never payload_mismatch.
TYPED_TEST_P(TokenStoreSuite, BehindACacheATokenUsedWithAnotherPayloadIsStillInvalid) {
  const std::string t = this->issue();
  CachedStore<TypeParam&> cached{CachedStoreOptions{}, this->store()};
  IdempotencyGuard guard{cached, this->store().options()};
  auto first = guard.execute(Key{t}, "order=1", [] { return std::string("receipt"); });
  ASSERT_TRUE(first) << first.message();
  auto replay = guard.execute(Key{t}, "order=1", [] { return std::string("other"); });
  ASSERT_TRUE(replay.replayed()) << replay.message();
  EXPECT_EQ(replay.value(), "receipt");
  EXPECT_EQ(cached.hits(), 1u);
  auto other = guard.execute(Key{t}, "order=2", [] { return std::string("never"); });
  EXPECT_EQ(other.error(), errc::token_invalid) << other.message();
  EXPECT_EQ(this->store().execute(t, "order=2", [] { return 1; }).error(), errc::token_invalid);
}

REGISTER_TYPED_TEST_SUITE_P(
    TokenStoreSuite, IssuedTokensAre128RandomBitsInBase64Url, FirstUseRunsAndARepeatReplays,
    UnknownForgedAndMalformedTokensAreInvalid, RefusedTokensAreRejectionsNotStoreErrors,
    ExpiredTokenIsInvalid, ATokenUsedWithAnotherPayloadIsInvalid,
    HandlerThatThrowsReturnsTheTokenToPending, AbortAfterTheTokensExpiryLeavesItInvalid,
    ConsumedTokenReplaysUntilTtlThenIsInvalid, ExpiredLeaseIsTakenOverAndTheOldHolderFencedOff,
    CommitRepeatedUnderItsFenceAfterItLandedSucceeds, DoubleSubmitFromEightThreadsRunsOnce,
    BeginHoldsTheTokenUntilCommitOrFail, BehindACacheATokenUsedWithAnotherPayloadIsStillInvalid);

}  // namespace idem::testing
