// http_payments: the payments service over HTTP on 127.0.0.1 (see docs/http_payments.md).
//
//   http_payments [--port N] [--db FILE] [--pg URI] [--redis URI] [--bare] [--threads N] ...
//
// `http_payments --help` lists every option. --port 0 picks a free port. The first line on
// stdout is "listening on http://127.0.0.1:<port>".

#include <sys/resource.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "command_line.hpp"
#include "payments_app.hpp"
#include "transport/bounded_server.hpp"

namespace {

// Each connection is a file descriptor: raise the soft limit towards max_connections, and
// lower max_connections to what the hard limit leaves (with room for the database's files).
void fit_file_limit(transport::TransportSettings& t) {
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
                 "http_payments: %zu connections need more file descriptors than the "
                 "limit of %llu; serving at most %llu\n",
                 t.max_connections, static_cast<unsigned long long>(limit.rlim_cur),
                 static_cast<unsigned long long>(fits));
    t.max_connections = fits;
  }
}

}  // namespace

int main(int argc, char** argv) {
  payments::CommandLine cl = payments::parse_command_line({argv + 1, argv + argc});
  if (cl.help) {
    std::fputs(payments::kUsage, stdout);
    return 0;
  }
  if (!cl.error.empty()) {
    std::fprintf(stderr, "http_payments: %s\n%s", cl.error.c_str(), payments::kUsage);
    return 2;
  }
  fit_file_limit(cl.transport);
  try {
    payments::App app(cl.service);
    transport::BoundedServer server(cl.transport);
    app.mount(server);
    const int port = server.bind("127.0.0.1", cl.port);
    if (port < 0) {
      std::fprintf(stderr, "http_payments: cannot listen on 127.0.0.1:%d\n", cl.port);
      return 1;
    }
    std::printf("listening on http://127.0.0.1:%d\n", port);
    std::fflush(stdout);
    return server.listen_after_bind() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http_payments: %s\n", e.what());
    return 1;
  }
}
