#pragma once
// Which header fields belong to one connection rather than to the message (RFC 9110 section
// 7.6.1): the proxy neither forwards nor records them.

#include <string_view>

#include "proxy_request.hpp"

namespace idem::proxy {

/// The fields of `headers` that travel end to end: without Connection and the fields it names,
/// Keep-Alive, Proxy-*, TE, Trailer, Transfer-Encoding, Upgrade, and without Content-Length and
/// Date, which whoever sends the message next writes anew.
Headers end_to_end(const Headers& headers);

/// `headers` without every field named `name` (any case).
Headers without(Headers headers, std::string_view name);

}  // namespace idem::proxy
