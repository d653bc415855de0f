#pragma once
// Loopback ports for tests: free_port(), a TCP port on 127.0.0.1 that nothing listens on right now
// (bound to port 0, read back, closed), an address for a server a test starts or one a client
// finds down; restartable_server_port(), one for a server the test stops and starts again on its
// port; listen_on_loopback(), a listening socket at a port the kernel picks.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <random>

namespace idem::testing {

/// 127.0.0.1:`port` (0: the kernel picks one at bind).
inline sockaddr_in loopback_address(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  return addr;
}

/// The port, or 0 when no socket could be bound.
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr = loopback_address(0);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

/// A free port below the kernel's ephemeral range (net.ipv4.ip_local_port_range), for a server
/// that a test stops and starts again on the same port. free_port()'s ports come from that
/// range, so while the server is down one could become the local port of an outgoing
/// connection (established or in TIME_WAIT), and the restarted server could not bind it.
/// free_port() when no such port is found.
inline int restartable_server_port() {
  int low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low;
  if (low <= 11000) return free_port();
  std::mt19937 pick{std::random_device{}()};
  std::uniform_int_distribution<int> ports(10000, low - 1);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = ports(pick);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) break;
    sockaddr_in addr = loopback_address(port);
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (free) return port;
  }
  return free_port();
}

/// A socket listening on 127.0.0.1 (the caller closes `fd`), and its port.
struct LoopbackListener {
  int fd = -1;  // -1: it could not listen
  int port = 0;
};

inline LoopbackListener listen_on_loopback(int backlog) {
  LoopbackListener out;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return out;
  sockaddr_in addr = loopback_address(0);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return out;
  }
  out.fd = fd;
  out.port = ntohs(addr.sin_port);
  return out;
}

}  // namespace idem::testing
