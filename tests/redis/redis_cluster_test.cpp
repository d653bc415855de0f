// Redis Cluster mode of idem::redis::Client: key slots (CRC16 against known values and against
// the server), the cluster URI, routing to the slot's primary, refusals of unusable settings, a
// scope's abandoned runs found on every primary through its index, and a guard race across
// processes on a cluster.

#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "idem/engine/effective_key.hpp"
#include "idem/guard.hpp"
#include "idem/redis/admin.hpp"
#include "idem/redis/store.hpp"
#include "redis/process_race.hpp"
#include "redis/redis_cluster_support.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {
namespace {

using namespace std::chrono_literals;
using redis::key_slot;

TEST(RedisClusterSlotTest, Crc16MatchesRedisClusterKnownValues) {
  // The CRC16 (XMODEM) check value: CRC of "123456789" is 0x31C3.
  EXPECT_EQ(key_slot("123456789"), 0x31C3);
  // Values from the Redis Cluster specification and CLUSTER KEYSLOT.
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot("bar"), 5061);
  EXPECT_EQ(key_slot("hello"), 866);
  EXPECT_EQ(key_slot("somekey"), 11058);
  EXPECT_EQ(key_slot(""), 0);
}

TEST(RedisClusterSlotTest, HashTagRules) {
  // The bytes between the first '{' and the next '}' when not empty, else the whole key.
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
  EXPECT_EQ(key_slot("{user1000}.followers"), key_slot("user1000"));
  // Slots as CLUSTER KEYSLOT gives them (Redis 7.0).
  EXPECT_EQ(key_slot("foo{}{bar}"), 8363);  // empty tag: the whole key
  EXPECT_EQ(key_slot("foo{{bar}}zap"), 4015);
  EXPECT_EQ(key_slot("{bar"), 4015);
  EXPECT_EQ(key_slot("foo{bar}{zap}"), 5061);  // "bar"
  EXPECT_EQ(key_slot("{unclosed"), 470);
  const std::string with_nul("a{b\0c}d", 7);
  EXPECT_EQ(key_slot(with_nul), key_slot(std::string_view("b\0c", 3)));
}

TEST(RedisClusterSlotTest, SlotsAgreeWithClusterKeyslotForBinaryKeys) {
  IDEM_REQUIRE_REDIS_CLUSTER(client);
  std::mt19937 rng(42);
  for (int i = 0; i < 300; ++i) {
    std::string key(static_cast<std::size_t>(rng() % 24), '\0');
    for (char& c : key) c = static_cast<char>(rng() % 8 == 0 ? '{' : rng() % 8 == 0 ? '}' : rng());
    Result<redis::Reply> r = client->command({"CLUSTER", "KEYSLOT", key});
    ASSERT_TRUE(r) << r.failure().describe();
    ASSERT_EQ(r->type, redis::Reply::Type::integer);
    EXPECT_EQ(r->integer, key_slot(key)) << "key of " << key.size() << " bytes";
  }
}

TEST(RedisClusterUriTest, SeedsUserAndPassword) {
  auto o = redis::ClusterOptions::from_uri(
      "redis+cluster://app:s%40cret@10.0.0.1:7000,h2:7001,[::1]:7002");
  ASSERT_TRUE(o) << o.failure().describe();
  EXPECT_EQ(o->seeds, (std::vector<std::string>{"10.0.0.1:7000", "h2:7001", "[::1]:7002"}));
  EXPECT_EQ(o->node.user, "app");
  EXPECT_EQ(o->node.password, "s@cret");
  EXPECT_EQ(o->node.db, 0);
}

TEST(RedisClusterUriTest, UnusableUrisAreRefusedWithAReason) {
  for (const char* uri :
       {"redis://h:1", "redis+cluster://", "redis+cluster://h:1,,h:2", "redis+cluster://h:1,",
        "redis+cluster://h:1/2", "redis+cluster://h:x", "redis+cluster://h:1?db=2"}) {
    auto o = redis::ClusterOptions::from_uri(uri);
    ASSERT_FALSE(o) << uri;
    EXPECT_EQ(o.failure().code, errc::config_invalid);
    EXPECT_NE(o.failure().message.find(uri), std::string::npos) << o.failure().message;
  }
  auto secret = redis::ClusterOptions::from_uri("redis+cluster://app:hunter2@h:1,h:x");
  ASSERT_FALSE(secret);
  EXPECT_EQ(secret.failure().message.find("hunter2"), std::string::npos)
      << secret.failure().message;
}

// Options no cluster allows are a programming error: refused at construction, naming the field,
// not answered store_unavailable (an outage) on every call.
TEST(RedisClusterClientTest, UnusableSettingsAreRefusedAtConstructionWithAReason) {
  auto refusal = [](const redis::ClusterOptions& o) {
    try {
      redis::Client client(o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("not refused");
  };
  EXPECT_NE(refusal({}).find("seeds is empty"), std::string::npos) << refusal({});
  redis::ClusterOptions db{.seeds = {"127.0.0.1:1"}};
  db.node.db = 3;
  EXPECT_NE(refusal(db).find("database 0"), std::string::npos) << refusal(db);
  redis::ClusterOptions unix_socket{.seeds = {"127.0.0.1:1"}};
  unix_socket.node.unix_socket = "/tmp/redis.sock";
  EXPECT_NE(refusal(unix_socket).find("TCP"), std::string::npos) << refusal(unix_socket);
  redis::ClusterOptions bad_seed{.seeds = {"127.0.0.1:1", "127.0.0.1:x"}};
  EXPECT_NE(refusal(bad_seed).find("'127.0.0.1:x' is not host:port"), std::string::npos)
      << refusal(bad_seed);
  // The constructor still never connects: unreachable seeds are a call's failure.
  redis::Client lazy(redis::ClusterOptions{.seeds = {"127.0.0.1:1"}});
  EXPECT_TRUE(lazy.is_cluster());
}

TEST(RedisClusterClientTest, UnreachableSeedsFailWithinTheCallDeadline) {
  redis::ClusterOptions o{.seeds = {"127.0.0.1:1", "127.0.0.1:2"}};
  o.node.connect_timeout = 200ms;
  o.node.command_timeout = 300ms;
  redis::Client client(o);
  const auto start = std::chrono::steady_clock::now();
  Result<redis::Reply> r = client.command({"GET", "k"});
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.failure().code, errc::store_unavailable);
  EXPECT_NE(r.failure().message.find("127.0.0.1:"), std::string::npos) << r.failure().message;
  EXPECT_LT(took, 500ms + 200ms);  // connect + command timeouts, and scheduling slack
}

TEST(RedisClusterClientTest, EachKeyLandsOnThePrimaryOfItsSlot) {
  IDEM_REQUIRE_REDIS_CLUSTER(client);
  const std::string prefix = unique_prefix("route");
  RedisStore store(client, RedisStoreOptions{.prefix = prefix});
  IdempotencyGuard guard{store, Options{.scope = "route"}};
  std::set<std::string> owners;
  for (int i = 0; i < 30; ++i) {
    const std::string id = "k" + std::to_string(i);
    auto out = guard.execute(id, [&] { return id; });
    ASSERT_TRUE(out && out.recorded()) << out.message();
    const std::string name = store.record_key(detail::EffectiveKey("route", {}, id).view());
    const ClusterNode owner = owner_of(key_slot(name));
    owners.insert(owner.address);
    // Behind the router's back: the record is on the owner, as a hash; the other primaries
    // send a plain client there.
    auto direct = node_client(owner.address);
    EXPECT_EQ(redis_string(*direct, {"TYPE", name}), "hash") << owner.address;
    const std::string moved =
        "<error MOVED " + std::to_string(key_slot(name)) + " " + owner.address + ">";
    for (const ClusterNode& n : cluster_nodes()) {
      if (n.primary && n.address != owner.address) {
        EXPECT_EQ(redis_string(*node_client(n.address), {"TYPE", name}), moved) << n.address;
      }
    }
  }
  EXPECT_EQ(owners.size(), 3u);  // 30 keys reach every primary
  EXPECT_GE(client->open_connections(), 3u);
}

TEST(RedisClusterClientTest, PlainCommandsRouteByTheirFirstArgument) {
  IDEM_REQUIRE_REDIS_CLUSTER(client);
  const std::string prefix = unique_prefix("cmd");
  for (int i = 0; i < 20; ++i) {
    const std::string key = prefix + std::to_string(i);
    ASSERT_EQ(redis_integer(*client, {"INCR", key}), 1);
    ASSERT_EQ(redis_integer(*client, {"INCR", key}), 2);
    EXPECT_EQ(redis_string(*node_client(owner_of(key_slot(key)).address), {"GET", key}), "2");
  }
}

TEST(RedisClusterClientTest, AbandonedRunsOnEveryPrimaryAreFoundThroughTheScopesIndex) {
  IDEM_REQUIRE_REDIS_CLUSTER(client);
  const std::string prefix = unique_prefix("abandoned");
  RedisStore store(client, RedisStoreOptions{.prefix = prefix});
  IdempotencyGuard guard{store, Options{.scope = "rides", .keep_request = true}};
  std::set<std::string> owners;
  for (int i = 0; i < 30; ++i) {
    const std::string id = "r" + std::to_string(i);
    if (i % 2 == 0) {  // completed: its index entry is stale
      ASSERT_TRUE(guard.execute(id, id, [&] { return 1; }).recorded());
    } else {  // released by a failing handler: abandoned, its request kept
      EXPECT_THROW((void)guard.execute(id, id, [&]() -> int { throw std::runtime_error("x"); }),
                   std::runtime_error);
    }
    owners.insert(
        owner_of(key_slot(store.record_key(detail::EffectiveKey("rides", {}, id).view()))).address);
  }
  EXPECT_EQ(owners.size(), 3u) << "the records reach every primary";
  std::string scope(detail::EffectiveKey("rides", {}, {}).view());
  scope.pop_back();
  const std::string index = store.abandoned_index_key(scope);
  ASSERT_EQ(redis_integer(*client, {"ZCARD", index}), 30);
  // An operator's purge, over every primary, drops the completed runs' entries.
  auto admin = admin::redis_admin(*client, admin::RedisAdminOptions{.prefix = prefix});
  ASSERT_TRUE(admin->purge_expired(100).has_value());
  EXPECT_EQ(redis_integer(*client, {"ZCARD", index}), 15);
  Result<std::vector<Abandoned>> found = store.find_abandoned(scope, 100);
  ASSERT_TRUE(found.has_value()) << found.failure().describe();
  std::set<std::string> requests;
  for (const Abandoned& a : found.value()) requests.insert(a.request);
  EXPECT_EQ(requests.size(), 15u);
  EXPECT_TRUE(requests.contains("r1") && requests.contains("r29"));
}

TEST(RedisClusterRaceTest, EachKeyRunsOnceAcrossFourProcesses) {
  IDEM_REQUIRE_REDIS_CLUSTER(client);
  const ProcessRace race{
      .threads = 3, .keys = 24, .prefix = unique_prefix("crace"), .scope = "race"};
  expect_each_key_runs_once(
      race, [] { return std::make_shared<redis::Client>(cluster_options()); }, *client);
  // The race ran on every shard.
  RedisStore names(client, RedisStoreOptions{.prefix = race.prefix});
  std::set<std::string> owners;
  for (int i = 0; i < race.keys; ++i) {
    const std::string name =
        names.record_key(detail::EffectiveKey(race.scope, {}, std::to_string(i)).view());
    owners.insert(owner_of(key_slot(name)).address);
  }
  EXPECT_EQ(owners.size(), 3u);
}

}  // namespace
}  // namespace idem::testing
