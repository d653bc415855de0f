#pragma once
// http_payments_async takes http_payments' command line (command_line.hpp) where its options
// apply: this says which do not, and how the others are read here.

#include <algorithm>
#include <cstddef>
#include <string>
#include <thread>

#include "command_line.hpp"

namespace payments_async {

inline const char* const kUsage =
    "usage: http_payments_async --pg URI [options]\n"
    "  --port N                  listen on 127.0.0.1:N, 0 picks a free port (8080)\n"
    "  --pg URI                  PostgreSQL: records, payments and outbox (required)\n"
    "  --redis URI               accepted for http_payments' command line; not used\n"
    "  --prefix P                prefixes table names\n"
    "  --lease-ms N              how long a crashed request holds its key (30000)\n"
    "  --delay-ms N              slows the payment handler, on a timer (0)\n"
    "  --threads N               event loop threads, at most one per core (16)\n"
    "  --max-connections N       open connections at most (1024)\n"
    "  --keep-alive-ms N         idle keep-alive connections close after N ms (5000)\n"
    "  --keep-alive-requests N   a connection closes after N requests (10000)\n"
    "  --request-timeout-ms N    a request must arrive whole, head and body, in N ms (10000)\n"
    "  --write-timeout-ms N      an answer must be taken by the client in N ms (5000)\n"
    "  --body-limit BYTES        larger bodies are answered 413 unread (1048576)\n"
    "SIGTERM or SIGINT: stop accepting, finish the requests in hand, exit 0.\n";

/// Why the command line asks for what this server does not serve, or empty.
inline std::string unsupported(const payments::CommandLine& cl) {
  if (cl.service.bare) return "--bare: the bare twin is http_payments --bare";
  if (cl.service.pg_uri.empty()) {
    return "--pg URI is required: records and payments are kept in PostgreSQL (SQLite, "
           "http_payments' default, has no asynchronous interface)";
  }
  return {};
}

/// The event loop's threads: --threads, at most one per core (a thread more than the cores
/// only adds switches: no call blocks one).
inline std::size_t loop_threads(const payments::CommandLine& cl) {
  const std::size_t cores = std::max(1U, std::thread::hardware_concurrency());
  return std::clamp<std::size_t>(cl.transport.threads, 1, cores);
}

}  // namespace payments_async
