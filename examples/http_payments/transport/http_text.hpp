#pragma once
// The texts of an answer's head that both payments servers write: the Date field (RFC 9110
// section 6.6.1 asks an origin server with a clock to send it on every answer) and the reason
// phrase of a status.

#include <string>
#include <string_view>

namespace transport {

/// Now as an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"); formatted once a second a thread.
std::string http_date();

/// The reason phrase of `status` ("Not Found"), or "Unknown" for a status without one.
std::string_view reason_phrase(int status);

}  // namespace transport
