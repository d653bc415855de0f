// The floor of an idem-proxy replay: the proxy's own client server (the same Beast stack, client
// bounds and threads) answering every request from memory with the answer a replay writes, with
// no route, fingerprint, guard or store. scripts/bench --proxy runs it beside nginx, so a replay's
// ratio to this floor is what the guard and the store cost, and this floor's ratio to nginx is
// what the server stack costs (docs/proxy.md, "Measured").
//
//   idem_bench_proxy_floor [THREADS]   prints "listening on http://127.0.0.1:PORT"; SIGTERM stops
//   it
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "engine/answer_bytes.hpp"
#include "engine/client_server.hpp"
#include "engine/client_side.hpp"

namespace {

namespace net = boost::asio;
using idem::proxy::ClientSide;
using idem::proxy::ProxyRequest;

// What a replay of nginx's `return 201 '{"ok":true}'` carries, its bytes built per request as a
// replay's are.
class RecordedAnswer final : public idem::proxy::RequestHandler {
 public:
  RecordedAnswer() {
    answer_.status = 201;
    answer_.headers = {{"Server", "nginx/1.22.1"},
                       {"Content-Type", "application/json"},
                       {"Idempotent-Replayed", "true"}};
    answer_.body = R"({"ok":true})";
  }

  net::awaitable<void> handle(const ProxyRequest& /*request*/, ClientSide& client) override {
    co_await client.write(
        idem::proxy::whole_answer(answer_, client.version(), client.keep_alive()));
  }

 private:
  idem::http::StoredResponse answer_;
};

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;  // idem-proxy's default
  if (threads < 1) {
    std::fprintf(stderr, "usage: idem_bench_proxy_floor [THREADS]\n");
    return 2;
  }
  net::io_context io(threads);
  RecordedAnswer handler;
  idem::proxy::ClientLimits limits;
  limits.keep_alive_requests = 100000000;  // as scripts/bench --proxy configures the proxy
  idem::proxy::ClientServer server(io, limits, handler);
  std::string error;
  const int port = server.bind("127.0.0.1", 0, error);
  if (port < 0) {
    std::fprintf(stderr, "idem_bench_proxy_floor: %s\n", error.c_str());
    return 1;
  }
  net::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (!ec) server.shut_down(std::chrono::milliseconds(1000), [&](bool) { io.stop(); });
  });
  server.start();
  std::printf("listening on http://127.0.0.1:%d\n", port);
  std::fflush(stdout);
  std::vector<std::thread> runners;
  for (int i = 1; i < threads; ++i) runners.emplace_back([&io] { io.run(); });
  io.run();
  for (std::thread& t : runners) t.join();
  return 0;
}
