#pragma once
// The two-phase API (idem::Attempt through IdempotencyGuard::begin) on a real store, as typed
// suites over a backend type B that each backend's test file instantiates:
//
//   using StoreType = ...;                  the store the guard runs on
//   static constexpr const char* kName;     the instantiation's name
//   static constexpr bool kTransactional;   SQL transactional mode: the claim holds a transaction
//   void set_up();                          opens the store; GTEST_SKIPs when its server is unset
//   StoreType& store();
//   std::shared_ptr<Clock> clock();         the store's clock when the test drives time, else null
//   void pass(std::chrono::milliseconds);   lets time pass for leases (advances, or sleeps)
//
// TwoPhaseTest runs on every backend and mode; TwoPhaseLeaseTest on the lease-mode ones.

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "idem/idem.hpp"

namespace idem::testing {

using std::chrono::milliseconds;
using std::chrono::seconds;

/// The instantiations' names ("memory", "sqlite_lease", ...).
struct BackendNames {
  template <class B>
  static std::string GetName(int) {
    return B::kName;
  }
};

/// The message of the std::logic_error `fn` throws ("" when it throws none).
template <class Fn>
std::string logic_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "";
}

template <class B>
class TwoPhaseTest : public ::testing::Test {
 protected:
  using Guard = IdempotencyGuard<typename B::StoreType>;

  void SetUp() override { backend_.set_up(); }

  Options options(Options o = {}) {
    if (o.scope.empty()) o.scope = "two-phase";
    if (auto clock = backend_.clock()) o.clock = std::move(clock);
    return o;
  }
  typename B::StoreType& store() { return backend_.store(); }

  B backend_;
};

TYPED_TEST_SUITE_P(TwoPhaseTest);

TYPED_TEST_P(TwoPhaseTest, ADroppedAttemptReleasesTheKey) {
  typename TestFixture::Guard guard{this->store(), this->options()};
  Fence dropped = 0;
  {
    auto a = guard.template begin<std::string>("k");
    ASSERT_TRUE(a.acquired()) << a.outcome().message();
    EXPECT_EQ(static_cast<bool>(a.native_transaction()), TypeParam::kTransactional);
    dropped = a.fence();
  }
  auto next = guard.template begin<std::string>("k");
  ASSERT_TRUE(next.acquired()) << next.outcome().message();
  EXPECT_GT(next.fence(), dropped);
  ASSERT_TRUE(next.commit("after the drop"));
}

TYPED_TEST_P(TwoPhaseTest, FailSaysTheFailureIsRememberedUnderRememberFailures) {
  typename TestFixture::Guard guard{this->store(), this->options({.remember_failures = true})};
  auto a = guard.template begin<int>("k");
  ASSERT_TRUE(a.acquired()) << a.outcome().message();
  EXPECT_EQ(a.fail("card declined"), errc::handler_failed);
  EXPECT_EQ(a.outcome().error(), errc::handler_failed);
  EXPECT_FALSE(is_retryable(a.outcome().error()));
  auto repeat = guard.template begin<int>("k");
  ASSERT_FALSE(repeat.acquired());
  EXPECT_EQ(repeat.outcome().error(), errc::handler_failed);
}

TYPED_TEST_P(TwoPhaseTest, ADroppedAttemptIsRememberedUnderRememberFailures) {
  typename TestFixture::Guard guard{this->store(), this->options({.remember_failures = true})};
  { ASSERT_TRUE(guard.template begin<std::string>("k").acquired()); }
  auto next = guard.template begin<std::string>("k");
  EXPECT_FALSE(next.acquired());
  EXPECT_EQ(next.outcome().error(), errc::handler_failed) << next.outcome().message();
  EXPECT_TRUE(next.outcome().replayed());
  EXPECT_NE(next.outcome().message().find("dropped"), std::string::npos)
      << next.outcome().message();
}

TYPED_TEST_P(TwoPhaseTest, CommitRecordsTheValueAndARepeatReplaysIt) {
  typename TestFixture::Guard guard{this->store(), this->options()};
  auto a = guard.template begin<std::string>("k", "payload");
  ASSERT_TRUE(a.acquired()) << a.outcome().message();
  Outcome<std::string> fresh = a.commit("receipt-1");
  ASSERT_TRUE(fresh) << fresh.message();
  EXPECT_TRUE(fresh.executed());
  EXPECT_TRUE(fresh.recorded());
  EXPECT_FALSE(a.acquired());

  auto repeat = guard.template begin<std::string>("k", "payload");
  EXPECT_FALSE(repeat.acquired());
  ASSERT_TRUE(repeat.outcome()) << repeat.outcome().message();
  EXPECT_TRUE(repeat.outcome().replayed());
  EXPECT_EQ(repeat.outcome().value(), "receipt-1");
  EXPECT_EQ(std::move(repeat).outcome().value(), "receipt-1");
}

TYPED_TEST_P(TwoPhaseTest, FailReleasesTheKeyAndTheRetryAcquires) {
  typename TestFixture::Guard guard{this->store(), this->options()};
  auto a = guard.template begin<int>("k");
  ASSERT_TRUE(a.acquired()) << a.outcome().message();
  const Fence first = a.fence();
  // Released, not remembered: fail() and the outcome after it say so (a retry runs again).
  EXPECT_EQ(a.fail("card declined"), errc::handler_aborted);
  EXPECT_FALSE(a.acquired());
  EXPECT_EQ(a.outcome().error(), errc::handler_aborted);
  EXPECT_TRUE(is_retryable(a.outcome().error()));
  EXPECT_EQ(a.outcome().message(), "card declined");

  auto retry = guard.template begin<int>("k");
  ASSERT_TRUE(retry.acquired()) << retry.outcome().message();
  EXPECT_GT(retry.fence(), first);
  Outcome<int> out = retry.commit(42);
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ(guard.template begin<int>("k").outcome().value(), 42);
}

TYPED_TEST_P(TwoPhaseTest, UsingAnAttemptInTheWrongStateThrowsLogicError) {
  typename TestFixture::Guard guard{this->store(), this->options()};
  auto held = guard.template begin<int>("k");
  ASSERT_TRUE(held.acquired()) << held.outcome().message();
  EXPECT_THROW((void)held.outcome(), std::logic_error);  // no answer while holding

  auto refused = guard.template begin<int>("k");  // held by `held`: in_progress
  ASSERT_FALSE(refused.acquired());
  EXPECT_EQ(refused.outcome().error(), errc::in_progress);
  EXPECT_THROW((void)refused.commit(1), std::logic_error);
  EXPECT_THROW(refused.fail("no"), std::logic_error);
  EXPECT_THROW((void)refused.fence(), std::logic_error);
  EXPECT_THROW((void)refused.extend(), std::logic_error);
  EXPECT_THROW((void)refused.context(), std::logic_error);
  EXPECT_THROW((void)refused.native_transaction(), std::logic_error);

  ASSERT_TRUE(held.commit(7));
  EXPECT_THROW((void)held.commit(8), std::logic_error);
  EXPECT_THROW(held.fail("late"), std::logic_error);
  EXPECT_THROW((void)held.outcome(), std::logic_error);  // commit() returned it
  EXPECT_THROW((void)held.fence(), std::logic_error);

  auto failed = guard.template begin<int>("other");
  ASSERT_TRUE(failed.acquired()) << failed.outcome().message();
  failed.fail("gave up");
  EXPECT_THROW(failed.fail("again"), std::logic_error);
  EXPECT_THROW((void)failed.commit(1), std::logic_error);
  // The message names what happened to the attempt: it was settled, not refused.
  const std::string after_fail = logic_error_of([&] { (void)failed.commit(1); });
  EXPECT_NE(after_fail.find("settled"), std::string::npos) << after_fail;
  EXPECT_EQ(failed.outcome().error(), errc::handler_aborted);  // fail()'s answer
  const std::string after_commit = logic_error_of([&] { (void)held.outcome(); });
  EXPECT_NE(after_commit.find("after commit()"), std::string::npos) << after_commit;
  EXPECT_EQ(guard.template begin<int>("k").outcome().value(), 7);  // nothing above changed it
}

TYPED_TEST_P(TwoPhaseTest, AnAttemptMovedToAnotherThreadCommitsThere) {
  typename TestFixture::Guard guard{this->store(), this->options()};
  auto a = guard.template begin<std::string>("k");
  ASSERT_TRUE(a.acquired()) << a.outcome().message();
  std::optional<Outcome<std::string>> committed;
  std::thread worker([&committed, moved = std::move(a)]() mutable {
    if (moved.acquired()) committed.emplace(moved.commit("from another thread"));
  });
  worker.join();
  EXPECT_FALSE(a.acquired());  // NOLINT(bugprone-use-after-move): moved-from holds nothing
  ASSERT_TRUE(committed.has_value()) << "the moved Attempt did not hold the key";
  ASSERT_TRUE(*committed) << committed->message();
  EXPECT_TRUE(committed->recorded());

  auto repeat = guard.template begin<std::string>("k");
  ASSERT_TRUE(repeat.outcome()) << repeat.outcome().message();
  EXPECT_EQ(repeat.outcome().value(), "from another thread");
}

TYPED_TEST_P(TwoPhaseTest, RetryAfterOnARefusedBeginIsWithinTheLease) {
  const milliseconds lease = seconds{30};
  typename TestFixture::Guard guard{this->store(), this->options({.lease = lease})};
  auto holder = guard.template begin<int>("k");
  ASSERT_TRUE(holder.acquired()) << holder.outcome().message();
  auto refused = guard.template begin<int>("k");
  ASSERT_FALSE(refused.acquired());
  ASSERT_EQ(refused.outcome().error(), errc::in_progress);
  EXPECT_GT(refused.retry_after(), milliseconds{0});
  EXPECT_LE(refused.retry_after(), lease);
  EXPECT_EQ(refused.outcome().retry_after(), refused.retry_after());
  ASSERT_TRUE(holder.commit(1));
}

// N threads begin() the same key at once, and the one that acquires commits: exactly one
// acquires, every other gets in_progress or the replay of that one's value. Several rounds, a
// key each.
TYPED_TEST_P(TwoPhaseTest, ThreadsRacingOnOneKeyAcquireItOnce) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 10;
  typename TestFixture::Guard guard{this->store(), this->options()};
  std::vector<std::atomic<int>> acquired(kRounds), effects(kRounds), refused(kRounds),
      replayed(kRounds);
  std::atomic<int> wrong{0};
  std::barrier start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        start.arrive_and_wait();
        const std::string key = "round-" + std::to_string(r);
        auto a = guard.template begin<std::string>(key);
        if (a.acquired()) {
          acquired[r].fetch_add(1);
          effects[r].fetch_add(1);  // the work, done once per holder
          std::this_thread::sleep_for(milliseconds{2});
          if (!a.commit("made by " + std::to_string(t))) wrong.fetch_add(1);
          continue;
        }
        const Outcome<std::string>& out = a.outcome();
        if (out && out.replayed() && out.value().rfind("made by ", 0) == 0) {
          replayed[r].fetch_add(1);
        } else if (out.error() == errc::in_progress) {
          refused[r].fetch_add(1);
        } else {
          wrong.fetch_add(1);
          ADD_FAILURE() << key << ": " << out.message();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  for (int r = 0; r < kRounds; ++r) {
    EXPECT_EQ(acquired[r].load(), 1) << "round " << r;
    EXPECT_EQ(effects[r].load(), 1) << "round " << r;
    EXPECT_EQ(refused[r].load() + replayed[r].load(), kThreads - 1) << "round " << r;
  }
}

REGISTER_TYPED_TEST_SUITE_P(
    TwoPhaseTest, ADroppedAttemptReleasesTheKey, ADroppedAttemptIsRememberedUnderRememberFailures,
    FailSaysTheFailureIsRememberedUnderRememberFailures, CommitRecordsTheValueAndARepeatReplaysIt,
    FailReleasesTheKeyAndTheRetryAcquires, UsingAnAttemptInTheWrongStateThrowsLogicError,
    AnAttemptMovedToAnotherThreadCommitsThere, RetryAfterOnARefusedBeginIsWithinTheLease,
    ThreadsRacingOnOneKeyAcquireItOnce);

// ---- lease mode -----------------------------------------------------------------------------

template <class B>
class TwoPhaseLeaseTest : public TwoPhaseTest<B> {};

TYPED_TEST_SUITE_P(TwoPhaseLeaseTest);

TYPED_TEST_P(TwoPhaseLeaseTest, ExtendKeepsTheKeyPastTheOriginalLease) {
  const milliseconds lease = seconds{1};
  typename TestFixture::Guard guard{this->store(), this->options({.lease = lease})};
  auto extended = guard.template begin<std::string>("extended");
  auto plain = guard.template begin<std::string>("plain");
  ASSERT_TRUE(extended.acquired()) << extended.outcome().message();
  ASSERT_TRUE(plain.acquired()) << plain.outcome().message();
  ASSERT_TRUE(extended.extend(seconds{30}).ok());
  this->backend_.pass(lease + milliseconds{500});

  // Without the extension the lease has run out: another caller takes the key over.
  auto taker = guard.template begin<std::string>("plain");
  ASSERT_TRUE(taker.acquired()) << taker.outcome().message();
  EXPECT_GT(taker.fence(), plain.fence());
  // With it, the key is still held, for longer than the original lease could give.
  auto refused = guard.template begin<std::string>("extended");
  ASSERT_FALSE(refused.acquired());
  EXPECT_EQ(refused.outcome().error(), errc::in_progress);
  EXPECT_GT(refused.retry_after(), lease);

  Outcome<std::string> kept = extended.commit("kept");
  ASSERT_TRUE(kept) << kept.message();
  EXPECT_TRUE(kept.recorded());
  EXPECT_EQ(plain.commit("lost").error(), errc::lease_lost);
  ASSERT_TRUE(taker.commit("taken"));
  // Extending with no argument renews for the guard's lease.
  auto again = guard.template begin<std::string>("again");
  ASSERT_TRUE(again.acquired());
  EXPECT_TRUE(again.extend().ok());
}

REGISTER_TYPED_TEST_SUITE_P(TwoPhaseLeaseTest, ExtendKeepsTheKeyPastTheOriginalLease);

}  // namespace idem::testing
