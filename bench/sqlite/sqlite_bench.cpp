// IdempotencyGuard over SqliteStore beside bare twins: the same statements on SQLiteCpp without
// the library (the claim's upsert, the read of a replay, the commit's fenced update), in the same
// binary and run, so the overhead reads as a ratio (docs/design.md §14). Both sides use one
// connection on a WAL file; the argument selects PRAGMA synchronous: 0 = NORMAL, 1 = FULL.
//
// The *Threads and *Stores benchmarks run 8 threads of one process on one file: *Threads share
// one store (bare: one connection under a std::mutex), *Stores give each thread a store of its
// own (bare: a connection of its own, which waits for the others in SQLite's busy handler).
//
//   build/bench/idem_bench_sqlite --benchmark_min_time=0.5
//
// Figures and how to read them: docs/perf/history.md ("SQL stores").

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "idem/cached_store.hpp"
#include "idem/guard.hpp"
#include "idem/sqlite/store.hpp"
#include "latency.hpp"
#include "sql/statements.hpp"

namespace {

using std::chrono::milliseconds;

constexpr std::string_view kScope = "payments.charge";
constexpr std::string_view kPayload = "card=4242424242424242&amount=1999&currency=EUR";
constexpr std::string_view kResult = "receipt:ch_0000000042:EUR";
constexpr milliseconds kLease{30'000};
constexpr milliseconds kTtl{24 * 3600 * 1000};
constexpr int kReplayKeys = 1000;

std::string handler() { return std::string(kResult); }

// A fresh database file per benchmark run, removed afterwards.
class TempFile {
 public:
  TempFile() {
    static int n = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("idem_bench_" + std::to_string(::getpid()) + "_" + std::to_string(n++) + ".db");
  }
  ~TempFile() {
    for (const char* suffix : {"", "-wal", "-shm", "-fences"}) {
      std::error_code ignored;
      std::filesystem::remove(path_.string() + suffix, ignored);
    }
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

std::string key(std::string_view kind, long long i) {
  return std::string(kind) + "-" + std::to_string(1'000'000'000'000LL + i);
}

// ---- guarded ----------------------------------------------------------------------------------

idem::SqliteStoreOptions store_options(const TempFile& file, benchmark::State& state,
                                       idem::SqlMode mode = idem::SqlMode::lease) {
  return idem::SqliteStoreOptions{
      .path = file.path(), .mode = mode, .synchronous_full = state.range(0) != 0};
}

void BM_Guard_Fresh(benchmark::State& state) {
  TempFile file;
  idem::SqliteStore store{store_options(file, state)};
  idem::IdempotencyGuard guard{store, idem::Options{.scope = std::string(kScope)}};
  long long i = 0;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = guard.execute(key("fresh", i++), kPayload, handler);
    if (!out.recorded()) state.SkipWithError("not recorded");
    benchmark::DoNotOptimize(out);
  }
  latency.report(state);
}

void BM_Guard_Replay(benchmark::State& state) {
  TempFile file;
  idem::SqliteStore store{store_options(file, state)};
  idem::IdempotencyGuard guard{store, idem::Options{.scope = std::string(kScope)}};
  for (int k = 0; k < kReplayKeys; ++k) (void)guard.execute(key("replay", k), kPayload, handler);
  long long i = 0;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = guard.execute(key("replay", i++ % kReplayKeys), kPayload, handler);
    if (!out.replayed()) state.SkipWithError("not replayed");
    benchmark::DoNotOptimize(out);
  }
  latency.report(state);
}

// The replay of BM_Guard_Replay through CachedStore. The records are written without the cache
// (as by another process), so an untimed first pass over the keys reads them from SQLite, whose
// claim says how long each still lives, and fills the cache; the timed calls are hits (hit_rate).
void BM_GuardCached_Replay(benchmark::State& state) {
  TempFile file;
  idem::SqliteStore store{store_options(file, state)};
  {
    idem::IdempotencyGuard writer{store, idem::Options{.scope = std::string(kScope)}};
    for (int k = 0; k < kReplayKeys; ++k) (void)writer.execute(key("replay", k), kPayload, handler);
  }
  idem::CachedStore<idem::SqliteStore&> cached{idem::CachedStoreOptions{}, store};
  idem::IdempotencyGuard guard{cached, idem::Options{.scope = std::string(kScope)}};
  for (int k = 0; k < kReplayKeys; ++k) (void)guard.execute(key("replay", k), kPayload, handler);
  const std::uint64_t hits_before = cached.hits();
  long long i = 0;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = guard.execute(key("replay", i++ % kReplayKeys), kPayload, handler);
    if (!out.replayed()) state.SkipWithError("not replayed");
    benchmark::DoNotOptimize(out);
  }
  latency.report(state);
  state.counters["hit_rate"] = benchmark::Counter(static_cast<double>(cached.hits() - hits_before),
                                                  benchmark::Counter::kAvgIterations);
}

void BM_GuardTransactional_Fresh(benchmark::State& state) {
  TempFile file;
  idem::SqliteStore store{store_options(file, state, idem::SqlMode::transactional)};
  idem::IdempotencyGuard guard{store, idem::Options{.scope = std::string(kScope)}};
  long long i = 0;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = guard.execute(key("fresh", i++), kPayload, handler);
    if (!out.recorded()) state.SkipWithError("not recorded");
    benchmark::DoNotOptimize(out);
  }
  latency.report(state);
}

// ---- 8 threads on one file
// ------------------------------------------------------------------------

constexpr int kThreads = 8;

std::string thread_key(const benchmark::State& state, long long i) {
  return key("fresh-t" + std::to_string(state.thread_index()), i);
}

// What the threads of one benchmark run share: thread 0 makes it before the timed loop and drops
// it after; the others take it inside the loop, which all threads enter and leave together.
template <class T>
class Shared {
 public:
  template <class Make>
  void make(const benchmark::State& state, Make&& make) {
    if (state.thread_index() == 0) value_ = make();
  }
  T& get() { return *value_; }
  void drop(const benchmark::State& state) {
    if (state.thread_index() == 0) value_.reset();
  }

 private:
  std::unique_ptr<T> value_;
};

struct GuardedFile {
  GuardedFile(benchmark::State& state, idem::SqlMode mode, int stores) {
    for (int i = 0; i < stores; ++i) {
      this->stores.push_back(std::make_unique<idem::SqliteStore>(store_options(file, state, mode)));
      guards.push_back(std::make_unique<idem::IdempotencyGuard<idem::SqliteStore>>(
          *this->stores.back(), idem::Options{.scope = std::string(kScope)}));
    }
  }
  idem::IdempotencyGuard<idem::SqliteStore>& guard(const benchmark::State& state) {
    return *guards[static_cast<std::size_t>(state.thread_index()) % guards.size()];
  }

  TempFile file;
  std::vector<std::unique_ptr<idem::SqliteStore>> stores;
  std::vector<std::unique_ptr<idem::IdempotencyGuard<idem::SqliteStore>>> guards;
};

void guarded_threads(benchmark::State& state, idem::SqlMode mode, int stores) {
  static Shared<GuardedFile> shared;
  shared.make(state, [&] { return std::make_unique<GuardedFile>(state, mode, stores); });
  idem::IdempotencyGuard<idem::SqliteStore>* guard = nullptr;
  long long i = 0;
  idem_bench::Latency latency;
  for (auto _ : state) {
    if (guard == nullptr) guard = &shared.get().guard(state);
    const auto timer = latency.time();
    auto out = guard->execute(thread_key(state, i++), kPayload, handler);
    if (!out.recorded()) state.SkipWithError(out.has_value() ? "not recorded" : "failed");
    benchmark::DoNotOptimize(out);
  }
  latency.report(state);
  shared.drop(state);
}

void BM_Guard_FreshThreads(benchmark::State& state) {
  guarded_threads(state, idem::SqlMode::lease, 1);
}
void BM_GuardTransactional_FreshThreads(benchmark::State& state) {
  guarded_threads(state, idem::SqlMode::transactional, 1);
}
void BM_Guard_FreshStores(benchmark::State& state) {
  guarded_threads(state, idem::SqlMode::lease, kThreads);
}

// ---- bare twins: the same statements straight on SQLiteCpp -------------------------------------

class Bare {
 public:
  Bare(const TempFile& file, bool full)
      : text_(idem::sql::kSqlite, "idem_"),
        db_(file.path(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, 5000) {
    db_.exec("PRAGMA journal_mode = WAL");
    db_.exec(full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
    db_.exec(text_.create_schema_table);
    db_.exec(text_.create_records_table);
    db_.exec(text_.create_expiry_index);
    db_.exec(text_.insert_version);
    upsert_ = std::make_unique<SQLite::Statement>(db_, text_.upsert);
    read_ = std::make_unique<SQLite::Statement>(db_, text_.read);
    finish_ = std::make_unique<SQLite::Statement>(db_, text_.finish);
  }

  // claim: BEGIN IMMEDIATE, upsert, (read if not acquired), COMMIT. Returns the fence or 0.
  long long claim(const std::string& k, bool in_transaction = false) {
    if (!in_transaction) db_.exec("BEGIN IMMEDIATE");
    upsert_->reset();
    upsert_->bindNoCopy(1, k.data(), static_cast<int>(k.size()));
    upsert_->bind(2, static_cast<std::int64_t>(11));
    upsert_->bind(3, static_cast<std::int64_t>(22));
    upsert_->bind(4, static_cast<std::int64_t>(1));
    upsert_->bind(5, static_cast<std::int64_t>(kLease.count()));
    upsert_->bind(6, static_cast<std::int64_t>(kTtl.count()));
    long long fence = 0;
    if (upsert_->executeStep()) {
      fence = upsert_->getColumn(0).getInt64();
    } else {
      read_->reset();
      read_->bindNoCopy(1, k.data(), static_cast<int>(k.size()));
      if (read_->executeStep()) benchmark::DoNotOptimize(read_->getColumn(6).getString());
    }
    upsert_->reset();
    read_->reset();
    if (!in_transaction) db_.exec("COMMIT");
    return fence;
  }

  void commit(const std::string& k, long long fence, const std::string& result) {
    finish_->reset();
    finish_->bindNoCopy(1, k.data(), static_cast<int>(k.size()));
    finish_->bind(2, static_cast<std::int64_t>(fence));
    finish_->bind(3, 1);
    finish_->bindNoCopy(4, result.data(), static_cast<int>(result.size()));
    finish_->bind(5, static_cast<std::int64_t>(kTtl.count()));
    finish_->exec();
  }

  SQLite::Database& db() { return db_; }

 private:
  idem::sql::Statements text_;
  SQLite::Database db_;
  std::unique_ptr<SQLite::Statement> upsert_, read_, finish_;
};

void BM_Bare_Fresh(benchmark::State& state) {
  TempFile file;
  Bare bare(file, state.range(0) != 0);
  long long i = 0;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    const std::string k = key("fresh", i++);
    const long long fence = bare.claim(k);
    bare.commit(k, fence, handler());
  }
  latency.report(state);
}

void BM_Bare_Replay(benchmark::State& state) {
  TempFile file;
  Bare bare(file, state.range(0) != 0);
  for (int k = 0; k < kReplayKeys; ++k) {
    const std::string kk = key("replay", k);
    bare.commit(kk, bare.claim(kk), handler());
  }
  long long i = 0;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    benchmark::DoNotOptimize(bare.claim(key("replay", i++ % kReplayKeys)));
  }
  latency.report(state);
}

void BM_BareTransactional_Fresh(benchmark::State& state) {
  TempFile file;
  Bare bare(file, state.range(0) != 0);
  long long i = 0;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    const std::string k = key("fresh", i++);
    bare.db().exec("BEGIN IMMEDIATE");
    const long long fence = bare.claim(k, /*in_transaction=*/true);
    bare.commit(k, fence, handler());
    bare.db().exec("COMMIT");
  }
  latency.report(state);
}

// One connection for all threads, taken in turn under a std::mutex.
struct BareShared {
  explicit BareShared(const benchmark::State& state) : bare(file, state.range(0) != 0) {}
  TempFile file;
  Bare bare;
  std::mutex mutex;
};

void bare_threads(benchmark::State& state, bool transactional) {
  static Shared<BareShared> shared;
  shared.make(state, [&] { return std::make_unique<BareShared>(state); });
  BareShared* one = nullptr;
  long long i = 0;
  idem_bench::Latency latency;
  for (auto _ : state) {
    if (one == nullptr) one = &shared.get();
    const auto timer = latency.time();
    const std::string k = thread_key(state, i++);
    std::lock_guard lock(one->mutex);
    if (transactional) one->bare.db().exec("BEGIN IMMEDIATE");
    const long long fence = one->bare.claim(k, transactional);
    one->bare.commit(k, fence, handler());
    if (transactional) one->bare.db().exec("COMMIT");
  }
  latency.report(state);
  shared.drop(state);
}

void BM_Bare_FreshThreads(benchmark::State& state) { bare_threads(state, false); }
void BM_BareTransactional_FreshThreads(benchmark::State& state) { bare_threads(state, true); }

// A connection per thread on one file: writers wait for each other in SQLite's busy handler.
void BM_Bare_FreshStores(benchmark::State& state) {
  static Shared<TempFile> shared;
  shared.make(state, [] { return std::make_unique<TempFile>(); });
  std::unique_ptr<Bare> bare;
  long long i = 0;
  idem_bench::Latency latency;
  for (auto _ : state) {
    if (!bare) {
      static std::mutex opening;  // one connection at a time creates the schema
      std::lock_guard lock(opening);
      bare = std::make_unique<Bare>(shared.get(), state.range(0) != 0);
    }
    const auto timer = latency.time();
    const std::string k = thread_key(state, i++);
    const long long fence = bare->claim(k);
    bare->commit(k, fence, handler());
  }
  latency.report(state);
  bare.reset();
  shared.drop(state);
}

// Arg: 0 = synchronous NORMAL, 1 = FULL.
BENCHMARK(BM_Bare_Fresh)->ArgName("full")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Guard_Fresh)->ArgName("full")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Bare_Replay)->ArgName("full")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Guard_Replay)->ArgName("full")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GuardCached_Replay)->ArgName("full")->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BareTransactional_Fresh)
    ->ArgName("full")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GuardTransactional_Fresh)
    ->ArgName("full")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond);

// 8 threads on one file, synchronous NORMAL; wall time per call reads as throughput.
#define IDEM_SQLITE_THREADS(name)                                                   \
  BENCHMARK(name)->ArgName("full")->Arg(0)->Threads(kThreads)->UseRealTime()->Unit( \
      benchmark::kMicrosecond)
IDEM_SQLITE_THREADS(BM_Bare_FreshThreads);
IDEM_SQLITE_THREADS(BM_Guard_FreshThreads);
IDEM_SQLITE_THREADS(BM_BareTransactional_FreshThreads);
IDEM_SQLITE_THREADS(BM_GuardTransactional_FreshThreads);
IDEM_SQLITE_THREADS(BM_Bare_FreshStores);
IDEM_SQLITE_THREADS(BM_Guard_FreshStores);

}  // namespace

BENCHMARK_MAIN();
