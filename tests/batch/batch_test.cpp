// The batch conformance cases (batch_cases.hpp) on every store that has batches, and the SQL
// stores' own batch rules.

#include <memory>
#include <optional>
#include <string>

#include "batch/batch_cases.hpp"
#include "idem/idem.hpp"
#include "idem/stores/memory_store.hpp"
#include "idem/stores/redis_store.hpp"
#include "redis/redis_cluster_support.hpp"
#include "redis/redis_test_support.hpp"
#include "sql/sql_test_support.hpp"

namespace idem::testing {
namespace {

struct MemoryBatch : ::testing::Test {
  MemoryStore& store() { return store_; }
  MemoryStore store_;
};

struct SqliteBatch : ::testing::Test {
  SqliteStore& store() {
    if (!store_) store_.emplace(SqliteStoreOptions{.path = db_.path(), .table_prefix = "b_"});
    return *store_;
  }
  TempDb db_;
  std::optional<SqliteStore> store_;
};

struct PostgresBatch : ::testing::Test {
  void SetUp() override {
    if (!pg_uri()) GTEST_SKIP() << kNoPgMessage;
  }
  PostgresStore& store() {
    if (!store_) {
      store_.emplace(PostgresStoreOptions{
          .uri = *pg_uri(), .table_prefix = unique_name("batch") + "_", .pool_size = 8});
    }
    return *store_;
  }
  std::optional<PostgresStore> store_;
};

struct RedisBatch : ::testing::Test {
  void SetUp() override {
    IDEM_REQUIRE_REDIS(client);
    store_.emplace(std::move(client), RedisStoreOptions{.prefix = unique_prefix("batch")});
  }
  RedisStore& store() { return *store_; }
  std::optional<RedisStore> store_;
};

// Keys of a batch spread over the cluster's slots: one script call per slot.
struct RedisClusterBatch : ::testing::Test {
  void SetUp() override {
    IDEM_REQUIRE_REDIS_CLUSTER(client);
    store_.emplace(std::move(client), RedisStoreOptions{.prefix = unique_prefix("batch")});
  }
  RedisStore& store() { return *store_; }
  std::optional<RedisStore> store_;
};

}  // namespace

INSTANTIATE_TYPED_TEST_SUITE_P(Memory, BatchTest, MemoryBatch);
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, BatchTest, SqliteBatch);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, BatchTest, PostgresBatch);
INSTANTIATE_TYPED_TEST_SUITE_P(Redis, BatchTest, RedisBatch);
INSTANTIATE_TYPED_TEST_SUITE_P(RedisCluster, BatchTest, RedisClusterBatch);

// Transactional mode opens a transaction per claim: a batch is refused, saying so, per key.
TEST(SqlBatch, TransactionalModeRefusesBatches) {
  TempDb db;
  SqliteStore store(
      SqliteStoreOptions{.path = db.path(), .mode = SqlMode::transactional, .table_prefix = "t_"});
  IdempotencyGuard guard(store, Options{.scope = "batch.tx"});
  const std::vector<BatchItem> items{{Key{"a"}}, {Key{"b"}}};
  int runs = 0;
  auto out = guard.execute_batch(items, [&](std::size_t) { return ++runs; });
  EXPECT_EQ(runs, 0);
  for (auto& o : out) {
    EXPECT_EQ(o.error(), errc::store_unavailable);
    EXPECT_NE(o.message().find("SqlMode::lease"), std::string::npos) << o.message();
  }
}

}  // namespace idem::testing
