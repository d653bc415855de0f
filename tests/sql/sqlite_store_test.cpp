// SqliteStore: bad input, sizes, purge, transactional mode, and processes racing on one file.

#include <thread>

#include "sql/sql_cases.hpp"

namespace idem::testing {

INSTANTIATE_TEST_SUITE_P(Sqlite, SqlStoreTest,
                         ::testing::Values(Config{Backend::sqlite, SqlMode::lease},
                                           Config{Backend::sqlite, SqlMode::transactional}),
                         config_name);
INSTANTIATE_TEST_SUITE_P(Sqlite, SqlTransactionalTest,
                         ::testing::Values(Config{Backend::sqlite, SqlMode::transactional}),
                         config_name);
INSTANTIATE_TEST_SUITE_P(Sqlite, SqlProcessTest,
                         ::testing::Values(Config{Backend::sqlite, SqlMode::lease},
                                           Config{Backend::sqlite, SqlMode::transactional}),
                         config_name);
INSTANTIATE_TEST_SUITE_P(Sqlite, SqlFenceTest,
                         ::testing::Values(Config{Backend::sqlite, SqlMode::lease},
                                           Config{Backend::sqlite, SqlMode::transactional}),
                         config_name);

}  // namespace idem::testing

namespace idem::testing {
namespace {

TEST(SqliteStoreOptionsTest, BadOptionsThrowAndTransactionAccessorRefusesLeaseMode) {
  EXPECT_THROW(SqliteStore(SqliteStoreOptions{.path = ""}), std::invalid_argument);
  EXPECT_THROW(SqliteStore(SqliteStoreOptions{.path = "x.db", .table_prefix = "1abc"}),
               std::invalid_argument);
  TempDb db;
  SqliteStore store{SqliteStoreOptions{.path = db.path()}};  // lease mode: no transaction
  IdempotencyGuard guard{store, Options{.scope = "accessor"}};
  // A programming error, not an outage a retry could get past: std::logic_error, and the key is
  // released so that the fixed code can run it.
  EXPECT_THROW(
      (void)guard.execute("k", [&](Context& ctx) { return &sqlite_transaction(ctx) != nullptr; }),
      std::logic_error);
  auto after = guard.execute("k", [] { return 1; });
  ASSERT_TRUE(after) << after.message();
  EXPECT_TRUE(after.executed());
}

}  // namespace
}  // namespace idem::testing

namespace idem::testing {
namespace {

// SQLite has one writer per file: an open transactional claim holds it, so a claim of another
// key waits up to busy_timeout and then answers store_unavailable (the file is busy; nobody holds
// that key, so never in_progress); a duplicate of the held key answers in_progress; after the
// holder commits the other key runs.
TEST(SqliteTransactionalTest, AnOpenHandlerHoldsTheFileForOtherKeysUpToBusyTimeout) {
  TempDb db;
  SqliteStore store{SqliteStoreOptions{.path = db.path(),
                                       .mode = SqlMode::transactional,
                                       .busy_timeout = std::chrono::milliseconds{300}}};
  IdempotencyGuard guard{store, Options{.scope = "one-writer"}};
  std::promise<void> inside, finish;
  std::shared_future<void> finish_future = finish.get_future().share();
  auto holder = std::async(std::launch::async, [&] {
    return guard.execute("a", [&] {
      inside.set_value();
      finish_future.wait();
      return 1;
    });
  });
  inside.get_future().wait();
  const auto start = std::chrono::steady_clock::now();
  auto other = guard.execute("b", [] { return 2; });
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(other.has_value());
  EXPECT_EQ(other.error(), errc::store_unavailable) << other.message();
  EXPECT_GE(waited, std::chrono::milliseconds{250});
  EXPECT_LT(waited, std::chrono::seconds{3});
  auto duplicate = guard.execute("a", [] { return 3; });
  ASSERT_FALSE(duplicate.has_value());
  EXPECT_EQ(duplicate.error(), errc::in_progress) << duplicate.message();
  // stats(): the store's one connection is the holder's; the other claim queued and gave up.
  StoreStats stats = store.stats();
  EXPECT_EQ(stats.store, "sqlite");
  ASSERT_TRUE(stats.pool);
  EXPECT_EQ(stats.pool->size, 1u);
  EXPECT_EQ(stats.pool->in_use, 1u);
  EXPECT_EQ(stats.pool->idle, 0u);
  EXPECT_EQ(stats.pool->waits, 1u);
  EXPECT_EQ(stats.pool->timeouts, 1u);
  EXPECT_FALSE(stats.records);
  EXPECT_TRUE(stats.parts.empty());
  finish.set_value();
  ASSERT_TRUE(holder.get().has_value());
  auto later = guard.execute("b", [] { return 2; });
  ASSERT_TRUE(later.has_value()) << later.error().message();
  EXPECT_EQ(later.value(), 2);
  stats = store.stats();
  EXPECT_EQ(stats.pool->in_use, 0u);
  EXPECT_EQ(stats.pool->idle, 1u);
  EXPECT_EQ(stats.pool->opened, 1u);  // one connection for the store's whole life
  EXPECT_EQ(stats.pool->discarded, 0u);
  EXPECT_EQ(stats.pool->waits, 1u);
  EXPECT_EQ(stats.pool->timeouts, 1u);
}

}  // namespace
}  // namespace idem::testing

namespace idem::testing {
namespace {

// SQLite keeps the type a value was written with, and its conversions would read text '1abc', a
// real 1.5 or an integer 65537 (truncated to 16 bits) as state 1, completed. A record whose
// columns do not hold what idem writes is record_corrupt, and its handler never runs.
TEST(SqliteForeignRecordTest, ColumnsOfOtherTypesOrRangesAreRecordCorruptNotAReplay) {
  TempDb db;
  SqliteStore store{SqliteStoreOptions{.path = db.path()}};
  IdempotencyGuard guard{store, Options{.scope = "foreign"}};
  int runs = 0;
  auto run = [&] { return guard.execute("k", [&] { return "mine-" + std::to_string(++runs); }); };
  ASSERT_TRUE(run().executed());
  SQLite::Database raw(db.path(), SQLite::OPEN_READWRITE, 5000);
  // Each damage on top of a row that is otherwise idem's: completed, fence 3, result "ok".
  const std::string fp_hi = raw.execAndGet("SELECT fp_hi FROM idem_records").getString();
  const std::string ours =
      "UPDATE idem_records SET state = 1, fence = 3, result = x'6f6b', fp_hi = " + fp_hi;
  for (const char* damage : {"state = 65537", "state = '1abc'", "state = 1.5", "state = -1",
                             "fence = 'x'", "fp_hi = 1.25", "result = 'text, not a blob'"}) {
    SCOPED_TRACE(damage);
    raw.exec(ours + ", " + damage);
    auto out = run();
    ASSERT_FALSE(out.has_value()) << "read as " << out.value();
    EXPECT_EQ(out.error(), errc::record_corrupt) << out.message();
  }
  EXPECT_EQ(runs, 1);
  // The same row with the types idem writes replays.
  raw.exec(ours);
  auto ok = run();
  ASSERT_TRUE(ok.has_value()) << ok.message();
  EXPECT_TRUE(ok.replayed());
  EXPECT_EQ(ok.value(), "ok");
}

// A fence at INT64_MAX cannot grow: SQLite turns the takeover's fence + 1 into a real, which no
// commit could match. The claim is record_corrupt instead of a holder whose commit always fails
// (and whose handler would run again after every lease).
TEST(SqliteForeignRecordTest, AFenceThatCannotGrowIsRecordCorruptNotAnEndlessTakeover) {
  TempDb db;
  SqliteStore store{SqliteStoreOptions{.path = db.path()}};
  IdempotencyGuard guard{store, Options{.scope = "fence"}};
  int runs = 0;
  ASSERT_TRUE(guard.execute("k", [&] { return ++runs; }).executed());
  SQLite::Database raw(db.path(), SQLite::OPEN_READWRITE, 5000);
  raw.exec("UPDATE idem_records SET state = 3, fence = 9223372036854775807");  // released
  auto out = guard.execute("k", [&] { return ++runs; });
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error(), errc::record_corrupt) << out.message();
  auto again = guard.execute("k", [&] { return ++runs; });
  EXPECT_EQ(again.error(), errc::record_corrupt) << again.message();
  EXPECT_EQ(runs, 1);
}

// A file that is not a SQLite database (overwritten, or the wrong path) is store_unavailable on
// every call, with SQLite's reason; the handler never runs.
TEST(SqliteForeignRecordTest, AFileThatIsNotADatabaseIsStoreUnavailable) {
  TempDb db;
  {
    std::FILE* f = std::fopen(db.path().c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const std::string junk(8192, 'x');
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  SqliteStore store{SqliteStoreOptions{.path = db.path()}};
  IdempotencyGuard guard{store, Options{.scope = "junk"}};
  int runs = 0;
  for (int i = 0; i < 2; ++i) {
    auto out = guard.execute("k", [&] { return ++runs; });
    ASSERT_FALSE(out.has_value());
    EXPECT_EQ(out.error(), errc::store_unavailable) << out.message();
    EXPECT_NE(out.message().find("not a database"), std::string::npos) << out.message();
  }
  EXPECT_EQ(runs, 0);
}

}  // namespace
}  // namespace idem::testing

namespace idem::testing {
namespace {

// Processes that open a file that does not exist yet, together: one creates it and turns it to
// WAL while the others open it. SQLite answers some of these first steps "database is locked"
// without calling its busy handler; the store must wait for the others within busy_timeout, not
// answer store_unavailable. Fresh file each round, the processes released at one instant.
TEST(SqliteFirstUseTest, ProcessesOpeningANewFileTogetherWaitForEachOther) {
  constexpr int kRounds = 60, kProcesses = 4, kKeys = 3;
  int failed_rounds = 0;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    TempDb db;
    const SqlMode mode = round % 2 == 0 ? SqlMode::lease : SqlMode::transactional;
    const auto start = std::chrono::steady_clock::now() + milliseconds{100};
    const std::string start_ns = std::to_string(
        std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count());
    std::vector<std::unique_ptr<Worker>> workers;
    for (int p = 0; p < kProcesses; ++p) {
      workers.push_back(std::make_unique<Worker>(
          std::vector<std::string>{"sqlite", db.path(), "idem_", name_of(mode), "first-use",
                                   "first", std::to_string(kKeys), start_ns}));
    }
    RaceTally tally;
    for (auto& w : workers) tally.add(*w);
    if (tally.errors > 0) ++failed_rounds;
    EXPECT_EQ(tally.ran.size(), static_cast<std::size_t>(kKeys));
    for (const auto& [key, n] : tally.ran) EXPECT_EQ(n, 1) << key;
    for (const auto& [key, values] : tally.got) {
      EXPECT_EQ(values.size(), static_cast<std::size_t>(kProcesses)) << key;
    }
  }
  EXPECT_EQ(failed_rounds, 0) << "rounds with an error, of " << kRounds;
}

}  // namespace
}  // namespace idem::testing

namespace idem::testing {
namespace {

// A store built while another process runs a transactional handler (a worker started by a
// deploy): its first call checks the schema without the write lock the handler holds, so
// ensure_schema() answers at once, and a claim waits for the lock as any claim does and answers
// store_unavailable when it runs out: the file is busy, and which key the other process holds
// is not known here (in_progress is only for a key a holder of the same store has).
TEST(SqliteNewStoreTest, BuiltWhileAnotherProcessRunsAHandlerItAnswersStoreUnavailable) {
  TempDb db;
  const Target t{Backend::sqlite, db.path(), "idem_"};
  create_business_table(t);
  Worker holder({"sqlite", db.path(), "idem_", "transactional", "hold-tx", "orders", "order-1"});
  ASSERT_FALSE(holder.read_until("inside", std::chrono::seconds{20}).empty()) << "never ran";
  const SqliteStoreOptions options{
      .path = db.path(), .mode = SqlMode::transactional, .busy_timeout = std::chrono::seconds{1}};
  {
    SqliteStore store{options};
    IdempotencyGuard guard{store, Options{.scope = "orders"}};
    int runs = 0;
    auto same = guard.execute("order-1", [&] { return ++runs; });
    ASSERT_FALSE(same.has_value());
    EXPECT_EQ(same.error(), errc::store_unavailable) << same.message();
    EXPECT_EQ(runs, 0);
  }
  {
    SqliteStore store{options};
    const auto start = std::chrono::steady_clock::now();
    const Status schema = store.ensure_schema();
    EXPECT_TRUE(schema.ok()) << schema.failure().describe();
    EXPECT_LT(std::chrono::steady_clock::now() - start, options.busy_timeout);
  }
  {
    // Another key: the file's one write lock is the handler's; nobody holds this key.
    SqliteStore store{options};
    IdempotencyGuard guard{store, Options{.scope = "orders"}};
    auto other = guard.execute("order-2", [] { return 2; });
    ASSERT_FALSE(other.has_value());
    EXPECT_EQ(other.error(), errc::store_unavailable) << other.message();
  }
  holder.kill9();
  SqliteStore store{options};
  IdempotencyGuard guard{store, Options{.scope = "orders"}};
  auto after = guard.execute("order-1", [] { return 1; });
  ASSERT_TRUE(after.has_value()) << after.message();
  EXPECT_TRUE(after.executed());
}

}  // namespace
}  // namespace idem::testing

namespace idem::testing {
namespace {

// Eight threads of one process write one file, each through a store of its own, all starting
// together: four transactional ones whose handlers hold the file for a millisecond each and race
// on the same keys, and four in lease mode. The transactional writers keep the file busy for
// seconds; the others must get their turns within busy_timeout (1 s). They wait for each other
// in the process, in arrival order. (In SQLite's sleeping busy handler, the lease writers' first
// calls waited past a second while the transactional ones took the file back after each commit:
// store_unavailable in every run.) No call fails, every key runs once, and the run ends in
// bounded time.
TEST(SqliteWritersTest, EightThreadsOnOneFileNeverSeeStoreUnavailable) {
  TempDb db;
  constexpr int kThreads = 8, kKeys = 1500;
  // A fair turn waits for at most seven handlers; ThreadSanitizer runs this code several times
  // slower, so its bounds are five times wider there.
#if defined(__SANITIZE_THREAD__)
  constexpr int kSlower = 5;
#else
  constexpr int kSlower = 1;
#endif
  const auto busy = milliseconds{1000} * kSlower;
  std::vector<std::unique_ptr<SqliteStore>> stores;
  for (int t = 0; t < kThreads; ++t) {
    stores.push_back(std::make_unique<SqliteStore>(
        SqliteStoreOptions{.path = db.path(),
                           .mode = t % 2 == 0 ? SqlMode::lease : SqlMode::transactional,
                           .busy_timeout = busy}));
    ASSERT_TRUE(stores.back()->ensure_schema().ok());
  }
  std::mutex mutex;
  std::map<std::string, int> ran;
  std::vector<std::string> errors;
  std::barrier start_together(kThreads);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      const std::string scope = t % 2 == 0 ? "lease" : "tx";
      IdempotencyGuard guard{*stores[static_cast<std::size_t>(t)],
                             Options{.scope = scope, .in_progress = Wait{.timeout = busy * 10}}};
      start_together.arrive_and_wait();
      for (int i = 0; i < kKeys; ++i) {
        const std::string k = "k-" + std::to_string((i + t * 7) % kKeys);
        auto out = guard.execute(k, [&] {
          {
            std::lock_guard lock(mutex);
            ++ran[scope + "/" + k];
          }
          std::this_thread::sleep_for(milliseconds{1});  // a transactional handler holds the file
          return k;
        });
        std::lock_guard lock(mutex);
        if (!out) {
          errors.push_back(scope + "/" + k + ": " + out.message());
        } else {
          EXPECT_EQ(out.value(), k);
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(errors.empty()) << errors.size() << " calls failed, the first: " << errors.front();
  EXPECT_EQ(ran.size(), static_cast<std::size_t>(2 * kKeys));
  for (const auto& [key, n] : ran) EXPECT_EQ(n, 1) << key;
  EXPECT_LT(took, std::chrono::seconds{60} * kSlower);
}

}  // namespace
}  // namespace idem::testing

namespace idem::testing {
namespace {

// Two stores of one process on one file: a transactional handler of the first holds the file's
// writers' lock of the process until it commits. A claim of the second waits for it in the
// process up to max(block_for, busy_timeout): without leave to block it answers store_unavailable
// (the same key, or any other: the file's one write lock is the handler's, and the other store
// does not know which key it holds), as does a lease-mode write, and a claim that may block
// replays once the handler has committed.
TEST(SqliteWritersTest, AHandlerOfOneStoreHoldsTheFileForTheProcessesOtherStores) {
  TempDb db;
  const auto busy = milliseconds{300};
  SqliteStore holder_store{
      SqliteStoreOptions{.path = db.path(), .mode = SqlMode::transactional, .busy_timeout = busy}};
  SqliteStore other_store{
      SqliteStoreOptions{.path = db.path(), .mode = SqlMode::transactional, .busy_timeout = busy}};
  SqliteStore lease_store{
      SqliteStoreOptions{.path = db.path(), .mode = SqlMode::lease, .busy_timeout = busy}};
  ASSERT_TRUE(other_store.ensure_schema().ok());
  ASSERT_TRUE(lease_store.ensure_schema().ok());
  IdempotencyGuard holder{holder_store, Options{.scope = "s"}};
  std::promise<void> inside, finish;
  std::shared_future<void> finish_future = finish.get_future().share();
  auto held = std::async(std::launch::async, [&] {
    return holder.execute("a", [&] {
      inside.set_value();
      finish_future.wait();
      return std::string("first");
    });
  });
  inside.get_future().wait();

  IdempotencyGuard fail_fast{other_store, Options{.scope = "s"}};
  for (const char* key : {"a", "b"}) {
    auto out = fail_fast.execute(key, [] { return std::string("second"); });
    ASSERT_FALSE(out.has_value()) << key;
    EXPECT_EQ(out.error(), errc::store_unavailable) << key << ": " << out.message();
  }
  IdempotencyGuard lease{lease_store, Options{.scope = "s"}};
  auto lease_out = lease.execute("c", [] { return std::string("third"); });
  ASSERT_FALSE(lease_out.has_value());
  EXPECT_EQ(lease_out.error(), errc::store_unavailable) << lease_out.message();

  IdempotencyGuard waiting{
      other_store, Options{.scope = "s", .in_progress = Wait{.timeout = std::chrono::seconds{30}}}};
  int runs = 0;
  auto replay = std::async(std::launch::async, [&] {
    return waiting.execute("a", [&] {
      ++runs;
      return std::string("second");
    });
  });
  std::this_thread::sleep_for(milliseconds{100});  // the waiter queues behind the handler
  finish.set_value();
  ASSERT_TRUE(held.get().has_value());
  auto replayed = replay.get();
  ASSERT_TRUE(replayed.has_value()) << replayed.message();
  EXPECT_TRUE(replayed.replayed());
  EXPECT_EQ(replayed.value(), "first");
  EXPECT_EQ(runs, 0);
}

}  // namespace
}  // namespace idem::testing

namespace idem::testing {
namespace {

// Transactional fences live in "<database>-fences" (src/sqlite/fence_file.hpp). Losing the file
// does not make fences repeat: a draw is never below the clock in microseconds.
TEST(SqliteFenceFileTest, ADeletedFenceFileStillGivesLargerFences) {
  TempDb db;
  const std::string fences = db.path() + "-fences";
  Fence last = 0;
  for (int round = 0; round < 3; ++round) {
    SqliteStore store{SqliteStoreOptions{.path = db.path(), .mode = SqlMode::transactional}};
    Result<Claim> c =
        store.claim(ClaimRequest{"k", {1, 2}, milliseconds{1000}, milliseconds{1000}});
    ASSERT_TRUE(c.has_value()) << c.failure().describe();
    ASSERT_EQ(c->status, ClaimStatus::acquired);
    EXPECT_GT(c->fence, last);
    last = c->fence;
    ASSERT_TRUE(store.abort(Ticket{"k", c->fence}).ok());  // rolls back: no row keeps the fence
    ASSERT_TRUE(std::filesystem::exists(fences));
    std::filesystem::remove(fences);
  }
}

// A fence file the store cannot use fails the claim with a message naming it; the handler does
// not run.
TEST(SqliteFenceFileTest, AFenceFileThatCannotBeUsedIsStoreUnavailable) {
  TempDb db;
  const std::string fences = db.path() + "-fences";
  SqliteStore store{SqliteStoreOptions{.path = db.path(), .mode = SqlMode::transactional}};
  IdempotencyGuard guard{store, Options{.scope = "fences"}};
  int runs = 0;
  {
    std::FILE* f = std::fopen(fences.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const std::string junk(8, '\xff');
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  auto junk = guard.execute("k", [&] { return ++runs; });
  EXPECT_EQ(junk.error(), errc::store_unavailable) << junk.message();
  EXPECT_NE(junk.message().find(fences), std::string::npos) << junk.message();
  EXPECT_NE(junk.message().find("not a fence idem wrote"), std::string::npos) << junk.message();
  std::filesystem::remove(fences);
  std::filesystem::create_directory(fences);  // cannot be opened for writing
  SqliteStore fresh{SqliteStoreOptions{.path = db.path(), .mode = SqlMode::transactional}};
  IdempotencyGuard fresh_guard{fresh, Options{.scope = "fences"}};
  auto blocked = fresh_guard.execute("k", [&] { return ++runs; });
  EXPECT_EQ(blocked.error(), errc::store_unavailable) << blocked.message();
  EXPECT_NE(blocked.message().find(fences), std::string::npos) << blocked.message();
  EXPECT_EQ(runs, 0);
  std::filesystem::remove(fences);
  auto ok = fresh_guard.execute("k", [&] { return ++runs; });
  ASSERT_TRUE(ok) << ok.message();
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace idem::testing

namespace idem::testing {
namespace {

// A duplicate woken by the hold's end claims with after_wait: the replay is read, not claimed
// under the file's write lock, so another writer holding the file does not hold it up. The same
// claim without after_wait waits for the lock and gives up at busy_timeout.
TEST(SqliteAfterWaitTest, AClaimAfterAWaitReadsASettledRecordPastTheWriteLock) {
  TempDb db;
  SqliteStore store{SqliteStoreOptions{.path = db.path(), .busy_timeout = milliseconds{200}}};
  auto claim = [&](bool after_wait) {
    return store.claim(ClaimRequest{.key = "k",
                                    .fingerprint = {1, 2},
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
  SQLite::Database other(db.path(), SQLite::OPEN_READWRITE);
  other.exec("BEGIN IMMEDIATE");
  Result<Claim> read = claim(true);
  ASSERT_TRUE(read.has_value()) << read.failure().describe();
  EXPECT_EQ(read->status, ClaimStatus::completed);
  EXPECT_EQ(read->result, "r");
  Result<Claim> claimed = claim(false);
  ASSERT_FALSE(claimed.has_value());
  EXPECT_EQ(claimed.error(), errc::store_unavailable) << claimed.failure().describe();
  other.exec("ROLLBACK");
}

}  // namespace
}  // namespace idem::testing
