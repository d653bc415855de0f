// PostgresStore behind a faulty network (a FaultRelay between the store and the server): the
// network-fault cases (support/network_fault_cases.hpp), more stuck calls than the pool holds,
// a claim waiting for a pooled connection, and a connect nobody answers. Both modes.

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
#include "support/network_fault_cases.hpp"

namespace idem::testing {
namespace {

using std::chrono::milliseconds;

// With statement_timeout 500 ms a store round trip without a reply is given up after 1.5 s; a
// connect after 1 s.
class PostgresNetworkTest : public NetworkFaultTest<PostgresStore, SqlMode> {
 protected:
  void SetUp() override {
    const auto uri = pg_uri();
    if (!uri) GTEST_SKIP() << kNoPgMessage;
    target_ = Target{Backend::postgres, *uri, unique_name("net") + "_"};
    create_business_table(target_);
    auto through = pg_relay(*uri);
    if (!through) GTEST_SKIP() << "the relay speaks IPv4; the test server is not on it";
    relay_ = std::move(*through);
    auto store = std::make_unique<PostgresStore>(options());
    const Status ready = store->ensure_schema();
    ASSERT_TRUE(ready.ok()) << ready.failure().describe();
    start(*relay_.relay, std::move(store));
  }

  PostgresStoreOptions options() const {
    return PostgresStoreOptions{.connection = {.uri = relay_.uri,
                                               .table_prefix = target_.prefix,
                                               .connect_timeout = milliseconds{1000},
                                               .statement_timeout = milliseconds{500}},
                                .mode = GetParam(),
                                .pool = {.size = 8, .acquire_timeout = milliseconds{500}}};
  }

  bool transactional() const override { return GetParam() == SqlMode::transactional; }
  // In transactional mode each handler writes a business row in the store's transaction.
  void in_handler(Context& ctx, const std::string& key) override {
    if (transactional()) insert_business_row(target_, ctx, key, "placed");
  }
  long long business_rows(const std::string& key) override {
    return count_business_rows(target_, key);
  }
  // Lease mode: the finish's Bind (its Parse goes on its own, once per connection).
  // Transactional mode: the simple query with the finish and COMMIT, then the record read's Bind
  // that a retry makes to see whether it landed.
  bool commit_message(std::string_view chunk) const override {
    if (chunk.empty()) return false;
    if (!transactional()) return chunk[0] == 'B' && chunk.find("idem_finish") != chunk.npos;
    return (chunk[0] == 'Q' && chunk.find("idem_finish_held") != chunk.npos) ||
           (chunk[0] == 'B' && chunk.find("idem_read") != chunk.npos);
  }
  bool commit_itself(std::string_view chunk) const override {
    return chunk.find("idem_finish") != chunk.npos && commit_message(chunk);
  }
  // A transactional commit's retries only read the record: the transaction is gone.
  int commit_cuts() const override { return transactional() ? 1 : Options{}.commit_retry.attempts; }
  milliseconds slow_network() const override { return milliseconds{1500}; }
  const char* no_reply_words() const override { return "no reply from PostgreSQL"; }
  // In transactional mode the commit goes out on its holder's connection: cut, it is in doubt.
  bool commit_lands_after_a_short_stall() const override { return false; }
  bool repeats_while_in_progress() const override { return true; }

  Target target_;
  PgRelay relay_;
};

IDEM_NETWORK_FAULT_CASES(PostgresNetworkTest);

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

INSTANTIATE_TEST_SUITE_P(Modes, PostgresNetworkTest,
                         ::testing::Values(SqlMode::lease, SqlMode::transactional),
                         [](const auto& info) { return std::string(name_of(info.param)); });

// A transactional claim that may wait (Wait policy: block_for) waits that long for a pooled
// connection, not only acquire_timeout: with one connection held by a handler for 800 ms and an
// acquire_timeout of 100 ms, a call willing to wait 5 s gets the connection and runs.
TEST(PostgresPoolWaitTest, ATransactionalClaimWaitsForAConnectionUpToItsBlockFor) {
  const auto uri = pg_uri();
  if (!uri) GTEST_SKIP() << kNoPgMessage;
  PostgresStore store{
      PostgresStoreOptions{.connection = {.uri = *uri, .table_prefix = unique_name("wait") + "_"},
                           .mode = SqlMode::transactional,
                           .pool = {.size = 1, .acquire_timeout = milliseconds{100}}}};
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
    PostgresStore store{
        PostgresStoreOptions{.connection = {.uri = through->uri + extra,
                                            .table_prefix = unique_name("held") + "_",
                                            .connect_timeout = milliseconds{1000}}}};
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
