#pragma once
// One HTTP request and its answer as the payments routes see them, apart from the server that
// reads and writes them (http_server.cpp, on Boost.Beast): the routes' translation unit never
// instantiates Beast.

#include <boost/asio/awaitable.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/http/stored_response.hpp"

namespace payments_async {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query
  Headers headers;
  std::string body;

  /// The first value of header `name` (any case), or empty.
  std::string_view header(std::string_view name) const noexcept {
    for (const auto& [n, v] : headers) {
      if (idem::http::equals_ignoring_case(n, name)) return v;
    }
    return {};
  }
  /// Every value of header `name` (any case), in the order received.
  std::vector<std::string_view> values(std::string_view name) const {
    std::vector<std::string_view> out;
    for (const auto& [n, v] : headers) {
      if (idem::http::equals_ignoring_case(n, name)) out.emplace_back(v);
    }
    return out;
  }
};

struct HttpResponse {
  int status = 200;
  Headers headers;  // Content-Type among them
  std::string body;
};

/// What the server calls for each whole request, on the connection's strand. The request stays
/// alive until the awaitable completes. An exception is answered 500.
class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  virtual boost::asio::awaitable<HttpResponse> handle(const HttpRequest& request) = 0;
};

}  // namespace payments_async
