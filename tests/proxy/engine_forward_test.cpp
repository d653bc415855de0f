// The engine's forward under the guard on SQLite: a fresh key forwarded once and recorded, its
// repeats replayed, duplicates in flight, other payloads and bad keys refused as idem/http.hpp
// refuses them (docs/proxy.md, "What it does").

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "proxy_test_support.hpp"

namespace {

using namespace proxy_test;

TEST(ProxyEngine, PrintsWhereItListens) {
  Upstream upstream;
  TempDir dir;
  Proxy proxy(config_for(upstream.port(), dir.path()));
  EXPECT_EQ(proxy.first_line(),
            "listening on http://127.0.0.1:" + std::to_string(proxy.port()) + "\n");
  EXPECT_GT(proxy.admin_port(), 0);
  EXPECT_EQ(proxy.stop(), idem::proxy::kExitOk);
}

TEST(ProxyEngine, FreshKeyIsForwardedOnceThenReplayedWithEndToEndHeaders) {
  Upstream upstream;
  TempDir dir;
  Proxy proxy(config_for(upstream.port(), dir.path()));
  const Reply first = send_raw(proxy.port(), request("POST", "/payments", "k-1", R"({"a":1})"));
  ASSERT_EQ(first.status, 201);
  EXPECT_EQ(first.body, "done 1");
  EXPECT_EQ(first.header("x-upstream"), "yes");
  EXPECT_EQ(first.header("x-hop"), "");       // named by the upstream's Connection
  EXPECT_EQ(first.header("keep-alive"), "");  // hop-by-hop
  EXPECT_EQ(first.header("idempotent-replayed"), "");
  EXPECT_EQ(upstream.last_body(), R"({"a":1})");

  const Reply again = send_raw(proxy.port(), request("POST", "/payments", "k-1", R"({"a":1})"));
  EXPECT_EQ(again.status, 201);
  EXPECT_EQ(again.body, "done 1");
  EXPECT_EQ(again.header("x-upstream"), "yes");
  EXPECT_EQ(again.header("content-type"), "text/plain");
  EXPECT_EQ(again.header("idempotent-replayed"), "true");
  EXPECT_FALSE(again.header("date").empty());
  EXPECT_EQ(upstream.count("/payments"), 1);

  const Reply other_key = send_raw(proxy.port(), request("POST", "/payments", "k-2", R"({"a":1})"));
  EXPECT_EQ(other_key.body, "done 2");
  EXPECT_EQ(upstream.count("/payments"), 2);
  EXPECT_EQ(proxy.stop(), idem::proxy::kExitOk);
}

TEST(ProxyEngine, FiftyConcurrentIdenticalPostsAreForwardedOnce) {
  Upstream upstream;
  TempDir dir;
  idem::proxy::ProxyConfig config = config_for(upstream.port(), dir.path());
  config.duplicates.wait = std::chrono::milliseconds{5000};
  Proxy proxy(config);
  std::vector<Reply> replies(50);
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    clients.emplace_back([&, i] {
      replies[i] = send_raw(proxy.port(), request("POST", "/slow", "same-key", R"({"n":50})"));
    });
  }
  for (auto& t : clients) t.join();
  int replayed = 0;
  for (const Reply& r : replies) {
    EXPECT_EQ(r.status, 201);
    EXPECT_EQ(r.body, "done 1");
    if (r.header("idempotent-replayed") == "true") ++replayed;
  }
  EXPECT_EQ(replayed, 49);
  EXPECT_EQ(upstream.count("/slow"), 1);
  EXPECT_EQ(proxy.stop(), idem::proxy::kExitOk);
}

TEST(ProxyEngine, DuplicateInFlightIsRefused409WithRetryAfter) {
  Upstream upstream;
  upstream.slow_ms = 1500;
  TempDir dir;
  Proxy proxy(config_for(upstream.port(), dir.path()));
  std::thread holder([&] { send_raw(proxy.port(), request("POST", "/slow", "held", "x")); });
  while (upstream.count("/slow") == 0) std::this_thread::sleep_for(5ms);
  const Reply dup = send_raw(proxy.port(), request("POST", "/slow", "held", "x"));
  holder.join();
  EXPECT_EQ(dup.status, 409);
  EXPECT_EQ(dup.header("content-type"), "application/problem+json");
  EXPECT_NE(dup.body.find("\"type\":\"urn:idem:problem:in_progress\""), std::string::npos)
      << dup.body;
  EXPECT_FALSE(dup.header("retry-after").empty());
  EXPECT_EQ(upstream.count("/slow"), 1);
}

TEST(ProxyEngine, AnotherPayloadUnderAKeyIs422) {
  Upstream upstream;
  TempDir dir;
  Proxy proxy(config_for(upstream.port(), dir.path()));
  ASSERT_EQ(send_raw(proxy.port(), request("POST", "/payments", "p", "one")).status, 201);
  const Reply other = send_raw(proxy.port(), request("POST", "/payments", "p", "two"));
  EXPECT_EQ(other.status, 422);
  EXPECT_NE(other.body.find("urn:idem:problem:payload_mismatch"), std::string::npos);
  // A configured header is part of the payload too.
  const Reply header = send_raw(proxy.port(),
                                "POST /payments HTTP/1.1\r\nHost: h\r\n"
                                "Idempotency-Key: \"p\"\r\nContent-Type: text/xml\r\n"
                                "Content-Length: 3\r\nConnection: close\r\n\r\none");
  EXPECT_EQ(header.status, 422);
  // And the query.
  const Reply query = send_raw(proxy.port(), request("POST", "/payments?x=1", "p", "one"));
  EXPECT_EQ(query.status, 422);
  EXPECT_EQ(upstream.count("/payments"), 1);
}

TEST(ProxyEngine, BadOrMissingKeysAre400AndNotForwarded) {
  Upstream upstream;
  TempDir dir;
  Proxy proxy(config_for(upstream.port(), dir.path()));
  const Reply missing = send_raw(proxy.port(), request("POST", "/payments", "", "x"));
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(missing.body.find("urn:idem:problem:key_invalid"), std::string::npos);
  EXPECT_NE(missing.body.find("Idempotency-Key is missing"), std::string::npos);
  const Reply twice = send_raw(proxy.port(),
                               "POST /payments HTTP/1.1\r\nHost: h\r\n"
                               "Idempotency-Key: \"a\"\r\nIdempotency-Key: \"b\"\r\n"
                               "Content-Length: 1\r\nConnection: close\r\n\r\nx");
  EXPECT_EQ(twice.status, 400);
  const Reply unterminated = send_raw(proxy.port(),
                                      "POST /payments HTTP/1.1\r\nHost: h\r\n"
                                      "Idempotency-Key: \"abc\r\n"
                                      "Content-Length: 1\r\nConnection: close\r\n\r\nx");
  EXPECT_EQ(unterminated.status, 400);
  EXPECT_EQ(upstream.count(), 0);
}

TEST(ProxyEngine, HonouredRoutesAndUnroutedPathsForwardWithoutAKey) {
  Upstream upstream;
  TempDir dir;
  Proxy proxy(config_for(upstream.port(), dir.path()));
  EXPECT_EQ(send_raw(proxy.port(), request("POST", "/orders/7", "", "x")).body, "done 1");
  EXPECT_EQ(send_raw(proxy.port(), request("POST", "/orders/7", "", "x")).body, "done 2");
  // With a key, an honoured route is guarded.
  EXPECT_EQ(send_raw(proxy.port(), request("POST", "/orders/7", "o", "x")).body, "done 3");
  const Reply replay = send_raw(proxy.port(), request("POST", "/orders/7", "o", "x"));
  EXPECT_EQ(replay.body, "done 3");
  EXPECT_EQ(replay.header("idempotent-replayed"), "true");
  // No route: forwarded, a key or not.
  EXPECT_EQ(send_raw(proxy.port(), request("GET", "/other", "z")).body, "done 1");
  EXPECT_EQ(send_raw(proxy.port(), request("GET", "/other", "z")).body, "done 2");
  EXPECT_EQ(upstream.count(), 5);
}

TEST(ProxyEngine, PrincipalsKeepKeySpacesApart) {
  Upstream upstream;
  TempDir dir;
  idem::proxy::ProxyConfig config = config_for(upstream.port(), dir.path());
  config.principal.from = idem::proxy::PrincipalSource::header;
  Proxy proxy(config);
  const auto as = [](const std::string& who) { return "Authorization: Bearer " + who + "\r\n"; };
  EXPECT_EQ(send_raw(proxy.port(), request("POST", "/payments", "k", "x", as("alice"))).body,
            "done 1");
  EXPECT_EQ(send_raw(proxy.port(), request("POST", "/payments", "k", "x", as("bob"))).body,
            "done 2");
  const Reply alice = send_raw(proxy.port(), request("POST", "/payments", "k", "x", as("alice")));
  EXPECT_EQ(alice.body, "done 1");
  EXPECT_EQ(alice.header("idempotent-replayed"), "true");
  EXPECT_EQ(upstream.count(), 2);
}

TEST(ProxyEngine, UpstreamConnectionsAreKeptAliveAndReused) {
  Upstream upstream;
  TempDir dir;
  Proxy proxy(config_for(upstream.port(), dir.path()));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(
        send_raw(proxy.port(), request("POST", "/payments", "r" + std::to_string(i), "x")).status,
        201);
  }
  EXPECT_EQ(upstream.count("/payments"), 5);
  EXPECT_EQ(upstream.connections(), 1);
}

TEST(ProxyEngine, HopByHopRequestFieldsStayWithTheProxy) {
  Upstream upstream;
  TempDir dir;
  Proxy proxy(config_for(upstream.port(), dir.path()));
  const Reply r = send_raw(proxy.port(), request("POST", "/payments", "h", "body",
                                                 "Connection: X-Secret\r\nX-Secret: s\r\n"
                                                 "Keep-Alive: timeout=9\r\nTE: trailers\r\n"
                                                 "X-Kept: yes\r\n"));
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(upstream.last_header("X-Secret"), "(none)");
  EXPECT_EQ(upstream.last_header("Keep-Alive"), "(none)");
  EXPECT_EQ(upstream.last_header("TE"), "(none)");
  EXPECT_EQ(upstream.last_header("X-Kept"), "yes");
  EXPECT_EQ(upstream.last_header("Idempotency-Key"), "\"h\"");
  EXPECT_EQ(upstream.last_header("Host"), "proxy.test");
  EXPECT_EQ(upstream.last_header("Content-Length"), "4");
}

}  // namespace
