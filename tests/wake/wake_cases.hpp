#pragma once
// The behaviour every WakingStore shares, for one store type (a maker of stores sharing records:
// the same object or the same file): await_change returns when the hold ends, whoever ends it,
// and a guard's waiting duplicates cost claim + await_change + claim. No timing is asserted: a
// wake that never comes shows as a test that does not finish (the bounds are minutes).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "idem/idem.hpp"
#include "support/call_counter.hpp"

namespace idem::testing {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

inline constexpr milliseconds kNoTimeout = std::chrono::minutes{10};  // only a wake ends a wait

inline ClaimRequest claim_of(std::string_view key, milliseconds lease = kNoTimeout) {
  return ClaimRequest{key, Fingerprint{1, 2}, lease, held_retention(kNoTimeout, lease)};
}

/// Starts a thread that does what a guard's waiting duplicate does: claims `held.key` and, while
/// it finds the hold `held`, waits for it to end (await_change), then claims again; `after` is
/// its last claim's answer. The main thread sleeps a little so that the waiter likely sleeps
/// before the hold ends (not relied on: either order must end the wait).
template <class S>
std::thread waiter_of(S& store, const Ticket& held, std::atomic<bool>& returned,
                      Result<Claim>& after) {
  std::thread waiter([&store, held, &returned, &after] {
    Result<Claim> busy = store.claim(claim_of(held.key));
    if (busy && busy->status == ClaimStatus::in_progress && busy->fence == held.fence) {
      store.await_change(held, kNoTimeout);
      busy = store.claim(claim_of(held.key));
    }
    after = std::move(busy);
    returned = true;
  });
  std::this_thread::sleep_for(20ms);
  return waiter;
}

template <class S>
void expect_commit_wakes(S& holder, S& waiting) {
  Result<Claim> held = holder.claim(claim_of("wake-commit"));
  ASSERT_TRUE(held);
  ASSERT_EQ(held->status, ClaimStatus::acquired);
  const Ticket ticket{"wake-commit", held->fence};
  std::atomic<bool> returned{false};
  Result<Claim> after{Claim{}};
  std::thread waiter = waiter_of(waiting, ticket, returned, after);
  EXPECT_FALSE(returned.load());  // the hold has not ended: only a wake or the bound returns
  ASSERT_TRUE(holder.commit(ticket, Completion{ClaimStatus::completed, "done", kNoTimeout}));
  waiter.join();
  EXPECT_TRUE(returned.load());
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, ClaimStatus::completed);
  EXPECT_EQ(after->result, "done");
}

template <class S>
void expect_abort_wakes(S& holder, S& waiting) {
  Result<Claim> held = holder.claim(claim_of("wake-abort"));
  ASSERT_TRUE(held);
  const Ticket ticket{"wake-abort", held->fence};
  std::atomic<bool> returned{false};
  Result<Claim> after{Claim{}};
  std::thread waiter = waiter_of(waiting, ticket, returned, after);
  ASSERT_TRUE(holder.abort(ticket));
  waiter.join();
  EXPECT_TRUE(returned.load());
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, ClaimStatus::acquired);  // released: the waiter takes the key
  EXPECT_GT(after->fence, held->fence);
}

/// The holder's lease ends; nothing wakes the waiter until a takeover does.
template <class S>
void expect_takeover_wakes(S& holder, S& waiting) {
  Result<Claim> held = holder.claim(claim_of("wake-takeover", 100ms));
  ASSERT_TRUE(held);
  const Ticket ticket{"wake-takeover", held->fence};
  std::atomic<bool> returned{false};
  Result<Claim> after{Claim{}};
  std::thread waiter = waiter_of(waiting, ticket, returned, after);
  Result<Claim> taken = waiting.claim(claim_of("wake-takeover"));
  while (taken && taken->status == ClaimStatus::in_progress) {  // until the lease ends
    std::this_thread::sleep_for(20ms);
    taken = waiting.claim(claim_of("wake-takeover"));
  }
  ASSERT_TRUE(taken);
  EXPECT_TRUE(taken->took_over);
  waiter.join();
  EXPECT_TRUE(returned.load());
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, ClaimStatus::in_progress);  // the new holder's
  EXPECT_EQ(after->fence, taken->fence);
}

/// One holder and `n` duplicates on threads of their own, all under Wait with bounds longer than
/// the test: the holder's handler runs until every duplicate waits in await_change, so each
/// duplicate's answer costs exactly claim (in_progress) + await_change + claim (replay).
template <class S>
void expect_duplicates_cost_three_calls(S& store, int n) {
  CallCounter<S> counted(store);
  IdempotencyGuard guard{
      counted, Options{.scope = "storm",
                       .lease = kNoTimeout,
                       .in_progress = Wait{.timeout = kNoTimeout, .max_backoff = kNoTimeout}}};
  std::atomic<int> runs{0};
  std::thread holder([&] {
    Outcome<std::string> out = guard.execute("k", [&] {
      runs.fetch_add(1);
      while (counted.awaits.load() < n) std::this_thread::sleep_for(1ms);
      return std::string("once");
    });
    EXPECT_TRUE(out.executed());
  });
  while (runs.load() < 1) std::this_thread::sleep_for(1ms);  // the holder runs first
  std::vector<std::thread> duplicates;
  std::atomic<int> replayed{0};
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
  EXPECT_EQ(counted.awaits.load(), n);  // woken once each: no bound ran out, no spurious wake
  EXPECT_EQ(counted.claims.load(), 1 + 2 * n);
  EXPECT_LE(counted.calls() - 2, 3 * n) << "the holder's claim and commit aside";
}

/// The same wait through a store that hides await_change: the guard polls, so the duplicate
/// claims more than twice while the holder runs on (the contrast to the case above).
template <class S>
void expect_hidden_wake_polls(S& store) {
  CallCounter<S, /*Wakes=*/false> counted(store);
  static_assert(!WakingStore<CallCounter<S, false>>);
  IdempotencyGuard guard{
      counted, Options{.scope = "polled",
                       .lease = kNoTimeout,
                       .in_progress = Wait{
                           .timeout = kNoTimeout, .initial_backoff = 1ms, .max_backoff = 2ms}}};
  std::atomic<bool> started{false};
  std::thread holder([&] {
    (void)guard.execute("k", [&] {
      started = true;
      while (counted.claims.load() < 5) std::this_thread::sleep_for(1ms);  // the poller's claims
      return std::string("once");
    });
  });
  while (!started.load()) std::this_thread::sleep_for(1ms);
  Outcome<std::string> out = guard.execute("k", [] { return std::string("again"); });
  holder.join();
  ASSERT_TRUE(out);
  EXPECT_TRUE(out.replayed());
  EXPECT_GE(counted.claims.load(), 5);
  EXPECT_EQ(counted.awaits.load(), 0);
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
