#pragma once
// idem's conformance kit for one-time token stores: the cases every token store passes (idem's
// MemoryTokenStore and RedisTokenStore, and one written for another database), on GoogleTest:
//
//   #include <idem/testing/token_store_conformance.hpp>
//
//   template <>
//   struct idem::testing::TokenStoreTraits<MyTokenStore> {
//     static constexpr std::chrono::milliseconds lease{500};  // long enough for one step
//     static std::unique_ptr<MyTokenStore> make(idem::Options guard);  // execute() under guard
//     static void advance(MyTokenStore&, std::chrono::milliseconds d);  // let d of store time pass
//   };
//
//   IDEM_TOKEN_STORE_CONFORMANCE(MyTokenStore, MyTokenStore);  // at namespace scope, once
//
// The store issues tokens (issue(ttl)), runs execute()/begin() on them as the guard does and
// answers claim/commit/abort under their effective keys (idem/memory/token_store.hpp shows the
// interface). make() runs before every case and may skip it (GTEST_SKIP() in a lambda) or fail
// it, and return null then; advance() sleeps when the store reads a clock the kit cannot move.
// The cases run as <Prefix>/TokenStoreConformance.<Case>.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "idem/cached_store.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/engine/token.hpp"
#include "idem/guard.hpp"
#include "idem/observer.hpp"
#include "idem/testing/detail/conformance_case.hpp"
#include "idem/testing/guarded_store_test.hpp"

namespace idem::testing {

/// Specialised by each token store's author (above).
template <class S>
struct TokenStoreTraits;

/// The fixture of a token case: GuardedStoreTest and a token issued by the store.
template <class S>
class TokenStoreTest : public GuardedStoreTest<S, TokenStoreTraits<S>> {
 protected:
  std::string issue(std::chrono::milliseconds ttl = std::chrono::minutes{10}) {
    Result<std::string> t = this->store().issue(ttl);
    EXPECT_TRUE(t.has_value()) << (t ? "" : t.failure().describe());
    return t ? t.value() : std::string{};
  }
};

}  // namespace idem::testing

// Declares the token case `Name` and opens its body; `S` is the store's type.
#define IDEM_TOKEN_CASE(Name) IDEM_TESTING_CASE_OF(::idem::testing::TokenStoreTest, Store_, Name)

namespace idem::testing::token_cases {

IDEM_TOKEN_CASE(IssuedTokensAre128RandomBitsInBase64Url) {
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

IDEM_TOKEN_CASE(FirstUseRunsAndARepeatReplays) {
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

IDEM_TOKEN_CASE(UnknownForgedAndMalformedTokensAreInvalid) {
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

IDEM_TOKEN_CASE(RefusedTokensAreRejectionsNotStoreErrors) {
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

IDEM_TOKEN_CASE(ExpiredTokenIsInvalid) {
  const std::string t = this->issue(this->kLease);
  this->advance(this->kLease * 2);
  int runs = 0;
  auto out = this->store().execute(t, [&] { return ++runs; });
  EXPECT_EQ(out.error(), errc::token_invalid) << out.message();
  EXPECT_EQ(runs, 0);
}

IDEM_TOKEN_CASE(ATokenUsedWithAnotherPayloadIsInvalid) {
  const std::string t = this->issue();
  ASSERT_TRUE(this->store().execute(t, "amount=10", [] { return 1; }));
  int runs = 0;
  auto other = this->store().execute(t, "amount=99", [&] { return ++runs; });
  EXPECT_EQ(other.error(), errc::token_invalid) << other.message();
  EXPECT_EQ(runs, 0);
}

IDEM_TOKEN_CASE(HandlerThatThrowsReturnsTheTokenToPending) {
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

IDEM_TOKEN_CASE(AbortAfterTheTokensExpiryLeavesItInvalid) {
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

IDEM_TOKEN_CASE(ConsumedTokenReplaysUntilTtlThenIsInvalid) {
  this->make(Options{.scope = "tokens-ttl", .lease = this->kLease, .ttl = this->kLease});
  const std::string t = this->issue();
  ASSERT_TRUE(this->store().execute(t, [] { return 5; }));
  auto replay = this->store().execute(t, [] { return 6; });
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay.value(), 5);
  this->advance(this->kLease * 2);
  EXPECT_EQ(this->store().execute(t, [] { return 7; }).error(), errc::token_invalid);
}

IDEM_TOKEN_CASE(ExpiredLeaseIsTakenOverAndTheOldHolderFencedOff) {
  const detail::EffectiveKey key(this->store().options().scope, {}, this->issue());
  Claim first, second;
  ASSERT_NO_FATAL_FAILURE(this->lapse_and_claim_again(
      ClaimRequest{key.view(), {1, 1}, this->kLease, std::chrono::hours{1}}, first, second));
  EXPECT_TRUE(second.took_over);
  EXPECT_EQ(second.fence, first.fence + 1);
}

// A commit retried under its fence after it landed (its answer lost) succeeds; other bytes under
// that fence are lease_lost.
IDEM_TOKEN_CASE(CommitRepeatedUnderItsFenceAfterItLandedSucceeds) {
  const detail::EffectiveKey key(this->store().options().scope, {}, this->issue());
  Ticket ticket;
  this->commit_twice_under_one_fence(
      ClaimRequest{key.view(), {1, 1}, this->kLease, std::chrono::hours{1}}, "r", ticket);
}

IDEM_TOKEN_CASE(DoubleSubmitFromEightThreadsRunsOnce) {
  constexpr int kThreads = 8;
  for (int round = 0; round < 5; ++round) {
    const std::string t = this->issue();
    const RaceTally tally = this->race_on_one_key(kThreads, "done", [&](const auto& handler) {
      return this->store().execute(t, "same form", handler);
    });
    EXPECT_EQ(tally.runs, 1);
    EXPECT_EQ(tally.executed, 1);
    EXPECT_EQ(tally.other, 0);
    EXPECT_EQ(tally.replayed + tally.busy, kThreads - 1);
  }
}

// The two-phase form: begin<T>() holds the token until commit() or fail(); fail() returns it to
// pending (a retry may use it, even with another payload); after commit() a repeat's outcome
// replays the value, and begin() and execute() answer alike; another payload or a malformed
// token is token_invalid.
IDEM_TOKEN_CASE(BeginHoldsTheTokenUntilCommitOrFail) {
  this->make(Options{.scope = "tokens-begin", .lease = std::chrono::seconds{30}});
  const std::string t = this->issue();
  ASSERT_NO_FATAL_FAILURE(
      this->begin_holds_until_commit_or_fail(t, "order=1", "order=2", "receipt"));
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
IDEM_TOKEN_CASE(BehindACacheATokenUsedWithAnotherPayloadIsStillInvalid) {
  const std::string t = this->issue();
  CachedStore<S&> cached{CachedStoreOptions{}, this->store()};
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

}  // namespace idem::testing::token_cases

namespace idem::testing {

/// `register_token_store_conformance<S>(prefix, file, line)` registers the cases on S as
/// `<prefix>/TokenStoreConformance.<Case>`; call it before RUN_ALL_TESTS (the macro below does,
/// during static initialisation).
IDEM_TESTING_KIT(register_token_store_conformance, "TokenStoreConformance", token_cases,
                 IssuedTokensAre128RandomBitsInBase64Url, FirstUseRunsAndARepeatReplays,
                 UnknownForgedAndMalformedTokensAreInvalid,
                 RefusedTokensAreRejectionsNotStoreErrors, ExpiredTokenIsInvalid,
                 ATokenUsedWithAnotherPayloadIsInvalid, HandlerThatThrowsReturnsTheTokenToPending,
                 AbortAfterTheTokensExpiryLeavesItInvalid,
                 ConsumedTokenReplaysUntilTtlThenIsInvalid,
                 ExpiredLeaseIsTakenOverAndTheOldHolderFencedOff,
                 CommitRepeatedUnderItsFenceAfterItLandedSucceeds,
                 DoubleSubmitFromEightThreadsRunsOnce, BeginHoldsTheTokenUntilCommitOrFail,
                 BehindACacheATokenUsedWithAnotherPayloadIsStillInvalid);

}  // namespace idem::testing

/// Runs the cases on the store type given after `Prefix` (an identifier naming it in test names).
/// At namespace scope, once per type.
#define IDEM_TOKEN_STORE_CONFORMANCE(Prefix, ...) \
  IDEM_TESTING_REGISTER(register_token_store_conformance, Prefix, __VA_ARGS__)
