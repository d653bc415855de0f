#pragma once
// The payments service's HTTP/1.1 server: connections cost bounded resources whatever clients do
// (see docs/http_payments.md, "Transport settings"):
//  - requests are parsed by Boost.Beast's request_parser as their bytes come in, on the
//    ConnectionLoop's threads, under the framing rules of request_rules.hpp; a route runs only
//    for a whole request, head and body, so idle, slow and stalled clients hold no thread;
//  - a request must arrive whole within request_timeout of its first byte (else 408);
//  - a head over head_limit is 431, a body over body_limit 413 (from its Content-Length, unread);
//  - at most max_connections are open; one more is answered 503 and closed;
//  - answers carry a Date, go out in one write with TCP_NODELAY on, and a client that does not
//    take one within write_timeout is cut off.
// Routes are mounted on it as on a Router (router.hpp).

#include <atomic>
#include <cstddef>
#include <string>

#include "transport/connection_loop.hpp"
#include "transport/router.hpp"
#include "transport/transport_settings.hpp"

namespace transport {

class BoundedServer : public Router {
 public:
  explicit BoundedServer(const TransportSettings& settings);
  ~BoundedServer();
  BoundedServer(const BoundedServer&) = delete;
  BoundedServer& operator=(const BoundedServer&) = delete;

  /// Binds host:port (port 0: a free one) with settings.listen_backlog. The port, or -1.
  int bind(const std::string& host, int port);
  /// Accepts connections until stop(); false when the server is not bound.
  bool listen_after_bind();
  /// Makes listen_after_bind() return (from any thread).
  void stop();
  bool is_running() const { return running_.load(); }
  /// Closes every connection and stops the loop's threads (after stop() and the end of
  /// listen_after_bind(); the destructor calls it too).
  void shut_down() { loop_.stop(); }

  std::size_t open_connections() const { return loop_.open_connections(); }

 private:
  // On a loop thread, once the connection's request is whole: its answer into c.out.
  bool answer(Connection& c);

  const TransportSettings settings_;
  ConnectionLoop loop_;
  int listener_ = -1;
  int wake_ = -1;  // eventfd: stop() wakes the accepting thread
  std::atomic<bool> running_{false};
  std::atomic<bool> stopped_{false};
};

}  // namespace transport
