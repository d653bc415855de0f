// idem::prometheus: after a known sequence of calls the counters hold the expected values, the
// histograms count the timed calls, and the text exposition parses as the Prometheus format.

#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>

#include "idem/guard.hpp"
#include "idem/prometheus.hpp"
#include "idem/stores/memory_store.hpp"
#include "prometheus_text.hpp"

namespace {

double sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

TEST(PrometheusMetrics, KnownCallsGiveExpectedValuesInValidTextFormat) {
  auto registry = std::make_shared<prometheus::Registry>();
  idem::PrometheusMetrics metrics{registry, {.time_one_in = 1}};
  idem::MemoryStore store;
  idem::IdempotencyGuard guard{store,
                               idem::Options{.scope = "pay", .observer = metrics.observer()}};
  for (int i = 0; i < 3; ++i) (void)guard.execute("k" + std::to_string(i), "p", [] { return 1; });
  for (int i = 0; i < 5; ++i) (void)guard.execute("k0", "p", [] { return 1; });
  (void)guard.execute("k1", "other", [] { return 1; });
  (void)guard.execute("", [] { return 1; });

  const std::string text = metrics.text();
  std::string why;
  EXPECT_TRUE(idem::test::valid_prometheus_text(text, why)) << why << "\n" << text;
  const std::string labels = "scope=\"pay\",store=\"memory\"";
  EXPECT_EQ(sample(text, "idem_events_total{event=\"executed\"," + labels + "}"), 3);
  EXPECT_EQ(sample(text, "idem_events_total{event=\"replayed\"," + labels + "}"), 5);
  EXPECT_EQ(sample(text, "idem_events_total{event=\"mismatched\"," + labels + "}"), 1);
  EXPECT_EQ(sample(text, "idem_events_total{event=\"rejected\"," + labels + "}"), 1);
  EXPECT_EQ(sample(text, "idem_events_total{event=\"result_unrecorded\"," + labels + "}"), 0);
  // Every call that reached the store was timed: 9 claims, 3 commits.
  EXPECT_EQ(sample(text, "idem_claim_seconds_count{" + labels + "}"), 9);
  EXPECT_EQ(sample(text, "idem_commit_seconds_count{" + labels + "}"), 3);
  EXPECT_EQ(sample(text, "idem_handler_seconds_count{" + labels + "}"), 3);
}

TEST(PrometheusMetrics, TheValidatorRejectsWhatIsNotTheTextFormat) {
  std::string why;
  EXPECT_FALSE(idem::test::valid_prometheus_text("idem_x{a=\"1\" 3\n", why));
  EXPECT_FALSE(idem::test::valid_prometheus_text("# TYPE idem_x nonsense\nidem_x 1\n", why));
  EXPECT_FALSE(idem::test::valid_prometheus_text("idem_x one\n", why));
  EXPECT_TRUE(
      idem::test::valid_prometheus_text("# HELP idem_x h\n# TYPE idem_x counter\nidem_x 1\n", why))
      << why;
}

}  // namespace
