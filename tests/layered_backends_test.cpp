// LayeredGuard over real servers: Redis request-ID cache and Redis tokens in front of a SQLite or
// PostgreSQL record in transactional mode. Needs IDEM_TEST_REDIS_URI (and IDEM_TEST_PG_URI for
// the PostgreSQL cases); unset: skips; set but unreachable: fails.

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "idem/layered_guard.hpp"
#include "idem/redis/request_id_cache.hpp"
#include "idem/redis/token_store.hpp"
#include "redis/redis_test_support.hpp"
#include "sql/sql_test_support.hpp"
#include "support/free_port.hpp"

namespace idem::testing {
namespace {

using namespace std::chrono_literals;

class LayeredBackends : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (redis_uri() == nullptr) GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set";
    if (GetParam() == Backend::postgres) {
      if (!pg_uri()) GTEST_SKIP() << kNoPgMessage;
      target_ = Target{Backend::postgres, *pg_uri(), unique_name("lay") + "_"};
    } else {
      target_ = Target{Backend::sqlite, db_.path(), "idem_"};
    }
    redis_ = connect_redis(redis_options());
    ASSERT_NE(redis_, nullptr);
    const std::string prefix = unique_prefix("layered");
    cache_ =
        std::make_unique<RequestIdCache>(redis_, RequestIdCacheOptions{.prefix = prefix + "req:"});
    tokens_ = std::make_unique<RedisTokenStore>(redis_,
                                                RedisTokenStoreOptions{.prefix = prefix + "tok:"});
    records_ = make_store(target_, SqlMode::transactional);
    create_business_table(target_);
  }

  RecordLayer<SqlStore> record_layer() {
    return RecordLayer<SqlStore>(*records_,
                                 LayerSettings{.name = "db", .scope = "payments", .block_for = 5s});
  }
  std::string token() { return tokens_->issue(1min).value(); }

  TempDb db_;
  Target target_;
  std::shared_ptr<redis::Client> redis_;
  std::unique_ptr<RequestIdCache> cache_;
  std::unique_ptr<RedisTokenStore> tokens_;
  std::unique_ptr<SqlStore> records_;
};

TEST_P(LayeredBackends, EachLayerAnswersItsOwnReplays) {
  ThreeTierGuard<RequestIdCache, RedisTokenStore, SqlStore> guard{
      RequestIdLayer{*cache_}, TokenLayer{*tokens_}, record_layer()};
  const std::string t1 = token();
  auto pay = [&](Context& ctx) {
    insert_business_row(target_, ctx, "order-1", "charged");
    return std::string("receipt-1");
  };
  auto fresh = guard.execute({"req-1", t1, "order-1", "alice", "p"}, pay);
  ASSERT_TRUE(fresh.has_value()) << fresh.message();
  EXPECT_TRUE(fresh.recorded());
  auto at_gateway = guard.execute({"req-1", t1, "order-1", "alice", "p"}, pay);
  EXPECT_EQ(at_gateway.layer_name(), "request_id");
  auto at_token = guard.execute({"req-2", t1, "order-1", "alice", "p"}, pay);
  EXPECT_EQ(at_token.layer_name(), "token");
  const std::string t2 = token();
  auto at_db = guard.execute({"req-3", t2, "order-1", "alice", "p"}, pay);
  EXPECT_EQ(at_db.layer_name(), "db") << at_db.message();
  for (auto* out : {&at_gateway, &at_token, &at_db}) {
    ASSERT_TRUE(out->has_value()) << out->message();
    EXPECT_TRUE(out->replayed());
    EXPECT_EQ(out->value(), "receipt-1");
  }
  EXPECT_EQ(count_business_rows(target_, "order-1"), 1);
  // The token the record answered for was returned to pending: another intent may use it.
  auto other = guard.execute({"req-4", t2, "order-2", "alice", "p"}, [&](Context& ctx) {
    insert_business_row(target_, ctx, "order-2", "charged");
    return std::string("receipt-2");
  });
  EXPECT_TRUE(other.executed()) << other.message();
}

TEST_P(LayeredBackends, HandlerThrowsRollsBackAndFreesEveryLayer) {
  ThreeTierGuard<RequestIdCache, RedisTokenStore, SqlStore> guard{
      RequestIdLayer{*cache_}, TokenLayer{*tokens_}, record_layer()};
  const std::string t = token();
  const LayeredRequest req{"req-1", t, "order-1", "alice", "p"};
  EXPECT_THROW((void)guard.execute(req,
                                   [&](Context& ctx) -> std::string {
                                     insert_business_row(target_, ctx, "order-1", "half");
                                     throw std::runtime_error("declined");
                                   }),
               std::runtime_error);
  EXPECT_EQ(count_business_rows(target_, "order-1"), 0);
  auto retry = guard.execute(req, [&](Context& ctx) {
    insert_business_row(target_, ctx, "order-1", "charged");
    return std::string("ok");
  });
  EXPECT_TRUE(retry.executed()) << retry.message();
  EXPECT_EQ(count_business_rows(target_, "order-1"), 1);
}

TEST_P(LayeredBackends, EightRacingThreadsRunFnOnce) {
  ThreeTierGuard<RequestIdCache, RedisTokenStore, SqlStore> guard{
      RequestIdLayer{*cache_}, TokenLayer{*tokens_}, record_layer()};
  for (int round = 0; round < 5; ++round) {
    const std::string key = "order-" + std::to_string(round);
    const std::string t = token();
    std::atomic<int> runs{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    std::vector<std::string> answers(8);
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&, i] {
        while (!go) std::this_thread::yield();
        const std::string rid = "rid-" + key + "-" + std::to_string(i % 4);
        for (int attempt = 0; attempt < 2000; ++attempt) {
          auto out = guard.execute({rid, t, key, "alice", "p"}, [&](Context& ctx) {
            runs.fetch_add(1);
            insert_business_row(target_, ctx, key, "charged");
            return "receipt-" + key;
          });
          if (out.error() == errc::in_progress) {
            std::this_thread::sleep_for(1ms);
            continue;
          }
          answers[i] = out ? out.value() : "error: " + out.message();
          return;
        }
      });
    }
    go = true;
    for (auto& th : threads) th.join();
    EXPECT_EQ(runs.load(), 1);
    EXPECT_EQ(count_business_rows(target_, key), 1);
    for (const auto& a : answers) EXPECT_EQ(a, "receipt-" + key);
  }
}

TEST_P(LayeredBackends, RedisDownFailsClosedOrSkipsOnlyTheGateway) {
  redis::ConnectionOptions down;
  down.port = free_port();  // nothing listens there: Redis is down
  down.connect_timeout = 200ms;
  down.command_timeout = 200ms;
  auto dead = std::make_shared<redis::Client>(down);
  RequestIdCache dead_cache(dead);
  RedisTokenStore dead_tokens(dead);

  ThreeTierGuard<RequestIdCache, RedisTokenStore, SqlStore> closed{
      RequestIdLayer{dead_cache}, TokenLayer{*tokens_}, record_layer()};
  const std::string t = token();
  int runs = 0;
  auto refused = closed.execute({"req-1", t, "order-1", "alice", "p"}, [&] { return ++runs; });
  EXPECT_EQ(refused.error(), errc::store_unavailable);
  EXPECT_EQ(refused.layer_name(), "request_id");

  ThreeTierGuard<RequestIdCache, RedisTokenStore, SqlStore> open{
      LayeredOptions{.on_layer_down = LayerDownPolicy::skip_cache}, RequestIdLayer{dead_cache},
      TokenLayer{*tokens_}, record_layer()};
  auto skipped = open.execute({"req-1", t, "order-1", "alice", "p"}, [&] { return ++runs; });
  ASSERT_TRUE(skipped.has_value()) << skipped.message();
  EXPECT_TRUE(skipped.executed());
  EXPECT_EQ(skipped.skipped(), 1u);
  auto replay = open.execute({"req-1", t, "order-1", "alice", "p"}, [&] { return ++runs; });
  EXPECT_EQ(replay.layer_name(), "token");
  EXPECT_EQ(runs, 1);

  // A token layer that is down is never skipped.
  ThreeTierGuard<RequestIdCache, RedisTokenStore, SqlStore> no_tokens{
      LayeredOptions{.on_layer_down = LayerDownPolicy::skip_cache}, RequestIdLayer{*cache_},
      TokenLayer{dead_tokens}, record_layer()};
  auto token_down = no_tokens.execute({"req-9", "AAAAAAAAAAAAAAAAAAAAAA", "order-9", "alice", "p"},
                                      [&] { return ++runs; });
  EXPECT_EQ(token_down.error(), errc::store_unavailable);
  EXPECT_EQ(token_down.layer_name(), "token");
  EXPECT_EQ(runs, 1);
  // The gateway claim made on the way was released: the same request id runs once Redis is back.
  ThreeTierGuard<RequestIdCache, RedisTokenStore, SqlStore> healthy{
      RequestIdLayer{*cache_}, TokenLayer{*tokens_}, record_layer()};
  const std::string t9 = token();
  auto later = healthy.execute({"req-9", t9, "order-9", "alice", "p"}, [&] { return ++runs; });
  EXPECT_TRUE(later.executed()) << later.message();
}

INSTANTIATE_TEST_SUITE_P(Sql, LayeredBackends,
                         ::testing::Values(Backend::sqlite, Backend::postgres),
                         [](const auto& info) { return std::string(name_of(info.param)); });

}  // namespace
}  // namespace idem::testing
