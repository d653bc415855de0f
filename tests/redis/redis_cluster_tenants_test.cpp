// Tenants apart (tests/tenants/tenant_cases.hpp) on a Redis Cluster: the store and its admin
// (which lists and counts on every primary) under a key prefix of the test's own
// (IDEM_TEST_REDIS_CLUSTER_SEEDS; unset: skip, unreachable or unhealthy: fail).

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "idem/redis/admin.hpp"
#include "idem/redis/store.hpp"
#include "redis/redis_cluster_support.hpp"
#include "redis/redis_test_support.hpp"
#include "tenants/tenant_cases.hpp"

namespace idem::testing {
namespace {

struct ClusterKit {
  static constexpr const char* kName = "RedisCluster";
  static std::optional<std::string> unavailable() {
    if (cluster_seeds() != nullptr) return std::nullopt;
    return "IDEM_TEST_REDIS_CLUSTER_SEEDS is not set; scripts/test starts a cluster";
  }
  ClusterKit()
      : client_(connected()),
        prefix_(unique_prefix("tenants")),
        store_(client_, RedisStoreOptions{.prefix = prefix_}),
        admin_(admin::redis_admin(client_, {.prefix = prefix_})) {}
  RedisStore& store() { return store_; }
  admin::Admin& admin() { return *admin_; }

 private:
  static std::shared_ptr<redis::Client> connected() {
    if (!wait_cluster_ok(std::chrono::seconds{20}, /*with_replicas=*/false)) {
      throw std::runtime_error("the cluster is not healthy:\n" + cluster_report());
    }
    auto client = connect_cluster(cluster_options());
    if (!client) throw std::runtime_error("the cluster does not answer");
    return client;
  }

  std::shared_ptr<redis::Client> client_;
  std::string prefix_;
  RedisStore store_;
  std::unique_ptr<admin::Admin> admin_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(Cluster, TenantsApart, ::testing::Types<ClusterKit>, TenantKitName);

}  // namespace
}  // namespace idem::testing
