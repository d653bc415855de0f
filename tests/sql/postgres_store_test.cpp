// PostgresStore: bad input, sizes, purge, transactional mode, and processes racing on one database.

#include <thread>

#include "sql/sql_cases.hpp"
#include "support/fault_relay.hpp"

namespace idem::testing {

INSTANTIATE_TEST_SUITE_P(Postgres, SqlStoreTest,
                         ::testing::Values(Config{Backend::postgres, SqlMode::lease},
                                           Config{Backend::postgres, SqlMode::transactional}),
                         config_name);
INSTANTIATE_TEST_SUITE_P(Postgres, SqlTransactionalTest,
                         ::testing::Values(Config{Backend::postgres, SqlMode::transactional}),
                         config_name);
INSTANTIATE_TEST_SUITE_P(Postgres, SqlProcessTest,
                         ::testing::Values(Config{Backend::postgres, SqlMode::lease},
                                           Config{Backend::postgres, SqlMode::transactional}),
                         config_name);
INSTANTIATE_TEST_SUITE_P(Postgres, SqlFenceTest,
                         ::testing::Values(Config{Backend::postgres, SqlMode::lease},
                                           Config{Backend::postgres, SqlMode::transactional}),
                         config_name);

}  // namespace idem::testing

namespace idem::testing {
namespace {

// postgresql://user@host:port/db -> "host=... port=... user=... dbname=..."
std::string key_value_form(const std::string& uri) {
  const auto scheme = uri.find("://");
  std::string rest = uri.substr(scheme + 3);
  std::string user = "postgres";
  if (const auto at = rest.find('@'); at != std::string::npos) {
    user = rest.substr(0, at);
    rest = rest.substr(at + 1);
  }
  const auto slash = rest.find('/');
  const std::string hostport = rest.substr(0, slash);
  std::string db = slash == std::string::npos ? "postgres" : rest.substr(slash + 1);
  if (const auto q = db.find('?'); q != std::string::npos) db.resize(q);
  const auto colon = hostport.rfind(':');
  const std::string host = hostport.substr(0, colon);
  const std::string port = colon == std::string::npos ? "5432" : hostport.substr(colon + 1);
  return "host=" + host + " port=" + port + " user=" + user + " dbname=" + db;
}

TEST(PostgresStoreOptionsTest, KeyValueConnectionStringsWorkAndBadOptionsThrow) {
  EXPECT_THROW(PostgresStore(PostgresStoreOptions{.connection = {.uri = ""}}),
               std::invalid_argument);
  EXPECT_THROW(
      PostgresStore(PostgresStoreOptions{.connection = {.uri = "host=x"}, .pool = {.size = 0}}),
      std::invalid_argument);
  EXPECT_THROW(
      PostgresStore(PostgresStoreOptions{.connection = {.uri = "host=x", .table_prefix = "a b"}}),
      std::invalid_argument);
  // Every connect has a bound: no zero or negative connect_timeout, the replica's included.
  EXPECT_THROW(
      PostgresStore(PostgresStoreOptions{.connection = {.uri = "host=x", .connect_timeout = {}}}),
      std::invalid_argument);
  EXPECT_THROW(PostgresStore(PostgresStoreOptions{
                   .connection = {.uri = "host=x"},
                   .replica = {.uri = "host=y", .connect_timeout = std::chrono::seconds{-1}}}),
               std::invalid_argument);
  // A connection string libpq cannot read is a configuration error, refused here in libpq's
  // words (each connect would otherwise report an outage), and its password is not shown.
  for (const std::string bad : {"postgresql://app:hunter2@h/db?no_such_option=1",
                                "postgresql://app:hunter2@[::1/db", "host=x no_such_keyword=1"}) {
    for (const bool as_replica : {false, true}) {
      PostgresStoreOptions o{.connection = {.uri = as_replica ? "host=x" : bad}};
      if (as_replica) o.replica.uri = bad;
      try {
        PostgresStore store(o);
        ADD_FAILURE() << "accepted " << bad;
      } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(as_replica ? "replica.uri cannot be used: " : "uri cannot be used: "),
                  std::string::npos)
            << what;
        EXPECT_EQ(what.find("hunter2"), std::string::npos) << what;
      }
    }
  }
  const auto uri = pg_uri();
  if (!uri) GTEST_SKIP() << kNoPgMessage;
  PostgresStore store{PostgresStoreOptions{
      .connection = {.uri = key_value_form(*uri), .table_prefix = unique_name("kv") + "_"}}};
  IdempotencyGuard guard{store, Options{.scope = "kv"}};
  int runs = 0;
  for (int i = 0; i < 2; ++i) {
    auto out = guard.execute("k", [&] { return ++runs; });
    ASSERT_TRUE(out.has_value()) << out.error().message();
    EXPECT_EQ(out.value(), 1);
  }
  EXPECT_EQ(runs, 1);
}

// Every connection busy (here: the one connection holds a transactional handler that calls the
// store again) is store_unavailable after acquire_timeout, naming the pool; nothing runs, and the
// key is free once a connection is.
TEST(PostgresPoolTest, ExhaustedPoolIsStoreUnavailableAfterTheAcquireTimeout) {
  const char* uri = std::getenv("IDEM_TEST_PG_URI");
  if (uri == nullptr) GTEST_SKIP() << kNoPgMessage;
  PostgresStore store{
      PostgresStoreOptions{.connection = {.uri = uri, .table_prefix = unique_name("pool") + "_"},
                           .mode = SqlMode::transactional,
                           .pool = {.size = 1, .acquire_timeout = milliseconds{300}}}};
  IdempotencyGuard guard{store, Options{.scope = "pool"}};
  int inner_runs = 0;
  Outcome<int> inner = Outcome<int>::failed(make_failure(errc::in_progress));
  std::chrono::steady_clock::duration waited{};
  auto outer = guard.execute("a", [&] {
    const auto start = std::chrono::steady_clock::now();
    inner = guard.execute("b", [&] { return ++inner_runs; });
    waited = std::chrono::steady_clock::now() - start;
    return 1;
  });
  ASSERT_TRUE(outer.has_value()) << outer.message();
  EXPECT_EQ(inner.error(), errc::store_unavailable) << inner.message();
  EXPECT_NE(inner.message().find("pool"), std::string::npos) << inner.message();
  EXPECT_GE(waited, milliseconds{250});
  EXPECT_LT(waited, std::chrono::seconds{5});
  EXPECT_EQ(inner_runs, 0);
  auto later = guard.execute("b", [&] { return ++inner_runs; });
  ASSERT_TRUE(later.has_value()) << later.message();
  EXPECT_TRUE(later.executed());
}

// stats() after a known sequence: the one connection held by a transactional handler while N
// threads call the store; each of them queues once (waits), none gives up (timeouts), and all
// are then served in turn on that same connection (opened once). The replica part is absent.
TEST(PostgresPoolTest, StatsCountTheCallsThatWaitedForAConnection) {
  const char* uri = std::getenv("IDEM_TEST_PG_URI");
  if (uri == nullptr) GTEST_SKIP() << kNoPgMessage;
  PostgresStore store{
      PostgresStoreOptions{.connection = {.uri = uri, .table_prefix = unique_name("stats") + "_"},
                           .mode = SqlMode::transactional,
                           .pool = {.size = 1, .acquire_timeout = std::chrono::seconds{20}}}};
  IdempotencyGuard guard{store, Options{.scope = "stats"}};
  constexpr std::uint64_t kWaiters = 4;
  std::vector<std::thread> waiters;
  std::atomic<int> served{0};
  auto held = guard.execute("held", [&] {
    for (std::uint64_t i = 0; i < kWaiters; ++i) {
      waiters.emplace_back([&, i] {
        if (guard.execute("waiter-" + std::to_string(i), [] { return 1; })) ++served;
      });
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{10};
    while (store.stats().pool->waits < kWaiters && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds{1});
    }
    const PoolStats during = *store.stats().pool;
    EXPECT_EQ(during.in_use, 1u);  // the handler's transaction holds it
    EXPECT_EQ(during.idle, 0u);
    return 1;
  });
  for (std::thread& t : waiters) t.join();
  ASSERT_TRUE(held.has_value()) << held.message();
  EXPECT_EQ(served.load(), static_cast<int>(kWaiters));
  const StoreStats stats = store.stats();
  EXPECT_EQ(stats.store, "postgres");
  ASSERT_TRUE(stats.pool);
  EXPECT_EQ(stats.pool->size, 1u);
  EXPECT_EQ(stats.pool->waits, kWaiters);
  EXPECT_EQ(stats.pool->timeouts, 0u);
  EXPECT_EQ(stats.pool->opened, 1u);
  EXPECT_EQ(stats.pool->discarded, 0u);
  EXPECT_EQ(stats.pool->in_use, 0u);
  EXPECT_EQ(stats.pool->idle, 1u);
  EXPECT_TRUE(stats.parts.empty());  // no replica: no ReplicaStats
}

// A call waiting for a connection is served by one given back within its acquire_timeout. Here
// the one connection belongs to a thread that calls the store back to back, giving it back every
// few milliseconds and asking for it again at once. A pool that lets the caller who gives a
// connection back take it again before the sleeping waiter wakes can starve the waiter until its
// acquire_timeout (store_unavailable, "pool exhausted"); served in arrival order, the waiter gets
// it once the busy thread's current call gives it back.
TEST(PostgresPoolTest, AWaitingCallGetsAConnectionGivenBackBeforeItsAcquireTimeout) {
  const char* uri = std::getenv("IDEM_TEST_PG_URI");
  if (uri == nullptr) GTEST_SKIP() << kNoPgMessage;
  PostgresStore store{
      PostgresStoreOptions{.connection = {.uri = uri, .table_prefix = unique_name("turn") + "_"},
                           .pool = {.size = 1, .acquire_timeout = std::chrono::seconds{3}}}};
  ASSERT_TRUE(store.ensure_schema().ok());
  IdempotencyGuard guard{store, Options{.scope = "turn"}};
  std::atomic<bool> stop{false};
  std::atomic<int> busy_calls{0};
  std::atomic<int> busy_failures{0};
  std::thread busy([&] {
    for (int i = 0; !stop; ++i) {
      auto out = guard.execute("busy-" + std::to_string(i), [] { return 1; });
      if (!out.has_value()) ++busy_failures;
      ++busy_calls;
    }
  });
  while (busy_calls < 20) std::this_thread::sleep_for(milliseconds{1});
  const auto start = std::chrono::steady_clock::now();
  int runs = 0;
  auto waiter = guard.execute("waiter", [&] { return ++runs; });
  const auto waited = std::chrono::steady_clock::now() - start;
  stop = true;
  busy.join();
  ASSERT_TRUE(waiter.has_value()) << waiter.message();
  EXPECT_EQ(runs, 1);
  EXPECT_LT(waited, std::chrono::seconds{3});
  EXPECT_EQ(busy_failures.load(), 0);
}

// A claim that waits on a row another session keeps locked gives up at statement_timeout with
// store_unavailable: no call hangs on the server, nothing runs, and the record is intact. The
// record is held (a finished one would be answered as read, past the lock: the next test).
TEST(PostgresTimeoutTest, AClaimBlockedOnALockedRowIsStoreUnavailableAtTheStatementTimeout) {
  const char* uri = std::getenv("IDEM_TEST_PG_URI");
  if (uri == nullptr) GTEST_SKIP() << kNoPgMessage;
  const std::string prefix = unique_name("stmt") + "_";
  PostgresStore store{PostgresStoreOptions{
      .connection = {.uri = uri, .table_prefix = prefix, .statement_timeout = milliseconds{300}}}};
  const ClaimRequest request{.key = "k",
                             .fingerprint = {1, 2},
                             .lease = std::chrono::minutes{1},
                             .retention = std::chrono::hours{1}};
  Result<Claim> held = store.claim(request);
  ASSERT_TRUE(held.has_value() && held->status == ClaimStatus::acquired);
  pqxx::connection locker(uri);
  pqxx::work lock(locker);
  lock.exec("SELECT 1 FROM " + prefix + "records FOR UPDATE");
  const auto start = std::chrono::steady_clock::now();
  Result<Claim> out = store.claim(request);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error(), errc::store_unavailable) << out.failure().describe();
  EXPECT_NE(out.failure().describe().find("timeout"), std::string::npos)
      << out.failure().describe();
  EXPECT_GE(waited, milliseconds{250});
  EXPECT_LT(waited, std::chrono::seconds{5});
  lock.abort();
  Result<Claim> after = store.claim(request);
  ASSERT_TRUE(after.has_value()) << after.failure().describe();
  EXPECT_EQ(after->status, ClaimStatus::in_progress);
  ASSERT_TRUE(store
                  .commit(Ticket{"k", held->fence},
                          Completion{ClaimStatus::completed, "r", std::chrono::hours{1}})
                  .ok());
}

// A claim of a finished record is answered as the record is read, in the claim's statement:
// no row lock holds it up (an upsert would wait on one, as the test above shows) and it writes
// nothing, so a durable server flushes nothing for a replay. With after_wait or without.
TEST(PostgresTimeoutTest, AClaimOfAFinishedRecordReadsItPastALockedRow) {
  const char* uri = std::getenv("IDEM_TEST_PG_URI");
  if (uri == nullptr) GTEST_SKIP() << kNoPgMessage;
  const std::string prefix = unique_name("settled") + "_";
  PostgresStore store{PostgresStoreOptions{
      .connection = {.uri = uri, .table_prefix = prefix, .statement_timeout = milliseconds{300}}}};
  auto claim = [&](bool after_wait, Fingerprint fingerprint = {1, 2}) {
    return store.claim(ClaimRequest{.key = "k",
                                    .fingerprint = fingerprint,
                                    .lease = milliseconds{1000},
                                    .retention = std::chrono::hours{1},
                                    .after_wait = after_wait});
  };
  Result<Claim> held = claim(false);
  ASSERT_TRUE(held.has_value()) << held.failure().describe();
  ASSERT_TRUE(store
                  .commit(Ticket{"k", held->fence},
                          Completion{ClaimStatus::completed, "r", std::chrono::hours{1}})
                  .ok());
  pqxx::connection locker(uri);
  pqxx::work lock(locker);
  lock.exec("SELECT 1 FROM " + prefix + "records FOR UPDATE");
  for (const bool after_wait : {true, false}) {
    Result<Claim> read = claim(after_wait);
    ASSERT_TRUE(read.has_value()) << read.failure().describe();
    EXPECT_EQ(read->status, ClaimStatus::completed);
    EXPECT_EQ(read->result, "r");
    EXPECT_EQ(read->fence, held->fence);
  }
  Result<Claim> other = claim(false, Fingerprint{3, 4});
  ASSERT_TRUE(other.has_value()) << other.failure().describe();
  EXPECT_EQ(other->status, ClaimStatus::mismatch);
  lock.abort();
}

// The fenced UPDATE of a lease-mode commit reaches the server, which runs it; the connection is
// cut before its reply reaches the client. The guard's commit retry under the same fence finds
// the record committed under it: the value is recorded (not a takeover), the next call replays
// it, and the handler ran once.
TEST(PostgresLostReplyTest, ACommitWhoseReplyIsLostIsRecordedNotATakeover) {
  const auto uri = pg_uri();
  if (!uri) GTEST_SKIP() << kNoPgMessage;
  // Where the server is, as it says; the relay passes the same user and database on.
  pqxx::connection probe(*uri);
  const pqxx::result found = pqxx::nontransaction(probe).exec(
      "SELECT host(inet_server_addr()), inet_server_port(), current_user, current_database()");
  const auto where = found.at(0);
  if (where[0].is_null() || where[0].as<std::string>().find(':') != std::string::npos) {
    GTEST_SKIP() << "the relay speaks IPv4; the test server is not on it";
  }
  FaultRelay relay(where[0].as<std::string>(), where[1].as<int>());
  const std::string through_relay =
      "host=127.0.0.1 port=" + std::to_string(relay.port()) +
      " sslmode=disable gssencmode=disable user=" + where[2].as<std::string>() +
      " dbname=" + where[3].as<std::string>();
  PostgresStore store{PostgresStoreOptions{
      .connection = {.uri = through_relay, .table_prefix = unique_name("lost") + "_"},
      .mode = SqlMode::lease,
      .pool = {.size = 1}}};
  auto observer = std::make_shared<Observer>();
  IdempotencyGuard guard{store, Options{.scope = "lost",
                                        .observer = observer,
                                        .commit_retry = {.backoff = milliseconds{50}}}};
  // The finish's Bind message (the prepared statement's name; its Parse goes on its own).
  relay.lose_reply_after([](std::string_view chunk) {
    return !chunk.empty() && chunk[0] == 'B' && chunk.find("idem_finish") != std::string::npos;
  });
  int runs = 0;
  auto out = guard.execute("k", [&] { return 40 + ++runs; });
  ASSERT_TRUE(relay.one_shot_fired());
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_EQ(out.value(), 41);
  EXPECT_TRUE(out.recorded()) << out.commit_failure().describe();
  EXPECT_FALSE(out.commit_error());
  EXPECT_EQ(observer->counters().lease_lost, 0u);
  auto again = guard.execute("k", [&] { return 40 + ++runs; });
  ASSERT_TRUE(again.has_value()) << again.message();
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.value(), 41);
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace idem::testing

namespace idem::testing {
namespace {

// Tables made by an earlier release have no fence sequence: the first store that starts creates
// it (without touching the tables), and transactional claims draw their fences from it.
TEST(PostgresFenceSequenceTest, TablesWithoutTheSequenceGetItOnFirstUse) {
  const auto uri = pg_uri();
  if (!uri) GTEST_SKIP() << kNoPgMessage;
  const std::string prefix = unique_name("seq") + "_";
  {
    PostgresStore first{PostgresStoreOptions{.connection = {.uri = *uri, .table_prefix = prefix}}};
    ASSERT_TRUE(first.ensure_schema().ok());
  }
  {
    pqxx::connection c(*uri);
    pqxx::work w(c);
    w.exec("DROP SEQUENCE " + prefix + "fences");
    w.commit();
  }
  PostgresStore store{PostgresStoreOptions{.connection = {.uri = *uri, .table_prefix = prefix},
                                           .mode = SqlMode::transactional}};
  IdempotencyGuard guard{store, Options{.scope = "seq"}};
  Fence seen = 0;
  auto out = guard.execute("k", [&](Context& ctx) {
    seen = ctx.fence();
    return 1;
  });
  ASSERT_TRUE(out) << out.message();
  pqxx::connection c(*uri);
  pqxx::nontransaction n(c);
  EXPECT_EQ(n.exec("SELECT last_value FROM " + prefix + "fences")[0][0].as<long long>(),
            static_cast<long long>(seen));
}

}  // namespace
}  // namespace idem::testing
