// RedisStore beyond the conformance suite: the record's layout in Redis, bytes that stress the
// protocol, expiry arithmetic, corrupt records, WAIT, and exactly-once across processes.

#include "idem/stores/redis_store.hpp"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "idem/idem.hpp"
#include "redis/process_race.hpp"
#include "redis/redis_test_support.hpp"
#include "support/fault_relay.hpp"

namespace idem::testing {
namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;

class RedisStoreTest : public RedisTest {
 protected:
  RedisStoreTest() : RedisTest("store") {}
  void SetUp() override {
    RedisTest::SetUp();
    if (!ready()) return;
    store_ = std::make_unique<RedisStore>(client_, RedisStoreOptions{.prefix = prefix_});
  }

  Claim acquire(std::string_view key, Fingerprint fp = {1, 2},
                std::chrono::milliseconds lease = 30s) {
    Result<Claim> c = store_->claim(ClaimRequest{key, fp, lease, 1h});
    EXPECT_TRUE(c.has_value()) << (c ? "" : c.failure().describe());
    EXPECT_EQ(c->status, ClaimStatus::acquired);
    return c ? c.value() : Claim{};
  }

  std::unique_ptr<RedisStore> store_;
};

TEST_F(RedisStoreTest, RecordKeyIsTheHashTagThenTheRawBytes) {
  const std::string raw = "a{b}c\0\r\n"s;
  const std::string key = store_->record_key(raw);
  ASSERT_EQ(key.size(), prefix_.size() + 18 + raw.size());
  EXPECT_EQ(key.substr(0, prefix_.size()), prefix_);
  EXPECT_EQ(key[prefix_.size()], '{');
  EXPECT_EQ(key[prefix_.size() + 17], '}');
  for (std::size_t i = prefix_.size() + 1; i < prefix_.size() + 17; ++i) {
    EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(key[i]))) << key;
  }
  EXPECT_EQ(key.substr(prefix_.size() + 18), raw);
  // Distinct raw keys give distinct names even if their tags were to collide.
  EXPECT_NE(store_->record_key("x"), store_->record_key("y"));
}

TEST_F(RedisStoreTest, RecordLivesInOneHashWithTheServersFieldsAndRetention) {
  const std::string k = "layout";
  const Claim c = acquire(k);
  const std::string key = store_->record_key(k);
  EXPECT_EQ(redis_string(*client_, {"TYPE", key}), "hash");
  EXPECT_EQ(redis_string(*client_, {"HGET", key, "s"}), "P");
  EXPECT_EQ(redis_string(*client_, {"HGET", key, "n"}), std::to_string(c.fence));
  const long long pttl = redis_integer(*client_, {"PTTL", key});
  EXPECT_GT(pttl, 3'500'000);  // retention 1 h, set by the claim itself
  EXPECT_LE(pttl, 3'600'000);
}

TEST_F(RedisStoreTest, AbortNeverDeletesTheRecordAndKeepsItsFence) {
  const std::string k = "abort";
  const Claim c = acquire(k);
  ASSERT_TRUE(store_->abort(Ticket{k, c.fence}).ok());
  const std::string key = store_->record_key(k);
  EXPECT_EQ(redis_integer(*client_, {"EXISTS", key}), 1);
  EXPECT_EQ(redis_string(*client_, {"HGET", key, "s"}), "R");
  EXPECT_EQ(redis_string(*client_, {"HGET", key, "n"}), std::to_string(c.fence));
  EXPECT_EQ(acquire(k).fence, c.fence + 1);
}

TEST_F(RedisStoreTest, ARecordThatExpiredStartsAboveEveryEarlierFence) {
  const std::string k = "reborn";
  const Claim first = acquire(k);
  ASSERT_EQ(redis_integer(*client_, {"DEL", store_->record_key(k)}), 1);  // as if it expired
  const Claim second = acquire(k);
  EXPECT_GT(second.fence, first.fence);
  EXPECT_EQ(
      store_->commit(Ticket{k, first.fence}, Completion{ClaimStatus::completed, "x", 1h}).error(),
      errc::lease_lost);
}

TEST_F(RedisStoreTest, ZeroOrNegativeTtlExpiresAtOnceInsteadOfFailing) {
  for (const auto ttl : {0ms, -5ms}) {
    const std::string k = "ttl" + std::to_string(ttl.count());
    const Claim c = acquire(k);
    ASSERT_TRUE(
        store_->commit(Ticket{k, c.fence}, Completion{ClaimStatus::completed, "r", ttl}).ok());
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(redis_integer(*client_, {"EXISTS", store_->record_key(k)}), 0);
    EXPECT_EQ(acquire(k, {9, 9}).status, ClaimStatus::acquired);
  }
}

TEST_F(RedisStoreTest, GuardReplaysKeysAndResultsWithProtocolBytes) {
  IdempotencyGuard guard{*store_, Options{.scope = "bytes"}};
  const std::vector<std::string> values = {"with space", "crlf\r\n*3\r\n$3\r\nSET", "nul\0mid"s,
                                           "{braces}{}", ""};
  for (const std::string& v : values) {
    const std::string id = v.empty() ? "empty"s : v;
    const std::string principal = "tenant\0{x}"s;
    const Key key{id, principal};
    int runs = 0;
    auto first = guard.execute(key, [&] { return ++runs, v; });
    ASSERT_TRUE(first) << first.message();
    auto again = guard.execute(key, [&] { return ++runs, "other"s; });
    ASSERT_TRUE(again) << again.message();
    EXPECT_TRUE(again.replayed());
    EXPECT_EQ(again.value(), v);
    EXPECT_EQ(runs, 1);
  }
}

TEST_F(RedisStoreTest, HalfMegabyteBinaryResultReplaysExactly) {
  std::string big(512 * 1024 + 17, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 131) ^ (i >> 9));
  IdempotencyGuard guard{*store_, Options{.scope = "big"}};
  auto first = guard.execute("k", [&] { return big; });
  ASSERT_TRUE(first) << first.message();
  EXPECT_TRUE(first.recorded());
  auto again = guard.execute("k", [] { return "not run"s; });
  ASSERT_TRUE(again) << again.message();
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.value(), big);
}

TEST_F(RedisStoreTest, ForeignValueUnderTheKeyIsRecordCorrupt) {
  const std::string k = "foreign";
  ASSERT_EQ(redis_string(*client_, {"SET", store_->record_key(k), "not a record"}), "OK");
  Result<Claim> c = store_->claim(ClaimRequest{k, {1, 2}, 30s, 1h});
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error(), errc::record_corrupt);
  EXPECT_NE(c.failure().message.find("WRONGTYPE"), std::string::npos) << c.failure().message;

  const std::string k2 = "bad-state";
  ASSERT_EQ(redis_integer(*client_, {"HSET", store_->record_key(k2), "s", "Z", "n", "3"}), 2);
  Result<Claim> c2 = store_->claim(ClaimRequest{k2, {1, 2}, 30s, 1h});
  ASSERT_FALSE(c2.has_value());
  EXPECT_EQ(c2.error(), errc::record_corrupt);
}

// Record hashes that idem did not write: no fence, a fence HINCRBY cannot take or Lua cannot
// hold exactly, a finished record without a result. Each is record_corrupt, never an outage
// (store_unavailable would invite retries) and never an acquired claim.
TEST_F(RedisStoreTest, RecordHashesWithoutAUsableFenceOrResultAreRecordCorrupt) {
  std::string fp(16, '\0');  // the fingerprint {1, 2} as the scripts store it
  fp[7] = '\1';
  fp[15] = '\2';
  auto hset = [&](const std::string& k, std::initializer_list<std::string_view> fields) {
    const std::string key = store_->record_key(k);
    std::vector<std::string_view> argv{"HSET", key};
    argv.insert(argv.end(), fields);
    Result<redis::Reply> r = client_->command(argv);
    ASSERT_TRUE(r.has_value()) << k;
  };
  hset("no-fence", {"s", "C", "f", fp, "r", "x"});
  hset("text-fence", {"s", "C", "n", "abc", "f", fp, "r", "x"});
  hset("real-fence", {"s", "R", "n", "1.5"});
  hset("huge-fence", {"s", "R", "n", "9007199254740993"});
  hset("no-result", {"s", "C", "n", "3", "f", fp});
  for (const char* k : {"no-fence", "text-fence", "real-fence", "huge-fence", "no-result"}) {
    Result<Claim> c = store_->claim(ClaimRequest{k, {1, 2}, 30s, 1h});
    ASSERT_FALSE(c.has_value()) << k << ": " << static_cast<int>(c->status);
    EXPECT_EQ(c.error(), errc::record_corrupt) << k << ": " << c.failure().message;
  }
}

TEST_F(RedisStoreTest, LeaseExpiryTakeoverThroughTheGuardFencesTheSlowHolderOff) {
  RedisStore& store = *store_;
  IdempotencyGuard guard{store, Options{.scope = "takeover", .lease = 200ms}};
  std::atomic<bool> slow_started{false};
  Fence slow_fence = 0;
  std::thread slow([&] {
    auto out = guard.execute("k", [&](Context& ctx) {
      slow_fence = ctx.fence();
      slow_started = true;
      std::this_thread::sleep_for(600ms);  // past its lease; someone takes over meanwhile
      return "slow"s;
    });
    ASSERT_TRUE(out.has_value());
    EXPECT_FALSE(out);  // superseded: the taker's result is the key's answer
    EXPECT_FALSE(out.recorded());
    EXPECT_EQ(out.commit_error(), errc::lease_lost);
  });
  while (!slow_started) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(300ms);
  auto fast = guard.execute("k", [&](Context& ctx) {
    EXPECT_EQ(ctx.fence(), slow_fence + 1);
    return "fast"s;
  });
  ASSERT_TRUE(fast) << fast.message();
  EXPECT_TRUE(fast.recorded());
  slow.join();
  auto replay = guard.execute("k", [] { return "never"s; });
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay.value(), "fast");
}

TEST_F(RedisStoreTest, WaitShortfallIsReportedAndAnUnconfirmedCommitIsNotRecorded) {
  // The test server has no replicas: WAIT 1 returns 0 after its timeout.
  std::atomic<int> reports{0};
  std::string last_op;
  RedisStore durable(
      client_, RedisStoreOptions{
                   .prefix = prefix_,
                   .durability = {.replicas = 1,
                                  .timeout = 20ms,
                                  .on_timeout = [&](std::string_view op, int acked, int wanted) {
                                    EXPECT_EQ(acked, 0);
                                    EXPECT_EQ(wanted, 1);
                                    last_op = op;
                                    reports.fetch_add(1);
                                  }}});
  IdempotencyGuard guard{durable, Options{.scope = "wait"}};
  auto out = guard.execute("k", [] { return 7; });
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ(out.value(), 7);
  // The claim's shortfall is only reported; the commit's reaches the caller: the value is not
  // known to be recorded durably (outcome_unknown), and why says so. Each of the guard's commit
  // retries finds the same commit on the primary and waits for it again: never lease_lost.
  EXPECT_FALSE(out.recorded());
  EXPECT_EQ(out.commit_error(), errc::outcome_unknown);
  EXPECT_NE(out.commit_failure().message.find("commit not confirmed: 0 of 1 replicas"),
            std::string::npos)
      << out.commit_failure().message;
  const int commits = Options{}.commit_retry.attempts;
  EXPECT_EQ(reports.load(), 1 + commits);  // after the claim and after every commit attempt
  EXPECT_EQ(last_op, "commit");
  EXPECT_EQ(durable.replication_timeouts(), 1u + commits);
  // The write stands on the primary: a repeat replays it.
  auto replay = guard.execute("k", [] { return 8; });
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay.value(), 7);
  EXPECT_TRUE(replay.replayed());
  EXPECT_EQ(durable.replication_timeouts(), 1u + commits);  // a replay writes nothing: no WAIT
  const StoreStats stats = durable.stats();
  EXPECT_EQ(stats.store, "redis");
  ASSERT_TRUE(stats.redis);
  EXPECT_EQ(stats.redis->replication_timeouts, 1u + commits);
}

// The commit's EVALSHA reaches Redis, which runs it; the connection is cut before its reply
// reaches the client. The guard's commit retry under the same fence finds the record committed
// under it: the value is recorded (not a takeover), the next call replays it, the handler ran
// once.
TEST_F(RedisStoreTest, ACommitWhoseReplyIsLostIsRecordedNotATakeover) {
  redis::ConnectionOptions direct = redis_options();
  if (!direct.unix_socket.empty()) GTEST_SKIP() << "the relay speaks TCP";
  FaultRelay relay(direct.host, direct.port);
  redis::ConnectionOptions relayed = direct;
  relayed.host = "127.0.0.1";
  relayed.port = relay.port();
  auto client = std::make_shared<redis::Client>(relayed);
  RedisStore store(client, RedisStoreOptions{.prefix = prefix_});
  auto observer = std::make_shared<Observer>();
  IdempotencyGuard guard{
      store, Options{.scope = "lost", .observer = observer, .commit_retry = {.backoff = 50ms}}};
  ASSERT_TRUE(guard.execute("warm", [] { return "scripts loaded"s; }).recorded());
  // The commit's script call carries the result; the claim's does not.
  const std::string value = "receipt-of-the-lost-reply";
  relay.lose_reply_after([&](std::string_view chunk) {
    return chunk.find("EVAL") != std::string_view::npos &&
           chunk.find(value) != std::string_view::npos;
  });
  int runs = 0;
  auto out = guard.execute("k", [&] {
    ++runs;
    return value;
  });
  ASSERT_TRUE(relay.one_shot_fired());
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ(out.value(), value);
  EXPECT_TRUE(out.recorded()) << out.commit_failure().describe();
  EXPECT_FALSE(out.commit_error());
  EXPECT_EQ(observer->counters().lease_lost, 0u);
  auto again = guard.execute("k", [&] {
    ++runs;
    return "ran again"s;
  });
  ASSERT_TRUE(again) << again.message();
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.value(), value);
  EXPECT_EQ(runs, 1);
}

TEST_F(RedisStoreTest, EachKeyRunsOnceAcrossFourProcesses) {
  expect_each_key_runs_once(
      ProcessRace{.prefix = prefix_, .scope = prefix_ + "procs"},
      [] { return std::make_shared<redis::Client>(redis_options()); }, *client_);
}

}  // namespace
}  // namespace idem::testing
