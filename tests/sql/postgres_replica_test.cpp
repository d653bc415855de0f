// PostgresStore with replay reads from a streaming replica (a hot standby of the test server):
// a settled record on the replica replays without the primary; a lagging, paused, unreachable or
// erroring replica, an in-progress or expired record fall through to the primary; a mismatch
// answers as on the primary; racing threads and processes run each key once; a standby given as
// the primary is a clear error.
//
// Needs IDEM_TEST_PG_URI and IDEM_TEST_PG_REPLICA_URI (scripts/lib/servers.sh:
// start_postgres_replica); without them the tests skip with a message.

#include <cstdlib>
#include <future>
#include <thread>

#include "sql/sql_cases.hpp"

namespace idem::testing {

// sql_cases.hpp's suites run in the store tests, not here.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SqlStoreTest);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SqlTransactionalTest);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SqlProcessTest);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SqlFenceTest);

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// Nothing listens on port 1: connections are refused at once.
constexpr const char* kUnreachable = "postgresql://postgres@127.0.0.1:1/idem_test";

std::optional<std::string> replica_uri() {
  const char* uri = std::getenv("IDEM_TEST_PG_REPLICA_URI");
  if (uri == nullptr || *uri == '\0') return std::nullopt;
  return std::string(uri);
}

std::string one_value(const std::string& uri, const std::string& sql) {
  pqxx::connection c(uri);
  pqxx::nontransaction n(c);
  return n.exec(sql)[0][0].c_str();
}

class PostgresReplicaTest : public ::testing::TestWithParam<Config> {
 protected:
  void SetUp() override {
    const auto primary = pg_uri();
    const auto replica = replica_uri();
    if (!primary || !replica) {
      GTEST_SKIP() << "IDEM_TEST_PG_URI and IDEM_TEST_PG_REPLICA_URI are not both set: replica "
                      "tests need a primary and a hot standby (scripts/test starts them)";
    }
    primary_ = *primary;
    replica_ = *replica;
    prefix_ = unique_name("r") + "_";
    writer_ = store(primary_, "");
    ASSERT_TRUE(writer_->ensure_schema().ok());
    ASSERT_EQ(one_value(replica_, "SELECT pg_is_in_recovery()"), "t");
    resume_replay();  // a failed earlier run may have left it paused
    caught_up();
  }

  void TearDown() override {
    if (!replica_.empty()) resume_replay();
  }

  std::unique_ptr<PostgresStore> store(const std::string& primary, const std::string& replica,
                                       milliseconds retry_after = milliseconds{1000}) {
    return std::make_unique<PostgresStore>(PostgresStoreOptions{
        .connection = {.uri = primary, .table_prefix = prefix_},
        .mode = mode(),
        .replica = PostgresReplicaOptions{.uri = replica, .retry_after = retry_after}});
  }

  // Waits until the replica replayed everything the primary wrote so far.
  void caught_up() {
    // The server runs with synchronous_commit off, so the last commits (and an open
    // transaction's records) may sit unflushed, out of the walsender's reach: a synchronous
    // commit of our own that writes WAL (a transactional message) flushes everything before it.
    std::string lsn;
    {
      pqxx::connection c(primary_);
      pqxx::nontransaction n(c);
      n.exec("SET synchronous_commit = on");
      n.exec("SELECT pg_logical_emit_message(true, 'idem_test', 'flush')");
      lsn = n.exec("SELECT pg_current_wal_flush_lsn()")[0][0].c_str();
    }
    const auto deadline = Clock::now() + seconds{20};
    while (one_value(replica_, "SELECT pg_last_wal_replay_lsn() >= '" + lsn + "'") != "t") {
      ASSERT_LT(Clock::now(), deadline) << "the replica did not reach " << lsn;
      std::this_thread::sleep_for(milliseconds{10});
    }
  }

  void pause_replay() {
    (void)one_value(replica_, "SELECT pg_wal_replay_pause()");
    const auto deadline = Clock::now() + seconds{20};
    while (one_value(replica_, "SELECT pg_get_wal_replay_pause_state()") != "paused") {
      ASSERT_LT(Clock::now(), deadline) << "the replica did not pause";
      std::this_thread::sleep_for(milliseconds{10});
    }
  }

  SqlMode mode() const { return GetParam().mode; }

  // Completes `key` with payload "p" and result `value` on the primary; waits for the replica.
  void completed(const std::string& key, int value) {
    IdempotencyGuard writer{*writer_, Options{.scope = "pay"}};
    auto out = writer.execute(key, "p", [&] { return value; });
    ASSERT_TRUE(out.has_value()) << out.message();
    caught_up();
  }

  void resume_replay() { (void)one_value(replica_, "SELECT pg_wal_replay_resume()"); }

  std::string primary_, replica_, prefix_;
  std::unique_ptr<PostgresStore> writer_;  // primary only
};

INSTANTIATE_TEST_SUITE_P(Postgres, PostgresReplicaTest,
                         ::testing::Values(Config{Backend::postgres, SqlMode::lease},
                                           Config{Backend::postgres, SqlMode::transactional}),
                         config_name);

TEST_P(PostgresReplicaTest, SettledRecordsReplayFromTheReplicaWithThePrimaryUnreachable) {
  IdempotencyGuard writer{*writer_, Options{.scope = "pay", .remember_failures = true}};
  int runs = 0;
  auto done = writer.execute("k1", "payload", [&] { return "receipt-" + std::to_string(++runs); });
  ASSERT_TRUE(done.has_value()) << done.error().message();
  EXPECT_THROW((void)writer.execute("k2", "payload",
                                    [&]() -> std::string {
                                      ++runs;
                                      throw std::runtime_error("card declined");
                                    }),
               std::runtime_error);
  caught_up();

  // The reader's primary refuses every connection: any statement there would be an error.
  auto reader_store = store(kUnreachable, replica_);
  IdempotencyGuard reader{*reader_store, Options{.scope = "pay", .remember_failures = true}};
  auto again = reader.execute("k1", "payload", [&] { return "receipt-" + std::to_string(++runs); });
  ASSERT_TRUE(again.has_value()) << again.error().message();
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.value(), "receipt-1");
  auto failed_again = reader.execute("k2", "payload", [&] { return std::to_string(++runs); });
  ASSERT_FALSE(failed_again.has_value());
  EXPECT_EQ(failed_again.error(), errc::handler_failed);
  EXPECT_EQ(runs, 2);

  const ReplicaCounters c = reader_store->replica_counters();
  EXPECT_EQ(c.hits, 2u);
  EXPECT_EQ(c.fall_throughs, 0u);
  EXPECT_EQ(c.errors, 0u);
  EXPECT_EQ(writer_->replica_counters().hits, 0u);  // no replica: all zero
}

TEST_P(PostgresReplicaTest, MismatchOnTheReplicaAnswersAsThePrimaryDoes) {
  completed("k", 1);
  IdempotencyGuard writer{*writer_, Options{.scope = "pay"}};
  auto on_primary = writer.execute("k", "other payload", [] { return 2; });
  auto reader_store = store(kUnreachable, replica_);
  IdempotencyGuard reader{*reader_store, Options{.scope = "pay"}};
  int runs = 0;
  auto on_replica = reader.execute("k", "other payload", [&] { return ++runs; });
  ASSERT_FALSE(on_primary.has_value());
  ASSERT_FALSE(on_replica.has_value());
  EXPECT_EQ(reader_store->replica_counters().errors, 0u) << on_replica.message();
  EXPECT_EQ(on_primary.error(), errc::payload_mismatch);
  EXPECT_EQ(on_replica.error(), on_primary.error());
  EXPECT_EQ(runs, 0);
  EXPECT_EQ(reader_store->replica_counters().hits, 1u);
}

TEST_P(PostgresReplicaTest, LaggingReplicaFallsThroughAndThePrimaryReplays) {
  auto s = store(primary_, replica_);
  IdempotencyGuard guard{*s, Options{.scope = "pay"}};
  pause_replay();
  int runs = 0;
  auto first = guard.execute("k", "p", [&] { return "v" + std::to_string(++runs); });
  ASSERT_TRUE(first.has_value()) << first.error().message();
  EXPECT_FALSE(first.replayed());
  // The replica has not seen the record: the primary answers with it.
  auto second = guard.execute("k", "p", [&] { return "v" + std::to_string(++runs); });
  ASSERT_TRUE(second.has_value()) << second.error().message();
  EXPECT_TRUE(second.replayed());
  EXPECT_EQ(second.value(), "v1");
  EXPECT_EQ(one_value(replica_, "SELECT count(*) FROM " + prefix_ + "records"), "0");
  ReplicaCounters c = s->replica_counters();
  EXPECT_EQ(c.hits, 0u);
  EXPECT_EQ(c.fall_throughs, 2u);
  EXPECT_EQ(c.errors, 0u);

  resume_replay();
  caught_up();
  auto third = guard.execute("k", "p", [&] { return "v" + std::to_string(++runs); });
  ASSERT_TRUE(third.has_value()) << third.error().message();
  EXPECT_EQ(third.value(), "v1");
  EXPECT_EQ(runs, 1);
  c = s->replica_counters();
  EXPECT_EQ(c.hits, 1u);
  EXPECT_EQ(c.fall_throughs, 2u);
}

TEST_P(PostgresReplicaTest, InProgressAndExpiredRecordsAreLeftToThePrimary) {
  // In progress on the primary (lease mode: a committed row in state 0; transactional mode: an
  // open transaction, so the replica has no row at all).
  std::promise<void> release;
  std::promise<void> inside;
  // The ttl leaves room for the catch-up, a new store and its first read before the record
  // expires, on a loaded machine too.
  IdempotencyGuard writer{*writer_, Options{.scope = "pay", .ttl = milliseconds{4000}}};
  auto holder = std::async(std::launch::async, [&] {
    return writer.execute("held", "p", [&] {
      inside.set_value();
      release.get_future().wait();
      return 7;
    });
  });
  inside.get_future().wait();
  caught_up();
  auto s = store(primary_, replica_);
  IdempotencyGuard guard{*s, Options{.scope = "pay"}};
  auto busy = guard.execute("held", "p", [] { return 8; });
  ASSERT_FALSE(busy.has_value());
  EXPECT_EQ(busy.error(), errc::in_progress) << busy.message();
  EXPECT_EQ(s->replica_counters().fall_throughs, 1u);
  release.set_value();
  ASSERT_TRUE(holder.get().has_value());

  // Expired by the replica's clock: never replayed from it, even though the row is still there.
  caught_up();
  auto unreachable_primary = store(kUnreachable, replica_);
  IdempotencyGuard reader{*unreachable_primary, Options{.scope = "pay"}};
  auto live = reader.execute("held", "p", [] { return 9; });
  ASSERT_TRUE(live.has_value()) << live.message();
  EXPECT_EQ(live.value(), 7);
  std::this_thread::sleep_for(milliseconds{4100});
  auto expired = reader.execute("held", "p", [] { return 9; });
  ASSERT_FALSE(expired.has_value());
  EXPECT_EQ(expired.error(), errc::store_unavailable);  // it went on to the (unreachable) primary
  EXPECT_EQ(one_value(replica_, "SELECT count(*) FROM " + prefix_ + "records"), "1");
  const ReplicaCounters c = unreachable_primary->replica_counters();
  EXPECT_EQ(c.hits, 1u);
  EXPECT_EQ(c.fall_throughs, 1u);
}

TEST_P(PostgresReplicaTest, UnreachableReplicaFallsThroughAndCountsErrors) {
  completed("k", 1);

  // Every call tries the replica (retry_after zero): every call is an error and a fall-through.
  auto eager = store(primary_, kUnreachable, milliseconds{0});
  IdempotencyGuard guard{*eager, Options{.scope = "pay"}};
  int runs = 0;
  const auto start = Clock::now();
  for (int i = 0; i < 3; ++i) {
    auto out = guard.execute("k", "p", [&] { return ++runs; });
    ASSERT_TRUE(out.has_value()) << out.error().message();
    EXPECT_EQ(out.value(), 1);
  }
  auto fresh = guard.execute("fresh", "p", [&] { return ++runs; });
  ASSERT_TRUE(fresh.has_value()) << fresh.error().message();
  EXPECT_LT(Clock::now() - start, seconds{5});
  EXPECT_EQ(runs, 1);
  ReplicaCounters c = eager->replica_counters();
  EXPECT_EQ(c.hits, 0u);
  EXPECT_EQ(c.errors, 4u);
  EXPECT_EQ(c.fall_throughs, 4u);
  // stats() has the same counts, and the replica's pool that never opened a connection.
  const StoreStats stats = eager->stats();
  const ReplicaStats* replica = stats.parts.get<ReplicaStats>();
  ASSERT_NE(replica, nullptr);
  EXPECT_EQ(replica->hits, 0u);
  EXPECT_EQ(replica->errors, 4u);
  EXPECT_EQ(replica->fall_throughs, 4u);
  EXPECT_EQ(replica->pool.size, 8u);
  EXPECT_EQ(replica->pool.opened, 0u);
  EXPECT_EQ(replica->pool.in_use + replica->pool.idle, 0u);
  ASSERT_TRUE(stats.pool);  // the primary's, which answered every call
  EXPECT_GE(stats.pool->opened, 1u);
  EXPECT_EQ(stats.pool->timeouts, 0u);

  // After a failure the replica rests for retry_after: one error, then straight to the primary.
  auto resting = store(primary_, kUnreachable, std::chrono::hours{1});
  IdempotencyGuard patient{*resting, Options{.scope = "pay"}};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(patient.execute("k", "p", [&] { return ++runs; }));
  c = resting->replica_counters();
  EXPECT_EQ(c.errors, 1u);
  EXPECT_EQ(c.fall_throughs, 3u);
  EXPECT_EQ(runs, 1);
}

TEST_P(PostgresReplicaTest, ErroringReplicaFallsThrough) {
  completed("k", 1);
  // The replica's `postgres` database has none of the tables: every read fails there.
  std::string wrong_db = replica_.substr(0, replica_.rfind('/')) + "/postgres";
  auto s = store(primary_, wrong_db, milliseconds{0});
  IdempotencyGuard guard{*s, Options{.scope = "pay"}};
  int runs = 0;
  for (int i = 0; i < 2; ++i) {
    auto out = guard.execute("k", "p", [&] { return ++runs; });
    ASSERT_TRUE(out.has_value()) << out.error().message();
    EXPECT_TRUE(out.replayed());
  }
  EXPECT_EQ(runs, 0);
  const ReplicaCounters c = s->replica_counters();
  EXPECT_EQ(c.hits, 0u);
  EXPECT_EQ(c.errors, 2u);
  EXPECT_EQ(c.fall_throughs, 2u);
}

TEST_P(PostgresReplicaTest, LostReplicaConnectionsAreReplacedAndNeverRunAHandlerTwice) {
  completed("k", 1);
  auto s = store(primary_, replica_, milliseconds{0});
  IdempotencyGuard guard{*s, Options{.scope = "pay"}};
  int runs = 0;
  for (int round = 0; round < 3; ++round) {
    auto out = guard.execute("k", "p", [&] { return ++runs; });
    ASSERT_TRUE(out.has_value()) << out.error().message();
    EXPECT_EQ(out.value(), 1);
    // Cut the store's replica connections (everything but this one) from the server side, and
    // give the server a moment to close them.
    (void)one_value(replica_,
                    "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity WHERE "
                    "backend_type = 'client backend' AND pid <> pg_backend_pid()");
  }
  EXPECT_EQ(runs, 0);
  // A connection the server closed is seen before use and replaced: no error, every call a hit.
  const ReplicaCounters c = s->replica_counters();
  EXPECT_EQ(c.hits, 3u);
  EXPECT_EQ(c.errors, 0u);
}

TEST_P(PostgresReplicaTest, StoppedReplicaFallsThroughAndServesAgainOnceBack) {
  const std::string data = env_or_empty("IDEM_TEST_PG_REPLICA_DATA");
  ASSERT_FALSE(data.empty() || env_or_empty("IDEM_TEST_PG_BIN").empty())
      << "this test stops and starts the standby: it needs IDEM_TEST_PG_BIN and "
         "IDEM_TEST_PG_REPLICA_DATA/LOG/OPTS (scripts/lib/servers.sh exports them)";
  completed("k", 1);
  auto s = store(primary_, replica_, milliseconds{0});
  IdempotencyGuard guard{*s, Options{.scope = "pay"}};
  int runs = 0;
  auto replay = [&] {
    auto out = guard.execute("k", "p", [&] { return ++runs; });
    EXPECT_TRUE(out.has_value()) << out.message();
    EXPECT_TRUE(out.replayed());
  };
  replay();  // from the replica, on a pooled connection
  EXPECT_EQ(s->replica_counters().hits, 1u);

  ASSERT_EQ(pg_ctl(data, /*stop=*/true), 0);
  struct Restart {  // the standby comes back whatever happens below
    const std::string& data;
    ~Restart() {
      (void)pg_ctl(data, false, env_or_empty("IDEM_TEST_PG_REPLICA_LOG"),
                   env_or_empty("IDEM_TEST_PG_REPLICA_OPTS"));
    }
  } restart{data};
  const auto start = Clock::now();
  replay();  // the pooled connection is gone, a new one is refused: the primary replays
  replay();
  EXPECT_LT(Clock::now() - start, seconds{5});
  ReplicaCounters c = s->replica_counters();
  EXPECT_EQ(c.hits, 1u);
  EXPECT_EQ(c.errors, 2u);
  EXPECT_EQ(c.fall_throughs, 2u);

  ASSERT_EQ(pg_ctl(data, false, env_or_empty("IDEM_TEST_PG_REPLICA_LOG"),
                   env_or_empty("IDEM_TEST_PG_REPLICA_OPTS")),
            0);
  caught_up();
  replay();
  EXPECT_EQ(s->replica_counters().hits, 2u);
  EXPECT_EQ(runs, 0);
}

TEST_P(PostgresReplicaTest, StandbyGivenAsThePrimaryIsAReadOnlyErrorNotAHang) {
  auto s = store(replica_, "");
  const auto start = Clock::now();
  const Status schema = s->ensure_schema();
  ASSERT_FALSE(schema.ok());
  EXPECT_EQ(schema.error(), errc::store_unavailable);
  EXPECT_NE(schema.failure().describe().find("read-only"), std::string::npos)
      << schema.failure().describe();
  IdempotencyGuard guard{*s, Options{.scope = "pay"}};
  int runs = 0;
  auto out = guard.execute("k", "p", [&] { return ++runs; });
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error(), errc::store_unavailable);
  EXPECT_NE(out.message().find("read-only"), std::string::npos) << out.message();
  EXPECT_EQ(runs, 0);
  EXPECT_LT(Clock::now() - start, seconds{5});
}

TEST_P(PostgresReplicaTest, ProcessesAndThreadsRacingWithReplicaReadsRunEachKeyOnce) {
  if (mode() == SqlMode::transactional) {
    create_business_table(Target{Backend::postgres, primary_, prefix_});
  }
  constexpr int kProcesses = 4, kKeys = 12, kRounds = 3, kThreads = 3;
  const std::string scope = "race";
  // Two waves: the first races on fresh keys (the replica mostly lags behind it), the second,
  // once the replica caught up, replays.
  RaceTally tally;
  unsigned long long second_wave_hits = 0;
  for (int wave = 0; wave < 2; ++wave) {
    if (wave == 1) caught_up();
    std::vector<std::unique_ptr<Worker>> workers;
    for (int p = 0; p < kProcesses; ++p) {
      workers.push_back(std::make_unique<Worker>(std::vector<std::string>{
          "postgres", primary_, prefix_, name_of(mode()), "race", scope, std::to_string(kKeys),
          std::to_string(kRounds), std::to_string(kThreads), replica_}));
    }
    const unsigned long long hits_before = tally.replica_hits;
    for (auto& w : workers) tally.add(*w);
    if (wave == 1) second_wave_hits = tally.replica_hits - hits_before;
  }
  tally.expect_each_key_ran_once(
      kKeys, 2 * kProcesses * kRounds * kThreads, [&](const std::string& key) {
        if (mode() == SqlMode::transactional) {
          EXPECT_EQ(
              count_business_rows(Target{Backend::postgres, primary_, prefix_}, scope + "/" + key),
              1)
              << key;
        }
      });
  // Every call of the second wave found its settled record on the replica.
  EXPECT_EQ(second_wave_hits,
            static_cast<unsigned long long>(kProcesses * kRounds * kThreads * kKeys));
}

}  // namespace
}  // namespace idem::testing
