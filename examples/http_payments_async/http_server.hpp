#pragma once
// The asynchronous payments service's HTTP/1.1 server on Boost.Beast, with coroutines: every
// connection is one coroutine on a strand of the io_context, and every wait on a client is
// bounded (transport::TransportSettings, the blocking server's settings):
//  - an idle keep-alive connection closes after keep_alive_timeout without a byte;
//  - a request must arrive whole, head and body, within request_timeout of its first byte
//    (else 408); a head over head_limit is 431, a body over body_limit 413 (a Content-Length
//    over it before any of the body is read; a chunked body as soon as it passes it);
//  - an answer must be taken by the client within write_timeout;
//  - at most max_connections are open; one more is answered 503 and closed at once;
//  - after keep_alive_requests answers a connection closes.
// shut_down() stops accepting, closes idle connections at once and lets those being answered
// finish (Connection: close), within a bound. Beast is instantiated in http_server.cpp alone.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "http_exchange.hpp"
#include "transport/transport_settings.hpp"

namespace payments_async {

class HttpServer {
 public:
  /// `handler` must outlive the server and every connection (until shut_down's `done`).
  HttpServer(boost::asio::io_context& io, const transport::TransportSettings& settings,
             RequestHandler& handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Binds host:port (port 0: a free one) with settings.listen_backlog. The port, or -1.
  int bind(const std::string& host, int port);
  /// Accepts connections on the io_context (after bind).
  void start();
  /// Stops accepting and closes idle connections; `done` runs (once, on an io_context thread)
  /// when the last connection has closed, or after `drain` with `drained` false.
  void shut_down(std::chrono::milliseconds drain, std::function<void(bool drained)> done);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace payments_async
