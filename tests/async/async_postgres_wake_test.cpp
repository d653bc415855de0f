// AsyncPostgresStore as an idem::AsyncWakingStore against the server in IDEM_TEST_PG_URI: waiting
// duplicates are woken by the commit or abort (the waiter counts itself in the record, then the
// store's listening connection hears the NOTIFY), three store calls each, also with
// single_threaded; a holder in a PostgresStore wakes them too; cancelling a waiting duplicate
// ends its wait; a test's ManualClock still polls; a stalled server bounds the wait.

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <pqxx/pqxx>
#include <string>

#include "async/async_test_support.hpp"
#include "async/async_wake_cases.hpp"
#include "idem/postgres/async_store.hpp"
#include "idem/postgres/store.hpp"
#include "sql/pg_relay.hpp"

namespace idem::testing {
namespace {

static_assert(AsyncWakingStore<AsyncPostgresStore>);

const char* pg_uri() {
  const char* uri = std::getenv("IDEM_TEST_PG_URI");
  return uri != nullptr && *uri != '\0' ? uri : nullptr;
}

// A table prefix no other test or run uses.
std::string fresh_tables() {
  static int counter = 0;
  return "async_wake_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 100000) + "_";
}

AsyncPostgresStoreOptions wake_options(std::string uri, std::string tables) {
  return AsyncPostgresStoreOptions{.connection = {.uri = std::move(uri),
                                                  .table_prefix = std::move(tables),
                                                  .connect_timeout = std::chrono::seconds{5},
                                                  .statement_timeout = std::chrono::seconds{5}}};
}

class AsyncPostgresWakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (pg_uri() == nullptr) {
      GTEST_SKIP() << "IDEM_TEST_PG_URI is not set; scripts/test starts a PostgreSQL";
    }
  }
  AsyncPostgresStoreOptions options() const { return wake_options(pg_uri(), tables_); }
  // The waiters the record of `key` counts now (an ASCII key).
  int counted(const std::string& key) const {
    pqxx::connection c(pg_uri());
    const pqxx::result r = pqxx::nontransaction(c).exec(
        "SELECT waiters FROM " + tables_ + "records WHERE key = convert_to('" + key + "', 'UTF8')");
    return r.empty() || r[0][0].is_null() ? 0 : r[0][0].as<int>();
  }

  std::string tables_ = fresh_tables();
  IoRunner runner_;
};

TEST_F(AsyncPostgresWakeTest, DuplicatesWokenByTheCommitCostThreeStoreCallsEach) {
  AsyncPostgresStore store(runner_.io().get_executor(), options());
  EXPECT_TRUE(store.wakes());
  expect_async_duplicates_woken_by_commit(store, runner_, 31, "storm");
  EXPECT_EQ(store.connections_opened(), 1u);  // the listener's connection is apart from it
}

TEST_F(AsyncPostgresWakeTest, OnOneThreadDuplicatesAreWokenToo) {
  AsyncPostgresStoreOptions o = options();
  o.single_threaded = true;
  AsyncPostgresStore store(runner_.io().get_executor(), o);
  expect_async_duplicates_woken_by_commit(store, runner_, 8, "storm-one-thread");
}

TEST_F(AsyncPostgresWakeTest, TheHoldersAbortWakesADuplicateThatThenRuns) {
  AsyncPostgresStore store(runner_.io().get_executor(), options());
  expect_async_duplicate_woken_by_abort(store, runner_, "abort");
}

TEST_F(AsyncPostgresWakeTest, CancellingAWaitingDuplicateEndsItsWait) {
  AsyncPostgresStore store(runner_.io().get_executor(), options());
  expect_async_cancel_ends_the_wait(store, runner_, "cancel");
}

TEST_F(AsyncPostgresWakeTest, AManualClockStillPolls) {
  AsyncPostgresStore store(runner_.io().get_executor(), options());
  expect_async_manual_clock_polls(store, runner_, "manual");
}

// The records are PostgresStore's: its holder's commit wakes the asynchronous store's waiter.
TEST_F(AsyncPostgresWakeTest, APostgresStoreHoldersCommitWakesTheWaiter) {
  AsyncPostgresStore waiter(runner_.io().get_executor(), options());
  PostgresStore holder(PostgresStoreOptions{.connection = options().connection});
  Result<Claim> c =
      holder.claim(ClaimRequest{.key = "k", .lease = kNoWaitBound, .retention = kNoWaitBound});
  ASSERT_TRUE(c.has_value()) << c.failure().describe();
  ASSERT_EQ(c->status, ClaimStatus::acquired);
  const Ticket held{"k", c->fence};
  std::optional<bool> waited;
  net::co_spawn(
      runner_.io(),
      [&]() -> net::awaitable<void> {
        waited = co_await waiter.async_await_change(held, kNoWaitBound);
      },
      net::detached);
  // Once the record counts the waiter, only the end of the hold (or the bound, minutes away)
  // ends its wait.
  ASSERT_TRUE(run_until_or_give_up(runner_, [&] { return counted("k") == 1; }));
  EXPECT_FALSE(waited.has_value());
  ASSERT_TRUE(holder.commit(held, Completion{.result = "r", .ttl = kNoWaitBound}));
  ASSERT_TRUE(run_until_or_give_up(runner_, [&] { return waited.has_value(); }))
      << "the commit's NOTIFY did not end the wait";
  EXPECT_TRUE(*waited);
}

// A server that stops answering (a stalled relay) ends the wait within its bound and the
// pipeline's reply deadline (statement_timeout + 1 s), not at the holder's end (minutes away).
TEST_F(AsyncPostgresWakeTest, AStalledServerBoundsTheWait) {
  std::optional<PgRelay> relay = pg_relay(pg_uri());
  if (!relay) GTEST_SKIP() << "the test server is not on IPv4: no relay";
  AsyncPostgresStoreOptions through = wake_options(relay->uri, tables_);
  through.connection.statement_timeout = std::chrono::milliseconds{300};
  AsyncPostgresStore holder(runner_.io().get_executor(), options());
  AsyncPostgresStore waiter(runner_.io().get_executor(), through);
  Result<Claim> c = runner_.run(holder.async_claim(
      ClaimRequest{.key = "k", .lease = kNoWaitBound, .retention = kNoWaitBound}));
  ASSERT_TRUE(c.has_value() && c->status == ClaimStatus::acquired);
  const Ticket held{"k", c->fence};
  // A first wait starts the listener and the pipeline while the relay passes.
  EXPECT_TRUE(runner_.run(waiter.async_await_change(held, std::chrono::milliseconds{200})));
  relay->relay->stall();
  std::optional<bool> waited;
  net::co_spawn(
      runner_.io(),
      [&]() -> net::awaitable<void> {
        waited = co_await waiter.async_await_change(held, std::chrono::milliseconds{300});
      },
      net::detached);
  ASSERT_TRUE(run_until_or_give_up(runner_, [&] { return waited.has_value(); }))
      << "the wait outlived its bound and the pipeline's reply deadline";
  relay->relay->pass();
  EXPECT_TRUE(
      runner_.run(holder.async_commit(held, Completion{.result = "r", .ttl = kNoWaitBound})));
}

}  // namespace
}  // namespace idem::testing
