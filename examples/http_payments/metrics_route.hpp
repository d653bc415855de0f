#pragma once
// GET /metrics: the guards' events and the stores' own figures in the Prometheus text format
// (idem::prometheus), when idem was built with it; without it, no route and no observer.

#include <httplib.h>

#include <memory>
#include <string>
#include <utility>

#include "idem/observer.hpp"
#include "transport/router.hpp"
#ifdef IDEM_HTTP_PAYMENTS_PROMETHEUS
#include "idem/prometheus.hpp"
#endif

namespace payments {

#ifdef IDEM_HTTP_PAYMENTS_PROMETHEUS
inline idem::PrometheusMetrics& metrics() {
  static idem::PrometheusMetrics m{std::make_shared<prometheus::Registry>()};
  return m;
}
/// The observer every guard of the service reports to.
inline std::shared_ptr<idem::Observer> metrics_observer() {
  static const std::shared_ptr<idem::Observer> observer = metrics().observer();
  return observer;
}
/// Exports the figures of `store` (anything with stats()) at /metrics, read at each scrape; it
/// must outlive the server.
template <class S>
void watch_store(std::string name, const S& store) {
  metrics().watch_store(std::move(name), store);
}
inline void mount_metrics(transport::Router& server) {
  server.get("/metrics", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics().text(), "text/plain; version=0.0.4");
  });
}
#else
inline std::shared_ptr<idem::Observer> metrics_observer() { return nullptr; }
template <class S>
void watch_store(std::string, const S&) {}
inline void mount_metrics(transport::Router&) {}
#endif

}  // namespace payments
