#pragma once
// Just enough of an HTTP/1.1 request head for the transport to decide when a request is in hand:
// where the head ends, and how much body to wait for before a thread takes it. cpp-httplib
// parses the request itself afterwards.

#include <cstddef>
#include <optional>
#include <string_view>

namespace transport {

/// Where the head at the start of `bytes` ends (just past its blank line), or npos while the
/// blank line has not come.
std::size_t head_end(std::string_view bytes);

/// The value of the first header `name` (ASCII case-insensitive) in a complete head, without
/// surrounding blanks; nullopt if there is none.
std::optional<std::string_view> header_value(std::string_view head, std::string_view name);

/// How many bytes of body to have in hand before a thread takes the request: its Content-Length
/// when that is at most `at_most`, the request does not expect a 100 Continue first and has no
/// Transfer-Encoding; otherwise 0 (the thread reads the body, under the request's deadline).
std::size_t body_to_wait_for(std::string_view head, std::size_t at_most);

}  // namespace transport
