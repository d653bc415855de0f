// The blocking face's socket and single-caller connection; see socket.hpp.

#include "socket.hpp"

#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>

#include "acl_refusal.hpp"

namespace idem::redis {

namespace {

using Clock = std::chrono::steady_clock;

int millis_until(Deadline deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
}

// poll(2) for `events` until `deadline`: 0 when ready, else the errno (ETIMEDOUT).
int wait_for(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ready = ::poll(&p, 1, millis_until(deadline));
    if (ready > 0) return 0;
    if (ready == 0) return ETIMEDOUT;
    if (errno != EINTR) return errno;
  }
}

// A non-blocking connect to `addr`, done by `deadline`: the socket, or -1 with `error` set.
int connect_to(const sockaddr* addr, socklen_t len, Deadline deadline, int& error) {
  const int fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = errno;
    return -1;
  }
  error = ::connect(fd, addr, len) == 0 ? 0 : errno;
  if (error == EINPROGRESS && (error = wait_for(fd, POLLOUT, deadline)) == 0) {
    socklen_t size = sizeof error;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) error = errno;
  }
  if (error != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

void tune_tcp(int fd, bool keep_alive) noexcept {
  const int on = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  if (!keep_alive) return;
  const int idle = 15, interval = 5, count = 3;
  (void)::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    tls_ = std::move(other.tls_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

Result<Socket> Socket::open(const ConnectionOptions& options, const TlsContext* tls,
                            Deadline deadline, std::string_view where) {
  deadline = connected_by(options, deadline);
  if (options.tls.enabled && tls == nullptr) {
    return unavailable(fmt::format("redis {}: TLS is on but no TLS context was made", where));
  }
  const auto cannot = [&](std::string_view why) {
    return unavailable(fmt::format("redis {}: cannot connect: {}", where, why));
  };
  int fd = -1;
  int error = 0;
  if (!options.unix_socket.empty()) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (options.unix_socket.size() >= sizeof addr.sun_path) return cannot("socket path too long");
    std::memcpy(addr.sun_path, options.unix_socket.data(), options.unix_socket.size());
    fd = connect_to(reinterpret_cast<const sockaddr*>(&addr), sizeof addr, deadline, error);
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(options.port);
    if (const int rc = ::getaddrinfo(options.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
      return cannot(::gai_strerror(rc));
    }
    const std::unique_ptr<addrinfo, void (*)(addrinfo*)> owned(found, ::freeaddrinfo);
    for (const addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
      fd = connect_to(a->ai_addr, a->ai_addrlen, deadline, error);
    }
    if (fd >= 0) tune_tcp(fd, options.keep_alive);
  }
  if (fd < 0) return cannot(std::strerror(error));
  Socket socket(fd);
  if (tls == nullptr) return socket;
  return std::move(socket).handshake(*tls, options.host, deadline, where);
}

Result<Socket> Socket::handshake(const TlsContext& context, const std::string& host,
                                 Deadline deadline, std::string_view where) && {
  Result<SslPtr> session = context.session(host);
  if (!session) return std::move(session).failure();
  tls_ = std::make_unique<Tls>();
  tls_->ssl = std::move(session).value();
  SSL* ssl = tls_->ssl.get();
  if (SSL_set_fd(ssl, fd_) != 1) {
    return unavailable(fmt::format("redis {}: TLS: cannot attach the socket: {}", where,
                                   ssl_failure_reason(SSL_ERROR_SSL, 0)));
  }
  for (;;) {
    ERR_clear_error();
    errno = 0;
    const int rc = SSL_connect(ssl);
    if (rc == 1) {
      // Reads take every byte that arrived, not one record's header and then its body; the
      // records read ahead stay in the session (tls_read_some drains them, closed_by_server
      // looks there too).
      SSL_set_read_ahead(ssl, 1);
      return std::move(*this);
    }
    const int ssl_error = SSL_get_error(ssl, rc);
    const int sys_errno = errno;
    if (ssl_error == SSL_ERROR_WANT_READ || ssl_error == SSL_ERROR_WANT_WRITE) {
      const short events = ssl_error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
      if (const int error = wait_for(fd_, events, deadline); error != 0) {
        return unavailable(fmt::format("redis {}: TLS handshake {}", where,
                                       error == ETIMEDOUT
                                           ? "timed out (does the server speak TLS on this port?)"
                                           : std::string("failed: ") + std::strerror(error)));
      }
      continue;
    }
    return unavailable(fmt::format("redis {}: {}", where,
                                   handshake_failure(ssl, ssl_failure_reason(ssl_error, sys_errno),
                                                     context.verified_name(host))));
  }
}

int Socket::send_all(std::string_view bytes, Deadline deadline) const noexcept {
  if (tls_) return tls_send_all(bytes, deadline);
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n >= 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      // The socket's buffer is full (a server that does not read): wait, within the deadline.
      if (const int error = wait_for(fd_, POLLOUT, deadline); error != 0) return error;
    } else if (errno != EINTR) {
      return errno == 0 ? EIO : errno;
    }
  }
  return 0;
}

ssize_t Socket::read_some(std::span<char> buf, Deadline deadline, int& error) const noexcept {
  if (tls_) return tls_read_some(buf, deadline, error);
  for (;;) {
    if ((error = wait_for(fd_, POLLIN, deadline)) != 0) return -1;
    const ssize_t got = ::recv(fd_, buf.data(), buf.size(), 0);
    if (got >= 0) return got;
    if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      error = errno;
      return -1;
    }
  }
}

namespace {

// Why a server that asked for a client certificate and got none ends the connection.
constexpr std::string_view kNoCertificate =
    " (the server asked for a client certificate and none is configured: TLS cert_file and "
    "key_file)";

}  // namespace

std::string Socket::error_text(int error) const {
  std::string text = std::strerror(error);
  if (!tls_) return text;
  const std::lock_guard lock(tls_->turn);
  if (error == EPROTO && !tls_->failure.empty()) text = "TLS: " + tls_->failure;
  if (certificate_asked_for(tls_->ssl.get())) text += kNoCertificate;
  return text;
}

std::string Socket::closed_text() const {
  std::string text = "connection closed by the server";
  if (!tls_) return text;
  const std::lock_guard lock(tls_->turn);
  if (certificate_asked_for(tls_->ssl.get())) text += kNoCertificate;
  return text;
}

bool Socket::closed_by_server() const noexcept {
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, 0) == 0 && !(tls_ && tls_has_pending())) return false;
  return !tls_ || tls_closed_by_server();
}

namespace {

// An SSL call's outcome, taken under the session's turn.
struct SslStep {
  int done;  // > 0: bytes; else see ssl_error
  int ssl_error;
  int sys_errno;
};

template <class Tls, class Call>
SslStep ssl_step(Tls& tls, Call call) noexcept {
  const std::lock_guard lock(tls.turn);
  ERR_clear_error();
  errno = 0;
  SSL* ssl = tls.ssl.get();
  const int done = call(ssl);
  if (done > 0) return {done, SSL_ERROR_NONE, 0};
  SslStep step{done, SSL_get_error(ssl, done), errno};
  if (step.ssl_error == SSL_ERROR_SSL) {
    try {
      tls.failure = ssl_failure_reason(step.ssl_error, step.sys_errno);
    } catch (...) {  // no memory for the text: the errno alone says it
    }
  }
  ERR_clear_error();
  return step;
}

}  // namespace

int Socket::tls_send_all(std::string_view bytes, Deadline deadline) const noexcept {
  while (!bytes.empty()) {
    const int chunk = static_cast<int>(std::min<std::size_t>(bytes.size(), INT_MAX));
    const SslStep step =
        ssl_step(*tls_, [&](SSL* ssl) { return SSL_write(ssl, bytes.data(), chunk); });
    if (step.done > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(step.done));
    } else if (step.ssl_error == SSL_ERROR_WANT_WRITE || step.ssl_error == SSL_ERROR_WANT_READ) {
      const short events = step.ssl_error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
      if (const int error = wait_for(fd_, events, deadline); error != 0) return error;
    } else {
      return step.sys_errno != 0 ? step.sys_errno : EPROTO;
    }
  }
  return 0;
}

// Reads before it waits: the session may hold decrypted bytes the socket no longer signals.
// Once a record is in, the records already read ahead follow it into `buf`: a reply batch spans
// several records when the server answered its commands in turns, and a reader that handed out
// one record's replies at a time would keep the callers, and so their next commands, apart.
ssize_t Socket::tls_read_some(std::span<char> buf, Deadline deadline, int& error) const noexcept {
  const int want = static_cast<int>(std::min<std::size_t>(buf.size(), INT_MAX));
  for (;;) {
    const SslStep step = ssl_step(*tls_, [&](SSL* ssl) { return SSL_read(ssl, buf.data(), want); });
    if (step.done > 0) {
      const auto first = static_cast<std::size_t>(step.done);
      return static_cast<ssize_t>(first + tls_read_pending(buf.subspan(first)));
    }
    if (step.ssl_error == SSL_ERROR_WANT_READ || step.ssl_error == SSL_ERROR_WANT_WRITE) {
      const short events = step.ssl_error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
      if ((error = wait_for(fd_, events, deadline)) != 0) return -1;
      continue;
    }
    // A close, with the TLS farewell or without: the server ended the connection.
    if (step.ssl_error == SSL_ERROR_ZERO_RETURN ||
        (step.ssl_error == SSL_ERROR_SYSCALL && step.sys_errno == 0)) {
      return 0;
    }
    error = step.sys_errno != 0 ? step.sys_errno : EPROTO;
    return -1;
  }
}

bool Socket::tls_has_pending() const noexcept {
  const std::lock_guard lock(tls_->turn);
  return SSL_has_pending(tls_->ssl.get()) == 1;
}

// What the session already holds, up to buf's size, without waiting: a record it holds only in
// part may cost one more non-blocking read, and ends the loop when the rest is not there yet.
std::size_t Socket::tls_read_pending(std::span<char> buf) const noexcept {
  std::size_t got = 0;
  while (got < buf.size()) {
    const int room = static_cast<int>(std::min<std::size_t>(buf.size() - got, INT_MAX));
    if (!tls_has_pending()) break;
    const SslStep step =
        ssl_step(*tls_, [&](SSL* ssl) { return SSL_read(ssl, buf.data() + got, room); });
    if (step.done <= 0) break;  // nothing more held, or a failure the next read reports
    got += static_cast<std::size_t>(step.done);
  }
  return got;
}

// Readable does not mean closed over TLS: the server sends session tickets after the
// handshake. A peek consumes such records; only a close or stray bytes make it unusable.
bool Socket::tls_closed_by_server() const noexcept {
  char byte = 0;
  const SslStep step = ssl_step(*tls_, [&](SSL* ssl) { return SSL_peek(ssl, &byte, 1); });
  return step.done > 0 || step.ssl_error != SSL_ERROR_WANT_READ;
}

void Socket::shut_down() const noexcept { ::shutdown(fd_, SHUT_RDWR); }

Result<BlockingConnection> BlockingConnection::open(const ConnectionOptions& options,
                                                    const TlsContext* tls, Deadline deadline,
                                                    std::string where) {
  Result<Socket> socket = Socket::open(options, tls, deadline, where);
  if (!socket) return std::move(socket).failure();
  BlockingConnection c(std::move(socket).value(), std::move(where), options.command_timeout);
  const Handshake handshake(options);
  for (const std::vector<std::string_view>& argv : handshake.commands) {
    Result<ReplyPtr> r = c.command(argv, reply_by(options, deadline));
    if (!r) return std::move(r).failure();
    if (r.value()->type == REDIS_REPLY_ERROR) {
      if (acl_refusal(text(*r.value()))) {  // SELECT for a user without the right
        return error_reply_failure(*r.value(), argv[0], c.where_);
      }
      return unavailable(
          fmt::format("redis {}: {} refused: {}", c.where_, argv[0], text(*r.value())));
    }
  }
  return c;
}

Result<ReplyPtr> BlockingConnection::command(std::span<const std::string_view> argv,
                                             Deadline deadline, bool report_in_doubt) {
  const std::string_view doing = argv.empty() ? std::string_view("command") : argv[0];
  if (broken_) return failure(doing, "the connection is broken", false);
  wire_.queue(argv, true);
  wire_.take_output(batch_);
  if (const int error = socket_.send_all(batch_, deadline); error != 0) {
    return failure(doing, error == ETIMEDOUT ? "" : socket_.error_text(error), false);
  }
  std::array<char, std::size_t{16} * 1024> in;
  ReplyPtr reply;
  bool mine = false;
  for (;;) {
    switch (wire_.next(reply, mine)) {
      case Wire<bool>::Got::reply:
        return reply;
      case Wire<bool>::Got::broken:
        return failure(doing, "unreadable reply: " + wire_.error(), report_in_doubt);
      case Wire<bool>::Got::stray:
        return failure(doing, "a reply nobody asked for", report_in_doubt);
      case Wire<bool>::Got::more:
        break;
    }
    int error = 0;
    const ssize_t got = socket_.read_some(in, deadline, error);
    if (got == 0) return failure(doing, socket_.closed_text(), report_in_doubt);
    if (got < 0) {
      return failure(doing, error == ETIMEDOUT ? "" : socket_.error_text(error), report_in_doubt);
    }
    if (!wire_.feed(in.data(), static_cast<std::size_t>(got))) {
      return failure(doing, "unreadable reply: " + wire_.error(), report_in_doubt);
    }
  }
}

Result<ReplyPtr> BlockingConnection::commands(
    std::span<const std::span<const std::string_view>> batch, Deadline deadline) {
  constexpr std::string_view doing = "blocking call";
  if (broken_) return failure(doing, "the connection is broken", false);
  for (const std::span<const std::string_view> argv : batch) wire_.queue(argv, true);
  wire_.take_output(batch_);
  if (const int error = socket_.send_all(batch_, deadline); error != 0) {
    return failure(doing, error == ETIMEDOUT ? "" : socket_.error_text(error), false);
  }
  std::array<char, std::size_t{4} * 1024> in;
  ReplyPtr reply;
  bool mine = false;
  for (std::size_t left = batch.size(); left > 0;) {
    switch (wire_.next(reply, mine)) {
      case Wire<bool>::Got::reply:
        --left;
        continue;
      case Wire<bool>::Got::broken:
        return failure(doing, "unreadable reply: " + wire_.error(), false);
      case Wire<bool>::Got::stray:
        return failure(doing, "a reply nobody asked for", false);
      case Wire<bool>::Got::more:
        break;
    }
    int error = 0;
    const ssize_t got = socket_.read_some(in, deadline, error);
    if (got == 0) return failure(doing, socket_.closed_text(), false);
    if (got < 0) return failure(doing, error == ETIMEDOUT ? "" : socket_.error_text(error), false);
    if (!wire_.feed(in.data(), static_cast<std::size_t>(got))) {
      return failure(doing, "unreadable reply: " + wire_.error(), false);
    }
  }
  return reply;
}

// The connection is broken: no later command may take the reply this one did not get. An empty
// `why` is a timeout.
Failure BlockingConnection::failure(std::string_view doing, std::string_view why, bool in_doubt) {
  broken_ = true;
  wire_.fail_all([](bool, bool) {});
  Failure f = why.empty() ? unavailable(fmt::format("redis {}: {} timed out after {} ms", where_,
                                                    doing, timeout_.count()))
                          : unavailable(fmt::format("redis {}: {} failed: {}", where_, doing, why));
  return in_doubt ? reply_lost(std::move(f)) : f;
}

}  // namespace idem::redis
