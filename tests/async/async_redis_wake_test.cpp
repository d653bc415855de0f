// AsyncRedisStore as an idem::AsyncWakingStore against the server in IDEM_TEST_REDIS_URI: waiting
// duplicates are woken by the commit or abort (record_wait.lua, then BLPOP on a wait connection
// of their own), three store calls each, also with single_threaded; cancelling a waiting
// duplicate ends its wait; a test's ManualClock still polls; a stalled server bounds the wait;
// with no wait connections the guard polls (the kit's AsyncRedisNoWait/WakeConformance.*).

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "async/async_redis_cells.hpp"
#include "async/async_test_support.hpp"
#include "async/async_wake_cases.hpp"
#include "idem/redis/async_store.hpp"
#include "idem/testing/async_store_conformance.hpp"
#include "redis/redis_test_support.hpp"
#include "support/fault_relay.hpp"

namespace idem::testing {

// The single-server cell without wait connections: the store cannot wait, its duplicates poll.
struct AsyncRedisNoWaitCell : AsyncRedisCell {
  static constexpr bool waits = false;
  static std::optional<AsyncRedisStoreOptions> options() {
    std::optional<AsyncRedisStoreOptions> o = AsyncRedisCell::options();
    if (o) o->connection.wait_connections = 0;
    return o;
  }
};

// The kit's wake cases alone (the rest of the kit runs on AsyncRedis already).
[[maybe_unused]] static const bool kNoWaitCases = [] {
  conformance::register_wake_cases<BlockingCell<AsyncRedisNoWaitCell>>("AsyncRedisNoWait", __FILE__,
                                                                       __LINE__);
  return true;
}();

namespace {

static_assert(AsyncWakingStore<AsyncRedisStore>);

class AsyncRedisWakeTest : public RedisTest {
 protected:
  AsyncRedisWakeTest() : RedisTest("async-wake") {}
};

TEST_F(AsyncRedisWakeTest, DuplicatesWokenByTheCommitCostThreeStoreCallsEach) {
  if (!ready()) return;
  IoRunner runner;
  AsyncRedisStore store(runner.io().get_executor(), async_redis_options(prefix_));
  EXPECT_TRUE(store.wakes());
  expect_async_duplicates_woken_by_commit(store, runner, 31, "storm");
  EXPECT_EQ(store.connections_opened(), 1u);  // the waits' connections are apart from it
}

TEST_F(AsyncRedisWakeTest, OnOneThreadDuplicatesAreWokenToo) {
  if (!ready()) return;
  IoRunner runner;
  AsyncRedisStoreOptions options = async_redis_options(prefix_);
  options.single_threaded = true;
  AsyncRedisStore store(runner.io().get_executor(), options);
  expect_async_duplicates_woken_by_commit(store, runner, 8, "storm-one-thread");
}

TEST_F(AsyncRedisWakeTest, TheHoldersAbortWakesADuplicateThatThenRuns) {
  if (!ready()) return;
  IoRunner runner;
  AsyncRedisStore store(runner.io().get_executor(), async_redis_options(prefix_));
  expect_async_duplicate_woken_by_abort(store, runner, "abort");
}

TEST_F(AsyncRedisWakeTest, CancellingAWaitingDuplicateEndsItsWait) {
  if (!ready()) return;
  IoRunner runner;
  AsyncRedisStore store(runner.io().get_executor(), async_redis_options(prefix_));
  expect_async_cancel_ends_the_wait(store, runner, "cancel");
}

TEST_F(AsyncRedisWakeTest, AManualClockStillPolls) {
  if (!ready()) return;
  IoRunner runner;
  AsyncRedisStore store(runner.io().get_executor(), async_redis_options(prefix_));
  expect_async_manual_clock_polls(store, runner, "manual");
}

// With no wait connections the store does not wait: wakes() is false and the guard polls.
TEST_F(AsyncRedisWakeTest, NoWaitConnectionsMeansTheGuardPolls) {
  if (!ready()) return;
  IoRunner runner;
  AsyncRedisStoreOptions options = async_redis_options(prefix_);
  options.connection.wait_connections = 0;
  AsyncRedisStore store(runner.io().get_executor(), options);
  EXPECT_FALSE(store.wakes());
}

// A server that stops answering (a stalled relay): the wait's connection is dropped once its
// bound and command_timeout have passed, and the wait ends, not woken (false); the holder's
// lease (minutes) would have ended it much later.
TEST(AsyncRedisWakeStallTest, AStalledServerBoundsTheWait) {
  IDEM_REQUIRE_REDIS(direct);
  const redis::ConnectionOptions options = redis_options();
  FaultRelay relay(options.host, options.port);
  const std::string prefix = unique_prefix("async-wake-stall");
  AsyncRedisStoreOptions through = async_redis_options(prefix);
  through.connection.host = "127.0.0.1";
  through.connection.port = relay.port();
  through.connection.command_timeout = std::chrono::milliseconds{300};
  IoRunner runner;
  AsyncRedisStore holder(runner.io().get_executor(), async_redis_options(prefix));
  AsyncRedisStore waiter(runner.io().get_executor(), through);
  Result<Claim> c = runner.run(holder.async_claim(
      ClaimRequest{.key = "k", .lease = kNoWaitBound, .retention = kNoWaitBound}));
  ASSERT_TRUE(c.has_value() && c->status == ClaimStatus::acquired);
  const Ticket held{"k", c->fence};
  // A first wait opens the wait connection while the relay passes.
  EXPECT_TRUE(runner.run(waiter.async_await_change(held, std::chrono::milliseconds{10})));
  relay.stall();
  std::optional<bool> waited;
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> {
        waited = co_await waiter.async_await_change(held, std::chrono::milliseconds{300});
      },
      net::detached);
  ASSERT_TRUE(run_until_or_give_up(runner, [&] { return waited.has_value(); }))
      << "the wait outlived its bound and command_timeout";
  EXPECT_FALSE(*waited);  // no reply came: dropped by its watchdog
  relay.pass();
  EXPECT_TRUE(
      runner.run(holder.async_commit(held, Completion{.result = "r", .ttl = kNoWaitBound})));
}

}  // namespace
}  // namespace idem::testing
