#include "run_proxy.hpp"

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "admin_server.hpp"
#include "client_server.hpp"
#include "guarded_forward.hpp"
#include "listener_tls.hpp"
#include "open_store.hpp"
#include "proxy_metrics.hpp"
#include "upstream_pool.hpp"

namespace idem::proxy {

namespace net = boost::asio;

namespace {

int cannot_start(const std::string& why) {
  std::fprintf(stderr, "idem-proxy: %s\n", why.c_str());
  return kExitCannotStart;
}

// Whether the store answers before the proxy says it listens: a store that cannot be used is a
// failure to start, not a stream of 503s.
std::string first_probe(net::io_context& io, AnyStore& store) {
  bool done = false;
  std::string down;
  net::co_spawn(io, probe_store(store), [&](const std::exception_ptr& e, std::string why) {
    done = true;
    down = e ? std::string("the store call failed") : std::move(why);
  });
  while (!done && io.run_one() > 0) {
  }
  if (io.stopped()) io.restart();  // it ran out of work: run() must start anew
  return down;
}

}  // namespace

int run_proxy(const ProxyConfig& config, std::FILE* out) {
  if (config.principal.from == PrincipalSource::client_certificate &&
      config.listen.tls_client_ca.empty()) {
    std::fprintf(stderr,
                 "idem-proxy: principal.from = \"client-certificate\" needs listen.tls_client_ca "
                 "(and TLS on the listener)\n");
    return kExitUsage;
  }
  if (config.upstream.port <= 0 || config.upstream.port > 65535) {
    std::fprintf(stderr, "idem-proxy: upstream.port is required (1-65535)\n");
    return kExitUsage;
  }
  // A forward that outlives its lease could be taken over by another instance and sent twice.
  if (config.upstream.connect_timeout + config.upstream.response_timeout >= config.store.lease) {
    std::fprintf(stderr,
                 "idem-proxy: store.lease_ms must be longer than upstream.connect_timeout_ms + "
                 "upstream.response_timeout_ms (a forward must end before its key can be taken "
                 "over)\n");
    return kExitUsage;
  }
  ProxyMetrics metrics;
  std::unique_ptr<UpstreamPool> pool;
  try {
    pool = std::make_unique<UpstreamPool>(config.upstream);
  } catch (const std::exception& e) {
    return cannot_start(e.what());
  }
  const std::size_t threads = config.threads > 0 ? config.threads : 1;
  net::io_context io(static_cast<int>(threads));
  std::string error;
  std::unique_ptr<AnyStore> store = open_store(config.store, io.get_executor(), error);
  if (!store) return cannot_start("store.uri: " + error);
  metrics.watch_store([&s = *store] { return s.stats(); });  // /metrics is served while it lives
  std::unique_ptr<GuardedForward> handler;
  try {
    handler = std::make_unique<GuardedForward>(config, *store, *pool, metrics);
  } catch (const std::exception& e) {
    return cannot_start(e.what());
  }
  std::unique_ptr<net::ssl::context> tls;
  try {
    tls = make_listener_tls(config.listen);
  } catch (const std::exception& e) {
    return cannot_start(e.what());
  }
  ClientServer server(io, config.limits, *handler, tls.get());
  const int port = server.bind(config.listen.address, config.listen.port, error);
  if (port < 0) return cannot_start(error);
  std::unique_ptr<AdminServer> admin;
  int admin_port = -1;
  if (config.admin.port >= 0) {
    admin = std::make_unique<AdminServer>(io, *store, metrics);
    admin_port = admin->bind(config.admin.address, config.admin.port, error);
    if (admin_port < 0) return cannot_start(error);
  }
  if (const std::string down = first_probe(io, *store); !down.empty()) {
    return cannot_start("the store " + std::string(store->backend()) + " cannot be used: " + down);
  }

  std::atomic<int> code{kExitOk};
  net::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    if (admin) admin->stop();
    server.shut_down(config.drain_timeout, [&](bool drained) {
      code = drained ? kExitOk : kExitCut;
      io.stop();
    });
  });
  server.start();
  if (admin) admin->start();
  std::fprintf(out, "listening on %s://%s:%d\n", tls ? "https" : "http",
               config.listen.address.c_str(), port);
  if (admin) std::fprintf(out, "admin on http://%s:%d\n", config.admin.address.c_str(), admin_port);
  std::fflush(out);

  std::vector<std::thread> runners;
  for (std::size_t i = 1; i < threads; ++i) runners.emplace_back([&io] { io.run(); });
  io.run();
  for (std::thread& t : runners) t.join();
  pool->close_idle();
  return code;
}

}  // namespace idem::proxy
