#include "admin_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <chrono>

#include "answer_bytes.hpp"
#include "idem/http/problem.hpp"
#include "open_store.hpp"

namespace idem::proxy {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

namespace {

constexpr auto use_tuple = net::as_tuple(net::use_awaitable);
constexpr std::chrono::seconds kAdminTimeout{5};

}  // namespace

struct AdminServer::Impl : std::enable_shared_from_this<Impl> {
  Impl(net::io_context& io_context, AnyStore& s, const ProxyMetrics& m)
      : io(io_context), store(s), metrics(m), acceptor(net::make_strand(io_context)) {}

  net::io_context& io;
  AnyStore& store;
  const ProxyMetrics& metrics;
  net::ip::tcp::acceptor acceptor;

  net::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(net::make_strand(io), use_tuple);
      if (!acceptor.is_open()) co_return;
      if (ec) {
        net::steady_timer pause(co_await net::this_coro::executor, std::chrono::milliseconds(50));
        co_await pause.async_wait(use_tuple);
        continue;
      }
      const auto executor = socket.get_executor();
      net::co_spawn(executor, serve(shared_from_this(), beast::tcp_stream(std::move(socket))),
                    net::detached);
    }
  }

  net::awaitable<idem::http::StoredResponse> answer_for(const http::request<http::empty_body>& r) {
    const std::string_view target = r.target();
    const std::string_view path = target.substr(0, target.find('?'));
    if (path != "/health" && path != "/metrics") {
      co_return idem::http::StoredResponse{404, {{"Content-Type", "text/plain"}}, "not found\n"};
    }
    if (r.method() != http::verb::get && r.method() != http::verb::head) {
      co_return idem::http::StoredResponse{
          405, {{"Content-Type", "text/plain"}, {"Allow", "GET, HEAD"}}, "GET only\n"};
    }
    if (path == "/metrics") {
      co_return idem::http::StoredResponse{
          200, {{"Content-Type", "text/plain; version=0.0.4"}}, metrics.text()};
    }
    const std::string down = co_await probe_store(store);
    if (down.empty()) {
      co_return idem::http::StoredResponse{
          200, {{"Content-Type", "application/json"}}, R"({"status":"ok"})"};
    }
    co_return idem::http::StoredResponse{
        503,
        {{"Content-Type", "application/json"}},
        R"({"status":"unavailable","detail":)" + idem::http::json_string(down) + "}"};
  }

  // `self` keeps the server alive while a connection is served.
  net::awaitable<void> serve([[maybe_unused]] std::shared_ptr<Impl> self,
                             beast::tcp_stream stream) {
    beast::flat_buffer buffer;
    http::request_parser<http::empty_body> parser;
    parser.header_limit(8 * 1024);
    stream.expires_after(kAdminTimeout);
    auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_tuple);
    if (ec) co_return;
    const http::request<http::empty_body>& request = parser.get();
    idem::http::StoredResponse r = co_await answer_for(request);
    if (request.method() == http::verb::head) r.body.clear();
    const std::string bytes = whole_answer(r, request.version(), false);
    stream.expires_after(kAdminTimeout);
    co_await net::async_write(stream, net::buffer(bytes), use_tuple);
    error_code ignored;
    stream.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  }
};

AdminServer::AdminServer(net::io_context& io, AnyStore& store, const ProxyMetrics& metrics)
    : impl_(std::make_shared<Impl>(io, store, metrics)) {}

AdminServer::~AdminServer() {
  error_code ignored;
  impl_->acceptor.close(ignored);
}

int AdminServer::bind(const std::string& address, int port, std::string& error) {
  error_code ec;
  const net::ip::tcp::endpoint endpoint(net::ip::make_address(address, ec),
                                        static_cast<unsigned short>(port));
  if (ec) {
    error = "admin: '" + address + "' is not an IP address";
    return -1;
  }
  net::ip::tcp::acceptor& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(net::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(64, ec);
  const net::ip::tcp::endpoint bound = ec ? net::ip::tcp::endpoint{} : a.local_endpoint(ec);
  if (ec) {
    error = "admin: cannot listen on " + address + ":" + std::to_string(port) + ": " + ec.message();
    return -1;
  }
  return bound.port();
}

void AdminServer::start() {
  net::co_spawn(impl_->acceptor.get_executor(), impl_->accept_loop(),
                [self = impl_](const std::exception_ptr&) {});
}

void AdminServer::stop() {
  net::post(impl_->acceptor.get_executor(), [self = impl_] {
    error_code ignored;
    self->acceptor.close(ignored);
  });
}

}  // namespace idem::proxy
