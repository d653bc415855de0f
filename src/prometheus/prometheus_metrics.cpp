// idem::prometheus: the Observer's events as prometheus-cpp counters and histograms. The label
// set of an event (scope, store) is looked up once per thread and kept while it repeats, so a
// counted event costs one cache check and one atomic add.

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>

#include "idem/prometheus.hpp"
#include "store_collectable.hpp"

namespace idem {

namespace {
constexpr std::size_t kEvents = static_cast<std::size_t>(Event::result_unrecorded) + 1;
std::atomic<std::uint64_t> next_instance{1};
}  // namespace

class PrometheusMetrics::Impl {
 public:
  // One (scope, store) label set's metrics.
  struct Series {
    std::array<prometheus::Counter*, kEvents> events{};
    prometheus::Histogram* claim = nullptr;
    prometheus::Histogram* handler = nullptr;
    prometheus::Histogram* commit = nullptr;
  };

  Impl(std::shared_ptr<prometheus::Registry> registry, PrometheusOptions options)
      : registry_(std::move(registry)),
        options_(std::move(options)),
        events_(prometheus::BuildCounter()
                    .Name(options_.prefix + "events_total")
                    .Help("idem guard events (executed, replayed, in_progress, ...)")
                    .Register(*registry_)),
        claim_(histogram("claim_seconds", "time to claim a key (waits included)")),
        handler_(histogram("handler_seconds", "time from the claim to the commit")),
        commit_(histogram("commit_seconds", "time to commit a result (retries included)")),
        stores_(std::make_shared<detail::StoreCollectable>(options_.prefix)) {}

  Series& series(std::string_view scope, std::string_view store) {
    // The last label set this thread used, kept while it repeats (a guard's scope and store
    // name live as long as the guard, so the views usually point at the same bytes). Trivially
    // destructible: no per-access TLS initialisation check.
    struct Cached {
      std::uint64_t instance;
      const char* scope_data;
      std::size_t scope_size;
      const char* store_data;
      std::size_t store_size;
      std::array<char, 64> scope_copy;  // the bytes, in case the views' memory was reused
      Series* series;
    };
    thread_local Cached last{};
    if (last.instance == instance_ && last.scope_data == scope.data() &&
        last.scope_size == scope.size() && last.store_data == store.data() &&
        last.store_size == store.size() &&
        std::string_view(last.scope_copy.data(), last.scope_size) == scope) {
      return *last.series;
    }
    Series* found = lookup(scope, store);
    if (scope.size() <= last.scope_copy.size()) {
      last.instance = instance_;
      last.scope_data = scope.data();
      last.scope_size = scope.size();
      last.store_data = store.data();
      last.store_size = store.size();
      std::copy(scope.begin(), scope.end(), last.scope_copy.begin());
      last.series = found;
    }
    return *found;
  }

  Series* lookup(std::string_view scope, std::string_view store) {
    std::lock_guard lock(mutex_);
    auto key = std::make_pair(std::string(scope), std::string(store));
    auto it = series_.find(key);
    if (it == series_.end()) {
      Series s;
      for (std::size_t e = 0; e < kEvents; ++e) {
        s.events[e] = &events_.Add({{"scope", key.first},
                                    {"store", key.second},
                                    {"event", std::string(to_string(static_cast<Event>(e)))}});
      }
      const prometheus::Labels labels{{"scope", key.first}, {"store", key.second}};
      s.claim = &claim_.Add(labels, options_.buckets);
      s.handler = &handler_.Add(labels, options_.buckets);
      s.commit = &commit_.Add(labels, options_.buckets);
      it = series_.emplace(std::move(key), s).first;
    }
    return &it->second;
  }

  void record(const EventInfo& info) {
    Series& s = series(info.scope, info.store);
    s.events[static_cast<std::size_t>(info.event)]->Increment();
    if (info.durations.measured) {
      auto seconds = [](std::chrono::nanoseconds d) {
        return static_cast<double>(d.count()) / 1e9;
      };
      if (info.durations.claim.count() > 0) s.claim->Observe(seconds(info.durations.claim));
      if (info.durations.handler.count() > 0) s.handler->Observe(seconds(info.durations.handler));
      if (info.durations.commit.count() > 0) s.commit->Observe(seconds(info.durations.commit));
    }
  }

  std::string text() const {
    std::vector<prometheus::MetricFamily> families = registry_->Collect();
    for (prometheus::MetricFamily& f : stores_->Collect()) families.push_back(std::move(f));
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, families);
    return out.str();
  }

  const std::shared_ptr<detail::StoreCollectable>& stores() const { return stores_; }

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
  prometheus::Family<prometheus::Counter>& events_;
  prometheus::Family<prometheus::Histogram>& claim_;
  prometheus::Family<prometheus::Histogram>& handler_;
  prometheus::Family<prometheus::Histogram>& commit_;
  std::shared_ptr<detail::StoreCollectable> stores_;
  const std::uint64_t instance_ = next_instance.fetch_add(1);
  std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, Series> series_;
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
  impl_->stores()->watch(std::move(name), std::move(read));
}

std::shared_ptr<prometheus::Collectable> PrometheusMetrics::stores() const {
  return impl_->stores();
}

std::string PrometheusMetrics::text() const { return impl_->text(); }

}  // namespace idem
