#include "http_server.hpp"

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
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
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "problem_body.hpp"
#include "transport/canned_answer.hpp"
#include "transport/http_text.hpp"
#include "transport/request_rules.hpp"

namespace payments_async {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;
using transport::TransportSettings;

namespace {

constexpr auto use_tuple = net::as_tuple(net::use_awaitable);

// One open connection. Everything in it is touched on its strand (the socket's executor).
struct Connection {
  explicit Connection(tcp::socket socket)
      : stream(std::move(socket)), deadline(stream.get_executor()) {}
  beast::tcp_stream stream;
  // The request deadline. Beast's own expiry closes the socket, which would leave no way to
  // answer 408; this timer cancels the read instead, and the 408 goes out on the open socket.
  net::steady_timer deadline;
  std::uint64_t deadline_armed = 0;  // which arming a firing timer belongs to
  bool idle = false;                 // waiting for a request's first byte
  bool expired = false;              // the request deadline passed
};

void arm_deadline(const std::shared_ptr<Connection>& c, std::chrono::milliseconds d) {
  c->expired = false;
  const std::uint64_t armed = ++c->deadline_armed;
  c->deadline.expires_after(d);
  c->deadline.async_wait([weak = std::weak_ptr<Connection>(c), armed](const error_code& ec) {
    std::shared_ptr<Connection> c = weak.lock();
    // A timer that expired just as it was disarmed still completes without an error: only the
    // current arming may cancel the connection's operations (else it would cut the answer).
    if (ec || !c || c->deadline_armed != armed) return;
    c->expired = true;
    c->stream.cancel();
  });
}

void disarm_deadline(Connection& c) {
  ++c.deadline_armed;
  c.deadline.cancel();
}

// Writes the refusal (Connection: close), then reads and drops what the client still sends,
// for linger_timeout and linger_bytes at most, so that it reads the answer instead of a reset.
net::awaitable<void> refuse(Connection& c, const TransportSettings& s,
                            const transport::Refusal& r) {
  const std::string bytes = transport::canned_answer(r);
  c.stream.expires_after(s.write_timeout);
  auto [ec, written] = co_await net::async_write(c.stream, net::buffer(bytes), use_tuple);
  if (ec) co_return;
  error_code ignored;
  c.stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  c.stream.expires_after(s.linger_timeout);
  std::vector<char> sink(4096);
  for (std::size_t dropped = 0; dropped < s.linger_bytes;) {
    auto [e, n] = co_await c.stream.async_read_some(net::buffer(sink), use_tuple);
    if (e) break;
    dropped += n;
  }
}

HttpRequest to_request(http::request<http::string_body>&& req) {
  HttpRequest r;
  r.method = std::string(req.method_string());
  const std::string_view target = req.target();
  r.path = std::string(target.substr(0, target.find('?')));
  for (const auto& field : req) {
    r.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  r.body = std::move(req.body());
  return r;
}

// The guard released the key of a handler that threw (no remember_failures here): a retry of the
// request runs it again, which the problem's type says (errc::handler_aborted).
HttpResponse handler_aborted(const char* what) {
  return HttpResponse{500,
                      {{"Content-Type", "application/problem+json"}},
                      payments::problem_body(500, "handler_aborted", "Request failed", what)};
}

}  // namespace

struct HttpServer::Impl : std::enable_shared_from_this<Impl> {
  Impl(net::io_context& io_context, const TransportSettings& s, RequestHandler& h)
      : io(io_context), settings(s), handler(h), acceptor(net::make_strand(io_context)) {}

  net::io_context& io;
  const TransportSettings settings;
  RequestHandler& handler;
  tcp::acceptor acceptor;
  std::atomic<bool> stopping{false};

  std::mutex mutex;  // the fields below
  std::unordered_map<std::uint64_t, std::weak_ptr<Connection>> connections;
  std::uint64_t next_id = 0;
  std::function<void(bool)> done;  // set by shut_down
  std::unique_ptr<net::steady_timer> drain_timer;

  net::awaitable<void> accept_loop();
  net::awaitable<void> serve(std::shared_ptr<Connection> c);
  void closed(std::uint64_t id);
  void finish(bool drained);
};

net::awaitable<void> HttpServer::Impl::accept_loop() {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(net::make_strand(io), use_tuple);
    if (stopping || !acceptor.is_open()) co_return;
    if (ec) {
      // Out of file descriptors, say: pause instead of spinning on the error.
      net::steady_timer pause(co_await net::this_coro::executor, std::chrono::milliseconds(50));
      co_await pause.async_wait(use_tuple);
      continue;
    }
    std::uint64_t id = 0;
    std::shared_ptr<Connection> c;
    {
      std::lock_guard lock(mutex);
      if (connections.size() >= settings.max_connections) {
        transport::send_canned_answer(socket.native_handle(), transport::busy_refusal(settings));
        error_code ignored;
        socket.close(ignored);
        continue;
      }
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      c = std::make_shared<Connection>(std::move(socket));
      id = next_id++;
      connections.emplace(id, c);
    }
    net::co_spawn(c->stream.get_executor(), serve(c),
                  [self = shared_from_this(), id](const std::exception_ptr&) { self->closed(id); });
  }
}

net::awaitable<void> HttpServer::Impl::serve(std::shared_ptr<Connection> c) {
  const TransportSettings& s = settings;
  beast::flat_buffer buffer;
  for (std::size_t answered = 0;;) {
    if (buffer.size() == 0) {
      // Idle: wait for the next request's first byte. shut_down() cancels this wait.
      c->idle = true;
      if (stopping) break;
      c->stream.expires_after(s.keep_alive_timeout);
      auto [ec, n] = co_await c->stream.async_read_some(buffer.prepare(4096), use_tuple);
      c->idle = false;
      if (ec) co_return;  // closed, idle too long or shut down: no one to answer
      buffer.commit(n);
    }
    c->stream.expires_never();
    arm_deadline(c, s.request_timeout);
    transport::RequestParser parser;
    transport::limit(parser, s);
    auto [head_ec, head_n] = co_await http::async_read_header(c->stream, buffer, parser, use_tuple);
    std::optional<transport::Refusal> refused;
    if (!head_ec) refused = transport::head_refusal(parser);
    if (!head_ec && !refused && transport::expects_continue(parser)) {
      http::response<http::empty_body> go_on{http::status::continue_, parser.get().version()};
      c->stream.expires_after(s.write_timeout);
      auto [ec, n] = co_await http::async_write(c->stream, go_on, use_tuple);
      if (ec) co_return;
      c->stream.expires_never();
    }
    if (!head_ec && !refused && !parser.is_done()) {
      auto [ec, n] = co_await http::async_read(c->stream, buffer, parser, use_tuple);
      head_ec = ec;
    }
    disarm_deadline(*c);
    if (head_ec) {
      refused = c->expired ? transport::timeout_refusal(s) : transport::refusal_for(head_ec, s);
      if (!refused) co_return;  // the client left: no one to answer
    }
    if (refused) {
      co_await refuse(*c, s, *refused);
      co_return;
    }

    http::request<http::string_body> req = parser.release();
    const unsigned version = req.version();
    const bool client_keeps = req.keep_alive();
    const HttpRequest request = to_request(std::move(req));
    HttpResponse answer;
    try {
      answer = co_await handler.handle(request);
    } catch (const std::exception& e) {
      answer = handler_aborted(e.what());
    }
    ++answered;
    const bool keep = client_keeps && answered < s.keep_alive_requests && !stopping;
    http::response<http::string_body> res;
    res.version(version);
    res.result(static_cast<unsigned>(answer.status));
    for (const auto& [name, value] : answer.headers) res.insert(name, value);
    res.body() = std::move(answer.body);
    res.set(http::field::date, transport::http_date());
    res.keep_alive(keep);
    res.prepare_payload();
    c->stream.expires_after(s.write_timeout);
    auto [ec, n] = co_await http::async_write(c->stream, res, use_tuple);
    if (ec || !keep) break;
  }
  error_code ignored;
  c->stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

void HttpServer::Impl::closed(std::uint64_t id) {
  bool last = false;
  {
    std::lock_guard lock(mutex);
    connections.erase(id);
    last = stopping && connections.empty();
  }
  if (last) finish(true);
}

void HttpServer::Impl::finish(bool drained) {
  std::function<void(bool)> call;
  {
    std::lock_guard lock(mutex);
    call = std::exchange(done, nullptr);
    if (drain_timer) drain_timer->cancel();
  }
  if (call) call(drained);
}

HttpServer::HttpServer(net::io_context& io, const TransportSettings& settings,
                       RequestHandler& handler)
    : impl_(std::make_shared<Impl>(io, settings, handler)) {}

HttpServer::~HttpServer() {
  error_code ignored;
  impl_->acceptor.close(ignored);
}

int HttpServer::bind(const std::string& host, int port) {
  error_code ec;
  const tcp::endpoint endpoint(net::ip::make_address(host, ec), static_cast<unsigned short>(port));
  if (ec) return -1;
  tcp::acceptor& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(impl_->settings.listen_backlog, ec);
  if (ec) return -1;
  const tcp::endpoint bound = a.local_endpoint(ec);
  return ec ? -1 : bound.port();
}

void HttpServer::start() {
  net::co_spawn(impl_->acceptor.get_executor(), impl_->accept_loop(),
                [self = impl_](const std::exception_ptr&) {});
}

void HttpServer::shut_down(std::chrono::milliseconds drain, std::function<void(bool)> done) {
  net::post(impl_->acceptor.get_executor(), [self = impl_, drain, done = std::move(done)]() {
    self->stopping = true;
    error_code ignored;
    self->acceptor.close(ignored);
    std::vector<std::shared_ptr<Connection>> open;
    bool none = false;
    {
      std::lock_guard lock(self->mutex);
      none = self->connections.empty();
      if (!none) {
        self->done = done;
        for (auto& [id, weak] : self->connections) {
          if (auto c = weak.lock()) open.push_back(std::move(c));
        }
        self->drain_timer = std::make_unique<net::steady_timer>(self->io, drain);
        self->drain_timer->async_wait([self](const error_code& ec) {
          if (!ec) self->finish(false);
        });
      }
    }
    if (none) {
      done(true);
      return;
    }
    // Idle connections close now; one being answered closes after its answer.
    for (auto& c : open) {
      net::post(c->stream.get_executor(), [c] {
        if (c->idle) c->stream.cancel();
      });
    }
  });
}

}  // namespace payments_async
