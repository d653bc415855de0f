#pragma once
// Each connection is a file descriptor: fit_file_limit() raises the soft limit towards
// max_connections, and lowers max_connections to what the hard limit leaves (with room for the
// database's files). Shared by the blocking and the asynchronous servers.

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>

#include "transport/transport_settings.hpp"

namespace transport {

inline void fit_file_limit(TransportSettings& t, const char* program) {
  constexpr rlim_t kReserve = 64;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t wanted = t.max_connections + kReserve;
  if (limit.rlim_cur < wanted) {
    limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, limit.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  if (limit.rlim_cur < wanted) {
    const rlim_t fits = limit.rlim_cur > 2 * kReserve ? limit.rlim_cur - kReserve : kReserve;
    std::fprintf(stderr,
                 "%s: %zu connections need more file descriptors than the limit of %llu; "
                 "serving at most %llu\n",
                 program, t.max_connections, static_cast<unsigned long long>(limit.rlim_cur),
                 static_cast<unsigned long long>(fits));
    t.max_connections = fits;
  }
}

}  // namespace transport
