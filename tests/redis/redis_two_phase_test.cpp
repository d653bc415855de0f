// The two-phase API (idem::Attempt) on RedisStore (IDEM_TEST_REDIS_URI; skipped when unset): the
// shared cases of tests/two_phase, and processes racing on one key, the work an INCR.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "idem/redis/store.hpp"
#include "redis/redis_test_support.hpp"
#include "two_phase/process_race_cases.hpp"
#include "two_phase/two_phase_cases.hpp"

namespace idem::testing {
namespace {

/// A RedisStore under a key prefix of its own on the test server.
struct RedisBackend {
  using StoreType = RedisStore;
  static constexpr const char* kName = "redis";
  static constexpr bool kTransactional = false;

  void set_up() {
    IDEM_REQUIRE_REDIS(client);
    client_ = std::move(client);
    prefix_ = unique_prefix("two-phase");
    store_ = std::make_unique<RedisStore>(client_, RedisStoreOptions{.prefix = prefix_});
  }
  RedisStore& store() { return *store_; }
  std::shared_ptr<Clock> clock() { return nullptr; }  // leases run on the server's clock
  void pass(milliseconds d) { std::this_thread::sleep_for(d); }

  std::vector<std::string> worker_args() const { return {"redis", redis_uri(), prefix_, "lease"}; }
  void prepare_side_effects() {}
  long long side_effects(const std::string& scope, const std::string& key) const {
    const std::string runs = redis_string(*client_, {"GET", prefix_ + "runs:" + scope + "/" + key});
    return runs == "<nil>" ? 0 : std::stoll(runs);
  }

  std::shared_ptr<redis::Client> client_;
  std::string prefix_;
  std::unique_ptr<RedisStore> store_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(Redis, TwoPhaseTest, RedisBackend, BackendNames);
INSTANTIATE_TYPED_TEST_SUITE_P(Redis, TwoPhaseLeaseTest, RedisBackend, BackendNames);
INSTANTIATE_TYPED_TEST_SUITE_P(Redis, TwoPhaseProcessTest, RedisBackend, BackendNames);

}  // namespace
}  // namespace idem::testing
