#pragma once
// Cases for stores that wake a waiting duplicate (idem::WakingStore, and an asynchronous store
// that can wait, behind BlockingStore): await_change(held, bound) returns once the hold `held`
// ended, whoever ended it (a commit or an abort through this store or another over the same
// records, a takeover, an admin's release); at once when that hold ended after the caller's
// claim found it; and at its bound when nothing ends it. A guard's waiting duplicate then costs
// claim + await_change + claim. No timing is asserted: a wake that never comes shows as a case that
// does not finish (its bound is minutes, the test runner's timeout ends it).
//
// A store whose traits say it never waits (StoreTraits::waits = false: the asynchronous Redis
// store without wait connections) is checked for what the guard does instead: its duplicates poll
// and never call await_change.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "idem/admin.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/guard.hpp"
#include "idem/store.hpp"
#include "idem/testing/call_counter.hpp"
#include "idem/testing/detail/conformance_case.hpp"
#include "idem/testing/faces.hpp"
#include "idem/testing/store_traits.hpp"

namespace idem::testing {

/// Whether the store waits in await_change at all: a blocking WakingStore always does; a store
/// with wakes() (an asynchronous one behind BlockingStore) says so itself.
template <class S>
bool waits_in_await_change(const S& store) {
  if constexpr (requires { store.wakes(); }) {
    return store.wakes();
  } else {
    return true;
  }
}

/// The cases below read the store's own time only when it is the process's steady clock: a
/// guard waits on the store (rather than sleeping on its clock) only then.
template <class S>
concept ReadsTheSteadyClock = !requires(S & store) {
  StoreTraits<S>::clock(store);
};

namespace conformance {

inline constexpr std::chrono::milliseconds kUnwoken = std::chrono::minutes{10};

/// A duplicate's claim: a lease and a retention that outlive the case.
template <class S>
Result<Claim> claim_as_duplicate(S& store, std::string_view key) {
  return store.claim(ClaimRequest{.key = key,
                                  .fingerprint = {1, 2},
                                  .lease = kUnwoken,
                                  .retention = held_retention(kUnwoken, kUnwoken)});
}

/// The claim found the hold under `held` still on: in progress under that fence, or, where a
/// holder's open transaction locks the key (holds_until_finished), refused as in_progress.
inline bool still_held(const Result<Claim>& claim, Fence held) {
  if (!claim) return claim.error() == errc::in_progress;
  return claim->status == ClaimStatus::in_progress && claim->fence == held;
}

/// A duplicate on a thread of its own, as a guard's waiting duplicate does it: it claims the
/// held key and, while it finds that hold, waits in await_change and claims again. `answer` is
/// its last claim's.
template <class S>
class Waiter {
 public:
  Waiter(S& store, std::string key, Fence held) {
    thread_ = std::thread([this, &store, key = std::move(key), held] {
      Result<Claim> busy = claim_as_duplicate(store, key);
      while (still_held(busy, held)) {
        store.await_change(Ticket{key, held}, kUnwoken);
        busy = claim_as_duplicate(store, key);
      }
      answer_ = std::move(busy);
      returned_ = true;
    });
    // Likely asleep in await_change before the hold ends; either order must end the wait.
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;
  ~Waiter() {
    if (thread_.joinable()) thread_.join();
  }

  bool returned() const noexcept { return returned_.load(); }
  /// Its last claim's answer, once it has returned.
  Result<Claim>& answer() {
    thread_.join();
    return answer_;
  }

 private:
  Result<Claim> answer_{Claim{}};
  std::atomic<bool> returned_{false};
  std::thread thread_;
};

/// One holder and `n` duplicates on threads of their own, all under Wait with bounds longer than
/// the test: the holder's handler runs until every duplicate waits in await_change, so each
/// duplicate's answer costs exactly claim (in progress) + await_change + claim (the replay).
template <class S>
void expect_duplicates_cost_three_calls(S& store, int n, const std::string& scope) {
  CallCounter<S> counted(store);
  IdempotencyGuard guard{counted,
                         Options{.scope = scope,
                                 .lease = conformance::kUnwoken,
                                 .in_progress = Wait{.timeout = conformance::kUnwoken,
                                                     .max_backoff = conformance::kUnwoken}}};
  std::atomic<int> runs{0};
  std::thread holder([&] {
    Outcome<std::string> out = guard.execute("k", [&] {
      runs.fetch_add(1);
      while (counted.awaits.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds{1});
      return std::string("once");
    });
    EXPECT_TRUE(out.executed()) << out.message();
  });
  while (runs.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds{1});
  std::atomic<int> replayed{0};
  std::vector<std::thread> duplicates;
  for (int i = 0; i < n; ++i) {
    duplicates.emplace_back([&] {
      Outcome<std::string> out = guard.execute("k", [&] {
        runs.fetch_add(1);
        return std::string("again");
      });
      if (out.replayed() && out.value() == "once") replayed.fetch_add(1);
    });
  }
  for (std::thread& t : duplicates) t.join();
  holder.join();
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(replayed.load(), n);
  EXPECT_EQ(counted.awaits.load(), n) << "woken once each: no bound ran out, no spurious wake";
  EXPECT_EQ(counted.claims.load(), 1 + 2 * n);
  EXPECT_EQ(counted.claims_after_wait.load(), n) << "each duplicate's claim after its wake";
  EXPECT_LE(counted.calls() - 2, 3 * n) << "the holder's claim and commit aside";
}

/// A duplicate through `counted` (a CallCounter over a store that cannot wait, or hides that it
/// can) while a holder runs on: the guard polls, claiming again and again, and never calls
/// await_change; it replays once the holder commits.
template <class Counted>
void expect_a_duplicate_polls(Counted& counted, const std::string& scope) {
  IdempotencyGuard guard{
      counted, Options{.scope = scope,
                       .lease = conformance::kUnwoken,
                       .in_progress = Wait{.timeout = conformance::kUnwoken,
                                           .initial_backoff = std::chrono::milliseconds{1},
                                           .max_backoff = std::chrono::milliseconds{2}}}};
  std::atomic<bool> started{false};
  std::thread holder([&] {
    (void)guard.execute("k", [&] {
      started = true;
      while (counted.claims.load() < 5) {  // the poller's claims
        std::this_thread::sleep_for(std::chrono::milliseconds{1});
      }
      return std::string("once");
    });
  });
  while (!started.load()) std::this_thread::sleep_for(std::chrono::milliseconds{1});
  Outcome<std::string> out = guard.execute("k", [] { return std::string("again"); });
  holder.join();
  ASSERT_TRUE(out) << out.message();
  EXPECT_TRUE(out.replayed());
  EXPECT_GE(counted.claims.load(), 5);
  EXPECT_EQ(counted.claims_after_wait.load(), counted.claims.load() - 2)
      << "every claim but the holder's and the duplicate's first follows a pause";
  EXPECT_EQ(counted.awaits.load(), 0);
}

template <class S>
class WakeTest : public RecordStoreTest<S> {
 protected:
  /// A hold of `k` under a lease that outlives the case, unless `lease` says otherwise.
  Claim hold(std::string_view k, std::chrono::milliseconds lease = kUnwoken) {
    Result<Claim> c = this->claim(k, {1, 2}, lease);
    EXPECT_TRUE(c.has_value()) << (c ? "" : c.failure().describe());
    if (c) {
      EXPECT_EQ(c->status, ClaimStatus::acquired);
    }
    return c ? std::move(c).value() : Claim{};
  }
  Status commit_kept(S& s, std::string_view k, Fence fence) {
    return s.commit(Ticket{k, fence}, Completion{ClaimStatus::completed, "done", kUnwoken});
  }
};

// A wake-test case: `S` is the store's type.
#define IDEM_TESTING_WAKE_CASE(Name) \
  IDEM_TESTING_CASE_OF(::idem::testing::conformance::WakeTest, Store_, Name)

IDEM_TESTING_WAKE_CASE(ACommitWakesAWaiterOnTheSameStore) {
  const std::string k = this->key();
  const Claim held = this->hold(k);
  Waiter<S> waiter(this->store(), k, held.fence);
  EXPECT_FALSE(waiter.returned()) << "the hold has not ended: only a wake or the bound returns";
  ASSERT_TRUE(this->commit_kept(this->store(), k, held.fence));
  Result<Claim>& after = waiter.answer();
  ASSERT_TRUE(after) << after.failure().describe();
  EXPECT_EQ(after->status, ClaimStatus::completed);
  EXPECT_EQ(after->result, "done");
}

IDEM_TESTING_WAKE_CASE(ACommitThroughAnotherStoreWakesItsWaiter) {
  std::unique_ptr<S> other = this->reopen();
  ASSERT_TRUE(other);
  const std::string k = this->key();
  const Claim held = this->hold(k);
  Waiter<S> waiter(*other, k, held.fence);
  ASSERT_TRUE(this->commit_kept(this->store(), k, held.fence));
  Result<Claim>& after = waiter.answer();
  ASSERT_TRUE(after) << after.failure().describe();
  EXPECT_EQ(after->status, ClaimStatus::completed);
}

IDEM_TESTING_WAKE_CASE(AnAbortWakesAWaiterThatThenTakesTheKey) {
  const std::string k = this->key();
  const Claim held = this->hold(k);
  Waiter<S> waiter(this->store(), k, held.fence);
  ASSERT_TRUE(this->store().abort(Ticket{k, held.fence}));
  Result<Claim>& after = waiter.answer();
  ASSERT_TRUE(after) << after.failure().describe();
  EXPECT_EQ(after->status, ClaimStatus::acquired);
  EXPECT_GT(after->fence, held.fence);
  ASSERT_TRUE(this->commit_kept(this->store(), k, after->fence));
}

// The lease ends and nothing else happens: the waiter may notice by itself or be woken by the
// takeover; either way exactly one of the two callers takes the key over, and the other finds
// that one holding it.
IDEM_TESTING_WAKE_CASE(ATakeoverAfterTheLeaseWakesAWaiter) {
  const std::string k = this->key();
  const Claim held = this->hold(k, this->kLease);
  Waiter<S> waiter(this->store(), k, held.fence);
  this->advance(this->kLease + this->kLease / 2);
  Result<Claim> taken = this->claim(k, {1, 2}, kUnwoken);
  ASSERT_TRUE(taken) << taken.failure().describe();
  Result<Claim>& after = waiter.answer();
  ASSERT_TRUE(after) << after.failure().describe();
  EXPECT_NE(taken->took_over, after->took_over) << "one caller, and only one, takes the key over";
  const Claim& taker = taken->took_over ? taken.value() : after.value();
  const Claim& other = taken->took_over ? after.value() : taken.value();
  EXPECT_EQ(taker.status, ClaimStatus::acquired);
  EXPECT_EQ(other.status, ClaimStatus::in_progress);
  EXPECT_EQ(other.fence, taker.fence);
  ASSERT_TRUE(this->commit_kept(this->store(), k, taker.fence));
}

IDEM_TESTING_WAKE_CASE(AnAdminReleaseWakesAWaiter) {
  const std::string scope = "wake";
  const Key key{this->key()};
  const detail::EffectiveKey k(scope, key.principal, key.id);
  const Claim held = this->hold(k.view());
  Waiter<S> waiter(this->store(), std::string(k.view()), held.fence);
  std::unique_ptr<admin::Admin> admin = StoreTraits<S>::admin(this->store());
  ASSERT_TRUE(admin);
  Result<admin::Change> released = admin->release(scope, key, held.fence);
  ASSERT_TRUE(released) << released.failure().describe();
  EXPECT_TRUE(released->changed);
  Result<Claim>& after = waiter.answer();
  ASSERT_TRUE(after) << after.failure().describe();
  EXPECT_EQ(after->status, ClaimStatus::acquired);
  ASSERT_TRUE(this->commit_kept(this->store(), k.view(), after->fence));
}

// A hold that ended between the duplicate's claim (which found it) and its wait: the wait
// returns without a wake, as the guard's duplicate then claims at once and replays.
IDEM_TESTING_WAKE_CASE(AHoldThatEndedBeforeTheWaitIsNotWaitedFor) {
  const std::string k = this->key();
  const Claim held = this->hold(k);
  std::promise<void> found;
  std::promise<void> ended;
  std::thread duplicate([&] {
    EXPECT_TRUE(still_held(claim_as_duplicate(this->store(), k), held.fence));
    found.set_value();
    ended.get_future().wait();  // the holder commits between this claim and the wait
    this->store().await_change(Ticket{k, held.fence}, kUnwoken);
    Result<Claim> replay = claim_as_duplicate(this->store(), k);
    ASSERT_TRUE(replay) << replay.failure().describe();
    EXPECT_EQ(replay->status, ClaimStatus::completed);
  });
  found.get_future().wait();
  EXPECT_TRUE(this->commit_kept(this->store(), k, held.fence));
  ended.set_value();
  duplicate.join();
}

IDEM_TESTING_WAKE_CASE(AWaitNothingEndsReturnsAtItsBound) {
  const std::string k = this->key();
  const Claim held = this->hold(k);
  this->store().await_change(Ticket{k, held.fence}, std::chrono::milliseconds{50});
  Result<Claim> still = this->claim(k);  // the bound, not the hold's end, returned it
  ASSERT_TRUE(still) << still.failure().describe();
  EXPECT_EQ(still->status, ClaimStatus::in_progress);
  ASSERT_TRUE(this->commit_kept(this->store(), k, held.fence));
}

// One holder and eight duplicates under Wait with bounds longer than the case: each duplicate's
// answer costs exactly claim (in progress) + await_change + claim (the replay).
IDEM_TESTING_WAKE_CASE(AWaitingDuplicateCostsThreeStoreCalls) {
  expect_duplicates_cost_three_calls(this->store(), 8, this->key());
}

// A store that cannot wait: the guard's duplicate polls, claiming again and again, and never
// calls await_change.
IDEM_TESTING_WAKE_CASE(AStoreThatCannotWaitIsPolled) {
  EXPECT_FALSE(waits_in_await_change(this->store()));
  CallCounter<S> counted(this->store());
  expect_a_duplicate_polls(counted, this->key());
}

#undef IDEM_TESTING_WAKE_CASE

/// Registers the wake cases that apply to S as `<prefix>/WakeConformance.<Case>`.
template <class S>
void register_wake_cases(const char* prefix, const char* file, int line) {
  const std::string suite = std::string(prefix) + "/WakeConformance";
  if constexpr (NeverWaits<S>) {
    register_cases<S, AStoreThatCannotWaitIsPolled>(suite.c_str(), file, line);
  } else {
    register_cases<S, ACommitWakesAWaiterOnTheSameStore, AnAbortWakesAWaiterThatThenTakesTheKey,
                   AWaitNothingEndsReturnsAtItsBound>(suite.c_str(), file, line);
    if constexpr (WaitSeesEarlierEnds<S>) {
      register_cases<S, AHoldThatEndedBeforeTheWaitIsNotWaitedFor>(suite.c_str(), file, line);
    }
    if constexpr (!HoldsUntilFinished<S> && TakeoverWakes<S>) {
      register_cases<S, ATakeoverAfterTheLeaseWakesAWaiter>(suite.c_str(), file, line);
    }
    if constexpr (Reopenable<S>) {
      register_cases<S, ACommitThroughAnotherStoreWakesItsWaiter>(suite.c_str(), file, line);
    }
    if constexpr (AdminTraits<S> && AdminReleaseWakes<S> &&
                  !HoldsUntilFinished<S>) {  // a transaction holds the key
      register_cases<S, AnAdminReleaseWakesAWaiter>(suite.c_str(), file, line);
    }
    if constexpr (ReadsTheSteadyClock<S> && !HoldsUntilFinished<S>) {
      register_cases<S, AWaitingDuplicateCostsThreeStoreCalls>(suite.c_str(), file, line);
    }
  }
}

}  // namespace conformance
}  // namespace idem::testing
