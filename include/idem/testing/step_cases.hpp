#pragma once
// Stores that keep steps (idem::StepStore): steps come back to the key's next holder in order,
// a stale holder can neither save nor load them, a finished record or another payload starts
// without them, and the guard's handlers resume at their first unfinished step. In transactional
// mode (StoreTraits::holds_until_finished) a step commits with the record: a holder that aborts
// takes its steps with it.

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "idem/idem.hpp"
#include "idem/steps.hpp"
#include "idem/testing/detail/conformance_case.hpp"

namespace idem::testing::conformance {

/// The names of `steps`, for compact expectations.
inline std::vector<std::string> step_names(const std::vector<StepRecord>& steps) {
  std::vector<std::string> names;
  names.reserve(steps.size());
  for (const StepRecord& s : steps) names.push_back(s.name);
  return names;
}

IDEM_TESTING_CASE(StepsComeBackInOrderToTheKeysNextHolder) {
  const auto k = this->key();
  const Claim first = this->acquired(k);
  const Ticket t1{k, first.fence};
  Result<std::vector<StepRecord>> none = this->store().load_steps(t1);
  ASSERT_TRUE(none.has_value()) << none.failure().describe();
  EXPECT_TRUE(none->empty());
  ASSERT_TRUE(this->store().save_step(t1, StepWrite{0, "create", std::string("r\0w", 3)}).ok());
  ASSERT_TRUE(this->store().save_step(t1, StepWrite{1, "charge", ""}).ok());
  ASSERT_TRUE(this->store().abort(t1).ok());

  const Claim second = this->acquired(k);
  Result<std::vector<StepRecord>> steps = this->store().load_steps(Ticket{k, second.fence});
  ASSERT_TRUE(steps.has_value()) << steps.failure().describe();
  if constexpr (HoldsUntilFinished<S>) {
    EXPECT_TRUE(steps->empty()) << "an aborted transaction's steps rolled back with it";
    return;
  }
  ASSERT_EQ(step_names(steps.value()), (std::vector<std::string>{"create", "charge"}));
  EXPECT_EQ(steps.value()[0].result, std::string("r\0w", 3));
  EXPECT_EQ(steps.value()[1].result, "");
}

IDEM_TESTING_CASE(AStaleHolderCanNeitherSaveNorLoadSteps) {
  const auto k = this->key();
  const Claim first = this->acquired(k);
  ASSERT_TRUE(this->store().abort(Ticket{k, first.fence}).ok());
  const Claim second = this->acquired(k);
  const Ticket stale{k, first.fence};
  EXPECT_EQ(this->store().save_step(stale, StepWrite{0, "late", "x"}).error(), errc::lease_lost);
  EXPECT_EQ(this->store().load_steps(stale).error(), errc::lease_lost);
  Result<std::vector<StepRecord>> steps = this->store().load_steps(Ticket{k, second.fence});
  ASSERT_TRUE(steps.has_value()) << steps.failure().describe();
  EXPECT_TRUE(steps->empty());
  EXPECT_EQ(this->store().save_step(Ticket{"never-claimed/" + k, 1}, StepWrite{0, "a", ""}).error(),
            errc::lease_lost);
}

// Stores without holds_until_finished only: a live holder there is never taken over.
IDEM_TESTING_CASE(ATakeoverGetsTheOldHoldersStepsAndFencesItOff) {
  {
    const auto k = this->key();
    const Claim old_holder = this->acquired(k);
    ASSERT_TRUE(this->store().save_step(Ticket{k, old_holder.fence}, StepWrite{0, "a", "1"}).ok());
    this->advance(this->kLease + this->kLease / 2);
    const Claim takeover = this->acquired(k);
    ASSERT_TRUE(takeover.took_over);
    const Ticket stale{k, old_holder.fence};
    EXPECT_EQ(this->store().save_step(stale, StepWrite{1, "b", "old"}).error(), errc::lease_lost);
    Result<std::vector<StepRecord>> steps = this->store().load_steps(Ticket{k, takeover.fence});
    ASSERT_TRUE(steps.has_value()) << steps.failure().describe();
    ASSERT_EQ(step_names(steps.value()), std::vector<std::string>{"a"});
    EXPECT_EQ(steps.value()[0].result, "1");
  }
}

IDEM_TESTING_CASE(AFinishedRecordKeepsNoSteps) {
  const auto k = this->key();
  const Claim held = this->acquired(k);
  ASSERT_TRUE(this->store().save_step(Ticket{k, held.fence}, StepWrite{0, "a", "1"}).ok());
  ASSERT_TRUE(this->commit(k, held.fence, "r", ClaimStatus::completed, this->kLease).ok());
  this->advance(this->kLease + this->kLease / 2);
  const Claim again = this->acquired(k);
  Result<std::vector<StepRecord>> steps = this->store().load_steps(Ticket{k, again.fence});
  ASSERT_TRUE(steps.has_value()) << steps.failure().describe();
  EXPECT_TRUE(steps->empty()) << "a new run of an expired key starts afresh";
}

IDEM_TESTING_CASE(AnotherPayloadStartsWithoutTheSteps) {
  const auto k = this->key();
  const Claim first = this->acquired(k, {1, 1});
  const Ticket t1{k, first.fence};
  ASSERT_TRUE(this->store().save_step(t1, StepWrite{0, "a", "A0"}).ok());
  ASSERT_TRUE(this->store().save_step(t1, StepWrite{1, "b", "A1"}).ok());
  ASSERT_TRUE(this->store().abort(t1).ok());

  const Claim other = this->acquired(k, {2, 2});
  const Ticket t2{k, other.fence};
  Result<std::vector<StepRecord>> none = this->store().load_steps(t2);
  ASSERT_TRUE(none.has_value()) << none.failure().describe();
  EXPECT_TRUE(none->empty());
  ASSERT_TRUE(this->store().save_step(t2, StepWrite{0, "x", "B0"}).ok());
  Result<std::vector<StepRecord>> mine = this->store().load_steps(t2);
  ASSERT_TRUE(mine.has_value()) << mine.failure().describe();
  ASSERT_EQ(step_names(mine.value()), std::vector<std::string>{"x"})
      << "none of the other payload's";
  EXPECT_EQ(mine.value()[0].result, "B0");
}

IDEM_TESTING_CASE(GuardResumesAHandlerAtItsFirstUnfinishedStep) {
  IdempotencyGuard guard{this->store(), Options{.scope = this->key("resume")}};
  int created = 0;
  int charged = 0;
  int sent = 0;
  std::vector<std::string> charge_keys;
  bool crash_after_charge = true;
  auto handler = [&](Context& ctx) {
    const int ride = ctx.step("create", [&] { return 100 + ++created; });
    const std::string charge = ctx.step("charge", [&] {
      ++charged;
      charge_keys.push_back(ctx.step_key("charge"));
      return "ch_" + std::to_string(ride);
    });
    if (crash_after_charge) throw std::runtime_error("crashed after the charge");
    ctx.step("receipt", [&] { ++sent; });
    return charge;
  };
  EXPECT_THROW((void)guard.execute("ride-1", handler), std::runtime_error);
  crash_after_charge = false;
  auto out = guard.execute("ride-1", handler);
  ASSERT_TRUE(out.has_value()) << out.error().message();
  // In transactional mode the failed run's transaction took its steps with it.
  EXPECT_EQ(out.value(), HoldsUntilFinished<S> ? "ch_102" : "ch_101");
  EXPECT_EQ(sent, 1);
  if constexpr (HoldsUntilFinished<S>) {
    // The failed run's transaction rolled back with its steps: both ran again, once committed.
    EXPECT_EQ(created, 2);
    EXPECT_EQ(charged, 2);
  } else {
    EXPECT_EQ(created, 1) << "a completed step ran again";
    EXPECT_EQ(charged, 1) << "a completed step ran again";
  }
  for (const std::string& k : charge_keys) EXPECT_EQ(k, charge_keys.front());

  // Completed: a repeat replays, and runs no step.
  auto replay = guard.execute("ride-1", handler);
  EXPECT_TRUE(replay.replayed());
  EXPECT_EQ(sent, 1);
}

// Stores without holds_until_finished only: there, steps of an aborted run roll back with it.
IDEM_TESTING_CASE(GuardRefusesStepsInAnotherOrderAndKeepsTheKeysSteps) {
  {
    IdempotencyGuard guard{this->store(), Options{.scope = this->key("order")}};
    int a_runs = 0;
    EXPECT_THROW((void)guard.execute("k",
                                     [&](Context& ctx) {
                                       ctx.step("a", [&] { return ++a_runs; });
                                       throw std::runtime_error("stop after a");
                                       return 0;
                                     }),
                 std::runtime_error);
    try {
      (void)guard.execute("k", [&](Context& ctx) {
        ctx.step("b", [] { return 1; });
        return 0;
      });
      ADD_FAILURE() << "a handler whose first step is not 'a' ran";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), errc::step_mismatch) << e.what();
    }
    try {
      (void)guard.execute("k", [&](Context& ctx) {
        ctx.step("a", [&] { return ++a_runs; });
        ctx.step("a", [&] { return ++a_runs; });
        return 0;
      });
      ADD_FAILURE() << "a step name that came twice was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), errc::step_mismatch) << e.what();
    }
    // The key is intact: the right order resumes after 'a'.
    auto out = guard.execute("k", [&](Context& ctx) {
      const int a = ctx.step("a", [&] { return ++a_runs; });
      return a + ctx.step("b", [] { return 10; });
    });
    ASSERT_TRUE(out.has_value()) << out.error().message();
    EXPECT_EQ(out.value(), 11);
    EXPECT_EQ(a_runs, 1);
  }
}

}  // namespace idem::testing::conformance
