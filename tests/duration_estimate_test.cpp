// engine/duration_estimate.hpp: the recent handler durations a guard keeps for the retry hint of
// an in_progress refusal (their 90th percentile, never past the holder's lease left).

#include "idem/engine/duration_estimate.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace idem::detail {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(DurationEstimate, NoneBeforeAnyDuration) {
  const DurationEstimate e;
  EXPECT_EQ(e.p90(), std::nullopt);
  EXPECT_EQ(retry_hint(&e, milliseconds{30'000}), milliseconds{30'000});
  EXPECT_EQ(retry_hint(nullptr, milliseconds{500}), milliseconds{500});
}

TEST(DurationEstimate, TheNinetiethPercentileOfTheLastSixtyFour) {
  DurationEstimate e;
  for (int i = 1; i <= 10; ++i) e.record(milliseconds{i});
  EXPECT_EQ(e.p90(), microseconds{10'000});
  // Sixty-four quick ones push every slow one out of the ring.
  for (int i = 0; i < 64; ++i) e.record(microseconds{300});
  EXPECT_EQ(e.p90(), microseconds{300});
  for (int i = 0; i < 6; ++i) e.record(milliseconds{50});  // 6 of 64: under a tenth
  EXPECT_EQ(e.p90(), microseconds{300});
  for (int i = 0; i < 7; ++i) e.record(milliseconds{50});  // 13 of 64: over it
  EXPECT_EQ(e.p90(), microseconds{50'000});
}

TEST(DurationEstimate, TheHintIsRoundedUpToAMillisecondAndStopsAtTheLeaseLeft) {
  DurationEstimate e;
  e.record(std::chrono::nanoseconds{10});  // under a microsecond: one
  EXPECT_EQ(e.p90(), microseconds{1});
  EXPECT_EQ(retry_hint(&e, milliseconds{30'000}), milliseconds{1});
  e.record(microseconds{7'200});
  EXPECT_EQ(retry_hint(&e, milliseconds{30'000}), milliseconds{8});
  EXPECT_EQ(retry_hint(&e, milliseconds{5}), milliseconds{5});
  EXPECT_EQ(retry_hint(&e, milliseconds{0}), milliseconds{8});  // the lease left unknown
}

// Between two durations every read gives the same answer (from its memo); the next duration
// counts at once.
TEST(DurationEstimate, ReadsAgreeUntilTheNextDurationWhichCountsAtOnce) {
  DurationEstimate e;
  for (int i = 1; i <= 10; ++i) e.record(milliseconds{i});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(e.p90(), microseconds{10'000});
  e.record(milliseconds{40});  // 11 durations: the p90 is the 10th, still 10 ms
  EXPECT_EQ(e.p90(), microseconds{10'000});
  e.record(milliseconds{40});  // 12: the 11th, 40 ms
  EXPECT_EQ(e.p90(), microseconds{40'000});
  EXPECT_EQ(e.p90(), microseconds{40'000});
  for (int i = 0; i < 64; ++i) e.record(microseconds{300});
  EXPECT_EQ(e.p90(), microseconds{300});
}

// Recorded from many threads at once (the guard's callers): every slot holds one of the
// durations, never a torn or lost value.
TEST(DurationEstimate, ConcurrentRecordsKeepOnlyRecordedValues) {
  DurationEstimate e;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&e, t] {
      for (int i = 0; i < 10'000; ++i) e.record(milliseconds{t + 1});
    });
  }
  for (auto& t : threads) t.join();
  const auto p90 = e.p90();
  ASSERT_TRUE(p90);
  EXPECT_GE(*p90, microseconds{1'000});
  EXPECT_LE(*p90, microseconds{4'000});
  EXPECT_EQ(p90->count() % 1'000, 0);
}

}  // namespace
}  // namespace idem::detail
