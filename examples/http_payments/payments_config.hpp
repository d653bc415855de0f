#pragma once
// What the payments service runs on: its stores, and how its handler behaves.

#include <chrono>
#include <string>

namespace payments {

struct Config {
  std::string sqlite_path = "http_payments.db";     // used when pg_uri is empty
  std::string pg_uri{};                             // PostgreSQL instead of SQLite
  std::string redis_uri{};                          // Redis gateway cache and tokens, else memory
  std::chrono::milliseconds handler_delay{0};       // slows the payment handler (tests, demos)
  std::chrono::milliseconds gateway_lease{30'000};  // how long a crashed request holds its id
  std::string prefix{};  // prefixes table names and Redis keys, so several services share servers
  // The bare twin: the same routes and inserts with every idempotency layer off (no records, no
  // gateway cache, no tokens), so that a benchmark reads the guard's cost as a ratio.
  bool bare = false;
};

}  // namespace payments
