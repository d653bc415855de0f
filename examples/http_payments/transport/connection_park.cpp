#include "transport/connection_park.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <utility>

#include "transport/canned_answer.hpp"

namespace transport {

namespace {

// The deadlines are checked this often; a deadline is kept to within this much.
constexpr auto kSweepEvery = std::chrono::milliseconds{50};

void name_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  if ((peer ? ::getpeername(fd, sa, &len) : ::getsockname(fd, sa, &len)) != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    port = ntohs(in6->sin6_port);
  }
  ip = text;
}

// Answers go out as soon as they are written (the transport sends each answer in one write):
// without TCP_NODELAY a keep-alive answer can wait for the client's delayed ACK, 40 ms on Linux.
void prepare_socket(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

}  // namespace

ConnectionPark::ConnectionPark(const TransportSettings& settings, Ready ready)
    : settings_(settings),
      ready_(std::move(ready)),
      epoll_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      scratch_(std::max<std::size_t>(settings.head_limit, 64 * 1024)) {
  if (epoll_ < 0 || wake_ < 0) {
    throw std::system_error(errno, std::generic_category(), "transport: epoll/eventfd");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_;
  ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
  thread_ = std::thread([this] { run(); });
}

ConnectionPark::~ConnectionPark() {
  stop();
  ::close(epoll_);
  ::close(wake_);
}

void ConnectionPark::stop() {
  if (stopping_.exchange(true)) return;
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(wake_, &one, sizeof one);
  thread_.join();
  std::lock_guard lock(mutex_);
  while (!waiting_.empty()) drop_locked(waiting_.begin()->first);
}

bool ConnectionPark::admit(int fd) {
  std::size_t open = open_.load();
  do {
    if (open >= settings_.max_connections) return false;
  } while (!open_.compare_exchange_weak(open, open + 1));
  prepare_socket(fd);
  auto c = std::make_shared<Connection>();
  c->fd = fd;
  name_of(fd, true, c->peer_ip, c->peer_port);
  name_of(fd, false, c->local_ip, c->local_port);
  park(std::move(c));
  return true;
}

void ConnectionPark::park(std::shared_ptr<Connection> c) {
  c->parked_at = Clock::now();
  c->request_start = {};
  c->head_size = 0;
  watch(std::move(c));
}

void ConnectionPark::linger(std::shared_ptr<Connection> c) {
  ::shutdown(c->fd, SHUT_WR);  // the answer is complete: the client sees its end
  c->lingering = true;
  c->linger_until = Clock::now() + settings_.linger_timeout;
  c->lingered = 0;
  watch(std::move(c));
}

void ConnectionPark::close(const std::shared_ptr<Connection>& c) {
  ::close(c->fd);
  open_.fetch_sub(1);
}

// Edge-triggered: the thread hears of every new arrival of bytes, and only peeks at them, so
// that a head that is not complete yet costs nothing until more of it comes. Adding a socket
// that already holds bytes reports it at once (a request sent while the previous answer was
// being written is not missed).
void ConnectionPark::watch(std::shared_ptr<Connection> c) {
  std::lock_guard lock(mutex_);
  const int fd = c->fd;
  if (stopping_.load()) {
    close(c);
    return;
  }
  waiting_[fd] = std::move(c);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.fd = fd;
  if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) drop_locked(fd);
}

void ConnectionPark::drop_locked(int fd) {
  const auto it = waiting_.find(fd);
  if (it == waiting_.end()) return;
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
  close(it->second);
  waiting_.erase(it);
}

void ConnectionPark::run() {
  std::vector<epoll_event> events(256);
  auto next_sweep = Clock::now() + kSweepEvery;
  while (!stopping_.load()) {
    const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()),
                               static_cast<int>(kSweepEvery.count()));
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == wake_) continue;
      if (std::shared_ptr<Connection> ready = on_readable(events[i].data.fd)) {
        ready_(std::move(ready));
      }
    }
    const auto now = Clock::now();
    if (now >= next_sweep) {
      sweep(now);
      next_sweep = now + kSweepEvery;
    }
  }
}

// What the socket holds decides, not the event: an event may be stale (its socket answered and
// closed since, and the number reused), and looking again is harmless.
std::shared_ptr<Connection> ConnectionPark::on_readable(int fd) {
  std::lock_guard lock(mutex_);
  const auto it = waiting_.find(fd);
  if (it == waiting_.end()) return nullptr;
  Connection& c = *it->second;

  if (c.lingering) {
    for (;;) {
      const ssize_t n = ::recv(fd, scratch_.data(), scratch_.size(), 0);
      if (n > 0) {
        c.lingered += static_cast<std::size_t>(n);
        if (c.lingered < settings_.linger_bytes) continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return nullptr;  // more may come: wait for it
      }
      drop_locked(fd);  // the client finished, failed, or sent too much
      return nullptr;
    }
  }

  const std::size_t look = std::min(scratch_.size(), settings_.head_limit);
  const ssize_t n = ::recv(fd, scratch_.data(), look, MSG_PEEK);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return nullptr;
  if (n <= 0) {
    drop_locked(fd);  // closed by the client, or broken
    return nullptr;
  }
  if (c.request_start == Clock::time_point{}) c.request_start = Clock::now();
  const std::string_view seen(scratch_.data(), static_cast<std::size_t>(n));
  const std::size_t end = seen.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (seen.size() >= settings_.head_limit) {
      send_canned_answer(fd, 431, "Request Header Fields Too Large", "head_too_large",
                         "the request line and headers exceed " +
                             std::to_string(settings_.head_limit) + " bytes");
      drop_locked(fd);
    }
    return nullptr;  // the rest of the head is still on its way
  }
  c.head_size = end + 4;
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
  std::shared_ptr<Connection> ready = std::move(it->second);
  waiting_.erase(it);
  return ready;
}

void ConnectionPark::sweep(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  std::vector<int> expired;
  for (const auto& [fd, c] : waiting_) {
    if (c->lingering) {
      if (now >= c->linger_until) expired.push_back(fd);
    } else if (c->request_start != Clock::time_point{}) {
      if (now - c->request_start >= settings_.request_timeout) {
        send_canned_answer(fd, 408, "Request Timeout", "request_timeout",
                           "the request did not arrive whole within " +
                               std::to_string(settings_.request_timeout.count()) + " ms");
        expired.push_back(fd);
      }
    } else if (now - c->parked_at >= settings_.keep_alive_timeout) {
      expired.push_back(fd);  // idle: closed quietly, as keep-alive allows
    }
  }
  for (int fd : expired) drop_locked(fd);
}

}  // namespace transport
