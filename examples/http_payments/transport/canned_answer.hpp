#pragma once
// Answers the transport sends on its own, outside any route: a whole HTTP/1.1 response with an
// RFC 9457 problem body and Connection: close, written without blocking (best effort: the
// connection is closed right after).

#include <string>
#include <string_view>

namespace transport {

/// The bytes of the answer: status line, headers, problem+json body.
std::string canned_answer(int status, std::string_view reason, std::string_view type,
                          std::string_view detail);

/// Writes canned_answer(...) to the socket if it takes it now; never waits.
void send_canned_answer(int fd, int status, std::string_view reason, std::string_view type,
                        std::string_view detail);

}  // namespace transport
