// The cost of observing: memory replays through a guard with no observer (the bare twin),
// with idem::prometheus at its defaults (every event counted, one call in 32 timed into the
// histograms), and with every call timed. Same store, keys and payload in every variant.

#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "idem/guard.hpp"
#include "idem/memory/store.hpp"
#include "idem/prometheus.hpp"

namespace {

constexpr std::size_t kKeys = 16'384;
constexpr std::string_view kPayload = "{\"amount\":4200,\"currency\":\"EUR\"}";

const std::vector<std::string>& keys() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < kKeys; ++i) out.push_back("order-" + std::to_string(i));
    return out;
  }();
  return k;
}

std::string handler() { return "receipt-0000000042"; }

// A store whose keys all hold a result, and a guard over it with `observer`.
struct Replays {
  explicit Replays(std::shared_ptr<idem::Observer> observer)
      : guard(store, idem::Options{.scope = "payments.charge", .observer = std::move(observer)}) {
    for (const std::string& k : keys()) (void)guard.execute(k, kPayload, handler);
  }
  idem::MemoryStore store;
  idem::IdempotencyGuard<idem::MemoryStore> guard;
};

void run(benchmark::State& state, Replays& r) {
  std::size_t i = 0;
  for (auto _ : state) {
    idem::Outcome<std::string> out = r.guard.execute(keys()[i++ & (kKeys - 1)], kPayload, handler);
    if (!out.replayed()) {
      state.SkipWithError("a stored key did not replay");
      break;
    }
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Replay_NoObserver_bare(benchmark::State& state) {
  static Replays r{nullptr};
  run(state, r);
}

// An Observer alone (its own counters, no callback): the guard's share of the cost.
void BM_Replay_ObserverCountersOnly(benchmark::State& state) {
  static Replays r{std::make_shared<idem::Observer>()};
  run(state, r);
}

// idem::prometheus counting every event, timing none.
void BM_Replay_PrometheusCountersOnly(benchmark::State& state) {
  static auto registry = std::make_shared<prometheus::Registry>();
  static idem::PrometheusMetrics metrics{registry, {.time_one_in = 0}};
  static Replays r{metrics.observer()};
  run(state, r);
}

void BM_Replay_Prometheus(benchmark::State& state) {
  static auto registry = std::make_shared<prometheus::Registry>();
  static idem::PrometheusMetrics metrics{registry};
  static Replays r{metrics.observer()};
  run(state, r);
}

void BM_Replay_PrometheusEveryCallTimed(benchmark::State& state) {
  static auto registry = std::make_shared<prometheus::Registry>();
  static idem::PrometheusMetrics metrics{registry, {.time_one_in = 1}};
  static Replays r{metrics.observer()};
  run(state, r);
}

}  // namespace

BENCHMARK(BM_Replay_NoObserver_bare)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_Replay_ObserverCountersOnly)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_Replay_PrometheusCountersOnly)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_Replay_Prometheus)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_Replay_PrometheusEveryCallTimed)->Repetitions(5)->ReportAggregatesOnly(true);

BENCHMARK_MAIN();
