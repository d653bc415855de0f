#pragma once
// What /metrics shows: the guard's events (idem's Prometheus observer, include/idem/prometheus.hpp)
// and the proxy's own counters: requests forwarded to the upstream (guarded or not), answers
// replayed from the store, and the answers the proxy gave itself, by status.

#include <functional>
#include <memory>
#include <string>

#include "idem/observer.hpp"
#include "idem/store_stats.hpp"

namespace idem::proxy {

class ProxyMetrics {
 public:
  ProxyMetrics();
  ~ProxyMetrics();
  ProxyMetrics(const ProxyMetrics&) = delete;
  ProxyMetrics& operator=(const ProxyMetrics&) = delete;

  /// The observer to set as the guard's Options::observer.
  std::shared_ptr<Observer> observer();

  /// A request sent to the upstream; `guarded`: under a key.
  void forwarded(bool guarded);
  /// A repeat answered from the store.
  void replayed();
  /// An answer the proxy gave itself (400, 409, 413, 422, 502, 504...).
  void refused(int status);
  /// Exports the store's figures as idem_store_* (its replay cache's hits, misses, evictions
  /// and entries), labelled name="proxy": `read` is called at each /metrics and must stay
  /// callable while it is served.
  void watch_store(std::function<StoreStats()> read);

  /// Every metric in the Prometheus text format 0.0.4.
  std::string text() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace idem::proxy
