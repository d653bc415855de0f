#pragma once
// The async Redis cells of the guard's cases and of the conformance kit
// (idem/testing/async_store_conformance.hpp): the server in IDEM_TEST_REDIS_URI, the same with
// single_threaded, and the cluster in IDEM_TEST_REDIS_CLUSTER_SEEDS.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "idem/redis/admin.hpp"
#include "idem/redis/async_store.hpp"
#include "redis/redis_cluster_support.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {

/// Whether the server's variable is set; if not, the case is skipped (scripts/test starts the
/// servers and sets them).
inline bool configured(const char* value, const char* variable) {
  if (value != nullptr) return true;
  [variable] { GTEST_SKIP() << variable << " is not set; scripts/test starts the server"; }();
  return false;
}

inline AsyncRedisStoreOptions async_redis_options(std::string prefix) {
  return AsyncRedisStoreOptions{.connection = redis_options(), .prefix = std::move(prefix)};
}

// The cell of the guard's cases and of the conformance kit
// (idem/testing/async_store_conformance.hpp).
struct AsyncRedisCell {
  using Store = AsyncRedisStore;
  static constexpr std::chrono::milliseconds lease{500};
  static std::optional<AsyncRedisStoreOptions> options() {
    if (!configured(redis_uri(), "IDEM_TEST_REDIS_URI")) return std::nullopt;
    return async_redis_options(unique_prefix("async"));
  }
  static std::unique_ptr<admin::Admin> admin(const AsyncRedisStoreOptions& o) {
    return admin::redis_admin(connect_redis(redis_options()), {.prefix = o.prefix});
  }
};

// The same with single_threaded (IoRunner runs the io_context on the test's thread): a caller
// resumes in place once the read that answered it is done, not through a post.
struct AsyncRedisOneThreadCell : AsyncRedisCell {
  static constexpr bool one_thread = true;
  static std::optional<AsyncRedisStoreOptions> options() {
    std::optional<AsyncRedisStoreOptions> o = AsyncRedisCell::options();
    if (o) o->single_threaded = true;
    return o;
  }
};

/// The async store's options for the test cluster: every node a seed, the blocking cluster
/// tests' timeouts.
inline AsyncRedisStoreOptions async_cluster_options(std::string prefix) {
  const redis::ClusterOptions o = cluster_options();
  return AsyncRedisStoreOptions{
      .connection = o.node, .cluster_seeds = o.seeds, .prefix = std::move(prefix)};
}

// The single-server cell's store and lease, on the cluster.
struct AsyncRedisClusterCell : AsyncRedisCell {
  static std::optional<AsyncRedisStoreOptions> options() {
    if (!configured(cluster_seeds(), "IDEM_TEST_REDIS_CLUSTER_SEEDS")) return std::nullopt;
    return async_cluster_options(unique_prefix("acluster"));
  }
  static std::unique_ptr<admin::Admin> admin(const AsyncRedisStoreOptions& o) {
    return admin::redis_admin(connect_cluster(cluster_options()), {.prefix = o.prefix});
  }
};

}  // namespace idem::testing
