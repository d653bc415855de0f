// PostgreSQL stopped and started under a running store: calls during the outage answer
// store_unavailable within the timeouts (no hang, no handler run), calls after it recover on new
// connections, results recorded before it replay, and a transactional handler cut off by it
// leaves nothing behind, so that its retry runs once.
//
// Needs the server scripts/lib/servers.sh starts: IDEM_TEST_PG_URI, and IDEM_TEST_PG_BIN,
// IDEM_TEST_PG_DATA, IDEM_TEST_PG_LOG, IDEM_TEST_PG_OPTS, IDEM_TEST_PG_USER to stop and start it.
// ctest runs it under the resource lock idem_postgres, so no other PostgreSQL test sees the outage.

#include <cstdlib>
#include <future>
#include <string>

#include "sql/sql_test_support.hpp"

namespace idem::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string env(const char* name) { return env_or_empty(name); }

class PostgresRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto uri = pg_uri();
    if (!uri) GTEST_SKIP() << kNoPgMessage;
    uri_ = *uri;
    bin_ = env("IDEM_TEST_PG_BIN");
    data_ = env("IDEM_TEST_PG_DATA");
    ASSERT_FALSE(bin_.empty() || data_.empty())
        << "IDEM_TEST_PG_URI is set but IDEM_TEST_PG_BIN / IDEM_TEST_PG_DATA are not: this test "
           "restarts the server and needs the variables scripts/lib/servers.sh exports";
  }
  void TearDown() override {
    if (stopped_) pg_ctl("start");  // leave the server up for the tests after us
  }

  // Runs pg_ctl as the server's user; returns its exit status.
  int pg_ctl(const std::string& action) {
    const bool stop = action == "stop";
    const int rc = testing::pg_ctl(data_, stop, env("IDEM_TEST_PG_LOG"), env("IDEM_TEST_PG_OPTS"));
    if (rc == 0) stopped_ = stop;
    return rc;
  }

  std::unique_ptr<PostgresStore> make(const Target& t, SqlMode mode) {
    auto store = std::make_unique<PostgresStore>(
        PostgresStoreOptions{.connection = {.uri = t.location,
                                            .table_prefix = t.prefix,
                                            .connect_timeout = seconds{2},
                                            .statement_timeout = seconds{2}},
                             .mode = mode,
                             .pool = {.size = 4, .acquire_timeout = seconds{2}}});
    const Status ready = store->ensure_schema();
    EXPECT_TRUE(ready.ok()) << ready.failure().describe();
    return store;
  }

  std::string uri_, bin_, data_;
  bool stopped_ = false;
};

TEST_F(PostgresRestartTest, OutageIsStoreUnavailableAndRecoveryLosesNothing) {
  const Target lease_target{Backend::postgres, uri_, unique_name("rl") + "_"};
  const Target tx_target{Backend::postgres, uri_, unique_name("rt") + "_"};
  create_business_table(tx_target);
  auto lease_store = make(lease_target, SqlMode::lease);
  auto tx_store = make(tx_target, SqlMode::transactional);
  IdempotencyGuard lease{*lease_store, Options{.scope = "restart"}};
  IdempotencyGuard tx{*tx_store, Options{.scope = "restart"}};

  int runs = 0;
  for (int i = 0; i < 5; ++i) {
    auto out = lease.execute("before-" + std::to_string(i), [&] { return ++runs; });
    ASSERT_TRUE(out.has_value() && out.recorded()) << out.error().message();
  }

  // A transactional handler is inside its transaction when the server goes away.
  std::promise<void> inside, stopped;
  auto cut_off = std::async(std::launch::async, [&] {
    return tx.execute("order-1", [&](Context& ctx) {
      insert_business_row(tx_target, ctx, "order-1", "cut off");
      inside.set_value();
      stopped.get_future().wait();
      return std::string("receipt");
    });
  });
  inside.get_future().wait();
  ASSERT_EQ(pg_ctl("stop"), 0) << "pg_ctl stop failed";
  stopped.set_value();
  auto lost = cut_off.get();
  EXPECT_FALSE(lost.recorded());
  ASSERT_TRUE(lost.has_value());  // the value, unrecorded: its transaction is gone
  // The COMMIT went out on the connection the server was closing: from the client's side it may
  // or may not have landed.
  EXPECT_EQ(lost.commit_error(), errc::outcome_unknown) << lost.commit_failure().describe();

  // During the outage: store_unavailable, fast, and no handler runs.
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto fresh = lease.execute("during", [&] { return ++runs; });
    auto replay = lease.execute("before-0", [&] { return ++runs; });
    auto order = tx.execute("order-2", [&] { return ++runs; });
    EXPECT_LT(std::chrono::steady_clock::now() - start, seconds{10});
    EXPECT_EQ(fresh.error(), errc::store_unavailable);
    EXPECT_EQ(replay.error(), errc::store_unavailable);
    EXPECT_EQ(order.error(), errc::store_unavailable);
  }
  EXPECT_EQ(runs, 5);

  ASSERT_EQ(pg_ctl("start"), 0) << "pg_ctl start failed";

  // After: every result recorded before replays, on new connections; new keys run once.
  for (int i = 0; i < 5; ++i) {
    auto out = lease.execute("before-" + std::to_string(i), [&] { return ++runs; });
    ASSERT_TRUE(out.has_value()) << out.error().message();
    EXPECT_TRUE(out.replayed());
    EXPECT_EQ(out.value(), i + 1);
  }
  auto during = lease.execute("during", [&] { return ++runs; });
  ASSERT_TRUE(during.has_value()) << during.error().message();
  EXPECT_EQ(during.value(), 6);
  // The cut-off transaction rolled back: no business row, no record; the retry runs once.
  EXPECT_EQ(count_business_rows(tx_target, "order-1"), 0);
  int order_runs = 0;
  for (int i = 0; i < 2; ++i) {
    auto retry = tx.execute("order-1", [&](Context& ctx) {
      ++order_runs;
      insert_business_row(tx_target, ctx, "order-1", "placed");
      return std::string("receipt");
    });
    ASSERT_TRUE(retry.has_value()) << retry.error().message();
  }
  EXPECT_EQ(order_runs, 1);
  EXPECT_EQ(count_business_rows(tx_target, "order-1"), 1);
}

}  // namespace
}  // namespace idem::testing
