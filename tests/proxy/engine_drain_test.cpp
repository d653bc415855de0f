// Drain on SIGTERM: the proxy stops accepting, finishes the requests in hand (each key committed
// or released, never left held) and exits 0; 3 when drain_timeout cut some.

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "proxy_test_support.hpp"

namespace {

using namespace proxy_test;

TEST(ProxyDrain, SigtermMidRequestAnswersItAndCommitsTheKey) {
  Upstream upstream;
  upstream.slow_ms = 1000;
  TempDir dir;
  const idem::proxy::ProxyConfig config = config_for(upstream.port(), dir.path());
  {
    Proxy proxy(config);
    Reply answer;
    std::thread client(
        [&] { answer = send_raw(proxy.port(), request("POST", "/slow", "d", "x")); });
    while (upstream.count("/slow") == 0) std::this_thread::sleep_for(5ms);
    EXPECT_EQ(proxy.stop(), idem::proxy::kExitOk);
    client.join();
    EXPECT_EQ(answer.status, 201);
    EXPECT_EQ(answer.body, "done 1");
  }
  // The key was committed before the proxy exited: a new proxy on the same store replays it.
  Proxy again(config);
  const Reply replay = send_raw(again.port(), request("POST", "/slow", "d", "x"));
  EXPECT_EQ(replay.status, 201);
  EXPECT_EQ(replay.body, "done 1");
  EXPECT_EQ(replay.header("idempotent-replayed"), "true");
  EXPECT_EQ(upstream.count("/slow"), 1);
}

TEST(ProxyDrain, AKeyReleasedDuringTheDrainIsFreeAfterIt) {
  Upstream upstream;
  upstream.slow_ms = 1000;
  TempDir dir;
  const idem::proxy::ProxyConfig config = config_for(upstream.port(), dir.path());
  {
    Proxy proxy(config);
    Reply answer;
    std::thread client(
        [&] { answer = send_raw(proxy.port(), request("POST", "/slow-fail", "r", "x")); });
    while (upstream.count("/slow-fail") == 0) std::this_thread::sleep_for(5ms);
    EXPECT_EQ(proxy.stop(), idem::proxy::kExitOk);
    client.join();
    EXPECT_EQ(answer.status, 503);
  }
  // Released, not left held: a new proxy on the same store forwards the retry at once.
  Proxy again(config);
  const Reply retry = send_raw(again.port(), request("POST", "/slow-fail", "r", "x"));
  EXPECT_EQ(retry.status, 503);
  EXPECT_EQ(retry.header("idempotent-replayed"), "");
  EXPECT_EQ(upstream.count("/slow-fail"), 2);
}

TEST(ProxyDrain, DrainTimeoutCutIsExit3) {
  Upstream upstream;
  upstream.slow_ms = 3000;
  TempDir dir;
  idem::proxy::ProxyConfig config = config_for(upstream.port(), dir.path());
  config.drain_timeout = std::chrono::milliseconds{200};
  Proxy proxy(config);
  std::thread client([&] { send_raw(proxy.port(), request("POST", "/slow", "cut", "x")); });
  while (upstream.count("/slow") == 0) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(proxy.stop(), idem::proxy::kExitCut);
  client.join();
}

}  // namespace
