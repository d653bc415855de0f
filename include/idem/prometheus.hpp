#pragma once
// idem::prometheus: the guard's events and the watched stores' figures as Prometheus metrics
// (prometheus-cpp 1.0); the metric names and what to alert on: docs/operations.md.

#include <prometheus/collectable.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "idem/observer.hpp"
#include "idem/store_stats.hpp"

namespace idem {

struct PrometheusOptions {
  std::string prefix = "idem_";  ///< prepended to every metric name
  /// Histogram bucket bounds, in seconds (default: 50 µs to 10 s).
  std::vector<double> buckets{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                              0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10};
  /// Time one guard call in N per thread for the histograms; 0: none. Counters count every event.
  std::uint32_t time_one_in = 32;
};

/// The metrics of one registry. Thread-safe; any number of guards may share its observer.
class PrometheusMetrics {
 public:
  explicit PrometheusMetrics(std::shared_ptr<prometheus::Registry> registry,
                             PrometheusOptions options = {});
  ~PrometheusMetrics();
  PrometheusMetrics(const PrometheusMetrics&) = delete;
  PrometheusMetrics& operator=(const PrometheusMetrics&) = delete;

  /// Counts `info` (and observes its durations when it carries them).
  void record(const EventInfo& info);
  /// An Observer feeding these metrics (set it as Options::observer); `also`, when set, hears
  /// every event too (a logger: idem::spdlog_callback). The metrics must outlive it.
  std::shared_ptr<Observer> observer(Observer::Callback also = {});
  /// Exports a store's own figures (its stats()) as the idem_store_* metrics, labelled {name,
  /// store}: `read` is called at each collection (text(), or an Exposer's), never in between. It
  /// must stay callable as long as the metrics are collected.
  void watch_store(std::string name, std::function<StoreStats()> read);
  /// The same for a store (MemoryStore, SqliteStore, ...), which must outlive the metrics.
  template <HasStoreStats S>
  void watch_store(std::string name, const S& store) {
    watch_store(std::move(name), std::function<StoreStats()>([&store] { return store.stats(); }));
  }
  /// What the metrics collect outside the registry: idem_events_total and the watched stores'
  /// figures. With prometheus-cpp's Exposer, register this beside the registry; text() has both.
  std::shared_ptr<prometheus::Collectable> collectable() const;

  /// These metrics (the registry's and collectable()'s) in the Prometheus text format 0.0.4.
  std::string text() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace idem
