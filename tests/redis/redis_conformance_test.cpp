// The record-store conformance suite on RedisStore against a real server. Store time is the
// server's, so advance() sleeps; the lease is short to keep the suite quick.

#include <memory>
#include <thread>

#include "conformance/record_store_suite.hpp"
#include "idem/stores/redis_store.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {

template <>
struct StoreTraits<RedisStore> {
  static constexpr std::chrono::milliseconds lease{250};

  static std::unique_ptr<RedisStore> make() {
    // A skip or fatal failure recorded during SetUp keeps the test body from running.
    if (redis_uri() == nullptr) {
      skip();
      return nullptr;
    }
    auto client = connect_redis(redis_options());
    if (!client) {
      fail();
      return nullptr;
    }
    return std::make_unique<RedisStore>(client, RedisStoreOptions{.prefix = unique_prefix("conf")});
  }
  static void advance(RedisStore&, std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }

  static void skip() { GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set; scripts/test sets it"; }
  static void fail() { FAIL() << "Redis at IDEM_TEST_REDIS_URI is unreachable"; }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Redis, RecordStoreConformance, ::testing::Types<RedisStore>);

}  // namespace idem::testing
