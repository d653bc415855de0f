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
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "idem/engine/failure_record.hpp"
#include "idem/postgres/admin.hpp"
#include "idem/postgres/store.hpp"
#include "idem/postgres/transaction.hpp"
#include "idem/redis/admin.hpp"
#include "idem/redis/store.hpp"
#include "idem/sqlite/admin.hpp"
#include "idem/sqlite/store.hpp"
#include "idem/sqlite/transaction.hpp"
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

void scale(Scenario& s) {
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
}

// The scenario of `seed`, as a real store can run it in lease mode: no clock jumps, no volatile
// restart, times scaled (leases of 120-360 ms).
Scenario real_scenario(std::uint64_t seed) {
  Scenario s = generate(seed);
  s.mode = StoreMode::lease;
  s.volatile_store = false;
  s.jump_rate = 0;
  s.drop_rate = 0;
  scale(s);
  return s;
}

// The first transactional scenario from seed `next` on, as a real store can run it (`next`
// moves past it): callers fail fast (a blocked claim would hold the one thread the callers
// share); lost requests and replies are the relay's only, which end the connection as a real
// one's do (the simulated network's, and a restart's replies in flight, would leave the
// store's connection and its transaction up); no clock jumps.
Scenario real_transactional_scenario(std::uint64_t& next) {
  for (;; ++next) {
    Scenario s = generate(next);
    if (s.mode != StoreMode::transactional) continue;
    ++next;
    s.wait_ms = 0;
    s.faults = FaultRates{.latency = s.faults.latency};
    s.restart_rate = 0;
    s.jump_rate = 0;
    s.drop_rate = 0;
    scale(s);
    return s;
  }
}

// A row the handlers wrote through the store's transaction (transactional runs).
struct EffectRow {
  std::string key;  // the effective key, in hex
  Fence fence = 0;
  int step = -1;
  bool failed = false;
};

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    out.push_back(kDigits[(static_cast<unsigned char>(c) >> 4) & 0xf]);
    out.push_back(kDigits[static_cast<unsigned char>(c) & 0xf]);
  }
  return out;
}

// What the transactional contract asks of the rows that committed (design.md §7, §9, steps.md):
// none of a handler or atomic step that threw; an atomic step's once in its run; every completed
// record's handler row, under its fence; rows only of runs whose record committed, and none of a
// remembered failure's run (but for a result too large, which commits with the writes). Returns
// how many completed records it found with their writes.
std::size_t check_effect_rows(const std::vector<EffectRow>& rows, const Contract& contract,
                              Violations& violations) {
  using Run = std::pair<std::string, Fence>;  // the key (hex) and its holder's fence
  std::set<Run> wrote;                        // runs with a row that committed
  std::set<Run> handler;                      // runs whose handler's own row committed
  std::set<std::tuple<std::string, Fence, int>> steps;
  for (const EffectRow& row : rows) {
    if (row.failed) {
      violations.add(Check::failure_carries_no_effects,
                     "a write of a step or handler that threw committed (fence " +
                         std::to_string(row.fence) + ", step " + std::to_string(row.step) + ")");
      return 0;
    }
    wrote.insert({row.key, row.fence});
    if (row.step < 0) {
      handler.insert({row.key, row.fence});
    } else if (!steps.insert({row.key, row.fence, row.step}).second) {
      violations.add(Check::steps_once, "atomic step " + std::to_string(row.step) + " of fence " +
                                            std::to_string(row.fence) + " committed twice");
      return 0;
    }
  }
  std::size_t found = 0;
  for (const auto& [key, record] : contract.keys()) {
    const std::string k = hex(key);
    for (const KeyRecord::Landed& l : record.landed) {
      const Run run{k, l.fence};
      const bool too_large = l.status == ClaimStatus::failed &&
                             idem::detail::decode_failure(l.result).code == errc::result_too_large;
      if (l.status == ClaimStatus::completed && !handler.contains(run)) {
        violations.add(Check::tx_effects_once, "key " + printable(key) +
                                                   ": completed under fence " +
                                                   std::to_string(l.fence) + " without its writes");
        return found;
      }
      if (l.status == ClaimStatus::failed && !too_large && wrote.contains(run)) {
        violations.add(Check::failure_carries_no_effects,
                       "key " + printable(key) + ": a remembered failure under fence " +
                           std::to_string(l.fence) + " with its run's writes");
        return found;
      }
      if (l.status == ClaimStatus::completed) ++found;
      wrote.erase(run);
    }
    // What is left of the key's rows: runs whose record never committed.
    const auto left = wrote.lower_bound(Run{k, 0});
    if (left != wrote.end() && left->first == k) {
      violations.add(Check::tx_effects_once, "key " + printable(key) + ": writes of fence " +
                                                 std::to_string(left->second) +
                                                 " committed without its record");
      return found;
    }
  }
  return found;
}

// Runs the seeds over the backend `make` builds for each; fails the test at the first
// violation, printing the scenario and the run's trace.
struct RunHow {
  bool atomic_steps = true;
  bool expiry_removes = false;
  bool transactional = false;
  // Transactional mode: the handlers' writes in the store's transaction, and their check.
  std::function<void(NativeTransaction, const Write&)> write{};
  std::function<void(const Contract&, Violations&)> check{};
};

template <class S>
void run_seeds(const std::string& store, const RunHow& how,
               const std::function<std::shared_ptr<S>()>& make_store,
               const std::function<std::unique_ptr<admin::Admin>()>& make_admin,
               testing::FaultRelay* relay) {
  Stats explored;
  std::uint64_t next = 1;
  for (int n = 0; n < kSeeds; ++n) {
    const Scenario scenario =
        how.transactional ? real_transactional_scenario(next) : real_scenario(next++);
    RunOptions options;
    options.real_time = true;
    options.tolerance = kTolerance;
    options.expiry_removes = how.expiry_removes;
    options.sim_transactions = false;
    options.atomic_steps = how.atomic_steps;
    options.write_effect = how.write;
    options.check_effects = how.check;
    options.trace = true;
    options.scope = "sim" + std::to_string(::getpid()) + "." + std::to_string(scenario.seed);
    options.backend = [&](World& world) -> std::unique_ptr<Backend> {
      return std::make_unique<BackendOf<RealServer<S>>>(
          world.scheduler(), scenario.faults, world.stats(), world.scheduler(),
          world.contract_mut(), world.trace(), world.stats(), make_store, make_admin(), relay,
          kRelayFaults);
    };
    const RunReport report = run(scenario, options);
    explored.merge(report.stats);
    if (relay != nullptr) relay->pass();
    if (report.failed) {
      std::string trace;
      for (const std::string& line : report.trace) trace += "  " + line + "\n";
      FAIL() << store << ", seed " << scenario.seed << ": " << name(report.violation.check) << ": "
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
      "sqlite", RunHow{}, [&] { return store; },
      [&] { return admin::sqlite_admin(admin::SqliteAdminOptions{.path = path}); }, nullptr);
  std::filesystem::remove_all(dir);
}

TEST(SimRealStoresTest, PostgresThroughAFaultRelayRunsTheSimulatorsSeedsWithoutAViolation) {
  const auto uri = testing::pg_uri();
  if (!uri) GTEST_SKIP() << "IDEM_TEST_PG_URI is not set; scripts/test starts a server and sets it";
  auto through = testing::pg_relay(*uri);
  ASSERT_TRUE(through.has_value()) << "the PostgreSQL test server is not on IPv4";
  const std::string prefix = "idem_sim" + std::to_string(::getpid()) + "_";
  auto store = std::make_shared<PostgresStore>(PostgresStoreOptions{
      .connection = {.uri = through->uri, .table_prefix = prefix}, .pool = {.size = 4}});
  run_seeds<PostgresStore>(
      "postgres", RunHow{}, [&] { return store; },
      [&] {
        return admin::postgres_admin(
            admin::PostgresAdminOptions{.connection = {.uri = *uri, .table_prefix = prefix}});
      },
      through->relay.get());
}

TEST(SimRealStoresTest, SqliteTransactionalRunsTheSimulatorsSeedsWithoutAViolation) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("idem-sim-tx-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "records.db").string();
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("CREATE TABLE sim_effects (key TEXT, fence INTEGER, step INTEGER, failed INTEGER)");
  }
  std::size_t completed_with_writes = 0;
  RunHow how;
  how.transactional = true;
  how.write = [](NativeTransaction tx, const Write& w) {
    SQLite::Statement insert(sqlite_transaction(tx), "INSERT INTO sim_effects VALUES (?, ?, ?, ?)");
    insert.bind(1, hex(w.key));
    insert.bind(2, static_cast<std::int64_t>(w.fence));
    insert.bind(3, w.step);
    insert.bind(4, w.failed ? 1 : 0);
    insert.exec();
  };
  how.check = [&](const Contract& contract, Violations& violations) {
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    SQLite::Statement rows(db, "SELECT key, fence, step, failed FROM sim_effects");
    std::vector<EffectRow> found;
    while (rows.executeStep()) {
      found.push_back(EffectRow{rows.getColumn(0).getString(),
                                static_cast<Fence>(rows.getColumn(1).getInt64()),
                                rows.getColumn(2).getInt(), rows.getColumn(3).getInt() != 0});
    }
    completed_with_writes += check_effect_rows(found, contract, violations);
  };
  // One store per process, so that a crash ends its transaction; a claim that cannot get the
  // file's write lock soon answers store_unavailable.
  run_seeds<SqliteStore>(
      "sqlite transactional", how,
      [&] {
        return std::make_shared<SqliteStore>(
            SqliteStoreOptions{.path = path,
                               .mode = SqlMode::transactional,
                               .busy_timeout = std::chrono::milliseconds{50}});
      },
      [&] { return admin::sqlite_admin(admin::SqliteAdminOptions{.path = path}); }, nullptr);
  std::filesystem::remove_all(dir);
  std::printf("sqlite transactional: %zu completed records, each with its writes\n",
              completed_with_writes);
  EXPECT_GT(completed_with_writes, 0U) << "no run completed a record: the writes went unchecked";
}

TEST(SimRealStoresTest,
     PostgresTransactionalThroughAFaultRelayRunsTheSimulatorsSeedsWithoutAViolation) {
  const auto uri = testing::pg_uri();
  if (!uri) GTEST_SKIP() << "IDEM_TEST_PG_URI is not set; scripts/test starts a server and sets it";
  auto through = testing::pg_relay(*uri);
  ASSERT_TRUE(through.has_value()) << "the PostgreSQL test server is not on IPv4";
  const std::string prefix = "idem_simtx" + std::to_string(::getpid()) + "_";
  const std::string table = prefix + "effects";
  {
    pqxx::connection c(*uri);
    pqxx::work w(c);
    w.exec("CREATE TABLE " + table + " (key TEXT, fence BIGINT, step INT, failed INT)");
    w.commit();
  }
  std::size_t completed_with_writes = 0;
  RunHow how;
  how.transactional = true;
  how.write = [&](NativeTransaction tx, const Write& w) {
    pg_transaction(tx).exec_params("INSERT INTO " + table + " VALUES ($1, $2, $3, $4)", hex(w.key),
                                   static_cast<std::int64_t>(w.fence), w.step, w.failed ? 1 : 0);
  };
  how.check = [&](const Contract& contract, Violations& violations) {
    pqxx::connection c(*uri);
    pqxx::nontransaction n(c);
    std::vector<EffectRow> found;
    for (const auto& row : n.exec("SELECT key, fence, step, failed FROM " + table)) {
      found.push_back(EffectRow{row[0].as<std::string>(), row[1].as<Fence>(), row[2].as<int>(),
                                row[3].as<int>() != 0});
    }
    completed_with_writes += check_effect_rows(found, contract, violations);
  };
  run_seeds<PostgresStore>(
      "postgres transactional", how,
      [&] {
        return std::make_shared<PostgresStore>(
            PostgresStoreOptions{.connection = {.uri = through->uri, .table_prefix = prefix},
                                 .mode = SqlMode::transactional,
                                 .pool = {.size = 2}});
      },
      [&] {
        return admin::postgres_admin(
            admin::PostgresAdminOptions{.connection = {.uri = *uri, .table_prefix = prefix}});
      },
      through->relay.get());
  pqxx::connection c(*uri);
  pqxx::nontransaction(c).exec("DROP TABLE " + table);
  std::printf("postgres transactional: %zu completed records, each with its writes\n",
              completed_with_writes);
  EXPECT_GT(completed_with_writes, 0U) << "no run completed a record: the writes went unchecked";
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
      "redis", RunHow{.atomic_steps = false, .expiry_removes = true}, [&] { return store; },
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
      "redis cluster", RunHow{.atomic_steps = false, .expiry_removes = true}, [&] { return store; },
      [&] { return admin::redis_admin(*client, admin::RedisAdminOptions{.prefix = prefix}); },
      nullptr);
}

}  // namespace
}  // namespace idem::sim
