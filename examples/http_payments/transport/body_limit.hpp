#pragma once
// A request whose Content-Length is over the limit is answered 413 (problem+json) before any of
// its body is read, so a client announcing 300 MB costs nothing; the transport then closes the
// connection, since the body is left unread. A body sent without a length (chunked) is cut at
// the same limit as it is read.

#include <httplib.h>

#include <cstddef>

namespace transport {

void limit_bodies(httplib::Server& server, std::size_t limit);

}  // namespace transport
