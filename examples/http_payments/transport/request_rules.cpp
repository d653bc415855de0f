#include "transport/request_rules.hpp"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <cstdint>
#include <limits>
#include <string>

#include "idem/http/field_value.hpp"

namespace transport {

namespace http = boost::beast::http;

namespace {

Refusal bad_request(std::string detail) {
  return {400, "Bad Request", "bad_request", std::move(detail)};
}

// RFC 9112 section 6.1: a server that does not understand a transfer coding answers 501; one
// whose final coding is not chunked cannot tell where the body ends (section 6.3): 400.
std::optional<Refusal> transfer_coding_refusal(const RequestParser& parser) {
  const auto& head = parser.get();
  if (head.count(http::field::transfer_encoding) == 0) return std::nullopt;
  if (head.version() < 11) {
    return bad_request("Transfer-Encoding in an HTTP/1.0 request: its framing cannot be trusted");
  }
  const auto value = head[http::field::transfer_encoding];
  int codings = 0;
  int chunked = 0;
  for (const auto& coding : http::ext_list{value}) {
    ++codings;
    if (!boost::beast::iequals(coding.first, "chunked")) {
      return Refusal{501, "Not Implemented", "transfer_coding_not_implemented",
                     "the transfer coding '" + std::string(coding.first) +
                         "' is not implemented; chunked is the only one"};
    }
    ++chunked;
  }
  if (codings == 0 || chunked != 1 || !parser.chunked()) {
    return bad_request("Transfer-Encoding must be chunked, once, as the final coding");
  }
  return std::nullopt;
}

}  // namespace

void limit(RequestParser& parser, const TransportSettings& settings) {
  parser.header_limit(static_cast<std::uint32_t>(
      std::min<std::size_t>(settings.head_limit, std::numeric_limits<std::uint32_t>::max())));
  parser.body_limit(static_cast<std::uint64_t>(settings.body_limit));
}

std::optional<Refusal> refusal_for(const boost::system::error_code& error,
                                   const TransportSettings& settings) {
  if (error == http::error::header_limit) {
    return Refusal{
        431, "Request Header Fields Too Large", "head_too_large",
        "the request line and headers exceed " + std::to_string(settings.head_limit) + " bytes"};
  }
  if (error == http::error::body_limit) {
    return Refusal{413, "Payload Too Large", "body_too_large",
                   "the body may hold at most " + std::to_string(settings.body_limit) + " bytes"};
  }
  if (error.category() == http::make_error_code(http::error::end_of_stream).category() &&
      error != http::error::end_of_stream && error != http::error::partial_message) {
    return bad_request("the request is not valid HTTP/1.1 (" + error.message() + ")");
  }
  return std::nullopt;
}

std::optional<Refusal> head_refusal(const RequestParser& parser) {
  const auto& head = parser.get();
  if (head.version() != 10 && head.version() != 11) {
    return Refusal{505, "HTTP Version Not Supported", "http_version_not_supported",
                   "HTTP/1.0 and HTTP/1.1 are served"};
  }
  // RFC 9112 section 3.2.
  const std::size_t hosts = head.count(http::field::host);
  if (hosts > 1 || (head.version() == 11 && hosts == 0)) {
    return bad_request("an HTTP/1.1 request needs exactly one Host field");
  }
  for (const auto& field : head) {
    if (!idem::http::valid_field_value(field.value())) {
      return bad_request("the value of " + std::string(field.name_string()) +
                         " holds a control character");
    }
  }
  return transfer_coding_refusal(parser);
}

bool expects_continue(const RequestParser& parser) {
  return !parser.is_done() &&
         boost::beast::iequals(parser.get()[http::field::expect], "100-continue");
}

}  // namespace transport
