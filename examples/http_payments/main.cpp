// http_payments: the payments service over HTTP on 127.0.0.1 (see docs/http_payments.md).
//
//   http_payments [--port N] [--db FILE] [--pg URI] [--redis URI] [--prefix P] [--lease-ms N]
//                 [--delay-ms N]
//
// --port 0 picks a free port. The first line on stdout is "listening on http://127.0.0.1:<port>".

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "payments_service.hpp"

int main(int argc, char** argv) {
  payments::Config config;
  int port = 8080;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "http_payments: %s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--port") {
      port = std::stoi(value());
    } else if (arg == "--db") {
      config.sqlite_path = value();
    } else if (arg == "--pg") {
      config.pg_uri = value();
    } else if (arg == "--redis") {
      config.redis_uri = value();
    } else if (arg == "--prefix") {
      config.prefix = value();
    } else if (arg == "--lease-ms") {
      config.gateway_lease = std::chrono::milliseconds{std::stoi(value())};
    } else if (arg == "--delay-ms") {
      config.handler_delay = std::chrono::milliseconds{std::stoi(value())};
    } else {
      std::fprintf(stderr,
                   "usage: http_payments [--port N] [--db FILE] [--pg URI] [--redis URI] "
                   "[--prefix P] [--lease-ms N] [--delay-ms N]\n");
      return 2;
    }
  }
  try {
    payments::App app(config);
    httplib::Server server;
    app.mount(server);
    if (port == 0) {
      port = server.bind_to_any_port("127.0.0.1");
    } else if (!server.bind_to_port("127.0.0.1", port)) {
      port = -1;
    }
    if (port < 0) {
      std::fprintf(stderr, "http_payments: cannot listen on 127.0.0.1\n");
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
