#pragma once
// The stores' own figures (idem::StoreStats) as Prometheus metrics, read only at a scrape.

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "idem/store_stats.hpp"

namespace idem::detail {

class StoreCollectable final : public prometheus::Collectable {
 public:
  explicit StoreCollectable(std::string prefix) : prefix_(std::move(prefix)) {}

  /// Reads `read` at every collection, its metrics labelled {store, name}.
  void watch(std::string name, std::function<StoreStats()> read);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct Watched {
    std::string name;
    std::function<StoreStats()> read;
  };

  std::string prefix_;
  mutable std::mutex mutex_;
  std::vector<Watched> watched_;
};

}  // namespace idem::detail
