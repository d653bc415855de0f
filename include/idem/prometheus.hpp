#pragma once
// idem::prometheus: the guard's events as Prometheus metrics (prometheus-cpp 1.0). The histograms
// live in a registry the application owns; the event counts (counted per thread) and the stores'
// figures are collected by collectable(). text() serves both (an application's own /metrics
// route); with prometheus-cpp's Exposer, register the registry and collectable().
//
//   idem_events_total{scope, store, event}     every Observer event (idem::Event names)
//   idem_claim_seconds{scope, store}           histograms of the timed calls' parts
//   idem_handler_seconds{scope, store}         (Observer::Settings::time_one_in: a sample)
//   idem_commit_seconds{scope, store}
//
// and, for the stores watched (watch_store), their own figures read at each scrape:
//
//   idem_store_records{name, store}                             in-memory stores
//   idem_store_evictions_total{name, store}
//   idem_store_pool_size{name, store, pool}                     pool: primary or replica
//   idem_store_pool_connections{name, store, pool, state}       state: in_use, idle
//   idem_store_pool_events_total{name, store, pool, event}      opened, reused, discarded,
//                                                               waited, timed_out
//   idem_store_replica_reads_total{name, store, result}         hit, fall_through, error
//   idem_store_redis_pipeline_connections{name, store}
//   idem_store_cache_entries{name, store}                       CachedStore
//   idem_store_cache_events_total{name, store, event}           hit, miss, eviction
//   idem_store_group_commit_groups_total{name, store}           GroupCommitStore
//   idem_store_group_commit_calls_total{name, store}
//   idem_store_redis_events_total{name, store, event}           pipeline_dropped, moved, asked,
//                                                               slot_map_read, replication_timeout
//
// What to alert on: docs/operations.md.

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
  /// Prepended to every metric name.
  std::string prefix = "idem_";
  /// Histogram bucket bounds, in seconds (default: 50 µs to 10 s).
  std::vector<double> buckets{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                              0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10};
  /// Time one guard call in N per thread for the histograms (Observer::Settings::time_one_in);
  /// 0: no histograms, counters only. Counters count every event whatever this says.
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
  /// Exports a store's own figures (its stats(), idem::StoreStats) as the idem_store_* metrics,
  /// labelled {name, store}: `read` is called at every collection (text(), or an Exposer that
  /// registered collectable()), never in between, so the figures cost nothing between scrapes. It
  /// must stay callable as long as the metrics are collected.
  void watch_store(std::string name, std::function<StoreStats()> read);
  /// The same for a store (MemoryStore, SqliteStore, PostgresStore, RedisStore...), which must
  /// outlive the metrics.
  template <HasStoreStats S>
  void watch_store(std::string name, const S& store) {
    watch_store(std::move(name), std::function<StoreStats()>([&store] { return store.stats(); }));
  }
  /// What the metrics collect themselves, outside the registry: idem_events_total (counted per
  /// thread, summed at each collection) and the watched stores' figures. An application that
  /// exposes the registry with prometheus-cpp's Exposer registers this beside it
  /// (exposer.RegisterCollectable(metrics.collectable())); text() includes both.
  std::shared_ptr<prometheus::Collectable> collectable() const;

  /// These metrics (the registry's and collectable()'s), in the Prometheus text exposition
  /// format (version 0.0.4).
  std::string text() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace idem
