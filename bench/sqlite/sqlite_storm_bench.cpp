// The duplicate storm (duplicate_storm.hpp) on SqliteStore, one store of one process on a WAL
// file: woken duplicates against polled ones (the same store behind a wrapper hiding its wake),
// beside the floor of waking 31 threads.
//
//   build/bench/idem_bench_sqlite_storm
//
// Figures and how to read them: docs/performance.md ("Duplicates: woken, not polled").

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "duplicate_storm.hpp"
#include "idem/sqlite/store.hpp"

namespace {

class StormFile {
 public:
  StormFile()
      : path_(std::filesystem::temp_directory_path() /
              ("idem_storm_" + std::to_string(::getpid()) + ".db")) {}
  ~StormFile() {
    std::error_code ignored;
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::filesystem::remove(path_.string() + suffix, ignored);
    }
  }
  StormFile(const StormFile&) = delete;
  StormFile& operator=(const StormFile&) = delete;
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

template <bool Wakes>
void storm(benchmark::State& state, const char* prefix) {
  StormFile file;
  idem::SqliteStore store{idem::SqliteStoreOptions{.path = file.path()}};
  if (!store.ensure_schema()) {
    state.SkipWithError("the SQLite file could not be opened");
    return;
  }
  idem::bench::run_storm<Wakes>(state, store, prefix);
}

void BM_Storm_Sqlite_Woken(benchmark::State& state) { storm<true>(state, "woken-"); }
void BM_Storm_Sqlite_Polled(benchmark::State& state) { storm<false>(state, "polled-"); }
void BM_Storm_bare(benchmark::State& state) { idem::bench::run_storm_bare(state); }

}  // namespace

BENCHMARK(BM_Storm_Sqlite_Woken)->Apply(idem::bench::storm_shape);
BENCHMARK(BM_Storm_Sqlite_Polled)->Apply(idem::bench::storm_shape);
BENCHMARK(BM_Storm_bare)->Apply(idem::bench::storm_shape);

BENCHMARK_MAIN();
