#include "upstream_pool.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <optional>
#include <stdexcept>
#include <utility>
#include <variant>

namespace idem::proxy {

namespace net = boost::asio;
using namespace net::experimental::awaitable_operators;

namespace {

constexpr auto use_tuple = net::as_tuple(net::use_awaitable);

// An idle connection the upstream has closed (or that has unexpected bytes) reads at once; one
// still open would block. Checked before reuse, so a request is never sent on a dead connection.
bool still_open(int fd) {
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

UpstreamPool::UpstreamPool(const UpstreamConfig& config) : config_(config) {
  net::io_context io;
  net::ip::tcp::resolver resolver(io);
  boost::system::error_code ec;
  const auto results = resolver.resolve(config.host, std::to_string(config.port), ec);
  if (ec || results.empty()) {
    throw std::runtime_error("the upstream " + config.host + ":" + std::to_string(config.port) +
                             " cannot be resolved: " + (ec ? ec.message() : "no address"));
  }
  for (const auto& entry : results) endpoints_.push_back(entry.endpoint());
}

UpstreamPool::~UpstreamPool() { close_idle(); }

net::awaitable<Acquired> UpstreamPool::acquire() {
  const net::any_io_executor executor = co_await net::this_coro::executor;
  const auto now = std::chrono::steady_clock::now();
  for (;;) {
    std::optional<Idle> taken;
    {
      std::lock_guard lock(mutex_);
      if (idle_.empty()) break;
      taken = idle_.back();
      idle_.pop_back();
    }
    const Idle idle = *taken;
    if (now - idle.since < config_.idle_timeout && still_open(idle.fd)) {
      auto c =
          std::make_unique<UpstreamSocket>(UpstreamSocket{net::ip::tcp::socket(executor), true});
      boost::system::error_code ec;
      c->socket.assign(idle.protocol, idle.fd, ec);
      if (!ec) co_return Acquired{std::move(c), {}, false};
    }
    ::close(idle.fd);
  }
  auto c = std::make_unique<UpstreamSocket>(UpstreamSocket{net::ip::tcp::socket(executor), false});
  net::steady_timer timer(executor, config_.connect_timeout);
  auto raced = co_await (net::async_connect(c->socket, endpoints_, use_tuple) ||
                         timer.async_wait(use_tuple));
  if (raced.index() == 1) {
    co_return Acquired{nullptr, make_error_code(net::error::timed_out), true};
  }
  const auto [ec, endpoint] = std::get<0>(raced);
  if (ec) co_return Acquired{nullptr, ec, false};
  boost::system::error_code ignored;
  c->socket.set_option(net::ip::tcp::no_delay(true), ignored);
  {
    std::lock_guard lock(mutex_);
    ++opened_;
  }
  co_return Acquired{std::move(c), {}, false};
}

void UpstreamPool::release(std::unique_ptr<UpstreamSocket> connection) {
  if (!connection || !connection->socket.is_open()) return;
  boost::system::error_code ec;
  const auto protocol = connection->socket.local_endpoint(ec).protocol();
  if (ec) return;
  const auto fd = connection->socket.release(ec);
  if (ec) return;
  const auto now = std::chrono::steady_clock::now();
  std::vector<Idle> stale;
  bool kept = false;
  {
    std::lock_guard lock(mutex_);
    // The oldest come first: those unused for idle_timeout are closed here, not left open.
    while (!idle_.empty() && now - idle_.front().since >= config_.idle_timeout) {
      stale.push_back(idle_.front());
      idle_.erase(idle_.begin());
    }
    if (!closed_ && idle_.size() < config_.pool_size) {
      idle_.push_back(Idle{fd, protocol, now});
      kept = true;
    }
  }
  for (const Idle& i : stale) ::close(i.fd);
  if (!kept) ::close(fd);
}

void UpstreamPool::close_idle() {
  std::vector<Idle> idle;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    idle.swap(idle_);
  }
  for (const Idle& i : idle) ::close(i.fd);
}

std::size_t UpstreamPool::opened() const {
  std::lock_guard lock(mutex_);
  return opened_;
}

}  // namespace idem::proxy
