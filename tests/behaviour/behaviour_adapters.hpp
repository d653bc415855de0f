#pragma once
// The guards the behaviour suite runs every case through, behind one small interface: each
// adapter is built from a GuardSetup, drives time with a TestClock shared by its guard and stores,
// and keeps its durable records in a FaultStore (a MemoryStore that counts calls, keeps the bytes
// of every commit and fails the commits it is told to).
//
//   GuardAdapter      IdempotencyGuard over the FaultStore
//   LayeredAdapter    LayeredGuard with one RecordLayer over the FaultStore
//   ThreeTierAdapter  LayeredGuard: MemoryRequestIdCache -> MemoryTokenStore -> the FaultStore,
//                     with a token issued per key (repeats of a key present the same token)

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/idem.hpp"
#include "idem/layered_guard.hpp"
#include "idem/memory/request_id_cache.hpp"
#include "idem/memory/token_store.hpp"

namespace idem::testing {

/// A clock that moves only when told or slept on, as ManualClock, and runs `on_sleep` after each
/// sleep: a waiting caller's pause is where a test lets the holder finish.
class TestClock final : public Clock {
 public:
  time_point now() const override { return time_point{duration{ticks_.load()}}; }
  void sleep_for(duration d) override {
    sleeps_.fetch_add(1);
    advance(d);
    if (on_sleep) on_sleep();
  }
  void advance(duration d) { ticks_.fetch_add(d.count()); }
  int sleeps() const { return sleeps_.load(); }

  std::function<void()> on_sleep;  // set by single-threaded cases only

 private:
  std::atomic<duration::rep> ticks_{
      std::chrono::duration_cast<duration>(std::chrono::hours(1)).count()};
  std::atomic<int> sleeps_{0};
};

/// A MemoryStore that counts its calls, keeps what each successful commit stored, and fails its
/// next `failing_commits` commits with store_unavailable (the record unchanged).
class FaultStore {
 public:
  explicit FaultStore(std::shared_ptr<Clock> clock)
      : inner_(MemoryStoreOptions{.shards = 4, .clock = std::move(clock)}) {}

  std::atomic<int> failing_commits{0};
  std::atomic<int> claims{0};
  std::atomic<int> commits{0};
  std::atomic<int> aborts{0};

  Result<Claim> claim(const ClaimRequest& request) {
    claims.fetch_add(1);
    return inner_.claim(request);
  }
  Status commit(const Ticket& ticket, const Completion& completion) {
    commits.fetch_add(1);
    if (failing_commits.load() > 0) {
      failing_commits.fetch_sub(1);
      return Status(errc::store_unavailable, "injected commit failure");
    }
    Status status = inner_.commit(ticket, completion);
    if (status) {
      std::lock_guard lock(mutex_);
      committed_.emplace_back(completion.result);
    }
    return status;
  }
  Status abort(const Ticket& ticket) {
    aborts.fetch_add(1);
    return inner_.abort(ticket);
  }
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    return inner_.extend(ticket, lease);
  }

  /// The bytes of every commit that landed, in order.
  std::vector<std::string> committed() const {
    std::lock_guard lock(mutex_);
    return committed_;
  }

 private:
  MemoryStore inner_;
  mutable std::mutex mutex_;
  std::vector<std::string> committed_;
};

/// What a case may change about the guard under test.
struct GuardSetup {
  std::chrono::milliseconds lease{std::chrono::seconds{10}};
  InProgressPolicy in_progress = FailFast{};
  bool remember_failures = false;
  std::size_t max_key_size = 256;
  std::size_t max_result_size = std::size_t{1} << 20;
  CommitRetry commit_retry{};
  std::shared_ptr<Observer> observer = nullptr;
};

inline constexpr std::string_view kRecordScope = "behaviour";
inline constexpr std::chrono::hours kTtl{1};

/// What every adapter holds: the test's clock, and the FaultStore of records on it.
class AdapterRecords {
 public:
  TestClock& clock() { return *clock_; }
  FaultStore& records() { return records_; }

 protected:
  std::shared_ptr<TestClock> clock_ = std::make_shared<TestClock>();
  FaultStore records_{clock_};
};

/// A LayeredGuard adapter's calls: its guard_ given its request(key, payload).
template <class Adapter>
class LayeredCalls : public AdapterRecords {
 public:
  template <class T>
  auto begin(const Key& key, std::string_view payload = {}) {
    return self().guard_.template begin<T>(self().request(key, payload));
  }
  template <class Fn>
  auto execute(const Key& key, std::string_view payload, Fn&& fn) {
    return self().guard_.execute(self().request(key, payload), std::forward<Fn>(fn));
  }

 private:
  Adapter& self() { return static_cast<Adapter&>(*this); }
};

/// IdempotencyGuard over the FaultStore.
class GuardAdapter : public AdapterRecords {
 public:
  static constexpr const char* kName = "IdempotencyGuard";
  static constexpr std::size_t kLayers = 1;

  explicit GuardAdapter(const GuardSetup& s)
      : guard_(records_, Options{.scope = std::string(kRecordScope),
                                 .lease = s.lease,
                                 .ttl = kTtl,
                                 .in_progress = s.in_progress,
                                 .remember_failures = s.remember_failures,
                                 .max_key_size = s.max_key_size,
                                 .max_result_size = s.max_result_size,
                                 .clock = clock_,
                                 .observer = s.observer,
                                 .commit_retry = s.commit_retry}) {}

  template <class T>
  auto begin(const Key& key, std::string_view payload = {}) {
    return guard_.template begin<T>(key, payload);
  }
  template <class Fn>
  auto execute(const Key& key, std::string_view payload, Fn&& fn) {
    return guard_.execute(key, payload, std::forward<Fn>(fn));
  }

 private:
  IdempotencyGuard<FaultStore> guard_;
};

/// What every LayeredGuard adapter shares: its options, and a request per key.
inline LayeredOptions layered_options(const GuardSetup& s, std::shared_ptr<Clock> clock) {
  return LayeredOptions{.policy = {.in_progress = s.in_progress,
                                   .remember_failures = s.remember_failures,
                                   .max_key_size = s.max_key_size,
                                   .max_result_size = s.max_result_size,
                                   .clock = std::move(clock),
                                   .observer = s.observer,
                                   .commit_retry = s.commit_retry}};
}

inline LayerSettings layer_settings(std::string name, std::string_view scope, const GuardSetup& s) {
  return LayerSettings{
      .name = std::move(name), .scope = std::string(scope), .lease = s.lease, .ttl = kTtl};
}

/// LayeredGuard with a single RecordLayer over the FaultStore.
class LayeredAdapter : public LayeredCalls<LayeredAdapter> {
 public:
  static constexpr const char* kName = "LayeredGuard_record";
  static constexpr std::size_t kLayers = 1;

  explicit LayeredAdapter(const GuardSetup& s)
      : guard_(layered_options(s, clock_),
               RecordLayer(records_, layer_settings("record", kRecordScope, s))) {}

 private:
  friend LayeredCalls<LayeredAdapter>;
  static LayeredRequest request(const Key& key, std::string_view payload) {
    return LayeredRequest{.business_key = key.id, .principal = key.principal, .payload = payload};
  }

  LayeredGuard<RecordLayer<FaultStore>> guard_;
};

/// LayeredGuard over the three tiers; the key's id is both the request id and the business key,
/// and each key gets one token, issued the first time it is seen.
class ThreeTierAdapter : public LayeredCalls<ThreeTierAdapter> {
 public:
  static constexpr const char* kName = "LayeredGuard_three_tier";
  static constexpr std::size_t kLayers = 3;

  explicit ThreeTierAdapter(const GuardSetup& s)
      : guard_(layered_options(s, clock_),
               RequestIdLayer(cache_, layer_settings("gateway", cache_.options().scope, s)),
               TokenLayer(tokens_, layer_settings("token", tokens_.options().scope, s)),
               RecordLayer(records_, layer_settings("record", kRecordScope, s))) {}

 private:
  friend LayeredCalls<ThreeTierAdapter>;
  LayeredRequest request(const Key& key, std::string_view payload) {
    return LayeredRequest{.request_id = key.id,
                          .token = token_for(key),
                          .business_key = key.id,
                          .principal = key.principal,
                          .payload = payload};
  }
  std::string token_for(const Key& key) {
    std::string name(key.principal);
    name.push_back('\0');
    name.append(key.id);
    auto [it, fresh] = tokens_by_key_.try_emplace(std::move(name));
    if (fresh) it->second = tokens_.issue(std::chrono::hours{24}).value();
    return it->second;
  }

  MemoryRequestIdCache cache_{MemoryRequestIdCacheOptions{.clock = clock_}};
  MemoryTokenStore tokens_{MemoryTokenStoreOptions{.clock = clock_}};
  std::map<std::string, std::string> tokens_by_key_;
  LayeredGuard<RequestIdLayer<MemoryRequestIdCache>, TokenLayer<MemoryTokenStore>,
               RecordLayer<FaultStore>>
      guard_;
};

}  // namespace idem::testing
