#pragma once
// What a guarded request is known by: its principal (the tenant its keys belong to) and its
// payload, the bytes the key is bound to (docs/proxy.md, "What it does").

#include <string>
#include <vector>

#include "proxy_config.hpp"
#include "proxy_request.hpp"

namespace idem::proxy {

/// The request's principal under `config`: "" for none; for a header, "h:" and the SHA-256 of
/// its value in hex (the value itself is never kept); for a client certificate, "c:" and the
/// certificate's subject, hashed likewise. A header that is absent gives "" (the shared key space).
std::string principal_of(const ProxyRequest& request, const PrincipalConfig& config);

/// The payload the key is bound to: method, path, query, the values of `headers` (each header
/// name once, its values in order) and the body, each length-prefixed so that no two different
/// requests give the same bytes.
std::string payload_of(const ProxyRequest& request, const std::vector<std::string>& headers);

}  // namespace idem::proxy
