#pragma once
// An httplib::Server whose connections cost bounded resources whatever clients do (see
// docs/http_payments.md, "Transport settings"):
//  - connections wait for a request in a ConnectionLoop, not in a request thread: idle
//    keep-alive connections and slow senders hold no thread;
//  - a request must arrive whole, head and body, within request_timeout of its first byte;
//  - a body announced over body_limit is answered 413 unread; at most max_connections are open;
//  - answers go out in one write, with TCP_NODELAY on.
// Routes are mounted as on any httplib::Server; cpp-httplib still parses and routes.

#include <httplib.h>

#include <cstddef>
#include <string>

#include "transport/connection_loop.hpp"
#include "transport/transport_settings.hpp"

namespace transport {

class BoundedServer : public httplib::Server {
 public:
  explicit BoundedServer(const TransportSettings& settings);
  ~BoundedServer() override;

  /// Binds host:port (port 0: a free one) with settings.listen_backlog. The port, or -1.
  int bind(const std::string& host, int port);
  /// Closes every connection and stops the request threads (after stop() and the end of
  /// listen_after_bind(); the destructor calls it too).
  void shut_down() { loop_.stop(); }

  std::size_t open_connections() const { return loop_.open_connections(); }

 private:
  // Called by httplib's accept loop for each new socket (on the accept thread: see the
  // constructor): hands it to the loop, or answers 503 when max_connections are open.
  bool process_and_close_socket(socket_t sock) override;
  // On a request thread, once the connection's request is in hand: one request.
  ConnectionLoop::After answer(Connection& c);

  const TransportSettings settings_;
  ConnectionLoop loop_;
};

}  // namespace transport
