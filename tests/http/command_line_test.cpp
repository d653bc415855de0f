// http_payments' command line alone (no server): every option lands where it should; wrong
// values are messages naming the option.

#include "command_line.hpp"

#include <gtest/gtest.h>

namespace {

using payments::parse_command_line;
using namespace std::chrono_literals;

TEST(HttpPaymentsOptions, EveryOptionIsRead) {
  const payments::CommandLine cl = parse_command_line({"--port",     "0",
                                                       "--db",       "x.db",
                                                       "--pg",       "postgresql://p",
                                                       "--redis",    "redis://r",
                                                       "--prefix",   "p_",
                                                       "--lease-ms", "1000",
                                                       "--delay-ms", "3",
                                                       "--bare",     "--threads",
                                                       "4",          "--max-connections",
                                                       "100",        "--keep-alive-ms",
                                                       "2000",       "--keep-alive-requests",
                                                       "50",         "--request-timeout-ms",
                                                       "3000",       "--write-timeout-ms",
                                                       "4000",       "--body-limit",
                                                       "2048"});
  ASSERT_EQ(cl.error, "");
  EXPECT_EQ(cl.port, 0);
  EXPECT_EQ(cl.service.sqlite_path, "x.db");
  EXPECT_EQ(cl.service.pg_uri, "postgresql://p");
  EXPECT_EQ(cl.service.redis_uri, "redis://r");
  EXPECT_EQ(cl.service.prefix, "p_");
  EXPECT_EQ(cl.service.gateway_lease, 1000ms);
  EXPECT_EQ(cl.service.handler_delay, 3ms);
  EXPECT_TRUE(cl.service.bare);
  EXPECT_EQ(cl.transport.threads, 4u);
  EXPECT_EQ(cl.transport.max_connections, 100u);
  EXPECT_EQ(cl.transport.keep_alive_timeout, 2000ms);
  EXPECT_EQ(cl.transport.keep_alive_requests, 50u);
  EXPECT_EQ(cl.transport.request_timeout, 3000ms);
  EXPECT_EQ(cl.transport.write_timeout, 4000ms);
  EXPECT_EQ(cl.transport.body_limit, 2048u);
}

TEST(HttpPaymentsOptions, DefaultsWithoutArguments) {
  const payments::CommandLine cl = parse_command_line({});
  EXPECT_EQ(cl.error, "");
  EXPECT_EQ(cl.port, 8080);
  EXPECT_FALSE(cl.service.bare);
  EXPECT_EQ(cl.transport.body_limit, 1024u * 1024u);
}

TEST(HttpPaymentsOptions, WrongValuesNameTheOptionAndItsBounds) {
  EXPECT_EQ(parse_command_line({"--port", "65536"}).error,
            "--port: '65536' is not a whole number from 0 to 65535");
  EXPECT_EQ(parse_command_line({"--threads", "8x"}).error,
            "--threads: '8x' is not a whole number from 1 to 1024");
  EXPECT_EQ(parse_command_line({"--db"}).error, "--db needs a value");
  EXPECT_EQ(parse_command_line({"--fast"}).error, "unknown option '--fast'");
  EXPECT_TRUE(parse_command_line({"--help"}).help);
}

}  // namespace
