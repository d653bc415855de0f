#pragma once
// Where connections wait for their next request: idle keep-alive connections, new ones, and
// clients still sending a request head. They wait in one epoll thread instead of in the request
// threads, and a connection is handed to a request thread only once its whole head is in the
// socket. A client that sends its head a byte a second therefore costs a socket and a few bytes
// here, never a thread, and is closed when the request's deadline passes.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "transport/connection.hpp"
#include "transport/transport_settings.hpp"

namespace transport {

class ConnectionPark {
 public:
  /// Called on the park's thread when a connection's request head is complete.
  using Ready = std::function<void(std::shared_ptr<Connection>)>;

  ConnectionPark(const TransportSettings& settings, Ready ready);
  ~ConnectionPark();
  ConnectionPark(const ConnectionPark&) = delete;
  ConnectionPark& operator=(const ConnectionPark&) = delete;

  /// Takes a socket from accept(). False, leaving the socket to the caller, when
  /// max_connections are open.
  bool admit(int fd);
  /// After an answer: wait for the connection's next request.
  void park(std::shared_ptr<Connection> c);
  /// After an answer that left a body unread: read and drop what still comes, within
  /// linger_timeout and linger_bytes, then close. The client reads the answer, not a reset.
  void linger(std::shared_ptr<Connection> c);
  /// Closes a connection that a request thread holds.
  void close(const std::shared_ptr<Connection>& c);
  /// Stops the thread and closes every waiting connection; later park() and linger() close.
  void stop();

  std::size_t open_connections() const { return open_.load(); }

 private:
  void watch(std::shared_ptr<Connection> c);
  void run();
  std::shared_ptr<Connection> on_readable(int fd);
  void sweep(Clock::time_point now);
  void drop_locked(int fd);  // closes a waiting connection; mutex_ held

  const TransportSettings settings_;
  const Ready ready_;
  int epoll_ = -1;
  int wake_ = -1;  // eventfd: stop() wakes the thread
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> open_{0};
  std::mutex mutex_;
  std::unordered_map<int, std::shared_ptr<Connection>> waiting_;
  std::vector<char> scratch_;  // the thread's peek and drain buffer
  std::thread thread_;
};

}  // namespace transport
