#pragma once
// The proxy's client-facing HTTP/1.1 server on Boost.Beast: every connection is one coroutine
// on a strand of the io_context, and every wait on a client is bounded (ClientLimits):
//  - an idle keep-alive connection closes after keep_alive_timeout without a byte;
//  - a request's head and body must arrive within request_timeout of its first byte (else 408);
//    a head over head_bytes is 431, a body over body_bytes 413 (a Content-Length over it before
//    any of the body is read), never forwarded;
//  - framing that two parsers could read two ways is 400 and closes the connection: both
//    Content-Length and Transfer-Encoding, two Content-Length fields, an obs-fold (a field line
//    continued on the next), and what the payments servers refuse (transport/request_rules.hpp);
//  - each write of an answer must be taken by the client within write_timeout;
//  - at most max_connections are open; one more is answered 503 and closed at once;
//  - after keep_alive_requests answers a connection closes.
// Over TLS (a context given), the handshake is bounded by request_timeout and the verified
// client certificate's name goes with each request (ProxyRequest::client_subject).
// shut_down() stops accepting, closes idle connections at once and lets those with a request in
// hand finish (Connection: close), within a bound.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "client_side.hpp"
#include "proxy_config.hpp"

namespace idem::proxy {

class ClientServer {
 public:
  /// `handler` (and `tls`, when given) must outlive the server and every connection (until
  /// shut_down's `done`). Without `tls` the listener speaks plain HTTP.
  ClientServer(boost::asio::io_context& io, const ClientLimits& limits, RequestHandler& handler,
               boost::asio::ssl::context* tls = nullptr);
  ~ClientServer();
  ClientServer(const ClientServer&) = delete;
  ClientServer& operator=(const ClientServer&) = delete;

  /// Binds address:port (port 0: a free one). The port, or -1 with `error` set.
  int bind(const std::string& address, int port, std::string& error);
  /// Accepts connections on the io_context (after bind).
  void start();
  /// Stops accepting and closes idle connections; `done` runs (once, on an io_context thread)
  /// when the last connection has closed, or after `drain` with `drained` false.
  void shut_down(std::chrono::milliseconds drain, std::function<void(bool drained)> done);
  /// Requests being answered now.
  std::size_t in_hand() const noexcept;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace idem::proxy
