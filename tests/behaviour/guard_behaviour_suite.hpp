#pragma once
// The behaviour every guard owes its callers, as one typed suite: each case runs through every
// adapter of behaviour_adapters.hpp (IdempotencyGuard, and LayeredGuard with one layer and with
// three), through both the wrapping form (execute) and the two-phase form (begin). Time is a
// TestClock, so leases, waits and retry pauses are exact and instant.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "behaviour/behaviour_adapters.hpp"
#include "idem/idem.hpp"

namespace idem::testing {

/// A value whose codec offers view(): the guard must store the viewed bytes. encode() gives
/// other bytes, so a replay tells which of the two the store kept.
struct ViewedBytes {
  std::string bytes;
};

}  // namespace idem::testing

template <>
struct idem::codec<idem::testing::ViewedBytes> {
  static std::string encode(const idem::testing::ViewedBytes&) { return "encode() was used"; }
  static std::string_view view(const idem::testing::ViewedBytes& v) noexcept { return v.bytes; }
  static idem::testing::ViewedBytes decode(std::string_view bytes) { return {std::string(bytes)}; }
};

namespace idem::testing {

/// A value whose codec cannot encode it.
struct Unencodable {
  int n = 0;
};

}  // namespace idem::testing

template <>
struct idem::codec<idem::testing::Unencodable> {
  static std::string encode(const idem::testing::Unencodable&) {
    throw std::runtime_error("this value has no encoding");
  }
  static idem::testing::Unencodable decode(std::string_view) { return {}; }
};

namespace idem::testing {

using std::chrono::milliseconds;
using std::chrono::seconds;

/// The events an Observer saw, in order.
class EventLog {
 public:
  EventLog()
      : observer_(std::make_shared<Observer>([this](const EventInfo& e) {
          std::lock_guard lock(mutex_);
          events_.push_back(e.event);
          scopes_.emplace_back(e.scope);
          keys_.emplace_back(e.key);
        })) {}

  const std::shared_ptr<Observer>& observer() const { return observer_; }
  std::vector<Event> events() const {
    std::lock_guard lock(mutex_);
    return events_;
  }
  int count(Event e) const {
    int n = 0;
    for (Event seen : events()) n += seen == e ? 1 : 0;
    return n;
  }
  std::string scope(std::size_t i) const {
    std::lock_guard lock(mutex_);
    return scopes_.at(i);
  }
  std::string key(std::size_t i) const {
    std::lock_guard lock(mutex_);
    return keys_.at(i);
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Event> events_;
  std::vector<std::string> scopes_;
  std::vector<std::string> keys_;
  std::shared_ptr<Observer> observer_;
};

inline std::vector<std::string> names(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (Event e : events) out.emplace_back(to_string(e));
  return out;
}

template <class Adapter>
class GuardBehaviour : public ::testing::Test {
 protected:
  Adapter& make(GuardSetup setup = {}) {
    adapter_ = std::make_unique<Adapter>(setup);
    return *adapter_;
  }

  std::unique_ptr<Adapter> adapter_;
};

TYPED_TEST_SUITE_P(GuardBehaviour);

TYPED_TEST_P(GuardBehaviour, FreshThenReplayRunsTheHandlerOnce) {
  auto& g = this->make();
  int runs = 0;
  auto handler = [&] { return "value-" + std::to_string(++runs); };

  Outcome<std::string> first = g.execute("k-1", "p", handler);
  ASSERT_TRUE(first) << first.message();
  EXPECT_TRUE(first.executed());
  EXPECT_TRUE(first.recorded());
  EXPECT_FALSE(first.replayed());
  Outcome<std::string> again = g.execute("k-1", "p", handler);
  ASSERT_TRUE(again) << again.message();
  EXPECT_TRUE(again.replayed());
  EXPECT_FALSE(again.executed());
  EXPECT_EQ(again.value(), "value-1");

  // The two-phase form answers the same key the same way, and holds a new one.
  auto repeat = g.template begin<std::string>("k-1", "p");
  EXPECT_FALSE(repeat.acquired());
  ASSERT_TRUE(repeat.outcome()) << repeat.outcome().message();
  EXPECT_TRUE(repeat.outcome().replayed());
  EXPECT_EQ(repeat.outcome().value(), "value-1");

  auto fresh = g.template begin<std::string>("k-2", "p");
  ASSERT_TRUE(fresh.acquired());
  Outcome<std::string> committed = fresh.commit("value-" + std::to_string(++runs));
  ASSERT_TRUE(committed) << committed.message();
  EXPECT_TRUE(committed.executed());
  EXPECT_TRUE(committed.recorded());
  EXPECT_FALSE(fresh.acquired());
  Outcome<std::string> replayed = g.execute("k-2", "p", handler);
  ASSERT_TRUE(replayed) << replayed.message();
  EXPECT_TRUE(replayed.replayed());
  EXPECT_EQ(replayed.value(), "value-2");
  EXPECT_EQ(runs, 2);
}

TYPED_TEST_P(GuardBehaviour, PayloadMismatchIsRefusedWithoutRunning) {
  auto& g = this->make();
  int runs = 0;
  ASSERT_TRUE(g.execute("k", "amount=5", [&] { return ++runs; }));

  auto other = g.template begin<int>("k", "amount=6");
  EXPECT_FALSE(other.acquired());
  EXPECT_EQ(other.outcome().error(), errc::payload_mismatch);
  EXPECT_FALSE(other.outcome().replayed());
  Outcome<int> wrapped = g.execute("k", "amount=6", [&] { return ++runs; });
  EXPECT_EQ(wrapped.error(), errc::payload_mismatch);
  Outcome<int> same = g.execute("k", "amount=5", [&] { return ++runs; });
  ASSERT_TRUE(same) << same.message();
  EXPECT_EQ(same.value(), 1);
  EXPECT_EQ(runs, 1);
}

// Before any handler has finished, the guard has no estimate: the hint is the lease left.
TYPED_TEST_P(GuardBehaviour, InProgressRetryAfterIsTheHoldersLeaseLeft) {
  auto& g = this->make(GuardSetup{.lease = seconds{10}});
  auto holder = g.template begin<int>("k");
  ASSERT_TRUE(holder.acquired());
  EXPECT_EQ(holder.retry_after(), milliseconds{0});
  g.clock().advance(seconds{3});

  auto refused = g.template begin<int>("k");
  EXPECT_FALSE(refused.acquired());
  EXPECT_EQ(refused.outcome().error(), errc::in_progress);
  EXPECT_EQ(refused.retry_after(), milliseconds{7000});
  EXPECT_EQ(refused.outcome().retry_after(), milliseconds{7000});
  const auto* lease = std::get_if<HolderLease>(&refused.outcome().refusal());
  ASSERT_NE(lease, nullptr);
  EXPECT_EQ(lease->remaining, milliseconds{7000});

  g.clock().advance(milliseconds{6500});
  EXPECT_EQ(g.template begin<int>("k").retry_after(), milliseconds{500});
  ASSERT_TRUE(holder.commit(1));
  // A replay is no refusal: nothing to wait for.
  EXPECT_EQ(g.template begin<int>("k").retry_after(), milliseconds{0});
}

// The retry hint is when the holder is likely done: the 90th percentile of the guard's recent
// handler durations (the execute form and the two-phase form both teach it), never past the
// lease left. A duplicate of a 7 ms call is told 7 ms, not the 10 s left on the lease.
TYPED_TEST_P(GuardBehaviour, InProgressRetryAfterIsWhenTheHolderIsLikelyDone) {
  auto& g = this->make(GuardSetup{.lease = seconds{10}});
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE(g.execute("fast-" + std::to_string(i), "p", [&] {
      g.clock().advance(milliseconds{7});
      return 1;
    }));
  }
  auto held = g.template begin<int>("fast-last");
  ASSERT_TRUE(held.acquired());
  g.clock().advance(milliseconds{7});
  ASSERT_TRUE(held.commit(1));

  auto holder = g.template begin<int>("k");
  ASSERT_TRUE(holder.acquired());
  g.clock().advance(milliseconds{2});
  auto refused = g.template begin<int>("k");
  ASSERT_FALSE(refused.acquired());
  EXPECT_EQ(refused.outcome().error(), errc::in_progress);
  EXPECT_EQ(refused.retry_after(), milliseconds{7});
  EXPECT_EQ(refused.outcome().retry_after(), milliseconds{7});
  const auto* lease = std::get_if<HolderLease>(&refused.outcome().refusal());
  ASSERT_NE(lease, nullptr);
  EXPECT_EQ(lease->remaining, milliseconds{9998});  // the lease left is still told
  EXPECT_EQ(lease->retry_after, milliseconds{7});
  ASSERT_TRUE(holder.commit(1));
}

// A handler slower than the lease: the hint stops at the lease's end, when a retry can take the
// key over.
TYPED_TEST_P(GuardBehaviour, TheRetryHintNeverPassesTheLeaseLeft) {
  auto& g = this->make(GuardSetup{.lease = seconds{10}});
  ASSERT_TRUE(g.execute("slow", "p", [&] {
    g.clock().advance(seconds{4});
    return 1;
  }));
  auto holder = g.template begin<int>("k");
  ASSERT_TRUE(holder.acquired());
  EXPECT_EQ(g.template begin<int>("k").retry_after(), milliseconds{4000});
  g.clock().advance(seconds{7});
  EXPECT_EQ(g.template begin<int>("k").retry_after(), milliseconds{3000});
  ASSERT_TRUE(holder.commit(1));
}

TYPED_TEST_P(GuardBehaviour, WaitReplaysOnceTheHolderCommits) {
  auto& g = this->make(GuardSetup{.in_progress = Wait{.timeout = seconds{5}}});
  auto holder = g.template begin<std::string>("k");
  ASSERT_TRUE(holder.acquired());
  bool committed = false;
  // The holder finishes while the second caller sleeps between polls.
  g.clock().on_sleep = [&] {
    if (committed) return;
    committed = true;
    ASSERT_TRUE(holder.commit("held"));
  };
  auto waiter = g.template begin<std::string>("k");
  g.clock().on_sleep = nullptr;
  EXPECT_TRUE(committed);
  EXPECT_EQ(g.clock().sleeps(), 1);
  EXPECT_FALSE(waiter.acquired());
  ASSERT_TRUE(waiter.outcome()) << waiter.outcome().message();
  EXPECT_TRUE(waiter.outcome().replayed());
  EXPECT_EQ(waiter.outcome().value(), "held");
}

TYPED_TEST_P(GuardBehaviour, WaitTakesOverOnceTheLeasePasses) {
  auto& g = this->make(GuardSetup{.lease = seconds{1}, .in_progress = Wait{.timeout = seconds{5}}});
  auto holder = g.template begin<std::string>("k");
  ASSERT_TRUE(holder.acquired());
  const auto start = g.clock().now();
  auto waiter = g.template begin<std::string>("k");
  const auto waited = g.clock().now() - start;
  ASSERT_TRUE(waiter.acquired()) << waiter.outcome().message();
  EXPECT_GT(waiter.fence(), holder.fence());
  EXPECT_GE(waited, seconds{1}) << "took over before the holder's lease ended";
  // The engine looks again the moment the holder's lease ends, not a backoff later.
  EXPECT_LE(waited, seconds{1} + milliseconds{1}) << "waited on after the lease ended";

  Outcome<std::string> late = holder.commit("late");
  EXPECT_FALSE(late);
  EXPECT_EQ(late.error(), errc::lease_lost);
  ASSERT_TRUE(waiter.commit("new"));
  auto repeat = g.template begin<std::string>("k");
  ASSERT_TRUE(repeat.outcome());
  EXPECT_EQ(repeat.outcome().value(), "new");
}

TYPED_TEST_P(GuardBehaviour, RememberedFailureReplaysAsHandlerFailedAndDoesNotRerun) {
  auto& g = this->make(GuardSetup{.remember_failures = true});
  auto a = g.template begin<int>("k", "p");
  ASSERT_TRUE(a.acquired());
  a.fail("card declined");
  EXPECT_FALSE(a.acquired());

  auto repeat = g.template begin<int>("k", "p");
  EXPECT_FALSE(repeat.acquired());
  EXPECT_EQ(repeat.outcome().error(), errc::handler_failed);
  EXPECT_TRUE(repeat.outcome().replayed());
  EXPECT_NE(repeat.outcome().message().find("card declined"), std::string::npos)
      << repeat.outcome().message();
  int runs = 0;
  Outcome<int> wrapped = g.execute("k", "p", [&] { return ++runs; });
  EXPECT_EQ(wrapped.error(), errc::handler_failed);
  EXPECT_EQ(runs, 0);

  // A throwing handler is remembered the same way.
  EXPECT_THROW((void)g.execute("thrown", "p", [&]() -> int { throw std::runtime_error("boom"); }),
               std::runtime_error);
  Outcome<int> after = g.execute("thrown", "p", [&] { return ++runs; });
  EXPECT_EQ(after.error(), errc::handler_failed);
  EXPECT_NE(after.message().find("boom"), std::string::npos) << after.message();
  EXPECT_EQ(runs, 0);
}

TYPED_TEST_P(GuardBehaviour, DefaultFailureReleasesTheKeyAndTheRetryRuns) {
  auto& g = this->make();
  auto a = g.template begin<int>("k", "p");
  ASSERT_TRUE(a.acquired());
  const Fence first = a.fence();
  a.fail("card declined");

  auto retry = g.template begin<int>("k", "p");
  ASSERT_TRUE(retry.acquired()) << retry.outcome().message();
  EXPECT_GT(retry.fence(), first);
  retry.fail("declined again");

  int runs = 0;
  EXPECT_THROW((void)g.execute("k", "p",
                               [&]() -> int {
                                 ++runs;
                                 throw std::runtime_error("boom");
                               }),
               std::runtime_error);
  Outcome<int> last = g.execute("k", "p", [&] { return ++runs; });
  ASSERT_TRUE(last) << last.message();
  EXPECT_TRUE(last.executed());
  EXPECT_EQ(last.value(), 2);
}

TYPED_TEST_P(GuardBehaviour, DroppedAttemptReleasesOrIsRemembered) {
  {
    auto& g = this->make();
    Fence dropped = 0;
    {
      auto a = g.template begin<int>("k");
      ASSERT_TRUE(a.acquired());
      dropped = a.fence();
    }
    auto next = g.template begin<int>("k");
    ASSERT_TRUE(next.acquired());
    EXPECT_GT(next.fence(), dropped);
  }
  auto& g = this->make(GuardSetup{.remember_failures = true});
  { ASSERT_TRUE(g.template begin<int>("k").acquired()); }
  auto next = g.template begin<int>("k");
  EXPECT_FALSE(next.acquired());
  EXPECT_EQ(next.outcome().error(), errc::handler_failed);
  EXPECT_TRUE(next.outcome().replayed());
}

TYPED_TEST_P(GuardBehaviour, TooLargeResultIsRememberedWhileTheCallerGetsItsValue) {
  EventLog log;
  auto& g = this->make(GuardSetup{.max_result_size = 16, .observer = log.observer()});
  const std::string big(64, 'x');
  auto a = g.template begin<std::string>("k");
  ASSERT_TRUE(a.acquired());
  Outcome<std::string> out = a.commit(big);
  EXPECT_TRUE(out);
  EXPECT_TRUE(out.executed());
  EXPECT_FALSE(out.recorded());
  EXPECT_EQ(out.commit_error(), errc::result_too_large);
  EXPECT_EQ(out.value(), big);
  EXPECT_EQ(log.count(Event::result_unrecorded), 1);

  int runs = 0;
  Outcome<std::string> repeat = g.execute("k", "", [&] {
    ++runs;
    return std::string("small");
  });
  EXPECT_EQ(repeat.error(), errc::result_too_large);
  EXPECT_TRUE(repeat.replayed());
  EXPECT_EQ(runs, 0);

  Outcome<std::string> fits = g.execute("fits", "", [] { return std::string(16, 'y'); });
  EXPECT_TRUE(fits.recorded()) << fits.message();
}

TYPED_TEST_P(GuardBehaviour, ACodecViewIsWhatTheStoreKeeps) {
  auto& g = this->make();
  const std::string raw("viewed\0bytes", 12);
  auto a = g.template begin<ViewedBytes>("k");
  ASSERT_TRUE(a.acquired());
  Outcome<ViewedBytes> out = a.commit(ViewedBytes{raw});
  ASSERT_TRUE(out) << out.message();
  EXPECT_TRUE(out.recorded());
  EXPECT_EQ(out.value().bytes, raw);
  ASSERT_FALSE(g.records().committed().empty());
  EXPECT_EQ(g.records().committed().back(), raw);

  auto repeat = g.template begin<ViewedBytes>("k");
  ASSERT_TRUE(repeat.outcome()) << repeat.outcome().message();
  EXPECT_EQ(repeat.outcome().value().bytes, raw);
}

TYPED_TEST_P(GuardBehaviour, AValueItsCodecCannotEncodeIsRememberedAndTheErrorPropagates) {
  auto& g = this->make();  // without remember_failures: the work happened all the same
  auto a = g.template begin<Unencodable>("k");
  ASSERT_TRUE(a.acquired());
  EXPECT_THROW((void)a.commit(Unencodable{1}), std::runtime_error);
  EXPECT_FALSE(a.acquired());
  auto repeat = g.template begin<Unencodable>("k");
  EXPECT_FALSE(repeat.acquired());
  EXPECT_EQ(repeat.outcome().error(), errc::handler_failed);
  EXPECT_NE(repeat.outcome().message().find("no encoding"), std::string::npos)
      << repeat.outcome().message();
}

TYPED_TEST_P(GuardBehaviour, ACommitThatFailsOnceIsRetriedAndRecorded) {
  EventLog log;
  auto& g =
      this->make(GuardSetup{.commit_retry = CommitRetry{.attempts = 3, .backoff = milliseconds{10}},
                            .observer = log.observer()});
  g.records().failing_commits = 1;
  auto a = g.template begin<std::string>("k");
  ASSERT_TRUE(a.acquired());
  const auto before = g.clock().now();
  Outcome<std::string> out = a.commit("v");
  ASSERT_TRUE(out) << out.message();
  EXPECT_TRUE(out.recorded());
  EXPECT_FALSE(out.commit_error());
  EXPECT_EQ(g.records().commits.load(), 2);
  EXPECT_EQ(log.count(Event::commit_retried), 1);
  EXPECT_EQ(log.count(Event::result_unrecorded), 0);
  EXPECT_EQ(g.clock().now() - before, milliseconds{10}) << "one pause of the first backoff";
  auto repeat = g.template begin<std::string>("k");
  ASSERT_TRUE(repeat.outcome()) << repeat.outcome().message();
  EXPECT_EQ(repeat.outcome().value(), "v");

  // Every try fails: the caller keeps its value, unrecorded; the key stays held.
  g.records().failing_commits = 3;
  auto b = g.template begin<std::string>("k-2");
  ASSERT_TRUE(b.acquired());
  Outcome<std::string> lost = b.commit("w");
  EXPECT_TRUE(lost);
  EXPECT_EQ(lost.value(), "w");
  EXPECT_FALSE(lost.recorded());
  EXPECT_EQ(lost.commit_error(), errc::store_unavailable);
  EXPECT_EQ(log.count(Event::result_unrecorded), 1);
  EXPECT_EQ(g.template begin<std::string>("k-2").outcome().error(), errc::in_progress);
}

TYPED_TEST_P(GuardBehaviour, LeaseLostAfterTakeoverMakesTheOutcomeFalse) {
  EventLog log;
  auto& g = this->make(GuardSetup{.lease = seconds{1}, .observer = log.observer()});
  auto first = g.template begin<std::string>("k");
  ASSERT_TRUE(first.acquired());
  g.clock().advance(seconds{2});
  auto second = g.template begin<std::string>("k");
  ASSERT_TRUE(second.acquired()) << second.outcome().message();
  EXPECT_GT(second.fence(), first.fence());
  EXPECT_GE(log.count(Event::took_over), 1);
  ASSERT_TRUE(second.commit("second"));

  Outcome<std::string> late = first.commit("first");
  EXPECT_FALSE(late);
  EXPECT_TRUE(late.has_value());
  EXPECT_EQ(late.value(), "first");
  EXPECT_EQ(late.error(), errc::lease_lost);
  EXPECT_FALSE(late.recorded());
  EXPECT_GE(log.count(Event::lease_lost), 1);
  auto repeat = g.template begin<std::string>("k");
  ASSERT_TRUE(repeat.outcome()) << repeat.outcome().message();
  EXPECT_EQ(repeat.outcome().value(), "second");
}

// A result too large to record, from a holder whose key was taken over meanwhile: the other
// holder's result is the key's answer, so this one's outcome is false with lease_lost.
TYPED_TEST_P(GuardBehaviour, ATooLargeResultOfAHolderThatLostTheKeyIsNotTheAnswer) {
  auto& g = this->make(GuardSetup{.lease = seconds{1}, .max_result_size = 16});
  auto first = g.template begin<std::string>("k");
  ASSERT_TRUE(first.acquired());
  g.clock().advance(seconds{2});
  auto second = g.template begin<std::string>("k");
  ASSERT_TRUE(second.acquired()) << second.outcome().message();
  ASSERT_TRUE(second.commit("small"));

  Outcome<std::string> late = first.commit(std::string(64, 'x'));
  EXPECT_FALSE(late);
  EXPECT_TRUE(late.has_value());
  EXPECT_EQ(late.error(), errc::lease_lost);
  EXPECT_FALSE(late.recorded());
  auto repeat = g.template begin<std::string>("k");
  ASSERT_TRUE(repeat.outcome()) << repeat.outcome().message();
  EXPECT_EQ(repeat.outcome().value(), "small");
}

TYPED_TEST_P(GuardBehaviour, ObserverSeesEachCallsEventsInOrder) {
  EventLog log;
  auto& g = this->make(GuardSetup{.observer = log.observer()});
  ASSERT_TRUE(g.execute("k-1", "p", [] { return 1; }));
  ASSERT_TRUE(g.execute("k-1", "p", [] { return 2; }));
  EXPECT_EQ(g.template begin<int>("k-1", "other").outcome().error(), errc::payload_mismatch);
  auto holder = g.template begin<int>("k-2");
  ASSERT_TRUE(holder.acquired());
  EXPECT_EQ(g.template begin<int>("k-2").outcome().error(), errc::in_progress);
  holder.fail("boom");
  EXPECT_EQ(g.template begin<int>("").outcome().error(), errc::key_invalid);

  std::vector<Event> expected{Event::executed, Event::replayed, Event::mismatched,
                              Event::in_progress};
  expected.insert(expected.end(), TypeParam::kLayers, Event::aborted);  // one per layer held
  expected.push_back(Event::rejected);
  EXPECT_EQ(names(log.events()), names(expected));
  EXPECT_EQ(log.scope(0), kRecordScope);  // the handler ran behind the record
  EXPECT_EQ(log.key(0), "k-1");
}

TYPED_TEST_P(GuardBehaviour, KeysAreValidatedBeforeAnyStoreCall) {
  auto& g = this->make(GuardSetup{.max_key_size = 24});
  const std::string longest(24, 'k');
  const std::string too_long(25, 'k');
  for (const Key& bad : {Key{""}, Key{too_long}, Key{"k", too_long}}) {
    auto a = g.template begin<int>(bad);
    EXPECT_FALSE(a.acquired());
    EXPECT_EQ(a.outcome().error(), errc::key_invalid) << a.outcome().message();
    int runs = 0;
    EXPECT_EQ(g.execute(bad, "", [&] { return ++runs; }).error(), errc::key_invalid);
    EXPECT_EQ(runs, 0);
  }
  EXPECT_EQ(g.records().claims.load(), 0);
  auto ok = g.template begin<int>(Key{longest, longest});
  EXPECT_TRUE(ok.acquired()) << ok.outcome().message();
}

REGISTER_TYPED_TEST_SUITE_P(
    GuardBehaviour, FreshThenReplayRunsTheHandlerOnce, PayloadMismatchIsRefusedWithoutRunning,
    InProgressRetryAfterIsTheHoldersLeaseLeft, InProgressRetryAfterIsWhenTheHolderIsLikelyDone,
    TheRetryHintNeverPassesTheLeaseLeft, WaitReplaysOnceTheHolderCommits,
    WaitTakesOverOnceTheLeasePasses, RememberedFailureReplaysAsHandlerFailedAndDoesNotRerun,
    DefaultFailureReleasesTheKeyAndTheRetryRuns, DroppedAttemptReleasesOrIsRemembered,
    TooLargeResultIsRememberedWhileTheCallerGetsItsValue, ACodecViewIsWhatTheStoreKeeps,
    AValueItsCodecCannotEncodeIsRememberedAndTheErrorPropagates,
    ACommitThatFailsOnceIsRetriedAndRecorded, LeaseLostAfterTakeoverMakesTheOutcomeFalse,
    ATooLargeResultOfAHolderThatLostTheKeyIsNotTheAnswer, ObserverSeesEachCallsEventsInOrder,
    KeysAreValidatedBeforeAnyStoreCall);

}  // namespace idem::testing
