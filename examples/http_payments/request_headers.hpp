#pragma once
// The demo's authentication, apart from httplib so that tests and fuzz targets can include it
// alone: Authorization: Bearer <name>. (The Idempotency-Key header is idem/http.hpp's.)

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "idem/http/stored_response.hpp"

namespace payments {

/// Authorization: Bearer <name> is the demo's whole authentication: the name is the principal.
/// The scheme is matched without regard to case (RFC 9110: auth-scheme is case-insensitive), and
/// spaces between it and the name are skipped. A name holding anything but visible ASCII (a
/// space, a control byte such as NUL) is no name: never the part of it before that byte.
inline std::optional<std::string> bearer_principal(std::string_view authorization) {
  constexpr std::string_view kBearer = "Bearer";
  if (authorization.size() <= kBearer.size() || authorization[kBearer.size()] != ' ' ||
      !idem::http::equals_ignoring_case(authorization.substr(0, kBearer.size()), kBearer)) {
    return std::nullopt;
  }
  std::string_view name = authorization.substr(kBearer.size());
  while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
  if (name.empty()) return std::nullopt;
  for (const char c : name) {
    if (c <= ' ' || c > '~') return std::nullopt;
  }
  return std::string(name);
}

}  // namespace payments
