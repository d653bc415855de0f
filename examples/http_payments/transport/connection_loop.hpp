#pragma once
// Where connections wait for their next request, and the threads that answer them. Every
// connection is registered, one-shot, in one epoll set that all request threads wait on: a thread
// woken for a connection reads what has come, and takes the request only once its head (and a
// small body) is in hand; otherwise it goes back to waiting at once. A client that sends its
// head a byte a second therefore costs a socket and a buffer, never a thread, and is closed
// when the request's deadline passes. A keep-alive request costs one wake-up of one thread.

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
  /// What to do with a connection once its request is answered.
  enum class After { keep, linger, close };
  /// Answers one request: its head, and a small body, are at the start of `c.in`. Runs on a
  /// request thread; the request's bytes are taken from `c.in` (what follows stays).
  using Answer = std::function<After(Connection& c)>;

  /// Starts settings.threads request threads and the deadline thread.
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
  void run();
  void watch_deadlines();
  std::shared_ptr<Connection> take(int fd);
  void handle(const std::shared_ptr<Connection>& c);
  void wait_again(const std::shared_ptr<Connection>& c);
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
