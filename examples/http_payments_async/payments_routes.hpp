#pragma once
// The payments service's routes on the asynchronous guard (docs/async.md, "The async HTTP
// example"): GET /health, GET /tokens, POST /payments and GET /payments/{id}, answered as the
// blocking service answers them (examples/http_payments).

#include <boost/asio/any_io_executor.hpp>
#include <memory>

#include "http_exchange.hpp"
#include "payments_config.hpp"

namespace payments_async {

class PaymentsRoutes final : public RequestHandler {
 public:
  /// Opens the stores and creates the payments tables (blocking, before any request); throws
  /// std::exception when the database refuses or the configuration cannot be served.
  PaymentsRoutes(const boost::asio::any_io_executor& executor, const payments::Config& config);
  ~PaymentsRoutes() override;

  boost::asio::awaitable<HttpResponse> handle(const HttpRequest& request) override;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace payments_async
