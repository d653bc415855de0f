#include "transport/request_stream.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace transport {

namespace {
// Answers larger than this go out in parts as they are written.
constexpr std::size_t kGatherAtMost = 64 * 1024;
}  // namespace

RequestStream::RequestStream(Connection& c, std::size_t head_size, Clock::time_point read_deadline,
                             std::chrono::milliseconds write_timeout, std::size_t body_cap)
    : c_(c),
      head_size_(head_size),
      read_deadline_(read_deadline),
      write_timeout_(write_timeout),
      body_cap_(body_cap) {}

RequestStream::~RequestStream() { c_.in.erase(0, used_); }

bool RequestStream::wait_for(short events, Clock::time_point deadline) const {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{c_.fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

void RequestStream::expect_body(const httplib::Request& req) {
  if (req.has_header("Transfer-Encoding")) return;  // chunked: its end is not known here
  const std::string length = req.get_header_value("Content-Length");
  std::size_t n = 0;
  if (!length.empty()) {
    const auto [end, ec] = std::from_chars(length.data(), length.data() + length.size(), n);
    if (ec != std::errc{} || end != length.data() + length.size()) return;
  }
  body_expected_ = n;
}

bool RequestStream::body_left() const { return !body_expected_ || body_read_ < *body_expected_; }

bool RequestStream::is_readable() const {
  if (used_ < c_.in.size()) return true;
  pollfd p{c_.fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

bool RequestStream::is_writable() const { return true; }

ssize_t RequestStream::read(char* ptr, size_t size) {
  const bool in_body = used_ >= head_size_;  // the whole head is in c_.in
  if (in_body) {
    if (body_read_ >= body_cap_) return -1;  // the request fails: its body is too long
    size = std::min(size, body_cap_ - body_read_);
  } else {
    size = std::min(size, head_size_ - used_);
  }
  ssize_t n = 0;
  if (used_ < c_.in.size()) {
    n = static_cast<ssize_t>(std::min(size, c_.in.size() - used_));
    std::memcpy(ptr, c_.in.data() + used_, static_cast<std::size_t>(n));
    used_ += static_cast<std::size_t>(n);
  } else {
    // What was written goes out before waiting on the client: "100 Continue" is what it waits
    // for before it sends the body.
    if (!out_.empty() && !flush()) return -1;
    for (;;) {
      n = ::recv(c_.fd, ptr, size, 0);
      if (n >= 0) break;
      if (errno == EINTR) continue;
      if (errno != EAGAIN || !wait_for(POLLIN, read_deadline_)) return -1;
    }
  }
  if (in_body) body_read_ += static_cast<std::size_t>(n);
  return n;
}

ssize_t RequestStream::write(const char* ptr, size_t size) {
  out_.append(ptr, size);
  if (out_.size() >= kGatherAtMost && !flush()) return -1;
  return static_cast<ssize_t>(size);
}

bool RequestStream::flush() {
  const auto deadline = Clock::now() + write_timeout_;
  std::size_t sent = 0;
  while (sent < out_.size()) {
    const ssize_t n = ::send(c_.fd, out_.data() + sent, out_.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      if (!wait_for(POLLOUT, deadline)) return false;
    } else {
      return false;
    }
  }
  out_.clear();
  return true;
}

void RequestStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  ip = c_.peer_ip;
  port = c_.peer_port;
}

void RequestStream::get_local_ip_and_port(std::string& ip, int& port) const {
  ip = c_.local_ip;
  port = c_.local_port;
}

socket_t RequestStream::socket() const { return c_.fd; }

}  // namespace transport
