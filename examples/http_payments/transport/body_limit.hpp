#pragma once
// A request whose Content-Length is over the limit is answered 413 (problem+json) before any of
// its body is read, so a client announcing 300 MB costs nothing; the transport then closes the
// connection, since the body is left unread. A body sent without a length (chunked) is cut by
// the transport's RequestStream a little past the limit as it is read (cpp-httplib 0.11 applies
// its payload limit to Content-Length only).

#include <httplib.h>

#include <cstddef>

namespace transport {

void limit_bodies(httplib::Server& server, std::size_t limit);

}  // namespace transport
