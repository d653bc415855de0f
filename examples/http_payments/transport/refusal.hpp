#pragma once
// An answer the transport gives on its own, outside any route, and closes the connection after:
// a status and an RFC 9457 problem+json body (canned_answer.hpp writes it). Both payments
// servers, the blocking one and the asynchronous one, refuse with these.

#include <string>
#include <string_view>

#include "transport/transport_settings.hpp"

namespace transport {

struct Refusal {
  int status = 400;
  std::string_view reason;  // the status's reason phrase, also the problem's title
  std::string_view type;    // the problem's name: its type is urn:idem:problem:<type>
  std::string detail;       // what was wrong, for the client
};

/// 408: the request did not arrive whole within settings.request_timeout of its first byte.
Refusal timeout_refusal(const TransportSettings& settings);
/// 503: settings.max_connections are open.
Refusal busy_refusal(const TransportSettings& settings);

}  // namespace transport
