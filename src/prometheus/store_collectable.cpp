// StoreCollectable: one metric family per figure, one series per watched store, at each scrape.

#include "store_collectable.hpp"

#include <prometheus/client_metric.h>
#include <prometheus/metric_type.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string_view>

namespace idem::detail {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;
template <std::size_t N>
using Counts = std::array<std::pair<const char*, std::uint64_t>, N>;

class Families {
 public:
  explicit Families(const std::string& prefix) : prefix_(prefix) {}

  // `help` is the family's, taken from its first series.
  void add(std::string_view name, std::string_view help, MetricType type, Labels labels,
           double value) {
    const std::string full = prefix_ + std::string(name);
    auto [it, fresh] = index_.try_emplace(full, families_.size());
    if (fresh) {
      MetricFamily family;
      family.name = full;
      family.help = std::string(help);
      family.type = type;
      families_.push_back(std::move(family));
    }
    std::sort(labels.begin(), labels.end());  // as the registry's own series have them
    ClientMetric metric;
    metric.label = std::move(labels);
    if (type == MetricType::Counter) {
      metric.counter.value = value;
    } else {
      metric.gauge.value = value;
    }
    families_[it->second].metric.push_back(std::move(metric));
  }

  std::vector<MetricFamily> take() { return std::move(families_); }

 private:
  const std::string& prefix_;
  std::map<std::string, std::size_t> index_;
  std::vector<MetricFamily> families_;
};

Labels with(Labels labels, std::string name, std::string value) {
  labels.push_back({std::move(name), std::move(value)});
  return labels;
}

double number(std::uint64_t n) { return static_cast<double>(n); }

void add_pool(Families& out, const Labels& store, std::string pool_name, const PoolStats& pool) {
  const Labels labels = with(store, "pool", std::move(pool_name));
  out.add("store_pool_size", "most connections the store's pool opens at once", MetricType::Gauge,
          labels, number(pool.size));
  out.add("store_pool_connections", "the pool's connections now, in use or idle", MetricType::Gauge,
          with(labels, "state", "in_use"), number(pool.in_use));
  out.add("store_pool_connections", {}, MetricType::Gauge, with(labels, "state", "idle"),
          number(pool.idle));
  const Counts<5> events{{{"opened", pool.opened},
                          {"reused", pool.reused},
                          {"discarded", pool.discarded},
                          {"waited", pool.waits},
                          {"timed_out", pool.timeouts}}};
  for (const auto& [event, count] : events) {
    out.add("store_pool_events_total",
            "pool events: connections opened, reused, discarded; calls that waited or timed out",
            MetricType::Counter, with(labels, "event", event), number(count));
  }
}

class FamilySink final : public StatSink {
 public:
  FamilySink(Families& out, const Labels& store) : out_(out), store_(store) {}
  void figure(const StatFigure& f) override {
    out_.add(
        f.family, f.help, f.counter ? MetricType::Counter : MetricType::Gauge,
        f.label.empty() ? store_ : with(store_, std::string(f.label), std::string(f.label_value)),
        number(f.value));
  }
  void pool(std::string_view name, const PoolStats& pool) override {
    add_pool(out_, store_, std::string(name), pool);
  }

 private:
  Families& out_;
  const Labels& store_;
};

}  // namespace

void StoreCollectable::watch(std::string name, std::function<StoreStats()> read) {
  std::lock_guard lock(mutex_);
  watched_.push_back(Watched{std::move(name), std::move(read)});
}

std::vector<prometheus::MetricFamily> StoreCollectable::Collect() const {
  Families out(prefix_);
  std::lock_guard lock(mutex_);
  for (const Watched& w : watched_) {
    const StoreStats s = w.read();
    const Labels store{{"name", w.name}, {"store", std::string(s.store)}};
    if (s.records) {
      out.add("store_records", "records the store holds now", MetricType::Gauge, store,
              number(*s.records));
    }
    if (s.evictions) {
      out.add("store_evictions_total", "records evicted by the store's capacity bound",
              MetricType::Counter, store, number(*s.evictions));
    }
    if (s.pool) add_pool(out, store, "primary", *s.pool);
    if (s.cache) {
      out.add("store_cache_entries", "records a CachedStore holds now", MetricType::Gauge, store,
              number(s.cache->entries));
      const Counts<3> lookups{
          {{"hit", s.cache->hits}, {"miss", s.cache->misses}, {"eviction", s.cache->evictions}}};
      for (const auto& [event, count] : lookups) {
        out.add("store_cache_events_total",
                "a CachedStore's claims answered from the cache (hit) or passed on (miss), and "
                "records evicted",
                MetricType::Counter, with(store, "event", event), number(count));
      }
    }
    if (s.group) {
      out.add("store_group_commit_groups_total", "groups a GroupCommitStore wrote",
              MetricType::Counter, store, number(s.group->groups));
      out.add("store_group_commit_calls_total",
              "calls those groups carried (over groups: the mean group size)", MetricType::Counter,
              store, number(s.group->calls));
    }
    FamilySink sink(out, store);
    s.parts.report(sink);
  }
  return out.take();
}

}  // namespace idem::detail
