// The simulator's checks over the real stores (docs/simulation.md, "Real stores"): the real
// engine and its faces against SQLite, PostgreSQL, Redis and a Redis Cluster, on the machine's
// clock, with the simulated network's faults at each call and, where the store's connections go
// through a FaultRelay (PostgreSQL, Redis), real network faults too. A few seeds per store, each
// a scenario of the simulator scaled to real time (leases of 120-360 ms), so that the
// simulated record server cannot drift from the stores it stands for. Not replayable bit for
// bit: the stores keep time on their own clocks.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "idem/admin/postgres_admin.hpp"
#include "idem/admin/redis_admin.hpp"
#include "idem/admin/sqlite_admin.hpp"
#include "idem/stores/postgres_store.hpp"
#include "idem/stores/redis_store.hpp"
#include "idem/stores/sqlite_store.hpp"
#include "redis/redis_cluster_support.hpp"
#include "redis/redis_test_support.hpp"
#include "sim/backend.hpp"
#include "sim/real_server.hpp"
#include "sim/world.hpp"
#include "sql/pg_relay.hpp"
#include "sql/sql_test_support.hpp"
#include "support/fault_relay.hpp"

namespace idem::sim {
namespace {

constexpr int kTimeScale = 6;     // virtual milliseconds of a scenario -> real ones
constexpr int kSeeds = 12;        // per store
constexpr int kRelayFaults = 60;  // per mille of claims, commits, aborts, extends
constexpr auto kTolerance = std::chrono::milliseconds{80};

// The scenario of `seed`, as a real store can run it: lease mode, no clock jumps, no volatile
// restart, times scaled (leases of 120-360 ms).
Scenario real_scenario(std::uint64_t seed) {
  Scenario s = generate(seed);
  s.mode = StoreMode::lease;
  s.volatile_store = false;
  s.jump_rate = 0;
  s.drop_rate = 0;
  s.lease_ms *= kTimeScale;
  s.ttl_ms *= kTimeScale;
  s.wait_ms *= kTimeScale;
  s.faults.long_delay *= kTimeScale;
  s.faults.max_latency *= kTimeScale;
  for (ProcessPlan& p : s.processes) {
    for (ActorPlan& a : p.actors) {
      for (Op& op : a.ops) {
        op.pause_ms *= kTimeScale;
        op.handler.work_ms *= kTimeScale;
      }
    }
  }
  return s;
}

struct Deployment {
  std::string name;
  std::function<std::shared_ptr<void>(World&, std::unique_ptr<Backend>&)> make;
};

// Runs the seeds over the backend `make` builds for each; fails the test at the first
// violation, printing the scenario and the run's trace.
template <class S>
void run_seeds(const std::string& store, bool atomic_steps, bool expiry_removes,
               const std::function<std::shared_ptr<S>()>& make_store,
               const std::function<std::unique_ptr<admin::Admin>()>& make_admin,
               testing::FaultRelay* relay) {
  Stats explored;
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const Scenario scenario = real_scenario(seed);
    RunOptions options;
    options.real_time = true;
    options.tolerance = kTolerance;
    options.expiry_removes = expiry_removes;
    options.sim_transactions = false;
    options.atomic_steps = atomic_steps;
    options.trace = true;
    options.scope = "sim" + std::to_string(::getpid()) + "." + std::to_string(seed);
    options.backend = [&](World& world) -> std::unique_ptr<Backend> {
      return std::make_unique<BackendOf<RealServer<S>>>(
          world.scheduler(), scenario.faults, world.stats(), world.scheduler(),
          world.contract_mut(), world.trace(), world.stats(), make_store(), make_admin(), relay,
          kRelayFaults);
    };
    const RunReport report = run(scenario, options);
    explored.merge(report.stats);
    if (relay != nullptr) relay->pass();
    if (report.failed) {
      std::string trace;
      for (const std::string& line : report.trace) trace += "  " + line + "\n";
      FAIL() << store << ", seed " << seed << ": " << name(report.violation.check) << ": "
             << report.violation.what << "\n  scenario: " << to_text(scenario) << "\n"
             << trace;
    }
  }
  std::printf(
      "%s: %d seeds, %llu store calls, %llu guard calls, %llu requests and %llu replies "
      "lost, %llu crashes\n",
      store.c_str(), kSeeds, static_cast<unsigned long long>(explored.get(Stat::store_calls)),
      static_cast<unsigned long long>(explored.get(Stat::guard_calls)),
      static_cast<unsigned long long>(explored.get(Stat::lost_requests)),
      static_cast<unsigned long long>(explored.get(Stat::lost_replies)),
      static_cast<unsigned long long>(explored.get(Stat::crashes)));
}

TEST(SimRealStoresTest, SqliteRunsTheSimulatorsSeedsWithoutAViolation) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("idem-sim-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "records.db").string();
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{.path = path});
  run_seeds<SqliteStore>(
      "sqlite", /*atomic_steps=*/true, /*expiry_removes=*/false, [&] { return store; },
      [&] { return admin::sqlite_admin(admin::SqliteAdminOptions{.path = path}); }, nullptr);
  std::filesystem::remove_all(dir);
}

TEST(SimRealStoresTest, PostgresThroughAFaultRelayRunsTheSimulatorsSeedsWithoutAViolation) {
  const auto uri = testing::pg_uri();
  if (!uri) GTEST_SKIP() << "IDEM_TEST_PG_URI is not set; scripts/test starts a server and sets it";
  auto through = testing::pg_relay(*uri);
  ASSERT_TRUE(through.has_value()) << "the PostgreSQL test server is not on IPv4";
  const std::string prefix = "idem_sim" + std::to_string(::getpid()) + "_";
  auto store = std::make_shared<PostgresStore>(
      PostgresStoreOptions{.uri = through->uri, .table_prefix = prefix, .pool_size = 4});
  run_seeds<PostgresStore>(
      "postgres", /*atomic_steps=*/true, /*expiry_removes=*/false, [&] { return store; },
      [&] {
        return admin::postgres_admin(
            admin::PostgresAdminOptions{.uri = *uri, .table_prefix = prefix});
      },
      through->relay.get());
}

TEST(SimRealStoresTest, RedisThroughAFaultRelayRunsTheSimulatorsSeedsWithoutAViolation) {
  if (testing::redis_uri() == nullptr) {
    GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set; scripts/test starts a Redis and sets it";
  }
  redis::ConnectionOptions direct = testing::redis_options();
  testing::FaultRelay relay(direct.host, direct.port);
  redis::ConnectionOptions options = direct;
  options.host = "127.0.0.1";
  options.port = relay.port();
  options.connect_timeout = std::chrono::milliseconds{500};
  options.command_timeout = std::chrono::milliseconds{500};
  auto client = std::make_shared<redis::Client>(options);
  auto admin_client = std::make_shared<redis::Client>(direct);
  const std::string prefix = testing::unique_prefix("sim");
  auto store = std::make_shared<RedisStore>(client, RedisStoreOptions{.prefix = prefix});
  run_seeds<RedisStore>(
      "redis", /*atomic_steps=*/false, /*expiry_removes=*/true, [&] { return store; },
      [&] { return admin::redis_admin(*admin_client, admin::RedisAdminOptions{.prefix = prefix}); },
      &relay);
}

TEST(SimRealStoresTest, RedisClusterRunsTheSimulatorsSeedsWithoutAViolation) {
  if (testing::cluster_seeds() == nullptr) {
    GTEST_SKIP() << "IDEM_TEST_REDIS_CLUSTER_SEEDS is not set; scripts/test starts a cluster";
  }
  auto client = std::make_shared<redis::Client>(testing::cluster_options());
  const std::string prefix = testing::unique_prefix("simc");
  auto store = std::make_shared<RedisStore>(client, RedisStoreOptions{.prefix = prefix});
  run_seeds<RedisStore>(
      "redis cluster", /*atomic_steps=*/false, /*expiry_removes=*/true, [&] { return store; },
      [&] { return admin::redis_admin(*client, admin::RedisAdminOptions{.prefix = prefix}); },
      nullptr);
}

}  // namespace
}  // namespace idem::sim
