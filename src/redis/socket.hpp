#pragma once
// The blocking face's bytes: a socket to one Redis server, connected within a deadline, written
// and read with poll(2) bounding each wait, plain or through a TLS session (tls.hpp) whose
// handshake, reads and writes wait the same way; and BlockingConnection, the wire (wire.hpp) on
// such a socket for one caller at a time. Internal to idem_redis.

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "connection_policy.hpp"
#include "idem/redis/client.hpp"
#include "idem/result.hpp"
#include "protocol.hpp"
#include "tls.hpp"
#include "wire.hpp"

namespace idem::redis {

/// TCP_NODELAY (a command must not wait for the previous one's acknowledgement) and, with
/// `keep_alive`, the kernel's probes after 15 s idle, 3 of them 5 s apart; both faces' sockets.
void tune_tcp(int fd, bool keep_alive) noexcept;

/// A connected socket in non-blocking mode, each wait on it bounded by poll(2) and a deadline;
/// closed when destroyed. Over TLS, one thread may write while another reads (the pipeline's
/// writer and reader): the session's calls take turns under a mutex, never held while waiting.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) noexcept : fd_(fd) {}
  Socket(Socket&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), tls_(std::move(other.tls_)) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  /// Connects to `options`' server within connect_timeout, cut to `deadline`, and with `tls`
  /// (which options.tls.enabled requires) runs the TLS handshake within the same bound. `where`
  /// names the server in messages.
  static Result<Socket> open(const ConnectionOptions& options, const TlsContext* tls,
                             Deadline deadline, std::string_view where);

  int fd() const noexcept { return fd_; }
  /// 0 when all of `bytes` went out by `deadline`, else the errno (ETIMEDOUT at the deadline).
  int send_all(std::string_view bytes, Deadline deadline) const noexcept;
  /// Waits until bytes come or `deadline` passes, then reads them: the count, 0 when the server
  /// closed the connection, -1 with `error` set (ETIMEDOUT at the deadline).
  ssize_t read_some(std::span<char> buf, Deadline deadline, int& error) const noexcept;
  /// What send_all's or read_some's `error` means: over TLS, OpenSSL's reason for a protocol
  /// failure (an alert, such as a missing client certificate); else strerror.
  std::string error_text(int error) const;
  /// "connection closed by the server", and why it may have over TLS.
  std::string closed_text() const;
  /// An idle connection has nothing to read: readable means the server closed it.
  bool closed_by_server() const noexcept;
  /// Ends the traffic both ways: a thread blocked on the socket returns at once.
  void shut_down() const noexcept;

 private:
  // A TLS session on the socket; its calls take turns.
  struct Tls {
    SslPtr ssl;
    std::mutex turn;
    std::string failure;  // OpenSSL's reason for the last protocol failure (EPROTO)
  };
  Result<Socket> handshake(const TlsContext& context, const std::string& host, Deadline deadline,
                           std::string_view where) &&;
  int tls_send_all(std::string_view bytes, Deadline deadline) const noexcept;
  ssize_t tls_read_some(std::span<char> buf, Deadline deadline, int& error) const noexcept;
  bool tls_closed_by_server() const noexcept;
  bool tls_has_pending() const noexcept;
  std::size_t tls_read_pending(std::span<char> buf) const noexcept;

  int fd_ = -1;
  std::unique_ptr<Tls> tls_;  // null: plain TCP or a unix socket
};

/// A connection for one caller at a time (a pooled one): its socket and its wire.
class BlockingConnection {
 public:
  /// A connection to `options`' server (over TLS with `tls`, which options.tls.enabled
  /// requires) that has run its handshake (AUTH, SELECT), within
  /// connect_timeout + command_timeout, each cut to `deadline`.
  static Result<BlockingConnection> open(const ConnectionOptions& options, const TlsContext* tls,
                                         Deadline deadline, std::string where);

  /// One command, its reply due by `deadline`. Error replies come back as replies; I/O
  /// failures and timeouts are errc::store_unavailable and break the connection.
  /// `report_in_doubt`: such a failure once the command was written is errc::outcome_unknown.
  Result<ReplyPtr> command(std::span<const std::string_view> argv, Deadline deadline,
                           bool report_in_doubt = false);

  /// Several commands in one write, their replies all due by `deadline`: the last one's reply
  /// (error replies too), or a failure as command()'s.
  Result<ReplyPtr> commands(std::span<const std::span<const std::string_view>> batch,
                            Deadline deadline);

  bool broken() const noexcept { return broken_; }
  const Socket& socket() const noexcept { return socket_; }
  /// The socket, for a connection whose traffic continues elsewhere (the pipeline's).
  Socket release() && { return std::move(socket_); }

 private:
  BlockingConnection(Socket socket, std::string where, std::chrono::milliseconds timeout)
      : socket_(std::move(socket)), where_(std::move(where)), timeout_(timeout) {}
  Failure failure(std::string_view doing, std::string_view why, bool in_doubt);

  Socket socket_;
  Wire<bool> wire_;
  std::string batch_;
  std::string where_;
  std::chrono::milliseconds timeout_;
  bool broken_ = false;
};

}  // namespace idem::redis
