// http_payments: the payments service over HTTP on 127.0.0.1 (see docs/http_payments.md).
//
//   http_payments [--port N] [--db FILE] [--pg URI] [--redis URI] [--bare] [--threads N] ...
//
// `http_payments --help` lists every option. --port 0 picks a free port. The first line on
// stdout is "listening on http://127.0.0.1:<port>".

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "command_line.hpp"
#include "file_limit.hpp"
#include "payments_app.hpp"
#include "transport/bounded_server.hpp"

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
  transport::fit_file_limit(cl.transport, "http_payments");
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
