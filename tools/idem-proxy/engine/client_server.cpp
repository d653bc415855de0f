#include "client_server.hpp"

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
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
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "answer_bytes.hpp"
#include "idem/http/problem.hpp"
#include "listener_tls.hpp"
#include "transport/canned_answer.hpp"
#include "transport/request_rules.hpp"

namespace idem::proxy {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using transport::Refusal;

namespace {

constexpr auto use_tuple = net::as_tuple(net::use_awaitable);

transport::TransportSettings settings_of(const ClientLimits& limits) {
  transport::TransportSettings s;
  s.max_connections = limits.max_connections;
  s.keep_alive_timeout = limits.keep_alive_timeout;
  s.keep_alive_requests = limits.keep_alive_requests;
  s.request_timeout = limits.request_timeout;
  s.write_timeout = limits.write_timeout;
  s.body_limit = limits.body_bytes;
  s.head_limit = limits.head_bytes;
  return s;
}

Refusal framing_refusal(std::string detail) {
  return {400, "Bad Request", "bad_request", std::move(detail)};
}

// One open connection. Everything in it is touched on its strand (the socket's executor).
struct Connection {
  Connection(net::ip::tcp::socket socket, net::ssl::context* tls_context)
      : stream(std::move(socket)), deadline(stream.get_executor()) {
    if (tls_context != nullptr) tls.emplace(stream, *tls_context);
  }
  // The bytes go through `tls` when the listener speaks TLS; the deadlines are the TCP
  // stream's in both cases (each of TLS's reads and writes is one of its own).
  beast::tcp_stream stream;
  std::optional<net::ssl::stream<beast::tcp_stream&>> tls;
  // The verified client certificate's name, once the handshake is done (listener_tls.hpp).
  std::string client_name;
  // Calls `op` with the stream the connection's bytes go through.
  template <class Op>
  auto through(Op&& op) {
    return tls ? op(*tls) : op(stream);
  }
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
    // Only the current arming may cancel the connection's reads (a stale one would cut the
    // next request).
    if (ec || !c || c->deadline_armed != armed) return;
    c->expired = true;
    c->stream.cancel();
  });
}

void disarm_deadline(Connection& c) {
  ++c.deadline_armed;
  c.deadline.cancel();
}

// An obs-fold: a field line that starts with a space or a tab continues the previous one. Beast
// joins it; an upstream might not, so the proxy refuses it. `head` ends at its blank line.
bool has_obs_fold(std::string_view head) {
  for (std::size_t at = head.find("\r\n"); at != std::string_view::npos;
       at = head.find("\r\n", at + 2)) {
    if (at + 2 < head.size() && (head[at + 2] == ' ' || head[at + 2] == '\t')) return true;
  }
  return false;
}

// What the proxy refuses of a head Beast and the transport's rules accept.
std::optional<Refusal> framing_refusal_of(const transport::RequestParser& parser) {
  const auto& head = parser.get();
  if (head.count(http::field::content_length) > 1 ||
      head[http::field::content_length].find(',') != std::string_view::npos) {
    return framing_refusal("the request has more than one Content-Length");
  }
  return std::nullopt;
}

ProxyRequest to_request(http::request<http::string_body>&& req) {
  ProxyRequest r;
  r.method = std::string(req.method_string());
  r.target = std::string(req.target());
  const auto question = r.target.find('?');
  r.path = r.target.substr(0, question);
  if (question != std::string::npos) r.query = r.target.substr(question + 1);
  r.version = req.version();
  for (const auto& field : req) {
    r.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  r.body = std::move(req.body());
  return r;
}

class ConnectionSide final : public ClientSide {
 public:
  ConnectionSide(Connection& c, const transport::TransportSettings& s, unsigned version,
                 bool keep_alive)
      : c_(c), s_(s), version_(version), keep_alive_(keep_alive) {}

  net::awaitable<bool> write(std::string_view bytes) override {
    if (failed_) co_return false;
    written_ = true;
    c_.stream.expires_after(s_.write_timeout);
    auto [ec, n] = co_await c_.through(
        [&](auto& s) { return net::async_write(s, net::buffer(bytes), use_tuple); });
    c_.stream.expires_never();
    if (ec) failed_ = true;
    co_return !failed_;
  }
  unsigned version() const noexcept override { return version_; }
  bool keep_alive() const noexcept override { return keep_alive_ && !close_; }
  void close_after() noexcept override { close_ = true; }

  bool written() const noexcept { return written_; }
  bool reusable() const noexcept { return keep_alive() && !failed_; }

 private:
  Connection& c_;
  const transport::TransportSettings& s_;
  unsigned version_;
  bool keep_alive_;
  bool close_ = false;
  bool failed_ = false;
  bool written_ = false;
};

std::string handler_failed(const char* what) {
  idem::http::StoredResponse r{500,
                               {{"Content-Type", std::string(idem::http::kProblemContentType)}},
                               idem::http::problem_json({.type = "urn:idem:problem:proxy_error",
                                                         .title = "The proxy failed to answer",
                                                         .status = 500,
                                                         .detail = what})};
  return whole_answer(r, 11, false);
}

}  // namespace

struct ClientServer::Impl : std::enable_shared_from_this<Impl> {
  Impl(net::io_context& io_context, const ClientLimits& limits, RequestHandler& h,
       net::ssl::context* tls_context)
      : io(io_context),
        settings(settings_of(limits)),
        handler(h),
        tls(tls_context),
        acceptor(net::make_strand(io_context)) {}

  net::io_context& io;
  const transport::TransportSettings settings;
  RequestHandler& handler;
  net::ssl::context* tls;  // null: plain HTTP
  net::ip::tcp::acceptor acceptor;
  std::atomic<bool> stopping{false};
  std::atomic<std::size_t> in_hand{0};

  std::mutex mutex;  // the fields below
  std::unordered_map<std::uint64_t, std::weak_ptr<Connection>> connections;
  std::uint64_t next_id = 0;
  std::function<void(bool)> done;  // set by shut_down
  std::unique_ptr<net::steady_timer> drain_timer;

  net::awaitable<void> accept_loop();
  net::awaitable<void> serve(std::shared_ptr<Connection> c);
  net::awaitable<void> refuse(Connection& c, const Refusal& r);
  // The TLS handshake, within request_timeout; false when it failed (the client is gone).
  net::awaitable<bool> handshake(Connection& c);
  // Sends close_notify and waits for the client's, within linger_timeout.
  net::awaitable<void> close_tls(Connection& c);
  // Reads until the buffer holds a whole head; false when the client left or stalled.
  net::awaitable<std::optional<Refusal>> read_head_bytes(Connection& c, beast::flat_buffer& b,
                                                         bool& gone);
  void closed(std::uint64_t id);
  void finish(bool drained);
};

// Writes the refusal (Connection: close), then reads and drops what the client still sends,
// for linger_timeout and linger_bytes at most, so that it reads the answer instead of a reset.
net::awaitable<void> ClientServer::Impl::refuse(Connection& c, const Refusal& r) {
  const std::string bytes = transport::canned_answer(r);
  c.stream.expires_after(settings.write_timeout);
  auto [ec, written] = co_await c.through(
      [&](auto& s) { return net::async_write(s, net::buffer(bytes), use_tuple); });
  if (ec) co_return;
  if (c.tls) {
    co_await close_tls(c);  // reads until the client's close_notify, within the same bound
    co_return;
  }
  error_code ignored;
  c.stream.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  c.stream.expires_after(settings.linger_timeout);
  std::vector<char> sink(4096);
  for (std::size_t dropped = 0; dropped < settings.linger_bytes;) {
    auto [e, n] = co_await c.stream.async_read_some(net::buffer(sink), use_tuple);
    if (e) break;
    dropped += n;
  }
}

net::awaitable<std::optional<Refusal>> ClientServer::Impl::read_head_bytes(Connection& c,
                                                                           beast::flat_buffer& b,
                                                                           bool& gone) {
  for (;;) {
    const std::string_view bytes(static_cast<const char*>(b.data().data()), b.size());
    const std::size_t end = bytes.find("\r\n\r\n");
    if (end != std::string_view::npos) {
      if (has_obs_fold(bytes.substr(0, end + 2))) {
        co_return framing_refusal("a field line is folded (obs-fold)");
      }
      co_return std::nullopt;
    }
    if (b.size() > settings.head_limit) {
      co_return transport::refusal_for(http::error::header_limit, settings);
    }
    auto [ec, n] =
        co_await c.through([&](auto& s) { return s.async_read_some(b.prepare(4096), use_tuple); });
    if (ec) {
      gone = true;
      co_return std::nullopt;
    }
    b.commit(n);
  }
}

net::awaitable<void> ClientServer::Impl::accept_loop() {
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
      socket.set_option(net::ip::tcp::no_delay(true), ignored);
      c = std::make_shared<Connection>(std::move(socket), tls);
      id = next_id++;
      connections.emplace(id, c);
    }
    net::co_spawn(c->stream.get_executor(), serve(c),
                  [self = shared_from_this(), id](const std::exception_ptr&) { self->closed(id); });
  }
}

net::awaitable<void> ClientServer::Impl::serve(std::shared_ptr<Connection> c) {
  const transport::TransportSettings& s = settings;
  if (c->tls && !co_await handshake(*c)) co_return;
  beast::flat_buffer buffer;
  for (std::size_t answered = 0;;) {
    if (buffer.size() == 0) {
      // Idle: wait for the next request's first byte. shut_down() cancels this wait.
      c->idle = true;
      if (stopping) break;
      c->stream.expires_after(s.keep_alive_timeout);
      auto [ec, n] = co_await c->through(
          [&](auto& st) { return st.async_read_some(buffer.prepare(4096), use_tuple); });
      c->idle = false;
      if (ec) co_return;  // closed, idle too long or shut down: no one to answer
      buffer.commit(n);
    }
    c->stream.expires_never();
    arm_deadline(c, s.request_timeout);
    bool gone = false;
    std::optional<Refusal> refused = co_await read_head_bytes(*c, buffer, gone);
    error_code head_ec;
    transport::RequestParser parser;
    transport::limit(parser, s);
    if (!gone && !refused) {
      auto [ec, n] = co_await c->through(
          [&](auto& st) { return http::async_read_header(st, buffer, parser, use_tuple); });
      head_ec = ec;
      if (!head_ec) refused = transport::head_refusal(parser);
      if (!head_ec && !refused) refused = framing_refusal_of(parser);
    }
    if (!gone && !head_ec && !refused && transport::expects_continue(parser)) {
      http::response<http::empty_body> go_on{http::status::continue_, parser.get().version()};
      c->stream.expires_after(s.write_timeout);
      auto [ec, n] =
          co_await c->through([&](auto& st) { return http::async_write(st, go_on, use_tuple); });
      if (ec) co_return;
      c->stream.expires_never();
    }
    if (!gone && !head_ec && !refused && !parser.is_done()) {
      auto [ec, n] = co_await c->through(
          [&](auto& st) { return http::async_read(st, buffer, parser, use_tuple); });
      head_ec = ec;
    }
    disarm_deadline(*c);
    if (gone || head_ec) {
      if (c->expired) {
        refused = transport::timeout_refusal(s);
      } else if (head_ec) {
        refused = transport::refusal_for(head_ec, s);
      }
      if (!refused) co_return;  // the client left: no one to answer
    }
    if (refused) {
      co_await refuse(*c, *refused);
      co_return;
    }

    http::request<http::string_body> req = parser.release();
    const unsigned version = req.version();
    const bool client_keeps = req.keep_alive();
    ProxyRequest request = to_request(std::move(req));
    request.client_subject = c->client_name;
    ++answered;
    ConnectionSide side(*c, s, version,
                        client_keeps && answered < s.keep_alive_requests && !stopping);
    ++in_hand;
    std::string failure;
    try {
      co_await handler.handle(request, side);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty() && !side.written()) {
      co_await side.write(handler_failed(failure.c_str()));
      side.close_after();
    }
    --in_hand;
    if (!side.reusable() || !failure.empty()) break;
  }
  if (c->tls) {
    co_await close_tls(*c);
    co_return;
  }
  error_code ignored;
  c->stream.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
}

net::awaitable<bool> ClientServer::Impl::handshake(Connection& c) {
  // A client that connects and says nothing is bounded as one that sends half a request.
  c.stream.expires_after(settings.request_timeout);
  auto [ec] = co_await c.tls->async_handshake(net::ssl::stream_base::server, use_tuple);
  c.stream.expires_never();
  if (ec) co_return false;
  c.client_name = verified_client_name(c.tls->native_handle());
  co_return true;
}

net::awaitable<void> ClientServer::Impl::close_tls(Connection& c) {
  c.stream.expires_after(settings.linger_timeout);
  co_await c.tls->async_shutdown(use_tuple);
  c.stream.expires_never();
}

void ClientServer::Impl::closed(std::uint64_t id) {
  bool last = false;
  {
    std::lock_guard lock(mutex);
    connections.erase(id);
    last = stopping && connections.empty();
  }
  if (last) finish(true);
}

void ClientServer::Impl::finish(bool drained) {
  std::function<void(bool)> call;
  {
    std::lock_guard lock(mutex);
    call = std::exchange(done, nullptr);
    if (drain_timer) drain_timer->cancel();
  }
  if (call) call(drained);
}

ClientServer::ClientServer(net::io_context& io, const ClientLimits& limits, RequestHandler& handler,
                           net::ssl::context* tls)
    : impl_(std::make_shared<Impl>(io, limits, handler, tls)) {}

ClientServer::~ClientServer() {
  error_code ignored;
  impl_->acceptor.close(ignored);
}

int ClientServer::bind(const std::string& address, int port, std::string& error) {
  error_code ec;
  const net::ip::tcp::endpoint endpoint(net::ip::make_address(address, ec),
                                        static_cast<unsigned short>(port));
  if (ec) {
    error = "'" + address + "' is not an IP address";
    return -1;
  }
  net::ip::tcp::acceptor& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(net::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(impl_->settings.listen_backlog, ec);
  const net::ip::tcp::endpoint bound = ec ? net::ip::tcp::endpoint{} : a.local_endpoint(ec);
  if (ec) {
    error = "cannot listen on " + address + ":" + std::to_string(port) + ": " + ec.message();
    return -1;
  }
  return bound.port();
}

void ClientServer::start() {
  net::co_spawn(impl_->acceptor.get_executor(), impl_->accept_loop(),
                [self = impl_](const std::exception_ptr&) {});
}

std::size_t ClientServer::in_hand() const noexcept { return impl_->in_hand.load(); }

void ClientServer::shut_down(std::chrono::milliseconds drain, std::function<void(bool)> done) {
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

}  // namespace idem::proxy
