// Tenants apart (tests/tenants/tenant_cases.hpp) on Redis, one server: the store and its admin
// under a key prefix of the test's own (IDEM_TEST_REDIS_URI; unset: skip, unreachable: fail).
// redis_cluster_tenants_test.cpp runs the same cases on a cluster.

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "idem/redis/admin.hpp"
#include "idem/redis/store.hpp"
#include "redis/redis_test_support.hpp"
#include "tenants/tenant_cases.hpp"

namespace idem::testing {
namespace {

struct RedisKit {
  static constexpr const char* kName = "Redis";
  static std::optional<std::string> unavailable() {
    if (redis_uri() != nullptr) return std::nullopt;
    return "IDEM_TEST_REDIS_URI is not set; scripts/test starts a Redis and sets it";
  }
  RedisKit()
      : client_(connected(connect_redis(redis_options()))),
        prefix_(unique_prefix("tenants")),
        store_(client_, RedisStoreOptions{.prefix = prefix_}),
        admin_(admin::redis_admin(client_, {.prefix = prefix_})) {}
  RedisStore& store() { return store_; }
  admin::Admin& admin() { return *admin_; }

 private:
  static std::shared_ptr<redis::Client> connected(std::shared_ptr<redis::Client> client) {
    if (!client) throw std::runtime_error("the Redis of IDEM_TEST_REDIS_URI does not answer");
    return client;
  }

  std::shared_ptr<redis::Client> client_;
  std::string prefix_;
  RedisStore store_;
  std::unique_ptr<admin::Admin> admin_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(Server, TenantsApart, ::testing::Types<RedisKit>, TenantKitName);

}  // namespace
}  // namespace idem::testing
