// sqlite::AsyncStore (SqliteStore behind a thread of its own): the guard's cases through
// async_execute, the record-store conformance kit through the asynchronous calls (its faces, the
// asynchronous one included), records shared with SqliteStore, a write lock held elsewhere
// (calls time out, the loop goes on, the thread is not left stuck), transactional mode refused,
// and exactly-once across processes on one file.

#include <SQLiteCpp/Database.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "async/async_guard_cases.hpp"
#include "idem/admin/cached_admin.hpp"
#include "idem/asio/cached_store.hpp"
#include "idem/guard.hpp"
#include "idem/sqlite/admin.hpp"
#include "idem/sqlite/async_store.hpp"
#include "idem/testing/async_face.hpp"
#include "idem/testing/blocking_store.hpp"
#include "idem/testing/record_store_conformance.hpp"

// Not in an anonymous namespace: the coroutine frames of the header's templates hold these types.
namespace idem::testing {

/// A fresh SQLite file in a folder of its own, removed with the object.
class SqliteFile {
 public:
  SqliteFile() {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("idem_async_sqlite_" + std::to_string(::getpid()) + "_" +
            std::to_string(counter.fetch_add(1)));
    std::filesystem::create_directories(dir_);
  }
  ~SqliteFile() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  SqliteFile(const SqliteFile&) = delete;
  SqliteFile& operator=(const SqliteFile&) = delete;
  std::string path() const { return (dir_ / "idem.db").string(); }
  std::string beside(const char* name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
};

// --- The guard's cases ---------------------------------------------------------------------------
struct SqliteBackend : IoRunner {
  using Store = sqlite::AsyncStore;
  void set_up() { store_ = std::make_unique<Store>(SqliteStoreOptions{.path = file_.path()}); }
  bool ready() const { return store_ != nullptr; }
  Store& store() { return *store_; }

  SqliteFile file_;
  std::unique_ptr<Store> store_;  // after the file, gone before it
};

INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, AsyncGuardCases, SqliteBackend);

// --- The conformance kit, each call through the asynchronous store -------------------------------
// BlockingStore builds its asynchronous store from its loop's executor first, which this one
// does not need.
struct SqliteAsyncOnLoop : sqlite::AsyncStore {
  SqliteAsyncOnLoop(const boost::asio::any_io_executor&, const SqliteStoreOptions& options)
      : AsyncStore(options) {}
};

// Holds the file for every store opened on it; a base listed before the store, so it outlives it.
struct SharedSqliteFile {
  std::shared_ptr<SqliteFile> file;
};

struct BlockingAsyncSqlite : SharedSqliteFile, BlockingStore<SqliteAsyncOnLoop> {
  explicit BlockingAsyncSqlite(std::shared_ptr<SqliteFile> f)
      : SharedSqliteFile{std::move(f)}, BlockingStore(SqliteStoreOptions{.path = file->path()}) {}
};

// The traits of a cell on a SQLite file behind BlockingStore: a store reopened on the cell's file
// shares its records; the store's time is the clock's.
template <class Cell>
struct SqliteFileCellTraits {
  static constexpr std::chrono::milliseconds lease{600};
  static constexpr bool admin_release_wakes = false;  // the admin is not a store of the process
  static constexpr bool wait_sees_ends_on_other_threads = false;  // claims on the store's thread
  static std::unique_ptr<Cell> make() {
    return std::make_unique<Cell>(std::make_shared<SqliteFile>());
  }
  static std::unique_ptr<Cell> reopen(Cell& store) { return std::make_unique<Cell>(store.file); }
  static void advance(Cell&, std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }
  using async_face = AsyncFace<Cell>;
};

template <>
struct StoreTraits<BlockingAsyncSqlite> : SqliteFileCellTraits<BlockingAsyncSqlite> {
  static std::unique_ptr<admin::Admin> admin(BlockingAsyncSqlite& store) {
    return admin::sqlite_admin({.path = store.file->path()});
  }
};

}  // namespace idem::testing

IDEM_RECORD_STORE_CONFORMANCE(AsyncSqlite, idem::testing::BlockingAsyncSqlite);

// The same kit through AsyncCachedStore in front of the asynchronous store (as idem-proxy runs it
// with its replay cache on): the cache must answer every case as the store alone does.
namespace idem::testing {

struct CachedSqliteAsyncOnLoop : AsyncCachedStore<sqlite::AsyncStore> {
  CachedSqliteAsyncOnLoop(const boost::asio::any_io_executor&, const SqliteStoreOptions& options)
      : AsyncCachedStore(CachedStoreOptions{.shards = 4}, options) {}
};

struct BlockingCachedAsyncSqlite : SharedSqliteFile, BlockingStore<CachedSqliteAsyncOnLoop> {
  explicit BlockingCachedAsyncSqlite(std::shared_ptr<SqliteFile> f)
      : SharedSqliteFile{std::move(f)}, BlockingStore(SqliteStoreOptions{.path = file->path()}) {}
};

template <>
struct StoreTraits<BlockingCachedAsyncSqlite> : SqliteFileCellTraits<BlockingCachedAsyncSqlite> {
  static std::unique_ptr<admin::Admin> admin(BlockingCachedAsyncSqlite& store) {
    return admin::cached_admin(store.async(), admin::sqlite_admin({.path = store.file->path()}));
  }
};

}  // namespace idem::testing

IDEM_RECORD_STORE_CONFORMANCE(CachedAsyncSqlite, idem::testing::BlockingCachedAsyncSqlite);

namespace idem::testing {

TEST(AsyncSqlite, TransactionalModeIsRefusedAtConstruction) {
  SqliteFile file;
  try {
    sqlite::AsyncStore store(
        SqliteStoreOptions{.path = file.path(), .mode = SqlMode::transactional});
    ADD_FAILURE() << "transactional mode accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("SqlMode::lease only"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sqlite::AsyncStore(SqliteStoreOptions{}), std::invalid_argument);  // no path
}

// SqliteStore and sqlite::AsyncStore on one file serve the same records, both ways; so does the
// asynchronous store's own SqliteStore, for a blocking guard in the same process.
TEST(AsyncSqlite, SharesItsRecordsWithSqliteStore) {
  SqliteFile file;
  SqliteStore blocking(SqliteStoreOptions{.path = file.path()});
  sqlite::AsyncStore async(SqliteStoreOptions{.path = file.path()});
  IoRunner runner;
  EXPECT_EQ(runs_over_shared_records(blocking, async, runner), 2);
  IdempotencyGuard own_guard{async.store(), Options{.scope = "shared"}};
  EXPECT_TRUE(own_guard.execute("b", "p", [] { return 3; }).replayed());
}

// Another connection holds the file's write lock: the running claim waits busy_timeout and
// answers store_unavailable; the one queued behind it is refused once it waited queue_timeout,
// without running; the loop's timers fire meanwhile; and once the lock is gone the thread serves
// the next call.
TEST(AsyncSqlite, AWriteLockHeldElsewhereTimesCallsOutWithoutStoppingTheLoop) {
  SqliteFile file;
  sqlite::AsyncStore store(SqliteStoreOptions{.path = file.path(), .busy_timeout = 300ms},
                           ThreadedStoreOptions{.queue_timeout = 100ms});
  IoRunner runner;
  ASSERT_TRUE(runner.run(store.async_claim(
      ClaimRequest{.key = "warm-up", .lease = 1s, .retention = 1h})));  // the schema exists
  SQLite::Database other(file.path(), SQLite::OPEN_READWRITE);
  other.exec("BEGIN IMMEDIATE");
  std::optional<Result<Claim>> running;
  std::optional<Result<Claim>> queued;
  const ClaimRequest a{.key = "a", .lease = 10s, .retention = 1h};
  const ClaimRequest b{.key = "b", .lease = 10s, .retention = 1h};
  net::co_spawn(
      runner.io(),
      [&]() -> net::awaitable<void> { running.emplace(co_await store.async_claim(a)); },
      net::detached);
  net::co_spawn(
      runner.io(), [&]() -> net::awaitable<void> { queued.emplace(co_await store.async_claim(b)); },
      net::detached);
  int ticks = 0;
  net::steady_timer tick(runner.io());
  std::function<void(boost::system::error_code)> again = [&](boost::system::error_code) {
    ++ticks;
    if (running && queued) return;
    tick.expires_after(5ms);
    tick.async_wait(again);
  };
  again({});
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  runner.run_until(
      [&] { return (running && queued) || std::chrono::steady_clock::now() > give_up; });
  ASSERT_TRUE(running && queued) << "a call never came back";
  ASSERT_FALSE(*running);
  EXPECT_EQ(running->error(), errc::store_unavailable);
  ASSERT_FALSE(*queued);
  EXPECT_EQ(queued->error(), errc::store_unavailable);
  EXPECT_NE(queued->failure().message.find("waited more than 100 ms"), std::string::npos)
      << queued->failure().message;
  EXPECT_GE(ticks, 5) << "the loop stopped while the store waited for the lock";
  other.exec("ROLLBACK");
  Result<Claim> after = runner.run(store.async_claim(b));
  ASSERT_TRUE(after) << after.failure().describe();
  EXPECT_EQ(after->status, ClaimStatus::acquired);
}

// --- Processes -----------------------------------------------------------------------------------
namespace {

// Appends `line` to the file at `path` in one write of an O_APPEND file: whole, never interleaved
// with another process's.
void append_line(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  const std::string text = line + "\n";
  const ssize_t n = ::write(fd, text.data(), text.size());
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) throw std::runtime_error("short write to " + path);
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

struct AsyncRace {
  int processes = 3;
  int threads = 2;   // running each process's io_context
  int callers = 16;  // coroutines per process, each calling every key
  int keys = 12;
};

// One process of the race: its own store on the file, its own loop on `race.threads` threads;
// each handler notes its run in `runs`, each caller the value it got in `seen`. The number of
// failed calls.
int run_race_process(const AsyncRace& race, const SqliteFile& file, int process) {
  sqlite::AsyncStore store(SqliteStoreOptions{.path = file.path()});
  AsyncGuard guard{store, Options{.scope = "race", .in_progress = Wait{.timeout = 30s}}};
  net::io_context io;
  std::atomic<int> failures{0};
  for (int c = 0; c < race.callers; ++c) {
    net::co_spawn(
        io,
        [&, c]() -> net::awaitable<void> {
          for (int i = 0; i < race.keys; ++i) {
            const std::string k = std::to_string((i + c + process) % race.keys);
            auto out = co_await guard.async_execute(k, [&]() -> net::awaitable<std::string> {
              append_line(file.beside("runs"), k);
              co_await pause(2ms);
              co_return "from " + std::to_string(process) + "/" + std::to_string(c);
            });
            if (!out) {
              failures.fetch_add(1);
              continue;
            }
            append_line(file.beside("seen"), k + " " + out.value());
          }
        },
        net::detached);
  }
  std::vector<std::thread> threads;
  for (int t = 1; t < race.threads; ++t) threads.emplace_back([&] { io.run(); });
  io.run();
  for (auto& th : threads) th.join();
  return failures.load();
}

}  // namespace

// Processes on one file, each with its own asynchronous store and many coroutines on two
// threads: every key's handler runs once in all, and every caller gets that run's value.
TEST(AsyncSqliteRace, ProcessesOnOneFileRunEachKeyOnce) {
  const AsyncRace race;
  SqliteFile file;
  std::vector<pid_t> children;
  for (int p = 0; p < race.processes; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int failed = 1;
      try {
        failed = run_race_process(race, file, p);
      } catch (...) {
      }
      ::_exit(failed == 0 ? 0 : 1);
    }
    children.push_back(pid);
  }
  // Every child ends within the race's own bounds (each wait is at most 30 s); one that does
  // not is killed, and fails the test.
  const auto give_up = std::chrono::steady_clock::now() + 120s;
  for (pid_t pid : children) {
    int status = 0;
    pid_t done = 0;
    while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(20ms);
    }
    if (done == 0) {
      ::kill(pid, SIGKILL);
      (void)::waitpid(pid, &status, 0);
      ADD_FAILURE() << "a process of the race did not end";
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "process failed: " << status;
  }
  std::map<std::string, int> runs;
  for (const std::string& k : lines_of(file.beside("runs"))) ++runs[k];
  std::map<std::string, std::set<std::string>> values;
  std::map<std::string, int> answers;
  for (const std::string& line : lines_of(file.beside("seen"))) {
    const auto space = line.find(' ');
    ASSERT_NE(space, std::string::npos) << line;
    values[line.substr(0, space)].insert(line.substr(space + 1));
    ++answers[line.substr(0, space)];
  }
  for (int i = 0; i < race.keys; ++i) {
    const std::string k = std::to_string(i);
    EXPECT_EQ(runs[k], 1) << "key " << k;
    EXPECT_EQ(answers[k], race.processes * race.callers) << "key " << k;
    EXPECT_EQ(values[k].size(), 1u) << "key " << k << " got different values";
  }
}

}  // namespace idem::testing
