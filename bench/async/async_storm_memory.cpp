// The asynchronous duplicate storm (async_storm.hpp) on ThreadedAsyncStore<MemoryStore>: woken
// on the adapter's wait threads against polled, beside the bare floor. Needs no server.

#include <benchmark/benchmark.h>

#include <boost/asio/io_context.hpp>

#include "async_bench.hpp"
#include "async_storm.hpp"
#include "idem/asio/threaded_store.hpp"
#include "idem/memory/store.hpp"

namespace idem_bench_async {
namespace {

template <bool Wakes>
void BM_AsyncStorm_ThreadedMemory(benchmark::State& state) {
  net::io_context io;
  idem::ThreadedAsyncStore<idem::MemoryStore> store{idem::ThreadedStoreOptions{}};
  idem::bench::run_async_storm<Wakes>(state, io, store, "storm-");
}

void BM_AsyncStorm_bare(benchmark::State& state) { idem::bench::run_storm_bare(state); }

bool register_storm_benchmarks() {
  benchmark::RegisterBenchmark("BM_AsyncStorm_ThreadedMemory_Woken",
                               &BM_AsyncStorm_ThreadedMemory<true>)
      ->Apply(idem::bench::storm_shape);
  benchmark::RegisterBenchmark("BM_AsyncStorm_ThreadedMemory_Polled",
                               &BM_AsyncStorm_ThreadedMemory<false>)
      ->Apply(idem::bench::storm_shape);
  benchmark::RegisterBenchmark("BM_AsyncStorm_bare", &BM_AsyncStorm_bare)
      ->Apply(idem::bench::storm_shape);
  return true;
}

[[maybe_unused]] const bool registered = add_part({&register_storm_benchmarks});

}  // namespace
}  // namespace idem_bench_async
