#include "command_line.hpp"

#include <charconv>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string_view>

namespace payments {

const char* const kUsage =
    "usage: http_payments [options]\n"
    "  --port N                  listen on 127.0.0.1:N, 0 picks a free port (8080)\n"
    "  --db FILE                 SQLite file (http_payments.db)\n"
    "  --pg URI                  PostgreSQL instead of SQLite\n"
    "  --redis URI               Redis for the gateway cache and tokens (else memory)\n"
    "  --prefix P                prefixes table names and Redis keys\n"
    "  --lease-ms N              how long a crashed request holds its key at the gateway (30000)\n"
    "  --delay-ms N              slows the payment handler (0)\n"
    "  --bare                    the bare twin: same routes and inserts, no idempotency layers\n"
    "  --threads N               request threads (16)\n"
    "  --max-connections N       open connections at most (1024)\n"
    "  --keep-alive-ms N         idle keep-alive connections close after N ms (5000)\n"
    "  --keep-alive-requests N   a connection closes after N requests (10000)\n"
    "  --request-timeout-ms N    a request must arrive whole, head and body, in N ms (10000)\n"
    "  --write-timeout-ms N      an answer must be taken by the client in N ms (5000)\n"
    "  --body-limit BYTES        larger bodies are answered 413 unread (1048576)\n";

namespace {

// A whole decimal number within [min, max], or nullopt.
std::optional<std::int64_t> number(std::string_view text, std::int64_t min, std::int64_t max) {
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || n < min || n > max) {
    return std::nullopt;
  }
  return n;
}

}  // namespace

CommandLine parse_command_line(const std::vector<std::string>& args) {
  CommandLine cl;
  Config& s = cl.service;
  transport::TransportSettings& t = cl.transport;
  using ms = std::chrono::milliseconds;
  constexpr std::int64_t kDay = 24LL * 3600 * 1000;

  // Options that take a number: its bounds and where it goes.
  struct Numeric {
    std::int64_t min, max;
    std::function<void(std::int64_t)> set;
  };
  const std::map<std::string_view, Numeric> numeric{
      {"--port", {0, 65535, [&](std::int64_t n) { cl.port = static_cast<int>(n); }}},
      {"--lease-ms", {1, kDay, [&](std::int64_t n) { s.gateway_lease = ms{n}; }}},
      {"--delay-ms", {0, 60'000, [&](std::int64_t n) { s.handler_delay = ms{n}; }}},
      {"--threads", {1, 1024, [&](std::int64_t n) { t.threads = static_cast<std::size_t>(n); }}},
      {"--max-connections",
       {1, 1'000'000, [&](std::int64_t n) { t.max_connections = static_cast<std::size_t>(n); }}},
      {"--keep-alive-ms", {1, kDay, [&](std::int64_t n) { t.keep_alive_timeout = ms{n}; }}},
      {"--keep-alive-requests",
       {1, INT32_MAX,
        [&](std::int64_t n) { t.keep_alive_requests = static_cast<std::size_t>(n); }}},
      {"--request-timeout-ms", {1, kDay, [&](std::int64_t n) { t.request_timeout = ms{n}; }}},
      {"--write-timeout-ms", {1, kDay, [&](std::int64_t n) { t.write_timeout = ms{n}; }}},
      {"--body-limit",
       {1, 1LL << 40, [&](std::int64_t n) { t.body_limit = static_cast<std::size_t>(n); }}},
  };
  const std::map<std::string_view, std::string*> text{{"--db", &s.sqlite_path},
                                                      {"--pg", &s.pg_uri},
                                                      {"--redis", &s.redis_uri},
                                                      {"--prefix", &s.prefix}};

  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      cl.help = true;
      return cl;
    }
    if (arg == "--bare") {
      s.bare = true;
      continue;
    }
    const auto num = numeric.find(arg);
    const auto txt = text.find(arg);
    if (num == numeric.end() && txt == text.end()) {
      cl.error = "unknown option '" + arg + "'";
      return cl;
    }
    if (i + 1 >= args.size()) {
      cl.error = arg + " needs a value";
      return cl;
    }
    const std::string& value = args[++i];
    if (txt != text.end()) {
      *txt->second = value;
      continue;
    }
    const Numeric& rule = num->second;
    const std::optional<std::int64_t> n = number(value, rule.min, rule.max);
    if (!n) {
      cl.error = arg + ": '" + value + "' is not a whole number from " + std::to_string(rule.min) +
                 " to " + std::to_string(rule.max);
      return cl;
    }
    rule.set(*n);
  }
  return cl;
}

}  // namespace payments
