#pragma once
// One client connection of the transport: its socket, the bytes read from it and not used yet,
// and where it stands between requests.

#include <chrono>
#include <cstddef>
#include <string>

namespace transport {

using Clock = std::chrono::steady_clock;

struct Connection {
  int fd = -1;
  std::string peer_ip;
  int peer_port = 0;
  std::string local_ip;
  int local_port = 0;

  bool in_hand = false;               // a request thread holds it (else it waits in the loop)
  std::string in;                     // read from the socket, not used yet: a request coming in
  std::size_t answered = 0;           // requests answered on this connection
  Clock::time_point waiting_since{};  // when it last started waiting for a request
  Clock::time_point request_start{};  // first byte of the request coming in; {} while idle

  // Closing: the answer is sent; unread bytes are dropped until the client stops or a bound.
  bool lingering = false;
  Clock::time_point linger_until{};
  std::size_t lingered = 0;
};

}  // namespace transport
