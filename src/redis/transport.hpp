#pragma once
// The byte stream under an asynchronous Redis connection (async_link.hpp): plain TCP, or a unix
// socket. The Link only connects, reads some, writes all and closes through it, so another
// stream (TLS, say) is one more class with these members, chosen by the Transport alias below.
// Internal to idem_asio_redis.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <string>
#include <utility>
#include <vector>

#include "idem/redis/client.hpp"
#include "socket.hpp"

namespace idem::redis::detail {

class PlainTransport {
 public:
  using Endpoint = boost::asio::generic::stream_protocol::endpoint;

  explicit PlainTransport(const boost::asio::any_io_executor& executor) : socket_(executor) {}

  /// Connects to `options`' server; `handler(error_code)`. The name is resolved in this call,
  /// as the blocking face's connect does; a TCP connection is tuned as its are (tune_tcp).
  template <class Handler>
  void async_connect(const ConnectionOptions& options, Handler&& handler) {
    namespace net = boost::asio;
    boost::system::error_code ec;
    std::vector<Endpoint> endpoints;
    if (!options.unix_socket.empty()) {
      endpoints.emplace_back(net::local::stream_protocol::endpoint(options.unix_socket));
    } else {
      net::ip::tcp::resolver resolver(socket_.get_executor());
      for (const auto& entry : resolver.resolve(options.host, std::to_string(options.port), ec)) {
        endpoints.emplace_back(entry.endpoint());
      }
    }
    if (ec || endpoints.empty()) {
      if (!ec) ec = net::error::host_not_found;
      net::post(socket_.get_executor(),
                [h = std::forward<Handler>(handler), ec]() mutable { std::move(h)(ec); });
      return;
    }
    const bool tcp = options.unix_socket.empty();
    const bool keep_alive = options.keep_alive;
    net::async_connect(socket_, endpoints,
                       [this, tcp, keep_alive, h = std::forward<Handler>(handler)](
                           boost::system::error_code error, const Endpoint&) mutable {
                         if (!error && tcp) redis::tune_tcp(socket_.native_handle(), keep_alive);
                         std::move(h)(error);
                       });
  }

  template <class Buffer, class Handler>
  void async_read_some(const Buffer& buffer, Handler&& handler) {
    socket_.async_read_some(buffer, std::forward<Handler>(handler));
  }

  template <class Buffer, class Handler>
  void async_write(const Buffer& buffer, Handler&& handler) {
    boost::asio::async_write(socket_, buffer, std::forward<Handler>(handler));
  }

  void close() noexcept {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

 private:
  boost::asio::generic::stream_protocol::socket socket_;
};

/// The stream every asynchronous Redis connection uses.
using Transport = PlainTransport;

}  // namespace idem::redis::detail
