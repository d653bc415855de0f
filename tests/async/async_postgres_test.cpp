// AsyncPostgresStore against the server in IDEM_TEST_PG_URI: the guard's cases through
// async_execute, the record-store conformance kit through the asynchronous calls, records shared
// with PostgresStore, exactly-once across connections of many coroutines, and a server stopped
// and started again mid-run (scripts/lib/servers.sh's IDEM_TEST_PG_BIN and IDEM_TEST_PG_DATA).

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/detached.hpp>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "async/async_guard_cases.hpp"
#include "idem/guard.hpp"
#include "idem/postgres/admin.hpp"
#include "idem/postgres/async_connection.hpp"
#include "idem/postgres/async_store.hpp"
#include "idem/postgres/store.hpp"
#include "idem/testing/async_store_conformance.hpp"
#include "sql/pg_relay.hpp"
#include "support/child_processes.hpp"

namespace idem::testing {

namespace {

const char* pg_test_uri() {
  const char* uri = std::getenv("IDEM_TEST_PG_URI");
  return uri != nullptr && *uri != '\0' ? uri : nullptr;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// A table prefix no other test or run uses.
std::string unique_tables(const char* stem) {
  static std::atomic<int> counter{0};
  return std::string("async_") + stem + "_" + std::to_string(::getpid()) + "_" +
         std::to_string(counter.fetch_add(1)) + "_" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 100000) + "_";
}

AsyncPostgresStoreOptions async_pg_options(std::string prefix) {
  return AsyncPostgresStoreOptions{.connection = {.uri = pg_test_uri(),
                                                  .table_prefix = std::move(prefix),
                                                  .connect_timeout = 5s,
                                                  .statement_timeout = 5s}};
}

constexpr const char* kNoPg = "IDEM_TEST_PG_URI is not set; scripts/test starts a PostgreSQL";

// `uri` with one more query parameter, after those it has (the TLS settings, over TLS).
std::string with_parameter(const std::string& uri, const std::string& parameter) {
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + parameter;
}

}  // namespace

// The cell of the guard's cases and of the conformance kit
// (idem/testing/async_store_conformance.hpp).
struct AsyncPostgresCell {
  using Store = AsyncPostgresStore;
  static constexpr std::chrono::milliseconds lease{500};
  // Connected, with its tables made, before a guard case starts: the first call's connect and
  // CREATE TABLE can take longer than the few milliseconds after which the cancellation cases
  // cancel a call they mean to catch in its handler or its commit.
  static constexpr bool warm_up = true;
  static std::optional<AsyncPostgresStoreOptions> options() {
    if (pg_test_uri() == nullptr) {
      [] { GTEST_SKIP() << kNoPg; }();
      return std::nullopt;
    }
    return async_pg_options(unique_tables("conf"));
  }
  static std::unique_ptr<admin::Admin> admin(const AsyncPostgresStoreOptions& o) {
    return admin::postgres_admin(
        {.connection = {.uri = pg_test_uri(), .table_prefix = o.connection.table_prefix}});
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, AsyncGuardCases, CellBackend<AsyncPostgresCell>);

}  // namespace idem::testing

IDEM_ASYNC_STORE_CONFORMANCE(AsyncPostgres, idem::testing::AsyncPostgresCell);

namespace idem::testing {

// PostgresStore (lease mode) and AsyncPostgresStore with one table prefix serve the same
// records, both ways.
TEST(AsyncPostgres, SharesItsRecordsWithPostgresStore) {
  if (pg_test_uri() == nullptr) GTEST_SKIP() << kNoPg;
  const std::string prefix = unique_tables("shared");
  PostgresStore blocking(
      PostgresStoreOptions{.connection = {.uri = pg_test_uri(), .table_prefix = prefix}});
  IoRunner runner;
  AsyncPostgresStore async(runner.io().get_executor(), async_pg_options(prefix));
  EXPECT_EQ(runs_over_shared_records(blocking, async, runner), 2);
  EXPECT_EQ(async.connections_opened(), 1u);
}

// A database an earlier release made (schema version 1: the records and fences, no steps), one
// of version 2 (no waiters column or wake triggers) and one with every table but its version row
// still at 1: the asynchronous store upgrades each as PostgresStore does, rather than refusing
// them, and then serves claims.
TEST(AsyncPostgres, UpgradesAnEarlierSchemaVersionAsPostgresStoreDoes) {
  if (pg_test_uri() == nullptr) GTEST_SKIP() << kNoPg;
  const auto version_of = [](const std::string& prefix) {
    pqxx::connection c(pg_test_uri());
    pqxx::work w(c);
    return w.exec("SELECT version FROM " + prefix + "schema")[0][0].as<int>();
  };
  const auto exec = [](const std::string& sql) {
    pqxx::connection c(pg_test_uri());
    pqxx::work w(c);
    w.exec(sql);
    w.commit();
  };
  const std::string v1 = unique_tables("v1");
  exec("CREATE TABLE " + v1 +
       "schema (version bigint NOT NULL, fence_floor bigint NOT NULL "
       "DEFAULT 0); CREATE TABLE " +
       v1 +
       "records (key bytea PRIMARY KEY, state smallint NOT "
       "NULL, fp_hi bigint NOT NULL, fp_lo bigint NOT NULL, fence bigint NOT NULL, took_over "
       "smallint NOT NULL DEFAULT 0, lease_until bigint NOT NULL, expires_at bigint NOT NULL, "
       "result bytea); CREATE INDEX " +
       v1 + "records_expires_at ON " + v1 +
       "records "
       "(expires_at); CREATE SEQUENCE " +
       v1 + "fences AS bigint CACHE 1; INSERT INTO " + v1 + "schema (version) VALUES (1)");
  const std::string marked = unique_tables("marked");
  {
    PostgresStore made(
        PostgresStoreOptions{.connection = {.uri = pg_test_uri(), .table_prefix = marked}});
    ASSERT_TRUE(made.ensure_schema().ok());
  }
  exec("UPDATE " + marked + "schema SET version = 1");
  const std::string v2 = unique_tables("v2");
  {
    PostgresStore made(
        PostgresStoreOptions{.connection = {.uri = pg_test_uri(), .table_prefix = v2}});
    ASSERT_TRUE(made.ensure_schema().ok());
  }
  exec("DROP TRIGGER " + v2 + "records_wake ON " + v2 + "records; DROP TRIGGER " + v2 +
       "records_wake_gone ON " + v2 + "records; DROP FUNCTION " + v2 +
       "records_wake(); ALTER TABLE " + v2 + "records DROP COLUMN waiters; UPDATE " + v2 +
       "schema SET version = 2");

  for (const std::string& prefix : {v1, v2, marked}) {
    SCOPED_TRACE(prefix);
    IoRunner runner;
    AsyncPostgresStore store(runner.io().get_executor(), async_pg_options(prefix));
    const ClaimRequest request{.key = "k", .fingerprint = {1, 2}, .lease = 10s, .retention = 60s};
    const Result<Claim> claimed = runner.run(store.async_claim(request));
    ASSERT_TRUE(claimed) << claimed.failure().describe();
    EXPECT_EQ(claimed->status, ClaimStatus::acquired);
    EXPECT_EQ(version_of(prefix), 3);
    const auto columns = [&] {
      pqxx::connection c(pg_test_uri());
      pqxx::work w(c);
      return w
          .exec(
              "SELECT count(*) FROM pg_attribute WHERE attname = 'waiters' AND attrelid = "
              "to_regclass('" +
              prefix + "records')")[0][0]
          .as<int>();
    };
    EXPECT_EQ(columns(), 1);
  }
}

// AsyncConnection, a service's own statements on the store's kind of connection: text
// parameters in, text cells out (NULL as nullopt), the rows a write changed, and the server's
// error for a bad statement, after which the connection still serves (each statement is a
// transaction of its own).
TEST(AsyncPostgresConnection, RunsStatementsWithParametersAndAnswersTheServersError) {
  if (pg_test_uri() == nullptr) GTEST_SKIP() << kNoPg;
  IoRunner runner;
  postgres::AsyncConnection db(runner.io().get_executor(), {.uri = pg_test_uri()});
  const std::string table = unique_tables("rows") + "t";
  auto query = [&](std::string sql, std::vector<std::string> params = {}) {
    return runner.run(db.query(std::move(sql), std::move(params)));
  };
  ASSERT_TRUE(query("CREATE TABLE " + table + " (id TEXT, n BIGINT, note TEXT)"));
  auto inserted = query("INSERT INTO " + table + " VALUES ($1, $2, NULL), ($3, $4, 'x')",
                        {"a", "41", "b", "42"});
  ASSERT_TRUE(inserted) << inserted.failure().describe();
  EXPECT_EQ(inserted->affected, 2u);
  auto bad = query("INSERT INTO " + table + " VALUES ($1, $2)", {"c", "not a number"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.failure().message.find("not a number"), std::string::npos)
      << bad.failure().describe();
  auto found = query("SELECT id, n, note FROM " + table + " WHERE n > $1 ORDER BY id", {"0"});
  ASSERT_TRUE(found) << found.failure().describe();
  ASSERT_EQ(found->rows.size(), 2u);
  EXPECT_EQ(found->rows[0], (std::vector<std::optional<std::string>>{"a", "41", std::nullopt}));
  EXPECT_EQ(found->rows[1], (std::vector<std::optional<std::string>>{"b", "42", "x"}));
  EXPECT_TRUE(query("DROP TABLE " + table));
}

// Refused at construction: no uri, an unreadable one. Unreachable: store_unavailable within the
// connect timeout.
TEST(AsyncPostgresConnection, BadOptionsAreRefusedAndAnUnreachableServerIsUnavailable) {
  IoRunner runner;
  EXPECT_THROW(postgres::AsyncConnection(runner.io().get_executor(), {}), std::invalid_argument);
  EXPECT_THROW(postgres::AsyncConnection(runner.io().get_executor(), {.uri = "host=x nope=1"}),
               std::invalid_argument);
  postgres::AsyncConnection db(
      runner.io().get_executor(),
      {.uri = "postgresql://postgres@127.0.0.1:1/none", .connect_timeout = 1s});
  const auto start = std::chrono::steady_clock::now();
  auto r = runner.run(db.query("SELECT 1"));
  EXPECT_EQ(r.error(), errc::store_unavailable) << r.failure().describe();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

// An unreachable server: calls answer store_unavailable within the connect timeout, and the
// next ones at once during the backoff.
TEST(AsyncPostgres, UnreachableServerIsUnavailablePromptly) {
  IoRunner runner;
  AsyncPostgresStore store(
      runner.io().get_executor(),
      AsyncPostgresStoreOptions{
          .connection = {.uri = "postgresql://postgres@127.0.0.1:1/none", .connect_timeout = 1s},
          .reconnect_backoff = 10s});
  AsyncGuard guard{store, Options{.scope = "down"}};
  for (int i = 0; i < 2; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto out = runner.run(guard.async_execute("k", [] { return 1; }));
    EXPECT_EQ(out.error(), errc::store_unavailable) << out.message();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  }
  EXPECT_EQ(store.connections_opened(), 1u) << "the second call did not wait for the backoff";
}

// A connection string libpq cannot read is refused at construction, in libpq's words, with its
// password not shown: no connect would ever succeed, and each call would report an outage.
TEST(AsyncPostgresOptions, AnUnreadableUriIsRefusedAtConstruction) {
  for (const std::string bad :
       {"postgresql://app:hunter2@h/db?no_such_option=1", "host=x no_such_keyword=1"}) {
    IoRunner runner;
    try {
      AsyncPostgresStore store(runner.io().get_executor(),
                               AsyncPostgresStoreOptions{.connection = {.uri = bad}});
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("uri cannot be used: "), std::string::npos) << what;
      EXPECT_EQ(what.find("hunter2"), std::string::npos) << what;
    }
  }
}

// A server that takes the connection and never answers it (the relay holds): the connect gives
// up within connect_timeout, also when the connection string says connect_timeout=0, libpq's
// "wait forever": the store keeps its own bound. A connect_timeout of zero is refused.
TEST(AsyncPostgres, AConnectNobodyAnswersGivesUpWithinTheConnectTimeout) {
  if (pg_test_uri() == nullptr) GTEST_SKIP() << kNoPg;
  EXPECT_THROW(AsyncPostgresStore(IoRunner().io().get_executor(),
                                  AsyncPostgresStoreOptions{
                                      .connection = {.uri = "host=x", .connect_timeout = {}}}),
               std::invalid_argument);
  auto through = pg_relay(pg_test_uri());
  if (!through) GTEST_SKIP() << "the relay speaks IPv4; the test server is not on it";
  through->relay->hold();
  for (const std::string extra : {"", " connect_timeout=0"}) {
    IoRunner runner;
    AsyncPostgresStore store(
        runner.io().get_executor(),
        AsyncPostgresStoreOptions{.connection = {.uri = through->uri + extra,
                                                 .table_prefix = unique_tables("held"),
                                                 .connect_timeout = 1s}});
    AsyncGuard guard{store, Options{.scope = "held"}};
    const auto start = std::chrono::steady_clock::now();
    auto out = runner.run(guard.async_execute("k", [] { return 1; }));
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(out.error(), errc::store_unavailable) << out.message();
    EXPECT_NE(out.message().find("connecting took more than"), std::string::npos) << out.message();
    EXPECT_LT(took, 3s) << extra;
  }
}

// Several stores (one connection each), each on its own io_context thread with many coroutines,
// meet on every key: each key's handler runs once, and every caller gets that run's value.
TEST(AsyncPostgres, EachKeyRunsOnceAcrossConnectionsOfManyCoroutines) {
  if (pg_test_uri() == nullptr) GTEST_SKIP() << kNoPg;
  constexpr int kStores = 3;
  constexpr int kCoroutines = 16;
  constexpr int kKeys = 12;
  const std::string prefix = unique_tables("race");
  std::mutex mutex;
  std::map<std::string, int> runs;
  std::map<std::string, std::set<std::string>> answers;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int s = 0; s < kStores; ++s) {
    threads.emplace_back([&, s] {
      IoRunner runner;
      // Each store's coroutines run on its own thread: two stores are told so (no strand,
      // replies resume their callers in place), the other goes through its strand.
      AsyncPostgresStoreOptions o = async_pg_options(prefix);
      o.single_threaded = s != 1;
      AsyncPostgresStore store(runner.io().get_executor(), o);
      AsyncGuard guard{store, Options{.scope = "race", .in_progress = Wait{.timeout = 20s}}};
      call_every_key(
          runner, guard, kCoroutines, kKeys, s,
          [&](const std::string& k, int c) -> net::awaitable<std::string> {
            {
              std::lock_guard lock(mutex);
              ++runs[k];
            }
            co_await pause(2ms);
            co_return "made by " + std::to_string(s) + "/" + std::to_string(c);
          },
          [&](const std::string& k, const Outcome<std::string>& out) {
            if (!out) {
              ADD_FAILURE() << "key " << k << ": " << out.message();
              ++failures;
              return;
            }
            std::lock_guard lock(mutex);
            answers[k].insert(out.value());
          });
      // Every coroutine's calls went through one connection.
      EXPECT_EQ(store.connections_opened(), 1u);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (int i = 0; i < kKeys; ++i) {
    const std::string k = std::to_string(i);
    EXPECT_EQ(runs[k], 1) << "key " << k;
    EXPECT_EQ(answers[k].size(), 1u) << "key " << k << ": callers got different values";
  }
}

// Several processes, each with one store (one connection) and many coroutines on one thread,
// meet on every key: each key's handler runs once in all of them (counted in a table), and
// every caller gets that run's value.
TEST(AsyncPostgres, EachKeyRunsOnceAcrossProcessesOfManyCoroutines) {
  if (pg_test_uri() == nullptr) GTEST_SKIP() << kNoPg;
  constexpr int kProcesses = 3;
  constexpr int kCoroutines = 16;
  constexpr int kKeys = 10;
  const std::string prefix = unique_tables("procs");
  const std::string runs = prefix + "runs";
  const std::string seen = prefix + "seen";
  {
    pqxx::connection c(pg_test_uri());
    pqxx::nontransaction q(c);
    q.exec("CREATE TABLE " + runs + " (key text NOT NULL)");
    q.exec("CREATE TABLE " + seen + " (key text NOT NULL, answer text NOT NULL)");
  }
  expect_children_pass(kProcesses, [&](int p) {
    int failures = 0;
    pqxx::connection counter(pg_test_uri());
    IoRunner runner;
    // Each child runs its coroutines on one thread: no strand.
    AsyncPostgresStoreOptions o = async_pg_options(prefix);
    o.single_threaded = true;
    AsyncPostgresStore store(runner.io().get_executor(), o);
    AsyncGuard guard{store, Options{.scope = "procs", .in_progress = Wait{.timeout = 20s}}};
    // The counting statements block the loop's thread briefly: test bookkeeping only.
    auto record = [&](const std::string& sql) {
      pqxx::nontransaction q(counter);
      q.exec(sql);
    };
    call_every_key(
        runner, guard, kCoroutines, kKeys, p,
        [&](const std::string& k, int c) -> net::awaitable<std::string> {
          record("INSERT INTO " + runs + " VALUES ('" + k + "')");
          co_await pause(2ms);
          co_return std::to_string(p) + "/" + std::to_string(c);
        },
        [&](const std::string& k, const Outcome<std::string>& out) {
          if (!out) {
            ++failures;
            return;
          }
          record("INSERT INTO " + seen + " VALUES ('" + k + "', '" + out.value() + "')");
        });
    return failures;
  });
  pqxx::connection c(pg_test_uri());
  pqxx::nontransaction q(c);
  const pqxx::result ran = q.exec("SELECT key, count(*) FROM " + runs + " GROUP BY key");
  EXPECT_EQ(ran.size(), static_cast<std::size_t>(kKeys));
  for (const auto& row : ran) EXPECT_EQ(row[1].as<int>(), 1) << "key " << row[0].c_str();
  const pqxx::result answers =
      q.exec("SELECT key, count(*), count(DISTINCT answer) FROM " + seen + " GROUP BY key");
  EXPECT_EQ(answers.size(), static_cast<std::size_t>(kKeys));
  for (const auto& row : answers) {
    EXPECT_EQ(row[1].as<int>(), kProcesses * kCoroutines) << "key " << row[0].c_str();
    EXPECT_EQ(row[2].as<int>(), 1) << "key " << row[0].c_str() << ": callers got other values";
  }
}

// The server process of the connection named `app`, stopped (SIGSTOP) until this ends
// (SIGCONT); pid 0 when it was not found or could not be stopped.
struct StoppedBackend {
  pid_t pid = 0;
  StoppedBackend() = default;
  StoppedBackend(const StoppedBackend&) = delete;
  StoppedBackend& operator=(const StoppedBackend&) = delete;
  ~StoppedBackend() {
    if (pid > 0) ::kill(pid, SIGCONT);
  }
};

std::unique_ptr<StoppedBackend> stop_backend(const std::string& app) {
  auto stopped = std::make_unique<StoppedBackend>();
  pqxx::connection admin(pg_test_uri());
  pqxx::nontransaction q(admin);
  const pqxx::result found =
      q.exec("SELECT pid FROM pg_stat_activity WHERE application_name = " + q.quote(app));
  if (found.size() == 1 && ::kill(found[0][0].as<int>(), SIGSTOP) == 0) {
    stopped->pid = found[0][0].as<int>();
  }
  return stopped;
}

// After `request` committed `result`: its replay answers `result` byte for byte, and `fresh`
// new keys are still claimed on the store's one connection.
void expect_replayed_then_claims_go_on(IoRunner& runner, AsyncPostgresStore& store,
                                       const ClaimRequest& request, const std::string& result,
                                       int fresh) {
  const Result<Claim> replay = runner.run(store.async_claim(request));
  ASSERT_TRUE(replay) << replay.failure().describe();
  EXPECT_EQ(replay->status, ClaimStatus::completed);
  EXPECT_TRUE(replay->result == result) << "the replayed result differs";
  for (int i = 0; i < fresh; ++i) {
    const std::string key = "after-" + std::to_string(i);
    const ClaimRequest next{
        .key = key, .fingerprint = request.fingerprint, .lease = 10s, .retention = 60s};
    const Result<Claim> after = runner.run(store.async_claim(next));
    ASSERT_TRUE(after && after->status == ClaimStatus::acquired) << key;
  }
  EXPECT_EQ(store.connections_opened(), 1u);
}

// A result of 8 MiB, sent from where the caller holds it and read back from the server's hex
// text: the commit lands, a claim replays it byte for byte, and the calls after it on the same
// connection still work.
TEST(AsyncPostgres, AnEightMiBResultIsCommittedAndReplayedByteForByte) {
  if (pg_test_uri() == nullptr) GTEST_SKIP() << kNoPg;
  IoRunner runner;
  AsyncPostgresStore store(runner.io().get_executor(), async_pg_options(unique_tables("large")));
  std::string large(8 << 20, '\0');
  for (std::size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 131 % 251);
  const Fingerprint fp{3, 4};
  const ClaimRequest request{.key = "large", .fingerprint = fp, .lease = 10s, .retention = 60s};
  const Result<Claim> claimed = runner.run(store.async_claim(request));
  ASSERT_TRUE(claimed && claimed->status == ClaimStatus::acquired);
  const Ticket ticket{"large", claimed->fence};
  const Completion completion{ClaimStatus::completed, large, 60s};
  const Status committed = runner.run(store.async_commit(ticket, completion));
  ASSERT_TRUE(committed) << committed.failure().describe();
  expect_replayed_then_claims_go_on(runner, store, request, large, 3);
}

// A commit sent while the server process does not read (SIGSTOP, shorter than the reply
// timeout): 32 MiB fill the socket's buffers, so the connection waits until it can send the
// rest. Once the server reads again the commit lands and replays byte for byte, and the calls
// after it on the same connection still work.
TEST(AsyncPostgres, ACommitThatMustWaitToBeSentLandsOnceTheServerReads) {
  if (pg_test_uri() == nullptr) GTEST_SKIP() << kNoPg;
  const std::string app = "idem_async_send_" + std::to_string(::getpid());
  AsyncPostgresStoreOptions o = async_pg_options(unique_tables("send"));
  o.connection.uri = with_parameter(pg_test_uri(), "application_name=" + app);
  IoRunner runner;
  AsyncPostgresStore store(runner.io().get_executor(), o);
  const Fingerprint fp{5, 6};
  const ClaimRequest request{.key = "big", .fingerprint = fp, .lease = 30s, .retention = 60s};
  const Result<Claim> claimed = runner.run(store.async_claim(request));
  ASSERT_TRUE(claimed && claimed->status == ClaimStatus::acquired);
  std::string big(32 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);
  const Ticket ticket{"big", claimed->fence};
  const Completion completion{ClaimStatus::completed, big, 60s};

  const std::unique_ptr<StoppedBackend> stopped = stop_backend(app);
  ASSERT_GT(stopped->pid, 0) << "cannot find or stop the server process of " << app;
  const pid_t backend = stopped->pid;
  std::optional<Status> committed;
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> {
        committed.emplace(co_await store.async_commit(ticket, completion));
      },
      net::detached);
  const auto stalled_until = std::chrono::steady_clock::now() + 300ms;
  runner.run_until([&] { return std::chrono::steady_clock::now() > stalled_until; });
  EXPECT_FALSE(committed.has_value()) << "answered while the server was stopped";
  ::kill(backend, SIGCONT);
  runner.run_until([&] { return committed.has_value(); });
  ASSERT_TRUE(*committed) << committed->failure().describe();

  expect_replayed_then_claims_go_on(runner, store, request, big, 20);
}

// A single_threaded store resumes each caller in place as its reply is read, one after
// another. Here every caller's completion throws (its co_spawn handler does): the exceptions
// leave io_context::run_one (Asio may gather those of one read into multiple_exceptions), and
// every caller still gets its answer and its completion, none lost with the read that threw.
TEST(AsyncPostgres, SingleThreadedCallersWhoseCompletionThrowsStillGetEveryAnswer) {
  if (pg_test_uri() == nullptr) GTEST_SKIP() << kNoPg;
  constexpr int kCallers = 8;
  AsyncPostgresStoreOptions o = async_pg_options(unique_tables("throw"));
  o.single_threaded = true;
  net::io_context io;
  AsyncPostgresStore store(io.get_executor(), o);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  bool connected = false;
  net::co_spawn(
      io,
      [&]() -> net::awaitable<void> {
        const ClaimRequest warm{.key = "warm-up", .lease = 1s};
        const Result<Claim> claimed = co_await store.async_claim(warm);
        EXPECT_TRUE(claimed) << claimed.failure().describe();
        connected = true;
      },
      net::detached);
  while (!connected && std::chrono::steady_clock::now() < deadline) io.run_one_for(50ms);
  ASSERT_TRUE(connected);

  int answered = 0;
  int completed = 0;
  int thrown = 0;
  for (int c = 0; c < kCallers; ++c) {
    net::co_spawn(
        io,
        [&, c]() -> net::awaitable<void> {
          const std::string key = "caller-" + std::to_string(c);
          const ClaimRequest request{
              .key = key, .fingerprint = {1, 2}, .lease = 10s, .retention = 60s};
          const Result<Claim> claimed = co_await store.async_claim(request);
          if (claimed && claimed->status == ClaimStatus::acquired) ++answered;
        },
        [&](const std::exception_ptr&) {
          ++completed;
          throw std::runtime_error("the caller's completion");
        });
  }
  auto step = [&](auto run) {
    try {
      run();
    } catch (const std::exception&) {
      ++thrown;
    }
  };
  step([&] { io.poll(); });            // the callers start and send their claims
  std::this_thread::sleep_for(200ms);  // their replies arrive, to be read together
  while (completed < kCallers && std::chrono::steady_clock::now() < deadline) {
    step([&] { io.run_one_for(50ms); });
  }
  step([&] { io.poll(); });  // an exception gathered with the last completion
  EXPECT_EQ(answered, kCallers);
  EXPECT_EQ(completed, kCallers);
  EXPECT_GE(thrown, 1);
}

// The server process of the store's connection stops answering (SIGSTOP): a claim and a commit
// in flight on it fail within the reply timeout, the claim with store_unavailable, the commit
// with outcome_unknown; once the server answers again, the commit's retry under the same fence
// succeeds on a new connection (whether or not the first try landed).
TEST(AsyncPostgres, SilentServerFailsCallsInFlightWithinTheReplyTimeout) {
  if (pg_test_uri() == nullptr) GTEST_SKIP() << kNoPg;
  const std::string app = "idem_async_stall_" + std::to_string(::getpid());
  AsyncPostgresStoreOptions o = async_pg_options(unique_tables("stall"));
  o.connection.uri = with_parameter(pg_test_uri(), "application_name=" + app);
  o.connection.statement_timeout = 300ms;
  o.reconnect_backoff = 10ms;
  IoRunner runner;
  AsyncPostgresStore store(runner.io().get_executor(), o);
  const Fingerprint fp{1, 2};
  const ClaimRequest held{"held", fp, 10s, 60s};
  Result<Claim> claimed = runner.run(store.async_claim(held));
  ASSERT_TRUE(claimed && claimed->status == ClaimStatus::acquired);
  const Ticket ticket{"held", claimed->fence};
  const Completion completion{ClaimStatus::completed, "result", 60s};

  const std::unique_ptr<StoppedBackend> stopped = stop_backend(app);
  ASSERT_GT(stopped->pid, 0) << "cannot find or stop the server process of " << app;
  const pid_t backend = stopped->pid;

  const auto start = std::chrono::steady_clock::now();
  std::optional<Result<Claim>> other;
  std::optional<Status> committed;
  const ClaimRequest fresh{"fresh", fp, 10s, 60s};
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> { other.emplace(co_await store.async_claim(fresh)); },
      net::detached);
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> {
        committed.emplace(co_await store.async_commit(ticket, completion));
      },
      net::detached);
  runner.run_until([&] { return other.has_value() && committed.has_value(); });
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(other->has_value());
  EXPECT_EQ(other->error(), errc::store_unavailable) << other->failure().describe();
  EXPECT_EQ(committed->error(), errc::outcome_unknown) << committed->failure().describe();
  EXPECT_LT(took, 5s) << "the calls waited past the reply timeout";
  ::kill(backend, SIGCONT);

  std::optional<Status> retried;
  for (int i = 0; i < 100 && !(retried && retried->ok()); ++i) {
    retried = runner.run(store.async_commit(ticket, completion));
    if (!retried->ok()) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(retried->ok()) << retried->failure().describe();
  EXPECT_GE(store.connections_opened(), 2u);
  Result<Claim> replay = runner.run(store.async_claim(held));
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay->status, ClaimStatus::completed);
  EXPECT_EQ(replay->result, "result");
}

// Stops (fast) or starts the throwaway server of scripts/lib/servers.sh; pg_ctl's exit status.
int pg_ctl(bool stop) {
  std::string cmd;
  if (const std::string user = env_or_empty("IDEM_TEST_PG_USER"); !user.empty()) {
    cmd = "runuser -u '" + user + "' -- ";
  }
  cmd += "'" + env_or_empty("IDEM_TEST_PG_BIN") + "/pg_ctl' -D '" +
         env_or_empty("IDEM_TEST_PG_DATA") + "' -w -t 30 ";
  cmd += stop ? std::string("-m fast stop")
              : "-l '" + env_or_empty("IDEM_TEST_PG_LOG") + "' -o '" +
                    env_or_empty("IDEM_TEST_PG_OPTS") + "' start";
  return std::system((cmd + " >/dev/null 2>&1").c_str());
}

// pg_ctl(stop) on a thread of its own, since it blocks, while `runner` runs the coroutines.
int pg_ctl_while_running(IoRunner& runner, bool stop) {
  std::atomic<bool> done{false};
  int rc = -1;
  std::thread ctl([&] {
    rc = pg_ctl(stop);
    done = true;
  });
  runner.run_until([&] { return done.load(); });
  ctl.join();
  return rc;
}

// Coroutines call keys without pause while the server stops and starts again: calls while it is
// down answer store_unavailable promptly, calls after it is back succeed on a new connection,
// and no key's handler runs twice (commits cut off by the stop are retried until they land).
TEST(AsyncPostgresRestart, StopMidRunIsUnavailableThenRecoversAndNothingRunsTwice) {
  if (pg_test_uri() == nullptr) GTEST_SKIP() << kNoPg;
  ASSERT_FALSE(env_or_empty("IDEM_TEST_PG_BIN").empty() ||
               env_or_empty("IDEM_TEST_PG_DATA").empty())
      << "this test restarts the server and needs the variables scripts/lib/servers.sh exports";
  AsyncPostgresStoreOptions o = async_pg_options(unique_tables("restart"));
  o.connection.connect_timeout = 1s;
  o.connection.statement_timeout = 1s;
  o.reconnect_backoff = 20ms;
  o.max_reconnect_backoff = 100ms;
  IoRunner runner;
  AsyncPostgresStore store(runner.io().get_executor(), o);
  OutageRun run;
  run.start(runner, store, 15s, 200);
  runner.run_until([&] { return run.runs.size() >= OutageRun::kKeys / 4; });
  EXPECT_EQ(pg_ctl_while_running(runner, /*stop=*/true), 0) << "pg_ctl stop failed";
  run.down = true;
  const auto back_at = std::chrono::steady_clock::now() + 400ms;
  runner.run_until([&] { return std::chrono::steady_clock::now() >= back_at; });
  const int start_rc = pg_ctl_while_running(runner, /*stop=*/false);
  run.down = false;
  ASSERT_EQ(start_rc, 0) << "pg_ctl start failed";
  runner.run_until([&] { return run.finished == OutageRun::kCoroutines; });
  run.expect_refused_promptly_and_nothing_ran_twice(3s);
  EXPECT_GE(store.connections_opened(), 2u);
}

}  // namespace idem::testing
