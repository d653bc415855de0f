// idem::redis::Client: URIs, the pool under load, broken connections, timeouts, unreachable
// servers.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "idem/redis/client.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {
namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;
using redis::ConnectionOptions;

TEST(RedisUriTest, HostPortPasswordAndDatabase) {
  Result<ConnectionOptions> o = ConnectionOptions::from_uri("redis://:s%40cret@cache.local:6380/3");
  ASSERT_TRUE(o) << o.failure().describe();
  EXPECT_EQ(o->host, "cache.local");
  EXPECT_EQ(o->port, 6380);
  EXPECT_EQ(o->user, "");
  EXPECT_EQ(o->password, "s@cret");
  EXPECT_EQ(o->db, 3);

  Result<ConnectionOptions> acl = ConnectionOptions::from_uri("redis://app:pw@10.0.0.1");
  ASSERT_TRUE(acl);
  EXPECT_EQ(acl->user, "app");
  EXPECT_EQ(acl->password, "pw");
  EXPECT_EQ(acl->port, 6379);
  EXPECT_EQ(acl->db, 0);

  Result<ConnectionOptions> v6 = ConnectionOptions::from_uri("redis://[::1]:7000/0");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 7000);
}

TEST(RedisUriTest, UnixSocketWithDatabase) {
  Result<ConnectionOptions> o = ConnectionOptions::from_uri("unix:///run/redis/redis.sock?db=2");
  ASSERT_TRUE(o) << o.failure().describe();
  EXPECT_EQ(o->unix_socket, "/run/redis/redis.sock");
  EXPECT_EQ(o->db, 2);
}

TEST(RedisUriTest, RedissTurnsTlsOnWithItsSettingsFromTheQuery) {
  Result<ConnectionOptions> o = ConnectionOptions::from_uri(
      "rediss://app:p%40ss@cache.local:6380/2?ca_file=%2Fetc%2Fca.pem&ca_dir=/etc/cas&"
      "cert_file=/c.crt&key_file=/c.key&server_name=redis.internal&verify=yes");
  ASSERT_TRUE(o) << o.failure().describe();
  EXPECT_TRUE(o->tls.enabled);
  EXPECT_EQ(o->host, "cache.local");
  EXPECT_EQ(o->port, 6380);
  EXPECT_EQ(o->db, 2);
  EXPECT_EQ(o->user, "app");
  EXPECT_EQ(o->password, "p@ss");
  EXPECT_EQ(o->tls.ca_file, "/etc/ca.pem");
  EXPECT_EQ(o->tls.ca_dir, "/etc/cas");
  EXPECT_EQ(o->tls.cert_file, "/c.crt");
  EXPECT_EQ(o->tls.key_file, "/c.key");
  EXPECT_EQ(o->tls.server_name, "redis.internal");
  EXPECT_TRUE(o->tls.verify);

  // Verification stays on unless turned off by name; redis:// is plain.
  EXPECT_TRUE(ConnectionOptions::from_uri("rediss://h")->tls.verify);
  EXPECT_FALSE(ConnectionOptions::from_uri("rediss://h?verify=no")->tls.verify);
  EXPECT_FALSE(ConnectionOptions::from_uri("redis://h")->tls.enabled);

  // One TLS field set by hand keeps the others' defaults.
  ConnectionOptions by_hand;
  by_hand.tls.ca_file = "/ca.pem";
  EXPECT_FALSE(by_hand.tls.enabled);
  EXPECT_TRUE(by_hand.tls.verify);
  EXPECT_TRUE(by_hand.tls.server_name.empty());

  Result<redis::ClusterOptions> cluster =
      redis::ClusterOptions::from_uri("rediss+cluster://:pw@h1:7000,h2:7001?ca_file=/ca.pem");
  ASSERT_TRUE(cluster) << cluster.failure().describe();
  EXPECT_EQ(cluster->seeds.size(), 2u);
  EXPECT_TRUE(cluster->node.tls.enabled);
  EXPECT_EQ(cluster->node.tls.ca_file, "/ca.pem");
  EXPECT_EQ(cluster->node.password, "pw");
  EXPECT_FALSE(redis::ClusterOptions::from_uri("redis+cluster://h1:7000?ca_file=/ca.pem"));
}

TEST(RedisUriTest, UnusableUrisAreRefusedWithAReason) {
  for (const char* uri :
       {"localhost:6379", "http://h", "redis://h:0", "redis://h:99999", "redis://h:port",
        "redis://h/db", "unix://relative", "redis://h:1?ca_file=/ca.crt", "rediss://h:1?verify=0",
        "rediss://h:1?cafile=/ca.crt", "rediss://h:1?ca_file="}) {
    Result<ConnectionOptions> o = ConnectionOptions::from_uri(uri);
    ASSERT_FALSE(o.has_value()) << uri;
    // The configuration's fault, not an outage: no retry can get past it.
    EXPECT_EQ(o.error(), errc::config_invalid);
    EXPECT_FALSE(is_retryable(o.error()));
    EXPECT_NE(o.failure().message.find(uri), std::string::npos) << o.failure().message;
  }
}

TEST(RedisUriTest, ARefusedUrisPasswordIsNotInTheMessage) {
  for (const char* uri :
       {"redis://app:hunter2@h:port", "redis://hunter2@h:99999", "unix://app:hunter2@relative"}) {
    Result<ConnectionOptions> o = ConnectionOptions::from_uri(uri);
    ASSERT_FALSE(o.has_value()) << uri;
    EXPECT_EQ(o.failure().message.find("hunter2"), std::string::npos) << o.failure().message;
    EXPECT_NE(o.failure().message.find("***@"), std::string::npos) << o.failure().message;
  }
}

TEST(RedisClientTest, AnEmptyCommandIsAProgrammingErrorNotAnOutage) {
  redis::Client client(ConnectionOptions{.host = "127.0.0.1", .port = 1});
  EXPECT_THROW(client.command(std::span<const std::string_view>{}), std::invalid_argument);
}

TEST(RedisClientTest, UnreachableServerFailsFastWithStoreUnavailable) {
  // A port nothing listens on (reserved, refused at once on loopback).
  redis::Client client(ConnectionOptions{.host = "127.0.0.1", .port = 1, .connect_timeout = 300ms});
  const auto start = std::chrono::steady_clock::now();
  Status s = client.ping();
  EXPECT_EQ(s.error(), errc::store_unavailable);
  EXPECT_NE(s.failure().message.find("127.0.0.1:1"), std::string::npos) << s.failure().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(client.open_connections(), 0u);
}

TEST(RedisClientTest, BinarySafeCommandsRoundTrip) {
  IDEM_REQUIRE_REDIS(client);
  const std::string key = unique_prefix("client") + "bin\0\r\n"s;
  const std::string value = "v\0\r\n$-1\r\n"s;
  ASSERT_EQ(redis_string(*client, {"SET", key, value, "PX", "10000"}), "OK");
  EXPECT_EQ(redis_string(*client, {"GET", key}), value);
  Result<redis::Reply> err = client->command({"NOSUCHCOMMAND"});
  ASSERT_TRUE(err);  // an error reply is a reply, not a failure
  EXPECT_EQ(err->type, redis::Reply::Type::error);
}

TEST(RedisClientTest, KilledConnectionsAreReplacedWithoutFailingCallers) {
  IDEM_REQUIRE_REDIS(client);
  ASSERT_TRUE(client->ping().ok());
  const long long id = redis_integer(*client, {"CLIENT", "ID"});
  ASSERT_GT(id, 0);
  // Kill our idle pooled connection from another connection.
  redis::Client other(redis_options());
  const std::string id_text = std::to_string(id);
  ASSERT_EQ(redis_integer(other, {"CLIENT", "KILL", "ID", id_text}), 1);
  std::this_thread::sleep_for(150ms);  // idle long enough to be checked before reuse
  // The pool notices the closed socket before using it, and opens a fresh connection.
  EXPECT_TRUE(client->ping().ok());
  EXPECT_GE(client->dropped_connections(), 1u);
  EXPECT_NE(redis_integer(*client, {"CLIENT", "ID"}), id);
}

TEST(RedisClientTest, CommandTimeoutFailsAndDropsTheConnection) {
  IDEM_REQUIRE_REDIS(probe);
  ConnectionOptions o = redis_options();
  o.command_timeout = 100ms;
  redis::Client client(o);
  const std::string list = unique_prefix("client") + "empty-list";
  const auto start = std::chrono::steady_clock::now();
  Result<redis::Reply> r = client.command({"BLPOP", list, "2"});  // blocks 2 s server-side
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error(), errc::store_unavailable);
  EXPECT_NE(r.failure().message.find("timed out"), std::string::npos) << r.failure().message;
  EXPECT_LT(took, 1s);
  EXPECT_EQ(client.dropped_connections(), 1u);
  EXPECT_TRUE(client.ping().ok());  // a fresh connection
}

TEST(RedisClientTest, PoolBoundsConnectionsAndAnswersUnavailableWhenExhausted) {
  IDEM_REQUIRE_REDIS(probe);
  ConnectionOptions o = redis_options();
  o.pool_size = 2;
  o.pool_wait = 100ms;
  o.command_timeout = 3s;
  redis::Client client(o);
  const std::string list = unique_prefix("client") + "block";
  std::vector<std::thread> blockers;
  for (int i = 0; i < 2; ++i) {
    blockers.emplace_back([&] { (void)client.command({"BLPOP", list, "1"}); });
  }
  // Both connections are borrowed by the blockers (nobody else uses this client) until BLPOP
  // returns after 1 s.
  for (int i = 0; i < 500 && client.open_connections() < 2; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(client.open_connections(), 2u);
  const auto start = std::chrono::steady_clock::now();
  Status s = client.ping();
  EXPECT_EQ(s.error(), errc::store_unavailable);
  EXPECT_NE(s.failure().message.find("busy"), std::string::npos) << s.failure().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 800ms);
  for (auto& t : blockers) t.join();
  EXPECT_EQ(client.open_connections(), 2u);
  EXPECT_TRUE(client.ping().ok());
  // stats(): the ping that found both connections busy queued once and gave up.
  const StoreStats stats = client.stats();
  EXPECT_EQ(stats.store, "redis");
  const RedisStats* redis = stats.parts.get<RedisStats>();
  ASSERT_TRUE(stats.pool && redis);
  EXPECT_EQ(stats.pool->size, 2u);
  EXPECT_EQ(stats.pool->waits, 1u);
  EXPECT_EQ(stats.pool->timeouts, 1u);
  EXPECT_EQ(stats.pool->opened, 2u);
  EXPECT_EQ(stats.pool->in_use + stats.pool->idle, 2u);
  EXPECT_EQ(redis->servers, 1u);
  EXPECT_EQ(redis->moved + redis->asked + redis->slot_map_reads, 0u);

  // Many threads share two connections without errors when they may wait for one.
  o.pool_wait = 5s;
  redis::Client shared(o);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (!shared.ping().ok()) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(shared.open_connections(), 2u);
}

TEST(RedisClientTest, UnixSocketAndDatabaseFromTheUri) {
  IDEM_REQUIRE_REDIS(tcp);
  Result<redis::Reply> socket = tcp->command({"CONFIG", "GET", "unixsocket"});
  ASSERT_TRUE(socket);
  ASSERT_EQ(socket->elements.size(), 2u);
  const std::string path = socket->elements[1].str;
  ASSERT_FALSE(path.empty()) << "the test server listens on no unix socket; start it with "
                                "scripts/lib/servers.sh, which sets one";
  Result<ConnectionOptions> o = ConnectionOptions::from_uri("unix://" + path + "?db=3");
  ASSERT_TRUE(o) << o.failure().describe();
  redis::Client unix_client(o.value());
  ASSERT_TRUE(unix_client.ping().ok());
  const std::string key = unique_prefix("client") + "db3";
  ASSERT_EQ(redis_string(unix_client, {"SET", key, "in db 3", "PX", "10000"}), "OK");
  EXPECT_EQ(redis_string(*tcp, {"GET", key}), "<nil>");  // the TCP client is on db 0
  ASSERT_EQ(redis_string(*tcp, {"SELECT", "3"}), "OK");  // a pooled connection, now on db 3
  EXPECT_EQ(redis_string(*tcp, {"GET", key}), "in db 3");
}

TEST(RedisClientTest, AclUserAndPasswordFromTheUriAuthenticate) {
  IDEM_REQUIRE_REDIS(admin);
  // A user of our own: the default user, which other tests use, stays as it is.
  const std::string user = "idemtest" + std::to_string(::getpid());
  ASSERT_EQ(redis_string(*admin, {"ACL", "SETUSER", user, "on", ">s3cret", "~*", "+@all"}), "OK");
  // The test server's URI (redis:// or rediss://) with the user and a password in it.
  const auto with = [&](const std::string& password) {
    std::string uri = redis_uri();
    uri.insert(uri.find("://") + 3, user + ":" + password + "@");
    return ConnectionOptions::from_uri(uri).value();
  };

  redis::Client good(with("s3cret"));
  EXPECT_TRUE(good.ping().ok());
  EXPECT_EQ(redis_string(good, {"ACL", "WHOAMI"}), user);

  redis::Client bad(with("wrong"));
  Status refused = bad.ping();
  EXPECT_EQ(refused.error(), errc::store_unavailable);
  EXPECT_NE(refused.failure().message.find("AUTH"), std::string::npos) << refused.failure().message;
  EXPECT_EQ(bad.open_connections(), 0u);

  EXPECT_EQ(redis_integer(*admin, {"ACL", "DELUSER", user}), 1);
}

}  // namespace
}  // namespace idem::testing
