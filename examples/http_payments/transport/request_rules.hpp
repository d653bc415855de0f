#pragma once
// How both payments servers read a request with Boost.Beast's parser, and the rules they add to
// what it enforces. Beast's request_parser frames the request (RFC 9112: Content-Length digits
// only and never two that differ, chunked sizes, field syntax, no control bytes in values) and
// applies the head and body limits; once the head is parsed, head_refusal() refuses what Beast
// lets through: an HTTP/1.1 request without exactly one Host, a transfer coding other than
// chunked (501) or chunked not last, Transfer-Encoding in HTTP/1.0, and a field value the
// library's rule refuses (idem::http::valid_field_value). Every refusal closes the connection.

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/system/error_code.hpp>
#include <optional>

#include "transport/refusal.hpp"
#include "transport/transport_settings.hpp"

namespace transport {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

/// A parser for one request with the settings' head and body limits.
void limit(RequestParser& parser, const TransportSettings& settings);

/// What a parser error is answered (400, 413 over the body limit, 431 over the head limit), or
/// nullopt when there is no one to answer: the client ended the connection, or the read failed.
std::optional<Refusal> refusal_for(const boost::system::error_code& error,
                                   const TransportSettings& settings);

/// Once the parser has the head: the refusal of a head Beast accepted, or nullopt.
std::optional<Refusal> head_refusal(const RequestParser& parser);

/// The head asks for 100 Continue and its body has not come yet.
bool expects_continue(const RequestParser& parser);

}  // namespace transport
