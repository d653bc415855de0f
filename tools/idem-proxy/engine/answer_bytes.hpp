#pragma once
// The bytes the proxy writes: answers to clients (whole, or a head before a streamed body) and
// requests to the upstream. Field values come from Beast's parsers, which refuse CR, LF and NUL.

#include <cstdint>
#include <string>
#include <string_view>

#include "idem/http/stored_response.hpp"
#include "proxy_request.hpp"

namespace idem::proxy {

/// How an answer's body is delimited.
enum class Framing : std::uint8_t {
  length,   // Content-Length (none for 1xx, 204 and 304, which have no body)
  chunked,  // Transfer-Encoding: chunked (HTTP/1.1 clients)
  close,    // the connection's end (HTTP/1.0 clients of a streamed body)
};

/// A status line, `headers`, Date, the framing field and Connection, then the blank line.
/// `length` is the body's size under Framing::length.
std::string answer_head(int status, const Headers& headers, unsigned version, bool keep_alive,
                        Framing framing, std::uint64_t length);

/// A whole answer: answer_head under Framing::length, then the body.
std::string whole_answer(const idem::http::StoredResponse& answer, unsigned version,
                         bool keep_alive);

/// One chunk of a chunked body (nothing for an empty piece, which would end it).
std::string chunk(std::string_view piece);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

/// The request as the upstream gets it: HTTP/1.1, the client's end-to-end fields (Host kept),
/// `extra` fields, Content-Length when there is a body or the client framed one, then the body.
std::string upstream_request(const ProxyRequest& request, const Headers& extra);

/// Whether a status's answer carries no body (1xx, 204, 304).
constexpr bool bodiless(int status) noexcept {
  return status < 200 || status == 204 || status == 304;
}

}  // namespace idem::proxy
