#pragma once
// How the payments service's HTTP transport treats its connections. Every number is a bound on
// what one client can make the server spend: a thread, memory, a connection slot, time.

#include <chrono>
#include <cstddef>

namespace transport {

struct TransportSettings {
  /// Threads that answer requests. A connection holds one only while its request is in hand
  /// (its head, and its body when small): idle keep-alive connections and clients still
  /// sending wait in the epoll set, so slow clients never hold a thread. Requests block on the
  /// database, so more threads than cores pay off until the database is the queue.
  std::size_t threads = 16;
  /// Open connections at most (idle, sending or being answered). One more is answered 503 and
  /// closed at once.
  std::size_t max_connections = 1024;
  /// An idle keep-alive connection is closed after this long without a byte.
  std::chrono::milliseconds keep_alive_timeout{5'000};
  /// A connection is closed after answering this many requests (clients reconnect, and load
  /// spreads again over the servers behind a balancer).
  std::size_t keep_alive_requests = 10'000;
  /// The whole request, head and body, must arrive within this time of its first byte; a
  /// client that sends slower is answered 408 and closed, however often it sends a byte.
  std::chrono::milliseconds request_timeout{10'000};
  /// Sending one answer may take this long (a client that does not read is cut off).
  std::chrono::milliseconds write_timeout{5'000};
  /// A body announced larger than this is answered 413 before any of it is read.
  std::size_t body_limit = 1024 * 1024;
  /// A request head (request line and headers) larger than this is answered 431.
  std::size_t head_limit = 16 * 1024;
  /// After an answer that leaves a body unread, the rest is read and dropped for at most this
  /// long and this many bytes before the connection closes, so that the client reads the answer
  /// instead of a reset.
  std::chrono::milliseconds linger_timeout{2'000};
  std::size_t linger_bytes = 1024 * 1024;
  /// Connections the kernel queues before the server accepts them (cpp-httplib listens with 5,
  /// which drops connections when many clients connect at once).
  int listen_backlog = 1024;
};

}  // namespace transport
