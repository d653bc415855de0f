// idem::prometheus: after a known sequence of calls the counters hold the expected values, the
// histograms count the timed calls, the watched stores' own figures are read at the scrape, and
// the text exposition parses as the Prometheus format.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "idem/cached_store.hpp"
#include "idem/guard.hpp"
#include "idem/memory/store.hpp"
#include "idem/prometheus.hpp"
#include "idem/redis/stats.hpp"
#include "idem/sql/stats.hpp"
#include "idem/sqlite/store.hpp"
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

// The metrics' text exposition, checked to parse as the Prometheus text format.
std::string valid_text(const idem::PrometheusMetrics& metrics) {
  std::string text = metrics.text();
  std::string why;
  EXPECT_TRUE(idem::test::valid_prometheus_text(text, why)) << why << "\n" << text;
  return text;
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

  const std::string text = valid_text(metrics);
  const std::string labels = "scope=\"pay\",store=\"memory\"";
  for (const auto& [event, count] :
       {std::pair{"executed", 3}, std::pair{"replayed", 5}, std::pair{"mismatched", 1},
        std::pair{"rejected", 1}, std::pair{"result_unrecorded", 0}}) {
    EXPECT_EQ(
        sample(text, "idem_events_total{event=\"" + std::string(event) + "\"," + labels + "}"),
        count)
        << event;
  }
  // Every call that reached the store was timed: 9 claims, 3 commits.
  EXPECT_EQ(sample(text, "idem_claim_seconds_count{" + labels + "}"), 9);
  EXPECT_EQ(sample(text, "idem_commit_seconds_count{" + labels + "}"), 3);
  EXPECT_EQ(sample(text, "idem_handler_seconds_count{" + labels + "}"), 3);

  // The counts are collected by collectable(), the histograms kept in the registry: an Exposer
  // registers both.
  double executed = -1;
  for (const auto& family : metrics.collectable()->Collect()) {
    if (family.name != "idem_events_total") continue;
    for (const auto& m : family.metric) {
      if (m.label.front().value == "executed") executed = m.counter.value;
    }
  }
  EXPECT_EQ(executed, 3);
  bool histogram_in_registry = false;
  for (const auto& family : registry->Collect()) {
    EXPECT_NE(family.name, "idem_events_total");
    histogram_in_registry = histogram_in_registry || family.name == "idem_claim_seconds";
  }
  EXPECT_TRUE(histogram_in_registry);
}

// Events counted on many threads, some of which exit before the scrape, are all there.
TEST(PrometheusMetrics, CountsFromManyThreadsAreExact) {
  auto registry = std::make_shared<prometheus::Registry>();
  idem::PrometheusMetrics metrics{registry};
  idem::MemoryStore store;
  idem::IdempotencyGuard guard{store, idem::Options{.scope = "t", .observer = metrics.observer()}};
  for (int round = 0; round < 2; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 250; ++i) {
          (void)guard.execute("k" + std::to_string(t * 250 + i), [] { return 1; });
        }
      });
    }
    for (auto& th : threads) th.join();
  }
  const std::string text = valid_text(metrics);
  const std::string labels = "scope=\"t\",store=\"memory\"";
  EXPECT_EQ(sample(text, "idem_events_total{event=\"executed\"," + labels + "}"), 1000);
  EXPECT_EQ(sample(text, "idem_events_total{event=\"replayed\"," + labels + "}"), 1000);
}

// A backend's own part of StoreStats (here the Redis and replica parts, set by hand) is exported
// through StatSink under its own families, with the exporter naming no backend.
TEST(PrometheusMetrics, ABackendsOwnPartsAreExportedUnderTheirFamilies) {
  auto registry = std::make_shared<prometheus::Registry>();
  idem::PrometheusMetrics metrics{registry};
  metrics.watch_store("routes", [] {
    idem::StoreStats stats{.store = "redis"};
    stats.parts.set(idem::RedisStats{.pipeline_connections = 2, .moved = 3, .asked = 4});
    stats.parts.set(idem::ReplicaStats{.hits = 5, .errors = 1, .pool = {.size = 4, .opened = 6}});
    return stats;
  });
  const std::string text = valid_text(metrics);
  const std::string store = "name=\"routes\",store=\"redis\"";
  EXPECT_EQ(sample(text, "idem_store_redis_pipeline_connections{" + store + "}"), 2);
  EXPECT_EQ(sample(text, "idem_store_redis_events_total{event=\"moved\"," + store + "}"), 3);
  EXPECT_EQ(sample(text, "idem_store_redis_events_total{event=\"asked\"," + store + "}"), 4);
  EXPECT_EQ(
      sample(text,
             "idem_store_replica_reads_total{name=\"routes\",result=\"hit\",store=\"redis\"}"),
      5);
  EXPECT_EQ(
      sample(text,
             "idem_store_replica_reads_total{name=\"routes\",result=\"error\",store=\"redis\"}"),
      1);
  EXPECT_EQ(sample(text, "idem_store_pool_size{name=\"routes\",pool=\"replica\",store=\"redis\"}"),
            4);
  EXPECT_EQ(sample(text,
                   "idem_store_pool_events_total{event=\"opened\",name=\"routes\","
                   "pool=\"replica\",store=\"redis\"}"),
            6);
  EXPECT_NE(text.find("# TYPE idem_store_redis_pipeline_connections gauge"), std::string::npos);
  EXPECT_NE(text.find("# TYPE idem_store_redis_events_total counter"), std::string::npos);
}

TEST(PrometheusMetrics, WatchedStoresFiguresAreReadAtTheScrape) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("idem_metrics_" + std::to_string(::getpid()) + ".db"))
                               .string();
  auto remove_files = [&] {
    for (const char* s : {"", "-wal", "-shm", "-fences"}) std::filesystem::remove(path + s);
  };
  remove_files();
  {
    auto registry = std::make_shared<prometheus::Registry>();
    idem::PrometheusMetrics metrics{registry};
    idem::MemoryStore memory{idem::MemoryStoreOptions{.shards = 1, .capacity = 2}};
    idem::SqliteStore sqlite{idem::SqliteStoreOptions{.path = path}};
    metrics.watch_store("cache", memory);
    metrics.watch_store("ledger", sqlite);
    idem::IdempotencyGuard on_memory{memory, idem::Options{.scope = "m"}};
    idem::IdempotencyGuard on_sqlite{sqlite, idem::Options{.scope = "s"}};
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(on_memory.execute("k" + std::to_string(i), [] { return 1; }));
      ASSERT_TRUE(on_sqlite.execute("k" + std::to_string(i), [] { return 1; }));
    }

    std::string text = valid_text(metrics);
    const std::string cache = "name=\"cache\",store=\"memory\"";
    EXPECT_EQ(sample(text, "idem_store_records{" + cache + "}"), 2);
    EXPECT_EQ(sample(text, "idem_store_evictions_total{" + cache + "}"), 1);
    EXPECT_EQ(text.find("idem_store_pool_size{name=\"cache\""), std::string::npos);
    const std::string ledger = "name=\"ledger\",pool=\"primary\"";
    EXPECT_EQ(sample(text, "idem_store_pool_size{" + ledger + ",store=\"sqlite\"}"), 1);
    EXPECT_EQ(sample(text, "idem_store_pool_events_total{event=\"opened\"," + ledger +
                               ",store=\"sqlite\"}"),
              1);
    EXPECT_EQ(
        sample(text, "idem_store_pool_connections{" + ledger + ",state=\"idle\",store=\"sqlite\"}"),
        1);
    EXPECT_EQ(text.find("idem_store_records{name=\"ledger\""), std::string::npos);

    // Read again at the next scrape, not kept from the first.
    ASSERT_TRUE(on_memory.execute("k9", [] { return 1; }));
    text = metrics.text();
    EXPECT_EQ(sample(text, "idem_store_evictions_total{" + cache + "}"), 2);
    // The same families through the collectable an Exposer registers.
    bool found = false;
    for (const auto& family : metrics.collectable()->Collect()) {
      found = found || family.name == "idem_store_records";
    }
    EXPECT_TRUE(found);
  }
  remove_files();
}

TEST(PrometheusMetrics, ACachedStoreShowsItsCacheBesideTheWrappedStore) {
  auto registry = std::make_shared<prometheus::Registry>();
  idem::PrometheusMetrics metrics{registry};
  idem::MemoryStore memory;
  idem::CachedStore<idem::MemoryStore&> cached{idem::CachedStoreOptions{}, memory};
  metrics.watch_store("front", cached);
  idem::IdempotencyGuard guard{cached, idem::Options{.scope = "c"}};
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(guard.execute("k", [] { return 1; }));

  const std::string text = valid_text(metrics);
  const std::string front = "name=\"front\",store=\"memory\"";
  EXPECT_EQ(sample(text, "idem_store_records{" + front + "}"), 1);
  EXPECT_EQ(sample(text, "idem_store_cache_entries{" + front + "}"), 1);
  EXPECT_EQ(sample(text, "idem_store_cache_events_total{event=\"hit\"," + front + "}"), 3);
  EXPECT_EQ(sample(text, "idem_store_cache_events_total{event=\"miss\"," + front + "}"), 1);
  EXPECT_EQ(sample(text, "idem_store_cache_events_total{event=\"eviction\"," + front + "}"), 0);
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
