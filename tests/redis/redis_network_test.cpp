// RedisStore behind a faulty network (a FaultRelay between the client and the server): silent
// (stall), frozen (hold), slow (delay), cut and refused connections, and a lost commit reply. No
// call may hang: every call runs with a bound on its duration, and the client recovers once the
// network is back. With pipelining (the default) and with pooled connections only.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "idem/engine/effective_key.hpp"
#include "idem/idem.hpp"
#include "idem/redis/store.hpp"
#include "redis/redis_test_support.hpp"
#include "support/bounded_calls.hpp"
#include "support/fault_relay.hpp"

namespace idem::testing {
namespace {

using std::chrono::milliseconds;

// Bounds on call durations (generous: a loaded machine is slow). A command without a reply is
// given up after command_timeout (500 ms), a connect after connect_timeout (500 ms).
constexpr milliseconds kCallBound{4000};
// A call whose commit keeps failing: three commit attempts in all.
constexpr milliseconds kCommitRetriesBound{8000};

// The parameter: pipeline_connections (0: every call on a pooled connection of its own).
class RedisNetworkTest : public ::testing::TestWithParam<std::size_t> {
 protected:
  void SetUp() override {
    if (redis_uri() == nullptr) GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set";
    redis::ConnectionOptions direct = redis_options();
    relay_ = std::make_unique<FaultRelay>(direct.host, direct.port);
    redis::ConnectionOptions through = direct;
    through.host = "127.0.0.1";
    through.port = relay_->port();
    through.connect_timeout = milliseconds{500};
    through.command_timeout = milliseconds{500};
    through.pool_size = 8;
    through.pool_wait = milliseconds{500};
    through.pipeline_connections = GetParam();
    client_ = std::make_shared<redis::Client>(through);
    store_ =
        std::make_unique<RedisStore>(client_, RedisStoreOptions{.prefix = unique_prefix("net")});
    guard_ = std::make_unique<IdempotencyGuard<RedisStore>>(*store_, Options{.scope = "net"});
  }

  FaultRelay& relay() { return *relay_; }

  std::function<void()> unstick() {
    return [this] {
      relay().refuse();
      relay().cut();
    };
  }

  std::function<Outcome<int>()> call(const std::string& key,
                                     std::function<void()> after_handler = {}) {
    return [this, key, after_handler] {
      return guard_->execute(key, [&] {
        ++runs_;
        if (after_handler) after_handler();
        return 7;
      });
    };
  }

  std::vector<std::function<Outcome<int>()>> calls(const std::string& stem, int n) {
    std::vector<std::function<Outcome<int>()>> out;
    for (int i = 0; i < n; ++i) out.push_back(call(stem + std::to_string(i)));
    return out;
  }

  void expect_calls_succeed(const std::string& stem, int n) {
    const int before = runs_;
    for (const auto& r : run_bounded<Outcome<int>>(calls(stem, n), kCallBound, unstick())) {
      ASSERT_TRUE(r.result.has_value());
      ASSERT_TRUE(r.result->has_value()) << r.result->message();
      EXPECT_TRUE(r.result->executed());
      EXPECT_TRUE(r.result->recorded()) << r.result->commit_failure().describe();
    }
    EXPECT_EQ(runs_, before + n);
  }

  std::unique_ptr<FaultRelay> relay_;
  std::shared_ptr<redis::Client> client_;
  std::unique_ptr<RedisStore> store_;
  std::unique_ptr<IdempotencyGuard<RedisStore>> guard_;
  std::atomic<int> runs_{0};
};

// A silent network (stall), a frozen one (hold) and a slow one (1 s each way, past the command
// timeout) with calls in flight: every call answers store_unavailable within the bound and runs
// nothing; then the network is back and new calls succeed.
TEST_P(RedisNetworkTest, ASilentFrozenOrSlowNetworkFailsEveryCallWithinABoundAndThenRecovers) {
  for (const int fault : {0, 1, 2}) {
    const char* name = fault == 0 ? "stall" : fault == 1 ? "hold" : "delay";
    SCOPED_TRACE(name);
    const std::string stem = std::string(name) + "-";
    expect_calls_succeed(stem + "warm-", 8);
    const int before = runs_;
    fault == 0 ? relay().stall() : fault == 1 ? relay().hold() : relay().delay(milliseconds{1000});
    for (const auto& r : run_bounded<Outcome<int>>(calls(stem, 12), kCallBound, unstick())) {
      ASSERT_TRUE(r.result.has_value());
      ASSERT_FALSE(r.result->has_value());
      EXPECT_EQ(r.result->error(), errc::store_unavailable) << r.result->message();
    }
    EXPECT_EQ(runs_, before);
    relay().pass();
    expect_calls_succeed(stem + "after-", 16);
  }
}

// A completer's calls on a silent network: keeping a request and finding abandoned runs (the
// index and the records each behind their own call) answer store_unavailable within the bound.
TEST_P(RedisNetworkTest, KeepRequestAndFindAbandonedOnASilentNetworkFailWithinABound) {
  const std::string key(detail::EffectiveKey("net", {}, "kept").view());
  std::string scope(detail::EffectiveKey("net", {}, {}).view());
  scope.pop_back();
  Result<Claim> held =
      store_->claim(ClaimRequest{key, {1, 2}, milliseconds{30'000}, std::chrono::hours{1}});
  ASSERT_TRUE(held.has_value() && held->status == ClaimStatus::acquired);
  const Ticket ticket{key, held->fence};
  ASSERT_TRUE(store_->keep_request(ticket, "r").ok());
  relay().stall();
  const std::vector<std::function<std::error_code()>> completer_calls{
      [&] { return store_->keep_request(ticket, "r").error(); },
      [&] { return store_->find_abandoned(scope, 10).error(); }};
  for (const auto& r : run_bounded<std::error_code>(completer_calls, kCallBound, unstick())) {
    ASSERT_TRUE(r.result.has_value());
    EXPECT_EQ(*r.result, errc::store_unavailable) << r.result->message();
  }
  relay().pass();
  Result<std::vector<Abandoned>> found = store_->find_abandoned(scope, 10);
  ASSERT_TRUE(found.has_value()) << found.failure().describe();
  EXPECT_TRUE(found->empty()) << "a live lease is not abandoned";
}

// The network goes silent or slow for 700 ms right after the handler: a retried commit lands,
// the handler ran once, and a repeat replays.
TEST_P(RedisNetworkTest, AStallOrDelayBetweenTheHandlerAndTheCommitRunsTheHandlerOnce) {
  expect_calls_succeed("warm-", 4);
  for (const bool stall : {true, false}) {
    SCOPED_TRACE(stall ? "stall" : "delay");
    const std::string key = stall ? "k-stall" : "k-delay";
    const int before = runs_;
    std::thread back;
    auto out =
        run_bounded<Outcome<int>>(call(key,
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
    ASSERT_TRUE(out.result.has_value());
    ASSERT_TRUE(out.result->has_value()) << out.result->message();
    auto again = run_bounded<Outcome<int>>(call(key), kCallBound, unstick());
    ASSERT_TRUE(again.result.has_value());
    EXPECT_TRUE(again.result->replayed()) << again.result->message();
    EXPECT_EQ(runs_, before + 1);
  }
}

// Connections cut while calls are held in flight, and new ones refused: every call fails with
// store_unavailable within the bound; once connections are accepted again new calls succeed.
TEST_P(RedisNetworkTest, CutAndRefusedConnectionsFailCallsAndNewCallsSucceedAfter) {
  expect_calls_succeed("warm-", 8);
  relay().hold();
  std::thread cutter([this] {
    std::this_thread::sleep_for(milliseconds{200});
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

// The commit's reply is lost (the connection cut once the server has the script): the handler
// ran once, and its record landed, so a repeat replays.
TEST_P(RedisNetworkTest, ALostCommitReplyNeverRunsTheHandlerTwice) {
  expect_calls_succeed("warm-", 2);
  auto first = run_bounded<Outcome<int>>(
      call("k", [this] { relay().lose_reply_after(FaultRelay::contains("EVALSHA")); }),
      kCommitRetriesBound, unstick());
  ASSERT_TRUE(relay().one_shot_fired());
  ASSERT_TRUE(first.result.has_value());
  ASSERT_TRUE(first.result->has_value()) << first.result->message();
  auto again = run_bounded<Outcome<int>>(call("k"), kCallBound, unstick());
  ASSERT_TRUE(again.result.has_value());
  EXPECT_TRUE(again.result->replayed()) << again.result->message();
  EXPECT_EQ(runs_, 2 + 1);
}

// Every try of the commit reaches Redis, which runs it, and every reply is lost: the caller
// gets its value with outcome_unknown, not recorded. The record landed: a repeat replays it, and
// the handler ran once.
TEST_P(RedisNetworkTest, ACommitWhoseEveryReplyIsLostIsOutcomeUnknownAndARepeatReplays) {
  expect_calls_succeed("warm-", 2);
  const int tries = Options{}.commit_retry.attempts;
  auto first = run_bounded<Outcome<int>>(
      call("k", [&] { relay().lose_reply_after(FaultRelay::contains("EVALSHA"), tries); }),
      kCommitRetriesBound, unstick());
  ASSERT_TRUE(relay().one_shot_fired());
  ASSERT_TRUE(first.result.has_value());
  const Outcome<int>& out = *first.result;
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_EQ(out.value(), 7);
  EXPECT_FALSE(out.recorded());
  EXPECT_EQ(out.commit_error(), errc::outcome_unknown) << out.commit_failure().describe();
  auto again = run_bounded<Outcome<int>>(call("k"), kCallBound, unstick());
  ASSERT_TRUE(again.result.has_value());
  ASSERT_TRUE(again.result->has_value()) << again.result->message();
  EXPECT_TRUE(again.result->replayed());
  EXPECT_EQ(runs_, 2 + 1);
}

// Every try of the commit is cut on its way (the relay drops it and closes the connection): the
// client cannot tell that from a lost reply, so the caller gets outcome_unknown. Nothing landed:
// the key stays held until its lease passes, then a repeat runs the handler once more, and that
// result is the one the key keeps.
TEST_P(RedisNetworkTest, ACommitCutOnItsWayIsOutcomeUnknownAndARepeatRunsOnceTheLeasePasses) {
  expect_calls_succeed("warm-", 2);
  IdempotencyGuard<RedisStore> guard(*store_, Options{.scope = "net", .lease = milliseconds{800}});
  int runs = 0;
  auto call_k = [&](std::function<void()> after_handler = {}) {
    return [&, after_handler] {
      return guard.execute("k", [&] {
        ++runs;
        if (after_handler) after_handler();
        return 40 + runs;
      });
    };
  };
  const int tries = Options{}.commit_retry.attempts;
  auto first = run_bounded<Outcome<int>>(
      call_k([&] { relay().cut_before(FaultRelay::contains("EVALSHA"), tries); }),
      kCommitRetriesBound, unstick());
  ASSERT_TRUE(relay().one_shot_fired());
  ASSERT_TRUE(first.result.has_value());
  const Outcome<int>& out = *first.result;
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_EQ(out.value(), 41);
  EXPECT_FALSE(out.recorded());
  EXPECT_EQ(out.commit_error(), errc::outcome_unknown) << out.commit_failure().describe();
  // Held for nobody until the lease passes; then taken over.
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
  EXPECT_EQ(runs, 2);
}

INSTANTIATE_TEST_SUITE_P(Connections, RedisNetworkTest, ::testing::Values(2u, 0u),
                         [](const auto& info) {
                           return info.param == 0 ? std::string("pooled")
                                                  : std::string("pipelined");
                         });

}  // namespace
}  // namespace idem::testing
