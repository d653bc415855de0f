#pragma once
// The admin listener, apart from the proxied port so that it never shadows an upstream path:
// GET /health answers 200 {"status":"ok"} when the store answers, else 503 with the reason;
// GET /metrics answers the Prometheus text. Anything else is 404 (405 for another method).
// One request per connection, each bounded: 5 s to send it, 5 s to take the answer.

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>

#include "any_store.hpp"
#include "proxy_metrics.hpp"

namespace idem::proxy {

class AdminServer {
 public:
  /// `store` and `metrics` must outlive the server's connections.
  AdminServer(boost::asio::io_context& io, AnyStore& store, const ProxyMetrics& metrics);
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  /// Binds address:port (port 0: a free one). The port, or -1 with `error` set.
  int bind(const std::string& address, int port, std::string& error);
  void start();
  /// Stops accepting (connections in hand finish within their bounds).
  void stop();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace idem::proxy
