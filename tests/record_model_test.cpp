// The record model (include/idem/engine/record_model.hpp): every transition of classify(), the
// fenced calls' rule, and the encodings the backends store states and answers under.

#include "idem/engine/record_model.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace idem::detail {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr Fingerprint kMine{1, 2};
constexpr Fingerprint kOther{1, 3};

RecordView<> record(RecordState state, Fingerprint fp = kMine) {
  return RecordView<>{.state = state,
                      .fingerprint = fp,
                      .fence = 41,
                      .lease_left = Clock::duration{10s},
                      .expires_in = Clock::duration{1h},
                      .result = "bytes"};
}

// --- classify: the records a claim takes ---------------------------------------------------------

TEST(RecordModelTest, AnAbsentRecordIsAcquiredAfresh) {
  const Claim c = classify(RecordView<>{}, kMine);
  EXPECT_EQ(c.status, ClaimStatus::acquired);
  EXPECT_FALSE(c.took_over);
  EXPECT_EQ(c.fence, 0u);
}

TEST(RecordModelTest, AReleasedRecordIsAcquiredWithItsFenceWhateverTheFingerprint) {
  for (Fingerprint fp : {kMine, kOther}) {
    const Claim c = classify(record(RecordState::released, fp), kMine);
    EXPECT_EQ(c.status, ClaimStatus::acquired);
    EXPECT_FALSE(c.took_over);
    EXPECT_EQ(c.fence, 41u);  // the caller takes it under a larger one
    EXPECT_TRUE(c.result.empty());
  }
}

TEST(RecordModelTest, AnExpiredRecordOfAnyStateOrFingerprintIsAcquiredWithoutTakeover) {
  for (RecordState state :
       {RecordState::held, RecordState::completed, RecordState::failed, RecordState::released}) {
    for (Fingerprint fp : {kMine, kOther}) {
      for (Clock::duration left :
           {Clock::duration::zero(), Clock::duration{-1ns}, Clock::duration{-3h}}) {
        RecordView<> r = record(state, fp);
        r.expires_in = left;
        const Claim c = classify(r, kMine);
        EXPECT_EQ(c.status, ClaimStatus::acquired) << to_string(state);
        EXPECT_FALSE(c.took_over) << to_string(state);
        EXPECT_EQ(c.fence, 41u);
      }
    }
  }
}

TEST(RecordModelTest, AHeldRecordWhoseLeaseRanOutIsTakenOver) {
  for (Clock::duration left :
       {Clock::duration::zero(), Clock::duration{-1ns}, Clock::duration{-5s}}) {
    RecordView<> r = record(RecordState::held);
    r.lease_left = left;
    const Claim c = classify(r, kMine);
    EXPECT_EQ(c.status, ClaimStatus::acquired);
    EXPECT_TRUE(c.took_over);
    EXPECT_EQ(c.fence, 41u);
  }
}

// --- classify: the records a claim leaves alone --------------------------------------------------

TEST(RecordModelTest, ALiveRecordOfAnotherFingerprintIsAMismatchWhateverItsState) {
  RecordView<> lapsed = record(RecordState::held, kOther);
  lapsed.lease_left = -1s;  // a lapsed lease does not let another payload take the key
  for (const RecordView<>& r :
       {record(RecordState::held, kOther), lapsed, record(RecordState::completed, kOther),
        record(RecordState::failed, kOther)}) {
    const Claim c = classify(r, kMine);
    EXPECT_EQ(c.status, ClaimStatus::mismatch) << to_string(r.state);
    EXPECT_EQ(c.fence, 41u);
    EXPECT_TRUE(c.result.empty());  // another payload's result is never handed out
    EXPECT_FALSE(c.took_over);
  }
}

TEST(RecordModelTest, AFinishedRecordOfTheSameFingerprintReplaysWithItsTimeLeftRoundedDown) {
  for (RecordState state : {RecordState::completed, RecordState::failed}) {
    RecordView<> r = record(state);
    r.expires_in = Clock::duration{1999us};
    r.lease_left = -1h;  // a finished record's lease means nothing
    const Claim c = classify(r, kMine);
    EXPECT_EQ(c.status,
              state == RecordState::completed ? ClaimStatus::completed : ClaimStatus::failed);
    EXPECT_EQ(c.fence, 41u);
    EXPECT_EQ(c.result, "bytes");
    EXPECT_EQ(c.expires_in, 1ms);
    EXPECT_FALSE(c.took_over);
  }
}

TEST(RecordModelTest, AFinishedRecordWithoutAnExpiryReplaysWithNoTimeLeftSaid) {
  RecordView<> r = record(RecordState::completed);
  r.expires_in.reset();
  const Claim c = classify(r, kMine);
  EXPECT_EQ(c.status, ClaimStatus::completed);
  EXPECT_EQ(c.result, "bytes");
  EXPECT_EQ(c.expires_in, 0ms);
}

TEST(RecordModelTest, AHeldRecordUnderALiveLeaseIsInProgressWithTheLeaseRoundedUp) {
  RecordView<> r = record(RecordState::held);
  r.lease_left = Clock::duration{1ns};
  Claim c = classify(r, kMine);
  EXPECT_EQ(c.status, ClaimStatus::in_progress);
  EXPECT_EQ(c.lease_remaining, 1ms);
  EXPECT_EQ(c.fence, 41u);
  EXPECT_TRUE(c.result.empty());
  r.lease_left = Clock::duration{2001us};
  c = classify(r, kMine);
  EXPECT_EQ(c.lease_remaining, 3ms);
}

TEST(RecordModelTest, AHeldRecordWithoutALeaseStaysInProgress) {
  RecordView<> r = record(RecordState::held);
  r.lease_left.reset();  // an open transaction holds it until it ends
  r.expires_in.reset();
  const Claim c = classify(r, kMine);
  EXPECT_EQ(c.status, ClaimStatus::in_progress);
  EXPECT_EQ(c.lease_remaining, 0ms);
}

TEST(RecordModelTest, MillisecondViewsClassifyAlike) {
  const RecordView<milliseconds> held{.state = RecordState::held,
                                      .fingerprint = kMine,
                                      .fence = 7,
                                      .lease_left = 250ms,
                                      .expires_in = 90s};
  EXPECT_EQ(classify(held, kMine).status, ClaimStatus::in_progress);
  EXPECT_EQ(classify(held, kMine).lease_remaining, 250ms);
  RecordView<milliseconds> lapsed = held;
  lapsed.lease_left = 0ms;
  EXPECT_TRUE(classify(lapsed, kMine).took_over);
  RecordView<milliseconds> done = held;
  done.state = RecordState::failed;
  done.result = "f";
  EXPECT_EQ(classify(done, kMine).expires_in, 90s);
  EXPECT_EQ(classify(done, kOther).status, ClaimStatus::mismatch);
}

// --- check_fence: commit, abort, extend ----------------------------------------------------------

TEST(RecordModelTest, OnlyTheHoldersFenceMayChangeAHeldRecord) {
  const RecordView<> held = record(RecordState::held);
  const Completion done{ClaimStatus::completed, "bytes", 1h};
  EXPECT_EQ(check_fence(held, 41, nullptr), FenceCheck::held);
  EXPECT_EQ(check_fence(held, 41, &done), FenceCheck::held);
  EXPECT_EQ(check_fence(held, 40, nullptr), FenceCheck::lost);
  EXPECT_EQ(check_fence(held, 42, &done), FenceCheck::lost);
  EXPECT_EQ(check_fence(RecordView<>{}, 0, &done), FenceCheck::lost);  // absent
  EXPECT_EQ(check_fence(record(RecordState::released), 41, nullptr), FenceCheck::lost);
}

TEST(RecordModelTest, ARepeatedCommitFindsItsOwnCompletionLandedAndNothingElse) {
  const Completion done{ClaimStatus::completed, "bytes", 1h};
  const Completion failed{ClaimStatus::failed, "bytes", 1h};
  const Completion other_bytes{ClaimStatus::completed, "other", 1h};
  const RecordView<> completed = record(RecordState::completed);
  EXPECT_EQ(check_fence(completed, 41, &done), FenceCheck::landed);
  EXPECT_EQ(check_fence(completed, 41, &failed), FenceCheck::lost);       // another state
  EXPECT_EQ(check_fence(completed, 41, &other_bytes), FenceCheck::lost);  // other bytes
  EXPECT_EQ(check_fence(completed, 40, &done), FenceCheck::lost);         // another holder's
  EXPECT_EQ(check_fence(completed, 41, nullptr), FenceCheck::lost);       // abort, extend
  EXPECT_EQ(check_fence(record(RecordState::failed), 41, &failed), FenceCheck::landed);
  EXPECT_EQ(check_fence(record(RecordState::released), 41, &done), FenceCheck::lost);
}

TEST(RecordModelTest, ACompletionStoresItsFinishedState) {
  EXPECT_EQ(finished_state(ClaimStatus::completed), RecordState::completed);
  EXPECT_EQ(finished_state(ClaimStatus::failed), RecordState::failed);
}

// --- encodings -----------------------------------------------------------------------------------

TEST(RecordModelTest, SqlStatesRoundTripAndUnknownValuesDecodeToNothing) {
  for (RecordState state :
       {RecordState::held, RecordState::completed, RecordState::failed, RecordState::released}) {
    EXPECT_EQ(from_sql(static_cast<std::int64_t>(to_sql(state))), state) << to_string(state);
  }
  // The values the SQL tables have always held.
  EXPECT_EQ(static_cast<int>(SqlState::held), 0);
  EXPECT_EQ(static_cast<int>(SqlState::completed), 1);
  EXPECT_EQ(static_cast<int>(SqlState::failed), 2);
  EXPECT_EQ(static_cast<int>(SqlState::released), 3);
  for (std::int64_t v : {-1LL, 4LL, 65536LL, -65536LL}) EXPECT_FALSE(from_sql(v)) << v;
}

TEST(RecordModelTest, RedisStatesRoundTripAndAnIssuedTokenIsClaimedLikeAReleasedRecord) {
  for (RecordState state :
       {RecordState::held, RecordState::completed, RecordState::failed, RecordState::released}) {
    const std::string_view text = to_redis(state);
    ASSERT_EQ(text.size(), 1u);
    EXPECT_EQ(from_redis(text[0]), state) << to_string(state);
  }
  EXPECT_EQ(to_redis(RecordState::held), "P");
  EXPECT_EQ(to_redis(RecordState::completed), "C");
  EXPECT_EQ(to_redis(RecordState::failed), "F");
  EXPECT_EQ(to_redis(RecordState::released), "R");
  EXPECT_EQ(from_redis(redis_state::issued), RecordState::released);
  for (char c : {'Z', 'p', '\0'}) EXPECT_FALSE(from_redis(c)) << int(c);
}

TEST(RecordModelTest, RedisClaimRepliesAreTheScriptsCodesAndNothingElse) {
  EXPECT_EQ(redis_claim_reply(0), RedisClaimReply::acquired);
  EXPECT_EQ(redis_claim_reply(4), RedisClaimReply::mismatch);
  EXPECT_EQ(redis_claim_reply(6), RedisClaimReply::token_mismatch);
  EXPECT_FALSE(redis_claim_reply(-1));
  EXPECT_FALSE(redis_claim_reply(7));
  EXPECT_FALSE(redis_claim_reply(4294967297LL));
}

}  // namespace
}  // namespace idem::detail
