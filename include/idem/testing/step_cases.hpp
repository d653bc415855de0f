#pragma once
// Stores that keep steps (idem::StepStore): steps come back to the key's next holder in order,
// a stale holder can neither save nor load them, a finished record or another payload starts
// without them, and the guard's handlers resume at their first unfinished step. In transactional
// mode (StoreTraits::holds_until_finished) a step commits with the record: a holder that aborts
// takes its steps with it. Stores that keep requests (idem::CompletableStore) find the runs they
// kept once abandoned, and never a finished, expired or stale holder's.

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "idem/engine/effective_key.hpp"
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

// A run that expired in progress (its holder gone, the record past its retention) is over: the
// next claim of the same request starts afresh, without its steps (docs/steps.md).
IDEM_TESTING_CASE(AnExpiredRunLeavesNoStepsToTheNextOne) {
  const auto k = this->key();
  Result<Claim> held = this->store().claim(ClaimRequest{
      .key = k, .fingerprint = {1, 2}, .lease = this->kLease, .retention = this->kLease});
  ASSERT_TRUE(held.has_value()) << held.failure().describe();
  ASSERT_EQ(held->status, ClaimStatus::acquired);
  ASSERT_TRUE(this->store().save_step(Ticket{k, held->fence}, StepWrite{0, "a", "1"}).ok());
  // Past the record's retention (twice the lease, idem::held_retention).
  this->advance(2 * this->kLease + this->kLease / 2);
  const Claim again = this->acquired(k);
  EXPECT_FALSE(again.took_over);
  Result<std::vector<StepRecord>> steps = this->store().load_steps(Ticket{k, again.fence});
  ASSERT_TRUE(steps.has_value()) << steps.failure().describe();
  EXPECT_TRUE(steps->empty()) << "the expired run's step came back";
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

// ---- Stores that keep requests (idem::CompletableStore), without holds_until_finished --------

/// An effective key of `scope`, as the guard makes it.
inline std::string scoped_key(std::string_view scope, std::string_view id) {
  return std::string(::idem::detail::EffectiveKey(scope, {}, id).view());
}

/// The prefix every key of `scope` starts with, as idem::Completer passes it to find_abandoned.
inline std::string scope_keys_prefix(std::string_view scope) {
  std::string prefix(::idem::detail::EffectiveKey(scope, {}, {}).view());
  prefix.pop_back();  // the principal's length
  return prefix;
}

/// find_abandoned's answer as key -> request, or a failure of the case.
template <class S>
std::map<std::string, std::string> abandoned_in(S& store, std::string_view prefix,
                                                std::size_t limit = 100) {
  Result<std::vector<Abandoned>> found = store.find_abandoned(prefix, limit);
  EXPECT_TRUE(found.has_value()) << (found ? "" : found.failure().describe());
  std::map<std::string, std::string> out;
  if (!found) return out;
  for (Abandoned& a : found.value()) {
    EXPECT_FALSE(out.contains(a.key)) << "a record found twice";
    out[a.key] = std::move(a.request);
  }
  return out;
}

IDEM_TESTING_CASE(AKeptRequestIsFoundOnceItsRunIsAbandoned) {
  const std::string scope = this->key("scope");
  const std::string prefix = scope_keys_prefix(scope);
  const std::string released = scoped_key(scope, "released");
  const std::string lapsed = scoped_key(scope, "lapsed");
  const std::string live = scoped_key(scope, "live");
  const std::string bare = scoped_key(scope, "bare");  // abandoned, nothing kept
  const std::string other = scoped_key(this->key("other scope"), "released");
  const std::string request("req\0\r\n", 6);
  std::map<std::string, Fence> fences;
  for (const std::string& k : {released, bare, other}) fences[k] = this->acquired(k).fence;
  Result<Claim> long_lease = this->claim(live, {1, 2}, this->kTtl / 2);
  ASSERT_TRUE(long_lease.has_value()) << long_lease.failure().describe();
  fences[live] = long_lease->fence;
  // Claimed last, with kLease: the check below must come before it lapses.
  fences[lapsed] = this->acquired(lapsed).fence;
  for (const std::string& k : {lapsed, released, live, other}) {
    const Status kept = this->store().keep_request(Ticket{k, fences[k]}, request + k);
    ASSERT_TRUE(kept.ok()) << kept.failure().describe();
  }
  EXPECT_TRUE(abandoned_in(this->store(), prefix).empty()) << "live leases are not abandoned";

  for (const std::string& k : {released, bare, other}) {
    ASSERT_TRUE(this->store().abort(Ticket{k, fences[k]}).ok());
  }
  this->advance(this->kLease + this->kLease / 2);
  const std::map<std::string, std::string> found = abandoned_in(this->store(), prefix);
  EXPECT_EQ(found, (std::map<std::string, std::string>{{released, request + released},
                                                       {lapsed, request + lapsed}}));
  EXPECT_EQ(abandoned_in(this->store(), prefix, 1).size(), 1u) << "the limit is not kept";
  EXPECT_EQ(abandoned_in(this->store(), prefix, 0).size(), 0u);
}

IDEM_TESTING_CASE(AStaleHolderKeepsNoRequest) {
  const std::string scope = this->key("scope");
  const std::string k = scoped_key(scope, "k");
  const Claim first = this->acquired(k);
  ASSERT_TRUE(this->store().abort(Ticket{k, first.fence}).ok());
  const Claim second = this->acquired(k);
  EXPECT_EQ(this->store().keep_request(Ticket{k, first.fence}, "late").error(), errc::lease_lost);
  EXPECT_EQ(this->store().keep_request(Ticket{scoped_key(scope, "never claimed"), 1}, "x").error(),
            errc::lease_lost);
  ASSERT_TRUE(this->store().abort(Ticket{k, second.fence}).ok());
  EXPECT_TRUE(abandoned_in(this->store(), scope_keys_prefix(scope)).empty())
      << "a stale holder's request was kept";
}

IDEM_TESTING_CASE(FinishedAndExpiredRunsAreNotAbandoned) {
  const std::string scope = this->key("scope");
  const std::string prefix = scope_keys_prefix(scope);
  const std::string done = scoped_key(scope, "done");
  const std::string expired = scoped_key(scope, "expired");
  const std::string again = scoped_key(scope, "again");  // kept by two runs: found once

  const Claim d = this->acquired(done);
  ASSERT_TRUE(this->store().keep_request(Ticket{done, d.fence}, "d").ok());
  ASSERT_TRUE(this->commit(done, d.fence, "result").ok());

  Result<Claim> e = this->store().claim(ClaimRequest{
      .key = expired, .fingerprint = {1, 2}, .lease = this->kLease, .retention = this->kLease});
  ASSERT_TRUE(e.has_value() && e->status == ClaimStatus::acquired);
  ASSERT_TRUE(this->store().keep_request(Ticket{expired, e->fence}, "e").ok());
  ASSERT_TRUE(this->store().abort(Ticket{expired, e->fence}).ok());

  for (int run = 0; run < 2; ++run) {
    const Claim a = this->acquired(again);
    ASSERT_TRUE(this->store().keep_request(Ticket{again, a.fence}, "a").ok());
    ASSERT_TRUE(this->store().abort(Ticket{again, a.fence}).ok());
  }
  this->advance(this->kLease * 3);
  EXPECT_EQ(abandoned_in(this->store(), prefix),
            (std::map<std::string, std::string>{{again, "a"}}));
  // Found again on the next pass: looking changes nothing.
  EXPECT_EQ(abandoned_in(this->store(), prefix).size(), 1u);
}

IDEM_TESTING_CASE(ACompleterFinishesTheRunAGuardKept) {
  const Options options{
      .scope = this->key("completer"), .lease = this->kLease, .keep_request = true};
  IdempotencyGuard guard{this->store(), options};
  int runs = 0;
  EXPECT_THROW((void)guard.execute("r-1", "pickup=A",
                                   [&](Context& ctx) -> std::string {
                                     ctx.step("create", [&] { ++runs; });
                                     throw std::runtime_error("the holder failed");
                                   }),
               std::runtime_error);
  Completer completer(this->store(), options, [&](Context& ctx, std::string_view request) {
    ctx.step("create", [&] { ++runs; });
    return "ride for " + std::string(request);
  });
  Result<CompleterPass> pass = completer.run_once();
  ASSERT_TRUE(pass.has_value()) << pass.failure().describe();
  EXPECT_EQ(pass->found, 1u);
  EXPECT_EQ(pass->completed, 1u);
  EXPECT_EQ(runs, 1) << "the recorded step ran again";
  auto replay = guard.execute("r-1", "pickup=A", [] { return std::string("not run"); });
  EXPECT_TRUE(replay.replayed());
  EXPECT_EQ(replay.value(), "ride for pickup=A");
  EXPECT_EQ(completer.run_once()->found, 0u);
}

}  // namespace idem::testing::conformance
