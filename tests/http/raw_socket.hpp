#pragma once
// A bare TCP client for the tests that play misbehaving clients: it sends exactly the bytes it is
// told to, when it is told to, and reads with a bounded wait.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <string_view>

namespace http_test {

class RawSocket {
 public:
  explicit RawSocket(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  /// Sends all of `bytes`, waiting at most `wait` for room. False once the peer is gone or the
  /// wait ran out.
  bool send(std::string_view bytes, std::chrono::milliseconds wait = std::chrono::seconds{5}) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        bytes.remove_prefix(static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (!wait_for(POLLOUT, deadline)) return false;
        continue;
      }
      return false;
    }
    return true;
  }

  /// Reads until the peer closes, `until` appears in what was read, or `wait` passes.
  std::string receive(std::chrono::milliseconds wait, std::string_view until = {}) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    std::string got;
    char buf[4096];
    while (until.empty() || got.find(until) == std::string::npos) {
      if (!wait_for(POLLIN, deadline)) break;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        got.append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        closed_ = true;
        break;
      }
    }
    return got;
  }

  /// True once a read found the peer's end (or a reset).
  bool closed_by_peer() const { return closed_.load(); }

  /// Whether the peer closed the connection within `wait` (bytes before the end are dropped).
  bool closes_within(std::chrono::milliseconds wait) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    char buf[4096];
    while (!closed_) {
      if (!wait_for(POLLIN, deadline)) return false;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) closed_ = true;
    }
    return true;
  }

 private:
  bool wait_for(short events, std::chrono::steady_clock::time_point deadline) const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd p{fd_, events, 0};  // a wait that is over still takes what is there now
    return ::poll(&p, 1, static_cast<int>(std::max<long long>(left, 0))) > 0;
  }

  int fd_ = -1;
  std::atomic<bool> closed_{false};  // read by a sending thread too
};

}  // namespace http_test
