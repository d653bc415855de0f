#pragma once
// ConnectionOptions::ignore_sigpipe for every Redis client of the library, blocking or not:
// hiredis writes with write(2), without MSG_NOSIGNAL, so a write to a connection the server has
// closed raises SIGPIPE, whose default action ends the process.

#include <csignal>

namespace idem::redis {

/// Sets SIGPIPE to SIG_IGN if it is at SIG_DFL; a handler the application installed stays.
inline void ignore_sigpipe_if_default() noexcept {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    std::signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace idem::redis
