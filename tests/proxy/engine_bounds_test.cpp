// The client bounds: framing two parsers could read two ways is 400 and closes the connection
// (no smuggling), a body over body_bytes is 413, and none of them reaches the upstream. And the
// admin listener: /health and /metrics.

#include <gtest/gtest.h>

#include <string>

#include "proxy_test_support.hpp"

namespace {

using namespace proxy_test;

TEST(ProxyBounds, AmbiguousFramingIs400AndNeverForwarded) {
  Upstream upstream;
  TempDir dir;
  Proxy proxy(config_for(upstream.port(), dir.path()));
  const std::string head = "POST /payments HTTP/1.1\r\nHost: h\r\nIdempotency-Key: \"s\"\r\n";
  const Reply both = send_raw(proxy.port(), head +
                                                "Content-Length: 5\r\n"
                                                "Transfer-Encoding: chunked\r\n\r\n"
                                                "0\r\n\r\n");
  EXPECT_EQ(both.status, 400);
  EXPECT_EQ(both.header("connection"), "close");
  const Reply two_lengths = send_raw(proxy.port(), head +
                                                       "Content-Length: 1\r\n"
                                                       "Content-Length: 1\r\n\r\nx");
  EXPECT_EQ(two_lengths.status, 400);
  EXPECT_NE(two_lengths.body.find("more than one Content-Length"), std::string::npos);
  const Reply list = send_raw(proxy.port(), head + "Content-Length: 1, 1\r\n\r\nx");
  EXPECT_EQ(list.status, 400);
  const Reply folded = send_raw(proxy.port(), head +
                                                  "X-Note: one\r\n two\r\n"
                                                  "Content-Length: 1\r\n\r\nx");
  EXPECT_EQ(folded.status, 400);
  EXPECT_NE(folded.body.find("obs-fold"), std::string::npos);
  EXPECT_EQ(upstream.count(), 0);
}

TEST(ProxyBounds, BodyOverBodyBytesIs413AndNeverForwarded) {
  Upstream upstream;
  TempDir dir;
  idem::proxy::ProxyConfig config = config_for(upstream.port(), dir.path());
  config.limits.body_bytes = 10;
  Proxy proxy(config);
  const Reply big = send_raw(proxy.port(), request("POST", "/payments", "b", std::string(11, 'x')));
  EXPECT_EQ(big.status, 413);
  const Reply fits =
      send_raw(proxy.port(), request("POST", "/payments", "b", std::string(10, 'x')));
  EXPECT_EQ(fits.status, 201);
  EXPECT_EQ(upstream.count(), 1);
}

TEST(ProxyBounds, HeadOverHeadBytesIs431) {
  Upstream upstream;
  TempDir dir;
  idem::proxy::ProxyConfig config = config_for(upstream.port(), dir.path());
  config.limits.head_bytes = 1024;
  Proxy proxy(config);
  const Reply big = send_raw(proxy.port(), request("POST", "/payments", "h", "x",
                                                   "X-Pad: " + std::string(2000, 'p') + "\r\n"));
  EXPECT_EQ(big.status, 431);
  EXPECT_EQ(upstream.count(), 0);
}

TEST(ProxyAdmin, HealthAndMetrics) {
  Upstream upstream;
  TempDir dir;
  Proxy proxy(config_for(upstream.port(), dir.path()));
  ASSERT_EQ(send_raw(proxy.port(), request("POST", "/payments", "m", "x")).status, 201);
  ASSERT_EQ(send_raw(proxy.port(), request("POST", "/payments", "m", "x")).status, 201);
  ASSERT_EQ(send_raw(proxy.port(), request("POST", "/payments", "m", "y")).status, 422);
  const Reply health = send_raw(proxy.admin_port(), "GET /health HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, R"({"status":"ok"})");
  const Reply metrics = send_raw(proxy.admin_port(), "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("idem_proxy_forwarded_total{guarded=\"true\"} 1"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("idem_proxy_replays_total 1"), std::string::npos);
  EXPECT_NE(metrics.body.find("idem_proxy_refusals_total{status=\"422\"} 1"), std::string::npos);
  EXPECT_NE(metrics.body.find("idem_events_total"), std::string::npos);
  EXPECT_EQ(send_raw(proxy.admin_port(), "GET /nope HTTP/1.1\r\nHost: a\r\n\r\n").status, 404);
}

TEST(ProxyAdmin, AStoreThatCannotBeUsedStopsTheStart) {
  Upstream upstream;
  TempDir dir;
  idem::proxy::ProxyConfig config = config_for(upstream.port(), dir.path());
  config.store.uri = "sqlite://" + (dir.path() / "no-such-folder" / "records.db").string();
  Proxy proxy(config);
  EXPECT_EQ(proxy.port(), -1);
  EXPECT_EQ(proxy.stop(), idem::proxy::kExitCannotStart);
  config.store.uri = "memcached://localhost";
  Proxy unknown(config);
  EXPECT_EQ(unknown.stop(), idem::proxy::kExitCannotStart);
}

}  // namespace
