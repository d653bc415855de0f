// idem::prometheus: the Observer's events as Prometheus counters and histograms.

#include <prometheus/client_metric.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/detail/thread_counters.hpp"
#include "idem/prometheus.hpp"
#include "store_collectable.hpp"

namespace idem {

namespace {
constexpr std::size_t kEvents = static_cast<std::size_t>(Event::result_unrecorded) + 1;
std::atomic<std::uint64_t> next_instance{1};

// One (scope, store) label set's metrics. Events are counted per thread (no locked instruction)
// and summed at each collection, hence idem_events_total is not a prometheus::Counter.
struct Series {
  std::string scope;
  std::string store;
  detail::ThreadCounters<kEvents> events;
  prometheus::Histogram* claim = nullptr;
  prometheus::Histogram* handler = nullptr;
  prometheus::Histogram* commit = nullptr;
};

class Collected final : public prometheus::Collectable {
 public:
  explicit Collected(std::string prefix) : prefix_(std::move(prefix)), stores_(prefix_) {}

  template <class MakeHistograms>
  Series* find_or_add(std::string_view scope, std::string_view store, MakeHistograms make) {
    std::lock_guard lock(mutex_);
    auto key = std::make_pair(std::string(scope), std::string(store));
    auto it = series_.find(key);
    if (it == series_.end()) {
      auto s = std::make_unique<Series>();
      s->scope = key.first;
      s->store = key.second;
      make(*s);
      it = series_.emplace(std::move(key), std::move(s)).first;
    }
    return it->second.get();
  }

  detail::StoreCollectable& stores() { return stores_; }

  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily events;
    events.name = prefix_ + "events_total";
    events.help = "idem guard events (executed, replayed, in_progress, ...)";
    events.type = prometheus::MetricType::Counter;
    {
      std::lock_guard lock(mutex_);
      for (const auto& [key, s] : series_) {
        for (std::size_t e = 0; e < kEvents; ++e) {
          prometheus::ClientMetric metric;
          metric.label = {{"event", std::string(to_string(static_cast<Event>(e)))},
                          {"scope", s->scope},
                          {"store", s->store}};
          metric.counter.value = static_cast<double>(s->events.get(e));
          events.metric.push_back(std::move(metric));
        }
      }
    }
    std::vector<prometheus::MetricFamily> out;
    if (!events.metric.empty()) out.push_back(std::move(events));
    for (prometheus::MetricFamily& f : stores_.Collect()) out.push_back(std::move(f));
    return out;
  }

 private:
  std::string prefix_;
  detail::StoreCollectable stores_;
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Series>> series_;
};

}  // namespace

class PrometheusMetrics::Impl {
 public:
  Impl(std::shared_ptr<prometheus::Registry> registry, PrometheusOptions options)
      : registry_(std::move(registry)),
        options_(std::move(options)),
        claim_(histogram("claim_seconds", "time to claim a key (waits included)")),
        handler_(histogram("handler_seconds", "time from the claim to the commit")),
        commit_(histogram("commit_seconds", "time to commit a result (retries included)")),
        collected_(std::make_shared<Collected>(options_.prefix)) {}

  // This thread's last label set, kept while it repeats (a guard's views usually point at the
  // same bytes). Trivially destructible: no per-access TLS initialisation check.
  struct Cached {
    std::uint64_t instance;
    const char* scope_data;
    std::size_t scope_size;
    const char* store_data;
    std::size_t store_size;
    std::array<char, 64> scope_copy;  // the bytes, in case the views' memory was reused
    Series* series;
    detail::ThreadCounters<kEvents>::Local counts;
  };
  const Cached& series(std::string_view scope, std::string_view store) {
    thread_local Cached last{};
    if (last.instance == instance_ && last.scope_data == scope.data() &&
        last.scope_size == scope.size() && last.store_data == store.data() &&
        last.store_size == store.size() &&
        std::string_view(last.scope_copy.data(), last.scope_size) == scope) {
      return last;
    }
    Series* found = collected_->find_or_add(scope, store, [this](Series& s) {
      const prometheus::Labels labels{{"scope", s.scope}, {"store", s.store}};
      s.claim = &claim_.Add(labels, options_.buckets);
      s.handler = &handler_.Add(labels, options_.buckets);
      s.commit = &commit_.Add(labels, options_.buckets);
    });
    // A scope too long to copy is looked up each time (and never matches the cache).
    last.instance = scope.size() <= last.scope_copy.size() ? instance_ : 0;
    last.scope_data = scope.data();
    last.scope_size = std::min(scope.size(), last.scope_copy.size());
    last.store_data = store.data();
    last.store_size = store.size();
    std::copy_n(scope.begin(), last.scope_size, last.scope_copy.begin());
    last.series = found;
    last.counts = found->events.local();
    return last;
  }

  void record(const EventInfo& info) {
    const Cached& c = series(info.scope, info.store);
    if (const auto e = static_cast<std::size_t>(info.event); e < kEvents) c.counts.add(e);
    if (info.durations.measured) {
      Series& s = *c.series;
      auto seconds = [](std::chrono::nanoseconds d) {
        return static_cast<double>(d.count()) / 1e9;
      };
      if (info.durations.claim.count() > 0) s.claim->Observe(seconds(info.durations.claim));
      if (info.durations.handler.count() > 0) s.handler->Observe(seconds(info.durations.handler));
      if (info.durations.commit.count() > 0) s.commit->Observe(seconds(info.durations.commit));
    }
  }

  std::string text() const {
    std::vector<prometheus::MetricFamily> families = collected_->Collect();
    for (prometheus::MetricFamily& f : registry_->Collect()) families.push_back(std::move(f));
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, families);
    return out.str();
  }

  const std::shared_ptr<Collected>& collected() const { return collected_; }

  const PrometheusOptions& options() const { return options_; }

 private:
  prometheus::Family<prometheus::Histogram>& histogram(const std::string& name,
                                                       const std::string& help) {
    return prometheus::BuildHistogram()
        .Name(options_.prefix + name)
        .Help(help)
        .Register(*registry_);
  }

  std::shared_ptr<prometheus::Registry> registry_;
  PrometheusOptions options_;
  prometheus::Family<prometheus::Histogram>& claim_;
  prometheus::Family<prometheus::Histogram>& handler_;
  prometheus::Family<prometheus::Histogram>& commit_;
  std::shared_ptr<Collected> collected_;
  const std::uint64_t instance_ = next_instance.fetch_add(1);
};

PrometheusMetrics::PrometheusMetrics(std::shared_ptr<prometheus::Registry> registry,
                                     PrometheusOptions options)
    : impl_(std::make_unique<Impl>(std::move(registry), std::move(options))) {}

PrometheusMetrics::~PrometheusMetrics() = default;

void PrometheusMetrics::record(const EventInfo& info) { impl_->record(info); }

std::shared_ptr<Observer> PrometheusMetrics::observer(Observer::Callback also) {
  Impl* impl = impl_.get();
  Observer::Callback callback;
  if (also) {
    callback = [impl, also = std::move(also)](const EventInfo& e) {
      impl->record(e);
      also(e);
    };
  } else {
    callback = [impl](const EventInfo& e) { impl->record(e); };
  }
  return std::make_shared<Observer>(std::move(callback),
                                    Observer::Settings{.time_one_in = impl->options().time_one_in});
}

void PrometheusMetrics::watch_store(std::string name, std::function<StoreStats()> read) {
  impl_->collected()->stores().watch(std::move(name), std::move(read));
}

std::shared_ptr<prometheus::Collectable> PrometheusMetrics::collectable() const {
  return impl_->collected();
}

std::string PrometheusMetrics::text() const { return impl_->text(); }

}  // namespace idem
