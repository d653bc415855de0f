// idem_bench_async: the benchmarks of every store whose server the environment names, SQLite's
// (on files of their own), and the loopback round trip that is the floor under a lone call.
//
//   IDEM_BENCH_REDIS_URI=redis://127.0.0.1:6379 IDEM_BENCH_PG_URI=postgresql://u@host/db
//   build/bench/idem_bench_async

#include <benchmark/benchmark.h>

#include <cstdio>

#include "async_bench.hpp"

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  idem_bench_async::register_floor_benchmarks();
  bool any = false;
  for (const idem_bench_async::Part& part : idem_bench_async::parts()) any = part.add() || any;
  if (!any) std::fprintf(stderr, "idem_bench_async: no store's server named: the floor only\n");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  for (const idem_bench_async::Part& part : idem_bench_async::parts()) {
    if (part.finish != nullptr) part.finish();
  }
  return 0;
}
