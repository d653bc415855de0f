// The request-ID cache cases on RequestIdCache against a real server, plus its layout.

#include "idem/redis/request_id_cache.hpp"

#include <memory>
#include <thread>

#include "idem/cached_store.hpp"
#include "idem/testing/request_id_cache_conformance.hpp"
#include "redis/redis_kit_traits.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {

template <>
struct RequestIdCacheTraits<RequestIdCache>
    : RedisKitTraits<RequestIdCache, RequestIdCacheOptions, kit_redis_client> {};

IDEM_REQUEST_ID_CACHE_CONFORMANCE(Redis, RequestIdCache);

TEST(RequestIdCacheTest, EntryIsOneStringWithTheLeaseThenTheTtl) {
  IDEM_REQUIRE_REDIS(client);
  RequestIdCache cache(client,
                       RequestIdCacheOptions{.prefix = unique_prefix("req-layout"),
                                             .guard = Options{.scope = "gw",
                                                              .lease = std::chrono::seconds{20},
                                                              .ttl = std::chrono::seconds{60}}});
  const Key request{"req-1", "tenant"};
  const std::string key = cache.entry_key(request);
  auto out = cache.execute(request, [&] {
    EXPECT_EQ(redis_string(*client, {"TYPE", key}), "string");
    const long long pttl = redis_integer(*client, {"PTTL", key});
    EXPECT_GT(pttl, 15'000);  // the marker expires with the lease
    EXPECT_LE(pttl, 20'000);
    return std::string("resp");
  });
  ASSERT_TRUE(out) << out.message();
  const long long pttl = redis_integer(*client, {"PTTL", key});
  EXPECT_GT(pttl, 55'000);
  EXPECT_LE(pttl, 60'000);
  const std::string entry = redis_string(*client, {"GET", key});
  ASSERT_EQ(entry.size(), 25u + 4u);
  EXPECT_EQ(entry[0], 'C');
  EXPECT_EQ(entry.substr(25), "resp");
  const StoreStats stats = cache.stats();  // the client's figures
  EXPECT_EQ(stats.store, "redis");
  const RedisStats* redis = stats.parts.get<RedisStats>();
  ASSERT_TRUE(stats.pool && redis);
  EXPECT_EQ(redis->servers, 1u);
  EXPECT_EQ(stats.pool->timeouts, 0u);
}

TEST(RequestIdCacheTest, ForeignValueIsRecordCorrupt) {
  IDEM_REQUIRE_REDIS(client);
  RequestIdCache cache(client, RequestIdCacheOptions{.prefix = unique_prefix("req-corrupt")});
  ASSERT_EQ(redis_string(*client, {"SET", cache.entry_key(Key{"r"}), "junk"}), "OK");
  auto out = cache.execute(Key{"r"}, [] { return 1; });
  EXPECT_EQ(out.error(), errc::record_corrupt) << out.message();
}

}  // namespace idem::testing

namespace idem::testing {

// Another gateway process committed the response: the first repeat here reads it from Redis and
// fills the process cache for no longer than the entry's PTTL; the next is served from memory.
TEST(RequestIdCacheTest, ACachedStoreInFrontKeepsARepeatNoLongerThanTheEntry) {
  IDEM_REQUIRE_REDIS(client);
  const RequestIdCacheOptions options{.prefix = unique_prefix("req-cached")};
  RequestIdCache writer(client, options);
  const detail::EffectiveKey key(writer.options().scope, "t", "req");
  const ClaimRequest request{key.view(), {1, 1}, std::chrono::seconds{5}, std::chrono::seconds{5}};
  Result<Claim> held = writer.claim(request);
  ASSERT_TRUE(held);
  ASSERT_EQ(held->status, ClaimStatus::acquired);
  const Completion done{ClaimStatus::completed, "resp", std::chrono::seconds{40}};
  ASSERT_TRUE(writer.commit(Ticket{key.view(), held->fence}, done).ok());

  RequestIdCache reader(client, options);
  CachedStore<RequestIdCache&> cached(CachedStoreOptions{.max_ttl = std::chrono::hours{1}}, reader);
  Result<Claim> first = cached.claim(request);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, ClaimStatus::completed);
  EXPECT_GT(first->expires_in, std::chrono::seconds{30});
  EXPECT_LE(first->expires_in, std::chrono::seconds{40});
  Result<Claim> second = cached.claim(request);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, ClaimStatus::completed);
  EXPECT_EQ(second->result, "resp");
  EXPECT_LE(second->expires_in, first->expires_in);
  EXPECT_EQ(cached.misses(), 1u);
  EXPECT_EQ(cached.hits(), 1u);
}

TEST(RequestIdCacheTest, AHolderPastItsLeaseCommitsNothingEvenWithoutATakeover) {
  IDEM_REQUIRE_REDIS(client);
  RequestIdCache cache(client, RequestIdCacheOptions{.prefix = unique_prefix("req-late")});
  const detail::EffectiveKey key(cache.options().scope, "t", "slow");
  Result<Claim> held = cache.claim(ClaimRequest{
      key.view(), {1, 1}, std::chrono::milliseconds{1000}, std::chrono::milliseconds{1000}});
  ASSERT_TRUE(held);
  ASSERT_EQ(held->status, ClaimStatus::acquired);
  EXPECT_EQ(redis_integer(*client, {"EXISTS", cache.entry_key(Key{"slow", "t"})}), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds{1200});  // the marker expired
  const Completion done{ClaimStatus::completed, "late", std::chrono::minutes{1}};
  EXPECT_EQ(cache.commit(Ticket{key.view(), held->fence}, done).error(), errc::lease_lost);
  EXPECT_EQ(redis_integer(*client, {"EXISTS", cache.entry_key(Key{"slow", "t"})}), 0);
}

}  // namespace idem::testing
