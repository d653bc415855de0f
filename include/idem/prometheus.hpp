#pragma once
// idem::prometheus: the guard's events as Prometheus metrics (prometheus-cpp 1.0), in a registry
// the application owns and exposes (its own /metrics route, or prometheus-cpp's Exposer).
//
//   idem_events_total{scope, store, event}     every Observer event (idem::Event names)
//   idem_claim_seconds{scope, store}           histograms of the timed calls' parts
//   idem_handler_seconds{scope, store}         (Observer::Settings::time_one_in: a sample)
//   idem_commit_seconds{scope, store}
//
// What to alert on: docs/operations.md.

#include <prometheus/registry.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "idem/observer.hpp"

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
  /// The registry's metrics in the Prometheus text exposition format (version 0.0.4).
  std::string text() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace idem
