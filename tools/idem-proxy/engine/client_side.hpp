#pragma once
// What the proxy's request handler sees of the client connection it answers on, apart from the
// server that owns it (client_server.cpp).

#include <boost/asio/awaitable.hpp>
#include <string_view>

#include "proxy_request.hpp"

namespace idem::proxy {

/// The connection a request came on: its answer is written here, whole or in pieces.
class ClientSide {
 public:
  virtual ~ClientSide() = default;
  /// Writes bytes of the answer, each write bounded by limits.write_timeout; false when the
  /// client did not take them (the connection is then closed after the handler returns).
  virtual boost::asio::awaitable<bool> write(std::string_view bytes) = 0;
  /// The request's HTTP version (10 or 11).
  virtual unsigned version() const noexcept = 0;
  /// Whether the connection stays open after this answer (the answer says Connection: close
  /// otherwise).
  virtual bool keep_alive() const noexcept = 0;
  /// The answer's end is the connection's end (a streamed body without chunked framing).
  virtual void close_after() noexcept = 0;
};

/// What the server calls for each request it read whole.
class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  /// Answers `request` on `client`; the request outlives the awaitable. An exception before
  /// anything was written is answered 500 (problem+json).
  virtual boost::asio::awaitable<void> handle(const ProxyRequest& request, ClientSide& client) = 0;
};

}  // namespace idem::proxy
