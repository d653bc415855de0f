// The cost of steps (Context::step): a guarded handler of N steps beside its bare twin, the same
// guarded handler doing the same work without steps, on MemoryStore and SqliteStore (lease mode).
// Fresh keys only: each call claims, loads the (no) recorded steps, saves N steps and commits.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "idem/idem.hpp"
#include "idem/sqlite/store.hpp"

namespace {

constexpr std::string_view kPayload = R"({"from":"A","to":"B","amount":1200})";

std::string key(long long i) { return "ride-" + std::to_string(1'000'000'000'000LL + i); }

std::string work(int step) { return "result-of-step-" + std::to_string(step); }

// The handler with state.range(0) steps, or the same work without them.
template <class Guard>
void run(benchmark::State& state, Guard& guard, bool steps) {
  const int n = static_cast<int>(state.range(0));
  long long i = 0;
  for (auto _ : state) {
    auto out = guard.execute(key(i++), kPayload, [&](idem::Context& ctx) {
      std::string last;
      for (int s = 0; s < n; ++s) {
        last = steps ? ctx.step("step-" + std::to_string(s), [&] { return work(s); }) : work(s);
      }
      return last;
    });
    if (!out.recorded()) state.SkipWithError("not recorded");
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations());
}

void memory(benchmark::State& state, bool steps) {
  idem::MemoryStore store;
  idem::IdempotencyGuard guard{store, idem::Options{.scope = "rides"}};
  run(state, guard, steps);
}
void BM_Step_Memory_Fresh(benchmark::State& state) { memory(state, true); }
void BM_Step_Memory_Fresh_bare(benchmark::State& state) { memory(state, false); }

void sqlite(benchmark::State& state, bool steps) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("idem_step_bench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    idem::SqliteStore store{idem::SqliteStoreOptions{.path = (dir / "steps.db").string()}};
    idem::IdempotencyGuard guard{store, idem::Options{.scope = "rides"}};
    run(state, guard, steps);
  }
  std::filesystem::remove_all(dir);
}
void BM_Step_Sqlite_Fresh(benchmark::State& state) { sqlite(state, true); }
void BM_Step_Sqlite_Fresh_bare(benchmark::State& state) { sqlite(state, false); }

// Arg: steps per handler (the bare twin does the same work without them).
BENCHMARK(BM_Step_Memory_Fresh)->ArgName("steps")->Arg(1)->Arg(3);
BENCHMARK(BM_Step_Memory_Fresh_bare)->ArgName("steps")->Arg(1)->Arg(3);
BENCHMARK(BM_Step_Sqlite_Fresh)->ArgName("steps")->Arg(1)->Arg(3)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Step_Sqlite_Fresh_bare)
    ->ArgName("steps")
    ->Arg(1)
    ->Arg(3)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
