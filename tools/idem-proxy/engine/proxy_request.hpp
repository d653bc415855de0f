#pragma once
// One client request as the proxy's routes, identity and forward see it, apart from the server
// that read it (client_server.cpp): those translation units never instantiate Beast.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/http/stored_response.hpp"

namespace idem::proxy {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct ProxyRequest {
  std::string method;     // "POST", ...
  std::string target;     // as received: path and query
  std::string path;       // the target without its query
  std::string query;      // after '?', without it; empty when none
  unsigned version = 11;  // 10 or 11
  Headers headers;        // in the order received, framing fields included
  std::string body;
  /// The verified TLS client certificate's subject and issuer (listener_tls.hpp), when the
  /// client presented one.
  std::string client_subject;

  /// Every value of header `name` (any case), in the order received.
  std::vector<std::string_view> values(std::string_view name) const {
    std::vector<std::string_view> out;
    for (const auto& [n, v] : headers) {
      if (idem::http::equals_ignoring_case(n, name)) out.emplace_back(v);
    }
    return out;
  }
};

}  // namespace idem::proxy
