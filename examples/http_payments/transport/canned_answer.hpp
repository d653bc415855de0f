#pragma once
// The bytes of a Refusal (refusal.hpp): a whole HTTP/1.1 answer with a Date, an RFC 9457 problem
// body and Connection: close.

#include <string>

#include "transport/refusal.hpp"

namespace transport {

/// The answer: status line, headers, problem+json body.
std::string canned_answer(const Refusal& refusal);

/// Writes canned_answer(refusal) to the socket if it takes it now; never waits (best effort: the
/// connection is closed right after).
void send_canned_answer(int fd, const Refusal& refusal);

}  // namespace transport
