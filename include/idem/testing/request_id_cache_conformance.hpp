#pragma once
// idem's conformance kit for request-ID caches: the cases every request-ID cache passes (idem's
// MemoryRequestIdCache and RequestIdCache on Redis, and one written for another database), on
// GoogleTest:
//
//   #include <idem/testing/request_id_cache_conformance.hpp>
//
//   template <>
//   struct idem::testing::RequestIdCacheTraits<MyCache> {
//     static constexpr std::chrono::milliseconds lease{500};  // long enough for one step
//     static std::unique_ptr<MyCache> make(idem::Options guard);     // execute() under guard
//     static void advance(MyCache&, std::chrono::milliseconds d);  // let d of cache time pass
//   };
//
//   IDEM_REQUEST_ID_CACHE_CONFORMANCE(MyCache, MyCache);  // at namespace scope, once
//
// The cache runs execute()/begin() on a Key as the guard does and answers claim/commit/abort
// under its effective keys (idem/memory/request_id_cache.hpp shows the interface). make() runs
// before every case and may skip it (GTEST_SKIP() in a lambda) or fail it, and return null then;
// advance() sleeps when the cache reads a clock the kit cannot move. The cases run as
// <Prefix>/RequestIdCacheConformance.<Case>.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "idem/engine/effective_key.hpp"
#include "idem/key.hpp"
#include "idem/testing/detail/conformance_case.hpp"
#include "idem/testing/guarded_store_test.hpp"

namespace idem::testing {

/// Specialised by each request-ID cache's author (above).
template <class C>
struct RequestIdCacheTraits;

/// The fixture of a request-ID case.
template <class C>
using RequestIdCacheTest = GuardedStoreTest<C, RequestIdCacheTraits<C>>;

}  // namespace idem::testing

// Declares the request-ID case `Name` and opens its body; `S` is the cache's type.
#define IDEM_REQUEST_ID_CASE(Name) \
  IDEM_TESTING_CASE_OF(::idem::testing::RequestIdCacheTest, Cache_, Name)

namespace idem::testing::request_id_cases {

IDEM_REQUEST_ID_CASE(FirstRequestIsForwardedRepeatsGetItsResponse) {
  int forwarded = 0;
  auto first = this->store().execute(Key{"req-1", "tenant-a"}, [&] {
    return ++forwarded, std::string("HTTP/1.1 201 Created\r\n\r\n{\"id\":7}");
  });
  ASSERT_TRUE(first) << first.message();
  EXPECT_TRUE(first.executed());
  for (int i = 0; i < 3; ++i) {
    auto again = this->store().execute(Key{"req-1", "tenant-a"},
                                       [&] { return ++forwarded, std::string("other"); });
    ASSERT_TRUE(again) << again.message();
    EXPECT_TRUE(again.replayed());
    EXPECT_EQ(again.value(), "HTTP/1.1 201 Created\r\n\r\n{\"id\":7}");
  }
  EXPECT_EQ(forwarded, 1);
}

IDEM_REQUEST_ID_CASE(TheSameIdFromAnotherPrincipalIsAnotherRequest) {
  int forwarded = 0;
  auto a = this->store().execute(Key{"req-1", "tenant-a"}, [&] { return ++forwarded; });
  auto b = this->store().execute(Key{"req-1", "tenant-b"}, [&] { return ++forwarded; });
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a.value(), 1);
  EXPECT_EQ(b.value(), 2);
  EXPECT_TRUE(b.executed());
}

IDEM_REQUEST_ID_CASE(EmptyAndBinaryResponsesReplayExactly) {
  const std::string binary("\0\r\n{}\xff", 6);
  ASSERT_TRUE(this->store().execute(Key{"empty"}, [] { return std::string(); }));
  ASSERT_TRUE(this->store().execute(Key{"bin"}, [&] { return binary; }));
  auto empty = this->store().execute(Key{"empty"}, [] { return std::string("x"); });
  auto bin = this->store().execute(Key{"bin"}, [] { return std::string("x"); });
  ASSERT_TRUE(empty && bin);
  EXPECT_TRUE(empty.replayed());
  EXPECT_EQ(empty.value(), "");
  EXPECT_EQ(bin.value(), binary);
}

IDEM_REQUEST_ID_CASE(AnotherPayloadUnderTheSameIdIsAMismatch) {
  ASSERT_TRUE(this->store().execute(Key{"req"}, "body-1", [] { return 1; }));
  auto other = this->store().execute(Key{"req"}, "body-2", [] { return 2; });
  EXPECT_EQ(other.error(), errc::payload_mismatch);
}

IDEM_REQUEST_ID_CASE(ConcurrentDuplicatesForwardOnce) {
  constexpr int kThreads = 8;
  for (int round = 0; round < 5; ++round) {
    const Key id{"dup-" + std::to_string(round), "t"};
    const RaceTally tally = this->race_on_one_key(kThreads, "response", [&](const auto& handler) {
      return this->store().execute(id, handler);
    });
    EXPECT_EQ(tally.runs, 1);
    EXPECT_EQ(tally.other, 0);
    EXPECT_EQ(tally.executed + tally.replayed + tally.busy, kThreads);
  }
}

IDEM_REQUEST_ID_CASE(AFailedForwardFreesTheIdForARetry) {
  EXPECT_THROW((void)this->store().execute(
                   Key{"req"}, [&]() -> int { throw std::runtime_error("upstream down"); }),
               std::runtime_error);
  auto retry = this->store().execute(Key{"req"}, [] { return 2; });
  ASSERT_TRUE(retry) << retry.message();
  EXPECT_TRUE(retry.executed());
}

IDEM_REQUEST_ID_CASE(ResponsesExpireAfterTheirTtl) {
  this->make(Options{.scope = "gateway-ttl", .lease = this->kLease, .ttl = this->kLease});
  ASSERT_TRUE(this->store().execute(Key{"req"}, [] { return 1; }));
  EXPECT_TRUE(this->store().execute(Key{"req"}, [] { return 2; }).replayed());
  this->advance(this->kLease * 2);
  auto later = this->store().execute(Key{"req"}, [] { return 3; });
  ASSERT_TRUE(later);
  EXPECT_TRUE(later.executed());
  EXPECT_EQ(later.value(), 3);
}

IDEM_REQUEST_ID_CASE(ACrashedHoldersMarkerExpiresAndItsLateCommitIsRefused) {
  const detail::EffectiveKey key(this->store().options().scope, "t", "req");
  const ClaimRequest request{key.view(), {1, 1}, this->kLease, this->kLease};
  Claim crashed, next;
  ASSERT_NO_FATAL_FAILURE(this->lapse_and_claim_again(request, crashed, next));
  EXPECT_NE(next.fence, crashed.fence);
  Result<Claim> replay = this->store().claim(request);
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay->status, ClaimStatus::completed);
  EXPECT_EQ(replay->result, "late");
}

// A commit retried by its holder after it landed (its answer lost) succeeds; another response
// or another outcome under that holder is lease_lost.
IDEM_REQUEST_ID_CASE(ACommitRepeatedByItsHolderAfterItLandedSucceeds) {
  const detail::EffectiveKey key(this->store().options().scope, "t", "req");
  Ticket ticket;
  ASSERT_NO_FATAL_FAILURE(this->commit_twice_under_one_fence(
      ClaimRequest{key.view(), {1, 1}, this->kLease, this->kLease}, "response", ticket));
  const Completion failed{ClaimStatus::failed, "response", std::chrono::hours{1}};
  EXPECT_EQ(this->store().commit(ticket, failed).error(), errc::lease_lost);
}

// The two-phase form: begin<T>() holds the request id until commit() or fail(); fail() frees it
// for a retry; after commit() a repeat's outcome replays the response, and begin() and execute()
// share entries.

// The two-phase form: begin<T>() holds the request id until commit() or fail(); fail() frees it
// for a retry; after commit() a repeat's outcome replays the response, and begin() and execute()
// share entries; another body is payload_mismatch.
IDEM_REQUEST_ID_CASE(BeginHoldsTheIdUntilCommitOrFail) {
  this->make(Options{.scope = "gateway-begin", .lease = std::chrono::seconds{30}});
  const Key request{"req-b", "tenant"};
  ASSERT_NO_FATAL_FAILURE(
      this->begin_holds_until_commit_or_fail(request, "body", "body", "HTTP/1.1 200 OK"));
  auto other = this->store().template begin<std::string>(request, "another body");
  ASSERT_FALSE(other.acquired());
  EXPECT_EQ(other.outcome().error(), errc::payload_mismatch) << other.outcome().message();
}

// A cache in front (CachedStore) keeps a replay only as long as the entry is still replayed.
IDEM_REQUEST_ID_CASE(ReplaysSayHowLongTheResponseIsStillKept) {
  const std::chrono::milliseconds ttl = std::chrono::minutes{5};
  for (const ClaimStatus outcome : {ClaimStatus::completed, ClaimStatus::failed}) {
    const detail::EffectiveKey key(this->store().options().scope, "t",
                                   outcome == ClaimStatus::completed ? "done" : "failed");
    const ClaimRequest request{key.view(), {1, 1}, this->kLease, this->kLease};
    Result<Claim> held = this->store().claim(request);
    ASSERT_TRUE(held);
    ASSERT_EQ(held->status, ClaimStatus::acquired);
    ASSERT_TRUE(
        this->store().commit(Ticket{key.view(), held->fence}, Completion{outcome, "r", ttl}).ok());
    Result<Claim> replay = this->store().claim(request);
    ASSERT_TRUE(replay);
    EXPECT_EQ(replay->status, outcome);
    EXPECT_GT(replay->expires_in, ttl - std::chrono::seconds{30});
    EXPECT_LE(replay->expires_in, ttl);
  }
}

}  // namespace idem::testing::request_id_cases

namespace idem::testing {

/// `register_request_id_cache_conformance<C>(prefix, file, line)` registers the cases on C as
/// `<prefix>/RequestIdCacheConformance.<Case>`; call it before RUN_ALL_TESTS (the macro below does,
/// during static initialisation).
IDEM_TESTING_KIT(register_request_id_cache_conformance, "RequestIdCacheConformance",
                 request_id_cases, FirstRequestIsForwardedRepeatsGetItsResponse,
                 TheSameIdFromAnotherPrincipalIsAnotherRequest,
                 EmptyAndBinaryResponsesReplayExactly, AnotherPayloadUnderTheSameIdIsAMismatch,
                 ConcurrentDuplicatesForwardOnce, AFailedForwardFreesTheIdForARetry,
                 ResponsesExpireAfterTheirTtl,
                 ACrashedHoldersMarkerExpiresAndItsLateCommitIsRefused,
                 ACommitRepeatedByItsHolderAfterItLandedSucceeds,
                 ReplaysSayHowLongTheResponseIsStillKept, BeginHoldsTheIdUntilCommitOrFail);

}  // namespace idem::testing

/// Runs the cases on the cache type given after `Prefix` (an identifier naming it in test names).
/// At namespace scope, once per type.
#define IDEM_REQUEST_ID_CACHE_CONFORMANCE(Prefix, ...) \
  IDEM_TESTING_REGISTER(register_request_id_cache_conformance, Prefix, __VA_ARGS__)
