#pragma once
// One request to the upstream and its answer, on a pooled connection: the request is sent, the
// answer's head read, then its body read whole (up to a limit) or piece by piece. Every wait is
// bounded: connect_timeout for the connect, response_timeout from the first byte sent to the
// answer's last byte read. Beast is instantiated in upstream_exchange.cpp alone.

#include <boost/asio/awaitable.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "proxy_request.hpp"
#include "upstream_pool.hpp"

namespace idem::proxy {

/// How an exchange with the upstream went wrong.
enum class UpstreamFailure : std::uint8_t {
  none,
  connect,  // no connection could be opened (refused, unreachable, connect_timeout)
  timeout,  // response_timeout passed before the answer was read whole
  broken,   // the connection failed or the answer was not valid HTTP/1.1
};

/// What reading an answer's body gave.
enum class BodyRead : std::uint8_t {
  whole,   // body() is the whole body
  over,    // the body is longer than the limit: body() holds what was read so far
  failed,  // failure() says why
};

class UpstreamExchange {
 public:
  UpstreamExchange(UpstreamPool& pool, const UpstreamConfig& config);
  ~UpstreamExchange();  // a connection whose answer was read whole goes back to the pool
  UpstreamExchange(const UpstreamExchange&) = delete;
  UpstreamExchange& operator=(const UpstreamExchange&) = delete;

  /// Sends `request` (upstream_request()'s bytes) and reads the answer's head; an interim 1xx
  /// answer is skipped. false with failure() set when that failed. `head_request`: the answer
  /// has no body whatever its fields say.
  boost::asio::awaitable<bool> send(const std::string& request, bool head_request);

  int status() const noexcept;
  /// The answer's fields as received (hop-by-hop ones included).
  const Headers& headers() const noexcept;
  /// The body's length when the answer announces it (Content-Length), else nullopt.
  std::optional<std::uint64_t> content_length() const noexcept;

  /// Reads the body while it stays within `limit` bytes.
  boost::asio::awaitable<BodyRead> read_body(std::size_t limit);
  /// What read_body() and next_piece() have read and not yet taken.
  std::string& body() noexcept;
  /// After BodyRead::over: reads the next piece of the body into body() (replacing it). true
  /// with an empty body() at the body's end; false with failure() set.
  boost::asio::awaitable<bool> next_piece();

  UpstreamFailure failure() const noexcept;

  /// After an answer read whole: its connection goes back to the pool now rather than with the
  /// exchange, so that the client's next request, sent as soon as this answer reaches it, finds
  /// it there. Nothing when the connection cannot be used again.
  void give_back() noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace idem::proxy
