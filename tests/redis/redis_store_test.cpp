// RedisStore beyond the conformance suite: the record's layout in Redis, bytes that stress the
// protocol, expiry arithmetic, corrupt records, WAIT, and exactly-once across processes.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "idem/engine/effective_key.hpp"
#include "idem/idem.hpp"
#include "idem/redis/admin.hpp"
#include "idem/redis/store.hpp"
#include "redis/process_race.hpp"
#include "redis/redis_test_support.hpp"
#include "support/fault_relay.hpp"
#include "support/wait_shortfall.hpp"

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

// A finished record keeps state, fingerprint, fence and result, and no lease end: the fewer the
// fields, the fewer bytes each record costs the server (docs/performance.md, Bytes per record).
TEST_F(RedisStoreTest, AFinishedRecordHoldsStateFingerprintFenceAndResultOnly) {
  const auto fields = [&](const std::string& k) {
    Result<redis::Reply> r = client_->command({"HKEYS", store_->record_key(k)});
    std::vector<std::string> names;
    if (!r.has_value()) return names;
    for (const redis::Reply& e : r.value().elements) names.push_back(e.str);
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> finished{"f", "n", "r", "s"};
  const Claim c = acquire("one");
  EXPECT_EQ(fields("one"), (std::vector<std::string>{"f", "l", "n", "s"}));
  ASSERT_TRUE(
      store_->commit(Ticket{"one", c.fence}, Completion{ClaimStatus::completed, "x", 1h}).ok());
  EXPECT_EQ(fields("one"), finished);

  const Claim d = acquire("batched");
  const std::vector<CommitRequest> requests{
      CommitRequest{Ticket{"batched", d.fence}, Completion{ClaimStatus::failed, "y", 1h}}};
  const std::vector<Status> statuses = store_->commit_batch(requests);
  ASSERT_EQ(statuses.size(), 1U);
  ASSERT_TRUE(statuses[0].ok()) << statuses[0].failure().describe();
  EXPECT_EQ(fields("batched"), finished);
}

// A record finished before commits dropped the lease end (it kept its field l) still replays.
TEST_F(RedisStoreTest, ARecordFinishedWithItsLeaseEndStillReplays) {
  std::string fp(16, '\0');  // the fingerprint {1, 2} as the scripts store it
  fp[7] = '\1';
  fp[15] = '\2';
  const std::string key = store_->record_key("earlier");
  Result<redis::Reply> r = client_->command(
      {"HSET", key, "s", "C", "f", fp, "n", "41", "l", "1700000000000", "r", "kept"});
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(redis_integer(*client_, {"PEXPIRE", key, "3600000"}), 1);
  Result<Claim> c = store_->claim(ClaimRequest{"earlier", {1, 2}, 30s, 1h});
  ASSERT_TRUE(c.has_value()) << c.failure().describe();
  EXPECT_EQ(c->status, ClaimStatus::completed);
  EXPECT_EQ(c->fence, 41U);
  EXPECT_EQ(c->result, "kept");
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
  std::atomic<bool> taken_over{false};
  Fence slow_fence = 0;
  std::thread slow([&] {
    auto out = guard.execute("k", [&](Context& ctx) {
      slow_fence = ctx.fence();
      slow_started = true;
      // Past its lease until someone has taken over (a fixed sleep could end first on a slow
      // machine, and the commit would land before the takeover).
      const auto give_up = std::chrono::steady_clock::now() + 10s;
      while (!taken_over && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(1ms);
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
    taken_over = true;
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
  WaitShortfall shortfall;
  RedisStore durable(
      client_,
      RedisStoreOptions{
          .prefix = prefix_,
          .durability = {.replicas = 1, .timeout = 20ms, .on_timeout = shortfall.on_timeout()}});
  IdempotencyGuard guard{durable, Options{.scope = "wait"}};
  shortfall.expect_commit_unconfirmed_then_replayed(
      [&](auto handler) { return guard.execute("k", handler); },
      [&] { return durable.replication_timeouts(); });
  const StoreStats stats = durable.stats();
  EXPECT_EQ(stats.store, "redis");
  ASSERT_NE(stats.parts.get<RedisStats>(), nullptr);
  EXPECT_EQ(stats.parts.get<RedisStats>()->replication_timeouts,
            WaitShortfall::expected_timeouts());
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

// ---- Kept requests and the index find_abandoned reads (idem::CompletableStore) ---------------

std::string scoped(std::string_view scope, std::string_view id) {
  return std::string(::idem::detail::EffectiveKey(scope, {}, id).view());
}
std::string scope_keys(std::string_view scope) {
  std::string prefix(::idem::detail::EffectiveKey(scope, {}, {}).view());
  prefix.pop_back();
  return prefix;
}

// The index's members as "id@fence" (the scope's keys without their scope), in order.
std::vector<std::string> index_entries(redis::Client& c, const std::string& index,
                                       std::string_view scope) {
  std::vector<std::string> out;
  Result<redis::Reply> r = c.command({"ZRANGE", index, "0", "-1"});
  if (!r || r->type != redis::Reply::Type::array) return {"<no index>"};
  const std::size_t skip = scope_keys(scope).size() + 1;
  for (const redis::Reply& m : r->elements) {
    Fence fence = 0;
    for (std::size_t i = m.str.size() - 8; i < m.str.size(); ++i) {
      fence = fence << 8 | static_cast<unsigned char>(m.str[i]);
    }
    out.push_back(m.str.substr(skip, m.str.size() - 8 - skip) + "@" + std::to_string(fence));
  }
  return out;
}

TEST_F(RedisStoreTest, FindAbandonedDropsTheIndexEntriesOfRunsNoLongerInFlight) {
  const std::string scope = prefix_ + "rides";
  const std::string index = store_->abandoned_index_key(scope_keys(scope));
  ASSERT_FALSE(index.empty());
  auto keep = [&](const std::string& id, Fence fence) {
    const Status kept = store_->keep_request(Ticket{scoped(scope, id), fence}, "req-" + id);
    EXPECT_TRUE(kept.ok()) << id << ": " << (kept ? "" : kept.failure().describe());
  };
  // Completed: its entry goes, and the commit dropped the request from the record.
  const std::string done_key = scoped(scope, "done");
  const Claim done = acquire(done_key);
  keep("done", done.fence);
  const Completion completed{ClaimStatus::completed, "r", 1h};
  ASSERT_TRUE(store_->commit(Ticket{done_key, done.fence}, completed).ok());
  EXPECT_EQ(redis_integer(*client_, {"HEXISTS", store_->record_key(done_key), "q"}), 0);
  // Expired: gone from Redis with its request. Deleted by hand, as if it expired: a lease short
  // enough to lapse inside the test could lapse before the request is kept, on a slow machine.
  const std::string expired_key = scoped(scope, "expired");
  const Claim expired = acquire(expired_key);
  keep("expired", expired.fence);
  ASSERT_EQ(redis_integer(*client_, {"DEL", store_->record_key(expired_key)}), 1);
  // Kept by two runs of the same request: the first run's entry goes, the second's stays.
  const Claim first = acquire(scoped(scope, "again"));
  keep("again", first.fence);
  ASSERT_TRUE(store_->abort(Ticket{scoped(scope, "again"), first.fence}).ok());
  const Claim second = acquire(scoped(scope, "again"));
  keep("again", second.fence);
  ASSERT_TRUE(store_->abort(Ticket{scoped(scope, "again"), second.fence}).ok());
  // A holder that died between the index entry and the request (written by hand here): its
  // entry stays while it may still keep the request, and goes once it no longer can.
  const Claim pending = acquire(scoped(scope, "pending"));
  const Claim orphan = acquire(scoped(scope, "orphan"));
  const std::vector<std::pair<std::string, Fence>> by_hand{{"pending", pending.fence},
                                                           {"orphan", orphan.fence}};
  for (const auto& [id, fence] : by_hand) {
    std::string member = scoped(scope, id);
    for (int shift = 56; shift >= 0; shift -= 8)
      member.push_back(static_cast<char>(fence >> shift));
    ASSERT_EQ(redis_integer(*client_, {"ZADD", index, "0", member}), 1);
  }
  ASSERT_TRUE(store_->abort(Ticket{scoped(scope, "orphan"), orphan.fence}).ok());
  // Live: stays.
  const Claim live = acquire(scoped(scope, "live"));
  keep("live", live.fence);

  ASSERT_EQ(index_entries(*client_, index, scope).size(), 7u);
  Result<std::vector<Abandoned>> found = store_->find_abandoned(scope_keys(scope), 100);
  ASSERT_TRUE(found.has_value()) << found.failure().describe();
  ASSERT_EQ(found->size(), 1u);
  EXPECT_EQ(found.value()[0].key, scoped(scope, "again"));
  EXPECT_EQ(found.value()[0].request, "req-again");
  EXPECT_EQ(index_entries(*client_, index, scope),
            (std::vector<std::string>{"again@" + std::to_string(second.fence),
                                      "live@" + std::to_string(live.fence),
                                      "pending@" + std::to_string(pending.fence)}));

  // The pending holder's request lands after all, and its run is found once released.
  keep("pending", pending.fence);
  ASSERT_TRUE(store_->abort(Ticket{scoped(scope, "pending"), pending.fence}).ok());
  Result<std::vector<Abandoned>> later = store_->find_abandoned(scope_keys(scope), 100);
  ASSERT_TRUE(later.has_value()) << later.failure().describe();
  EXPECT_EQ(later->size(), 2u);
}

TEST_F(RedisStoreTest, OnOneServerAStaleKeepWritesNoIndexEntry) {
  const std::string scope = prefix_ + "stale";
  const std::string k = scoped(scope, "k");
  const Claim first = acquire(k);
  ASSERT_TRUE(store_->abort(Ticket{k, first.fence}).ok());
  const Claim second = acquire(k);
  EXPECT_EQ(store_->keep_request(Ticket{k, first.fence}, "late").error(), errc::lease_lost);
  EXPECT_EQ(redis_integer(*client_, {"ZCARD", store_->abandoned_index_key(k)}), 0)
      << "the entry and the request are one script on one server";
  ASSERT_TRUE(store_->keep_request(Ticket{k, second.fence}, "req").ok());
  EXPECT_EQ(redis_integer(*client_, {"ZCARD", store_->abandoned_index_key(k)}), 1);
}

TEST_F(RedisStoreTest, ABatchCommitDropsTheKeptRequestsLikeASingleCommit) {
  const std::string scope = prefix_ + "batch";
  std::vector<std::string> keys{scoped(scope, "a"), scoped(scope, "b")};
  std::vector<CommitRequest> commits;
  for (const std::string& k : keys) {
    const Claim c = acquire(k);
    ASSERT_TRUE(store_->keep_request(Ticket{k, c.fence}, "req").ok());
    commits.push_back(
        CommitRequest{Ticket{k, c.fence}, Completion{ClaimStatus::completed, "", 1h}});
  }
  for (const Status& s : store_->commit_batch(commits)) ASSERT_TRUE(s.ok());
  for (const std::string& k : keys) {
    EXPECT_EQ(redis_integer(*client_, {"HEXISTS", store_->record_key(k), "q"}), 0);
    EXPECT_EQ(redis_integer(*client_, {"HEXISTS", store_->record_key(k), "qn"}), 0);
  }
}

TEST_F(RedisStoreTest, AnAdminPurgeDropsTheIndexEntriesOfEndedRuns) {
  const std::string scope = prefix_ + "purged";
  const std::string done = scoped(scope, "done");
  const std::string live = scoped(scope, "live");
  const Claim d = acquire(done);
  ASSERT_TRUE(store_->keep_request(Ticket{done, d.fence}, "d").ok());
  ASSERT_TRUE(
      store_->commit(Ticket{done, d.fence}, Completion{ClaimStatus::completed, "", 1h}).ok());
  const Claim l = acquire(live);
  ASSERT_TRUE(store_->keep_request(Ticket{live, l.fence}, "l").ok());
  const std::string index = store_->abandoned_index_key(scope_keys(scope));
  ASSERT_EQ(redis_integer(*client_, {"ZCARD", index}), 2);
  auto admin = admin::redis_admin(*client_, admin::RedisAdminOptions{.prefix = prefix_});
  Result<std::size_t> purged = admin->purge_expired(100);
  ASSERT_TRUE(purged.has_value()) << purged.failure().describe();
  EXPECT_EQ(index_entries(*client_, index, scope),
            std::vector<std::string>{"live@" + std::to_string(l.fence)});
}

TEST_F(RedisStoreTest, FindAbandonedReadsAScopeOfMoreEntriesThanOnePage) {
  const std::string scope = prefix_ + "many";
  constexpr int kRuns = 520;  // more than two pages of the index
  long long released = 0;
  for (int i = 0; i < kRuns; ++i) {
    const std::string k = scoped(scope, "r" + std::to_string(i));
    const Claim c = acquire(k);
    ASSERT_TRUE(store_->keep_request(Ticket{k, c.fence}, std::to_string(i)).ok());
    // Every third run completes; the others are released.
    if (i % 3 == 0) {
      ASSERT_TRUE(
          store_->commit(Ticket{k, c.fence}, Completion{ClaimStatus::completed, "", 1h}).ok());
    } else {
      ASSERT_TRUE(store_->abort(Ticket{k, c.fence}).ok());
      ++released;
    }
  }
  Result<std::vector<Abandoned>> some = store_->find_abandoned(scope_keys(scope), 10);
  ASSERT_TRUE(some.has_value()) << some.failure().describe();
  EXPECT_EQ(some->size(), 10u);
  Result<std::vector<Abandoned>> all = store_->find_abandoned(scope_keys(scope), 1000);
  ASSERT_TRUE(all.has_value()) << all.failure().describe();
  EXPECT_EQ(static_cast<long long>(all->size()), released);
  EXPECT_EQ(redis_integer(*client_, {"ZCARD", store_->abandoned_index_key(scope_keys(scope))}),
            released)
      << "the completed runs' entries stayed";
}

TEST_F(RedisStoreTest, KeptRequestsNeedScopedKeysAndAScopePrefix) {
  EXPECT_EQ(store_->keep_request(Ticket{"\x85", 1}, "x").error(), errc::key_invalid);
  EXPECT_EQ(store_->find_abandoned("", 10).error(), errc::key_invalid);
  const std::string partial = std::string(1, '\x05') + "abc";  // a length of 5, 3 bytes
  EXPECT_EQ(store_->find_abandoned(partial, 10).error(), errc::key_invalid);
  EXPECT_TRUE(store_->abandoned_index_key(partial).empty());
  // The index key is never a record's, nor one the admin's record scans match.
  const std::string index = store_->abandoned_index_key(scope_keys("rides"));
  EXPECT_EQ(index.rfind(prefix_ + "{abandoned:", 0), 0u) << index;
  EXPECT_EQ(index, store_->abandoned_index_key(scoped("rides", "any id")));
}

TEST_F(RedisStoreTest, AGuardKeepsOnlyRequestsWithinMaxKeptRequest) {
  const std::string scope = prefix_ + "limit";
  IdempotencyGuard guard{*store_,
                         Options{.scope = scope, .keep_request = true, .max_kept_request = 16}};
  const std::string fits(16, 'a');
  const std::string too_large(17, 'b');
  for (const std::string& payload : {fits, too_large}) {
    EXPECT_THROW((void)guard.execute(payload.substr(0, 1), payload,
                                     [](Context&) -> int { throw std::runtime_error("failed"); }),
                 std::runtime_error);
  }
  Result<std::vector<Abandoned>> found = store_->find_abandoned(scope_keys(scope), 10);
  ASSERT_TRUE(found.has_value()) << found.failure().describe();
  ASSERT_EQ(found->size(), 1u);
  EXPECT_EQ(found.value()[0].request, fits);
  EXPECT_EQ(redis_integer(*client_, {"ZCARD", store_->abandoned_index_key(scope_keys(scope))}), 1)
      << "a request not kept has no index entry";
}

}  // namespace
}  // namespace idem::testing
