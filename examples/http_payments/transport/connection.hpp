#pragma once
// One client connection of the transport: its socket, the bytes read from it and not parsed yet,
// the request being read, an answer the socket has not taken whole yet, and where it stands
// between requests.

#include <chrono>
#include <cstddef>
#include <string>

#include "transport/request_reader.hpp"
#include "transport/transport_settings.hpp"

namespace transport {

using Clock = std::chrono::steady_clock;

struct Connection {
  explicit Connection(const TransportSettings& settings) : reader(settings) {}

  int fd = -1;
  std::string peer_ip;
  int peer_port = 0;
  std::string local_ip;
  int local_port = 0;

  bool in_hand = false;               // a thread holds it (else it waits in the epoll set)
  std::string in;                     // read from the socket, not parsed yet
  RequestReader reader;               // the request coming in
  std::size_t answered = 0;           // requests answered on this connection
  Clock::time_point waiting_since{};  // when it last started waiting for a request
  Clock::time_point request_start{};  // first byte of the request coming in; {} while idle

  // Writing: bytes of an answer (or of a 100 Continue) the socket has not taken yet.
  std::string out;
  std::size_t out_sent = 0;
  bool close_after_out = false;  // the answer is the connection's last
  bool interim_out = false;      // a 100 Continue: the request is still coming in
  Clock::time_point write_deadline{};

  // Closing: the last answer is sent; unread bytes are dropped until the client stops or a bound.
  bool lingering = false;
  Clock::time_point linger_until{};
  std::size_t lingered = 0;
};

}  // namespace transport
