#pragma once
// The network-fault cases a networked store runs behind a FaultRelay (support/fault_relay.hpp)
// between its client and the server: a silent network (stall), a frozen one (hold), a slow one
// (delay), cut and refused connections, and a commit whose reply is lost or which is cut on its
// way. No call may hang: every call runs with a bound on its duration, and the store recovers
// once the network is back.
//
// A backend's test derives its fixture from NetworkFaultTest<Store, Param> (Param: the
// TestWithParam parameter, a mode or a connection setting), makes the relay and the store in
// SetUp and hands them to start(), overrides the hooks below where its server differs, and
// registers the cases with IDEM_NETWORK_FAULT_CASES(Fixture).

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "idem/context.hpp"
#include "idem/guard.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "support/bounded_calls.hpp"
#include "support/fault_relay.hpp"

namespace idem::testing {

template <class S, class Param>
class NetworkFaultTest : public ::testing::TestWithParam<Param> {
 protected:
  using milliseconds = std::chrono::milliseconds;

  // Bounds on call durations (generous: a loaded machine is slow). A call without a reply is
  // given up after the store's reply timeout; a call whose commit keeps failing makes three
  // commit attempts in all.
  static constexpr milliseconds kCallBound{4000};
  static constexpr milliseconds kCommitRetriesBound{9000};

  // --- What a backend says about itself --------------------------------------------------------
  /// The handler holds the store's transaction (its writes commit with the record).
  virtual bool transactional() const { return false; }
  /// Runs inside each handler, before the fault the case injects there (e.g. a business write).
  virtual void in_handler(Context& /*ctx*/, const std::string& /*key*/) {}
  /// The handler's writes that committed for `key` (checked in transactional mode only).
  virtual long long business_rows(const std::string& /*key*/) { return 1; }
  /// A client message that carries a commit, or a read a commit's retry makes to see whether it
  /// landed: their replies are what a lost reply loses.
  virtual bool commit_message(std::string_view chunk) const = 0;
  /// The message that carries the commit itself, and how many tries of it the case cuts.
  virtual bool commit_itself(std::string_view chunk) const { return commit_message(chunk); }
  virtual int commit_cuts() const { return Options{}.commit_retry.attempts; }
  /// A delay each way past the store's reply timeout.
  virtual milliseconds slow_network() const { return milliseconds{1000}; }
  /// Words some refusal on a silent network says (none: not checked).
  virtual const char* no_reply_words() const { return nullptr; }
  /// The commit delayed by a short stall always lands (a retry on a fresh connection).
  virtual bool commit_lands_after_a_short_stall() const { return true; }
  /// A repeat may answer in_progress for a while after a cut (a server that has not yet ended the
  /// cut session still holds its lock): repeat() then tries again.
  virtual bool repeats_while_in_progress() const { return false; }

  /// The relay the store's client goes through, and the store on it.
  void start(FaultRelay& relay, std::unique_ptr<S> store) {
    relay_ = &relay;
    store_ = std::move(store);
    guard_ = std::make_unique<IdempotencyGuard<S>>(*store_, Options{.scope = "net"});
    // For the calls that must succeed: a transactional claim's lock wait also meets the
    // server's own short lock waits, so a fresh key may answer in_progress under FailFast.
    // Waiting a little keeps these checks about the network.
    patient_ = std::make_unique<IdempotencyGuard<S>>(
        *store_, Options{.scope = "net", .in_progress = Wait{.timeout = milliseconds{300}}});
  }

  FaultRelay& relay() { return *relay_; }
  S& store() { return *store_; }

  // When a call overruns its bound: cut every connection and refuse new ones until it returns.
  std::function<void()> unstick() {
    return [this] {
      relay().refuse();
      relay().cut();
    };
  }

  // A call on `key` through `guard`: counts its handler's runs in `runs`, runs in_handler(), and
  // `after_handler` at the handler's end (the fault between the handler and the commit); the
  // handler's value is `value(runs)`.
  std::function<Outcome<int>()> call_on(IdempotencyGuard<S>& guard, std::atomic<int>& runs,
                                        const std::string& key,
                                        std::function<void()> after_handler = {},
                                        std::function<int(int)> value = {}) {
    return [this, &guard, &runs, key, after_handler, value] {
      return guard.execute(key, [&](Context& ctx) {
        const int n = ++runs;
        in_handler(ctx, key);
        if (after_handler) after_handler();
        return value ? value(n) : 7;
      });
    };
  }
  std::function<Outcome<int>()> call(const std::string& key,
                                     std::function<void()> after_handler = {},
                                     bool patient = false) {
    return call_on(patient ? *patient_ : *guard_, runs_, key, std::move(after_handler));
  }

  std::vector<std::function<Outcome<int>()>> calls(const std::string& stem, int n) {
    std::vector<std::function<Outcome<int>()>> out;
    for (int i = 0; i < n; ++i) out.push_back(call(stem + std::to_string(i)));
    return out;
  }

  // `n` calls on fresh keys with the network working, 8 at a time (the pool's size): each runs
  // its handler and is recorded.
  void expect_calls_succeed(const std::string& stem, int n) {
    const int before = runs_;
    for (int wave = 0; wave * 8 < n; ++wave) {
      std::vector<std::function<Outcome<int>()>> wave_calls;
      for (int i = 0; i < std::min(8, n - wave * 8); ++i) {
        wave_calls.push_back(call(stem + std::to_string(wave) + "-" + std::to_string(i), {}, true));
      }
      for (const auto& r : run_bounded<Outcome<int>>(wave_calls, kCallBound, unstick())) {
        ASSERT_TRUE(r.result.has_value());
        ASSERT_TRUE(r.result->has_value()) << r.result->message();
        EXPECT_TRUE(r.result->executed());
        EXPECT_TRUE(r.result->recorded()) << r.result->commit_failure().describe();
      }
    }
    EXPECT_EQ(runs_, before + n);
  }

  // `c` again, bounded; repeated while it answers in_progress where the backend says so.
  Timed<Outcome<int>> repeat(const std::function<Outcome<int>()>& c) {
    for (int attempt = 0;; ++attempt) {
      auto r = run_bounded<Outcome<int>>(c, kCallBound, unstick());
      if (!repeats_while_in_progress() || attempt == 40 || !r.result || r.result->has_value() ||
          r.result->error() != errc::in_progress) {
        return r;
      }
      std::this_thread::sleep_for(milliseconds{50});
    }
  }
  Timed<Outcome<int>> repeat(const std::string& key) { return repeat(call(key)); }

  // The relay's one-shot fault fired during `first`, whose caller still got the handler's value.
  void expect_value_despite_the_fault(const Timed<Outcome<int>>& first, int value) {
    ASSERT_TRUE(relay().one_shot_fired());
    ASSERT_TRUE(first.result.has_value());
    ASSERT_TRUE(first.result->has_value()) << first.result->message();
    EXPECT_EQ(first.result->value(), value);
  }

  void expect_business_rows(const std::string& key) {
    if (transactional()) {
      EXPECT_EQ(business_rows(key), 1);
    }
  }

  // --- The cases -------------------------------------------------------------------------------
 public:
  // A silent network (stall), a frozen one (hold) and a slow one with more calls in flight than
  // the pool has connections: every call answers store_unavailable within the bound, none runs
  // its handler. Then the network is back and new calls succeed: no dead connection is left.
  void silent_frozen_or_slow_network() {
    for (const int fault : {0, 1, 2}) {
      const char* name = fault == 0 ? "stall" : fault == 1 ? "hold" : "delay";
      SCOPED_TRACE(name);
      const std::string stem = std::string(name) + "-";
      expect_calls_succeed(stem + "warm-", 8);  // connections open in the pool
      const int before = runs_;
      fault == 0 ? relay().stall() : fault == 1 ? relay().hold() : relay().delay(slow_network());
      const auto results = run_bounded<Outcome<int>>(calls(stem, 12), kCallBound, unstick());
      bool no_reply_said = false;
      long long slowest = 0;
      for (const auto& r : results) {
        slowest = std::max<long long>(slowest, r.took.count());
        ASSERT_TRUE(r.result.has_value());
        ASSERT_FALSE(r.result->has_value());
        EXPECT_EQ(r.result->error(), errc::store_unavailable) << r.result->message();
        no_reply_said =
            no_reply_said || (no_reply_words() != nullptr &&
                              r.result->message().find(no_reply_words()) != std::string::npos);
      }
      if (no_reply_words() != nullptr) {
        EXPECT_TRUE(no_reply_said) << results[0].result->message();
      }
      ::testing::Test::RecordProperty(std::string("slowest_call_ms_") + name, slowest);
      EXPECT_EQ(runs_, before);
      relay().pass();
      expect_calls_succeed(stem + "after-", 16);
    }
  }

  // The network goes silent (stall) or slow (700 ms each way) for 700 ms right after the
  // handler: the commit's round trip is given up or gets through, a retried commit lands on a
  // fresh connection, or (where it may not land) the outcome is reported; the handler never
  // runs a second time for a recorded key, and a transaction that did not commit left none of
  // its writes.
  void stall_or_delay_between_the_handler_and_the_commit() {
    expect_calls_succeed("warm-", 4);
    for (const bool stall : {true, false}) {
      SCOPED_TRACE(stall ? "stall" : "delay");
      const std::string key = stall ? "k-stall" : "k-delay";
      const int before = runs_;
      std::thread back;
      auto timed = run_bounded<Outcome<int>>(
          call(key,
               [&] {
                 stall ? relay().stall() : relay().delay(milliseconds{700});
                 back = std::thread([this] {
                   std::this_thread::sleep_for(milliseconds{700});
                   relay().pass();
                 });
               }),
          kCommitRetriesBound, unstick());
      if (back.joinable()) back.join();
      relay().refuse(false);
      relay().pass();
      ASSERT_TRUE(timed.result.has_value());
      const Outcome<int>& out = *timed.result;
      ASSERT_TRUE(out.has_value()) << out.message();
      EXPECT_EQ(runs_, before + 1);
      if (commit_lands_after_a_short_stall()) {
        EXPECT_TRUE(out.recorded()) << out.commit_failure().describe();
      }
      auto again = repeat(key);
      ASSERT_TRUE(again.result.has_value());
      if (out.recorded()) {
        EXPECT_TRUE(again.result->replayed()) << again.result->message();
        EXPECT_EQ(runs_, before + 1);
      } else if (!transactional()) {
        // Reported; the finish may have landed: either way never a second run.
        EXPECT_TRUE(out.commit_error()) << "not recorded, yet no commit error";
        EXPECT_EQ(runs_, before + 1) << out.commit_failure().describe();
      } else {
        // Reported, in doubt: the transaction committed (a repeat replays) or left nothing (a
        // repeat runs, once).
        EXPECT_TRUE(out.commit_error()) << "not recorded, yet no commit error";
        ASSERT_TRUE(again.result->has_value()) << again.result->message();
        EXPECT_EQ(runs_, before + (again.result->replayed() ? 1 : 2));
      }
      expect_business_rows(key);
    }
  }

  // Connections cut while calls are held in flight, and new ones refused: every call fails with
  // store_unavailable within the bound; once connections are accepted again new calls succeed.
  void cut_and_refused_connections() {
    expect_calls_succeed("warm-", 8);
    relay().hold();
    std::thread cutter([this] {
      std::this_thread::sleep_for(milliseconds{300});
      relay().refuse();
      relay().cut();
    });
    const auto results = run_bounded<Outcome<int>>(calls("cut-", 10), kCallBound, unstick());
    cutter.join();
    for (const auto& r : results) {
      ASSERT_TRUE(r.result.has_value());
      ASSERT_FALSE(r.result->has_value());
      EXPECT_EQ(r.result->error(), errc::store_unavailable) << r.result->message();
    }
    EXPECT_EQ(runs_, 8);
    relay().refuse(false);
    relay().pass();
    expect_calls_succeed("after-", 16);
  }

  // The commit's reply is lost (the connection cut once the server has the commit) `tries`
  // times: the handler ran once and its record landed, so a repeat replays. Every try's reply
  // lost: the caller gets its value with outcome_unknown, not recorded.
  void lost_commit_replies(int tries) {
    expect_calls_succeed("warm-", 2);
    auto first = run_bounded<Outcome<int>>(
        call("k",
             [&] {
               relay().lose_reply_after(
                   [this](std::string_view chunk) { return commit_message(chunk); }, tries);
             }),
        kCommitRetriesBound, unstick());
    ASSERT_NO_FATAL_FAILURE(expect_value_despite_the_fault(first, 7));
    const Outcome<int>& out = *first.result;
    if (tries == Options{}.commit_retry.attempts) {
      EXPECT_FALSE(out.recorded());
      EXPECT_EQ(out.commit_error(), errc::outcome_unknown) << out.commit_failure().describe();
    }
    auto again = repeat("k");
    ASSERT_TRUE(again.result.has_value());
    ASSERT_TRUE(again.result->has_value()) << again.result->message();
    EXPECT_TRUE(again.result->replayed());
    EXPECT_EQ(runs_, 2 + 1);
    expect_business_rows("k");
  }

  // The commit is cut on its way (the relay drops the message and closes the connection, on
  // each of commit_cuts() tries): the client cannot tell that from a lost reply, so the caller
  // gets outcome_unknown. Nothing landed: the key stays held until its lease passes (or the
  // server ends the cut session), then a repeat runs the handler once more, and that result
  // (and its writes, once) is what the key keeps.
  void commit_cut_on_its_way() {
    expect_calls_succeed("warm-", 2);
    IdempotencyGuard<S> guard(store(), Options{.scope = "net", .lease = milliseconds{800}});
    std::atomic<int> runs{0};
    auto call_k = [&](std::function<void()> after_handler = {}) {
      return call_on(guard, runs, "k", std::move(after_handler), [](int n) { return 40 + n; });
    };
    auto first = run_bounded<Outcome<int>>(
        call_k([&] {
          relay().cut_before([this](std::string_view chunk) { return commit_itself(chunk); },
                             commit_cuts());
        }),
        kCommitRetriesBound, unstick());
    ASSERT_NO_FATAL_FAILURE(expect_value_despite_the_fault(first, 41));
    const Outcome<int>& out = *first.result;
    EXPECT_FALSE(out.recorded());
    EXPECT_EQ(out.commit_error(), errc::outcome_unknown) << out.commit_failure().describe();
    std::optional<Outcome<int>> rerun;
    for (int i = 0; i < 100; ++i) {
      auto r = run_bounded<Outcome<int>>(call_k(), kCallBound, unstick());
      ASSERT_TRUE(r.result.has_value());
      if (r.result->has_value() || r.result->error() != errc::in_progress) {
        rerun = std::move(r.result);
        break;
      }
      std::this_thread::sleep_for(milliseconds{50});
    }
    ASSERT_TRUE(rerun.has_value()) << "the key stayed in progress";
    ASSERT_TRUE(rerun->has_value()) << rerun->message();
    EXPECT_TRUE(rerun->executed());
    EXPECT_TRUE(rerun->recorded()) << rerun->commit_failure().describe();
    EXPECT_EQ(rerun->value(), 42);
    auto replay = run_bounded<Outcome<int>>(call_k(), kCallBound, unstick());
    ASSERT_TRUE(replay.result.has_value());
    ASSERT_TRUE(replay.result->has_value()) << replay.result->message();
    EXPECT_TRUE(replay.result->replayed());
    EXPECT_EQ(replay.result->value(), 42);
    EXPECT_EQ(runs.load(), 2);
    expect_business_rows("k");
  }

 protected:
  std::atomic<int> runs_{0};

 private:
  FaultRelay* relay_ = nullptr;
  std::unique_ptr<S> store_;
  std::unique_ptr<IdempotencyGuard<S>> guard_;
  std::unique_ptr<IdempotencyGuard<S>> patient_;
};

}  // namespace idem::testing

/// The network-fault cases as TEST_Ps of `Fixture` (a NetworkFaultTest); instantiate them with
/// INSTANTIATE_TEST_SUITE_P as usual.
#define IDEM_NETWORK_FAULT_CASES(Fixture)                                                \
  TEST_P(Fixture, ASilentFrozenOrSlowNetworkFailsEveryCallWithinABoundAndThenRecovers) { \
    silent_frozen_or_slow_network();                                                     \
  }                                                                                      \
  TEST_P(Fixture, AStallOrDelayBetweenTheHandlerAndTheCommitNeverRunsTheHandlerTwice) {  \
    stall_or_delay_between_the_handler_and_the_commit();                                 \
  }                                                                                      \
  TEST_P(Fixture, CutAndRefusedConnectionsFailCallsAndNewCallsSucceedAfter) {            \
    cut_and_refused_connections();                                                       \
  }                                                                                      \
  TEST_P(Fixture, ALostCommitReplyNeverRunsTheHandlerTwice) { lost_commit_replies(1); }  \
  TEST_P(Fixture, ACommitWhoseEveryReplyIsLostIsOutcomeUnknownAndARepeatReplays) {       \
    lost_commit_replies(::idem::Options{}.commit_retry.attempts);                        \
  }                                                                                      \
  TEST_P(Fixture, ACommitCutOnItsWayIsOutcomeUnknownAndARepeatRunsOnce) {                \
    commit_cut_on_its_way();                                                             \
  }                                                                                      \
  static_assert(true, "a semicolon after the macro")
