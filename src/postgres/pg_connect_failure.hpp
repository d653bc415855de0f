#pragma once
// Why a libpq connect failed, in words that name the cause when it is one of TLS: libpq's own
// messages do not always say which setting or which side is at fault.

#include <libpq-fe.h>

#include <chrono>
#include <string>

namespace idem::postgres::detail {

/// libpq's message `why` for the failed connect `conn`, prefixed with what it means when it is a
/// TLS refusal (wrong host name, wrong authority, expired certificate, a server without TLS, a
/// client certificate refused, an unusable file). A certificate the chain check refused is
/// looked at once more, by a handshake of its own within `deadline`, to say why.
std::string explain_connect_failure(PGconn* conn, const std::string& why,
                                    std::chrono::steady_clock::time_point deadline);

}  // namespace idem::postgres::detail
