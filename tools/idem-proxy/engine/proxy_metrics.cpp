#include "proxy_metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <map>
#include <mutex>
#include <utility>

#include "idem/prometheus.hpp"

namespace idem::proxy {

struct ProxyMetrics::Impl {
  Impl()
      : registry(std::make_shared<prometheus::Registry>()),
        metrics(registry),
        forwarded(prometheus::BuildCounter()
                      .Name("idem_proxy_forwarded_total")
                      .Help("Requests idem-proxy sent to its upstream")
                      .Register(*registry)),
        guarded(forwarded.Add({{"guarded", "true"}})),
        unguarded(forwarded.Add({{"guarded", "false"}})),
        replays(prometheus::BuildCounter()
                    .Name("idem_proxy_replays_total")
                    .Help("Repeats idem-proxy answered from the store")
                    .Register(*registry)
                    .Add({})),
        refusals(prometheus::BuildCounter()
                     .Name("idem_proxy_refusals_total")
                     .Help("Answers idem-proxy gave itself, by status")
                     .Register(*registry)) {}

  std::shared_ptr<prometheus::Registry> registry;
  PrometheusMetrics metrics;
  prometheus::Family<prometheus::Counter>& forwarded;
  prometheus::Counter& guarded;
  prometheus::Counter& unguarded;
  prometheus::Counter& replays;
  prometheus::Family<prometheus::Counter>& refusals;
  std::mutex mutex;  // by_status
  std::map<int, prometheus::Counter*> by_status;
};

ProxyMetrics::ProxyMetrics() : impl_(std::make_unique<Impl>()) {}
ProxyMetrics::~ProxyMetrics() = default;

std::shared_ptr<Observer> ProxyMetrics::observer() { return impl_->metrics.observer(); }

void ProxyMetrics::forwarded(bool guarded) {
  (guarded ? impl_->guarded : impl_->unguarded).Increment();
}

void ProxyMetrics::replayed() { impl_->replays.Increment(); }

void ProxyMetrics::refused(int status) {
  prometheus::Counter* counter = nullptr;
  {
    std::lock_guard lock(impl_->mutex);
    prometheus::Counter*& slot = impl_->by_status[status];
    if (slot == nullptr) slot = &impl_->refusals.Add({{"status", std::to_string(status)}});
    counter = slot;
  }
  counter->Increment();
}

void ProxyMetrics::watch_store(std::function<StoreStats()> read) {
  impl_->metrics.watch_store("proxy", std::move(read));
}

std::string ProxyMetrics::text() const { return impl_->metrics.text(); }

}  // namespace idem::proxy
