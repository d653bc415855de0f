#pragma once
// Test cases shared by the SQLite and PostgreSQL store tests (sqlite_store_test.cpp and
// postgres_store_test.cpp instantiate them for their backend): bad input, sizes, purge,
// transactional mode, and races between real processes.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <barrier>
#include <future>
#include <map>
#include <ostream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "sql/sql_test_support.hpp"
#include "support/child_process.hpp"
#include "support/fence_ledger.hpp"

namespace idem::testing {

using std::chrono::milliseconds;
using namespace std::string_literals;

struct Config {
  Backend backend;
  SqlMode mode;
};

// How ctest lists the parameter ("# GetParam() = sqlite/lease"), instead of its raw bytes.
inline void PrintTo(const Config& c, std::ostream* os) {
  *os << name_of(c.backend) << "/" << name_of(c.mode);
}

inline std::string config_name(const ::testing::TestParamInfo<Config>& info) {
  return std::string(name_of(info.param.backend)) + "_" + name_of(info.param.mode);
}

class SqlStoreTest : public ::testing::TestWithParam<Config> {
 protected:
  void SetUp() override {
    target_.backend = GetParam().backend;
    target_.prefix = unique_name("t") + "_";
    if (target_.backend == Backend::sqlite) {
      target_.location = db_.path();
    } else {
      const auto uri = pg_uri();
      if (!uri) GTEST_SKIP() << kNoPgMessage;
      target_.location = *uri;
    }
    store_ = make_store(target_, GetParam().mode);
    const Status ready = store_->ensure_schema();
    ASSERT_TRUE(ready.ok()) << "database unreachable: " << ready.failure().describe();
  }

  SqlStore& store() { return *store_; }
  SqlMode mode() const { return GetParam().mode; }
  const Target& target() const { return target_; }

  TempDb db_;
  Target target_;
  std::unique_ptr<SqlStore> store_;
};

// ---- bad input and sizes ------------------------------------------------------------------------

TEST_P(SqlStoreTest, KeysWithQuotesSemicolonsPercentNulAndBinaryAreDistinctAndExact) {
  std::string binary(256, '\0');
  for (int i = 0; i < 256; ++i) binary[static_cast<std::size_t>(i)] = static_cast<char>(255 - i);
  const std::vector<std::string> keys = {
      "it's", "\"quoted\"", "a;b; DROP TABLE x;--", "100%", "_%", "a\0b"s, "a\0c"s, "\0"s,
      binary, "\\x00"};
  IdempotencyGuard guard{store(), Options{.scope = "bad.input"}};
  int runs = 0;
  for (const std::string& k : keys) {
    auto out = guard.execute(k, [&] {
      ++runs;
      return "result of " + k;
    });
    ASSERT_TRUE(out.has_value()) << out.error().message();
    EXPECT_FALSE(out.replayed());
  }
  for (const std::string& k : keys) {
    auto out = guard.execute(k, [&] {
      ++runs;
      return "again"s;
    });
    ASSERT_TRUE(out.has_value()) << out.error().message();
    EXPECT_TRUE(out.replayed());
    EXPECT_EQ(out.value(), "result of " + k);
  }
  EXPECT_EQ(runs, static_cast<int>(keys.size()));
}

TEST_P(SqlStoreTest, EmptyAndOneMebibyteResultsReplayExactly) {
  IdempotencyGuard guard{store(), Options{.scope = "sizes"}};
  std::string big(std::size_t{1} << 20, '\0');
  std::mt19937 rng(42);
  for (char& c : big) c = static_cast<char>(rng());
  for (const std::string& value : {std::string(), big}) {
    const std::string key = "size-" + std::to_string(value.size());
    auto first = guard.execute(key, [&] { return value; });
    ASSERT_TRUE(first.has_value()) << first.error().message();
    EXPECT_TRUE(first.recorded());
    auto replay = guard.execute(key, [&] { return "ran again"s; });
    ASSERT_TRUE(replay.has_value()) << replay.error().message();
    EXPECT_TRUE(replay.replayed());
    EXPECT_EQ(replay.value().size(), value.size());
    EXPECT_TRUE(replay.value() == value);
  }
}

TEST_P(SqlStoreTest, PurgeExpiredRemovesOnlyExpiredRecords) {
  auto claim = [&](const std::string& k, milliseconds retention) {
    Result<Claim> c = store().claim(ClaimRequest{k, {1, 1}, milliseconds{200}, retention});
    EXPECT_TRUE(c.has_value() && c->status == ClaimStatus::acquired);
    return c.has_value() ? c->fence : Fence{0};
  };
  auto commit = [&](const std::string& k, Fence f, milliseconds ttl) {
    EXPECT_TRUE(store().commit(Ticket{k, f}, Completion{ClaimStatus::completed, "r", ttl}).ok());
  };
  for (int i = 0; i < 3; ++i)
    commit("short-" + std::to_string(i), claim("short-" + std::to_string(i), milliseconds{200}),
           milliseconds{200});
  for (int i = 0; i < 2; ++i)
    commit("long-" + std::to_string(i), claim("long-" + std::to_string(i), milliseconds{200}),
           std::chrono::hours{1});
  // In progress under a live retention. (In transactional mode a held key keeps its transaction
  // open, which on SQLite blocks every other writer, purge included: lease mode only.)
  const bool lease = mode() == SqlMode::lease;
  const Fence held = lease ? claim("held", std::chrono::hours{1}) : 0;
  std::this_thread::sleep_for(milliseconds{500});

  Result<std::size_t> one = store().purge_expired(1);
  ASSERT_TRUE(one.has_value()) << one.failure().describe();
  EXPECT_EQ(one.value(), 1u);
  Result<std::size_t> rest = store().purge_expired(100);
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(rest.value(), 2u);
  EXPECT_EQ(store().purge_expired(100).value(), 0u);

  for (int i = 0; i < 2; ++i) {
    Result<Claim> c = store().claim(ClaimRequest{
        "long-" + std::to_string(i), {1, 1}, milliseconds{200}, std::chrono::hours{1}});
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->status, ClaimStatus::completed);
  }
  if (lease) {
    // The held record survived, fence and all: its holder can still commit.
    commit("held", held, std::chrono::hours{1});
    EXPECT_EQ(count_records(target()), 3);
  } else {
    EXPECT_EQ(count_records(target()), 2);
  }
}

TEST_P(SqlStoreTest, FencesKeepGrowingAfterPurge) {
  const milliseconds short_ttl{200};
  auto claim = [&](const std::string& k, milliseconds retention) {
    Result<Claim> c = store().claim(ClaimRequest{k, {1, 1}, milliseconds{100}, retention});
    EXPECT_TRUE(c.has_value() && c->status == ClaimStatus::acquired);
    return c.has_value() ? c->fence : Fence{0};
  };
  Fence done = 0;
  for (int i = 0; i < 3; ++i) {  // a few claims, so that the fence is well above 1
    done = claim("done", short_ttl);
    ASSERT_TRUE(store().abort(Ticket{"done", done}).ok());
  }
  done = claim("done", short_ttl);
  ASSERT_TRUE(store()
                  .commit(Ticket{"done", done}, Completion{ClaimStatus::completed, "r", short_ttl})
                  .ok());
  const bool lease = mode() == SqlMode::lease;
  // Lease mode: a holder that stalls past its lease and retention; its record gets purged.
  const Fence stalled = lease ? claim("stalled", short_ttl) : 0;
  std::this_thread::sleep_for(milliseconds{450});
  Result<std::size_t> purged = store().purge_expired(100);
  ASSERT_TRUE(purged.has_value()) << purged.failure().describe();
  EXPECT_EQ(purged.value(), lease ? 2u : 1u);

  const Fence again = claim("done", short_ttl);
  EXPECT_GT(again, done);
  ASSERT_TRUE(store().abort(Ticket{"done", again}).ok());
  if (lease) {
    const Fence fresh = claim("stalled", std::chrono::hours{1});
    EXPECT_GT(fresh, stalled);
    EXPECT_EQ(store()
                  .commit(Ticket{"stalled", stalled},
                          Completion{ClaimStatus::completed, "late", std::chrono::hours{1}})
                  .error(),
              errc::lease_lost);
  }
}

TEST_P(SqlStoreTest, SchemaIsVersionedAndSharedByStoresWithThePrefix) {
  auto again = make_store(target(), mode());
  ASSERT_TRUE(again->ensure_schema().ok());
  const std::string sql = "SELECT max(version) FROM " + target().prefix + "schema";
  long long version = 0;
  if (target().backend == Backend::sqlite) {
    SQLite::Database db(target().location, SQLite::OPEN_READONLY);
    version = db.execAndGet(sql).getInt64();
  } else {
    pqxx::connection c(target().location);
    pqxx::nontransaction n(c);
    version = n.exec(sql)[0][0].as<long long>();
  }
  EXPECT_EQ(version, target().backend == Backend::sqlite ? 2 : 3);  // PostgreSQL: waiters column
  EXPECT_THROW(make_store(Target{target().backend, target().location, "bad;prefix"}, mode()),
               std::invalid_argument);
}

TEST_P(SqlStoreTest, ForeignRowsAndSchemaVersionsAreRefusedNotMisread) {
  const Claim held =
      store().claim(ClaimRequest{"odd", {1, 1}, milliseconds{500}, std::chrono::hours{1}}).value();
  ASSERT_EQ(held.status, ClaimStatus::acquired);
  ASSERT_TRUE(store()
                  .commit(Ticket{"odd", held.fence},
                          Completion{ClaimStatus::completed, "r", std::chrono::hours{1}})
                  .ok());
  exec_directly(target(), "UPDATE " + target().prefix + "records SET state = 9");
  Result<Claim> odd =
      store().claim(ClaimRequest{"odd", {1, 1}, milliseconds{500}, std::chrono::hours{1}});
  ASSERT_FALSE(odd.has_value());
  EXPECT_EQ(odd.error(), errc::record_corrupt);

  exec_directly(target(), "UPDATE " + target().prefix + "schema SET version = 9");
  auto newer = make_store(target(), mode());
  const Status refused = newer->ensure_schema();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error(), errc::store_unavailable);
  EXPECT_NE(refused.failure().message.find("version 9"), std::string::npos)
      << refused.failure().message;
}

TEST_P(SqlStoreTest, UnreachableDatabaseIsStoreUnavailableNotAnException) {
  Target nowhere = target();
  if (nowhere.backend == Backend::sqlite) {
    nowhere.location = "/nonexistent-dir-for-idem/sub/idem.db";
  } else {
    nowhere.location = "postgresql://postgres@127.0.0.1:1/idem_test";  // port 1: refused
  }
  auto store = make_store(nowhere, mode());
  IdempotencyGuard guard{*store, Options{.scope = "down"}};
  int runs = 0;
  const auto start = std::chrono::steady_clock::now();
  auto out = guard.execute("k", [&] { return ++runs; });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds{10});
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error(), errc::store_unavailable);
  EXPECT_EQ(runs, 0);
  EXPECT_EQ(store->purge_expired().error(), errc::store_unavailable);
}

TEST_P(SqlStoreTest, TwentyThreadsOnEightConnectionsRunEachKeyOnce) {
  // More threads than the PostgreSQL pool has connections: they queue for one.
  IdempotencyGuard guard{
      store(), Options{.scope = "many", .in_progress = Wait{.timeout = std::chrono::seconds{20}}}};
  std::map<int, std::atomic<int>> runs;
  for (int k = 0; k < 6; ++k) runs[k] = 0;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 20; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 6; ++i) {
        const int k = (i + t) % 6;
        auto out = guard.execute("k" + std::to_string(k), [&] { return ++runs[k]; });
        if (!out || out.value() != 1) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (auto& [k, n] : runs) EXPECT_EQ(n.load(), 1) << "key " << k;
}

// ---- transactional mode -------------------------------------------------------------------------

class SqlTransactionalTest : public SqlStoreTest {
 protected:
  void SetUp() override {
    SqlStoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    create_business_table(target());
  }
};

TEST_P(SqlTransactionalTest, HandlerWritesCommitWithTheRecordExactlyOnce) {
  IdempotencyGuard guard{store(), Options{.scope = "orders"}};
  int runs = 0;
  for (int i = 0; i < 3; ++i) {
    auto out = guard.execute("order-1", [&](Context& ctx) {
      ++runs;
      insert_business_row(target(), ctx, "order-1", "placed");
      return std::string("receipt-1");
    });
    ASSERT_TRUE(out.has_value()) << out.error().message();
    EXPECT_EQ(out.value(), "receipt-1");
    EXPECT_EQ(out.replayed(), i > 0);
  }
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(count_business_rows(target(), "order-1"), 1);
}

TEST_P(SqlTransactionalTest, ExceptionLeavesNeitherTheBusinessRowNorTheRecord) {
  IdempotencyGuard guard{store(), Options{.scope = "orders"}};
  EXPECT_THROW((void)guard.execute("order-2",
                                   [&](Context& ctx) -> std::string {
                                     insert_business_row(target(), ctx, "order-2", "doomed");
                                     throw std::runtime_error("payment declined");
                                   }),
               std::runtime_error);
  EXPECT_EQ(count_business_rows(target(), "order-2"), 0);
  EXPECT_EQ(count_records(target()), 0);

  int runs = 0;
  auto retry = guard.execute("order-2", [&](Context& ctx) {
    ++runs;
    insert_business_row(target(), ctx, "order-2", "placed");
    return std::string("receipt-2");
  });
  ASSERT_TRUE(retry.has_value()) << retry.error().message();
  EXPECT_FALSE(retry.replayed());
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(count_business_rows(target(), "order-2"), 1);
  EXPECT_EQ(count_records(target()), 1);
}

TEST_P(SqlTransactionalTest, ARememberedFailureCommitsWithoutTheHandlersWrites) {
  IdempotencyGuard guard{store(), Options{.scope = "orders", .remember_failures = true}};
  int runs = 0;
  auto doomed = [&](Context& ctx) -> std::string {
    ++runs;
    insert_business_row(target(), ctx, "order-3", "doomed");
    throw std::runtime_error("payment declined");
  };
  EXPECT_THROW((void)guard.execute("order-3", doomed), std::runtime_error);
  EXPECT_EQ(count_business_rows(target(), "order-3"), 0);  // rolled back to the savepoint
  EXPECT_EQ(count_records(target()), 1);                   // the failure, committed alone

  auto repeat = guard.execute("order-3", doomed);
  ASSERT_FALSE(repeat.has_value());
  EXPECT_EQ(repeat.error(), errc::handler_failed);
  EXPECT_TRUE(repeat.replayed());
  EXPECT_NE(repeat.message().find("payment declined"), std::string::npos) << repeat.message();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(count_business_rows(target(), "order-3"), 0);

  // A handler whose own statement failed leaves the transaction aborted (PostgreSQL); the
  // rewind still undoes it and the failure still commits.
  EXPECT_THROW((void)guard.execute("order-4",
                                   [&](Context& ctx) -> std::string {
                                     insert_business_row(target(), ctx, "order-4", "first");
                                     run_failing_statement(target(), ctx);
                                     return std::string("unreachable");
                                   }),
               std::exception);
  EXPECT_EQ(count_business_rows(target(), "order-4"), 0);
  EXPECT_EQ(guard.execute("order-4", [] { return std::string("again"); }).error(),
            errc::handler_failed);
}

TEST_P(SqlTransactionalTest, DuplicateFailsFastOrWaitsOnTheHolderAndReplays) {
  IdempotencyGuard holder_guard{store(), Options{.scope = "orders"}};
  IdempotencyGuard fail_fast{store(), Options{.scope = "orders"}};
  IdempotencyGuard waiter{
      store(),
      Options{.scope = "orders", .in_progress = Wait{.timeout = std::chrono::seconds{10}}}};
  std::promise<void> inside;
  std::promise<void> finish;
  std::shared_future<void> finish_future = finish.get_future().share();
  std::atomic<int> runs{0};
  auto holder = std::async(std::launch::async, [&] {
    return holder_guard.execute("order-3", [&](Context& ctx) {
      ++runs;
      insert_business_row(target(), ctx, "order-3", "placed");
      inside.set_value();
      finish_future.wait();
      return std::string("receipt-3");
    });
  });
  inside.get_future().wait();

  const auto start = std::chrono::steady_clock::now();
  auto refused = fail_fast.execute("order-3", [&] {
    ++runs;
    return std::string("second");
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds{2});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error(), errc::in_progress);

  auto waiting = std::async(std::launch::async, [&] {
    return waiter.execute("order-3", [&] {
      ++runs;
      return std::string("third");
    });
  });
  std::this_thread::sleep_for(milliseconds{300});  // the waiter blocks on the holder meanwhile
  finish.set_value();
  auto held = holder.get();
  auto waited = waiting.get();
  ASSERT_TRUE(held.has_value()) << held.error().message();
  ASSERT_TRUE(waited.has_value()) << waited.error().message();
  EXPECT_TRUE(waited.replayed());
  EXPECT_EQ(waited.value(), "receipt-3");
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(count_business_rows(target(), "order-3"), 1);
}

// Many commits fail (more than any fixed list of them would hold), then each is retried: every
// retry hears how its own commit failed, never lease_lost, and nothing was recorded. A trigger
// the claim's transaction creates makes its finish fail; it rolls back with the transaction.
TEST_P(SqlTransactionalTest, RetriesAfterManyFailedCommitsAreNotLeaseLost) {
  constexpr int kFailures = 100;
  const std::string records = target().prefix + "records";
  auto break_the_finish = [&](const NativeTransaction& transaction) {
    if (target().backend == Backend::sqlite) {
      sqlite_transaction(transaction)
          .exec("CREATE TEMP TRIGGER " + target().prefix + "outage BEFORE UPDATE ON " + records +
                " BEGIN SELECT RAISE(ABORT, 'injected outage'); END");
    } else {
      pqxx::dbtransaction& tx = pg_transaction(transaction);
      tx.exec("CREATE FUNCTION " + target().prefix +
              "outage() RETURNS trigger LANGUAGE plpgsql AS "
              "$$BEGIN RAISE EXCEPTION 'injected outage'; END$$");
      tx.exec("CREATE TRIGGER " + target().prefix + "outage BEFORE UPDATE ON " + records +
              " FOR EACH ROW EXECUTE FUNCTION " + target().prefix + "outage()");
    }
  };
  const Completion done{ClaimStatus::completed, "r", std::chrono::hours{1}};
  std::vector<std::pair<std::string, Fence>> failed;
  for (int i = 0; i < kFailures; ++i) {
    const std::string key = "outage-" + std::to_string(i);
    Result<Claim> held =
        store().claim(ClaimRequest{key, {1, 2}, std::chrono::seconds{30}, std::chrono::hours{1}});
    ASSERT_TRUE(held.has_value()) << held.failure().describe();
    ASSERT_EQ(held->status, ClaimStatus::acquired);
    ASSERT_TRUE(held->transaction);
    break_the_finish(held->transaction);
    const Status commit = store().commit(Ticket{key, held->fence}, done);
    ASSERT_EQ(commit.error(), errc::store_unavailable) << key;
    failed.emplace_back(key, held->fence);
  }
  for (const auto& [key, fence] : failed) {
    const Status retry = store().commit(Ticket{key, fence}, done);
    EXPECT_EQ(retry.error(), errc::store_unavailable) << key << ": " << retry.failure().describe();
    EXPECT_NE(retry.failure().message.find("did not commit"), std::string::npos)
        << retry.failure().message;
  }
  EXPECT_EQ(count_records(target()), 0);
}

// ---- processes ----------------------------------------------------------------------------------

#ifndef IDEM_SQL_WORKER
#error "IDEM_SQL_WORKER must name the idem_sql_worker binary"
#endif

/// An idem_sql_worker process (support/child_process.hpp).
class Worker : public ChildProcess {
 public:
  explicit Worker(std::vector<std::string> args) : ChildProcess(IDEM_SQL_WORKER, std::move(args)) {}
};

/// What racing workers printed: the handler runs and the answers per key, and the replica hits.
/// An "err" line fails the test.
struct RaceTally {
  std::map<std::string, int> ran;
  std::map<std::string, std::vector<std::string>> got;
  int errors = 0;
  unsigned long long replica_hits = 0;

  /// No worker printed an error; `keys` keys ran, each once, and each of its `calls` calls got
  /// that run's value; then `check(key)` for each.
  template <class Check>
  void expect_each_key_ran_once(int keys, int calls, Check check) {
    EXPECT_EQ(errors, 0);
    ASSERT_EQ(ran.size(), static_cast<std::size_t>(keys));
    for (const auto& [key, n] : ran) {
      EXPECT_EQ(n, 1) << key;
      ASSERT_EQ(got[key].size(), static_cast<std::size_t>(calls)) << key;
      for (const std::string& v : got[key]) EXPECT_EQ(v, got[key].front()) << key;
      check(key);
    }
  }

  /// Reads the worker to its end and expects a clean exit.
  void add(Worker& worker) {
    for (const std::string& line : worker.finish(std::chrono::seconds{60})) {
      std::istringstream in(line);
      std::string what, key, value;
      in >> what >> key >> value;
      if (what == "ran") ++ran[key];
      if (what == "got") got[key].push_back(value);
      if (what == "replica") replica_hits += std::stoull(value);
      if (what == "err") {
        ++errors;
        ADD_FAILURE() << line;
      }
    }
    EXPECT_TRUE(WIFEXITED(worker.exit_status()) && WEXITSTATUS(worker.exit_status()) == 0);
  }
};

class SqlProcessTest : public SqlStoreTest {
 protected:
  std::vector<std::string> base_args() const {
    return {name_of(target().backend), target().location, target().prefix, name_of(mode())};
  }
};

TEST_P(SqlProcessTest, FourProcessesRacingRunEachKeyExactlyOnce) {
  if (mode() == SqlMode::transactional) create_business_table(target());
  constexpr int kProcesses = 4, kKeys = 12, kRounds = 2, kThreads = 2;
  const std::string scope = "race";
  std::vector<std::unique_ptr<Worker>> workers;
  for (int p = 0; p < kProcesses; ++p) {
    auto args = base_args();
    for (const std::string& a : {"race"s, scope, std::to_string(kKeys), std::to_string(kRounds),
                                 std::to_string(kThreads)}) {
      args.push_back(a);
    }
    workers.push_back(std::make_unique<Worker>(args));
  }
  RaceTally tally;
  for (auto& w : workers) tally.add(*w);
  tally.expect_each_key_ran_once(
      kKeys, kProcesses * kRounds * kThreads, [&](const std::string& key) {
        if (mode() == SqlMode::transactional) {
          EXPECT_EQ(count_business_rows(target(), scope + "/" + key), 1) << key;
        }
      });
}

TEST_P(SqlProcessTest, KilledHolderIsTakenOverAfterItsLeaseOrRolledBack) {
  if (mode() == SqlMode::lease) {
    // A holder SIGKILLed mid-lease: after the lease another process takes over, and the dead
    // holder's late commit (its fence, presented by us) changes nothing.
    auto args = base_args();
    for (const std::string& a : {"hold"s, "victim"s, "1500"s}) args.push_back(a);
    Worker w(args);
    const std::string line = w.read_until("fence ", std::chrono::seconds{20});
    ASSERT_FALSE(line.empty()) << "worker did not claim";
    const Fence dead = std::stoull(line.substr(6));
    w.kill9();
    Result<Claim> early =
        store().claim(ClaimRequest{"victim", {1, 2}, milliseconds{1500}, std::chrono::hours{1}});
    ASSERT_TRUE(early.has_value());
    EXPECT_EQ(early->status, ClaimStatus::in_progress);
    std::this_thread::sleep_for(milliseconds{1600});
    Result<Claim> takeover =
        store().claim(ClaimRequest{"victim", {1, 2}, milliseconds{1500}, std::chrono::hours{1}});
    ASSERT_TRUE(takeover.has_value()) << takeover.failure().describe();
    ASSERT_EQ(takeover->status, ClaimStatus::acquired);
    EXPECT_TRUE(takeover->took_over);
    EXPECT_EQ(takeover->fence, dead + 1);
    EXPECT_EQ(store()
                  .commit(Ticket{"victim", dead},
                          Completion{ClaimStatus::completed, "late", std::chrono::hours{1}})
                  .error(),
              errc::lease_lost);
    ASSERT_TRUE(store()
                    .commit(Ticket{"victim", takeover->fence},
                            Completion{ClaimStatus::completed, "new", std::chrono::hours{1}})
                    .ok());
    EXPECT_EQ(store()
                  .claim(ClaimRequest{"victim", {1, 2}, milliseconds{1500}, std::chrono::hours{1}})
                  ->result,
              "new");
    return;
  }
  // Transactional: a holder SIGKILLed mid-handler leaves neither its business row nor the record;
  // a retry runs once.
  create_business_table(target());
  auto args = base_args();
  for (const std::string& a : {"hold-tx"s, "orders"s, "order-9"s}) args.push_back(a);
  Worker w(args);
  ASSERT_FALSE(w.read_until("inside", std::chrono::seconds{20}).empty()) << "worker never ran";
  w.kill9();
  EXPECT_EQ(count_business_rows(target(), "order-9"), 0);
  EXPECT_EQ(count_records(target()), 0);
  IdempotencyGuard guard{
      store(),
      Options{.scope = "orders", .in_progress = Wait{.timeout = std::chrono::seconds{10}}}};
  int runs = 0;
  auto out = guard.execute("order-9", [&](Context& ctx) {
    ++runs;
    insert_business_row(target(), ctx, "order-9", "placed");
    return std::string("receipt-9");
  });
  ASSERT_TRUE(out.has_value()) << out.error().message();
  EXPECT_FALSE(out.replayed());
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(count_business_rows(target(), "order-9"), 1);
}

// ---- fences across processes --------------------------------------------------------------------
// Each handler appends its fence to a ledger file outside the store (a downstream system), after
// a write in the claim's transaction that rolls back when it throws: the fences a key's holders
// see must grow in the order they held it, whatever process they ran in and however the earlier
// ones ended.

class SqlFenceTest : public SqlProcessTest {
 protected:
  void SetUp() override {
    SqlProcessTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (mode() == SqlMode::transactional) create_business_table(target());
  }
  std::string ledger() const { return db_.path() + ".ledger"; }
  std::vector<std::string> command(std::initializer_list<std::string> rest) const {
    auto args = base_args();
    args.insert(args.end(), rest);
    return args;
  }
};

TEST_P(SqlFenceTest, ProcessesTakingTurnsWhoseHandlersThrowSeeGrowingFences) {
  std::vector<Fence> seen;
  for (int turn = 0; turn < 4; ++turn) {
    const bool last = turn == 3;
    Worker w(command({"fence-turn", "fences", "k-turns", ledger(), last ? "commit" : "throw"}));
    const std::vector<std::string> lines = w.finish(std::chrono::seconds{60});
    ASSERT_TRUE(WIFEXITED(w.exit_status()) && WEXITSTATUS(w.exit_status()) == 0);
    ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
    ASSERT_EQ(lines[0].rfind("fence ", 0), 0u) << lines[0];
    seen.push_back(std::stoull(lines[0].substr(6)));
    EXPECT_EQ(lines[1], last ? "done" : "threw");
  }
  EXPECT_TRUE(strictly_growing(seen)) << ::testing::PrintToString(seen);
  EXPECT_EQ(ledger_entries(ledger()), seen);
  if (mode() == SqlMode::transactional) {
    EXPECT_EQ(count_business_rows(target(), "fenced"), 1);  // the thrown runs' rows rolled back
  }
}

TEST_P(SqlFenceTest, ProcessesRacingOnOneKeyNeverShareAFenceAndLaterHoldersGetLargerOnes) {
  constexpr int kProcesses = 4, kRounds = 6;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int p = 0; p < kProcesses; ++p) {
    workers.push_back(std::make_unique<Worker>(
        command({"fence-race", "fences", "k-race", std::to_string(kRounds), ledger()})));
  }
  for (auto& w : workers) {
    for (const std::string& line : w->finish(std::chrono::seconds{120})) ADD_FAILURE() << line;
    EXPECT_TRUE(WIFEXITED(w->exit_status()) && WEXITSTATUS(w->exit_status()) == 0);
  }
  const std::vector<std::uint64_t> fences = ledger_entries(ledger());
  EXPECT_EQ(fences.size(), static_cast<std::size_t>(kProcesses * kRounds));
  EXPECT_TRUE(strictly_growing(fences)) << ::testing::PrintToString(fences);
}

TEST_P(SqlFenceTest, AHolderKilledMidHandlerIsFollowedByALargerFence) {
  Worker holder(command({"hold-fence", "fences", "k-kill", "1000", ledger()}));
  const std::string line = holder.read_until("inside ", std::chrono::seconds{20});
  ASSERT_FALSE(line.empty()) << "worker never ran its handler";
  const Fence dead = std::stoull(line.substr(7));
  holder.kill9();
  // The next holder, in another process: after the rollback (transactional mode) or the lease.
  Worker next(command({"fence-turn", "fences", "k-kill", ledger(), "commit"}));
  const std::vector<std::string> lines = next.finish(std::chrono::seconds{60});
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  ASSERT_EQ(lines[0].rfind("fence ", 0), 0u) << lines[0];
  EXPECT_GT(std::stoull(lines[0].substr(6)), dead);
  EXPECT_EQ(lines[1], "done");
  EXPECT_TRUE(strictly_growing(ledger_entries(ledger())));
}

}  // namespace idem::testing
