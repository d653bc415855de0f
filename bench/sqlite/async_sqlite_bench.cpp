// AsyncGuard over sqlite::AsyncStore (the store's calls on its own thread, each caller resumed on
// the io_context's one thread) beside the bare backend doing the same work: the same SqliteStore
// calls (claim, then commit for a fresh key; claim for a replay) made directly, blocking, on the
// benchmark's thread. The difference is the asynchronous face: the guard's engine, the hop to the
// store's thread and the post back. Both on a fresh WAL file each, PRAGMA synchronous NORMAL.
// Wall time (UseRealTime): the store's thread's CPU is not the benchmark thread's.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <filesystem>
#include <string>

#include "async_bench.hpp"
#include "idem/asio/async_guard.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/fingerprint.hpp"
#include "idem/guard.hpp"
#include "idem/sqlite/async_store.hpp"

namespace idem_bench_async {

namespace {

// A fresh database file per benchmark run, removed afterwards.
class SqliteFile {
 public:
  SqliteFile() {
    static int n = 0;
    dir_ = std::filesystem::temp_directory_path() /
           ("idem_bench_async_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    std::filesystem::create_directories(dir_);
  }
  ~SqliteFile() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  idem::SqliteStoreOptions options() const { return {.path = (dir_ / "idem.db").string()}; }

 private:
  std::filesystem::path dir_;
};

const idem::Options kOptions{.scope = "payments.charge", .lease = kLease, .ttl = kTtl};

// The replay keys, recorded through a blocking guard on the same file.
bool write_replay_keys(idem::SqliteStore& store) {
  idem::IdempotencyGuard guard{store, kOptions};
  for (int i = 0; i < kReplayKeys; ++i) {
    if (!guard.execute(replay_id(i), kPayload, handler)) return false;
  }
  return true;
}

void BM_Async_Sqlite(benchmark::State& state, bool fresh) {
  SqliteFile file;
  idem::sqlite::AsyncStore store(file.options());
  if (!write_replay_keys(store.store())) {
    state.SkipWithError("the replay keys were not recorded");
    return;
  }
  idem::AsyncGuard guard{store, kOptions};
  net::io_context io;
  // Nothing of the store's keeps the loop busy between batches (a socket does for the other
  // stores): without this, it stops once a batch's last call is done.
  const auto busy = net::make_work_guard(io);
  const int in_flight = static_cast<int>(state.range(0));
  int next = 0;
  while (state.KeepRunningBatch(in_flight * kPerCaller)) {
    const bool ok = run_guard_batch(
        io, in_flight,
        [&] {
          return guard.async_execute(fresh ? next_id("f") : replay_id(next++ % kReplayKeys),
                                     kPayload, handler);
        },
        [&](const auto& out) { return fresh ? out.recorded() : out.replayed(); });
    if (!ok) {
      state.SkipWithError(fresh ? "a fresh call was not recorded" : "a call was not a replay");
      return;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

// What the guard asks of the store for each call, without the guard and without the thread.
void BM_Async_Sqlite_bare(benchmark::State& state, bool fresh) {
  SqliteFile file;
  idem::SqliteStore store(file.options());
  if (!write_replay_keys(store)) {
    state.SkipWithError("the replay keys were not recorded");
    return;
  }
  const idem::Fingerprint fingerprint = idem::xxh3_128(kPayload);
  int next = 0;
  for (auto _ : state) {
    const idem::detail::EffectiveKey key(kOptions.scope, {},
                                         fresh ? next_id("b") : replay_id(next++ % kReplayKeys));
    idem::Result<idem::Claim> claim = store.claim(idem::ClaimRequest{
        .key = key.view(), .fingerprint = fingerprint, .lease = kLease, .retention = kTtl});
    const bool ok = claim && claim->status == (fresh ? idem::ClaimStatus::acquired
                                                     : idem::ClaimStatus::completed);
    if (ok && fresh) {
      const std::string result = handler();
      if (!store.commit(idem::Ticket{key.view(), claim->fence},
                        idem::Completion{idem::ClaimStatus::completed, result, kTtl})) {
        state.SkipWithError("a commit failed");
        return;
      }
    }
    if (!ok) {
      state.SkipWithError(fresh ? "a fresh claim did not acquire" : "a claim was not a replay");
      return;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

// Always registered: SQLite needs no server (each benchmark on files of its own).
bool register_sqlite_benchmarks() {
  for (bool fresh : {true, false}) {
    const std::string name = fresh ? "BM_Async_Sqlite_Fresh" : "BM_Async_Sqlite_Replay";
    benchmark::RegisterBenchmark(name.c_str(), BM_Async_Sqlite, fresh)
        ->ArgName("in_flight")
        ->Arg(1)
        ->Arg(8)
        ->UseRealTime();
    benchmark::RegisterBenchmark((name + "_bare").c_str(), BM_Async_Sqlite_bare, fresh)
        ->UseRealTime();
  }
  return true;
}

[[maybe_unused]] const bool registered = add_part({&register_sqlite_benchmarks});

}  // namespace

}  // namespace idem_bench_async
