#pragma once
// Where connections wait, and the threads that read and answer them. Every connection is
// registered, one-shot, in one epoll set that all threads wait on. A thread woken for a
// connection reads what has come and feeds it to the connection's RequestReader (Boost.Beast's
// parser), head and body alike; it answers only a whole request, and otherwise puts the
// connection back at once. A client that sends its head a byte a second, or announces a body and
// never sends it, therefore costs a socket and a buffer, never a thread, and is answered 408 when
// the request's deadline passes. An answer the client does not take at once waits in the epoll
// set too (for room to write), within the write timeout. A keep-alive request costs one wake-up
// of one thread.

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "transport/connection.hpp"
#include "transport/transport_settings.hpp"

namespace transport {

class ConnectionLoop {
 public:
  /// Answers the whole request in `c.reader` on a thread of the loop: writes the answer's bytes
  /// to `c.out` and returns whether the connection may carry another request.
  using Answer = std::function<bool(Connection& c)>;

  /// Starts settings.threads threads and the deadline thread.
  ConnectionLoop(const TransportSettings& settings, Answer answer);
  ~ConnectionLoop();
  ConnectionLoop(const ConnectionLoop&) = delete;
  ConnectionLoop& operator=(const ConnectionLoop&) = delete;

  /// Takes a socket from accept(). False, leaving the socket to the caller, when
  /// max_connections are open.
  bool admit(int fd);
  /// Stops the threads (requests in hand finish) and closes every connection.
  void stop();

  std::size_t open_connections() const { return open_.load(); }

 private:
  enum class Wait { read, write };
  enum class Sent { all, partly, failed };

  void run();
  void watch_deadlines();
  std::shared_ptr<Connection> take(int fd);
  void handle(const std::shared_ptr<Connection>& c);
  void linger(const std::shared_ptr<Connection>& c);
  // After c->out was filled: sends it, then goes on as its kind says. True when the thread may
  // go on with the connection (read or parse its next bytes).
  bool send_and_go_on(const std::shared_ptr<Connection>& c);
  Sent send_out(Connection& c);
  void start_linger(const std::shared_ptr<Connection>& c);
  void wait_again(const std::shared_ptr<Connection>& c, Wait wait);
  void close(const std::shared_ptr<Connection>& c);
  void close_locked(int fd);  // mutex_ held

  const TransportSettings settings_;
  const Answer answer_;
  int epoll_ = -1;
  int wake_ = -1;  // eventfd: stop() wakes every thread
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> open_{0};
  std::mutex mutex_;
  std::unordered_map<int, std::shared_ptr<Connection>> connections_;
  std::vector<std::thread> threads_;
};

}  // namespace transport
