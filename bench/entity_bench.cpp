// VersionStore and StateMachineStore on memory, SQLite and PostgreSQL beside bare twins: the
// same conditional UPDATE and op-log statements written straight on SQLiteCpp / libpqxx (and a
// mutex and two maps for memory), in the same binary and run, so the overhead reads as a ratio
// (docs/design.md §14). A second bare twin runs the conditional UPDATE alone in its transaction:
// the gap to it is what the op log (replays of repeated operations) costs.
//
//   IDEM_BENCH_PG_URI=postgresql://user@host/db build/bench/idem_bench_entity
//
// Without IDEM_BENCH_PG_URI the PostgreSQL benchmarks are left out with a line. Figures:
// docs/perf/history.md ("Entity stores").

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <string>
#include <unordered_map>

#include "idem/memory/entities.hpp"
#include "idem/postgres/entities.hpp"
#include "idem/sqlite/entities.hpp"
#include "idem/state_machine_store.hpp"
#include "idem/version_store.hpp"
#include "latency.hpp"
#include "postgres/pqxx_calls.hpp"  // the bare twins' calls, the same on libpqxx 6 and 7

namespace {

std::string g_pg_uri;
int g_run = 0;

// Toggles between two states, so that a transition is always possible.
const idem::TransitionTable& toggle() {
  static const idem::TransitionTable t{
      "OPEN", {"OPEN", "HELD"}, {{"HOLD", {"OPEN"}, "HELD"}, {"RELEASE", {"HELD"}, "OPEN"}}};
  return t;
}

std::string op(long long i) { return "op-" + std::to_string(1'000'000'000LL + i); }

// ---- the user's tables, one set per benchmark run ----------------------------------------------

class TempFile {
 public:
  TempFile()
      : path_(std::filesystem::temp_directory_path() /
              ("idem_entity_bench_" + std::to_string(::getpid()) + "_" + std::to_string(g_run++) +
               ".db")) {}
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

constexpr const char* kTables =
    "CREATE TABLE {p}items (id TEXT PRIMARY KEY, version BIGINT NOT NULL, state TEXT NOT NULL);"
    "INSERT INTO {p}items VALUES ('item', 0, 'OPEN');"
    "CREATE TABLE {p}bare_ops (key TEXT PRIMARY KEY, state SMALLINT NOT NULL, result TEXT)";

std::string tables(const std::string& prefix) {
  std::string s = kTables;
  for (std::size_t at; (at = s.find("{p}")) != std::string::npos;) s.replace(at, 3, prefix);
  return s;
}

// ---- guarded ------------------------------------------------------------------------------------

template <class B>
void run_version(benchmark::State& state, typename B::Options backend, idem::EntityTable table,
                 const std::string& item) {
  idem::VersionStore<B> store{idem::VersionStoreOptions<B>{
      .backend = std::move(backend), .table = std::move(table), .guard = {.scope = "bench"}}};
  std::uint64_t v = store.version(item).value();
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = store.execute(idem::VersionKey{item, v++}, [] { return 1; });
    if (!out.recorded()) state.SkipWithError(out.message().c_str());
  }
  latency.report(state);
}

template <class B>
void run_version_replay(benchmark::State& state, typename B::Options backend,
                        idem::EntityTable table, const std::string& item) {
  idem::VersionStore<B> store{idem::VersionStoreOptions<B>{
      .backend = std::move(backend), .table = std::move(table), .guard = {.scope = "bench"}}};
  const std::uint64_t v = store.version(item).value();
  (void)store.execute(idem::VersionKey{item, v}, [] { return 1; });
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = store.execute(idem::VersionKey{item, v}, [] { return 2; });
    if (!out.replayed()) state.SkipWithError(out.message().c_str());
  }
  latency.report(state);
}

template <class B>
void run_transition(benchmark::State& state, typename B::Options backend, idem::EntityTable table,
                    const std::string& item) {
  idem::StateMachineStore<idem::TransitionTable, B> store{
      toggle(),
      idem::StateMachineStoreOptions<B>{
          .backend = std::move(backend), .table = std::move(table), .guard = {.scope = "bench"}}};
  long long i = 0;
  bool open = store.state(item).value() == "OPEN";
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    const std::string id = op(i++);
    auto out = store.execute(idem::EventKey{item, open ? "HOLD" : "RELEASE", id}, [] { return 1; });
    if (!out.recorded()) state.SkipWithError(out.message().c_str());
    open = !open;
  }
  latency.report(state);
}

// ---- memory -------------------------------------------------------------------------------------

// Each call adds an op-log entry, on both sides. Every kOpBatch calls the timers pause and each
// side starts again from an empty log, so that the store and its twin measure logs of the same
// sizes (0 to kOpBatch entries), however many iterations each runs: a log that grew with the run
// would make the faster side pay for a larger table.
constexpr std::int64_t kOpBatch = 1 << 14;

template <class Reset>
void next_op(benchmark::State& state, std::int64_t& done, Reset&& reset) {
  if (++done < kOpBatch) return;
  done = 0;
  state.PauseTiming();
  reset();
  state.ResumeTiming();
}

using MemoryVersionStore = idem::VersionStore<idem::MemoryBackend>;
using MemoryMachineStore = idem::StateMachineStore<idem::TransitionTable, idem::MemoryBackend>;

void BM_Memory_Version(benchmark::State& state) {
  auto fresh = [] {
    auto store =
        std::make_unique<MemoryVersionStore>(idem::VersionStoreOptions<idem::MemoryBackend>{});
    store->put("item", 0);
    return store;
  };
  std::unique_ptr<MemoryVersionStore> store = fresh();
  std::uint64_t v = 0;
  std::int64_t done = 0;
  idem_bench::Latency latency{4};
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = store->execute(idem::VersionKey{"item", v++}, [] { return 1; });
    if (!out.recorded()) state.SkipWithError(out.message().c_str());
    next_op(state, done, [&] {
      store = fresh();
      v = 0;
    });
  }
  latency.report(state);
}

void BM_Memory_Transition(benchmark::State& state) {
  auto fresh = [] {
    auto store = std::make_unique<MemoryMachineStore>(toggle());
    store->put("item", "OPEN");
    return store;
  };
  std::unique_ptr<MemoryMachineStore> store = fresh();
  long long i = 0;
  bool open = true;
  std::int64_t done = 0;
  idem_bench::Latency latency{4};
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = store->execute(idem::EventKey{"item", open ? "HOLD" : "RELEASE", op(i++)},
                              [] { return 1; });
    if (!out.recorded()) state.SkipWithError(out.message().c_str());
    open = !open;
    next_op(state, done, [&] {
      store = fresh();
      open = true;
    });
  }
  latency.report(state);
}

// The same work by hand: a lock, the version check and bump, the op log entry.
void BM_Memory_Version_bare(benchmark::State& state) {
  std::mutex mutex;
  std::unordered_map<std::string, std::uint64_t> versions{{"item", 0}};
  std::unordered_map<std::string, std::string> ops;
  std::uint64_t v = 0;
  std::int64_t done = 0;
  idem_bench::Latency latency{4};
  for (auto _ : state) {
    const auto timer = latency.time();
    std::lock_guard lock(mutex);
    const std::string key = "item/v" + std::to_string(v);
    if (ops.count(key) != 0) state.SkipWithError("replayed");
    auto& current = versions["item"];
    if (current != v) state.SkipWithError("conflict");
    current = ++v;
    ops.emplace(key, "1");
    next_op(state, done, [&] {
      ops = {};
      versions["item"] = 0;
      v = 0;
    });
  }
  latency.report(state);
}

// A lock, the op log lookup, the transition checked against the current state, the op log entry.
void BM_Memory_Transition_bare(benchmark::State& state) {
  std::mutex mutex;
  std::unordered_map<std::string, std::string> states{{"item", "OPEN"}};
  std::unordered_map<std::string, std::string> ops;
  long long i = 0;
  std::int64_t done = 0;
  idem_bench::Latency latency{4};
  for (auto _ : state) {
    const auto timer = latency.time();
    std::lock_guard lock(mutex);
    const std::string id = op(i++);
    if (ops.count(id) != 0) state.SkipWithError("replayed");
    std::string& current = states["item"];
    const bool open = current == "OPEN";
    if (!open && current != "HELD") state.SkipWithError("no such transition");
    current = open ? "HELD" : "OPEN";
    ops.emplace(id, "1");
    next_op(state, done, [&] {
      ops = {};
      states["item"] = "OPEN";
    });
  }
  latency.report(state);
}

// ---- SQLite -------------------------------------------------------------------------------------

struct SqliteFixture {
  TempFile file;
  SqliteFixture() {
    SQLite::Database db(file.path(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(tables(""));
  }
  idem::SqliteStoreOptions options() const { return {.path = file.path()}; }
};

void BM_Sqlite_Version(benchmark::State& state) {
  SqliteFixture f;
  run_version<idem::SqliteBackend>(state, f.options(), {"items", "id", "version"}, "item");
}
void BM_Sqlite_VersionReplay(benchmark::State& state) {
  SqliteFixture f;
  run_version_replay<idem::SqliteBackend>(state, f.options(), {"items", "id", "version"}, "item");
}
void BM_Sqlite_Transition(benchmark::State& state) {
  SqliteFixture f;
  run_transition<idem::SqliteBackend>(state, f.options(), {"items", "id", "state"}, "item");
}

// Bare: the store's statements on one connection (synchronous NORMAL, as the store).
// op_log: with the op log (lookup, UPDATE, INSERT, UPDATE), else the conditional UPDATE alone.
// transition: the UPDATE is the state transition, else the version bump.
void sqlite_bare(benchmark::State& state, bool op_log, bool transition) {
  SqliteFixture f;
  SQLite::Database db(f.file.path(), SQLite::OPEN_READWRITE);
  db.exec("PRAGMA synchronous = NORMAL");
  SQLite::Statement lookup(db, "SELECT state, result FROM bare_ops WHERE key = ?1");
  SQLite::Statement bump(db, transition
                                 ? "UPDATE items SET state = ?2 WHERE id = ?1 AND state IN (?3)"
                                 : "UPDATE items SET version = version + 1 WHERE id = ?1 AND "
                                   "version = ?2");
  SQLite::Statement insert(
      db, "INSERT INTO bare_ops (key, state, result) VALUES (?1, 0, NULL) ON CONFLICT DO NOTHING");
  SQLite::Statement finish(db, "UPDATE bare_ops SET state = 1, result = ?2 WHERE key = ?1");
  long long v = 0;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    const std::string key = "item/v" + std::to_string(v);
    db.exec("BEGIN IMMEDIATE");
    if (op_log) {
      lookup.reset();
      lookup.bind(1, key);
      if (lookup.executeStep()) state.SkipWithError("replayed");
      lookup.reset();
    }
    bump.reset();
    bump.bind(1, "item");
    if (transition) {
      const bool open = v++ % 2 == 0;
      bump.bind(2, open ? "HELD" : "OPEN");
      bump.bind(3, open ? "OPEN" : "HELD");
    } else {
      bump.bind(2, static_cast<std::int64_t>(v++));
    }
    if (bump.exec() != 1) state.SkipWithError("conflict");
    if (op_log) {
      insert.reset();
      insert.bind(1, key);
      insert.exec();
      finish.reset();
      finish.bind(1, key);
      finish.bind(2, "1");
      finish.exec();
    }
    db.exec("COMMIT");
  }
  latency.report(state);
}
void BM_Sqlite_Version_bare(benchmark::State& state) { sqlite_bare(state, true, false); }
void BM_Sqlite_Transition_bare(benchmark::State& state) { sqlite_bare(state, true, true); }
// Arg: 0 = the version bump's UPDATE alone, 1 = the transition's.
void BM_Sqlite_UpdateAlone(benchmark::State& state) {
  sqlite_bare(state, false, state.range(0) != 0);
}

// ---- PostgreSQL
// -----------------------------------------------------------------------------------

struct PgFixture {
  std::string prefix = "ebench_" + std::to_string(::getpid()) + "_" + std::to_string(g_run++) + "_";
  PgFixture() {
    pqxx::connection c(g_pg_uri);
    pqxx::work w(c);
    w.exec(tables(prefix));
    w.commit();
  }
  ~PgFixture() {
    try {
      pqxx::connection c(g_pg_uri);
      pqxx::work w(c);
      w.exec("DROP TABLE IF EXISTS " + prefix + "items, " + prefix + "bare_ops, " + prefix +
             "entity_ops");
      w.commit();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "idem_bench_entity: could not drop tables: %s\n", e.what());
    }
  }
  idem::PostgresStoreOptions options() const {
    return {.connection = {.uri = g_pg_uri, .table_prefix = prefix}, .pool = {.size = 2}};
  }
  idem::EntityTable table(const char* column) const { return {prefix + "items", "id", column}; }
};

void BM_Postgres_Version(benchmark::State& state) {
  PgFixture f;
  run_version<idem::PostgresBackend>(state, f.options(), f.table("version"), "item");
}
void BM_Postgres_VersionReplay(benchmark::State& state) {
  PgFixture f;
  run_version_replay<idem::PostgresBackend>(state, f.options(), f.table("version"), "item");
}
void BM_Postgres_Transition(benchmark::State& state) {
  PgFixture f;
  run_transition<idem::PostgresBackend>(state, f.options(), f.table("state"), "item");
}

// Bare: as sqlite_bare, on one libpqxx connection.
void postgres_bare(benchmark::State& state, bool op_log, bool transition) {
  PgFixture f;
  pqxx::connection c(g_pg_uri);
  const std::string& p = f.prefix;
  c.prepare("lookup", "SELECT state, result FROM " + p + "bare_ops WHERE key = $1");
  c.prepare("bump",
            "UPDATE " + p + "items SET version = version + 1 WHERE id = $1 AND version = $2");
  c.prepare("move", "UPDATE " + p + "items SET state = $2 WHERE id = $1 AND state IN ($3)");
  c.prepare("insert",
            "INSERT INTO " + p +
                "bare_ops (key, state, result) VALUES ($1, 0, NULL) ON CONFLICT DO NOTHING");
  c.prepare("finish", "UPDATE " + p + "bare_ops SET state = 1, result = $2 WHERE key = $1");
  long long v = 0;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    const std::string key = "item/v" + std::to_string(v);
    pqxx::work w(c);
    if (op_log && !idem_bench::pqxx_calls::exec_prepared(w, "lookup", key).empty()) {
      state.SkipWithError("replayed");
    }
    const bool open = v % 2 == 0;
    const pqxx::result r =
        transition ? idem_bench::pqxx_calls::exec_prepared(
                         w, "move", "item", open ? "HELD" : "OPEN", open ? "OPEN" : "HELD")
                   : idem_bench::pqxx_calls::exec_prepared(w, "bump", "item", v);
    ++v;
    if (r.affected_rows() != 1) state.SkipWithError("conflict");
    if (op_log) {
      idem_bench::pqxx_calls::exec_prepared(w, "insert", key);
      idem_bench::pqxx_calls::exec_prepared(w, "finish", key, "1");
    }
    w.commit();
  }
  latency.report(state);
}
void BM_Postgres_Version_bare(benchmark::State& state) { postgres_bare(state, true, false); }
void BM_Postgres_Transition_bare(benchmark::State& state) { postgres_bare(state, true, true); }
void BM_Postgres_UpdateAlone(benchmark::State& state) {
  postgres_bare(state, false, state.range(0) != 0);
}

}  // namespace

// Every guarded benchmark BM_X has its bare twin BM_X_bare; BM_*_UpdateAlone is the store's
// conditional UPDATE without the op log, to read the op log's own cost against.
BENCHMARK(BM_Memory_Version_bare);
BENCHMARK(BM_Memory_Version);
BENCHMARK(BM_Memory_Transition_bare);
BENCHMARK(BM_Memory_Transition);
BENCHMARK(BM_Sqlite_Version_bare)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sqlite_Transition_bare)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sqlite_UpdateAlone)
    ->ArgName("transition")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sqlite_Version)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sqlite_VersionReplay)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sqlite_Transition)->Unit(benchmark::kMicrosecond);

int main(int argc, char** argv) {
  if (const char* uri = std::getenv("IDEM_BENCH_PG_URI"); uri != nullptr && *uri != '\0') {
    g_pg_uri = uri;
    benchmark::RegisterBenchmark("BM_Postgres_Version_bare", BM_Postgres_Version_bare)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("BM_Postgres_Transition_bare", BM_Postgres_Transition_bare)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("BM_Postgres_UpdateAlone", BM_Postgres_UpdateAlone)
        ->ArgName("transition")
        ->Arg(0)
        ->Arg(1)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("BM_Postgres_Version", BM_Postgres_Version)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("BM_Postgres_VersionReplay", BM_Postgres_VersionReplay)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("BM_Postgres_Transition", BM_Postgres_Transition)
        ->Unit(benchmark::kMicrosecond);
  } else {
    std::printf(
        "idem_bench_entity: IDEM_BENCH_PG_URI is not set; skipping the PostgreSQL "
        "benchmarks\n");
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
