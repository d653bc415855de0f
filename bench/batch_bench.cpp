// Batches beside per-item calls: IdempotencyGuard::execute_batch of 100 fresh keys against 100
// execute() calls (each one claim and one commit: a transaction or script call per step), on
// SQLite (synchronous = FULL), PostgreSQL (IDEM_BENCH_PG_URI) and Redis (IDEM_BENCH_REDIS_URI).
// Backends whose variable is unset are left out. items_per_second is fresh keys per second.
//
//   build/bench/idem_bench_batch --benchmark_min_time=1
//
// Group commit runs beside per-call mode in the same run (BM_*PerCall, BM_*GroupCommit): compare
// their ratio, not absolute figures, on a shared machine. The group runs report the groups they
// wrote and their mean size. BM_PostgresGroupCommit/in_flight:N keeps N groups in flight from
// one queue; IDEM_BENCH_GROUP_WRITERS sets the queues (default 1).
//
// Figures: docs/batches.md.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "idem/group_commit_store.hpp"
#include "idem/guard.hpp"
#include "idem/postgres/store.hpp"
#include "idem/redis/store.hpp"
#include "idem/sqlite/store.hpp"

namespace {

constexpr std::string_view kPayload = "card=4242424242424242&amount=1999&currency=EUR";
constexpr std::size_t kBatch = 100;

std::atomic<long> next_key{0};

// 100 keys no run used before.
std::vector<std::string> fresh_ids() {
  std::vector<std::string> ids;
  ids.reserve(kBatch);
  const long base = next_key.fetch_add(static_cast<long>(kBatch));
  for (std::size_t i = 0; i < kBatch; ++i) {
    ids.push_back("k-" + std::to_string(::getpid()) + "-" +
                  std::to_string(base + static_cast<long>(i)));
  }
  return ids;
}

template <class S>
void per_item(benchmark::State& state, S& store) {
  idem::IdempotencyGuard guard(store, idem::Options{.scope = "bench.batch"});
  for (auto _ : state) {
    for (const std::string& id : fresh_ids()) {
      auto r = guard.execute(idem::Key{id}, kPayload, [] { return std::string("receipt"); });
      if (!r.recorded()) state.SkipWithError(r.message().c_str());
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<long>(kBatch));
}

template <class S>
void batch(benchmark::State& state, S& store) {
  idem::IdempotencyGuard guard(store, idem::Options{.scope = "bench.batch"});
  for (auto _ : state) {
    const std::vector<std::string> ids = fresh_ids();
    std::vector<idem::BatchItem> items;
    items.reserve(ids.size());
    for (const std::string& id : ids) items.push_back({idem::Key{id}, kPayload});
    auto out = guard.execute_batch(items, [](std::size_t) { return std::string("receipt"); });
    for (auto& r : out) {
      if (!r.recorded()) state.SkipWithError(r.message().c_str());
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<long>(kBatch));
}

// --- SQLite ------------------------------------------------------------------------------------

struct SqliteFile {
  SqliteFile()
      : path((std::filesystem::temp_directory_path() /
              ("idem_batch_bench_" + std::to_string(::getpid()) + ".db"))
                 .string()),
        store(idem::SqliteStoreOptions{.path = path, .synchronous_full = true}) {}
  ~SqliteFile() {
    for (const char* suffix : {"", "-wal", "-shm", "-fences"}) {
      std::error_code ignored;
      std::filesystem::remove(path + suffix, ignored);
    }
  }
  std::string path;
  idem::SqliteStore store;
};

SqliteFile& sqlite() {
  static SqliteFile file;
  return file;
}

void BM_SqlitePerItem(benchmark::State& state) { per_item(state, sqlite().store); }
void BM_SqliteBatch100(benchmark::State& state) { batch(state, sqlite().store); }
BENCHMARK(BM_SqlitePerItem)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SqliteBatch100)->Unit(benchmark::kMillisecond)->UseRealTime();

// Group commit beside one transaction per call: each thread runs execute() on fresh keys (one
// claim and one commit each), on the store itself or through a GroupCommitStore.
std::string fresh_id() {
  return "g-" + std::to_string(::getpid()) + "-" + std::to_string(next_key.fetch_add(1));
}

template <class S>
void fresh_calls(benchmark::State& state, S& store) {
  idem::IdempotencyGuard guard(store, idem::Options{.scope = "bench.group"});
  for (auto _ : state) {
    auto r = guard.execute(idem::Key{fresh_id()}, kPayload, [] { return std::string("receipt"); });
    if (!r.recorded()) state.SkipWithError(r.message().c_str());
  }
  state.SetItemsProcessed(state.iterations());
}

// fresh_calls through a GroupCommitStore, counting the groups this run wrote and their mean
// size (set by the first thread, whose loop starts and ends with every other thread's).
template <class S>
void grouped_calls(benchmark::State& state, idem::GroupCommitStore<S>& grouped) {
  const std::size_t groups = grouped.groups();
  const std::size_t calls = grouped.grouped_calls();
  fresh_calls(state, grouped);
  if (state.thread_index() != 0) return;
  const auto n = static_cast<double>(grouped.groups() - groups);
  state.counters["groups"] = n;
  state.counters["groups_since_start"] = static_cast<double>(grouped.groups());
  state.counters["calls_per_group"] =
      n > 0 ? static_cast<double>(grouped.grouped_calls() - calls) / n : 0.0;
}

idem::GroupCommitStore<idem::SqliteStore>& sqlite_grouped() {
  static idem::GroupCommitStore<idem::SqliteStore> grouped(sqlite().store);
  return grouped;
}

void BM_SqlitePerCall(benchmark::State& state) { fresh_calls(state, sqlite().store); }
void BM_SqliteGroupCommit(benchmark::State& state) { grouped_calls(state, sqlite_grouped()); }
BENCHMARK(BM_SqlitePerCall)->Threads(1)->Threads(8)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_SqliteGroupCommit)
    ->Threads(1)
    ->Threads(8)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// --- PostgreSQL --------------------------------------------------------------------------------

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

idem::PostgresStore& postgres() {
  static idem::PostgresStore store(idem::PostgresStoreOptions{
      .connection = {.uri = env("IDEM_BENCH_PG_URI"),
                     .table_prefix = "bench_batch_" + std::to_string(::getpid()) + "_"}});
  return store;
}

idem::PostgresStore& postgres_pool32() {
  static idem::PostgresStore store(idem::PostgresStoreOptions{
      .connection = {.uri = env("IDEM_BENCH_PG_URI"),
                     .table_prefix = "bench_batch_" + std::to_string(::getpid()) + "_"},
      .pool = {.size = 32}});
  return store;
}

// One queue (more made smaller groups and were slower here: docs/batches.md), or
// IDEM_BENCH_GROUP_WRITERS, with `in_flight` groups in flight.
idem::GroupCommitStore<idem::PostgresStore>& postgres_grouped(std::size_t in_flight) {
  static std::mutex mutex;
  static std::map<std::size_t, std::unique_ptr<idem::GroupCommitStore<idem::PostgresStore>>> made;
  std::lock_guard lock(mutex);
  auto& grouped = made[in_flight];
  if (!grouped) {
    const char* writers = env("IDEM_BENCH_GROUP_WRITERS");
    grouped = std::make_unique<idem::GroupCommitStore<idem::PostgresStore>>(
        postgres_pool32(),
        idem::GroupCommitOptions{
            .writers = writers != nullptr ? static_cast<std::size_t>(std::stoul(writers)) : 1,
            .in_flight = in_flight});
  }
  return *grouped;
}

void BM_PostgresPerCall(benchmark::State& state) { fresh_calls(state, postgres_pool32()); }
void BM_PostgresGroupCommit(benchmark::State& state) {
  grouped_calls(state, postgres_grouped(static_cast<std::size_t>(state.range(0))));
}

void BM_PostgresPerItem(benchmark::State& state) { per_item(state, postgres()); }
void BM_PostgresBatch100(benchmark::State& state) { batch(state, postgres()); }

// --- Redis -------------------------------------------------------------------------------------

idem::RedisStore& redis() {
  static idem::RedisStore store = [] {
    auto options = idem::redis::ConnectionOptions::from_uri(env("IDEM_BENCH_REDIS_URI"));
    if (!options) throw std::runtime_error(options.failure().describe());
    return idem::RedisStore(
        std::make_shared<idem::redis::Client>(options.value()),
        idem::RedisStoreOptions{.prefix = "bench:batch:" + std::to_string(::getpid()) + ":"});
  }();
  return store;
}

void BM_RedisPerItem(benchmark::State& state) { per_item(state, redis()); }
void BM_RedisBatch100(benchmark::State& state) { batch(state, redis()); }

}  // namespace

int main(int argc, char** argv) {
  if (env("IDEM_BENCH_PG_URI") != nullptr) {
    benchmark::RegisterBenchmark("BM_PostgresPerItem", BM_PostgresPerItem)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_PostgresBatch100", BM_PostgresBatch100)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_PostgresPerCall", BM_PostgresPerCall)
        ->Threads(1)
        ->Threads(32)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_PostgresGroupCommit", BM_PostgresGroupCommit)
        ->ArgName("in_flight")
        ->Arg(1)
        ->Arg(2)
        ->Threads(1)
        ->Threads(32)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
  if (env("IDEM_BENCH_REDIS_URI") != nullptr) {
    benchmark::RegisterBenchmark("BM_RedisPerItem", BM_RedisPerItem)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_RedisBatch100", BM_RedisBatch100)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
