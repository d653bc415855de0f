// PostgresStore behind a faulty network (a FaultRelay between the store and the server): a
// silent network (stall: bytes taken, nothing forwarded), a frozen one (hold), cut connections,
// refused ones, delays and lost replies. No call may hang: every call here runs with a bound on
// its duration, and the pool recovers once the network is back. Both modes.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "sql/pg_relay.hpp"
#include "sql/sql_test_support.hpp"
#include "support/bounded_calls.hpp"

namespace idem::testing {
namespace {

using std::chrono::milliseconds;

// Bounds on call durations (generous: a loaded machine is slow). With statement_timeout 500 ms
// a store round trip without a reply is given up after 1.5 s; a connect after 1 s.
constexpr milliseconds kCallBound{4000};
// A call whose commit keeps failing: three commit attempts in all.
constexpr milliseconds kCommitRetriesBound{9000};

class PostgresNetworkTest : public ::testing::TestWithParam<SqlMode> {
 protected:
  void SetUp() override {
    const auto uri = pg_uri();
    if (!uri) GTEST_SKIP() << kNoPgMessage;
    target_ = Target{Backend::postgres, *uri, unique_name("net") + "_"};
    create_business_table(target_);
    auto through = pg_relay(*uri);
    if (!through) GTEST_SKIP() << "the relay speaks IPv4; the test server is not on it";
    relay_ = std::move(*through);
    store_ = std::make_unique<PostgresStore>(options());
    const Status ready = store_->ensure_schema();
    ASSERT_TRUE(ready.ok()) << ready.failure().describe();
    guard_ = std::make_unique<IdempotencyGuard<PostgresStore>>(*store_, Options{.scope = "net"});
    // For the calls that must succeed, 8 at a time: a transactional claim's lock_timeout (1 ms
    // without a wait) also cuts the server's own short lock waits (inserts extending the table),
    // so under FailFast a fresh key may answer in_progress, or a finish fail. Waiting a little
    // keeps these checks about the network.
    patient_ = std::make_unique<IdempotencyGuard<PostgresStore>>(
        *store_, Options{.scope = "net", .in_progress = Wait{.timeout = milliseconds{300}}});
  }

  PostgresStoreOptions options() const {
    return PostgresStoreOptions{.connection = {.uri = relay_.uri, .table_prefix = target_.prefix, .connect_timeout = milliseconds{1000}, .statement_timeout = milliseconds{500}}, .mode = GetParam(), .pool = {.size = 8, .acquire_timeout= milliseconds{500}}};
  }

  bool transactional() const { return GetParam() == SqlMode::transactional; }
  FaultRelay& relay() { return *relay_.relay; }

  // When a call overruns its bound: cut every connection and refuse new ones until it returns.
  std::function<void()> unstick() {
    return [this] {
      relay().refuse();
      relay().cut();
    };
  }

  // A call on `key`: counts its handler's runs, writes a business row in transactional mode, and
  // runs `after_handler` at the handler's end (the fault between the handler and the commit).
  std::function<Outcome<int>()> call(const std::string& key,
                                     std::function<void()> after_handler = {},
                                     bool patient = false) {
    return [this, key, after_handler, patient] {
      return (patient ? patient_ : guard_)->execute(key, [&](Context& ctx) {
        ++runs_;
        if (transactional()) insert_business_row(target_, ctx, key, "placed");
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

  // `n` calls on fresh keys with the network working, 8 at a time (the pool's size): each runs
  // its handler and is recorded.
  void expect_calls_succeed(const std::string& stem, int n) {
    const int before = runs_;
    for (int wave = 0; wave * 8 < n; ++wave) {
      std::vector<std::function<Outcome<int>()>> wave_calls;
      for (int i = 0; i < std::min(8, n - wave * 8); ++i) {
        wave_calls.push_back(call(stem + std::to_string(wave) + "-" + std::to_string(i), {}, true));
      }
      const auto results = run_bounded<Outcome<int>>(wave_calls, kCallBound, unstick());
      for (const auto& r : results) {
        ASSERT_TRUE(r.result.has_value());
        ASSERT_TRUE(r.result->has_value()) << r.result->message();
        EXPECT_TRUE(r.result->executed());
        EXPECT_TRUE(r.result->recorded()) << r.result->commit_failure().describe();
      }
    }
    EXPECT_EQ(runs_, before + n);
  }

  // A call on `key` repeated while it answers in_progress (in transactional mode the server may
  // not have ended a cut connection's transaction yet, so its row is still locked).
  Timed<Outcome<int>> repeat(const std::string& key) {
    for (int attempt = 0;; ++attempt) {
      auto r = run_bounded<Outcome<int>>(call(key), kCallBound, unstick());
      if (attempt == 40 || !r.result || r.result->has_value() ||
          r.result->error() != errc::in_progress) {
        return r;
      }
      std::this_thread::sleep_for(milliseconds{50});
    }
  }

  Target target_;
  PgRelay relay_;
  std::unique_ptr<PostgresStore> store_;
  std::unique_ptr<IdempotencyGuard<PostgresStore>> guard_;
  std::unique_ptr<IdempotencyGuard<PostgresStore>> patient_;
  std::atomic<int> runs_{0};
};

// A silent network (stall), a frozen one (hold) and a slow one (1.5 s each way, past the reply
// deadline) with more calls in flight than the pool has connections: every call answers
// store_unavailable within the bound, none runs its handler; the ones on open connections say no
// reply came. Then the network is back and new calls succeed: the pool is not left exhausted by
// the dead connections.
TEST_P(PostgresNetworkTest,
       ASilentFrozenOrSlowNetworkFailsEveryCallWithinABoundAndThePoolRecovers) {
  for (const int fault : {0, 1, 2}) {
    const char* name = fault == 0 ? "stall" : fault == 1 ? "hold" : "delay";
    SCOPED_TRACE(name);
    const std::string stem = std::string(name) + "-";
    expect_calls_succeed(stem + "warm-", 8);  // connections open in the pool
    const int before = runs_;
    fault == 0 ? relay().stall() : fault == 1 ? relay().hold() : relay().delay(milliseconds{1500});
    const auto results = run_bounded<Outcome<int>>(calls(stem, 12), kCallBound, unstick());
    bool no_reply_said = false;
    long long slowest = 0;
    for (const auto& r : results) {
      slowest = std::max<long long>(slowest, r.took.count());
      ASSERT_TRUE(r.result.has_value());
      ASSERT_FALSE(r.result->has_value());
      EXPECT_EQ(r.result->error(), errc::store_unavailable) << r.result->message();
      no_reply_said = no_reply_said ||
                      r.result->message().find("no reply from PostgreSQL") != std::string::npos;
    }
    EXPECT_TRUE(no_reply_said) << results[0].result->message();
    RecordProperty(std::string("slowest_call_ms_") + name, slowest);
    EXPECT_EQ(runs_, before);
    relay().pass();
    expect_calls_succeed(stem + "after-", 16);
  }
}

// Calls stuck in every stage at once (commits whose handler ran, claims), more than the pool
// holds, all return within the bound; each handler ran once; then new calls succeed.
TEST_P(PostgresNetworkTest, MoreStuckCallsThanThePoolHoldsAllReturnAndThenNewCallsSucceed) {
  expect_calls_succeed("warm-", 8);
  std::atomic<int> in_handler{0};
  std::vector<std::function<Outcome<int>()>> stuck;
  for (int i = 0; i < 6; ++i) {
    stuck.push_back(call("commit-" + std::to_string(i), [&] {
      ++in_handler;
      while (in_handler < 100) std::this_thread::sleep_for(milliseconds(5));  // the stall is on
    }));
  }
  std::thread staller([&] {
    while (in_handler < 6) std::this_thread::sleep_for(milliseconds(5));
    relay().stall();
    in_handler += 100;
  });
  for (int i = 0; i < 6; ++i) {
    stuck.push_back([this, i, &in_handler] {
      while (in_handler < 100) std::this_thread::sleep_for(milliseconds(5));
      return call("claim-" + std::to_string(i))();
    });
  }
  const auto results = run_bounded<Outcome<int>>(stuck, kCommitRetriesBound, [&] {
    in_handler += 100;
    unstick()();
  });
  staller.join();
  int in_doubt = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].result.has_value());
    const Outcome<int>& out = *results[i].result;
    if (i < 6) {  // the handler ran, the commit did not get through
      ASSERT_TRUE(out.has_value()) << out.message();
      EXPECT_FALSE(out.recorded());
      // outcome_unknown once it went out (no reply came); store_unavailable if it never did: in
      // lease mode a commit may find every connection held by the stuck claims, then no new one
      // opens. A transactional commit goes out on its holder's connection.
      const std::error_code e = out.commit_error();
      EXPECT_TRUE(e == errc::outcome_unknown || (!transactional() && e == errc::store_unavailable))
          << out.commit_failure().describe();
      in_doubt += e == errc::outcome_unknown ? 1 : 0;
    } else {
      ASSERT_FALSE(out.has_value());
      EXPECT_EQ(out.error(), errc::store_unavailable) << out.message();
    }
  }
  // Each transactional commit went out on its holder's connection.
  if (transactional()) {
    EXPECT_EQ(in_doubt, 6);
  }
  EXPECT_EQ(runs_, 8 + 6);
  relay().pass();
  expect_calls_succeed("after-", 16);
}

// The network goes silent (stall) or slow (700 ms each way) for 700 ms right after the handler:
// the commit's round trip is given up or gets through, a retried commit lands on a fresh
// connection, or the outcome is reported; the handler never runs a second time for a recorded
// key, and a transaction that did not commit left none of its writes.
TEST_P(PostgresNetworkTest, AStallOrDelayBetweenTheHandlerAndTheCommitNeverRunsTheHandlerTwice) {
  expect_calls_succeed("warm-", 4);
  for (const bool stall : {true, false}) {
    SCOPED_TRACE(stall ? "stall" : "delay");
    const std::string key = stall ? "k-stall" : "k-delay";
    const int before = runs_;
    std::thread back;
    auto timed =
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
    ASSERT_TRUE(timed.result.has_value());
    const Outcome<int>& out = *timed.result;
    ASSERT_TRUE(out.has_value()) << out.message();
    EXPECT_EQ(runs_, before + 1);
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
    if (transactional()) {
      EXPECT_EQ(count_business_rows(target_, key), 1);
    }
  }
}

// Connections cut while calls are held in flight, and new ones refused: every call fails at once
// with store_unavailable; once connections are accepted again new calls succeed.
TEST_P(PostgresNetworkTest, CutAndRefusedConnectionsFailCallsAtOnceAndNewCallsSucceedAfter) {
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

// The reply to the commit is lost (the connection cut once the server has the finish): the
// handler ran once; its record landed, so a repeat replays.
TEST_P(PostgresNetworkTest, ALostCommitReplyNeverRunsTheHandlerTwice) {
  expect_calls_succeed("warm-", 2);
  relay().lose_reply_after(FaultRelay::contains("idem_finish"));
  auto first = run_bounded<Outcome<int>>(call("k"), kCommitRetriesBound, unstick());
  ASSERT_TRUE(relay().one_shot_fired());
  ASSERT_TRUE(first.result.has_value());
  ASSERT_TRUE(first.result->has_value()) << first.result->message();
  auto again = repeat("k");
  ASSERT_TRUE(again.result.has_value());
  EXPECT_TRUE(again.result->replayed()) << again.result->message();
  EXPECT_EQ(runs_, 2 + 1);
  if (transactional()) {
    EXPECT_EQ(count_business_rows(target_, "k"), 1);
  }
}

// The client message that carries a commit, and the read a transactional commit's retry makes
// to see whether it landed. Lease mode: the finish's Bind (its Parse goes on its own, once per
// connection). Transactional mode: the simple query with the finish and COMMIT, then the
// record read's Bind.
bool commit_message(bool transactional, std::string_view chunk) {
  if (chunk.empty()) return false;
  if (!transactional) return chunk[0] == 'B' && chunk.find("idem_finish") != chunk.npos;
  return (chunk[0] == 'Q' && chunk.find("idem_finish_held") != chunk.npos) ||
         (chunk[0] == 'B' && chunk.find("idem_read") != chunk.npos);
}

// Every try of the commit reaches the server, which runs it, and every reply is lost (in
// transactional mode: the COMMIT's, then those of the reads that look for it): the caller gets
// its value with outcome_unknown, not recorded. It landed: a repeat replays, the handler ran
// once, and its writes committed once.
TEST_P(PostgresNetworkTest, ACommitWhoseEveryReplyIsLostIsOutcomeUnknownAndARepeatReplays) {
  expect_calls_succeed("warm-", 2);
  const int tries = Options{}.commit_retry.attempts;
  auto first = run_bounded<Outcome<int>>(
      call("k",
           [&] {
             relay().lose_reply_after(
                 [this](std::string_view chunk) { return commit_message(transactional(), chunk); },
                 tries);
           }),
      kCommitRetriesBound, unstick());
  ASSERT_TRUE(relay().one_shot_fired());
  ASSERT_TRUE(first.result.has_value());
  const Outcome<int>& out = *first.result;
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_EQ(out.value(), 7);
  EXPECT_FALSE(out.recorded());
  EXPECT_EQ(out.commit_error(), errc::outcome_unknown) << out.commit_failure().describe();
  auto again = repeat("k");
  ASSERT_TRUE(again.result.has_value());
  ASSERT_TRUE(again.result->has_value()) << again.result->message();
  EXPECT_TRUE(again.result->replayed());
  EXPECT_EQ(runs_, 2 + 1);
  if (transactional()) {
    EXPECT_EQ(count_business_rows(target_, "k"), 1);
  }
}

// The commit is cut on its way (the relay drops the message and closes the connection; in lease
// mode every try): the client cannot tell that from a lost reply, so the caller gets
// outcome_unknown. Nothing landed (transactional: the server rolled the transaction back): a
// repeat runs the handler once more (lease mode: once the lease has passed), and the key ends
// with that one result and, in transactional mode, one set of the handler's writes.
TEST_P(PostgresNetworkTest, ACommitCutOnItsWayIsOutcomeUnknownAndARepeatRunsOnce) {
  expect_calls_succeed("warm-", 2);
  IdempotencyGuard<PostgresStore> guard(*store_,
                                        Options{.scope = "net", .lease = milliseconds{800}});
  int runs = 0;
  auto call_k = [&](std::function<void()> after_handler = {}) {
    return std::function<Outcome<int>()>([&, after_handler] {
      return guard.execute("k", [&](Context& ctx) {
        ++runs;
        if (transactional()) insert_business_row(target_, ctx, "k", "placed");
        if (after_handler) after_handler();
        return 40 + runs;
      });
    });
  };
  // A transactional commit's retries only read the record: the transaction is gone.
  const int cuts = transactional() ? 1 : Options{}.commit_retry.attempts;
  auto first = run_bounded<Outcome<int>>(call_k([&] {
                                           relay().cut_before(
                                               [this](std::string_view chunk) {
                                                 return chunk.find("idem_finish") != chunk.npos &&
                                                        commit_message(transactional(), chunk);
                                               },
                                               cuts);
                                         }),
                                         kCommitRetriesBound, unstick());
  ASSERT_TRUE(relay().one_shot_fired());
  ASSERT_TRUE(first.result.has_value());
  const Outcome<int>& out = *first.result;
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_EQ(out.value(), 41);
  EXPECT_FALSE(out.recorded());
  EXPECT_EQ(out.commit_error(), errc::outcome_unknown) << out.commit_failure().describe();
  // In progress until the lease passes (lease mode) or the server ends the cut session
  // (transactional mode); then the handler runs once more.
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
  if (transactional()) {
    EXPECT_EQ(count_business_rows(target_, "k"), 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, PostgresNetworkTest,
                         ::testing::Values(SqlMode::lease, SqlMode::transactional),
                         [](const auto& info) { return std::string(name_of(info.param)); });

// A transactional claim that may wait (Wait policy: block_for) waits that long for a pooled
// connection, not only acquire_timeout: with one connection held by a handler for 800 ms and an
// acquire_timeout of 100 ms, a call willing to wait 5 s gets the connection and runs.
TEST(PostgresPoolWaitTest, ATransactionalClaimWaitsForAConnectionUpToItsBlockFor) {
  const auto uri = pg_uri();
  if (!uri) GTEST_SKIP() << kNoPgMessage;
  PostgresStore store{PostgresStoreOptions{.connection = {.uri = *uri, .table_prefix = unique_name("wait") + "_"}, .mode = SqlMode::transactional, .pool = {.size = 1, .acquire_timeout= milliseconds{100}}}};
  ASSERT_TRUE(store.ensure_schema().ok());
  IdempotencyGuard holder{store, Options{.scope = "wait"}};
  IdempotencyGuard waiter{store, Options{.scope = "wait", .in_progress = Wait{}}};
  std::atomic<bool> holding{false};
  std::thread held([&] {
    auto out = holder.execute("a", [&] {
      holding = true;
      std::this_thread::sleep_for(milliseconds{800});
      return 1;
    });
    EXPECT_TRUE(out.has_value()) << out.message();
  });
  while (!holding) std::this_thread::sleep_for(milliseconds{2});
  int runs = 0;
  auto out = waiter.execute("b", [&] { return ++runs; });
  held.join();
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_EQ(runs, 1);
}

// A server that takes the connection and never answers it (the relay holds): the connect gives
// up within connect_timeout, also when the connection string says connect_timeout=0, libpq's
// "wait forever": the store keeps its own bound.
TEST(PostgresConnect, AConnectNobodyAnswersGivesUpWithinTheConnectTimeout) {
  const auto uri = pg_uri();
  if (!uri) GTEST_SKIP() << kNoPgMessage;
  auto through = pg_relay(*uri);
  if (!through) GTEST_SKIP() << "the relay speaks IPv4; the test server is not on it";
  through->relay->hold();
  for (const std::string extra : {"", " connect_timeout=0"}) {
    PostgresStore store{PostgresStoreOptions{.connection = {.uri = through->uri + extra, .table_prefix = unique_name("held") + "_", .connect_timeout = milliseconds{1000}}}};
    const auto start = std::chrono::steady_clock::now();
    const Status ready = store.ensure_schema();
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_FALSE(ready.ok()) << extra;
    EXPECT_EQ(ready.error(), errc::store_unavailable) << ready.failure().describe();
    EXPECT_GE(took, milliseconds{900}) << extra;
    EXPECT_LT(took, milliseconds{3000}) << extra;
  }
}

}  // namespace
}  // namespace idem::testing
