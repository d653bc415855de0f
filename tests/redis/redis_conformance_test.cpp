// The record-store conformance kit on RedisStore against a real server. Store time is the
// server's, so advance() sleeps; the lease is short to keep the suite quick. reopen() opens
// another store on the same key prefix over a client of its own, as another process would.

#include <memory>
#include <string>
#include <thread>

#include "idem/redis/admin.hpp"
#include "idem/redis/store.hpp"
#include "idem/testing/record_store_conformance.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {

// A RedisStore that remembers its client and key prefix.
struct ConformanceRedisStore : RedisStore {
  ConformanceRedisStore(std::shared_ptr<redis::Client> c, std::string key_prefix)
      : RedisStore(c, RedisStoreOptions{.prefix = key_prefix}),
        client(std::move(c)),
        prefix(std::move(key_prefix)) {}
  std::shared_ptr<redis::Client> client;
  std::string prefix;
};

template <>
struct StoreTraits<ConformanceRedisStore> {
  static constexpr std::chrono::milliseconds lease{500};

  static std::unique_ptr<ConformanceRedisStore> make() {
    // A skip or fatal failure recorded during SetUp keeps the test body from running.
    if (redis_uri() == nullptr) {
      skip();
      return nullptr;
    }
    return open(unique_prefix("conf"));
  }
  static std::unique_ptr<ConformanceRedisStore> reopen(ConformanceRedisStore& store) {
    return open(store.prefix);
  }
  static void advance(ConformanceRedisStore&, std::chrono::milliseconds d) {
    std::this_thread::sleep_for(d);
  }
  static std::unique_ptr<admin::Admin> admin(ConformanceRedisStore& store) {
    return admin::redis_admin(store.client, {.prefix = store.prefix});
  }

  static std::unique_ptr<ConformanceRedisStore> open(std::string prefix) {
    auto client = connect_redis(redis_options());
    if (!client) {
      fail();
      return nullptr;
    }
    return std::make_unique<ConformanceRedisStore>(client, std::move(prefix));
  }
  static void skip() { GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set; scripts/test sets it"; }
  static void fail() { FAIL() << "Redis at IDEM_TEST_REDIS_URI is unreachable"; }
};

}  // namespace idem::testing

IDEM_RECORD_STORE_CONFORMANCE(Redis, idem::testing::ConformanceRedisStore);
