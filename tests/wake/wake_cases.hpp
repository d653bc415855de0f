#pragma once
// What the wake tests of particular stores share, beside the conformance kit's wake cases
// (idem/testing/wake_cases.hpp, run on every store of the kit): the wakes of stores outside the
// kit (the request-ID caches), a schema upgrade's first wake, and the guard's waits through
// counted stores (thirty-one duplicates, a hidden wake, the timeout, a spurious wake). No timing
// is asserted: a wake that never comes shows as a test that does not finish.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "idem/idem.hpp"
#include "idem/testing/call_counter.hpp"
#include "idem/testing/wake_cases.hpp"

namespace idem::testing {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

inline constexpr milliseconds kNoTimeout = std::chrono::minutes{10};  // only a wake ends a wait

inline ClaimRequest claim_of(std::string_view key, milliseconds lease = kNoTimeout) {
  return ClaimRequest{key, Fingerprint{1, 2}, lease, held_retention(kNoTimeout, lease)};
}

/// A hold of `key` through `holder` ends by a commit; the duplicate waiting through `waiting`
/// (the same store, or another over the same records) is woken and replays.
template <class S>
void expect_commit_wakes(S& holder, S& waiting, std::string_view key = "wake-commit") {
  Result<Claim> held = holder.claim(claim_of(key));
  ASSERT_TRUE(held);
  ASSERT_EQ(held->status, ClaimStatus::acquired);
  conformance::Waiter<S> waiter(waiting, std::string(key), held->fence);
  EXPECT_FALSE(waiter.returned());  // the hold has not ended: only a wake or the bound returns
  ASSERT_TRUE(holder.commit(Ticket{key, held->fence},
                            Completion{ClaimStatus::completed, "done", kNoTimeout}));
  Result<Claim>& after = waiter.answer();
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, ClaimStatus::completed);
  EXPECT_EQ(after->result, "done");
}

/// The same through an abort: the woken duplicate takes the key under a larger fence.
template <class S>
void expect_abort_wakes(S& holder, S& waiting, std::string_view key = "wake-abort") {
  Result<Claim> held = holder.claim(claim_of(key));
  ASSERT_TRUE(held);
  conformance::Waiter<S> waiter(waiting, std::string(key), held->fence);
  ASSERT_TRUE(holder.abort(Ticket{key, held->fence}));
  Result<Claim>& after = waiter.answer();
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, ClaimStatus::acquired);  // released: the waiter takes the key
  EXPECT_GT(after->fence, held->fence);
}

/// One holder and `n` duplicates of one key: each duplicate costs claim + await_change + claim
/// (the kit's case, at a scale of the caller's choosing).
template <class S>
void expect_duplicates_cost_three_calls(S& store, int n) {
  conformance::expect_duplicates_cost_three_calls(store, n, "storm");
}

/// The same wait through a store that hides await_change: the guard polls, so the duplicate
/// claims more than twice while the holder runs on (the contrast to the case above).
template <class S>
void expect_hidden_wake_polls(S& store) {
  CallCounter<S, /*Wakes=*/false> counted(store);
  static_assert(!WakingStore<CallCounter<S, false>>);
  conformance::expect_a_duplicate_polls(counted, "polled");
}

/// Wait::timeout still ends a wait that nothing wakes: the duplicate is refused in_progress.
template <class S>
void expect_timeout_holds_without_commit(S& store) {
  CallCounter<S> counted(store);
  IdempotencyGuard guard{counted,
                         Options{.scope = "timeout",
                                 .lease = kNoTimeout,
                                 .in_progress = Wait{.timeout = 200ms, .max_backoff = kNoTimeout}}};
  std::atomic<bool> started{false};
  std::atomic<bool> done{false};
  std::thread holder([&] {
    (void)guard.execute("k", [&] {
      started = true;
      while (!done.load()) std::this_thread::sleep_for(1ms);
      return 1;
    });
  });
  while (!started.load()) std::this_thread::sleep_for(1ms);
  Outcome<int> refused = guard.execute("k", [] { return 2; });
  done = true;
  holder.join();
  EXPECT_EQ(refused.error(), errc::in_progress);
  EXPECT_GE(counted.awaits.load(), 1);  // it waited on the store, and the bound ended the wait
}

/// A wake that comes before the hold ended (await_change may return early): the duplicate claims
/// again, finds the holder, waits again, and replays once the holder commits.
template <class S>
void expect_spurious_wake_claims_again(S& store) {
  CallCounter<S> counted(store);
  counted.spurious = 1;
  IdempotencyGuard guard{
      counted, Options{.scope = "spurious",
                       .lease = kNoTimeout,
                       .in_progress = Wait{.timeout = kNoTimeout, .max_backoff = kNoTimeout}}};
  std::atomic<bool> started{false};
  std::thread holder([&] {
    (void)guard.execute("k", [&] {
      started = true;
      while (counted.awaits.load() < 2) std::this_thread::sleep_for(1ms);  // past the early one
      return std::string("once");
    });
  });
  while (!started.load()) std::this_thread::sleep_for(1ms);
  Outcome<std::string> out = guard.execute("k", [] { return std::string("again"); });
  holder.join();
  ASSERT_TRUE(out) << out.message();
  EXPECT_TRUE(out.replayed());
  EXPECT_EQ(out.value(), "once");
  EXPECT_EQ(counted.claims.load(), 1 + 3);  // the holder's, then in_progress twice and a replay
  EXPECT_EQ(counted.awaits.load(), 2);
}

}  // namespace idem::testing
