#include "upstream_exchange.hpp"

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <chrono>
#include <utility>
#include <variant>

namespace idem::proxy {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace net::experimental::awaitable_operators;

namespace {

constexpr auto use_tuple = net::as_tuple(net::use_awaitable);
// The upstream's answer head may be this large; a larger one is a broken answer.
constexpr std::uint32_t kUpstreamHeadLimit = 64 * 1024;
constexpr std::size_t kPiece = std::size_t{16} * 1024;

using Parser = http::response_parser<http::buffer_body>;

}  // namespace

struct UpstreamExchange::Impl {
  Impl(UpstreamPool& p, const UpstreamConfig& c) : pool(p), config(c) {}

  UpstreamPool& pool;
  const UpstreamConfig& config;
  std::unique_ptr<UpstreamSocket> connection;
  std::optional<net::steady_timer> deadline;
  beast::flat_buffer buffer;
  std::optional<Parser> parser;
  Headers headers;
  std::string body;
  UpstreamFailure failure = UpstreamFailure::none;
  bool reusable = false;

  // Runs `op` against the response deadline; false with failure set when it failed.
  template <class Op>
  net::awaitable<bool> bounded(Op op, std::size_t* transferred = nullptr) {
    auto raced = co_await (std::move(op) || deadline->async_wait(use_tuple));
    if (raced.index() == 1) {
      failure = UpstreamFailure::timeout;
      co_return false;
    }
    const auto [ec, n] = std::get<0>(raced);
    if (transferred != nullptr) *transferred = n;
    if (ec && ec != http::error::need_buffer) {
      failure = UpstreamFailure::broken;
      co_return false;
    }
    co_return true;
  }

  // Reads more of the body into `piece`; the count read, or nullopt when it failed.
  net::awaitable<std::optional<std::size_t>> read_some_body(std::array<char, kPiece>& piece) {
    auto& b = parser->get().body();
    b.data = piece.data();
    b.size = piece.size();
    if (!co_await bounded(http::async_read(connection->socket, buffer, *parser, use_tuple))) {
      co_return std::nullopt;
    }
    co_return piece.size() - b.size;
  }

  void fail_closed() {
    reusable = false;
    boost::system::error_code ignored;
    if (connection) connection->socket.close(ignored);
  }
};

UpstreamExchange::UpstreamExchange(UpstreamPool& pool, const UpstreamConfig& config)
    : impl_(std::make_unique<Impl>(pool, config)) {}

UpstreamExchange::~UpstreamExchange() { give_back(); }

void UpstreamExchange::give_back() noexcept {
  if (impl_->connection && impl_->reusable && impl_->buffer.size() == 0) {
    impl_->pool.release(std::move(impl_->connection));
  }
}

net::awaitable<bool> UpstreamExchange::send(const std::string& request, bool head_request) {
  Impl& x = *impl_;
  Acquired acquired = co_await x.pool.acquire();
  if (!acquired.connection) {
    x.failure = UpstreamFailure::connect;
    co_return false;
  }
  x.connection = std::move(acquired.connection);
  x.deadline.emplace(co_await net::this_coro::executor, x.config.response_timeout);
  if (!co_await x.bounded(
          net::async_write(x.connection->socket, net::buffer(request), use_tuple))) {
    x.fail_closed();
    co_return false;
  }
  for (;;) {
    x.parser.emplace();
    x.parser->header_limit(kUpstreamHeadLimit);
    x.parser->body_limit(boost::none);
    if (head_request) x.parser->skip(true);
    if (!co_await x.bounded(
            http::async_read_header(x.connection->socket, x.buffer, *x.parser, use_tuple))) {
      x.fail_closed();
      co_return false;
    }
    const unsigned status = x.parser->get().result_int();
    if (status >= 200 || status == 101) break;  // 101 ends the exchange: it is not proxied
  }
  x.headers.clear();
  for (const auto& field : x.parser->get()) {
    x.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  co_return true;
}

int UpstreamExchange::status() const noexcept {
  return static_cast<int>(impl_->parser->get().result_int());
}

const Headers& UpstreamExchange::headers() const noexcept { return impl_->headers; }

std::optional<std::uint64_t> UpstreamExchange::content_length() const noexcept {
  const auto length = impl_->parser->content_length();
  if (!length) return std::nullopt;
  return *length;
}

net::awaitable<BodyRead> UpstreamExchange::read_body(std::size_t limit) {
  Impl& x = *impl_;
  x.body.clear();
  std::array<char, kPiece> piece{};
  while (!x.parser->is_done()) {
    const std::optional<std::size_t> n = co_await x.read_some_body(piece);
    if (!n) {
      x.fail_closed();
      co_return BodyRead::failed;
    }
    x.body.append(piece.data(), *n);
    if (x.body.size() > limit) co_return BodyRead::over;
  }
  x.reusable = x.parser->keep_alive();
  co_return BodyRead::whole;
}

std::string& UpstreamExchange::body() noexcept { return impl_->body; }

net::awaitable<bool> UpstreamExchange::next_piece() {
  Impl& x = *impl_;
  x.body.clear();
  std::array<char, kPiece> piece{};
  while (x.body.empty() && !x.parser->is_done()) {
    const std::optional<std::size_t> n = co_await x.read_some_body(piece);
    if (!n) {
      x.fail_closed();
      co_return false;
    }
    x.body.append(piece.data(), *n);
  }
  if (x.parser->is_done() && x.body.empty()) x.reusable = x.parser->keep_alive();
  co_return true;
}

UpstreamFailure UpstreamExchange::failure() const noexcept { return impl_->failure; }

}  // namespace idem::proxy
