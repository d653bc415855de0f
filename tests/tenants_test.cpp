// Tenants apart (tests/tenants/tenant_cases.hpp) on the memory store and on SQLite; tests/sql and
// tests/redis run the same cases on PostgreSQL, Redis and a Redis Cluster.

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "idem/memory/admin.hpp"
#include "idem/memory/store.hpp"
#include "idem/sqlite/admin.hpp"
#include "idem/sqlite/store.hpp"
#include "support/unique_name.hpp"
#include "tenants/tenant_cases.hpp"

namespace idem::testing {
namespace {

struct MemoryKit {
  static constexpr const char* kName = "Memory";
  static std::optional<std::string> unavailable() { return std::nullopt; }
  MemoryStore& store() { return store_; }
  admin::Admin& admin() { return admin_; }

 private:
  MemoryStore store_;
  admin::MemoryAdmin admin_{store_};
};

// A SQLite file of its own in a temp folder, removed with the kit.
struct SqliteKit {
  static constexpr const char* kName = "Sqlite";
  static std::optional<std::string> unavailable() { return std::nullopt; }
  SqliteKit()
      : dir_(std::filesystem::temp_directory_path() / unique_name("idem_tenants")),
        store_(make_store(dir_)),
        admin_(admin::sqlite_admin({.path = (dir_ / "idem.db").string()})) {}
  ~SqliteKit() {
    admin_.reset();
    store_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  SqliteKit(const SqliteKit&) = delete;
  SqliteKit& operator=(const SqliteKit&) = delete;
  SqliteStore& store() { return *store_; }
  admin::Admin& admin() { return *admin_; }

 private:
  static std::unique_ptr<SqliteStore> make_store(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir);
    return std::make_unique<SqliteStore>(SqliteStoreOptions{.path = (dir / "idem.db").string()});
  }

  std::filesystem::path dir_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<admin::Admin> admin_;
};

using LocalKits = ::testing::Types<MemoryKit, SqliteKit>;
INSTANTIATE_TYPED_TEST_SUITE_P(Local, TenantsApart, LocalKits, TenantKitName);

}  // namespace
}  // namespace idem::testing
