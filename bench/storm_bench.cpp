// The duplicate storm (duplicate_storm.hpp) on MemoryStore: woken duplicates against polled
// ones (the same store behind a wrapper hiding its wake), beside the floor of waking 31 threads.
//
//   build/bench/idem_bench_storm
//
// Figures and how to read them: docs/performance.md ("Duplicates: woken, not polled").

#include <benchmark/benchmark.h>

#include "duplicate_storm.hpp"
#include "idem/memory/store.hpp"

namespace {

void BM_Storm_Memory_Woken(benchmark::State& state) {
  idem::MemoryStore store;
  idem::bench::run_storm</*Wakes=*/true>(state, store, "woken-");
}

void BM_Storm_Memory_Polled(benchmark::State& state) {
  idem::MemoryStore store;
  idem::bench::run_storm</*Wakes=*/false>(state, store, "polled-");
}

void BM_Storm_bare(benchmark::State& state) { idem::bench::run_storm_bare(state); }

}  // namespace

BENCHMARK(BM_Storm_Memory_Woken)->Apply(idem::bench::storm_shape);
BENCHMARK(BM_Storm_Memory_Polled)->Apply(idem::bench::storm_shape);
BENCHMARK(BM_Storm_bare)->Apply(idem::bench::storm_shape);

BENCHMARK_MAIN();
