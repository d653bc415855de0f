#pragma once
// What the Redis tests share: the server from IDEM_TEST_REDIS_URI, a key prefix of their own,
// and raw commands for checks behind the stores' backs.
//
// IDEM_TEST_REDIS_URI unset: the test skips with a message (scripts/test always sets it).
// Set but unreachable: the test fails.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <string_view>

#include "idem/redis/client.hpp"

namespace idem::testing {

inline const char* redis_uri() {
  const char* uri = std::getenv("IDEM_TEST_REDIS_URI");
  return uri != nullptr && *uri != '\0' ? uri : nullptr;
}

/// Client options for the test server; fails the test when the URI cannot be parsed.
inline redis::ConnectionOptions redis_options() {
  Result<redis::ConnectionOptions> parsed = redis::ConnectionOptions::from_uri(redis_uri());
  EXPECT_TRUE(parsed.has_value()) << (parsed ? "" : parsed.failure().describe());
  redis::ConnectionOptions o = parsed ? parsed.value() : redis::ConnectionOptions{};
  o.connect_timeout = std::chrono::milliseconds{1000};
  o.command_timeout = std::chrono::milliseconds{2000};
  o.pool_size = 16;
  o.pool_wait = std::chrono::milliseconds{5000};
  return o;
}

/// A client on the test server that answered PING, or null after a skip or failure.
inline std::shared_ptr<redis::Client> connect_redis(redis::ConnectionOptions options) {
  auto client = std::make_shared<redis::Client>(std::move(options));
  Status up = client->ping();
  EXPECT_TRUE(up.ok()) << "IDEM_TEST_REDIS_URI=" << redis_uri()
                       << " is set but Redis does not answer: " << up.failure().describe();
  return up.ok() ? client : nullptr;
}

/// Skips the test when IDEM_TEST_REDIS_URI is unset; fails it when Redis is unreachable.
#define IDEM_REQUIRE_REDIS(client_var)                                                         \
  if (::idem::testing::redis_uri() == nullptr) {                                               \
    GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set; scripts/test starts a Redis and sets it"; \
  }                                                                                            \
  auto client_var = ::idem::testing::connect_redis(::idem::testing::redis_options());          \
  ASSERT_NE(client_var, nullptr)

/// A key prefix no other process uses, so test runs sharing a server never meet.
inline std::string unique_prefix(std::string_view what) {
  std::random_device rd;
  return "idemtest:" + std::string(what) + ":" + std::to_string(::getpid()) + ":" +
         std::to_string(rd()) + ":";
}

/// A fixture on the test server: `client_` and a key prefix of its own, `prefix_`. Skips or
/// fails in SetUp as IDEM_REQUIRE_REDIS does; a derived SetUp returns early when
/// `!ready()`.
class RedisTest : public ::testing::Test {
 protected:
  explicit RedisTest(std::string_view what) : what_(what) {}
  void SetUp() override {
    IDEM_REQUIRE_REDIS(client);
    client_ = std::move(client);
    prefix_ = unique_prefix(what_);
  }
  bool ready() const { return client_ != nullptr; }

  std::shared_ptr<redis::Client> client_;
  std::string prefix_;

 private:
  std::string what_;
};

/// Integer reply of a raw command, or -1.
inline long long redis_integer(redis::Client& c, std::initializer_list<std::string_view> argv) {
  Result<redis::Reply> r = c.command(argv);
  return r && r->type == redis::Reply::Type::integer ? r->integer : -1;
}

/// String (bulk or status) reply of a raw command, or "<nil>" / "<error ...>".
inline std::string redis_string(redis::Client& c, std::initializer_list<std::string_view> argv) {
  Result<redis::Reply> r = c.command(argv);
  if (!r) return "<failure " + r.failure().describe() + ">";
  if (r->type == redis::Reply::Type::nil) return "<nil>";
  if (r->type == redis::Reply::Type::error) return "<error " + r->str + ">";
  return r->str;
}

}  // namespace idem::testing
