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
#include <system_error>
#include <thread>
#include <utility>

#include "transport/canned_answer.hpp"

namespace transport {

namespace {

// Deadlines are checked this often: each is kept to within this much.
constexpr auto kDeadlineCheck = std::chrono::milliseconds{50};
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

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

// Answers go out as soon as they are written (each in one write): without TCP_NODELAY a
// keep-alive answer can wait for the client's delayed ACK, 40 ms on Linux.
void prepare_socket(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

// One-shot: once a thread is woken for a connection, no other is until it waits again.
// Level-triggered: waiting again with bytes unread (or room to write) wakes a thread at once.
epoll_event one_shot(int fd, bool write) {
  epoll_event ev{};
  ev.events = (write ? EPOLLOUT : EPOLLIN) | EPOLLRDHUP | EPOLLONESHOT;
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
  auto c = std::make_shared<Connection>(settings_);
  c->fd = fd;
  c->waiting_since = Clock::now();
  name_of(fd, true, c->peer_ip, c->peer_port);
  name_of(fd, false, c->local_ip, c->local_port);
  std::lock_guard lock(mutex_);
  connections_[fd] = std::move(c);
  epoll_event ev = one_shot(fd, false);
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
  if (c->lingering) return linger(c);
  if (!c->out.empty() && !send_and_go_on(c)) return;
  char buf[16 * 1024];
  bool ended = false;
  for (;;) {
    // Parse what is in hand; read more only when it is not a whole request.
    RequestReader::Step step = c->reader.read(c->in);
    while (step == RequestReader::Step::more && !ended) {
      const ssize_t n = ::recv(c->fd, buf, sizeof buf, 0);
      if (n > 0) {
        if (c->request_start == Clock::time_point{}) c->request_start = Clock::now();
        c->in.append(buf, static_cast<std::size_t>(n));
        step = c->reader.read(c->in);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        ended = n == 0 || errno != EAGAIN;
        break;
      }
    }
    switch (step) {
      case RequestReader::Step::refused:
        c->out = canned_answer(c->reader.refusal());
        c->close_after_out = true;
        c->interim_out = false;
        send_and_go_on(c);
        return;
      case RequestReader::Step::more:
        if (ended) return close(c);  // the client left, mid-request or between requests
        if (c->reader.take_continue()) {
          c->out = kContinue;
          c->close_after_out = false;
          c->interim_out = true;
          if (!send_and_go_on(c)) return;
          continue;  // the body may have come already
        }
        return wait_again(c, Wait::read);
      case RequestReader::Step::done:
        break;
    }
    if (ended) c->reader.end();
    const bool keep = answer_(*c);
    ++c->answered;
    c->close_after_out = !keep;
    c->interim_out = false;
    c->reader.next();
    // The next request's clock starts now if the client sent it already (pipelining).
    c->waiting_since = Clock::now();
    c->request_start = c->in.empty() ? Clock::time_point{} : c->waiting_since;
    if (!send_and_go_on(c)) return;
    if (ended && c->in.empty()) return close(c);
  }
}

bool ConnectionLoop::send_and_go_on(const std::shared_ptr<Connection>& c) {
  switch (send_out(*c)) {
    case Sent::failed:
      close(c);
      return false;
    case Sent::partly:
      wait_again(c, Wait::write);  // the rest when the client makes room, by write_deadline
      return false;
    case Sent::all:
      break;
  }
  if (c->close_after_out) {
    start_linger(c);
    return false;
  }
  return true;
}

ConnectionLoop::Sent ConnectionLoop::send_out(Connection& c) {
  if (c.out_sent == 0) c.write_deadline = Clock::now() + settings_.write_timeout;
  while (c.out_sent < c.out.size()) {
    const ssize_t n =
        ::send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_sent += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return Sent::partly;
    } else {
      return Sent::failed;
    }
  }
  c.out.clear();
  c.out_sent = 0;
  return Sent::all;
}

// The last answer is out: the client sees its end at once, and what it still sends (a body left
// unread, pipelined requests) is read and dropped for a bounded time, so that closing does not
// reset the connection under an answer the client has not read yet.
void ConnectionLoop::start_linger(const std::shared_ptr<Connection>& c) {
  ::shutdown(c->fd, SHUT_WR);
  c->lingering = true;
  c->linger_until = Clock::now() + settings_.linger_timeout;
  c->in.clear();
  linger(c);
}

void ConnectionLoop::linger(const std::shared_ptr<Connection>& c) {
  char buf[16 * 1024];
  for (;;) {
    const ssize_t n = ::recv(c->fd, buf, sizeof buf, 0);
    if (n > 0) {
      c->lingered += static_cast<std::size_t>(n);
      if (c->lingered < settings_.linger_bytes) continue;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return wait_again(c, Wait::read);
    }
    return close(c);  // the client finished, failed, or sent too much
  }
}

void ConnectionLoop::wait_again(const std::shared_ptr<Connection>& c, Wait wait) {
  std::lock_guard lock(mutex_);
  c->in_hand = false;
  epoll_event ev = one_shot(c->fd, wait == Wait::write);
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
      if (c->in_hand) continue;  // a thread has it: it puts it back, or closes it, at once
      if (c->lingering) {
        if (now >= c->linger_until) expired.push_back(fd);
      } else if (!c->out.empty()) {
        if (now >= c->write_deadline) expired.push_back(fd);  // the client does not read
      } else if (c->request_start != Clock::time_point{}) {
        if (now - c->request_start >= settings_.request_timeout) {
          send_canned_answer(fd, timeout_refusal(settings_));
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
