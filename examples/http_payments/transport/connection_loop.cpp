#include "transport/connection_loop.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "transport/canned_answer.hpp"
#include "transport/request_head.hpp"

namespace transport {

namespace {

// Deadlines are checked this often: each is kept to within this much.
constexpr auto kDeadlineCheck = std::chrono::milliseconds{50};
// A body up to this size is read before a thread takes the request, so that a client trickling
// a small body holds no thread either. Larger bodies are read by the thread, under the deadline.
constexpr std::size_t kSmallBody = 64 * 1024;

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

// Answers go out as soon as they are written (the transport sends each in one write): without
// TCP_NODELAY a keep-alive answer can wait for the client's delayed ACK, 40 ms on Linux.
void prepare_socket(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

// One-shot: once a thread is woken for a connection, no other is until it waits again.
// Level-triggered: waiting again with bytes unread wakes a thread at once.
epoll_event one_shot(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
  ev.data.fd = fd;
  return ev;
}

}  // namespace

ConnectionLoop::ConnectionLoop(const TransportSettings& settings, Answer answer)
    : settings_(settings),
      answer_(std::move(answer)),
      epoll_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (epoll_ < 0 || wake_ < 0) {
    throw std::system_error(errno, std::generic_category(), "transport: epoll/eventfd");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;  // level-triggered and never read: once written, it wakes every thread
  ev.data.fd = wake_;
  ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
  for (std::size_t i = 0; i < settings_.threads; ++i) threads_.emplace_back([this] { run(); });
  threads_.emplace_back([this] { watch_deadlines(); });
}

ConnectionLoop::~ConnectionLoop() {
  stop();
  ::close(epoll_);
  ::close(wake_);
}

void ConnectionLoop::stop() {
  if (stopping_.exchange(true)) return;
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(wake_, &one, sizeof one);
  for (auto& t : threads_) t.join();
  std::lock_guard lock(mutex_);
  while (!connections_.empty()) close_locked(connections_.begin()->first);
}

bool ConnectionLoop::admit(int fd) {
  std::size_t open = open_.load();
  do {
    if (open >= settings_.max_connections) return false;
  } while (!open_.compare_exchange_weak(open, open + 1));
  prepare_socket(fd);
  auto c = std::make_shared<Connection>();
  c->fd = fd;
  c->waiting_since = Clock::now();
  name_of(fd, true, c->peer_ip, c->peer_port);
  name_of(fd, false, c->local_ip, c->local_port);
  std::lock_guard lock(mutex_);
  connections_[fd] = std::move(c);
  epoll_event ev = one_shot(fd);
  if (stopping_.load() || ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) close_locked(fd);
  return true;
}

void ConnectionLoop::run() {
  while (!stopping_.load()) {
    epoll_event ev{};
    if (::epoll_wait(epoll_, &ev, 1, 100) != 1 || ev.data.fd == wake_) continue;
    if (std::shared_ptr<Connection> c = take(ev.data.fd)) handle(c);
  }
}

// The socket decides, not the event: an event may be late (its connection closed since and the
// number reused), and reading a socket that has nothing is harmless.
std::shared_ptr<Connection> ConnectionLoop::take(int fd) {
  std::lock_guard lock(mutex_);
  const auto it = connections_.find(fd);
  if (it == connections_.end() || it->second->in_hand) return nullptr;
  it->second->in_hand = true;
  return it->second;
}

void ConnectionLoop::handle(const std::shared_ptr<Connection>& c) {
  char buf[16 * 1024];
  if (c->lingering) {
    for (;;) {
      const ssize_t n = ::recv(c->fd, buf, sizeof buf, 0);
      if (n > 0) {
        c->lingered += static_cast<std::size_t>(n);
        if (c->lingered < settings_.linger_bytes) continue;
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && errno == EAGAIN) {
        return wait_again(c);
      }
      return close(c);  // the client finished, failed, or sent too much
    }
  }
  for (;;) {
    // Take what has come, up to a head and a small body; the rest stays in the socket.
    bool ended = false;
    const std::size_t room = settings_.head_limit + kSmallBody;
    while (c->in.size() < room) {
      const ssize_t n = ::recv(c->fd, buf, std::min(sizeof buf, room - c->in.size()), 0);
      if (n > 0) {
        c->in.append(buf, static_cast<std::size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        ended = n == 0 || errno != EAGAIN;
        break;
      }
    }
    if (!c->in.empty() && c->request_start == Clock::time_point{}) {
      c->request_start = Clock::now();
    }
    const std::size_t end = head_end(c->in);
    if (end == std::string_view::npos || end > settings_.head_limit) {
      if (c->in.size() >= settings_.head_limit) {
        send_canned_answer(c->fd, 431, "Request Header Fields Too Large", "head_too_large",
                           "the request line and headers exceed " +
                               std::to_string(settings_.head_limit) + " bytes");
        return close(c);
      }
      return ended ? close(c) : wait_again(c);  // the rest of the head is on its way
    }
    const std::size_t body = body_to_wait_for(std::string_view(c->in).substr(0, end), kSmallBody);
    if (c->in.size() < end + body) return ended ? close(c) : wait_again(c);

    switch (answer_(*c)) {
      case After::close:
        return close(c);
      case After::linger:
        ::shutdown(c->fd, SHUT_WR);  // the answer is complete: the client sees its end
        c->lingering = true;
        c->linger_until = Clock::now() + settings_.linger_timeout;
        c->in.clear();
        return wait_again(c);
      case After::keep:
        break;
    }
    c->request_start = {};
    c->waiting_since = Clock::now();
    if (c->in.empty()) return ended ? close(c) : wait_again(c);
    // The client sent its next request already (pipelining): answer it without waiting.
  }
}

void ConnectionLoop::wait_again(const std::shared_ptr<Connection>& c) {
  std::lock_guard lock(mutex_);
  c->in_hand = false;
  epoll_event ev = one_shot(c->fd);
  if (stopping_.load() || ::epoll_ctl(epoll_, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
    close_locked(c->fd);
  }
}

void ConnectionLoop::close(const std::shared_ptr<Connection>& c) {
  std::lock_guard lock(mutex_);
  close_locked(c->fd);
}

void ConnectionLoop::close_locked(int fd) {
  const auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  connections_.erase(it);
  open_.fetch_sub(1);
}

void ConnectionLoop::watch_deadlines() {
  while (!stopping_.load()) {
    std::this_thread::sleep_for(kDeadlineCheck);
    const auto now = Clock::now();
    std::lock_guard lock(mutex_);
    std::vector<int> expired;
    for (const auto& [fd, c] : connections_) {
      if (c->in_hand) continue;  // its thread keeps the deadline while it reads
      if (c->lingering) {
        if (now >= c->linger_until) expired.push_back(fd);
      } else if (c->request_start != Clock::time_point{}) {
        if (now - c->request_start >= settings_.request_timeout) {
          send_canned_answer(fd, 408, "Request Timeout", "request_timeout",
                             "the request did not arrive whole within " +
                                 std::to_string(settings_.request_timeout.count()) + " ms");
          expired.push_back(fd);
        }
      } else if (now - c->waiting_since >= settings_.keep_alive_timeout) {
        expired.push_back(fd);  // idle: closed quietly, as keep-alive allows
      }
    }
    for (int fd : expired) close_locked(fd);
  }
}

}  // namespace transport
