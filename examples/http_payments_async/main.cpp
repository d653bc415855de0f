// http_payments_async: the payments service of http_payments on Boost.Beast with coroutines on
// idem::AsyncGuard, PostgreSQL only (see docs/async.md, "The async HTTP example").
//
//   http_payments_async --pg URI [--port N] [--prefix P] [--lease-ms N] [--threads N] ...
//
// --port 0 picks a free port. The first line on stdout is "listening on http://127.0.0.1:<port>".
// SIGTERM or SIGINT: stop accepting, finish the requests in hand, exit 0.

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "async_command_line.hpp"
#include "command_line.hpp"
#include "file_limit.hpp"
#include "http_server.hpp"
#include "payments_routes.hpp"

namespace net = boost::asio;

int main(int argc, char** argv) {
  payments::CommandLine cl = payments::parse_command_line({argv + 1, argv + argc});
  if (cl.help) {
    std::fputs(payments_async::kUsage, stdout);
    return 0;
  }
  if (cl.error.empty()) cl.error = payments_async::unsupported(cl);
  if (!cl.error.empty()) {
    std::fprintf(stderr, "http_payments_async: %s\n%s", cl.error.c_str(), payments_async::kUsage);
    return 2;
  }
  transport::fit_file_limit(cl.transport, "http_payments_async");
  const std::size_t threads = payments_async::loop_threads(cl);
  try {
    net::io_context io(static_cast<int>(threads));
    payments_async::PaymentsRoutes routes(io.get_executor(), cl.service);
    payments_async::HttpServer server(io, cl.transport, routes);
    const int port = server.bind("127.0.0.1", cl.port);
    if (port < 0) {
      std::fprintf(stderr, "http_payments_async: cannot listen on 127.0.0.1:%d\n", cl.port);
      return 1;
    }
    std::printf("listening on http://127.0.0.1:%d\n", port);
    std::fflush(stdout);

    // A graceful stop: the requests in hand get their answers, for as long as a client may
    // take to read one; then the loop stops whatever is left.
    bool drained = true;
    net::signal_set signals(io, SIGTERM, SIGINT);
    signals.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      server.shut_down(cl.transport.write_timeout + cl.transport.request_timeout,
                       [&io, &drained](bool all_closed) {
                         drained = all_closed;
                         io.stop();
                       });
    });
    server.start();
    std::vector<std::thread> pool;
    for (std::size_t i = 1; i < threads; ++i) pool.emplace_back([&io] { io.run(); });
    io.run();
    for (std::thread& t : pool) t.join();
    if (!drained) {
      // Requests still in hand: their coroutines hold the stores, which must not be torn down
      // under them. Leave without destructors; the database settles what they held (an
      // unfinished record is taken over once its lease has passed).
      std::fputs("http_payments_async: connections left open at shutdown\n", stderr);
      std::fflush(nullptr);
      std::_Exit(0);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http_payments_async: %s\n", e.what());
    return 1;
  }
}
