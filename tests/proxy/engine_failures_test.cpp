// What a failed forward leaves behind ([failures]): released by default, so a retry is forwarded
// again; recorded under "record", so repeats replay the failure. And answers too large to record:
// streamed once, the key keeping a marker that repeats are answered with.

#include <gtest/gtest.h>

#include <string>

#include "proxy_test_support.hpp"

namespace {

using namespace proxy_test;
using idem::proxy::OnFailure;

TEST(ProxyFailures, Upstream5xxReleasesTheKeyByDefault) {
  Upstream upstream;
  TempDir dir;
  Proxy proxy(config_for(upstream.port(), dir.path()));
  const Reply first = send_raw(proxy.port(), request("POST", "/fail", "f", "x"));
  EXPECT_EQ(first.status, 503);
  EXPECT_EQ(first.body, "upstream down");
  const Reply retry = send_raw(proxy.port(), request("POST", "/fail", "f", "x"));
  EXPECT_EQ(retry.status, 503);
  EXPECT_EQ(retry.header("idempotent-replayed"), "");
  EXPECT_EQ(upstream.count("/fail"), 2);
}

TEST(ProxyFailures, Upstream5xxIsReplayedUnderRecord) {
  Upstream upstream;
  TempDir dir;
  idem::proxy::ProxyConfig config = config_for(upstream.port(), dir.path());
  config.failures.on_5xx = OnFailure::record;
  Proxy proxy(config);
  EXPECT_EQ(send_raw(proxy.port(), request("POST", "/fail", "f", "x")).status, 503);
  const Reply retry = send_raw(proxy.port(), request("POST", "/fail", "f", "x"));
  EXPECT_EQ(retry.status, 503);
  EXPECT_EQ(retry.body, "upstream down");
  EXPECT_EQ(retry.header("idempotent-replayed"), "true");
  EXPECT_EQ(upstream.count("/fail"), 1);
}

TEST(ProxyFailures, TimeoutIs504AndReleasedOrRecorded) {
  Upstream upstream;
  for (const OnFailure policy : {OnFailure::release, OnFailure::record}) {
    TempDir dir;
    idem::proxy::ProxyConfig config = config_for(upstream.port(), dir.path());
    config.upstream.response_timeout = std::chrono::milliseconds{300};
    config.failures.on_timeout = policy;
    Proxy proxy(config);
    const int before = upstream.count("/silent");
    const Reply first = send_raw(proxy.port(), request("POST", "/silent", "t", "x"));
    EXPECT_EQ(first.status, 504);
    EXPECT_EQ(first.header("content-type"), "application/problem+json");
    const Reply retry = send_raw(proxy.port(), request("POST", "/silent", "t", "x"));
    EXPECT_EQ(retry.status, 504);
    if (policy == OnFailure::release) {
      EXPECT_EQ(retry.header("idempotent-replayed"), "");
      EXPECT_EQ(upstream.count("/silent") - before, 2);
    } else {
      EXPECT_EQ(retry.header("idempotent-replayed"), "true");
      EXPECT_EQ(upstream.count("/silent") - before, 1);
    }
  }
}

TEST(ProxyFailures, ConnectFailureIs502AndReleasedOrRecorded) {
  int closed_port = 0;
  {
    Upstream gone;  // a port that nothing listens on once it is destroyed
    closed_port = gone.port();
  }
  for (const OnFailure policy : {OnFailure::release, OnFailure::record}) {
    TempDir dir;
    idem::proxy::ProxyConfig config = config_for(closed_port, dir.path());
    config.failures.on_connect_failure = policy;
    Proxy proxy(config);
    const Reply first = send_raw(proxy.port(), request("POST", "/payments", "c", "x"));
    EXPECT_EQ(first.status, 502);
    EXPECT_NE(first.body.find("upstream_unreachable"), std::string::npos);
    const Reply retry = send_raw(proxy.port(), request("POST", "/payments", "c", "x"));
    EXPECT_EQ(retry.status, 502);
    EXPECT_EQ(retry.header("idempotent-replayed"), policy == OnFailure::record ? "true" : "");
  }
}

TEST(ProxyFailures, AnswerLargerThanRecordBytesIsStreamedOnceAndMarked) {
  Upstream upstream;
  upstream.big_bytes = 300000;
  TempDir dir;
  idem::proxy::ProxyConfig config = config_for(upstream.port(), dir.path());
  config.limits.record_bytes = 1000;
  Proxy proxy(config);
  for (const std::string path : {"/big", "/chunked-big"}) {
    const Reply first = send_raw(proxy.port(), request("POST", path, "large" + path, "x"));
    EXPECT_EQ(first.status, 201);
    EXPECT_EQ(first.body, std::string(300000, 'b'));
    const Reply repeat = send_raw(proxy.port(), request("POST", path, "large" + path, "x"));
    EXPECT_EQ(repeat.status, 413);
    EXPECT_NE(repeat.body.find("answer_not_recorded"), std::string::npos);
    EXPECT_EQ(repeat.header("idempotent-replayed"), "true");
    EXPECT_EQ(upstream.count(path), 1);
  }
}

TEST(ProxyFailures, UnrecordedStatusIsConfigurable) {
  Upstream upstream;
  TempDir dir;
  idem::proxy::ProxyConfig config = config_for(upstream.port(), dir.path());
  config.limits.record_bytes = 100;
  config.failures.unrecorded_status = 410;
  Proxy proxy(config);
  EXPECT_EQ(send_raw(proxy.port(), request("POST", "/big", "u", "x")).status, 201);
  EXPECT_EQ(send_raw(proxy.port(), request("POST", "/big", "u", "x")).status, 410);
}

}  // namespace
