// The metrics observer: links idem::prometheus (and prometheus-cpp's core); an event the observer
// hears is counted in the registry's text.
#include <prometheus/registry.h>

#include <cstdio>
#include <idem/prometheus.hpp>
#include <memory>
#include <string>

int main() {
  idem::PrometheusMetrics metrics{std::make_shared<prometheus::Registry>()};
  metrics.observer()->notify(
      idem::EventInfo{.event = idem::Event::replayed, .scope = "package", .store = "memory"});
  const std::string text = metrics.text();
  const bool ok =
      text.find("idem_events_total{event=\"replayed\",scope=\"package\",store=\"memory\"} 1") !=
      std::string::npos;
  std::printf("idem::prometheus consumer: %s\n", ok ? "ok" : text.c_str());
  return ok ? 0 : 1;
}
