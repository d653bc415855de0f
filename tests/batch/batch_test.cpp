// The batch conformance cases (batch_cases.hpp) on every store that has batches, and the SQL
// stores' own batch rules.

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "batch/batch_cases.hpp"
#include "idem/idem.hpp"
#include "idem/memory/store.hpp"
#include "idem/redis/store.hpp"
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
          .connection = {.uri = *pg_uri(), .table_prefix = unique_name("batch") + "_"},
          .pool = {.size = 8}});
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

// A MemoryStore with batches whose batch commit lands and loses its answer (outcome_unknown), and
// whose later single commits cannot reach it (store_unavailable).
class LostBatchCommitReply {
 public:
  Result<Claim> claim(const ClaimRequest& r) { return inner_.claim(r); }
  Status commit(const Ticket&, const Completion&) {
    return Status(errc::store_unavailable, "the store cannot be reached");
  }
  Status abort(const Ticket& t) { return inner_.abort(t); }
  Status extend(const Ticket& t, std::chrono::milliseconds l) { return inner_.extend(t, l); }
  std::vector<Result<Claim>> claim_batch(std::span<const ClaimRequest> requests) {
    std::vector<Result<Claim>> out;
    for (const ClaimRequest& r : requests) out.push_back(inner_.claim(r));
    return out;
  }
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests) {
    for (const CommitRequest& r : requests) (void)inner_.commit(r.ticket, r.completion);
    return std::vector<Status>(requests.size(), Status(errc::outcome_unknown, "reply lost"));
  }
  MemoryStore& inner() { return inner_; }

 private:
  MemoryStore inner_;
};

// The batch's commit landed without its answer; the retries for the key could not reach the
// store: the commit is in doubt (outcome_unknown), never "nothing landed" (store_unavailable).
TEST(BatchCommitRetry, ACommitInDoubtStaysInDoubtWhenItsRetriesCannotReachTheStore) {
  LostBatchCommitReply store;
  IdempotencyGuard guard(store, Options{.scope = "batch.doubt",
                                        .commit_retry = {2, std::chrono::milliseconds{0},
                                                         std::chrono::milliseconds{0}}});
  const std::vector<BatchItem> items{{Key{"a"}}};
  auto out = guard.execute_batch(items, [](std::size_t) { return 7; });
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].has_value());
  EXPECT_FALSE(out[0].recorded());
  EXPECT_EQ(out[0].commit_error(), errc::outcome_unknown) << out[0].commit_failure().describe();
  // It had landed: a repeat replays it.
  auto again = guard.execute(Key{"a"}, [] { return 8; });
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.value(), 7);
}

}  // namespace idem::testing
