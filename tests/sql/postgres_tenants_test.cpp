// Tenants apart (tests/tenants/tenant_cases.hpp) on PostgreSQL: the store in lease mode and its
// admin, on tables of the test's own (IDEM_TEST_PG_URI; unset: skip, unreachable: fail).

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "idem/postgres/admin.hpp"
#include "idem/postgres/store.hpp"
#include "support/pg_env.hpp"
#include "support/unique_name.hpp"
#include "tenants/tenant_cases.hpp"

namespace idem::testing {
namespace {

struct PostgresKit {
  static constexpr const char* kName = "Postgres";
  static std::optional<std::string> unavailable() {
    return pg_uri() ? std::nullopt : std::optional<std::string>(kNoPgMessage);
  }
  PostgresKit()
      : connection_{.uri = *pg_uri(), .table_prefix = unique_name("tenants") + "_"},
        store_(PostgresStoreOptions{.connection = connection_, .pool = {.size = 4}}),
        admin_(admin::postgres_admin({.connection = connection_})) {}
  PostgresStore& store() { return store_; }
  admin::Admin& admin() { return *admin_; }

 private:
  postgres::ConnectionOptions connection_;
  PostgresStore store_;
  std::unique_ptr<admin::Admin> admin_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(Server, TenantsApart, ::testing::Types<PostgresKit>, TenantKitName);

}  // namespace
}  // namespace idem::testing
