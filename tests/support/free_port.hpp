#pragma once
// Loopback ports for tests: free_port(), a TCP port on 127.0.0.1 that nothing listens on right now
// (bound to port 0, read back, closed), an address for a server a test starts or one a client
// finds down; listen_on_loopback(), a listening socket at a port the kernel picks.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace idem::testing {

/// The port, or 0 when no socket could be bound.
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
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
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
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
