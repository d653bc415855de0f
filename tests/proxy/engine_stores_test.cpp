// The engine on the shared stores, by URI: Redis (IDEM_TEST_REDIS_URI), a Redis Cluster
// (IDEM_TEST_REDIS_CLUSTER_SEEDS) and PostgreSQL (IDEM_TEST_PG_URI); each unset: the test skips
// with a message (scripts/test sets them). Each test keeps its keys apart under a scope of its
// own. Two proxies on one store forward a key once between them.

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "proxy_test_support.hpp"

namespace {

using namespace proxy_test;

std::string unique_scope(const std::string& name) {
  return "idem-proxy-test-" + name + "-" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

// Forward once, replay, 422, and 50 concurrent identical requests across two proxies.
void forward_once_on(const std::string& uri, const std::string& name) {
  Upstream upstream;
  TempDir dir;
  idem::proxy::ProxyConfig config = config_for(upstream.port(), dir.path());
  config.store.uri = uri;
  config.store.scope = unique_scope(name);
  config.duplicates.wait = std::chrono::milliseconds{5000};
  config.admin.port = -1;
  Proxy one(config);
  ASSERT_GT(one.port(), 0) << "the proxy did not start on " << name;
  Proxy two(config);
  ASSERT_GT(two.port(), 0);

  const Reply first = send_raw(one.port(), request("POST", "/payments", "k", "x"));
  EXPECT_EQ(first.status, 201);
  EXPECT_EQ(first.body, "done 1");
  const Reply replay = send_raw(two.port(), request("POST", "/payments", "k", "x"));
  EXPECT_EQ(replay.body, "done 1");
  EXPECT_EQ(replay.header("idempotent-replayed"), "true");
  EXPECT_EQ(send_raw(two.port(), request("POST", "/payments", "k", "y")).status, 422);

  std::vector<Reply> replies(50);
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    clients.emplace_back([&, i] {
      const int port = i % 2 == 0 ? one.port() : two.port();
      replies[i] = send_raw(port, request("POST", "/slow", "together", "z"));
    });
  }
  for (auto& t : clients) t.join();
  for (const Reply& r : replies) {
    EXPECT_EQ(r.status, 201);
    EXPECT_EQ(r.body, "done 1");
  }
  EXPECT_EQ(upstream.count("/payments"), 1);
  EXPECT_EQ(upstream.count("/slow"), 1);
}

TEST(ProxyStores, Redis) {
  const char* uri = std::getenv("IDEM_TEST_REDIS_URI");
  if (uri == nullptr) GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set; scripts/test sets it";
  forward_once_on(uri, "redis");
}

TEST(ProxyStores, RedisCluster) {
  // The cluster's URI where the test command gives one (a TLS cluster: rediss+cluster:// with
  // its CA), else its seeds in plain text.
  if (const char* uri = std::getenv("IDEM_TEST_REDIS_CLUSTER_URI")) {
    forward_once_on(uri, "cluster");
    return;
  }
  const char* seeds = std::getenv("IDEM_TEST_REDIS_CLUSTER_SEEDS");
  if (seeds == nullptr) {
    GTEST_SKIP() << "IDEM_TEST_REDIS_CLUSTER_SEEDS is not set; scripts/test starts a cluster";
  }
  forward_once_on(std::string("redis+cluster://") + seeds, "cluster");
}

TEST(ProxyStores, Postgres) {
  const char* uri = std::getenv("IDEM_TEST_PG_URI");
  if (uri == nullptr) GTEST_SKIP() << "IDEM_TEST_PG_URI is not set; scripts/test sets it";
  forward_once_on(uri, "postgres");
}

// A free TCP port on 127.0.0.1 (bound, then released).
int free_port() {
  net::io_context io;
  net::ip::tcp::acceptor a(io, net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

bool connectable(int port) {
  net::io_context io;
  net::ip::tcp::socket socket(io);
  boost::system::error_code ec;
  socket.connect(
      net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)),
      ec);
  return !ec;
}

// A redis-server the test started on `port`; stopped (SHUTDOWN NOSAVE) by stop() or at the end.
struct OwnRedis {
  explicit OwnRedis(std::string p) : port(std::move(p)) {}
  OwnRedis(const OwnRedis&) = delete;
  OwnRedis& operator=(const OwnRedis&) = delete;
  ~OwnRedis() { stop(); }
  void stop() const {
    [[maybe_unused]] const int rc =
        std::system(("redis-cli -p " + port + " shutdown nosave >/dev/null 2>&1").c_str());
  }
  std::string port;
};

// The store goes away under a running proxy: /health turns 503 and a guarded request is
// answered 503 store_unavailable with Retry-After, never forwarded. A Redis server of the test's
// own (redis-server, which scripts/test's servers come from), stopped mid-test.
TEST(ProxyStores, HealthAndRequestsAre503WhenTheStoreGoesAway) {
  if (std::getenv("IDEM_TEST_REDIS_URI") == nullptr) {
    GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set; scripts/test sets it (and has redis-server)";
  }
  const int port = free_port();
  const std::string p = std::to_string(port);
  ASSERT_EQ(std::system(("redis-server --port " + p +
                         " --bind 127.0.0.1 --save '' --appendonly no --daemonize yes "
                         ">/dev/null")
                            .c_str()),
            0);
  const OwnRedis redis{p};  // stopped mid-test, and at the test's end whatever happens
  for (int i = 0; i < 500 && !connectable(port); ++i) std::this_thread::sleep_for(10ms);
  Upstream upstream;
  TempDir dir;
  idem::proxy::ProxyConfig config = config_for(upstream.port(), dir.path());
  config.store.uri = "redis://127.0.0.1:" + p;
  Proxy proxy(config);
  ASSERT_GT(proxy.port(), 0);
  const std::string health = "GET /health HTTP/1.1\r\nHost: a\r\n\r\n";
  EXPECT_EQ(send_raw(proxy.admin_port(), health).status, 200);
  EXPECT_EQ(send_raw(proxy.port(), request("POST", "/payments", "before", "x")).status, 201);

  redis.stop();
  for (int i = 0; i < 500 && connectable(port); ++i) std::this_thread::sleep_for(10ms);
  const Reply down = send_raw(proxy.admin_port(), health);
  EXPECT_EQ(down.status, 503);
  EXPECT_NE(down.body.find("\"status\":\"unavailable\""), std::string::npos) << down.body;
  const Reply refused = send_raw(proxy.port(), request("POST", "/payments", "after", "x"));
  EXPECT_EQ(refused.status, 503);
  EXPECT_NE(refused.body.find("urn:idem:problem:store_unavailable"), std::string::npos);
  EXPECT_FALSE(refused.header("retry-after").empty());
  EXPECT_EQ(upstream.count("/payments"), 1);
}

}  // namespace
