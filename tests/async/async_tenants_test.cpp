// Tenants apart (tests/tenants/tenant_cases.hpp) on the asynchronous stores that share a server:
// AsyncRedisStore and AsyncPostgresStore, each as a blocking store (idem::testing::BlockingStore)
// under the guard, with the blocking admin on the same records (IDEM_TEST_REDIS_URI,
// IDEM_TEST_PG_URI; unset: skip, unreachable: fail).

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "idem/testing/blocking_store.hpp"
#include "tenants/tenant_cases.hpp"
#ifdef IDEM_TEST_ASYNC_REDIS
#include "async/async_redis_cells.hpp"
#endif
#ifdef IDEM_TEST_ASYNC_POSTGRES
#include "idem/postgres/admin.hpp"
#include "idem/postgres/async_store.hpp"
#include "support/pg_env.hpp"
#include "support/unique_name.hpp"
#endif

namespace idem::testing {
namespace {

#ifdef IDEM_TEST_ASYNC_REDIS
struct AsyncRedisKit {
  static constexpr const char* kName = "AsyncRedis";
  static std::optional<std::string> unavailable() {
    if (redis_uri() != nullptr) return std::nullopt;
    return "IDEM_TEST_REDIS_URI is not set; scripts/test starts a Redis and sets it";
  }
  AsyncRedisKit()
      : prefix_(unique_prefix("async_tenants")),
        store_(async_redis_options(prefix_)),
        admin_(admin::redis_admin(connected(), {.prefix = prefix_})) {}
  BlockingStore<AsyncRedisStore>& store() { return store_; }
  admin::Admin& admin() { return *admin_; }

 private:
  static std::shared_ptr<redis::Client> connected() {
    auto client = connect_redis(redis_options());
    if (!client) throw std::runtime_error("the Redis of IDEM_TEST_REDIS_URI does not answer");
    return client;
  }

  std::string prefix_;
  BlockingStore<AsyncRedisStore> store_;
  std::unique_ptr<admin::Admin> admin_;
};
#endif

#ifdef IDEM_TEST_ASYNC_POSTGRES
struct AsyncPostgresKit {
  static constexpr const char* kName = "AsyncPostgres";
  static std::optional<std::string> unavailable() {
    return pg_uri() ? std::nullopt : std::optional<std::string>(kNoPgMessage);
  }
  AsyncPostgresKit()
      : connection_{.uri = *pg_uri(), .table_prefix = unique_name("async_tenants") + "_"},
        store_(AsyncPostgresStoreOptions{.connection = connection_}),
        admin_(admin::postgres_admin({.connection = connection_})) {}
  BlockingStore<AsyncPostgresStore>& store() { return store_; }
  admin::Admin& admin() { return *admin_; }

 private:
  postgres::ConnectionOptions connection_;
  BlockingStore<AsyncPostgresStore> store_;
  std::unique_ptr<admin::Admin> admin_;
};
#endif

using AsyncKits = ::testing::Types<
#ifdef IDEM_TEST_ASYNC_REDIS
    AsyncRedisKit
#endif
#if defined(IDEM_TEST_ASYNC_REDIS) && defined(IDEM_TEST_ASYNC_POSTGRES)
    ,
#endif
#ifdef IDEM_TEST_ASYNC_POSTGRES
    AsyncPostgresKit
#endif
    >;
INSTANTIATE_TYPED_TEST_SUITE_P(Async, TenantsApart, AsyncKits, TenantKitName);

}  // namespace
}  // namespace idem::testing
