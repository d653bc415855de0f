#pragma once
// The proxy's keep-alive connections to its upstream: an idle connection is reused while it is
// younger than idle_timeout and still open; otherwise a new one is opened within
// connect_timeout. At most pool_size idle connections are kept; one unused for idle_timeout is
// closed when it is next looked at (the next acquire or release).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "proxy_config.hpp"

namespace idem::proxy {

/// A socket to the upstream, owned by one exchange at a time.
struct UpstreamSocket {
  boost::asio::ip::tcp::socket socket;
  bool reused = false;  // it carried an earlier exchange
};

/// What acquire() gives: a socket on the caller's executor, or why there is none.
struct Acquired {
  std::unique_ptr<UpstreamSocket> connection;
  boost::system::error_code error;
  bool timed_out = false;
};

class UpstreamPool {
 public:
  /// Resolves the upstream's address once, now (blocking); throws std::runtime_error with the
  /// resolver's message when it cannot be resolved.
  explicit UpstreamPool(const UpstreamConfig& config);
  ~UpstreamPool();
  UpstreamPool(const UpstreamPool&) = delete;
  UpstreamPool& operator=(const UpstreamPool&) = delete;

  /// An idle connection still open, or a new one (connect_timeout bounds the connect). The
  /// socket runs on the calling coroutine's executor.
  boost::asio::awaitable<Acquired> acquire();
  /// Takes back a connection whose last answer was read whole and may be kept alive.
  void release(std::unique_ptr<UpstreamSocket> connection);
  /// Closes the idle connections and keeps none from now on.
  void close_idle();

  /// Connections opened since construction (tests read it to see reuse).
  std::size_t opened() const;

 private:
  struct Idle {
    boost::asio::ip::tcp::socket::native_handle_type fd;
    boost::asio::ip::tcp::socket::protocol_type protocol;
    std::chrono::steady_clock::time_point since;
  };

  const UpstreamConfig config_;
  std::vector<boost::asio::ip::tcp::endpoint> endpoints_;
  mutable std::mutex mutex_;  // the fields below
  std::vector<Idle> idle_;
  bool closed_ = false;
  std::size_t opened_ = 0;
};

}  // namespace idem::proxy
