// The record-store conformance kit (its racing-threads case included), the token suite and the
// request-id suite on the Redis stores through a cluster client: the stores are the same code,
// only the client routes by slot.

#include <memory>
#include <thread>

#include "idem/redis/admin.hpp"
#include "idem/redis/request_id_cache.hpp"
#include "idem/redis/store.hpp"
#include "idem/redis/token_store.hpp"
#include "idem/testing/record_store_conformance.hpp"
#include "idem/testing/request_id_cache_conformance.hpp"
#include "idem/testing/token_store_conformance.hpp"
#include "redis/redis_cluster_support.hpp"
#include "redis/redis_kit_traits.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {

// The client every suite case starts from, or null after a skip (unset) or failure.
struct ClusterSuiteBase {
  static constexpr std::chrono::milliseconds lease{500};

  static std::shared_ptr<redis::Client> client() {
    if (cluster_seeds() == nullptr) {
      skip();
      return nullptr;
    }
    auto c = connect_cluster(cluster_options());
    if (!c) fail();
    return c;
  }
  template <class S>
  static void advance(S&, std::chrono::milliseconds d) {
    std::this_thread::sleep_for(d);
  }
  static void skip() {
    GTEST_SKIP() << "IDEM_TEST_REDIS_CLUSTER_SEEDS is not set; scripts/test sets it";
  }
  static void fail() {
    FAIL() << "the Redis Cluster at IDEM_TEST_REDIS_CLUSTER_SEEDS is unreachable";
  }
};

// A RedisStore on the cluster that remembers its client and key prefix.
struct ClusterStore : RedisStore {
  ClusterStore(std::shared_ptr<redis::Client> c, std::string key_prefix)
      : RedisStore(c, RedisStoreOptions{.prefix = key_prefix}),
        client(std::move(c)),
        prefix(std::move(key_prefix)) {}
  std::shared_ptr<redis::Client> client;
  std::string prefix;
};

template <>
struct StoreTraits<ClusterStore> : ClusterSuiteBase {
  static std::unique_ptr<ClusterStore> make() {
    auto c = client();
    if (!c) return nullptr;
    return std::make_unique<ClusterStore>(c, unique_prefix("cconf"));
  }
  // Another client over the same cluster and prefix: what a restarted process opens.
  static std::unique_ptr<ClusterStore> reopen(ClusterStore& store) {
    auto c = client();
    if (!c) return nullptr;
    return std::make_unique<ClusterStore>(c, store.prefix);
  }
  static std::unique_ptr<admin::Admin> admin(ClusterStore& store) {
    return admin::redis_admin(store.client, {.prefix = store.prefix});
  }
};

template <>
struct TokenStoreTraits<RedisTokenStore>
    : RedisKitTraits<RedisTokenStore, RedisTokenStoreOptions, ClusterSuiteBase::client> {};
template <>
struct RequestIdCacheTraits<RequestIdCache>
    : RedisKitTraits<RequestIdCache, RequestIdCacheOptions, ClusterSuiteBase::client> {};

}  // namespace idem::testing

IDEM_RECORD_STORE_CONFORMANCE(RedisCluster, idem::testing::ClusterStore);
IDEM_TOKEN_STORE_CONFORMANCE(RedisCluster, idem::RedisTokenStore);
IDEM_REQUEST_ID_CACHE_CONFORMANCE(RedisCluster, idem::RequestIdCache);
