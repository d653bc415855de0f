// The token store cases on RedisTokenStore against a real server, plus its layout in Redis.

#include <memory>
#include <thread>

#include "idem/redis/token_store.hpp"
#include "idem/testing/token_store_conformance.hpp"
#include "redis/redis_kit_traits.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {

template <>
struct TokenStoreTraits<RedisTokenStore>
    : RedisKitTraits<RedisTokenStore, RedisTokenStoreOptions, kit_redis_client> {};

IDEM_TOKEN_STORE_CONFORMANCE(Redis, RedisTokenStore);

TEST(RedisTokenStoreTest, PendingIsASetNxStringThenARecordHash) {
  IDEM_REQUIRE_REDIS(client);
  RedisTokenStore store(client, RedisTokenStoreOptions{.prefix = unique_prefix("token-layout")});
  Result<std::string> t = store.issue(std::chrono::seconds{60});
  ASSERT_TRUE(t) << t.failure().describe();
  const std::string key = store.token_key(t.value());
  EXPECT_EQ(redis_string(*client, {"GET", key}), "T");
  const long long pttl = redis_integer(*client, {"PTTL", key});
  EXPECT_GT(pttl, 50'000);
  EXPECT_LE(pttl, 60'000);
  auto out = store.execute(t.value(), [] { return 1; });
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ(redis_string(*client, {"TYPE", key}), "hash");
  EXPECT_EQ(redis_string(*client, {"HGET", key, "s"}), "C");
  // stats(): the client's, whose pool or pipeline served the issue, claim and commit.
  const StoreStats stats = store.stats();
  EXPECT_EQ(stats.store, "redis");
  const RedisStats* redis = stats.parts.get<RedisStats>();
  ASSERT_TRUE(stats.pool && redis);
  EXPECT_EQ(redis->servers, 1u);
  EXPECT_GE(stats.pool->opened + redis->pipeline_connections, 1u);
  EXPECT_EQ(redis->replication_timeouts, 0u);
}

}  // namespace idem::testing
