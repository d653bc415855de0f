#pragma once
// TLS towards the proxy's clients (listen.tls_*): the server context made from the configured
// files, and the name of a client that presented a verified certificate.

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "proxy_config.hpp"

namespace idem::proxy {

/// The listener's TLS context (TLS 1.2 and later), or nullptr when the listener is plain HTTP.
/// Throws std::runtime_error naming the field and file that could not be used.
std::unique_ptr<boost::asio::ssl::context> make_listener_tls(const ListenConfig& listen);

/// The client that completed the handshake on `ssl`, as its verified certificate names it: the
/// subject and then the issuer, each in RFC 2253 form (control characters escaped), joined by a
/// newline. Empty when the client presented no certificate or it was not verified.
std::string verified_client_name(void* ssl);

}  // namespace idem::proxy
