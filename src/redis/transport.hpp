#pragma once
// The byte stream under an asynchronous Redis connection (async_link.hpp): plain TCP, a unix
// socket, or TLS over TCP (asio::ssl::stream on a session of the store's TlsContext, tls.hpp).
// The Link only connects, reads some, writes all and closes through it. Internal to
// idem_asio_redis.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "idem/redis/client.hpp"
#include "socket.hpp"
#include "tls.hpp"

namespace idem::redis::detail {

class Transport {
 public:
  using Socket = boost::asio::generic::stream_protocol::socket;
  using Endpoint = boost::asio::generic::stream_protocol::endpoint;

  /// `tls`: the store's TLS context; null for a plain connection.
  Transport(const boost::asio::any_io_executor& executor, std::shared_ptr<const TlsContext> tls)
      : socket_(executor), tls_context_(std::move(tls)) {}

  /// Connects to `options`' server, then runs the TLS handshake when the transport has a
  /// context; `handler(error_code)`. The name is resolved in this call, as the blocking face's
  /// connect does; a TCP connection is tuned as its are (tune_tcp).
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
    net::async_connect(
        socket_, endpoints,
        [this, tcp, keep_alive, host = options.host, h = std::forward<Handler>(handler)](
            boost::system::error_code error, const Endpoint&) mutable {
          if (!error && tcp) redis::tune_tcp(socket_.native_handle(), keep_alive);
          if (error || !tls_context_) {
            std::move(h)(error);
            return;
          }
          start_tls(host, std::move(h));
        });
  }

  /// What a failed async_connect's `error` means, for the connection's failure message.
  std::string connect_failure(const boost::system::error_code& error) {
    if (!tls_ || !handshaking_) return "cannot connect: " + error.message();
    return handshake_failure(tls_->native_handle(), error.message(), verified_name_);
  }

  /// The TLS handshake is under way (for a connect that takes too long).
  bool handshaking() const noexcept { return handshaking_; }

  template <class Buffer, class Handler>
  void async_read_some(const Buffer& buffer, Handler&& handler) {
    if (tls_) {
      tls_->async_read_some(buffer, std::forward<Handler>(handler));
    } else {
      socket_.async_read_some(buffer, std::forward<Handler>(handler));
    }
  }

  template <class Buffer, class Handler>
  void async_write(const Buffer& buffer, Handler&& handler) {
    if (tls_) {
      boost::asio::async_write(*tls_, buffer, std::forward<Handler>(handler));
    } else {
      boost::asio::async_write(socket_, buffer, std::forward<Handler>(handler));
    }
  }

  void close() noexcept {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

 private:
  template <class Handler>
  void start_tls(const std::string& host, Handler&& handler) {
    namespace net = boost::asio;
    Result<SslPtr> session = tls_context_->session(host);
    if (!session) {
      net::post(socket_.get_executor(), [h = std::forward<Handler>(handler)]() mutable {
        std::move(h)(net::error::make_error_code(net::error::invalid_argument));
      });
      return;
    }
    verified_name_ = tls_context_->verified_name(host);
    // The stream owns the session from here.
    tls_.emplace(socket_, session.value().release());
    handshaking_ = true;
    tls_->async_handshake(
        net::ssl::stream_base::client,
        [this, h = std::forward<Handler>(handler)](boost::system::error_code error) mutable {
          if (!error) handshaking_ = false;
          std::move(h)(error);
        });
  }

  Socket socket_;
  std::shared_ptr<const TlsContext> tls_context_;
  std::optional<boost::asio::ssl::stream<Socket&>> tls_;  // set once TCP is connected
  std::string verified_name_;
  bool handshaking_ = false;
};

}  // namespace idem::redis::detail
