#pragma once
// A TCP port on 127.0.0.1 that nothing listens on right now (bound to port 0, read back,
// closed): an address for a server a test starts, or one a client finds down.

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

}  // namespace idem::testing
