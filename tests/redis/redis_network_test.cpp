// RedisStore behind a faulty network (a FaultRelay between the client and the server): the
// network-fault cases (support/network_fault_cases.hpp) and a completer's calls on a silent
// network. With pipelining (the default) and with pooled connections only.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "idem/engine/effective_key.hpp"
#include "idem/idem.hpp"
#include "idem/redis/store.hpp"
#include "redis/redis_test_support.hpp"
#include "support/bounded_calls.hpp"
#include "support/fault_relay.hpp"
#include "support/network_fault_cases.hpp"

namespace idem::testing {
namespace {

using std::chrono::milliseconds;

// The parameter: pipeline_connections (0: every call on a pooled connection of its own). A
// command without a reply is given up after command_timeout (500 ms), a connect after
// connect_timeout (500 ms).
class RedisNetworkTest : public NetworkFaultTest<RedisStore, std::size_t> {
 protected:
  void SetUp() override {
    if (redis_uri() == nullptr) GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set";
    redis::ConnectionOptions direct = redis_options();
    relay_ = std::make_unique<FaultRelay>(direct.host, direct.port);
    redis::ConnectionOptions through = direct;
    through.host = "127.0.0.1";
    through.port = relay_->port();
    through.connect_timeout = milliseconds{500};
    through.command_timeout = milliseconds{500};
    through.pool_size = 8;
    through.pool_wait = milliseconds{500};
    through.pipeline_connections = GetParam();
    start(*relay_, std::make_unique<RedisStore>(std::make_shared<redis::Client>(through),
                                                RedisStoreOptions{.prefix = unique_prefix("net")}));
  }

  // A commit is one script call (a claim's comes before the handler, so the next one after it
  // is the commit).
  bool commit_message(std::string_view chunk) const override {
    return chunk.find("EVALSHA") != std::string_view::npos;
  }

  std::unique_ptr<FaultRelay> relay_;
};

IDEM_NETWORK_FAULT_CASES(RedisNetworkTest);

// A completer's calls on a silent network: keeping a request and finding abandoned runs (the
// index and the records each behind their own call) answer store_unavailable within the bound.
TEST_P(RedisNetworkTest, KeepRequestAndFindAbandonedOnASilentNetworkFailWithinABound) {
  const std::string key(detail::EffectiveKey("net", {}, "kept").view());
  std::string scope(detail::EffectiveKey("net", {}, {}).view());
  scope.pop_back();
  Result<Claim> held =
      store().claim(ClaimRequest{key, {1, 2}, milliseconds{30'000}, std::chrono::hours{1}});
  ASSERT_TRUE(held.has_value() && held->status == ClaimStatus::acquired);
  const Ticket ticket{key, held->fence};
  ASSERT_TRUE(store().keep_request(ticket, "r").ok());
  relay().stall();
  const std::vector<std::function<std::error_code()>> completer_calls{
      [&] { return store().keep_request(ticket, "r").error(); },
      [&] { return store().find_abandoned(scope, 10).error(); }};
  for (const auto& r : run_bounded<std::error_code>(completer_calls, kCallBound, unstick())) {
    ASSERT_TRUE(r.result.has_value());
    EXPECT_EQ(*r.result, errc::store_unavailable) << r.result->message();
  }
  relay().pass();
  Result<std::vector<Abandoned>> found = store().find_abandoned(scope, 10);
  ASSERT_TRUE(found.has_value()) << found.failure().describe();
  EXPECT_TRUE(found->empty()) << "a live lease is not abandoned";
}

INSTANTIATE_TEST_SUITE_P(Connections, RedisNetworkTest, ::testing::Values(2u, 0u),
                         [](const auto& info) {
                           return info.param == 0 ? std::string("pooled")
                                                  : std::string("pipelined");
                         });

}  // namespace
}  // namespace idem::testing
